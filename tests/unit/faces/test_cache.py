"""The embedding cache every road shares: keys by encoder fingerprint and content."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from PIL import Image

from idaudit.faces import EmbeddingCache, Face, FacePipeline, content_key
from idaudit.faces._cache import encoder_fingerprint, weight_digests


class _Detector:
    """One face on images whose first pixel is not black, none on the others."""

    def __repr__(self) -> str:  # part of the fingerprint: equal for every instance
        return "_Detector()"

    def detect(self, image: np.ndarray) -> list[Face]:
        if not image[0, 0].any():
            return []
        return [Face(np.array([1.0, 2.0, 9.0, 10.0]), 0.9, np.full((5, 2), 4.0))]


class _WeightedEncoder:
    """Embeds a crop as its mean colour times the first byte of its weight file."""

    name = "weighted"
    dim = 3
    input_size = 4
    differentiable = False

    def __init__(self, weights_path: Path, device: str = "cpu") -> None:
        self.weights_path = weights_path
        self.device = device
        self.calls = 0

    def __repr__(self) -> str:  # the same settings text for every instance
        return "_WeightedEncoder()"

    def align(self, image: np.ndarray, face: Face) -> np.ndarray:
        return np.ascontiguousarray(image[:4, :4])

    def encode(self, crops: np.ndarray) -> np.ndarray:
        self.calls += 1
        scale = float(self.weights_path.read_bytes()[0])
        return (crops.reshape(len(crops), -1, 3).mean(axis=1) * scale).astype(np.float32)


def _weights(path: Path, first_byte: int) -> Path:
    path.write_bytes(bytes([first_byte]) + b"weights")
    return path


def test_fingerprints_differ_by_weights_device_dtype_and_preprocessing(tmp_path: Path) -> None:
    one = _WeightedEncoder(_weights(tmp_path / "one.bin", 2))
    two = _WeightedEncoder(_weights(tmp_path / "two.bin", 3))
    on_gpu = _WeightedEncoder(tmp_path / "one.bin", device="cuda:0")
    in_double = _WeightedEncoder(tmp_path / "one.bin")
    in_double.dtype = "float64"  # type: ignore[attr-defined]
    detector = _Detector()
    base = encoder_fingerprint(one, detector, preprocessing={"upscale": 160})
    assert weight_digests(one) != weight_digests(two)
    others = {
        encoder_fingerprint(two, detector, preprocessing={"upscale": 160}),
        encoder_fingerprint(on_gpu, detector, preprocessing={"upscale": 160}),
        encoder_fingerprint(in_double, detector, preprocessing={"upscale": 160}),
        encoder_fingerprint(one, detector, preprocessing={"upscale": 112}),
        encoder_fingerprint(one, None, preprocessing={"upscale": 160}),
    }
    assert base not in others
    assert len(others) == 5
    assert base == encoder_fingerprint(one, _Detector(), preprocessing={"upscale": 160})


def test_same_image_under_two_fingerprints_is_two_entries(tmp_path: Path) -> None:
    """A cache never answers one model's look-up with another model's embedding."""
    image = np.full((12, 12, 3), 10, np.uint8)
    cache = EmbeddingCache(tmp_path / "cache")
    one = _WeightedEncoder(_weights(tmp_path / "one.bin", 2))
    two = _WeightedEncoder(_weights(tmp_path / "two.bin", 3))  # same name and settings text
    emb_one, _ = FacePipeline(_Detector(), one, progress=False).encode([image], cache=cache)
    emb_two, _ = FacePipeline(_Detector(), two, progress=False).encode([image], cache=cache)
    assert (cache.hits, cache.misses, cache.writes, len(cache)) == (0, 2, 2, 2)
    # the mean colour, 10, times each weight file's first byte: computed by each model
    np.testing.assert_array_equal(emb_one, np.full((1, 3), 20.0, np.float32))
    np.testing.assert_array_equal(emb_two, np.full((1, 3), 30.0, np.float32))
    # the same weights on another device: a third entry, not a hit
    gpu = _WeightedEncoder(tmp_path / "one.bin", device="cuda:0")
    FacePipeline(_Detector(), gpu, progress=False).encode([image], cache=cache)
    assert (cache.misses, len(cache), gpu.calls) == (3, 3, 1)
    # each model's second look-up is a hit on its own entry
    cache.reset_counts()
    again_two, _ = FacePipeline(_Detector(), two, progress=False).encode([image], cache=cache)
    assert (cache.hits, cache.misses, two.calls) == (1, 0, 1)
    np.testing.assert_array_equal(again_two, emb_two)
    # a changed weight file is another model: it misses
    _weights(tmp_path / "one.bin", 5)
    emb_five, _ = FacePipeline(_Detector(), one, progress=False).encode([image], cache=cache)
    assert cache.misses == 1
    np.testing.assert_array_equal(emb_five, np.full((1, 3), 50.0, np.float32))


def test_second_run_reads_everything_from_the_cache_bitwise(tmp_path: Path) -> None:
    gen = np.random.default_rng(0)
    images: list[np.ndarray | Path] = [
        gen.integers(1, 256, (12, 12, 3), dtype=np.uint8) for _ in range(11)
    ]
    images[3][0, 0] = 0  # no face
    Image.fromarray(images[5]).save(tmp_path / "five.png")
    images[5] = tmp_path / "five.png"  # a file, keyed by its bytes
    encoder = _WeightedEncoder(_weights(tmp_path / "w.bin", 1))
    pipe = FacePipeline(_Detector(), encoder, progress=False)
    cache = EmbeddingCache(tmp_path / "cache")
    emb, outcomes = pipe.encode(images, cache=cache)
    assert (cache.hits, cache.misses, cache.writes) == (0, 11, 11)
    assert outcomes["status"].tolist().count("ok") == 10
    calls = encoder.calls
    cache.reset_counts()
    again, again_outcomes = pipe.encode(images, cache=cache)
    assert (cache.hits, cache.misses, cache.writes) == (11, 0, 0)
    assert encoder.calls == calls  # nothing encoded
    assert again.dtype == emb.dtype
    assert again.tobytes() == emb.tobytes()
    pd.testing.assert_frame_equal(again_outcomes, outcomes, check_exact=True)
    # and without a cache: the same numbers
    plain, plain_outcomes = pipe.encode(images)
    assert plain.tobytes() == emb.tobytes()
    pd.testing.assert_frame_equal(plain_outcomes, outcomes, check_exact=True)


def test_keys_are_content_and_fingerprint(tmp_path: Path) -> None:
    a = np.zeros((2, 2, 3), np.uint8)
    assert content_key("fp", a) == content_key("fp", a.copy())
    assert content_key("fp", a) != content_key("other fp", a)
    with pytest.raises(TypeError, match="`directory` must be a path"):
        EmbeddingCache(3)  # type: ignore[arg-type]
