"""Attack measures on two score samples: ROC hull, TPR at a fixed FPR, accuracy, raw-count ε.

The measures jax_privacy's ``CanaryScoreAuditor`` reports next to its ε bounds, each with its
formal status: the plug-in values on the samples are ``sample_estimate`` (they can overshoot);
the maximum accuracy with ``alpha`` is a ``certified_upper_bound``; :func:`bootstrap_interval`
gives bootstrap quantiles of any of them (``sample_estimate``: a description of the
estimate's spread, not a confidence statement about the mechanism).

Every measure reads the tests "say B when score ≥ t" and, where a randomised choice between
two thresholds is allowed, the upper concave hull of the ROC points.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import numpy.typing as npt
import xarray as xr
from scipy import stats

from idaudit._results import Status, provenance, variable
from idaudit._validation import RngLike, check_in_range, check_integer, check_random_state
from idaudit.certify._scores import _numbers, check_scores, seed_of
from idaudit.dp import simultaneous_rate_bounds
from idaudit.exceptions import InvalidInputError

__all__ = [
    "BootstrapInterval",
    "bootstrap_interval",
    "epsilon_raw_counts",
    "hull_auc",
    "max_accuracy",
    "roc_hull",
    "tpr_at_fpr",
]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

#: Status of every plug-in measure of this module.
MEASURE_STATUS: Status = "sample_estimate"


def _counts(a: FloatArray, b: FloatArray) -> tuple[FloatArray, IntArray, IntArray]:
    """Thresholds (distinct pooled scores, then +inf) and FP, TP counts, FP descending."""
    t = np.concatenate([np.union1d(a, b), [np.inf]])  # (n_t,)
    fp = a.size - np.searchsorted(np.sort(a), t, side="left")  # #{a >= t}
    tp = b.size - np.searchsorted(np.sort(b), t, side="left")  # #{b >= t}
    return t, fp.astype(np.int64), tp.astype(np.int64)


def _upper_hull(x: FloatArray, y: FloatArray) -> IntArray:
    """Return the indices of the upper concave hull of points sorted by x."""
    keep: list[int] = []
    for i in range(x.size):
        while len(keep) >= 2:
            j, k = keep[-2], keep[-1]
            # drop k when it lies on or below the chord from j to i
            if (x[k] - x[j]) * (y[i] - y[j]) - (y[k] - y[j]) * (x[i] - x[j]) >= 0:
                keep.pop()
            else:
                break
        keep.append(i)
    return np.asarray(keep, dtype=np.int64)


def roc_hull(scores_a: npt.ArrayLike, scores_b: npt.ArrayLike) -> tuple[FloatArray, FloatArray]:
    """Vertices of the ROC convex hull of the tests "say B when score ≥ t".

    Parameters
    ----------
    scores_a, scores_b : array_like, shape (n_a,), (n_b,)
        Scores of class A (negatives) and class B (positives); higher means B. No NaN.

    Returns
    -------
    fpr, tpr : numpy.ndarray, shape (n_vertices,)
        The hull's vertices from (0, TPR at FPR 0) to (1, 1), FPR strictly increasing: the
        best (FPR, TPR) trade-offs a test randomising between two thresholds reaches on the
        samples (status ``sample_estimate``).

    Raises
    ------
    InvalidInputError
        On empty or non-1-D scores or NaN.

    Examples
    --------
    >>> from idaudit.certify import roc_hull
    >>> fpr, tpr = roc_hull([1, 2, 3, 5], [0, 4, 6, 7])
    >>> fpr.tolist(), tpr.tolist()
    ([0.0, 0.25, 1.0], [0.5, 0.75, 1.0])
    """
    a, b = check_scores(scores_a, "scores_a"), check_scores(scores_b, "scores_b")
    return _hull(a, b)


def _hull(a: FloatArray, b: FloatArray) -> tuple[FloatArray, FloatArray]:
    _, fp, tp = _counts(a, b)
    x, y = fp[::-1] / a.size, tp[::-1] / b.size  # FPR ascending (t descending)
    # at each FPR only the largest TPR can be on the hull (x ties: y ascending, last kept)
    last = np.r_[x[1:] != x[:-1], True]
    x, y = x[last], y[last]
    idx = _upper_hull(x, y)
    return np.asarray(x[idx], dtype=np.float64), np.asarray(y[idx], dtype=np.float64)


def hull_auc(scores_a: npt.ArrayLike, scores_b: npt.ArrayLike) -> float:
    """Area under the ROC convex hull (jax_privacy's ``attack_auroc``).

    Parameters
    ----------
    scores_a, scores_b : array_like, shape (n_a,), (n_b,)
        Scores of class A (negatives) and class B (positives); higher means B. No NaN.

    Returns
    -------
    float
        In [0.5, 1] — status ``sample_estimate``. It is at least the empirical
        (Mann–Whitney) AUC, with equality when the empirical ROC is concave; on scores that
        rank B *below* A it is 0.5 (the chance diagonal is on the hull) where the empirical
        AUC is 0.

    Raises
    ------
    InvalidInputError
        On empty or non-1-D scores or NaN.

    Examples
    --------
    >>> from idaudit.certify import hull_auc
    >>> hull_auc([1, 2, 3, 5], [0, 4, 6, 7])  # jax_privacy's test case: 13/16
    0.8125
    """
    x, y = roc_hull(scores_a, scores_b)
    x, y = np.r_[0.0, x], np.r_[0.0, y]  # from the origin up to the first vertex: no area
    return float(np.sum(0.5 * (y[1:] + y[:-1]) * np.diff(x)))


def tpr_at_fpr(
    scores_a: npt.ArrayLike, scores_b: npt.ArrayLike, fpr: float | npt.ArrayLike
) -> float | FloatArray:
    """Largest TPR at a given FPR over tests randomising between two thresholds.

    Parameters
    ----------
    scores_a, scores_b : array_like, shape (n_a,), (n_b,)
        Scores of class A (negatives) and class B (positives); higher means B. No NaN.
    fpr : float or array_like
        False-positive rate(s) in [0, 1].

    Returns
    -------
    float or numpy.ndarray
        The ROC hull's TPR at ``fpr`` (same shape) — status ``sample_estimate``.

    Raises
    ------
    InvalidInputError
        On bad scores, or an ``fpr`` that is not a number or lies outside [0, 1].

    Examples
    --------
    >>> from idaudit.certify import tpr_at_fpr
    >>> tpr_at_fpr([0, 2], [1, 3], [0.0, 0.25, 0.5]).tolist()  # jax_privacy's test case
    [0.5, 0.75, 1.0]
    """
    f = _numbers(fpr, "fpr")
    if np.isnan(f).any() or (f < 0).any() or (f > 1).any():
        raise InvalidInputError(f"`fpr` must be in [0, 1]; got {fpr!r}.")
    x, y = roc_hull(scores_a, scores_b)
    out = np.interp(f, x, y)
    return float(out) if out.ndim == 0 else np.asarray(out, dtype=np.float64)


def max_accuracy(
    scores_a: npt.ArrayLike,
    scores_b: npt.ArrayLike,
    *,
    prevalence: float | None = None,
    alpha: float | None = None,
) -> float:
    r"""Largest accuracy of a threshold test "say B when score ≥ t".

    Parameters
    ----------
    scores_a, scores_b : array_like, shape (n_a,), (n_b,)
        Scores of class A (negatives) and class B (positives); higher means B. No NaN.
    prevalence : float, optional
        P(B) in [0, 1]; default n_b / (n_a + n_b).
    alpha : float, optional
        With a level in (0, 1), an upper bound on the *true* largest accuracy instead of the
        sample's.

    Returns
    -------
    float
        :math:`\max_t\ \pi\,\mathrm{TPR}(t) + (1-\pi)\,\mathrm{TNR}(t)` — status
        ``sample_estimate`` on the samples; with ``alpha``, status ``certified_upper_bound``:
        with probability at least ``1 - alpha`` no threshold's true accuracy exceeds it.

    Raises
    ------
    InvalidInputError
        On bad scores, or ``prevalence`` or ``alpha`` out of range.

    Notes
    -----
    With ``alpha`` the TPR of every threshold is bounded by
    :func:`~idaudit.dp.simultaneous_rate_bounds` on class B (level α/2) and the TNR, the
    tail P_A(S < t) read on the negated scores, on class A (level α/2): the bounds hold for
    every threshold at once, so their maximum does too. (jax_privacy bounds each threshold at
    α/2 on its own; the maximum of those is not a bound at 1 − α.)

    Examples
    --------
    >>> from idaudit.certify import max_accuracy
    >>> max_accuracy([0, 0, 2, 2], [1, 1, 3, 3])  # t between 0 and 1: TPR 1, TNR 1/2
    0.75
    """
    a, b = check_scores(scores_a, "scores_a"), check_scores(scores_b, "scores_b")
    pi = b.size / (a.size + b.size) if prevalence is None else prevalence
    pi = check_in_range(pi, "prevalence", 0.0, 1.0, closed="both")
    _, fp, tp = _counts(a, b)
    tn = a.size - fp
    if alpha is None:
        tpr, tnr = tp / b.size, tn / a.size
    else:
        level = check_in_range(alpha, "alpha", 0.0, 1.0)
        tpr = simultaneous_rate_bounds(b.size, level / 2)[tp]  # P_B(S >= t), count tp
        tnr = simultaneous_rate_bounds(a.size, level / 2)[tn]  # P_A(-S > -t), count tn
    return float(min(1.0, np.max(pi * tpr + (1.0 - pi) * tnr)))


def epsilon_raw_counts(
    scores_a: npt.ArrayLike,
    scores_b: npt.ArrayLike,
    *,
    min_count: int = 50,
    delta: float = 0.0,
    one_sided: bool = True,
) -> float:
    r"""ε read off the ROC hull's counts, without any confidence correction.

    Parameters
    ----------
    scores_a, scores_b : array_like, shape (n_a,), (n_b,)
        Scores of class A (negatives) and class B (positives); higher means B. No NaN.
    min_count : int, default 50
        Only operating points with at least this many false positives (expected: the hull is
        interpolated at FPR = min_count / n_a) are read, >= 1. Too small: a noisy, inflated
        estimate; too large: biased towards 0.
    delta : float, default 0.0
        δ in [0, 1].
    one_sided : bool, default True
        Only the ratio ln((TPR − δ)/FPR); False also reads the reversed rule
        ln((TNR − δ)/FNR) with ``min_count`` false negatives.

    Returns
    -------
    float
        :math:`\max \ln((\mathrm{TPR} - \delta)/\mathrm{FPR})` over the hull at FPR >=
        ``min_count / n_a``, at least 0 — status ``sample_estimate`` (plug-in rates: it can
        exceed the true ε). 0 when ``min_count >= n_a``.

    Raises
    ------
    InvalidInputError
        On bad scores or parameters.

    Examples
    --------
    >>> import numpy as np
    >>> from idaudit.certify import epsilon_raw_counts
    >>> a = np.r_[np.ones(4), 2 * np.ones(4)]
    >>> b = np.r_[np.ones(2), 2 * np.ones(4), 3 * np.ones(2)]
    >>> round(epsilon_raw_counts(a, b, min_count=1), 6)  # TPR 3/8 at FPR 1/8: ln 3
    1.098612
    """
    a, b = check_scores(scores_a, "scores_a"), check_scores(scores_b, "scores_b")
    k = check_integer(min_count, "min_count", minimum=1)
    d = check_in_range(delta, "delta", 0.0, 1.0, closed="both")
    if not isinstance(one_sided, bool | np.bool_):
        raise InvalidInputError(f"`one_sided` must be True or False; got {one_sided!r}.")
    eps = _raw(a, b, k, d)
    if not one_sided:
        eps = max(eps, _raw(-b, -a, k, d))  # "say A when score < t": roles swapped
    return max(eps, 0.0)


def _raw(a: FloatArray, b: FloatArray, min_count: int, delta: float) -> float:
    if min_count >= a.size:
        return 0.0
    x, y = _hull(a, b)
    low = min_count / a.size
    y_low = float(np.interp(low, x, y))
    best = np.log(y_low - delta) - np.log(low) if y_low > delta else 0.0
    ok = (x >= low) & (y > delta)
    if ok.any():
        best = max(best, float(np.max(np.log(y[ok] - delta) - np.log(x[ok]))))
    return float(best)


@dataclass(frozen=True, eq=False, repr=False)
class BootstrapInterval:
    """Bootstrap quantiles of a statistic of two score samples.

    Attributes
    ----------
    estimate : float
        The statistic on the samples.
    quantiles : numpy.ndarray, shape (n_quantiles,)
        The levels asked for.
    values : numpy.ndarray, shape (n_quantiles,)
        The (bias-corrected, accelerated) bootstrap quantiles at those levels.
    n_bootstrap : int
        Resamples drawn.
    method : str
        ``"percentile"``, ``"bc"`` or ``"bca"``.
    """

    estimate: float
    quantiles: FloatArray
    values: FloatArray
    n_bootstrap: int
    method: str
    seed: int | None = None

    #: A description of the estimate's spread under resampling, not a confidence bound on
    #: the mechanism's ε: the status of the quantiles.
    status: ClassVar[Status] = "sample_estimate"

    def to_xarray(self) -> xr.Dataset:
        """Return the quantiles along ``quantile`` with the estimate and the settings.

        Returns
        -------
        xarray.Dataset
            Variables ``value`` (dim ``quantile``) and ``estimate``, both
            ``sample_estimate``.
        """
        data = {
            "value": variable(
                "quantile", self.values, long_name="bootstrap quantile", status=self.status
            ),
            "estimate": variable((), self.estimate, long_name="estimate", status=self.status),
        }
        settings = {"n_bootstrap": self.n_bootstrap, "method": self.method}
        attrs = provenance(title="bootstrap_interval", seeds={"rng": self.seed}, settings=settings)
        return xr.Dataset(data, coords={"quantile": self.quantiles}, attrs=attrs)

    def __repr__(self) -> str:
        vals = ", ".join(f"{v:.4g}" for v in self.values)
        return (
            f"BootstrapInterval(estimate={self.estimate:.4g}, values=[{vals}], "
            f"method={self.method!r}, n_bootstrap={self.n_bootstrap})  # status: {self.status}"
        )


def bootstrap_interval(
    statistic: Callable[[FloatArray, FloatArray], float],
    scores_a: npt.ArrayLike,
    scores_b: npt.ArrayLike,
    *,
    n_bootstrap: int = 1000,
    quantiles: npt.ArrayLike = (0.025, 0.975),
    method: str = "bc",
    rng: RngLike = 0,
) -> BootstrapInterval:
    r"""Bootstrap quantiles of ``statistic(scores_a, scores_b)``, each class resampled.

    Parameters
    ----------
    statistic : callable
        ``f(scores_a, scores_b) -> float``, e.g. :func:`hull_auc` or
        ``lambda a, b: tpr_at_fpr(a, b, 0.01)``.
    scores_a, scores_b : array_like, shape (n_a,), (n_b,)
        The two samples; each is resampled with replacement at its own size.
    n_bootstrap : int, default 1000
        Resamples, >= 2.
    quantiles : array_like, default (0.025, 0.975)
        Levels in (0, 1).
    method : {"percentile", "bc", "bca"}, default "bc"
        Plain percentiles; bias-corrected (Efron 1987); or bias-corrected and accelerated,
        the acceleration from the jackknife over every score of both classes (n_a + n_b
        extra evaluations).
    rng : int, numpy.random.SeedSequence, numpy.random.Generator or None, default 0
        Randomness of the resamples.

    Returns
    -------
    BootstrapInterval
        Status ``sample_estimate``: how the estimate varies under resampling, not a
        confidence bound on the mechanism (a bootstrap of a maximum over thresholds, or of
        an ε near a boundary, can be far off its nominal coverage).

    Raises
    ------
    InvalidInputError
        On bad scores, ``n_bootstrap`` < 2, a level outside (0, 1), an unknown method, a
        ``statistic`` that is not callable, or one whose value on the scores (or on any
        resample) is not one real number or is NaN (an infinite ε is kept).

    Notes
    -----
    With :math:`\hat\theta` the estimate, :math:`\hat\theta^*_b` the resampled values and
    :math:`z_0 = \Phi^{-1}((\#\{\hat\theta^*_b < \hat\theta\} + 1)/(B + 2))` (smoothed so
    it stays finite), level :math:`q` maps to the empirical quantile at
    :math:`\Phi(z_0 + (z_0 + z_q)/(1 - a(z_0 + z_q)))`, with :math:`a = 0` except under
    ``"bca"``, where :math:`a = \sum (\bar\theta - \theta_{(i)})^3 / (6 (\sum (\bar\theta -
    \theta_{(i)})^2)^{3/2})` over the leave-one-out values.

    References
    ----------
    B. Efron, "Better Bootstrap Confidence Intervals", JASA 82(397), 1987.

    Examples
    --------
    >>> import numpy as np
    >>> from idaudit.certify import bootstrap_interval, hull_auc
    >>> gen = np.random.default_rng(0)
    >>> a, b = gen.normal(0, 1, 300), gen.normal(1, 1, 300)
    >>> ci = bootstrap_interval(hull_auc, a, b, n_bootstrap=200, rng=0)
    >>> bool(ci.values[0] < ci.estimate < ci.values[1]), ci.status
    (True, 'sample_estimate')
    """
    a, b = check_scores(scores_a, "scores_a"), check_scores(scores_b, "scores_b")
    n_boot = check_integer(n_bootstrap, "n_bootstrap", minimum=2)
    q = np.atleast_1d(np.asarray(quantiles, dtype=np.float64))
    if q.ndim != 1 or q.size == 0 or np.isnan(q).any() or (q <= 0).any() or (q >= 1).any():
        raise InvalidInputError(f"`quantiles` must be levels in (0, 1); got {quantiles!r}.")
    if method not in ("percentile", "bc", "bca"):
        raise InvalidInputError(
            f"`method` must be one of 'percentile', 'bc', 'bca'; got {method!r}."
        )
    if not callable(statistic):
        raise InvalidInputError(
            f"`statistic` must be a callable f(scores_a, scores_b) -> float; got {statistic!r}."
        )
    seed = seed_of(rng)
    gen = check_random_state(rng)
    estimate = _one_number(statistic(a, b), "on the scores")
    values = np.empty(n_boot)
    for i in range(n_boot):
        values[i] = _one_number(
            statistic(a[gen.integers(0, a.size, a.size)], b[gen.integers(0, b.size, b.size)]),
            f"on resample {i}",
        )
    if method == "percentile":
        levels = q
    else:
        z0 = stats.norm.ppf((np.sum(values < estimate) + 1) / (n_boot + 2))
        accel = _acceleration(statistic, a, b) if method == "bca" else 0.0
        zq = z0 + stats.norm.ppf(q)
        levels = stats.norm.cdf(z0 + zq / (1 - accel * zq))
    with np.errstate(invalid="ignore"):  # inf - inf between two infinite values
        out = np.quantile(values, levels, method="linear")
    lower, upper = (np.quantile(values, levels, method=m) for m in ("lower", "higher"))
    out = np.where(lower == upper, lower, out)  # between two equal infinite ε: that ε, not NaN
    return BootstrapInterval(estimate, q, np.asarray(out, dtype=np.float64), n_boot, method, seed)


def _one_number(value: Any, where: str) -> float:
    """``value`` as a float if it is one real number, not NaN (±inf allowed), else an error."""
    v = np.asarray(value)
    if v.ndim != 0 or v.dtype.kind not in "biuf" or np.isnan(v):
        raise InvalidInputError(
            f"`statistic` must return one real number, not NaN; got {value!r} {where}."
        )
    return float(v)


def _acceleration(
    statistic: Callable[[FloatArray, FloatArray], float], a: FloatArray, b: FloatArray
) -> float:
    """Return the jackknife acceleration over every score of both classes."""
    jack = [_one_number(statistic(np.delete(a, i), b), "leaving one out") for i in range(a.size)]
    jack += [_one_number(statistic(a, np.delete(b, i)), "leaving one out") for i in range(b.size)]
    dev = np.mean(jack) - np.asarray(jack)
    den = 6.0 * np.sum(dev**2) ** 1.5
    return 0.0 if den == 0 else float(np.sum(dev**3) / den)
