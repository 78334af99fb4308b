"""One-run bounds against a brute force of Steinke et al.'s tail bound in mpmath.

The reference evaluates Theorem 5.2's bound with exact binomial sums at 50 digits,
F(k) = Σ_{j ≥ k} C(r, j) q^j (1 − q)^(r − j), and the δ term as the largest window average
max_i (F(v − i) − F(v)) / i over every i — nothing shared with the code under test.
"""

from __future__ import annotations

import mpmath as mp
import numpy as np
import pytest

from idaudit.dp import one_run_epsilon, one_run_gdp_mu, one_run_gdp_refutes, one_run_p_value
from idaudit.exceptions import InvalidInputError

mp.mp.dps = 50


def _p_ref(m: int, r: int, v: int, eps: float, delta: float) -> float:
    q = mp.e ** mp.mpf(eps) / (1 + mp.e ** mp.mpf(eps))
    pmf = [mp.binomial(r, j) * q**j * (1 - q) ** (r - j) for j in range(r + 1)]

    def tail(k: int) -> mp.mpf:
        return mp.fsum(pmf[max(k, 0) :])

    head = tail(v)
    if v == 0:
        return 1.0
    spread = max((tail(v - i) - head) / i for i in range(1, v + 1))
    return float(min(1, head + 2 * m * mp.mpf(delta) * spread))


# jax_privacy's own grid for its p-value test (tests/auditing_test.py, test_one_run_p_value)
GRID = [
    (m, r, r - wrong, eps, delta)
    for m in (10, 100, 1000)
    for r in (1, 10, 100)
    for wrong in (0, 1, 10, 100)
    for eps in (0.0, 0.5, 1.0)
    for delta in (0.0, 1e-6, 1e-3, 1e-1, 1.0)
    if wrong <= r <= m
]


@pytest.mark.parametrize(("m", "r", "v", "eps", "delta"), GRID)
def test_p_value_matches_brute_force(m: int, r: int, v: int, eps: float, delta: float) -> None:
    # rtol 1e-10: scipy's binomial tail is accurate to ~1e-14 relative here
    got = one_run_p_value(m, r, v, eps, delta)
    assert got == pytest.approx(_p_ref(m, r, v, eps, delta), rel=1e-10, abs=1e-300)


@pytest.mark.parametrize(("r", "v"), [(10, 10), (50, 45), (100, 80), (200, 120), (30, 16)])
@pytest.mark.parametrize("alpha", [0.05, 1e-3])
def test_pure_dp_bound_is_where_the_tail_reaches_alpha(r: int, v: int, alpha: float) -> None:
    # δ = 0: the bound solves F_q(v) = α in q; solve it in mpmath by bisection on q
    def tail(q: mp.mpf) -> mp.mpf:
        return mp.fsum(mp.binomial(r, j) * q**j * (1 - q) ** (r - j) for j in range(v, r + 1))

    lo, hi = mp.mpf(0), mp.mpf(1)
    for _ in range(120):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if tail(mid) <= alpha else (lo, mid)
    expected = max(0.0, float(mp.log(lo / (1 - lo))))
    assert one_run_epsilon(10 * r, r, v, alpha=alpha) == pytest.approx(expected, rel=1e-9)


@pytest.mark.parametrize(("m", "r", "v"), [(100, 40, 35), (1000, 60, 55), (500, 100, 75)])
@pytest.mark.parametrize("delta", [1e-6, 1e-4])  # 2mδ <= 0.2: the δ term matters, not all
def test_approximate_dp_bound_is_the_largest_refuted_epsilon(
    m: int, r: int, v: int, delta: float
) -> None:
    alpha = 0.05
    eps = one_run_epsilon(m, r, v, delta=delta, alpha=alpha)
    assert eps > 0  # a real bound, not the trivial 0
    # refuted by the reference itself (the bisection stops on the crossing: 1e-12 relative
    # covers the last bits of the float p-value against the 50-digit one)
    assert _p_ref(m, r, v, eps, delta) <= alpha * (1 + 1e-12)
    ceiling = one_run_epsilon(m, r, v, alpha=alpha)  # δ = 0: the tail alone
    # nothing above it is refuted: a 200-point scan of (eps, ceiling] with the reference
    scan = np.linspace(eps * (1 + 1e-9) + 1e-12, ceiling, 200)
    assert all(_p_ref(m, r, v, float(x), delta) > alpha for x in scan)


def test_more_right_guesses_refute_more() -> None:
    eps = [one_run_epsilon(1000, 100, v, delta=1e-5) for v in range(60, 101, 5)]
    assert np.all(np.diff(eps) > 0)
    mu = [one_run_gdp_mu(1000, 100, v) for v in range(60, 101, 5)]
    assert np.all(np.diff(mu) > 0)


def test_gdp_bound_is_refuted_and_the_next_is_not() -> None:
    mu = one_run_gdp_mu(2000, 300, 260, alpha=0.05)
    assert mu > 0
    assert one_run_gdp_refutes(2000, 300, 260, mu, alpha=0.05)
    assert not one_run_gdp_refutes(2000, 300, 260, mu * (1 + 1e-6), alpha=0.05)


def test_no_right_guess_refutes_nothing() -> None:
    assert one_run_epsilon(100, 0, 0) == 0.0
    assert one_run_epsilon(100, 10, 0, delta=1e-3) == 0.0
    assert one_run_gdp_mu(100, 10, 0) == 0.0
    assert one_run_p_value(100, 10, 0, 1.0) == 1.0


@pytest.mark.parametrize(
    ("args", "kwargs", "match"),
    [
        ((0, 0, 0), {}, "`n_canaries` must be >= 1; got 0"),
        ((10, 11, 1), {}, r"`n_guesses` must be in \[0, n_canaries = 10\]; got 11"),
        ((10, 5, 6), {}, r"`n_correct` must be in \[0, n_guesses = 5\]; got 6"),
        ((10, 5, 4), {"alpha": 1.0}, "`alpha`"),
        ((10, 5, 4), {"delta": 1.0}, "`delta`"),
    ],
)
def test_bad_input_is_refused(args: tuple[int, ...], kwargs: dict, match: str) -> None:
    with pytest.raises(InvalidInputError, match=match):
        one_run_epsilon(*args, **kwargs)


def test_counts_must_be_integers() -> None:
    with pytest.raises(TypeError, match="`n_guesses` must be an integer; got float"):
        one_run_epsilon(10, 5.0, 4)
    with pytest.raises(InvalidInputError, match="`epsilon`"):
        one_run_p_value(10, 5, 4, -1.0)
    with pytest.raises(InvalidInputError, match="`mu`"):
        one_run_gdp_refutes(10, 5, 4, -1.0)
