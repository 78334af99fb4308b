"""The package's layering rules (DESIGN, "Package layout"), read from the source.

Every rule reads every import: at module level and inside functions (a lazy import is still
an arrow between layers); imports under ``if TYPE_CHECKING:`` count for cycles only.

* no import cycle between idaudit's files, counting every import (under ``TYPE_CHECKING`` and
  inside functions too; lazy imports of heavy optional dependencies exempt, each with a
  comment), but the ones left in :data:`KNOWN_CYCLES`;
* DESIGN's table: a module imports its own package, the packages of upper rows and what its
  row's "depends on" column names, never a lower row (:data:`LAYERS`; the exceptions left are
  listed in :data:`LAYER_EXCEPTIONS`, each with its reason);
* ``dp/`` and ``ops/`` import nothing of idaudit but the leaf modules ``idaudit.exceptions``,
  ``idaudit._validation``, ``idaudit._device`` and ``idaudit._version``;
* no private module or name is imported across packages: a subpackage is used through its
  public names only. The root's private leaf modules (``_validation``, ``_results``,
  ``_markdown``, ``_device``, ``_version``) are the shared exceptions, and the internal modules of
  :data:`INTERNAL_API` (machinery other packages build on, which users do not import: it
  stays out of the packages' namespaces); the examples import public names only;
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
SHARED_PRIVATE = {
    "idaudit._validation",
    "idaudit._results",
    "idaudit._markdown",
    "idaudit._device",
    "idaudit._version",
}

#: private module -> the packages that may import it, and why (public names of a private
#: module only: a ``_name`` is never imported across packages).
INTERNAL_API: dict[str, tuple[set[str], str]] = {
    "idaudit.ops._kde": ({"idaudit.audits"}, "KDE-LR declares the bandwidth rules as its options"),
    "idaudit.audits._base": (
        {"idaudit.certify"},
        "the certifiers share the auditors' status base",
    ),
    "idaudit.audits._batch": (
        {"idaudit.certify"},
        "the reserved-test certifier shares the auditors' per-call identity cache",
    ),
    "idaudit.audits._oof": ({"idaudit.certify"}, "the certifiers' folds and out-of-fold scores"),
    "idaudit.audits._rocht": (
        {"idaudit.certify"},
        "the reserved-test certifier selects with ROC-HT's batched logistic regression",
    ),
    "idaudit.data._splits": (
        {"idaudit.certify"},
        "the reserved-test certifier sizes its test side by the split's own rule",
    ),
    "idaudit.audits._tables": (
        {"idaudit.cli", "idaudit.pipeline", "idaudit.demo"},
        "the reports print tables and certificates beside their ceilings",
    ),
    "idaudit.faces._pipeline": (
        {"idaudit.pipeline"},
        "the generator audit and the privacy check run the one detect/align/encode loop",
    ),
    "idaudit.faces._cache": (
        {"idaudit.pipeline"},
        "the end-to-end roads key the shared embedding cache by the encoder's fingerprint",
    ),
    "idaudit.faces._weights": (
        {"idaudit.pipeline"},
        "the privacy check hashes its input files as the weight files are hashed",
    ),
}

#: DESIGN's "Package layout" table, top row first: (the row's packages or modules, the lower
#: rows its "depends on" column names). Modules the table does not name are placed with a reason.
LAYERS: list[tuple[set[str], set[str]]] = [
    (LEAVES, set()),
    # the results core, its public home, and the form of every report (table, verdict)
    ({"idaudit._results", "idaudit.results", "idaudit._markdown"}, set()),
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
    # the demo row below depends on it; the eigenface encoder is the private-swap sweep's auditor
    ({"idaudit.benchmark", "idaudit._eigenfaces"}, set()),
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


#: Optional dependencies heavy enough that a module may import another lazily, inside a
#: function, to keep them from loading: such an import line says so in a comment naming the
#: dependency and the word "lazy" (``# lazy: loads torch``), and is then no edge of the graph.
HEAVY = ("torch", "dlib", "onnxruntime", "diffusers")

#: The import cycles left, each the set of modules of one strongly connected component; the
#: test fails when one appears and when one listed here is gone (then remove it here).
KNOWN_CYCLES: set[frozenset[str]] = set()


def _modules_under(src: Path) -> dict[str, Path]:
    out = {}
    for path in sorted((src / "idaudit").rglob("*.py")):
        parts = list(path.relative_to(src).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def _file_imports(module: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The idaudit modules ``module`` imports: under TYPE_CHECKING and in functions too.

    An import names the most specific module it loads (``from idaudit.data import _pairs`` is
    ``idaudit.data._pairs``, ``from idaudit.data import EmbeddingSet`` is ``idaudit.data``),
    so a package's ``__init__`` importing its own submodules is an edge like any other.
    """
    text = path.read_text(encoding="utf-8")
    lines = text.splitlines()
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: list[str] = []

    class Visitor(ast.NodeVisitor):
        depth = 0

        def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
            self.depth += 1
            self.generic_visit(node)
            self.depth -= 1

        visit_AsyncFunctionDef = visit_FunctionDef

        def _add(self, node: ast.stmt, targets: list[str]) -> None:
            comment = lines[node.lineno - 1].partition("#")[2]
            lazy = "lazy" in comment and any(dep in comment for dep in HEAVY)
            if not (self.depth and lazy):
                found.extend(targets)

        def visit_Import(self, node: ast.Import) -> None:
            self._add(node, [alias.name for alias in node.names])

        def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
            base = node.module or ""
            if node.level:  # relative: from the package, one level up per extra dot
                up = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*up, *([node.module] if node.module else [])])
            names = [f"{base}.{alias.name}" for alias in node.names]
            self._add(node, [name if name in modules else base for name in names])

    Visitor().visit(ast.parse(text))
    return {t for t in found if t in modules and t != module}


def _file_edges(src: Path) -> dict[str, set[str]]:
    """Module -> the idaudit modules it imports (:func:`_file_imports`), for a source tree."""
    modules = _modules_under(src)
    return {module: _file_imports(module, path, modules) for module, path in modules.items()}


def _cycles(edges: dict[str, set[str]]) -> set[frozenset[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    out: set[frozenset[str]] = set()

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in sorted(edges.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = set()
            while True:
                top = stack.pop()
                component.add(top)
                if top == node:
                    break
            if len(component) > 1:
                out.add(frozenset(component))

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return out


def test_import_cycles_are_exactly_the_known_ones() -> None:
    found = _cycles(_file_edges(SRC))
    new = [sorted(c) for c in found - KNOWN_CYCLES]
    gone = [sorted(c) for c in KNOWN_CYCLES - found]
    assert not new, f"import cycles (file level, imports in functions included): {new}"
    assert not gone, f"cycles no longer there, remove them from KNOWN_CYCLES: {gone}"


def test_the_cycle_check_sees_typing_and_function_imports(tmp_path: Path) -> None:
    pkg = tmp_path / "idaudit"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("from idaudit.sub._a import A\n")
    (pkg / "sub" / "_a.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from idaudit.sub._b import B\n"
    )
    (pkg / "sub" / "_b.py").write_text("def f():\n    from idaudit.sub import A\n")
    (pkg / "_c.py").write_text("def g():\n    from idaudit._d import D\n")
    (pkg / "_d.py").write_text("from idaudit._c import g\n")
    assert _cycles(_file_edges(tmp_path)) == {
        frozenset({"idaudit.sub", "idaudit.sub._a", "idaudit.sub._b"}),
        frozenset({"idaudit._c", "idaudit._d"}),
    }
    # a lazy import of a heavy optional dependency's module is no edge, when it says so
    (pkg / "_c.py").write_text("def g():\n    from idaudit._d import D  # lazy: loads torch\n")
    assert _cycles(_file_edges(tmp_path)) == {
        frozenset({"idaudit.sub", "idaudit.sub._a", "idaudit.sub._b"})
    }
    # ... and only inside a function
    (pkg / "_c.py").write_text("from idaudit._d import D  # lazy: loads torch\n")
    assert frozenset({"idaudit._c", "idaudit._d"}) in _cycles(_file_edges(tmp_path))


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
    plotting = [m for m in MODULES if m == "idaudit.plotting" or m.startswith("idaudit.plotting.")]
    assert len(plotting) > 1  # the package and its modules, each read below
    bad = [
        f"{MODULES[module].relative_to(ROOT)}:{line} imports {name or target} from {target}"
        for module in plotting
        for target, name, line in _imports(MODULES[module])
        if (target == "idaudit" or target.startswith("idaudit."))
        and target not in allowed
        and not target.startswith("idaudit.plotting")
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
        private_name = name is not None and name.startswith("_") and not name.startswith("__")
        users = INTERNAL_API.get(target, (set(), ""))[0]
        if not private_name and any(here == u or here.startswith(u + ".") for u in users):
            continue
        private_module = any(part.startswith("_") for part in full.split(".")[1:])
        if private_module or private_name:
            yield f"{path.relative_to(ROOT)}:{line} imports {name or target} from {target}"


def test_internal_api_is_used_as_declared() -> None:
    # every declared internal module is imported by each package that may: no stale entry
    used: dict[str, set[str]] = {}
    for module, path in MODULES.items():
        for target, _, _ in _imports(path):
            if target in INTERNAL_API:
                used.setdefault(target, set()).add(_package(module))
    for target, (users, _) in INTERNAL_API.items():
        assert target in MODULES, target
        for user in users:
            assert any(p == user or p.startswith(user + ".") for p in used.get(target, ())), (
                f"{user} no longer imports {target}: remove it from INTERNAL_API"
            )


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
