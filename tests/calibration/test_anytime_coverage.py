"""Coverage of the betting confidence bounds over many seeded repetitions.

* :func:`anytime_upper_bound` / ``_lower``: the bound must hold at *every* look of a stream at
  once. Checking at 30 looks per stream, repeated fixed-n Clopper–Pearson bounds fail far more
  often than α — which shows the check can tell an anytime bound from a fixed-n one.
* :func:`betting_mean_lower_bound`, :func:`bernstein_mean_lower_bound`: one-sided coverage of
  the mean of a skewed variable in [0, 1].
"""

from __future__ import annotations

import numpy as np
import pytest

from idaudit.dp import (
    anytime_lower_bound,
    anytime_upper_bound,
    bernstein_mean_lower_bound,
    betting_mean_lower_bound,
    clopper_pearson_upper,
)
from idaudit.testing import Claim, assert_sound, check_claims

pytestmark = pytest.mark.calibration

ALPHA = 0.1


def _streams(reps: int, n: int, p: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Running error counts at looks 10, 20, ..., n of ``reps`` Bernoulli(p) streams."""
    x = np.random.default_rng(seed).random((reps, n)) < p  # (reps, n)
    looks = np.arange(10, n + 1, 10)  # (n_looks,)
    counts = np.cumsum(x, axis=1)[:, looks - 1]  # (reps, n_looks)
    return counts, looks


@pytest.mark.parametrize("p", [0.02, 0.2])
def test_confidence_sequence_holds_at_every_look(p: float) -> None:
    reps, n = 1000, 300
    counts, looks = _streams(reps, n, p, seed=int(p * 1000))
    upper = anytime_upper_bound(counts, looks[None, :], ALPHA)  # (reps, n_looks)
    lower = anytime_lower_bound(counts, looks[None, :], ALPHA)
    naive = clopper_pearson_upper(counts, looks[None, :], ALPHA)
    # one event per stream: the bound misses p at some look
    level = {"alpha": ALPHA, "significance": 1e-3}
    miss_up = check_claims(Claim(upper, "certified_upper_bound"), p, **level)
    miss_low = check_claims(Claim(lower, "certified_lower_bound"), p, **level)
    repeated = check_claims(Claim(naive, "certified_upper_bound"), p, alpha=ALPHA)
    # Each count is at most Binomial(1000, 0.1) if the sequence is valid: mean 100, sd 9.5;
    # binomtest rejects "rate <= 0.1" at 0.001 above about 130. The mixture is conservative
    # (30-45 upper misses here). Repeating a fixed-n Clopper-Pearson bound at the 30 looks
    # misses far more often (140 at p = 0.02, 303 at p = 0.2, with these seeds): the check
    # tells an anytime bound from a fixed-n one.
    assert_sound({"upper": miss_up, "lower": miss_low})
    assert repeated.pvalue < 1e-3, repeated.message()
    assert miss_up.n_violations > 0  # not vacuous


@pytest.mark.parametrize("bound", [betting_mean_lower_bound, bernstein_mean_lower_bound])
def test_mean_lower_bounds_cover(bound) -> None:
    reps, n, alpha = 250, 60, 0.2
    a, b = 2.0, 5.0
    mean = a / (a + b)
    x = np.random.default_rng(11).beta(a, b, size=(reps, n))
    lower = Claim([bound(row, alpha) for row in x], "certified_lower_bound")
    # under a true miss rate of 0.2, a count over 250 reps has mean 50, sd 6.3; binomtest
    # rejects "rate <= 0.2" at 0.001 above about 70. Both bounds are conservative (betting
    # misses about 0.08 of the time here, empirical Bernstein almost never).
    assert_sound(check_claims(lower, mean, alpha=alpha, significance=1e-3))
    widths = [mean - bound(row, alpha) for row in x[:50]]
    assert np.mean(widths) < 0.2  # informative, not vacuous
