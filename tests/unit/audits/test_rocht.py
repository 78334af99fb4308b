"""Tests of ROCHTAuditor against scikit-learn (folds, logistic regression, ROC, AUC)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from scipy.special import logit
from sklearn.ensemble import RandomForestClassifier
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import roc_auc_score
from sklearn.metrics import roc_curve as sk_roc_curve
from sklearn.model_selection import StratifiedKFold

from idaudit import InvalidInputError, ROCHTAuditor
from idaudit.audits._oof import roc_curve
from idaudit.audits._rocht import logistic_oof_logits


def sklearn_oof(
    a: np.ndarray, b: np.ndarray, seed: int, classifier: str = "logistic"
) -> tuple[np.ndarray, np.ndarray]:
    x = np.r_[a, b]
    y = np.r_[np.zeros(len(a)), np.ones(len(b))]
    oof = np.empty(len(y))
    for tr, te in StratifiedKFold(5, shuffle=True, random_state=seed).split(x, y):
        if classifier == "logistic":
            # tol tiny: the exact optimum the batched Newton solver reaches
            clf = LogisticRegression(C=1.0, tol=1e-12, max_iter=10_000)
        else:
            clf = RandomForestClassifier(n_estimators=10, random_state=seed)
        oof[te] = clf.fit(x[tr], y[tr]).predict_proba(x[te])[:, 1]
    return y, oof


def eq15(fpr: np.ndarray, tpr: np.ndarray) -> float:
    """Eq. 15 written out, inf at the zero-denominator endpoints."""
    best = 0.0
    for f, t in zip(fpr, tpr, strict=True):
        if t > 0:
            best = max(best, np.inf if f == 0 else np.log(t / f))
        if f < 1:
            best = max(best, np.inf if t == 1 else np.log((1 - f) / (1 - t)))
    return best


@pytest.fixture
def overlap() -> tuple[np.ndarray, np.ndarray]:
    gen = np.random.default_rng(3)
    a, b = gen.normal(size=(30, 10)), gen.normal(0.25, 1.0, size=(26, 10))
    return a / np.linalg.norm(a, axis=1, keepdims=True), b / np.linalg.norm(
        b, axis=1, keepdims=True
    )


def test_matches_sklearn_pipeline(overlap: tuple) -> None:
    a, b = overlap
    aud = ROCHTAuditor(rng=0).fit(a, b)
    y, oof = sklearn_oof(a, b, aud.seed_ % 2**32)
    # probabilities agree to ~1e-7 (sklearn's stopping rule), far below the score gaps here
    np.testing.assert_allclose(aud.oof_scores_, oof, atol=1e-6)
    fpr, tpr, _ = sk_roc_curve(y, oof)
    np.testing.assert_array_equal(aud.fpr_, fpr)
    np.testing.assert_array_equal(aud.tpr_, tpr)
    assert aud.auc_ == pytest.approx(roc_auc_score(y, oof), abs=1e-12)
    assert aud.epsilon_ == eq15(fpr, tpr)
    # like almost every empirical ROC, this one has an endpoint with a zero denominator
    assert aud.tv_ == pytest.approx(np.max(tpr - fpr))
    assert aud.corner_ is False
    assert aud.status == "diagnostic"


@pytest.mark.parametrize(
    ("scale", "offset", "dim"),
    [(1000.0, 0.0, 20), (1.0, 1e4, 1)],
    ids=["large-norm-20d", "far-offset-1d"],
)
def test_unnormalised_inputs_match_a_centred_sklearn_fit(
    scale: float, offset: float, dim: int
) -> None:
    # Large norms broke the float32 Newton systems (NaN scores read as a perfect separation).
    # The unpenalised intercept makes the optimum shift-invariant, so sklearn on centred data
    # is an exact reference; raw lbfgs itself stalls on the offset case.
    gen = np.random.default_rng(8)
    a = offset + scale * gen.normal(size=(60, dim))
    b = offset + scale * gen.normal(0.3, 1.0, size=(60, dim))
    aud = ROCHTAuditor(rng=0).fit(a, b)
    centre = np.r_[a, b].mean(axis=0)
    y, oof = sklearn_oof(a - centre, b - centre, aud.seed_ % 2**32)
    assert np.all(np.isfinite(aud.oof_scores_))
    assert aud.auc_ == pytest.approx(roc_auc_score(y, oof), abs=1e-12)
    assert aud.corner_ is False


def test_roc_curve_rejects_non_finite_scores() -> None:
    with pytest.raises(InvalidInputError, match="score must be finite; got 1 non-finite"):
        roc_curve([0, 1, 1], [0.1, np.nan, 0.3])


def test_separated_identities_give_inf_and_corner() -> None:
    gen = np.random.default_rng(0)
    a, b = gen.normal(size=(20, 5)) + 5.0, gen.normal(size=(20, 5)) - 5.0
    aud = ROCHTAuditor(rng=1).fit(a, b)
    assert aud.epsilon_ == np.inf  # never clipped
    assert aud.corner_ is True
    assert aud.auc_ == 1.0
    assert aud.tv_ == 1.0


def test_random_forest_matches_sklearn(overlap: tuple) -> None:
    a, b = overlap
    aud = ROCHTAuditor(classifier="random_forest", n_estimators=10, rng=2).fit(a, b)
    y, oof = sklearn_oof(a, b, aud.seed_ % 2**32, classifier="random_forest")
    np.testing.assert_array_equal(aud.oof_scores_, oof)
    assert aud.auc_ == pytest.approx(roc_auc_score(y, oof), abs=1e-12)
    assert aud.label == "rocht_rf"


def test_roc_curve_matches_sklearn_with_ties() -> None:
    gen = np.random.default_rng(5)
    for _ in range(20):
        y = gen.integers(0, 2, size=40)
        y[:2] = [0, 1]
        score = gen.integers(0, 6, size=40) / 5.0  # many ties
        fpr, tpr, _ = sk_roc_curve(y, score)
        got_fpr, got_tpr = roc_curve(y, score)
        np.testing.assert_array_equal(got_fpr, fpr)
        np.testing.assert_array_equal(got_tpr, tpr)


def test_too_few_rows_for_the_folds() -> None:
    gen = np.random.default_rng(0)
    with pytest.raises(InvalidInputError, match="`emb_b` must have at least 5 rows; got 4"):
        ROCHTAuditor().fit(gen.normal(size=(8, 3)), gen.normal(size=(4, 3)))


@pytest.mark.parametrize(
    ("params", "error", "match"),
    [
        ({"n_folds": 1}, InvalidInputError, "`n_folds` must be >= 2; got 1"),
        ({"classifier": "svm"}, InvalidInputError, "`classifier` must be one of 'logistic'"),
        ({"C": 0.0}, InvalidInputError, "`C` must be a finite number > 0; got 0.0"),
        ({"n_estimators": 0}, InvalidInputError, "`n_estimators` must be >= 1; got 0"),
        ({"rng": -1}, InvalidInputError, "`rng` must be a non-negative integer seed"),
    ],
)
def test_bad_parameters(params: dict, error: type, match: str) -> None:
    gen = np.random.default_rng(0)
    with pytest.raises(error, match=match):
        ROCHTAuditor(**params).fit(gen.normal(size=(10, 2)), gen.normal(size=(10, 2)))


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


def overlapping_identities(n_id: int, n_rows: int, dim: int, seed: int) -> list[np.ndarray]:
    """L2-normalised identities shaped like seed 000's (§4.1): centre + isotropic noise.

    The centres go from almost one shared direction to nearly independent ones, so the pairs
    range from heavy overlap (AUC ~0.7) to near separation (AUC ~1).
    """
    gen = np.random.default_rng(seed)
    shared = gen.normal(size=dim)
    centres = shared + np.linspace(0.05, 1.0, n_id)[:, None] * gen.normal(size=(n_id, dim))
    centres /= np.linalg.norm(centres, axis=1, keepdims=True)
    rows = [c + gen.normal(scale=1.6 / np.sqrt(dim), size=(n_rows, dim)) for c in centres]
    return [x / np.linalg.norm(x, axis=1, keepdims=True) for x in rows]


def test_auc_equals_converged_scikit_learn_on_overlapping_identities() -> None:
    ids = overlapping_identities(n_id=7, n_rows=60, dim=64, seed=2024)
    deltas, gaps, aucs = [], [], []
    for i, j in itertools.combinations(range(len(ids)), 2):  # 21 pairs
        a, b = ids[i], ids[j]
        # idaudit at its own tolerance (gradient norm 1e-10); a miss would warn, and
        # IdauditWarning is an error under pytest
        aud = ROCHTAuditor(rng=0).fit(a, b)
        x, y = np.r_[a, b], np.r_[np.zeros(len(a)), np.ones(len(b))]
        ref = np.empty(len(y))
        for tr, te in StratifiedKFold(5, shuffle=True, random_state=aud.seed_ % 2**32).split(x, y):
            clf = LogisticRegression(C=1.0, tol=1e-10, max_iter=100_000).fit(x[tr], y[tr])
            ref[te] = clf.decision_function(x[te])
        deltas.append(abs(aud.auc_ - roc_auc_score(y, ref)))
        gaps.append(float(np.abs(logit(aud.oof_scores_) - ref).max()))
        aucs.append(aud.auc_)
    assert min(aucs) < 0.8  # the comparison covers pairs far from AUC = 1
    # AUC moves in steps of 1 / (n_a n_b) = 2.8e-4, one per A-B pair of held-out scores
    # that swap order, so 1e-6 asks for identical rankings. Both fits sit within ~6e-7 of
    # the optimum in the logits here (lbfgs at tol 1e-10; idaudit ~1e-11), below the
    # smallest A-B score gap of these pairs (4e-6). Default lbfgs (tol 1e-4, gradient norm
    # ~1e-2) misses by up to ~1e-3.
    assert max(deltas) <= 1e-6, f"max |AUC - AUC_sklearn| {max(deltas):.2e}"
    # the logits themselves: lbfgs' own distance to the optimum (<= 6e-7 here) with margin;
    # a solver stopped at gradient norm 1e-4 is ~1e-5 off
    assert max(gaps) <= 2e-6, f"max |logit - logit_sklearn| {max(gaps):.2e}"
