"""The rows behind ``EmbeddingSet``: row rules applied, rows indexed by identity, subsets."""

from __future__ import annotations

import warnings
from typing import Any, TypeVar

import numpy as np
import numpy.typing as npt
import pandas as pd

from idaudit._validation import check_in_range, check_option
from idaudit.data._duplicates import duplicate_groups
from idaudit.data._rows import DROP_REASONS, OK, REASON_CODE, normalise_label_dtype
from idaudit.exceptions import IdauditWarning, InvalidInputError

__all__ = [
    "FAILURES",
    "IdentityRows",
    "fmt_reasons",
    "py_scalar",
    "tally",
    "unique_labels",
]

#: What :class:`EmbeddingSet` does with a failed row of a known identity: ``"keep"`` it as a
#: failed output of that identity, or ``"drop"`` it (the mechanism conditioned on success).
FAILURES: tuple[str, ...] = ("keep", "drop")

_S = TypeVar("_S", bound="IdentityRows")


class IdentityRows:
    """Successful and failed rows indexed by identity: the storage of :class:`EmbeddingSet`.

    :meth:`_load` applies the row rules to raw rows, :meth:`_setup` stores and indexes rows
    already sorted, :meth:`_take` builds a set from some of them; the public interface is
    :class:`~idaudit.data.EmbeddingSet`'s.
    """

    def _load(
        self,
        x: npt.NDArray[np.float64],
        labels: npt.NDArray[Any],
        *,
        reasons: npt.NDArray[np.int8],
        outcomes: npt.NDArray[np.str_] | None,
        normalize: bool,
        min_norm: float,
        failures: str,
        sha256: str,
        source: str | None,
        stacklevel: int = 3,
    ) -> None:
        """Apply the row rules to raw rows (after the reader's ``reasons``), warn, store them."""
        if not isinstance(normalize, (bool, np.bool_)):
            raise TypeError(f"`normalize` must be a bool; got {type(normalize).__name__}.")
        min_norm = check_in_range(min_norm, "min_norm", 0.0, None, closed="left")
        if not isinstance(failures, str):
            raise TypeError(
                f"`failures` must be 'keep' or 'drop' (a str); got {type(failures).__name__}."
            )
        failures = check_option(failures, "failures", FAILURES)
        n_in = x.shape[0]
        reasons = reasons.copy()
        # row rules in DROP_REASONS order; a row keeps the first reason it gets
        label_missing = np.asarray(pd.isna(labels), dtype=bool)
        _mark(reasons, label_missing | np.isnan(x).any(axis=1), "missing")
        _mark(reasons, ~np.isfinite(x).all(axis=1), "non_finite")
        norms = np.zeros(n_in)
        finite = reasons == 0
        norms[finite] = _row_norms(x[finite])
        if normalize:
            _mark(reasons, norms <= min_norm, "zero_norm")
        # the code of each row: "" when it succeeds; a labelled row's non-"ok" outcome comes
        # before the row rules (the pipeline said why it failed)
        code = np.where(reasons == 0, "", np.asarray(("", *DROP_REASONS))[reasons])
        if outcomes is not None:
            code = np.where(~label_missing & (outcomes != OK), outcomes, code)
        ok = code == ""
        failed = ~ok & ~label_missing if failures == "keep" else np.zeros(n_in, dtype=bool)
        removed = ~ok & ~failed
        dropped = tally(code[removed])
        n_dropped = int(removed.sum())
        n_failed = int(failed.sum())
        if not ok.any():
            if not n_failed:
                raise InvalidInputError(
                    f"no rows left after dropping {n_dropped} of {n_in}: {fmt_reasons(dropped)}."
                )
            extra = f"; {n_dropped} dropped ({fmt_reasons(dropped)})" if n_dropped else ""
            raise InvalidInputError(
                f"no rows left: none of the {n_in} rows succeeded; {n_failed} failed "
                f"({fmt_reasons(tally(code[failed]))}){extra}."
            )
        # one dtype for the labels of every output kept (successful or failed)
        attributed = ok | failed
        lab_all = normalise_label_dtype(labels[attributed])
        is_ok = ok[attributed]
        lab = lab_all[is_ok]
        pos = np.flatnonzero(attributed)  # (n_kept,) input positions
        identities, codes = unique_labels(lab)
        unique_labels(lab_all)  # the failed rows' labels must be orderable with the others
        if n_dropped:
            warnings.warn(
                f"EmbeddingSet dropped {n_dropped} of {n_in} rows ({fmt_reasons(dropped)}).",
                IdauditWarning,
                stacklevel=stacklevel,
            )
        if n_failed:
            n_ok = int(ok.sum())
            warnings.warn(
                f"EmbeddingSet: {n_failed} of {n_in} rows failed "
                f"({fmt_reasons(tally(code[failed]))}); they are kept as failed outputs "
                f"(certificates count them; diagnostics compute on the {n_ok} successful "
                f"row{'s' if n_ok != 1 else ''}).",
                IdauditWarning,
                stacklevel=stacklevel,
            )
        vectors = x[ok] / norms[ok][:, None] if normalize else x[ok].copy()
        self._setup(
            vectors,
            lab,
            identities,
            codes,
            dup_group=duplicate_groups(vectors, codes),
            pos=pos[is_ok],
            failed_labels=lab_all[~is_ok],
            failed_codes=np.asarray(code[failed], dtype=str),
            failed_pos=pos[~is_ok],
            normalize=bool(normalize),
            min_norm=min_norm,
            failures=failures,
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
        pos: npt.NDArray[np.intp],
        failed_labels: npt.NDArray[Any],
        failed_codes: npt.NDArray[np.str_],
        failed_pos: npt.NDArray[np.intp],
        normalize: bool,
        min_norm: float,
        failures: str,
        dropped: dict[str, int],
        sha256: str,
        source: str | None,
    ) -> None:
        for arr in (vectors, labels, identities, failed_labels, failed_codes):
            arr.flags.writeable = False
        self._embeddings = vectors
        self._labels = labels
        self._identities = identities
        self._codes = codes
        self._dup_group = dup_group
        # input positions of the successful and the failed rows: as_outputs interleaves them
        self._pos = np.asarray(pos, dtype=np.intp)
        self._failed_labels = failed_labels
        self._failed_codes = failed_codes
        self._failed_pos = np.asarray(failed_pos, dtype=np.intp)
        self._rows = _group_rows(identities, codes)
        self._counts = {k: len(v) for k, v in self._rows.items()}
        failed_ids, failed_group = unique_labels(failed_labels)
        self._failed_rows = _group_rows(failed_ids, failed_group)
        if len(failed_ids):
            every, _ = unique_labels(np.concatenate([identities, failed_ids]))
            keys = [py_scalar(v) for v in every.tolist()]
        else:
            keys = list(self._rows)
        self._failed_counts = {k: len(self._failed_rows.get(k, ())) for k in keys}
        self.normalize = normalize
        self.min_norm = min_norm
        self.failures = failures
        self.dropped_ = dict(dropped)
        self.n_dropped_ = int(sum(dropped.values()))
        self.failure_reasons_ = tally(failed_codes)
        self.n_failed_ = len(failed_codes)
        self.n_duplicates_ = int(len(dup_group) - len(np.unique(dup_group)))
        self.sha256 = sha256
        self.source = source

    def _take(
        self: _S,
        rows: npt.NDArray[np.intp],
        failed: npt.NDArray[np.intp] | None = None,
        *,
        rep: npt.NDArray[np.intp] | None = None,
    ) -> _S:
        """Build a new set from ``rows`` (positions of successful rows), inheriting provenance.

        ``failed`` are positions of failed rows to carry along (default none:
        :func:`~idaudit.data.split_identities` splits the successful rows only). The new set
        must keep at least one successful row. ``rep`` (one position per successful row of
        this set) gives each row the vector of row ``rep[i]`` instead of its own, and the
        exact duplicates are grouped again (merging near copies).
        """
        rows = np.sort(np.asarray(rows, dtype=np.intp))
        fail = np.sort(np.asarray([] if failed is None else failed, dtype=np.intp))
        lab = self._labels[rows]
        identities, codes = unique_labels(lab)
        vectors = self._embeddings[rows if rep is None else rep[rows]]  # a copy
        new = type(self).__new__(type(self))
        new._setup(
            vectors,
            lab.copy(),
            identities,
            codes,
            dup_group=self._dup_group[rows] if rep is None else duplicate_groups(vectors, codes),
            pos=self._pos[rows],
            failed_labels=self._failed_labels[fail].copy(),
            failed_codes=self._failed_codes[fail].copy(),
            failed_pos=self._failed_pos[fail],
            normalize=self.normalize,
            min_norm=self.min_norm,
            failures=self.failures,
            dropped=tally(np.zeros(0, dtype=str)),
            sha256=self.sha256,
            source=self.source,
        )
        return new

    def _rows_of(self, label: Any) -> npt.NDArray[np.intp]:
        try:
            return self._rows[py_scalar(label)]
        except (KeyError, TypeError):
            shown = ", ".join(repr(k) for k in list(self._rows)[:3])
            more = ", ..." if len(self._rows) > 3 else ""
            raise InvalidInputError(
                f"identity {label!r} is not in this EmbeddingSet "
                f"({len(self._rows)} {'identity' if len(self._rows) == 1 else 'identities'}: "
                f"{shown}{more})."
            ) from None

    def _known(self, label: Any) -> Any:
        """``label`` as a key of :attr:`failed_counts` (an identity with any output)."""
        try:
            key = py_scalar(label)
            if key in self._failed_counts:
                return key
        except TypeError:  # unhashable
            pass
        self._rows_of(label)  # raises, naming the label
        return py_scalar(label)  # pragma: no cover - _rows_of raised


def unique_labels(lab: npt.NDArray[Any]) -> tuple[npt.NDArray[Any], npt.NDArray[np.intp]]:
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


def tally(codes: npt.NDArray[np.str_]) -> dict[str, int]:
    """Rows per code: every one of DROP_REASONS (0 if absent), then other codes sorted."""
    values, counts = np.unique(np.asarray(codes, dtype=str), return_counts=True)
    found = dict(zip(values.tolist(), counts.tolist(), strict=True))
    out = {r: int(found.pop(r, 0)) for r in DROP_REASONS}
    out.update({c: int(found[c]) for c in sorted(found)})
    return out


def _group_rows(
    identities: npt.NDArray[Any], codes: npt.NDArray[np.intp]
) -> dict[Any, npt.NDArray[np.intp]]:
    """Label (Python scalar) -> positions of its rows, in input order."""
    order = np.argsort(codes, kind="stable")
    bounds = np.searchsorted(codes[order], np.arange(len(identities) + 1))
    keys = [py_scalar(v) for v in identities.tolist()]
    return {k: order[bounds[i] : bounds[i + 1]] for i, k in enumerate(keys)}


def py_scalar(value: Any) -> Any:
    """NumPy scalar -> Python scalar (labels are dictionary keys as Python scalars)."""
    return value.item() if isinstance(value, np.generic) else value


def fmt_reasons(dropped: dict[str, int]) -> str:
    parts = [f"{r}: {c}" for r, c in dropped.items() if c]
    return ", ".join(parts) if parts else "none"
