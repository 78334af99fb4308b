from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from PIL import Image
from scipy.spatial.distance import cdist

from idaudit.exceptions import InvalidInputError
from idaudit.faces import DLIB_THRESHOLD, DlibDetector, DlibEncoder, Encoder, Face, load_image

pytestmark = pytest.mark.faces


@pytest.fixture(scope="module")
def people(mtcnn_detector: Any, t1_photo: np.ndarray, shipped_photos: Path) -> dict[str, Any]:
    """Eight different real people: six in t1.jpg, Tom Hanks, and the astronaut Eileen Collins."""
    skdata = pytest.importorskip("skimage.data")
    faces = [f for f in mtcnn_detector.detect(t1_photo) if f.score > 0.9]
    assert len(faces) == 6
    hanks = load_image(shipped_photos / "Tom_Hanks_54745.png")
    astronaut = np.asarray(skdata.astronaut())
    sources = [(t1_photo, f) for f in faces]
    for image in (hanks, astronaut):
        sources.append((image, max(mtcnn_detector.detect(image), key=lambda f: f.area)))
    return {"faces": faces, "sources": sources, "astronaut": astronaut}


@pytest.fixture(scope="module")
def raw_descriptors(people: dict[str, Any], dlib_encoder: Any) -> np.ndarray:
    chips = np.stack([dlib_encoder.align(img, face) for img, face in people["sources"]])
    return dlib_encoder.encode(chips, normalize=False)


def test_follows_the_encoder_protocol(dlib_encoder: Any) -> None:
    assert isinstance(dlib_encoder, Encoder)
    assert (dlib_encoder.name, dlib_encoder.dim, dlib_encoder.input_size) == (
        "dlib-resnet-v1",
        128,
        150,
    )
    assert dlib_encoder.differentiable is False
    assert dlib_encoder.distance_threshold == DLIB_THRESHOLD == 0.6


def test_different_people_are_farther_than_dlib_threshold(raw_descriptors: np.ndarray) -> None:
    dist = cdist(raw_descriptors, raw_descriptors)
    cross = dist[np.triu_indices(len(dist), k=1)]
    assert cross.size == 28
    # Measured minimum 0.638 (two of the men in t1.jpg); every pair must clear dlib's 0.6.
    assert cross.min() > DLIB_THRESHOLD


def test_mirrored_photo_keeps_every_identity(
    mtcnn_detector: Any,
    dlib_encoder: Any,
    t1_photo: np.ndarray,
    people: dict[str, Any],
    raw_descriptors: np.ndarray,
) -> None:
    mirrored = np.ascontiguousarray(t1_photo[:, ::-1])
    width = t1_photo.shape[1]
    found = [f for f in mtcnn_detector.detect(mirrored) if f.score > 0.9]
    for k, face in enumerate(people["faces"]):
        # Pair faces by position (the mirror image of the box centre), not by embedding.
        cx, cy = width - 1 - (face.box[0] + face.box[2]) / 2, (face.box[1] + face.box[3]) / 2
        twin = next(g for g in found if g.box[0] <= cx <= g.box[2] and g.box[1] <= cy <= g.box[3])
        d = dlib_encoder.encode(dlib_encoder.align(mirrored, twin)[None], normalize=False)
        assert np.linalg.norm(d[0] - raw_descriptors[k]) < DLIB_THRESHOLD  # measured ≤ 0.29


def test_recropped_and_rescaled_face_stays_the_same_person(
    mtcnn_detector: Any,
    dlib_encoder: Any,
    t1_photo: np.ndarray,
    people: dict[str, Any],
    raw_descriptors: np.ndarray,
) -> None:
    face = people["faces"][0]
    x1, y1, x2, y2 = face.box
    w, h = x2 - x1, y2 - y1
    crop = t1_photo[
        max(int(y1 - 0.7 * h), 0) : int(y2 + h), max(int(x1 - w), 0) : int(x2 + 0.5 * w)
    ]
    small = np.asarray(
        Image.fromarray(crop).resize((crop.shape[1] * 2 // 3, crop.shape[0] * 2 // 3))
    )
    again = max(mtcnn_detector.detect(small), key=lambda f: f.area)
    d = dlib_encoder.encode(dlib_encoder.align(small, again)[None], normalize=False)
    assert np.linalg.norm(d[0] - raw_descriptors[0]) < DLIB_THRESHOLD  # measured ≈ 0.1


def test_normalised_output_is_the_raw_one_scaled(
    dlib_encoder: Any, people: dict[str, Any], raw_descriptors: np.ndarray
) -> None:
    img, face = people["sources"][-1]
    chip = dlib_encoder.align(img, face)
    unit = dlib_encoder.encode(chip[None])
    assert unit.dtype == np.float32
    raw = raw_descriptors[-1]
    # rtol 1e-6: float32 rounding of the same numbers.
    np.testing.assert_allclose(unit[0], raw / np.linalg.norm(raw), rtol=1e-6, atol=1e-7)
    # dlib's raw descriptors are not unit vectors: that is why normalize=False exists.
    assert not np.allclose(np.linalg.norm(raw_descriptors, axis=1), 1.0, atol=0.05)


def test_batch_equals_one_at_a_time(dlib_encoder: Any, people: dict[str, Any]) -> None:
    chips = np.stack([dlib_encoder.align(img, face) for img, face in people["sources"][:3]])
    batched = dlib_encoder.encode(chips)
    single = np.concatenate([dlib_encoder.encode(c[None]) for c in chips])
    np.testing.assert_allclose(batched, single, rtol=0, atol=1e-6)  # float32 round-off only
    assert dlib_encoder.encode(np.zeros((0, 150, 150, 3), np.uint8)).shape == (0, 128)


def test_chip_is_dlibs_own(dlib_encoder: Any, people: dict[str, Any]) -> None:
    dlib = pytest.importorskip("dlib")
    from idaudit.faces._dlib import _dlib_file

    img, face = people["sources"][0]
    predictor = dlib.shape_predictor(str(_dlib_file("shape_predictor_5_face_landmarks.dat", None)))
    x1, y1, x2, y2 = (round(float(v)) for v in face.box)
    shape = predictor(img, dlib.rectangle(x1, y1, x2, y2))
    expected = dlib.get_face_chip(img, shape, size=150, padding=0.25)
    np.testing.assert_array_equal(dlib_encoder.align(img, face), expected)


def test_forward_points_to_the_torch_port(dlib_encoder: Any) -> None:
    with pytest.raises(TypeError, match="TorchDlibEncoder"):
        dlib_encoder.forward(None)


def test_bad_chips(dlib_encoder: Any) -> None:
    with pytest.raises(InvalidInputError, match=r"`crops` must have shape \(n, 150, 150, 3\)"):
        dlib_encoder.encode(np.zeros((150, 150, 3), np.uint8))
    with pytest.raises(TypeError, match="`crops` must be uint8"):
        dlib_encoder.encode(np.zeros((1, 150, 150, 3), np.float32))
    with pytest.raises(TypeError, match=r"`face` must be an idaudit\.faces\.Face"):
        dlib_encoder.align(np.zeros((20, 20, 3), np.uint8), (0, 0, 10, 10))


def test_missing_weights_folder_is_reported(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match=r"of model 'dlib' was not found at"):
        DlibEncoder(weights=tmp_path)


def test_hog_detector_agrees_with_mtcnn(people: dict[str, Any], t1_photo: np.ndarray) -> None:
    faces = DlibDetector().detect(t1_photo)
    assert len(faces) == 6
    assert all(0.5 < f.score < 1.0 for f in faces)
    for mt in people["faces"]:
        # The same person: box centres within half a face, landmarks within 12 px (HOG boxes are
        # tighter and the two detectors place "nose tip" differently).
        centre = (mt.box[:2] + mt.box[2:]) / 2
        match = min(faces, key=lambda f: np.linalg.norm((f.box[:2] + f.box[2:]) / 2 - centre))
        assert (
            np.linalg.norm((match.box[:2] + match.box[2:]) / 2 - centre)
            < (mt.box[2] - mt.box[0]) / 2
        )
        eyes_mouth = [0, 1, 3, 4]
        assert np.abs(match.landmarks[eyes_mouth] - mt.landmarks[eyes_mouth]).max() < 12
        assert isinstance(match, Face)
