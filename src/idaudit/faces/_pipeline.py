"""Photos in, identity embeddings out: detect, align, encode — and account for every input."""

from __future__ import annotations

import os
import warnings
from collections.abc import Iterable
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd

from idaudit._validation import check_integer
from idaudit.exceptions import IdauditWarning, InvalidInputError
from idaudit.faces._cache import EmbeddingCache, content_key
from idaudit.faces._io import read_pixels, to_rgb_uint8
from idaudit.faces._types import Detector, Encoder, Face

__all__ = ["OUTCOME_COLUMNS", "STATUSES", "FacePipeline"]

#: Faces encoded (and stored) at a time when :meth:`FacePipeline.encode` writes to a cache.
CHECKPOINT_FACES = 8


def _read_errors() -> tuple[type[BaseException], ...]:
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


def _ok_row(
    base: dict[str, Any],
    n_faces: int,
    face_index: int,
    embedding_row: int,
    box: tuple[float, float, float, float],
    score: float,
) -> dict[str, Any]:
    """Return the outcomes row of one kept face (columns as in :data:`OUTCOME_COLUMNS`)."""
    x1, y1, x2, y2 = box
    return {
        **base,
        "status": "ok",
        "n_faces": n_faces,
        "face_index": face_index,
        "embedding_row": embedding_row,
        "x1": x1,
        "y1": y1,
        "x2": x2,
        "y2": y2,
        "score": score,
        "message": "",
    }


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
            and the models' settings before detecting, and store every result (a face's
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
        signature = (
            f"face-pipeline|{_describe(self.detector)}|{getattr(self.encoder, 'name', '')}|"
            f"{_describe(self.encoder)}"
        )
        pending_keys: list[tuple[str, list[float]] | None] = []
        iterator: Iterable[tuple[int, Any]] = enumerate(items)
        if self.progress:
            from tqdm.auto import tqdm

            iterator = tqdm(iterator, total=len(items), desc="faces", unit="image")
        rows: list[dict[str, Any]] = []
        chunks: list[npt.NDArray[np.float32]] = []
        pending: list[npt.NDArray[np.uint8]] = []
        # with a cache, smaller batches: what is encoded is stored, so an interrupt loses little
        flush_at = self.batch_size if cache is None else min(self.batch_size, CHECKPOINT_FACES)
        n_rows = 0
        for index, item in iterator:
            source = None if isinstance(item, np.ndarray) else os.fspath(item)
            base = {"input_index": index, "source": source}
            key = None
            if cache is not None:
                key = _input_key(signature, item, source)
                entry = None if key is None else cache.get_entry(key)
                if entry is not None:
                    status, vector, meta = entry
                    if status == "no_face":
                        rows.append({**base, "status": "no_face", "n_faces": 0, "message": ""})
                        continue
                    if pending:  # keep rows in input order
                        chunks.append(self._encode_and_store(pending, pending_keys, cache))
                        pending, pending_keys = [], []
                    chunks.append(vector[None, :])
                    n_faces, face_index, x1, y1, x2, y2, score = meta.tolist()
                    rows.append(
                        _ok_row(
                            base, int(n_faces), int(face_index), n_rows, (x1, y1, x2, y2), score
                        )
                    )
                    n_rows += 1
                    continue
            image = self._load(item, source)
            if isinstance(image, dict):  # unreadable or bad_format, with the reason
                rows.append({**base, "n_faces": 0, **image})
                continue
            faces = self.detector.detect(image)
            if not faces:
                rows.append({**base, "status": "no_face", "n_faces": 0, "message": ""})
                if cache is not None and key is not None:
                    cache.put(key, None, status="no_face")
                continue
            for face_index in self._keep(faces):
                face = faces[face_index]
                pending.append(self.encoder.align(image, face))
                x1, y1, x2, y2 = (float(v) for v in face.box)
                face_meta = [len(faces), face_index, x1, y1, x2, y2, float(face.score)]
                pending_keys.append(None if key is None else (key, face_meta))
                box = (x1, y1, x2, y2)
                rows.append(_ok_row(base, len(faces), face_index, n_rows, box, float(face.score)))
                n_rows += 1
            if len(pending) >= flush_at:
                chunks.append(self._encode_and_store(pending, pending_keys, cache))
                pending, pending_keys = [], []
        if pending:
            chunks.append(self._encode_and_store(pending, pending_keys, cache))
        dim = int(getattr(self.encoder, "dim", 0))
        embeddings = (
            np.concatenate(chunks).astype(np.float32, copy=False)
            if chunks
            else np.zeros((0, dim), dtype=np.float32)
        )
        if items and n_rows == 0:
            _warn_nothing_kept(rows, len(items))
        return embeddings, _outcomes_frame(rows)

    @staticmethod
    def _load(item: Any, source: str | None) -> npt.NDArray[np.uint8] | dict[str, str]:
        """Return the RGB pixels of the input, or the ``status`` and ``message`` of the failure."""
        raw = item
        if source is not None:
            try:
                raw = read_pixels(item)
            except InvalidInputError as exc:  # decoded, but with pixel values idaudit refuses
                return {"status": "bad_format", "message": str(exc)}
            except _read_errors() as exc:
                return {"status": "unreadable", "message": str(exc) or type(exc).__name__}
        try:
            # only the conversion's own refusals: an unsupported dtype (TypeError) or shape,
            # emptiness or value range (InvalidInputError)
            return to_rgb_uint8(raw, "image" if source is None else "path")
        except (TypeError, InvalidInputError) as exc:
            return {"status": "bad_format", "message": str(exc)}

    def _keep(self, faces: list[Face]) -> list[int]:
        by_area = sorted(range(len(faces)), key=lambda i: -faces[i].area)
        return by_area if self.all_faces else by_area[:1]

    def _encode_and_store(
        self,
        crops: list[npt.NDArray[np.uint8]],
        keys: list[tuple[str, list[float]] | None],
        cache: EmbeddingCache | None,
    ) -> npt.NDArray[np.float32]:
        emb = self._encode(crops)
        if cache is not None:
            for row, entry in zip(emb, keys, strict=True):
                if entry is not None:
                    cache.put(entry[0], row, status="ok", meta=entry[1])
        return emb

    def _encode(self, crops: list[npt.NDArray[np.uint8]]) -> npt.NDArray[np.float32]:
        return np.asarray(self.encoder.encode(np.stack(crops)), dtype=np.float32)


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


def _describe(obj: Any) -> str:
    from idaudit._results import describe

    return describe(obj)


def _input_key(signature: str, item: Any, source: str | None) -> str | None:
    """Content key of one input (``None`` for a file that cannot be read: not cached)."""
    if source is None:
        return content_key(signature, np.asarray(item))
    try:
        with open(source, "rb") as fh:
            return content_key(signature, fh.read())
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
