"""Turning what users call an image into the ``(H, W, 3)`` uint8 RGB array every model expects.

One rule set, shared by every detector, encoder and the pipeline:

=====================  ==========================================================================
input                  becomes
=====================  ==========================================================================
uint8 ``(H, W, 3)``    itself (RGB order assumed)
``(H, W)`` / ``(H, W, 1)``  grey replicated to three channels
``(H, W, 2)``          grey + alpha: alpha dropped, grey replicated
``(H, W, 4)``          RGBA: alpha dropped (not composited: photos rarely carry real alpha)
uint16                 ``round(x / 257)``: the exact map of 0…65535 onto 0…255 (65535 → 255)
float                  accepted only inside [0, 1]; ``round(255 · x)``
bool, other ints       rejected (no unambiguous scale)
=====================  ==========================================================================

Files are read with Pillow, EXIF orientation applied; 16-bit and float TIFF/PNG modes follow
the same rules. Pillow's 32-bit integer mode ``"I"`` carries 8- or 16-bit data: its pixels are
taken as 8-bit when they all lie in 0…255 and as 16-bit (``round(x / 257)``) when any exceeds
255; ``"I;16*"`` modes are always 16-bit; values outside 0…65535 are refused.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from idaudit.exceptions import InvalidInputError
from idaudit.faces._types import FACES_EXTRA

__all__ = [
    "ENLARGE_BELOW",
    "FRAME_PAD_FRACTION",
    "FRAME_SIDE",
    "enlarge_frame",
    "load_image",
    "prepare_frame",
    "read_pixels",
    "to_rgb_uint8",
]

#: Edge padding :func:`enlarge_frame` adds on every side, as a fraction of the enlarged side.
FRAME_PAD_FRACTION = 0.3
#: Side the shorter side of a small frame is brought to (:func:`prepare_frame`).
FRAME_SIDE = 160
#: Frames whose shorter side is below this many pixels are enlarged before detection
#: (:func:`prepare_frame`). It is :data:`FRAME_SIDE` itself: every frame smaller than the
#: side small frames are brought to is brought to it, so no frame is treated better for
#: being smaller (a threshold of 112 enlarged and padded a 111-pixel face but left a
#: 128-pixel one that fills its frame without the context detectors need).
ENLARGE_BELOW = FRAME_SIDE


def to_rgb_uint8(image: Any, name: str = "image") -> npt.NDArray[np.uint8]:
    """Convert an image array to a C-contiguous ``(H, W, 3)`` uint8 RGB array.

    Parameters
    ----------
    image : numpy.ndarray, shape (H, W), (H, W, 1), (H, W, 2), (H, W, 3) or (H, W, 4)
        Grey, grey + alpha, RGB or RGBA; uint8, uint16 or float in [0, 1].
    name : str, default "image"
        Argument name used in error messages.

    Returns
    -------
    numpy.ndarray of uint8, shape (H, W, 3)
        C-contiguous and writable: ``image`` itself when it already is all that, else a copy.

    Raises
    ------
    TypeError
        If ``image`` is not a numpy array, or its dtype is neither uint8, uint16 nor float.
    InvalidInputError
        If it is empty, has the wrong number of dimensions or channels, or is a float image
        with values outside [0, 1] (or NaN).

    Notes
    -----
    uint16 is scaled by ``round(x / 257)`` (``255 / 65535 = 1 / 257`` exactly), so 16-bit
    white stays white. Floats are taken as intensities in [0, 1] and rounded after ``x · 255``;
    anything else (e.g. a 0–255 float array) is refused rather than guessed.

    Examples
    --------
    >>> from idaudit.faces._io import to_rgb_uint8
    >>> import numpy as np
    >>> to_rgb_uint8(np.full((2, 2), 65535, dtype=np.uint16))[0, 0].tolist()
    [255, 255, 255]
    """
    if not isinstance(image, np.ndarray):
        raise TypeError(f"`{name}` must be a numpy array; got {type(image).__name__}.")
    if image.size == 0:
        raise InvalidInputError(f"`{name}` must not be empty; got shape {image.shape}.")
    arr = image[:, :, None] if image.ndim == 2 else image
    if arr.ndim != 3 or arr.shape[2] not in (1, 2, 3, 4):
        raise InvalidInputError(
            f"`{name}` must have shape (H, W), (H, W, 1), (H, W, 2), (H, W, 3) or (H, W, 4); "
            f"got {image.shape}."
        )
    arr = arr[:, :, :1] if arr.shape[2] == 2 else arr[:, :, :3]  # drop alpha
    arr = _to_uint8(arr, name)
    if arr.shape[2] == 1:
        arr = np.repeat(arr, 3, axis=2)
    # writable as well: torch.from_numpy warns on read-only arrays (e.g. Pillow's buffers)
    return np.require(arr, requirements=["C", "W"])


def _to_uint8(arr: npt.NDArray[Any], name: str) -> npt.NDArray[np.uint8]:
    if arr.dtype == np.uint8:
        return arr
    if arr.dtype == np.uint16:
        return np.rint(arr / 257.0).astype(np.uint8)
    if np.issubdtype(arr.dtype, np.floating):
        lo, hi = float(np.min(arr)), float(np.max(arr))
        if not (np.isfinite(lo) and np.isfinite(hi)) or lo < 0.0 or hi > 1.0:
            raise InvalidInputError(
                f"`{name}` is a float image, so its values must lie in [0, 1]; got range "
                f"[{lo:g}, {hi:g}]. Divide 0–255 data by 255 or pass uint8."
            )
        return np.rint(arr * 255.0).astype(np.uint8)
    raise TypeError(
        f"`{name}` must have dtype uint8, uint16 or float (in [0, 1]); got {arr.dtype}."
    )


def load_image(path: str | os.PathLike[str]) -> npt.NDArray[np.uint8]:
    """Read an image file as a ``(H, W, 3)`` uint8 RGB array.

    Parameters
    ----------
    path : str or os.PathLike
        Any format Pillow reads (JPEG, PNG incl. 16-bit, TIFF, WebP, ...).

    Returns
    -------
    numpy.ndarray of uint8, shape (H, W, 3)

    Raises
    ------
    FileNotFoundError
        If the file does not exist.
    OSError
        If Pillow cannot decode it (truncated or not an image).
    InvalidInputError
        If the decoded pixels break the rules of :func:`to_rgb_uint8`.

    Notes
    -----
    The EXIF orientation tag is applied (``PIL.ImageOps.exif_transpose``), as a photo viewer
    would. Palette and CMYK images are converted by Pillow; 16-bit and float modes keep their
    depth until :func:`to_rgb_uint8` scales them. ``"I;16*"`` modes are always 16-bit. Pillow's
    32-bit integer mode ``"I"`` holds 8- or 16-bit data, so its depth is read from the values:
    all within 0–255 means 8-bit (kept as is), any above 255 means 16-bit (``round(x / 257)``);
    values below 0 or above 65535 raise :class:`~idaudit.exceptions.InvalidInputError`.

    Examples
    --------
    >>> from idaudit.faces import load_image
    >>> import numpy as np, tempfile, pathlib
    >>> from PIL import Image
    >>> p = pathlib.Path(tempfile.mkdtemp()) / "grey.png"
    >>> Image.fromarray(np.zeros((4, 5), np.uint8)).save(p)
    >>> load_image(p).shape
    (4, 5, 3)
    """
    return to_rgb_uint8(read_pixels(path), name="path")


def read_pixels(path: str | os.PathLike[str]) -> npt.NDArray[Any]:
    """Decode an image file into its pixel array, before the :func:`to_rgb_uint8` rules.

    The first half of :func:`load_image`, kept apart so that callers can tell a file that
    cannot be read (``OSError`` and Pillow's own errors, raised here) from pixels idaudit
    refuses to interpret (:func:`to_rgb_uint8`'s errors).

    Parameters
    ----------
    path : str or os.PathLike
        The image file.

    Returns
    -------
    numpy.ndarray, shape (H, W) or (H, W, C)
        uint8, native uint16 or float pixels, EXIF orientation applied.

    Raises
    ------
    OSError
        Missing, truncated or undecodable file.
    InvalidInputError
        Integer pixels outside 0…65535.
    """
    try:
        from PIL import Image, ImageOps
    except ImportError as exc:  # pragma: no cover - pillow is in the faces extra
        raise ImportError(f"Reading image files needs Pillow: {FACES_EXTRA}") from exc
    file = Path(path)
    with Image.open(file) as opened:
        opened.load()  # decode now, so truncated files fail here
        img = ImageOps.exif_transpose(opened)
        if img.mode in ("P", "PA", "CMYK", "YCbCr", "LAB", "HSV", "1"):
            img = img.convert("RGBA" if "transparency" in img.info or img.mode == "PA" else "RGB")
        sixteen_bit = img.mode.startswith("I;16")
        arr = np.asarray(img)
    if (
        arr.dtype.kind in "iu"
        and arr.dtype != np.uint8
        and not (arr.dtype == np.uint16 and arr.dtype.isnative)
    ):
        # "I;16*" modes are 16-bit whatever their values. Pillow's "I" mode (int32) is used for
        # both 8- and 16-bit data: values within 0–255 are 8-bit, larger ones up to 65535 16-bit.
        low, high = (int(arr.min()), int(arr.max())) if arr.size else (0, 0)
        if low < 0 or high > 65535:
            raise InvalidInputError(
                f"`path` {os.fspath(file)!r} must hold integer pixels within 0–65535; "
                f"got values from {low} to {high}."
            )
        arr = arr.astype(np.uint16 if sixteen_bit or high > 255 else np.uint8)
    return arr


def enlarge_frame(
    image: npt.NDArray[np.uint8], side: int, *, square: bool = False
) -> npt.NDArray[np.uint8]:
    """Enlarge a small frame and pad it with its own edges, for detection and alignment.

    Detectors and margin-based aligners (dlib's padded chip) need context around a face that
    fills the frame, and black borders would change the embedding: the frame's shorter side
    is brought to ``side`` pixels (bicubic, aspect ratio kept; with ``square``, the whole
    frame to ``side`` × ``side``) and ``round(0.3 · side)`` pixels of edge replication are
    added on every side. The one rule behind the pipeline's small frames
    (:class:`idaudit.pipeline.EncodedGenerator`), the privacy check's small images and
    :meth:`ShippedFaceGenerator.crops`; each caller decides which frames count as small.

    Parameters
    ----------
    image : numpy.ndarray of uint8, shape (H, W, 3)
        The frame.
    side : int
        Side length after enlarging, at least 1.
    square : bool, default False
        Resize to ``side`` × ``side`` instead of keeping the aspect ratio.

    Returns
    -------
    numpy.ndarray of uint8, shape (H', W', 3)
        The enlarged, padded frame.

    Examples
    --------
    >>> import numpy as np
    >>> from idaudit.faces import enlarge_frame
    >>> enlarge_frame(np.zeros((64, 32, 3), np.uint8), 160).shape  # 320 x 160, plus 2 x 48
    (416, 256, 3)
    """
    from PIL import Image

    h, w = image.shape[:2]
    if square:
        size = (side, side)
    else:
        scale = side / min(h, w)
        size = (max(1, round(w * scale)), max(1, round(h * scale)))
    big = np.asarray(Image.fromarray(image).resize(size, Image.Resampling.BICUBIC))
    pad = round(FRAME_PAD_FRACTION * side)
    return np.pad(big, ((pad, pad), (pad, pad), (0, 0)), mode="edge")


def prepare_frame(image: npt.NDArray[np.uint8]) -> npt.NDArray[np.uint8]:
    """Enlarge a frame whose shorter side is under :data:`ENLARGE_BELOW` pixels; else keep it.

    The one enlargement policy of every road from images to embeddings (folders, cohort
    roots, generator draws): a small frame goes through :func:`enlarge_frame` to
    :data:`FRAME_SIDE` pixels, a frame of :data:`ENLARGE_BELOW` pixels or more is returned
    unchanged (the same object).

    Parameters
    ----------
    image : numpy.ndarray of uint8, shape (H, W, 3)
        The frame.

    Returns
    -------
    numpy.ndarray of uint8, shape (H', W', 3)
        ``image`` itself, or the enlarged, padded frame.

    Examples
    --------
    >>> import numpy as np
    >>> from idaudit.faces import prepare_frame
    >>> prepare_frame(np.zeros((128, 128, 3), np.uint8)).shape  # 160, plus 2 x 48
    (256, 256, 3)
    >>> prepare_frame(np.zeros((200, 180, 3), np.uint8)).shape
    (200, 180, 3)
    """
    if min(image.shape[:2]) >= ENLARGE_BELOW:
        return image
    return enlarge_frame(image, FRAME_SIDE)
