"""``idaudit privacy`` (idaudit.cli._privacy) on folders of real DCGAN samples (dlib, MTCNN)."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from PIL import Image

from idaudit.cli import main
from idaudit.exceptions import IdauditWarning
from idaudit.memorization import (
    OUTPUT_FILES,
    run_privacy_check,
)

pytestmark = pytest.mark.faces

pytest.importorskip("dlib")
pytest.importorskip("facenet_pytorch")

FAST = {"n_bootstrap": 50, "n_permutations": 199, "threads": 1, "progress": False}


def _save(folder: Path, images: np.ndarray, start: int = 0) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for i, im in enumerate(images):
        paths.append(folder / f"s{start + i:02d}_{i}.png")
        Image.fromarray(im).save(paths[-1])
    return paths


@pytest.fixture(scope="module")
def roots(tmp_path_factory: pytest.TempPathFactory, dcgan) -> Path:
    """Cohort a: synthetic = near-copies of training images; cohort b: fresh samples; plus a
    cohort only in train, a blank image, a broken file, a text file and a duplicate."""
    root = tmp_path_factory.mktemp("privacy")
    z = dcgan.sample_latents(22, rng=3)
    faces = dcgan.generate(z)
    near = dcgan.generate(z[:5] + 0.05 * np.random.default_rng(4).standard_normal((5, 100)))
    _save(root / "train" / "a", faces[:5])
    _save(root / "heldout" / "a", faces[5:10], 5)
    _save(root / "synthetic" / "a", near, 10)
    _save(root / "train" / "b", faces[10:14], 20)
    _save(root / "heldout" / "b", faces[14:18], 30)
    _save(root / "synthetic" / "b", faces[18:22], 40)
    _save(root / "train" / "only_train", faces[:1])
    _save(root / "synthetic" / "b" / "blank", np.zeros((1, 64, 64, 3), np.uint8), 90)
    (root / "heldout" / "b" / "broken.png").write_bytes(b"\x89PNG not really")
    (root / "heldout" / "b" / "notes.txt").write_text("not an image")
    shutil.copy(root / "heldout" / "a" / "s05_0.png", root / "heldout" / "a" / "copy.png")
    return root


@pytest.fixture(scope="module")
def first(roots: Path, tmp_path_factory: pytest.TempPathFactory):
    out = tmp_path_factory.mktemp("out") / "privacy"
    with pytest.warns(IdauditWarning, match=r"only_train \(missing from heldout and synthetic\)"):
        report = run_privacy_check(
            roots / "train", roots / "heldout", roots / "synthetic", out, **FAST
        )
    return report, out


def _args(roots: Path) -> tuple[Path, Path, Path]:
    return roots / "train", roots / "heldout", roots / "synthetic"


def test_cli_writes_the_outputs_and_checks_flags(
    roots: Path, first, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "cli"
    shutil.copytree(first[1] / "cache", tmp_path / "cache")
    argv = ["privacy", *map(str, _args(roots)), "--out", str(out), "--bootstrap", "20",
            "--permutations", "99", "--threads", "1", "--quiet",
            "--cache-dir", str(tmp_path / "cache"), "--subject-pattern", r"^s(\d)"]  # fmt: skip
    assert main(argv) == 0
    captured = capsys.readouterr()
    assert "warning: cohorts skipped" in captured.err
    assert "only_train" in captured.err
    assert "# idaudit privacy" in captured.out
    assert set(OUTPUT_FILES) <= {p.name for p in out.iterdir()}
    # file names s<d><d>_*: the first digit is the "subject" (several images each)
    sanity = pd.read_csv(out / "sanity.csv")
    assert list(sanity.columns) == [
        "metric", "auc", "p_value", "n_images", "n_subjects", "n_same_pairs",
        "n_different_pairs", "n_permutations",
    ]  # fmt: skip
    assert sanity["metric"].tolist() == ["dlib-resnet-v1"]
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
