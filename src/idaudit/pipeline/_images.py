"""Image → image mechanisms to audit: the classic anonymisers and a latent-space face swap.

Each is a callable ``mechanism(image, rng=None) -> image`` on ``(H, W, 3)`` uint8 RGB frames,
with ``batch(images, rngs)`` for a stack (one generator per image, so a result never depends
on how images are batched), ``strength`` (the number figures put on their x axis) and
``params()`` (recorded as provenance).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
import numpy.typing as npt

from idaudit._validation import RngLike, check_in_range, check_integer, check_random_state
from idaudit.exceptions import InvalidInputError

if TYPE_CHECKING:
    from idaudit.faces import ShippedFaceGenerator

__all__ = ["GaussianBlur", "ImageMechanism", "LatentFaceSwap", "PixelNoise", "Pixelate"]

Image = npt.NDArray[np.uint8]


def _check_image(image: Any, name: str = "image") -> Image:
    arr = np.asarray(image)
    if arr.dtype != np.uint8 or arr.ndim != 3 or arr.shape[2] != 3 or 0 in arr.shape:
        raise InvalidInputError(
            f"`{name}` must be a non-empty (H, W, 3) uint8 RGB array; got {arr.dtype} {arr.shape}."
        )
    return arr


class ImageMechanism(ABC):
    """Base class: per-image ``__call__`` plus a batch method that loops (subclasses vectorise).

    Attributes
    ----------
    strength_name : str
        What :attr:`strength` measures (class attribute).
    deterministic : bool
        Whether the output is a function of the input alone (class attribute). A deterministic
        mechanism turns repeated source images into exact duplicate rows.
    """

    strength_name: ClassVar[str] = "strength"
    deterministic: ClassVar[bool] = True

    @property
    @abstractmethod
    def strength(self) -> float:
        """The mechanism's strength parameter (the x axis of an ε-vs-strength figure)."""

    def params(self) -> dict[str, Any]:
        """Parameters recorded as provenance."""
        return {"mechanism": type(self).__name__, self.strength_name: self.strength}

    @abstractmethod
    def _apply(self, image: Image, gen: np.random.Generator) -> Image:
        """Apply the mechanism to one checked frame with the generator ``gen``."""

    def __call__(self, image: Any, rng: RngLike = None) -> Image:
        """Apply the mechanism to one ``(H, W, 3)`` uint8 frame."""
        return self._apply(_check_image(image), check_random_state(rng))

    def batch(self, images: Sequence[Any], rngs: Sequence[RngLike]) -> list[Image]:
        """Apply the mechanism to each image with its own randomness.

        Parameters
        ----------
        images : sequence of (H, W, 3) uint8 arrays
        rngs : sequence of seeds or Generators, one per image

        Returns
        -------
        list of (H, W, 3) uint8 arrays
        """
        if len(images) != len(rngs):
            raise InvalidInputError(
                f"`rngs` must hold one entry per image; got {len(rngs)} vs {len(images)}."
            )
        return [self(im, rng=r) for im, r in zip(images, rngs, strict=True)]

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.strength_name}={self.strength:g})"


class GaussianBlur(ImageMechanism):
    """Gaussian blur of every colour channel: the most common face "anonymiser".

    Parameters
    ----------
    sigma : float
        Standard deviation of the kernel in pixels of the input frame, > 0 (a 64-pixel face
        at ``sigma=3`` is visibly smeared; identity usually survives for a face recogniser).

    Notes
    -----
    Deterministic: ``rng`` is accepted and unused, so repeated source images give exact
    duplicate outputs (see :func:`idaudit.pipeline.audit_generator`, ``sampling``). Edges are
    reflected (``scipy.ndimage.gaussian_filter``, ``mode="reflect"``, truncated at 4 σ).

    Examples
    --------
    >>> import numpy as np
    >>> from idaudit.pipeline import GaussianBlur
    >>> im = np.zeros((8, 8, 3), np.uint8); im[4, 4] = 255
    >>> out = GaussianBlur(1.0)(im)
    >>> out.shape, int(out[4, 4, 0]) < 255, int(out.sum()) > 0
    ((8, 8, 3), True, True)
    """

    strength_name = "sigma"

    def __init__(self, sigma: float) -> None:
        self.sigma = check_in_range(sigma, "sigma", 0.0, None)

    @property
    def strength(self) -> float:
        """σ in pixels."""
        return float(self.sigma)

    def _apply(self, image: Image, gen: np.random.Generator) -> Image:
        from scipy.ndimage import gaussian_filter

        out = gaussian_filter(image.astype(np.float64), sigma=(self.sigma, self.sigma, 0))
        blurred: Image = np.clip(np.rint(out), 0, 255).astype(np.uint8)
        return blurred


class Pixelate(ImageMechanism):
    """Mosaic: every ``block`` × ``block`` cell replaced by its mean colour.

    Parameters
    ----------
    block : int
        Side of a cell in pixels of the input frame, ≥ 2.
    random_offset : bool, default True
        Shift the cell grid by a random offset in ``[0, block)`` on each axis, drawn per image
        from ``rng`` (a grid fixed to the frame is a deterministic mechanism; a random phase
        is what a careful anonymiser does so that the same face does not always give the same
        mosaic).

    Examples
    --------
    >>> import numpy as np
    >>> from idaudit.pipeline import Pixelate
    >>> im = np.arange(16 * 16 * 3, dtype=np.uint8).reshape(16, 16, 3)
    >>> out = Pixelate(4, random_offset=False)(im)
    >>> bool((out[:4, :4] == out[0, 0]).all())
    True
    """

    strength_name = "block"

    def __init__(self, block: int, *, random_offset: bool = True) -> None:
        self.block = check_integer(block, "block", minimum=2)
        self.random_offset = bool(random_offset)

    @property
    def deterministic(self) -> bool:  # type: ignore[override]
        """Deterministic unless the grid offset is random."""
        return not self.random_offset

    @property
    def strength(self) -> float:
        """Cell side in pixels."""
        return float(self.block)

    def params(self) -> dict[str, Any]:
        """Parameters recorded as provenance."""
        return {**super().params(), "random_offset": self.random_offset}

    def _apply(self, image: Image, gen: np.random.Generator) -> Image:
        b = self.block
        h, w, _ = image.shape
        oy, ox = gen.integers(0, b, size=2) if self.random_offset else (0, 0)
        # cell index of every row / column: cells start at -offset, so the first may be partial
        ry = (np.arange(h) + int(oy)) // b  # (h,)
        rx = (np.arange(w) + int(ox)) // b  # (w,)
        cells = ry[:, None] * (rx.max() + 1) + rx[None, :]  # (h, w)
        flat = cells.ravel()
        n = int(flat.max()) + 1
        counts = np.bincount(flat, minlength=n).astype(np.float64)
        out = np.empty_like(image)
        for c in range(3):
            sums = np.bincount(flat, weights=image[..., c].ravel().astype(np.float64), minlength=n)
            out[..., c] = np.rint(sums / np.maximum(counts, 1))[cells].astype(np.uint8)
        return out


class PixelNoise(ImageMechanism):
    """Independent Gaussian noise on every pixel value: ``clip(round(x + σ·z), 0, 255)``.

    Parameters
    ----------
    sigma : float
        Standard deviation in grey levels (0–255 scale), > 0.

    Notes
    -----
    The noise is drawn per image from ``rng``. Rounding and clipping are post-processing, so
    they do not weaken any guarantee of the pixel-space Gaussian mechanism — but the identity
    channel audited is the encoder's output, whose sensitivity to pixels is unknown, so no
    closed-form ε of the audited channel follows from σ.

    Examples
    --------
    >>> import numpy as np
    >>> from idaudit.pipeline import PixelNoise
    >>> im = np.full((4, 4, 3), 128, np.uint8)
    >>> a, b = PixelNoise(10.0)(im, rng=0), PixelNoise(10.0)(im, rng=1)
    >>> bool((a != b).any()), bool((a == PixelNoise(10.0)(im, rng=0)).all())
    (True, True)
    """

    strength_name = "sigma"
    deterministic = False

    def __init__(self, sigma: float) -> None:
        self.sigma = check_in_range(sigma, "sigma", 0.0, None)

    @property
    def strength(self) -> float:
        """σ in grey levels."""
        return float(self.sigma)

    def _apply(self, image: Image, gen: np.random.Generator) -> Image:
        noisy = image.astype(np.float64) + self.sigma * gen.standard_normal(image.shape)
        return np.clip(np.rint(noisy), 0, 255).astype(np.uint8)


class LatentFaceSwap(ImageMechanism):
    r"""A face swap in the shipped DCGAN's latent space: :math:`G((1-m)\,z_{id} + m\,z_{donor})`.

    The set-up of seed 000's FaceFusion audit (Section 2.5) with one fixed donor: every source
    face is moved towards the same donor face by the fraction ``mix``. ``mix = 0`` returns the
    source face itself, ``mix = 1`` the donor for everyone (perfectly private, and useless).

    Parameters
    ----------
    generator : ShippedFaceGenerator
        The DCGAN (:class:`idaudit.faces.ShippedFaceGenerator`).
    donor : array_like, shape (100,)
        The donor's latent :math:`z_{donor}`.
    mix : float
        Fraction :math:`m \in [0, 1]` of the donor in the output latent.
    latents : mapping of bytes to array, or tuple (images, latents)
        Where a source image's latent :math:`z_{id}` comes from: the generator cannot invert
        an image, so the mechanism only accepts sources it was told the latent of — pass
        ``(ids.images, ids.latents)`` of :func:`idaudit.faces.synthetic_identities`. Another
        image raises :class:`~idaudit.exceptions.InvalidInputError` (which
        :func:`~idaudit.pipeline.audit_generator` records as a ``generator_error`` row).

    Notes
    -----
    Deterministic given the source: repeated sources give duplicate outputs. The output has
    the generator's 64 × 64 size, like its sources; it is aligned like the sources, which is
    what the paired mode of :func:`~idaudit.pipeline.audit_generator` relies on.

    Examples
    --------
    >>> import numpy as np
    >>> from idaudit.faces import ShippedFaceGenerator
    >>> from idaudit.pipeline import LatentFaceSwap
    >>> g = ShippedFaceGenerator()
    >>> z = g.sample_latents(2, rng=0)
    >>> images = g.generate(z)
    >>> swap = LatentFaceSwap(g, donor=z[1], mix=1.0, latents=(images, z))
    >>> bool((swap(images[0]) == images[1]).all())
    True
    """

    strength_name = "mix"

    def __init__(
        self,
        generator: ShippedFaceGenerator,
        donor: npt.ArrayLike,
        mix: float,
        *,
        latents: Mapping[bytes, npt.ArrayLike] | tuple[npt.ArrayLike, npt.ArrayLike],
    ) -> None:
        if not callable(getattr(generator, "generate", None)):
            raise TypeError(
                "`generator` must be an idaudit.faces.ShippedFaceGenerator (it needs "
                f"`generate`); got {type(generator).__name__}."
            )
        dim = int(generator.latent_dim)
        d = np.asarray(donor, dtype=np.float32).ravel()
        if d.shape != (dim,) or not np.isfinite(d).all():
            raise InvalidInputError(f"`donor` must be a finite latent of shape ({dim},).")
        self.generator = generator
        self.donor = d
        self.mix = check_in_range(mix, "mix", 0.0, 1.0, closed="both")
        if isinstance(latents, tuple):
            images, codes = np.asarray(latents[0]), np.asarray(latents[1], dtype=np.float32)
            if images.ndim != 4 or codes.shape != (len(images), dim):
                raise InvalidInputError(
                    f"`latents` must be (images (n, H, W, 3), latents (n, {dim})); got "
                    f"{images.shape} and {codes.shape}."
                )
            table = {_image_key(im): z for im, z in zip(images, codes, strict=True)}
        elif isinstance(latents, Mapping):
            table = {k: np.asarray(v, dtype=np.float32).ravel() for k, v in latents.items()}
        else:
            raise TypeError(
                "`latents` must be a tuple (images, latents) or a mapping of image key to "
                f"latent; got {type(latents).__name__}."
            )
        self._latents = table

    @property
    def strength(self) -> float:
        """The donor fraction ``mix``."""
        return float(self.mix)

    def _latent(self, image: Image) -> npt.NDArray[np.float32]:
        z = self._latents.get(_image_key(image))
        if z is None:
            raise InvalidInputError(
                "LatentFaceSwap has no latent for this source image: pass its latent in "
                "`latents` (only generator-made sources can be swapped in latent space)."
            )
        return np.asarray(z, dtype=np.float32)

    def _apply(self, image: Image, gen: np.random.Generator) -> Image:
        return self.batch([image], [gen])[0]

    def batch(self, images: Sequence[Any], rngs: Sequence[RngLike]) -> list[Image]:
        """Swap a stack of sources in one generator pass (``rngs`` are unused: deterministic)."""
        if len(images) != len(rngs):
            raise InvalidInputError(
                f"`rngs` must hold one entry per image; got {len(rngs)} vs {len(images)}."
            )
        if not images:
            return []
        z = np.stack([self._latent(_check_image(im)) for im in images])  # (n, 100)
        mixed = (1.0 - self.mix) * z + self.mix * self.donor[None, :]  # (n, 100)
        return list(self.generator.generate(mixed))


def _image_key(image: npt.NDArray[Any]) -> bytes:
    arr = np.ascontiguousarray(image)
    return f"{arr.shape}{arr.dtype.str}".encode() + arr.tobytes()
