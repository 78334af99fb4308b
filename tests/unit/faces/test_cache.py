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


class _Plain:
    """A model whose repr is object's own (it names a memory address)."""

    name = "plain"


def test_a_model_without_its_own_repr_keys_by_its_state_not_its_address() -> None:
    # object's repr names an address, new in every process: keyed by class name and a
    # digest of its attributes, so a second run reads the first run's entries, and two
    # settings never share one
    a, b = _Plain(), _Plain()
    assert repr(a) != repr(b)
    assert encoder_fingerprint(a) == encoder_fingerprint(b)
    assert "0x" not in encoder_fingerprint(a)
    assert f"{__name__}._Plain" in encoder_fingerprint(a)
    a.scale, b.scale = 1.0, 100.0
    assert encoder_fingerprint(a) != encoder_fingerprint(b)
    b.scale = 1.0
    a.weights, b.weights = np.ones(3), np.ones(3)
    assert encoder_fingerprint(a) == encoder_fingerprint(b)
    b.weights[0] = 2.0
    assert encoder_fingerprint(a) != encoder_fingerprint(b)
    # an attribute that cannot be digested: the address stays in, every instance misses
    a.transform = b.transform = np.sqrt
    a.weights = b.weights
    assert encoder_fingerprint(a) != encoder_fingerprint(b)


def test_a_torch_module_with_a_layered_repr_keys_by_its_weights() -> None:
    import torch

    class Net(torch.nn.Module):
        def __init__(self, seed: int) -> None:
            super().__init__()
            torch.manual_seed(seed)
            self.body = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ReLU())
            self.scale = 2.0

    one, same, other = Net(0), Net(0), Net(1)
    assert "\n" in repr(one)
    assert encoder_fingerprint(one) == encoder_fingerprint(same)
    assert encoder_fingerprint(one) != encoder_fingerprint(other)
    same.scale = 3.0
    assert encoder_fingerprint(one) != encoder_fingerprint(same)


def test_onnx_and_retinaface_settings_enter_the_fingerprint(buffalo_dir: Path) -> None:
    from idaudit.faces import ArcFaceEncoder, OnnxEncoder, RetinaFaceDetector

    path = buffalo_dir / "w600k_r50.onnx"
    plain = OnnxEncoder(path)
    assert encoder_fingerprint(plain) == encoder_fingerprint(OnnxEncoder(path))
    for other in (
        OnnxEncoder(path, bgr=True),
        OnnxEncoder(path, mean=100.0, std=50.0),
        OnnxEncoder(path, mean=(127.5, 127.5, 127.0)),
    ):
        assert encoder_fingerprint(other) != encoder_fingerprint(plain), repr(other)
    assert encoder_fingerprint(ArcFaceEncoder(buffalo_dir)) == encoder_fingerprint(
        ArcFaceEncoder(buffalo_dir)
    )
    det = RetinaFaceDetector(buffalo_dir)
    assert encoder_fingerprint(plain, det) == encoder_fingerprint(
        plain, RetinaFaceDetector(buffalo_dir)
    )
    stricter = RetinaFaceDetector(buffalo_dir, score_threshold=0.9)
    assert encoder_fingerprint(plain, stricter) != encoder_fingerprint(plain, det)


def test_mtcnn_weights_from_another_folder_key_apart(tmp_path: Path) -> None:
    import shutil

    from idaudit.faces import MTCNNDetector
    from idaudit.faces._weights import resolve_weights

    shipped = MTCNNDetector()
    assert [Path(f).name for f in shipped.weight_files] == ["pnet.pt", "rnet.pt", "onet.pt"]
    for stem in ("pnet", "rnet", "onet"):
        shutil.copy(resolve_weights("mtcnn", f"{stem}.pt"), tmp_path / f"{stem}.pt")
    same = MTCNNDetector(weights=tmp_path, verify=False)
    assert weight_digests(same) == weight_digests(shipped)
    with open(tmp_path / "onet.pt", "ab") as fh:  # other bytes, same names
        fh.write(b"\0")
    changed = weight_digests(MTCNNDetector.__new__(MTCNNDetector))  # no files: nothing
    assert changed == {}
    other = MTCNNDetector.__new__(MTCNNDetector)
    other.weight_files = same.weight_files
    assert weight_digests(other)["onet.pt"] != weight_digests(shipped)["onet.pt"]


def test_a_damaged_entry_is_a_miss_and_encoded_again(tmp_path: Path) -> None:
    cache = EmbeddingCache(tmp_path)
    for key, damage in (("ab" * 32, b"PK\x03\x04 not a zip"), ("cd" * 32, b"")):
        cache.put(key, np.ones(3, np.float32))
        path = next(tmp_path.glob(f"??/{key}.npz"))
        path.write_bytes(damage)  # truncated to a broken zip, then to nothing
        assert cache.get(key) is None
    assert cache.misses == 2
    # through the pipeline: every entry cut to 50 bytes, the second run encodes them again
    images = [np.full((12, 12, 3), 9 * k + 1, np.uint8) for k in range(3)]
    enc = _WeightedEncoder(_weights(tmp_path / "w.bin", 2))
    pipe = FacePipeline(_Detector(), enc, progress=False)
    first, _ = pipe.encode(images, cache=EmbeddingCache(tmp_path / "c"))
    for path in (tmp_path / "c").glob("??/*.npz"):
        path.write_bytes(path.read_bytes()[:50])
    again = EmbeddingCache(tmp_path / "c")
    second, outcomes = pipe.encode(images, cache=again)
    assert (again.hits, again.misses, again.writes) == (0, 3, 3)
    assert second.tobytes() == first.tobytes()


def test_float64_embeddings_come_back_from_the_cache_unrounded(tmp_path: Path) -> None:
    cache = EmbeddingCache(tmp_path)
    value = np.array([1 / 3, 2 / 3, 1e-9])
    cache.put("ef" * 32, value)
    status, got = cache.get("ef" * 32)  # type: ignore[misc]
    assert status == "ok" and got.dtype == np.float64
    np.testing.assert_array_equal(got, value)
    cache.put("01" * 32, value.astype(np.float32))
    assert cache.get("01" * 32)[1].dtype == np.float32  # type: ignore[index]
