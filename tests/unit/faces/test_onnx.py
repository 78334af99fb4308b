"""ONNX models loaded from user-supplied files (idaudit.faces._onnx), with stand-ins.

Every stand-in has the published file's format: ONNX graphs with the input/output signature of
``det_10g.onnx`` / ``w600k_r50.onnx`` / LVFace. Expected values are computed independently
(numpy preprocessing, torchvision's NMS, hand-derived boxes; stand-ins in ``tests/standins.py``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import onnxruntime
import pytest
import torch

from idaudit.exceptions import InvalidInputError, MissingWeightsError
from idaudit.faces._onnx import (
    ArcFaceEncoder,
    LVFaceEncoder,
    OnnxEncoder,
    RetinaFaceDetector,
    _nms,
)
from idaudit.faces._types import Detector, Encoder, Face
from idaudit.faces._weights import ENV_VAR
from standins import (
    encoder_standin,
    export_onnx,
)

pytestmark = pytest.mark.faces


# ----------------------------------------------------------------------------- detector


def _planted_image() -> np.ndarray:
    image = np.zeros((160, 160, 3), np.uint8)
    image[40:48, 64:72, 0] = 255  # red 8x8 block: stride-8 cell (row 5, col 8)
    image[96:128, 0:32, 2] = 230  # dimmer blue 32x32 block: stride-32 cell (row 3, col 0)
    return image


def test_detector_decodes_planted_faces_at_known_boxes(buffalo_dir: Path) -> None:
    det = RetinaFaceDetector(buffalo_dir, det_size=(160, 160), threads=1)
    faces = det.detect(_planted_image())
    assert len(faces) == 2  # each cell's second anchor is suppressed by NMS
    # Stride 8, anchor at (8*8, 8*5) = (64, 40): box (64-8, 40-16, 64+24, 40+32).
    np.testing.assert_allclose(faces[0].box, [56, 24, 88, 72], atol=1e-5)
    np.testing.assert_allclose(
        faces[0].landmarks, [[56, 32], [72, 32], [64, 40], [56, 48], [72, 48]], atol=1e-5
    )
    # sigmoid(20 * ((255 - 127.5) / 128 - 0.5))
    assert faces[0].score == pytest.approx(1 / (1 + np.exp(-20 * (127.5 / 128 - 0.5))), rel=1e-5)
    # Stride 32, anchor at (0, 96): box (0-32, 96-64, 0+96, 96+128), scored lower.
    np.testing.assert_allclose(faces[1].box, [-32, 32, 96, 224], atol=1e-5)
    assert faces[1].score < faces[0].score
    assert all(isinstance(f, Face) for f in faces)
    assert isinstance(det, Detector)


def test_detector_maps_boxes_back_to_the_original_scale(buffalo_dir: Path) -> None:
    image = np.zeros((80, 80, 3), np.uint8)
    image[20:24, 32:36, 0] = 255  # becomes the 8x8 block above after the 2x resize
    (face,) = RetinaFaceDetector(buffalo_dir, det_size=(160, 160)).detect(image)
    np.testing.assert_allclose(face.box, np.array([56, 24, 88, 72]) / 2, atol=1e-5)
    np.testing.assert_allclose(face.landmarks[2], [32, 20], atol=1e-5)


def test_detector_feeds_rgb_in_insightface_normalisation(buffalo_dir: Path) -> None:
    det = RetinaFaceDetector(buffalo_dir, det_size=(160, 160))
    # Aspect kept: 100x200 fits 160 wide -> 80 high, scale 0.8; the rest is black padding.
    image = np.full((100, 200, 3), 255, np.uint8)
    image[..., 1] = 0
    blob, scale = det._blob(image)
    assert blob.shape == (1, 3, 160, 160)
    assert scale == pytest.approx(0.8)
    expected = np.array([127.5, -127.5, 127.5])[:, None, None] / 128  # R, G, B of magenta
    np.testing.assert_allclose(blob[0, :, :80, :], np.broadcast_to(expected, (3, 80, 160)))
    np.testing.assert_allclose(blob[0, :, 80:, :], -127.5 / 128)


def test_detector_finds_nothing_on_a_blank_image(buffalo_dir: Path) -> None:
    det = RetinaFaceDetector(buffalo_dir, det_size=(160, 160))
    assert det.detect(np.zeros((120, 90, 3), np.uint8)) == []


def test_detector_accepts_grey_images_like_the_other_models(buffalo_dir: Path) -> None:
    det = RetinaFaceDetector(buffalo_dir, det_size=(160, 160))
    assert det.detect(np.zeros((64, 64), np.uint8)) == []
    with pytest.raises(TypeError, match="`image` must have dtype uint8, uint16 or float"):
        det.detect(np.zeros((64, 64, 3), np.int32))


def test_detector_threads_and_parameter_checks(buffalo_dir: Path) -> None:
    det = RetinaFaceDetector(buffalo_dir, threads=3)
    assert det.session.get_session_options().intra_op_num_threads == 3
    assert RetinaFaceDetector(buffalo_dir).session.get_session_options().intra_op_num_threads == 0
    with pytest.raises(InvalidInputError, match=r"`det_size` must be .* multiples of 32"):
        RetinaFaceDetector(buffalo_dir, det_size=(100, 640))
    with pytest.raises(InvalidInputError, match=r"`score_threshold` must be in \[0, 1\]"):
        RetinaFaceDetector(buffalo_dir, score_threshold=1.5)
    with pytest.raises(InvalidInputError, match="`threads` must be >= 1"):
        RetinaFaceDetector(buffalo_dir, threads=0)


def test_nms_matches_torchvision() -> None:
    from torchvision.ops import nms

    rng = np.random.default_rng(7)
    xy = rng.uniform(0, 100, (300, 2))
    boxes = np.concatenate([xy, xy + rng.uniform(5, 40, (300, 2))], axis=1)
    scores = rng.uniform(size=300)
    for iou in (0.3, 0.5):
        expected = nms(torch.from_numpy(boxes), torch.from_numpy(scores), iou).tolist()
        assert _nms(boxes, scores, iou) == expected


# ----------------------------------------------------------------------------- ONNX encoders


def _reference_embedding(crops: np.ndarray, model: torch.nn.Module, bgr: bool) -> np.ndarray:
    """The stand-in's output computed in numpy from the published preprocessing."""
    x = crops.astype(np.float64)[..., ::-1] if bgr else crops.astype(np.float64)
    x = (x - 127.5) / 127.5
    x = x.transpose(0, 3, 1, 2).reshape(len(x), 3, 14, 8, 14, 8).mean(axis=(3, 5))
    linear = model[2]
    out = x.reshape(len(x), -1) @ linear.weight.detach().double().numpy().T
    out += linear.bias.detach().double().numpy()
    return out / np.linalg.norm(out, axis=1, keepdims=True)


@pytest.fixture(scope="module")
def crops() -> np.ndarray:
    return np.random.default_rng(3).integers(0, 256, (5, 112, 112, 3), dtype=np.uint8)


def test_arcface_encoder_matches_insightface_preprocessing(
    buffalo_dir: Path, crops: np.ndarray
) -> None:
    enc = ArcFaceEncoder(buffalo_dir, batch_size=2)  # several onnxruntime calls
    emb = enc.encode(crops)
    assert emb.dtype == np.float32
    assert emb.shape == (5, 512)
    expected = _reference_embedding(crops, encoder_standin(), bgr=False)
    # float32 network vs float64 reference on O(1) values
    np.testing.assert_allclose(emb, expected, atol=2e-5)
    wrong_order = _reference_embedding(crops, encoder_standin(), bgr=True)
    assert np.abs(emb - wrong_order).max() > 1e-2
    raw = enc.encode(crops, normalize=False)  # the network output itself
    assert np.linalg.norm(raw, axis=1).min() > 2.0
    np.testing.assert_allclose(raw / np.linalg.norm(raw, axis=1, keepdims=True), emb, atol=1e-6)
    assert isinstance(enc, Encoder)
    assert enc.device == "cpu"
    assert (enc.name, enc.dim, enc.input_size, enc.differentiable) == (
        "arcface-w600k-r50",
        512,
        112,
        False,
    )


def test_arcface_encoder_found_through_the_environment(
    buffalo_dir: Path, monkeypatch: pytest.MonkeyPatch, crops: np.ndarray
) -> None:
    monkeypatch.setenv(ENV_VAR, str(buffalo_dir.parent))
    enc = ArcFaceEncoder(threads=2)
    assert enc.weights_path == (buffalo_dir / "w600k_r50.onnx").resolve()
    assert enc.session.get_session_options().intra_op_num_threads == 2
    assert enc.encode(crops[:1]).shape == (1, 512)


def test_arcface_encoder_missing_file_is_reported(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(ENV_VAR, raising=False)
    with pytest.raises(MissingWeightsError, match=r"'w600k_r50.onnx' of model 'buffalo_l'"):
        ArcFaceEncoder(tmp_path)


def test_onnx_encoder_with_a_fixed_batch_axis(tmp_path: Path, crops: np.ndarray) -> None:
    path = export_onnx(
        encoder_standin(),
        torch.zeros(1, 3, 112, 112),
        tmp_path / "b1.onnx",
        1,
        dynamic_batch=False,
    )
    enc = OnnxEncoder(path, mean=127.5, std=127.5, name="fixed")
    np.testing.assert_allclose(
        enc.encode(crops), _reference_embedding(crops, encoder_standin(), bgr=False), atol=2e-5
    )


def test_onnx_encoder_bgr_and_per_channel_normalisation(tmp_path: Path, crops: np.ndarray) -> None:
    path = export_onnx(
        encoder_standin(), torch.zeros(2, 3, 112, 112), tmp_path / "e.onnx", 1, dynamic_batch=True
    )
    enc = OnnxEncoder(path, mean=(127.5, 127.5, 127.5), std=127.5, bgr=True)
    np.testing.assert_allclose(
        enc.encode(crops), _reference_embedding(crops, encoder_standin(), bgr=True), atol=2e-5
    )


def test_onnx_encoder_input_checks(buffalo_dir: Path, crops: np.ndarray) -> None:
    enc = ArcFaceEncoder(buffalo_dir)
    assert enc.encode(np.zeros((0, 112, 112, 3), np.uint8)).shape == (0, 512)
    with pytest.raises(InvalidInputError, match=r"One crop needs a leading axis: `crop\[None\]`"):
        enc.encode(crops[0])  # the protocol's rule: no guessing that 3-D means one crop
    with pytest.raises(InvalidInputError, match=r"`crops` must have shape \(n, 112, 112, 3\)"):
        enc.encode(np.zeros((2, 160, 160, 3), np.uint8))
    with pytest.raises(TypeError, match="`crops` must have dtype uint8"):
        enc.encode(crops.astype(np.uint16))
    with pytest.raises(TypeError, match="has no differentiable forward"):
        enc.forward(torch.zeros(1, 3, 112, 112))
    with pytest.raises(InvalidInputError, match="`input_size` must match the model's input"):
        OnnxEncoder(enc.weights_path, input_size=160)


class _SessionOnCPU:
    """Stands in for ``onnxruntime.InferenceSession`` on a machine whose CUDA provider is
    compiled in: records the providers asked for, runs on the CPU, and reports ``active`` as
    the providers in use (onnxruntime's own fallback reports only the CPU)."""

    requested: ClassVar[list[Any]] = []
    active: ClassVar[list[str]] = ["CPUExecutionProvider"]
    real = onnxruntime.InferenceSession

    def __init__(self, path: str, sess_options: Any = None, providers: Any = None) -> None:
        _SessionOnCPU.requested = list(providers)
        self._session = self.real(
            path, sess_options=sess_options, providers=["CPUExecutionProvider"]
        )

    def get_providers(self) -> list[str]:
        return list(self.active)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._session, name)


@pytest.fixture
def cuda_build(monkeypatch: pytest.MonkeyPatch) -> type[_SessionOnCPU]:
    """An onnxruntime that lists the CUDA provider (this machine's build has none)."""
    available = ["CUDAExecutionProvider", "CPUExecutionProvider"]
    monkeypatch.setattr(onnxruntime, "get_available_providers", lambda: available)
    monkeypatch.setattr(onnxruntime, "InferenceSession", _SessionOnCPU)
    monkeypatch.setattr(_SessionOnCPU, "active", ["CPUExecutionProvider"])
    return _SessionOnCPU


def test_onnx_cuda_that_silently_runs_on_cpu_is_refused(
    buffalo_dir: Path, cuda_build: type[_SessionOnCPU]
) -> None:
    with pytest.raises(
        InvalidInputError,
        match=r"`device` is 'cuda' but onnxruntime could not start its CUDA provider .*"
        r"\(active providers: \['CPUExecutionProvider'\]\)",
    ):
        ArcFaceEncoder(buffalo_dir, device="cuda")
    with pytest.raises(InvalidInputError, match="could not start its CUDA provider"):
        RetinaFaceDetector(buffalo_dir, device="cuda")


def test_onnx_cuda_device_index_reaches_the_provider(
    buffalo_dir: Path, cuda_build: type[_SessionOnCPU], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(cuda_build, "active", ["CUDAExecutionProvider", "CPUExecutionProvider"])
    enc = ArcFaceEncoder(buffalo_dir, device="cuda:1")
    assert enc.device == "cuda:1"
    assert cuda_build.requested == [
        ("CUDAExecutionProvider", {"device_id": 1}),
        "CPUExecutionProvider",
    ]
    assert ArcFaceEncoder(buffalo_dir, device="cuda").device == "cuda:0"


def test_onnx_device_spellings(buffalo_dir: Path) -> None:
    if "CUDAExecutionProvider" not in onnxruntime.get_available_providers():
        with pytest.raises(InvalidInputError, match="has no CUDAExecutionProvider"):
            ArcFaceEncoder(buffalo_dir, device="cuda")
    with pytest.raises(InvalidInputError, match="`device` must be 'cpu', 'cuda' or 'cuda:<index>'"):
        ArcFaceEncoder(buffalo_dir, device="gpu")
    with pytest.raises(TypeError, match="`device` must be a str"):
        ArcFaceEncoder(buffalo_dir, device=0)  # type: ignore[arg-type]


def test_corrupt_onnx_file_gives_a_clear_error(tmp_path: Path) -> None:
    bad = tmp_path / "w600k_r50.onnx"
    bad.write_bytes(b"this is not a protobuf")
    with pytest.raises(InvalidInputError, match="Could not load the ONNX model at"):
        ArcFaceEncoder(bad)


def test_lvface_variant_picks_the_file(tmp_path: Path, crops: np.ndarray) -> None:
    export_onnx(
        encoder_standin(),
        torch.zeros(2, 3, 112, 112),
        tmp_path / "lvface" / "LVFace-S_Glint360K.onnx",
        1,
        dynamic_batch=True,
    )
    enc = LVFaceEncoder(tmp_path, variant="S")
    assert enc.name == "lvface-s-glint360k"
    # LVFace's (x / 255 - 0.5) / 0.5 on RGB is the same map as ArcFace's.
    np.testing.assert_allclose(
        enc.encode(crops), _reference_embedding(crops, encoder_standin(), bgr=False), atol=2e-5
    )
    with pytest.raises(MissingWeightsError, match=r"'LVFace-B_Glint360K\.onnx' of model 'lvface'"):
        LVFaceEncoder(tmp_path / "lvface")
    with pytest.raises(InvalidInputError, match="`variant` must be one of T, S, B, L"):
        LVFaceEncoder(tmp_path, variant="XL")


def test_encoder_align_uses_the_template(buffalo_dir: Path) -> None:
    from idaudit.faces._align import arcface_template

    enc = ArcFaceEncoder(buffalo_dir)
    image = np.random.default_rng(0).integers(0, 256, (200, 200, 3), dtype=np.uint8)
    face = Face(np.array([30.0, 30, 150, 150]), 0.9, arcface_template(112) + 20.0)
    crop = enc.align(image, face)
    assert crop.shape == (112, 112, 3)
    np.testing.assert_array_equal(crop, image[20:132, 20:132])  # a pure shift by 20 px
