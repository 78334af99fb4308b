"""ROC-HT: ε from a cross-validated classifier's ROC (seed 000, Section 3.4, Eq. 15)."""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np
import numpy.typing as npt
import torch
from scipy.special import expit

from idaudit import dp
from idaudit._device import resolve_device
from idaudit._validation import (
    Constraint,
    Device,
    Interval,
    Options,
    Positive,
    RandomState,
    RngLike,
)
from idaudit.audits._base import NAME, BaseAuditor, Output
from idaudit.audits._batch import Batch, CallCache
from idaudit.audits._oof import oof_scores, roc_auc, roc_curve, stratified_folds
from idaudit.exceptions import IdauditWarning, InvalidInputError
from idaudit.ops import fit_kernel_logistic

__all__ = ["CLASSIFIERS", "ROCHTAuditor", "logistic_oof_logits"]

CLASSIFIERS = ("logistic", "random_forest")

# Problems (pair x fold) per Newton batch: bounds memory (~1 MB per problem at 160 rows).
_PROBLEMS_PER_SOLVE = 1280

IntArray = npt.NDArray[np.intp]
FloatArray = npt.NDArray[np.float64]


class ROCHTAuditor(BaseAuditor):
    r"""Kairouz–Oh–Viswanath ε maximised over a cross-validated classifier's pooled OOF ROC.

    **Status: diagnostic.** The out-of-fold ROC comes from five fold-specific classifiers and
    its maximising threshold is chosen on the same predictions, so the value is an empirical,
    uncertified number (seed 000 keeps it as a "broad OOF diagnostic", Section 3.4, 4.3 and
    Figure 2). It is ``inf`` whenever the empirical ROC has a point with FPR = 0 < TPR or
    TPR = 1 > FPR — algebraically right for Eq. 15, not proof of perfect separation. For
    certificates use :class:`idaudit.ReservedTestCertifier`.

    Parameters
    ----------
    n_folds : int, default 5
        Folds of ``StratifiedKFold(n_folds, shuffle=True)`` (at least 2; each identity needs
        at least ``n_folds`` rows).
    classifier : {"logistic", "random_forest"}, default "logistic"
        ``"logistic"``: L2 logistic regression with ``C``, solved to the exact optimum of
        scikit-learn's ``LogisticRegression(C=C)`` (lbfgs, max_iter 1000) by a batched Newton
        method. ``"random_forest"``: ``RandomForestClassifier(n_estimators)`` with otherwise
        default settings, on the same folds (the sensitivity check of Section 4.4).
    C : float, default 1.0
        Inverse L2 penalty of the logistic regression (> 0).
    n_estimators : int, default 100
        Trees of the random forest.
    rng : int, numpy.random.SeedSequence, numpy.random.Generator or None, default 0
        Seed of the fold assignment (and of the forest). One seed serves every pair, like the
        paper's fixed ``random_state``.
    device : {"cpu", "cuda"}, default "cpu"
        Where :meth:`fit` runs the logistic-regression kernels.
    name : str, optional
        Variable prefix in :func:`idaudit.audit_pairs` results (default ``"rocht"``, or
        ``"rocht_rf"`` for the random forest).

    Attributes
    ----------
    epsilon\_ : float
        Eq. 15 over the ROC points; may be ``inf`` (never clipped).
    auc\_ : float
        Area under the pooled OOF ROC (equal to ``sklearn.metrics.roc_auc_score``).
    fpr\_, tpr\_ : numpy.ndarray of float64, shape (n_points,)
        The ROC, exactly as ``sklearn.metrics.roc_curve`` returns it (``drop_intermediate``
        on; dropping collinear points changes none of ε, AUC, TV or the corner).
    tv\_ : float
        :math:`\max_t [\mathrm{TPR}(t) - \mathrm{FPR}(t)]`, the classifier-restricted TV
        witness of Section 4.4.
    corner\_ : bool
        Whether the ROC passes through the exact corner (FPR, TPR) = (0, 1).
    oof_scores\_ : numpy.ndarray of float64, shape (n_a + n_b,)
        Out-of-fold probability of identity B for every row (A rows first).
    n_a\_, n_b\_ : int
        Rows of each identity.
    seed\_ : int
        The 63-bit seed drawn from ``rng``; the folds use ``seed_ % 2**32``.

    Notes
    -----
    Rows of A are labelled 0 and rows of B 1. Concatenating the out-of-fold probabilities
    gives operating points :math:`(\widehat{\mathrm{FPR}}_i, \widehat{\mathrm{TPR}}_i)` and

    .. math:: \hat\varepsilon_{\mathrm{ROC\text{-}HT}}(A, B) = \max_i \max\Big\{
              \ln\max\Big(1, \frac{\widehat{\mathrm{TPR}}_i}{\widehat{\mathrm{FPR}}_i}\Big),
              \ln\max\Big(1, \frac{1 - \widehat{\mathrm{FPR}}_i}{1 - \widehat{\mathrm{TPR}}_i}
              \Big)\Big\} \qquad \text{(Eq. 15, via idaudit.dp.epsilon_from_roc)}.

    Folds are drawn by position, so the value is not exactly invariant to row order or to
    swapping the identities (it is in distribution).

    References
    ----------
    .. [1] P. Kairouz, S. Oh and P. Viswanath, "The composition theorem for differential
       privacy", ICML 2015.
    .. [2] J. Dong, A. Roth and W. J. Su, "Gaussian differential privacy", JRSS-B 84(1), 2022.

    Examples
    --------
    >>> import numpy as np
    >>> from idaudit import ROCHTAuditor
    >>> gen = np.random.default_rng(0)
    >>> a, b = gen.normal(0, 1, (40, 8)), gen.normal(1.0, 1, (40, 8))
    >>> aud = ROCHTAuditor(rng=0).fit(a, b)
    >>> round(aud.auc_, 4), aud.epsilon_, aud.corner_, aud.status
    (0.9719, inf, False, 'diagnostic')
    """

    status = "diagnostic"
    symmetric = False
    row_order_invariant = False
    _prefix = "rocht"
    _parameter_constraints: ClassVar[dict[str, Constraint]] = {
        "n_folds": Interval(2, integer=True),
        "classifier": Options(CLASSIFIERS),
        "C": Positive(),
        "n_estimators": Interval(1, integer=True),
        "rng": RandomState(),
        "device": Device(),
        "name": NAME,
    }
    _random = True

    def __init__(
        self,
        n_folds: int = 5,
        classifier: str = "logistic",
        *,
        C: float = 1.0,
        n_estimators: int = 100,
        rng: RngLike = 0,
        device: str = "cpu",
        name: str | None = None,
    ) -> None:
        self.n_folds = n_folds
        self.classifier = classifier
        self.C = C
        self.n_estimators = n_estimators
        self.rng = rng
        self.device = device
        self.name = name

    def _default_label(self) -> str:
        return "rocht" if self.classifier == "logistic" else "rocht_rf"

    def min_rows(self) -> int:
        """Each identity needs at least ``n_folds`` rows (one per fold)."""
        return max(2, int(self.n_folds))

    def outputs(self) -> tuple[Output, ...]:
        """Per-pair outputs: ``epsilon``, ``auc``, ``tv``, ``corner``."""
        kind = "logistic regression" if self.classifier == "logistic" else "random forest"
        return (
            Output("epsilon", f"ROC-HT OOF epsilon (Eq. 15), {kind}; may be inf", self.status),
            Output("auc", f"out-of-fold ROC AUC, {kind}", "sample_estimate"),
            # the threshold is maximised on the same OOF scores: a classifier-restricted
            # diagnostic (seed 000, Section 4.4), not an estimate of TV
            Output("tv", "max(TPR - FPR) over the OOF ROC (classifier TV witness)", "diagnostic"),
            Output(
                "corner", "OOF ROC reaches the exact (FPR, TPR) = (0, 1) corner", "diagnostic", bool
            ),
        )

    def _run(self, batch: Batch, seed: int | None) -> dict[str, Any]:
        assert seed is not None
        fold_seed = seed % 2**32
        # the folds depend only on the two sizes: drawn once per size pair and call
        fold_cache = batch.shared.rocht_folds.setdefault((int(self.n_folds), fold_seed), {})
        folds = []
        for a, b in batch.samples:
            sizes = (a.shape[0], b.shape[0])
            if sizes not in fold_cache:
                fold_cache[sizes] = stratified_folds(*sizes, int(self.n_folds), fold_seed)
            folds.append(fold_cache[sizes])
        if self.classifier == "logistic":
            scores = self._logistic_scores(batch, folds)
        else:
            scores = self._forest_scores(batch, folds, fold_seed)
        out: dict[str, Any] = {k: [] for k in ("epsilon", "auc", "tv", "corner", "fpr", "tpr")}
        for (a, b), score in zip(batch.samples, scores, strict=True):
            y = np.r_[np.zeros(a.shape[0]), np.ones(b.shape[0])]
            fpr, tpr = roc_curve(y, score)
            out["fpr"].append(fpr)
            out["tpr"].append(tpr)
            out["epsilon"].append(dp.epsilon_from_roc(fpr, tpr))
            out["auc"].append(roc_auc(fpr, tpr))
            out["tv"].append(float(np.max(tpr - fpr)))
            out["corner"].append(dp.exact_corner(fpr, tpr))
        result: dict[str, Any] = {
            "epsilon": np.asarray(out["epsilon"], dtype=np.float64),
            "auc": np.asarray(out["auc"], dtype=np.float64),
            "tv": np.asarray(out["tv"], dtype=np.float64),
            "corner": np.asarray(out["corner"], dtype=bool),
            "fpr": out["fpr"],
            "tpr": out["tpr"],
            "oof_scores": scores,
        }
        return result

    def _logistic_scores(
        self, batch: Batch, folds: list[list[tuple[IntArray, IntArray]]]
    ) -> list[FloatArray]:
        """Out-of-fold probabilities of every pair, all folds of all pairs in one solve."""
        # the same map scikit-learn's predict_proba applies to the decision function
        return [expit(logit) for logit in self._logistic_logits(batch, folds)]

    def _logistic_logits(
        self, batch: Batch, folds: Sequence[Sequence[tuple[IntArray, IntArray]]]
    ) -> list[FloatArray]:
        """Out-of-fold decision values (logits) of every pair, in one batched solve."""
        pb = _Sizes(batch)
        dev = batch.device
        gram = _centred(batch.gram(), np.add(pb.n_a, pb.n_b))  # (pairs, n_max, n_max)
        n_fold = int(self.n_folds)
        train = np.zeros((pb.n_pairs, n_fold, pb.n_max))  # (pairs, folds, n_max)
        y = np.zeros((pb.n_pairs, pb.n_max))
        for p, fs in enumerate(folds):
            y[p, pb.n_a[p] : pb.n_a[p] + pb.n_b[p]] = 1.0  # B rows follow the A rows
            for k, (tr, _) in enumerate(fs):
                train[p, k, tr] = 1.0
        train_t = torch.from_numpy(train).to(dev)
        y_t = torch.from_numpy(y).to(dev)
        logits = np.empty((pb.n_pairs, n_fold, pb.n_max))
        per = max(1, _PROBLEMS_PER_SOLVE // n_fold)
        for lo in range(0, pb.n_pairs, per):
            sl = slice(lo, lo + per)
            fit = fit_kernel_logistic(gram[sl], y_t[sl], train_t[sl], float(self.C))
            if not bool(fit.converged.all()):
                warnings.warn(
                    "ROC-HT logistic regression did not reach a gradient norm of 1e-10 in "
                    f"{fit.n_iter} Newton iterations (largest "
                    f"{float(fit.grad_norm.max()):.2e}); the out-of-fold scores are those of the "
                    "last iterate, not of the exact optimum.",
                    IdauditWarning,
                    stacklevel=4,
                )
            logits[sl] = fit.logits.cpu().numpy()  # (pairs, folds, n_max)
        scores = []
        for p, fs in enumerate(folds):
            score = np.empty(pb.n_a[p] + pb.n_b[p])
            for k, (_, te) in enumerate(fs):
                score[te] = logits[p, k, te]
            scores.append(score)
        return scores

    def _forest_scores(
        self, batch: Batch, folds: list[list[tuple[IntArray, IntArray]]], fold_seed: int
    ) -> list[FloatArray]:
        """Out-of-fold probabilities from scikit-learn random forests (a plain loop)."""
        from sklearn.ensemble import RandomForestClassifier

        def forest(fold: int) -> Any:  # the same seed in every fold
            return RandomForestClassifier(
                n_estimators=int(self.n_estimators), random_state=fold_seed
            )

        def probability(clf: Any, x: FloatArray) -> FloatArray:
            out: FloatArray = clf.predict_proba(x)[:, 1]
            return out

        return [
            oof_scores(forest, a, b, fs, probability)
            for (a, b), fs in zip(batch.samples, folds, strict=True)
        ]


class _Sizes:
    """Pair sizes of a batch without packing its rows."""

    def __init__(self, batch: Batch) -> None:
        self.n_a, self.n_b = batch.n_a, batch.n_b
        self.n_pairs = batch.n_pairs
        self.n_max = max(a + b for a, b in zip(self.n_a, self.n_b, strict=True))


def _centred(gram: torch.Tensor, n_rows: npt.ArrayLike) -> torch.Tensor:
    """Gram matrices of each pooled sample shifted to mean zero (padding rows stay zero).

    The intercept is not penalised, so shifting every row of a pair by one vector changes no
    fitted logit; centring keeps the Newton systems well conditioned when the embeddings sit
    far from the origin (unnormalised inputs), where float32 factorisations would fail.
    """
    n = torch.as_tensor(np.asarray(n_rows), device=gram.device)  # (pairs,)
    valid = (torch.arange(gram.shape[-1], device=gram.device)[None, :] < n[:, None]).to(
        gram.dtype
    )  # (pairs, n_max)
    w = valid / n[:, None].to(gram.dtype)
    row_mean = (gram @ w[:, :, None])[..., 0]  # (pairs, n_max): <x_i, mean>, 0 on padding
    grand = (row_mean * w).sum(-1, keepdim=True)  # (pairs, 1): <mean, mean>
    # G - r 1' - 1 r' + g 1 1' on the real rows as one rank-2 update (padding stays zero)
    left = torch.stack([row_mean, valid], dim=-1)  # (pairs, n_max, 2)
    right = torch.stack([-valid, grand * valid - row_mean], dim=-1)  # (pairs, n_max, 2)
    return torch.baddbmm(gram, left, right.transpose(1, 2))


def logistic_oof_logits(
    samples: Sequence[tuple[npt.ArrayLike, npt.ArrayLike]],
    seeds: Sequence[int],
    *,
    n_folds: int = 5,
    C: float = 1.0,
    device: str = "cpu",
    labels: Sequence[tuple[Any, Any]] | None = None,
    shared: CallCache | None = None,
) -> list[FloatArray]:
    r"""Out-of-fold logistic-regression decision values for many pairs in one batched solve.

    For pair ``p``: rows of A (label 0) then B (label 1), split by
    ``StratifiedKFold(n_folds, shuffle=True, random_state=seeds[p] % 2**32)``; each held-out
    row gets :math:`w^\top x + b` of the L2 logistic regression fitted on the other folds, at
    the exact optimum of ``sklearn.linear_model.LogisticRegression(C=C)`` (its
    ``decision_function``), solved for all folds of all pairs at once by
    :func:`idaudit.ops.fit_kernel_logistic`.

    Parameters
    ----------
    samples : sequence of (array_like, array_like)
        ``(emb_a, emb_b)`` per pair, shapes ``(n_a, d)``, ``(n_b, d)``, at least ``n_folds``
        rows each.
    seeds : sequence of int
        Fold seed of each pair (non-negative).
    n_folds : int, default 5
    C : float, default 1.0
        Inverse L2 penalty.
    device : {"cpu", "cuda"}, default "cpu"
    labels : sequence of (label, label), optional
        Identity labels of the pairs; with ``shared``, each identity's Gram block is computed
        once across calls.
    shared : CallCache, optional
        A cache that outlives one call (per-identity results).

    Returns
    -------
    list of numpy.ndarray of float64, shape (n_a + n_b,)
        Out-of-fold decision values, A rows first.

    Examples
    --------
    >>> import numpy as np
    >>> from idaudit.audits._rocht import logistic_oof_logits
    >>> gen = np.random.default_rng(0)
    >>> a, b = gen.normal(0, 1, (20, 3)), gen.normal(2, 1, (20, 3))
    >>> logits = logistic_oof_logits([(a, b)], [0], n_folds=4)
    >>> logits[0].shape, bool(logits[0][:20].mean() < 0 < logits[0][20:].mean())
    ((40,), True)
    """
    aud = ROCHTAuditor(n_folds=n_folds, C=C)
    aud._check_params()
    n_fold = int(n_folds)
    pairs = [(np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)) for a, b in samples]
    if len(seeds) != len(pairs):
        raise InvalidInputError(
            f"`seeds` must hold one seed per pair; got {len(seeds)} vs {len(pairs)}."
        )
    for k, (a, b) in enumerate(pairs):
        if min(a.shape[0], b.shape[0]) < n_fold:
            raise InvalidInputError(
                f"pair {k}: each identity needs at least `n_folds`={n_fold} rows; got "
                f"{a.shape[0]} and {b.shape[0]}."
            )
    folds = [
        stratified_folds(a.shape[0], b.shape[0], n_fold, int(seed) % 2**32)
        for (a, b), seed in zip(pairs, seeds, strict=True)
    ]
    batch = Batch(pairs, resolve_device(device), labels=labels, shared=shared)
    return aud._logistic_logits(batch, folds)
