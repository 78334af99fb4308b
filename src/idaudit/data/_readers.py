"""File readers behind ``EmbeddingSet.from_csv`` / ``from_npz`` / ``from_parquet``.

Each reader returns ``((vectors, labels, reasons), sha256, outcomes)``: ``vectors`` is
(n_rows, dim) float64 with NaN in rows it could not read, ``labels`` the raw label column,
``reasons`` an int8 code per row (0 = fine, otherwise the reader's row rule) that
:class:`~idaudit.data.EmbeddingSet` merges with its own rules, ``sha256`` the hash of the
file's bytes, and ``outcomes`` the per-row outcome array of a ``.npz`` archive that holds one
(None otherwise).
"""

from __future__ import annotations

import fnmatch
import hashlib
import io
import os
import re
import warnings
import zipfile
import zlib
from pathlib import Path
from typing import Any, TypeAlias

import numpy as np
import numpy.typing as npt
import pandas as pd

from idaudit.data._rows import REASON_CODE, as_float_matrix, as_label_array, as_outcome_array
from idaudit.exceptions import IdauditWarning, InvalidInputError

__all__ = ["Read", "read_csv", "read_npz", "read_parquet"]

Parsed: TypeAlias = tuple[npt.NDArray[np.float64], npt.NDArray[Any], npt.NDArray[np.int8]]
#: What every reader returns: ``(parsed, sha256, outcomes)`` (see the module docstring).
Read: TypeAlias = tuple[Parsed, str, npt.NDArray[np.str_] | None]

#: Name of the optional per-row outcome array of a ``.npz`` archive ("ok" or a failure code).
OUTCOMES_KEY = "outcomes"

#: Column names taken as the label column when ``label_column`` is not given, in this order.
LABEL_COLUMN_NAMES: tuple[str, ...] = ("label", "identity", "id")

_MISSING = REASON_CODE["missing"]
_UNPARSEABLE = REASON_CODE["unparseable"]
# brackets and quotes around a text vector, e.g. "[0.1, 0.2]" or "(0.1 0.2)"
_STRIP = "[](){} \t\r\n'\""
_WHITESPACE = re.compile(r"\s+")
# the name pandas gives a column whose header cell is empty (e.g. an index written by to_csv)
_UNNAMED = re.compile(r"^Unnamed: \d+$")
# every read_csv call: no column ever becomes the index (rows with more fields than the
# header are an error, not a shifted frame), and spaces after a delimiter are not data
_CSV_OPTIONS: dict[str, Any] = {"index_col": False, "skipinitialspace": True}
_CALL = re.compile(r"[A-Za-z_][A-Za-z0-9_.]*\(")
# pandas' default missing-value spellings (``keep_default_na``), kept for the non-label
# columns of a CSV file while the label column is read as plain text
_DEFAULT_NA = frozenset(
    {
        "", "#N/A", "#N/A N/A", "#NA", "-1.#IND", "-1.#QNAN", "-NaN", "-nan", "1.#IND",
        "1.#QNAN", "<NA>", "N/A", "NA", "NULL", "NaN", "None", "n/a", "nan", "null",
    }
)  # fmt: skip


def read_csv(
    path: str | os.PathLike[str],
    *,
    label_column: str | None,
    vector_column: str | list[str] | None,
) -> Read:
    """Read a CSV file with a header row (see :meth:`EmbeddingSet.from_csv`).

    Parameters
    ----------
    path : str or os.PathLike
        The CSV file.
    label_column : str or None
        Column holding the labels; None picks one as :meth:`EmbeddingSet.from_csv` says.
    vector_column : str, list of str or None
        Column(s) holding the vectors, as for :meth:`EmbeddingSet.from_csv`.

    Returns
    -------
    parsed : tuple of ndarray
        ``(vectors, labels, reasons)`` as described in the module docstring.
    sha256 : str
        SHA-256 of the file's bytes.
    outcomes : None
        A CSV file holds no outcomes.

    Raises
    ------
    InvalidInputError
        If the file is not CSV, seems to have no header row, or has no data rows.

    Notes
    -----
    The label column is read as text, so labels from a CSV file are always strings: ``001``,
    ``01`` and ``1`` are three identities, and ``NA``, ``None``, ``nan``, ``null``, ``True``
    are labels like any other. Only an empty label cell is missing. A caller wanting integer
    labels converts them (``int(label)``). The other columns keep pandas' usual missing-value
    spellings (``NA``, ``nan``, ...).
    """
    raw = _read_bytes(path)
    where = os.fspath(path)
    with warnings.catch_warnings():
        # pandas only warns when the rows hold more fields than the header; that is an error
        warnings.simplefilter("error", pd.errors.ParserWarning)
        try:
            # the header alone first, to know which column holds the labels
            columns = [
                str(c) for c in pd.read_csv(io.BytesIO(raw), nrows=0, **_CSV_OPTIONS).columns
            ]
            label = None
            if len(columns) >= 2 and label_column is None and not _named_label(columns):
                # no column is named for the labels: the values say which holds text
                guess = pd.read_csv(io.BytesIO(raw), low_memory=False, **_CSV_OPTIONS)
                label = _guess_label_column(guess, where, stacklevel=4)
            elif len(columns) >= 2:
                label = _choose_label_column(columns, label_column)
            if label is not None:
                _check_header(columns, label, by_name=label_column is not None, where=where)
                na_values: Any = {c: list(_DEFAULT_NA) for c in columns}
                na_values[label] = [""]  # only an empty label cell is missing
                frame = pd.read_csv(
                    io.BytesIO(raw),
                    low_memory=False,
                    dtype={label: str},
                    keep_default_na=False,
                    na_values=na_values,
                    **_CSV_OPTIONS,
                )
            else:
                frame = pd.read_csv(io.BytesIO(raw), low_memory=False, **_CSV_OPTIONS)
        except pd.errors.ParserWarning as exc:
            raise InvalidInputError(
                f"cannot read {where!r} as CSV: some rows hold more fields than the header names "
                f"{len(columns)} columns (a missing column name, or an unquoted comma inside a "
                "text vector?)."
            ) from exc
        except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as exc:
            raise InvalidInputError(f"cannot read {where!r} as CSV: {exc}") from exc
    if label is not None and len(frame) == 0:
        raise InvalidInputError(
            f"{where!r} has no data rows: it holds only the header {_shown(columns)}."
        )
    # the label column is chosen once (from the values, when no column is named for it)
    parsed = _parse_frame(frame, label_column, vector_column, where=where, label=label)
    return parsed, _sha256(raw), None


def _check_header(columns: list[str], label: str, *, by_name: bool, where: str) -> None:
    """Refuse a file whose first row looks like data: pandas took it for the column names."""
    if by_name or label in LABEL_COLUMN_NAMES:
        return  # the label column was found by its name, so there is a header row
    others = [c for c in columns if c != label]
    if not all(_parses_as_number(c) for c in others):
        return
    # pandas' default names for a frame's columns: 0, 1, ..., d-1 (or 1, ..., d)
    if others in ([str(j) for j in range(len(others))], [str(j + 1) for j in range(len(others))]):
        return
    raise InvalidInputError(
        f"{where!r} seems to have no header row: every column name other than the label "
        f"column {label!r} parses as a number ({_shown(others)}), so its first row would be lost "
        "as column names; add a header row (e.g. `label,e0,e1,...`)."
    )


def _parses_as_number(name: str) -> bool:
    """Whether a column name is a number or a text vector of numbers ("[0.1, 0.2]")."""
    tokens = name.strip(_STRIP).replace(",", " ").split()
    if not tokens:
        return False
    try:
        [float(t) for t in tokens]
    except ValueError:
        return False
    return True


def read_parquet(
    path: str | os.PathLike[str],
    *,
    label_column: str | None,
    vector_column: str | list[str] | None,
) -> Read:
    """Read a Parquet file (see :meth:`EmbeddingSet.from_parquet`); it holds no outcomes."""
    try:
        import pyarrow.parquet as pq
    except ImportError as exc:  # pragma: no cover - pyarrow is in the test environment
        raise ImportError(
            'Reading Parquet needs pyarrow: pip install "idaudit[io]" (or pip install pyarrow).'
        ) from exc
    raw = _read_bytes(path)
    where = os.fspath(path)
    try:
        table = pq.read_table(io.BytesIO(raw))
    except Exception as exc:  # pyarrow raises its own ArrowInvalid/OSError family
        raise InvalidInputError(f"cannot read {where!r} as Parquet: {exc}") from exc
    # integer labels with nulls stay exact Python ints (not float64, which merges ids > 2**53)
    frame = table.to_pandas(integer_object_nulls=True)
    if len(frame) == 0 and frame.shape[1] >= 2:
        raise InvalidInputError(f"{where!r} has no data rows.")
    parsed = _parse_frame(frame, label_column, vector_column, where=where)
    return parsed, _sha256(raw), None


def read_npz(path: str | os.PathLike[str], *, embeddings_key: str, labels_key: str) -> Read:
    """Read a ``.npz`` archive without unpickling (see :meth:`EmbeddingSet.from_npz`).

    Returns ``(parsed, sha256, outcomes)``: ``outcomes`` is the archive's
    :data:`OUTCOMES_KEY` array, checked (one non-empty string per row), or None if it has none.
    """
    raw = _read_bytes(path)
    where = os.fspath(path)
    if not raw.startswith(_ZIP_MAGIC):
        # numpy would try the bytes as a pickle and suggest loading them "unsafely": never
        raise InvalidInputError(
            f"{where!r} is not a .npz archive (the zip of .npy arrays that numpy.savez "
            f"writes): {_what_it_is(raw)}."
        )
    try:
        archive = np.load(io.BytesIO(raw), allow_pickle=False)
    except (ValueError, OSError, EOFError, zipfile.BadZipFile, NotImplementedError) as exc:
        # NotImplementedError: a damaged directory can announce a zip version or compression
        # that zipfile does not implement
        raise InvalidInputError(f"cannot read {where!r} as .npz: {exc}") from exc
    with archive:
        keys = list(archive.keys())
        for name, key in (("embeddings_key", embeddings_key), ("labels_key", labels_key)):
            if key not in keys:
                raise InvalidInputError(f"`{name}` {key!r} is not in {where!r}; it holds {keys}.")
        try:
            x = archive[embeddings_key]
            labels = archive[labels_key]
            outcomes = archive[OUTCOMES_KEY] if OUTCOMES_KEY in keys else None
        except (zipfile.BadZipFile, zlib.error, EOFError, OSError, NotImplementedError,
                RuntimeError) as exc:  # fmt: skip
            # a damaged archive: the zip directory reads, a member's bytes do not (a flipped
            # flag byte reads as "encrypted", RuntimeError; a flipped method as unsupported)
            raise InvalidInputError(
                f"{where!r} is a damaged .npz archive ({exc}); write it again."
            ) from exc
        except ValueError as exc:  # object arrays need pickle
            if "pickle" not in str(exc):
                # a member whose .npy header or data is cut short or garbled
                raise InvalidInputError(
                    f"{where!r} is a damaged .npz archive ({exc}); write it again."
                ) from exc
            raise InvalidInputError(
                f"{where!r} stores Python objects, which idaudit never unpickles; "
                "save the embeddings as a float array, the labels as a string or integer "
                f"array and any {OUTCOMES_KEY!r} as a string array."
            ) from exc
    x = as_float_matrix(x)
    labels = as_label_array(labels, x.shape[0])
    if outcomes is not None:
        try:
            outcomes = as_outcome_array(outcomes, x.shape[0])
        except InvalidInputError as exc:
            raise InvalidInputError(f"the {OUTCOMES_KEY!r} array of {where!r}: {exc}") from exc
    return (x, labels, np.zeros(x.shape[0], dtype=np.int8)), _sha256(raw), outcomes


# ---------------------------------------------------------------------- frames
def _parse_frame(
    frame: pd.DataFrame,
    label_column: str | None,
    vector_column: str | list[str] | None,
    *,
    where: str,
    label: str | None = None,
) -> Parsed:
    columns = [str(c) for c in frame.columns]
    frame.columns = pd.Index(columns)
    if len(columns) < 2:
        raise InvalidInputError(
            f"the table must have a label column and at least one vector column; got "
            f"columns {columns}."
        )
    if label is None and label_column is None and not _named_label(columns):
        label = _guess_label_column(frame, where, stacklevel=5)
    elif label is None:
        label = _choose_label_column(columns, label_column)
    if vector_column is None:
        # columns without a header name are never guessed into a role: the usual one is the
        # row index that DataFrame.to_csv writes by default, which would become coordinate 0
        unnamed = [c for c in columns if _UNNAMED.match(c) and c != label_column]
        if unnamed:
            raise InvalidInputError(
                f"column(s) {unnamed} have no header name (a row index written by "
                "DataFrame.to_csv? save with index=False); name the vector column(s) with "
                "`vector_column` and the labels with `label_column` to use this file as it is."
            )
    labels = _check_labels(frame[label], label)
    if isinstance(vector_column, str) and vector_column not in columns:
        vector_column = [vector_column]  # a pattern or range: expanded with the lists below

    if isinstance(vector_column, str):
        _check_columns(columns, [vector_column], "vector_column")
        x, reasons = _parse_single_column(frame[vector_column])
    elif vector_column is not None:
        cols = _expand_columns(columns, [str(c) for c in vector_column], label, frame)
        x, reasons = _parse_numeric_columns(frame, cols, explicit=True)
    else:
        cols = [c for c in columns if c != label]
        if len(cols) == 1 and not pd.api.types.is_numeric_dtype(frame[cols[0]]):
            x, reasons = _parse_single_column(frame[cols[0]])
        else:
            x, reasons = _parse_numeric_columns(
                frame, _numeric_columns(frame, cols), explicit=False
            )
    return x, labels, reasons


def _expand_columns(
    columns: list[str], specs: list[str], label: str, frame: pd.DataFrame
) -> list[str]:
    """Return the vector columns that a list of names, patterns and ranges names, checked.

    Each entry is a column's name, a pattern (``"f*"``) or an inclusive range of columns in
    file order (``"f0:f127"``); a column's own name always wins over the other readings.
    Refused: a column named twice, and a column a pattern or range matched that holds only
    text (a file name swept in by ``"f*"`` would otherwise fail every row as unparseable).
    """
    if not specs:
        raise InvalidInputError("`vector_column` must name at least one column; got [].")
    cols: list[str] = []
    for spec in specs:
        if spec in columns:
            cols.append(spec)
            continue
        matched = _matching_columns(columns, spec, label)
        text = [c for c in matched if c in _text_columns(frame, matched)]
        if text:
            raise InvalidInputError(
                f"`vector_column` {spec!r} matched column(s) {text} that hold text, not "
                f"numbers (it matched {matched}); narrow the pattern or name the columns."
            )
        cols.extend(matched)
    twice = sorted({c for c in cols if cols.count(c) > 1})
    if twice:
        raise InvalidInputError(f"`vector_column` names column(s) {twice} more than once.")
    return cols


def _matching_columns(columns: list[str], spec: str, label: str) -> list[str]:
    """Columns a ``vector_column`` pattern (``"f*"``) or inclusive range (``"f0:f127"``) names."""
    others = [c for c in columns if c != label]
    if not any(ch in spec for ch in "*?[:"):
        _check_columns(columns, [spec], "vector_column")  # a name that is not there: say so
    if any(ch in spec for ch in "*?["):
        chosen = [c for c in others if fnmatch.fnmatchcase(c, spec)]
    elif spec.count(":") == 1 and all(end in others for end in spec.split(":")):
        first, last = (others.index(end) for end in spec.split(":"))
        if first > last:
            raise InvalidInputError(
                f"`vector_column` range {spec!r} runs backwards: {spec.split(':')[1]!r} comes "
                f"before {spec.split(':')[0]!r} in the file; write it first:last in file order."
            )
        chosen = others[first : last + 1]
    else:
        chosen = []
    if not chosen:
        raise InvalidInputError(
            f"`vector_column` {spec!r} is not a column, a pattern (e.g. 'f*') matching "
            f"columns, or a range 'first:last' of columns in file order; its columns are "
            f"{_shown(columns)}."
        )
    return chosen


def _text_columns(frame: pd.DataFrame, cols: list[str]) -> list[str]:
    """Return the columns among ``cols`` none of whose filled cells is a number."""
    text = []
    for c in cols:
        col = frame[c]
        if pd.api.types.is_numeric_dtype(col) or pd.api.types.is_bool_dtype(col):
            continue
        filled = col.notna().to_numpy()
        numbers = pd.to_numeric(col, errors="coerce").notna().to_numpy()
        if filled.any() and not numbers[filled].any():
            text.append(c)
    return text


def _numeric_columns(frame: pd.DataFrame, cols: list[str]) -> list[str]:
    """Return the vector columns when none are named, leaving out columns of text only.

    A column is text when none of its filled cells is a number (a file name, a note): such
    a column cannot be a coordinate, so it is left out, with a warning naming it. A column
    with some numbers and some text stays a coordinate (its text cells make their rows
    unparseable). When no numeric column would remain, every column is kept, so the parser
    reports what is wrong.
    """
    text = _text_columns(frame, cols)
    kept = [c for c in cols if c not in text]
    if not text or not kept:
        return cols
    shown = kept[0] if len(kept) == 1 else f"{kept[0]} ... {kept[-1]}"
    warnings.warn(
        f"column(s) {text} hold text, not numbers, and are left out of the vectors, which are "
        f"the {len(kept)} numeric column(s) {shown}. If one of them holds the identity labels, "
        "name it with `label_column`; name the vector columns with `vector_column` to choose "
        "them yourself.",
        IdauditWarning,
        stacklevel=5,  # _numeric_columns <- _parse_frame <- read_* <- from_* <- the caller
    )
    return kept


def _check_labels(col: pd.Series, label: str) -> npt.NDArray[Any]:
    """Return the label column, checked as the ``labels`` of :class:`EmbeddingSet` are."""
    values = col.to_numpy()
    if values.dtype.kind == "O" or not isinstance(col.dtype, np.dtype):
        # extension dtypes (str, Int64, ...): plain objects with NaN for missing
        values = col.astype(object).where(col.notna(), np.nan).to_numpy(dtype=object)
    try:
        return as_label_array(values, len(col))
    except (TypeError, InvalidInputError) as exc:
        raise type(exc)(f"label column {label!r}: {exc}") from exc


def _choose_label_column(columns: list[str], label_column: str | None) -> str:
    """Return the column ``label_column`` names, else the first of :data:`LABEL_COLUMN_NAMES`."""
    if label_column is not None:
        _check_columns(columns, [label_column], "label_column")
        return label_column
    named = _named_label(columns)
    if named is None:  # pragma: no cover - callers guess from the values first
        raise InvalidInputError("no column is named for the labels; give `label_column`.")
    return named


def _named_label(columns: list[str]) -> str | None:
    """Return the first of :data:`LABEL_COLUMN_NAMES` that is a column, if any."""
    return next((name for name in LABEL_COLUMN_NAMES if name in columns), None)


def _guess_label_column(frame: pd.DataFrame, where: str, *, stacklevel: int) -> str:
    """Choose the label column of a table none of whose columns is named for the labels.

    A single column of text (other than text or list vectors) is the label column wherever
    it stands (said in a warning when it is not the first), unless the first column holds
    integers, which may be identities too; that, and several text columns, are ambiguous
    and refused. Without a column of text, the first column holds the labels (integer
    identities) unless it holds fractions, which are coordinates, not identities, or another
    column holds integers too (quantised coordinates, or the identities elsewhere): both
    refused. Columns without a header name (a written row index) are never candidates.
    ``stacklevel`` makes the warning point at the user's call.
    """
    columns = [str(c) for c in frame.columns]
    text = [
        c
        for c in _text_columns(frame, columns)
        if not _UNNAMED.match(c) and not _holds_vectors(frame[c])
    ]
    named = [c for c in columns if not _UNNAMED.match(c)] or columns  # unnamed: refused later
    first = named[0]
    values = pd.to_numeric(frame[first], errors="coerce").to_numpy(
        dtype=np.float64, na_value=np.nan
    )
    finite = values[np.isfinite(values)]
    integers = _integer_valued(frame[first])

    def unsure(why: str) -> InvalidInputError:
        return InvalidInputError(
            f"cannot tell which column of {where!r} holds the identity labels: none is named "
            f"{', '.join(LABEL_COLUMN_NAMES)}{why}; name the label column with `label_column`."
        )

    if len(text) == 1 and text[0] != first and integers:
        raise unsure(
            f"; {text[0]!r} is the only one holding text, but the first, {first!r}, holds "
            "integers, which may be identities too"
        )
    if len(text) == 1:
        if text[0] != first:
            warnings.warn(
                f"no column of {where!r} is named {' or '.join(LABEL_COLUMN_NAMES)}; column "
                f"{text[0]!r}, the only one holding text, is taken as the identity labels "
                "(name the label column with `label_column` to choose another).",
                IdauditWarning,
                # read_csv calls this directly (4 frames below the caller), _parse_frame for
                # Parquet (5)
                stacklevel=stacklevel,
            )
        return text[0]
    if len(text) > 1:
        raise unsure(f", and {len(text)} columns hold text ({_shown(text)})")
    if finite.size and not integers:
        raise unsure(
            f" or holds text, and the first, {first!r}, holds fractions (a coordinate, not an "
            "identity)"
        )
    also = [c for c in named[1:] if _integer_valued(frame[c])]
    if also:  # quantised coordinates, or an identity column elsewhere: either is a guess
        raise unsure(
            f" or holds text, and besides the first, {first!r}, {len(also)} more hold integers "
            f"({_shown(also)}), which may be identities too"
        )
    return first


def _integer_valued(col: pd.Series) -> bool:
    """Whether a column's numeric cells exist and are all whole numbers."""
    values = pd.to_numeric(col, errors="coerce").to_numpy(dtype=np.float64, na_value=np.nan)
    finite = values[np.isfinite(values)]
    return finite.size > 0 and bool(np.all(finite == np.round(finite)))


def _holds_vectors(col: pd.Series) -> bool:
    """Whether a column's first filled cells are vectors (lists, or text like "[0.1, 0.2]")."""
    filled = [v for v in col.to_numpy(dtype=object)[:20] if not _is_missing(v)]

    def vector(v: Any) -> bool:
        if not isinstance(v, str):
            return hasattr(v, "__len__")  # a list or array cell of a Parquet file
        if "(" in v:
            v = _CALL.sub("", v).replace(")", " ")  # "array([0.1, ...])"
        return _parses_as_number(v) and len(v.strip(_STRIP).replace(",", " ").split()) >= 2

    return bool(filled) and all(vector(v) for v in filled)


def _check_columns(columns: list[str], wanted: list[str], argument: str) -> None:
    missing = [c for c in wanted if c not in columns]
    if missing:
        raise InvalidInputError(
            f"`{argument}` names column(s) {missing} not in the file; its columns are "
            f"{_shown(columns)}."
        )


def _parse_numeric_columns(
    frame: pd.DataFrame, cols: list[str], *, explicit: bool
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.int8]]:
    """Parse numeric columns into (n, d); non-numbers in them mark the row unparseable."""
    reasons = np.zeros(len(frame), dtype=np.int8)
    flags = [c for c in cols if pd.api.types.is_bool_dtype(frame[c])]
    if flags and not explicit:  # named in `vector_column`: the caller wants them as 0 / 1
        raise InvalidInputError(
            f"column(s) {flags} hold true/false values, not embedding coordinates; name the "
            "vector column(s) with `vector_column`."
        )
    numeric = [
        pd.api.types.is_numeric_dtype(frame[c]) and not pd.api.types.is_bool_dtype(frame[c])
        for c in cols
    ]
    # one block copy for the numeric columns (the common case: all of them)
    x = np.ascontiguousarray(
        frame[cols].to_numpy(dtype=np.float64, na_value=np.nan)
        if all(numeric)
        else np.full((len(frame), len(cols)), np.nan)
    )
    if all(numeric):
        return x, reasons
    num_idx = [j for j, ok in enumerate(numeric) if ok]
    if num_idx:
        x[:, num_idx] = frame[[cols[j] for j in num_idx]].to_numpy(
            dtype=np.float64, na_value=np.nan
        )
    for j in (j for j, ok in enumerate(numeric) if not ok):
        col = frame[cols[j]]
        values = pd.to_numeric(col, errors="coerce").to_numpy(dtype=np.float64, na_value=np.nan)
        bad = np.isnan(values) & ~col.isna().to_numpy()
        if not explicit and bad.all():
            raise InvalidInputError(
                f"column {cols[j]!r} is not numeric; if it holds the labels, name it with "
                "`label_column`; otherwise name the vector column(s) with `vector_column`."
            )
        reasons[bad & (reasons == 0)] = _UNPARSEABLE
        x[:, j] = values
    return x, reasons


def _parse_single_column(col: pd.Series) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.int8]]:
    """One column of text vectors or of lists/arrays -> (n, d)."""
    if pd.api.types.is_numeric_dtype(col):
        return _parse_numeric_columns(col.to_frame(), [str(col.name)], explicit=True)
    values = col.to_numpy(dtype=object)
    first = next((v for v in values if not _is_missing(v)), None)
    if first is None or isinstance(first, str):
        return _parse_text_vectors(values)
    return _parse_list_vectors(values)


def _parse_list_vectors(
    values: npt.NDArray[Any],
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.int8]]:
    """Cells holding sequences (Parquet list columns) -> (n, d)."""
    n = len(values)
    reasons = np.zeros(n, dtype=np.int8)
    lengths = np.full(n, -1, dtype=np.int64)
    for i, v in enumerate(values):
        if _is_missing(v):
            reasons[i] = _MISSING
        elif isinstance(v, str) or not hasattr(v, "__len__"):
            reasons[i] = _UNPARSEABLE
        else:
            lengths[i] = len(v)
    dim = _common_length(lengths[reasons == 0])
    reasons[(reasons == 0) & (lengths != dim)] = _UNPARSEABLE
    x = np.full((n, max(dim, 1)), np.nan)
    good = np.flatnonzero(reasons == 0)
    for row in good.tolist():
        try:
            x[row] = np.asarray(values[row], dtype=np.float64)
        except (TypeError, ValueError):
            reasons[row] = _UNPARSEABLE
    return x, reasons


def _parse_text_vectors(
    values: npt.NDArray[Any],
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.int8]]:
    """Cells like "[0.1, 0.2]", "0.1,0.2" or "0.1 0.2" -> (n, d), parsed in one pass."""
    n = len(values)
    reasons = np.zeros(n, dtype=np.int8)
    rows: list[str] = []
    lengths = np.full(n, -1, dtype=np.int64)
    for i, v in enumerate(values):
        if _is_missing(v):
            reasons[i] = _MISSING
            rows.append("")
            continue
        s = str(v)
        if "(" in s:
            # reprs such as "array([0.1, ...])" or "[np.float64(0.1), ...]"
            s = _CALL.sub("", s).replace(")", " ")
        s = s.strip(_STRIP)
        if not s:
            reasons[i] = _MISSING
            rows.append("")
            continue
        if "," in s:
            if "\n" in s or "\r" in s:
                s = _WHITESPACE.sub(" ", s)
        else:
            s = ",".join(s.split())
        rows.append(s)
        lengths[i] = s.count(",") + 1
    dim = _common_length(lengths[reasons == 0])
    reasons[(reasons == 0) & (lengths != dim)] = _UNPARSEABLE
    good = np.flatnonzero(reasons == 0)
    x = np.full((n, max(dim, 1)), np.nan)
    if len(good):
        x[good] = _parse_rows([rows[i] for i in good], dim, reasons, good)
    return x, reasons


def _parse_rows(
    rows: list[str], dim: int, reasons: npt.NDArray[np.int8], positions: npt.NDArray[np.intp]
) -> npt.NDArray[np.float64]:
    """Comma-separated rows of ``dim`` tokens -> (len(rows), dim); bulk C parser first."""
    try:
        block: npt.NDArray[np.float64] = pd.read_csv(
            io.StringIO("\n".join(rows)),
            header=None,
            names=range(dim),
            sep=",",
            skipinitialspace=True,
            dtype=np.float64,
            engine="c",
            skip_blank_lines=False,
        ).to_numpy(dtype=np.float64)
        if block.shape == (len(rows), dim):
            return block
    except (ValueError, pd.errors.ParserError):
        pass
    # slow path, only when some row holds a token that is not a number
    out = np.full((len(rows), dim), np.nan)
    for j, row in enumerate(rows):
        try:
            out[j] = np.asarray(row.split(","), dtype=np.float64)
        except ValueError:
            reasons[positions[j]] = _UNPARSEABLE
    return out


def _common_length(lengths: npt.NDArray[np.int64]) -> int:
    """Most common vector length (ties: the smallest); 0 when there is none."""
    if lengths.size == 0:
        return 0
    return int(np.argmax(np.bincount(lengths)))


def _is_missing(v: Any) -> bool:
    if v is None:
        return True
    if isinstance(v, float) and np.isnan(v):
        return True
    return v is pd.NA or v is pd.NaT


#: How a .npz archive starts: a zip local file header, or the end record of an empty zip.
_ZIP_MAGIC = (b"PK\x03\x04", b"PK\x05\x06")


def _what_it_is(raw: bytes) -> str:
    """Say what a file that is not a zip archive looks like, from its first bytes."""
    if not raw:
        return "it is empty"
    if raw.startswith(b"\x93NUMPY"):
        return "it is a single .npy array (numpy.save), which holds no labels"
    head = raw[:4096]
    try:
        head.decode("utf-8")
    except UnicodeDecodeError as exc:
        if exc.start < len(head) - 3:  # not merely a character cut at the end of the head
            return "its first bytes are not a zip header"
    return "it holds text (if it is a CSV file, give it the .csv suffix)"


def _read_bytes(path: str | os.PathLike[str]) -> bytes:
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"`path` must be a str or os.PathLike; got {type(path).__name__}.")
    return Path(path).read_bytes()


def _shown(names: list[str]) -> list[str]:
    """Return the first 8 names, then "..." when there are more (short enough for a message)."""
    return names if len(names) <= 8 else [*names[:8], "..."]


def _sha256(raw: bytes) -> str:
    return hashlib.sha256(raw).hexdigest()
