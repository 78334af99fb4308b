"""The out-of-fold machinery ROC-HT and the certifier share, against scikit-learn."""

from __future__ import annotations

import numpy as np
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import roc_auc_score
from sklearn.model_selection import StratifiedKFold, cross_val_predict

from idaudit.audits._oof import oof_scores, roc_auc, roc_curve, stratified_folds


def test_folds_are_stratified_kfold_on_a_then_b_rows() -> None:
    y = np.r_[np.zeros(7), np.ones(9)]
    want = StratifiedKFold(3, shuffle=True, random_state=11).split(np.zeros((16, 1)), y)
    got = stratified_folds(7, 9, 3, 11)
    for (tr, te), (wtr, wte) in zip(got, want, strict=True):
        np.testing.assert_array_equal(tr, wtr)
        np.testing.assert_array_equal(te, wte)


def test_oof_scores_equal_cross_val_predict() -> None:
    gen = np.random.default_rng(3)
    a, b = gen.normal(0, 1, (20, 3)), gen.normal(0.7, 1, (24, 3))
    folds = stratified_folds(20, 24, 4, 5)
    got = oof_scores(
        lambda k: LogisticRegression(), a, b, folds, lambda clf, x: clf.decision_function(x)
    )
    want = cross_val_predict(
        LogisticRegression(),
        np.r_[a, b],
        np.r_[np.zeros(20), np.ones(24)],
        cv=folds,
        method="decision_function",
    )
    np.testing.assert_allclose(got, want, rtol=1e-12)
    # the area under the ROC equals scikit-learn's AUC of the same scores
    y = np.r_[np.zeros(20), np.ones(24)]
    np.testing.assert_allclose(roc_auc(*roc_curve(y, got)), roc_auc_score(y, got), rtol=1e-12)
