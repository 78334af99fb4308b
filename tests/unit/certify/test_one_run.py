"""certify_one_run and OneRunCertifier: counts, strategies, statuses, canary bookkeeping."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import special, stats

from idaudit.certify import OneRunCertificate, OneRunCertifier, certify_one_run
from idaudit.data import EmbeddingSet
from idaudit.exceptions import IdauditWarning, InvalidInputError, NotFittedError


def test_given_threshold_counts_guesses_and_right_ones() -> None:
    a = np.array([0.0, 1.0, 2.0, 3.0])
    b = np.array([1.5, 2.5, 3.5, 4.5, 5.5])
    cert = certify_one_run(a, b, thresholds="given", threshold=2.5, alpha=0.1)
    # guesses: scores >= 2.5 -> a: 3.0; b: 2.5, 3.5, 4.5, 5.5 -> r = 5, v = 4, m = 9
    assert (cert.n_canaries, cert.n_guesses, cert.n_correct) == (9, 5, 4)
    # δ = 0: logit of the Clopper–Pearson lower bound on the precision 4/5 at 0.1
    q = stats.beta.ppf(0.1, 4, 2)
    assert cert.epsilon_lb_ == pytest.approx(max(0.0, special.logit(q)), rel=1e-12)


def test_bonferroni_pays_for_every_canary() -> None:
    gen = np.random.default_rng(1)
    coin = gen.random(400) < 0.5
    s = gen.normal(2.0 * coin, 1.0)
    cert = certify_one_run(s[~coin], s[coin], alpha=0.05)
    assert cert.n_candidates == 400
    # the reported threshold, certified alone at alpha / 400, gives the same bound
    alone = certify_one_run(
        s[~coin], s[coin], alpha=0.05 / 400, thresholds="given", threshold=cert.threshold
    )
    assert alone.epsilon_lb_ == pytest.approx(cert.epsilon_lb_, rel=1e-12)
    assert cert.epsilon_lb_ > 0


def test_split_certifies_only_the_held_out_canaries() -> None:
    gen = np.random.default_rng(2)
    coin = gen.random(600) < 0.5
    s = gen.normal(3.0 * coin, 1.0)
    cert = certify_one_run(s[~coin], s[coin], thresholds="split", rng=0)
    assert cert.n_canaries == cert.n_a + cert.n_b == 600 - 300  # one cut of the pooled 600
    assert cert.n_candidates == 1
    again = certify_one_run(s[~coin], s[coin], thresholds="split", rng=0)
    assert again.epsilon_lb_ == cert.epsilon_lb_ > 0  # seeded


def test_split_refuses_by_the_number_of_canaries_never_by_the_coins() -> None:
    # two canaries split in half: one chooses, one is certified, whichever coins they had
    for a, b in (([0.0], [1.0]), ([0.0, 1.0], []), ([], [0.0, 1.0])):
        cert = certify_one_run(a, b, thresholds="split", rng=0)
        assert cert.n_canaries == 1
    for a, b in (([0.0], []), ([], [1.0])):
        with pytest.raises(InvalidInputError, match="leaves no canary on one side"):
            certify_one_run(a, b, thresholds="split", rng=0)


@pytest.mark.calibration
def test_split_keeps_the_evaluation_coins_fair() -> None:
    # Randomised response: canary i's output names its coin with probability q = 0.9, so
    # whatever the split, a "b" guess on an evaluation canary is right with probability
    # exactly q if the evaluation coins are independent fair coins given the partition.
    # Splitting each class apart at m = 3 reveals how many evaluation coins chose b (up to
    # one) and the guesses' precision rises to 0.95. 3000 reps, each threshold-1 run
    # contributing ~1 guess: ~1500 guesses, sd of the precision sqrt(0.09 / 1500) = 0.008;
    # two-sided binomtest at 1e-3 tolerates ~0.025 around q, and 0.95 is 6 sd away.
    gen = np.random.default_rng(38)
    q, m, guesses, right = 0.9, 3, 0, 0
    for rep in range(3000):
        coin = gen.random(m) < 0.5
        says_b = np.where(gen.random(m) < q, coin, ~coin).astype(float)
        cert = certify_one_run(says_b[~coin], says_b[coin], thresholds="split", rng=rep)
        if cert.threshold == 1.0:  # chosen on the selection canary alone
            guesses += cert.n_guesses
            right += cert.n_correct
    assert guesses > 1000
    assert stats.binomtest(right, guesses, q).pvalue > 1e-3, f"{right}/{guesses} right"


def test_statuses_and_dataset() -> None:
    cert = certify_one_run([0.0, 0.1, 0.2], [5.0, 6.0, 7.0], thresholds="given", threshold=1.0)
    assert isinstance(cert, OneRunCertificate)
    ds = cert.to_xarray()
    # a given threshold at delta = 0: the pure-DP theorem conditions on the guesses made
    assert ds["epsilon_lb"].attrs["status"] == "certified_lower_bound"
    assert "assumption" not in ds["epsilon_lb"].attrs
    # the f-DP bound assumes r fixed before the run: on the observed count it is an estimate
    assert ds["mu_lb"].attrs["status"] == "sample_estimate"
    assert "fixes it before the run" in ds["mu_lb"].attrs["assumption"]
    assert ds["epsilon_gdp"].attrs["status"] == "sample_estimate"
    assert "certified_lower_bound" in repr(cert)
    # at delta > 0 the epsilon bound of a given threshold rests on the same reading
    leaky = certify_one_run(
        [0.0, 0.1, 0.2], [5.0, 6.0, 7.0], thresholds="given", threshold=1.0, delta=1e-3
    )
    assert leaky.status == "sample_estimate"
    assert leaky.to_xarray()["epsilon_lb"].attrs["status"] == "sample_estimate"
    # a union over fixed-count attacks needs no reading: both bounds certified at every delta
    union = certify_one_run([0.0, 0.1, 0.2], [5.0, 6.0, 7.0], delta=1e-3).to_xarray()
    assert union["epsilon_lb"].attrs["status"] == "certified_lower_bound"
    assert union["mu_lb"].attrs["status"] == "certified_lower_bound"


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"thresholds": "given"}, '`threshold` is required when thresholds="given"'),
        ({"threshold": 1.0}, "`threshold` is only used with"),
        ({"thresholds": "band"}, "`thresholds` must be one of"),
        ({"alpha": 0.0}, "`alpha`"),
        ({"delta": 1.0}, "`delta`"),
        ({"thresholds": "given", "threshold": "x"}, "`threshold` must hold real numbers"),
    ],
)
def test_bad_options_are_refused(kwargs: dict, match: str) -> None:
    with pytest.raises(InvalidInputError, match=match):
        certify_one_run([0.0, 1.0], [2.0, 3.0], **kwargs)


def test_bad_scores_are_refused() -> None:
    with pytest.raises(InvalidInputError, match="`scores_b` must not contain NaN; got 1"):
        certify_one_run([0.0], [np.nan])
    with pytest.raises(InvalidInputError, match="at least one canary"):
        certify_one_run([], [])
    with pytest.raises(InvalidInputError, match="must be a 1-D array"):
        certify_one_run([[0.0]], [1.0])


def _two_clusters(n_id: int, rows: int, spread: float, seed: int) -> EmbeddingSet:
    gen = np.random.default_rng(seed)
    centres = gen.normal(0, 1, (n_id, 6))
    x = np.repeat(centres, rows, axis=0) + gen.normal(0, spread, (n_id * rows, 6))
    return EmbeddingSet(x, np.repeat(np.arange(n_id), rows), normalize=False)


def test_certifier_uses_each_row_at_most_once() -> None:
    es = _two_clusters(6, 20, 0.5, 0)
    # identity 0 is in three pairs: its 10 reserved rows are shared 3 + 3 + 3
    pairs = [(0, 1), (0, 2), (0, 3), (4, 5)]
    cert = OneRunCertifier(progress=False).fit(es, pairs)
    per_pair = cert.canaries_.groupby("identity_b").count()["coin"].to_series().to_dict()
    assert per_pair == {1: 3, 2: 3, 3: 3, 5: 10}
    assert cert.certificate_.n_canaries == 19
    assert cert.epsilon_lb_ == cert.certificate_.epsilon_lb_ > 0


def test_certifier_finds_nothing_between_copies_of_one_identity() -> None:
    gen = np.random.default_rng(3)
    x = gen.normal(0, 1, (400, 6))  # ten "identities" drawn from one distribution: ε = 0
    es = EmbeddingSet(x, np.repeat(np.arange(10), 40), normalize=False)
    pairs = [(2 * i, 2 * i + 1) for i in range(5)]
    cert = OneRunCertifier(progress=False, rng=1).fit(es, pairs)
    assert cert.epsilon_lb_ < 0.5


def test_certifier_counts_failures_as_outputs() -> None:
    es = _two_clusters(4, 20, 0.5, 4)
    x = es.embeddings.copy()
    x[::7] = np.nan  # failed rows: one atom among the outputs
    with pytest.warns(IdauditWarning):
        failed = EmbeddingSet(x, es.labels, normalize=False)
    cert = OneRunCertifier(progress=False).fit(failed, [(0, 1), (2, 3)])
    assert cert.certificate_.n_canaries == 20  # 10 reserved outputs per identity, failures too


def test_certifier_is_not_fitted_before_fit() -> None:
    with pytest.raises(NotFittedError, match="fit"):
        _ = OneRunCertifier().epsilon_lb_
    with pytest.raises(TypeError, match=r"`es` must be an idaudit\.EmbeddingSet"):
        OneRunCertifier().fit(np.zeros((4, 2)), [(0, 1)])
