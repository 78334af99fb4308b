"""Every idaudit name the benchmark and maintenance scripts use exists.

The scripts in ``benchmarks/`` and ``scripts/`` run for minutes and are not run by the test
suite, so a renamed or moved name would break them silently. This reads each script's
imports and ``alias.attribute`` uses of idaudit modules and resolves them, without running
the script.
"""

from __future__ import annotations

import ast
import importlib
import types
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]
SCRIPTS = sorted([*ROOT.glob("benchmarks/*.py"), *ROOT.glob("scripts/*.py")])


def _idaudit_names(tree: ast.AST) -> tuple[list[tuple[str, str]], dict[str, str]]:
    """The ``from idaudit.x import name`` pairs, and the aliases bound to idaudit modules."""
    imported: list[tuple[str, str]] = []
    aliases: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "idaudit":
            imported += [(node.module, a.name) for a in node.names if a.name != "*"]  # type: ignore[misc]
        elif isinstance(node, ast.Import):
            for a in node.names:
                if a.name.split(".")[0] == "idaudit":
                    aliases[a.asname or a.name.split(".")[0]] = a.name if a.asname else "idaudit"
    return imported, aliases


def _chain(node: ast.Attribute) -> list[str]:
    """``a.b.c`` as ``["a", "b", "c"]`` (empty when the base is not a plain name)."""
    parts = [node.attr]
    value = node.value
    while isinstance(value, ast.Attribute):
        parts.append(value.attr)
        value = value.value
    return [value.id, *reversed(parts)] if isinstance(value, ast.Name) else []


@pytest.mark.parametrize("path", SCRIPTS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_idaudit_name_a_script_uses_exists(path: Path) -> None:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    imported, aliases = _idaudit_names(tree)
    missing = []
    for module, name in imported:
        mod = importlib.import_module(module)
        if not hasattr(mod, name):
            try:
                importlib.import_module(f"{module}.{name}")
            except ImportError:
                missing.append(f"{module}.{name}")
    for node in ast.walk(tree):
        if not isinstance(node, ast.Attribute):
            continue
        parts = _chain(node)
        if not parts or parts[0] not in aliases:
            continue
        obj: object = importlib.import_module(aliases[parts[0]])
        for attr in parts[1:]:
            if not isinstance(obj, types.ModuleType):
                break  # past the first class or function: its attributes are its own
            if not hasattr(obj, attr):
                try:
                    obj = importlib.import_module(f"{obj.__name__}.{attr}")
                    continue
                except ImportError:
                    missing.append(f"{obj.__name__}.{attr}")
                    break
            obj = getattr(obj, attr)
    assert not missing, f"{path.name} uses names idaudit does not have: {sorted(set(missing))}"
