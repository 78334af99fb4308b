"""Protocols and small value types shared by every face model in :mod:`idaudit.faces`."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

if TYPE_CHECKING:  # pragma: no cover
    import torch

__all__ = ["Detector", "Encoder", "Face"]

#: How to install what the face models need, for ImportErrors (the faces modules share it).
FACES_EXTRA = 'pip install "idaudit[faces]"'


@dataclass(frozen=True)
class Face:
    """One detected face.

    Attributes
    ----------
    box : numpy.ndarray of float, shape (4,)
        ``(x1, y1, x2, y2)`` in pixel coordinates of the input image.
    score : float
        Detector confidence in [0, 1].
    landmarks : numpy.ndarray of float, shape (5, 2)
        ``(x, y)`` pixel coordinates of the left eye, right eye, nose tip, left and right mouth
        corners (the subject's left/right as seen in the image: "left" has the smaller x).
    """

    box: npt.NDArray[np.float64]
    score: float
    landmarks: npt.NDArray[np.float64] = field(repr=False)

    @property
    def area(self) -> float:
        """Box area in square pixels."""
        x1, y1, x2, y2 = (float(v) for v in self.box)
        return max(x2 - x1, 0.0) * max(y2 - y1, 0.0)


@runtime_checkable
class Detector(Protocol):
    """Finds faces in an RGB image.

    ``detect(image)`` takes an ``(H, W, 3)`` uint8 RGB array and returns the faces found, best
    first (possibly an empty list).
    """

    def detect(self, image: npt.NDArray[np.uint8]) -> list[Face]:
        """Return the faces in ``image``."""
        ...


@runtime_checkable
class Encoder(Protocol):
    """Maps aligned face crops to L2-normalised identity embeddings.

    Attributes
    ----------
    name : str
        Model name recorded in results (e.g. ``"dlib-resnet-v1"``).
    dim : int
        Embedding dimension.
    input_size : int
        Side of the square aligned crop the encoder expects, in pixels.
    differentiable : bool
        ``True`` when :meth:`forward` runs a torch graph that gradients can flow through.
    device : str
        Where the model runs: ``"cpu"`` or ``"cuda:<index>"`` (dlib always runs on ``"cpu"``).

    Notes
    -----
    One contract for every encoder:

    * ``encode(crops)`` takes a stack ``(n, input_size, input_size, 3)`` of uint8 RGB crops;
      a single crop needs its leading axis (``crop[None]``): a 3-D array is refused, never
      guessed to be one crop.
    * ``encode`` and ``forward`` both return **L2-normalised** rows by default, so a distance
      or threshold computed on ``forward(x)`` means the same as one on ``encode(crops)``.
      ``normalize=False`` gives the network's raw output (for dlib the scale on which its 0.6
      threshold applies).
    * Non-differentiable encoders raise :class:`TypeError` from ``forward``.
    """

    name: str
    dim: int
    input_size: int
    differentiable: bool
    device: str

    def encode(self, crops: npt.NDArray[np.uint8]) -> npt.NDArray[np.float32]:
        """Embed ``(n, input_size, input_size, 3)`` uint8 RGB crops → ``(n, dim)`` float32."""
        ...

    def align(self, image: npt.NDArray[np.uint8], face: Face) -> npt.NDArray[np.uint8]:
        """Cut the ``(input_size, input_size, 3)`` crop this encoder expects for ``face``."""
        ...

    def forward(self, x: Any, *, normalize: bool = True) -> Any:
        """Differentiable torch forward on ``(n, 3, input_size, input_size)`` floats in [0, 1].

        Returns ``(n, dim)`` unit-norm rows (``normalize=False``: the raw network output) on
        :attr:`device`. Encoders with ``differentiable = False`` raise :class:`TypeError`.
        """
        ...


def device_name(device: torch.device) -> str:
    """``"cpu"`` or ``"cuda:<index>"``: the one spelling of a device every encoder reports."""
    index: int | None = device.index  # torch's stub types it int; a bare "cuda" has None
    if device.type == "cuda" and index is None:
        import torch

        # a bare "cuda" means the current CUDA device, where torch puts the weights
        return f"cuda:{torch.cuda.current_device()}"
    return str(device)
