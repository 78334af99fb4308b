"""The real case of seed 000, Section 2.5: an encoder composed with an image generator."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from idaudit._validation import RngLike, check_integer, check_random_state
from idaudit.exceptions import InvalidInputError

if TYPE_CHECKING:
    from idaudit.faces._types import Encoder

__all__ = ["EncodedGenerator"]


class EncodedGenerator:
    r"""Identity embeddings of a generator's outputs: :math:`M_\phi(id) = \phi(g(X))`.

    Parameters
    ----------
    generator : callable
        ``generator(image) -> image`` or ``generator(image, rng=Generator) -> image``: maps one
        ``(H, W, 3)`` uint8 RGB source image to one generated image, which must already be the
        ``(input_size, input_size, 3)`` uint8 crop ``encoder`` expects (compose the generator
        with detection and alignment, e.g. ``encoder.align``, if it returns full frames). When
        it takes an ``rng`` keyword it receives a :class:`numpy.random.Generator`, so the
        generator's internal randomness :math:`R` follows the ``rng`` given to :meth:`sample`.
    encoder : Encoder
        Identity encoder :math:`\phi` (the :class:`idaudit.faces` ``Encoder`` protocol:
        ``encode(crops) -> (n, dim)``, plus ``dim`` and ``input_size``).
    images_by_identity : mapping of label to sequence of images
        Source images :math:`X` of each identity; :meth:`sample` draws them uniformly with
        replacement, which models :math:`X \sim P_{id}`.
    batch_size : int, default 64
        Crops encoded per ``encoder.encode`` call.

    Notes
    -----
    This is the distributional mechanism of seed 000, Eq. 8: drawing the source image is part
    of the channel's randomness. Its guarantee is unknown; it is what the audits are for.

    Source images are drawn with replacement, so with a deterministic generator a sample of
    more outputs than sources repeats outputs exactly. Those repeats are iid draws of the
    channel (it puts mass on each source's output), not copies of one draw: certify them with
    :class:`~idaudit.certify.ReservedTestCertifier`'s default ``duplicates="keep"``.

    Examples
    --------
    >>> from idaudit.mechanisms import EncodedGenerator
    >>> import numpy as np
    >>> class MeanColour:  # a stand-in encoder: the mean RGB colour, normalised
    ...     name, dim, input_size, differentiable = "mean-colour", 3, 4, False
    ...     def encode(self, crops):
    ...         v = crops.reshape(len(crops), -1, 3).mean(axis=1) + 1.0
    ...         return (v / np.linalg.norm(v, axis=1, keepdims=True)).astype(np.float32)
    >>> images = {"a": [np.zeros((4, 4, 3), np.uint8)], "b": [np.full((4, 4, 3), 200, np.uint8)]}
    >>> mech = EncodedGenerator(lambda im: im, MeanColour(), images)
    >>> mech.sample("b", 2, rng=0).shape
    (2, 3)
    """

    def __init__(
        self,
        generator: Callable[..., Any],
        encoder: Encoder,
        images_by_identity: Mapping[Any, Sequence[npt.NDArray[np.uint8]]],
        *,
        batch_size: int = 64,
    ) -> None:
        if not callable(generator):
            raise TypeError(f"`generator` must be callable; got {type(generator).__name__}.")
        for attr in ("encode", "dim", "input_size"):
            if not hasattr(encoder, attr):
                raise TypeError(
                    f"`encoder` must follow the idaudit.faces Encoder protocol; it has no `{attr}`."
                )
        if not isinstance(images_by_identity, Mapping) or not images_by_identity:
            raise InvalidInputError(
                "`images_by_identity` must be a non-empty mapping of identity -> images."
            )
        for label, images in images_by_identity.items():
            if len(images) == 0:
                raise InvalidInputError(
                    f"`images_by_identity` has no source image for identity {label!r}."
                )
        self.generator = generator
        self.encoder = encoder
        self.images_by_identity = dict(images_by_identity)
        self.batch_size = check_integer(batch_size, "batch_size", minimum=1)
        self._takes_rng = _accepts_rng(generator)

    @property
    def identities(self) -> npt.NDArray[Any]:
        """Sorted identity labels, shape (n_identities,)."""
        return np.asarray(sorted(self.images_by_identity))

    def sample(self, identity: Any, n: int, *, rng: RngLike = None) -> npt.NDArray[np.float64]:
        """Generate ``n`` images from random source images of ``identity`` and encode them.

        Parameters
        ----------
        identity : label
            One of :attr:`identities`.
        n : int
            Number of outputs, at least 1.
        rng : int, numpy.random.SeedSequence, numpy.random.Generator or None
            Randomness of the source-image choice and, if the generator takes it, of the
            generator.

        Returns
        -------
        numpy.ndarray of float64, shape (n, encoder.dim)

        Raises
        ------
        InvalidInputError
            If ``identity`` is unknown, a generated image is not an
            ``(input_size, input_size, 3)`` uint8 array, or the encoder returns the wrong shape
            or non-finite values.
        """
        n = check_integer(n, "n", minimum=1)
        if identity not in self.images_by_identity:
            raise InvalidInputError(
                f"`identity` must be one of the {len(self.images_by_identity)} identities of "
                f"`images_by_identity`; got {identity!r}."
            )
        gen = check_random_state(rng)
        sources = self.images_by_identity[identity]
        picks = gen.integers(0, len(sources), size=n)  # (n,)
        size = int(self.encoder.input_size)
        crops = np.empty((n, size, size, 3), dtype=np.uint8)  # (n, s, s, 3)
        for i, j in enumerate(picks):
            image = (
                self.generator(sources[j], rng=gen)
                if self._takes_rng
                else self.generator(sources[j])
            )
            crops[i] = _check_crop(image, identity, size)
        parts = [
            self._encode(crops[start : start + self.batch_size], identity)
            for start in range(0, n, self.batch_size)
        ]
        return np.concatenate(parts)

    def _encode(self, crops: npt.NDArray[np.uint8], identity: Any) -> npt.NDArray[np.float64]:
        dim = int(self.encoder.dim)
        out = np.asarray(self.encoder.encode(crops), dtype=np.float64)
        if out.shape != (len(crops), dim):
            raise InvalidInputError(
                f"the encoder must return shape ({len(crops)}, {dim}) for identity "
                f"{identity!r}; got {out.shape}."
            )
        if not np.isfinite(out).all():
            raise InvalidInputError(
                f"the encoder returned NaN or inf for identity {identity!r}; embeddings must "
                "be finite."
            )
        return out

    def __repr__(self) -> str:
        name = getattr(self.encoder, "name", type(self.encoder).__name__)
        return (
            f"EncodedGenerator(generator={getattr(self.generator, '__name__', 'generator')}, "
            f"encoder={name}, n_identities={len(self.images_by_identity)})"
        )


def _check_crop(image: Any, identity: Any, size: int) -> npt.NDArray[np.uint8]:
    arr = np.asarray(image)
    if arr.dtype != np.uint8:
        raise InvalidInputError(
            f"the generator must return uint8 RGB images; got dtype {arr.dtype} for identity "
            f"{identity!r}."
        )
    if arr.shape != (size, size, 3):
        raise InvalidInputError(
            f"the generator must return ({size}, {size}, 3) crops (the encoder's input_size); "
            f"got {arr.shape} for identity {identity!r}."
        )
    return arr


def _accepts_rng(func: Callable[..., Any]) -> bool:
    try:
        params = inspect.signature(func).parameters.values()
    except (TypeError, ValueError):  # builtins without a signature
        return False
    return any(p.name == "rng" or p.kind is inspect.Parameter.VAR_KEYWORD for p in params)
