"""Out-of-fold machinery shared by ROC-HT and the reserved-test certifier.

* :func:`stratified_folds` — the folds of the pooled rows of two identities (A rows first),
  exactly ``StratifiedKFold(n_folds, shuffle=True, random_state=seed)``;
* :func:`oof_scores` — held-out scores of a scikit-learn-style classifier fitted fold by fold;
* :func:`roc_curve`, :func:`roc_auc` — the ROC operating points (as scikit-learn draws them)
  and the area under them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
from sklearn.model_selection import StratifiedKFold

from idaudit.exceptions import InvalidInputError

__all__ = ["oof_scores", "roc_auc", "roc_curve", "stratified_folds"]

IntArray = npt.NDArray[np.intp]
FloatArray = npt.NDArray[np.float64]


def stratified_folds(
    n_a: int, n_b: int, n_folds: int, seed: int
) -> list[tuple[IntArray, IntArray]]:
    """Split the pooled rows of two identities (``n_a`` A rows, then ``n_b`` B rows) in folds.

    Parameters
    ----------
    n_a, n_b : int
        Rows of each identity (each at least ``n_folds``).
    n_folds : int
        Number of folds, at least 2.
    seed : int
        Seed in [0, 2**32) of the shuffle.

    Returns
    -------
    list of (train, held_out)
        Row positions of each fold: exactly the splits of
        ``StratifiedKFold(n_folds, shuffle=True, random_state=seed)`` on labels 0 (A) and 1 (B).

    Examples
    --------
    >>> from idaudit.audits._oof import stratified_folds
    >>> [held.tolist() for _, held in stratified_folds(3, 3, 3, seed=0)]
    [[2, 4], [1, 5], [0, 3]]
    """
    y = np.r_[np.zeros(n_a, dtype=np.int64), np.ones(n_b, dtype=np.int64)]
    skf = StratifiedKFold(n_splits=n_folds, shuffle=True, random_state=seed)
    return [(tr, te) for tr, te in skf.split(np.zeros((y.size, 1)), y)]


def oof_scores(
    make: Callable[[int], Any],
    x_a: FloatArray,
    x_b: FloatArray,
    folds: Sequence[tuple[IntArray, IntArray]],
    score: Callable[[Any, FloatArray], FloatArray],
) -> FloatArray:
    """Held-out scores of a classifier fitted on each fold's training rows (A = 0, B = 1).

    Parameters
    ----------
    make : callable
        ``make(k)`` returns the unfitted classifier of fold ``k`` (its seed, as a rule).
    x_a, x_b : numpy.ndarray, shape (n_a, d) and (n_b, d)
        Rows of identity A (label 0) and B (label 1).
    folds : sequence of (train, held_out)
        Row positions into the pooled ``[x_a; x_b]``, e.g. from :func:`stratified_folds`.
    score : callable
        ``score(fitted, x)`` returns one score per row of ``x``, larger meaning more B.

    Returns
    -------
    numpy.ndarray of float64, shape (n_a + n_b,)
        Each row's score from the classifier that did not train on it, A rows first.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.linear_model import LogisticRegression
    >>> from idaudit.audits._oof import oof_scores, stratified_folds
    >>> gen = np.random.default_rng(0)
    >>> a, b = gen.normal(0, 1, (10, 2)), gen.normal(3, 1, (10, 2))
    >>> s = oof_scores(lambda k: LogisticRegression(), a, b, stratified_folds(10, 10, 5, 0),
    ...                lambda clf, x: clf.decision_function(x))
    >>> bool(s[:10].max() < s[10:].min())
    True
    """
    x = np.concatenate([x_a, x_b])  # (n_a + n_b, d)
    y = np.r_[np.zeros(len(x_a), dtype=np.int64), np.ones(len(x_b), dtype=np.int64)]
    out = np.empty(len(y), dtype=np.float64)
    for k, (train, held) in enumerate(folds):
        clf = make(k).fit(x[train], y[train])
        out[held] = np.asarray(score(clf, x[held]), dtype=np.float64).reshape(-1)
    return out


def roc_curve(y_true: npt.ArrayLike, score: npt.ArrayLike) -> tuple[FloatArray, FloatArray]:
    """ROC operating points, identical to ``sklearn.metrics.roc_curve`` (drop_intermediate).

    Parameters
    ----------
    y_true : array_like of {0, 1}, shape (n,)
        Labels (1 = positive); both classes present.
    score : array_like of float, shape (n,)
        Scores, larger meaning more positive.

    Returns
    -------
    fpr, tpr : numpy.ndarray of float64, shape (n_points,)
        Starting at (0, 0) and ending at (1, 1); thresholds at each distinct score, with
        points on straight segments dropped as scikit-learn does.

    Raises
    ------
    InvalidInputError
        If a score is not finite.
    """
    y = np.asarray(y_true, dtype=np.float64)
    s = np.asarray(score, dtype=np.float64)
    if not np.all(np.isfinite(s)):
        # NaN would sort first and pass for a perfect separation
        raise InvalidInputError(
            f"score must be finite; got {int(np.sum(~np.isfinite(s)))} non-finite"
        )
    desc = np.argsort(s, kind="mergesort")[::-1]
    s, y = s[desc], y[desc]
    last = np.r_[np.where(np.diff(s))[0], y.size - 1]  # last index of each distinct score
    tps = np.cumsum(y)[last]
    fps = 1 + last - tps
    if len(fps) > 2:
        keep = np.where(np.r_[True, np.logical_or(np.diff(fps, 2), np.diff(tps, 2)), True])[0]
        fps, tps = fps[keep], tps[keep]
    tps = np.r_[0.0, tps]
    fps = np.r_[0.0, fps]
    return fps / fps[-1], tps / tps[-1]


def roc_auc(fpr: FloatArray, tpr: FloatArray) -> float:
    """Area under ROC operating points (trapezoids), e.g. those :func:`roc_curve` returns.

    Examples
    --------
    >>> from idaudit.audits._oof import roc_auc, roc_curve
    >>> roc_auc(*roc_curve([0, 0, 1, 1], [0.1, 0.4, 0.35, 0.8]))
    0.75
    """
    return float(np.trapezoid(tpr, fpr))
