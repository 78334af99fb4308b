"""``EmbeddingSet``: per-identity embeddings, filtered, L2-normalised and traceable."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from idaudit._validation import check_integer
from idaudit.data import _readers
from idaudit.data._duplicates import check_rtol, duplicate_groups, near_groups
from idaudit.data._rows import DROP_REASONS, as_float_matrix, as_label_array, as_outcome_array
from idaudit.data._store import (
    FAILURES,
    IdentityRows,
    fmt_reasons,
    py_scalar,
    tally,
    unique_labels,
)
from idaudit.exceptions import InvalidInputError

__all__ = ["DROP_REASONS", "FAILURES", "EmbeddingSet"]

#: File suffix (lower case) -> the format :meth:`EmbeddingSet.read` reads it as.
READ_SUFFIXES: dict[str, str] = {
    ".csv": "csv",
    ".npz": "npz",
    ".parquet": "parquet",
    ".pq": "parquet",
}


class EmbeddingSet(IdentityRows):
    r"""Embeddings grouped by identity, with failed outputs, row filtering and provenance.

    Every row is one output of the pipeline for its identity. A row *fails* when its
    ``outcomes`` entry is a failure code (``"no_face"``, ``"generator_error"``, ...) or its
    vector breaks a row rule: missing or NaN values, a text vector a reader could not parse,
    ±inf, or (when normalising) an L2 norm at most ``min_norm``. The other rows *succeed* and
    are L2-normalised onto the unit sphere (seed 000, Section 4.1). With ``failures="keep"``
    (the default) a failed row stays an output of its identity — a point the certificates count
    — while :attr:`embeddings`, :meth:`get` and :attr:`counts` hold the successful rows that
    diagnostics and sample estimates compute on; with ``failures="drop"`` it is dropped and
    counted, as seed 000 does. Rows without a label cannot be attributed to an identity and are
    always dropped and counted. Exact duplicate rows are kept and counted; see
    :meth:`drop_duplicates` for data whose copies are not separate draws.

    Parameters
    ----------
    embeddings : array_like, shape (n_rows, dim)
        One embedding per row. Converted to float64. A failed row's vector may hold anything
        (NaN, say).
    labels : array_like, shape (n_rows,)
        The identity of each row: strings or integers (mutually orderable). ``None`` or NaN
        marks a missing label; such rows are dropped as ``"missing"``.
    normalize : bool, default True
        L2-normalise every successful row. ``False`` keeps the raw vectors (e.g. for synthetic
        benchmarks whose scale matters); the zero-norm rule then does not apply, while rows with
        missing or non-finite values still fail.
    min_norm : float, default 1e-6
        With ``normalize=True``, rows whose L2 norm is ``<= min_norm`` fail as
        ``"zero_norm"``. Must be >= 0.
    failures : {"keep", "drop"}, default "keep"
        What happens to a failed row of a known identity. ``"keep"``: it is a *failed output*
        of its identity — left out of :attr:`embeddings`, :attr:`labels`, :meth:`get`,
        :attr:`counts` and :attr:`identities`, recorded in :attr:`failed_counts`,
        :attr:`n_failed_`, :attr:`failure_reasons_` and :meth:`failure_codes`, and part of
        :meth:`as_outputs`. ``"drop"``: it is dropped and counted in :attr:`dropped_` by
        reason, the behaviour before failures were kept; the set then certifies the mechanism
        *conditioned on success* (see Notes).
    outcomes : array_like of str, shape (n_rows,), optional
        What the pipeline reported for each row: ``"ok"``, or a failure code (any other
        non-empty string, e.g. ``"no_face"``, ``"error"``, ``"bad_output"``,
        ``"unreadable"``). A row whose outcome is not ``"ok"`` fails with that code whatever
        its vector holds. Default: every row ``"ok"`` (only the row rules make rows fail).

    Attributes
    ----------
    embeddings : numpy.ndarray of float64, shape (n, dim)
        Successful rows, in input order (read-only).
    labels : numpy.ndarray, shape (n,)
        Identity of each successful row (read-only).
    identities : numpy.ndarray, shape (n_identities,)
        Sorted unique labels of the successful rows. An identity whose every row failed is not
        among them (it is in :attr:`failed_counts` and :meth:`as_outputs`).
    counts : dict
        Label (a Python scalar) -> number of successful rows.
    failed_counts : dict
        Label (a Python scalar) -> number of failed rows, for every identity with any output
        (successful or failed), in sorted label order; 0 where none failed, and 0 everywhere
        with ``failures="drop"``.
    failures : str
        The ``failures`` setting, ``"keep"`` or ``"drop"``.
    dim : int
        Embedding dimension.
    n_failed\_ : int
        Failed rows kept as failed outputs (0 with ``failures="drop"``).
    failure_reasons\_ : dict of str to int
        Failed rows kept, by code: every one of :data:`DROP_REASONS` (0 if none), then each
        outcome code that occurs, in sorted order.
    n_dropped\_ : int
        Rows removed entirely while building this set: those with a missing label, and with
        ``failures="drop"`` every failed row.
    dropped\_ : dict of str to int
        Removed rows by reason: ``"missing"`` (missing label or NaN/empty value),
        ``"unparseable"`` (a text or list vector a reader could not turn into ``dim``
        numbers), ``"non_finite"`` (±inf), ``"zero_norm"`` (norm <= ``min_norm``), and with
        ``failures="drop"`` each outcome code that removed a row (e.g. ``"no_face"``), after
        those four, in sorted order.
    n_duplicates\_ : int
        Successful rows identical, as stored (after L2 normalisation when ``normalize``), to an
        earlier successful row of the same identity — rows the audits cannot tell apart. They
        are kept, as in seed 000, Section 8.
    sha256 : str
        SHA-256 of the input: the file's bytes for the readers; for arrays, of their float64
        bytes, the labels and any ``outcomes`` (see Notes). Subsets and splits inherit it.
    source : str or None
        The file the set was read from, if any.

    Raises
    ------
    InvalidInputError
        If ``embeddings`` is not 2-D or is empty, the lengths differ, ``min_norm`` is negative,
        ``failures`` is not ``"keep"`` or ``"drop"``, ``outcomes`` is not one non-empty
        string per row, or no row succeeds.
    TypeError
        If the labels are not mutually orderable (e.g. a mix of strings and integers; with
        ``failures="keep"`` the failed rows' labels count too), or ``failures`` is not a str.

    Warns
    -----
    IdauditWarning
        When any row is dropped (with the counts by reason), and, with ``failures="keep"``,
        when any row failed (with the counts by code).

    See Also
    --------
    idaudit.data.split_identities : splits the successful rows; split :meth:`as_outputs` to
        split every output.

    Notes
    -----
    **What each setting certifies.** Let :math:`M(id)` be the pipeline's output for an
    identity, a point of :math:`\mathbb{R}^{dim}` or a failure :math:`\bot`. A failure is an
    observation: if identity A's pipeline fails with probability :math:`p_A` and B's with
    :math:`p_B \ne p_A`, the failure itself tells them apart: pure DP needs
    :math:`\varepsilon \ge \lvert\ln(p_A / p_B)\rvert`. ``failures="keep"`` records every
    output, so a certificate built on :meth:`as_outputs` bounds the ε of :math:`M` itself,
    failures included. ``failures="drop"`` keeps the successful rows only: it describes
    :math:`M(id) \mid M(id) \ne \bot`, the mechanism *conditioned on success*. Conditioning on
    the output is not post-processing, so that ε can be larger or smaller than :math:`M`'s; it
    is the reading of seed 000, Section 4.1. Either way the diagnostics and sample estimates
    that read :attr:`embeddings` compute on the successful rows, conditional on success, and
    :attr:`failed_counts` gives the per-identity failure rates to report beside them.

    **Row rules.** A row's outcome comes first: a missing label drops it (whatever else is
    wrong, it is counted under the first row rule it breaks); then an ``outcomes`` entry other
    than ``"ok"`` makes it fail with that code; then the rules of :data:`DROP_REASONS`, in that
    order, make it fail with the first rule it breaks. A row counts once. With :math:`x` a
    successful row, the stored vector is :math:`x / \lVert x \rVert_2`. A set may hold
    identities with a single row; the auditors check their own minimum sizes.

    **Derived sets.** :meth:`subset`, :meth:`filter` and :meth:`drop_duplicates` carry the
    failed rows of the identities they keep (:meth:`filter` counts successful rows);
    :func:`~idaudit.data.split_identities` splits the successful rows only and carries no
    failed row into either part (split :meth:`as_outputs` to split every output).

    **Hash.** For arrays, ``sha256`` hashes the bytes ``b"idaudit-embeddings-v1"``, the shape
    as text, the C-ordered little-endian float64 values *as given* (before any filtering), and
    the newline-joined ``repr`` of each label as a Python scalar, so ``1`` and ``"1"`` differ.
    When ``outcomes`` is given, the bytes ``b"\x00outcomes\x00"`` and the newline-joined
    outcome strings (UTF-8) follow; without it the hash is that of the three parts alone.

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

    A failed output (no face found in ``b``'s second image) is kept and counted:

    >>> import warnings
    >>> x = [[3.0, 4.0], [0.0, 1.0], [1.0, 0.0], [np.nan, np.nan]]
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     es = EmbeddingSet(x, ["a", "a", "b", "b"], outcomes=["ok", "ok", "ok", "no_face"])
    >>> print(caught[0].message)  # doctest: +NORMALIZE_WHITESPACE
    EmbeddingSet: 1 of 4 rows failed (no_face: 1); they are kept as failed outputs
    (certificates count them; diagnostics compute on the 3 successful rows).
    >>> es.counts, es.failed_counts, es.n_outputs("b"), es.failure_codes("b").tolist()
    ({'a': 2, 'b': 1}, {'a': 0, 'b': 1}, 2, ['no_face'])
    >>> es.as_outputs().get("b").tolist()  # [x, 0] for a success, [0, ..., 0, 1] for a failure
    [[1.0, 0.0, 0.0], [0.0, 0.0, 1.0]]
    """

    def __init__(
        self,
        embeddings: npt.ArrayLike,
        labels: npt.ArrayLike,
        *,
        normalize: bool = True,
        min_norm: float = 1e-6,
        failures: Literal["keep", "drop"] = "keep",
        outcomes: npt.ArrayLike | None = None,
    ) -> None:
        x = as_float_matrix(embeddings)
        lab = as_label_array(labels, x.shape[0])
        out = None if outcomes is None else as_outcome_array(outcomes, x.shape[0])
        self._load(
            x,
            lab,
            reasons=np.zeros(x.shape[0], dtype=np.int8),
            outcomes=out,
            normalize=normalize,
            min_norm=min_norm,
            failures=failures,
            sha256=_hash_arrays(x, lab, out),
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
        failures: Literal["keep", "drop"] = "keep",
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
            ``"identity"`` or ``"id"``; else the one column holding text (not text vectors)
            wherever it stands, with a warning when it is not the first; else the first
            column. Several text columns, one beside a first column of integers, or fractions
            in the first column are refused as ambiguous, asking for ``label_column``.
        vector_column : str or list of str, optional
            One column holding text vectors; the list of numeric columns; a pattern naming
            them (``"f*"``, :func:`fnmatch.fnmatchcase` rules); or an inclusive range of
            columns in file order (``"f0:f127"``). A string that is a column's name is that
            column. Default: every other column; if that is a single text column it is parsed
            as text vectors, otherwise columns that hold only text (a file name, a note) are
            left out with a warning naming them, and the rest are the coordinates.
        normalize, min_norm, failures
            As for :class:`EmbeddingSet`.

        Returns
        -------
        EmbeddingSet
            ``sha256`` is the hash of the file's bytes; ``source`` its path.

        Notes
        -----
        An empty label cell drops the row as ``"missing"``. A labelled row whose vector has
        empty cells or NaN values fails as ``"missing"``; a non-empty cell of a numeric column
        that is not a number, or a text vector that does not parse or whose length differs
        from the most common length in the file, makes it fail as ``"unparseable"``. Failed
        rows are kept as failed outputs or dropped as ``failures`` says. The remaining rules
        are those of :class:`EmbeddingSet`.

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
        read = _readers.read_csv(path, label_column=label_column, vector_column=vector_column)
        return cls._from_read(path, read, normalize, min_norm, failures)

    @classmethod
    def from_npz(
        cls,
        path: str | os.PathLike[str],
        *,
        embeddings_key: str = "embeddings",
        labels_key: str = "labels",
        normalize: bool = True,
        min_norm: float = 1e-6,
        failures: Literal["keep", "drop"] = "keep",
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
        normalize, min_norm, failures
            As for :class:`EmbeddingSet`.

        Returns
        -------
        EmbeddingSet
            ``sha256`` is the hash of the file's bytes; ``source`` its path.

        Notes
        -----
        An archive that holds an ``outcomes`` array (one string per row: ``"ok"`` or a failure
        code, as ``EmbeddingSet(..., outcomes=)`` takes it) has it read as the rows' outcomes,
        so failed outputs saved with NaN vectors keep their codes.

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
        read = _readers.read_npz(path, embeddings_key=embeddings_key, labels_key=labels_key)
        return cls._from_read(path, read, normalize, min_norm, failures)

    @classmethod
    def from_parquet(
        cls,
        path: str | os.PathLike[str],
        *,
        label_column: str | None = None,
        vector_column: str | list[str] | None = None,
        normalize: bool = True,
        min_norm: float = 1e-6,
        failures: Literal["keep", "drop"] = "keep",
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
            of numeric columns, or a pattern or range of them as for :meth:`from_csv`. Default
            as for :meth:`from_csv`, where a single non-label list column is read as the
            vectors.
        normalize, min_norm, failures
            As for :class:`EmbeddingSet`.

        Returns
        -------
        EmbeddingSet
            ``sha256`` is the hash of the file's bytes; ``source`` its path.

        Notes
        -----
        A null list fails as ``"missing"``; a list whose length differs from the most common
        length fails as ``"unparseable"``.
        """
        read = _readers.read_parquet(path, label_column=label_column, vector_column=vector_column)
        return cls._from_read(path, read, normalize, min_norm, failures)

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
        failures: Literal["keep", "drop"] = "keep",
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
        normalize, min_norm, failures
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
            read = _readers.read_npz(path, embeddings_key=embeddings_key, labels_key=labels_key)
        else:
            reader = _readers.read_csv if kind == "csv" else _readers.read_parquet
            read = reader(path, label_column=label_column, vector_column=vector_column)
        return cls._from_read(path, read, normalize, min_norm, failures)

    @classmethod
    def _from_read(
        cls,
        path: str | os.PathLike[str],
        read: _readers.Read,
        normalize: bool,
        min_norm: float,
        failures: Literal["keep", "drop"],
    ) -> EmbeddingSet:
        """Build the set from what a reader returned for the file ``path``."""
        (x, labels, reasons), raw_hash, outcomes = read
        self = cls.__new__(cls)
        self._load(
            x,
            labels,
            reasons=reasons,
            outcomes=outcomes,
            normalize=normalize,
            min_norm=min_norm,
            failures=failures,
            sha256=raw_hash,
            source=os.fspath(path),
            stacklevel=4,
        )
        return self

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
        """Label (Python scalar) -> number of successful rows, in sorted label order."""
        return dict(self._counts)  # a copy: the set itself is immutable

    @property
    def failed_counts(self) -> dict[Any, int]:
        """Label (Python scalar) -> number of failed rows kept, in sorted label order.

        Every identity with an output (successful or failed) is a key, with 0 where none
        failed; an identity whose every row failed is a key here but not in :attr:`counts`.
        """
        return dict(self._failed_counts)

    def failure_codes(self, label: Any) -> npt.NDArray[np.str_]:
        """Return the failure codes of one identity's failed rows.

        Parameters
        ----------
        label : str or int
            An identity with an output in this set (a key of :attr:`failed_counts`).

        Returns
        -------
        numpy.ndarray of str, shape (n_failed_id,)
            The codes (``"no_face"``, ``"zero_norm"``, ...) in input order; empty when none
            of the identity's rows failed.

        Raises
        ------
        InvalidInputError
            If ``label`` has no output in this set.
        """
        key = self._known(label)
        rows = self._failed_rows.get(key, np.zeros(0, dtype=np.intp))
        out: npt.NDArray[np.str_] = self._failed_codes[rows]  # a copy (fancy indexing)
        return out

    def n_outputs(self, label: Any) -> int:
        """Return the number of outputs of one identity: successful plus failed rows.

        Parameters
        ----------
        label : str or int
            An identity with an output in this set (a key of :attr:`failed_counts`).

        Returns
        -------
        int

        Raises
        ------
        InvalidInputError
            If ``label`` has no output in this set.
        """
        key = self._known(label)
        return self._counts.get(key, 0) + self._failed_counts[key]

    def as_outputs(self) -> EmbeddingSet:
        r"""Return every output of every identity as one vector, a failure as its own atom.

        A successful row :math:`x` (as stored: L2-normalised when ``normalize``) becomes
        :math:`[x, 0]`; every failed row becomes :math:`[0, \dots, 0, 1]`. This is the output
        space a certificate splits and classifies when failures count as outputs.

        Returns
        -------
        EmbeddingSet
            ``dim + 1`` columns; one row per output, in input order; every identity with an
            output (those whose every row failed too); ``normalize=False``,
            ``failures="keep"``, no failed row, ``dropped_`` all zeros; ``sha256`` and
            ``source`` inherited. Built without warnings.

        Notes
        -----
        Every failure code maps to the one atom :math:`[0, \dots, 0, 1]` (at distance
        :math:`\sqrt 2` from every unit-norm success), so the codes are merged: a test can
        tell a failure from a success, but not ``"no_face"`` from ``"generator_error"``. An
        atom per code (one more column each) would be a possible extension. The atoms of one
        identity are exact duplicates of each other and are counted in ``n_duplicates_``;
        they are separate draws, so split or certify them with ``duplicates="keep"``.

        Examples
        --------
        >>> import warnings
        >>> import numpy as np
        >>> from idaudit.data import EmbeddingSet
        >>> with warnings.catch_warnings():
        ...     warnings.simplefilter("ignore")
        ...     es = EmbeddingSet([[2.0, 0.0], [0.0, 0.0], [0.0, 3.0]], ["a", "a", "b"])
        >>> es.as_outputs().embeddings.tolist()
        [[1.0, 0.0, 0.0], [0.0, 0.0, 1.0], [0.0, 1.0, 0.0]]
        """
        n_ok, d = self._embeddings.shape
        x = np.zeros((n_ok + self.n_failed_, d + 1))  # (n_outputs, dim + 1)
        x[:n_ok, :d] = self._embeddings
        x[n_ok:, d] = 1.0
        lab = np.concatenate([self._labels, self._failed_labels])
        order = np.argsort(np.concatenate([self._pos, self._failed_pos]), kind="stable")
        x, lab = x[order], lab[order]
        identities, codes = unique_labels(lab)
        new = type(self).__new__(type(self))
        new._setup(
            x,
            lab,
            identities,
            codes,
            dup_group=duplicate_groups(x, codes),
            pos=np.arange(len(lab), dtype=np.intp),
            failed_labels=lab[:0].copy(),
            failed_codes=np.zeros(0, dtype=str),
            failed_pos=np.zeros(0, dtype=np.intp),
            normalize=False,
            min_norm=self.min_norm,
            failures="keep",
            dropped=tally(np.zeros(0, dtype=str)),
            sha256=self.sha256,
            source=self.source,
        )
        return new

    @property
    def dim(self) -> int:
        """Embedding dimension."""
        return int(self._embeddings.shape[1])

    def __len__(self) -> int:
        return int(self._embeddings.shape[0])

    def __contains__(self, label: object) -> bool:
        try:
            return py_scalar(label) in self._rows
        except TypeError:  # unhashable
            return False

    def get(self, label: Any) -> npt.NDArray[np.float64]:
        """Return the successful rows of one identity.

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
            Identities to keep (each must have an output in this set: a key of
            :attr:`failed_counts`).

        Returns
        -------
        EmbeddingSet
            Rows of those identities in input order, their failed rows included. ``sha256``
            and ``source`` are inherited; ``dropped_`` is all zeros (nothing is dropped by
            subsetting).

        Raises
        ------
        InvalidInputError
            If an identity is unknown, ``identities`` is empty, or every row of the
            identities named failed.
        """
        wanted = list(identities) if not isinstance(identities, (str, bytes)) else [identities]
        if not wanted:
            raise InvalidInputError("`identities` must name at least one identity; got none.")
        keys = [self._known(label) for label in dict.fromkeys(map(py_scalar, wanted))]
        empty = np.zeros(0, dtype=np.intp)
        rows = np.concatenate([self._rows.get(k, empty) for k in keys])
        if not len(rows):
            raise InvalidInputError(
                f"every row of the identities {keys} failed; a subset needs a successful row."
            )
        failed = np.concatenate([self._failed_rows.get(k, empty) for k in keys])
        return self._take(rows, failed)

    def drop_duplicates(self) -> EmbeddingSet:
        """Return a new set with one row per group of exact duplicates (its first row).

        Use it when copies are **repeated records of one draw** — the same generated image
        listed or encoded twice, files merged with overlapping rows — so that each draw counts
        once. Do not use it when the mechanism itself repeats outputs (a quantised encoder, a
        generator that falls back to one output, :class:`~idaudit.pipeline.EncodedGenerator`
        redrawing a source image through a deterministic generator): those repeats are
        separate iid draws, and removing them changes the distribution being audited.

        Returns
        -------
        EmbeddingSet
            The rows counted in ``n_duplicates_`` removed, the first row of each group kept,
            in input order; ``n_duplicates_`` is 0. Every failed row is kept. ``sha256`` and
            ``source`` are inherited; ``dropped_`` is all zeros.

        Examples
        --------
        >>> from idaudit.data import EmbeddingSet
        >>> es = EmbeddingSet([[1, 0], [2, 0], [0, 1], [0, 3], [1, 1]], list("aabbb"))
        >>> es.n_duplicates_, es.drop_duplicates().counts
        (2, {'a': 1, 'b': 2})
        """
        _, first = np.unique(self._dup_group, return_index=True)
        return self._take(first, np.arange(self.n_failed_))

    def near_duplicates(self, rtol: float | None = None) -> int:
        """Count the rows that are *near* copies of an earlier row of the same identity.

        Two rows are near copies when they differ, but in every coordinate by at most
        ``rtol`` times the identity's spread (the root mean square distance of its rows to
        their mean; :data:`NEAR_DUPLICATE_RTOL` = 1e-7 by default: a float32 round trip or a
        small jitter added to a stored copy). Distinct draws of a continuous law in two or
        more dimensions come that close with negligible probability; in one dimension
        (and for L2-normalised rows in two, which lie on a circle) they do not (about
        n² · 10⁻⁷ pairs among n rows), so there only exact copies are looked for and this
        is 0. Exact copies are counted in ``n_duplicates_``, not here.

        Parameters
        ----------
        rtol : float, optional
            Relative tolerance in (0, 1e-3] (default :data:`NEAR_DUPLICATE_RTOL`).

        Returns
        -------
        int

        Examples
        --------
        >>> from idaudit.data import EmbeddingSet
        >>> rows = [[1, 0, 0], [1, 1e-12, 0], [0, 1, 0], [0, 0, 1], [0, 0, 1], [0, 1, 1]]
        >>> es = EmbeddingSet(rows, list("aaabbb"))  # a: a near copy; b: an exact copy
        >>> es.n_duplicates_, es.near_duplicates()
        (1, 1)
        """
        groups = self._near_groups(rtol)
        return int(len(np.unique(self._dup_group)) - len(np.unique(groups)))

    def merge_near_duplicates(self, rtol: float | None = None) -> EmbeddingSet:
        """Return a new set in which every near copy is replaced by the row it copies.

        Near copies (:meth:`near_duplicates`) become exact copies of the first row of their
        group, so that ``n_duplicates_`` counts them and ``duplicates="collapse"`` (or
        :meth:`drop_duplicates`) treats them as repeated records of one draw. Failed rows are
        kept as they are. Use it only when copies are records of one draw.

        Parameters
        ----------
        rtol : float, optional
            As in :meth:`near_duplicates`.

        Returns
        -------
        EmbeddingSet
        """
        groups = self._near_groups(rtol)
        _, first, inverse = np.unique(groups, return_index=True, return_inverse=True)
        rep = first[inverse.ravel()]  # (n,) the first row of each row's group
        return self._take(np.arange(len(rep)), np.arange(self.n_failed_), rep=rep)

    def _near_groups(self, rtol: float | None) -> npt.NDArray[np.intp]:
        """Exact-duplicate groups merged with near copies (L2-normalised rows: from 3-D)."""
        rtol, min_dim = check_rtol(rtol), 2 + int(self.normalize)
        return near_groups(self._embeddings, self._codes, self._dup_group, rtol, min_dim)

    def filter(self, *, min_rows: int) -> tuple[EmbeddingSet, dict[Any, int]]:
        """Keep the identities with at least ``min_rows`` successful rows.

        Parameters
        ----------
        min_rows : int
            Fewest successful rows an identity must have to be kept (>= 1).

        Returns
        -------
        kept : EmbeddingSet
            The identities with at least ``min_rows`` successful rows, with their failed rows
            (``self`` itself when none is dropped; otherwise as :meth:`subset` builds it).
        dropped : dict
            Label (a Python scalar) -> its number of successful rows, for every identity
            dropped (one whose every row failed with 0), in sorted label order; empty when
            none is.

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
        rows = {label: self._counts.get(label, 0) for label in self._failed_counts}
        dropped = {label: n for label, n in rows.items() if n < min_rows}
        if not dropped:
            return self, dropped
        if len(dropped) == len(rows):
            raise InvalidInputError(
                f"`min_rows` {min_rows} leaves none of the "
                f"{'1 identity' if len(rows) == 1 else f'{len(rows)} identities'} "
                f"(the largest has {max(rows.values())} rows)."
            )
        return self.subset(label for label in rows if label not in dropped), dropped

    def __repr__(self) -> str:
        dropped = (
            f"dropped={self.n_dropped_} ({fmt_reasons(self.dropped_)})"
            if self.n_dropped_
            else "dropped=0"
        )
        failed = (
            f", failed={self.n_failed_} ({fmt_reasons(self.failure_reasons_)})"
            if self.n_failed_
            else ""
        )
        src = f", source={os.path.basename(self.source)!r}" if self.source else ""
        return (
            f"EmbeddingSet(n={len(self)}, identities={self.n_identities}, dim={self.dim}, "
            f"normalized={self.normalize}{failed}, {dropped}, duplicates={self.n_duplicates_}, "
            f"sha256={self.sha256[:12]}…{src})"
        )


def _hash_arrays(
    x: npt.NDArray[np.float64],
    labels: npt.NDArray[Any],
    outcomes: npt.NDArray[np.str_] | None = None,
) -> str:
    h = hashlib.sha256(b"idaudit-embeddings-v1")
    h.update(repr(tuple(x.shape)).encode())
    h.update(np.ascontiguousarray(x, dtype="<f8").tobytes())
    h.update("\n".join(repr(py_scalar(v)) for v in labels.tolist()).encode())
    if outcomes is not None:  # absent: the hash of the three parts above, as before
        h.update(b"\x00outcomes\x00")
        h.update("\n".join(outcomes.tolist()).encode())
    return h.hexdigest()
