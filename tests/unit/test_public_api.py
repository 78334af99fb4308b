"""The package surface: one list of public names, reachable lazily, repeated only for typing.

``_LAZY`` (and, at the top, ``_SUBMODULES``) in ``idaudit/__init__.py`` and
``idaudit/faces/__init__.py`` are what the packages export; the ``if TYPE_CHECKING:`` block
says the same to static analysers and is read here from the source.
"""

from __future__ import annotations

import ast
import importlib
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

import idaudit
import idaudit.faces

SRC = Path(__file__).parents[2] / "src"


def _type_checking_imports(path: Path) -> dict[str, str]:
    """Name bound under ``if TYPE_CHECKING:`` -> the module it is imported from."""
    bound: dict[str, str] = {}
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if not (isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING"):
            continue
        for stmt in node.body:
            assert isinstance(stmt, ast.ImportFrom), ast.unparse(stmt)
            assert stmt.module, ast.unparse(stmt)
            for alias in stmt.names:
                # `X as X`: the explicit re-export form static analysers need
                assert alias.asname == alias.name, ast.unparse(stmt)
                assert alias.name not in bound, f"{alias.name} imported twice"
                bound[alias.name] = stmt.module
    return bound


def test_top_level_typing_block_repeats_the_lazy_lists_exactly() -> None:
    bound = _type_checking_imports(SRC / "idaudit" / "__init__.py")
    submodules = {name for name, module in bound.items() if module == "idaudit"}
    assert submodules == idaudit._SUBMODULES
    assert {n: m for n, m in bound.items() if m != "idaudit"} == idaudit._LAZY
    assert idaudit.__all__ == sorted([*idaudit._LAZY, *idaudit._SUBMODULES, "__version__"])


def test_faces_typing_block_repeats_the_lazy_list_exactly() -> None:
    bound = _type_checking_imports(SRC / "idaudit" / "faces" / "__init__.py")
    assert bound == idaudit.faces._LAZY
    assert idaudit.faces.__all__ == sorted(idaudit.faces._LAZY)


def test_every_subpackage_is_a_subpackage_on_disk() -> None:
    on_disk = {
        p.stem if p.suffix == ".py" else p.name
        for p in (SRC / "idaudit").iterdir()
        if not p.name.startswith("_")
        and (p.suffix == ".py" or (p / "__init__.py").is_file())
        and p.name != "cli"  # the command, not a library namespace
    }
    assert on_disk == idaudit._SUBMODULES


@pytest.mark.parametrize("name", sorted(idaudit._SUBMODULES))
def test_every_subpackage_is_an_attribute(name: str) -> None:
    module = getattr(idaudit, name)
    assert isinstance(module, ModuleType)
    assert module is importlib.import_module(f"idaudit.{name}")


@pytest.mark.parametrize("name", sorted(idaudit._LAZY))
def test_every_top_level_name_is_the_defining_module_s(name: str) -> None:
    assert getattr(idaudit, name) is getattr(importlib.import_module(idaudit._LAZY[name]), name)


def test_unknown_attribute_and_dir() -> None:
    with pytest.raises(AttributeError, match="has no attribute 'nope'"):
        idaudit.nope  # noqa: B018
    assert dir(idaudit) == idaudit.__all__


def test_docstring_names_the_three_questions() -> None:
    doc = idaudit.__doc__ or ""
    assert "planned" not in doc
    for name in ("audits", "memorization", "inversion", "faces"):
        assert f":mod:`idaudit.{name}`" in doc, name


def test_import_stays_light_and_subpackages_load_on_first_use() -> None:
    # what `import idaudit` loads today: the results core (xarray, pandas) for ds.idaudit
    code = """
import sys
import idaudit
loaded = sorted(m for m in sys.modules if m.startswith("idaudit"))
assert loaded == ["idaudit", "idaudit._accessor", "idaudit._results", "idaudit._version",
                  "idaudit.exceptions"], loaded
heavy = [m for m in ("torch", "scipy", "sklearn", "matplotlib", "dlib") if m in sys.modules]
assert not heavy, heavy
assert "idaudit.memorization" not in sys.modules and "idaudit.inversion" not in sys.modules
assert idaudit.memorization.nnaa and idaudit.inversion.RankedAdversary
assert idaudit.dp.epsilon_from_tv(0.0) == 0.0
"""
    subprocess.run([sys.executable, "-c", code], check=True, timeout=300)
