"""Soundness of reserved-test certificates when selection is adaptive.

``test_certify_soundness.py`` certifies one given pair; here ten candidate pairs are ranked on
development data and five are selected, so the winner's curse and the ``n_select`` part of the
union bound are exercised statistically. Every candidate is a ``LaplaceNoise`` pair with the
same exactly known pure ε = 1, and the true error rates of each fixed classifier and threshold
are computed in closed form.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from idaudit.certify import ReservedTestCertifier
from idaudit.data import EmbeddingSet
from idaudit.mechanisms import LaplaceNoise, sample_embeddings
from idaudit.testing import Claim, assert_sound, check_soundness

pytestmark = [pytest.mark.calibration, pytest.mark.slow]

N_PAIRS, N_SELECT, ALPHA, REPS, N_ROWS = 10, 5, 0.2, 200, 100


def test_selected_certificates_are_simultaneously_sound() -> None:
    # ten disjoint pairs (2k, 2k + 1), centres 0 and 1 in d = 1, scale 1: each pair's pure
    # epsilon is exactly |0 - 1| / 1 = 1
    labels = np.arange(2 * N_PAIRS)
    base = EmbeddingSet((labels % 2).astype(float)[:, None], labels, normalize=False)
    mech = LaplaceNoise(base, scale=1.0)
    pairs = [(2 * k, 2 * k + 1) for k in range(N_PAIRS)]
    for a, b in pairs:
        assert mech.is_exact(a, b)
        assert mech.pair_epsilon(a, b) == 1.0
    a_law, b_law = stats.laplace(0.0, 1.0), stats.laplace(1.0, 1.0)

    def certify(es: EmbeddingSet, r: int) -> dict[str, object]:
        cert = ReservedTestCertifier(
            n_candidates=N_PAIRS,
            n_select=N_SELECT,
            n_folds=2,
            alpha=ALPHA,
            rng=30_000 + r,
            progress=False,
        ).fit(es, pairs)
        c = cert.certificates_
        upper, rates = [], []
        for i, clf in enumerate(cert.classifiers_):
            # the fixed test "predict identity_b iff direction * (w x + b) >= direction * t"
            sign = float(c["direction"][i])
            w = sign * float(clf.coef_[0, 0])
            cut = sign * (float(c["threshold"][i]) - float(clf.intercept_[0])) / w
            if w > 0:  # predict b iff x >= cut
                fpr, fnr = a_law.sf(cut), b_law.cdf(cut)
            else:  # predict b iff x <= cut
                fpr, fnr = a_law.cdf(cut), b_law.sf(cut)
            upper += [float(c["ufpr"][i]), float(c["ufnr"][i])]
            rates += [fpr, fnr]
        # one event per run each: some selected certificate above the truth; some of the
        # 2 * N_SELECT bounds below its test's true rate
        return {
            "epsilon": c["epsilon_lb"],
            "rates": Claim(upper, "certified_upper_bound", truth=rates),
        }

    res = check_soundness(
        certify,
        lambda r: sample_embeddings(mech, N_ROWS, rng=r),
        {"epsilon": 1.0},
        n_reps=REPS,
        alpha=ALPHA,
        rng=range(REPS),  # runs seeded 0, 1, ...
        significance=0.01,
    )
    # Both events are covered by the simultaneous guarantee: with probability >= 1 - ALPHA all
    # 2 * N_SELECT = 10 Clopper-Pearson bounds hold (and then no certificate exceeds the
    # truth). Under a rate of exactly 0.2 a count over 200 repetitions has sd
    # sqrt(200 * 0.2 * 0.8) = 5.7 around 40; each test fails if binomtest rejects
    # "rate <= 0.2" at 0.01 (about 54 or more). A certifier that dropped n_select from the
    # divisor uses 0.1 instead of 0.02 per bound and misses far more often.
    assert_sound(res)
    assert res["rates"].n_violations > 0  # the bounds are not vacuous
