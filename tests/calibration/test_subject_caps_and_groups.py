"""Subject-aware memorisation statistics after a cap, with groups, and their intervals (issue 32).

Scenario (as in test_subject_calibration.py): a subject is a centre ``c ~ N(0, I_8)`` and each
photo is ``c + 0.5 ε``; sets hold disjoint subjects, so training and held-out subjects are a
subject-level random split and a generator that draws fresh subjects memorises nothing.

* The NNAA permutation test after ``max_samples``: 48 training and 12 held-out subjects × 3
  photos, 40 synthetic singletons, a cap of 36. Thinning images kept about 0.75 photo of each
  training subject and all 3 of each held-out one, so held-out photos found their own
  subject's photos and looked "further from the synthetic set": 86/200 null runs rejected at
  0.05 before, 12/200 with the cap drawing whole subjects (``cap_indices``).
* Flagging's interval with synthetic groups: 30 groups × 5 photos whose distances share the
  group's value with probability 0.8 (each photo marginally uniform, so the rate at a
  threshold ``t`` is ``t``). Clopper–Pearson on the 150 images missed the rate in 110/300
  runs at a nominal 30 (confidence 0.9); the betting interval on group shares in 6/300.
* NNAA's split-half interval with subjects (20 subjects × 3 photos in every set): covered
  the expected statistic 0.860, 0.870, 0.877 before (aa_train_synth, aa_heldout_synth, loss),
  0.943, 0.957, 0.977 with the half-size variance unscaled.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy.spatial.distance import cdist
from scipy.stats import binomtest

from idaudit.memorization import flagging_from_distances, nnaa, nnaa_from_distances

pytestmark = pytest.mark.calibration

ALPHA = 0.05
NAMES = ("aa_train_synth", "aa_heldout_synth", "privacy_loss")


def _subjects(gen: np.random.Generator, n_subjects: int, photos: int) -> np.ndarray:
    centres = gen.standard_normal((n_subjects, 8)).repeat(photos, axis=0)
    return centres + 0.5 * gen.standard_normal((n_subjects * photos, 8))


def test_nnaa_test_stays_valid_when_the_cap_thins_training_only() -> None:
    reps, rejected = 200, 0
    train_labels = np.arange(48 * 3) // 3
    heldout_labels = 1000 + np.arange(12 * 3) // 3
    for rep in range(reps):
        gen = np.random.default_rng([32, 1, rep])
        t, h, s = _subjects(gen, 48, 3), _subjects(gen, 12, 3), _subjects(gen, 40, 1)
        kw = {"subjects": (train_labels, heldout_labels, None), "n_bootstrap": 0,
              "n_permutations": 99, "max_samples": 36, "rng": rep}  # fmt: skip
        if rep % 2:  # both entry points share the cap
            x = np.vstack([t, h, s])
            res = nnaa_from_distances(cdist(x, x), (len(t), len(h), len(s)), **kw)
        else:
            res = nnaa(t, h, s, metric="euclidean", **kw)
        assert res.cap_unit == "subjects", res
        assert res.capped, res
        rejected += bool(res.p_value <= ALPHA)
    # p = (1 + b)/(1 + 99) lies on the grid k/100, so P(p <= 0.05) <= 0.05 under H0. With 200
    # reps the count has mean <= 10 and sd sqrt(200 * .05 * .95) = 3.1; the one-sided exact
    # binomial test at 1e-3 fails from about 21 rejections (a true size near 0.10). Thinning
    # images instead rejected 86/200.
    assert binomtest(rejected, reps, ALPHA, alternative="greater").pvalue > 1e-3, rejected


def _grouped_distances(gen: np.random.Generator, groups: int, photos: int) -> np.ndarray:
    """Distances uniform on (0, 1) per photo, equal to the group's value with prob. 0.8."""
    shared = gen.random(groups).repeat(photos)
    own = gen.random(groups * photos)
    return np.where(gen.random(groups * photos) < 0.8, shared, own)


def test_flagging_interval_covers_the_rate_with_synthetic_groups() -> None:
    reps, missed = 300, 0
    groups = np.arange(30 * 5) // 5
    for rep in range(reps):
        gen = np.random.default_rng([32, 2, rep])
        res = flagging_from_distances(
            gen.random(120),  # held-out: the threshold at p is near p / 100
            _grouped_distances(gen, 30, 5),
            subjects=(None, groups),
            percentiles=[25],
            n_permutations=0,
            confidence_level=0.9,
        )
        assert res.interval_method == "betting_by_group", res
        # each photo is marginally uniform: the rate at the threshold is the threshold
        q = res.thresholds[0]
        missed += not (res.ci_lower[0] <= q <= res.ci_upper[0])
    # A two-sided interval at 0.9 misses at most 10 %: 30 of 300 expected, sd sqrt(300 * .1
    # * .9) = 5.2; the one-sided exact binomial test at 1e-3 fails from about 48 misses (a true
    # miss rate near 0.16). Clopper-Pearson on the images missed 110/300 here.
    assert binomtest(missed, reps, 0.10, alternative="greater").pvalue > 1e-3, missed


def _aa(a: np.ndarray, b: np.ndarray) -> float:
    """Brute-force adversarial accuracy of sets ``a`` and ``b`` (ties count as not closer)."""
    aa, bb, ab = cdist(a, a), cdist(b, b), cdist(a, b)
    np.fill_diagonal(aa, np.inf)
    np.fill_diagonal(bb, np.inf)
    return 0.5 * ((aa.min(1) < ab.min(1)).mean() + (bb.min(1) < ab.min(0)).mean())


def _draw_sets(gen: np.random.Generator) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    return _subjects(gen, 20, 3), _subjects(gen, 20, 3), _subjects(gen, 20, 3)


def test_nnaa_interval_with_subjects_covers_the_expected_statistic() -> None:
    # truth: the statistics' expectations at these sizes, by brute force over 3000 fresh data
    # sets (standard errors about 0.0006 for each AA and 0.0008 for the loss, some 40 times
    # below the interval's half-width: they move coverage by far less than the test can see)
    gen = np.random.default_rng([32, 3])
    draws = []
    for _ in range(3000):
        t, h, s = _draw_sets(gen)
        draws.append((_aa(t, s), _aa(h, s)))
    aa = np.mean(draws, axis=0)
    truth = np.array([aa[0], aa[1], aa[1] - aa[0]])
    labels = np.arange(60) // 3
    reps, covered = 300, np.zeros(3, dtype=np.int64)
    for rep in range(reps):
        gen = np.random.default_rng([32, 4, rep])
        res = nnaa(
            *_draw_sets(gen), subjects=(labels, labels + 100, labels + 200), metric="euclidean",
            n_bootstrap=100, n_permutations=0, rng=rep,
        )  # fmt: skip
        assert res.interval_method == "split_half_subjects", res
        covered += [res.ci[k][0] <= truth[i] <= res.ci[k][1] for i, k in enumerate(NAMES)]
    # Coverage must reach the nominal 0.95 (the interval is conservative by design). With 300
    # reps a coverage of 0.95 gives a count with mean 285, sd sqrt(300 * .95 * .05) = 3.8; the
    # one-sided exact binomial test at 1e-3 fails below about 272 (a true coverage near 0.905).
    # The scaled split-half interval covered 0.86-0.88 here.
    for i, count in enumerate(covered):
        p = binomtest(int(count), reps, 0.95, alternative="less").pvalue
        assert p > 1e-3, (NAMES[i], int(count), reps)
