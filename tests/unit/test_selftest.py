"""idaudit.test() and python -m idaudit.selftest: the checks shipped inside the package."""

from __future__ import annotations

import subprocess
import sys

import pytest

import idaudit
from idaudit.testing._checks import SELF_CHECKS


def test_published_only_from_the_command_line() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "idaudit.selftest", "--published-only"],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    lines = out.stdout.splitlines()
    assert lines[0].startswith(f"idaudit {idaudit.__version__} from ")
    assert lines[1].startswith("Python ")
    assert "numpy " in lines[2]
    assert "scipy " in lines[2]
    assert lines[3].startswith("machine: ")
    assert "ok    [published] zero-error certificates 0 / 0.454 / 1.277" in out.stdout
    assert lines[-1].startswith("2 of 2 checks passed in ")


@pytest.mark.slow
@pytest.mark.calibration
def test_every_check_passes_and_a_failure_is_reported(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    assert idaudit.test() is True
    out = capsys.readouterr().out
    assert f"{len(SELF_CHECKS)} of {len(SELF_CHECKS)} checks passed" in out
    assert "no-union-bound certificate caught" in out
    # a wrong published number is a FAIL with the source named, and test() says False
    from idaudit.testing import published

    wrong = published.PublishedValue(
        "zero-error", 0.5, 5e-4, "Seed 000", published.CELEBA_UPPER_ERROR_BOUND.inputs
    )
    monkeypatch.setattr(published, "CELEBA_UPPER_ERROR_BOUND", wrong)
    assert idaudit.test(published_only=True) is False
    out = capsys.readouterr().out
    assert "FAIL  [published] zero-error certificates" in out
    assert "published 0.5 +- 0.0005 (Seed 000)" in out
    assert "1 of 2 checks FAILED in " in out


def test_bad_input() -> None:
    with pytest.raises(TypeError, match="`published_only` must be a bool; got str"):
        idaudit.test(published_only="yes")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="`kinds` must hold 'published' and/or 'soundness'"):
        idaudit.testing.run_self_checks(kinds=("speed",))
