"""Trade-off curves (f-DP): certified error-rate bands, ε(δ) for every δ, and Gaussian DP."""

from __future__ import annotations

import functools
import math
import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

import numpy as np
import numpy.typing as npt
from scipy import optimize, special, stats

from idaudit.dp._arrays import (
    FloatArray,
    as_float_array,
    check_range,
    checked_arrays,
    finish,
    is_scalar,
)
from idaudit.dp._gaussian import gaussian_delta, gaussian_epsilon
from idaudit.dp._hypothesis import _log_ratio_term
from idaudit.dp._noncrossing import ROUNDING_PER_STEP, noncrossing_lower
from idaudit.exceptions import InvalidInputError

__all__ = [
    "band_local_level",
    "clopper_pearson_table",
    "epsilon_from_tradeoff",
    "gdp_delta",
    "gdp_epsilon",
    "gdp_mu_lower_bound",
    "gdp_tradeoff",
    "noncrossing_probability",
    "score_error_counts",
    "simultaneous_rate_bounds",
]

# up to this size the calibrated per-order-statistic level is located to 1e-6 relative in
# log space, then moved down until the band's checked non-crossing probability is >= the
# target (conservative side); above it the level starts from _GRID_LOG_RATIO, checked once
_LOG_XTOL = 1e-6
_EXACT_SEARCH_MAX = 10_000
# the fast path starts this far (in log level) below the interpolated root, and steps down
# by _FAST_STEP while the check fails
_FAST_MARGIN = 0.05
_FAST_STEP = 0.25
# ln(α / level) of the searched band level (_searched_level, located to 1e-4) at n = 10⁴,
# 3·10⁴, 10⁵ and 3·10⁵ (rows: α): the fast path's starting point, checked before use. Made
# with math.log(α / _searched_level(n, α)) by `python scripts/band_table.py`, which prints
# these rows; tests/unit/dp checks the n = 10⁴ column so (the 3·10⁵ column took about two
# minutes of one core per α)
_GRID_LOG_N = np.log([1e4, 3e4, 1e5, 3e5])
_GRID_LOG_ALPHA = np.log(
    [1e-08, 1e-06, 0.0001, 0.001, 0.01, 0.025, 0.05, 0.1, 0.2, 0.4, 0.6, 0.8, 0.95]
)
_GRID_LOG_RATIO = np.array(
    [
        [5.4352, 5.6505, 5.9289, 6.2508],  # α = 1e-08
        [5.2170, 5.4028, 5.5765, 5.7145],  # α = 1e-06
        [4.9312, 5.1108, 5.2793, 5.4135],  # α = 0.0001
        [4.7342, 4.9110, 5.0776, 5.2108],  # α = 0.001
        [4.4637, 4.6382, 4.8038, 4.9368],  # α = 0.01
        [4.3179, 4.4919, 4.6575, 4.7909],  # α = 0.025
        [4.1815, 4.3553, 4.5212, 4.6551],  # α = 0.05
        [4.0091, 4.1827, 4.3492, 4.4839],  # α = 0.1
        [3.7742, 3.9477, 4.1148, 4.2504],  # α = 0.2
        [3.4090, 3.5816, 3.7490, 3.8855],  # α = 0.4
        [3.0476, 3.2183, 3.3847, 3.5212],  # α = 0.6
        [2.5871, 2.7535, 2.9169, 3.0518],  # α = 0.8
        [1.9428, 2.0990, 2.2545, 2.3841],  # α = 0.95
    ]
)
# below this simultaneous level the band falls back to Bonferroni (see _calibrated_level)
_SMALLEST_CALIBRATED = 1e-9
# epsilon_from_tradeoff evaluates at most this many (δ, point) terms at once
_CHUNK_TERMS = 1 << 22
# the rate-bound tables kept for reuse (n + 1 floats each) take at most this many bytes
_TABLE_CACHE_BYTES = 1 << 28


def score_error_counts(
    scores_a: npt.ArrayLike, scores_b: npt.ArrayLike, thresholds: npt.ArrayLike | None = None
) -> tuple[FloatArray, npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """Error counts of the threshold tests "say B when score ≥ t".

    Parameters
    ----------
    scores_a : array_like, shape (n_a,)
        Scores of class A draws (the test's negatives). Finite or infinite, never NaN.
    scores_b : array_like, shape (n_b,)
        Scores of class B draws (positives); higher scores mean "class B".
    thresholds : array_like, shape (n_thresholds,), optional
        The thresholds t (±inf allowed). Default: every distinct value of the pooled scores,
        ascending — every count pair a real threshold can give except t = +inf's (0, n_b).

    Returns
    -------
    thresholds : numpy.ndarray of float64, shape (n_thresholds,)
    fp : numpy.ndarray of int64, shape (n_thresholds,)
        False positives ``#{a : a >= t}``.
    fn : numpy.ndarray of int64, shape (n_thresholds,)
        False negatives ``#{b : b < t}``.

    Raises
    ------
    InvalidInputError
        If a score array is empty or not 1-D, or a score or threshold is NaN.

    Examples
    --------
    >>> from idaudit.dp import score_error_counts
    >>> t, fp, fn = score_error_counts([0.0, 1.0, 2.0], [1.5, 3.0])
    >>> t.tolist(), fp.tolist(), fn.tolist()
    ([0.0, 1.0, 1.5, 2.0, 3.0], [3, 2, 1, 1, 0], [0, 0, 0, 1, 1])
    """
    a = _check_scores(scores_a, "scores_a")
    b = _check_scores(scores_b, "scores_b")
    if thresholds is not None:
        t = as_float_array(thresholds, "thresholds").ravel()
        if t.size == 0 or np.isnan(t).any():
            raise InvalidInputError(
                f"`thresholds` must hold at least one number and no NaN; got {t.tolist()!r}."
            )
        fp = a.size - np.searchsorted(np.sort(a), t, side="left")  # a >= t
        fn = np.searchsorted(np.sort(b), t, side="left")  # b < t
        return t, fp.astype(np.int64), fn.astype(np.int64)
    return _all_threshold_counts(a, b)


def _all_threshold_counts(
    a: FloatArray, b: FloatArray
) -> tuple[FloatArray, npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """:func:`score_error_counts` at every distinct pooled score, in one merge of the classes.

    The pooled sorted scores give each distinct value t its first position ``j``; the ``j``
    scores before it are exactly those ``< t``, so ``#{a < t}`` is a running count of class A
    and ``#{b < t} = j - #{a < t}`` (the values of ``np.union1d`` and ``np.searchsorted``
    without their two extra sorts).
    """
    pooled = np.concatenate((np.sort(a), np.sort(b)))  # (n_a + n_b,) two sorted runs
    order = np.argsort(pooled, kind="stable")  # a merge of the two runs
    values = pooled[order]
    first = np.flatnonzero(np.r_[True, values[1:] != values[:-1]])  # (n_t,) a new value
    a_before = np.concatenate(([0], np.cumsum(order < a.size)))[first]  # #{a < t}
    fp = a.size - a_before  # #{a >= t}
    fn = first - a_before  # #{b < t}
    return values[first], fp.astype(np.int64), fn.astype(np.int64)


def noncrossing_probability(bounds: npt.ArrayLike) -> float:
    r"""Probability that every uniform order statistic stays below its bound.

    Parameters
    ----------
    bounds : array_like, shape (n,)
        Non-decreasing :math:`h_1 \le \dots \le h_n` in [0, 1].

    Returns
    -------
    float
        :math:`\Pr[U_{(i)} \le h_i,\ i = 1, \dots, n]` for the order statistics of ``n`` iid
        Uniform(0, 1) variables, to about 1e-12 absolute, and from below: the computation
        drops negligible mass but never adds any, so it exceeds the exact value by at most
        its rounding (relative ``(n + 1) · 1e-14``).

    Raises
    ------
    InvalidInputError
        If ``bounds`` is empty, outside [0, 1] or decreasing.

    Notes
    -----
    Poissonisation (Moscovich & Nadler 2017): the event is :math:`N(h_i) \ge i` for the
    counting process :math:`N`. For a Poisson process of rate ``n`` conditioned on
    :math:`N(1) = n` the points are iid uniform, so the probability is
    :math:`\Pr[N(h_i) \ge i\ \forall i,\ N(1) = n] / \Pr[\mathrm{Pois}(n) = n]`. The joint
    law of :math:`N(h_i)` and the event so far is carried forward boundary by boundary: a
    convolution with the Poisson(:math:`n (h_{i} - h_{i-1})`) law of the independent
    increment, then the counts below :math:`i` are removed. Every step adds and multiplies
    non-negative numbers, so nothing cancels (the Bolshev/Steck recursions, which subtract,
    lose all digits by n ≈ 200). Counts far above the boundary meet the next boundaries
    whatever they do, so they move 64 boundaries at a time in one convolution; only the
    counts next to the boundary are carried step by step (compiled with numba). Mass is only
    ever dropped (kernel terms below 1e-30, counts below 1e-24), never invented, so the
    result is a lower bound up to rounding (relative ``(n + 1) · 1e-14`` at most). About
    0.01 s at n = 10⁴, 0.15 s at 10⁵ and a few seconds at 10⁶.

    References
    ----------
    .. [1] A. Moscovich and B. Nadler, "Fast calculation of boundary crossing probabilities
       for Poisson processes", Statistics & Probability Letters 123, 2017.

    Examples
    --------
    >>> from idaudit.dp import noncrossing_probability
    >>> round(noncrossing_probability([0.5]), 12)
    0.5
    >>> round(noncrossing_probability([0.5, 1.0]), 12)  # P(min <= 1/2) = 1 - 1/4
    0.75
    """
    h = as_float_array(bounds, "bounds").ravel()
    if h.size == 0:
        raise InvalidInputError("`bounds` must hold at least one bound; got 0.")
    check_range(h, "bounds", 0.0, 1.0)
    if np.any(np.diff(h) < 0):
        raise InvalidInputError("`bounds` must be non-decreasing.")
    return _noncrossing(h)


def _noncrossing(h: FloatArray) -> float:
    """:func:`noncrossing_probability` without the checks (``h`` non-decreasing in [0, 1])."""
    n = h.size
    log_fact = special.gammaln(np.arange(1.0, n + 3.0))  # ln k!, k = 0..n+1
    return min(1.0, noncrossing_lower(h, log_fact) / float(stats.poisson.pmf(n, n)))


class _TableCache:
    """Least-recently-used store of read-only float64 tables, ``max_bytes`` of them at most.

    A table is made outside the lock (two threads asking for the same new key both make it;
    the values are equal); the lock guards only the dictionary.
    """

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self._tables: OrderedDict[tuple[Any, ...], FloatArray] = OrderedDict()
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def get(self, key: tuple[Any, ...], make: Callable[[], FloatArray]) -> FloatArray:
        """Return the table of ``key``, calling ``make()`` the first time (read-only)."""
        with self._lock:
            table = self._tables.get(key)
            if table is not None:
                self._tables.move_to_end(key)
                self.hits += 1
                return table
        table = make()
        table.setflags(write=False)
        with self._lock:
            self.misses += 1
            self._tables[key] = table
            self._tables.move_to_end(key)
            while len(self._tables) > 1 and self.nbytes() > self.max_bytes:
                self._tables.popitem(last=False)
        return table

    def nbytes(self) -> int:
        """Total size of the kept tables."""
        return sum(t.nbytes for t in self._tables.values())

    def keys(self) -> list[tuple[Any, ...]]:
        """Return the kept keys, least recently used first."""
        with self._lock:
            return list(self._tables)

    def clear(self) -> None:
        """Drop every table and reset the counters."""
        with self._lock:
            self._tables.clear()
            self.hits = self.misses = 0


#: The rate-bound tables of :func:`simultaneous_rate_bounds`, keyed by ``(n, local level)``
#: (the only two numbers a table depends on), so repeated certificates on samples of one
#: size reuse their n Beta quantiles instead of recomputing them.
_BOUND_TABLES = _TableCache(_TABLE_CACHE_BYTES)


def _rate_bound_table(n: int, level: float) -> FloatArray:
    """Read-only ``(n + 1,)`` table: :func:`_order_bounds` at ``level``, then 1 (cached)."""
    return _BOUND_TABLES.get((n, level), lambda: np.concatenate((_order_bounds(n, level), [1.0])))


def clopper_pearson_table(n: int, alpha: float) -> FloatArray:
    r"""One-sided Clopper–Pearson upper bounds at every count ``k = 0..n`` of ``n`` trials.

    Parameters
    ----------
    n : int
        Number of trials, >= 1.
    alpha : float
        Error level of each bound, in (0, 1) (pointwise: each holds on its own).

    Returns
    -------
    numpy.ndarray of float64, shape (n + 1,)
        ``u[k]`` = :func:`~idaudit.dp.clopper_pearson_upper` ``(k, n, alpha)``; ``u[n] = 1``.
        Read-only: the table is computed once per ``(n, alpha)`` and kept (the store of
        :func:`simultaneous_rate_bounds`), so repeated certificates on samples of one size
        (``"split"``, ``"multisplit"``) index it instead of recomputing ``n`` Beta quantiles.

    Raises
    ------
    InvalidInputError
        If ``n`` is not a positive integer or ``alpha`` is outside (0, 1).

    Examples
    --------
    >>> from idaudit.dp import clopper_pearson_table, clopper_pearson_upper
    >>> u = clopper_pearson_table(10, 0.05)
    >>> bool(u[0] == clopper_pearson_upper(0, 10, 0.05)), float(u[10])
    (True, 1.0)
    """
    nn, aa = _check_n_alpha(n, alpha)
    return _rate_bound_table(nn, aa)


def _order_bounds(n: int, level: float) -> FloatArray:
    """Beta(k + 1, n − k) upper ``level`` quantiles, k = 0..n−1 (the Clopper–Pearson form)."""
    k = np.arange(n, dtype=np.float64)
    out: FloatArray = np.asarray(stats.beta.isf(level, k + 1.0, n - k), dtype=np.float64)
    return np.maximum.accumulate(out)  # already non-decreasing; guards rounding


@functools.lru_cache(maxsize=256)
def _calibrated_level(n: int, alpha: float) -> float:
    """Largest local level whose band is checked to hold with probability >= 1 - alpha.

    Up to :data:`_EXACT_SEARCH_MAX` draws: the root itself, to 1e-6 in log
    (:func:`_searched_level`); above: a level a little below the tabulated root, checked
    (:func:`_fast_level`). Either way the level returned passed :func:`_band_gap` or is
    Bonferroni's α / n, which needs no check.
    """
    if n == 1:
        return alpha  # one order statistic: the local level is the simultaneous one
    if alpha < max(_SMALLEST_CALIBRATED, 10.0 * _rounding(n)):
        # 1 − α is then within the recursion's accuracy of 1 (and equal to 1 below 1.1e-16):
        # the joint level cannot be resolved, so take Bonferroni's, always valid
        return alpha / n
    if n <= _EXACT_SEARCH_MAX:
        return _searched_level(n, alpha)
    return _fast_level(n, alpha)


def _band_gap(alpha: float, bounds: FloatArray) -> float:
    """Return the band's checked non-crossing probability minus 1 − α (≥ 0: the band holds).

    :func:`_noncrossing` only ever drops mass, so it is a lower bound up to rounding; the
    rounding, ``(n + 1) · ROUNDING_PER_STEP`` at most plus 1e-12 for the final division, is
    subtracted, so a band with a gap ≥ 0 holds.
    """
    return _noncrossing(bounds) - _rounding(bounds.size) - (1.0 - alpha)


def _rounding(n: int) -> float:
    """Bound on the rounding of :func:`_noncrossing` for ``n`` bounds (see :func:`_band_gap`)."""
    return 1e-12 + (n + 1) * ROUNDING_PER_STEP


def _searched_level(n: int, alpha: float) -> float:
    """Return the root of :func:`_band_gap` in the log level (to 1e-6), on its safe side."""

    def gap(log_level: float) -> float:
        return _band_gap(alpha, _order_bounds(n, math.exp(log_level)))

    def holds(log_level: float) -> bool:
        return gap(log_level) >= 0.0

    lo, hi = math.log(alpha / n), math.log(alpha)  # Bonferroni holds; one statistic cannot
    if holds(hi):
        return alpha
    if not holds(lo):  # rounding at the Bonferroni end: no resolvable root, stay at α / n
        return alpha / n
    root = optimize.brentq(gap, lo, hi, xtol=_LOG_XTOL, rtol=1e-12)
    while not holds(root):  # land on the conservative side of the root
        root -= _LOG_XTOL
    return max(math.exp(root), alpha / n)


def _fast_level(n: int, alpha: float) -> float:
    """Return a level just below the tabulated root, lowered until :func:`_band_gap` >= 0.

    Usually one check: the table it checks is the one :func:`simultaneous_rate_bounds` then
    returns (kept in :data:`_BOUND_TABLES`), so the level costs one non-crossing probability.
    """
    floor = math.log(alpha / n)
    log_level = min(math.log(alpha), math.log(alpha) - _tabulated_log_ratio(n, alpha))
    log_level -= _FAST_MARGIN
    while log_level > floor:
        level = math.exp(log_level)
        if _band_gap(alpha, _rate_bound_table(n, level)[:-1]) >= 0.0:
            return level
        log_level -= _FAST_STEP
    return alpha / n  # Bonferroni: valid without a check


def _tabulated_log_ratio(n: int, alpha: float) -> float:
    """``ln(α / level)`` of the searched level, interpolated in (ln n, ln α) from _LEVEL_GRID.

    Linear in ln α between the tabulated levels (clamped at the ends), linear in ln n
    (extrapolated past the largest tabulated size from the last two). Only a starting point:
    the level is checked after.
    """
    la = min(max(math.log(alpha), _GRID_LOG_ALPHA[0]), _GRID_LOG_ALPHA[-1])
    j = min(int(np.searchsorted(_GRID_LOG_ALPHA, la, side="right")) - 1, _GRID_LOG_ALPHA.size - 2)
    w = (la - _GRID_LOG_ALPHA[j]) / (_GRID_LOG_ALPHA[j + 1] - _GRID_LOG_ALPHA[j])
    by_n = (1.0 - w) * _GRID_LOG_RATIO[j] + w * _GRID_LOG_RATIO[j + 1]  # (n_sizes,)
    ln = math.log(n)
    if ln <= _GRID_LOG_N[-1]:
        return float(np.interp(ln, _GRID_LOG_N, by_n))
    slope = (by_n[-1] - by_n[-2]) / (_GRID_LOG_N[-1] - _GRID_LOG_N[-2])
    return float(by_n[-1] + slope * (ln - _GRID_LOG_N[-1]))


def band_local_level(n: int, alpha: float) -> float:
    r"""Per-order-statistic level of the exact simultaneous one-sided band for ``n`` draws.

    Parameters
    ----------
    n : int
        Sample size, >= 1.
    alpha : float
        Simultaneous error level in (0, 1).

    Returns
    -------
    float
        A level :math:`a` with
        :math:`\Pr[U_{(k+1)} \le \mathrm{Beta}^{-1}(1-a;\,k+1,\,n-k)\ \forall k < n]
        \ge 1 - \alpha`, checked with :func:`noncrossing_probability` (a lower bound, less
        its rounding); between the Bonferroni level α/n and α. Up to n = 10⁴ it is the
        largest such level, to 1e-6 relative (a root search). Above, it starts 5 % below the
        root tabulated in (n, α) (from the same search, interpolated), is checked once and
        lowered while the check fails: as valid as the searched level and more conservative
        (5–10 % in the level where the root was also searched, n ≤ 2·10⁴; a fraction of a
        per cent in the bounds). Cached per ``(n, alpha)``; about 0.3 s of CPU at n = 10⁴,
        0.5 s at 10⁵ and 8 s at 10⁶ (benchmarks/bench_certify_speed.py).

    Raises
    ------
    InvalidInputError
        If ``n`` is not a positive integer or ``alpha`` is outside (0, 1).

    Examples
    --------
    >>> from idaudit.dp import band_local_level
    >>> a = band_local_level(100, 0.025)
    >>> 0.025 / 100 < a < 0.025
    True
    """
    nn, aa = _check_n_alpha(n, alpha)
    return _calibrated_level(nn, aa)


def simultaneous_rate_bounds(n: int, alpha: float, *, method: str = "band") -> FloatArray:
    r"""Upper bounds on a rate at every count, valid for every threshold at once.

    Parameters
    ----------
    n : int
        Number of draws from the distribution whose tail rate is bounded, >= 1.
    alpha : float
        Simultaneous error level in (0, 1).
    method : {"band", "bonferroni"}, default "band"
        ``"band"``: one local level calibrated so the band's simultaneous level is exactly
        ``alpha`` (:func:`band_local_level`); ``"bonferroni"``: local level ``alpha / n``.

    Returns
    -------
    numpy.ndarray of float64, shape (n + 1,)
        ``u[k]``, the bound for a test whose count on the sample is ``k``; ``u[n] = 1``.
        The table is computed once per ``(n, local level)`` and kept (least recently used
        first out, 256 MiB in all); each call returns a fresh copy.

    Raises
    ------
    InvalidInputError
        If ``n`` or ``alpha`` is invalid or ``method`` is unknown.

    Notes
    -----
    Let :math:`S_1, \dots, S_n` be iid with law :math:`P` and :math:`c(t) = \#\{S_i \ge t\}`.
    For every real :math:`t` with :math:`c(t) = k < n`, :math:`t` exceeds the
    :math:`(k+1)`-th largest score, so :math:`P(S \ge t) \le V_{(k+1)}`, the
    :math:`(k+1)`-th smallest of the uniforms :math:`V_i = P(S > S_i) + W_i P(S = S_i)`
    (:math:`W_i` iid uniform: the randomised probability transform, equality when :math:`P`
    has no atoms). Hence

    .. math:: \Pr\big[\exists t:\ P(S \ge t) > u_{c(t)}\big]
              \le \Pr\big[\exists k < n:\ V_{(k+1)} > u_k\big],

    with equality for continuous :math:`P`. With :math:`u_k = \mathrm{Beta}^{-1}(1-a;\,
    k+1,\,n-k)` — the one-sided Clopper–Pearson bound :math:`\mathrm{CP}(k, n, a)` — each
    term has probability exactly :math:`a`. Bonferroni takes :math:`a = \alpha/n` (a union
    over the n counts below n; thresholds sharing a count share the event). The band takes
    the largest :math:`a` (above n = 10⁴: a checked level a little below it, see
    :func:`band_local_level`) whose *joint* non-crossing probability, checked from below by
    :func:`noncrossing_probability`, is at least :math:`1-\alpha`: the equal-local-level
    (Berk–Jones-type) band of Moscovich, Nadler & Spiegelman (2016). At α = 0.025 its local
    level is α/13, α/23, α/47 and α/75 at n = 30, 100, 10³ and 10⁴ rather than α/n, which
    tightens the bounds most at small counts — the tail where ε lives. The same bounds hold
    for :math:`P(S > t)` with the count :math:`\#\{S_i > t\}` (the argument is the same), so
    negating the scores bounds :math:`P(S < t)` by the count :math:`\#\{S_i < t\}`.

    References
    ----------
    .. [1] A. Moscovich, B. Nadler and C. Spiegelman, "On the exact Berk-Jones statistics
       and their p-value calculation", Electronic Journal of Statistics 10(2), 2016.

    Examples
    --------
    >>> from idaudit.dp import simultaneous_rate_bounds
    >>> band = simultaneous_rate_bounds(50, 0.025)
    >>> bonf = simultaneous_rate_bounds(50, 0.025, method="bonferroni")
    >>> bool((band[:-1] < bonf[:-1]).all()), float(band[-1])
    (True, 1.0)
    """
    nn, aa = _check_n_alpha(n, alpha)
    if method == "band":
        level = _calibrated_level(nn, aa)
    elif method == "bonferroni":
        level = aa / nn
    else:
        raise InvalidInputError(f"`method` must be 'band' or 'bonferroni'; got {method!r}.")
    return np.array(_rate_bound_table(nn, level))  # a writable copy of the cached table


def epsilon_from_tradeoff(
    fpr_upper: npt.ArrayLike,
    fnr_upper: npt.ArrayLike,
    delta: npt.ArrayLike = 0.0,
    *,
    one_sided: bool = False,
) -> Any:
    r"""ε(δ) implied by certified trade-off points, for one δ or many at once.

    Parameters
    ----------
    fpr_upper, fnr_upper : array_like, shape (n_points,)
        Upper bounds on the FPR and FNR of tests between two neighbouring inputs, in [0, 1].
    delta : float or array_like, shape (n_deltas,)
        The δ values, in [0, 1].
    one_sided : bool, default False
        Use only the form :math:`\ln((1-\delta-\mathrm{FNR})/\mathrm{FPR})` (the
        "TPR/FPR" form of jax_privacy's ``one_sided=True``).

    Returns
    -------
    float or numpy.ndarray of float64, shape (n_deltas,)
        :math:`\max_i` of :func:`epsilon_from_error_rates` over the points, for each δ; a
        ``float`` when ``delta`` is a scalar. At least 0; ``inf`` possible.

    Raises
    ------
    InvalidInputError
        If the shapes differ, there is no point or a value is outside [0, 1].

    Notes
    -----
    Kairouz–Oh–Viswanath: an (ε, δ)-DP mechanism forces
    :math:`\mathrm{FPR} + e^\varepsilon \mathrm{FNR} \ge 1-\delta` and the same with the
    rates swapped for every test. Both sides are non-decreasing in the rates, so upper bounds
    on the rates may replace them, and the bound holds for every δ and every point at once
    whenever the bounds hold jointly: with simultaneously valid bounds
    (:func:`simultaneous_rate_bounds`) the whole curve δ ↦ ε(δ) is certified at the bounds'
    level. Mixing two tests (randomising) gives convex combinations of their points, which
    satisfy the linear constraints whenever the endpoints do, so the points' maximum is the
    convex hull's.

    Examples
    --------
    >>> from idaudit.dp import epsilon_from_tradeoff
    >>> eps = epsilon_from_tradeoff([0.1, 0.01], [0.2, 0.6], [0.0, 0.1])
    >>> [round(float(e), 6) for e in eps]
    [3.688879, 3.401197]
    """
    x, y = _frontier(fpr_upper, fnr_upper)
    scalar = is_scalar(delta)
    d = as_float_array(delta, "delta")
    check_range(d, "delta", 0.0, 1.0)
    flat = d.reshape(-1)
    eps = np.empty(flat.size)
    step = max(1, _CHUNK_TERMS // x.size)
    for lo in range(0, flat.size, step):
        dd = flat[lo : lo + step].reshape(-1, 1)  # (chunk, 1) against (n_points,)
        out = _log_ratio_term(1.0 - dd - y, x)  # (chunk, n_points)
        if not one_sided:
            out = np.maximum(out, _log_ratio_term(1.0 - dd - x, y))
        eps[lo : lo + step] = np.maximum(out.max(axis=1), 0.0)
    return finish(eps.reshape(d.shape), scalar)


def _pareto(x: FloatArray, y: FloatArray) -> tuple[FloatArray, FloatArray]:
    """Keep the points no other point beats in both rates (lower-left frontier), by FPR."""
    if x.size > 1 and (x[1:] <= x[:-1]).all() and (y[1:] >= y[:-1]).all():
        return _pareto_along_thresholds(x, y)
    order = np.lexsort((y, x))
    xs, ys = x[order], y[order]
    best_before = np.minimum.accumulate(np.r_[np.inf, ys[:-1]])
    keep = ys < best_before  # strictly below every point with a smaller or equal FPR
    return xs[keep], ys[keep]


def _pareto_along_thresholds(x: FloatArray, y: FloatArray) -> tuple[FloatArray, FloatArray]:
    """:func:`_pareto` of points along ascending thresholds (x non-increasing, y non-decreasing).

    Then the lexicographic order is the runs of equal ``x`` taken last run first, each in
    its own order; a run's first point has its smallest ``y`` and is kept when that is
    strictly below the next run's first ``y`` (the smallest ``y`` at any smaller FPR). The
    same points as the general path, in O(n) instead of a two-key sort.
    """
    start = np.flatnonzero(np.r_[True, x[1:] != x[:-1]])  # (runs,) first point of each run
    xs, ys = x[start], y[start]
    keep = ys < np.r_[ys[1:], np.inf]
    return xs[keep][::-1], ys[keep][::-1]


def gdp_tradeoff(x: npt.ArrayLike, mu: npt.ArrayLike) -> Any:
    r"""Trade-off function of μ-Gaussian DP, :math:`G_\mu(x) = \Phi(\Phi^{-1}(1-x) - \mu)`.

    Parameters
    ----------
    x : float or array_like
        Type I error (FPR) in [0, 1].
    mu : float or array_like
        μ >= 0 (inf allowed). Inputs broadcast.

    Returns
    -------
    float or numpy.ndarray of float64
        The smallest type II error a μ-GDP mechanism allows at type I error ``x``
        (Dong, Roth & Su 2022, Eq. 2.3): the trade-off between N(0, 1) and N(μ, 1).

    Raises
    ------
    InvalidInputError
        If ``x`` is outside [0, 1] or ``mu`` is negative or NaN.

    Examples
    --------
    >>> from idaudit.dp import gdp_tradeoff
    >>> round(gdp_tradeoff(0.05, 1.0), 6)
    0.740489
    >>> gdp_tradeoff(0.3, 0.0)
    0.7
    """
    scalar = is_scalar(x, mu)
    xx, m = checked_arrays((x, "x", 0.0, 1.0), (mu, "mu", 0.0, np.inf))
    xx, m = np.broadcast_arrays(xx, m)
    with np.errstate(invalid="ignore"):
        out = special.ndtr(special.ndtri(1.0 - xx) - m)
    out = np.where(m == 0.0, 1.0 - xx, out)  # exact at μ = 0
    out = np.where(np.isinf(m), np.where(xx > 0.0, 0.0, 1.0), out)
    return finish(out, scalar)


def gdp_delta(epsilon: npt.ArrayLike, mu: npt.ArrayLike) -> Any:
    r"""δ(ε) of a μ-GDP mechanism (Dong, Roth & Su 2022, Corollary 2.13).

    Parameters
    ----------
    epsilon : float or array_like
        ε >= 0.
    mu : float or array_like
        μ > 0 (μ = 0 gives δ = 0). Inputs broadcast.

    Returns
    -------
    float or numpy.ndarray of float64
        :math:`\Phi(-\varepsilon/\mu + \mu/2) - e^\varepsilon \Phi(-\varepsilon/\mu - \mu/2)`,
        the analytic Gaussian mechanism's δ at σ = 1/μ (:func:`gaussian_delta`, evaluated in
        the log domain).

    Raises
    ------
    InvalidInputError
        If ``epsilon`` or ``mu`` is negative or NaN, or ``mu`` is infinite.

    Examples
    --------
    >>> from idaudit.dp import gdp_delta
    >>> round(gdp_delta(1.0, 1.0), 6)
    0.126937
    """
    scalar = is_scalar(epsilon, mu)
    e, m = checked_arrays((epsilon, "epsilon", 0.0, np.inf), (mu, "mu", 0.0, np.inf, "left"))
    e, m = np.broadcast_arrays(e, m)
    safe = np.where(m > 0.0, m, 1.0)
    out = np.where(m > 0.0, gaussian_delta(e, 1.0 / safe), 0.0)
    return finish(np.asarray(out, dtype=np.float64), scalar)


def gdp_epsilon(delta: npt.ArrayLike, mu: npt.ArrayLike) -> Any:
    r"""ε(δ) of a μ-GDP mechanism: Corollary 2.13 of Dong, Roth & Su solved for ε.

    Parameters
    ----------
    delta : float or array_like
        δ in (0, 1]; δ = 0 gives ``inf`` for μ > 0 (GDP is not pure DP).
    mu : float or array_like
        μ >= 0, finite. Inputs broadcast.

    Returns
    -------
    float or numpy.ndarray of float64
        The smallest ε >= 0 with :func:`gdp_delta` (ε, μ) <= δ; 0 when μ = 0 or δ is at
        least the total variation 2Φ(μ/2) − 1.

    Raises
    ------
    InvalidInputError
        If ``delta`` is outside [0, 1] or ``mu`` is negative, infinite or NaN.

    Notes
    -----
    Equal to :func:`gaussian_epsilon` at σ = 1/μ (Balle & Wang's Theorem 8 and DRS's
    Corollary 2.13 are the same curve); solved by bracketing to ~1e-13 relative.

    Status: of a *model*. Applied to a certified lower bound on μ it is the ε(δ) of the
    least private Gaussian mechanism the data allow, not a bound on the real mechanism's
    ε(δ) (whose trade-off need not be Gaussian): report it as ``sample_estimate``.

    Examples
    --------
    >>> from idaudit.dp import gdp_epsilon
    >>> round(gdp_epsilon(0.126937, 1.0), 4)
    1.0
    """
    scalar = is_scalar(delta, mu)
    d, m = checked_arrays((delta, "delta", 0.0, 1.0), (mu, "mu", 0.0, np.inf, "left"))
    d, m = np.broadcast_arrays(d, m)
    pos = (m > 0.0) & (d > 0.0)
    safe_m = np.where(pos, m, 1.0)
    safe_d = np.where(pos, d, 0.5)
    out = np.where(pos, gaussian_epsilon(safe_d, 1.0 / safe_m), 0.0)
    out = np.where((m > 0.0) & (d == 0.0), np.inf, out)
    return finish(np.asarray(out, dtype=np.float64), scalar)


def gdp_mu_lower_bound(fpr_upper: npt.ArrayLike, fnr_upper: npt.ArrayLike) -> float:
    r"""Lower bound on the μ of μ-GDP implied by trade-off points (Dong, Roth & Su 2022).

    Parameters
    ----------
    fpr_upper, fnr_upper : array_like, shape (n_points,)
        Upper bounds :math:`(x_i, y_i)` on the error rates of tests, in [0, 1].

    Returns
    -------
    float
        μ_lb >= 0; ``inf`` when a point has :math:`x_i = 0 < y_i < 1` or
        :math:`y_i = 0 < x_i < 1`. The trivial points (0, 1) and (1, 0) carry no evidence.

    Raises
    ------
    InvalidInputError
        If the shapes differ, there is no point or a value is outside [0, 1].

    Notes
    -----
    A μ-GDP mechanism has trade-off :math:`T \ge G_\mu` (:func:`gdp_tradeoff`). A test with
    errors at most :math:`(x, y)` gives :math:`G_\mu(x) \le T(x) \le y`, i.e.
    :math:`\mu \ge \Phi^{-1}(1-x) - \Phi^{-1}(y)` (Dong, Roth & Su 2022, Eq. 6 of the
    arXiv version). :math:`G_\mu` is symmetric, so swapping the roles of the rates gives the
    same bound. With jointly valid upper bounds the result is a certified lower bound on
    the smallest μ for which the mechanism is μ-GDP.

    Examples
    --------
    >>> from idaudit.dp import gdp_mu_lower_bound
    >>> round(gdp_mu_lower_bound([0.05, 0.5], [0.5, 0.05]), 6)
    1.644854
    """
    x, y = _frontier(fpr_upper, fnr_upper)
    with np.errstate(invalid="ignore"):
        mu = special.ndtri(1.0 - x) - special.ndtri(y)  # (n_frontier,)
    mu = np.where(np.isnan(mu), -np.inf, mu)  # inf - inf at (0, 1) and (1, 0): no evidence
    return float(max(0.0, float(np.max(mu))))


def _check_scores(scores: npt.ArrayLike, name: str) -> FloatArray:
    arr = as_float_array(scores, name)
    if arr.ndim != 1 or arr.size == 0:
        raise InvalidInputError(
            f"`{name}` must be a non-empty 1-D array of scores; got shape {arr.shape}."
        )
    if np.isnan(arr).any():
        raise InvalidInputError(f"`{name}` must not contain NaN; got {int(np.isnan(arr).sum())}.")
    return arr


def _frontier(fpr_upper: npt.ArrayLike, fnr_upper: npt.ArrayLike) -> tuple[FloatArray, FloatArray]:
    """Return the checked trade-off points (flat, in [0, 1], same size), on their frontier."""
    x = _check_rates(fpr_upper, "fpr_upper")
    y = _check_rates(fnr_upper, "fnr_upper")
    if x.shape != y.shape:
        raise InvalidInputError(
            f"`fpr_upper` and `fnr_upper` must have the same shape; got {x.shape} vs {y.shape}."
        )
    return _pareto(x, y)  # a point beaten in both rates by another never gives the maximum


def _check_rates(values: npt.ArrayLike, name: str) -> FloatArray:
    arr = as_float_array(values, name).ravel()
    if arr.size == 0:
        raise InvalidInputError(f"`{name}` must hold at least one point; got 0.")
    check_range(arr, name, 0.0, 1.0)
    return arr


def _check_n_alpha(n: Any, alpha: Any) -> tuple[int, float]:
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
        raise InvalidInputError(f"`n` must be an integer >= 1; got {n!r}.")
    if not isinstance(alpha, (int, float, np.floating)) or not 0.0 < float(alpha) < 1.0:
        raise InvalidInputError(f"`alpha` must be in (0, 1); got {alpha!r}.")
    return int(n), float(alpha)
