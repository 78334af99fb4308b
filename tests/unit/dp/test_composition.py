import math

import mpmath
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


# --- compose_error_rates against an exact (mpmath) evaluation -------------------------------
#
# The reference is independent of the library: the binomial pmf by the recurrence
# pmf(i + 1) = pmf(i) (k - i)/(i + 1) p/(1 - p) at 60 significant digits, both tails summed
# directly from their own ends (sums of positive terms, no cancellation), then Eq. 2 of the seed
# paper (Kairouz-Oh-Viswanath) on those tails, maximised over the votes j = 1..k and the
# one-output test. The inputs are the exact binary values of the floats passed to the library.

_DPS = 60
_RATES = (0.0, 1e-6, 0.01, 0.05, 0.2, 1 / (1 + math.e), 0.49, 0.5, 0.7, 1.0)
_DELTAS = (0.0, 1e-5, 0.05, 0.3)
# the bound is symmetric under swapping (UF, UN) (vote j <-> vote k - j + 1), so one order of
# each pair of better-than-chance rates, a few swapped pairs and a few worse-than-chance pairs
_PAIRS = [(uf, un) for uf in _RATES for un in _RATES if uf <= un and uf + un <= 1.0] + [
    (0.05, 0.0),
    (0.2, 0.05),
    (0.7, 0.01),
    (0.5, 0.7),
    (0.7, 0.7),
    (0.2, 1.0),
    (1.0, 1.0),
]
# k = 1000 (most of the mpmath time) on a spread of the pairs, smaller k on all of them
_PAIRS_LARGE_K = [
    (0.0, 0.3),
    (0.0, 1.0),
    (1e-6, 0.01),
    (0.01, 0.49),
    (0.05, 0.2),
    (0.05, 0.7),
    (0.2, 0.2),
    (1 / (1 + math.e), 1 / (1 + math.e)),
    (0.49, 0.49),
    (0.49, 0.5),
    (0.5, 0.5),
    (0.7, 0.7),
]
_EXACT_TAILS: dict[tuple[int, float], tuple[list, list]] = {}


def _exact_tails(k: int, p: float) -> tuple[list, list]:
    """(P[Bin(k, p) <= i], P[Bin(k, p) >= i]) for i = 0..k, as mpf at _DPS digits."""
    key = (k, p)
    if key not in _EXACT_TAILS:
        with mpmath.workdps(_DPS):
            pp = mpmath.mpf(p)  # the float's exact value
            qq = 1 - pp
            if pp == 0 or qq == 0:
                pmf = [mpmath.mpf(0)] * (k + 1)
                pmf[0 if pp == 0 else k] = mpmath.mpf(1)
            else:
                pmf = [qq**k]
                ratio = pp / qq
                for i in range(k):
                    pmf.append(pmf[-1] * (k - i) / (i + 1) * ratio)
            le, acc = [], mpmath.mpf(0)
            for x in pmf:
                acc += x
                le.append(acc)
            ge, acc = [mpmath.mpf(0)] * (k + 1), mpmath.mpf(0)
            for i in range(k, -1, -1):
                acc += pmf[i]
                ge[i] = acc
        _EXACT_TAILS[key] = (le, ge)
    return _EXACT_TAILS[key]


def _exact_compose(uf: float, un: float, k: int, delta: float) -> float:
    """The exact compose_error_rates(uf, un, k, delta), rounded to a float at the end."""
    with mpmath.workdps(_DPS):
        d = mpmath.mpf(delta)
        best = mpmath.mpf(1)  # largest ratio seen; 1 is the floor eps = 0
        for kk in {k, 1}:  # the votes on k outputs, and the one-output bound
            le_f, ge_f = _exact_tails(kk, uf)
            le_n, ge_n = _exact_tails(kk, un)
            for j in range(1, kk + 1):
                fpr, tnr = ge_f[j], le_f[j - 1]  # P[Bin(k, UF) >= j] and its complement
                fnr, tpr = ge_n[kk - j + 1], le_n[kk - j]  # P[Bin(k, UN) >= k - j + 1], compl.
                # Eq. 2: ln((1 - delta - FPR)/FNR) and ln((1 - delta - FNR)/FPR); a term with
                # a numerator <= 0 is omitted, a positive one over 0 is inf
                for num, den in ((tnr - d, fnr), (tpr - d, fpr)):
                    if num <= 0:
                        continue
                    if den == 0:
                        return math.inf
                    if num > best * den:
                        best = num / den
        return float(mpmath.log(best))


def _check_against_exact(uf: float, un: float, k: int, delta: float) -> str | None:
    got = compose_error_rates(uf, un, k, delta=delta)
    exact = _exact_compose(uf, un, k, delta)
    tag = f"compose_error_rates({uf!r}, {un!r}, {k}, delta={delta!r}) = {got!r}, exact {exact!r}"
    if math.isinf(exact):
        return None if got == math.inf else tag
    if not math.isfinite(got):
        return tag
    # never above the exact value beyond rounding, and not trivially below it either
    if got > exact * (1 + 1e-9) + 1e-11 or got < exact * (1 - 1e-9) - 1e-11:
        return tag
    return None


@pytest.mark.parametrize("k", [1, 2, 7, 50, 113, 249, 300, 1000])
def test_compose_error_rates_matches_exact_mpmath(k):
    pairs = _PAIRS_LARGE_K if k >= 1000 else _PAIRS
    bad = [
        msg
        for uf, un in pairs
        for delta in _DELTAS
        if (msg := _check_against_exact(uf, un, k, delta)) is not None
    ]
    assert not bad, "\n".join(bad)


def test_compose_error_rates_no_overflow_for_long_votes():
    # regression: the all-k vote's FPR 0.05^k underflowed to 0 for k >= 249 and the bound came
    # out inf; a binary mechanism with exactly these error rates has the finite k-fold pure
    # eps k ln(0.70/0.05), which the all-k vote attains
    got = compose_error_rates(0.05, 0.30, 300)
    assert math.isfinite(got)
    exact = _exact_compose(0.05, 0.30, 300, 0.0)
    assert got == pytest.approx(exact, rel=1e-10)
    assert got <= exact * (1 + 1e-12)
    with mpmath.workdps(_DPS):
        closed = float(300 * mpmath.log((1 - mpmath.mpf(0.30)) / mpmath.mpf(0.05)))
    assert exact == pytest.approx(closed, rel=1e-14)
    assert got == pytest.approx(791.7, abs=0.05)  # the value quoted in the issue
    for k in (249, 250, 500, 1000, 5000):
        for delta in (0.0, 1e-5):
            assert math.isfinite(compose_error_rates(0.05, 0.30, k, delta=delta)), (k, delta)
        assert compose_error_rates(0.05, 0.30, k) == pytest.approx(k * math.log(14.0), rel=1e-10)


# Closeness is checked to 1e-10 relative: the function lowers every candidate term by a bound
# on its floating error, so that no result is above the exact value (a vote whose exact
# epsilon is 0 never certifies a positive one); the defects these tests guard against were
# 4e-4 relative and inf.


def test_compose_error_rates_randomized_response_never_above_k_eps():
    # regression: randomised response at eps0 = 1 has error rates 1/(1+e) both ways and the
    # exact k-fold pure eps k eps0; 1 - FNR_k formed as 1 - (a tail within 1e-16 of 1) gave
    # 113.048 at k = 113 (and the docs' k = 100 entry 263.935 for the 0.05/0.30 test, against
    # an exact 100 ln 14 = 263.906)
    q = 1 / (1 + math.e)
    got = compose_error_rates(q, q, 113)
    with mpmath.workdps(_DPS):
        exact = float(113 * mpmath.log((1 - mpmath.mpf(q)) / mpmath.mpf(q)))  # float q's value
    assert exact == pytest.approx(113.0, rel=1e-15)
    assert got <= exact * (1 + 1e-12)
    assert got <= 113.0 * (1 + 1e-12)
    assert got == pytest.approx(113.0, rel=1e-10)
    for k in (*range(1, 121), 500, 2000):
        assert compose_error_rates(q, q, k) <= k * (1 + 1e-12), k
        assert compose_error_rates(q, q, k) == pytest.approx(k, rel=1e-10), k
    assert compose_error_rates(0.05, 0.30, 100) == pytest.approx(100 * math.log(14.0), rel=1e-10)


def test_compose_error_rates_infinite_only_where_exact_is():
    # a zero tail under a positive numerator: no finite eps suffices, at every k
    assert compose_error_rates(0.0, 0.3, 1000) == math.inf
    assert compose_error_rates(0.3, 0.0, 7, delta=0.05) == math.inf
    assert compose_error_rates(0.0, 0.0, 3) == math.inf
    # 1 - 0.3 - 0.7 is +5.6e-17 for the doubles (exact numerator, however close to 0), and just
    # above 0.7 it is negative: the one-output term is inf, then omitted
    assert compose_error_rates(0.0, 0.7, 1, delta=0.3) == math.inf
    assert compose_error_rates(0.7, 0.0, 5, delta=0.3) == math.inf
    assert compose_error_rates(float(np.nextafter(0.7, 1.0)), 0.0, 1, delta=0.3) == 0.0
    # a useless test (rates summing to 1 and beyond) refutes nothing, at every k
    for uf, un in ((0.0, 1.0), (1.0, 0.0), (1.0, 1.0), (0.5, 0.5), (0.7, 0.7)):
        for k in (1, 5, 300):
            assert compose_error_rates(uf, un, k) <= 1e-11, (uf, un, k)


@pytest.mark.parametrize(("uf", "un", "k"), [(0.5, 0.5, 100), (0.5, 0.5, 1000), (0.5, 0.5, 10_000)])
def test_compose_error_rates_is_zero_where_the_votes_carry_no_evidence(uf, un, k):
    # UF + UN = 1: every vote has FPR_k + FNR_k = 1, so the exact epsilon is 0; rounding in
    # the tails must not turn that into a positive certified bound
    assert compose_error_rates(uf, un, k) == 0.0
