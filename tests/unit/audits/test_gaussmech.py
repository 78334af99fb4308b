"""Tests of GaussMechAuditor against the closed form of seed 000, Eq. 9."""

from __future__ import annotations

import math

import numpy as np
import pytest

from idaudit import GaussMechAuditor, InvalidInputError


def eq9(a: np.ndarray, b: np.ndarray, delta: float) -> float:
    mu_a, mu_b = a.mean(0), b.mean(0)
    sig_a = math.sqrt(np.sum((a - mu_a) ** 2) / a.size)  # 1/(n d) sum ||z - mu||^2
    sig_b = math.sqrt(np.sum((b - mu_b) ** 2) / b.size)
    return float(np.linalg.norm(mu_a - mu_b) * math.sqrt(2 * math.log(1.25 / delta))) / max(
        sig_a, sig_b
    )


@pytest.mark.parametrize("delta", [1e-5, 0.1])
def test_matches_equation_9(delta: float) -> None:
    gen = np.random.default_rng(0)
    a, b = gen.normal(size=(20, 7)), gen.normal(0.3, 2.0, size=(13, 7))
    aud = GaussMechAuditor(delta=delta).fit(a, b)
    assert aud.epsilon_ == pytest.approx(eq9(a, b, delta), rel=1e-12)
    assert aud.mean_distance_ == pytest.approx(np.linalg.norm(a.mean(0) - b.mean(0)), rel=1e-12)
    # the larger residual scale (identity B, sd 2) is the one used
    assert aud.sigma_ == pytest.approx(math.sqrt(np.sum((b - b.mean(0)) ** 2) / b.size), rel=1e-12)
    assert aud.status == "diagnostic"


def test_degenerate_scales() -> None:
    a = np.ones((3, 2))
    assert GaussMechAuditor().fit(a, a + 1.0).epsilon_ == math.inf  # no noise, means differ
    assert GaussMechAuditor().fit(a, a.copy()).epsilon_ == 0.0  # nothing differs


@pytest.mark.parametrize("delta", [0.0, 1.0, -1e-5])
def test_bad_delta(delta: float) -> None:
    gen = np.random.default_rng(0)
    with pytest.raises(InvalidInputError, match=r"`delta` must be in \(0, 1\)"):
        GaussMechAuditor(delta=delta).fit(gen.normal(size=(3, 2)), gen.normal(size=(3, 2)))


@pytest.mark.parametrize(
    ("a", "b", "match"),
    [
        (np.ones(3), np.ones((3, 2)), "`emb_a` must be a 2-D array"),
        (np.ones((3, 2)), np.ones((1, 2)), "`emb_b` must have at least 2 rows; got 1"),
        (np.ones((0, 2)), np.ones((3, 2)), "`emb_a` must have at least 2 rows; got 0"),
        (np.ones((3, 2)), np.ones((3, 3)), "same number of features; got 2 vs 3"),
        (np.array([[1.0, np.nan], [0, 0]]), np.ones((3, 2)), "holds 1 row\\(s\\) with NaN or inf"),
    ],
)
def test_bad_input(a: np.ndarray, b: np.ndarray, match: str) -> None:
    with pytest.raises(InvalidInputError, match=match):
        GaussMechAuditor().fit(a, b)
