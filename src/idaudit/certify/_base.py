"""What the two certifiers share: the classifier, its seeded fits and scores, AUC, the cuts.

:class:`~idaudit.certify.ReservedTestCertifier` and :class:`~idaudit.certify.SequentialCertifier`
both fix a test per pair on development data: out-of-fold scores of a seeded classifier
(:func:`oof_scores`), every cut between consecutive development scores in both directions
(:func:`threshold_cuts`), a refit on all development rows (:func:`fit_classifier`). How a cut
is chosen differs (the expected Clopper–Pearson bound at the reserved test sizes, or the
expected anytime bound over planned sample sizes), so each certifier keeps its own ``_plan``.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import numpy.typing as npt
from scipy import stats
from sklearn.base import BaseEstimator, clone
from sklearn.ensemble import RandomForestClassifier
from sklearn.linear_model import LogisticRegression

from idaudit._results import Status
from idaudit._validation import Constraint, validate_params
from idaudit.audits._base import StatusEstimator
from idaudit.audits._oof import oof_scores, stratified_folds

__all__ = [
    "CLASSIFIERS",
    "BaseCertifier",
    "Cuts",
    "auc",
    "fit_classifier",
    "make_classifier",
    "oof_scores_of",
    "score",
    "seeded",
    "threshold_cuts",
]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

#: The classifiers a certifier knows by name.
CLASSIFIERS = ("logistic", "random_forest")


class BaseCertifier(StatusEstimator, BaseEstimator):  # type: ignore[misc]
    """What the certifiers share: their status, parameter checks and fitted-state reset.

    A subclass declares ``_parameter_constraints``, ``_fitted`` and ``_fit_call`` (see
    :class:`~idaudit.audits.StatusEstimator`) and ``_fitted_names``, every attribute ``fit``
    sets; it has a ``classifier`` parameter (one of :data:`CLASSIFIERS` or an estimator).
    """

    status: ClassVar[Status] = "certified_lower_bound"
    _parameter_constraints: ClassVar[dict[str, Constraint]]
    _fitted_names: ClassVar[tuple[str, ...]]

    def _forget(self) -> None:
        """Drop every fitted attribute, so a failed ``fit`` leaves none behind."""
        for name in self._fitted_names:
            self.__dict__.pop(name, None)

    def _checked_params(self) -> dict[str, Any]:
        """Every parameter checked against its declared constraint (at ``fit``)."""
        return validate_params(self.get_params(deep=False), self._parameter_constraints)


def make_classifier(clf: Any) -> Any:
    """Return the unfitted classifier ``clf`` names (one of :data:`CLASSIFIERS`) or is.

    ``"logistic"``: ``LogisticRegression(C=1.0, solver="lbfgs", max_iter=1000)`` (seed 000's,
    and ROC-HT's); ``"random_forest"``: ``RandomForestClassifier`` with 100 trees; an
    estimator (checked by :class:`idaudit._validation.Classifier`) is returned as is.
    """
    if isinstance(clf, str):
        if clf == "logistic":
            return LogisticRegression(C=1.0, solver="lbfgs", max_iter=1000)
        if clf == "random_forest":
            return RandomForestClassifier(n_estimators=100)
        raise ValueError(f"unknown classifier name {clf!r}")  # the constraint refused it before
    return clf


def seeded(base: Any, seed: int) -> Any:
    """Clone ``base`` and set every ``random_state`` parameter, at any depth, to ``seed``."""
    clf = clone(base)
    keys = [
        key
        for key in clf.get_params(deep=True)
        if key == "random_state" or key.endswith("__random_state")
    ]
    if keys:
        clf.set_params(**dict.fromkeys(keys, seed % 2**32))
    return clf


def fit_classifier(base: Any, xa: FloatArray, xb: FloatArray, seed: int) -> Any:
    """Fit a seeded clone of ``base`` on ``xa`` (label 0) against ``xb`` (label 1)."""
    clf = seeded(base, seed)
    x = np.concatenate([xa, xb])  # (n_a + n_b, d)
    y = np.r_[np.zeros(len(xa), dtype=np.int64), np.ones(len(xb), dtype=np.int64)]
    return clf.fit(x, y)


def score(clf: Any, x: FloatArray) -> FloatArray:
    """Scores of the rows ``x``: ``decision_function`` if ``clf`` has one, else P(label 1)."""
    if hasattr(clf, "decision_function"):
        s = np.asarray(clf.decision_function(x), dtype=np.float64)
    else:
        s = np.asarray(clf.predict_proba(x), dtype=np.float64)[:, 1]
    return s.reshape(-1)  # (n,)


def oof_scores_of(base: Any, xa: FloatArray, xb: FloatArray, n_folds: int, seed: int) -> FloatArray:
    """Out-of-fold scores of the pooled development rows, a-rows first (fold k seeded seed + k)."""
    folds = stratified_folds(len(xa), len(xb), n_folds, seed % 2**32)
    return oof_scores(lambda k: seeded(base, seed + k), xa, xb, folds, score)


def auc(ua: FloatArray, ub: FloatArray) -> float:
    r"""ROC AUC of scores ``ub`` (positives) against ``ua``: the Mann–Whitney statistic, ties 1/2.

    From average ranks, :math:`(R_b - n_b(n_b + 1)/2) / (n_a n_b)`, in :math:`O(n \log n)`.
    """
    ranks = stats.rankdata(np.concatenate([ua, ub]))  # (n_a + n_b,) average ranks
    n_a, n_b = len(ua), len(ub)
    return float((ranks[n_a:].sum() - n_b * (n_b + 1) / 2.0) / (n_a * n_b))


@dataclass(frozen=True)
class Cuts:
    """The development error counts of every cut in one score direction.

    Cut ``i`` predicts identity_b iff ``direction * score >= values[i + 1]``; its threshold is
    the midpoint :meth:`threshold` between consecutive development scores.
    """

    direction: float  # +1 or -1
    values: FloatArray  # (c + 1,) distinct development scores, times direction, ascending
    fp: IntArray  # (c,) rows of a at or above each cut
    tp: IntArray  # (c,) rows of b at or above each cut
    youden: FloatArray  # (c,) TPR - FPR

    def threshold(self, i: int) -> float:
        """Cut ``i``'s threshold on ``direction * score``: a midpoint between two scores."""
        return 0.5 * float(self.values[i] + self.values[i + 1])


def threshold_cuts(sa: FloatArray, sb: FloatArray) -> Iterator[Cuts]:
    """Yield the cuts of both score directions (+1 first); none where fewer than two values."""
    n_a, n_b = len(sa), len(sb)
    for direction in (1.0, -1.0):
        ua, ub = np.sort(direction * sa), np.sort(direction * sb)
        values = np.unique(np.concatenate([ua, ub]))  # (n_unique,)
        if values.size < 2:
            continue
        cut = values[1:]  # predict b iff score >= cut
        fp = n_a - np.searchsorted(ua, cut, side="left")  # (n_unique - 1,)
        tp = n_b - np.searchsorted(ub, cut, side="left")
        yield Cuts(direction, values, fp, tp, tp / n_b - fp / n_a)
