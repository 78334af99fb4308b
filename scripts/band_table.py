"""Regenerate the band's table of searched levels, ``_GRID_LOG_RATIO`` in ``idaudit.dp._tradeoff``.

Run from the repository root::

    python scripts/band_table.py                       # the whole table (slow: see below)
    python scripts/band_table.py --sizes 10000         # its first column only (seconds)
    python scripts/band_table.py --sizes 10000 --alphas 0.05 0.2

Each entry is ``ln(α / level)``, with ``level`` the local level of the equal-local-level band
that :func:`idaudit.dp._tradeoff._searched_level` finds by root search (every rate of n
scores bounded at ``level``, the band jointly at ``α``), rounded to 4 decimals. The default
sizes and levels are those the table is indexed by (``_GRID_LOG_N``, ``_GRID_LOG_ALPHA``). It
prints the rows as they stand in the source, ready to paste over the table. The n = 10⁴
column takes well under a second per α; the 3·10⁵ column about two minutes of one core per α.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from idaudit.dp import _tradeoff

#: The table's sizes and levels, as indexed in ``idaudit.dp._tradeoff``.
SIZES: tuple[int, ...] = tuple(round(float(n)) for n in np.exp(_tradeoff._GRID_LOG_N))
ALPHAS: tuple[float, ...] = tuple(float(f"{a:.6g}") for a in np.exp(_tradeoff._GRID_LOG_ALPHA))


def log_ratio(n: int, alpha: float) -> float:
    """Return ``ln(α / level)`` of the searched band level at n scores, rounded to 4 decimals."""
    return round(math.log(alpha / _tradeoff._searched_level(n, alpha)), 4)


def band_table(
    sizes: Sequence[int] = SIZES, alphas: Sequence[float] = ALPHAS
) -> npt.NDArray[np.float64]:
    """Return the table: one row per ``alpha``, one column per size."""
    return np.array([[log_ratio(n, a) for n in sizes] for a in alphas])


def render(table: npt.ArrayLike, alphas: Sequence[float] = ALPHAS) -> str:
    """Return the rows as they are written in ``idaudit.dp._tradeoff``."""
    rows = np.atleast_2d(np.asarray(table, dtype=np.float64))
    return "\n".join(
        "        [" + ", ".join(f"{v:.4f}" for v in row) + f"],  # α = {a:g}"
        for row, a in zip(rows, alphas, strict=True)
    )


def main(argv: Sequence[str] | None = None) -> None:
    """Print the table for the sizes and levels asked for (default: the whole table)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=list(SIZES))
    parser.add_argument("--alphas", type=float, nargs="+", default=list(ALPHAS))
    args = parser.parse_args(argv)
    print(render(band_table(args.sizes, args.alphas), args.alphas))


if __name__ == "__main__":
    main()
