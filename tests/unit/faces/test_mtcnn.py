from __future__ import annotations

import socket
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from idaudit.exceptions import InvalidInputError
from idaudit.faces import Face, MTCNNDetector, load_image

pytestmark = pytest.mark.faces

# Face centres in t1.jpg, read off the photo by eye (x, y in pixels), left to right.
T1_PEOPLE = {
    "woman, far left": (110, 335),
    "dark-haired woman, back": (320, 210),
    "man in grey shirt": (515, 335),
    "man in red shirt": (790, 410),
    "man standing, right": (960, 130),
    "blonde woman, right": (1180, 335),
}


def _contains(face: Face, point: tuple[int, int]) -> bool:
    x1, y1, x2, y2 = face.box
    return bool(x1 <= point[0] <= x2 and y1 <= point[1] <= y2)


@pytest.fixture(scope="module")
def t1_faces(mtcnn_detector: Any, t1_photo: np.ndarray) -> list[Face]:
    return mtcnn_detector.detect(t1_photo)


@pytest.fixture(scope="module")
def t1_half(t1_photo: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(t1_photo[::2, ::2])  # faces stay above 40 px


def test_finds_the_six_people_in_t1(t1_faces: list[Face]) -> None:
    confident = [f for f in t1_faces if f.score > 0.9]
    assert len(confident) == 6
    for name, centre in T1_PEOPLE.items():
        hits = [f for f in confident if _contains(f, centre)]
        assert len(hits) == 1, name
        assert hits[0].score > 0.95, name
    # Sorted best first; whatever else is returned is weak (poker chips on the table).
    scores = [f.score for f in t1_faces]
    assert scores == sorted(scores, reverse=True)
    assert all(f.score < 0.9 for f in t1_faces[6:])


def test_landmarks_follow_the_face_convention(t1_faces: list[Face]) -> None:
    for face in (f for f in t1_faces if f.score > 0.9):
        lm = face.landmarks
        assert lm.shape == (5, 2)
        x1, y1, x2, y2 = face.box
        assert np.all((lm[:, 0] >= x1) & (lm[:, 0] <= x2) & (lm[:, 1] >= y1) & (lm[:, 1] <= y2))
        assert lm[0, 0] < lm[1, 0]  # left has the smaller x
        assert lm[3, 0] < lm[4, 0]
        assert max(lm[0, 1], lm[1, 1]) < min(lm[3, 1], lm[4, 1])  # eyes above mouth corners


def test_batch_equals_one_at_a_time(mtcnn_detector: Any, t1_half: np.ndarray) -> None:
    pair = [t1_half, np.ascontiguousarray(t1_half[:, ::-1])]
    batched = mtcnn_detector.detect_batch(np.stack(pair))
    for image, got in zip(pair, batched, strict=True):
        alone = mtcnn_detector.detect(image)
        assert len(got) == len(alone) >= 6
        for a, b in zip(got, alone, strict=True):
            # atol 1e-3 px: same network on the same pixels, only the batch layout differs.
            np.testing.assert_allclose(a.box, b.box, atol=1e-3)
            np.testing.assert_allclose(a.landmarks, b.landmarks, atol=1e-3)
            assert a.score == pytest.approx(b.score, abs=1e-5)
    # The mirrored photo's faces are the mirrored faces (to a few pixels).
    width = t1_half.shape[1]
    for face in (f for f in batched[0] if f.score > 0.9):
        mirrored_centre = (
            width - 1 - (face.box[0] + face.box[2]) / 2,
            (face.box[1] + face.box[3]) / 2,
        )
        assert sum(_contains(g, mirrored_centre) for g in batched[1] if g.score > 0.9) == 1


def test_final_threshold_drops_weak_detections(mtcnn_detector: Any, t1_half: np.ndarray) -> None:
    default = mtcnn_detector.detect(t1_half)
    strict = MTCNNDetector(thresholds=(0.6, 0.7, 0.9)).detect(t1_half)
    expected = [f for f in default if f.score > 0.9]
    assert len(strict) == len(expected) == 6
    for a, b in zip(strict, expected, strict=True):
        np.testing.assert_allclose(a.box, b.box, atol=1e-3)


def test_no_face_in_face_free_images(mtcnn_detector: Any, shipped_photos: Path) -> None:
    # The face-mask product photos that ship beside t1.jpg contain no face.
    for name in ("mask_blue.jpg", "mask_white.jpg"):
        assert mtcnn_detector.detect(load_image(shipped_photos / name)) == []
    assert mtcnn_detector.detect(np.zeros((200, 200, 3), np.uint8)) == []
    assert mtcnn_detector.detect(np.zeros((10, 10, 3), np.uint8)) == []  # smaller than 20 px


def test_grey_photo_is_detected(mtcnn_detector: Any, shipped_photos: Path) -> None:
    grey = load_image(shipped_photos / "Tom_Hanks_54745.png")[..., 0]  # 112×112, one channel
    faces = mtcnn_detector.detect(grey)
    assert len(faces) == 1
    assert faces[0].score > 0.99


def test_weights_are_loaded_weights_only(monkeypatch: pytest.MonkeyPatch) -> None:
    import torch

    calls: list[dict[str, Any]] = []
    real_load = torch.load

    def spy(*args: Any, **kwargs: Any) -> Any:
        calls.append(kwargs)
        return real_load(*args, **kwargs)

    monkeypatch.setattr(torch, "load", spy)
    MTCNNDetector()
    assert len(calls) == 3
    assert all(c.get("weights_only") is True for c in calls)


def test_network_is_blocked_in_this_folder() -> None:
    with pytest.raises(OSError, match="nothing may download"):
        socket.create_connection(("127.0.0.1", 9))


def test_argument_errors() -> None:
    det = MTCNNDetector.__new__(MTCNNDetector)  # only the batch checks run below
    with pytest.raises(InvalidInputError, match=r"`thresholds` must be three probabilities"):
        MTCNNDetector(thresholds=(0.6, 0.7))
    with pytest.raises(InvalidInputError, match=r"`min_face_size` must be >= 12; got 5"):
        MTCNNDetector(min_face_size=5)
    if not _has_cuda():
        with pytest.raises(
            InvalidInputError, match="`device`='cuda' was requested but CUDA is not available"
        ):
            MTCNNDetector(device="cuda")
    with pytest.raises(InvalidInputError, match="must all have the same size"):
        det.detect_batch([np.zeros((30, 30, 3), np.uint8), np.zeros((40, 30, 3), np.uint8)])
    with pytest.raises(TypeError, match="`images` must be an"):
        det.detect_batch(np.zeros((30, 30, 3), np.uint8))


def _has_cuda() -> bool:
    import torch

    return bool(torch.cuda.is_available())
