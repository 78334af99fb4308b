"""The privacy check's cache folder and its appearance distances (embeddings: faces' cache).

Files are keyed by what determines their numbers: an image by the SHA-256 of its bytes, a
metric by its identity (names, settings and the SHA-256 of every weight file). Everything is
``.npz`` (read with ``allow_pickle=False``), written atomically with owner-only permissions
in folders created ``0700``.

Layout under the cache root::

    embeddings/<key[:2]>/<key>.npz   one image's outcome and embedding (faces.EmbeddingCache)
    appearance/<metric key>.npz      hashes, i, j, values, identity
"""

from __future__ import annotations

import hashlib
import json
import os
import warnings
import zipfile
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from idaudit._results import atomic_path, private_dir
from idaudit.exceptions import IdauditWarning

__all__ = ["PrivacyCache", "model_key"]

_HASH_DTYPE = "<U64"


def model_key(identity: Mapping[str, Any]) -> str:
    """Folder name of a model identity: the first 16 hex digits of its canonical JSON's SHA-256.

    Examples
    --------
    >>> from idaudit.pipeline._privacy_cache import model_key
    >>> model_key({"name": "dlib-resnet-v1"})
    'a5b82aa20ca1e2d5'
    """
    text = json.dumps(dict(identity), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _savez(path: Path, **arrays: Any) -> None:
    private_dir(path.parent, name="root")

    # a file object: np.savez would append ".npz" to a name
    with atomic_path(path) as tmp, open(tmp, "wb") as fh:
        np.savez(fh, **arrays)


class PrivacyCache:
    """The cache folder of a privacy check: its appearance distances, reused across runs.

    Embeddings live in its ``embeddings`` folder, a :class:`~idaudit.faces.EmbeddingCache`
    that every road from images to embeddings shares (keyed by the encoder's fingerprint
    and the image's content); this class keeps what is not an embedding.

    Parameters
    ----------
    root : str or os.PathLike
        Cache folder (created ``0700``, missing parents too, when missing).

    Attributes
    ----------
    counters : collections.Counter
        ``embeddings_computed`` / ``embeddings_reused`` (images, counted by the check as
        it reads the embedding cache), ``distances_computed`` / ``distances_reused``
        (distinct unordered image pairs), ``corrupt_files``. They prove what a run did: a
        re-run with other percentiles or bootstrap counts reports zero computed.

    Notes
    -----
    Appearance distances are stored once per unordered pair of image hashes per metric (a
    changed image is a new hash, so only its pairs are computed). A file that cannot be
    read, or whose identity differs from the expected one, is treated as empty with an
    :class:`~idaudit.exceptions.IdauditWarning` and overwritten.

    Examples
    --------
    >>> import numpy as np, tempfile
    >>> from idaudit.pipeline import PrivacyCache
    >>> cache = PrivacyCache(tempfile.mkdtemp())
    >>> metric = {"name": "toy"}
    >>> compute = lambda r, c: np.ones(len(r))
    >>> _ = cache.distances(metric, ["h1", "h2"], ["h1", "h2"], compute)
    >>> _ = cache.distances(metric, ["h1", "h3"], ["h2"], compute)
    >>> cache.counters["distances_computed"], cache.counters["distances_reused"]
    (2, 1)
    """

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = private_dir(root, name="root")
        self.counters: Counter[str] = Counter()

    def __repr__(self) -> str:
        return f"PrivacyCache({str(self.root)!r})"

    def _load(self, path: Path, identity: Mapping[str, Any], keys: Sequence[str]) -> Any:
        """Return the npz's arrays, or ``None`` (missing, unreadable or another identity)."""
        if not path.is_file():
            return None
        try:
            with np.load(path, allow_pickle=False) as data:
                arrays = {k: data[k] for k in (*keys, "identity")}
            if json.loads(str(arrays["identity"])) != json.loads(json.dumps(dict(identity))):
                raise ValueError("it was written for another model identity")
            return arrays
        except (OSError, ValueError, KeyError, zipfile.BadZipFile, EOFError) as exc:
            self.counters["corrupt_files"] += 1
            warnings.warn(
                f"cache file {path} cannot be used ({exc}); its entries are recomputed.",
                IdauditWarning,
                stacklevel=3,
            )
            return None

    # -- appearance distances --------------------------------------------------------------

    def appearance_path(self, identity: Mapping[str, Any]) -> Path:
        """Where the distances of one appearance metric live."""
        return self.root / "appearance" / f"{model_key(identity)}.npz"

    def distances(
        self,
        identity: Mapping[str, Any],
        rows: Sequence[str],
        cols: Sequence[str],
        compute: Callable[[npt.NDArray[np.intp], npt.NDArray[np.intp]], npt.NDArray[np.float64]],
    ) -> npt.NDArray[np.float64]:
        """Return the ``(len(rows), len(cols))`` distances between images, computing only new pairs.

        Parameters
        ----------
        identity : mapping
            The metric identity.
        rows, cols : sequence of str
            Image hashes.
        compute : callable
            ``compute(row_positions, col_positions)`` → the distances between
            ``rows[row_positions[k]]`` and ``cols[col_positions[k]]``, shape ``(n_pairs,)``.
            It is called at most once per request, with every missing pair in one list.

        Returns
        -------
        numpy.ndarray of float64

        Notes
        -----
        The metric is symmetric with zero self-distance: a pair is stored once, as the
        unordered pair of image hashes, and two images with the same hash are at distance 0
        (never computed). ``compute`` is asked for each distinct unordered pair that is not
        stored, exactly once, through one cell of the request that holds it; a symmetric
        request (``rows == cols``) thus computes one triangle, and a request that overlaps
        stored pairs computes only the others. ``distances_computed`` counts the pairs asked
        of ``compute``; ``distances_reused`` the other distinct pairs of the request.
        """
        path = self.appearance_path(identity)
        stored = self._load(path, identity, ("hashes", "i", "j", "values"))
        hashes: list[str] = [] if stored is None else [str(h) for h in stored["hashes"]]
        index = {h: k for k, h in enumerate(hashes)}
        for h in (*rows, *cols):
            if h not in index:
                index[h] = len(hashes)
                hashes.append(h)
        base = max(len(hashes), 1)  # a pair (x < y) of hash indices is the key x * base + y
        ri = np.array([index[h] for h in rows], dtype=np.int64)
        ci = np.array([index[h] for h in cols], dtype=np.int64)
        low = np.minimum(ri[:, None], ci[None, :])  # (n_rows, n_cols)
        high = np.maximum(ri[:, None], ci[None, :])
        cell_keys = low * base + high
        differ = (low != high).ravel()  # an image against itself: 0, never stored
        old_keys = np.zeros(0, np.int64)
        old_values = np.zeros(0, np.float64)
        if stored is not None:
            old_keys = stored["i"].astype(np.int64) * base + stored["j"].astype(np.int64)
            old_values = stored["values"].astype(np.float64)
            order = np.argsort(old_keys)
            old_keys, old_values = old_keys[order], old_values[order]
        flat = np.flatnonzero(differ)  # cells of distinct images, row-major
        requested, first = np.unique(cell_keys.ravel()[flat], return_index=True)
        missing = ~_sorted_contains(old_keys, requested)
        cells = flat[first[missing]]  # one cell per missing unordered pair
        new_values = np.zeros(0, np.float64)
        if cells.size:
            r, c = np.divmod(cells, ci.size)
            new_values = np.asarray(compute(r, c), dtype=np.float64).reshape(cells.size)
        keys = np.concatenate([old_keys, requested[missing]])
        values = np.concatenate([old_values, new_values])
        order = np.argsort(keys)
        keys, values = keys[order], values[order]
        self.counters["distances_computed"] += int(cells.size)
        self.counters["distances_reused"] += int(requested.size - cells.size)
        out = np.zeros(cell_keys.size)
        if flat.size:
            out[flat] = values[np.searchsorted(keys, cell_keys.ravel()[flat])]
        if cells.size:
            _savez(
                path,
                hashes=np.asarray(hashes, dtype=_HASH_DTYPE),
                i=keys // base,
                j=keys % base,
                values=values,
                identity=np.asarray(json.dumps(dict(identity), sort_keys=True)),
            )
        return out.reshape(ri.size, ci.size)


def _sorted_contains(
    haystack: npt.NDArray[np.int64], needles: npt.NDArray[np.int64]
) -> npt.NDArray[np.bool_]:
    """Whether each of ``needles`` is in the sorted ``haystack``."""
    if haystack.size == 0:
        return np.zeros(needles.size, dtype=bool)
    pos = np.minimum(np.searchsorted(haystack, needles), haystack.size - 1)
    found: npt.NDArray[np.bool_] = haystack[pos] == needles
    return found
