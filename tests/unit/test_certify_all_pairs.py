"""ReservedTestCertifier(n_candidates="all"): every pair scored by the batched logistic path."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import StratifiedKFold

from idaudit import EmbeddingSet, InvalidInputError, ReservedTestCertifier
from idaudit.audits import logistic_oof_logits
from idaudit.data import all_pairs


@pytest.fixture(scope="module")
def es() -> EmbeddingSet:
    gen = np.random.default_rng(0)
    sizes = gen.integers(30, 41, size=10)
    rows = [gen.normal(size=(n, 8)) + 0.45 * np.eye(8)[k % 8] for k, n in enumerate(sizes)]
    labels = [f"id{k}" for k, n in enumerate(sizes) for _ in range(n)]
    return EmbeddingSet(np.vstack(rows), labels)


def test_batched_oof_logits_equal_scikit_learn() -> None:
    gen = np.random.default_rng(1)
    pairs = [(gen.normal(0, 1, (20 + k, 4)), gen.normal(0.6, 1, (23 - k, 4))) for k in range(3)]
    seeds = [5, 6, 7]
    got = logistic_oof_logits(pairs, seeds, n_folds=4)
    for (a, b), seed, logits in zip(pairs, seeds, got, strict=True):
        x, y = np.vstack([a, b]), np.r_[np.zeros(len(a)), np.ones(len(b))]
        want = np.empty(len(y))
        for tr, te in StratifiedKFold(4, shuffle=True, random_state=seed).split(x, y):
            clf = LogisticRegression(C=1.0, max_iter=10_000, tol=1e-12).fit(x[tr], y[tr])
            want[te] = clf.decision_function(x[te])
        # scikit-learn's lbfgs stops at its gradient tolerance; the batched Newton solve
        # reaches the optimum to 1e-10, so they agree to lbfgs' accuracy
        np.testing.assert_allclose(logits, want, atol=1e-5)


def test_all_candidates_select_as_the_pair_by_pair_path(es: EmbeddingSet) -> None:
    every = ReservedTestCertifier(n_candidates="all", n_select=3, progress=False).fit(es)
    listed = ReservedTestCertifier(n_candidates=45, n_select=3, progress=False).fit(
        es, all_pairs(es.identities)
    )
    assert every.candidates_.sizes["pair"] == 45
    got, want = every.certificates_, listed.certificates_
    np.testing.assert_array_equal(got["identity_a"], want["identity_a"])
    np.testing.assert_array_equal(got["identity_b"], want["identity_b"])
    np.testing.assert_array_equal(got["test_fp"], want["test_fp"])
    np.testing.assert_array_equal(got["test_fn"], want["test_fn"])
    np.testing.assert_allclose(got["epsilon_lb"], want["epsilon_lb"], rtol=1e-12)
    # thresholds are midpoints of development logits, which lbfgs gets to ~1e-3 here
    np.testing.assert_allclose(got["threshold"], want["threshold"], atol=5e-3)
    assert got.attrs["candidate_pairs"] == "all"
    assert got["epsilon_lb"].attrs["status"] == "certified_lower_bound"


def test_all_candidates_errors(es: EmbeddingSet) -> None:
    with pytest.raises(InvalidInputError, match="`pairs` must be None with n_candidates='all'"):
        ReservedTestCertifier(n_candidates="all", progress=False).fit(es, [("id0", "id1")])
    with pytest.raises(InvalidInputError, match="`classifier` must be 'logistic'"):
        ReservedTestCertifier(n_candidates="all", classifier="random_forest", progress=False).fit(
            es
        )
    with pytest.raises(InvalidInputError, match="`n_candidates` must be 'all' or an integer >= 1"):
        ReservedTestCertifier(n_candidates="every", progress=False).fit(es)
