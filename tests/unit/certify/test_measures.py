"""ROC-hull measures against sklearn's ROC, scipy's convex hull and brute force."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from scipy.spatial import ConvexHull
from sklearn.metrics import roc_auc_score, roc_curve

from idaudit.certify import (
    bootstrap_interval,
    epsilon_raw_counts,
    hull_auc,
    max_accuracy,
    roc_hull,
    tpr_at_fpr,
)
from idaudit.exceptions import InvalidInputError


def _samples(seed: int) -> tuple[np.ndarray, np.ndarray]:
    gen = np.random.default_rng(seed)
    # rounded: ties inside and across classes
    return np.round(gen.normal(0, 1, 40 + seed), 1), np.round(gen.normal(0.8, 1.3, 31), 1)


def _sk_roc(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    y = np.r_[np.zeros(a.size), np.ones(b.size)]
    fpr, tpr, _ = roc_curve(y, np.r_[a, b], drop_intermediate=False)
    return np.stack([fpr, tpr], axis=1)  # (n_points, 2)


@pytest.mark.parametrize("seed", range(8))
def test_hull_auc_is_the_area_of_the_roc_convex_hull(seed: int) -> None:
    a, b = _samples(seed)
    pts = np.vstack([_sk_roc(a, b), [[1.0, 0.0]]])  # closing corner: the hull's area is the AUC
    assert hull_auc(a, b) == pytest.approx(ConvexHull(pts).volume, rel=1e-12)
    assert hull_auc(a, b) >= roc_auc_score(np.r_[np.zeros(a.size), np.ones(b.size)], np.r_[a, b])


def test_hull_auc_and_empirical_auc_on_reversed_scores() -> None:
    a, b = np.arange(10.0) + 20, np.arange(10.0)  # B always scores lower: empirical AUC 0
    assert hull_auc(a, b) == 0.5
    assert roc_auc_score(np.r_[np.zeros(10), np.ones(10)], np.r_[a, b]) == 0.0


@pytest.mark.parametrize("seed", range(5))
def test_tpr_at_fpr_is_the_best_randomised_test(seed: int) -> None:
    a, b = _samples(seed)
    pts = _sk_roc(a, b)
    for f in (0.0, 0.05, 0.2, 0.5, 0.93, 1.0):
        best = 0.0
        for p, q in itertools.product(pts, pts):  # mix two tests to reach FPR f exactly
            if p[0] <= f <= q[0]:
                lam = 1.0 if q[0] == p[0] else (q[0] - f) / (q[0] - p[0])
                best = max(best, lam * p[1] + (1 - lam) * q[1])
        assert tpr_at_fpr(a, b, f) == pytest.approx(best, abs=1e-12)
    fpr, tpr = roc_hull(a, b)
    assert np.all(np.diff(fpr) > 0)
    assert (fpr[-1], tpr[-1]) == (1.0, 1.0)


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("prevalence", [None, 0.2, 0.5, 0.9])
def test_max_accuracy_is_the_best_threshold(seed: int, prevalence: float | None) -> None:
    a, b = _samples(seed)
    pi = b.size / (a.size + b.size) if prevalence is None else prevalence
    cuts = np.r_[np.union1d(a, b), np.inf]
    best = max(pi * np.mean(b >= t) + (1 - pi) * np.mean(a < t) for t in cuts)
    assert max_accuracy(a, b, prevalence=prevalence) == pytest.approx(best, abs=1e-12)
    assert max_accuracy(a, b, prevalence=prevalence, alpha=0.05) >= best


def test_raw_counts_two_sided_reads_the_reversed_rule() -> None:
    a = np.r_[np.zeros(20), 2 * np.ones(80)]
    b = np.ones(100)
    # "B when >= t": hull (0, 0), (0.8, 1), (1, 1); at FPR 10/100 TPR 0.125: ln 1.25 either way
    assert epsilon_raw_counts(a, b, min_count=10) == pytest.approx(np.log(1.25))
    # reversed, "A when < t" (jax's TNR / FNR): hull (0, 0.2), (1, 1) in (FNR, TNR); at FNR
    # 10/100, TNR 0.2 + 0.8 * 0.1 = 0.28: ln 2.8
    got = epsilon_raw_counts(a, b, min_count=10, one_sided=False)
    assert got == pytest.approx(np.log(2.8))


def test_bootstrap_is_seeded_and_brackets_the_estimate() -> None:
    a, b = _samples(0)
    one = bootstrap_interval(hull_auc, a, b, n_bootstrap=200, rng=3)
    two = bootstrap_interval(hull_auc, a, b, n_bootstrap=200, rng=3)
    np.testing.assert_array_equal(one.values, two.values)
    assert one.values[0] < one.estimate < one.values[1]
    assert one.to_xarray()["value"].attrs["status"] == "sample_estimate"


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: tpr_at_fpr([0.0], [1.0], 1.5), r"`fpr` must be in \[0, 1\]"),
        (lambda: max_accuracy([0.0], [1.0], prevalence=2.0), "`prevalence`"),
        (lambda: max_accuracy([0.0], [1.0], alpha=0.0), "`alpha`"),
        (lambda: epsilon_raw_counts([0.0], [1.0], delta=2.0), "`delta`"),
        (lambda: hull_auc([], [1.0]), "`scores_a` must be a non-empty 1-D array"),
        (lambda: hull_auc([0.0], [np.nan]), "`scores_b` must not contain NaN"),
        (lambda: bootstrap_interval(hull_auc, [0.0], [1.0], quantiles=1.0), "`quantiles`"),
        (lambda: bootstrap_interval(hull_auc, [0.0], [1.0], method="x"), "`method`"),
        (lambda: tpr_at_fpr([0.0], [1.0], "a"), "`fpr` must hold real numbers"),
        (lambda: bootstrap_interval(0.5, [0.0], [1.0]), "`statistic` must be a callable"),
        (
            lambda: bootstrap_interval(lambda a, b: np.r_[a, b], [0.0], [1.0]),
            r"`statistic` must return one real number, not NaN; got array\(\[0\., 1\.\]\) on "
            "the scores",
        ),
        (
            lambda: bootstrap_interval(lambda a, b: np.nan, [0.0], [1.0]),
            "`statistic` must return one real number, not NaN; got nan on the scores",
        ),
    ],
)
def test_bad_input_is_refused(call, match: str) -> None:
    with pytest.raises(InvalidInputError, match=match):
        call()


def test_bootstrap_refuses_a_value_that_is_not_a_number_on_the_first_resample() -> None:
    calls = []

    def nan_once_resampled(a, b):  # type: ignore[no-untyped-def]
        calls.append(1)
        return 0.5 if len(calls) == 1 else float("nan")

    with pytest.raises(InvalidInputError, match="got nan on resample 0"):
        bootstrap_interval(nan_once_resampled, [0.0, 1.0], [1.0, 2.0], n_bootstrap=500)
    assert len(calls) == 2  # refused at once, not after 500 resamples


def test_bootstrap_keeps_an_infinite_statistic() -> None:
    # an ε can be +inf on a resample: a quantile between two infinite values is inf, not NaN
    a, b = np.arange(30.0), np.arange(30.0) + 1.0
    always = bootstrap_interval(lambda x, y: np.inf, a, b, n_bootstrap=50, method="percentile")
    np.testing.assert_array_equal(always.values, [np.inf, np.inf])

    def inf_when_b_is_above(x, y):  # type: ignore[no-untyped-def]
        return np.inf if np.median(y) > np.median(x) else 0.5

    ci = bootstrap_interval(inf_when_b_is_above, a, b, n_bootstrap=400, method="percentile")
    # the medians differ by 1 of a spread of 30: each side wins about half the resamples,
    # so the 2.5 % quantile is 0.5 and the 97.5 % one inf
    np.testing.assert_array_equal(ci.values, [0.5, np.inf])


def test_min_count_must_be_a_positive_integer() -> None:
    with pytest.raises(InvalidInputError, match="`min_count` must be >= 1; got 0"):
        epsilon_raw_counts([0.0, 1.0], [2.0], min_count=0)
