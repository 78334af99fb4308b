import math
from fractions import Fraction

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from idaudit.dp import (
    clopper_pearson_lower,
    clopper_pearson_upper,
    epsilon_from_error_rates,
    epsilon_from_mmd_hockey_stick,
    epsilon_from_roc,
    epsilon_from_tv,
    gaussian_delta,
    tv_bound,
)

unit = st.floats(0.0, 1.0)
small_delta = st.floats(0.0, 0.5)
alphas = st.floats(1e-6, 0.5)


@st.composite
def binomial_case(draw):
    n = draw(st.integers(1, 400))
    return draw(st.integers(0, n)), n


@settings(max_examples=60, deadline=None)
@given(binomial_case(), alphas)
def test_clopper_pearson_brackets_proportion(case, alpha):
    k, n = case
    lo, up = clopper_pearson_lower(k, n, alpha), clopper_pearson_upper(k, n, alpha)
    assert 0.0 <= lo <= k / n <= up <= 1.0


@settings(max_examples=60, deadline=None)
@given(binomial_case(), alphas)
def test_clopper_pearson_lower_upper_symmetry(case, alpha):
    k, n = case
    assert math.isclose(
        clopper_pearson_lower(k, n, alpha),
        1.0 - clopper_pearson_upper(n - k, n, alpha),
        rel_tol=1e-9,
        abs_tol=1e-12,
    )


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 50), st.integers(1, 200), alphas)
def test_clopper_pearson_upper_shrinks_with_n_at_fixed_k(k, n, alpha):
    n = max(n, k + 1)
    assert clopper_pearson_upper(k, n + 1, alpha) <= clopper_pearson_upper(k, n, alpha)


@settings(max_examples=60, deadline=None)
@given(binomial_case(), alphas, alphas)
def test_clopper_pearson_upper_decreases_with_alpha(case, a1, a2):
    k, n = case
    lo, hi = sorted((a1, a2))
    assert clopper_pearson_upper(k, n, hi) <= clopper_pearson_upper(k, n, lo) + 1e-15
    assert clopper_pearson_lower(k, n, hi) >= clopper_pearson_lower(k, n, lo) - 1e-15


@settings(max_examples=100, deadline=None)
@given(unit, unit, small_delta)
def test_error_rates_symmetric_and_nonnegative(fpr, fnr, delta):
    a = epsilon_from_error_rates(fpr, fnr, delta)
    assert a == epsilon_from_error_rates(fnr, fpr, delta)
    assert a >= 0.0


@settings(max_examples=100, deadline=None)
@given(unit, unit, unit, small_delta)
def test_error_rates_nonincreasing_in_each_rate(fpr, fnr, other, delta):
    lo, hi = sorted((fpr, other))
    assert epsilon_from_error_rates(hi, fnr, delta) <= epsilon_from_error_rates(lo, fnr, delta)


@settings(max_examples=100, deadline=None)
@given(unit, unit, small_delta)
def test_error_rates_respect_eq2_at_the_returned_epsilon(fpr, fnr, delta):
    eps = epsilon_from_error_rates(fpr, fnr, delta)

    def holds(a, b):  # a + e^ε b >= 1 - δ, in logs so that e^ε may exceed the float range
        rhs = 1 - delta - a
        return rhs <= 0 or (b > 0 and eps + math.log(b) >= math.log(rhs) - 1e-9)

    if math.isfinite(eps):
        # at the returned ε both inequalities of seed 000, Eq. 2 hold (up to rounding)
        assert holds(fpr, fnr)
        assert holds(fnr, fpr)


def _exact_roc_epsilon(points):
    """Eq. 15 of seed 000 in exact rational arithmetic, rounded once at the end.

    ``Fraction`` holds each float rate exactly, so 1 - TPR carries no cancellation error: the
    reference stays correct near the corners, where a float ``1 - tpr`` loses all its digits.
    """
    best = 0.0
    for f_float, t_float in points:
        f, t = Fraction(f_float), Fraction(t_float)
        for num, den in ((t, f), (1 - f, 1 - t)):
            if num <= 0:
                continue  # a term with a non-positive numerator carries no evidence
            if den == 0:
                return math.inf
            if num > den:
                best = max(best, _log_fraction(num / den))
    return best


def _log_fraction(r):
    """ln r for a positive Fraction; through big-integer logs when r overflows a float."""
    try:
        return math.log(float(r))
    except OverflowError:
        return math.log(r.numerator) - math.log(r.denominator)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(unit, unit), min_size=1, max_size=20))
def test_roc_epsilon_matches_exact_rational_reference(points):
    got = epsilon_from_roc([p[0] for p in points], [p[1] for p in points])
    ref = _exact_roc_epsilon(points)
    if math.isinf(ref):
        assert math.isinf(got)
    else:
        # math.log of a correctly rounded ratio is within a few ulps; log/log1p differences in
        # the implementation add at most ~1e-15 absolute on O(1) logs.
        assert math.isclose(got, ref, rel_tol=1e-12, abs_tol=1e-13)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(unit, unit), min_size=1, max_size=20))
def test_roc_epsilon_is_at_least_every_finite_point_epsilon(points):
    fpr = np.array([p[0] for p in points])
    tpr = np.array([p[1] for p in points])
    per_point = epsilon_from_error_rates(fpr, 1.0 - tpr)
    finite = per_point[np.isfinite(per_point)]
    # Eq. 2 on FNR = 1 - TPR loses up to eps_mach / min(TPR, 1 - TPR) relative accuracy
    # to the float subtraction; allow that much slack per point.
    guard = np.finfo(float).eps / np.clip(np.minimum(tpr, 1.0 - tpr), 1e-300, None)
    slack = float(np.max(4.0 * guard[np.isfinite(per_point)], initial=0.0))
    assert epsilon_from_roc(fpr, tpr) >= float(np.max(finite, initial=0.0)) - slack


@settings(max_examples=100, deadline=None)
@given(st.floats(0.0, 0.999999), small_delta)
def test_tv_bound_inverts_epsilon_from_tv(tv, delta):
    eps = epsilon_from_tv(tv, delta)
    if eps > 0:
        assert math.isclose(tv_bound(eps, delta), tv, rel_tol=1e-9, abs_tol=1e-12)
    else:
        assert tv <= delta + 1e-12


@settings(max_examples=100, deadline=None)
@given(st.floats(0.0, 1.4), st.floats(0.0, 1.4))
def test_mmd_bound_monotone(m1, m2):
    lo, hi = sorted((m1, m2))
    assert epsilon_from_mmd_hockey_stick(lo) <= epsilon_from_mmd_hockey_stick(hi)


@settings(max_examples=60, deadline=None)
@given(st.floats(0.0, 30.0), st.floats(0.0, 30.0), st.floats(0.05, 20.0))
def test_gaussian_delta_decreasing_in_epsilon(e1, e2, sigma):
    lo, hi = sorted((e1, e2))
    assert gaussian_delta(hi, sigma) <= gaussian_delta(lo, sigma) * (1 + 1e-9)
