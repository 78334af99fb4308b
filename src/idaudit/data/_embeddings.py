"""``EmbeddingSet``: per-identity embeddings, filtered, L2-normalised and traceable."""

from __future__ import annotations

import hashlib
import os
import warnings
from collections.abc import Iterable
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd

from idaudit._validation import check_in_range, check_integer
from idaudit.data import _readers
from idaudit.data._rows import (
    DROP_REASONS,
    REASON_CODE,
    as_float_matrix,
    as_label_array,
    normalise_label_dtype,
)
from idaudit.exceptions import IdauditWarning, InvalidInputError

__all__ = ["DROP_REASONS", "EmbeddingSet"]

#: File suffix (lower case) -> the format :meth:`EmbeddingSet.read` reads it as.
READ_SUFFIXES: dict[str, str] = {
    ".csv": "csv",
    ".npz": "npz",
    ".parquet": "parquet",
    ".pq": "parquet",
}


class EmbeddingSet:
    r"""Embeddings grouped by identity, with the paper's row filtering and provenance.

    Rows with a missing label or value, non-finite values, or (when normalising) an L2 norm at
    most ``min_norm`` are dropped and counted by reason; the rest are L2-normalised onto the
    unit sphere (seed 000, Section 4.1). Exact duplicate rows are kept and counted; see
    :meth:`drop_duplicates` for data whose copies are not separate draws.

    Parameters
    ----------
    embeddings : array_like, shape (n_rows, dim)
        One embedding per row. Converted to float64.
    labels : array_like, shape (n_rows,)
        The identity of each row: strings or integers (mutually orderable). ``None`` or NaN
        marks a missing label; such rows are dropped as ``"missing"``.
    normalize : bool, default True
        L2-normalise every retained row. ``False`` keeps the raw vectors (e.g. for synthetic
        benchmarks whose scale matters); the zero-norm rule then does not apply, while rows with
        missing or non-finite values are still dropped.
    min_norm : float, default 1e-6
        With ``normalize=True``, rows whose L2 norm is ``<= min_norm`` are dropped as
        ``"zero_norm"``. Must be >= 0.

    Attributes
    ----------
    embeddings : numpy.ndarray of float64, shape (n, dim)
        Retained rows, in input order (read-only).
    labels : numpy.ndarray, shape (n,)
        Identity of each retained row (read-only).
    identities : numpy.ndarray, shape (n_identities,)
        Sorted unique labels.
    counts : dict
        Label (a Python scalar) -> number of retained rows.
    dim : int
        Embedding dimension.
    n_dropped\_ : int
        Rows dropped while building this set.
    dropped\_ : dict of str to int
        Dropped rows by reason: ``"missing"`` (missing label or NaN/empty value),
        ``"unparseable"`` (a text or list vector a reader could not turn into ``dim``
        numbers), ``"non_finite"`` (±inf), ``"zero_norm"`` (norm <= ``min_norm``).
    n_duplicates\_ : int
        Retained rows identical, as stored (after L2 normalisation when ``normalize``), to an
        earlier retained row of the same identity — rows the audits cannot tell apart. They
        are kept, as in seed 000, Section 8.
    sha256 : str
        SHA-256 of the input: the file's bytes for the readers; for arrays, of their float64
        bytes and the labels (see Notes). Subsets and splits inherit it.
    source : str or None
        The file the set was read from, if any.

    Raises
    ------
    InvalidInputError
        If ``embeddings`` is not 2-D or is empty, the lengths differ, ``min_norm`` is negative,
        or no row survives the filtering.
    TypeError
        If the labels are not mutually orderable (e.g. a mix of strings and integers).

    Warns
    -----
    IdauditWarning
        When any row is dropped (with the counts by reason).

    Notes
    -----
    The rules are applied in the order of :data:`DROP_REASONS`; a row is counted once. With
    :math:`x` a retained row, the stored vector is :math:`x / \lVert x \rVert_2`. A set may
    hold identities with a single row; the auditors check their own minimum sizes.

    For arrays, ``sha256`` hashes the bytes ``b"idaudit-embeddings-v1"``, the shape as text,
    the C-ordered little-endian float64 values *as given* (before any filtering), and the
    newline-joined ``repr`` of each label as a Python scalar, so ``1`` and ``"1"`` differ.

    References
    ----------
    .. [1] Seed 000 ("Picture the Epsilon"), Section 4.1: rows with a missing generated
       embedding or norm at most 1e-6 are removed, then every retained vector is L2-normalised.

    Examples
    --------
    >>> import numpy as np
    >>> from idaudit.data import EmbeddingSet
    >>> rng = np.random.default_rng(0)
    >>> es = EmbeddingSet(rng.normal(size=(6, 4)), ["a", "a", "a", "b", "b", "b"])
    >>> es.identities.tolist(), es.counts, es.dim
    (['a', 'b'], {'a': 3, 'b': 3}, 4)
    >>> bool(np.allclose(np.linalg.norm(es.get("a"), axis=1), 1.0))
    True
    """

    def __init__(
        self,
        embeddings: npt.ArrayLike,
        labels: npt.ArrayLike,
        *,
        normalize: bool = True,
        min_norm: float = 1e-6,
    ) -> None:
        x = as_float_matrix(embeddings)
        lab = as_label_array(labels, x.shape[0])
        self._load(
            x,
            lab,
            reasons=np.zeros(x.shape[0], dtype=np.int8),
            normalize=normalize,
            min_norm=min_norm,
            sha256=_hash_arrays(x, lab),
            source=None,
        )

    # ------------------------------------------------------------------ readers
    @classmethod
    def from_csv(
        cls,
        path: str | os.PathLike[str],
        *,
        label_column: str | None = None,
        vector_column: str | list[str] | None = None,
        normalize: bool = True,
        min_norm: float = 1e-6,
    ) -> EmbeddingSet:
        r"""Read embeddings from a CSV file with a header row.

        Two layouts are recognised: a label column plus ``dim`` numeric columns, or a label
        column plus one column holding each vector as text (``"[0.1, 0.2, ...]"``,
        ``"0.1,0.2,..."`` or whitespace-separated, brackets optional).

        Parameters
        ----------
        path : str or os.PathLike
            The CSV file.
        label_column : str, optional
            Column holding the identity labels. Default: the first column named ``"label"``,
            ``"identity"`` or ``"id"``, else the first column.
        vector_column : str or list of str, optional
            One column holding text vectors, or the list of numeric columns. Default: every
            other column; if that is a single text column it is parsed as text vectors,
            otherwise all of them must be numeric.
        normalize, min_norm
            As for :class:`EmbeddingSet`.

        Returns
        -------
        EmbeddingSet
            ``sha256`` is the hash of the file's bytes; ``source`` its path.

        Notes
        -----
        Empty cells, missing labels and NaN values drop the row as ``"missing"``. A non-empty
        cell of a numeric column that is not a number, or a text vector that does not parse or
        whose length differs from the most common length in the file, drops the row as
        ``"unparseable"``. The remaining rules are those of :class:`EmbeddingSet`.

        The label column is read as text, so labels from a CSV file are always strings:
        ``001``, ``01`` and ``1`` are three identities, and ``NA``, ``None``, ``nan`` or
        ``True`` are labels like any other; only an empty label cell is missing. To use
        integer labels, convert them (e.g. build an :class:`EmbeddingSet` from the arrays
        with ``labels.astype(int)``). A file whose column names other than the label column
        all parse as numbers is taken to have no header row and refused. Without
        ``vector_column``, a column with no header name (a row index written by
        ``DataFrame.to_csv``) and a column of true/false values are refused rather than read
        as coordinates; rows with more fields than the header are refused; spaces after a
        delimiter are ignored.

        Examples
        --------
        >>> import pathlib, tempfile
        >>> from idaudit.data import EmbeddingSet
        >>> p = pathlib.Path(tempfile.mkdtemp()) / "emb.csv"
        >>> _ = p.write_text('identity,embedding\nann,"[3, 4]"\nann,"[0, 2]"\nbob,"[1, 0]"\n')
        >>> es = EmbeddingSet.from_csv(p)
        >>> es.get("ann").tolist()
        [[0.6, 0.8], [0.0, 1.0]]
        """
        parsed, raw_hash = _readers.read_csv(
            path, label_column=label_column, vector_column=vector_column
        )
        return cls._from_parsed(parsed, raw_hash, os.fspath(path), normalize, min_norm)

    @classmethod
    def from_npz(
        cls,
        path: str | os.PathLike[str],
        *,
        embeddings_key: str = "embeddings",
        labels_key: str = "labels",
        normalize: bool = True,
        min_norm: float = 1e-6,
    ) -> EmbeddingSet:
        """Read embeddings from a NumPy ``.npz`` archive (never unpickles).

        Parameters
        ----------
        path : str or os.PathLike
            The archive, as written by :func:`numpy.savez`.
        embeddings_key : str, default "embeddings"
            Name of the (n_rows, dim) array.
        labels_key : str, default "labels"
            Name of the (n_rows,) label array (strings or integers, not Python objects).
        normalize, min_norm
            As for :class:`EmbeddingSet`.

        Returns
        -------
        EmbeddingSet
            ``sha256`` is the hash of the file's bytes; ``source`` its path.

        Examples
        --------
        >>> import pathlib, tempfile
        >>> import numpy as np
        >>> from idaudit.data import EmbeddingSet
        >>> p = pathlib.Path(tempfile.mkdtemp()) / "emb.npz"
        >>> np.savez(p, embeddings=np.eye(3), labels=np.array(["a", "a", "b"]))
        >>> EmbeddingSet.from_npz(p).counts
        {'a': 2, 'b': 1}
        """
        parsed, raw_hash = _readers.read_npz(
            path, embeddings_key=embeddings_key, labels_key=labels_key
        )
        return cls._from_parsed(parsed, raw_hash, os.fspath(path), normalize, min_norm)

    @classmethod
    def from_parquet(
        cls,
        path: str | os.PathLike[str],
        *,
        label_column: str | None = None,
        vector_column: str | list[str] | None = None,
        normalize: bool = True,
        min_norm: float = 1e-6,
    ) -> EmbeddingSet:
        """Read embeddings from a Parquet file (needs ``pyarrow``: ``pip install "idaudit[io]"``).

        Parameters
        ----------
        path : str or os.PathLike
            The Parquet file.
        label_column : str, optional
            As for :meth:`from_csv`.
        vector_column : str or list of str, optional
            One list column (``list<float>``) or text column holding the vectors, or the list
            of numeric columns. Default as for :meth:`from_csv`, where a single non-label list
            column is read as the vectors.
        normalize, min_norm
            As for :class:`EmbeddingSet`.

        Returns
        -------
        EmbeddingSet
            ``sha256`` is the hash of the file's bytes; ``source`` its path.

        Notes
        -----
        A null list counts as ``"missing"``; a list whose length differs from the most common
        length counts as ``"unparseable"``.
        """
        parsed, raw_hash = _readers.read_parquet(
            path, label_column=label_column, vector_column=vector_column
        )
        return cls._from_parsed(parsed, raw_hash, os.fspath(path), normalize, min_norm)

    @classmethod
    def read(
        cls,
        path: str | os.PathLike[str],
        *,
        label_column: str | None = None,
        vector_column: str | list[str] | None = None,
        embeddings_key: str = "embeddings",
        labels_key: str = "labels",
        normalize: bool = True,
        min_norm: float = 1e-6,
    ) -> EmbeddingSet:
        """Read embeddings from a file, choosing the reader by its suffix.

        ``.csv`` is read by :meth:`from_csv`, ``.npz`` by :meth:`from_npz`, ``.parquet`` and
        ``.pq`` by :meth:`from_parquet` (suffixes in any case).

        Parameters
        ----------
        path : str or os.PathLike
            The file.
        label_column, vector_column : optional
            As for :meth:`from_csv` (CSV and Parquet only; ignored for ``.npz``).
        embeddings_key, labels_key : str
            As for :meth:`from_npz` (``.npz`` only; ignored otherwise).
        normalize, min_norm
            As for :class:`EmbeddingSet`.

        Returns
        -------
        EmbeddingSet
            As the reader returns it.

        Raises
        ------
        InvalidInputError
            If the suffix is none of the above.

        Examples
        --------
        >>> import pathlib, tempfile
        >>> import numpy as np
        >>> from idaudit.data import EmbeddingSet
        >>> p = pathlib.Path(tempfile.mkdtemp()) / "emb.NPZ"
        >>> with open(p, "wb") as fh:
        ...     np.savez(fh, embeddings=np.eye(3), labels=np.array(["a", "a", "b"]))
        >>> EmbeddingSet.read(p).counts
        {'a': 2, 'b': 1}
        """
        suffix = os.path.splitext(os.fspath(path))[1].lower()
        kind = READ_SUFFIXES.get(suffix)
        if kind is None:
            raise InvalidInputError(
                "`path` must end in .csv, .npz, .parquet or .pq; got "
                f"{os.path.basename(os.fspath(path))!r}."
            )
        if kind == "npz":
            parsed, raw_hash = _readers.read_npz(
                path, embeddings_key=embeddings_key, labels_key=labels_key
            )
        else:
            reader = _readers.read_csv if kind == "csv" else _readers.read_parquet
            parsed, raw_hash = reader(path, label_column=label_column, vector_column=vector_column)
        return cls._from_parsed(parsed, raw_hash, os.fspath(path), normalize, min_norm)

    @classmethod
    def _from_parsed(
        cls,
        parsed: tuple[npt.NDArray[np.float64], npt.NDArray[Any], npt.NDArray[np.int8]],
        raw_hash: str,
        source: str,
        normalize: bool,
        min_norm: float,
    ) -> EmbeddingSet:
        x, labels, reasons = parsed
        self = cls.__new__(cls)
        self._load(
            x,
            labels,
            reasons=reasons,
            normalize=normalize,
            min_norm=min_norm,
            sha256=raw_hash,
            source=source,
            stacklevel=4,
        )
        return self

    # ------------------------------------------------------------------ construction
    def _load(
        self,
        x: npt.NDArray[np.float64],
        labels: npt.NDArray[Any],
        *,
        reasons: npt.NDArray[np.int8],
        normalize: bool,
        min_norm: float,
        sha256: str,
        source: str | None,
        stacklevel: int = 3,
    ) -> None:
        if not isinstance(normalize, (bool, np.bool_)):
            raise TypeError(f"`normalize` must be a bool; got {type(normalize).__name__}.")
        min_norm = check_in_range(min_norm, "min_norm", 0.0, None, closed="left")
        n_in = x.shape[0]
        reasons = reasons.copy()
        # rules in DROP_REASONS order; a row keeps the first reason it gets
        label_missing = np.asarray(pd.isna(labels), dtype=bool)
        _mark(reasons, label_missing | np.isnan(x).any(axis=1), "missing")
        _mark(reasons, ~np.isfinite(x).all(axis=1), "non_finite")
        norms = np.zeros(n_in)
        ok = reasons == 0
        norms[ok] = _row_norms(x[ok])
        if normalize:
            _mark(reasons, norms <= min_norm, "zero_norm")
        keep = reasons == 0
        counts = np.bincount(reasons, minlength=len(DROP_REASONS) + 1)
        dropped = {r: int(counts[REASON_CODE[r]]) for r in DROP_REASONS}
        n_dropped = int(n_in - keep.sum())
        if not keep.any():
            raise InvalidInputError(
                f"no rows left after dropping {n_dropped} of {n_in}: {_fmt_reasons(dropped)}."
            )
        if n_dropped:
            warnings.warn(
                f"EmbeddingSet dropped {n_dropped} of {n_in} rows ({_fmt_reasons(dropped)}).",
                IdauditWarning,
                stacklevel=stacklevel,
            )
        raw = x[keep]
        lab = normalise_label_dtype(labels[keep])
        identities, codes = _unique_labels(lab)
        vectors = raw / norms[keep][:, None] if normalize else raw.copy()
        self._setup(
            vectors,
            lab,
            identities,
            codes,
            dup_group=_duplicate_groups(vectors, codes),
            normalize=bool(normalize),
            min_norm=min_norm,
            dropped=dropped,
            sha256=sha256,
            source=source,
        )

    def _setup(
        self,
        vectors: npt.NDArray[np.float64],
        labels: npt.NDArray[Any],
        identities: npt.NDArray[Any],
        codes: npt.NDArray[np.intp],
        *,
        dup_group: npt.NDArray[np.intp],
        normalize: bool,
        min_norm: float,
        dropped: dict[str, int],
        sha256: str,
        source: str | None,
    ) -> None:
        for arr in (vectors, labels, identities):
            arr.flags.writeable = False
        self._embeddings = vectors
        self._labels = labels
        self._identities = identities
        self._codes = codes
        self._dup_group = dup_group
        order = np.argsort(codes, kind="stable")
        bounds = np.searchsorted(codes[order], np.arange(len(identities) + 1))
        keys = [_py(v) for v in identities.tolist()]
        self._rows = {k: order[bounds[i] : bounds[i + 1]] for i, k in enumerate(keys)}
        self._counts = {k: len(v) for k, v in self._rows.items()}
        self.normalize = normalize
        self.min_norm = min_norm
        self.dropped_ = dict(dropped)
        self.n_dropped_ = int(sum(dropped.values()))
        self.n_duplicates_ = int(len(dup_group) - len(np.unique(dup_group)))
        self.sha256 = sha256
        self.source = source

    def _take(self, rows: npt.NDArray[np.intp]) -> EmbeddingSet:
        """Build a new set from ``rows`` (positions), inheriting provenance."""
        rows = np.sort(np.asarray(rows, dtype=np.intp))
        lab = self._labels[rows]
        identities, codes = _unique_labels(lab)
        new = type(self).__new__(type(self))
        new._setup(
            self._embeddings[rows].copy(),
            lab.copy(),
            identities,
            codes,
            dup_group=self._dup_group[rows],
            normalize=self.normalize,
            min_norm=self.min_norm,
            dropped=dict.fromkeys(DROP_REASONS, 0),
            sha256=self.sha256,
            source=self.source,
        )
        return new

    # ------------------------------------------------------------------ access
    @property
    def embeddings(self) -> npt.NDArray[np.float64]:
        """Retained rows, shape (n, dim), float64, read-only."""
        return self._embeddings

    @property
    def labels(self) -> npt.NDArray[Any]:
        """Identity of each retained row, shape (n,), read-only."""
        return self._labels

    @property
    def identities(self) -> npt.NDArray[Any]:
        """Sorted unique labels, shape (n_identities,), read-only."""
        return self._identities

    @property
    def n_identities(self) -> int:
        """Number of identities."""
        return len(self._identities)

    @property
    def counts(self) -> dict[Any, int]:
        """Label (Python scalar) -> number of retained rows, in sorted label order."""
        return dict(self._counts)  # a copy: the set itself is immutable

    @property
    def dim(self) -> int:
        """Embedding dimension."""
        return int(self._embeddings.shape[1])

    def __len__(self) -> int:
        return int(self._embeddings.shape[0])

    def __contains__(self, label: object) -> bool:
        try:
            return _py(label) in self._rows
        except TypeError:  # unhashable
            return False

    def get(self, label: Any) -> npt.NDArray[np.float64]:
        """Return the rows of one identity.

        Parameters
        ----------
        label : str or int
            An identity of this set (a Python or NumPy scalar).

        Returns
        -------
        numpy.ndarray of float64, shape (n_id, dim)
            A copy of the identity's rows, in input order.

        Raises
        ------
        InvalidInputError
            If ``label`` is not an identity of this set (the message names it).
        """
        return self._embeddings[self._rows_of(label)]

    def subset(self, identities: Iterable[Any]) -> EmbeddingSet:
        """Return a new set restricted to some identities.

        Parameters
        ----------
        identities : iterable of labels
            Identities to keep (each must be in this set).

        Returns
        -------
        EmbeddingSet
            Rows of those identities in input order. ``sha256`` and ``source`` are inherited;
            ``dropped_`` is all zeros (nothing is dropped by subsetting).

        Raises
        ------
        InvalidInputError
            If an identity is unknown, or ``identities`` is empty.
        """
        wanted = list(identities) if not isinstance(identities, (str, bytes)) else [identities]
        if not wanted:
            raise InvalidInputError("`identities` must name at least one identity; got none.")
        rows = np.concatenate([self._rows_of(label) for label in dict.fromkeys(map(_py, wanted))])
        return self._take(rows)

    def drop_duplicates(self) -> EmbeddingSet:
        """Return a new set with one row per group of exact duplicates (its first row).

        Use it when copies are **repeated records of one draw** — the same generated image
        listed or encoded twice, files merged with overlapping rows — so that each draw counts
        once. Do not use it when the mechanism itself repeats outputs (a quantised encoder, a
        generator that falls back to one output, :class:`~idaudit.mechanisms.EncodedGenerator`
        redrawing a source image through a deterministic generator): those repeats are
        separate iid draws, and removing them changes the distribution being audited.

        Returns
        -------
        EmbeddingSet
            The rows counted in ``n_duplicates_`` removed, the first row of each group kept,
            in input order; ``n_duplicates_`` is 0. ``sha256`` and ``source`` are inherited;
            ``dropped_`` is all zeros.

        Examples
        --------
        >>> from idaudit.data import EmbeddingSet
        >>> es = EmbeddingSet([[1, 0], [2, 0], [0, 1], [0, 3], [1, 1]], list("aabbb"))
        >>> es.n_duplicates_, es.drop_duplicates().counts
        (2, {'a': 1, 'b': 2})
        """
        _, first = np.unique(self._dup_group, return_index=True)
        return self._take(first)

    def filter(self, *, min_rows: int) -> tuple[EmbeddingSet, dict[Any, int]]:
        """Keep the identities with at least ``min_rows`` rows.

        Parameters
        ----------
        min_rows : int
            Fewest rows an identity must have to be kept (>= 1).

        Returns
        -------
        kept : EmbeddingSet
            The identities with at least ``min_rows`` rows (``self`` itself when none is
            dropped; otherwise as :meth:`subset` builds it).
        dropped : dict
            Label (a Python scalar) -> its number of rows, for every identity dropped, in
            sorted label order; empty when none is.

        Raises
        ------
        InvalidInputError
            If ``min_rows`` is not an integer >= 1, or no identity has ``min_rows`` rows.

        Examples
        --------
        >>> import numpy as np
        >>> from idaudit.data import EmbeddingSet
        >>> es = EmbeddingSet(np.eye(5), ["a", "a", "a", "b", "c"])
        >>> kept, dropped = es.filter(min_rows=2)
        >>> kept.counts, dropped
        ({'a': 3}, {'b': 1, 'c': 1})
        """
        min_rows = check_integer(min_rows, "min_rows", minimum=1)
        dropped = {label: n for label, n in self._counts.items() if n < min_rows}
        if not dropped:
            return self, dropped
        if len(dropped) == len(self._counts):
            raise InvalidInputError(
                f"`min_rows` {min_rows} leaves none of the {len(self._counts)} identities "
                f"(the largest has {max(self._counts.values())} rows)."
            )
        return self.subset(label for label in self._counts if label not in dropped), dropped

    def _rows_of(self, label: Any) -> npt.NDArray[np.intp]:
        try:
            return self._rows[_py(label)]
        except (KeyError, TypeError):
            shown = ", ".join(repr(k) for k in list(self._rows)[:3])
            more = ", ..." if len(self._rows) > 3 else ""
            raise InvalidInputError(
                f"identity {label!r} is not in this EmbeddingSet "
                f"({len(self._rows)} identities: {shown}{more})."
            ) from None

    def __repr__(self) -> str:
        dropped = (
            f"dropped={self.n_dropped_} ({_fmt_reasons(self.dropped_)})"
            if self.n_dropped_
            else "dropped=0"
        )
        src = f", source={os.path.basename(self.source)!r}" if self.source else ""
        return (
            f"EmbeddingSet(n={len(self)}, identities={self.n_identities}, dim={self.dim}, "
            f"normalized={self.normalize}, {dropped}, duplicates={self.n_duplicates_}, "
            f"sha256={self.sha256[:12]}…{src})"
        )


# ---------------------------------------------------------------------- helpers
def _unique_labels(lab: npt.NDArray[Any]) -> tuple[npt.NDArray[Any], npt.NDArray[np.intp]]:
    try:
        identities, codes = np.unique(lab, return_inverse=True)
    except TypeError as exc:
        kinds = sorted({type(v).__name__ for v in lab.tolist()})
        raise TypeError(
            f"`labels` must be mutually orderable (all strings or all numbers); got {kinds}."
        ) from exc
    return identities, codes.astype(np.intp).ravel()


def _mark(reasons: npt.NDArray[np.int8], mask: npt.ArrayLike, reason: str) -> None:
    reasons[(reasons == 0) & np.asarray(mask, dtype=bool)] = REASON_CODE[reason]


def _row_norms(x: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """L2 norms of finite rows, rescaling rows whose squared norm would overflow."""
    with np.errstate(over="ignore"):
        norms: npt.NDArray[np.float64] = np.sqrt(np.einsum("ij,ij->i", x, x))
    big = np.isinf(norms)
    if big.any():
        scale = np.abs(x[big]).max(axis=1)
        norms[big] = scale * np.linalg.norm(x[big] / scale[:, None], axis=1)
    return norms


def _duplicate_groups(
    vectors: npt.NDArray[np.float64], codes: npt.NDArray[np.intp]
) -> npt.NDArray[np.intp]:
    """Group id per row: rows share one iff same identity and identical values (0.0 == -0.0).

    ``vectors`` are the rows as stored (normalised when the set normalises), so two rows
    pointing the same way are one group when they normalise to the same vector.

    Rows are keyed by an exact integer hash of their bits (wrapping uint64 arithmetic) and
    their identity; rows whose key repeats are then compared bit for bit, with a full row sort
    as the fallback in the (astronomically unlikely) event of a hash collision.
    """
    bits = np.ascontiguousarray(vectors + 0.0).view(np.uint64)  # (n, d); + 0.0 folds -0.0 into 0.0
    mult = np.random.default_rng(0x1DA0D17).integers(1, 2**63, size=bits.shape[1], dtype=np.uint64)
    key = bits @ (mult | np.uint64(1))  # (n,) odd multipliers, wraps modulo 2**64
    key ^= codes.astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15)
    _, first, group = np.unique(key, return_index=True, return_inverse=True)
    group = group.ravel()
    rep = first[group]  # (n,) first row with the same key
    cand = np.flatnonzero(rep != np.arange(len(rep)))
    if (codes[cand] == codes[rep[cand]]).all() and (bits[cand] == bits[rep[cand]]).all():
        out: npt.NDArray[np.intp] = group.astype(np.intp)
        return out
    keyed = np.ascontiguousarray(np.column_stack([codes.astype(np.uint64), bits]))
    rows = keyed.view(np.dtype((np.void, keyed.dtype.itemsize * keyed.shape[1]))).ravel()
    _, exact = np.unique(rows, return_inverse=True)
    return exact.astype(np.intp).ravel()


def _hash_arrays(x: npt.NDArray[np.float64], labels: npt.NDArray[Any]) -> str:
    h = hashlib.sha256(b"idaudit-embeddings-v1")
    h.update(repr(tuple(x.shape)).encode())
    h.update(np.ascontiguousarray(x, dtype="<f8").tobytes())
    h.update("\n".join(repr(_py(v)) for v in labels.tolist()).encode())
    return h.hexdigest()


def _py(value: Any) -> Any:
    """NumPy scalar -> Python scalar (labels are dictionary keys as Python scalars)."""
    return value.item() if isinstance(value, np.generic) else value


def _fmt_reasons(dropped: dict[str, int]) -> str:
    parts = [f"{r}: {c}" for r, c in dropped.items() if c]
    return ", ".join(parts) if parts else "none"
