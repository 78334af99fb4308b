"""``idaudit privacy`` (idaudit.cli._privacy) on folders of real DCGAN samples (dlib, MTCNN)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pandas as pd
import pytest

from idaudit.cli import main
from idaudit.pipeline._privacy import OUTPUT_FILES

pytestmark = pytest.mark.faces

pytest.importorskip("dlib")
pytest.importorskip("facenet_pytorch")

@pytest.fixture(scope="module")
def roots(privacy_roots: Path) -> Path:
    """The DCGAN folders of the privacy tests (tests/unit/conftest.py), made once."""
    return privacy_roots


@pytest.fixture(scope="module")
def first(privacy_run: tuple) -> tuple:
    """One privacy check on ``roots`` (tests/unit/conftest.py), run once per session."""
    return privacy_run


def _args(roots: Path) -> tuple[Path, Path, Path]:
    return roots / "train", roots / "heldout", roots / "synthetic"


def test_cli_writes_the_outputs_and_checks_flags(
    roots: Path, first, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "cli"
    shutil.copytree(first[1] / "cache", tmp_path / "cache")
    argv = ["privacy", *map(str, _args(roots)), "--out", str(out), "--bootstrap", "20",
            "--permutations", "99", "--threads", "1", "--quiet",
            "--cache-dir", str(tmp_path / "cache"), "--subject-pattern", r"^s(\d)",
            "--nnaa-permutations", "49"]  # fmt: skip
    assert main(argv) == 0
    captured = capsys.readouterr()
    assert "warning: cohorts skipped" in captured.err
    assert "only_train" in captured.err
    assert "# idaudit privacy" in captured.out
    assert set(OUTPUT_FILES) <= {p.name for p in out.iterdir()}
    # the NNAA test ran the relabellings asked for, and the JSON records them
    assert set(pd.read_csv(out / "nnaa.csv")["n_permutations"]) == {49}
    params = json.loads((out / "privacy_results.json").read_text())["parameters"]
    assert (params["nnaa_permutations"], params["n_permutations"]) == (49, 99)
    # file names s<d><d>_*: the first digit is the "subject" (several images each)
    sanity = pd.read_csv(out / "sanity.csv")
    assert list(sanity.columns) == [
        "metric", "auc", "p_value", "n_images", "n_subjects", "n_same_pairs",
        "n_different_pairs", "n_permutations",
    ]  # fmt: skip
    assert sanity["metric"].tolist() == ["dlib-resnet-v1-torch"]
    assert 0.0 <= sanity["auc"].iloc[0] <= 1.0
    for flag, value, message in (
        ("--bootstrap", "-1", "`--bootstrap` must be >= 0; got -1."),
        ("--percentiles", "100", r"`--percentiles` must be in (0, 100); got 100.0."),
        ("--threads", "0", "`--threads` must be >= 1; got 0."),
    ):
        with pytest.raises(SystemExit) as exc:
            main([*argv, flag, value])
        assert exc.value.code == 2
        assert message in capsys.readouterr().err
    # how dlib runs is a choice only when dlib runs (checked before any model loads)
    with pytest.raises(SystemExit) as exc:
        main([*argv, "--no-dlib", "--arcface-onnx", "w600k_r50.onnx", "--dlib-runtime", "cpp"])
    assert exc.value.code == 2
    assert "`--dlib-runtime` chooses how dlib runs; drop it with `--no-dlib`." in (
        capsys.readouterr().err
    )


def test_the_command_knows_the_image_suffixes_the_privacy_check_reads() -> None:
    # the command checks each root for an image before the library loads: same suffixes
    from idaudit.cli._privacy import IMAGE_SUFFIXES as checked
    from idaudit.pipeline._folders import IMAGE_SUFFIXES as read

    assert checked == read
