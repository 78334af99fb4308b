"""Type I error and power of the MMD² permutation test over many seeded repetitions."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from idaudit import MMDTVAuditor
from idaudit.testing import assert_sound, check_rate

N_REPS = 300
N_PERM = 99  # p-values on the grid k/100: P(p <= 0.05) = 0.05 exactly under H0


def pvalues(shift: float) -> np.ndarray:
    out = []
    for rep in range(N_REPS):
        gen = np.random.default_rng(10_000 + rep)
        a = gen.normal(size=(8, 3))
        b = gen.normal(size=(8, 3))
        b[:, 0] += shift
        out.append(MMDTVAuditor(n_permutations=N_PERM, rng=rep).fit(a, b).pvalue_)
    return np.asarray(out)


@pytest.mark.calibration
def test_pvalues_are_uniform_under_h0() -> None:
    p = pvalues(0.0)
    rejected = int(np.sum(p <= 0.05))
    # expected 15 of 300, sd sqrt(300 * 0.05 * 0.95) = 3.8; a calibrated test fails 0.1% of runs
    assert_sound(check_rate(rejected, N_REPS, 0.05, alternative="two-sided", significance=1e-3))
    # the whole distribution, not just one level (discreteness adds at most 0.01 to D)
    assert stats.kstest(p, "uniform").pvalue > 1e-3
    assert p.min() >= 1 / (N_PERM + 1)


@pytest.mark.calibration
def test_power_against_a_shift() -> None:
    p = pvalues(3.0)
    # a 3-sd shift of one coordinate with 8 + 8 rows: almost every repetition rejects
    assert np.mean(p <= 0.05) > 0.9
