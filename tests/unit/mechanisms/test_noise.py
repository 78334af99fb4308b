"""GaussianNoise and LaplaceNoise (idaudit.mechanisms._noise): draws, exact epsilons, bad input."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from idaudit.data import EmbeddingSet
from idaudit.exceptions import InvalidInputError
from idaudit.mechanisms import (
    GaussianNoise,
    LaplaceNoise,
    Mechanism,
)


@pytest.fixture
def point_base() -> EmbeddingSet:
    centres = np.array([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, -1.0], [-1.0, 0.0, 0.0]])
    return EmbeddingSet(centres, ["a", "b", "c", "d"])


@pytest.fixture
def cloud_base() -> EmbeddingSet:
    gen = np.random.default_rng(3)
    x = gen.normal(size=(12, 3))
    return EmbeddingSet(x, np.repeat(["a", "b", "c"], 4))


def _gaussian_delta_reference(eps: float, sigma: float, dist: float) -> float:
    """Balle & Wang (2018), Theorem 8, with scipy's normal CDF (an independent route)."""
    a = dist / (2 * sigma)
    b = eps * sigma / dist
    return float(stats.norm.cdf(a - b) - np.exp(eps) * stats.norm.cdf(-a - b))


# -- the protocol ---------------------------------------------------------------------------


def test_noise_mechanisms_satisfy_the_protocol(point_base: EmbeddingSet) -> None:
    assert isinstance(GaussianNoise(point_base, 0.5), Mechanism)
    assert isinstance(LaplaceNoise(point_base, 0.5), Mechanism)
    np.testing.assert_array_equal(GaussianNoise(point_base, 0.5).identities, ["a", "b", "c", "d"])


# -- GaussianNoise --------------------------------------------------------------------------


def test_gaussian_draws_have_the_stated_mean_and_scale(point_base: EmbeddingSet) -> None:
    mech = GaussianNoise(point_base, sigma=0.7)
    x = mech.sample("b", 20_000, rng=1)
    assert x.shape == (20_000, 3)
    # standard error of the mean is 0.7/sqrt(2e4) = 0.005; 5 s.e. tolerance
    np.testing.assert_allclose(x.mean(axis=0), [0.0, 1.0, 0.0], atol=0.025)
    # s.e. of a sample sd is ~0.7/sqrt(4e4) = 0.0035; 5 s.e. tolerance
    np.testing.assert_allclose(x.std(axis=0, ddof=1), 0.7, atol=0.018)
    # per-coordinate normality: Kolmogorov-Smirnov against N(0, 0.7^2)
    assert stats.kstest((x[:, 0] - 0.0) / 0.7, "norm").pvalue > 1e-3


def test_scales_share_common_random_numbers(point_base: EmbeddingSet) -> None:
    x1 = GaussianNoise(point_base, 0.1).sample("a", 50, rng=7)
    x2 = GaussianNoise(point_base, 2.0).sample("a", 50, rng=7)
    centre = np.array([1.0, 0.0, 0.0])
    np.testing.assert_allclose((x1 - centre) / 0.1, (x2 - centre) / 2.0, rtol=1e-12)


def test_same_rng_same_draws_and_rng_matters(point_base: EmbeddingSet) -> None:
    mech = GaussianNoise(point_base, 0.3)
    np.testing.assert_array_equal(mech.sample("c", 5, rng=4), mech.sample("c", 5, rng=4))
    assert not np.array_equal(mech.sample("c", 5, rng=4), mech.sample("c", 5, rng=5))


def test_distributional_base_draws_base_rows_uniformly(cloud_base: EmbeddingSet) -> None:
    mech = GaussianNoise(cloud_base, sigma=1e-9)
    rows = cloud_base.get("b")
    x = mech.sample("b", 4000, rng=0)
    # each output sits on one base row (noise 1e-9)
    dist = np.linalg.norm(x[:, None, :] - rows[None], axis=2)  # (4000, 4)
    assert (dist.min(axis=1) < 1e-7).all()
    counts = np.bincount(dist.argmin(axis=1), minlength=4)
    assert stats.chisquare(counts).pvalue > 1e-3


@pytest.mark.parametrize("delta", [1e-5, 1e-3, 0.1])
@pytest.mark.parametrize("sigma", [0.3, 1.0, 4.0])
def test_gaussian_pair_epsilon_is_the_exact_analytic_value(
    point_base: EmbeddingSet, sigma: float, delta: float
) -> None:
    mech = GaussianNoise(point_base, sigma)
    dist = float(np.sqrt(2.0))  # |e1 - e2|
    eps = mech.pair_epsilon("a", "b", delta)
    assert mech.is_exact("a", "b", delta)
    if eps == 0.0:  # delta at least the TV distance 2 Phi(dist / 2 sigma) - 1
        assert delta >= 2 * stats.norm.cdf(dist / (2 * sigma)) - 1 - 1e-12
    else:
        # delta(eps) recomputed with scipy's normal CDF; rtol 1e-6: root-finding tolerance
        np.testing.assert_allclose(_gaussian_delta_reference(eps, sigma, dist), delta, rtol=1e-6)


def test_gaussian_reference_uses_the_sphere_diameter(point_base: EmbeddingSet) -> None:
    mech = GaussianNoise(point_base, 1.3)
    assert mech.l2_sensitivity == pytest.approx(2.0)
    # antipodal points a = e1 and d = -e1 are at distance 2: the pair attains the reference
    assert mech.reference_epsilon(1e-5) == pytest.approx(mech.pair_epsilon("a", "d", 1e-5))
    assert mech.reference_epsilon(1e-5) > mech.pair_epsilon("a", "b", 1e-5)
    assert mech.reference_epsilon(0.0) == np.inf


def test_gaussian_distributional_pair_uses_the_support_diameter(cloud_base: EmbeddingSet) -> None:
    mech = GaussianNoise(cloud_base, 0.8)
    a, b = cloud_base.get("a"), cloud_base.get("c")
    far = max(np.linalg.norm(x - y) for x in a for y in b)
    assert not mech.is_exact("a", "c")
    eps = mech.pair_epsilon("a", "c", 1e-4)
    np.testing.assert_allclose(_gaussian_delta_reference(eps, 0.8, far), 1e-4, rtol=1e-6)


# -- LaplaceNoise ---------------------------------------------------------------------------


def test_laplace_draws_have_the_stated_scale(point_base: EmbeddingSet) -> None:
    x = LaplaceNoise(point_base, scale=0.5).sample("c", 20_000, rng=2)
    assert stats.kstest(x[:, 2] + 1.0, "laplace", args=(0.0, 0.5)).pvalue > 1e-3
    # variance of Laplace(b) is 2 b^2 = 0.5; s.e. of the sample variance ~ 0.5*sqrt(5/2e4)
    np.testing.assert_allclose(x.var(axis=0, ddof=1), 0.5, atol=0.04)


def test_laplace_pair_epsilon_is_the_supremum_of_the_privacy_loss() -> None:
    base = EmbeddingSet(np.array([[0.0], [0.8]]), ["a", "b"], normalize=False)
    mech = LaplaceNoise(base, scale=0.4)
    grid = np.linspace(-5, 6, 20_001)
    loss = stats.laplace.logpdf(grid, 0.0, 0.4) - stats.laplace.logpdf(grid, 0.8, 0.4)
    # the privacy loss is flat at its maximum beyond both centres: the grid attains it exactly
    assert mech.pair_epsilon("a", "b") == pytest.approx(np.abs(loss).max(), rel=1e-9)
    assert mech.pair_epsilon("a", "b") == pytest.approx(2.0)
    assert mech.is_exact("a", "b", 0.0)
    assert not mech.is_exact("a", "b", 1e-5)  # at delta > 0 the pure value is an upper bound


def test_laplace_l1_bounds(point_base: EmbeddingSet, cloud_base: EmbeddingSet) -> None:
    mech = LaplaceNoise(point_base, 0.25)
    assert mech.pair_epsilon("a", "b") == pytest.approx(2.0 / 0.25)  # |e1 - e2|_1 = 2
    assert mech.reference_epsilon() == pytest.approx(2.0 / 0.25)  # 2 max |x|_1 = 2
    cloud = LaplaceNoise(cloud_base, 2.0)
    a, b = cloud_base.get("a"), cloud_base.get("b")
    far = max(np.abs(x - y).sum() for x in a for y in b)
    assert cloud.pair_epsilon("a", "b") == pytest.approx(far / 2.0)
    assert cloud.reference_epsilon() >= cloud.pair_epsilon("a", "b")


# -- bad input ------------------------------------------------------------------------------


@pytest.mark.parametrize("cls", [GaussianNoise, LaplaceNoise])
@pytest.mark.parametrize("value", [0.0, -1.0, np.inf])
def test_scale_must_be_positive_and_finite(
    point_base: EmbeddingSet, cls: type, value: float
) -> None:
    with pytest.raises(InvalidInputError, match=r"must be in \(0, inf\); got"):
        cls(point_base, value)


def test_base_must_be_an_embedding_set() -> None:
    with pytest.raises(TypeError, match=r"`base` must be an idaudit\.EmbeddingSet; got ndarray"):
        GaussianNoise(np.eye(3), 1.0)  # type: ignore[arg-type]


def test_unknown_identity_is_named(point_base: EmbeddingSet) -> None:
    with pytest.raises(InvalidInputError, match="'zz'"):
        GaussianNoise(point_base, 1.0).sample("zz", 3, rng=0)
    with pytest.raises(InvalidInputError, match="'zz'"):
        LaplaceNoise(point_base, 1.0).pair_epsilon("a", "zz")


def test_n_must_be_positive(point_base: EmbeddingSet) -> None:
    with pytest.raises(InvalidInputError, match="`n` must be >= 1; got 0"):
        GaussianNoise(point_base, 1.0).sample("a", 0, rng=0)
