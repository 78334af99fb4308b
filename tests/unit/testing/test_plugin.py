"""The pytest plugin and the downstream example, run as a user's project runs them.

Each test runs pytest in a subprocess inside a fresh folder (no idaudit configuration, so
``--strict-markers`` there relies on the plugin's markers), loading the plugin the way the
installed entry point does. The documented example (examples/pytest_downstream/, shown on
docs/testing.md) passes as written and fails, with the p-value in the report, once its
certificate loses its union bound.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import idaudit
from idaudit.testing.plugin import seed_of

ROOT = Path(__file__).resolve().parents[3]
EXAMPLE = ROOT / "examples" / "pytest_downstream" / "test_my_anonymiser.py"


def _pytest(folder: Path, *args: str, quiet: bool = True) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    src = str(Path(idaudit.__file__).parents[1])
    env["PYTHONPATH"] = os.pathsep.join([src, env.get("PYTHONPATH", "")])
    # -p loads the plugin as the entry point does in an installed idaudit (the two register
    # it once: the entry point carries the module's name)
    cmd = [sys.executable, "-m", "pytest", "-p", "idaudit.testing.plugin", "-p", "no:cacheprovider"]
    return subprocess.run(
        [*cmd, "--strict-markers", "-rA", *(["-q"] if quiet else []), *args],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )


def test_seed_of_is_stable() -> None:
    # a fixed function of the id (sha256), the same under every worker and machine
    assert seed_of("tests/test_x.py::test_y") == seed_of("tests/test_x.py::test_y")
    assert seed_of("tests/test_x.py::test_y") != seed_of("tests/test_x.py::test_z")
    assert 0 <= seed_of("a") < 2**63


def test_plugin_markers_header_seed_and_fixtures(tmp_path: Path) -> None:
    (tmp_path / "conftest.py").write_text(
        'pytest_plugins = ["idaudit.testing.plugin"]\n'
        "\n"
        "def pytest_configure(config):\n"
        "    # the project's own gpu marker: the plugin neither owns nor skips it\n"
        '    config.addinivalue_line("markers", "gpu: the project\'s own meaning")\n'
    )
    (tmp_path / "test_use.py").write_text(
        "import pytest\n"
        "\n"
        "@pytest.mark.calibration\n"
        "@pytest.mark.reproduce\n"
        "def test_reps(idaudit_reps, idaudit_rng):\n"
        "    assert idaudit_reps(100) == 25\n"
        "    assert idaudit_rng.random() < 1.0\n"
        "\n"
        "def test_fails(idaudit_rng):\n"
        "    assert idaudit_rng.random() > 2.0\n"
        "\n"
        "def test_known(known_mechanism):\n"
        "    assert known_mechanism.epsilon(0.05) > 0\n"
        "\n"
        "@pytest.mark.gpu\n"
        "def test_gpu():\n"
        "    pass\n"
    )
    out = _pytest(tmp_path, "--idaudit-reps-scale", "0.25", quiet=False)  # the header
    text = out.stdout + out.stderr
    assert out.returncode == 1, text  # only test_fails fails
    assert "idaudit: repetitions scaled by 0.25 (--idaudit-reps-scale)" in text
    seed = seed_of("test_use.py::test_fails")
    assert f"idaudit_rng seed: {seed}" in text
    assert "PASSED test_use.py::test_reps" in text
    assert "PASSED test_use.py::test_known[laplace]" in text
    assert "PASSED test_use.py::test_known[gaussian]" in text
    # a downstream project's gpu test runs: the CUDA skip is idaudit's own suite's
    assert "PASSED test_use.py::test_gpu" in text
    assert "needs CUDA" not in text
    # the plugin loaded by -p, by the conftest, and it is inert without its option
    quiet = _pytest(tmp_path, "-k", "known")
    assert quiet.returncode == 0, quiet.stdout
    assert "idaudit:" not in quiet.stdout
    for value in ("0", "inf", "nan"):
        bad = _pytest(tmp_path, "--idaudit-reps-scale", value)
        assert f"--idaudit-reps-scale must be finite and > 0; got {float(value)!r}" in bad.stderr


@pytest.mark.slow
@pytest.mark.calibration
def test_downstream_example_passes_and_catches_a_missing_union_bound(tmp_path: Path) -> None:
    tests = tmp_path / "tests"
    tests.mkdir()
    source = EXAMPLE.read_text(encoding="utf-8")
    (tests / "test_my_anonymiser.py").write_text(source)
    good = _pytest(tmp_path, "tests")
    assert good.returncode == 0, good.stdout + good.stderr
    assert "4 passed" in good.stdout
    # the same certificate without its union bound: each rate bounded at the full alpha
    broken = source.replace("alpha / 2))", "alpha))")
    assert broken.count("alpha))") == 2
    (tests / "test_my_anonymiser.py").write_text(broken)
    bad = _pytest(tmp_path, "tests", "-k", "my_certificate")
    assert bad.returncode == 1, bad.stdout
    assert "AssertionError: unsound: claim: " in bad.stdout
    assert "exact binomial p-value" in bad.stdout
    assert "rejects H0 'violation rate <= 0.2' at significance 0.01" in bad.stdout


def test_the_plugin_imports_no_science_package() -> None:
    # loading the plugin (as every pytest run with idaudit installed does) imports neither
    # scipy nor idaudit's testing machinery; a fresh interpreter, so nothing is cached
    code = (
        "import sys; import idaudit.testing.plugin; "
        "print(sorted(m for m in ('scipy', 'torch', 'idaudit.testing._soundness', "
        "'idaudit.mechanisms') if m in sys.modules))"
    )
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        [str(Path(idaudit.__file__).parents[1]), env.get("PYTHONPATH", "")]
    )
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"
