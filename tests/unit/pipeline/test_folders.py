"""Embedding image folders (idaudit.pipeline._folders) on real DCGAN samples."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from PIL import Image

pytestmark = pytest.mark.faces

pytest.importorskip("dlib")
pytest.importorskip("facenet_pytorch")


@pytest.fixture(scope="module")
def roots(privacy_roots: Path) -> Path:
    """The DCGAN folders of the privacy tests (tests/unit/conftest.py), made once."""
    return privacy_roots


def test_aligned_inputs_embed_like_the_generators_own_crops(
    roots: Path, dcgan, tmp_path: Path
) -> None:
    from idaudit.faces import AlignedDetector, DlibEncoder, EmbeddingCache, content_key
    from idaudit.pipeline._folders import MemoDetector, embed_images

    paths = sorted((roots / "train" / "a").glob("*.png"))
    images = np.stack([np.asarray(Image.open(p)) for p in paths])
    encoder = DlibEncoder()
    keys = [content_key("aligned dlib", str(p)) for p in paths]
    detector, cache = MemoDetector(AlignedDetector()), EmbeddingCache(tmp_path)
    status, emb, _, _ = embed_images(paths, keys, detector, encoder, cache, aligned=True)
    assert status == ["ok"] * len(paths)
    np.testing.assert_allclose(emb, dcgan.embed(images, encoder), atol=1e-6)
