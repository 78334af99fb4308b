"""The declared dependency floors are the ones pinned for the minimum-versions test run."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]


def _floors() -> dict[str, str]:
    tomllib = pytest.importorskip("tomllib")  # Python >= 3.11
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    floors = {}
    for requirement in project["dependencies"]:
        match = re.fullmatch(r"([A-Za-z0-9_.\-]+)>=([0-9][0-9.]*)", requirement.replace(" ", ""))
        assert match, f"dependency {requirement!r} has no plain >= floor"
        floors[match.group(1).lower()] = match.group(2)
    return floors


def _pins() -> dict[str, str]:
    pins = {}
    for line in (ROOT / "ci" / "minimum-versions.txt").read_text(encoding="utf-8").splitlines():
        line = line.split("#")[0].strip()
        if line:
            name, version = line.split("==")
            pins[name.lower()] = version
    return pins


def _release(version: str) -> tuple[int, ...]:
    parts = [int(p) for p in version.split(".")]
    return tuple(parts + [0] * (3 - len(parts)))


def test_minimum_versions_file_pins_every_declared_floor() -> None:
    floors = _floors()
    pins = _pins()
    floors.pop("torch")  # pinned by scripts/install.sh (torch==2.14.1), not by this file
    assert set(pins) == set(floors)
    for name, floor in floors.items():
        assert _release(pins[name]) == _release(floor), name


def test_numpy_floor_has_what_the_code_calls() -> None:
    # np.trapezoid (ROC-HT) exists from NumPy 2.0 on; a lower floor would be untrue
    uses = any(
        "np.trapezoid(" in path.read_text(encoding="utf-8")
        for path in (ROOT / "src" / "idaudit").rglob("*.py")
    )
    assert not uses or _release(_floors()["numpy"]) >= (2, 0, 0)


def test_version_is_declared_once_in_each_place_and_agrees() -> None:
    """``pyproject.toml`` and the leaf ``idaudit._version`` give the same version."""
    tomllib = pytest.importorskip("tomllib")  # Python >= 3.11
    import idaudit
    from idaudit._version import __version__

    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert project["version"] == __version__
    assert idaudit.__version__ is __version__
    # nothing else in the package spells the version out
    spelled = [
        str(path.relative_to(ROOT))
        for path in (ROOT / "src" / "idaudit").rglob("*.py")
        if re.search(r"__version__\s*=", path.read_text(encoding="utf-8"))
    ]
    assert spelled == ["src/idaudit/_version.py"]
