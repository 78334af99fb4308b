"""One-sided finite-sample lower confidence bounds on the population MMD (certified MMD-TV).

Three bounds, all for a kernel with values in [0, 1] (the RBF kernel), all with a bandwidth
that does not depend on the rows the bound is computed on (docs/mmdtv.md derives each):

* ``"betting"`` — split each identity's rows in two; on the *selection* half choose the
  bandwidth (median heuristic) and the empirical witness, a function of RKHS norm exactly 1;
  on the *evaluation* half bound the witness's mean difference from below with the
  Waudby-Smith–Ramdas betting bound. MMD ≥ E_P f − E_Q f for every unit-norm f.
* ``"bernstein"`` — the same witness, with the Maurer–Pontil empirical-Bernstein bound.
* ``"mcdiarmid"`` — McDiarmid's bounded-differences inequality on the unbiased MMD² (Eq. 7)
  of the evaluation half (all rows when the bandwidth is fixed), as in Gretton et al. 2012.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import numpy.typing as npt
from scipy.spatial.distance import cdist, pdist

from idaudit._validation import check_in_range
from idaudit.dp import bernstein_mean_lower_bound, betting_mean_lower_bound

__all__ = ["BOUNDS", "OptionalLevel", "mmd_lower_bound", "split_rows"]

FloatArray = npt.NDArray[np.float64]
Bound = Literal["betting", "bernstein", "mcdiarmid"]
BOUNDS: tuple[str, ...] = ("betting", "bernstein", "mcdiarmid")


@dataclass(frozen=True)
class OptionalLevel:
    """Parameter constraint: ``None`` or a confidence level in (0, 1)."""

    def check(self, value: Any, name: str) -> Any:
        """Return ``value`` (``None`` or a float) or raise naming ``name``."""
        return None if value is None else check_in_range(value, name, 0.0, 1.0)

    def invalid(self) -> tuple[Any, ...]:
        """Values refused."""
        return (0.0, 1.0, float("nan"), "0.95")


def split_rows(n: int, seed: int, role: int) -> tuple[npt.NDArray[np.intp], npt.NDArray[np.intp]]:
    """Split the rows of one identity into a selection and an evaluation half, seeded.

    The split depends only on ``seed``, the identity's role in the pair (0 for A, 1 for B) and
    its row count — never on row values — so the evaluation half is independent of every
    choice made on the selection half, and ``fit`` and ``audit_pairs`` split alike.
    """
    perm = np.random.default_rng([seed, role, n]).permutation(n)
    n_sel = n // 2
    return np.sort(perm[:n_sel]), perm[n_sel:]  # evaluation rows in random order


def _median_bandwidth(a: FloatArray, b: FloatArray) -> float:
    """Median Euclidean distance over the distinct pairs of the pooled rows (σ*)."""
    return float(np.median(pdist(np.concatenate([a, b]))))


def _rbf(x: FloatArray, y: FloatArray, sigma: float) -> FloatArray:
    out: FloatArray = np.exp(-cdist(x, y, "sqeuclidean") / (2.0 * sigma**2))
    return out


def _mmd2_unbiased(a: FloatArray, b: FloatArray, sigma: float) -> float:
    """Eq. 7 of seed 000 (diagonals excluded within each sample)."""
    n, m = len(a), len(b)
    kaa, kbb, kab = _rbf(a, a, sigma), _rbf(b, b, sigma), _rbf(a, b, sigma)
    within_a = (kaa.sum() - np.trace(kaa)) / (n * (n - 1))
    within_b = (kbb.sum() - np.trace(kbb)) / (m * (m - 1))
    return float(within_a + within_b - 2.0 * kab.mean())


def mmd_lower_bound(
    a: FloatArray,
    b: FloatArray,
    *,
    alpha: float,
    bound: Bound,
    bandwidth: float | None,
    bandwidth_scale: float,
    seed: int,
) -> tuple[float, float]:
    r"""Lower confidence bound on the population MMD of one pair, and the bandwidth used.

    Parameters
    ----------
    a : numpy.ndarray, shape (n_a, d)
    b : numpy.ndarray, shape (n_b, d)
        Rows of the two identities, each with at least 4 rows.
    alpha : float
        Error level of this one bound, in (0, 1).
    bound : {"betting", "bernstein", "mcdiarmid"}
    bandwidth : float or None
        Fixed σ, or ``None`` for the median heuristic on the selection half.
    bandwidth_scale : float
        Multiplies σ.
    seed : int
        Seed of the split.

    Returns
    -------
    mmd_lb : float
        :math:`L` with :math:`\Pr[\mathrm{MMD}(P_A, P_B) < L] \le \alpha`, in [0, √2].
    sigma : float
        The bandwidth; ``nan`` when the selection half has a median distance of 0 (the bound
        is then 0).
    """
    sel_a, ev_a = split_rows(len(a), seed, 0)
    sel_b, ev_b = split_rows(len(b), seed, 1)
    if bandwidth is None:
        sigma = _median_bandwidth(a[sel_a], b[sel_b]) * bandwidth_scale
    else:
        sigma = bandwidth * bandwidth_scale
    if not sigma > 0:
        return 0.0, math.nan
    if bound == "mcdiarmid":
        xa, xb = (a, b) if bandwidth is not None else (a[ev_a], b[ev_b])
        n, m = len(xa), len(xb)
        # replacing one row of A moves Eq. 7 by at most 4/n (two averages of kernel values in
        # [0, 1], each weighted 2/n), one row of B by 4/m: sum of squares 16 (1/n + 1/m)
        slack = math.sqrt(8.0 * (1.0 / n + 1.0 / m) * math.log(1.0 / alpha))
        return math.sqrt(max(_mmd2_unbiased(xa, xb, sigma) - slack, 0.0)), sigma
    xa, xb = a[sel_a], b[sel_b]
    kaa, kbb, kab = _rbf(xa, xa, sigma), _rbf(xb, xb, sigma), _rbf(xa, xb, sigma)
    # the RKHS norm of the empirical mean-embedding difference (V-statistic, diagonals in)
    norm2 = float(kaa.mean() + kbb.mean() - 2.0 * kab.mean())
    if not norm2 > 1e-12:
        return 0.0, sigma

    def witness(x: FloatArray) -> FloatArray:
        # f = (mu_a - mu_b) / ||mu_a - mu_b||: unit norm, so |f(x)| <= sqrt(k(x, x)) = 1
        values = (_rbf(x, xa, sigma).mean(axis=1) - _rbf(x, xb, sigma).mean(axis=1)) / math.sqrt(
            norm2
        )
        out: FloatArray = np.clip(values, -1.0, 1.0)  # rounding only
        return out

    fa, fb = witness(a[ev_a]), witness(b[ev_b])
    mean_lb = betting_mean_lower_bound if bound == "betting" else bernstein_mean_lower_bound
    # E_A f >= 2 L_A - 1 and E_B f <= 1 - 2 L_B, each at alpha / 2 (union bound)
    low_a = 2.0 * mean_lb((fa + 1.0) / 2.0, alpha / 2.0) - 1.0
    high_b = 1.0 - 2.0 * mean_lb((1.0 - fb) / 2.0, alpha / 2.0)
    return min(max(low_a - high_b, 0.0), math.sqrt(2.0)), sigma
