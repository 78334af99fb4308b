"""Soundness of reserved-test certificates on data with exact duplicate rows.

Duplicates arise in two ways, and each has its own correct reading:

* **atoms** — the mechanism itself repeats an output with positive probability. Every row is an
  iid draw, so the split must not look at the values (``duplicates="keep"``, the default). A
  split that keeps equal rows together sends a frequent output to the development side
  whenever its copies outnumber the test quota; the test rows are then a sample of the
  identity's law *without* that atom, which here has a larger ε than the mechanism.
* **copies** — each draw is stored more than once. The draws are iid, the rows are not, so
  each group of copies is one draw on both sides of the split and in the Clopper–Pearson
  counts (``duplicates="collapse"``). Counting every copy as a trial overstates n.

As in ``test_certify_soundness.py``, each repetition checks two events against α: the
certificate exceeding the closed-form truth, and the sharper one behind it — a one-sided
Clopper–Pearson bound below the fixed test's true error rate (also closed form). Keeping
copies together but counting each row fails both tests (see each test's comment for the
counts it gave).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import pytest
from scipy import stats

from idaudit.certify import ReservedTestCertifier
from idaudit.data import EmbeddingSet
from idaudit.exceptions import IdauditWarning
from idaudit.mechanisms import LaplaceNoise, sample_embeddings

pytestmark = [pytest.mark.calibration, pytest.mark.slow]

ALPHA = 0.2  # a large level keeps the miss counts informative (see test_certify_soundness)

# -- atoms: a 1-D mechanism with one shared atom ----------------------------------------------
# identity a: x = ATOM w.p. 0.35, else density 1.2 on [0, 0.8] and 0.2 on (0.8, 1]
# identity b: x = ATOM w.p. 0.65, else uniform on [0, 1]
ATOM, P_ATOM_A, P_ATOM_B = 1.5, 0.35, 0.65


def _atom_sample(gen: np.random.Generator, n: int) -> EmbeddingSet:
    u = gen.random((4, n))  # (4, n): atom coin a, region coin a, position a, atom coin b
    low = u[1] < 0.96  # P_a([0, 0.8] | continuous) = 1.2 * 0.8
    pos = np.where(low, 0.8 * u[2], 0.8 + 0.2 * u[2])
    xa = np.where(u[0] < P_ATOM_A, ATOM, pos)
    xb = np.where(u[3] < P_ATOM_B, ATOM, gen.random(n))
    return EmbeddingSet(np.r_[xa, xb][:, None], ["a"] * n + ["b"] * n, normalize=False)


def _atom_cdf(x: float, p_atom: float, density: tuple[float, float]) -> float:
    """P(X < x) for an atom at ATOM plus a density piecewise constant on [0, 0.8], (0.8, 1]."""
    c = min(max(x, 0.0), 1.0)
    cont = density[0] * min(c, 0.8) + density[1] * max(c - 0.8, 0.0)
    return (1 - p_atom) * cont + (p_atom if x > ATOM else 0.0)


def _true_rates_1d(
    cert: ReservedTestCertifier, cdf_a: Callable[[float], float], cdf_b: Callable[[float], float]
) -> tuple[float, float]:
    """True FPR, FNR of the fixed 1-D test {x : w x >= t} ('predict identity_b')."""
    clf = cert.classifiers_[0]
    c = cert.certificates_
    sign = float(c["direction"][0])
    w = sign * float(clf.coef_[0][0])
    t = sign * (float(c["threshold"][0]) - float(clf.intercept_[0]))
    cut = t / w
    assert cut != ATOM  # thresholds are midpoints between distinct scores
    if w > 0:  # predict b iff x >= cut
        return 1.0 - cdf_a(cut), cdf_b(cut)
    return cdf_a(cut), 1.0 - cdf_b(cut)  # predict b iff x <= cut


def test_atoms_whose_removal_raises_epsilon_keep_certificates_sound() -> None:
    # The pure epsilon is the largest |log density ratio| over points (the atom counts as a
    # point of mass): atom 0.65/0.35 (0.62), [0, 0.8] 0.78/0.35 (0.80), (0.8, 1] 0.35/0.13
    # (0.99). Without the atoms, a's law on (0.8, 1] against b's gives 1/0.2 = 5: ln 5 = 1.61.
    ratios = [
        P_ATOM_B / P_ATOM_A,
        (1 - P_ATOM_A) * 1.2 / ((1 - P_ATOM_B) * 1.0),
        (1 - P_ATOM_B) * 1.0 / ((1 - P_ATOM_A) * 0.2),
    ]
    truth = max(abs(math.log(r)) for r in ratios)
    assert truth == pytest.approx(math.log(35 / 13))

    def cdf_a(x: float) -> float:
        return _atom_cdf(x, P_ATOM_A, (1.2, 0.2))

    def cdf_b(x: float) -> float:
        return _atom_cdf(x, P_ATOM_B, (1.0, 1.0))

    # 4000 rows per identity: the atoms (about 1400 and 2600 rows) always outnumber the test
    # quota of 1200, so a split that keeps them together never tests them
    reps, n = 200, 4000
    above = missed = 0
    bounds = []
    for r in range(reps):
        es = _atom_sample(np.random.default_rng(r), n)
        cert = ReservedTestCertifier(
            n_select=1, n_candidates=1, n_folds=2, alpha=ALPHA, rng=30_000 + r, progress=False
        )
        with pytest.warns(IdauditWarning, match="exact duplicates"):
            cert.fit(es, [("a", "b")])
        bounds.append(cert.epsilon_lb_)
        above += cert.epsilon_lb_ > truth
        fpr, fnr = _true_rates_1d(cert, cdf_a, cdf_b)
        c = cert.certificates_
        missed += bool(float(c["ufpr"][0]) < fpr or float(c["ufnr"][0]) < fnr)
    # Under a true rate of exactly 0.2, a count over 200 repetitions has sd
    # sqrt(200 * 0.2 * 0.8) = 5.7 around 40; each check fails if binomtest rejects
    # "rate <= 0.2" at 0.01 (55 or more). Split row by row: 0 above the truth and 38 misses.
    # Equal rows kept together: 63 above the truth and 200 of 200 missed (the atom's mass is
    # in the true error rates but never in the test sample), so both checks fail.
    assert stats.binomtest(above, reps, ALPHA, alternative="greater").pvalue > 0.01
    assert stats.binomtest(missed, reps, ALPHA, alternative="greater").pvalue > 0.01
    assert missed > 0  # the bounds are not vacuous
    assert np.mean(bounds) > 0.3  # and the certificates have power


def test_copies_of_one_draw_collapse_to_sound_certificates() -> None:
    # Laplace pair, centres 0 and 1, scale 1: pure epsilon exactly 1. Each of the 200 draws
    # per identity is stored twice, next to each other.
    reps, n = 400, 200
    base = EmbeddingSet(np.array([[0.0], [1.0]]), ["a", "b"], normalize=False)
    mech = LaplaceNoise(base, scale=1.0)
    truth = mech.pair_epsilon("a", "b")
    assert mech.is_exact("a", "b")
    assert truth == 1.0
    law_a, law_b = stats.laplace(0.0, 1.0), stats.laplace(1.0, 1.0)
    above = missed = 0
    bounds = []
    for r in range(reps):
        draws = sample_embeddings(mech, n, rng=r)
        es = EmbeddingSet(
            np.repeat(draws.embeddings, 2, axis=0),
            np.repeat(draws.labels, 2),
            normalize=False,
        )
        cert = ReservedTestCertifier(
            duplicates="collapse",
            n_select=1,
            n_candidates=1,
            n_folds=2,
            alpha=ALPHA,
            rng=40_000 + r,
            progress=False,
        ).fit(es, [("a", "b")])
        c = cert.certificates_
        assert int(c["n_test_a"][0]) == 60  # 30% of the 200 draws, not of the 400 rows
        bounds.append(cert.epsilon_lb_)
        above += cert.epsilon_lb_ > truth
        fpr, fnr = _true_rates_1d(cert, law_a.cdf, law_b.cdf)
        missed += bool(float(c["ufpr"][0]) < fpr or float(c["ufnr"][0]) < fnr)
    # sd of a count under rate 0.2 over 400 repetitions: sqrt(400 * 0.2 * 0.8) = 8 around 80;
    # each check fails if binomtest rejects "rate <= 0.2" at 0.01 (100 or more). Collapsed:
    # 5 above the truth and 43 misses. Copies kept together but each counted as a trial: the
    # test side holds 60 draws counted as 120 rows, the bounds are too narrow, and 111 miss
    # (31 above the truth), so the second check fails.
    assert stats.binomtest(above, reps, ALPHA, alternative="greater").pvalue > 0.01
    assert stats.binomtest(missed, reps, ALPHA, alternative="greater").pvalue > 0.01
    assert missed > 0
    assert np.mean(bounds) > 0.1
