"""The known mechanisms' truths, checked against Monte Carlo and independent closed forms."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from idaudit.exceptions import InvalidInputError
from idaudit.testing import (
    atom_scores,
    gaussian_scores,
    known_pair,
    laplace_scores,
    randomized_response,
    synthetic_condition,
)


def _hockey_stick(pa, pb, eps: float) -> float:
    """delta(eps) of two discrete laws: sum of (P_B - e^eps P_A)_+ both ways, the larger."""
    return max(
        np.clip(pb - np.exp(eps) * pa, 0, None).sum(), np.clip(pa - np.exp(eps) * pb, 0, None).sum()
    )


def test_known_pair_truths() -> None:
    assert known_pair("laplace", distance=0.5, scale=0.25).epsilon() == 2.0
    g = known_pair("gaussian", distance=2.0, scale=1.0)
    # delta(eps) of N(0,1) vs N(2,1) (Balle & Wang, Theorem 8) at the eps returned is 1e-5
    eps = g.epsilon(1e-5)
    back = stats.norm.cdf(1 - eps / 2) - np.exp(eps) * stats.norm.cdf(-1 - eps / 2)
    assert back == pytest.approx(1e-5, rel=1e-6)
    es = g.draw(30, rng=1)
    assert es.embeddings.shape == (60, 1)
    with pytest.raises(InvalidInputError, match="`kind` must be one of"):
        known_pair("uniform")  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError, match=r"`scale` must be in \(0, inf\)"):
        known_pair(scale=0.0)


@pytest.mark.parametrize(
    "mech",
    [gaussian_scores(1.0), laplace_scores(1.0), randomized_response(1.0), atom_scores()],
    ids=lambda m: m.name,
)
def test_score_error_rates_match_monte_carlo(mech) -> None:
    a, b = mech.sample(np.random.default_rng(0), 200_000)
    t = np.array([-0.5, 0.5, 1.0, 1.5, 2.5])
    fpr = np.array([(a >= ti).mean() for ti in t])
    fnr = np.array([(b < ti).mean() for ti in t])
    # sd of a proportion from 200,000 draws is at most 0.0011: 5 sd
    np.testing.assert_allclose(mech.fpr(t), fpr, atol=6e-3)
    np.testing.assert_allclose(mech.fnr(t), fnr, atol=6e-3)


def test_score_epsilons_against_the_hockey_stick() -> None:
    rr = randomized_response(1.0)
    q = 1 / (1 + np.e)
    pa, pb = np.array([1 - q, q]), np.array([q, 1 - q])
    for delta in (0.0, 0.05, 0.2):
        eps = float(rr.epsilon(delta))
        assert _hockey_stick(pa, pb, eps) == pytest.approx(delta, abs=1e-12)
    lap = laplace_scores(1.0)
    # delta(eps) of Laplace(0,1) vs Laplace(1,1) by quadrature of (p_B - e^eps p_A)_+
    x = np.linspace(-40, 40, 2_000_001)
    for delta in (0.01, 0.1):
        eps = float(lap.epsilon(delta))
        gap = np.clip(stats.laplace.pdf(x, 1) - np.exp(eps) * stats.laplace.pdf(x), 0, None)
        assert np.trapezoid(gap, x) == pytest.approx(delta, rel=1e-4)
    assert float(lap.epsilon(0.0)) == 1.0
    assert np.isinf(gaussian_scores(1.0).epsilon(0.0))
    with pytest.raises(InvalidInputError, match="`p_a` must be a probability vector"):
        atom_scores([0.5, 0.6], [0.5, 0.5])


def test_synthetic_conditions_have_the_papers_sizes() -> None:
    for kind, (low, high) in (("vgg", (90, 100)), ("celeba", (26, 35))):
        mech, es = synthetic_condition(kind, n_identities=5, dim=16, rng=3)
        sizes = np.unique(es.labels, return_counts=True)[1]
        assert sizes.min() >= low
        assert sizes.max() <= high
        assert mech.is_exact("id000", "id001")
        dist = np.linalg.norm(mech.base.get("id000")[0] - mech.base.get("id001")[0])
        sigma = 1.6 / 4.0
        # the same analytic-Gaussian value at the pair's distance (sigma scaling: eps depends
        # on distance / sigma only)
        ref = known_pair("gaussian", distance=dist / sigma).epsilon(1e-5)
        assert mech.pair_epsilon("id000", "id001", 1e-5) == pytest.approx(ref, rel=1e-9)
    with pytest.raises(InvalidInputError, match="`kind` must be one of 'vgg', 'celeba'"):
        synthetic_condition("lfw")  # type: ignore[arg-type]


def _hockey_stick_quad(pdf_p, pdf_q, eps: float, points, lo: float, hi: float) -> float:
    """delta(eps) = integral of (q - e^eps p)_+ by numerical quadrature (scipy quad)."""
    from scipy import integrate

    value, _ = integrate.quad(
        lambda x: max(pdf_q(x) - np.exp(eps) * pdf_p(x), 0.0), lo, hi, points=points, limit=200
    )
    return value


@pytest.mark.parametrize("delta", [1e-4, 0.05, 0.3, 0.6])
def test_laplace_pair_epsilon_at_positive_delta_matches_quadrature(delta: float) -> None:
    kp = known_pair("laplace", distance=3.0, scale=1.5, dim=3)  # pure epsilon 2
    eps = kp.epsilon(delta)
    assert eps < 2.0  # delta > 0 buys something: the pure epsilon is not eps(delta)
    p, q = stats.laplace(0, 1.5).pdf, stats.laplace(3.0, 1.5).pdf
    # the two laws differ in the first coordinate only; the others cancel
    if eps > 0:
        # the integrand's kinks: 0, 3 and where q = e^eps p, (eps * b + 3) / 2
        kinks = [0.0, (eps * 1.5 + 3.0) / 2, 3.0]
        assert _hockey_stick_quad(p, q, eps, kinks, -60, 63) == pytest.approx(delta, rel=1e-6)
    else:  # past the total variation: even eps = 0 leaves at most delta
        assert _hockey_stick_quad(p, q, 0.0, [0.0, 3.0], -60, 63) <= delta
    assert kp.epsilon(0.0) == 2.0
    assert kp.epsilon(1.0) == 0.0


def test_score_mechanisms_epsilon_at_positive_delta_match_quadrature() -> None:
    lap = laplace_scores(1.3)
    p, q = stats.laplace(0, 1).pdf, stats.laplace(1.3, 1).pdf
    gau = gaussian_scores(1.2)
    gp, gq = stats.norm(0, 1).pdf, stats.norm(1.2, 1).pdf
    for delta in (1e-3, 0.1, 0.4):
        eps = float(lap.epsilon(delta))
        kinks = [0.0, (eps + 1.3) / 2, 1.3]  # where q = e^eps p between the centres
        assert _hockey_stick_quad(p, q, eps, kinks, -60, 61) == pytest.approx(delta, rel=1e-6)
        eps = float(gau.epsilon(delta))
        kink = eps / 1.2 + 0.6  # q = e^eps p at x = eps / mu + mu / 2
        assert _hockey_stick_quad(gp, gq, eps, [kink], -40, 41) == pytest.approx(delta, rel=1e-6)


def test_randomized_response_epsilon_is_zero_past_the_total_variation() -> None:
    rr = randomized_response(1.0)
    q = 1 / (1 + np.e)
    pa, pb = np.array([1 - q, q]), np.array([q, 1 - q])
    for delta in (0.05, 0.2):
        assert _hockey_stick(pa, pb, float(rr.epsilon(delta))) == pytest.approx(delta)
    # past delta = 1 - 2q the pair is (0, delta)-DP: epsilon 0, not NaN
    past = np.asarray(rr.epsilon([1 - 2 * q, 0.5, 1 - q, 0.9, 1.0]))
    assert np.array_equal(past, np.zeros(5))
    assert _hockey_stick(pa, pb, 0.0) == pytest.approx(1 - 2 * q)
