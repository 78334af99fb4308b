"""Soundness of certified MMD-TV on mechanisms whose truth is known in closed form.

* Gaussian point bases: the population MMD at the bandwidth the certificate chose is known in
  closed form (below), so the sharp event "mmd_lb > population MMD" is counted directly.
* Laplace point bases: the pair's pure ε is known; both certified ε routes must stay below it.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from idaudit import EmbeddingSet, MMDTVAuditor, audit_pairs
from idaudit.mechanisms import GaussianNoise, LaplaceNoise, sample_embeddings
from idaudit.testing import assert_sound, check_claims

pytestmark = pytest.mark.calibration

ALPHA = 0.2  # a large level makes the miss count sensitive to a wrong confidence level
REPS = 200


def _gaussian_mmd(delta: float, s: float, sigma: float, d: int) -> float:
    """Population MMD of N(mu_a, s^2 I) vs N(mu_b, s^2 I), |mu_a - mu_b| = delta, RBF sigma.

    X - X' ~ N(0, 2 s^2 I), X - Y ~ N(mu_a - mu_b, 2 s^2 I), and for Z ~ N(m, v I) in d
    dimensions E exp(-|Z|^2 / 2 sigma^2)
    = (sigma^2 / (sigma^2 + v))^(d/2) exp(-|m|^2 / 2(sigma^2 + v)).
    """
    v = 2 * s**2
    c = (sigma**2 / (sigma**2 + v)) ** (d / 2)
    return math.sqrt(2 * c * (1 - math.exp(-(delta**2) / (2 * (sigma**2 + v)))))


def _replicated(mechanism_cls, centres: np.ndarray, scale: float, n: int, seed: int):
    """REPS independent copies of one identity pair as REPS disjoint pairs of one set.

    Identities 2r and 2r + 1 sit at the two centres, so every pair is the same pair of output
    laws, drawn independently: one ``audit_pairs`` call runs all repetitions (the split of
    each pair uses the same seed, which does not matter: the draws are independent).
    """
    base = EmbeddingSet(np.tile(centres, (REPS, 1)), np.arange(2 * REPS), normalize=False)
    mech = mechanism_cls(base, scale)
    es = sample_embeddings(mech, n, rng=seed)
    return es, [(2 * r, 2 * r + 1) for r in range(REPS)], mech


@pytest.mark.parametrize("bound", ["betting", "mcdiarmid"])
def test_gaussian_mmd_lower_bound_covers_the_population_mmd(bound: str) -> None:
    d, s = 2, 1.0
    es, pairs, _ = _replicated(GaussianNoise, np.array([[0.0, 0.0], [1.5, 0.0]]), s, 80, 1)
    aud = MMDTVAuditor(confidence_level=1 - ALPHA, bound=bound, rng=0)
    ds = audit_pairs(es, pairs, [aud], progress=False)
    truth = np.array([_gaussian_mmd(1.5, s, sig, d) for sig in ds["mmdtv_bandwidth_lb"].values])
    # each pair is one run: its certified MMD lower bound against its population MMD
    res = check_claims(ds["mmdtv_mmd_lb"], truth, alpha=ALPHA, significance=1e-3)
    # If the bound is valid, misses ~ at most Binomial(200, 0.2): mean 40, sd 5.7; binomtest
    # rejects "rate <= 0.2" at 0.001 above about 59. Both bounds are conservative (the witness
    # bound also loses the gap between the empirical witness and the best one), so misses sit
    # near 0; a bound with its sign flipped (an upper bound) misses on every repetition.
    assert_sound(res)
    if bound == "betting":
        assert res.tightness > 0.3  # real power at n = 80 per identity (mean lb / truth)


@pytest.mark.parametrize("bound", ["betting", "bernstein", "mcdiarmid"])
def test_mmd_lower_bound_is_zero_when_the_laws_are_equal(bound: str) -> None:
    # P_A = P_B: the population MMD is exactly 0 at every bandwidth, so every positive bound
    # is a miss (the sharpest event there is; it also covers "bernstein" end to end).
    es, pairs, _ = _replicated(GaussianNoise, np.array([[0.0, 0.0], [0.0, 0.0]]), 1.0, 40, 3)
    aud = MMDTVAuditor(confidence_level=1 - ALPHA, bound=bound, rng=0)
    ds = audit_pairs(es, pairs, [aud], progress=False)
    res = check_claims(ds["mmdtv_mmd_lb"], 0.0, alpha=ALPHA, significance=1e-3)
    # same tolerance as above (rate <= 0.2 over 200 reps; fails above about 59). The plug-in
    # statistic without its confidence correction (the witness mean difference, or the
    # unbiased MMD^2 with no McDiarmid slack) is positive about half the time: ~100 misses.
    assert_sound(res)


def test_laplace_certified_epsilons_stay_below_the_pure_epsilon() -> None:
    es, pairs, mech = _replicated(LaplaceNoise, np.array([[0.0], [1.0]]), 0.5, 100, 2)
    truth = mech.pair_epsilon(0, 1)  # exactly 2 for every pair
    assert mech.is_exact(0, 1)
    assert truth == 2.0
    ds = audit_pairs(es, pairs, [MMDTVAuditor(confidence_level=1 - ALPHA, rng=0)], progress=False)
    # same tolerance as above (rate <= 0.2 over 200 reps; fails above about 59)
    assert_sound(
        {
            name: check_claims(ds[name], truth, alpha=ALPHA, significance=1e-3)
            for name in ("mmdtv_epsilon_lb", "mmdtv_epsilon_hs_lb")
        }
    )
    assert float(ds["mmdtv_epsilon_hs_lb"].mean()) > 0.1  # not vacuous
