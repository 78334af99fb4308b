"""The form of every report: one markdown table, one way to print a number, the verdict.

Every report table goes through :func:`table`: a header row, an optional row of formal
statuses (one per column, in italics), an optional row of column flags (a column that carries
no information says so where it stands), then the body. Every number in a report goes through
:func:`number`, so that one noise level, one ε, one ``+∞`` reads the same everywhere. A
report opens with :func:`verdict_section`: at most six one-sentence :class:`Bullet` s, each led
by the status word of the number it rests on.

What the reports *say* (the ceilings, the routes, the controls, the documents) lives in the
end-to-end layer, :mod:`idaudit.pipeline`'s report renderer; the science packages use only
this form, so that their results objects can print themselves without importing upwards.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from idaudit._results import STATUSES
from idaudit.exceptions import InvalidInputError

__all__ = [
    "Bullet",
    "number",
    "statuses_section",
    "table",
    "verdict_section",
    "warnings_section",
]

#: The mark in front of a column flag (a column that is all +∞, or all at its ceiling).
FLAG = "⚑"


def number(value: Any, digits: int = 3) -> str:
    """Print a number as every report does: ``digits`` significant digits, ``+∞``, ``–``.

    Parameters
    ----------
    value : float, int, str or None
        A string is returned as is; ``None`` and NaN print as ``–``.
    digits : int, default 3
        Significant digits of a float (integers print whole).

    Returns
    -------
    str

    Examples
    --------
    >>> from idaudit._markdown import number
    >>> [number(0.177828), number(float("inf")), number(float("nan")), number(12)]
    ['0.178', '+∞', '–', '12']
    """
    if value is None:
        return "–"
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int) or (hasattr(value, "dtype") and value.dtype.kind in "iu"):
        return str(int(value))
    x = float(value)
    if math.isnan(x):
        return "–"
    if math.isinf(x):
        return "+∞" if x > 0 else "−∞"
    return f"{x:.{digits}g}"


def table(
    header: Sequence[str],
    rows: Sequence[Sequence[Any]],
    *,
    statuses: Mapping[str, str] | Sequence[str] | None = None,
    flags: Mapping[str, str] | None = None,
    digits: int = 3,
) -> str:
    """Return a GitHub markdown table: header, statuses, column flags, then the rows.

    Parameters
    ----------
    header : sequence of str
        Column names.
    rows : sequence of sequences
        One sequence of cells per row, as long as ``header``; each cell goes through
        :func:`number` (strings are kept).
    statuses : mapping of column to status, or sequence of statuses, optional
        Each column's formal status, printed in italics in a row under the header (empty for
        columns without one). Underscores are kept: the status reads as the results core
        writes it.
    flags : mapping of column to str, optional
        A short note per column that carries no information here (all +∞, all at a ceiling),
        printed as ``⚑ note`` in a row of its own under the statuses.
    digits : int, default 3
        Significant digits of floats.

    Returns
    -------
    str
        The table, each line ending in a newline.

    Raises
    ------
    InvalidInputError
        If a row, the statuses or a flag do not match the header.

    Examples
    --------
    >>> from idaudit._markdown import table
    >>> print(table(["pair", "ε"], [["a–b", 0.5]], statuses={"ε": "sample_estimate"}), end="")
    | pair | ε |
    |---|---|
    | | *sample_estimate* |
    | a–b | 0.5 |
    """
    cols = [str(c) for c in header]
    if not cols:
        raise InvalidInputError("`header` must name at least one column; got none.")
    if isinstance(statuses, Mapping):
        unknown = set(statuses) - set(cols)
        if unknown:
            raise InvalidInputError(
                f"`statuses` must name columns of the header; got {sorted(unknown)!r}."
            )
        status_row = [str(statuses.get(c, "")) for c in cols]
    elif statuses is not None:
        status_row = [str(s) for s in statuses]
        if len(status_row) != len(cols):
            raise InvalidInputError(
                f"`statuses` must give one status per column ({len(cols)}); got {len(status_row)}."
            )
    else:
        status_row = []
    flags = dict(flags or {})
    unknown = set(flags) - set(cols)
    if unknown:
        raise InvalidInputError(
            f"`flags` must name columns of the header; got {sorted(unknown)!r}."
        )

    def line(cells: Sequence[str]) -> str:
        return "| " + " | ".join(c.replace("|", "\\|") if c else "" for c in cells) + " |"

    lines = [line(cols), "|" + "---|" * len(cols)]
    if any(status_row):
        lines.append(line([f"*{s}*" if s else "" for s in status_row]))
    if flags:
        lines.append(line([f"{FLAG} {flags[c]}" if c in flags else "" for c in cols]))
    for i, row in enumerate(rows):
        cells = list(row)
        if len(cells) != len(cols):
            raise InvalidInputError(
                f"`rows` must have {len(cols)} cells each; row {i} has {len(cells)}."
            )
        lines.append(line([number(v, digits) for v in cells]))
    return "\n".join(_tidy(x) for x in lines) + "\n"


def _tidy(line: str) -> str:
    """Write an empty cell as ``| |`` (one space), as GitHub and the tests read it."""
    while "|  |" in line:
        line = line.replace("|  |", "| |")
    return line


#: The word each status carries in a verdict bullet.
STATUS_WORD = {
    "certified_lower_bound": "certified",
    "certified_upper_bound": "certified",
    "sample_estimate": "estimate",
    "diagnostic": "diagnostic",
    "reference": "reference",
    "descriptive": "descriptive",
}

#: At most this many bullets in a verdict.
MAX_BULLETS = 6


@dataclass(frozen=True)
class Bullet:
    """One sentence of a verdict and the status of the number it rests on."""

    status: str
    text: str

    def __post_init__(self) -> None:
        if self.status not in STATUS_WORD:
            raise InvalidInputError(
                f"`status` must be one of {sorted(STATUS_WORD)}; got {self.status!r}."
            )


def verdict_section(bullets: Sequence[Bullet], *, heading: str = "## Verdict") -> list[str]:
    """Return the verdict: at most :data:`MAX_BULLETS` bullets, each led by its status word.

    Bullets beyond the sixth are dropped (the builders order them by weight).
    """
    if not bullets:
        return []
    return [
        heading,
        "",
        *(f"- **{STATUS_WORD[b.status]}** — {b.text}" for b in bullets[:MAX_BULLETS]),
        "",
    ]


def warnings_section(sentences: Iterable[str], *, heading: str = "## Warnings") -> list[str]:
    """Return one bullet per warning; nothing when there is none."""
    said = list(sentences)
    return [heading, "", *(f"- {s}" for s in said), ""] if said else []


def statuses_section(
    statuses: Iterable[str], *, heading: str = "## What each status means"
) -> list[str]:
    """Explain each status used in the report once, in the results core's words."""
    used = [s for s in STATUSES if s in set(statuses)]
    return [heading, "", *(f"- *{s}*: {STATUSES[s]}." for s in used), ""] if used else []
