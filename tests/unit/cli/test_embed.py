"""``idaudit embed``: folders of face photos -> an embeddings file the audits read.

Runs the real shipped models (MTCNN + dlib) on photos that ship in installed packages, and the
InsightFace route on stand-in ONNX files in the published format. Every socket is refused (the
autouse fixture of tests/unit/conftest.py, for modules marked ``faces``).
"""

from __future__ import annotations

import re
import stat
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from PIL import Image

from idaudit.cli import main
from idaudit.data import EmbeddingSet
from standins import write_buffalo

pytestmark = pytest.mark.faces

pytest.importorskip("dlib")
pytest.importorskip("facenet_pytorch")


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def _save(image: np.ndarray, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(image).save(path)
    return path


@pytest.fixture(scope="module")
def photo_dir(tmp_path_factory: pytest.TempPathFactory, shipped_photos: Path) -> Path:
    """Two real people, two photos each (one mirrored), plus files that must be dropped."""
    import skimage.data

    hanks = np.asarray(Image.open(shipped_photos / "Tom_Hanks_54745.png").convert("RGB"))
    collins = skimage.data.astronaut()  # Eileen Collins
    root = tmp_path_factory.mktemp("photos")
    _save(collins, root / "collins" / "a.png")
    _save(np.ascontiguousarray(collins[:, ::-1]), root / "collins" / "b.jpg")
    _save(hanks, root / "hanks" / "a.png")
    _save(np.ascontiguousarray(hanks[:, ::-1]), root / "hanks" / "sub" / "b.png")  # nested
    _save(np.zeros((120, 120, 3), np.uint8), root / "hanks" / "blank.png")  # no face
    (root / "hanks" / "broken.jpg").write_bytes(b"\xff\xd8\xff\xe0 not a jpeg")  # unreadable
    (root / "hanks" / "notes.txt").write_text("not an image")  # skipped
    (root / "hanks" / ".hidden.png").write_bytes(b"ignored")  # hidden: ignored
    (root / "README.txt").write_text("outside any identity folder")  # skipped
    return root


def test_dlib_route_writes_embeddings_the_audits_read(
    photo_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "new" / "emb.npz"
    assert main(["embed", str(photo_dir), "--out", str(out), "--quiet", "--threads", "2"]) == 0
    printed = capsys.readouterr().out
    assert "6 images in 2 identity folders; 2 other files skipped" in printed
    assert "encoder dlib-resnet-v1 (dim 128), device cpu" in printed
    assert "kept 4 faces from 4 images; dropped 2 images (no_face: 1, unreadable: 1, " in printed
    outcomes_path = tmp_path / "new" / "emb.outcomes.csv"
    for path in (out, outcomes_path):
        assert _mode(path) == 0o600  # biometric data: owner-only
    assert _mode(out.parent) == 0o700

    es = EmbeddingSet.from_npz(out)  # the reader behind `idaudit audit` / `certify`
    assert es.counts == {"collins": 2, "hanks": 2}
    assert es.dim == 128
    with np.load(out, allow_pickle=False) as archive:
        emb, labels = archive["embeddings"], archive["labels"]
        sources = archive["sources"].tolist()
        assert str(archive["encoder"]) == "dlib-resnet-v1"
    assert sources == ["collins/a.png", "collins/b.jpg", "hanks/a.png", "hanks/sub/b.png"]
    np.testing.assert_allclose(np.linalg.norm(emb, axis=1), 1.0, atol=1e-6)
    # Labels sit on the right rows: a photo and its mirror image (dlib: raw < 0.6, about 0.4
    # normalised) are closer than any two photos of different people.
    dist = np.linalg.norm(emb[:, None] - emb[None], axis=2)
    same = labels[:, None] == labels[None]
    off_diagonal = ~np.eye(len(emb), dtype=bool)
    assert dist[same & off_diagonal].max() < 0.4 < dist[~same].min()

    outcomes = pd.read_csv(outcomes_path)
    names = outcomes["source"].map(lambda s: Path(s).name)
    by_file = dict(zip(names, outcomes["status"], strict=True))
    assert by_file["blank.png"] == "no_face"
    assert by_file["broken.jpg"] == "unreadable"
    # skipped files are named in the outcomes, under their folder (none for the root's)
    assert by_file["notes.txt"] == "skipped"
    assert by_file["README.txt"] == "skipped"
    assert set(outcomes["identity"].dropna()) == {"collins", "hanks"}
    assert outcomes.loc[names == "notes.txt", "identity"].item() == "hanks"
    # the cache beside --out holds one owner-only entry per readable photo with a face or none
    cache = out.with_suffix(".cache")
    assert _mode(cache) == 0o700
    assert len(list(cache.glob("??/*.npz"))) == 5
    # a re-run encodes nothing: every photo comes from the cache, with the same embeddings
    out2 = tmp_path / "again.npz"
    argv = ["embed", str(photo_dir), "--out", str(out2), "--cache", str(cache), "--quiet"]
    assert main(argv) == 0
    assert "resumed: 5 of 6 images came from the cache" in capsys.readouterr().out
    with np.load(out2, allow_pickle=False) as again:
        np.testing.assert_array_equal(again["embeddings"], emb)
    assert sorted(outcomes["embedding_row"].dropna().astype(int)) == [0, 1, 2, 3]


@pytest.fixture(scope="module")
def buffalo_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_buffalo(tmp_path_factory.mktemp("weights") / "buffalo_l")


def test_arcface_route_with_stand_in_models(
    buffalo_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The stand-in detector sees a face where a red 8x8 block sits (after resizing to 640 px);
    # the stand-in encoder is a fixed linear map of 8x8 block means.
    root = tmp_path / "faces"
    for i, (identity, corner) in enumerate([("p1", 40), ("p1", 48), ("p2", 72), ("p2", 80)]):
        image = np.full((160, 160, 3), 30 * (i + 1), np.uint8)
        image[corner : corner + 8, corner : corner + 8] = (255, 0, 0)
        _save(image, root / identity / f"{i}.png")
    _save(np.zeros((160, 160, 3), np.uint8), root / "p2" / "empty.png")
    out = tmp_path / "emb.csv"
    args = ["--out", str(out), "--arcface-dir", str(buffalo_dir), "--threads", "1", "--quiet"]
    code = main(["embed", str(root), *args])
    assert code == 0
    printed = capsys.readouterr().out
    assert "detector RetinaFaceDetector, encoder arcface-w600k-r50 (dim 512)" in printed
    assert "dropped 1 images (no_face: 1, unreadable: 0, bad_format: 0)" in printed
    es = EmbeddingSet.from_csv(out)
    assert es.counts == {"p1": 2, "p2": 2}
    assert es.dim == 512
    assert (tmp_path / "emb.outcomes.csv").is_file()


def test_help_says_insightface_models_are_non_commercial(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as info:
        main(["embed", "--help"])
    assert info.value.code == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "non-commercial research" in text
    assert "det_10g.onnx and w600k_r50.onnx" in text


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--out", "{tmp}/emb.txt"], r"`--out` must end in \.npz, \.csv, \.parquet or \.pq"),
        (["--out", "{tmp}/e.npz", "--encoder", "dlib", "--arcface-dir", "{tmp}"], "--arcface"),
        (["--out", "{tmp}/e.npz", "--device", "cuda"], "`--device` must be cpu for --encoder"),
        (["--out", "{tmp}/e.npz", "--batch-size", "0"], r"`--batch-size` must be >= 1"),
    ],
)
def test_usage_errors_exit_with_status_2(
    photo_dir: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    args: list[str],
    message: str,
) -> None:
    argv = ["embed", str(photo_dir), *(a.format(tmp=tmp_path) for a in args), "--quiet"]
    with pytest.raises(SystemExit) as info:
        main(argv)
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("idaudit embed: error: ")
    assert re.search(message, err)


def test_folder_without_identity_folders_or_faces(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    flat = tmp_path / "flat"
    _save(np.zeros((50, 50, 3), np.uint8), flat / "x.png")
    with pytest.raises(SystemExit):
        main(["embed", str(flat), "--out", str(tmp_path / "e.npz"), "--quiet"])
    assert "must hold one sub-folder per identity" in capsys.readouterr().err

    with pytest.raises(SystemExit):  # images, but not one face: outcomes only
        main(["embed", str(tmp_path), "--out", str(tmp_path / "e.npz"), "--quiet"])
    err = capsys.readouterr().err
    assert "no face was embedded from 1 image, so" in err
    assert not (tmp_path / "e.npz").exists()
    assert (tmp_path / "e.outcomes.csv").is_file()


def test_identity_folders_without_images_fail_before_loading_models(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import idaudit.cli._embed

    for name in ("a", "b"):
        (tmp_path / "imgs" / name).mkdir(parents=True)
    (tmp_path / "imgs" / "a" / "notes.txt").write_text("no image here")

    def no_models(args: object) -> object:
        raise AssertionError("models loaded although there is nothing to embed")

    monkeypatch.setattr(idaudit.cli._embed, "_face_models", no_models)
    with pytest.raises(SystemExit):
        main(["embed", str(tmp_path / "imgs"), "--out", str(tmp_path / "e.npz"), "--quiet"])
    err = capsys.readouterr().err
    assert "holds 2 identity folders but no image files" in err
    assert not (tmp_path / "e.outcomes.csv").exists()


def test_one_identity_is_embedded_with_a_note_that_audits_need_two(
    photo_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import shutil

    one = tmp_path / "one"
    shutil.copytree(photo_dir / "collins", one / "collins")
    assert main(["embed", str(one), "--out", str(tmp_path / "e.npz"), "--quiet"]) == 0
    assert "only one identity has a kept face" in capsys.readouterr().out


def test_an_interrupt_says_what_the_cache_saved(
    photo_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch
) -> None:
    from idaudit.faces import FacePipeline

    def interrupted(self, images, *, cache=None):  # stores one entry, then Ctrl-C
        if cache is not None:
            cache.put("a" * 64, np.ones(128, np.float32), status="ok", meta=np.zeros(7))
        raise KeyboardInterrupt

    monkeypatch.setattr(FacePipeline, "encode", interrupted)
    out = tmp_path / "e.npz"
    assert main(["embed", str(photo_dir), "--out", str(out), "--quiet"]) == 130
    printed = capsys.readouterr().out
    assert "interrupted: 1 image(s) were encoded and saved in the cache" in printed
    assert str(out.with_suffix(".cache")) in printed
    assert not out.exists()
    argv = ["embed", str(photo_dir), "--out", str(tmp_path / "f.npz"), "--cache", "none"]
    assert main([*argv, "--quiet"]) == 130
    assert "nothing was saved (no cache)" in capsys.readouterr().out
