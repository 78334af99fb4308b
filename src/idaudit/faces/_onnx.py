"""ONNX face models whose weights the user supplies as local files (never downloaded).

* :class:`RetinaFaceDetector` — InsightFace ``buffalo_l`` SCRFD detector (``det_10g.onnx``)
  through onnxruntime, with its anchor decoding and NMS written here;
* :class:`OnnxEncoder` — any ONNX identity encoder taking ``(n, 3, s, s)`` normalised crops;
  :class:`ArcFaceEncoder` (``w600k_r50.onnx``) and :class:`LVFaceEncoder` are presets of it.

The ONNX encoders are not differentiable. Weights are located by
:func:`~idaudit.faces._weights.resolve_weights`: an explicit argument, else
``$IDAUDIT_WEIGHTS/<model>/<file>``.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from idaudit._validation import check_integer
from idaudit.exceptions import InvalidInputError, MissingWeightsError
from idaudit.faces._crops import CropEncoder, l2_normalise
from idaudit.faces._io import to_rgb_uint8
from idaudit.faces._types import FACES_EXTRA, Face
from idaudit.faces._weights import resolve_weights

if TYPE_CHECKING:  # pragma: no cover
    import onnxruntime

__all__ = ["ArcFaceEncoder", "LVFaceEncoder", "OnnxEncoder", "RetinaFaceDetector"]


def _check_threads(threads: int | None) -> int:
    if threads is None:
        return 0  # onnxruntime's own default: one thread per core
    return check_integer(threads, "threads", minimum=1)


# --------------------------------------------------------------------------- onnxruntime


def _onnx_device(device: Any) -> tuple[str, int | None]:
    """Parse ``"cpu"``, ``"cuda"`` or ``"cuda:<i>"`` into (name, CUDA index or None)."""
    if not isinstance(device, str):
        raise TypeError(f"`device` must be a str such as 'cpu' or 'cuda:0'; got {device!r}.")
    if device == "cpu":
        return "cpu", None
    kind, _, index = device.partition(":")
    if kind == "cuda" and (index == "" or index.isdecimal()):
        i = int(index or 0)
        return f"cuda:{i}", i
    raise InvalidInputError(f"`device` must be 'cpu', 'cuda' or 'cuda:<index>'; got {device!r}.")


def _onnx_session(
    path: Path, threads: int, device: str
) -> tuple[onnxruntime.InferenceSession, str]:
    """Open a local ONNX file with ``threads`` intra-op threads on ``device``.

    Returns the session and the device's one spelling (``"cpu"`` or ``"cuda:<i>"``). A CUDA
    session whose CUDA provider did not start raises: onnxruntime would otherwise only log a
    warning and run on the CPU.
    """
    try:
        import onnxruntime as ort
    except ImportError as err:  # pragma: no cover - the faces extra installs it
        raise ImportError(f"ONNX face models need onnxruntime: {FACES_EXTRA}") from err
    name, cuda_index = _onnx_device(device)
    providers: list[Any] = ["CPUExecutionProvider"]
    if cuda_index is not None:
        if "CUDAExecutionProvider" not in ort.get_available_providers():
            raise InvalidInputError(
                "`device` asks for CUDA but this onnxruntime build has no "
                f"CUDAExecutionProvider (install onnxruntime-gpu); got {device!r}."
            )
        providers = [("CUDAExecutionProvider", {"device_id": cuda_index}), "CPUExecutionProvider"]
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    try:
        session = ort.InferenceSession(os.fspath(path), sess_options=options, providers=providers)
    except Exception as err:  # onnxruntime raises its own untyped errors for bad files
        raise InvalidInputError(f"Could not load the ONNX model at {path}: {err}") from err
    active = list(session.get_providers())
    if cuda_index is not None and (not active or active[0] != "CUDAExecutionProvider"):
        raise InvalidInputError(
            f"`device` is {device!r} but onnxruntime could not start its CUDA provider for "
            f"{path} (active providers: {active}); it would have run on the CPU. Check the "
            "CUDA and cuDNN libraries onnxruntime-gpu needs, or pass device='cpu'."
        )
    return session, name


# --------------------------------------------------------------------------- detector


def _nms(boxes: npt.NDArray[np.float64], scores: npt.NDArray[np.float64], iou: float) -> list[int]:
    """Greedy non-maximum suppression; indices kept, best score first."""
    x1, y1, x2, y2 = boxes.T
    areas = np.clip(x2 - x1, 0, None) * np.clip(y2 - y1, 0, None)
    order = np.argsort(-scores, kind="stable")
    keep: list[int] = []
    while order.size:
        best, rest = int(order[0]), order[1:]
        keep.append(best)
        inter_w = np.clip(np.minimum(x2[best], x2[rest]) - np.maximum(x1[best], x1[rest]), 0, None)
        inter_h = np.clip(np.minimum(y2[best], y2[rest]) - np.maximum(y1[best], y1[rest]), 0, None)
        inter = inter_w * inter_h
        union = areas[best] + areas[rest] - inter
        overlap = np.divide(inter, union, out=np.zeros_like(inter), where=union > 0)
        order = rest[overlap <= iou]
    return keep


class RetinaFaceDetector:
    """InsightFace's SCRFD/RetinaFace detector (``buffalo_l/det_10g.onnx``) via onnxruntime.

    Parameters
    ----------
    path : str or os.PathLike, optional
        ``det_10g.onnx`` itself, or the ``buffalo_l`` folder that holds it. Default:
        ``$IDAUDIT_WEIGHTS/buffalo_l/det_10g.onnx``.
    det_size : (int, int), default (640, 640)
        ``(width, height)`` of the network input; multiples of 32.
    score_threshold : float, default 0.5
        Minimum face score kept.
    nms_threshold : float, default 0.4
        IoU above which the lower-scored of two boxes is dropped.
    threads : int, optional
        onnxruntime intra-op threads (default: onnxruntime's choice, one per core; set it on
        shared machines).
    device : {"cpu", "cuda", "cuda:<index>"}, default "cpu"
        ``"cuda"`` needs onnxruntime-gpu with a working CUDA provider; there is no silent
        fallback. Stored as ``"cpu"`` or ``"cuda:<index>"``.
    verify : bool, default True
        Check the file's SHA-256 when the registry pins one.

    Notes
    -----
    The image is resized (bilinear, aspect kept) to fit ``det_size``, padded at the bottom and
    right with black, and fed as RGB ``(x - 127.5) / 128``, as InsightFace does. For every
    stride ``s`` in (8, 16, 32) the network emits, per anchor (2 per grid cell), a score, four
    distances ``(l, t, r, b)`` and ten keypoint offsets, all in units of ``s``. An anchor at grid
    cell ``(i, j)`` sits at ``(c_x, c_y) = (s j, s i)`` and decodes to the box
    ``(c_x - s l, c_y - s t, c_x + s r, c_y + s b)`` and keypoints ``(c_x + s k_x, c_y + s k_y)``.
    Anchors scoring at least ``score_threshold`` are kept, mapped back to the original image
    scale, and thinned by greedy NMS. Boxes are not clipped to the image.

    References
    ----------
    .. [1] J. Guo, J. Deng, A. Lattas, S. Zafeiriou, "Sample and computation redistribution for
       efficient face detection" (SCRFD), ICLR 2022.

    Examples
    --------
    >>> det = RetinaFaceDetector("~/weights/buffalo_l", threads=2)  # doctest: +SKIP
    >>> faces = det.detect(image)  # doctest: +SKIP
    """

    name = "retinaface-det-10g"

    def __init__(
        self,
        path: str | os.PathLike[str] | None = None,
        *,
        det_size: tuple[int, int] = (640, 640),
        score_threshold: float = 0.5,
        nms_threshold: float = 0.4,
        threads: int | None = None,
        device: str = "cpu",
        verify: bool = True,
    ) -> None:
        if (
            len(det_size) != 2
            or any(isinstance(v, bool) or not isinstance(v, int | np.integer) for v in det_size)
            or any(v < 32 or v % 32 for v in det_size)
        ):
            raise InvalidInputError(
                f"`det_size` must be (width, height), positive multiples of 32; got {det_size!r}."
            )
        for value, label in (
            (score_threshold, "score_threshold"),
            (nms_threshold, "nms_threshold"),
        ):
            if not 0.0 <= float(value) <= 1.0:
                raise InvalidInputError(f"`{label}` must be in [0, 1]; got {value!r}.")
        self.weights_path = resolve_weights("buffalo_l", "det_10g.onnx", path, verify=verify)
        self.det_size = (int(det_size[0]), int(det_size[1]))
        self.score_threshold = float(score_threshold)
        self.nms_threshold = float(nms_threshold)
        self.threads = threads
        self.session, self.device = _onnx_session(
            self.weights_path, _check_threads(threads), device
        )
        inp = self.session.get_inputs()[0]
        self._input_name = inp.name
        fixed = inp.shape[2:4]
        if all(isinstance(v, int) for v in fixed) and (fixed[1], fixed[0]) != self.det_size:
            raise InvalidInputError(
                f"`det_size` must match the model's fixed input (width, height) "
                f"{(fixed[1], fixed[0])}; got {det_size!r}."
            )
        n_out = len(self.session.get_outputs())
        if n_out not in (9, 15):
            raise InvalidInputError(
                f"{self.weights_path} has {n_out} outputs; a SCRFD detector with keypoints has "
                "9 (strides 8/16/32) or 15 (strides 8-128)."
            )
        # 3 levels: strides 8/16/32 with 2 anchors per cell; 5 levels: 8..128 with 1 (SCRFD).
        self._strides = (8, 16, 32) if n_out == 9 else (8, 16, 32, 64, 128)
        self._anchors = 2 if n_out == 9 else 1

    def _blob(self, image: npt.NDArray[np.uint8]) -> tuple[npt.NDArray[np.float32], float]:
        """Resize into ``det_size`` (aspect kept), pad, normalise: ``(1, 3, H, W)`` and scale."""
        import torch
        import torch.nn.functional as F

        height, width = image.shape[:2]
        det_w, det_h = self.det_size
        if height / width > det_h / det_w:
            new_h, new_w = det_h, max(int(det_h * width / height), 1)
        else:
            new_w, new_h = det_w, max(int(det_w * height / width), 1)
        scale = new_h / height
        x = torch.from_numpy(image).permute(2, 0, 1)[None].float()  # (1, 3, H, W) RGB
        # Plain bilinear (no antialiasing), like the cv2.resize InsightFace uses.
        x = F.interpolate(x, size=(new_h, new_w), mode="bilinear", align_corners=False)
        blob = torch.zeros(1, 3, det_h, det_w)
        blob[:, :, :new_h, :new_w] = x
        return ((blob - 127.5) / 128.0).numpy(), scale

    def _decode(
        self, outputs: Sequence[npt.NDArray[np.float32]], det_h: int, det_w: int
    ) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64], npt.NDArray[np.float64]]:
        """Anchor decoding over all strides: scores (k,), boxes (k, 4), keypoints (k, 5, 2)."""
        arrays = [o[0] if o.ndim == 3 else o for o in outputs]  # drop a batch axis if present
        by_kind: dict[int, list[npt.NDArray[np.float32]]] = {1: [], 4: [], 10: []}
        for arr in arrays:
            if arr.ndim != 2 or arr.shape[1] not in by_kind:
                raise InvalidInputError(
                    f"Unexpected detector output of shape {arr.shape}; SCRFD emits (k, 1) "
                    "scores, (k, 4) box distances and (k, 10) keypoint offsets."
                )
            by_kind[arr.shape[1]].append(arr)
        # Finer strides have more anchors: order each kind by row count, largest first.
        if any(len(group) != len(self._strides) for group in by_kind.values()):
            counts = {c: len(g) for c, g in by_kind.items()}
            raise InvalidInputError(
                f"Detector outputs must come as {len(self._strides)} score, box and keypoint "
                f"maps; got counts by last axis {counts}."
            )
        levels = [sorted(by_kind[c], key=lambda a: -a.shape[0]) for c in (1, 4, 10)]
        scores_all, boxes_all, kps_all = [], [], []
        for stride, scores, dist, kps in zip(self._strides, *levels, strict=True):
            rows, cols = det_h // stride, det_w // stride
            if scores.shape[0] != rows * cols * self._anchors:
                raise InvalidInputError(
                    f"Detector output for stride {stride} has {scores.shape[0]} anchors; "
                    f"expected {rows}x{cols}x{self._anchors} for a {det_w}x{det_h} input."
                )
            keep = np.flatnonzero(scores[:, 0] >= self.score_threshold)
            if keep.size == 0:
                continue
            cell = keep // self._anchors  # anchors of one cell are consecutive rows
            centres = np.stack([cell % cols, cell // cols], axis=1) * float(stride)  # (k, 2)
            d = dist[keep].astype(np.float64) * stride  # (k, 4) l, t, r, b
            boxes = np.concatenate([centres - d[:, :2], centres + d[:, 2:]], axis=1)
            offsets = kps[keep].astype(np.float64).reshape(-1, 5, 2) * stride  # (k, 5, 2)
            scores_all.append(scores[keep, 0].astype(np.float64))
            boxes_all.append(boxes)
            kps_all.append(centres[:, None, :] + offsets)
        if not scores_all:
            return np.zeros(0), np.zeros((0, 4)), np.zeros((0, 5, 2))
        return np.concatenate(scores_all), np.concatenate(boxes_all), np.concatenate(kps_all)

    def __repr__(self) -> str:
        return (
            f"RetinaFaceDetector(det_size={self.det_size}, "
            f"score_threshold={self.score_threshold}, nms_threshold={self.nms_threshold}, "
            f"device={self.device!r}, path='{self.weights_path}')"
        )

    def detect(self, image: npt.NDArray[np.uint8]) -> list[Face]:
        """Detect faces in one RGB image.

        Parameters
        ----------
        image : numpy.ndarray, shape (H, W, 3)
            RGB image (grey, RGBA, uint16 and [0, 1] float images are converted by
            :func:`~idaudit.faces._io.to_rgb_uint8`).

        Returns
        -------
        list of Face
            Faces best score first; boxes ``(x1, y1, x2, y2)`` and landmarks (left eye, right
            eye, nose, left and right mouth corner) in the image's pixel coordinates.
        """
        image = to_rgb_uint8(image)
        blob, scale = self._blob(image)
        outputs = self.session.run(None, {self._input_name: blob})
        scores, boxes, kps = self._decode(outputs, blob.shape[2], blob.shape[3])
        boxes, kps = boxes / scale, kps / scale
        keep = _nms(boxes, scores, self.nms_threshold)
        return [Face(box=boxes[i], score=float(scores[i]), landmarks=kps[i]) for i in keep]


# --------------------------------------------------------------------------- ONNX encoders


class OnnxEncoder(CropEncoder):
    """An ONNX identity encoder on aligned square crops, run by onnxruntime.

    Parameters
    ----------
    path : str or os.PathLike
        Local ``.onnx`` file taking ``(n, 3, input_size, input_size)`` float32 and returning
        ``(n, dim)`` (first output).
    input_size : int, default 112
        Side of the aligned crop.
    mean, std : float or sequence of 3 floats, default 127.5
        Pixel normalisation ``(x - mean) / std`` on the 0-255 scale, per channel in the order the
        network receives them (after the BGR swap when ``bgr=True``).
    bgr : bool, default False
        Feed channels as BGR instead of RGB.
    name : str, default "onnx-encoder"
        Model name recorded in results.
    threads : int, optional
        onnxruntime intra-op threads (default: onnxruntime's choice).
    batch_size : int, default 64
        Crops per onnxruntime call (a model with a fixed batch axis uses its own size).
    device : {"cpu", "cuda", "cuda:<index>"}, default "cpu"
        ``"cuda"`` needs onnxruntime-gpu with a working CUDA provider (no silent fallback).
        Stored as ``"cpu"`` or ``"cuda:<index>"``.

    Notes
    -----
    Outputs are L2-normalised, ``e / ||e||`` (``encode(crops, normalize=False)``: the raw
    network output). onnxruntime graphs give no gradients: :meth:`forward` raises
    :class:`TypeError`.

    Examples
    --------
    >>> enc = OnnxEncoder("model.onnx", mean=127.5, std=127.5, name="my-net")  # doctest: +SKIP
    >>> emb = enc.encode(crops)  # (n, dim) float32, unit rows  # doctest: +SKIP
    """

    differentiable = False

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        input_size: int = 112,
        mean: float | Sequence[float] = 127.5,
        std: float | Sequence[float] = 127.5,
        bgr: bool = False,
        name: str = "onnx-encoder",
        threads: int | None = None,
        batch_size: int = 64,
        device: str = "cpu",
    ) -> None:
        self.input_size = check_integer(input_size, "input_size", minimum=1)
        self.batch_size = check_integer(batch_size, "batch_size", minimum=1)
        self._mean = np.broadcast_to(np.asarray(mean, np.float32), (3,)).reshape(1, 3, 1, 1)
        self._std = np.broadcast_to(np.asarray(std, np.float32), (3,)).reshape(1, 3, 1, 1)
        if np.any(self._std <= 0):
            raise InvalidInputError(f"`std` must be positive; got {std!r}.")
        self.bgr = bool(bgr)
        self.name = name
        self.threads = threads
        self.weights_path = Path(path).expanduser()
        if not self.weights_path.is_file():
            raise MissingWeightsError(
                f"ONNX model file {self.weights_path} does not exist (idaudit never downloads "
                "weights; pass the path of a local .onnx file)."
            )
        self.session, self.device = _onnx_session(
            self.weights_path, _check_threads(threads), device
        )
        inp = self.session.get_inputs()[0]
        self._input_name = inp.name
        spatial = inp.shape[2:4]
        if all(isinstance(v, int) for v in spatial) and tuple(spatial) != (
            self.input_size,
            self.input_size,
        ):
            raise InvalidInputError(
                f"`input_size` must match the model's input {spatial[0]}x{spatial[1]}; "
                f"got {input_size!r}."
            )
        # A fixed batch axis (e.g. exported with batch 1) dictates the chunk size.
        self._fixed_batch = inp.shape[0] if isinstance(inp.shape[0], int) else None
        out_dim = self.session.get_outputs()[0].shape[-1]
        if isinstance(out_dim, int):
            self.dim = out_dim
        else:
            probe = np.zeros((1, self.input_size, self.input_size, 3), np.uint8)
            self.dim = int(self._run(probe).shape[1])

    def _run(self, crops: npt.NDArray[np.uint8]) -> npt.NDArray[np.float32]:
        """Raw network outputs ``(n, dim)`` for ``(n, s, s, 3)`` uint8 crops."""
        x = crops.astype(np.float32).transpose(0, 3, 1, 2)  # (n, 3, s, s) RGB
        if self.bgr:
            x = x[:, ::-1]
        x = np.ascontiguousarray((x - self._mean) / self._std, dtype=np.float32)
        step = self._fixed_batch or self.batch_size
        chunks = []
        for start in range(0, x.shape[0], step):
            part = x[start : start + step]
            n = part.shape[0]
            if self._fixed_batch and n < step:  # pad the last chunk to the fixed batch
                part = np.concatenate([part, np.zeros((step - n, *part.shape[1:]), np.float32)])
            out = self.session.run(None, {self._input_name: part})[0]
            chunks.append(np.asarray(out, np.float32).reshape(part.shape[0], -1)[:n])
        return np.concatenate(chunks)

    def _encode(self, crops: npt.NDArray[np.uint8], normalize: bool) -> npt.NDArray[np.float32]:
        if crops.shape[0] == 0:
            return np.zeros((0, self.dim), np.float32)
        raw = self._run(crops)  # (n, dim)
        return l2_normalise(raw) if normalize else raw

    def forward(self, x: Any, *, normalize: bool = True) -> Any:
        """Not available: onnxruntime graphs are not differentiable.

        Raises
        ------
        TypeError
            Always.
        """
        raise TypeError(
            f"{type(self).__name__} ({self.name}) runs through onnxruntime and has no "
            "differentiable forward; use AdaFaceEncoder, InceptionResnetV1Encoder or "
            "TorchDlibEncoder for gradients."
        )

    def __repr__(self) -> str:
        mean = [float(v) for v in self._mean.ravel()]
        std = [float(v) for v in self._std.ravel()]
        return (
            f"{type(self).__name__}(name={self.name!r}, dim={self.dim}, "
            f"input_size={self.input_size}, mean={mean}, std={std}, bgr={self.bgr}, "
            f"device={self.device!r}, path='{self.weights_path}')"
        )


class ArcFaceEncoder(OnnxEncoder):
    """InsightFace ArcFace ResNet-50 (``buffalo_l/w600k_r50.onnx``): 112×112 → 512-d.

    Parameters
    ----------
    path : str or os.PathLike, optional
        ``w600k_r50.onnx`` or the ``buffalo_l`` folder. Default:
        ``$IDAUDIT_WEIGHTS/buffalo_l/w600k_r50.onnx``.
    threads : int, optional
        onnxruntime intra-op threads.
    batch_size : int, default 64
        Crops per onnxruntime call.
    device : {"cpu", "cuda", "cuda:<index>"}, default "cpu"
        Execution device (CUDA needs onnxruntime-gpu; no silent fallback).
    verify : bool, default True
        Check the SHA-256 when the registry pins one.

    Notes
    -----
    Input convention as InsightFace's own ``ArcFaceONNX.get_feat``: RGB channel order (it
    reads BGR with OpenCV and swaps), ``(x - 127.5) / 127.5``, crops aligned by the 5-point
    similarity transform onto the ArcFace 112×112 template. The weights are for
    non-commercial research only.

    References
    ----------
    .. [1] J. Deng, J. Guo, N. Xue, S. Zafeiriou, "ArcFace: Additive angular margin loss for deep
       face recognition", CVPR 2019.

    Examples
    --------
    >>> enc = ArcFaceEncoder("~/weights/buffalo_l", threads=2)  # doctest: +SKIP
    >>> emb = enc.encode(np.stack([enc.align(img, f) for f in faces]))  # doctest: +SKIP
    """

    def __init__(
        self,
        path: str | os.PathLike[str] | None = None,
        *,
        threads: int | None = None,
        batch_size: int = 64,
        device: str = "cpu",
        verify: bool = True,
    ) -> None:
        resolved = resolve_weights("buffalo_l", "w600k_r50.onnx", path, verify=verify)
        # OnnxEncoder's defaults are this input: 112×112 RGB crops, (x - 127.5) / 127.5
        super().__init__(
            resolved,
            name="arcface-w600k-r50",
            threads=threads,
            batch_size=batch_size,
            device=device,
        )


class LVFaceEncoder(OnnxEncoder):
    """LVFace vision-transformer face encoder (ONNX release): 112×112 → 512-d.

    Parameters
    ----------
    path : str or os.PathLike, optional
        The ``.onnx`` file or its folder. Default:
        ``$IDAUDIT_WEIGHTS/lvface/LVFace-<variant>_Glint360K.onnx``.
    variant : {"T", "S", "B", "L"}, default "B"
        Model size; picks the file name.
    threads : int, optional
        onnxruntime intra-op threads.
    batch_size : int, default 64
        Crops per onnxruntime call.
    device : {"cpu", "cuda", "cuda:<index>"}, default "cpu"
        Execution device (CUDA needs onnxruntime-gpu; no silent fallback).
    verify : bool, default True
        Check the SHA-256 when the registry pins one.

    Notes
    -----
    Input convention of LVFace's published ONNX inference: RGB, ``(x / 255 - 0.5) / 0.5``
    (identical to ``(x - 127.5) / 127.5``), 112×112 crops aligned on the ArcFace template.

    References
    ----------
    .. [1] J. You et al., "LVFace: Progressive cluster optimization for large vision models in
       face recognition", ICCV 2025.

    Examples
    --------
    >>> enc = LVFaceEncoder("~/weights/lvface", variant="B")  # doctest: +SKIP
    """

    def __init__(
        self,
        path: str | os.PathLike[str] | None = None,
        *,
        variant: str = "B",
        threads: int | None = None,
        batch_size: int = 64,
        device: str = "cpu",
        verify: bool = True,
    ) -> None:
        if variant not in ("T", "S", "B", "L"):
            raise InvalidInputError(f"`variant` must be one of T, S, B, L; got {variant!r}.")
        filename = f"LVFace-{variant}_Glint360K.onnx"
        resolved = resolve_weights("lvface", filename, path, verify=verify)
        # ArcFace's input, OnnxEncoder's defaults: 112×112 RGB crops, (x - 127.5) / 127.5
        super().__init__(
            resolved,
            name=f"lvface-{variant.lower()}-glint360k",
            threads=threads,
            batch_size=batch_size,
            device=device,
        )
        self.variant = variant


# --------------------------------------------------------------------------- torch encoders
