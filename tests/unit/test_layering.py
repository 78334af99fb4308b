"""The package's layering rules (DESIGN, "Package layout"), read from the source.

Every rule reads every import: at module level and inside functions (a lazy import is still
an arrow between layers); imports under ``if TYPE_CHECKING:`` do not count.

* no import cycle between idaudit's modules;
* DESIGN's table: a module imports its own package, the packages of upper rows and what its
  row's "depends on" column names, never a lower row (:data:`LAYERS`; the exceptions left are
  listed in :data:`LAYER_EXCEPTIONS`, each with its reason);
* ``dp/`` and ``ops/`` import nothing of idaudit but the leaf modules ``idaudit.exceptions``,
  ``idaudit._validation``, ``idaudit._device`` and ``idaudit._version``;
* no private module or name is imported across packages: a subpackage is used through its
  public names only. The root's private leaf modules (``_validation``, ``_results``,
  ``_device``, ``_version``) are the shared exceptions; the examples import public names only;
* folders are made by ``idaudit.results.private_dir`` only (owner-only at every level).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]
SRC = ROOT / "src"
LEAVES = {"idaudit.exceptions", "idaudit._validation", "idaudit._device", "idaudit._version"}
SHARED_PRIVATE = {"idaudit._validation", "idaudit._results", "idaudit._device", "idaudit._version"}

#: DESIGN's "Package layout" table, top row first: (the row's packages or modules, the lower
#: rows its "depends on" column names). Modules the table does not name are placed with a reason.
LAYERS: list[tuple[set[str], set[str]]] = [
    (LEAVES, set()),
    ({"idaudit._results", "idaudit.results"}, set()),  # the results core and its public home
    ({"idaudit.dp"}, set()),
    ({"idaudit.ops"}, set()),
    ({"idaudit.data"}, set()),
    ({"idaudit.audits"}, set()),
    ({"idaudit.certify"}, set()),
    ({"idaudit.mechanisms"}, set()),
    ({"idaudit.faces"}, set()),
    ({"idaudit.memorization"}, set()),
    ({"idaudit.inversion"}, set()),
    ({"idaudit.plotting"}, set()),
    ({"idaudit.pipeline"}, set()),
    # not in the table: the known-truth benchmarks, the noise sweep over mechanisms, audits
    # and certify, and the sweep of the proven-guarantee image mechanism over the pipeline;
    # the demo row below depends on it
    ({"idaudit.benchmark"}, set()),
    # the demo's library logic: faces, anonymisers, the noise benchmark, report and figures
    ({"idaudit.demo"}, set()),
    # "everything": the command line, and the package root with the ``ds.idaudit`` accessor
    # it registers (its plot methods fit and draw through audits and plotting)
    ({"idaudit.cli", "idaudit", "idaudit._accessor"}, set()),
    # the harness for testing mechanisms and auditors, and the checks of the installed copy
    # (idaudit.test): they exercise the whole library from above, as a user's tests do
    ({"idaudit.testing", "idaudit.selftest"}, set()),
]

#: (importing module, imported layer) -> why the arrow goes against DESIGN's table.
LAYER_EXCEPTIONS: dict[tuple[str, str], str] = {}


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


def test_plotting_draws_and_computes_nothing_of_the_audits() -> None:
    """DESIGN: plotting depends on matplotlib; it draws what it is given, fitting nothing."""
    allowed = LEAVES | {"idaudit._results", "idaudit.results"}
    bad = [
        f"idaudit/plotting.py:{line} imports {name or target} from {target}"
        for target, name, line in _imports(MODULES["idaudit.plotting"])
        if (target == "idaudit" or target.startswith("idaudit.")) and target not in allowed
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


def _layer(module: str) -> int:
    """Row of ``module`` in :data:`LAYERS` (its own entry, or its package's)."""
    probe = module
    while True:
        for row, (members, _) in enumerate(LAYERS):
            if probe in members:
                return row
        if "." not in probe:
            raise AssertionError(f"{module} has no row in LAYERS: place it (DESIGN's table)")
        probe = probe.rpartition(".")[0]


def _layer_name(module: str) -> str:
    """The LAYERS entry that holds ``module``."""
    members = LAYERS[_layer(module)][0]
    return max((m for m in members if module == m or module.startswith(m + ".")), key=len)


def _layer_violations() -> dict[tuple[str, str], list[str]]:
    found: dict[tuple[str, str], list[str]] = {}
    for module, path in MODULES.items():
        row = _layer(module)
        extra = LAYERS[row][1]
        for target, name, line in _imports(path):
            if target != "idaudit" and not target.startswith("idaudit."):
                continue
            if name is not None and f"{target}.{name}" in MODULES:
                target = f"{target}.{name}"  # `from idaudit import dp`
            to = _layer_name(target)
            if _layer(target) <= row or to in extra:
                continue
            found.setdefault((module, to), []).append(
                f"{path.relative_to(ROOT)}:{line} imports {name or target} from {target}"
            )
    return found


def test_every_module_has_a_row_in_the_table() -> None:
    for module in MODULES:
        _layer(module)


def test_imports_follow_the_table_at_module_and_function_level() -> None:
    found = _layer_violations()
    bad = [hit for key, hits in found.items() if key not in LAYER_EXCEPTIONS for hit in hits]
    assert not bad, bad
    stale = sorted(set(LAYER_EXCEPTIONS) - set(found))
    assert not stale, f"exceptions no longer needed, remove them: {stale}"


def test_the_table_check_sees_imports_inside_functions(tmp_path: Path) -> None:
    # the package top is the last row: a lazy `from idaudit import __version__` in a lower
    # layer, such as the results core once had, is an arrow against the table
    module = tmp_path / "lazy.py"
    module.write_text("def f():\n    from idaudit import __version__\n    return __version__\n")
    assert [(t, n) for t, n, _ in _imports(module)] == [("idaudit", "__version__")]
    assert _layer("idaudit") > _layer("idaudit._results")


_MAKES_FOLDERS = {"mkdir", "makedirs"}


def test_folders_are_made_by_private_dir_only() -> None:
    """Every folder is owner-only at every level: only ``private_dir`` calls ``mkdir``."""
    bad = []
    for path in sorted((SRC / "idaudit").rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        allowed: set[int] = set()
        if path == SRC / "idaudit" / "_results.py":
            allowed = {
                id(node)
                for fn in ast.walk(tree)
                if isinstance(fn, ast.FunctionDef) and fn.name == "private_dir"
                for node in ast.walk(fn)
            }
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr in _MAKES_FOLDERS
                and id(node) not in allowed
            ):
                bad.append(f"{path.relative_to(ROOT)}:{node.lineno} calls .{node.func.attr}(")
    assert not bad, bad


@pytest.mark.parametrize("layer", ["idaudit.memorization", "idaudit.mechanisms"])
def test_statistics_and_mechanisms_take_arrays_not_images(layer: str) -> None:
    """Images become embeddings in ``pipeline`` only: these packages never import ``faces``."""
    bad = [
        f"{module}:{line} imports {target}"
        for module, path in MODULES.items()
        if module == layer or module.startswith(layer + ".")
        for target, _, line in _imports(path)
        if target == "idaudit.faces" or target.startswith("idaudit.faces.")
    ]
    assert not bad, bad
