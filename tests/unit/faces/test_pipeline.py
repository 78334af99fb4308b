from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from PIL import Image

from idaudit.exceptions import IdauditWarning, InvalidInputError
from idaudit.faces import Face, FacePipeline, MTCNNDetector, load_image
from idaudit.faces._pipeline import OUTCOME_COLUMNS, STATUSES

pytestmark = pytest.mark.faces


@pytest.fixture(scope="module")
def pipeline(mtcnn_detector: Any, dlib_encoder: Any) -> FacePipeline:
    return FacePipeline(mtcnn_detector, dlib_encoder, progress=False)


@pytest.fixture(scope="module")
def hanks(shipped_photos: Path) -> np.ndarray:
    """A 112×112 photo of Tom Hanks whose three channels are equal (a grey photo in RGB)."""
    return load_image(shipped_photos / "Tom_Hanks_54745.png")


def test_bad_and_odd_inputs_are_recorded_not_raised(
    pipeline: FacePipeline, hanks: np.ndarray, tmp_path: Path
) -> None:
    corrupt = tmp_path / "corrupt.jpg"
    corrupt.write_bytes(b"\xff\xd8\xff\xe0 this is no jpeg")
    saved = tmp_path / "hanks.png"
    Image.fromarray(hanks).save(saved)
    inputs = [
        hanks,  # 0 uint8 RGB
        hanks[..., 0],  # 1 grey (H, W)
        np.dstack([hanks, np.full(hanks.shape[:2], 77, np.uint8)]),  # 2 RGBA
        hanks.astype(np.uint16) * 257,  # 3 16-bit: x·257 maps back to x exactly
        hanks / 255.0,  # 4 float in [0, 1]
        np.zeros((0, 0, 3), np.uint8),  # 5 empty
        corrupt,  # 6 corrupt file
        str(tmp_path / "missing.png"),  # 7 missing file
        np.zeros((120, 120, 3), np.uint8),  # 8 no face
        hanks.astype(np.float64),  # 9 float 0–255: refused, not guessed
        saved,  # 10 a good file
    ]
    emb, out = pipeline.encode(inputs)
    assert out["status"].tolist() == [
        "ok",
        "ok",
        "ok",
        "ok",
        "ok",
        "bad_format",
        "unreadable",
        "unreadable",
        "no_face",
        "bad_format",
        "ok",
    ]
    assert emb.shape == (6, 128)
    assert out["input_index"].tolist() == list(range(11))
    assert out.loc[6, "source"] == str(corrupt)
    assert out.loc[0, "source"] is None
    assert "must not be empty" in out.loc[5, "message"]
    assert "values must lie in [0, 1]" in out.loc[9, "message"]
    # Every converted form is the same picture, hence the same embedding (up to float32 noise).
    np.testing.assert_allclose(emb, np.repeat(emb[:1], 6, axis=0), atol=1e-6)
    counts = out["status"].value_counts()
    assert counts["ok"] == 6
    assert counts["bad_format"] == 2
    assert counts["unreadable"] == 2
    assert counts["no_face"] == 1


def test_outcome_table_schema(pipeline: FacePipeline, hanks: np.ndarray) -> None:
    emb, out = pipeline.encode([hanks, np.zeros((40, 40, 3), np.uint8)])
    assert tuple(out.columns) == OUTCOME_COLUMNS
    assert isinstance(out["status"].dtype, pd.CategoricalDtype)
    assert list(out["status"].cat.categories) == list(STATUSES)
    assert str(out["embedding_row"].dtype) == "Int64"
    assert out.loc[0, "embedding_row"] == 0
    assert out["embedding_row"].isna().tolist() == [False, True]
    assert out.loc[0, "n_faces"] == 1
    assert 0.99 < out.loc[0, "score"] <= 1.0
    assert emb.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(emb, axis=1), 1.0, atol=1e-6)


class _FixedDetector:
    """Returns precomputed faces: the pipeline's bookkeeping is tested, not MTCNN again."""

    def __init__(self, faces: list[Face]) -> None:
        self.faces = faces

    def detect(self, image: np.ndarray) -> list[Face]:
        return list(self.faces)


def test_largest_face_by_default_every_face_on_request(
    dlib_encoder: Any, t1_photo: np.ndarray
) -> None:
    half = np.ascontiguousarray(t1_photo[::2, ::2])
    faces = MTCNNDetector(thresholds=(0.6, 0.7, 0.9)).detect(half)
    assert len(faces) == 6
    detector = _FixedDetector(faces)
    largest = int(np.argmax([f.area for f in faces]))

    emb, out = FacePipeline(detector, dlib_encoder, progress=False).encode([half])
    assert len(out) == 1
    assert emb.shape == (1, 128)
    assert out.loc[0, "n_faces"] == 6
    assert out.loc[0, "face_index"] == largest
    np.testing.assert_allclose(
        out.loc[0, ["x1", "y1", "x2", "y2"]].to_numpy(float), faces[largest].box
    )
    np.testing.assert_allclose(
        emb[0], dlib_encoder.encode(dlib_encoder.align(half, faces[largest])[None])[0], atol=1e-6
    )

    every = FacePipeline(detector, dlib_encoder, all_faces=True, batch_size=4, progress=False)
    emb_all, out_all = every.encode([half])
    assert len(out_all) == 6
    assert sorted(out_all["face_index"].tolist()) == list(range(6))
    assert out_all["embedding_row"].tolist() == list(range(6))
    areas = [faces[i].area for i in out_all["face_index"]]
    assert areas == sorted(areas, reverse=True)  # largest first
    np.testing.assert_allclose(emb_all[0], emb[0], atol=1e-6)
    # batch_size only groups the work: 4 + 2 crops give the same rows as one batch of 32.
    every_one_batch = FacePipeline(detector, dlib_encoder, all_faces=True, progress=False)
    np.testing.assert_allclose(every_one_batch.encode([half])[0], emb_all, atol=1e-6)


def test_single_path_and_stacked_array(
    pipeline: FacePipeline, hanks: np.ndarray, tmp_path: Path
) -> None:
    path = tmp_path / "one.png"
    Image.fromarray(hanks).save(path)
    emb_path, out_path = pipeline.encode(path)
    emb_stack, out_stack = pipeline.encode(np.stack([hanks, hanks]))
    assert out_path["status"].tolist() == ["ok"]
    assert out_stack["status"].tolist() == ["ok", "ok"]
    np.testing.assert_allclose(emb_stack, np.repeat(emb_path, 2, axis=0), atol=1e-6)


def test_wrong_types_raise(pipeline: FacePipeline, dlib_encoder: Any) -> None:
    with pytest.raises(TypeError, match=r"`images\[1\]` must be a numpy array or a path; got int"):
        pipeline.encode([np.zeros((20, 20, 3), np.uint8), 3])
    with pytest.raises(TypeError, match="`images` must be an iterable"):
        pipeline.encode(42)
    with pytest.raises(InvalidInputError, match=r"must be a stack of shape \(n, H, W, C\)"):
        pipeline.encode(np.zeros((20, 20, 3), np.uint8))
    with pytest.raises(TypeError, match="`detector` must have a `detect"):
        FacePipeline(object(), dlib_encoder)
    with pytest.raises(InvalidInputError, match="`batch_size` must be >= 1"):
        FacePipeline(pipeline.detector, dlib_encoder, batch_size=0)


def test_empty_input_gives_empty_results(pipeline: FacePipeline) -> None:
    emb, out = pipeline.encode([])
    assert emb.shape == (0, 128)
    assert len(out) == 0
    assert tuple(out.columns) == OUTCOME_COLUMNS


class _ConstantEncoder:
    """A stand-in encoder: the pipeline's error bookkeeping is tested, not a model."""

    name = "constant"
    dim = 4
    input_size = 8
    differentiable = False

    def align(self, image: np.ndarray, face: Face) -> np.ndarray:
        return np.zeros((8, 8, 3), np.uint8)

    def encode(self, crops: np.ndarray) -> np.ndarray:
        return np.ones((len(crops), self.dim), np.float32)


def test_decompression_bomb_is_unreadable_not_fatal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    small = tmp_path / "small.png"
    Image.fromarray(np.zeros((10, 10, 3), np.uint8)).save(small)
    big = tmp_path / "big.png"
    Image.fromarray(np.zeros((100, 100, 3), np.uint8)).save(big)
    monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", 1000)  # 100×100 is over twice the limit
    face = Face(np.array([1.0, 1.0, 8.0, 8.0]), 0.99, np.full((5, 2), 4.0))
    pipeline = FacePipeline(_FixedDetector([face]), _ConstantEncoder(), progress=False)
    emb, out = pipeline.encode([small, big, np.zeros((10, 10, 3), np.uint8)])
    assert out["status"].tolist() == ["ok", "unreadable", "ok"]
    assert out.loc[1, "source"] == str(big)
    assert "decompression bomb" in out.loc[1, "message"]
    assert emb.shape == (2, 4)


@pytest.mark.parametrize("error", [SyntaxError("bad plugin header"), OSError("broken file")])
def test_plugin_errors_are_unreadable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, error: Exception
) -> None:
    def fail(path: Any) -> np.ndarray:
        raise error

    monkeypatch.setattr("idaudit.faces._pipeline.read_pixels", fail)
    pipeline = FacePipeline(_FixedDetector([]), _ConstantEncoder(), progress=False)
    with pytest.warns(IdauditWarning, match=r"kept no face from the 1 input \(unreadable: 1\)"):
        _, out = pipeline.encode([tmp_path / "x.png"])
    assert out["status"].tolist() == ["unreadable"]
    assert str(error) in out.loc[0, "message"]


@pytest.mark.parametrize("bug", [AttributeError("a bug"), TypeError("a bug in the decoder")])
def test_programming_errors_still_raise(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, bug: Exception
) -> None:
    # A TypeError from reading a file is a bug, not a bad pixel format: it must not become a
    # bad_format row (only the pixel conversion's own refusals do).
    def fail(path: Any) -> np.ndarray:
        raise bug

    monkeypatch.setattr("idaudit.faces._pipeline.read_pixels", fail)
    pipeline = FacePipeline(_FixedDetector([]), _ConstantEncoder(), progress=False)
    with pytest.raises(type(bug), match="a bug"):
        pipeline.encode([tmp_path / "x.png"])


def test_files_with_refused_pixels_are_bad_format(tmp_path: Path) -> None:
    # Decoded fine, but the pixels break the conversion rules: bad_format, not unreadable.
    wide = tmp_path / "i32.tif"
    Image.fromarray(np.full((10, 10), 70000, np.int32)).save(wide)  # beyond 16 bits
    floats = tmp_path / "f32.tif"
    Image.fromarray(np.full((10, 10), 200.0, np.float32)).save(floats)  # 0-255 floats
    face = Face(np.array([1.0, 1.0, 8.0, 8.0]), 0.99, np.full((5, 2), 4.0))
    pipeline = FacePipeline(_FixedDetector([face]), _ConstantEncoder(), progress=False)
    with pytest.warns(IdauditWarning, match=r"any of the 3 inputs \(bad_format: 3\)"):
        _, out = pipeline.encode([wide, floats, np.zeros((10, 10, 3), np.int32)])
    assert out["status"].tolist() == ["bad_format"] * 3
    assert "within 0–65535" in out.loc[0, "message"]
    assert "must lie in [0, 1]" in out.loc[1, "message"]
    assert "must have dtype uint8, uint16 or float" in out.loc[2, "message"]


def test_when_every_input_fails_a_warning_counts_the_reasons(tmp_path: Path) -> None:
    # files that do not exist, one that is no image, and an array without a face: the
    # (0, dim) result comes with a warning, not in silence
    face = Face(np.array([1.0, 1.0, 8.0, 8.0]), 0.99, np.full((5, 2), 4.0))
    (tmp_path / "notes.png").write_text("not an image")
    pipeline = FacePipeline(_FixedDetector([]), _ConstantEncoder(), progress=False)
    inputs = [tmp_path / "a.jpg", tmp_path / "b.jpg", tmp_path / "notes.png"]
    expected = (
        r"^FacePipeline\.encode kept no face from any of the 4 inputs \(no_face: 1, "
        r"unreadable: 3\); the embeddings are empty and the outcomes' status and message "
        r"columns say why for each input\.$"
    )
    with pytest.warns(IdauditWarning, match=expected):
        emb, out = pipeline.encode([*inputs, np.zeros((10, 10, 3), np.uint8)])
    assert emb.shape == (0, 4)
    assert out["status"].tolist() == ["unreadable"] * 3 + ["no_face"]
    # one face kept: no warning (pytest turns idaudit's warnings into errors)
    found = FacePipeline(_FixedDetector([face]), _ConstantEncoder(), progress=False)
    emb, _ = found.encode([*inputs, np.zeros((10, 10, 3), np.uint8)])
    assert emb.shape == (1, 4)


class _RecordingEncoder(_ConstantEncoder):
    """Records the size of every encoder call; raises KeyboardInterrupt on call ``stop``."""

    def __init__(self, stop: int | None = None) -> None:
        self.calls: list[int] = []
        self.stop = stop

    def __repr__(self) -> str:  # part of the cache key: equal for every instance
        return "_RecordingEncoder()"

    def encode(self, crops: np.ndarray) -> np.ndarray:
        self.calls.append(len(crops))
        if self.stop is not None and len(self.calls) == self.stop:
            raise KeyboardInterrupt
        return np.full((len(crops), self.dim), float(len(self.calls)), np.float32)


def test_with_a_cache_faces_are_stored_every_checkpoint(tmp_path: Path) -> None:
    from idaudit.faces import EmbeddingCache
    from idaudit.faces._pipeline import CHECKPOINT_FACES

    face = Face(np.array([1.0, 1.0, 8.0, 8.0]), 0.99, np.full((5, 2), 4.0))
    gen = np.random.default_rng(0)
    images = [gen.integers(0, 256, (10, 10, 3), dtype=np.uint8) for _ in range(20)]
    # without a cache, batch_size groups the work
    plain = _RecordingEncoder()
    FacePipeline(_FixedDetector([face]), plain, batch_size=32, progress=False).encode(images)
    assert plain.calls == [20]
    # with one, at most CHECKPOINT_FACES faces are encoded, then stored, at a time: an
    # interrupt during the third call leaves the first two calls' faces in the cache
    stopped = _RecordingEncoder(stop=3)
    cache = EmbeddingCache(tmp_path / "cache")
    detector = _FixedDetector([face])  # one object: its repr is part of the cache key
    pipeline = FacePipeline(detector, stopped, batch_size=32, progress=False)
    with pytest.raises(KeyboardInterrupt):
        pipeline.encode(images, cache=cache)
    assert stopped.calls == [CHECKPOINT_FACES, CHECKPOINT_FACES, 20 - 2 * CHECKPOINT_FACES]
    assert cache.writes == len(cache) == 2 * CHECKPOINT_FACES
    # the re-run encodes only the rest
    rest = _RecordingEncoder()
    FacePipeline(detector, rest, batch_size=32, progress=False).encode(images, cache=cache)
    assert sum(rest.calls) == 20 - 2 * CHECKPOINT_FACES
