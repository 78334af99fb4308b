"""Small stand-in weight files in the published formats, shared by the faces tests.

* ONNX graphs with the input/output signature of InsightFace's ``det_10g.onnx`` (SCRFD) and
  ``w600k_r50.onnx`` (an identity encoder), exported from tiny torch modules;
* the key -> shape layout of AdaFace's IR checkpoints, written out from AdaFace's ``net.py``
  (``Backbone``, ``get_blocks``, ``BasicBlockIR``) and not from idaudit's own network, and a
  checkpoint in that layout filled with seeded random values.
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

# ----------------------------------------------------------------------------- ONNX


def export_onnx(
    module: torch.nn.Module,
    example: torch.Tensor,
    path: Path,
    n_outputs: int,
    *,
    dynamic_batch: bool,
    dynamic_hw: bool = False,
) -> Path:
    """Export ``module`` to ONNX with InsightFace's input name and dynamic axes as asked."""
    outputs = [f"out{i}" for i in range(n_outputs)]
    axes: dict[str, dict[int, str]] = {}
    if dynamic_batch:
        axes["input.1"] = {0: "n"}
        axes.update({name: {0: "n"} for name in outputs})
    if dynamic_hw:
        axes["input.1"] = {**axes.get("input.1", {}), 2: "h", 3: "w"}
        axes.update({name: {0: "anchors"} for name in outputs})
    path.parent.mkdir(parents=True, exist_ok=True)
    with warnings.catch_warnings():  # the TorchScript exporter announces its deprecation
        warnings.simplefilter("ignore")
        torch.onnx.export(
            module.eval(),
            (example,),
            str(path),
            input_names=["input.1"],
            output_names=outputs,
            dynamic_axes=axes,
            dynamo=False,
        )
    return path


#: Box distances (l, t, r, b) and keypoint offsets the SCRFD stand-in predicts, in stride units.
DIST = (1.0, 2.0, 3.0, 4.0)
KPS = (-1.0, -1.0, 1.0, -1.0, 0.0, 0.0, -1.0, 1.0, 1.0, 1.0)


class SCRFDStandIn(torch.nn.Module):
    """SCRFD signature with planted-face logic.

    Stride ``s`` in (8, 16, 32) fires where an ``s × s`` cell of input channel (0, 1, 2) is
    bright: on RGB input, a red 8×8 block is a stride-8 face and a blue 32×32 block a stride-32
    face. Each cell has two anchors (the second scoring 0.9 × the first), constant box
    distances and keypoint offsets. Outputs come interleaved per stride, not grouped as in
    ``det_10g.onnx``: the decoder must sort them by shape.
    """

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        outs: list[torch.Tensor] = []
        for stride, channel in ((8, 0), (16, 1), (32, 2)):
            pooled = F.avg_pool2d(x[:, channel : channel + 1], stride)  # (1, 1, h, w)
            score = torch.sigmoid(20.0 * (pooled - 0.5)).reshape(-1, 1)  # (h*w, 1)
            scores = torch.cat([score, 0.9 * score], dim=1).reshape(-1, 1)  # (2hw, 1)
            ones = torch.ones_like(scores)
            outs += [scores, ones * torch.tensor([DIST]), ones * torch.tensor([KPS])]
        return tuple(outs)


def encoder_standin() -> torch.nn.Module:
    """1x3x112x112 -> 512: 8x8 block means, then a fixed seeded linear map."""
    gen = torch.Generator().manual_seed(11)
    linear = torch.nn.Linear(3 * 14 * 14, 512)
    with torch.no_grad():
        linear.weight.copy_(torch.randn(512, 3 * 14 * 14, generator=gen))
        linear.bias.copy_(torch.randn(512, generator=gen))
    return torch.nn.Sequential(torch.nn.AvgPool2d(8), torch.nn.Flatten(), linear)


def write_buffalo(folder: Path) -> Path:
    """Write stand-in ``det_10g.onnx`` and ``w600k_r50.onnx`` into ``folder``."""
    export_onnx(
        SCRFDStandIn(),
        torch.zeros(1, 3, 160, 160),
        folder / "det_10g.onnx",
        9,
        dynamic_batch=False,
        dynamic_hw=True,
    )
    export_onnx(
        encoder_standin(),
        torch.zeros(2, 3, 112, 112),
        folder / "w600k_r50.onnx",
        1,
        dynamic_batch=True,
    )
    return folder


# ----------------------------------------------------------------------------- AdaFace IR

#: Residual blocks per stage, from ``get_blocks`` in AdaFace's net.py.
PUBLISHED_UNITS = {18: (2, 2, 2, 2), 34: (3, 4, 6, 3), 50: (3, 4, 14, 3), 100: (3, 13, 30, 3)}
#: Stage widths ``depth`` of ``get_block(in_channel, depth, ...)`` for the IR-18...100 family.
PUBLISHED_WIDTHS = (64, 128, 256, 512)


def _batch_norm(prefix: str, n: int, *, affine: bool = True) -> dict[str, tuple[int, ...]]:
    keys = {f"{prefix}.running_mean": (n,), f"{prefix}.running_var": (n,)}
    keys[f"{prefix}.num_batches_tracked"] = ()
    if affine:
        keys = {f"{prefix}.weight": (n,), f"{prefix}.bias": (n,), **keys}
    return keys


def published_ir_layout(depth: int) -> dict[str, tuple[int, ...]]:
    """Key -> shape of an AdaFace IR backbone state dict, following AdaFace's net.py.

    ``Backbone.input_layer = Sequential(Conv2d(3, 64, 3), BatchNorm2d(64), PReLU(64))``;
    ``body`` is one flat ``Sequential`` of ``BasicBlockIR(in_channel, depth, stride)`` from
    ``get_block``: the first block of a stage has stride 2, and a block whose width changes
    has ``shortcut_layer = Sequential(Conv2d 1x1, BatchNorm2d)`` (else a parameter-free
    ``MaxPool2d(1, stride)``); ``res_layer = Sequential(BatchNorm2d(in), Conv2d(in, d, 3),
    BatchNorm2d(d), PReLU(d), Conv2d(d, d, 3, stride), BatchNorm2d(d))``;
    ``output_layer = Sequential(BatchNorm2d(512), Dropout, Flatten, Linear(512*7*7, 512),
    BatchNorm1d(512, affine=False))``.
    """
    keys: dict[str, tuple[int, ...]] = {"input_layer.0.weight": (64, 3, 3, 3)}
    keys |= _batch_norm("input_layer.1", 64)
    keys["input_layer.2.weight"] = (64,)
    block, c_in = 0, 64
    for n_units, width in zip(PUBLISHED_UNITS[depth], PUBLISHED_WIDTHS, strict=True):
        for _ in range(n_units):
            p = f"body.{block}"
            if c_in != width:
                keys[f"{p}.shortcut_layer.0.weight"] = (width, c_in, 1, 1)
                keys |= _batch_norm(f"{p}.shortcut_layer.1", width)
            keys |= _batch_norm(f"{p}.res_layer.0", c_in)
            keys[f"{p}.res_layer.1.weight"] = (width, c_in, 3, 3)
            keys |= _batch_norm(f"{p}.res_layer.2", width)
            keys[f"{p}.res_layer.3.weight"] = (width,)
            keys[f"{p}.res_layer.4.weight"] = (width, width, 3, 3)
            keys |= _batch_norm(f"{p}.res_layer.5", width)
            block, c_in = block + 1, width
    keys |= _batch_norm("output_layer.0", 512)
    keys["output_layer.3.weight"] = (512, 512 * 7 * 7)
    keys["output_layer.3.bias"] = (512,)
    keys |= _batch_norm("output_layer.4", 512, affine=False)
    return keys


def random_ir_state(depth: int, seed: int) -> dict[str, torch.Tensor]:
    """A state dict in the published layout with seeded values that keep activations O(1).

    Batch-norm statistics are not the identity (running means ≠ 0, variances ≠ 1), so a
    network that skipped or reordered a batch norm would give other numbers.
    """
    gen = torch.Generator().manual_seed(seed)
    state: dict[str, torch.Tensor] = {}
    for key, shape in published_ir_layout(depth).items():
        leaf = key.rsplit(".", 1)[1]
        if leaf == "num_batches_tracked":
            state[key] = torch.zeros((), dtype=torch.long)
        elif leaf == "running_var":
            state[key] = 0.5 + torch.rand(shape, generator=gen)
        elif leaf in ("running_mean", "bias"):
            state[key] = 0.1 * torch.randn(shape, generator=gen)
        elif len(shape) == 1:  # batch-norm scale or PReLU slope
            state[key] = 0.5 + 0.5 * torch.rand(shape, generator=gen)
        else:  # conv or linear weight, He-scaled by its fan-in
            fan_in = int(torch.tensor(shape[1:]).prod())
            state[key] = torch.randn(shape, generator=gen) * (2.0 / fan_in) ** 0.5
    return state


def lightning_checkpoint(backbone: dict[str, torch.Tensor], **extra: Any) -> dict[str, Any]:
    """The layout of AdaFace's released .ckpt files: backbone under ``model.``, head under
    ``head.``, plus Lightning's bookkeeping."""
    state: dict[str, Any] = {f"model.{k}": v for k, v in backbone.items()}
    state["head.kernel"] = torch.randn(512, 10, generator=torch.Generator().manual_seed(3))
    state["head.t"] = torch.zeros(1)
    return {"epoch": 25, "global_step": 1000, "state_dict": state, **extra}


def reference_bn(x: torch.Tensor, state: dict[str, torch.Tensor], prefix: str) -> torch.Tensor:
    """Eval-mode batch norm from a state dict (``eps`` 1e-5, torch's and AdaFace's default)."""
    return F.batch_norm(
        x,
        state[f"{prefix}.running_mean"],
        state[f"{prefix}.running_var"],
        state.get(f"{prefix}.weight"),
        state.get(f"{prefix}.bias"),
        training=False,
        eps=1e-5,
    )


def reference_block(
    x: torch.Tensor, state: dict[str, torch.Tensor], prefix: str, stride: int
) -> torch.Tensor:
    """``BasicBlockIR.forward`` of AdaFace's net.py, written out with functional ops."""
    r = reference_bn(x, state, f"{prefix}.res_layer.0")
    r = F.conv2d(r, state[f"{prefix}.res_layer.1.weight"], padding=1)
    r = reference_bn(r, state, f"{prefix}.res_layer.2")
    r = F.prelu(r, state[f"{prefix}.res_layer.3.weight"])
    r = F.conv2d(r, state[f"{prefix}.res_layer.4.weight"], stride=stride, padding=1)
    r = reference_bn(r, state, f"{prefix}.res_layer.5")
    if f"{prefix}.shortcut_layer.0.weight" in state:  # width changes: 1x1 conv + BN
        s = F.conv2d(x, state[f"{prefix}.shortcut_layer.0.weight"], stride=stride)
        s = reference_bn(s, state, f"{prefix}.shortcut_layer.1")
    else:  # MaxPool2d(1, stride): every stride-th pixel
        s = x[:, :, ::stride, ::stride]
    return r + s


def reference_ir_forward(x: torch.Tensor, state: dict[str, torch.Tensor], depth: int) -> Any:
    """AdaFace ``Backbone.forward`` in eval mode: returns ``(output / ||output||, ||output||)``."""
    y = F.conv2d(x, state["input_layer.0.weight"], padding=1)
    y = F.prelu(reference_bn(y, state, "input_layer.1"), state["input_layer.2.weight"])
    block = 0
    for n_units in PUBLISHED_UNITS[depth]:
        for unit in range(n_units):
            y = reference_block(y, state, f"body.{block}", 2 if unit == 0 else 1)
            block += 1
    y = reference_bn(y, state, "output_layer.0").flatten(1)  # dropout is off in eval mode
    y = F.linear(y, state["output_layer.3.weight"], state["output_layer.3.bias"])
    y = reference_bn(y, state, "output_layer.4")
    norm = torch.linalg.vector_norm(y, dim=1, keepdim=True)
    return y / norm, norm


def save_faces(folder: Path, images: Any, start: int = 0) -> list[Path]:
    """Write face images as ``s<index>_<i>.png`` into ``folder`` (created); return the paths."""
    from PIL import Image

    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for i, im in enumerate(images):
        paths.append(folder / f"s{start + i:02d}_{i}.png")
        Image.fromarray(im).save(paths[-1])
    return paths


class MeanColourEncoder:
    """Stand-in encoder: mean RGB colour of the crop, L2-normalised (dim 3)."""

    name = "mean-colour"
    dim = 3
    input_size = 8
    differentiable = False

    def __init__(self, out_dim: int = 3, poison: bool = False) -> None:
        self.out_dim = out_dim
        self.poison = poison
        self.calls = 0

    def encode(self, crops: np.ndarray) -> np.ndarray:
        self.calls += 1
        assert crops.dtype == np.uint8
        assert crops.shape[1:] == (8, 8, 3)
        v = crops.reshape(len(crops), -1, 3).astype(float).mean(axis=1) + 1.0
        v = v / np.linalg.norm(v, axis=1, keepdims=True)
        if self.poison:
            v[0, 0] = np.nan
        return np.tile(v, (1, self.out_dim // 3 + 1))[:, : self.out_dim].astype(np.float32)


def colour_images() -> dict[str, list[np.ndarray]]:
    """Two identities of flat 8 x 8 frames: "r" (red) and "gb" (green, blue)."""
    red = np.zeros((8, 8, 3), np.uint8)
    red[..., 0] = 200
    blue = np.zeros((8, 8, 3), np.uint8)
    blue[..., 2] = 200
    green = np.zeros((8, 8, 3), np.uint8)
    green[..., 1] = 200
    return {"r": [red], "gb": [green, blue]}


def jitter(image: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Stand-in generator with internal randomness R: brighten by a random amount."""
    return np.clip(image.astype(int) + int(rng.integers(0, 50)), 0, 255).astype(np.uint8)


def uneven_embeddings(n_id: int = 9, dim: int = 5, seed: int = 0) -> Any:
    """Identities of 8-12 rows (chunks need padding); identities 0 and 1 identical (ties)."""
    from idaudit import EmbeddingSet

    gen = np.random.default_rng(seed)
    sizes = gen.integers(8, 13, size=n_id)  # unequal identities: chunks need padding
    rows = [gen.normal(size=(n, dim)) + 0.9 * np.eye(dim)[k % dim] for k, n in enumerate(sizes)]
    # two identical identities make exact ties (several pairs reach the same value)
    rows[1] = rows[0].copy()
    labels = [f"id{k:02d}" for k, r in enumerate(rows) for _ in range(len(r))]
    return EmbeddingSet(np.vstack(rows), labels)


def all_pairs_auditors() -> list[Any]:
    """The four auditors, small and seeded, for runs over every pair."""
    from idaudit import GaussMechAuditor, KDELRAuditor, MMDTVAuditor, ROCHTAuditor

    return [
        GaussMechAuditor(),
        KDELRAuditor(n_grid=41),
        MMDTVAuditor(n_permutations=40, rng=1),
        ROCHTAuditor(n_folds=3, rng=2),
    ]
