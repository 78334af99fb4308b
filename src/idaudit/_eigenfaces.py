"""Eigenfaces: an identity encoder fitted on public faces, the private-swap sweep's auditor."""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from idaudit._validation import RngLike, check_integer
from idaudit.exceptions import InvalidInputError

__all__ = ["EigenfaceEncoder"]


class EigenfaceEncoder:
    r"""Eigenfaces: grey aligned pixels projected on their leading principal axes, unit norm.

    An identity encoder with nothing in common with a network (Turk and Pentland, 1991), fitted
    on public faces only; :func:`private_swap_sweep` uses it as an auditor's encoder that is
    not the one inside :class:`~idaudit.pipeline.EmbeddingNoiseSwap`. It is weak as a face
    recogniser, which does not matter here: a proved guarantee holds for any auditor.

    Parameters
    ----------
    mean : array_like, shape (size * size,)
        Mean grey face, values in [0, 1].
    components : array_like, shape (dim, size * size)
        Orthonormal principal axes, leading first.
    size : int
        Side of the aligned crop (ArcFace 5-point template scaled to ``size``).

    Attributes
    ----------
    name : str
        ``"eigenfaces-<dim>x<size>"``.
    dim, input_size : int
    differentiable : bool
        False.
    device : str
        ``"cpu"``.

    Notes
    -----
    A crop ``x`` (grey = mean of the RGB channels, divided by 255, flattened) is embedded as
    :math:`W (x - \mu) / \lVert W (x - \mu) \rVert` with :math:`W` the ``components``; a crop
    exactly at the mean face (zero projection) is embedded as the first axis.

    References
    ----------
    .. [1] M. Turk, A. Pentland, "Eigenfaces for recognition", J. Cognitive Neuroscience 3(1),
       1991.

    Examples
    --------
    >>> from idaudit.benchmark import EigenfaceEncoder
    >>> enc = EigenfaceEncoder.from_generator(64, dim=8, rng=0)
    >>> enc.name, enc.dim
    ('eigenfaces-8x64', 8)
    """

    differentiable = False
    device = "cpu"

    def __init__(self, mean: npt.ArrayLike, components: npt.ArrayLike, *, size: int) -> None:
        self.input_size = check_integer(size, "size", minimum=8)
        mu = np.asarray(mean, dtype=np.float64)
        w = np.asarray(components, dtype=np.float64)
        pixels = self.input_size**2
        if mu.shape != (pixels,) or not np.isfinite(mu).all():
            raise InvalidInputError(
                f"`mean` must be finite of shape ({pixels},) for size {self.input_size}; got "
                f"{mu.shape}."
            )
        if w.ndim != 2 or w.shape[1] != pixels or not 1 <= w.shape[0] <= pixels:
            raise InvalidInputError(
                f"`components` must have shape (dim, {pixels}) with 1 <= dim <= {pixels}; got "
                f"{w.shape}."
            )
        if not np.isfinite(w).all() or not np.allclose(w @ w.T, np.eye(len(w)), atol=1e-6):
            raise InvalidInputError("`components` must be finite orthonormal rows.")
        self.mean, self.components = mu, w
        self.dim = int(w.shape[0])
        self.name = f"eigenfaces-{self.dim}x{self.input_size}"

    @classmethod
    def fit(cls, crops: npt.ArrayLike, *, dim: int = 32) -> EigenfaceEncoder:
        """Fit the mean face and the ``dim`` leading axes of aligned crops (SVD).

        Parameters
        ----------
        crops : array_like of uint8, shape (n, size, size, 3)
            Aligned public faces, ``n > dim``.
        dim : int, default 32

        Returns
        -------
        EigenfaceEncoder
        """
        arr = np.asarray(crops)
        if (
            arr.dtype != np.uint8
            or arr.ndim != 4
            or arr.shape[3] != 3
            or arr.shape[1] != arr.shape[2]
        ):
            raise InvalidInputError(
                f"`crops` must be uint8 of shape (n, size, size, 3); got {arr.dtype} {arr.shape}."
            )
        k = check_integer(dim, "dim", minimum=1)
        if len(arr) <= k:
            raise InvalidInputError(
                f"`crops` must hold more than `dim` = {k} faces; got {len(arr)}."
            )
        x = _grey_rows(arr)
        mu = x.mean(axis=0)
        _, _, vt = np.linalg.svd(x - mu, full_matrices=False)
        return cls(mu, vt[:k], size=arr.shape[1])

    @classmethod
    def from_generator(
        cls, n: int = 256, *, dim: int = 32, size: int = 64, rng: RngLike = 0
    ) -> EigenfaceEncoder:
        """Fit on ``n`` faces of the shipped DCGAN, aligned with its fixed template.

        Parameters
        ----------
        n : int, default 256
            Public faces drawn, ``n > dim``.
        dim : int, default 32
        size : int, default 64
        rng : int, SeedSequence or Generator, default 0

        Returns
        -------
        EigenfaceEncoder
        """
        from idaudit.faces import ShippedFaceGenerator

        gen = ShippedFaceGenerator()
        k = check_integer(dim, "dim", minimum=1)
        side = check_integer(size, "size", minimum=8)
        # the crops need only the alignment, which does not depend on the axes
        aligner = cls(np.zeros(side * side), np.eye(1, side * side), size=side)
        crops = gen.crops(gen.sample(check_integer(n, "n", minimum=k + 1), rng=rng), aligner)
        return cls.fit(crops, dim=k)

    def align(self, image: npt.NDArray[np.uint8], face: Any) -> npt.NDArray[np.uint8]:
        """Cut the ``(size, size, 3)`` crop of ``face`` on the ArcFace 5-point template."""
        from idaudit.faces import align

        return align(image, face.landmarks, size=self.input_size)

    def encode(self, crops: npt.ArrayLike, *, normalize: bool = True) -> npt.NDArray[np.float32]:
        """Embed ``(n, size, size, 3)`` uint8 crops → ``(n, dim)`` float32 (unit rows)."""
        arr = np.asarray(crops)
        s = self.input_size
        if arr.dtype != np.uint8 or arr.ndim != 4 or arr.shape[1:] != (s, s, 3):
            raise InvalidInputError(
                f"`crops` must be uint8 of shape (n, {s}, {s}, 3); got {arr.dtype} {arr.shape}."
            )
        proj = (_grey_rows(arr) - self.mean) @ self.components.T
        if normalize:
            norm = np.linalg.norm(proj, axis=1, keepdims=True)
            proj = np.where(norm > 0, proj / np.where(norm > 0, norm, 1.0), np.eye(1, self.dim))
        return proj.astype(np.float32)

    def forward(self, x: Any, *, normalize: bool = True) -> Any:
        """Not differentiable: raises :class:`TypeError`."""
        raise TypeError(f"{self.name} is not differentiable (no torch forward).")

    def __repr__(self) -> str:
        return f"EigenfaceEncoder(name={self.name!r})"


def _grey_rows(crops: npt.NDArray[np.uint8]) -> npt.NDArray[np.float64]:
    """``(n, size, size, 3)`` uint8 → ``(n, size * size)`` grey values in [0, 1]."""
    grey: npt.NDArray[np.float64] = crops.astype(np.float64).mean(axis=3) / 255.0
    return grey.reshape(len(crops), -1)
