"""jax_privacy's CanaryScoreAuditor formulas, re-derived from its published description.

Written independently of idaudit (scipy only) after reading ``jax_privacy/auditing.py``
(google-deepmind/jax_privacy): the "in" canaries are idaudit's class B (higher scores),
the "out" canaries class A. Used by the peer check (tests/unit/certify/test_scores_peer.py)
and by benchmarks/bench_tradeoff.py.

* Clopper–Pearson upper bound: ``beta.ppf(1 - s, k + 1, n - k)`` (1 when k = n).
* Explicit threshold t: FN = #{in < t}, FP = #{out >= t}; each bound at s / 2;
  ε = max(0, ln(1 − FNR_u − δ) − ln FPR_u), and with ``one_sided=False`` also the form with
  the rates swapped (same bounds).
* Bonferroni: thresholds = the pooled distinct scores and +inf, pruned to the vertices of the
  lower-left convex hull of the (FN count, TN count) points; s is divided by their number m,
  so each bound is at s / (2m); ε is the best threshold's. m is chosen by the data: the
  bounds at those thresholds are not jointly valid (on identical classes they fail together
  in 0.36 of reps at s = 0.2, n = 1000; tests/calibration/test_tradeoff_soundness.py), though
  its single-δ ε was not seen above the truth (benchmarks/bench_tradeoff.py --validity).
* GDP (Nasr et al. 2023): bounds at s / (2m) on the same pruned thresholds, points with
  max(FPR_u, FNR_u) >= 1 − δ dropped, μ = max(Φ⁻¹(1 − FPR_u) − Φ⁻¹(FNR_u)) (0 if <= 0),
  ε solves δ = Φ(−ε/μ + μ/2) − e^ε Φ(−ε/μ − μ/2) on [0, 100] (log domain).
"""

from __future__ import annotations

import numpy as np
from scipy import optimize, stats


def cp_upper(k: np.ndarray, n: int, s: float) -> np.ndarray:
    """One-sided Clopper–Pearson upper bound at failure probability ``s`` (jax's form)."""
    k = np.asarray(k)
    return np.where(k < n, stats.beta.ppf(1 - s, k + 1, np.maximum(n - k, 1)), 1.0)


def hull_vertices(points: np.ndarray) -> np.ndarray:
    """Indices of points kept by repeatedly dropping those on or below a neighbour chord."""
    idx = np.arange(len(points))
    while len(idx) > 2:
        d = np.diff(points[idx], axis=0)
        cross = d[:-1, 1] * d[1:, 0] - d[1:, 1] * d[:-1, 0]
        drop = cross <= 0
        if not drop.any():
            break
        idx = idx[np.r_[True, ~drop, True]]
    return idx


def pruned_counts(in_s: np.ndarray, out_s: np.ndarray) -> tuple[np.ndarray, ...]:
    """(thresholds, TN counts, FN counts) on the hull, thresholds ascending."""
    t = np.concatenate((np.union1d(in_s, out_s), [np.inf]))
    fn = np.searchsorted(np.sort(in_s), t, side="left")
    tn = np.searchsorted(np.sort(out_s), t, side="left")
    keep = hull_vertices(np.stack([fn, tn], axis=1).astype(float))
    return t[keep], tn[keep], fn[keep]


def _eps(fnr_u: np.ndarray, fpr_u: np.ndarray, delta: float) -> float:
    tpr_lb = 1 - fnr_u
    ok = tpr_lb > delta
    if not ok.any():
        return 0.0
    return max(0.0, float(np.max(np.log(tpr_lb[ok] - delta) - np.log(fpr_u[ok]))))


def epsilon_cp(
    in_s: np.ndarray,
    out_s: np.ndarray,
    s: float,
    delta: float,
    one_sided: bool,
    threshold: float | None = None,
) -> float:
    """ε at an explicit threshold (``threshold`` given) or Bonferroni over all (None)."""
    n_pos, n_neg = len(in_s), len(out_s)
    if threshold is None:
        _, tn, fn = pruned_counts(in_s, out_s)
        s = s / len(fn)
    else:
        fn = np.array([np.sum(in_s < threshold)])
        tn = np.array([np.sum(out_s < threshold)])
    fnr_u = cp_upper(fn, n_pos, s / 2)
    fpr_u = cp_upper(n_neg - tn, n_neg, s / 2)
    eps = _eps(fnr_u, fpr_u, delta)
    if not one_sided:
        eps = max(eps, _eps(fpr_u, fnr_u, delta))
    return eps


def bonferroni_thresholds(in_s: np.ndarray, out_s: np.ndarray) -> np.ndarray:
    """The thresholds jax_privacy's Bonferroni strategy certifies (data-chosen)."""
    return pruned_counts(in_s, out_s)[0]


def gdp_bounds(in_s: np.ndarray, out_s: np.ndarray, s: float, delta: float) -> np.ndarray:
    """(FPR_u, FNR_u) rows the GDP route uses, after its 1 − δ filter."""
    _, tn, fn = pruned_counts(in_s, out_s)
    m = len(fn)
    fnr_u = cp_upper(fn, len(in_s), s / (2 * m))
    fpr_u = cp_upper(len(out_s) - tn, len(out_s), s / (2 * m))
    b = np.stack([fpr_u, fnr_u], axis=1)
    return b[np.max(b, axis=1) < 1 - delta]


def gdp_mu(bounds: np.ndarray) -> float:
    """μ = max Φ⁻¹(1 − FPR_u) − Φ⁻¹(FNR_u), 0 when nothing is positive."""
    if bounds.size == 0:
        return 0.0
    return max(0.0, float(np.max(stats.norm.isf(bounds[:, 0]) - stats.norm.ppf(bounds[:, 1]))))


def gdp_epsilon(mu: float, delta: float, xtol: float = 1e-13) -> float:
    """ε with δ(ε) = δ for μ-GDP (DRS Cor. 2.13), root in [0, 100] to ``xtol``."""
    if mu <= 0:
        return 0.0

    def gap(eps: float) -> float:
        x = stats.norm.logcdf(-eps / mu + mu / 2)
        y = eps + stats.norm.logcdf(-eps / mu - mu / 2)
        return x + np.log1p(-np.exp(y - x)) - np.log(delta)

    if gap(0.0) <= 0:
        return 0.0
    if gap(100.0) >= 0:
        return 100.0
    return float(optimize.brentq(gap, 0.0, 100.0, xtol=xtol, rtol=1e-15))


def epsilon_gdp(in_s: np.ndarray, out_s: np.ndarray, s: float, delta: float) -> float:
    """The whole GDP route: μ from the Bonferroni bounds, then ε(δ)."""
    return gdp_epsilon(gdp_mu(gdp_bounds(in_s, out_s, s, delta)), delta)
