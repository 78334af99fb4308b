"""Reader for dlib's binary serialisation of a DNN (``.dat`` files written by ``dlib::serialize``).

The format is not self-describing: dlib writes each object by calling the ``serialize``
overload of its C++ type, so a reader must know the order in which the types nest. This module
decodes the primitive encodings and the layer records that the face recognition ResNet
(``dlib_face_recognition_resnet_model_v1.dat``) uses, and checks every byte of the file is read.

Primitive encodings (``dlib/serialize.h``)
------------------------------------------
* **integers** — one control byte, then ``n = control & 0x0F`` payload bytes, little-endian.
  For signed types bit ``0x80`` of the control byte is the sign (magnitude in the payload).
* **bool** — one ASCII byte, ``'1'`` or ``'0'``.
* **string** — its length as an unsigned integer, then the raw bytes.
* **float / double** — "float_details": an ``int64`` mantissa and an ``int16`` exponent, both
  as integers above; the value is ``mantissa * 2**exponent``. Exponents 32000, 32001 and 32002
  stand for +inf, -inf and NaN.
* **tensor** (``dlib/dnn/tensor.h``) — version ``int`` 2, four ``long`` dims
  ``(num_samples, k, nr, nc)``, then the values as raw 4-byte little-endian IEEE floats
  (decoded with one ``numpy.frombuffer`` call).
* **alias_tensor** — version ``int`` 1 and four ``long`` dims, no data.

Network records (``dlib/dnn/core.h``)
-------------------------------------
A network is a chain of wrappers, serialised outermost first and each wrapper before the
object it wraps::

    add_loss_layer : int 1, loss details, subnetwork
    add_layer      : int 2, subnetwork, layer details, 3 bools, x_grad, cached_output,
                     params_grad (tensors; the version-1 records of older dlib releases
                     are not read)
    add_layer on the input layer
                   : int 3 (or 2), input layer, layer details, 3 bools, x_grad,
                     cached_output, grad_final (tensors), sample_expansion_factor (version 3)
    add_tag_layer, add_skip_layer : int 1, subnetwork

so the file reads as all wrapper versions from the top of the net down, then the input layer,
then each layer's details from the bottom up. Tag and skip wrappers carry no payload and no
tag id (ids live in the C++ type), so they read as the same ``"tag_or_skip"`` record; the model
definition that consumes the parse supplies their meaning.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from idaudit.exceptions import InvalidInputError

__all__ = ["DlibFormatError", "DlibLayer", "DlibNetwork", "parse_dnn"]

_FLOAT_INF, _FLOAT_NINF, _FLOAT_NAN = 32000, 32001, 32002


class DlibFormatError(InvalidInputError):
    """A dlib ``.dat`` file does not hold what the reader expects at some byte offset."""


@dataclass(frozen=True)
class DlibLayer:
    """One record of the layer chain, listed input first.

    Attributes
    ----------
    kind : str
        ``"input"``, ``"con"``, ``"affine"``, ``"relu"``, ``"max_pool"``, ``"avg_pool"``,
        ``"add_prev"``, ``"fc"`` or ``"tag_or_skip"``.
    version : str
        The version string dlib wrote for the layer details (``"con_4"``, ``"affine_"``, ...);
        ``""`` for tag/skip wrappers.
    params : dict
        Decoded fields: hyperparameters as Python scalars, weights as float32 arrays.
    offset : int
        Byte offset of the record's details in the file (wrappers: of their version int).
    """

    kind: str
    version: str
    params: dict[str, Any] = field(repr=False)
    offset: int


@dataclass(frozen=True)
class DlibNetwork:
    """A parsed dlib DNN: its loss record and its layer chain (input first)."""

    loss: dict[str, Any]
    layers: list[DlibLayer]
    n_bytes: int

    @property
    def n_parameters(self) -> int:
        """Number of float parameters held by the computational layers."""
        return sum(
            int(v.size)
            for layer in self.layers
            for k, v in layer.params.items()
            if k in {"weight", "bias", "gamma", "beta"}
        )


class _Reader:
    """Sequential decoder over an in-memory byte buffer."""

    def __init__(self, data: bytes, source: str) -> None:
        self.data = data
        self.pos = 0
        self.source = source

    def fail(self, what: str, at: int | None = None) -> DlibFormatError:
        at = self.pos if at is None else at
        return DlibFormatError(f"{self.source}: {what} at byte offset {at}.")

    def _take(self, n: int) -> bytes:
        if self.pos + n > len(self.data):
            raise self.fail(f"unexpected end of file reading {n} bytes")
        chunk = self.data[self.pos : self.pos + n]
        self.pos += n
        return chunk

    def read_int(self, *, signed: bool = True) -> int:
        start = self.pos
        control = self._take(1)[0]
        size = control & 0x0F
        # unsigned types mask 0x8F and reject any size > 8; signed ones read bit 0x80 as sign
        if size == 0 or size > 8 or (not signed and control & 0x80):
            raise self.fail(f"invalid integer control byte 0x{control:02x}", start)
        value = int.from_bytes(self._take(size), "little")
        return -value if signed and control & 0x80 else value

    def read_bool(self) -> bool:
        byte = self._take(1)
        if byte not in (b"0", b"1"):
            raise self.fail(f"invalid bool byte {byte!r}", self.pos - 1)
        return byte == b"1"

    def read_string(self) -> str:
        n = self.read_int(signed=False)
        return self._take(n).decode("latin-1")

    def peek_string(self) -> str | None:
        """Return the string at the cursor if one plausibly starts there, without consuming it."""
        start = self.pos
        try:
            s = self.read_string()
        except DlibFormatError:
            return None
        finally:
            self.pos = start
        return s if s.isprintable() else None

    def read_float(self) -> float:
        mantissa = self.read_int()
        exponent = self.read_int()
        if exponent == _FLOAT_INF:
            return float("inf")
        if exponent == _FLOAT_NINF:
            return float("-inf")
        if exponent == _FLOAT_NAN:
            return float("nan")
        return float(np.ldexp(float(mantissa), exponent))

    def read_tensor(self) -> npt.NDArray[np.float32]:
        start = self.pos
        version = self.read_int()
        if version != 2:
            raise self.fail(f"unsupported tensor version {version} (expected 2)", start)
        dims = tuple(self.read_int() for _ in range(4))
        if min(dims) < 0:
            raise self.fail(f"negative tensor dims {dims}", start)
        count = int(np.prod(dims))
        raw = self._take(4 * count)
        return np.frombuffer(raw, dtype="<f4").reshape(dims).astype(np.float32)

    def read_alias_tensor(self) -> tuple[int, int, int, int]:
        start = self.pos
        version = self.read_int()
        if version != 1:
            raise self.fail(f"unsupported alias_tensor version {version} (expected 1)", start)
        n, k, nr, nc = (self.read_int() for _ in range(4))
        return n, k, nr, nc


def _read_details(r: _Reader) -> DlibLayer:
    """Decode one ``layer details`` record, dispatching on its version string."""
    offset = r.pos
    version = r.read_string()
    p: dict[str, Any] = {}
    if version == "con_4":
        params = r.read_tensor().ravel()
        p["num_filters"] = r.read_int()
        p["nr"], p["nc"] = r.read_int(), r.read_int()
        p["stride_y"], p["stride_x"] = r.read_int(), r.read_int()
        p["padding_y"], p["padding_x"] = r.read_int(), r.read_int()
        filters = r.read_alias_tensor()  # (num_filters, k, nr, nc)
        biases = r.read_alias_tensor()  # (1, num_filters, 1, 1)
        for name in ("lr_mult", "wd_mult", "bias_lr_mult", "bias_wd_mult"):
            p[name] = r.read_float()
        n_w = int(np.prod(filters))
        if params.size != n_w + int(np.prod(biases)):
            raise r.fail(f"con_ params hold {params.size} floats, filters {filters}", offset)
        p["weight"] = params[:n_w].reshape(filters)  # (out, in, kh, kw), as torch lays it out
        p["bias"] = params[n_w:]  # (out,)
        kind = "con"
    elif version == "affine_":
        params = r.read_tensor().ravel()
        gamma = r.read_alias_tensor()
        beta = r.read_alias_tensor()
        p["mode"] = r.read_int()  # 0: CONV_MODE (one gamma per channel), 1: FC_MODE
        n_g = int(np.prod(gamma))
        if params.size != n_g + int(np.prod(beta)):
            raise r.fail(f"affine_ params hold {params.size} floats, gamma {gamma}", offset)
        p["gamma"] = params[:n_g].reshape(gamma[1:])
        p["beta"] = params[n_g:].reshape(beta[1:])
        kind = "affine"
    elif version in ("max_pool_2", "avg_pool_2"):
        p["nr"], p["nc"] = r.read_int(), r.read_int()
        p["stride_y"], p["stride_x"] = r.read_int(), r.read_int()
        p["padding_y"], p["padding_x"] = r.read_int(), r.read_int()
        kind = version[:-2]
    elif version == "fc_2":
        p["num_outputs"] = r.read_int(signed=False)
        p["num_inputs"] = r.read_int(signed=False)
        params = r.read_tensor()
        weights = r.read_alias_tensor()  # (num_inputs, num_outputs)
        biases = r.read_alias_tensor()
        p["bias_mode"] = r.read_int()  # 0: FC_HAS_BIAS, 1: FC_NO_BIAS
        for name in ("lr_mult", "wd_mult", "bias_lr_mult", "bias_wd_mult"):
            p[name] = r.read_float()
        flat = params.ravel()
        n_w = weights[0] * weights[1]
        p["weight"] = flat[:n_w].reshape(weights[0], weights[1]).T  # (out, in), torch layout
        if p["bias_mode"] == 0:
            p["bias"] = flat[n_w : n_w + biases[1]]
        kind = "fc"
    elif version == "relu_":
        kind = "relu"
    elif version == "add_prev_":
        kind = "add_prev"
    else:
        raise r.fail(f"unsupported layer details {version!r}", offset)
    return DlibLayer(kind, version, p, offset)


def _read_input_layer(r: _Reader) -> DlibLayer:
    offset = r.pos
    version = r.read_string()
    if version not in ("input_rgb_image", "input_rgb_image_sized"):
        raise r.fail(f"unsupported input layer {version!r}", offset)
    p: dict[str, Any] = {"avg_rgb": (r.read_float(), r.read_float(), r.read_float())}
    if version == "input_rgb_image_sized":
        p["nr"], p["nc"] = r.read_int(signed=False), r.read_int(signed=False)
    return DlibLayer("input", version, p, offset)


def _read_loss(r: _Reader) -> dict[str, Any]:
    offset = r.pos
    version = r.read_string()
    if version != "loss_metric_2":
        raise r.fail(f"unsupported loss layer {version!r}", offset)
    return {"version": version, "margin": r.read_float(), "distance_threshold": r.read_float()}


def _check_empty(r: _Reader, what: str) -> None:
    at = r.pos
    if r.read_tensor().size:
        raise r.fail(f"expected an empty {what} tensor", at)


def parse_dnn(path: str | os.PathLike[str]) -> DlibNetwork:
    """Parse a dlib DNN ``.dat`` file with a ``loss_metric`` head into its layer chain.

    Parameters
    ----------
    path : str or os.PathLike
        The ``.dat`` file (uncompressed).

    Returns
    -------
    DlibNetwork
        ``loss`` (margin, distance threshold) and ``layers`` listed input first.

    Raises
    ------
    DlibFormatError
        If a record is not what dlib writes for the supported layer types, or if bytes are
        left over; the message names the byte offset.
    """
    with open(path, "rb") as fh:
        data = fh.read()
    r = _Reader(data, os.fspath(path))

    if (v := r.read_int()) != 1:
        raise r.fail(f"unsupported add_loss_layer version {v}", 0)
    loss = _read_loss(r)

    # Walk down the wrapper chain: version ints until the input layer's name appears.
    wrappers: list[tuple[int, int]] = []  # (version, offset), top of the net first
    while True:
        at = r.pos
        version = r.read_int()
        name = r.peek_string()
        if name is not None and name.startswith("input"):
            if version not in (2, 3):
                raise r.fail(f"unsupported input add_layer version {version}", at)
            input_version = version
            break
        if version not in (1, 2):
            raise r.fail(f"unexpected wrapper version {version}", at)
        wrappers.append((version, at))

    layers = [_read_input_layer(r)]
    # The add_layer directly on the input layer.
    layers.append(_read_details(r))
    for _ in range(3):
        r.read_bool()
    for what in ("x_grad", "cached_output", "grad_final"):
        _check_empty(r, what)
    if input_version == 3:
        r.read_int(signed=False)  # sample_expansion_factor

    for version, at in reversed(wrappers):
        if version == 1:  # add_tag_layer / add_skip_layer: nothing after the subnetwork
            layers.append(DlibLayer("tag_or_skip", "", {}, at))
            continue
        layers.append(_read_details(r))
        for _ in range(3):
            r.read_bool()
        for what in ("x_grad", "cached_output", "params_grad"):
            _check_empty(r, what)

    if r.pos != len(data):
        raise r.fail(f"{len(data) - r.pos} trailing bytes after the network")
    return DlibNetwork(loss=loss, layers=layers, n_bytes=len(data))
