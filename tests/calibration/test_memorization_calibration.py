"""Flagging's p-value and interval over many seeded repetitions (seed 003 statistics).

* Type-I error: training, held-out and synthetic embeddings drawn from one law per cohort
  (synthetic and held-out exchangeable), two cohorts of different spread and different
  held-out/synthetic ratios, so that pooling the threshold over cohorts matters.
* Coverage: synthetic distances from a known law, so the generator's true flag rate at the
  realised threshold, q(τ) = F(τ), is known in closed form.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import binomtest

from idaudit.memorization import flagging, flagging_from_distances, nnaa

pytestmark = pytest.mark.calibration

N_REPS = 300
ALPHA = 0.05


def _cohort(gen: np.random.Generator, n_t: int, n_h: int, n_s: int, scale: float):
    centre = gen.standard_normal(8)
    draw = lambda n: centre + scale * gen.standard_normal((n, 8))  # noqa: E731
    return draw(n_t), draw(n_h), draw(n_s)


def test_flagging_p_value_is_valid_under_exchangeability() -> None:
    rejections = np.zeros(3, dtype=np.int64)
    for rep in range(N_REPS):
        gen = np.random.default_rng([2026, rep])
        # cohort 0: tight, many synthetic per held-out; cohort 1: loose, few synthetic. The
        # pooled threshold then comes from cohort 1, and a test that ignored the cohorts
        # would flag cohort 0's close synthetic images far too often (189, 260 and 300 of 300
        # rejections at p = 5, 10, 20, against 11, 10 and 4 here).
        t0, h0, s0 = _cohort(gen, 30, 10, 40, 0.5)
        t1, h1, s1 = _cohort(gen, 30, 40, 10, 1.5)
        res = flagging(
            np.concatenate([t0, t1]),
            np.concatenate([h0, h1]),
            np.concatenate([s0, s1]),
            cohorts=(
                np.repeat([0, 1], 30),
                np.repeat([0, 1], [10, 40]),
                np.repeat([0, 1], [40, 10]),
            ),
            metric="euclidean",
            percentiles=[5, 10, 20],
            n_permutations=199,
            rng=rep,
        )
        rejections += res.p_values <= ALPHA
    # A valid test rejects at most ALPHA: 300 reps give an expected 15 and sd sqrt(300 * .05 *
    # .95) = 3.8. binomtest's one-sided p < 0.001 would need about 28 rejections, i.e. a true
    # rate above ~8.5%, which a 1.7-fold anti-conservative test would show.
    for count in rejections:
        assert binomtest(int(count), N_REPS, ALPHA, alternative="greater").pvalue > 1e-3, rejections


def test_flagging_p_value_rejects_near_copies() -> None:
    """The same design with half the synthetic images near-copies of training images."""
    rejected = 0
    for rep in range(40):
        gen = np.random.default_rng([7, rep])
        t, h, s = _cohort(gen, 60, 60, 60, 1.0)
        s[:30] = t[:30] + 0.01 * gen.standard_normal((30, 8))
        res = flagging(t, h, s, metric="euclidean", percentiles=[5], n_permutations=199, rng=rep)
        rejected += bool(res.p_values[0] <= ALPHA)
    assert rejected == 40


def test_clopper_pearson_interval_covers_the_rate_at_the_realised_threshold() -> None:
    misses = np.zeros(2, dtype=np.int64)
    for rep in range(N_REPS):
        gen = np.random.default_rng([99, rep])
        heldout = gen.exponential(1.0, 200)  # held-out distances ~ Exp(1)
        synthetic = gen.exponential(0.5, 60)  # synthetic distances ~ Exp(mean 0.5): closer
        res = flagging_from_distances(heldout, synthetic, percentiles=[5, 20], n_permutations=0)
        q = 1.0 - np.exp(-res.thresholds / 0.5)  # the generator's flag rate at tau, exactly
        misses += (q < res.ci_lower) | (q > res.ci_upper)
    # Clopper-Pearson is exact-or-conservative: misses <= 5% in expectation (15 of 300, sd
    # 3.8); the one-sided binomial test flags a true miss rate of about 8.5% or more.
    for count in misses:
        assert binomtest(int(count), N_REPS, ALPHA, alternative="greater").pvalue > 1e-3, misses


def _nnaa_case(gen: np.random.Generator, n: int = 30):
    """Train, held-out, synthetic in 2-d: half the synthetic set are noisy training copies."""
    t, h = gen.standard_normal((n, 2)), gen.standard_normal((n, 2))
    copies = t[: n // 2] + 0.3 * gen.standard_normal((n // 2, 2))
    return t, h, np.vstack([copies, gen.standard_normal((n - n // 2, 2))])


def test_nnaa_split_half_interval_covers_the_expected_aa() -> None:
    # Target: E[AA] at these set sizes, by an independent Monte Carlo over 1500 data sets
    # (its standard error, ~0.002, is small next to the intervals' half-width, ~0.1).
    gen = np.random.default_rng(20240)
    names = ("aa_train_synth", "aa_heldout_synth", "privacy_loss")
    mc = []
    for _ in range(1500):
        r = nnaa(*_nnaa_case(gen), n_bootstrap=0, n_permutations=0, metric="euclidean")
        mc.append([getattr(r, name) for name in names])
    truth = np.mean(mc, axis=0)
    reps, covered, holds_point = 100, np.zeros(3, dtype=int), 0
    for k in range(reps):
        r = nnaa(
            *_nnaa_case(np.random.default_rng([91, k])),
            n_bootstrap=100,
            n_permutations=0,
            rng=k,
            metric="euclidean",
        )
        covered += [r.ci[name][0] <= truth[i] <= r.ci[name][1] for i, name in enumerate(names)]
        holds_point += r.ci["privacy_loss"][0] <= r.privacy_loss <= r.ci["privacy_loss"][1]
    # The interval is approximate; what must not happen is under-coverage. A one-sided exact
    # test at 1e-3 fails if coverage is clearly below 95 % (e.g. <= 88 of 100), yet a
    # well-calibrated interval passes with probability 0.999.
    for i in range(3):
        assert binomtest(int(covered[i]), reps, 0.95, alternative="less").pvalue > 1e-3, names[i]
    assert holds_point == reps  # the interval is centred on the estimate, never beside it
