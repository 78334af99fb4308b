"""The embedding cache every road shares, keyed by encoder fingerprint and content (no pickles)."""

from __future__ import annotations

import functools
import hashlib
import json
import os
import re
import zipfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from idaudit._results import atomic_path, private_dir
from idaudit.exceptions import InvalidInputError

__all__ = ["EmbeddingCache", "content_key", "encoder_fingerprint", "weight_digests"]


def content_key(*parts: Any) -> str:
    """SHA-256 over the bytes, shapes and dtypes of arrays and the text of everything else.

    Parameters
    ----------
    *parts : numpy.ndarray, bytes or object
        What identifies one cached result: the pixels (arrays hash their shape, dtype and
        C-order bytes), the models and settings (hashed as ``str``).

    Returns
    -------
    str
        64 lower-case hex digits.

    Examples
    --------
    >>> import numpy as np
    >>> from idaudit.faces import content_key
    >>> a = np.zeros((2, 2, 3), np.uint8)
    >>> content_key(a, "dlib") == content_key(a.copy(), "dlib") != content_key(a, "arcface")
    True
    """
    digest = hashlib.sha256()
    for part in parts:
        if isinstance(part, np.ndarray):
            arr = np.ascontiguousarray(part)
            digest.update(f"array{arr.shape}{arr.dtype.str}".encode())
            digest.update(arr.tobytes())
        elif isinstance(part, bytes):
            digest.update(b"bytes")
            digest.update(part)
        else:
            digest.update(f"text:{part}".encode())
        digest.update(b"\x00")
    return digest.hexdigest()


def weight_digests(model: Any) -> dict[str, str]:
    """SHA-256 of every weight file behind a model, by file name (``{}`` when it names none).

    Parameters
    ----------
    model : object
        A detector or encoder of :mod:`idaudit.faces` (its ``weight_files``, as dlib's
        encoders and MTCNN's three nets list them, or its ``weights_path`` /
        ``backbone_path`` / ``heads_path``), or any object.

    Returns
    -------
    dict of str to str
        File name → 64 hex digits.
    """
    if getattr(model, "weight_files", None) is not None:  # dlib's encoders, MTCNN's nets
        files = [Path(f) for f in model.weight_files]
    else:
        named = [getattr(model, a, None) for a in ("weights_path", "backbone_path", "heads_path")]
        files = [Path(f) for f in named if f is not None]
    return {f.name: _file_digest(str(f), *_stamp(f)) for f in files}


def _stamp(path: Path) -> tuple[int, int]:
    stat = path.stat()
    return stat.st_size, stat.st_mtime_ns


@functools.lru_cache(maxsize=64)
def _file_digest(path: str, size: int, mtime_ns: int) -> str:
    """SHA-256 of a file, hashed once per (path, size, modification time)."""
    from idaudit.faces._weights import file_sha256

    return file_sha256(path)


def _device(model: Any) -> str:
    """Where a model computes: its ``device``, else (a torch module) where its tensors are."""
    device = getattr(model, "device", None)
    if device is None and callable(getattr(model, "buffers", None)):
        tensors = [*model.buffers(), *model.parameters()]
        device = tensors[0].device if tensors else None
    return str(device or "cpu")


def encoder_fingerprint(
    encoder: Any, detector: Any = None, *, preprocessing: Mapping[str, Any] | None = None
) -> str:
    """Return what, besides the input's content, determines an embedding (the key's other half).

    Parameters
    ----------
    encoder : Encoder
        The identity encoder: its name, settings (``repr`` when short), device, ``dtype``
        and the SHA-256 of its weight files (:func:`weight_digests`).
    detector : Detector, optional
        The face detector, described the same way (``None`` when the inputs are crops).
    preprocessing : mapping, optional
        Everything done to an input before detection (enlargement policy, alignment mode,
        size limits), JSON-serialisable.

    Returns
    -------
    str
        The canonical JSON of all of it: two fingerprints are equal only when the model's
        name, settings (as its one-line ``repr`` states them, else its state digest), weight
        files, device and the preprocessing are. A ``repr`` that leaves out a setting that
        changes the embeddings lets two such models share entries: name every one.
    """

    def model(obj: Any) -> dict[str, Any] | None:
        if obj is None:
            return None
        return {
            "name": getattr(obj, "name", type(obj).__name__),
            "settings": _settings(obj),
            "device": _device(obj),
            "dtype": str(getattr(obj, "dtype", "")),
            "weights": weight_digests(obj),
        }

    parts = {
        "encoder": model(encoder),
        "detector": model(detector),
        "preprocessing": dict(preprocessing or {}),
    }
    return json.dumps(parts, sort_keys=True, default=str)


def _settings(obj: Any) -> str:
    """Return the model's settings: its one-line ``repr``, else its class and state digest.

    A repr over several lines (a torch module's layers) or Python's default repr (a memory
    address, new in every process) says nothing of the settings. Such a model is keyed by
    its qualified class name and a digest of its state: a torch module's ``state_dict`` with
    its public plain attributes, any other object's attributes. An attribute that cannot be
    digested (a function, an open session) leaves the address in, so that model never
    reads another's entries: it misses instead.
    """
    text = repr(obj)
    if "\n" not in text and not _DEFAULT_REPR.fullmatch(text):
        return text
    state = _state_digest(obj)
    return f"{type(obj).__module__}.{type(obj).__qualname__}:{state or object.__repr__(obj)}"


def _state_digest(obj: Any) -> str | None:
    """SHA-256 over a model's state (see :func:`_settings`), ``None`` if it cannot be taken."""
    digest = hashlib.sha256()
    state = getattr(obj, "state_dict", None)
    module = callable(state)  # a torch module: its tensors are in its state_dict
    for name, tensor in sorted(state().items()) if callable(state) else ():
        try:
            array = tensor.detach().cpu().numpy()
        except TypeError:  # a dtype numpy lacks (bfloat16): not digested, the address stays
            return None
        digest.update(f"{name}{array.dtype}{array.shape}".encode())
        digest.update(array.tobytes())
    for name, value in sorted(getattr(obj, "__dict__", {}).items()):
        if module and name.startswith("_"):
            continue  # the module's own bookkeeping
        text = _plain(value)
        if text is None and module:
            continue  # a submodule or tensor attribute: in the state_dict already
        if text is None:
            return None
        digest.update(f"{name}={text};".encode())
    return digest.hexdigest()


def _plain(value: Any) -> str | None:
    """Return a stable text of a plain value (numbers, text, paths, arrays, tuples), or None."""
    if value is None or isinstance(value, (bool, int, float, str, bytes)):
        return repr(value)
    if isinstance(value, os.PathLike):
        return repr(os.fspath(value))
    if isinstance(value, np.ndarray) and value.dtype != object:
        return f"{value.dtype}{value.shape}:{hashlib.sha256(value.tobytes()).hexdigest()}"
    if isinstance(value, (tuple, list)):
        parts = [_plain(v) for v in value]
        return None if any(p is None for p in parts) else f"({','.join(parts)})"  # type: ignore[arg-type]
    return None


_DEFAULT_REPR = re.compile(r"<[\w.]+ object at 0x[0-9a-fA-F]+>")


class EmbeddingCache:
    """Embeddings (or "no face") stored by content hash, so repeated work encodes nothing.

    Each entry is one ``.npz`` file (``allow_pickle=False`` on both sides) under
    ``directory/<key[:2]>/<key>.npz`` holding ``embedding`` (float32, or float64 when the
    encoder gave float64, so a cached row equals a fresh one; shape ``(dim,)``, or
    ``(0,)`` for an input without a face) and ``status`` (the outcome, e.g. ``"ok"`` or
    ``"no_face"``). Files and folders are owner-only (0600 / 0700) and written atomically
    (temporary file, then rename), so an interrupted run leaves whole entries and a re-run
    resumes from them.

    Parameters
    ----------
    directory : str or os.PathLike
        Where entries live; created (0700, missing parents too) if missing.

    Attributes
    ----------
    hits, misses, writes : int
        Look-ups answered from disk, look-ups that found nothing, entries written; counted
        since construction (:meth:`reset_counts` zeroes them).

    Notes
    -----
    The key is :func:`content_key` over the input's content and the
    :func:`encoder_fingerprint` (model, weight digests, device, preprocessing): every road
    from images to embeddings (:class:`~idaudit.faces.FacePipeline`,
    :class:`~idaudit.pipeline.EncodedGenerator`, the privacy check) keys it so, and a
    changed model, weight file, device or preprocessing misses instead of returning another
    model's embeddings.

    Examples
    --------
    >>> import tempfile
    >>> import numpy as np
    >>> from idaudit.faces import EmbeddingCache
    >>> cache = EmbeddingCache(tempfile.mkdtemp())
    >>> cache.put("ab" * 32, np.ones(3, np.float32))
    >>> cache.get("ab" * 32)
    ('ok', array([1., 1., 1.], dtype=float32))
    >>> cache.hits, cache.misses, cache.writes
    (1, 0, 1)
    """

    def __init__(self, directory: str | os.PathLike[str]) -> None:
        if not isinstance(directory, (str, os.PathLike)):
            raise TypeError(f"`directory` must be a path; got {type(directory).__name__}.")
        self.directory = private_dir(directory, name="directory")
        self.reset_counts()

    def reset_counts(self) -> None:
        """Set :attr:`hits`, :attr:`misses` and :attr:`writes` to 0."""
        self.hits = 0
        self.misses = 0
        self.writes = 0

    def _path(self, key: str) -> Path:
        if len(key) != 64 or any(c not in "0123456789abcdef" for c in key):
            raise InvalidInputError(f"`key` must be 64 lower-case hex digits; got {key!r}.")
        return self.directory / key[:2] / f"{key}.npz"

    def get(self, key: str) -> tuple[str, npt.NDArray[np.float32]] | None:
        """Return ``(status, embedding)`` stored under ``key``, or ``None`` (a miss).

        An entry that cannot be read (a file truncated by something other than idaudit)
        counts as a miss and is recomputed.
        """
        entry = self.get_entry(key)
        return None if entry is None else (entry[0], entry[1])

    def get_entry(
        self, key: str
    ) -> tuple[str, npt.NDArray[np.float32], npt.NDArray[np.float64]] | None:
        """Return ``(status, embedding, meta)`` stored under ``key``, or ``None`` (a miss)."""
        path = self._path(key)
        try:
            # our own handle: numpy leaves its file open when the zip is damaged
            with open(path, "rb") as fh, np.load(fh, allow_pickle=False) as data:
                status = str(data["status"])
                emb = np.asarray(data["embedding"])
                if emb.dtype != np.float64:
                    emb = emb.astype(np.float32, copy=False)
                meta = (
                    np.asarray(data["meta"], dtype=np.float64)
                    if "meta" in data.files
                    else np.zeros(0)
                )
        except (OSError, KeyError, ValueError, EOFError, zipfile.BadZipFile):
            self.misses += 1  # a missing, truncated or damaged entry is encoded again
            return None
        self.hits += 1
        return status, emb, meta

    def put(
        self,
        key: str,
        embedding: npt.ArrayLike | None,
        status: str = "ok",
        meta: npt.ArrayLike | None = None,
    ) -> None:
        """Store ``embedding`` (``None`` for an input without a face) under ``key``.

        ``meta`` is an optional float vector kept with it (e.g. the face's box and score).
        """
        path = self._path(key)
        private_dir(path.parent, name="directory")
        emb = np.zeros(0, np.float32) if embedding is None else np.asarray(embedding)
        if emb.dtype != np.float64:  # float64 is kept, so a cached row equals a fresh one
            emb = emb.astype(np.float32)
        if emb.ndim != 1:
            raise InvalidInputError(f"`embedding` must be 1-d; got shape {emb.shape}.")

        with atomic_path(path) as tmp, open(tmp, "wb") as fh:
            np.savez(
                fh,
                embedding=emb,
                status=np.asarray(str(status)),
                meta=np.zeros(0) if meta is None else np.asarray(meta, dtype=np.float64),
            )
        self.writes += 1

    def __len__(self) -> int:
        return sum(1 for _ in self.directory.glob("??/*.npz"))

    def __repr__(self) -> str:
        return f"EmbeddingCache({str(self.directory)!r})"
