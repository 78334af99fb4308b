import math

import mpmath
import numpy as np
import pytest
from scipy import integrate, optimize, stats

from idaudit.dp import calibrate_gaussian_sigma, gaussian_delta, gaussian_epsilon
from idaudit.dp._gaussian import _log_delta
from idaudit.exceptions import InvalidInputError


def _delta_by_quadrature(eps, sigma, sens=1.0):
    """Hockey-stick divergence of N(0, σ²) from N(Δ, σ²), integrated numerically."""
    cut = sens / 2 - eps * sigma**2 / sens  # p(x) > e^ε q(x) exactly left of this point

    def integrand(x):
        return stats.norm.pdf(x, 0, sigma) - math.exp(eps) * stats.norm.pdf(x, sens, sigma)

    value, _ = integrate.quad(integrand, -np.inf, cut, epsabs=0, epsrel=1e-11, limit=200)
    return value


def _delta_by_mpmath(eps, sigma, sens=1.0, dps=80):
    """Balle & Wang, Theorem 8, at 80 significant digits (no cancellation issues)."""
    with mpmath.workdps(dps):
        e, s, d = mpmath.mpf(eps), mpmath.mpf(sigma), mpmath.mpf(sens)
        return mpmath.ncdf(d / (2 * s) - e * s / d) - mpmath.exp(e) * mpmath.ncdf(
            -d / (2 * s) - e * s / d
        )


@pytest.mark.parametrize(
    ("eps", "sigma", "sens"),
    [(0.0, 1.0, 1.0), (0.5, 1.0, 1.0), (1.0, 3.0, 1.0), (2.0, 0.7, 1.0), (1.0, 2.0, 2.0)],
)
def test_delta_matches_quadrature(eps, sigma, sens):
    # quad converges to ~1e-11 relative on these smooth integrands
    assert gaussian_delta(eps, sigma, sens) == pytest.approx(
        _delta_by_quadrature(eps, sigma, sens), rel=1e-9
    )


@pytest.mark.parametrize(
    ("eps", "sigma"),
    [(37.44884791213912, 1.0), (40.0, 1.0), (200.0, 0.5), (3.0, 1e-3), (1e-6, 50.0), (700.0, 0.3)],
)
def test_delta_in_the_far_tail_matches_mpmath(eps, sigma):
    ref = _delta_by_mpmath(eps, sigma)
    # the log-domain value is right even where δ itself is below the double range
    log_got = float(_log_delta(np.asarray(eps), np.asarray(sigma)))
    assert log_got == pytest.approx(float(mpmath.log(ref)), rel=1e-9)
    if ref > 1e-305:
        assert gaussian_delta(eps, sigma) == pytest.approx(float(ref), rel=1e-8)
    else:
        assert gaussian_delta(eps, sigma) == 0.0  # underflow of exp(log δ), not of the maths


def test_delta_at_zero_epsilon_is_total_variation():
    sigma = np.array([0.1, 0.5, 1.0, 4.0, 100.0])
    tv = 2 * stats.norm.cdf(1 / (2 * sigma)) - 1  # TV between N(0, σ²) and N(1, σ²)
    np.testing.assert_allclose(gaussian_delta(0.0, sigma), tv, rtol=1e-12)


def test_delta_edges_and_types():
    assert gaussian_delta(np.inf, 1.0) == 0.0
    assert gaussian_delta(0.0, 1e-9) == pytest.approx(1.0)
    assert isinstance(gaussian_delta(1.0, 1.0), float)
    assert gaussian_delta([1.0, 2.0], [[1.0], [2.0]]).shape == (2, 2)
    # only σ/Δ matters
    assert gaussian_delta(1.0, 6.0, 2.0) == pytest.approx(gaussian_delta(1.0, 3.0), rel=1e-14)


@pytest.mark.parametrize(("delta", "sigma"), [(1e-5, 1.0), (1e-5, 3.0), (1e-300, 1.0), (0.1, 2.0)])
def test_epsilon_solves_the_high_precision_route(delta, sigma):
    eps = gaussian_epsilon(delta, sigma)
    # second route: solve with brentq on the mpmath formula
    ref = optimize.brentq(
        lambda e: float(mpmath.log(_delta_by_mpmath(e, sigma))) - math.log(delta),
        0.0,
        1e4,
        xtol=1e-13,
    )
    assert eps == pytest.approx(ref, rel=1e-9)


def test_epsilon_edges():
    assert gaussian_epsilon(0.0, 1.0) == math.inf  # never pure DP
    tv0 = 2 * stats.norm.cdf(0.5) - 1
    assert gaussian_epsilon(tv0, 1.0) == 0.0
    assert gaussian_epsilon(0.9, 1.0) == 0.0
    np.testing.assert_allclose(
        gaussian_epsilon([1e-5, 1e-10], 2.0),
        [gaussian_epsilon(1e-5, 2.0), gaussian_epsilon(1e-10, 2.0)],
    )


@pytest.mark.parametrize(("eps", "delta"), [(0.1, 1e-5), (1.0, 1e-5), (5.0, 1e-8), (30.0, 1e-6)])
def test_calibrated_sigma_attains_delta_at_high_precision(eps, delta):
    sigma = calibrate_gaussian_sigma(eps, delta)
    ref = _delta_by_mpmath(eps, sigma)
    assert float(ref) == pytest.approx(delta, rel=1e-8)
    # the classical calibration is sufficient, hence never smaller where it applies (ε < 1)
    if eps < 1:
        assert sigma <= math.sqrt(2 * math.log(1.25 / delta)) / eps


def test_calibrated_sigma_closed_form_at_zero_epsilon_and_scaling():
    delta = 0.2
    expected = 1 / (2 * stats.norm.ppf((1 + delta) / 2))
    assert calibrate_gaussian_sigma(0.0, delta) == pytest.approx(expected, rel=1e-12)
    assert calibrate_gaussian_sigma(1.0, 1e-5, 2.0) == pytest.approx(
        2 * calibrate_gaussian_sigma(1.0, 1e-5), rel=1e-12
    )


@pytest.mark.parametrize("delta", [1e-300, 1e-12, 1e-9, 1e-6, 1e-3, 0.5, 1 - 1e-9])
def test_zero_epsilon_keeps_full_precision_for_small_delta(delta):
    # mpmath at 400 digits (enough for 2Φ(x) − 1 to resolve δ = 1e-300) gives
    # σ/Δ = 1 / (2 Φ^{-1}((1 + δ)/2)) and δ(0; σ) = 2Φ(1/2σ) − 1 without rounding (1 + δ)/2;
    # doubles allow a few ulps (rel 1e-13). Evaluating Φ^{-1}((1 + δ)/2) in doubles gives a σ
    # 9e-5 too small at δ = 1e-12 (anti-conservative).
    with mpmath.workdps(400):
        d = mpmath.mpf(delta)
        ref = 1 / (2 * mpmath.sqrt(2) * mpmath.erfinv(d))
        # the erfinv form and the ncdf form of the reference agree to 40 digits
        assert abs(2 * mpmath.ncdf(1 / (2 * ref)) - 1 - d) < d * mpmath.mpf(10) ** -40
        sigma = calibrate_gaussian_sigma(0.0, delta)
        assert sigma == pytest.approx(float(ref), rel=1e-13)
        assert gaussian_delta(0.0, float(ref)) == pytest.approx(delta, rel=1e-13)
        # σ is never below the exact value by more than rounding: δ(0; σ) <= δ (1 + 1e-13)
        assert float(2 * mpmath.ncdf(1 / (2 * mpmath.mpf(sigma))) - 1) <= delta * (1 + 1e-13)


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: gaussian_delta(-1.0, 1.0), r"`epsilon` must be in \[0, inf\]; got -1.0\."),
        (lambda: gaussian_delta(1.0, 0.0), r"`sigma` must be in \(0, inf\); got 0.0\."),
        (lambda: gaussian_delta(1.0, -2.0), r"`sigma` must be in \(0, inf\); got -2.0\."),
        (lambda: gaussian_delta(1.0, 1.0, 0.0), r"`sensitivity` must be in \(0, inf\); got 0.0"),
        (lambda: gaussian_epsilon(1.5, 1.0), r"`delta` must be in \[0, 1\]; got 1.5\."),
        (lambda: gaussian_epsilon(0.1, np.inf), r"`sigma` must be in \(0, inf\); got inf\."),
        (lambda: calibrate_gaussian_sigma(1.0, 0.0), r"`delta` must be in \(0, 1\); got 0.0\."),
        (
            lambda: calibrate_gaussian_sigma(np.inf, 1e-5),
            r"`epsilon` must be in \[0, inf\); got inf\.",
        ),
    ],
)
def test_bad_input(call, match):
    with pytest.raises(InvalidInputError, match=match):
        call()
