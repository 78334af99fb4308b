"""Soundness of the median-of-splits certificate and of the certified maximum accuracy.

Each asserts, with a one-sided binomtest, that the certified statement failed in at most an
α share of seeded repetitions. Measured when written: the median of splits missed 0 of 300
(conservative: the maximum over the same 20 splits, which has no guarantee, missed only 9, so
this check cannot tell the two apart; the Markov argument in ``MultiSplitCertificate`` is what
makes the median valid); the certified maximum accuracy missed 0 of 300, the plug-in maximum
accuracy 73 of 300 (which the test would reject).
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from idaudit.certify import certify_scores, max_accuracy

pytestmark = pytest.mark.calibration


def _at_most(misses: int, reps: int, alpha: float) -> None:
    res = stats.binomtest(misses, reps, alpha, alternative="greater")
    assert res.pvalue > 1e-3, f"{misses}/{reps} misses at alpha = {alpha}"


def test_multisplit_median_on_identical_classes() -> None:
    # true ε = 0: any epsilon_lb_ > 0 is a miss. 300 reps at α = 0.2: expected misses <= 60,
    # sd = sqrt(300 * 0.2 * 0.8) = 6.9
    reps, alpha = 300, 0.2
    gen = np.random.default_rng(11)
    misses = 0
    for _ in range(reps):
        a, b = gen.normal(0, 1, 60), gen.normal(0, 1, 60)
        cert = certify_scores(a, b, alpha=alpha, thresholds="multisplit", n_splits=20, rng=gen)
        misses += cert.epsilon_lb_ > 0
    _at_most(misses, reps, alpha)


def test_certified_max_accuracy_covers_the_truth() -> None:
    # N(0, 1) against N(1, 1), prevalence 1/2: the best threshold (0.5) has accuracy
    # Φ(0.5) = 0.6915. 300 reps at α = 0.1: expected misses <= 30, sd = 5.2
    reps, alpha = 300, 0.1
    truth = stats.norm.cdf(0.5)
    gen = np.random.default_rng(12)
    misses = sum(
        max_accuracy(gen.normal(0, 1, 200), gen.normal(1, 1, 200), alpha=alpha) < truth
        for _ in range(reps)
    )
    _at_most(misses, reps, alpha)
