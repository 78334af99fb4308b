"""Can a test reject at all? Smallest attainable permutation p-values and unresolved percentiles.

With two images per split the flagging test has six distinct relabellings, so no p-value falls
below 1/6 ≈ 0.167 whatever the data: a non-rejection then says nothing. These helpers say
when the sizes leave a test without power, so that no report turns that into "no evidence".
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
import pandas as pd

from idaudit._validation import check_in_range, check_integer

__all__ = [
    "flagging_smallest_p",
    "nnaa_smallest_p",
    "power_notes",
    "smallest_p_value",
    "unresolved_percentiles",
]


def smallest_p_value(groups: Iterable[tuple[int, int]], n_permutations: int) -> float:
    """Smallest p-value a permutation test of two labels can give.

    Parameters
    ----------
    groups : iterable of (int, int)
        Per stratum, the sizes of the two labelled sets whose labels are permuted within the
        stratum (one pair for an unstratified test).
    n_permutations : int
        Random relabellings ``B``; the p-value is ``(1 + b)/(1 + B)``.

    Returns
    -------
    float
        ``max(1/M, 1/(1 + B))`` with ``M = Π C(a + b, a)`` the distinct relabellings: the exact
        test cannot go below ``1/M``, the Monte-Carlo one not below ``1/(1 + B)``.

    Examples
    --------
    >>> from idaudit.memorization._power import smallest_p_value
    >>> round(smallest_p_value([(2, 2)], 1000), 3)  # 6 relabellings
    0.167
    """
    b = check_integer(n_permutations, "n_permutations", minimum=1)
    log_m = 0.0
    for a, c in groups:
        a = check_integer(a, "group size", minimum=0)
        c = check_integer(c, "group size", minimum=0)
        log_m += math.lgamma(a + c + 1) - math.lgamma(a + 1) - math.lgamma(c + 1)
    return max(math.exp(-log_m), 1.0 / (1.0 + b))


def unresolved_percentiles(percentiles: Sequence[float], n_heldout: int) -> list[float]:
    """Percentiles ``p`` (in %) that ``n_heldout`` held-out distances cannot resolve.

    The threshold at ``p`` is the ``⌈p·n/100⌉``-th smallest held-out distance, so the held-out
    rate is ``⌈p·n/100⌉/n``; when ``n < 100/p`` even the smallest distance flags ``1/n > p``
    of the held-out images (2 images: ``p = 1`` flags 50 %).
    """
    n = check_integer(n_heldout, "n_heldout", minimum=1)
    out = []
    for p in percentiles:
        p = check_in_range(p, "percentile", 0.0, 100.0, closed="right")
        if n * p / 100.0 < 1.0 - 1e-9:  # the first order statistic already flags 1/n > p
            out.append(float(p))
    return out


def power_notes(
    flagging: pd.DataFrame,
    nnaa: pd.DataFrame,
    alpha: float,
    n_permutations: int,
    by_cohort: pd.DataFrame | None = None,
) -> list[str]:
    """Sentences saying which tests cannot reject at ``alpha`` and which percentiles are coarse.

    ``flagging``, ``nnaa`` and ``by_cohort`` are the privacy check's tables
    (``FLAGGING_COLUMNS``, ``NNAA_COLUMNS``, ``FLAGGING_COHORT_COLUMNS``);
    ``n_permutations`` is the flagging test's.
    """
    notes: list[str] = []
    for metric, rows in flagging.groupby("metric", sort=False):
        first = rows.iloc[0]
        p_min = flagging_smallest_p(rows, by_cohort, str(metric), n_permutations)
        if np.isfinite(p_min) and p_min > alpha:
            notes.append(
                f"flagging ({metric}): with {int(first['n_synthetic'])} synthetic and "
                f"{int(first['n_heldout'])} held-out images (relabelled as whole subjects, "
                "within cohorts, where given) the smallest attainable p-value "
                f"is {p_min:.3g} > {alpha:g}: the test cannot reject, and a non-rejection is no "
                "evidence either way."
            )
        coarse = unresolved_percentiles(list(rows["percentile"]), int(first["n_heldout"]))
        if coarse:
            notes.append(
                f"flagging ({metric}): {int(first['n_heldout'])} held-out images do not resolve "
                f"p = {', '.join(f'{p:g}' for p in coarse)} %: the smallest held-out distance "
                f"already flags {100.0 / int(first['n_heldout']):.3g} % of them."
            )
    for r in nnaa.itertuples():
        p_min = nnaa_smallest_p(r)
        if np.isfinite(p_min) and p_min > alpha:
            notes.append(
                f"NNAA ({r.metric}, {r.cohort}): with {r.n_train} training and {r.n_heldout} "
                "held-out images (relabelled as whole subjects, within cohorts, where given) "
                f"the smallest attainable p-value is {p_min:.3g} > {alpha:g}: "
                "the test cannot reject."
            )
    return notes


def _stored_floor(values: Any) -> float | None:
    """Return the ``smallest_p_value`` a result recorded (its units, strata), if it did."""
    floor = pd.to_numeric(pd.Series(values), errors="coerce").dropna()
    return float(floor.max()) if len(floor) else None


def flagging_smallest_p(
    rows: pd.DataFrame, by_cohort: pd.DataFrame | None, metric: str, n_permutations: int
) -> float:
    """Smallest p-value of one metric's flagging test (labels permuted within cohorts).

    The ``smallest_p_value`` column a :class:`~idaudit.memorization.FlaggingResult` records
    counts the relabellings over the test's own units (whole subjects when given) within
    each cohort; tables without it fall back to image counts, which can only understate it.
    """
    b = int(n_permutations)
    if b < 1:
        return float("nan")
    if "smallest_p_value" in rows:
        stored = _stored_floor(rows["smallest_p_value"])
        if stored is not None:
            return stored
    groups: list[tuple[int, int]]
    if by_cohort is not None and len(by_cohort):
        cells = by_cohort[by_cohort["metric"] == metric].drop_duplicates("cohort")
        groups = [(int(c.n_synthetic), int(c.n_heldout)) for c in cells.itertuples()]
    else:
        first = rows.iloc[0]
        groups = [(int(first["n_synthetic"]), int(first["n_heldout"]))]
    return smallest_p_value(groups, b) if groups else float("nan")


def nnaa_smallest_p(r: Any) -> float:
    """Smallest p-value of one NNAA row's test (training and held-out units relabelled).

    The row's ``smallest_p_value`` (:class:`~idaudit.memorization.NNAAResult`) counts whole
    subjects and relabels within strata as the test does; rows without it fall back to
    image counts, which can only understate it.
    """
    b = int(getattr(r, "n_permutations", 0) or 0)
    if b < 1:
        return float("nan")
    stored = _stored_floor([getattr(r, "smallest_p_value", math.nan)])
    if stored is not None:
        return stored
    return smallest_p_value([(int(r.n_train), int(r.n_heldout))], b)
