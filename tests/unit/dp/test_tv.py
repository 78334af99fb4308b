import mpmath
import numpy as np
import pytest

from idaudit.dp import epsilon_from_tv, tv_bound
from idaudit.exceptions import InvalidInputError


def _two_point_dp_pair(eps, delta):
    """Output laws of an (ε, δ)-DP mechanism on 4 atoms that attains Eq. 4 with equality.

    With probability δ the output names the input; otherwise randomised response.
    """
    a = (1 - delta) * np.exp(eps) / (1 + np.exp(eps))
    b = (1 - delta) / (1 + np.exp(eps))
    return np.array([delta, 0.0, a, b]), np.array([0.0, delta, b, a])


def test_epsilon_from_tv_matches_closed_form():
    tv = np.array([0.0, 1e-12, 0.1, 0.5, 0.9, 0.999999])
    # Eq. 5 evaluated with mpmath at 50 digits, independent of numpy's log1p
    mpmath.mp.dps = 50
    ref = [float(mpmath.log((1 + mpmath.mpf(t)) / (1 - mpmath.mpf(t)))) for t in tv]
    np.testing.assert_allclose(epsilon_from_tv(tv), ref, rtol=1e-14)  # double rounding only


def test_epsilon_from_tv_scalar_in_float_out_and_inf_at_one():
    assert isinstance(epsilon_from_tv(0.5), float)
    assert epsilon_from_tv(1.0) == np.inf
    assert epsilon_from_tv(0.0) == 0.0
    out = epsilon_from_tv([[0.2, 1.0]])
    assert isinstance(out, np.ndarray)
    assert out.shape == (1, 2)


def test_epsilon_from_tv_with_delta_matches_direct_inversion():
    mpmath.mp.dps = 50
    for t, d in [(0.5, 1e-5), (0.3, 0.1), (0.9, 0.2)]:
        ref = float(mpmath.log((1 + mpmath.mpf(t) - 2 * mpmath.mpf(d)) / (1 - mpmath.mpf(t))))
        assert epsilon_from_tv(t, d) == pytest.approx(max(ref, 0.0), rel=1e-13)
    # TV no larger than δ carries no information
    assert epsilon_from_tv(0.1, 0.1) == 0.0
    assert epsilon_from_tv(1.0, 1.0) == 0.0


@pytest.mark.parametrize(("eps", "delta"), [(0.0, 0.0), (0.5, 0.0), (2.0, 1e-3), (5.0, 0.2)])
def test_tv_bound_is_attained_by_an_extremal_mechanism(eps, delta):
    p, q = _two_point_dp_pair(eps, delta)
    tv = 0.5 * np.abs(p - q).sum()
    # the mechanism is (ε, δ)-DP and its TV equals the bound of Eq. 4
    assert tv_bound(eps, delta) == pytest.approx(tv, rel=1e-12, abs=1e-15)
    assert epsilon_from_tv(tv, delta) == pytest.approx(eps, rel=1e-9, abs=1e-12)


def test_tv_bound_large_epsilon_no_overflow_and_capped():
    assert tv_bound(1e6) == 1.0
    assert tv_bound(np.inf) == 1.0
    assert tv_bound(800.0, 0.5) == 1.0
    np.testing.assert_allclose(tv_bound([0.0, 2.0]), [0.0, np.tanh(1.0)], rtol=1e-15)
    assert tv_bound(0.0, 0.3) == pytest.approx(0.3)


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: epsilon_from_tv(1.5), r"`tv` must be in \[0, 1\]; got 1.5\."),
        (lambda: epsilon_from_tv([0.2, -0.1]), r"`tv` must be in \[0, 1\]; got -0.1\."),
        (lambda: epsilon_from_tv(np.nan), r"`tv` must be in \[0, 1\]; got nan\."),
        (lambda: epsilon_from_tv(0.5, 2.0), r"`delta` must be in \[0, 1\]; got 2.0\."),
        (lambda: tv_bound(-1.0), r"`epsilon` must be in \[0, inf\]; got -1.0\."),
        (lambda: tv_bound(1.0, -0.5), r"`delta` must be in \[0, 1\]; got -0.5\."),
    ],
)
def test_bad_values_raise(call, match):
    with pytest.raises(InvalidInputError, match=match):
        call()


def test_non_numeric_raises_type_error():
    with pytest.raises(TypeError, match="`tv` must be a real number"):
        epsilon_from_tv("0.5")
