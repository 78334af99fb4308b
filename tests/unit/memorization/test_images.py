"""Embedding image folders (idaudit.memorization._images) on real DCGAN samples."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

pytestmark = pytest.mark.faces

pytest.importorskip("dlib")
pytest.importorskip("facenet_pytorch")


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


def test_aligned_inputs_embed_like_the_generators_own_crops(roots: Path, dcgan) -> None:
    from idaudit.faces import DlibEncoder
    from idaudit.memorization._images import AlignedDetector, MemoDetector, embed_images

    paths = sorted((roots / "train" / "a").glob("*.png"))
    images = np.stack([np.asarray(Image.open(p)) for p in paths])
    encoder = DlibEncoder()
    status, emb, _ = embed_images(paths, MemoDetector(AlignedDetector()), encoder, aligned=True)
    assert status == ["ok"] * len(paths)
    np.testing.assert_allclose(emb, dcgan.embed(images, encoder), atol=1e-6)
