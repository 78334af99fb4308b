"""TorchDlibEncoder and the dlib ``.dat`` reader, checked against dlib itself."""

from __future__ import annotations

import collections
import importlib.util
from pathlib import Path

import numpy as np
import pytest
import torch

from idaudit.exceptions import InvalidInputError, MissingWeightsError
from idaudit.faces._dlib_format import DlibFormatError, _Reader, parse_dnn
from idaudit.faces._dlib_torch import TorchDlibEncoder
from idaudit.faces._types import Encoder, Face

dlib = pytest.importorskip("dlib")
# located, never imported: the package itself needs pkg_resources
if importlib.util.find_spec("face_recognition_models") is None:
    pytest.skip("face-recognition-models is not installed", allow_module_level=True)
pytestmark = pytest.mark.faces

# dlib computes in float32 with its own conv kernels; 1e-4 on raw descriptors (entries ~0.1,
# pairwise distances ~0.6) is the parity the port promises, ~1e-6 is what it reaches.
PARITY_ATOL = 1e-4


def _conv_specs() -> list[tuple[int, int, int, int]]:
    """(out, in, kernel, stride) of every conv of dnn_face_recognition_ex.cpp, input first."""
    specs = [(32, 3, 7, 2)]
    c_in = 32
    # alevel4 .. alevel0 as (width, units, first unit downsamples)
    for width, n_units, down in [(32, 3, False), (64, 4, True), (128, 3, True), (256, 3, True)]:
        for u in range(n_units):
            stride = 2 if (down and u == 0) else 1
            specs += [(width, c_in, 3, stride), (width, width, 3, 1)]
            c_in = width
    specs += [(256, 256, 3, 2), (256, 256, 3, 1)]  # alevel0: one ares_down<256>
    return specs


@pytest.fixture(scope="module")
def encoder() -> TorchDlibEncoder:
    return TorchDlibEncoder()


@pytest.fixture(scope="module")
def dlib_model(encoder: TorchDlibEncoder):
    return dlib.face_recognition_model_v1(str(encoder.weights_path))


@pytest.fixture(scope="module")
def shape_predictor(encoder: TorchDlibEncoder):
    return dlib.shape_predictor(
        str(encoder.weights_path.with_name("shape_predictor_5_face_landmarks.dat"))
    )


def _photos() -> dict[str, np.ndarray]:
    import skimage.data
    import skimage.io

    photos = {"astronaut": skimage.data.astronaut()}
    spec = importlib.util.find_spec("insightface")
    if spec is not None and spec.submodule_search_locations:
        root = Path(next(iter(spec.submodule_search_locations)))
        t1 = root / "data" / "images" / "t1.jpg"
        if t1.is_file():
            photos["t1"] = skimage.io.imread(t1)[..., :3]
    return photos


@pytest.fixture(scope="module")
def face_chips(shape_predictor) -> np.ndarray:
    """150×150 chips cut by dlib's own pipeline: HOG detector, 5-point model, get_face_chip."""
    detector = dlib.get_frontal_face_detector()
    chips = []
    for image in _photos().values():
        image = np.ascontiguousarray(image)
        for rect in detector(image, 1):
            shape = shape_predictor(image, rect)
            chips.append(np.asarray(dlib.get_face_chip(image, shape, size=150, padding=0.25)))
    assert len(chips) >= 2  # the astronaut's face (and her mission patch) at least
    return np.stack(chips)


def _dlib_descriptors(model, chips: np.ndarray) -> np.ndarray:
    return np.array([np.asarray(model.compute_face_descriptor(c)) for c in chips])


# ---------------------------------------------------------------------------------- format


def test_reader_decodes_dlib_primitive_encodings() -> None:
    # Byte strings built by hand from dlib/serialize.h: control byte = size | 0x80 if negative.
    assert _Reader(b"\x81\x1c", "t").read_int() == -28
    assert _Reader(b"\x02\x00\x7d", "t").read_int() == 32000
    assert _Reader(b"\x01\x0d", "t").read_int(signed=False) == 13
    # float_details: mantissa 0x99999a, exponent -24 -> float32(0.6)
    assert _Reader(b"\x03\x9a\x99\x99\x81\x18", "t").read_float() == float(np.float32(0.6))
    # exponent 32000 encodes +inf, mantissa 0 is one zero byte
    assert _Reader(b"\x01\x00\x02\x00\x7d", "t").read_float() == float("inf")
    assert _Reader(b"\x01\x05relu_", "t").read_string() == "relu_"  # length, then bytes
    r = _Reader(b"10", "t")
    assert (r.read_bool(), r.read_bool()) == (True, False)
    with pytest.raises(DlibFormatError, match="invalid integer control byte 0x81 at byte offset 0"):
        _Reader(b"\x81\x01", "t").read_int(signed=False)
    with pytest.raises(DlibFormatError, match="invalid bool"):
        _Reader(b"x", "t").read_bool()


def test_parse_reads_every_byte_into_the_published_architecture(
    encoder: TorchDlibEncoder,
) -> None:
    net = parse_dnn(encoder.weights_path)
    assert net.n_bytes == encoder.weights_path.stat().st_size
    kinds = collections.Counter(layer.kind for layer in net.layers)
    # 29 convs each with an affine and relu; 14 residual units = 14 add_prev, 14 tags + 4 x
    # (tag2, skip1) in the downsampling units; 4 skip pools + avg_pool_everything.
    assert kinds == {
        "input": 1, "con": 29, "affine": 29, "relu": 29, "max_pool": 1,
        "add_prev": 14, "tag_or_skip": 22, "avg_pool": 5, "fc": 1,
    }  # fmt: skip
    convs = [layer.params for layer in net.layers if layer.kind == "con"]
    got = [(*p["weight"].shape[:3], p["stride_y"]) for p in convs]
    assert got == _conv_specs()
    for p in convs:  # dlib pads only stride-1 convs (by k // 2)
        assert p["padding_y"] == p["padding_x"] == (p["nr"] // 2 if p["stride_y"] == 1 else 0)
    expected = sum(o * i * k * k + 3 * o for o, i, k, _ in _conv_specs()) + 128 * 256
    assert net.n_parameters == expected
    assert net.layers[-1].params["weight"].shape == (128, 256)
    assert net.layers[-1].params["bias_mode"] == 1  # fc_no_bias
    assert net.loss["distance_threshold"] == pytest.approx(0.6, rel=1e-6)  # stored as float32
    assert net.loss["margin"] == pytest.approx(0.04, rel=1e-6)
    np.testing.assert_array_equal(
        net.layers[0].params["avg_rgb"], np.float32([122.782, 117.001, 104.298])
    )


@pytest.mark.parametrize(
    ("edit", "match"),
    [
        (lambda b: b[:-100], "unexpected end of file"),
        (lambda b: b + b"\x00", "1 trailing bytes after the network at byte offset 22466066"),
        (lambda b: b"\x01\x02" + b[2:], "unsupported add_loss_layer version 2"),
    ],
)
def test_parse_rejects_damaged_files_naming_the_offset(
    encoder: TorchDlibEncoder, tmp_path: Path, edit, match: str
) -> None:
    path = tmp_path / "damaged.dat"
    path.write_bytes(edit(encoder.weights_path.read_bytes()))
    with pytest.raises(DlibFormatError, match=match):
        parse_dnn(path)
    with pytest.raises(InvalidInputError, match=r"SHA-256 of .* the file is corrupt"):
        TorchDlibEncoder(weights=path)  # not the published file
    with pytest.raises(ValueError, match="byte offset"):
        TorchDlibEncoder(weights=path, verify=False)  # the parser still checks the structure


# ---------------------------------------------------------------------------------- parity


def test_matches_dlib_on_real_face_chips(encoder, dlib_model, face_chips) -> None:
    expected = _dlib_descriptors(dlib_model, face_chips)
    got = encoder.encode(face_chips, normalize=False)
    np.testing.assert_allclose(got, expected, rtol=0, atol=PARITY_ATOL)


def test_matches_dlib_on_noise_and_constant_chips(encoder, dlib_model) -> None:
    rng = np.random.default_rng(7)
    chips = rng.integers(0, 256, (5, 150, 150, 3), dtype=np.uint8)
    chips[2] = 0  # constant chips isolate the input layer's mean and scale
    chips[3] = 255
    chips[4] = np.uint8([200, 30, 90])  # distinct channels: catches an RGB/BGR swap
    expected = _dlib_descriptors(dlib_model, chips)
    np.testing.assert_allclose(encoder.encode(chips, normalize=False), expected, atol=PARITY_ATOL)


def test_batched_equals_one_at_a_time(face_chips) -> None:
    enc = TorchDlibEncoder(batch_size=3)
    batched = enc.encode(face_chips, normalize=False)
    single = np.concatenate([enc.encode(c[None], normalize=False) for c in face_chips])
    # float32 kernels may block a batch differently; the project-wide bound is 1e-6
    np.testing.assert_allclose(batched, single, rtol=0, atol=1e-6)


def test_cpu_embeddings_do_not_depend_on_threads_batch_size_or_load(
    face_chips, monkeypatch: pytest.MonkeyPatch
) -> None:
    # default_threads follows the load average; float32 convolutions split over a different
    # number of threads round differently, so encode must not let the count reach the kernels
    import idaudit._device as device

    chips = np.concatenate([face_chips] * 5)[:19]  # blocks of 8, 8 and 3
    results, before = [], torch.get_num_threads()
    try:
        for threads, batch_size in ((1, 64), (2, 64), (3, 5), (2, 1)):
            monkeypatch.setattr(device, "default_threads", lambda t=threads: t)
            torch.set_num_threads(threads)
            enc = TorchDlibEncoder(batch_size=batch_size)
            results.append(enc.encode(chips, normalize=False))
    finally:
        torch.set_num_threads(before)
    for other in results[1:]:
        np.testing.assert_array_equal(other, results[0])
    # a caller that slices the chips itself (EncodedGenerator's batches) gets the same rows
    enc = TorchDlibEncoder()
    for step in (1, 3, 5, 19):
        sliced = np.concatenate(
            [enc.encode(chips[s : s + step], normalize=False) for s in range(0, len(chips), step)]
        )
        np.testing.assert_array_equal(sliced, results[0])


def test_encode_normalises_raw_descriptors(encoder, face_chips) -> None:
    raw = encoder.encode(face_chips, normalize=False)
    unit = encoder.encode(face_chips)
    assert unit.dtype == np.float32
    assert unit.shape == (len(face_chips), 128)
    np.testing.assert_allclose(np.linalg.norm(unit, axis=1), 1.0, rtol=1e-6)
    np.testing.assert_allclose(unit, raw / np.linalg.norm(raw, axis=1, keepdims=True), rtol=1e-6)


def test_forward_on_unit_range_images_matches_encode(encoder, face_chips) -> None:
    x = torch.from_numpy(face_chips).permute(0, 3, 1, 2).float() / 255
    with torch.no_grad():
        raw = encoder(x, normalize=False).numpy()
        unit = encoder(x).numpy()  # the Encoder contract: unit rows, like encode
    # x * 255 differs from the integer pixel by float32 rounding only
    np.testing.assert_allclose(raw, encoder.encode(face_chips, normalize=False), atol=1e-5)
    np.testing.assert_allclose(unit, encoder.encode(face_chips), atol=1e-5)
    np.testing.assert_allclose(np.linalg.norm(unit, axis=1), 1.0, atol=1e-6)


def test_empty_batch_gives_empty_result(encoder) -> None:
    assert encoder.encode(np.zeros((0, 150, 150, 3), np.uint8)).shape == (0, 128)


# ---------------------------------------------------------------------------------- gradients


def test_gradients_flow_to_the_input(encoder, face_chips) -> None:
    x = (torch.from_numpy(face_chips[:2]).permute(0, 3, 1, 2).float() / 255).requires_grad_()
    encoder(x).sum().backward()
    assert x.grad is not None
    assert torch.isfinite(x.grad).all()
    assert (x.grad != 0).float().mean() > 0.5


def test_gradient_matches_finite_difference() -> None:
    enc = TorchDlibEncoder(dtype=torch.float64)
    gen = torch.Generator().manual_seed(3)
    # Noise, not a face chip: flat image regions tie in the max-pool, where the network has
    # no derivative and a finite difference averages the two one-sided ones.
    x = torch.rand((1, 3, 150, 150), generator=gen, dtype=torch.float64).requires_grad_()
    v = torch.randn((1, 3, 150, 150), generator=gen, dtype=torch.float64)
    w = torch.randn((1, 128), generator=gen, dtype=torch.float64)
    (enc(x) * w).sum().backward()
    assert x.grad is not None
    analytic = float((x.grad * v).sum())
    eps = 1e-6  # central difference error O(eps²), rounding O(1e-16 / eps)
    with torch.no_grad():
        numeric = float(((enc(x + eps * v) - enc(x - eps * v)) * w).sum() / (2 * eps))
    assert analytic == pytest.approx(numeric, rel=1e-6)


# ---------------------------------------------------------------------------------- contract


def test_satisfies_the_encoder_protocol(encoder) -> None:
    assert isinstance(encoder, Encoder)
    assert (encoder.name, encoder.dim, encoder.input_size) == ("dlib-resnet-v1-torch", 128, 150)
    assert encoder.differentiable is True
    assert encoder.distance_threshold == pytest.approx(0.6, rel=1e-6)
    assert not any(p.requires_grad for p in encoder.parameters())


def test_exported_from_faces_package() -> None:
    import idaudit.faces

    assert idaudit.faces.TorchDlibEncoder is TorchDlibEncoder


def test_align_cuts_dlibs_chip(encoder, shape_predictor) -> None:
    import skimage.data

    image = skimage.data.astronaut()
    rect = dlib.get_frontal_face_detector()(image, 1)[0]
    face = Face(
        box=np.array([rect.left(), rect.top(), rect.right(), rect.bottom()], dtype=float),
        score=1.0,
        landmarks=np.zeros((5, 2)),
    )
    expected = dlib.get_face_chip(image, shape_predictor(image, rect), size=150, padding=0.25)
    np.testing.assert_array_equal(encoder.align(image, face), np.asarray(expected))


def _linked_weights(folder: Path, source: Path, names: list[str]) -> Path:
    """A weights folder whose files are links to the shipped ones (no 30 MB copies)."""
    folder.mkdir()
    for name in names:
        (folder / name).symlink_to(source.with_name(name))
    return folder


def test_align_uses_the_predictor_beside_the_given_weights(
    encoder, shape_predictor, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import skimage.data

    from idaudit.faces import _weights

    image = skimage.data.astronaut()
    rect = dlib.get_frontal_face_detector()(image, 1)[0]
    face = Face(
        np.array([rect.left(), rect.top(), rect.right(), rect.bottom()], float),
        1.0,
        np.zeros((5, 2)),
    )
    names = ["dlib_face_recognition_resnet_model_v1.dat", "shape_predictor_5_face_landmarks.dat"]
    both = _linked_weights(tmp_path / "both", encoder.weights_path, names)
    only_net = _linked_weights(tmp_path / "only_net", encoder.weights_path, names[:1])
    # Without face-recognition-models: the given folder is the only source of files.
    monkeypatch.setattr(_weights, "_package_dir", lambda package: None)
    expected = dlib.get_face_chip(image, shape_predictor(image, rect), size=150, padding=0.25)
    for weights in (both, both / names[0]):  # the folder, or the network file inside it
        chip = TorchDlibEncoder(weights=weights).align(image, face)
        np.testing.assert_array_equal(chip, np.asarray(expected))
    # a given folder is searched alone, as for DlibEncoder: no silent fall-back
    with pytest.raises(MissingWeightsError, match=r"shape_predictor_5_face_landmarks\.dat"):
        TorchDlibEncoder(weights=only_net).align(image, face)


def test_bad_chips_raise_clear_errors(encoder) -> None:
    with pytest.raises(TypeError, match="`crops` must be uint8"):
        encoder.encode(np.zeros((1, 150, 150, 3), np.float32))
    with pytest.raises(
        InvalidInputError, match=r"shape \(n, 150, 150, 3\); got \(1, 112, 112, 3\)"
    ):
        encoder.encode(np.zeros((1, 112, 112, 3), np.uint8))
    with pytest.raises(InvalidInputError, match=r"chip\[None\]"):
        encoder.encode(np.zeros((150, 150, 3), np.uint8))
    with pytest.raises(TypeError, match="`crops` must be a numpy array; got list"):
        encoder.encode([np.zeros((150, 150, 3), np.uint8)])
    with pytest.raises(TypeError, match="floating tensor"):
        encoder(torch.zeros((1, 3, 150, 150), dtype=torch.uint8))
    with pytest.raises(InvalidInputError, match=r"`x` must have shape \(n, 3, 150, 150\)"):
        encoder(torch.zeros((1, 150, 150, 3)))


def test_bad_arguments_raise_clear_errors(tmp_path: Path) -> None:
    with pytest.raises(InvalidInputError, match="`batch_size` must be >= 1; got 0"):
        TorchDlibEncoder(batch_size=0)
    with pytest.raises(TypeError, match=r"`dtype` must be a floating torch\.dtype"):
        TorchDlibEncoder(dtype=torch.int32)
    with pytest.raises(MissingWeightsError, match=r"dlib_face_recognition_resnet_model_v1\.dat"):
        TorchDlibEncoder(weights=tmp_path / "absent.dat")
    if not torch.cuda.is_available():
        with pytest.raises(InvalidInputError, match="CUDA is not available"):
            TorchDlibEncoder(device="cuda")


@pytest.mark.gpu
def test_cuda_matches_dlib(dlib_model, face_chips) -> None:
    # cuDNN would run float32 convs in TF32 (errors ~1e-3) unless the encoder turns it off
    enc = TorchDlibEncoder(device="cuda")
    assert enc.device == f"cuda:{torch.cuda.current_device()}"  # one spelling, a str
    expected = _dlib_descriptors(dlib_model, face_chips)
    np.testing.assert_allclose(enc.encode(face_chips, normalize=False), expected, atol=PARITY_ATOL)
    x = (torch.from_numpy(face_chips).permute(0, 3, 1, 2).float() / 255).cuda().requires_grad_()
    emb = enc(x)
    torch.testing.assert_close(emb.norm(dim=1), torch.ones(len(x), device="cuda"))
    emb.sum().backward()
    assert x.grad is not None
    assert torch.isfinite(x.grad).all()
