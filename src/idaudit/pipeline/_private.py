"""A face anonymiser with a proved identity-level guarantee: Gaussian noise on the embedding.

:class:`EmbeddingNoiseSwap` encodes the input face to a unit embedding ``e``, releases
``e + N(0, σ² I)`` and turns that noisy embedding into a face using public material only (the
nearest face of a public :class:`FaceBank`, optionally moved towards the noisy embedding by the
inversion attack). Everything after the noise is post-processing, so the analytic Gaussian
mechanism's ε at sensitivity 2 (the unit sphere's diameter) bounds the privacy loss between any
two source images; :meth:`EmbeddingNoiseSwap.pair_guarantee` gives the tighter per-pair bound
over two identities' finite source sets. docs/private_swap.md has the proof.
"""

from __future__ import annotations

import copy
import inspect
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
import numpy.typing as npt

from idaudit._results import Status, check_status
from idaudit._validation import check_in_range, check_integer
from idaudit.exceptions import InvalidInputError
from idaudit.pipeline._images import Image, ImageMechanism, _check_image

if TYPE_CHECKING:
    from idaudit.faces import FacePipeline
    from idaudit.inversion import LatentBank

__all__ = ["EmbeddingNoiseSwap", "FaceBank", "PrivacyGuarantee", "SourceEmbeddings"]

#: Smallest side of an input frame read for a face; a smaller one maps to the fallback embedding.
MIN_INPUT_SIDE = 32
#: Side the bank's aligned crops are enlarged to (``ShippedFaceGenerator.embed``).
UPSCALE = 160

#: Source embeddings remembered (by content hash) so repeated draws encode each source once.
_MEMO_SIZE = 4096
#: Bank faces re-encoded by the mechanism's encoder to check the bank's embeddings.
_BANK_CHECKED = 2
#: Largest coordinate difference between a stored and a re-encoded unit bank embedding.
_BANK_ATOL = 1e-3

_CERTIFIED_UPPER: Status = check_status("certified_upper_bound")

#: Brent's tolerances in :func:`idaudit.dp.gaussian_epsilon` (the root is within
#: ``xtol + rtol·ε`` of the true ε); a guarantee's ε is rounded up past them.
_ROOT_XTOL = 1e-14
_ROOT_RTOL = 4.0 * float(np.finfo(float).eps)

#: The inputs the guarantee covers, in plain words.
COVERS = (
    "every (H, W, 3) uint8 image: a frame under 32 pixels on a side, one where no face is "
    "found, and one on which the detector, aligner or encoder fails or returns no finite "
    "vector all map to the fixed public fallback embedding before the noise"
)

ASSUMPTIONS = (
    "the input encoder (detector, alignment, network) is a deterministic function of the image",
    "the bank, the fallback embedding and the decoder's randomness are fixed or drawn "
    "independently of the inputs",
    "the decoder reads only the noisy embedding and public material, never the input image",
    "every embedding before the noise has unit norm (a frame that cannot be read maps to "
    "the fixed public fallback embedding)",
    "an audit observes the released image only (detect mode); paired mode also reads the "
    "source frame, which the mechanism does not release",
)


@dataclass(frozen=True)
class PrivacyGuarantee:
    r"""A proved (ε, δ) guarantee of a mechanism: data, not a sentence.

    Attributes
    ----------
    epsilon : float
        The analytic Gaussian mechanism's ε at ``delta``, ``sigma`` and ``sensitivity``.
    delta : float
    sigma : float
        Standard deviation of the embedding noise.
    sensitivity : float
        The L2 sensitivity Δ the bound rests on: 2 for any two inputs, or a pair's
        :math:`\\Delta_{AB}`.
    scope : str
        ``"any two inputs"`` or ``"pair"``.
    covers : str
        Which inputs the bound holds for: every ``(H, W, 3)`` uint8 image (frames the
        mechanism cannot read map to the public fallback embedding).
    assumptions : tuple of str
        What the proof assumes, in plain words.
    status : str
        ``"certified_upper_bound"`` (a closed-form upper bound on the true ε; it holds with
        probability one under the assumptions).
    """

    epsilon: float
    delta: float
    sigma: float
    sensitivity: float
    scope: str
    assumptions: tuple[str, ...] = field(repr=False)
    status: Status = _CERTIFIED_UPPER
    covers: str = field(default=COVERS, repr=False)


@dataclass(frozen=True)
class SourceEmbeddings:
    """Pre-noise unit embeddings of source images, made by one mechanism's input encoder.

    Returned by :meth:`EmbeddingNoiseSwap.encode_sources`;
    :meth:`EmbeddingNoiseSwap.pair_guarantee` accepts it in place of the images, from the
    mechanism that made it (same encoder and fallback) only: arbitrary unit vectors are not the
    mechanism's pre-noise points and would prove nothing.

    Attributes
    ----------
    vectors : numpy.ndarray of float64, shape (n, dim)
    encoder : str
        ``name`` of the encoder that made them.
    fallback : tuple of float
        The fallback embedding of frames that cannot be read.
    """

    vectors: npt.NDArray[np.float64] = field(repr=False)
    encoder: str
    fallback: tuple[float, ...] = field(repr=False)

    def __len__(self) -> int:
        """Return the number of source images."""
        return int(self.vectors.shape[0])


@dataclass(frozen=True)
class FaceBank:
    """Public faces and their unit embeddings under one encoder: what the decoder may read.

    Build with :meth:`from_latent_bank`; the constructor checks the arrays.

    Attributes
    ----------
    images : numpy.ndarray of uint8, shape (V, H, W, 3)
    embeddings : numpy.ndarray of float32, shape (V, dim)
        Unit-norm embeddings of ``images`` by the encoder named ``encoder``.
    encoder : str
        The ``name`` of the encoder that made ``embeddings``.
    latents : numpy.ndarray of float32, shape (V, latent_dim), optional
        The generator codes of ``images`` (needed to refine by inversion).
    generator : str
        Name of the generator the faces come from.
    upscale : int
        Side the aligned crops were enlarged to before encoding (``from_images``).
    """

    images: npt.NDArray[np.uint8] = field(repr=False)
    embeddings: npt.NDArray[np.float32] = field(repr=False)
    encoder: str
    latents: npt.NDArray[np.float32] | None = field(default=None, repr=False)
    generator: str = ""
    upscale: int = UPSCALE

    def __post_init__(self) -> None:
        """Refuse arrays that cannot be a bank."""
        images, emb = np.asarray(self.images), np.asarray(self.embeddings)
        if images.dtype != np.uint8 or images.ndim != 4 or images.shape[3] != 3:
            raise InvalidInputError(
                f"`images` must be uint8 of shape (V, H, W, 3); got {images.dtype} {images.shape}."
            )
        if emb.ndim != 2 or emb.shape[0] != images.shape[0] or emb.shape[0] == 0:
            raise InvalidInputError(
                f"`embeddings` must have one row per image, shape ({images.shape[0]}, dim) with "
                f"V >= 1; got {emb.shape}."
            )
        norms = np.linalg.norm(emb, axis=1)
        if not np.isfinite(emb).all() or np.abs(norms - 1.0).max() > 1e-3:
            raise InvalidInputError("`embeddings` must be finite and of unit norm.")

    @property
    def volume(self) -> int:
        """Number of faces ``V``."""
        return int(self.images.shape[0])

    @property
    def dim(self) -> int:
        """Embedding dimension."""
        return int(self.embeddings.shape[1])

    @classmethod
    def from_latent_bank(
        cls, bank: LatentBank, encoder: Any, *, upscale: int = UPSCALE
    ) -> FaceBank:
        """Embed a :class:`~idaudit.inversion.LatentBank` of the shipped DCGAN with ``encoder``.

        The bank's images are aligned with the generator's fixed template
        (:meth:`idaudit.faces.ShippedFaceGenerator.crops`, no detector) and encoded.

        Parameters
        ----------
        bank : LatentBank
        encoder : Encoder
            Must have ``name``, ``dim``, ``align`` and ``encode``.
        upscale : int, default 160

        Returns
        -------
        FaceBank

        Examples
        --------
        >>> from idaudit.faces import TorchDlibEncoder
        >>> from idaudit.inversion import DCGANGenerator, LatentBank
        >>> from idaudit.pipeline import FaceBank
        >>> latent = LatentBank.build(DCGANGenerator(), 3, tau_k=0.5, tau_d=0.9, rng=0)
        >>> FaceBank.from_latent_bank(latent, TorchDlibEncoder()).embeddings.shape
        (3, 128)
        """
        return cls.from_images(
            bank.images,
            encoder,
            latents=np.asarray(bank.latents, dtype=np.float32).reshape(bank.volume, -1),
            generator=str(bank.generator),
            upscale=upscale,
        )

    @classmethod
    def from_images(
        cls,
        images: npt.ArrayLike,
        encoder: Any,
        *,
        latents: npt.ArrayLike | None = None,
        generator: str = "",
        upscale: int = UPSCALE,
    ) -> FaceBank:
        """Embed aligned generator faces (e.g. ``ShippedFaceGenerator().sample(n)``).

        Parameters
        ----------
        images : array_like of uint8, shape (V, H, W, 3)
            Faces aligned like the shipped DCGAN's (its fixed template is used, no detector).
        encoder : Encoder
        latents : array_like, shape (V, latent_dim), optional
        generator : str, default ""
        upscale : int, default 160

        Returns
        -------
        FaceBank
        """
        from idaudit.faces import ShippedFaceGenerator

        arr = np.asarray(images)
        if arr.dtype != np.uint8 or arr.ndim != 4 or arr.shape[3] != 3 or len(arr) == 0:
            raise InvalidInputError(
                f"`images` must be uint8 of shape (V, H, W, 3) with V >= 1; got {arr.dtype} "
                f"{arr.shape}."
            )
        emb = np.asarray(
            ShippedFaceGenerator().embed(arr, encoder, upscale=upscale), dtype=np.float64
        )
        emb = emb / np.linalg.norm(emb, axis=1, keepdims=True)
        return cls(
            images=arr,
            embeddings=emb.astype(np.float32),
            encoder=_encoder_name(encoder),
            latents=None if latents is None else np.asarray(latents, dtype=np.float32),
            generator=generator,
            upscale=upscale,
        )


def _encoder_name(encoder: Any) -> str:
    return str(getattr(encoder, "name", type(encoder).__name__))


class EmbeddingNoiseSwap(ImageMechanism):
    r"""Encode, add Gaussian noise to the embedding, decode to a public face: provably private.

    ``output = decode(e(x) + σ ξ)``, ``ξ ~ N(0, I)``, where ``e(x)`` is the unit embedding of
    the largest face found in ``x`` (the fixed public ``fallback`` when none is found) and
    ``decode`` reads only the noisy embedding and public material: by default the face of
    ``bank`` nearest by cosine. :meth:`guarantee` is the analytic Gaussian mechanism's ε at
    sensitivity 2; :meth:`pair_guarantee` the tighter bound over two finite source sets.

    Parameters
    ----------
    sigma : float
        Noise standard deviation per embedding coordinate, > 0 and finite.
    bank : FaceBank
        Public faces with embeddings by ``pipeline.encoder``
        (:meth:`FaceBank.from_latent_bank`).
    pipeline : FacePipeline
        Detector and encoder of the input face. Frames under 160 pixels are enlarged to 160
        and edge-padded before detection (:func:`idaudit.faces.prepare_frame`, the rule of
        :func:`audit_generator`). A frame under 32 pixels on a side, or one on which the
        detector, aligner or encoder raises, maps to ``fallback``: the mechanism answers every
        ``(H, W, 3)`` uint8 image, and its answer depends on the image only through the noisy
        embedding.
    refine : int, default 0
        Updates of the inversion attack (:class:`~idaudit.inversion.RankedAdversary`, APGD,
        top-1) that move the nearest bank face towards the noisy embedding; 0 (the default, fast)
        returns the bank face itself. Needs ``generator`` and a bank with latents.
    generator : LatentGenerator, optional
        The bank's generator (:class:`~idaudit.inversion.DCGANGenerator`), for ``refine``.
    decoder : callable, optional
        ``decoder(noisy_embedding, rng) -> image`` replacing the built-in decoder. One that
        takes a ``source`` parameter is handed the input image too; the mechanism then still
        runs, but :meth:`guarantee` refuses (post-processing no longer applies).
    fallback : array_like, shape (dim,), optional
        The public embedding of an input with no face found; default the unit vector
        :math:`(1, \dots, 1)/\sqrt{dim}`. Normalised.

    Notes
    -----
    A fixed output image for a face not found would leak: it is a point mass, and against the
    spread-out law of a found face its privacy loss is unbounded. Mapping such an input to a
    fixed unit embedding *before* the noise keeps every pre-noise point on the sphere, so the
    sensitivity stays at most 2. An error would leak the same way, so none is raised for a
    valid image.

    The output's size is the bank's (:attr:`output_size`), never the input's, and an audit of
    it must not read the source frame: :func:`~idaudit.pipeline.audit_generator` judges the
    outputs against :attr:`output_size` and refuses ``mode="paired"`` (:attr:`paired_audit`).

    Examples
    --------
    >>> import numpy as np
    >>> from idaudit.faces import FacePipeline, MTCNNDetector, TorchDlibEncoder
    >>> from idaudit.inversion import DCGANGenerator, LatentBank
    >>> from idaudit.pipeline import EmbeddingNoiseSwap, FaceBank
    >>> enc = TorchDlibEncoder()
    >>> latent = LatentBank.build(DCGANGenerator(), 3, tau_k=0.5, tau_d=0.9, rng=0)
    >>> mech = EmbeddingNoiseSwap(
    ...     0.5, bank=FaceBank.from_latent_bank(latent, enc),
    ...     pipeline=FacePipeline(MTCNNDetector(), enc, progress=False))
    >>> out = mech(np.zeros((64, 64, 3), np.uint8), rng=0)
    >>> out.shape, round(mech.guarantee(1e-5).epsilon, 3)
    ((64, 64, 3), 24.382)
    """

    strength_name = "sigma"
    deterministic = False
    ASSUMPTIONS: ClassVar[tuple[str, ...]] = ASSUMPTIONS
    #: ``mode="paired"`` audits read the source frame beside the output, outside the proof.
    paired_audit: ClassVar[bool] = False

    def __init__(
        self,
        sigma: float,
        *,
        bank: FaceBank,
        pipeline: FacePipeline,
        refine: int = 0,
        generator: Any = None,
        decoder: Callable[..., Any] | None = None,
        fallback: npt.ArrayLike | None = None,
    ) -> None:
        self.sigma = check_in_range(sigma, "sigma", 0.0, None)
        for attr in ("detector", "encoder"):
            if not hasattr(pipeline, attr):
                raise TypeError(
                    "`pipeline` must be an idaudit.faces.FacePipeline (detector and encoder); "
                    f"got {type(pipeline).__name__}."
                )
        encoder = pipeline.encoder
        if not isinstance(bank, FaceBank):
            raise InvalidInputError(
                f"`bank` must be a FaceBank holding embeddings by the mechanism's encoder "
                f"{_encoder_name(encoder)!r} (FaceBank.from_latent_bank(bank, encoder)); got "
                f"{type(bank).__name__}."
            )
        if bank.encoder != _encoder_name(encoder) or bank.dim != int(encoder.dim):
            raise InvalidInputError(
                f"`bank` embeddings were made by encoder {bank.encoder!r} ({bank.dim}-d), not by "
                f"the mechanism's encoder {_encoder_name(encoder)!r} ({int(encoder.dim)}-d): "
                "nearest faces would be found in another space."
            )
        _check_bank_embeddings(bank, encoder)
        self.refine = check_integer(refine, "refine", minimum=0)
        if self.refine and (generator is None or bank.latents is None):
            raise InvalidInputError(
                "`refine` > 0 moves a bank face by inversion: give `generator` and a bank with "
                "latents (FaceBank.from_latent_bank)."
            )
        if self.refine:
            made_by = str(getattr(generator, "name", type(generator).__name__))
            if bank.generator != made_by:
                raise InvalidInputError(
                    f"`bank` faces come from generator {bank.generator!r}, not {made_by!r}: "
                    "its latents mean nothing to the generator that refines them."
                )
        if decoder is not None and not callable(decoder):
            raise TypeError(f"`decoder` must be callable; got {type(decoder).__name__}.")
        dim = int(encoder.dim)
        fb = np.full(dim, 1.0) if fallback is None else np.asarray(fallback, dtype=np.float64)
        if fb.shape != (dim,) or not np.isfinite(fb).all() or np.linalg.norm(fb) == 0:
            raise InvalidInputError(
                f"`fallback` must be a finite non-zero vector of shape ({dim},); got {fb.shape}."
            )
        self.bank = bank
        self.pipeline = pipeline
        self.generator = generator
        self.decoder = decoder
        self.fallback = fb / np.linalg.norm(fb)
        self._memo: dict[str, npt.NDArray[np.float64]] = {}

    @property
    def output_size(self) -> tuple[int, int] | None:
        """``(H, W)`` of every output (the bank's faces), or ``None`` with a custom ``decoder``.

        Audits judge the outputs against this size, never against the source's: an outcome
        that depended on the input's size would be information outside the noisy embedding.
        """
        if self.decoder is not None:
            return None
        return (int(self.bank.images.shape[1]), int(self.bank.images.shape[2]))

    @property
    def strength(self) -> float:
        """σ, the embedding noise's standard deviation."""
        return float(self.sigma)

    def with_sigma(self, sigma: float) -> EmbeddingNoiseSwap:
        """Return the same mechanism at another σ, sharing the remembered source embeddings.

        Parameters
        ----------
        sigma : float
            > 0 and finite.

        Returns
        -------
        EmbeddingNoiseSwap
        """
        other = copy.copy(self)
        other.sigma = check_in_range(sigma, "sigma", 0.0, None)
        return other

    @property
    def reads_input(self) -> bool:
        """Whether the decoder is handed the input image (then no guarantee holds)."""
        if self.decoder is None:
            return False
        try:
            params = inspect.signature(self.decoder).parameters
        except (TypeError, ValueError):  # pragma: no cover - builtins without a signature
            return True
        return "source" in params

    def params(self) -> dict[str, Any]:
        """Parameters recorded as provenance."""
        return {
            **super().params(),
            "refine": self.refine,
            "bank_volume": self.bank.volume,
            "encoder": self.bank.encoder,
            "decoder": "nearest" if self.decoder is None else "custom",
        }

    # -- the mechanism -----------------------------------------------------------------------
    def encode_sources(self, images: Sequence[Any]) -> SourceEmbeddings:
        """Return the unit embeddings ``e(x)`` before the noise (unreadable frame: the fallback).

        Parameters
        ----------
        images : sequence of (H, W, 3) uint8 arrays

        Returns
        -------
        SourceEmbeddings
            ``vectors`` of shape (n, dim), tagged with this mechanism's encoder and fallback.
        """
        checked = [self._check_input(im) for im in images]
        vectors = (
            np.stack([self._embed(im) for im in checked])
            if checked
            else np.zeros((0, self.bank.dim))
        )
        return SourceEmbeddings(
            vectors=vectors, encoder=self.bank.encoder, fallback=tuple(self.fallback.tolist())
        )

    def _check_input(self, image: Any) -> Image:
        return _check_image(image)

    def _embed(self, image: Image) -> npt.NDArray[np.float64]:
        """``e(x)``, remembered by content: the encoder is deterministic (an assumption)."""
        from idaudit.faces import content_key

        key = content_key(image)
        e = self._memo.get(key)
        if e is None:
            if len(self._memo) >= _MEMO_SIZE:
                self._memo.clear()
            e = self._memo[key] = self._embed_uncached(image)
        return e.copy()

    def _embed_uncached(self, image: Image) -> npt.NDArray[np.float64]:
        from idaudit.faces import prepare_frame

        if min(image.shape[:2]) < MIN_INPUT_SIDE:
            return self.fallback.copy()
        try:
            frame = prepare_frame(image)
            faces = self.pipeline.detector.detect(frame)
            if not faces:
                return self.fallback.copy()
            face = max(faces, key=lambda f: f.area)
            crop = self.pipeline.encoder.align(frame, face)
            e = np.asarray(self.pipeline.encoder.encode(crop[None]), dtype=np.float64)
        except Exception:  # an error is an observable outcome: map it before the noise
            return self.fallback.copy()
        if e.shape != (1, self.bank.dim) or not np.isfinite(e).all():
            return self.fallback.copy()
        norm = float(np.linalg.norm(e[0]))
        if norm == 0:
            return self.fallback.copy()
        unit: npt.NDArray[np.float64] = e[0] / norm
        return unit

    def release(self, e: npt.ArrayLike, gen: np.random.Generator) -> npt.NDArray[np.float64]:
        """Return ``e + σ ξ``: the Gaussian mechanism (all that follows is post-processing)."""
        arr = np.asarray(e, dtype=np.float64)
        return arr + self.sigma * gen.standard_normal(arr.shape)

    def decode(self, noisy: npt.ArrayLike, gen: np.random.Generator) -> Image:
        """Return a face made from a noisy embedding and public material only.

        The bank face of largest cosine to ``noisy`` (ties: lower index), moved towards
        ``noisy`` by ``refine`` inversion updates when ``refine > 0``.
        """
        y = np.asarray(noisy, dtype=np.float64)
        if self.decoder is not None:
            return _check_image(self.decoder(y, gen), "decoder output")
        index = int(np.argmax(self.bank.embeddings.astype(np.float64) @ y))
        if not self.refine:
            return np.array(self.bank.images[index])
        return self._refined(y, index, gen)

    def _refined(self, y: npt.NDArray[np.float64], index: int, gen: np.random.Generator) -> Image:
        from idaudit.inversion import LatentBank, RankedAdversary

        assert self.bank.latents is not None
        one = LatentBank(
            latents=self.bank.latents[index : index + 1],
            images=self.bank.images[index : index + 1],
            p_k=np.ones(1),
            p_d=np.ones(1),
            n_drawn=1,
            n_rejected_k=0,
            n_rejected_d=0,
            tau_k=0.0,
            tau_d=0.0,
            generator=self.bank.generator,
        )
        adversary = RankedAdversary(
            self.generator,
            self.pipeline.encoder,
            bank=one,
            top_n=1,
            t_max=self.refine,
            rng=int(gen.integers(0, 2**31 - 1)),
        )
        return np.asarray(adversary.invert(y.astype(np.float32)).image)

    def _apply(self, image: Image, gen: np.random.Generator) -> Image:
        image = self._check_input(image)
        noisy = self.release(self._embed(image), gen)
        if self.decoder is not None and self.reads_input:
            return _check_image(self.decoder(noisy, gen, source=image), "decoder output")
        return self.decode(noisy, gen)

    # -- the guarantee -----------------------------------------------------------------------
    def guarantee(self, delta: float) -> PrivacyGuarantee:
        """(ε, δ) for any two input images: the analytic Gaussian ε at sensitivity 2.

        Parameters
        ----------
        delta : float
            In (0, 1).

        Returns
        -------
        PrivacyGuarantee
            Status ``certified_upper_bound``.

        Raises
        ------
        InvalidInputError
            If ``delta`` is outside (0, 1), or the decoder reads the input image.
        """
        return self._guarantee(delta, 2.0, "any two inputs")

    def pair_guarantee(
        self,
        sources_a: Sequence[Any] | npt.NDArray[Any] | SourceEmbeddings,
        sources_b: Sequence[Any] | npt.NDArray[Any] | SourceEmbeddings,
        delta: float,
    ) -> PrivacyGuarantee:
        r"""(ε, δ) between two identities' finite source sets: Δ_AB = max ‖e_a − e_b‖.

        An output drawn from any source image of A (or any mixture of them) against one from
        any source image of B: each pair of sources is a Gaussian mechanism with sensitivity
        at most :math:`\Delta_{AB}`, and mixtures keep the bound (docs/private_swap.md).

        Parameters
        ----------
        sources_a, sources_b : sequence of (H, W, 3) uint8 arrays, or SourceEmbeddings
            Source images, or what :meth:`encode_sources` of this mechanism (or one with the
            same encoder and fallback) returned for them.
        delta : float

        Returns
        -------
        PrivacyGuarantee

        Raises
        ------
        InvalidInputError
            If ``delta`` is outside (0, 1) or the decoder reads the input (checked before any
            image is encoded), a source set is empty, or embeddings come from another encoder
            or fallback.
        TypeError
            If a source set is a bare array of vectors rather than images or
            :class:`SourceEmbeddings`.
        """
        dlt = self._check_guarantee_inputs(delta)
        ea = self._as_embeddings(sources_a, "sources_a")
        eb = self._as_embeddings(sources_b, "sources_b")
        diff = _distances(ea, eb)
        sens = float(min(diff.max(), 2.0))
        return self._guarantee(dlt, sens, "pair")

    def _as_embeddings(self, sources: Any, name: str) -> npt.NDArray[np.float64]:
        if isinstance(sources, SourceEmbeddings):
            if sources.encoder != self.bank.encoder or not np.array_equal(
                np.asarray(sources.fallback), self.fallback
            ):
                raise InvalidInputError(
                    f"`{name}` was encoded by encoder {sources.encoder!r} with another fallback "
                    f"or encoder than this mechanism's ({self.bank.encoder!r}): encode the "
                    "images with this mechanism's encode_sources."
                )
            if len(sources) == 0:
                raise InvalidInputError(f"`{name}` must hold at least one source image.")
            return sources.vectors
        if isinstance(sources, np.ndarray) and sources.ndim == 2 and sources.dtype.kind == "f":
            raise TypeError(
                f"`{name}` must be source images or this mechanism's encode_sources(images); "
                f"got a bare {sources.shape} array of vectors, which need not be the "
                "mechanism's pre-noise points."
            )
        if len(sources) == 0:
            raise InvalidInputError(f"`{name}` must hold at least one source image.")
        return self.encode_sources(list(sources)).vectors

    def _check_guarantee_inputs(self, delta: float) -> float:
        dlt = check_in_range(delta, "delta", 0.0, 1.0)
        if self.reads_input:
            raise InvalidInputError(
                "no guarantee: the decoder reads the input image (it takes `source`), so the "
                "output is not post-processing of the noisy embedding."
            )
        return dlt

    def _guarantee(self, delta: float, sensitivity: float, scope: str) -> PrivacyGuarantee:
        from idaudit.dp import gaussian_epsilon

        dlt = self._check_guarantee_inputs(delta)
        eps = 0.0 if sensitivity == 0.0 else float(gaussian_epsilon(dlt, self.sigma, sensitivity))
        if eps > 0.0:  # Brent's root is within xtol + rtol·ε of the true ε: round up past it
            eps += 2.0 * (_ROOT_XTOL + _ROOT_RTOL * eps)
        return PrivacyGuarantee(
            epsilon=eps,
            delta=dlt,
            sigma=float(self.sigma),
            sensitivity=float(sensitivity),
            scope=scope,
            assumptions=ASSUMPTIONS,
        )


def _distances(a: npt.NDArray[np.float64], b: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """Euclidean distances between the rows of ``a`` and ``b``, ``(n_a, n_b)``.

    The norm of each difference: no expanded square, which loses precision for near points.
    """
    out: npt.NDArray[np.float64] = np.linalg.norm(a[:, None, :] - b[None, :, :], axis=2)
    return out


def _check_bank_embeddings(bank: FaceBank, encoder: Any) -> None:
    """Re-encode the first bank faces with ``encoder``; refuse embeddings it did not make."""
    from idaudit.faces import ShippedFaceGenerator

    k = min(_BANK_CHECKED, bank.volume)
    try:
        fresh = np.asarray(
            ShippedFaceGenerator().embed(bank.images[:k], encoder, upscale=bank.upscale),
            dtype=np.float64,
        )
    except Exception as exc:
        raise InvalidInputError(
            f"`bank` faces could not be re-encoded by the mechanism's encoder to check their "
            f"embeddings ({type(exc).__name__}: {exc})."
        ) from exc
    fresh = fresh / np.linalg.norm(fresh, axis=1, keepdims=True)
    gap = float(np.abs(fresh - bank.embeddings[:k].astype(np.float64)).max())
    if not gap <= _BANK_ATOL:
        raise InvalidInputError(
            f"`bank` embeddings are not the mechanism's encoder's: its first {k} face(s) "
            f"re-encoded differ by up to {gap:.3g} (> {_BANK_ATOL:g}); build the bank with "
            "FaceBank.from_images(images, pipeline.encoder)."
        )
