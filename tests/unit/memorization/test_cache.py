"""The privacy check's cache keys (idaudit.memorization._cache)."""

from __future__ import annotations

from pathlib import Path

import pytest

from idaudit.memorization import (
    PrivacyCache,
)

pytestmark = pytest.mark.faces

pytest.importorskip("dlib")
pytest.importorskip("facenet_pytorch")


def test_cache_keys_change_with_the_weights(tmp_path: Path) -> None:
    cache = PrivacyCache(tmp_path)
    a = cache.embedding_path({"encoder": "x", "encoder_weights": {"f": "1"}}, "train", "c")
    b = cache.embedding_path({"encoder": "x", "encoder_weights": {"f": "2"}}, "train", "c")
    assert a != b
