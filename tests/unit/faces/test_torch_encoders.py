"""Torch encoders loaded from user-supplied files (idaudit.faces._torch_encoders), with stand-ins.

Every stand-in has the published file's format: an AdaFace Lightning-style checkpoint with the
``model.``/``head.`` keys, a facenet-pytorch VGGFace2 state dict including its ``logits``.
Expected values are computed independently (facenet-pytorch's own network, and for AdaFace a
key -> shape layout and a functional forward pass written from AdaFace's net.py, in
``tests/standins.py``).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from idaudit.exceptions import InvalidInputError
from idaudit.faces._torch_encoders import AdaFaceEncoder, InceptionResnetV1Encoder
from idaudit.faces._types import Encoder
from standins import (
    PUBLISHED_UNITS,
    lightning_checkpoint,
    published_ir_layout,
    reference_block,
    reference_ir_forward,
)

pytestmark = pytest.mark.faces


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
