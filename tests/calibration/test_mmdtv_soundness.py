"""MMD-TV against a known pure ε: the population bound holds, the sample estimate can overshoot.

Mechanism: ``LaplaceNoise`` on two points of the real line at distance 0.25 with scale 1, so
the pair's pure ε is exactly 0.25 (a point base). Many independent pairs are drawn at once
(every identity gets its own seed) and audited in one batched ``audit_pairs`` call.

Documented overshoot frequencies of the sample estimate (400 pairs per row, this setting;
also in docs/mechanisms.md):

==========  ================  =======================
n per side  MMD-TV > truth    hockey-stick > truth
==========  ================  =======================
10          21.5 %            31 %
30          6.8 %             18 %
100         0.5 %             8.3 %
300         0 %               1.3 %
1000        0 % (20 pairs)    0 % (20 pairs)
==========  ================  =======================
"""

from __future__ import annotations

import numpy as np
import pytest

from idaudit.audits import MMDTVAuditor, audit_pairs
from idaudit.data import EmbeddingSet
from idaudit.mechanisms import LaplaceNoise, sample_embeddings
from idaudit.testing import assert_sound, check_rate
from references import median_mmd

pytestmark = pytest.mark.calibration

TRUE_EPSILON = 0.25


def _audit(n_pairs: int, n: int, seed: int) -> tuple[np.ndarray, np.ndarray, float, list]:
    centres = np.tile([[0.0], [TRUE_EPSILON]], (n_pairs, 1))  # (2 * n_pairs, 1)
    base = EmbeddingSet(centres, np.arange(2 * n_pairs), normalize=False)
    mech = LaplaceNoise(base, scale=1.0)
    truth = mech.pair_epsilon(0, 1)
    pairs = [(2 * r, 2 * r + 1) for r in range(n_pairs)]
    es = sample_embeddings(mech, n, rng=seed)
    ds = audit_pairs(es, pairs, [MMDTVAuditor()], progress=False)
    samples = [(es.get(a), es.get(b)) for a, b in pairs]
    return ds["mmdtv_epsilon"].values, ds["mmdtv_epsilon_hs"].values, truth, samples


@pytest.mark.slow
def test_population_bound_holds_at_large_n() -> None:
    tv, hs, truth, _ = _audit(n_pairs=20, n=1000, seed=1000)
    assert truth == pytest.approx(TRUE_EPSILON)
    # Theorem 1 of seed 000: the population value is below the truth; at n = 1000 the sample
    # estimate's spread (about 0.03 here) is far smaller than the gap, so no pair overshoots
    assert (tv <= truth).all()
    assert (hs <= truth).all()
    # ...and the bound is loose: MMD <= 2 TV gives roughly a third of the truth here
    assert 0.2 * truth < np.median(tv) < 0.6 * truth


def test_sample_estimate_overshoots_at_small_n() -> None:
    tv, hs, truth, samples = _audit(n_pairs=400, n=10, seed=10)
    # independent reference on the same draws: Eq. 7 by plain sums, then Eq. 14 and the
    # hockey-stick map written out
    mmd = np.array([median_mmd(x, y) for x, y in samples])
    np.testing.assert_allclose(tv, np.log((1 + mmd / 2) / (1 - mmd / 2)), rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(hs, 2 * np.arctanh(mmd / np.sqrt(2)), rtol=1e-9, atol=1e-12)
    over = int((tv > truth).sum())
    over_hs = int((hs > truth).sum())
    # The estimate is not a high-probability bound: at n = 10 it exceeds the truth in a fifth
    # of the pairs. The documented rates (module docstring, docs/mechanisms.md) are pinned as a
    # regression check: two-sided binomtest, sd sqrt(400 * 0.215 * 0.785) = 8.2 pairs, so it
    # fails only on a clear change (p < 0.001).
    pinned = {"alternative": "two-sided", "significance": 1e-3}
    assert_sound(
        {
            "MMD-TV > truth": check_rate(over, 400, 0.215, **pinned),
            "hockey-stick > truth": check_rate(over_hs, 400, 0.31, **pinned),
        }
    )
    # the tighter hockey-stick route overshoots at least as often
    assert over_hs >= over > 0
