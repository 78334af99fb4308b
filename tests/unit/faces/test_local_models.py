"""Models loaded from user-supplied files (idaudit.faces._onnx, ._torch_encoders), with stand-ins.

Every stand-in has the published file's format: ONNX graphs with the input/output signature of
``det_10g.onnx`` / ``w600k_r50.onnx`` / LVFace, an AdaFace Lightning-style checkpoint with the
``model.``/``head.`` keys, a facenet-pytorch VGGFace2 state dict including its ``logits``.
Expected values are computed independently (numpy preprocessing, facenet-pytorch's own
network, torchvision's NMS, hand-derived boxes, and for AdaFace a key -> shape layout and a
functional forward pass written from AdaFace's net.py, in ``_standins``).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import onnxruntime
import pytest
import torch
from _standins import (
    PUBLISHED_UNITS,
    encoder_standin,
    export_onnx,
    lightning_checkpoint,
    published_ir_layout,
    reference_block,
    reference_ir_forward,
)

from idaudit.exceptions import InvalidInputError, MissingWeightsError
from idaudit.faces._onnx import (
    ArcFaceEncoder,
    LVFaceEncoder,
    OnnxEncoder,
    RetinaFaceDetector,
    _nms,
)
from idaudit.faces._torch_encoders import AdaFaceEncoder, InceptionResnetV1Encoder
from idaudit.faces._types import Detector, Encoder, Face
from idaudit.faces._weights import ENV_VAR

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


# ----------------------------------------------------------------------------- InceptionResnetV1


def test_inception_resnet_matches_facenet_pytorch_with_gradients(
    facenet_file: tuple[Path, dict[str, Any]],
) -> None:
    from facenet_pytorch import InceptionResnetV1

    path, state = facenet_file
    enc = InceptionResnetV1Encoder(weights=path.parent)
    assert isinstance(enc, Encoder)
    assert (enc.name, enc.dim, enc.input_size, enc.differentiable) == (
        "facenet-vggface2",
        512,
        160,
        True,
    )
    crops = np.random.default_rng(1).integers(0, 256, (1, 160, 160, 3), dtype=np.uint8)
    ref_net = InceptionResnetV1(pretrained=None).eval()
    ref_net.load_state_dict({k: v for k, v in state.items() if not k.startswith("logits.")})
    pixels = torch.from_numpy(crops).permute(0, 3, 1, 2).float()
    with torch.no_grad():
        expected = ref_net((pixels - 127.5) / 128.0).numpy()  # facenet's standardisation
    x = (pixels / 255.0).requires_grad_()
    emb = enc.forward(x)
    np.testing.assert_allclose(emb.detach().numpy(), expected, atol=1e-5)  # same float32 graph
    (emb @ torch.ones(512)).sum().backward()
    assert x.grad is not None
    assert torch.isfinite(x.grad).all()
    assert x.grad.abs().sum() > 0
    with pytest.raises(InvalidInputError, match=r"`x` must have shape \(n, 3, 160, 160\)"):
        enc.forward(torch.zeros(1, 3, 112, 112))


class _Probe(torch.nn.Module):
    """Stands in for a network: records what it is fed, returns its first 512 values."""

    def __init__(self, returns_norm: bool) -> None:
        super().__init__()
        self.returns_norm = returns_norm
        self.seen = torch.empty(0)

    def forward(self, x: torch.Tensor) -> Any:
        self.seen = x.detach().clone()
        emb = x.flatten(1)[:, :512]
        return (emb, emb.norm(dim=1, keepdim=True)) if self.returns_norm else emb


def test_inception_resnet_feeds_fixed_image_standardisation(
    facenet_file: tuple[Path, dict[str, Any]],
) -> None:
    # A trained network is sensitive to the exact scaling; a random stand-in barely is, so the
    # network input itself is checked: facenet's (x - 127.5) / 128 on RGB.
    enc = InceptionResnetV1Encoder(weights=facenet_file[0])
    enc.model = _Probe(returns_norm=False)
    crops = np.random.default_rng(2).integers(0, 256, (2, 160, 160, 3), dtype=np.uint8)
    enc.encode(crops)
    expected = (crops.transpose(0, 3, 1, 2) - 127.5) / 128.0
    np.testing.assert_allclose(enc.model.seen.numpy(), expected, atol=1e-6)


def test_inception_resnet_rejects_an_incomplete_state_dict(
    facenet_file: tuple[Path, dict[str, Any]], tmp_path: Path
) -> None:
    state = {k: v for k, v in facenet_file[1].items() if k != "last_linear.weight"}
    torch.save(state, tmp_path / "partial.pt")
    with pytest.raises(
        InvalidInputError,
        match=r"do not fit InceptionResnetV1: keys 1 missing \(first: last_linear\.weight\)",
    ):
        InceptionResnetV1Encoder(weights=tmp_path / "partial.pt")


# ----------------------------------------------------------------------------- AdaFace


#: One full width-changing block of the published IR-50, transcribed from AdaFace's net.py:
#: ``body.3`` is the first block of the second stage, ``BasicBlockIR(64, 128, stride=2)``.
_IR50_BODY3 = {
    # shortcut_layer = Sequential(Conv2d(64, 128, (1, 1), 2, bias=False), BatchNorm2d(128))
    "body.3.shortcut_layer.0.weight": (128, 64, 1, 1),
    "body.3.shortcut_layer.1.weight": (128,),
    "body.3.shortcut_layer.1.bias": (128,),
    "body.3.shortcut_layer.1.running_mean": (128,),
    "body.3.shortcut_layer.1.running_var": (128,),
    "body.3.shortcut_layer.1.num_batches_tracked": (),
    # res_layer.0 = BatchNorm2d(in_channel): the input width, 64
    "body.3.res_layer.0.weight": (64,),
    "body.3.res_layer.0.bias": (64,),
    "body.3.res_layer.0.running_mean": (64,),
    "body.3.res_layer.0.running_var": (64,),
    "body.3.res_layer.0.num_batches_tracked": (),
    # res_layer.1 = Conv2d(64, 128, (3, 3), (1, 1), 1, bias=False)
    "body.3.res_layer.1.weight": (128, 64, 3, 3),
    # res_layer.2 = BatchNorm2d(128)
    "body.3.res_layer.2.weight": (128,),
    "body.3.res_layer.2.bias": (128,),
    "body.3.res_layer.2.running_mean": (128,),
    "body.3.res_layer.2.running_var": (128,),
    "body.3.res_layer.2.num_batches_tracked": (),
    # res_layer.3 = PReLU(128)
    "body.3.res_layer.3.weight": (128,),
    # res_layer.4 = Conv2d(128, 128, (3, 3), stride 2, 1, bias=False)
    "body.3.res_layer.4.weight": (128, 128, 3, 3),
    # res_layer.5 = BatchNorm2d(128)
    "body.3.res_layer.5.weight": (128,),
    "body.3.res_layer.5.bias": (128,),
    "body.3.res_layer.5.running_mean": (128,),
    "body.3.res_layer.5.running_var": (128,),
    "body.3.res_layer.5.num_batches_tracked": (),
}

#: state-dict entries of the published IR-50, counted by hand from the architecture: the stem
#: has 7 (conv 1, BN 5, PReLU 1); each of the 24 blocks 18 in its residual branch (BN 5,
#: conv 1, BN 5, PReLU 1, conv 1, BN 5); the three width-changing blocks 6 more for the
#: projection shortcut (conv 1, BN 5); the head 10 (BN 5, linear 2, affine-free BN 3).
_IR50_ENTRIES = 7 + 24 * 18 + 3 * 6 + 10


def test_published_layout_listing_is_consistent() -> None:
    # The programmatic listing (used to build checkpoints) against the hand transcriptions.
    layout = published_ir_layout(50)
    assert len(layout) == _IR50_ENTRIES
    assert {k: v for k, v in layout.items() if k.startswith("body.3.")} == _IR50_BODY3
    projecting = {int(k.split(".")[1]) for k in layout if ".shortcut_layer." in k}
    assert projecting == {3, 7, 21}  # stage starts 3, 3 + 4, 3 + 4 + 14 change width


@pytest.fixture(scope="module")
def ir50_file(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, torch.Tensor]]:
    """An IR-50 checkpoint in AdaFace's published layout (values irrelevant: key mapping)."""
    # zero-stride views keep the file a few kB
    backbone = {
        k: torch.zeros(1).expand(s) if s else torch.zeros((), dtype=torch.long)
        for k, s in published_ir_layout(50).items()
    }
    path = tmp_path_factory.mktemp("adaface") / "adaface_ir50_ms1mv2.ckpt"
    torch.save(lightning_checkpoint(backbone), path)
    return path, backbone


def test_adaface_ir50_checkpoint_maps_every_key(ir50_file: tuple[Path, dict]) -> None:
    path, _ = ir50_file
    enc = AdaFaceEncoder(weights=path)
    assert enc.depth == 50
    assert enc.name == "adaface-ir50"
    loaded = {k: tuple(v.shape) for k, v in enc.model.state_dict().items()}
    assert loaded == published_ir_layout(50)  # every key, every shape, nothing else
    assert not any(t.is_meta for t in enc.model.state_dict().values())


def test_adaface_missing_key_is_named(ir50_file: tuple[Path, dict], tmp_path: Path) -> None:
    backbone = dict(ir50_file[1])
    del backbone["body.3.shortcut_layer.0.weight"]
    torch.save(lightning_checkpoint(backbone), tmp_path / "broken.ckpt")
    with pytest.raises(
        InvalidInputError,
        match=r"do not fit IR-50: keys 1 missing \(first: model\.body\.3\.shortcut_layer\.0\."
        r"weight\)\.",
    ):
        AdaFaceEncoder(weights=tmp_path / "broken.ckpt")


def test_adaface_wrong_shape_and_extra_keys_are_refused(
    ir50_file: tuple[Path, dict], tmp_path: Path
) -> None:
    backbone = dict(ir50_file[1])
    backbone["output_layer.3.bias"] = torch.zeros(256)
    torch.save(lightning_checkpoint(backbone), tmp_path / "shape.ckpt")
    with pytest.raises(
        InvalidInputError,
        match=r"Entry .model\.output_layer\.3\.bias. of .* has shape \(256,\); "
        r"the network needs \(512,\)",
    ):
        AdaFaceEncoder(weights=tmp_path / "shape.ckpt")
    backbone = {**ir50_file[1], "extra.weight": torch.zeros(3)}
    torch.save(lightning_checkpoint(backbone), tmp_path / "extra.ckpt")
    with pytest.raises(InvalidInputError, match=r"1 unexpected \(first: model\.extra\.weight\)"):
        AdaFaceEncoder(weights=tmp_path / "extra.ckpt")


def test_adaface_refuses_pickled_objects(ir50_file: tuple[Path, dict], tmp_path: Path) -> None:
    ckpt = lightning_checkpoint(ir50_file[1], hyper_parameters=argparse.Namespace(arch="ir_50"))
    torch.save(ckpt, tmp_path / "pickled.ckpt")
    with pytest.raises(
        InvalidInputError,
        match=r"holds Python objects besides tensors.*Unsupported global: GLOBAL "
        r"argparse\.Namespace",
    ):
        AdaFaceEncoder(weights=tmp_path / "pickled.ckpt")


def test_adaface_unreadable_checkpoint(tmp_path: Path) -> None:
    (tmp_path / "adaface_ir50_ms1mv2.ckpt").write_bytes(b"not a checkpoint")
    with pytest.raises(InvalidInputError, match="Could not read the checkpoint"):
        AdaFaceEncoder(weights=tmp_path)


def test_adaface_unknown_depth(tmp_path: Path) -> None:
    torch.save({"state_dict": {"model.body.0.res_layer.0.weight": torch.zeros(3)}}, tmp_path / "x")
    with pytest.raises(InvalidInputError, match="has 1 residual blocks; AdaFace IR networks"):
        AdaFaceEncoder(weights=tmp_path / "x")


@pytest.mark.parametrize(
    ("block", "shape"),
    [
        (0, (1, 64, 32, 32)),  # stride 2, same width: the MaxPool2d(1, 2) shortcut
        (1, (1, 64, 16, 16)),  # stride 1, identity shortcut
        (2, (1, 64, 16, 16)),  # stride 2, 64 -> 128: the projection shortcut
    ],
)
def test_ir_block_matches_a_hand_written_forward(
    ir18_file: tuple[Path, dict[str, torch.Tensor]], block: int, shape: tuple[int, ...]
) -> None:
    path, state = ir18_file
    enc = AdaFaceEncoder(weights=path)
    x = torch.randn(shape, generator=torch.Generator().manual_seed(block))
    stride = 1 if block == 1 else 2
    with torch.no_grad():
        got = enc.model.body[block](x)
        expected = reference_block(x, state, f"body.{block}", stride)
    # the same float32 operations in possibly another order: rounding only
    torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-5)


def test_adaface_matches_the_published_network_with_gradients(
    ir18_file: tuple[Path, dict[str, torch.Tensor]],
) -> None:
    path, state = ir18_file
    enc = AdaFaceEncoder(weights=path)
    assert isinstance(enc, Encoder)
    assert (enc.depth, enc.dim, enc.input_size, enc.differentiable) == (18, 512, 112, True)
    assert sum(PUBLISHED_UNITS[18]) == len(enc.model.body)
    crops = np.random.default_rng(4).integers(0, 256, (2, 112, 112, 3), dtype=np.uint8)
    # AdaFace's to_input: BGR, (x / 255 - 0.5) / 0.5, channels first.
    bgr = ((crops[..., ::-1] / 255.0 - 0.5) / 0.5).transpose(0, 3, 1, 2)
    with torch.no_grad():
        unit, norm = reference_ir_forward(
            torch.from_numpy(np.ascontiguousarray(bgr)).float(), state, 18
        )
    x = (torch.from_numpy(crops).permute(0, 3, 1, 2).float() / 255.0).requires_grad_()
    emb = enc.forward(x)
    # float32 through 18 layers, two implementations: rounding of order 1e-6
    np.testing.assert_allclose(emb.detach().numpy(), unit.numpy(), atol=1e-5)
    raw = enc.forward(x, normalize=False)  # the feature before AdaFace splits off its norm
    np.testing.assert_allclose(raw.detach().numpy(), (unit * norm).numpy(), rtol=1e-4, atol=1e-4)
    emb.sum().backward()
    assert x.grad is not None
    assert x.grad.abs().sum() > 0
    with pytest.raises(TypeError, match=r"`x` must be a torch\.Tensor"):
        enc.forward(np.zeros((1, 3, 112, 112)))  # type: ignore[arg-type]


def test_adaface_feeds_bgr_scaled_to_unit_range(ir18_file: tuple[Path, dict]) -> None:
    enc = AdaFaceEncoder(weights=ir18_file[0])
    enc.model = _Probe(returns_norm=True)
    crops = np.random.default_rng(5).integers(0, 256, (2, 112, 112, 3), dtype=np.uint8)
    enc.encode(crops)
    expected = (crops[..., ::-1].transpose(0, 3, 1, 2) / 255.0 - 0.5) / 0.5
    np.testing.assert_allclose(enc.model.seen.numpy(), expected, atol=1e-6)


def test_adaface_accepts_a_bare_backbone_state_dict(
    ir18_file: tuple[Path, dict], tmp_path: Path
) -> None:
    torch.save(ir18_file[1], tmp_path / "bare.pt")
    assert AdaFaceEncoder(weights=tmp_path / "bare.pt").depth == 18


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the no-CUDA refusal")
def test_torch_encoders_refuse_missing_cuda(ir18_file: tuple[Path, dict]) -> None:
    with pytest.raises(InvalidInputError, match="CUDA is not available"):
        AdaFaceEncoder(weights=ir18_file[0], device="cuda")
