"""The library passes its own linters: ruff's rule set and mypy --strict (pyproject.toml).

Nothing else runs them on every change, so without these tests the style and the type claims
in ``src/`` drift silently (as seven mypy errors once did). The tools are pinned in the
``test`` extra, so a new release cannot fail the suite with findings of its own.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _run(args: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, cwd=ROOT, capture_output=True, text=True, check=False)


def test_ruff_finds_nothing_in_the_library() -> None:
    ruff = shutil.which("ruff", path=str(Path(sys.executable).parent)) or shutil.which("ruff")
    if ruff is None:
        pytest.skip("ruff is not installed (scripts/install.sh test installs it)")
    done = _run([ruff, "check", "--no-cache", "src"])
    assert done.returncode == 0, done.stdout + done.stderr


def test_mypy_strict_finds_nothing_in_the_library(tmp_path: Path) -> None:
    pytest.importorskip("mypy", reason="mypy is not installed (scripts/install.sh test)")
    # a fresh cache: the verdict is about this tree, not a cache another tree left behind
    done = _run([sys.executable, "-m", "mypy", "--cache-dir", str(tmp_path / "cache")])
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Success: no issues found" in done.stdout
