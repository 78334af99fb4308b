"""The package's layering rules (DESIGN, "Package layout"), read from the source.

* no import cycle between idaudit's modules (lazy imports inside functions count; imports
  under ``if TYPE_CHECKING:`` do not);
* ``dp/`` and ``ops/`` import nothing of idaudit but the leaf modules ``idaudit.exceptions``,
  ``idaudit._validation`` and ``idaudit._device``;
* no private module or name is imported across packages: a subpackage is used through its
  public names only. The root's private leaf modules (``_validation``, ``_results``,
  ``_device``) are the shared exceptions; the examples import public names only.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]
SRC = ROOT / "src"
LEAVES = {"idaudit.exceptions", "idaudit._validation", "idaudit._device"}
SHARED_PRIVATE = {"idaudit._validation", "idaudit._results", "idaudit._device"}


def _modules() -> dict[str, Path]:
    out = {}
    for path in sorted((SRC / "idaudit").rglob("*.py")):
        parts = list(path.relative_to(SRC).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


MODULES = _modules()


def _imports(path: Path) -> Iterator[tuple[str, str | None, int]]:
    """(module, imported name or None, line) for every import outside TYPE_CHECKING blocks."""
    found: list[tuple[str, str | None, int]] = []

    class Visitor(ast.NodeVisitor):
        def visit_If(self, node: ast.If) -> None:
            if isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
                for child in node.orelse:
                    self.visit(child)
                return
            self.generic_visit(node)

        def visit_Import(self, node: ast.Import) -> None:
            found.extend((alias.name, None, node.lineno) for alias in node.names)

        def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
            if node.module and node.level == 0:
                found.extend((node.module, alias.name, node.lineno) for alias in node.names)

    Visitor().visit(ast.parse(path.read_text(encoding="utf-8")))
    return iter(found)


def _package(module: str) -> str:
    return module if MODULES[module].name == "__init__.py" else module.rpartition(".")[0]


def _edges() -> dict[str, set[str]]:
    edges: dict[str, set[str]] = {}
    for module, path in MODULES.items():
        for target, name, _ in _imports(path):
            if name is not None and f"{target}.{name}" in MODULES:
                target = f"{target}.{name}"  # `from idaudit.data import _readers`
            if target in MODULES and target != module:
                edges.setdefault(module, set()).add(target)
    return edges


def test_no_import_cycle() -> None:
    edges = _edges()
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(edges.get(node, ())):
            # a package's __init__ importing its own submodules is how packages work
            if nxt.startswith(node + "."):
                continue
            if state.get(nxt) == 1:
                cycle = [*path[path.index(nxt) :], nxt]
                raise AssertionError("import cycle: " + " -> ".join(cycle))
            if nxt not in state:
                visit(nxt)
        path.pop()
        state[node] = 2

    for module in MODULES:
        if module not in state:
            visit(module)


@pytest.mark.parametrize("layer", ["idaudit.dp", "idaudit.ops"])
def test_lowest_layers_import_only_leaf_modules(layer: str) -> None:
    bad = [
        f"{module}:{line} imports {target}"
        for module, path in MODULES.items()
        if module == layer or module.startswith(layer + ".")
        for target, _, line in _imports(path)
        if target.startswith("idaudit")
        and not (target == layer or target.startswith(layer + "."))
        and target not in LEAVES
    ]
    assert not bad, bad


def _private_imports(module: str, path: Path) -> Iterator[str]:
    here = _package(module) if module in MODULES else ""
    for target, name, line in _imports(path):
        if not target.startswith("idaudit") or target in SHARED_PRIVATE:
            continue
        full = f"{target}.{name}" if name is not None and f"{target}.{name}" in MODULES else target
        owner = _package(full) if full in MODULES else full.rpartition(".")[0]
        if owner == here or (owner.startswith(here + ".") and here):
            continue
        private_module = any(part.startswith("_") for part in full.split(".")[1:])
        private_name = name is not None and name.startswith("_") and not name.startswith("__")
        if private_module or private_name:
            yield f"{path.relative_to(ROOT)}:{line} imports {name or target} from {target}"


def test_no_private_name_is_imported_across_packages() -> None:
    bad = [hit for module, path in MODULES.items() for hit in _private_imports(module, path)]
    bad += [
        hit
        for path in sorted((ROOT / "examples").glob("*.py"))
        for hit in _private_imports("", path)
    ]
    assert not bad, bad
