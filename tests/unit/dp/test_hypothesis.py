import math

import numpy as np
import pytest
from sklearn.metrics import roc_curve

from idaudit.dp import (
    clopper_pearson_upper,
    epsilon_from_error_rates,
    epsilon_from_roc,
    exact_corner,
)
from idaudit.exceptions import InvalidInputError


def _eq16_reference(fpr, fnr, delta=0.0):
    """Seed 000, Eq. 16 written out with the math module, term by term."""
    terms = [0.0]
    for num, den in ((1 - delta - fpr, fnr), (1 - delta - fnr, fpr)):
        if num <= 0:
            continue  # omitted: the inequality holds for every ε
        terms.append(math.inf if den == 0 else math.log(num / den))
    return max(terms)


def test_zero_error_certificates_match_published_values():
    alpha = 0.05 / (8 * 5 * 2)  # seed 000, Sec. 4.3: 40 pairs x 2 rates
    got = [
        epsilon_from_error_rates(u, u)
        for u in (clopper_pearson_upper(0, n, alpha) for n in (10, 15, 30))
    ]
    # published to three decimals
    np.testing.assert_allclose(got, [0.0, 0.454, 1.277], atol=5e-4)


def test_error_rates_against_reference_grid():
    grid = [0.0, 1e-9, 0.01, 0.1, 0.3, 0.5, 0.7, 0.99, 1.0]
    for delta in (0.0, 1e-5, 0.2):
        for f in grid:
            for g in grid:
                ref = _eq16_reference(f, g, delta)
                got = epsilon_from_error_rates(f, g, delta)
                if math.isinf(ref):
                    assert got == math.inf
                else:
                    # log(a) - log(b) vs log(a / b): a few ulps
                    assert got == pytest.approx(ref, rel=1e-12, abs=1e-15)


def test_error_rates_vectorised_broadcasting():
    fpr = np.array([[0.1], [0.2]])
    fnr = np.array([0.1, 0.3, 0.0])
    out = epsilon_from_error_rates(fpr, fnr, delta=1e-3)
    assert out.shape == (2, 3)
    for i in range(2):
        for j in range(3):
            assert out[i, j] == pytest.approx(_eq16_reference(fpr[i, 0], fnr[j], 1e-3))
    assert isinstance(epsilon_from_error_rates(0.1, 0.1), float)


def test_error_rates_endpoints():
    assert epsilon_from_error_rates(0.0, 0.0) == math.inf
    assert epsilon_from_error_rates(0.5, 0.5) == 0.0  # a coin flip proves nothing
    assert epsilon_from_error_rates(1.0, 1.0) == 0.0  # both numerators <= 0: omitted
    assert epsilon_from_error_rates(0.0, 1.0) == 0.0  # never rejects: no evidence


def _roc_reference(fpr, tpr):
    """Eq. 15 point by point with the math module."""
    best = 0.0
    for f, t in zip(fpr, tpr, strict=True):
        if t > 0:
            best = max(best, math.inf if f == 0 else math.log(max(1.0, t / f)))
        if f < 1:
            best = max(best, math.inf if t == 1 else math.log(max(1.0, (1 - f) / (1 - t))))
    return best


def test_epsilon_from_roc_on_sklearn_curve_with_overlap():
    rng = np.random.default_rng(0)
    y = np.r_[np.zeros(200), np.ones(200)]
    scores = np.r_[rng.normal(0, 1, 200), rng.normal(1, 1, 200)]
    # force the extreme scores to be "wrong" so no endpoint has a zero denominator
    scores[0], scores[200] = 10.0, -10.0
    fpr, tpr, _ = roc_curve(y, scores)
    got = epsilon_from_roc(fpr, tpr)
    assert np.isfinite(got)
    assert got == pytest.approx(_roc_reference(fpr, tpr), rel=1e-12)
    assert not exact_corner(fpr, tpr)


def test_epsilon_from_roc_endpoint_is_inf_but_not_a_corner():
    rng = np.random.default_rng(1)
    y = np.r_[np.zeros(50), np.ones(50)]
    scores = np.r_[rng.normal(0, 1, 50), rng.normal(1, 1, 50)]
    scores[50] = 99.0  # the top score is a positive: (0, 1/50) is on the curve
    fpr, tpr, _ = roc_curve(y, scores)
    assert epsilon_from_roc(fpr, tpr) == math.inf
    assert not exact_corner(fpr, tpr)


def test_epsilon_from_roc_perfect_separation_is_exact_corner():
    y = np.r_[np.zeros(5), np.ones(5)]
    scores = np.r_[np.arange(5), np.arange(5) + 10.0]
    fpr, tpr, _ = roc_curve(y, scores)
    assert exact_corner(fpr, tpr)
    assert epsilon_from_roc(fpr, tpr) == math.inf


def test_epsilon_from_roc_trivial_points_give_zero():
    assert epsilon_from_roc([0.0, 1.0], [0.0, 1.0]) == 0.0
    assert epsilon_from_roc(0.3, 0.3) == 0.0  # scalars accepted
    assert epsilon_from_roc([0.5], [0.2]) == 0.0  # worse than chance is floored at 0


@pytest.mark.parametrize(
    ("fpr", "tpr", "match"),
    [
        ([0.1, 0.2], [0.3], r"same shape; got \(2,\) vs \(1,\)"),
        ([], [], "at least one operating point"),
        ([0.1, 1.2], [0.3, 0.4], r"`fpr` must be in \[0, 1\]; got 1.2\."),
        ([0.1], [-0.2], r"`tpr` must be in \[0, 1\]; got -0.2\."),
    ],
)
def test_roc_bad_input(fpr, tpr, match):
    with pytest.raises(InvalidInputError, match=match):
        epsilon_from_roc(fpr, tpr)
    with pytest.raises(InvalidInputError, match=match):
        exact_corner(fpr, tpr)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"fpr": 1.5, "fnr": 0.1}, r"`fpr` must be in \[0, 1\]; got 1.5\."),
        ({"fpr": 0.1, "fnr": -0.1}, r"`fnr` must be in \[0, 1\]; got -0.1\."),
        ({"fpr": 0.1, "fnr": 0.1, "delta": 1.1}, r"`delta` must be in \[0, 1\]; got 1.1\."),
        ({"fpr": [0.1, np.nan], "fnr": 0.1}, r"`fpr` must be in \[0, 1\]; got nan\."),
    ],
)
def test_error_rates_bad_input(kwargs, match):
    with pytest.raises(InvalidInputError, match=match):
        epsilon_from_error_rates(**kwargs)
