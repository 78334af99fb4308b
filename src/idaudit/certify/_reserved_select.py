"""Development side of the reserved-test certifier: thresholds, ranking, selection, test sizes."""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
from scipy import stats
from tqdm.auto import tqdm

from idaudit._device import single_threaded
from idaudit.audits._batch import CallCache
from idaudit.audits._rocht import logistic_oof_logits
from idaudit.certify._base import auc, oof_scores_of, threshold_cuts
from idaudit.data import EmbeddingSet
from idaudit.data._splits import smallest_n
from idaudit.dp import epsilon_from_error_rates, simultaneous_rate_bounds

FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True)
class _Plan:
    """What the development split decides for one candidate pair."""

    expected_epsilon: float
    direction: float  # +1: predict identity_b when score >= threshold; -1: when score <= it
    threshold: float
    auc: float  # out-of-fold AUC in the chosen direction
    margin: float  # (min b score - max a score) / pooled sd, in the chosen direction


def _select(
    candidates: list[tuple[Any, Any]],
    dev: EmbeddingSet,
    test: EmbeddingSet,
    base: Any,
    fold_seeds: list[int],
    alpha_bound: float,
    p: dict[str, Any],
    *,
    progress: bool,
    batched: bool = False,
) -> tuple[list[_Plan], list[int], list[int]]:
    """Plan every candidate on its development rows, rank them, pick vertex-disjoint pairs.

    Returns the plans, the ranking (candidate positions, best first) and the chosen positions.
    Only the test *sizes* are read here, never a test row. ``batched``: the development
    scores come from the batched logistic regression (:func:`_batched_oof`).
    """
    plans: list[_Plan] = []
    iterator = tqdm(
        list(zip(candidates, fold_seeds, strict=False)),
        desc="certify: development",
        disable=not progress,
        leave=False,
    )
    scores = _batched_oof(dev, candidates, fold_seeds, p["n_folds"]) if batched else None
    for (a, b), seed in iterator:
        xa, xb = dev.get(a), dev.get(b)
        batch_oof = next(scores) if scores is not None else None
        oof = (
            batch_oof if batch_oof is not None else oof_scores_of(base, xa, xb, p["n_folds"], seed)
        )
        plans.append(
            _plan(
                oof[: len(xa)],
                oof[len(xa) :],
                test.counts[a],
                test.counts[b],
                alpha_bound,
                p["delta"],
            )
        )
    order = sorted(
        range(len(candidates)),
        key=lambda i: (-plans[i].expected_epsilon, -plans[i].auc, -plans[i].margin, i),
    )
    chosen: list[int] = []
    used: set[Any] = set()
    for i in order:
        a, b = candidates[i]
        if a in used or b in used:
            continue
        chosen.append(i)
        used.update((a, b))
        if len(chosen) == p["n_select"]:
            break
    return plans, order, chosen


# -- sizes ----------------------------------------------------------------------------------


def _zero_error_bound(
    m_a: int, m_b: int, alpha_bound: float, delta: float, mode: str = "dev"
) -> float:
    """Eq. 16 for a test without errors on ``m_a``, ``m_b`` rows: the largest certificate.

    ``"dev"``: one Clopper–Pearson bound per rate at ``alpha_bound``; ``"bonferroni"`` and
    ``"band"``: the count-0 bound of each class's simultaneous bounds at ``alpha_bound``.
    """
    if mode == "dev":
        # the one-sided Clopper-Pearson upper bound at 0 errors in m trials is 1 - alpha'^(1/m)
        u_a = -math.expm1(math.log(alpha_bound) / m_a)
        u_b = -math.expm1(math.log(alpha_bound) / m_b)
    else:
        u_a = float(simultaneous_rate_bounds(m_a, alpha_bound, method=mode)[0])
        u_b = float(simultaneous_rate_bounds(m_b, alpha_bound, method=mode)[0])
    return float(epsilon_from_error_rates(u_a, u_b, delta))


def _min_test_rows(alpha_bound: float, delta: float, mode: str = "dev") -> int:
    r"""Fewest test rows per identity (both sides equal) at which zero errors certify > 0.

    With zero errors both bounds are :math:`U = 1 - \alpha'^{1/m}`, and Eq. 16 exceeds 0 iff
    :math:`1 - \delta - U > U`, i.e. :math:`m > \ln\alpha' / \ln((1 + \delta)/2)`. The
    search evaluates the certificate's own formula, so rounding cannot put it off by one.
    """
    return smallest_n(lambda m: _zero_error_bound(m, m, alpha_bound, delta, mode) > 0, start=1)


# -- development-side computations ----------------------------------------------------------


def _batched_oof(
    dev: EmbeddingSet,
    candidates: Sequence[tuple[Any, Any]],
    seeds: Sequence[int],
    n_folds: int,
    per_call: int = 64,
) -> Iterator[FloatArray]:
    """Out-of-fold logistic decision values of every candidate, many pairs per solve.

    The folds and the model are those of :func:`~idaudit.certify._base.oof_scores_of` with
    ``LogisticRegression(C=1)`` (``StratifiedKFold`` seeded per pair; the exact optimum, where
    lbfgs stops at its tolerance), and each identity's development Gram block is computed once.
    """
    shared = CallCache(width=max(dev.counts.values()))
    for lo in range(0, len(candidates), per_call):
        chunk = list(candidates[lo : lo + per_call])
        samples = [(dev.get(a), dev.get(b)) for a, b in chunk]
        with single_threaded():  # small batched kernels: intra-op threads only spin
            logits = logistic_oof_logits(
                samples, seeds[lo : lo + per_call], n_folds=n_folds, labels=chunk, shared=shared
            )
        yield from logits


def _expected_bound(
    fp: npt.NDArray[np.int64],
    fn: npt.NDArray[np.int64],
    n_a: int,
    n_b: int,
    m_a: int,
    m_b: int,
    alpha_bound: float,
    delta: float,
) -> FloatArray:
    """Eq. 16 at Clopper–Pearson bounds of the test counts the development rates predict."""
    k_a = m_a * (fp + 0.5) / (n_a + 1.0)  # expected test false positives (not integer)
    k_b = m_b * (fn + 0.5) / (n_b + 1.0)
    # the continuous extension of the Clopper-Pearson upper bound, Beta^{-1}(1 - a; k+1, m-k)
    u_a = stats.beta.isf(alpha_bound, k_a + 1.0, m_a - k_a)
    u_b = stats.beta.isf(alpha_bound, k_b + 1.0, m_b - k_b)
    out: FloatArray = np.asarray(epsilon_from_error_rates(u_a, u_b, delta), dtype=np.float64)
    return out


def _plan(
    sa: FloatArray, sb: FloatArray, m_a: int, m_b: int, alpha_bound: float, delta: float
) -> _Plan:
    """Choose direction and threshold on development scores; summarise the candidate."""
    n_a, n_b = len(sa), len(sb)
    best: tuple[float, float, float, float] | None = None  # (objective, youden, direction, tau)
    for c in threshold_cuts(sa, sb):
        objective = _expected_bound(c.fp, n_b - c.tp, n_a, n_b, m_a, m_b, alpha_bound, delta)
        i = int(np.lexsort((c.youden, objective))[-1])
        cand = (float(objective[i]), float(c.youden[i]), c.direction, c.threshold(i))
        if best is None or cand[:2] > best[:2]:
            best = cand
    if best is None:  # every development score is equal: no threshold separates anything
        return _Plan(0.0, 1.0, float("inf"), 0.5, 0.0)
    expected, _, direction, tau = best
    ua, ub = direction * sa, direction * sb
    spread = float(np.std(np.concatenate([ua, ub])))
    margin = float(ub.min() - ua.max()) / spread if spread > 0 else 0.0
    return _Plan(expected, direction, direction * tau, auc(ua, ub), margin)
