import math

import numpy as np
import pytest
from scipy import stats

from idaudit.dp import compose_epsilon, compose_error_rates, epsilon_from_error_rates
from idaudit.exceptions import InvalidInputError


def test_basic_is_k_epsilon_k_delta():
    out = compose_epsilon(0.3, 1e-6, 7)
    assert out.epsilon == pytest.approx(2.1, rel=1e-15)
    assert out.delta == pytest.approx(7e-6, rel=1e-12)
    assert (out.k, out.method) == (7, "basic")


def test_advanced_matches_dwork_rothblum_vadhan():
    eps, dlt, k, dp = 0.2, 1e-7, 50, 1e-6
    out = compose_epsilon(eps, dlt, k, method="advanced", delta_prime=dp)
    # Dwork & Roth 2014, Theorem 3.20
    ref = math.sqrt(2 * k * math.log(1 / dp)) * eps + k * eps * (math.exp(eps) - 1)
    assert out.epsilon == pytest.approx(ref, rel=1e-13)
    assert out.delta == pytest.approx(k * dlt + dp, rel=1e-13)


def test_pld_is_at_most_advanced_and_basic_and_exact_for_k_one():
    eps, dlt, dp = 0.5, 0.0, 1e-6
    for k in (2, 10, 50):
        pld = compose_epsilon(eps, dlt, k, method="pld", delta_prime=dp).epsilon
        adv = compose_epsilon(eps, dlt, k, method="advanced", delta_prime=dp).epsilon
        assert pld <= adv + 1e-9
        assert pld <= k * eps + 1e-3  # basic, up to the pessimistic discretisation
    # one pure eps-DP mechanism at delta' > 0: eps(delta') < eps, and close to it for tiny delta'
    one = compose_epsilon(1.0, 0.0, 1, method="pld", delta_prime=1e-9).epsilon
    assert one == pytest.approx(1.0, abs=2e-3)


def test_pld_matches_randomized_response_closed_form():
    # k-fold composition of pure eps-DP has delta(eps') = sum over the binomial of the
    # privacy-loss tail (Kairouz, Oh & Viswanath 2015, Theorem 3.5 at the optimum); check the
    # PLD route's eps at that delta agrees to the discretisation step
    eps, k = 0.4, 8
    q = 1 / (1 + math.exp(eps))
    i = np.arange(k + 1)  # number of "flipped" answers
    loss = (k - 2 * i) * eps
    p = stats.binom.pmf(i, k, q)

    def delta_at(e: float) -> float:
        return float(np.sum(p * np.maximum(0.0, 1 - np.exp(e - loss))))

    target_eps = 1.6  # one of the loss values would make the tail jump; pick an interior point
    d = delta_at(target_eps)
    got = compose_epsilon(eps, 0.0, k, method="pld", delta_prime=d).epsilon
    assert got == pytest.approx(target_eps, abs=5e-3)


def test_monotone_in_k_and_epsilon():
    for method, kw in [
        ("basic", {}),
        ("advanced", {"delta_prime": 1e-6}),
        ("pld", {"delta_prime": 1e-6}),
    ]:
        by_k = [compose_epsilon(0.3, 0.0, k, method=method, **kw).epsilon for k in (1, 2, 5, 20)]
        assert np.all(np.diff(by_k) > 0), method
        by_eps = [compose_epsilon(e, 0.0, 5, method=method, **kw).epsilon for e in (0.1, 0.3, 1.0)]
        assert np.all(np.diff(by_eps) > 0), method


def test_compose_error_rates_against_binomial_tails():
    uf, un, k = 0.1, 0.25, 5
    best = 0.0
    for j in range(1, k + 1):
        fpr = sum(stats.binom.pmf(i, k, uf) for i in range(j, k + 1))
        fnr = sum(stats.binom.pmf(i, k, un) for i in range(k - j + 1, k + 1))
        best = max(best, float(epsilon_from_error_rates(fpr, fnr)))
    assert compose_error_rates(uf, un, k) == pytest.approx(best, rel=1e-9)
    # one output: the per-query bound itself; more outputs: never less
    assert compose_error_rates(uf, un, 1) == pytest.approx(epsilon_from_error_rates(uf, un))
    values = [compose_error_rates(uf, un, k, delta=1e-3) for k in (1, 2, 4, 8, 16)]
    assert np.all(np.diff(values) >= 0)


def test_pure_dp_votes_scale_with_k():
    # a zero-error test at bounds (u, u): the all-outputs vote has rates u^k and 1 - (1-u)^k
    u, k = 0.05, 4
    ref = math.log((1 - u) ** k / u**k)  # ln((1 - FNR_k) / FPR_k) at j = k
    assert compose_error_rates(u, u, k) >= ref - 1e-9


@pytest.mark.parametrize(
    ("args", "kwargs", "exc", "match"),
    [
        ((-0.1, 0.0, 2), {}, InvalidInputError, r"`epsilon` must be in \[0, inf\)"),
        ((0.1, 1.0, 2), {}, InvalidInputError, r"`delta` must be in \[0, 1\)"),
        ((0.1, 0.0, 0), {}, InvalidInputError, "`k` must be >= 1"),
        ((0.1, 0.0, 2.0), {}, TypeError, "`k` must be an integer"),
        ((0.1, 0.0, 2), {"method": "moments"}, InvalidInputError, "`method` must be one of"),
        ((0.1, 0.0, 2), {"method": "advanced"}, InvalidInputError, "`delta_prime` must be given"),
        ((0.1, 0.0, 2), {"method": "pld", "delta_prime": 0.0}, InvalidInputError, "delta_prime"),
    ],
)
def test_compose_rejects_bad_input(args, kwargs, exc, match):
    with pytest.raises(exc, match=match):
        compose_epsilon(*args, **kwargs)


def test_vacuous_total_delta():
    out = compose_epsilon(0.1, 0.2, 10, method="advanced", delta_prime=0.1)
    assert (out.epsilon, out.delta) == (0.0, 1.0)
    # the docstring's rule ("when delta_k >= 1 ... epsilon is 0") holds for every method
    basic = compose_epsilon(0.1, 0.2, 10)
    assert (basic.epsilon, basic.delta) == (0.0, 1.0)
    pld = compose_epsilon(0.1, 0.2, 10, method="pld", delta_prime=0.1)
    assert (pld.epsilon, pld.delta) == (0.0, 1.0)
