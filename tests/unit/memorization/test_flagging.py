"""Flagging of near-copies (idaudit.memorization._flagging) against exact binomial and
permutation references."""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import numpy as np
import pytest
from scipy.spatial.distance import cdist
from scipy.stats import binomtest, nhypergeom

from idaudit.exceptions import InvalidInputError
from idaudit.memorization import (
    flagging,
    flagging_from_distances,
    nnaa,
)
from idaudit.memorization._flagging import threshold_rank
from idaudit.results import check_result_dataset

# ------------------------------------------------------------------ flagging


def test_flagging_hand_computed() -> None:
    heldout = [0.5, 0.1, 0.3, 0.9, 0.7]  # sorted: 0.1 0.3 0.5 0.7 0.9
    synthetic = [0.05, 0.3, 0.6, 0.95]
    res = flagging_from_distances(heldout, synthetic, percentiles=[20, 40, 50], n_permutations=0)
    # ranks ceil(0.2*5)=1, ceil(0.4*5)=2, ceil(0.5*5)=3 -> thresholds 0.1, 0.3, 0.5
    np.testing.assert_array_equal(res.thresholds, [0.1, 0.3, 0.5])
    np.testing.assert_array_equal(res.n_synthetic_flagged, [1, 2, 2])  # 0.3 <= 0.3 counts
    np.testing.assert_array_equal(res.n_heldout_flagged, [1, 2, 3])
    assert np.isnan(res.p_values).all()
    frame = res.to_frame("m")
    assert list(frame.columns) == [
        "metric", "percentile", "threshold", "synthetic_pct", "heldout_pct", "n_synthetic",
        "n_heldout", "n_synthetic_flagged", "n_heldout_flagged", "p_value", "smallest_p_value",
        "ci_lower", "ci_upper",
    ]  # fmt: skip
    np.testing.assert_allclose(frame["synthetic_pct"], [25.0, 50.0, 50.0])
    assert frame.attrs["status"]["ci_lower"] == "certified_lower_bound"
    assert frame.attrs["status"]["ci_upper"] == "certified_upper_bound"
    assert frame.attrs["status"]["synthetic_pct"] == "sample_estimate"


@pytest.mark.parametrize("n", [7, 50, 101, 1000])
def test_threshold_rank_is_the_exact_inverted_cdf(n: int) -> None:
    values = np.random.default_rng(n).random(n)
    for p in ("1", "2", "5", "10", "20", "33.3", "50", "99.9"):
        k = max(1, math.ceil(Fraction(p) * n / 100))  # exact rational arithmetic
        assert threshold_rank(float(p), n) == k
        if float(p) / 100 * n == Fraction(p) * n / 100:  # where numpy's float is exact too
            assert np.sort(values)[k - 1] == np.percentile(values, float(p), method="inverted_cdf")


def test_ci_is_the_exact_binomial_interval() -> None:
    gen = np.random.default_rng(3)
    res = flagging_from_distances(
        gen.random(80), gen.random(33) * 0.6, percentiles=[1, 10, 50, 90], n_permutations=0,
        confidence_level=0.9,
    )  # fmt: skip
    for x, lo, hi in zip(res.n_synthetic_flagged, res.ci_lower, res.ci_upper, strict=True):
        ci = binomtest(int(x), 33).proportion_ci(confidence_level=0.9, method="exact")
        assert lo == pytest.approx(ci.low, abs=1e-10)
        assert hi == pytest.approx(ci.high, abs=1e-10)


def _enumerated_p_value(heldout: np.ndarray, synthetic: np.ndarray, k: int) -> float:
    """P(X >= x_obs) over every arrangement of the labels (exhaustive, no shortcuts)."""
    pooled = np.concatenate([heldout, synthetic])
    n_h = heldout.size
    observed = int((synthetic <= np.sort(heldout)[k - 1]).sum())
    hits = total = 0
    for chosen in itertools.combinations(range(pooled.size), n_h):
        mask = np.zeros(pooled.size, bool)
        mask[list(chosen)] = True
        h, s = pooled[mask], pooled[~mask]
        hits += int((s <= np.sort(h)[k - 1]).sum()) >= observed
        total += 1
    return hits / total


def test_permutation_p_value_matches_enumeration_and_negative_hypergeometric() -> None:
    gen = np.random.default_rng(4)
    heldout, synthetic = gen.random(8), gen.random(6) * 0.5
    res = flagging_from_distances(heldout, synthetic, percentiles=[25], n_permutations=20000, rng=1)
    k = threshold_rank(25, 8)  # 2
    exact = _enumerated_p_value(heldout, synthetic, k)
    x = int(res.n_synthetic_flagged[0])
    # the closed form of docs/memorization.md: X ~ nhypergeom(N, n_S, k), scipy's parametrisation
    assert nhypergeom(14, 6, k).sf(x - 1) == pytest.approx(exact, rel=1e-12)
    # Monte Carlo with 20000 draws: sd <= sqrt(.25/20000) = 0.0035; 5 sd
    assert res.p_values[0] == pytest.approx(exact, abs=0.018)


def test_ties_at_the_threshold_count_as_flagged_and_the_test_stays_exact() -> None:
    heldout = np.array([0.0, 0.0, 0.2, 0.4])
    synthetic = np.array([0.0, 0.0, 0.0, 0.3])
    res = flagging_from_distances(heldout, synthetic, percentiles=[25], n_permutations=20000)
    assert res.thresholds[0] == 0.0
    assert res.n_synthetic_flagged[0] == 3
    assert res.n_heldout_flagged[0] == 2
    exact = _enumerated_p_value(heldout, synthetic, 1)
    assert res.p_values[0] == pytest.approx(exact, abs=0.018)


def test_strata_restrict_the_permutations() -> None:
    # cohort a: held-out far, synthetic near; cohort b: all held-out. A stratified test
    # never moves cohort b's values into the synthetic set.
    heldout = np.array([0.8, 0.9, 0.1, 0.2, 0.3])
    synthetic = np.array([0.05, 0.06])
    strata_h = np.array(["a", "a", "b", "b", "b"])
    strata_s = np.array(["a", "a"])
    res = flagging_from_distances(
        heldout, synthetic, heldout_strata=strata_h, synthetic_strata=strata_s,
        percentiles=[20], n_permutations=4000, rng=0,
    )  # fmt: skip
    # tau = 0.1; X = 2. Within cohort a, {0.8, 0.9, 0.05, 0.06} get 2 synthetic labels at
    # random; X >= 2 exactly when both 0.05 and 0.06 are synthetic: 1 of C(4, 2) = 6.
    assert res.p_values[0] == pytest.approx(1 / 6, abs=0.03)  # sd 0.006 at 4000 draws


def test_same_seed_same_p_values() -> None:
    gen = np.random.default_rng(5)
    h, s = gen.random(300), gen.random(200)
    a = flagging_from_distances(h, s, n_permutations=1500, rng=7)
    b = flagging_from_distances(h, s, n_permutations=1500, rng=7)
    np.testing.assert_array_equal(a.p_values, b.p_values)


def test_flagging_searches_neighbours_within_the_cohort() -> None:
    gen = np.random.default_rng(6)
    t, h, s = (
        gen.standard_normal((30, 5)),
        gen.standard_normal((20, 5)),
        gen.standard_normal((25, 5)),
    )
    ct, ch, cs = gen.integers(0, 3, 30), gen.integers(0, 3, 20), gen.integers(0, 3, 25)
    res = flagging(t, h, s, cohorts=(ct, ch, cs), n_permutations=0)
    for q, cq, got in ((h, ch, res.heldout_distances), (s, cs, res.synthetic_distances)):
        d = cdist(q, t, "cosine")
        d[cq[:, None] != ct[None, :]] = np.inf
        np.testing.assert_allclose(got, d.min(axis=1), atol=1e-12)


def test_flagging_bad_input() -> None:
    x = np.ones((3, 4))
    with pytest.raises(
        InvalidInputError, match=r"`percentiles` must each be in \(0, 100\); got 100.0"
    ):
        flagging_from_distances([1.0], [1.0], percentiles=[5, 100])
    with pytest.raises(
        InvalidInputError, match=r"`percentiles` must each be in \(0, 100\); got 0.0"
    ):
        flagging_from_distances([1.0], [1.0], percentiles=[0])
    with pytest.raises(InvalidInputError, match="`n_permutations` must be >= 0; got -1"):
        flagging_from_distances([1.0], [1.0], n_permutations=-1)
    with pytest.raises(InvalidInputError, match=r"4 \(train\) vs 4 \(heldout\) vs 5 \(synthetic\)"):
        flagging(x, x, np.ones((3, 5)))
    with pytest.raises(InvalidInputError, match="cohort 1 has heldout but no training rows"):
        flagging(x, x, x, cohorts=([0, 0, 0], [0, 1, 0], [0, 0, 0]))


def test_result_datasets_follow_the_schema() -> None:
    x = np.random.default_rng(1).standard_normal((3, 12, 4))
    flag = flagging(*x, n_permutations=9).to_xarray()
    check_result_dataset(flag)
    assert flag["ci_lower"].attrs["status"] == "certified_lower_bound"
    check_result_dataset(nnaa(*x, n_bootstrap=5).to_xarray())
