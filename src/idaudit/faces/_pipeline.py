"""Photos in, identity embeddings out: detect, align, encode — and account for every input."""

from __future__ import annotations

import functools
import os
import warnings
from collections.abc import Callable, Hashable, Iterable, MutableMapping, Sequence
from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt
import pandas as pd

from idaudit._validation import check_integer
from idaudit.exceptions import IdauditWarning, InvalidInputError
from idaudit.faces._cache import EmbeddingCache, content_key, encoder_fingerprint
from idaudit.faces._io import read_pixels, to_rgb_uint8
from idaudit.faces._types import Detector, Encoder, Face

__all__ = [
    "OUTCOME_COLUMNS",
    "STATUSES",
    "FacePipeline",
    "FrameInput",
    "encode_frames",
    "read_errors",
    "read_frame",
]

#: Faces encoded (and stored) at a time when :meth:`FacePipeline.encode` writes to a cache.
CHECKPOINT_FACES = 8


def read_errors() -> tuple[type[BaseException], ...]:
    """Return the exceptions that mean "this image file cannot be decoded", nothing broader.

    ``OSError`` covers missing, truncated and undecodable files; ``ValueError`` what Pillow
    raises on some malformed data; ``SyntaxError`` what older Pillow plugins raise on a
    malformed header; ``PIL.Image.DecompressionBombError`` (a plain ``Exception``) an image
    over ``PIL.Image.MAX_IMAGE_PIXELS``. A ``TypeError`` is not among them: from the decoder
    it would be a bug, and it propagates.
    """
    errors: tuple[type[BaseException], ...] = (OSError, ValueError, SyntaxError)
    try:
        from PIL import Image
    except ImportError:  # pragma: no cover - pillow is in the faces extra
        return errors
    return (*errors, Image.DecompressionBombError)


#: Every value the ``status`` column of the outcomes table can take.
STATUSES = ("ok", "no_face", "unreadable", "bad_format")

#: Columns of the outcomes table, in order.
OUTCOME_COLUMNS = (
    "input_index",
    "source",
    "status",
    "n_faces",
    "face_index",
    "embedding_row",
    "x1",
    "y1",
    "x2",
    "y2",
    "score",
    "message",
)


def _ok_row(base: dict[str, Any], embedding_row: int, meta: Sequence[float]) -> dict[str, Any]:
    """Return the outcomes row of one kept face.

    ``meta`` is ``[n_faces, face_index, x1, y1, x2, y2, score]``, or empty for a crop.
    """
    detection: dict[str, Any] = {}
    if len(meta) == 7:
        n_faces, face_index, x1, y1, x2, y2, score = meta
        detection = {"n_faces": int(n_faces), "face_index": int(face_index), "score": score}
        detection.update(x1=x1, y1=y1, x2=x2, y2=y2)
    return {**base, "status": "ok", "embedding_row": embedding_row, "message": "", **detection}


class FacePipeline:
    """Detect, align and encode the faces in photos, recording what happened to each input.

    Parameters
    ----------
    detector : Detector
        Finds faces (e.g. :class:`~idaudit.faces.MTCNNDetector`).
    encoder : Encoder
        Aligns (its own ``align``) and embeds them (e.g. :class:`~idaudit.faces.DlibEncoder`).
    all_faces : bool, default False
        Keep every detected face; by default only the largest (box area) of each photo.
    batch_size : int, default 32
        Aligned crops per ``encoder.encode`` call.
    progress : bool, default True
        Show a progress bar over the inputs.

    Notes
    -----
    Row problems never raise; they are recorded in the outcomes table (and so counted):

    ``"ok"``
        A face was kept and embedded.
    ``"no_face"``
        The detector found nothing.
    ``"unreadable"``
        A path that does not exist or that Pillow cannot decode (corrupt, truncated, not an
        image).
    ``"bad_format"``
        Pixels idaudit will not guess about: an empty array, a wrong shape, a float image
        outside [0, 1], an unsupported dtype.

    Grey, grey + alpha, RGBA, uint16 and [0, 1] float images are converted (alpha dropped,
    uint16 by ``round(x / 257)``, floats by ``round(255 x)``), not refused. Arguments of the
    wrong type (``images`` not iterable, an item neither an array nor a path) raise
    :class:`TypeError`.

    Examples
    --------
    >>> import numpy as np
    >>> from idaudit.faces import DlibEncoder, FacePipeline, MTCNNDetector
    >>> pipe = FacePipeline(MTCNNDetector(), DlibEncoder(), progress=False)
    >>> import warnings
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     emb, outcomes = pipe.encode([np.zeros((64, 64, 3), np.uint8), np.zeros((0, 0))])
    >>> emb.shape, outcomes["status"].tolist()
    ((0, 128), ['no_face', 'bad_format'])
    >>> print(caught[0].message)  # no input kept a face: said, with the count of each reason
    FacePipeline.encode kept no face from any of the 2 inputs (bad_format: 1, no_face: 1); ...
    """

    def __init__(
        self,
        detector: Detector,
        encoder: Encoder,
        *,
        all_faces: bool = False,
        batch_size: int = 32,
        progress: bool = True,
    ) -> None:
        if not callable(getattr(detector, "detect", None)):
            raise TypeError(
                f"`detector` must have a `detect(image)` method; got {type(detector).__name__}."
            )
        for attr in ("encode", "align"):
            if not callable(getattr(encoder, attr, None)):
                raise TypeError(
                    f"`encoder` must have `encode` and `align` methods; "
                    f"got {type(encoder).__name__}."
                )
        self.detector = detector
        self.encoder = encoder
        self.all_faces = bool(all_faces)
        self.batch_size = check_integer(batch_size, "batch_size", minimum=1)
        self.progress = bool(progress)

    def __repr__(self) -> str:
        return (
            f"FacePipeline({self.detector!r}, {self.encoder!r}, all_faces={self.all_faces}, "
            f"batch_size={self.batch_size})"
        )

    def encode(
        self,
        images: Iterable[Any] | npt.NDArray[Any] | str | os.PathLike[str],
        *,
        cache: EmbeddingCache | None = None,
    ) -> tuple[npt.NDArray[np.float32], pd.DataFrame]:
        """Embed the faces in ``images``.

        Parameters
        ----------
        images : iterable of (numpy.ndarray or path), or numpy.ndarray of shape (n, H, W, 3)
            Photos as arrays (see :func:`idaudit.faces.load_image` for the accepted pixel
            formats) or file paths; a single path is one photo.
        cache : EmbeddingCache, optional
            Look each input up by the SHA-256 of its bytes (a file's bytes, an array's pixels)
            and the models' fingerprint before detecting, and store every result (a face's
            embedding, box and score, or "no face") as soon as it is known: faces are encoded
            and stored every ``CHECKPOINT_FACES`` (8) faces with a cache, a few seconds of work
            on a CPU, so an interrupted run loses at most that and resumes where it stopped;
            a re-run encodes nothing. Only
            with ``all_faces=False`` (one face per input); ``unreadable`` and ``bad_format``
            inputs are not cached (they are cheap to find again).

        Returns
        -------
        embeddings : numpy.ndarray of float32, shape (n_kept, encoder.dim)
            One row per kept face, in input order.
        outcomes : pandas.DataFrame
            One row per kept face, plus one row per input with no kept face. Columns:
            ``input_index`` (position in ``images``), ``source`` (the path, or ``None`` for
            arrays), ``status`` (one of :data:`STATUSES`), ``n_faces`` (faces detected),
            ``face_index`` (position of the kept face in the detector's list),
            ``embedding_row`` (its row in ``embeddings``), ``x1, y1, x2, y2, score`` (its
            box and detector score) and ``message`` (why an input failed). Integer columns
            use pandas' nullable ``Int64``; they are missing where no face was kept.

        Raises
        ------
        TypeError
            If ``images`` is not iterable or holds something other than arrays and paths.

        Warns
        -----
        IdauditWarning
            When inputs were given but none kept a face: the (0, dim) embeddings come with
            the count of each failure (``no_face``, ``unreadable``, ``bad_format``).
        """
        items = _as_items(images)
        if cache is not None and self.all_faces:
            raise InvalidInputError("`cache` works with all_faces=False only (one face per input).")
        fingerprint = "" if cache is None else encoder_fingerprint(self.encoder, self.detector)
        sources = [None if isinstance(item, np.ndarray) else os.fspath(item) for item in items]
        inputs: Iterable[FrameInput] = (
            FrameInput(
                functools.partial(read_frame, item, source),
                key=None if cache is None else _input_key(fingerprint, item, source),
            )
            for item, source in zip(items, sources, strict=True)
        )
        if self.progress:
            from tqdm.auto import tqdm

            inputs = tqdm(inputs, total=len(items), desc="faces", unit="image")
        # with a cache, smaller batches: what is encoded is stored, so an interrupt loses little
        embeddings, rows = encode_frames(
            inputs,
            self.encoder,
            self.detector,
            cache=cache,
            all_faces=self.all_faces,
            batch_size=self.batch_size if cache is None else min(self.batch_size, CHECKPOINT_FACES),
        )
        for row in rows:
            row["source"] = sources[row["input_index"]]
        if items and len(embeddings) == 0:
            _warn_nothing_kept(rows, len(items))
        return embeddings, _outcomes_frame(rows)


class SourceFace(NamedTuple):
    """The frame whose largest face stands in for detection on an input (paired audits).

    Attributes
    ----------
    frame : callable
        Returns the prepared source frame; called only when ``found`` lacks ``key``.
    found : mutable mapping
        Memo of each source's largest face (``None``: no face), shared by every input cut
        from the same source.
    key : hashable
        The source's entry in ``found``.
    """

    frame: Callable[[], npt.NDArray[np.uint8]]
    found: MutableMapping[Any, Face | None]
    key: Hashable


class FrameInput(NamedTuple):
    """One input of :func:`encode_frames`.

    Attributes
    ----------
    frame : numpy.ndarray or callable
        The prepared ``(H, W, 3)`` uint8 frame, or a function of no argument that returns it
        (called only on a cache miss) or the ``(status, message)`` of why there is none.
    key : str, optional
        Its cache key (:func:`~idaudit.faces.content_key` over the input's content and the
        :func:`~idaudit.faces._cache.encoder_fingerprint`); ``None``: not cached.
    source : SourceFace, optional
        Take the largest face of this source frame in place of detecting on the input, e.g.
        the source of a generator's output (paired audits: the same box, cut from both).
    crop : bool, default False
        The frame is already the encoder's aligned crop: no detection, no alignment.
    """

    frame: npt.NDArray[np.uint8] | Callable[[], npt.NDArray[np.uint8] | tuple[str, str]]
    key: str | None = None
    source: SourceFace | None = None
    crop: bool = False


def encode_frames(
    inputs: Iterable[FrameInput],
    encoder: Encoder,
    detector: Detector | None = None,
    *,
    cache: EmbeddingCache | None = None,
    all_faces: bool = False,
    batch_size: int = 32,
    cache_failures: bool = False,
    dtype: type[np.floating[Any]] = np.float32,
    context: str | None = None,
) -> tuple[npt.NDArray[Any], list[dict[str, Any]]]:
    """Run the one loop from frames to embeddings: look up, detect, align, encode, store.

    Every road from images to embeddings (:meth:`FacePipeline.encode`, the generator audit's
    :class:`~idaudit.pipeline.EncodedGenerator`, the privacy check) runs through it.

    Parameters
    ----------
    inputs : iterable of FrameInput
        The frames, read one at a time (a generator keeps memory flat).
    encoder : Encoder
        Aligns (``encoder.align(frame, face)``) and embeds.
    detector : Detector, optional
        Finds the faces of inputs that neither are crops nor bring their own ``faces``.
    cache : EmbeddingCache, optional
        Inputs with a ``key`` are looked up before their frame is read; every face encoded
        (with its detection: face count, index, box, score) and every "no face" is stored.
    all_faces : bool, default False
        Keep every detected face (largest first); by default only the largest (box area).
    batch_size : int, default 32
        Crops per ``encoder.encode`` call; with a cache, also how many faces are encoded
        before they are stored.
    cache_failures : bool, default False
        Also store the status of inputs whose frame function reported a failure.
    dtype : numpy float type, default numpy.float32
        Of the returned embeddings (the encoder's output is cast; cached rows are float32).
    context : str, optional
        Check every encoder output (shape ``(n, encoder.dim)``, finite values) and name
        ``context`` (e.g. ``" for identity 'a'"``) in the :class:`InvalidInputError` raised.

    Returns
    -------
    embeddings : numpy.ndarray of shape (n_kept, encoder.dim)
        One row per kept face, in input order.
    outcomes : list of dict
        One per kept face, plus one per input with none: ``input_index``, ``status``,
        ``n_faces``, ``face_index``, ``embedding_row``, ``x1, y1, x2, y2, score``,
        ``message`` (the columns of :data:`OUTCOME_COLUMNS` but ``source``) and ``cached``
        (answered from the cache).
    """
    rows: list[dict[str, Any]] = []
    vectors: list[npt.NDArray[Any] | None] = []  # one per embedding row, filled when encoded
    pending: list[tuple[int, npt.NDArray[np.uint8], str | None, list[float]]] = []

    def flush() -> None:
        emb = _encode_checked(encoder, [p[1] for p in pending], dtype, context)
        for (row, _, key, meta), vector in zip(pending, emb, strict=True):
            vectors[row] = vector
            if cache is not None and key is not None:
                cache.put(key, vector, status="ok", meta=meta)
        pending.clear()

    for index, item in enumerate(inputs):
        base: dict[str, Any] = {"input_index": index, "cached": False}
        entry = None if cache is None or item.key is None else cache.get_entry(item.key)
        if entry is not None:
            status, vector, meta = entry
            base["cached"] = True
            if status != "ok":
                rows.append({**base, "status": status, "n_faces": 0, "message": ""})
                continue
            rows.append(_ok_row(base, len(vectors), meta.tolist()))
            vectors.append(vector)
            continue
        frame = item.frame() if callable(item.frame) else item.frame
        if isinstance(frame, tuple):  # no frame: (status, message)
            rows.append({**base, "status": frame[0], "n_faces": 0, "message": frame[1]})
            if cache_failures and cache is not None and item.key is not None:
                cache.put(item.key, None, status=frame[0])
            continue
        if item.crop:
            rows.append(_ok_row(base, len(vectors), []))
            pending.append((len(vectors), frame, item.key, []))
            vectors.append(None)
        else:
            if getattr(detector, "detect", None) is None:
                raise InvalidInputError("a frame that is not a crop needs a `detector`.")
            faces = (
                list(detector.detect(frame))  # type: ignore[union-attr]
                if item.source is None
                else _source_face(detector, item.source)
            )
            if not faces:
                rows.append({**base, "status": "no_face", "n_faces": 0, "message": ""})
                if cache is not None and item.key is not None:
                    cache.put(item.key, None, status="no_face")
                continue
            by_area = sorted(range(len(faces)), key=lambda i: -faces[i].area)
            for face_index in by_area if all_faces else by_area[:1]:
                face = faces[face_index]
                found = [len(faces), face_index, *(float(v) for v in face.box), float(face.score)]
                rows.append(_ok_row(base, len(vectors), found))
                crop = np.asarray(encoder.align(frame, face), dtype=np.uint8)
                pending.append((len(vectors), crop, item.key, found))
                vectors.append(None)
        if len(pending) >= batch_size:
            flush()
    if pending:
        flush()
    if not vectors:
        return np.zeros((0, int(getattr(encoder, "dim", 0))), dtype=dtype), rows
    return np.stack(vectors).astype(dtype, copy=False), rows  # type: ignore[arg-type]


def _source_face(detector: Any, source: SourceFace) -> list[Face]:
    """Return the largest face of ``source``'s frame (or none), detected once per key."""
    if source.key not in source.found:
        faces = detector.detect(source.frame())
        source.found[source.key] = max(faces, key=lambda f: f.area) if faces else None
    face = source.found[source.key]
    return [] if face is None else [face]


def _encode_checked(
    encoder: Encoder, crops: list[npt.NDArray[np.uint8]], dtype: Any, context: str | None
) -> npt.NDArray[Any]:
    """Embed a batch of crops; with ``context``, refuse a wrong shape or non-finite values."""
    out = np.asarray(encoder.encode(np.stack(crops)), dtype=dtype)
    if context is None:
        return out
    dim = int(encoder.dim)
    if out.shape != (len(crops), dim):
        raise InvalidInputError(
            f"the encoder must return shape ({len(crops)}, {dim}){context}; got {out.shape}."
        )
    if not np.isfinite(out).all():
        raise InvalidInputError(
            f"the encoder returned NaN or inf{context}; embeddings must be finite."
        )
    return out


def read_frame(item: Any, source: str | None) -> npt.NDArray[np.uint8] | tuple[str, str]:
    """Return the RGB pixels of the input, or the ``(status, message)`` of the failure."""
    raw = item
    if source is not None:
        try:
            raw = read_pixels(item)
        except InvalidInputError as exc:  # decoded, but with pixel values idaudit refuses
            return "bad_format", str(exc)
        except read_errors() as exc:
            return "unreadable", str(exc) or type(exc).__name__
    try:
        # only the conversion's own refusals: an unsupported dtype (TypeError) or shape,
        # emptiness or value range (InvalidInputError)
        return to_rgb_uint8(raw, "image" if source is None else "path")
    except (TypeError, InvalidInputError) as exc:
        return "bad_format", str(exc)


def _warn_nothing_kept(rows: list[dict[str, Any]], n_inputs: int) -> None:
    """Warn that no input gave a face, with the count of each reason."""
    counts: dict[str, int] = {}
    for row in rows:
        counts[row["status"]] = counts.get(row["status"], 0) + 1
    reasons = ", ".join(f"{status}: {n}" for status, n in sorted(counts.items()))
    inputs = "the 1 input" if n_inputs == 1 else f"any of the {n_inputs} inputs"
    warnings.warn(
        f"FacePipeline.encode kept no face from {inputs} ({reasons}); the embeddings are "
        "empty and the outcomes' status and message columns say why for each input.",
        IdauditWarning,
        stacklevel=3,
    )


def _input_key(fingerprint: str, item: Any, source: str | None) -> str | None:
    """Content key of one input (``None`` for a file that cannot be read: not cached)."""
    if source is None:
        return content_key(fingerprint, np.asarray(item))
    try:
        with open(source, "rb") as fh:
            return content_key(fingerprint, fh.read())
    except OSError:
        return None


def _as_items(images: Any) -> list[Any]:
    if isinstance(images, (str, os.PathLike)):
        return [images]
    if isinstance(images, np.ndarray):
        if images.ndim == 4:
            return list(images)
        raise InvalidInputError(
            "`images` as one array must be a stack of shape (n, H, W, C); "
            f"got shape {images.shape}. Wrap a single image in a list."
        )
    try:
        items = list(images)
    except TypeError as exc:
        raise TypeError(
            "`images` must be an iterable of arrays or paths, or an (n, H, W, C) array; "
            f"got {type(images).__name__}."
        ) from exc
    for i, item in enumerate(items):
        if not isinstance(item, (np.ndarray, str, os.PathLike)):
            raise TypeError(
                f"`images[{i}]` must be a numpy array or a path; got {type(item).__name__}."
            )
    return items


def _outcomes_frame(rows: list[dict[str, Any]]) -> pd.DataFrame:
    frame = pd.DataFrame(rows, columns=list(OUTCOME_COLUMNS))
    for col in ("input_index", "n_faces", "face_index", "embedding_row"):
        frame[col] = frame[col].astype("Int64")
    for col in ("x1", "y1", "x2", "y2", "score"):
        frame[col] = frame[col].astype("float64")
    frame["status"] = pd.Categorical(frame["status"], categories=list(STATUSES))
    # Built from the rows, so that array inputs keep ``None`` (not NaN) as their source.
    frame["source"] = pd.Series([r["source"] for r in rows], dtype=object)
    frame["message"] = pd.Series([r["message"] for r in rows], dtype=object)
    return frame
