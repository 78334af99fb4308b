import math

import numpy as np
import pytest
from scipy import integrate

from idaudit.dp import (
    anytime_lower_bound,
    anytime_upper_bound,
    bernstein_mean_lower_bound,
    betting_mean_lower_bound,
    clopper_pearson_upper,
)
from idaudit.exceptions import InvalidInputError


def _capital_by_betting(x: np.ndarray, p0: float) -> float:
    """Average over r ~ U(0, 1) of the wealth of a gambler betting (1 - r)/(1 - p0) per draw.

    An independent second implementation: the wealth is multiplied draw by draw in a loop and
    the mixture over r is integrated numerically — no closed form, no incomplete beta.
    """

    def wealth(r: float) -> float:
        lam = (1.0 - r) / (1.0 - p0)
        w = 1.0
        for xi in x:
            w *= 1.0 + lam * (p0 - xi)
        return w

    value, _ = integrate.quad(wealth, 0.0, 1.0, epsabs=0.0, epsrel=1e-10, limit=200)
    return value


@pytest.mark.parametrize(("k", "n", "alpha"), [(0, 20, 0.05), (3, 40, 0.05), (12, 50, 0.01)])
def test_upper_bound_is_where_the_betting_wealth_crosses_one_over_alpha(k, n, alpha):
    x = np.r_[np.ones(k), np.zeros(n - k)]
    np.random.default_rng(0).shuffle(x)  # the wealth depends only on the counts, not the order
    u = anytime_upper_bound(k, n, alpha)
    # at the bound the wealth has reached 1/alpha; just below it, it has not (rtol of quad)
    assert _capital_by_betting(x, u) >= (1 / alpha) * (1 - 1e-8)
    assert _capital_by_betting(x, u - 1e-6) < 1 / alpha


def test_upper_bound_properties():
    n = np.arange(1, 300)
    k = n // 4
    u = anytime_upper_bound(k, n, 0.05)
    # above the empirical rate (the mixture never beats the likelihood ratio at the MLE) ...
    assert np.all(u > k / n)
    # ... and wider than the fixed-n exact bound at the same level, the price of any n
    assert np.all(u >= clopper_pearson_upper(k, n, 0.05) - 1e-12)
    # more errors or a smaller alpha give a larger bound
    assert np.all(np.diff(anytime_upper_bound(np.arange(0, 50), 50, 0.05)) > 0)
    assert anytime_upper_bound(5, 50, 0.01) > anytime_upper_bound(5, 50, 0.05)
    assert anytime_upper_bound(7, 7, 0.05) == 1.0


def test_zero_error_bound_against_closed_form():
    # with k = 0 the wealth is (1 - (1 - p)^(n+1)) / ((n + 1) p (1 - p)^n); solve = 1/alpha
    from scipy import optimize

    for n, alpha in [(10, 0.05), (100, 0.025), (2000, 1e-4)]:

        def f(p, n=n, alpha=alpha):  # in logs: (1 - p)^n underflows near p = 1
            log_k = (
                math.log(-math.expm1((n + 1) * math.log1p(-p)))
                - math.log((n + 1) * p)
                - n * math.log1p(-p)
            )
            return log_k - math.log(1 / alpha)

        ref = optimize.brentq(f, 1e-9, 0.5, xtol=1e-15)
        assert anytime_upper_bound(0, n, alpha) == pytest.approx(ref, rel=1e-9)


def test_lower_bound_mirrors_upper():
    k, n = np.array([0, 3, 10]), np.array([10, 30, 10])
    np.testing.assert_allclose(
        anytime_lower_bound(k, n, 0.05), 1 - anytime_upper_bound(n - k, n, 0.05)
    )
    assert anytime_lower_bound(0, 10, 0.05) == 0.0


def test_non_integer_k_is_the_continuous_extension():
    lo, mid, hi = anytime_upper_bound([2, 2.5, 3], 40, 0.05)
    assert lo < mid < hi


@pytest.mark.parametrize(
    ("k", "n", "alpha", "match"),
    [
        (-1, 10, 0.05, r"`k` must be in \[0, n\]"),
        (11, 10, 0.05, r"`k` must be in \[0, n\]"),
        (1, 0, 0.05, "`n` must be a positive integer"),
        (1, 10, 1.0, r"`alpha` must be in \(0, 1\)"),
        (1, 2.5, 0.05, "`n` must be integer-valued"),
    ],
)
def test_upper_bound_rejects_bad_input(k, n, alpha, match):
    with pytest.raises(InvalidInputError, match=match):
        anytime_upper_bound(k, n, alpha)


def _betting_rejects(x: np.ndarray, m: float, alpha: float) -> bool:
    """Loop reference for one candidate mean: does the hedged wealth ever reach 1/alpha?"""
    n = len(x)
    wealth, best = 1.0, 1.0
    total, sq = 0.0, 0.0
    for i, xi in enumerate(x, start=1):
        mu_prev = (0.5 + total) / i  # \hat mu_{i-1}
        var_prev = (0.25 + sq) / i  # \hat sigma^2_{i-1}
        lam = min(math.sqrt(2 * math.log(1 / alpha) / (n * var_prev)), 0.5 / m)
        wealth *= 1 + lam * (xi - m)
        best = max(best, wealth)
        total += xi
        mu_i = (0.5 + total) / (i + 1)
        sq += (xi - mu_i) ** 2
        del mu_prev
    return best >= 1 / alpha


def test_betting_mean_bound_matches_loop_reference():
    x = np.random.default_rng(3).beta(2, 5, size=60)
    alpha = 0.1
    lb = betting_mean_lower_bound(x, alpha)
    assert 0 < lb < x.mean()
    grid = (np.arange(1, 4097) - 0.5) / 4096
    at = int(np.searchsorted(grid, lb))
    assert grid[at] == lb
    assert _betting_rejects(x, grid[at], alpha)  # the returned point is rejected ...
    assert not _betting_rejects(x, grid[at + 1], alpha)  # ... the next one is not


def test_bernstein_closed_form():
    x = np.random.default_rng(4).uniform(size=80)
    a = 0.05
    ref = (
        x.mean()
        - math.sqrt(2 * np.var(x, ddof=1) * math.log(2 / a) / 80)
        - 7 * math.log(2 / a) / (3 * 79)
    )
    assert bernstein_mean_lower_bound(x, a) == pytest.approx(max(ref, 0.0), rel=1e-12)


def test_mean_bounds_reject_bad_input():
    with pytest.raises(InvalidInputError, match=r"`x` must be in \[0, 1\]"):
        betting_mean_lower_bound([0.5, 1.5])
    with pytest.raises(InvalidInputError, match="non-empty 1-D"):
        betting_mean_lower_bound(np.zeros((2, 2)))
    with pytest.raises(InvalidInputError, match="at least 2 draws"):
        bernstein_mean_lower_bound([0.5])
    with pytest.raises(InvalidInputError, match=r"`alpha` must be in \(0, 1\)"):
        betting_mean_lower_bound([0.5], alpha=0.0)
