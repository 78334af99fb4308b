"""The Encoder protocol (idaudit.faces._types), checked on every encoder idaudit ships.

Local-weight encoders run on stand-in files in the published formats (see
``tests/standins.py``); the properties checked here do not depend on the weights' values.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

import idaudit.faces
from idaudit.exceptions import InvalidInputError
from idaudit.faces import (
    AdaFaceEncoder,
    ArcFaceEncoder,
    DlibEncoder,
    Encoder,
    InceptionResnetV1Encoder,
    LVFaceEncoder,
    OnnxEncoder,
    TorchDlibEncoder,
)

pytestmark = pytest.mark.faces

#: How to build each encoder class from the session's fixtures.
BUILDERS: dict[type, Callable[[pytest.FixtureRequest], Any]] = {
    DlibEncoder: lambda r: r.getfixturevalue("dlib_encoder"),
    TorchDlibEncoder: lambda r: TorchDlibEncoder(),
    ArcFaceEncoder: lambda r: ArcFaceEncoder(r.getfixturevalue("buffalo_dir")),
    LVFaceEncoder: lambda r: LVFaceEncoder(r.getfixturevalue("buffalo_dir") / "w600k_r50.onnx"),
    OnnxEncoder: lambda r: OnnxEncoder(r.getfixturevalue("buffalo_dir") / "w600k_r50.onnx"),
    InceptionResnetV1Encoder: lambda r: InceptionResnetV1Encoder(
        r.getfixturevalue("facenet_file")[0]
    ),
    AdaFaceEncoder: lambda r: AdaFaceEncoder(r.getfixturevalue("ir18_file")[0]),
}
DIFFERENTIABLE = [TorchDlibEncoder, InceptionResnetV1Encoder, AdaFaceEncoder]
NOT_DIFFERENTIABLE = [c for c in BUILDERS if c not in DIFFERENTIABLE]


def _ids(classes: list[type]) -> list[str]:
    return [c.__name__ for c in classes]


def _crops(size: int, n: int = 2) -> np.ndarray:
    return np.random.default_rng(size).integers(0, 256, (n, size, size, 3), dtype=np.uint8)


def test_every_exported_encoder_is_checked_here() -> None:
    exported = {
        obj
        for name in idaudit.faces.__all__
        if inspect.isclass(obj := getattr(idaudit.faces, name))
        and obj is not Encoder
        and callable(getattr(obj, "encode", None))
        and callable(getattr(obj, "align", None))
    }
    assert exported == set(BUILDERS)
    assert {c for c in BUILDERS if c.differentiable} == set(DIFFERENTIABLE)


@pytest.mark.parametrize("cls", list(BUILDERS), ids=_ids(list(BUILDERS)))
def test_attributes_of_the_protocol(cls: type, request: pytest.FixtureRequest) -> None:
    enc = BUILDERS[cls](request)
    assert isinstance(enc, Encoder)
    assert isinstance(enc.name, str)
    assert isinstance(enc.dim, int)
    assert isinstance(enc.input_size, int)
    assert isinstance(enc.differentiable, bool)
    assert enc.device == "cpu"  # a str on every encoder, not a torch.device
    assert type(enc.device) is str


@pytest.mark.parametrize("cls", list(BUILDERS), ids=_ids(list(BUILDERS)))
def test_one_crop_needs_its_batch_axis(cls: type, request: pytest.FixtureRequest) -> None:
    enc = BUILDERS[cls](request)
    crop = _crops(enc.input_size, 1)
    with pytest.raises(InvalidInputError, match=r"needs a leading axis: `(crop|chip)\[None\]`"):
        enc.encode(crop[0])
    assert enc.encode(crop).shape == (1, enc.dim)


@pytest.mark.parametrize("cls", list(BUILDERS), ids=_ids(list(BUILDERS)))
def test_read_only_crops_are_encoded_without_warnings(
    cls: type, request: pytest.FixtureRequest
) -> None:
    # Pillow hands out read-only buffers; torch warns when wrapping one (an error here).
    enc = BUILDERS[cls](request)
    crops = _crops(enc.input_size)
    expected = enc.encode(crops)
    crops.setflags(write=False)
    np.testing.assert_array_equal(enc.encode(crops), expected)


@pytest.mark.parametrize("cls", DIFFERENTIABLE, ids=_ids(DIFFERENTIABLE))
def test_forward_gives_unit_rows_like_encode(cls: type, request: pytest.FixtureRequest) -> None:
    enc = BUILDERS[cls](request)
    crops = _crops(enc.input_size)
    x = torch.from_numpy(crops).permute(0, 3, 1, 2).float() / 255.0  # (2, 3, s, s) in [0, 1]
    with torch.no_grad():
        unit = enc.forward(x).numpy()
        raw = enc.forward(x, normalize=False).numpy()
    # float32 rows: a norm is exact to a few ulps
    np.testing.assert_allclose(np.linalg.norm(unit, axis=1), 1.0, atol=1e-6)
    # x * 255 restores the integer pixels up to float32 rounding, so forward equals encode
    np.testing.assert_allclose(unit, enc.encode(crops), atol=1e-5)
    np.testing.assert_allclose(unit, raw / np.linalg.norm(raw, axis=1, keepdims=True), atol=1e-6)
    np.testing.assert_allclose(raw, enc.encode(crops, normalize=False), rtol=1e-4, atol=1e-5)


def test_raw_dlib_descriptors_are_not_unit_vectors() -> None:
    # Why the contract matters: dlib's raw scale (norm ~1.3) is what normalize=False keeps.
    enc = TorchDlibEncoder()
    x = torch.from_numpy(_crops(150)).permute(0, 3, 1, 2).float() / 255.0
    with torch.no_grad():
        norms = enc.forward(x, normalize=False).norm(dim=1)
    assert bool((norms > 1.05).all())


@pytest.mark.parametrize("cls", NOT_DIFFERENTIABLE, ids=_ids(NOT_DIFFERENTIABLE))
def test_non_differentiable_forward_raises(cls: type, request: pytest.FixtureRequest) -> None:
    enc = BUILDERS[cls](request)
    s = enc.input_size
    with pytest.raises(TypeError, match="differentiable"):
        enc.forward(torch.zeros(1, 3, s, s))
    with pytest.raises(TypeError, match="differentiable"):
        enc.forward(torch.zeros(1, 3, s, s), normalize=False)


def test_device_given_as_torch_device_is_stored_as_a_string(
    ir18_file: tuple[Path, dict[str, torch.Tensor]],
) -> None:
    for enc in (
        TorchDlibEncoder(device=torch.device("cpu")),
        AdaFaceEncoder(ir18_file[0], device=torch.device("cpu")),
    ):
        assert type(enc.device) is str
        assert enc.device == "cpu"
