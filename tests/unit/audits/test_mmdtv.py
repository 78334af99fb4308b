"""Tests of MMDTVAuditor against an O(n^2) loop, numpy's median and the closed forms."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.spatial.distance import pdist

from idaudit import InvalidInputError, MMDTVAuditor
from idaudit.ops._mmd import permutation_splits, split_masks
from references import loop_mmd2


@pytest.fixture
def pair() -> tuple[np.ndarray, np.ndarray]:
    gen = np.random.default_rng(1)
    return gen.normal(size=(12, 4)), gen.normal(0.8, 1.0, size=(9, 4))


@pytest.mark.parametrize("scale", [0.5, 1.0, 2.0])
def test_matches_loop_and_closed_forms(pair: tuple, scale: float) -> None:
    a, b = pair
    sigma = np.median(pdist(np.r_[a, b])) * scale
    aud = MMDTVAuditor(bandwidth_scale=scale).fit(a, b)
    want = loop_mmd2(a, b, sigma)
    assert aud.bandwidth_ == pytest.approx(sigma, rel=1e-12)
    assert aud.mmd2_ == pytest.approx(want, rel=1e-10)
    mmd = math.sqrt(max(want, 0.0))
    assert aud.mmd_ == pytest.approx(mmd, rel=1e-10)
    # Eq. 12/14 and Gonzalez et al. at delta = 0
    assert aud.epsilon_ == pytest.approx(math.log((1 + mmd / 2) / (1 - mmd / 2)), rel=1e-10)
    assert aud.epsilon_hs_ == pytest.approx(2 * math.atanh(mmd / math.sqrt(2)), rel=1e-10)
    assert aud.epsilon_hs_ > aud.epsilon_  # the hockey-stick route is tighter here
    assert aud.status == "sample_estimate"


def test_fixed_bandwidth(pair: tuple) -> None:
    a, b = pair
    aud = MMDTVAuditor(bandwidth=0.7, bandwidth_scale=2.0).fit(a, b)
    assert aud.bandwidth_ == pytest.approx(1.4)
    assert aud.mmd2_ == pytest.approx(loop_mmd2(a, b, 1.4), rel=1e-10)


def test_negative_mmd2_is_clipped_before_the_root() -> None:
    gen = np.random.default_rng(4)
    for seed in range(20):  # same law: the unbiased estimate is negative about half the time
        gen = np.random.default_rng(seed)
        aud = MMDTVAuditor().fit(gen.normal(size=(10, 3)), gen.normal(size=(10, 3)))
        if aud.mmd2_ < 0:
            break
    assert aud.mmd2_ < 0
    assert aud.mmd_ == 0.0
    assert aud.epsilon_ == 0.0
    assert aud.epsilon_hs_ == 0.0


def test_permutation_test_counts_the_same_splits(pair: tuple) -> None:
    a, b = pair
    aud = MMDTVAuditor(n_permutations=400, rng=7).fit(a, b)
    res = aud.permutation_test(a, b)
    assert res.pvalue == aud.pvalue_  # fit and permutation_test agree
    assert res.statistic == pytest.approx(aud.mmd2_, abs=1e-14)
    # recount with a plain loop over the same relabellings
    n_a, n = len(a), len(a) + len(b)
    z = np.r_[a, b]
    orders = np.concatenate([o for _, o in permutation_splits(aud.seed_, 400, n)])
    member = split_masks(orders, n_a, n - n_a)
    stats = np.array([loop_mmd2(z[r], z[~r], res.bandwidth) for r in member[:40]])
    np.testing.assert_allclose(res.null_distribution[:40], stats, rtol=1e-9, atol=1e-13)
    count = int(np.sum(res.null_distribution >= res.statistic - 1e-12))
    assert res.pvalue == (1 + count) / 401
    assert res.null_distribution.shape == (400,)
    assert "pvalue=" in repr(res)
    assert res.to_xarray()["null_distribution"].sizes["permutation"] == 400


def test_pvalue_depends_on_rng_only_through_the_seed(pair: tuple) -> None:
    a, b = pair
    first = MMDTVAuditor(n_permutations=99, rng=np.random.default_rng(3)).fit(a, b)
    again = MMDTVAuditor(n_permutations=99, rng=np.random.default_rng(3)).fit(a, b)
    assert first.pvalue_ == again.pvalue_
    assert first.seed_ == again.seed_
    assert 1 / 100 <= first.pvalue_ <= 1.0


def test_outputs_follow_n_permutations() -> None:
    assert [o.name for o in MMDTVAuditor().outputs()] == [
        "epsilon",
        "epsilon_hs",
        "mmd2",
        "mmd",
        "bandwidth",
    ]
    assert MMDTVAuditor(n_permutations=5).outputs()[-1].name == "pvalue"


def test_zero_median_bandwidth_is_refused() -> None:
    a = np.zeros((6, 2))
    b = np.r_[np.zeros((5, 2)), np.ones((1, 2))]
    with pytest.raises(InvalidInputError, match="median-heuristic bandwidth is 0"):
        MMDTVAuditor().fit(a, b)


@pytest.mark.parametrize(
    ("params", "error", "match"),
    [
        ({"bandwidth": "mean"}, InvalidInputError, "`bandwidth` must be 'median' or a positive"),
        ({"bandwidth": -1.0}, InvalidInputError, "`bandwidth` must be a finite number > 0"),
        ({"bandwidth": [1.0]}, TypeError, "`bandwidth` must be 'median' or a positive number"),
        ({"bandwidth_scale": 0.0}, InvalidInputError, "`bandwidth_scale` must be a finite"),
        ({"n_permutations": -1}, InvalidInputError, "`n_permutations` must be >= 0; got -1"),
        ({"n_permutations": 1.5}, TypeError, "`n_permutations` must be an integer"),
        ({"rng": "seed"}, TypeError, "`rng` must be an int"),
    ],
)
def test_bad_parameters(params: dict, error: type, match: str) -> None:
    gen = np.random.default_rng(0)
    with pytest.raises(error, match=match):
        MMDTVAuditor(**params).fit(gen.normal(size=(5, 2)), gen.normal(size=(5, 2)))


def test_permutation_test_needs_a_permutation(pair: tuple) -> None:
    with pytest.raises(InvalidInputError, match="`n_permutations` must be >= 1; got 0"):
        MMDTVAuditor().permutation_test(*pair)
