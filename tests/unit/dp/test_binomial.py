import numpy as np
import pytest
from scipy import stats
from statsmodels.stats.proportion import proportion_confint

from idaudit.dp import clopper_pearson_lower, clopper_pearson_upper
from idaudit.exceptions import InvalidInputError

CASES = [(k, n) for n in (1, 2, 10, 15, 30, 100, 997) for k in sorted({0, 1, n // 3, n - 1, n})]


@pytest.mark.parametrize("alpha", [0.05, 0.000625, 1e-8])
def test_matches_statsmodels_beta_interval(alpha):
    k = np.array([c[0] for c in CASES])
    n = np.array([c[1] for c in CASES])
    # statsmodels' two-sided interval at level 2α has α in each tail
    lo_ref, up_ref = proportion_confint(k, n, alpha=2 * alpha, method="beta")
    # both invert the regularised incomplete beta; agreement to ~1e-12 relative
    np.testing.assert_allclose(clopper_pearson_upper(k, n, alpha), up_ref, rtol=1e-10, atol=0)
    np.testing.assert_allclose(clopper_pearson_lower(k, n, alpha), lo_ref, rtol=1e-10, atol=0)


def test_defining_equation_by_binomial_tail():
    # U solves P(X <= k | n, U) = α and L solves P(X >= k | n, L) = α (exactness)
    alpha = 0.01
    for k, n in [(0, 10), (3, 10), (7, 40), (39, 40)]:
        u = clopper_pearson_upper(k, n, alpha)
        assert stats.binom.cdf(k, n, u) == pytest.approx(alpha, rel=1e-9)
        lo = clopper_pearson_lower(k + 1, n, alpha)
        assert stats.binom.sf(k, n, lo) == pytest.approx(alpha, rel=1e-9)


def test_edge_cases_closed_forms():
    alpha = 0.05
    for n in (1, 10, 30):
        assert clopper_pearson_upper(0, n, alpha) == pytest.approx(1 - alpha ** (1 / n), rel=1e-12)
        assert clopper_pearson_lower(n, n, alpha) == pytest.approx(alpha ** (1 / n), rel=1e-12)
        assert clopper_pearson_upper(n, n, alpha) == 1.0
        assert clopper_pearson_lower(0, n, alpha) == 0.0


def test_scalar_in_float_out_and_broadcasting():
    assert isinstance(clopper_pearson_upper(3, 10, 0.05), float)
    out = clopper_pearson_upper(np.arange(4)[:, None], 10, np.array([0.01, 0.05]))
    assert out.shape == (4, 2)
    assert clopper_pearson_upper(3.0, 10.0) == clopper_pearson_upper(3, 10)  # integral floats


@pytest.mark.parametrize(
    ("args", "exc", "match"),
    [
        ((11, 10, 0.05), InvalidInputError, r"`k` must be in \[0, n\]; got k = 11 with n = 10\."),
        ((-1, 10, 0.05), InvalidInputError, r"`k` must be in \[0, n\]; got k = -1 with n = 10\."),
        ((0, 0, 0.05), InvalidInputError, r"`n` must be a positive integer; got 0\."),
        ((1.5, 10, 0.05), InvalidInputError, r"`k` must be integer-valued; got 1.5\."),
        ((1, 10.5, 0.05), InvalidInputError, r"`n` must be integer-valued; got 10.5\."),
        ((1, 10, 0.0), InvalidInputError, r"`alpha` must be in \(0, 1\); got 0.0\."),
        ((1, 10, 1.0), InvalidInputError, r"`alpha` must be in \(0, 1\); got 1.0\."),
        (("1", 10, 0.05), TypeError, "`k` must be a real number"),
    ],
)
def test_bad_input(args, exc, match):
    with pytest.raises(exc, match=match):
        clopper_pearson_upper(*args)
    with pytest.raises(exc, match=match):
        clopper_pearson_lower(*args)
