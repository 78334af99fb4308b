"""A downstream project's tests of its own certificate and anonymiser, with idaudit's harness.

Copy this file to ``tests/test_my_anonymiser.py`` in your project and run ``pytest``: the
fixtures ``idaudit_rng``, ``idaudit_reps`` and ``known_mechanism`` and the ``calibration``
marker come from idaudit's pytest plugin, which pytest loads by itself once idaudit is
installed. ``pytest --idaudit-reps-scale 0.25`` is a quick run, ``4`` a paper run.

What it checks:

1. ``my_certificate`` (the project's own certified bound on a threshold test's two error
   rates) is sound on a mechanism whose error rates are known exactly;
2. ``MyAnonymiser`` is audited, and the certified ε stays below the ε it claims;
3. idaudit's certifier, which the audit relies on, is sound on mechanisms with a proved ε.
"""

from __future__ import annotations

import numpy as np
import pytest

from idaudit.certify import ReservedTestCertifier
from idaudit.data import EmbeddingSet
from idaudit.dp import clopper_pearson_upper, epsilon_from_error_rates
from idaudit.exceptions import UnsupportedStatementError
from idaudit.testing import (
    Claim,
    assert_epsilon_below,
    assert_private,
    assert_sound,
    check_soundness,
    gaussian_scores,
)

ALPHA = 0.2  # a large level makes the violation count sensitive to a wrong confidence level


def my_certificate(
    scores_a: np.ndarray, scores_b: np.ndarray, threshold: float, alpha: float
) -> tuple[float, float, float]:
    """Certified upper bounds on the two error rates of "say B when score >= threshold".

    Both bounds must hold together with probability 1 - alpha, so each is a one-sided
    Clopper-Pearson bound at alpha / 2 (the union bound). Returns (FPR_u, FNR_u, ε lower
    bound).
    """
    fp = int(np.sum(scores_a >= threshold))
    fn = int(np.sum(scores_b < threshold))
    fpr_u = float(clopper_pearson_upper(fp, len(scores_a), alpha / 2))
    fnr_u = float(clopper_pearson_upper(fn, len(scores_b), alpha / 2))
    return fpr_u, fnr_u, float(epsilon_from_error_rates(fpr_u, fnr_u))


class MyAnonymiser:
    """The project's mechanism: Laplace noise of scale 1 / epsilon on a 1-D identity code.

    Identity codes lie in [0, 1], so every pair of identities is epsilon-DP (L1 sensitivity 1).
    """

    def __init__(self, epsilon: float) -> None:
        self.epsilon = epsilon

    def outputs(self, codes: dict[str, float], n: int, rng: np.random.Generator) -> EmbeddingSet:
        """``n`` anonymised outputs per identity, as idaudit's audits read them."""
        rows = [code + rng.laplace(0.0, 1.0 / self.epsilon, size=(n, 1)) for code in codes.values()]
        labels = np.repeat(list(codes), n)
        return EmbeddingSet(np.vstack(rows), labels, normalize=False)


@pytest.mark.calibration
def test_my_certificate_is_sound(idaudit_reps) -> None:
    # N(0, 1) vs N(1, 1) scores: the true error rates of every threshold test are closed form
    mech = gaussian_scores(1.0)
    t = mech.threshold

    def certify(scores: tuple[np.ndarray, np.ndarray], seed: int) -> Claim:
        fpr_u, fnr_u, _ = my_certificate(*scores, t, ALPHA)
        return Claim([fpr_u, fnr_u], "certified_upper_bound", truth=[mech.fpr(t), mech.fnr(t)])

    # one event per run: either bound below its true rate. 300 runs: a sound certificate
    # misses in at most 20 % of them (mean <= 60, sd 6.9); the check fails when the exact
    # binomial test rejects "rate <= 0.2" at 0.01 (about 77 misses or more). Without the
    # union bound the pair misses about a third of the time (about 100) and fails.
    res = check_soundness(
        certify,
        lambda seed: mech.sample(np.random.default_rng(seed), 100),
        n_reps=idaudit_reps(300),
        alpha=ALPHA,
    )
    assert_sound(res)


@pytest.mark.calibration
def test_the_audit_certifies_no_epsilon_above_the_claim(idaudit_rng) -> None:
    anonymiser = MyAnonymiser(epsilon=1.0)
    # the two most distant identity codes: the audit's best chance to see the claimed epsilon
    es = anonymiser.outputs({"alice": 0.0, "bob": 1.0}, 300, idaudit_rng)
    cert = ReservedTestCertifier(
        n_select=1, n_candidates=1, alpha=0.05, rng=idaudit_rng, progress=False
    ).fit(es, [("alice", "bob")])
    # the sentence a benchmark can cite: with 95 % confidence the audit certified no epsilon
    # above the claimed 1.0 (a lower bound: it cannot say that the anonymiser is 1-DP)
    assert_epsilon_below(cert, anonymiser.epsilon)
    with pytest.raises(UnsupportedStatementError):
        assert_private(cert, anonymiser.epsilon)


@pytest.mark.calibration
def test_the_certifier_is_sound_on_known_mechanisms(known_mechanism, idaudit_reps) -> None:
    # Laplace: pure epsilon exactly 1; Gaussian (sigma = 1 at distance 1): epsilon(0.05) exact
    delta = 0.0 if known_mechanism.kind == "laplace" else 0.05

    def certify(es: EmbeddingSet, seed: int) -> ReservedTestCertifier:
        return ReservedTestCertifier(
            n_select=1, n_candidates=1, alpha=ALPHA, delta=delta, rng=seed, progress=False
        ).fit(es, [known_mechanism.pair])

    # 100 runs at alpha = 0.2: mean <= 20, sd 4; fails from about 31 certificates above the truth
    res = check_soundness(
        certify,
        lambda seed: known_mechanism.draw(200, rng=seed),
        known_mechanism.epsilon(delta),
        n_reps=idaudit_reps(100),
        alpha=ALPHA,
    )
    assert_sound(res)
    assert res.tightness > 0.1  # the certificates have power
