"""The documentation site builds offline with ``mkdocs build --strict`` and lists every page."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]


def _nav_pages(node: object) -> list[str]:
    if isinstance(node, str):
        return [node]
    if isinstance(node, dict):
        return [p for v in node.values() for p in _nav_pages(v)]
    if isinstance(node, list):
        return [p for v in node for p in _nav_pages(v)]
    return []


def test_every_docs_page_is_in_the_nav() -> None:
    config = yaml.load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"), Loader=yaml.BaseLoader)
    nav = set(_nav_pages(config["nav"]))
    pages = {str(p.relative_to(ROOT / "docs")) for p in (ROOT / "docs").rglob("*.md")}
    assert pages - nav == set(), "pages missing from mkdocs.yml's nav"
    assert nav - pages == set(), "nav entries without a page"


@pytest.mark.slow
def test_site_builds_strictly_offline(tmp_path: Path) -> None:
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1", "PYTHONPATH": str(ROOT / "src")}
    # the README's command, with its log: `-q` would hide the warnings `--strict` counts
    proc = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(tmp_path / "site")],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    log = proc.stdout + proc.stderr
    # any warning fails the test, whether or not `--strict` counted it (a plugin may log one
    # after the count, or at a level `--strict` ignores)
    assert re.findall(r"^(?:WARNING|ERROR)\b.*$", log, flags=re.M) == [], log
    assert "Aborted" not in log, log
    assert proc.returncode == 0, log
    api = (tmp_path / "site" / "api" / "pipeline.html").read_text(encoding="utf-8")
    assert "audit_generator" in api
    assert "Parameters" in api  # numpy docstrings rendered, not dumped as text
    # nothing on the pages asks the browser for web fonts (theme fonts are off)
    index = (tmp_path / "site" / "index.html").read_text(encoding="utf-8")
    assert "fonts.googleapis.com" not in index
    # numpydoc's reStructuredText is rendered, not printed: no Sphinx role, no simple-table rule
    # on any API page, and an idaudit role became a link to the object it names
    for page in sorted((tmp_path / "site" / "api").glob("*.html")):
        html = page.read_text(encoding="utf-8")
        for role in (":func:", ":class:", ":meth:", ":attr:", ":mod:", ":data:", ":math:"):
            assert role not in html, f"{page.name} prints {role}"
        assert not re.search(r"={5,}", html), f"{page.name} prints a reStructuredText table rule"
    audits = (tmp_path / "site" / "api" / "audits.html").read_text(encoding="utf-8")
    assert re.search(r'<a[^>]+href="[^"]*#idaudit\.audits\.audit_pairs"', audits)
    for package in ("memorization", "inversion", "pipeline", "results", "cli"):
        assert (tmp_path / "site" / "api" / f"{package}.html").is_file()


def test_package_layout_table_lists_every_module() -> None:
    # docs/index.md's layout table and the source tree name the same modules, each with the
    # first line of its docstring, so the table cannot drift from the code
    import ast

    src = ROOT / "src" / "idaudit"
    text = (ROOT / "docs" / "index.md").read_text(encoding="utf-8")
    rows = dict(re.findall(r"^\| `([\w/]+\.py)` \| (.*) \|$", text, flags=re.M))
    modules = {p.relative_to(src).as_posix(): p for p in src.rglob("*.py")}
    assert set(rows) == set(modules)
    for name, path in modules.items():
        doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
        first = re.sub(r":\w+:`~?([^`]+)`", r"`\1`", doc.splitlines()[0]).replace("``", "`")
        assert rows[name] == first, name
