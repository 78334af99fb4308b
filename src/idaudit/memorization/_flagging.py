"""Flagging at calibrated thresholds (seed 003, "Statistics"), with a p-value and exact CIs."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
import numpy.typing as npt
import pandas as pd
import torch
import xarray as xr

from idaudit._results import Status, provenance, variable
from idaudit._validation import (
    RngLike,
    check_in_range,
    check_integer,
    check_option,
    check_random_state,
)
from idaudit.dp import betting_mean_lower_bound, clopper_pearson_lower, clopper_pearson_upper
from idaudit.exceptions import InvalidInputError
from idaudit.memorization._neighbours import (
    DEFAULT_BLOCK_BYTES,
    Metric,
    check_vectors,
    nearest_neighbour_distances,
    same_dim,
)
from idaudit.memorization._power import smallest_p_value
from idaudit.memorization._subjects import check_set_subjects, check_subjects, unit_codes

__all__ = [
    "DEFAULT_PERCENTILES",
    "FLAGGING_STATUS",
    "INTERVAL_METHODS",
    "PERCENTILE_METHODS",
    "FlaggingResult",
    "flagging",
    "flagging_from_distances",
]

#: Seed 003's operating points (``--percentiles``).
DEFAULT_PERCENTILES: tuple[float, ...] = (1.0, 2.0, 5.0, 10.0, 20.0)

#: Definitions of the held-out percentile ``τ_p`` (``percentile_method``).
PercentileMethod = Literal["order_statistic", "linear"]
PERCENTILE_METHODS: tuple[str, ...] = ("order_statistic", "linear")

#: Formal status of every column of :meth:`FlaggingResult.to_frame`.
FLAGGING_STATUS: dict[str, Status] = {
    "percentile": "descriptive",
    "threshold": "sample_estimate",
    "synthetic_pct": "sample_estimate",
    "heldout_pct": "descriptive",
    "n_synthetic": "descriptive",
    "n_heldout": "descriptive",
    "n_synthetic_flagged": "descriptive",
    "n_heldout_flagged": "descriptive",
    "p_value": "sample_estimate",
    # the least p-value the relabellings can give (a function of the design, not the data)
    "smallest_p_value": "descriptive",
    "ci_lower": "certified_lower_bound",
    "ci_upper": "certified_upper_bound",
}

#: Permutations whose labels are drawn in one block (bounds the (block, n) temporaries).
_PERMUTATION_BLOCK = 512

#: Interval of the synthetic rate (:attr:`FlaggingResult.interval_method`): Clopper–Pearson
#: on images, or the betting interval on the flagged share of each synthetic group.
INTERVAL_METHODS: tuple[str, ...] = ("clopper_pearson", "betting_by_group")


def check_percentiles(percentiles: Any) -> npt.NDArray[np.float64]:
    """Return the percentiles as float64, each in (0, 100), distinct; raise naming the value."""
    try:
        values = np.atleast_1d(np.asarray(percentiles, dtype=np.float64))
    except (TypeError, ValueError) as exc:
        raise TypeError(f"`percentiles` must be numbers in (0, 100); got {percentiles!r}.") from exc
    if values.ndim != 1 or values.size == 0:
        raise InvalidInputError(f"`percentiles` must be a non-empty list; got {percentiles!r}.")
    bad = values[~((values > 0) & (values < 100))]
    if bad.size:
        raise InvalidInputError(f"`percentiles` must each be in (0, 100); got {float(bad[0])!r}.")
    if np.unique(values).size != values.size:
        raise InvalidInputError(f"`percentiles` must be distinct; got {values.tolist()!r}.")
    return values


def threshold_rank(percentile: float, n: int) -> int:
    """Rank ``k`` (1-based) of the order statistic that is the ``percentile``-th percentile.

    ``k = ceil(percentile · n / 100)``, at least 1: the smallest value with at least
    ``percentile`` % of the sample at or below it (numpy's ``method="inverted_cdf"``). The
    product is rounded to 9 decimals first so that, e.g., ``10 % of 50`` is rank 5, not 6.
    """
    return max(1, math.ceil(round(percentile * n / 100.0, 9)))


@dataclass(frozen=True)
class FlaggingResult:
    """Flagging rates at thresholds calibrated on held-out distances.

    Attributes
    ----------
    percentiles : numpy.ndarray, shape (k,)
        The operating points ``p`` (percent).
    thresholds : numpy.ndarray, shape (k,)
        ``τ_p``, the ``p``-th percentile of the pooled held-out distances
        (:func:`threshold_rank`). Status: sample estimate.
    n_synthetic_flagged, n_heldout_flagged : numpy.ndarray of int, shape (k,)
        Images at distance ``<= τ_p`` from their nearest training image.
    n_synthetic, n_heldout : int
        Images compared.
    p_values : numpy.ndarray, shape (k,)
        One-sided permutation p-values of "synthetic images land at or below ``τ_p`` more
        often than held-out images do" (NaN with ``n_permutations=0``). Status: sample estimate.
    ci_lower, ci_upper : numpy.ndarray, shape (k,)
        Two-sided interval for the synthetic rate at ``τ_p``, at ``confidence_level``: exact
        Clopper–Pearson when the synthetic images are independent, the betting interval on
        group shares when synthetic groups hold several images (``interval_method``).
        Status: certified lower / upper bound (given the threshold).
    confidence_level : float
    n_permutations : int
    heldout_distances, synthetic_distances : numpy.ndarray
        Every image's distance to its nearest training image.
    interval_method : str
        ``"clopper_pearson"`` or ``"betting_by_group"`` (:data:`INTERVAL_METHODS`).
    n_synthetic_groups : int
        Independent units behind the interval: synthetic groups (subjects) when given,
        else images.
    smallest_p_value : float
        The least p-value the test can give: ``max(1/M, 1/(1 + n_permutations))`` with
        ``M = Π_c C(g_h,c + g_s,c, g_h,c)`` the distinct relabellings, counted over the
        permutation units (subjects when given, else images) of each cohort ``c``. Above the
        level, the test cannot reject whatever the images. NaN with ``n_permutations=0``.
    """

    percentiles: npt.NDArray[np.float64]
    thresholds: npt.NDArray[np.float64]
    n_synthetic_flagged: npt.NDArray[np.int64]
    n_heldout_flagged: npt.NDArray[np.int64]
    n_synthetic: int
    n_heldout: int
    p_values: npt.NDArray[np.float64]
    ci_lower: npt.NDArray[np.float64]
    ci_upper: npt.NDArray[np.float64]
    confidence_level: float
    n_permutations: int
    heldout_distances: npt.NDArray[np.float64] = field(repr=False)
    synthetic_distances: npt.NDArray[np.float64] = field(repr=False)
    interval_method: str = "clopper_pearson"
    n_synthetic_groups: int = 0
    smallest_p_value: float = math.nan

    @property
    def synthetic_rate(self) -> npt.NDArray[np.float64]:
        """Fraction of synthetic images flagged at each percentile (status: sample estimate)."""
        return self.n_synthetic_flagged / self.n_synthetic

    @property
    def heldout_rate(self) -> npt.NDArray[np.float64]:
        """Fraction of held-out images flagged (``k/n`` by construction, more with ties)."""
        return self.n_heldout_flagged / self.n_heldout

    def to_frame(self, metric: str | None = None) -> pd.DataFrame:
        """One row per percentile; rates and interval bounds in percent.

        Columns ``percentile, threshold, synthetic_pct, heldout_pct, n_synthetic, n_heldout,
        n_synthetic_flagged, n_heldout_flagged, p_value, smallest_p_value, ci_lower, ci_upper``
        (preceded by
        ``metric`` when given). ``frame.attrs["status"]`` maps each column to its status.
        """
        k = self.percentiles.size
        frame = pd.DataFrame(
            {
                "percentile": self.percentiles,
                "threshold": self.thresholds,
                "synthetic_pct": 100.0 * self.synthetic_rate,
                "heldout_pct": 100.0 * self.heldout_rate,
                "n_synthetic": np.full(k, self.n_synthetic, dtype=np.int64),
                "n_heldout": np.full(k, self.n_heldout, dtype=np.int64),
                "n_synthetic_flagged": self.n_synthetic_flagged,
                "n_heldout_flagged": self.n_heldout_flagged,
                "p_value": self.p_values,
                "smallest_p_value": np.full(k, self.smallest_p_value),
                "ci_lower": 100.0 * self.ci_lower,
                "ci_upper": 100.0 * self.ci_upper,
            }
        )
        if metric is not None:
            frame.insert(0, "metric", metric)
        frame.attrs["status"] = dict(FLAGGING_STATUS)
        frame.attrs["confidence_level"] = self.confidence_level
        frame.attrs["n_permutations"] = self.n_permutations
        frame.attrs["interval_method"] = self.interval_method
        frame.attrs["n_synthetic_groups"] = self.n_synthetic_groups
        return frame

    def to_xarray(self) -> xr.Dataset:
        """Return the result as a Dataset over ``percentile``, every variable with its status."""
        frame = self.to_frame()
        data_vars = {
            name: variable(
                "percentile",
                frame[name].to_numpy(),
                long_name=_LONG_NAMES[name],
                status=FLAGGING_STATUS[name],
            )
            for name in frame.columns
            if name != "percentile"
        }
        return xr.Dataset(
            data_vars,
            coords={"percentile": self.percentiles},
            attrs=provenance(
                title="idaudit.memorization.flagging",
                settings={
                    "confidence_level": self.confidence_level,
                    "n_permutations": self.n_permutations,
                    "interval_method": self.interval_method,
                    "n_synthetic_groups": self.n_synthetic_groups,
                },
            ),
        )


_LONG_NAMES = {
    "threshold": "p-th percentile of held-out nearest-training distances",
    "synthetic_pct": "synthetic images at or below the threshold (%)",
    "heldout_pct": "held-out images at or below the threshold (%)",
    "n_synthetic": "synthetic images compared",
    "n_heldout": "held-out images compared",
    "n_synthetic_flagged": "synthetic images at or below the threshold",
    "n_heldout_flagged": "held-out images at or below the threshold",
    "p_value": "one-sided permutation p-value, synthetic flagged more often than held-out",
    "smallest_p_value": "smallest p-value the relabellings can give",
    "ci_lower": "lower confidence bound of the synthetic rate (%)",
    "ci_upper": "upper confidence bound of the synthetic rate (%)",
}


def _strata(labels: Any, n: int, name: str) -> npt.NDArray[Any]:
    if labels is None:
        return np.zeros(n, dtype=np.int64)
    arr = np.asarray(labels)
    if arr.shape != (n,):
        raise InvalidInputError(
            f"`{name}` must hold one label per distance ({n}); got {arr.shape}."
        )
    return arr


def _check_distances(x: Any, name: str) -> npt.NDArray[np.float64]:
    try:
        arr = np.asarray(x, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"`{name}` must be a 1-D array of distances.") from exc
    if arr.ndim != 1 or arr.size == 0:
        raise InvalidInputError(f"`{name}` must be a non-empty 1-D array; got shape {arr.shape}.")
    if np.isnan(arr).any():
        raise InvalidInputError(f"`{name}` holds NaN.")
    if (arr < -1e-9).any() or np.isinf(arr).any():  # rounding may leave -1e-16 for a copy
        raise InvalidInputError(f"`{name}` must be finite distances >= 0.")
    return arr


def _kth(cum_h: npt.NDArray[np.int32], k: npt.NDArray[np.int64]) -> npt.NDArray[np.intp]:
    """Position ``(b,)`` of the ``k[b]``-th held-out value (1-based) in each labelling."""
    return np.argmax(cum_h >= k[:, None], axis=1)  # type: ignore[no-any-return]


def _lerp(
    a: npt.NDArray[np.float64], b: npt.NDArray[np.float64], t: npt.NDArray[np.float64]
) -> npt.NDArray[np.float64]:
    """NumPy's linear interpolation (``numpy.lib._function_base_impl._lerp``), bit for bit."""
    diff = b - a
    return np.where(t >= 0.5, b - diff * (1 - t), a + diff * t)  # type: ignore[no-any-return]


def _flag_counts(
    is_heldout: npt.NDArray[np.bool_],
    sorted_values: npt.NDArray[np.float64],
    percentiles: npt.NDArray[np.float64],
    method: str,
) -> npt.NDArray[np.int64]:
    """Synthetic values at or below the held-out threshold, per labelling and percentile.

    ``is_heldout`` is ``(b, N)``: labels of the pooled values in ascending order (the number
    of held-out values may differ between labellings). The threshold is the ``k``-th held-out
    value (``"order_statistic"``) or NumPy's linear interpolation between two of them
    (``"linear"``); every value at or below it counts, ties included.
    """
    cum_h = np.cumsum(is_heldout, axis=1, dtype=np.int32)  # (b, N)
    n_h = cum_h[:, -1].astype(np.int64)  # (b,)
    rows = np.arange(is_heldout.shape[0])
    out = np.empty((is_heldout.shape[0], percentiles.size), dtype=np.int64)
    for j, p in enumerate(percentiles):
        if method == "order_statistic":
            tau = sorted_values[_kth(cum_h, _ranks(p, n_h))]  # (b,)
        else:  # numpy.percentile(method="linear"): virtual index (n - 1) q
            virtual = (n_h - 1) * (p / 100.0)
            lo = np.floor(virtual)
            gamma = virtual - lo
            below = np.minimum(lo.astype(np.int64), n_h - 1)
            above = np.minimum(below + 1, n_h - 1)
            gamma = np.where(virtual >= n_h - 1, 0.0, gamma)
            tau = _lerp(
                sorted_values[_kth(cum_h, below + 1)], sorted_values[_kth(cum_h, above + 1)], gamma
            )
        at_or_below = np.searchsorted(sorted_values, tau, side="right")  # (b,) pooled <= tau
        out[:, j] = at_or_below - cum_h[rows, at_or_below - 1]
    return out


def _ranks(percentile: float, n: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    """:func:`threshold_rank` for many sample sizes at once."""
    sizes, inverse = np.unique(n, return_inverse=True)
    ranks = np.array([threshold_rank(percentile, int(m)) for m in sizes], dtype=np.int64)
    return ranks[inverse.reshape(-1)]


def heldout_thresholds(
    heldout: npt.NDArray[np.float64], percentiles: npt.NDArray[np.float64], method: str
) -> npt.NDArray[np.float64]:
    """``τ_p`` of the held-out distances at each percentile, by ``percentile_method``."""
    if method == "linear":
        return np.percentile(heldout, percentiles, method="linear")  # type: ignore[no-any-return]
    ranks = np.array([threshold_rank(p, heldout.size) for p in percentiles], dtype=np.int64)
    return np.sort(heldout)[ranks - 1]  # type: ignore[no-any-return]


def _pool_units(subjects: Any, n_h: int, n_s: int) -> tuple[npt.NDArray[np.int64], int] | None:
    """Permutation unit of each pooled distance (held-out, then synthetic), or ``None``."""
    if subjects is None:
        return None
    if not isinstance(subjects, tuple | list) or len(subjects) != 2:
        raise InvalidInputError(
            "`subjects` must be (heldout_subjects, synthetic_subjects), each None or one "
            f"label per distance; got {type(subjects).__name__}."
        )
    checked = [
        check_subjects(subjects[0], n_h, "subjects[0] (heldout)"),
        check_subjects(subjects[1], n_s, "subjects[1] (synthetic)"),
    ]
    if checked[0] is None and checked[1] is None:
        return None
    return unit_codes(checked, (n_h, n_s))


def _relabelling_groups(
    strata: npt.NDArray[Any], units: tuple[npt.NDArray[np.int64], int] | None, n_h: int, n_s: int
) -> list[tuple[int, int]]:
    """Per stratum, the held-out and synthetic units the permutation test relabels."""
    unit_of, g = (np.arange(n_h + n_s), n_h + n_s) if units is None else units
    is_heldout = np.zeros(g, dtype=bool)
    is_heldout[unit_of[:n_h]] = True
    _, codes = np.unique(strata.astype(str), return_inverse=True)
    unit_stratum = np.zeros(g, dtype=np.int64)
    unit_stratum[unit_of] = codes.reshape(-1)  # one stratum per unit (checked by the test)
    out = []
    for c in np.unique(unit_stratum):
        held = is_heldout[unit_stratum == c]
        out.append((int(held.sum()), int((~held).sum())))
    return out


def _permutation_p_values(
    d_h: npt.NDArray[np.float64],
    d_s: npt.NDArray[np.float64],
    strata: npt.NDArray[Any],
    units: tuple[npt.NDArray[np.int64], int] | None,
    percentiles: npt.NDArray[np.float64],
    method: str,
    n_permutations: int,
    gen: np.random.Generator,
) -> npt.NDArray[np.float64]:
    """One-sided p-values of the synthetic flag rate under relabellings of whole units.

    A unit is an image (``units`` None: the image-level test; unit ``j`` is the ``j``-th
    smallest pooled value, so the draws are those of the test before subjects existed) or a
    subject. Unit
    labels are permuted within each stratum; the synthetic rate ``X* / n_S*`` is compared
    with the observed one.
    """
    pooled = np.concatenate([d_h, d_s])
    n = pooled.size
    order = np.argsort(pooled, kind="stable")
    sorted_values = pooled[order]
    labels = np.concatenate([np.ones(d_h.size, bool), np.zeros(d_s.size, bool)])[order]
    if units is None:
        unit_of = np.arange(n)  # (N,) unit of each sorted position
        unit_label, unit_stratum = labels, strata[order]
    else:
        unit_of = units[0][order]
        unit_label = np.zeros(units[1], dtype=bool)
        unit_label[unit_of] = labels
        unit_stratum = np.empty(units[1], dtype=strata.dtype)
        unit_stratum[unit_of] = strata[order]
        _, s_codes = np.unique(strata[order], return_inverse=True)
        per_unit = np.full(units[1], -1)
        per_unit[unit_of] = s_codes.reshape(-1)
        if np.any(per_unit[unit_of] != s_codes.reshape(-1)):
            raise InvalidInputError(
                "a subject has distances in two cohorts (strata); a subject belongs to one."
            )
    observed = _flag_counts(labels[None, :], sorted_values, percentiles, method)[0]
    observed_rate = observed / d_s.size
    _, stratum_of = np.unique(unit_stratum, return_inverse=True)
    stratum_of = stratum_of.reshape(-1)
    groups = [np.flatnonzero(stratum_of == g) for g in range(stratum_of.max() + 1)]
    exceed = np.zeros(percentiles.size, dtype=np.int64)
    for start in range(0, n_permutations, _PERMUTATION_BLOCK):
        b = min(_PERMUTATION_BLOCK, n_permutations - start)
        perm_units = np.empty((b, unit_label.size), dtype=bool)
        for pos in groups:
            perm_units[:, pos] = gen.permuted(
                np.broadcast_to(unit_label[pos], (b, pos.size)), axis=1
            )
        perm = perm_units[:, unit_of]  # (b, N) labels of the sorted pooled values
        counts = _flag_counts(perm, sorted_values, percentiles, method)  # (b, k)
        n_s = n - perm.sum(axis=1)  # (b,) synthetic images in each relabelling
        # rates of two fixed sizes differ by >= 1/n_S >> 1e-12: with fixed sizes this is
        # exactly the count comparison X* >= X
        exceed += (counts / n_s[:, None] >= observed_rate[None, :] - 1e-12).sum(axis=0)
    p_values: npt.NDArray[np.float64] = np.asarray(
        (1.0 + exceed) / (1.0 + n_permutations), dtype=np.float64
    )
    return p_values


def flagging_from_distances(
    heldout: npt.ArrayLike,
    synthetic: npt.ArrayLike,
    *,
    heldout_strata: npt.ArrayLike | None = None,
    synthetic_strata: npt.ArrayLike | None = None,
    subjects: tuple[npt.ArrayLike | None, npt.ArrayLike | None] | None = None,
    percentiles: Sequence[float] | npt.NDArray[np.float64] = DEFAULT_PERCENTILES,
    percentile_method: PercentileMethod = "order_statistic",
    n_permutations: int = 9999,
    confidence_level: float = 0.95,
    rng: RngLike = 0,
) -> FlaggingResult:
    r"""Compute flagging rates, p-values and exact CIs from nearest-training distances.

    Parameters
    ----------
    heldout : array_like, shape (n_heldout,)
        Each held-out image's distance to its nearest training image (same cohort).
    synthetic : array_like, shape (n_synthetic,)
        Each synthetic image's distance to its nearest training image (same cohort).
    heldout_strata, synthetic_strata : array_like, optional
        Cohort of each distance. The permutation test exchanges labels only within a
        cohort. Default: one cohort.
    subjects : (array_like or None, array_like or None), optional
        Subject of each held-out and of each synthetic distance. The permutation test then
        moves whole subjects between the two pools (see Notes). ``None`` (the default, or
        for one set) makes each image its own subject: images are assumed exchangeable.
    percentiles : sequence of float, default (1, 2, 5, 10, 20)
        Operating points ``p`` in (0, 100).
    percentile_method : {"order_statistic", "linear"}, default "order_statistic"
        Definition of the ``p``-th percentile ``τ_p`` of the held-out distances:
        ``"order_statistic"`` is the ``⌈p n_H / 100⌉``-th smallest value (NumPy's
        ``"inverted_cdf"``), so the held-out rate is ``⌈p n_H/100⌉/n_H >= p/100``;
        ``"linear"`` is NumPy's default, ``numpy.percentile(heldout, p)``, interpolated
        between two order statistics, so the held-out rate may fall below ``p/100``.
    n_permutations : int, default 9999
        Label permutations for the p-value; 0 skips it (p-values NaN).
    confidence_level : float, default 0.95
        Of the two-sided Clopper–Pearson interval of the synthetic rate.
    rng : int, SeedSequence or Generator, default 0
        Seeds the permutations.

    Returns
    -------
    FlaggingResult

    Notes
    -----
    With the ``N = n_H + n_S`` pooled distances, ``τ_p`` is the ``k``-th smallest held-out
    distance, ``k = ⌈p n_H / 100⌉``; an image is flagged when its distance is ``<= τ_p``, so
    the held-out rate is ``k / n_H`` (≈ p) by construction. The statistic
    ``X_p = #{synthetic <= τ_p}`` is recomputed, threshold included, under random
    reassignments of the held-out/synthetic labels within each cohort (the cohort sizes
    kept); the p-value is ``(1 + #{X_p^* >= X_p}) / (1 + B)``. Under the null hypothesis that,
    within each cohort, synthetic and held-out images are exchangeable (given the training
    set), every labelling is equally likely, so the p-value is valid although ``τ_p`` is
    estimated from the held-out sample itself. With one cohort and no ties, ``X_p`` is
    negative-hypergeometric: the number of synthetic values before the ``k``-th held-out
    value in a random arrangement,
    :math:`P(X = x) = \binom{x + k - 1}{x}\binom{N - x - k}{n_S - x} / \binom{N}{n_S}`
    (docs/memorization.md derives it).

    **Subjects.** Several photos of one subject share the face, so their distances are
    correlated and images are not exchangeable; the image-level test then rejects too often
    (0.08 at a nominal 0.05 with 4 photos per held-out subject, docs/memorization.md). With
    ``subjects``, the permuted units are subjects: within each cohort, the labels
    held-out/synthetic of whole subjects are permuted, the number of held-out *subjects* kept.
    The number of images in each pool then varies between relabellings; the threshold is
    recomputed at each relabelling's own held-out size and the statistic is the synthetic
    *rate* ``X_p / n_S`` (with fixed sizes this is the image-level test, numbers unchanged).
    Under H0 "subjects are exchangeable between the pools within each cohort" every such
    relabelling is equally likely, so the p-value is exact. A subject must stay in one
    cohort; held-out and synthetic labels are separate name spaces.

    The interval: given ``τ_p`` (fixed by the training and held-out images, independent of
    the synthetic sample), each synthetic image is flagged independently with the
    generator's rate ``q(τ_p)``, so ``n_synthetic_flagged ~ Binomial(n_S, q)`` and the
    Clopper–Pearson interval covers ``q(τ_p)`` with probability at least ``confidence_level``.
    When synthetic subjects (groups, e.g. several samples of one generated identity) hold
    several images, the images of a group are not independent and the binomial law fails
    (the Clopper–Pearson interval then undercovers). The groups are then the independent
    units: each group's flagged share ``X_g / m_g`` lies in ``[0, 1]`` with mean ``q`` (each
    image is marginally a draw of the generator, the group sizes fixed by the design). The
    interval is then the betting bound of Waudby-Smith and Ramdas (2024) on the groups'
    shares, in sorted label order, one side at ``(1 - confidence_level) / 2`` each
    (:func:`idaudit.dp.betting_mean_lower_bound`, the upper side on ``1 - share``): valid at
    every number of groups (``interval_method="betting_by_group"``), and wider than
    Clopper–Pearson on as many independent images, the price of clustering.

    Examples
    --------
    >>> import numpy as np
    >>> from idaudit.memorization import flagging_from_distances
    >>> gen = np.random.default_rng(0)
    >>> res = flagging_from_distances(gen.random(200), gen.random(100) * 0.2,
    ...                               percentiles=[10], n_permutations=999, rng=0)
    >>> int(res.n_heldout_flagged[0]), bool(res.synthetic_rate[0] > 0.3), float(res.p_values[0])
    (20, True, 0.001)
    """
    d_h = _check_distances(heldout, "heldout")
    d_s = _check_distances(synthetic, "synthetic")
    s_h = _strata(heldout_strata, d_h.size, "heldout_strata")
    s_s = _strata(synthetic_strata, d_s.size, "synthetic_strata")
    units = _pool_units(subjects, d_h.size, d_s.size)
    values = check_percentiles(percentiles)
    check_option(percentile_method, "percentile_method", PERCENTILE_METHODS)
    n_permutations = check_integer(n_permutations, "n_permutations", minimum=0)
    confidence_level = check_in_range(confidence_level, "confidence_level", 0.0, 1.0)
    gen = check_random_state(rng)

    thresholds = heldout_thresholds(d_h, values, percentile_method)
    n_s_flagged = (d_s[None, :] <= thresholds[:, None]).sum(axis=1).astype(np.int64)
    n_h_flagged = (d_h[None, :] <= thresholds[:, None]).sum(axis=1).astype(np.int64)

    p_values = np.full(values.size, np.nan)
    if n_permutations:
        p_values = _permutation_p_values(
            d_h, d_s, np.concatenate([s_h, s_s]), units, values, percentile_method,
            n_permutations, gen,
        )  # fmt: skip
    groups = None if subjects is None else check_subjects(subjects[1], d_s.size, "subjects[1]")
    n_groups = d_s.size if groups is None else np.unique(groups.astype(str)).size
    if n_groups < d_s.size:  # photos of one synthetic group are not independent draws
        assert groups is not None
        method = "betting_by_group"
        shares = _group_shares(d_s[None, :] <= thresholds[:, None], groups)  # (k, g)
        bounds = np.array([_betting_interval(row, 1.0 - confidence_level) for row in shares])
        ci_lower, ci_upper = bounds[:, 0], bounds[:, 1]
    else:
        method = "clopper_pearson"
        alpha = (1.0 - confidence_level) / 2.0
        ci_lower = np.asarray(clopper_pearson_lower(n_s_flagged, d_s.size, alpha), np.float64)
        ci_upper = np.asarray(clopper_pearson_upper(n_s_flagged, d_s.size, alpha), np.float64)
    return FlaggingResult(
        percentiles=values,
        thresholds=thresholds,
        n_synthetic_flagged=n_s_flagged,
        n_heldout_flagged=n_h_flagged,
        n_synthetic=int(d_s.size),
        n_heldout=int(d_h.size),
        p_values=p_values,
        ci_lower=ci_lower,
        ci_upper=ci_upper,
        confidence_level=confidence_level,
        n_permutations=n_permutations,
        heldout_distances=d_h,
        synthetic_distances=d_s,
        interval_method=method,
        n_synthetic_groups=int(n_groups),
        smallest_p_value=(
            smallest_p_value(
                _relabelling_groups(np.concatenate([s_h, s_s]), units, d_h.size, d_s.size),
                n_permutations,
            )
            if n_permutations
            else math.nan
        ),
    )


def _betting_interval(shares: npt.NDArray[np.float64], alpha: float) -> tuple[float, float]:
    """Return the two-sided betting interval ``(lower, upper)`` for the mean of ``shares``.

    Each side is :func:`idaudit.dp.betting_mean_lower_bound` at ``alpha / 2``, the upper one
    applied to ``1 - shares``.
    """
    lower = betting_mean_lower_bound(shares, alpha / 2.0)
    return lower, 1.0 - betting_mean_lower_bound(1.0 - shares, alpha / 2.0)


def _group_shares(
    flagged: npt.NDArray[np.bool_], groups: npt.NDArray[Any]
) -> npt.NDArray[np.float64]:
    """Return the flagged share ``(k, g)`` of each group (sorted labels) from flags ``(k, n)``."""
    _, code = np.unique(groups.astype(str), return_inverse=True)
    code = code.reshape(-1)
    sizes = np.bincount(code)
    counts = np.stack([np.bincount(code, weights=row, minlength=sizes.size) for row in flagged])
    return counts / sizes  # type: ignore[no-any-return]


def _plain(value: Any) -> Any:
    """Return a numpy scalar as its Python value (for messages)."""
    return value.item() if isinstance(value, np.generic) else value


def nearest_training_distances(
    train: npt.NDArray[np.float64],
    queries: npt.NDArray[np.float64],
    train_cohorts: npt.NDArray[Any],
    query_cohorts: npt.NDArray[Any],
    *,
    metric: Metric,
    device: str | torch.device,
    block_bytes: int = DEFAULT_BLOCK_BYTES,
    what: str = "queries",
) -> npt.NDArray[np.float64]:
    """Each query's distance to the nearest training row of its own cohort."""
    out = np.empty(queries.shape[0])
    for cohort in np.unique(query_cohorts):
        rows = np.flatnonzero(query_cohorts == cohort)
        ref = np.flatnonzero(train_cohorts == cohort)
        if ref.size == 0:
            raise InvalidInputError(
                f"cohort {_plain(cohort)!r} has {what} but no training rows to compare them with."
            )
        out[rows], _ = nearest_neighbour_distances(
            queries[rows], train[ref], metric=metric, device=device, block_bytes=block_bytes
        )
    return out


def flagging(
    train: npt.ArrayLike,
    heldout: npt.ArrayLike,
    synthetic: npt.ArrayLike,
    *,
    cohorts: tuple[npt.ArrayLike, npt.ArrayLike, npt.ArrayLike] | None = None,
    subjects: tuple[npt.ArrayLike | None, npt.ArrayLike | None, npt.ArrayLike | None] | None = None,
    metric: Metric = "cosine",
    percentiles: Sequence[float] | npt.NDArray[np.float64] = DEFAULT_PERCENTILES,
    percentile_method: PercentileMethod = "order_statistic",
    n_permutations: int = 9999,
    confidence_level: float = 0.95,
    rng: RngLike = 0,
    device: str | torch.device = "cpu",
) -> FlaggingResult:
    """Flag synthetic images that lie closer to a training image than most held-out ones do.

    Parameters
    ----------
    train, heldout, synthetic : array_like, shape (n_*, d)
        Embeddings of the training, held-out and synthetic images.
    cohorts : (array_like, array_like, array_like), optional
        Cohort label of each row of ``train``, ``heldout`` and ``synthetic``: nearest
        neighbours are searched within the cohort, and the permutation test exchanges labels
        within it. Default: one cohort.
    subjects : (array_like or None, array_like or None, array_like or None), optional
        Subject of each row of ``train``, ``heldout`` and ``synthetic`` (``None`` for a set:
        each image its own subject). A subject with rows in both ``train`` and ``heldout``
        is refused (seed 003: the partitions are disjoint at the subject level); the
        held-out and synthetic subjects are the permutation units
        (:func:`flagging_from_distances`). Default: each image its own subject.
    metric : {"cosine", "euclidean"}, default "cosine"
    percentiles, percentile_method, n_permutations, confidence_level, rng
        As in :func:`flagging_from_distances`.
    device : str or torch.device, default "cpu"
        Where the nearest-neighbour search runs.

    Returns
    -------
    FlaggingResult

    Examples
    --------
    >>> import numpy as np
    >>> from idaudit.memorization import flagging
    >>> gen = np.random.default_rng(0)
    >>> train = gen.standard_normal((100, 16))
    >>> copies = train[:50] + 0.01 * gen.standard_normal((50, 16))  # near-copies
    >>> res = flagging(train, gen.standard_normal((100, 16)), copies, percentiles=[5],
    ...                n_permutations=199)
    >>> float(res.synthetic_rate[0]), float(res.p_values[0])
    (1.0, 0.005)
    """
    t = check_vectors(train, "train")
    h = check_vectors(heldout, "heldout")
    s = check_vectors(synthetic, "synthetic")
    same_dim({"train": t, "heldout": h, "synthetic": s})
    if cohorts is None:
        c_t, c_h, c_s = (np.zeros(len(x), dtype=np.int64) for x in (t, h, s))
    else:
        if len(cohorts) != 3:
            raise InvalidInputError(
                f"`cohorts` must be three label arrays (train, heldout, synthetic); "
                f"got {len(cohorts)}."
            )
        c_t, c_h, c_s = (
            _strata(c, len(x), f"cohorts[{i}]")
            for i, (c, x) in enumerate(zip(cohorts, (t, h, s), strict=True))
        )
    # the training subjects are checked (one per row, none also held out), then not needed
    subj = None if subjects is None else check_set_subjects(subjects, (len(t), len(h), len(s)))[1:]
    d_h = nearest_training_distances(t, h, c_t, c_h, metric=metric, device=device, what="heldout")
    d_s = nearest_training_distances(t, s, c_t, c_s, metric=metric, device=device, what="synthetic")
    return flagging_from_distances(
        d_h,
        d_s,
        heldout_strata=c_h,
        synthetic_strata=c_s,
        subjects=subj,
        percentiles=percentiles,
        percentile_method=percentile_method,
        n_permutations=n_permutations,
        confidence_level=confidence_level,
        rng=rng,
    )
