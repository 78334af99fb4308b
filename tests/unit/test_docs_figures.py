"""The figures the docs show were drawn by scripts/docs_figures.py, from the code as it is now.

``docs/img/figures.json`` records, for each figure, the SHA-256 of the PNG and of the source of
the code that draws it. A figure edited by hand, or left behind after its drawing code changed,
fails here: run ``python scripts/docs_figures.py`` again.
"""

from __future__ import annotations

import importlib.util
import json
import re
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[2]
IMG = ROOT / "docs" / "img"


def _script() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "docs_figures", ROOT / "scripts" / "docs_figures.py"
    )
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["docs_figures"] = module
    spec.loader.exec_module(module)
    return module


def test_every_figure_the_docs_show_is_made_by_the_script() -> None:
    shown = set()
    for page in (ROOT / "docs").rglob("*.md"):
        shown |= set(re.findall(r"!\[[^\]]*\]\(img/([^)]+)\)", page.read_text(encoding="utf-8")))
    script = _script()
    assert shown == set(script.DRAWN_BY)
    assert {p.name for p in IMG.glob("*.png")} == shown  # no figure left that nothing shows


def test_figures_are_not_older_than_the_code_that_draws_them() -> None:
    script = _script()
    recorded = json.loads((IMG / "figures.json").read_text(encoding="utf-8"))
    assert set(recorded) == set(script.DRAWN_BY)
    stale = []
    for name, drawn_by in script.DRAWN_BY.items():
        entry = recorded[name]
        assert entry["drawn_by"] == list(drawn_by), f"{name}: run scripts/docs_figures.py"
        # the PNG is the one the script wrote
        assert script.file_sha256(IMG / name) == entry["sha256"], f"{name} was not drawn by it"
        # and its drawing code has not changed since
        if script.code_sha256(drawn_by) != entry["code_sha256"]:
            stale.append(f"docs/img/{name}")
    assert not stale, (
        f"the code that draws {', '.join(stale)} changed after it was drawn: "
        "run python scripts/docs_figures.py"
    )
