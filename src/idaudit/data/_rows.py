"""Row-level rules shared by ``EmbeddingSet`` and the file readers: drop reasons, array checks."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd

from idaudit.exceptions import InvalidInputError

__all__ = [
    "DROP_REASONS",
    "OK",
    "REASON_CODE",
    "as_float_matrix",
    "as_label_array",
    "as_outcome_array",
    "normalise_label_dtype",
]

#: Why a row can be dropped, in the order the rules are applied (a row counts once, under the
#: first rule it breaks).
DROP_REASONS: tuple[str, ...] = ("missing", "unparseable", "non_finite", "zero_norm")


REASON_CODE = {reason: i + 1 for i, reason in enumerate(DROP_REASONS)}  # 0 means "kept"

#: The outcome of a row that the pipeline produced without failing; any other non-empty string
#: is a failure code (``"no_face"``, ``"generator_error"``, ``"unreadable"``, ...).
OK = "ok"


def _row_lengths(rows: Any) -> list[int] | None:
    """Length of every row of a sequence of sequences, or ``None`` if it is not one."""
    try:
        return [len(r) for r in rows]
    except TypeError:
        return None


def as_float_matrix(embeddings: npt.ArrayLike) -> npt.NDArray[np.float64]:
    try:
        x = np.asarray(embeddings, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        lengths = _row_lengths(embeddings)
        if lengths is not None and len(set(lengths)) > 1:
            first = lengths[0]
            bad = next(i for i, n in enumerate(lengths) if n != first)
            raise InvalidInputError(
                f"`embeddings` rows must all have the same length; row 0 has {first} values "
                f"and row {bad} has {lengths[bad]} ({len(set(lengths))} different lengths "
                "among the rows)."
            ) from exc
        raise TypeError(
            f"`embeddings` must be a numeric array; got {type(embeddings).__name__} ({exc})."
        ) from exc
    if x.ndim != 2:
        raise InvalidInputError(
            f"`embeddings` must be a 2-D array of shape (n_rows, dim); got {x.ndim}-D with "
            f"shape {x.shape}."
        )
    if x.shape[0] == 0 or x.shape[1] == 0:
        raise InvalidInputError(
            f"`embeddings` must have at least one row and one column; got shape {x.shape}."
        )
    return np.ascontiguousarray(x)


def _per_row_array(values: Any, n: int, name: str, expected: str) -> npt.NDArray[Any]:
    """``values`` as a 1-D array with one entry per row; object dtype for plain sequences.

    Object dtype first: ``np.asarray`` would turn ``[1, "a"]`` into strings and NaN into
    ``"nan"``.
    """
    if isinstance(values, np.ndarray):
        arr = values
    elif isinstance(values, (pd.Series, pd.Index)):
        arr = values.to_numpy()
    elif isinstance(values, (str, bytes)) or not isinstance(values, Iterable):
        raise InvalidInputError(
            f"`{name}` must be a 1-D sequence of {expected}; got {type(values).__name__}."
        )
    else:
        try:
            arr = np.array(list(values), dtype=object)
        except ValueError as exc:  # ragged nesting
            raise InvalidInputError(f"`{name}` must be 1-D; got nested sequences.") from exc
    if arr.ndim != 1:
        raise InvalidInputError(f"`{name}` must be 1-D; got shape {arr.shape}.")
    if arr.shape[0] != n:
        raise InvalidInputError(
            f"`{name}` must have one entry per row of `embeddings`; got {arr.shape[0]} vs {n}."
        )
    return arr


def as_label_array(labels: Any, n: int) -> npt.NDArray[Any]:
    lab = _per_row_array(labels, n, "labels", "labels")
    if lab.dtype.kind not in "OUSiuf":
        raise TypeError(f"`labels` must hold strings or integers; got dtype {lab.dtype}.")
    if lab.dtype.kind == "O":
        bad = next((v for v in lab.tolist() if not _is_label_scalar(v)), None)
        if bad is not None:
            raise TypeError(f"`labels` must hold strings or integers; got {type(bad).__name__}.")
    return lab


def _is_label_scalar(value: Any) -> bool:
    return value is None or value is pd.NA or isinstance(value, (str, int, float, np.generic))


def normalise_label_dtype(lab: npt.NDArray[Any]) -> npt.NDArray[Any]:
    """Object arrays of all-str or all-int labels become '<U' / int64 arrays."""
    if lab.dtype.kind == "f":
        if np.all(lab == np.round(lab)):
            return lab.astype(np.int64)
        return lab
    if lab.dtype.kind != "O":
        return lab
    values = lab.tolist()
    if all(isinstance(v, str) for v in values):
        return np.asarray(values, dtype=str)
    if all(isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in values):
        return np.asarray(values, dtype=np.int64)
    return lab


def as_outcome_array(outcomes: Any, n: int) -> npt.NDArray[np.str_]:
    """Check ``outcomes`` (one non-empty string per row) and return it as a str array."""
    values = _per_row_array(outcomes, n, "outcomes", "strings ('ok' or a failure code)")
    if values.dtype.kind != "U":
        bad = [v for v in values.tolist() if not isinstance(v, str)]
        if bad:
            raise InvalidInputError(
                f"`outcomes` must hold strings ('ok' or a failure code such as 'no_face'); "
                f"got {type(bad[0]).__name__} ({len(bad)} of {n} entries are not strings)."
            )
    out = np.asarray(values.tolist(), dtype=str).reshape(n)
    empty = np.flatnonzero(out == "")
    if empty.size:
        raise InvalidInputError(
            f"`outcomes` must hold non-empty strings ('ok' or a failure code); row "
            f"{int(empty[0])} is empty ({empty.size} empty in all)."
        )
    # a code that reads as "ok" would silently fail the row; one named like a row rule would
    # merge into that rule's count
    codes = set(np.unique(out).tolist()) - {OK}
    near_ok = sorted(c for c in codes if c.strip().lower() == OK)
    if near_ok:
        raise InvalidInputError(
            f"`outcomes` must spell success exactly 'ok'; got {near_ok[0]!r}, which would "
            "count the row as failed."
        )
    clash = sorted(codes & set(DROP_REASONS))
    if clash:
        raise InvalidInputError(
            f"`outcomes` codes must differ from the row rules' names {DROP_REASONS}; got "
            f"{clash[0]!r}. Name the failure after what happened (e.g. 'no_face')."
        )
    return out
