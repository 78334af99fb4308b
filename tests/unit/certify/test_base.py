"""The helpers the two certifiers share (idaudit.certify._base)."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import roc_auc_score
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.tree import DecisionTreeClassifier

from idaudit.certify import ReservedTestCertifier, SequentialCertifier
from idaudit.certify._base import (
    BaseCertifier,
    auc,
    fit_classifier,
    make_classifier,
    score,
    seeded,
    threshold_cuts,
)


@pytest.mark.parametrize("seed", range(20))
def test_auc_equals_scikit_learn_roc_auc_score_with_ties(seed: int) -> None:
    gen = np.random.default_rng(seed)
    n_a, n_b = gen.integers(1, 40, size=2)
    # scores on a coarse grid, so ties within and across the two samples are common
    ua = gen.integers(0, 6, size=n_a).astype(float)
    ub = gen.integers(2, 8, size=n_b).astype(float)
    y = np.r_[np.zeros(n_a), np.ones(n_b)]
    want = roc_auc_score(y, np.r_[ua, ub])
    np.testing.assert_allclose(auc(ua, ub), want, rtol=1e-12)  # two float summation orders
    # and it is exactly the pairwise Mann-Whitney count the sequential certifier used
    diff = ub[:, None] - ua[None, :]
    pairwise = float(((diff > 0).sum() + 0.5 * (diff == 0).sum()) / diff.size)
    assert auc(ua, ub) == pairwise


def test_threshold_cuts_count_the_errors_of_every_cut() -> None:
    gen = np.random.default_rng(1)
    sa, sb = gen.integers(0, 5, size=13).astype(float), gen.integers(1, 7, size=9).astype(float)
    cuts = list(threshold_cuts(sa, sb))
    assert [c.direction for c in cuts] == [1.0, -1.0]
    for c in cuts:
        for i in range(len(c.fp)):
            tau = c.threshold(i)  # a midpoint: no score sits on it
            assert c.values[i] < tau < c.values[i + 1]
            assert c.fp[i] == np.count_nonzero(c.direction * sa >= tau)
            assert c.tp[i] == np.count_nonzero(c.direction * sb >= tau)
            assert c.youden[i] == c.tp[i] / len(sb) - c.fp[i] / len(sa)
    assert list(threshold_cuts(np.ones(3), np.ones(4))) == []  # nothing to separate


def test_seeded_sets_every_random_state_and_fits_score_rows() -> None:
    base = make_pipeline(StandardScaler(), DecisionTreeClassifier())
    clf = seeded(base, 2**32 + 7)
    assert clf.get_params()["decisiontreeclassifier__random_state"] == 7
    assert base.get_params()["decisiontreeclassifier__random_state"] is None  # a clone
    gen = np.random.default_rng(0)
    xa, xb = gen.normal(0, 1, (20, 2)), gen.normal(2, 1, (20, 2))
    fitted = fit_classifier(make_classifier("logistic"), xa, xb, 0)
    assert isinstance(fitted, LogisticRegression)
    assert score(fitted, xb).shape == (20,)
    assert score(fitted, xb).mean() > score(fitted, xa).mean()
    proba = fit_classifier(base, xa, xb, 0)  # no decision_function: P(label 1)
    assert score(proba, xa).shape == (20,)


def test_both_certifiers_share_the_base() -> None:
    for cls in (ReservedTestCertifier, SequentialCertifier):
        assert issubclass(cls, BaseCertifier)
        assert cls.status == "certified_lower_bound"
        assert cls._parameter_constraints["classifier"].check("logistic", "classifier")
