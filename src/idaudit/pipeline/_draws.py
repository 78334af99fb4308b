"""The real case of seed 000, Section 2.5: an encoder composed with an image generator.

:class:`EncodedGenerator` is the one engine that turns source images into identity embeddings
of a generator's outputs: it runs the callable (batched where it can), checks each output,
finds and aligns the face (three modes), encodes, caches by content hash, and records what
happened to every draw. :func:`idaudit.pipeline.audit_generator` drives it; ``sample`` makes it
a :class:`~idaudit.mechanisms.Mechanism` for :func:`~idaudit.mechanisms.audit_mechanism`.
"""

from __future__ import annotations

import functools
import inspect
import os
import warnings
from collections.abc import Callable, Mapping, MutableMapping, Sequence
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
import numpy.typing as npt

from idaudit._validation import RngLike, check_integer, check_option, check_random_state
from idaudit.exceptions import IdauditWarning, InvalidInputError

if TYPE_CHECKING:
    from idaudit.faces import EmbeddingCache, Face, FacePipeline
    from idaudit.faces._pipeline import FrameInput
    from idaudit.faces._types import Encoder

__all__ = ["DRAW_STATUSES", "EncodedGenerator"]

Mode = Literal["aligned", "detect", "paired"]

#: What can happen to one draw (one source image through the generator and the encoder).
DRAW_STATUSES = {
    "ok": "the output's face was encoded",
    "no_face": "no face was found (detect: in the output; paired: in the original frame)",
    "generator_error": "the callable raised on this image",
    "bad_output": "the output is not an (H, W, 3) uint8 image of the required size",
}


class EncodedGenerator:
    r"""Identity embeddings of a generator's outputs: :math:`M_\phi(id) = \phi(g(X))`.

    Parameters
    ----------
    generator : callable
        ``generator(image) -> image`` or ``generator(image, rng=Generator) -> image`` on
        ``(H, W, 3)`` uint8 RGB frames. When it takes an ``rng`` keyword it receives its own
        :class:`numpy.random.Generator` per image (the generator's internal randomness
        :math:`R`), so results do not depend on batching. An object with
        ``batch(images, rngs)`` (the mechanisms of :mod:`idaudit.pipeline`) is called on
        stacks of ``batch_size`` images.
    encoder : Encoder, optional
        Identity encoder :math:`\phi` for ``mode="aligned"`` (the generator's outputs are
        already the ``(input_size, input_size, 3)`` crops the encoder expects). Give either
        ``encoder`` or ``pipeline``.
    images_by_identity : mapping of label to sequence of images
        Source images :math:`X` of each identity (``(H, W, 3)`` uint8 arrays).
    pipeline : FacePipeline, optional
        Detector and encoder for full frames (``mode="detect"`` or ``"paired"``).
    mode : {"aligned", "detect", "paired"}, optional
        How the face is found (default: ``"aligned"`` with ``encoder``, ``"detect"`` with
        ``pipeline``):

        * ``"aligned"`` — the output is the crop;
        * ``"detect"`` — detect and align on the output frame (what a recogniser facing the
          released image does; blurred or pixelated faces may be lost, and are counted);
        * ``"paired"`` — detect and align on the *original* frame and cut the same crop from
          the output, which must have the source's size. The audit then measures what the
          anonymiser left inside the face region, with no face lost to the detector (a lost
          original is ``no_face``).
    cache : EmbeddingCache or path, optional
        Embeddings by content hash of (mode, models, settings, original and output pixels): a
        repeated output is never encoded twice, and a re-run encodes nothing.
    output_shape : "source", (H, W) or None, default "source"
        Size every output must have in the ``"detect"`` and ``"paired"`` modes (others are
        ``bad_output``): the source's size, a fixed ``(H, W)``, or any size (``None``; not
        allowed in paired mode, which always needs the source's size). A generator that
        declares its own ``output_size`` (``(H, W)`` or ``None``, as
        :class:`~idaudit.pipeline.EmbeddingNoiseSwap` does) is judged against that in
        detect mode instead of ``"source"``: its outputs' size never depends on the source's.
    batch_size : int, default 64
        Images per generator batch and crops per ``encode`` call.
    progress : bool, default False
        Show a progress bar over the draws of each identity.
    original_faces : mutable mapping of (label, int) to Face or None, optional
        Detections of the original frames in ``mode="paired"``, keyed by ``(identity,
        source index)``: the largest face the detector found on that source image (after
        :func:`~idaudit.faces.prepare_frame`), or ``None`` when it found none. Entries present
        are used as they are (the detector is not run on that original again); missing ones
        are detected and written into the mapping. Pass one mapping to several engines over
        the same ``images_by_identity`` and detector (as
        :func:`idaudit.pipeline.compare_conditions` does) so that each original is detected
        once. Default: a new empty ``dict``. Unused in the other modes.

    Notes
    -----
    This is the distributional mechanism of seed 000, Eq. 8: drawing the source image is part
    of the channel's randomness. Its guarantee is unknown; it is what the audits are for.
    :meth:`sample` draws source images uniformly *with replacement*; a deterministic
    generator then repeats outputs exactly, and ``sample`` warns when rows repeat.
    :func:`idaudit.pipeline.audit_generator` uses each source once by default.

    Source images are drawn with replacement, so with a deterministic generator a sample of
    more outputs than sources repeats outputs exactly. Those repeats are iid draws of the
    channel (it puts mass on each source's output), not copies of one draw: certify them with
    :class:`~idaudit.certify.ReservedTestCertifier`'s default ``duplicates="keep"``.

    Examples
    --------
    >>> from idaudit.pipeline import EncodedGenerator
    >>> import numpy as np
    >>> class MeanColour:  # a stand-in encoder: the mean RGB colour, normalised
    ...     name, dim, input_size, differentiable = "mean-colour", 3, 4, False
    ...     def encode(self, crops):
    ...         v = crops.reshape(len(crops), -1, 3).mean(axis=1) + 1.0
    ...         return (v / np.linalg.norm(v, axis=1, keepdims=True)).astype(np.float32)
    >>> images = {"a": [np.zeros((4, 4, 3), np.uint8)], "b": [np.full((4, 4, 3), 200, np.uint8)]}
    >>> noisy = lambda im, rng: np.clip(im + rng.integers(0, 9, im.shape), 0, 255).astype(np.uint8)
    >>> mech = EncodedGenerator(noisy, MeanColour(), images)
    >>> mech.sample("b", 2, rng=0).shape
    (2, 3)
    """

    def __init__(
        self,
        generator: Callable[..., Any],
        encoder: Encoder | None = None,
        images_by_identity: Mapping[Any, Sequence[npt.NDArray[np.uint8]]] | None = None,
        *,
        pipeline: FacePipeline | None = None,
        mode: Mode | None = None,
        cache: EmbeddingCache | str | os.PathLike[str] | None = None,
        output_shape: Literal["source"] | tuple[int, int] | None = "source",
        batch_size: int = 64,
        progress: bool = False,
        original_faces: MutableMapping[tuple[Any, int], Face | None] | None = None,
    ) -> None:
        if not callable(generator):
            raise TypeError(f"`generator` must be callable; got {type(generator).__name__}.")
        if (encoder is None) == (pipeline is None):
            raise InvalidInputError("give exactly one of `encoder` and `pipeline`.")
        if encoder is not None:
            for attr in ("encode", "dim", "input_size"):
                if not hasattr(encoder, attr):
                    raise TypeError(
                        "`encoder` must follow the idaudit.faces Encoder protocol; it has no "
                        f"`{attr}`."
                    )
        else:
            for attr in ("detector", "encoder"):
                if not hasattr(pipeline, attr):
                    raise TypeError(
                        f"`pipeline` must be an idaudit.faces.FacePipeline; it has no `{attr}`."
                    )
        mode = ("aligned" if encoder is not None else "detect") if mode is None else mode
        self.mode: Mode = check_option(mode, "mode", ("aligned", "detect", "paired"))  # type: ignore[assignment]
        if self.mode != "aligned" and pipeline is None:
            raise InvalidInputError(f"`mode`={mode!r} needs a `pipeline` (detector + encoder).")
        if self.mode == "paired" and not getattr(generator, "paired_audit", True):
            raise InvalidInputError(
                f"`mode`='paired' reads the source frame beside each output, which "
                f"{type(generator).__name__}'s guarantee does not cover: audit it with "
                "mode='detect'."
            )
        if not isinstance(images_by_identity, Mapping) or not images_by_identity:
            raise InvalidInputError(
                "`images_by_identity` must be a non-empty mapping of identity -> images."
            )
        images: Any  # a str is a sequence too, so it is refused before len()
        for label, images in images_by_identity.items():
            if isinstance(images, (str, bytes)) or len(images) == 0:
                raise InvalidInputError(
                    f"`images_by_identity` has no source image for identity {label!r}."
                )
            for k, im in enumerate(images):
                arr = np.asarray(im)
                if arr.dtype != np.uint8 or arr.ndim != 3 or arr.shape[2] != 3 or 0 in arr.shape:
                    raise InvalidInputError(
                        f"`images_by_identity[{label!r}][{k}]` must be an (H, W, 3) uint8 RGB "
                        f"image; got {arr.dtype} {arr.shape}."
                    )
        self.generator = generator
        self.encoder: Any = encoder if encoder is not None else pipeline.encoder  # type: ignore[union-attr]
        self.pipeline = pipeline
        self.images_by_identity = {k: list(v) for k, v in images_by_identity.items()}
        self.cache = _as_cache(cache)
        if output_shape is not None and output_shape != "source":
            shape = tuple(output_shape)
            if len(shape) != 2 or not all(isinstance(v, int) and v > 0 for v in shape):
                raise InvalidInputError(
                    f"`output_shape` must be 'source', (H, W) or None; got {output_shape!r}."
                )
            output_shape = (int(shape[0]), int(shape[1]))
        declared = getattr(generator, "output_size", "source")  # its own size, not the source's
        if output_shape == "source" and self.mode == "detect" and declared != "source":
            if declared is not None and not (isinstance(declared, tuple) and len(declared) == 2):
                raise InvalidInputError(
                    f"`generator.output_size` must be (H, W) or None; got {declared!r}."
                )
            output_shape = None if declared is None else (int(declared[0]), int(declared[1]))
        self.output_shape = output_shape
        self.batch_size = check_integer(batch_size, "batch_size", minimum=1)
        self.progress = bool(progress)
        self._takes_rng = _accepts_rng(generator)
        if original_faces is not None and not isinstance(original_faces, MutableMapping):
            raise TypeError(
                "`original_faces` must be a mutable mapping of (identity, index) -> Face or "
                f"None; got {type(original_faces).__name__}."
            )
        # the caller's own mapping, not a copy: it is filled in place so callers can share it
        self.original_faces: MutableMapping[tuple[Any, int], Face | None] = (
            {} if original_faces is None else original_faces
        )
        self.n_encoded = 0  # crops run through the encoder (cache misses)

    @property
    def identities(self) -> npt.NDArray[Any]:
        """Sorted identity labels, shape (n_identities,)."""
        return np.asarray(sorted(self.images_by_identity))

    @functools.cached_property
    def signature(self) -> str:
        """What, besides the pixels, determines an embedding (part of every cache key).

        The :func:`~idaudit.faces._cache.encoder_fingerprint` of the encoder and detector
        (names, settings, weight digests, device) with the mode and the enlargement policy,
        taken once per generator (not at every identity's draws).
        """
        from idaudit.faces import ENLARGE_BELOW, FRAME_SIDE
        from idaudit.faces._cache import encoder_fingerprint

        detector = None if self.pipeline is None else self.pipeline.detector
        preprocessing = {"mode": self.mode, "upscale": FRAME_SIDE, "below": ENLARGE_BELOW}
        return encoder_fingerprint(self.encoder, detector, preprocessing=preprocessing)

    # -- the Mechanism protocol -------------------------------------------------------------
    def sample(self, identity: Any, n: int, *, rng: RngLike = None) -> npt.NDArray[np.float64]:
        """Generate ``n`` outputs from source images of ``identity`` drawn with replacement.

        Parameters
        ----------
        identity : label
            One of :attr:`identities`.
        n : int
            Number of outputs, at least 1.
        rng : int, numpy.random.SeedSequence, numpy.random.Generator or None
            Randomness of the source-image choice and, per image, of the generator.

        Returns
        -------
        numpy.ndarray of float64, shape (n, encoder.dim)

        Raises
        ------
        InvalidInputError
            If ``identity`` is unknown, an output is not a usable image, no face is found,
            or the encoder returns the wrong shape or non-finite values: a mechanism must
            answer every query (use :func:`idaudit.pipeline.audit_generator` instead, which
            records such draws and keeps them as failed outputs or drops and counts them).

        Warns
        -----
        IdauditWarning
            When rows repeat exactly: drawing with replacement repeats source images, and a
            deterministic generator then repeats outputs. They are iid draws of the channel
            whose P_id is uniform over the given sources, so they are kept; the warning says
            how many, because they carry no information beyond those sources.
        """
        n = check_integer(n, "n", minimum=1)
        self._check_identity(identity)
        gen = check_random_state(rng)
        sources = self.images_by_identity[identity]
        picks = gen.integers(0, len(sources), size=n)  # (n,)
        seeds = gen.integers(0, 2**63 - 1, size=n, dtype=np.int64)  # (n,)
        emb, _ = self.encode_draws(identity, picks.tolist(), seeds.tolist(), strict=True)
        n_dup = n - np.unique(emb, axis=0).shape[0]
        if n_dup:
            warnings.warn(
                f"{n_dup} of {n} outputs for identity {identity!r} repeat another exactly: "
                f"{len(sources)} source image(s) were drawn with replacement and the generator "
                "gave the same output for the same source. They are iid draws of the channel "
                "over these sources (certify them with duplicates='keep'), but they add no "
                "information about the identity's other images; "
                "audit_generator(sampling='each') uses every source once.",
                IdauditWarning,
                stacklevel=2,
            )
        return emb

    def _check_identity(self, identity: Any) -> None:
        if identity not in self.images_by_identity:
            raise InvalidInputError(
                f"`identity` must be one of the {len(self.images_by_identity)} identities of "
                f"`images_by_identity`; got {identity!r}."
            )

    # -- the engine ---------------------------------------------------------------------------
    def encode_draws(
        self,
        identity: Any,
        source_indices: Sequence[int],
        seeds: Sequence[int],
        *,
        strict: bool = False,
    ) -> tuple[npt.NDArray[np.float64], list[dict[str, Any]]]:
        """Run the generator on the given sources of ``identity`` and encode the outputs.

        Parameters
        ----------
        identity : label
            One of :attr:`identities`.
        source_indices : sequence of int
            Which source image each draw uses (repeats allowed).
        seeds : sequence of int
            One seed per draw for the generator's randomness.
        strict : bool, default False
            Raise on the first failed draw instead of recording it.

        Returns
        -------
        embeddings : numpy.ndarray of float64, shape (n_ok, dim)
            One row per draw whose status is ``"ok"``, in draw order.
        records : list of dict
            One per draw: ``identity``, ``source_index``, ``draw``, ``status`` (a key of
            :data:`DRAW_STATUSES`), ``message``, ``embedding_row`` (-1 unless ok),
            ``cached`` (whether the embedding came from the cache).
        """
        self._check_identity(identity)
        if len(source_indices) != len(seeds):
            raise InvalidInputError(
                f"`seeds` must hold one seed per draw; got {len(seeds)} vs {len(source_indices)}."
            )
        sources = self.images_by_identity[identity]
        records: list[dict[str, Any]] = []
        outputs: list[Any] = []
        idx = [int(j) for j in source_indices]
        for j in idx:
            if not 0 <= j < len(sources):
                raise InvalidInputError(
                    f"`source_indices` holds {j}; identity {identity!r} has {len(sources)} "
                    "source images."
                )
        steps = range(0, len(idx), self.batch_size)
        if self.progress:
            from tqdm.auto import tqdm

            steps = tqdm(steps, desc=f"identity {identity}", unit="batch", leave=False)
        for start in steps:
            chunk = idx[start : start + self.batch_size]
            chunk_seeds = [int(s) for s in seeds[start : start + self.batch_size]]
            outputs.extend(self._generate([sources[j] for j in chunk], chunk_seeds, strict))
        usable: list[int] = []  # the draws whose output goes to the encoder
        for draw, (j, out) in enumerate(zip(idx, outputs, strict=True)):
            rec: dict[str, Any] = {
                "identity": identity,
                "source_index": j,
                "draw": draw,
                "status": "ok",
                "message": "",
                "embedding_row": -1,
                "cached": False,
            }
            records.append(rec)
            if isinstance(out, BaseException):
                rec.update(status="generator_error", message=f"{type(out).__name__}: {out}")
                continue
            problem = self._check_output(out, sources[j])
            if problem:
                if strict:
                    raise InvalidInputError(f"{problem} for identity {identity!r}.")
                rec.update(status="bad_output", message=problem)
                continue
            usable.append(draw)
        from idaudit.faces._pipeline import encode_frames

        signature = "" if self.cache is None else self.signature
        embeddings, outcomes = encode_frames(
            [self._input(identity, idx[d], outputs[d], signature) for d in usable],
            self.encoder,
            None if self.pipeline is None else self.pipeline.detector,
            cache=self.cache,
            batch_size=self.batch_size,
            dtype=np.float64,
            context=f" for identity {identity!r}",
        )
        for outcome in outcomes:
            rec = records[usable[outcome["input_index"]]]
            rec["cached"] = outcome["cached"]
            if outcome["status"] == "ok":
                rec["embedding_row"] = outcome["embedding_row"]
                self.n_encoded += 0 if outcome["cached"] else 1  # crops the encoder ran on
                continue
            if strict:
                raise InvalidInputError(
                    f"no face found in output {rec['draw']} of identity {identity!r} "
                    f"(mode {self.mode!r})."
                )
            message = "cached" if outcome["cached"] else f"mode {self.mode}"
            rec.update(status=outcome["status"], message=message)
        return embeddings, records

    def _input(
        self, identity: Any, j: int, out: npt.NDArray[np.uint8], signature: str
    ) -> FrameInput:
        """Return the encoder's input for one output: the crop, or its frame and which face."""
        from idaudit.faces import content_key, prepare_frame
        from idaudit.faces._pipeline import FrameInput, SourceFace

        source = self.images_by_identity[identity][j]
        content = (source, out) if self.mode == "paired" else (out,)
        key = None if self.cache is None else content_key(signature, *content)
        if self.mode == "aligned":
            return FrameInput(out, key=key, crop=True)
        frame = functools.partial(prepare_frame, out)
        if self.mode == "detect":
            return FrameInput(frame, key=key)
        # paired: the box of the source frame's largest face, detected once per source
        original = SourceFace(
            functools.partial(prepare_frame, source), self.original_faces, (identity, j)
        )
        return FrameInput(frame, key=key, source=original)

    def _generate(self, images: list[Any], seeds: list[int], strict: bool) -> list[Any]:
        """Return a chunk's outputs, an exception in place of each failed image's."""
        gens = [np.random.default_rng(s) for s in seeds]
        batch = getattr(self.generator, "batch", None)
        if callable(batch):
            try:
                outs = list(batch(images, gens))
            except Exception:
                if strict:
                    raise
                gens = [np.random.default_rng(s) for s in seeds]  # replay per image
            else:
                if len(outs) != len(images):  # a broken generator, not one bad image
                    raise InvalidInputError(
                        "`generator.batch` must return one output per image; got "
                        f"{len(outs)} outputs for {len(images)} images."
                    )
                return outs
        out: list[Any] = []
        for im, g in zip(images, gens, strict=True):
            try:
                out.append(self.generator(im, rng=g) if self._takes_rng else self.generator(im))
            except Exception as exc:  # one image failing must not lose the run
                if strict:
                    raise
                out.append(exc)
        return out

    def _check_output(self, out: Any, source: npt.NDArray[np.uint8]) -> str:
        """Return why ``out`` is unusable, or ``""``."""
        if not isinstance(out, np.ndarray):
            return f"the generator must return numpy arrays; got {type(out).__name__}"
        if out.dtype != np.uint8:
            return f"the generator must return uint8 RGB images; got dtype {out.dtype}"
        if self.mode == "aligned":
            size = int(self.encoder.input_size)
            if out.shape != (size, size, 3):
                return (
                    f"the generator must return ({size}, {size}, 3) crops (the encoder's "
                    f"input_size); got {out.shape}"
                )
        elif out.ndim != 3 or out.shape[2] != 3 or 0 in out.shape:
            return f"the generator must return (H, W, 3) images; got {out.shape}"
        elif (self.mode == "paired" or self.output_shape == "source") and (
            out.shape != source.shape
        ):
            return f"outputs must have the source's size {source.shape}; got {out.shape}"
        elif isinstance(self.output_shape, tuple) and out.shape[:2] != self.output_shape:
            return f"outputs must have the size {self.output_shape}; got {out.shape[:2]}"
        return ""

    def __repr__(self) -> str:
        name = getattr(self.encoder, "name", type(self.encoder).__name__)
        gen = getattr(self.generator, "__name__", None) or repr(self.generator)
        return (
            f"EncodedGenerator(generator={gen}, encoder={name}, mode={self.mode!r}, "
            f"n_identities={len(self.images_by_identity)})"
        )


def _as_cache(cache: Any) -> EmbeddingCache | None:
    if cache is None:
        return None
    from idaudit.faces import EmbeddingCache

    if isinstance(cache, EmbeddingCache):
        return cache
    if isinstance(cache, (str, os.PathLike)):
        return EmbeddingCache(cache)
    raise TypeError(f"`cache` must be an EmbeddingCache or a folder; got {type(cache).__name__}.")


def _accepts_rng(func: Callable[..., Any]) -> bool:
    try:
        params = inspect.signature(func).parameters.values()
    except (TypeError, ValueError):  # builtins without a signature
        return False
    return any(p.name == "rng" or p.kind is inspect.Parameter.VAR_KEYWORD for p in params)
