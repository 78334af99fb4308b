"""Checks and steps every encoder of cropped faces shares: the crop stack, L2 rows, alignment."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any

import numpy as np
import numpy.typing as npt

from idaudit.exceptions import InvalidInputError
from idaudit.faces._types import Face

__all__ = ["CropEncoder", "align_to", "check_crops", "l2_normalise"]


def check_crops(crops: Any, size: int) -> npt.NDArray[np.uint8]:
    """Return ``crops`` as a contiguous ``(n, size, size, 3)`` uint8 stack.

    One crop without its batch axis is refused, as by every encoder (the protocol's rule).
    """
    if not isinstance(crops, np.ndarray):
        raise TypeError(f"`crops` must be a numpy.ndarray; got {type(crops).__name__}.")
    if crops.dtype != np.uint8:
        raise TypeError(f"`crops` must have dtype uint8 (RGB, 0-255); got {crops.dtype}.")
    if crops.ndim != 4 or crops.shape[1:] != (size, size, 3):
        raise InvalidInputError(
            f"`crops` must have shape (n, {size}, {size}, 3) (aligned RGB crops); "
            f"got {crops.shape}. One crop needs a leading axis: `crop[None]`."
        )
    return np.require(crops, requirements=["C", "W"])  # torch.from_numpy needs writable


def l2_normalise(x: npt.NDArray[np.floating[Any]]) -> npt.NDArray[np.float32]:
    norm = np.linalg.norm(x, axis=1, keepdims=True)  # (n, 1)
    out: npt.NDArray[np.float32] = (x / np.maximum(norm, 1e-12)).astype(np.float32)
    return out


def align_to(image: npt.NDArray[np.uint8], face: Face, size: int) -> npt.NDArray[np.uint8]:
    # Imported here: the alignment module sits beside this one and loads lazily.
    from idaudit.faces._align import align

    out: npt.NDArray[np.uint8] = align(image, face.landmarks, size=size)
    return out


class CropEncoder(ABC):
    """What the encoders of square 5-point crops share: the checked crop stack and alignment.

    Subclasses set ``input_size`` and ``dim`` and implement ``_encode(crops, normalize)`` on
    the checked ``(n, input_size, input_size, 3)`` stack.
    """

    input_size: int
    dim: int

    @abstractmethod
    def _encode(self, crops: npt.NDArray[np.uint8], normalize: bool) -> npt.NDArray[np.float32]:
        """Embeddings ``(n, dim)`` of checked crops."""

    def encode(
        self, crops: npt.NDArray[np.uint8], *, normalize: bool = True
    ) -> npt.NDArray[np.float32]:
        """Embed aligned crops.

        Parameters
        ----------
        crops : numpy.ndarray of uint8, shape (n, input_size, input_size, 3)
            Aligned RGB face crops (see :meth:`align`).
        normalize : bool, default True
            L2-normalise each row (the Encoder contract); ``False`` returns the raw network
            output.

        Returns
        -------
        numpy.ndarray of float32, shape (n, dim)
            Unit-norm embeddings (raw with ``normalize=False``).
        """
        return self._encode(check_crops(crops, self.input_size), normalize)

    def align(self, image: npt.NDArray[np.uint8], face: Face) -> npt.NDArray[np.uint8]:
        """Cut the aligned ``(input_size, input_size, 3)`` crop of ``face`` (5-point template)."""
        return align_to(image, face, self.input_size)
