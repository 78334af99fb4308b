"""Thresholds, Type I / II accuracy, the joint target × test evaluation and OOD detection."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np
import numpy.typing as npt
import xarray as xr

from idaudit._results import Status, provenance, variable
from idaudit._validation import check_in_range
from idaudit.exceptions import InvalidInputError

__all__ = [
    "EERResult",
    "OODDetector",
    "OODResult",
    "TypeAccuracy",
    "attack_threshold",
    "eer_threshold",
    "joint_evaluation",
    "reference_bounds",
    "type_accuracy",
]


def _scores(x: Any, name: str) -> npt.NDArray[np.float64]:
    arr = np.asarray(x, dtype=np.float64).ravel()
    if arr.size == 0:
        raise InvalidInputError(f"`{name}` must hold at least one score.")
    if not np.isfinite(arr).all():
        raise InvalidInputError(f"`{name}` must be finite; got NaN or inf.")
    return arr


def _unit_rows(x: Any, name: str, dim: int | None = None) -> npt.NDArray[np.float64]:
    arr = np.asarray(x, dtype=np.float64)
    if arr.ndim == 1:
        arr = arr[None]
    if arr.ndim != 2:
        raise InvalidInputError(f"`{name}` must have shape (n, dim); got {arr.shape}.")
    if dim is not None and arr.shape[1] != dim:
        raise InvalidInputError(f"`{name}` must have dimension {dim}; got {arr.shape[1]} vs {dim}.")
    norms = np.linalg.norm(arr, axis=1, keepdims=True)
    if not np.isfinite(arr).all() or (norms <= 1e-12).any():
        raise InvalidInputError(f"`{name}` rows must be finite and non-zero.")
    out: npt.NDArray[np.float64] = arr / norms
    return out


@dataclass(frozen=True)
class EERResult:
    """The threshold at the minimum equal error rate.

    Attributes
    ----------
    threshold : float
        ``τ_F``: pairs with similarity ``≥ τ_F`` are called the same person.
    eer : float
        ``(FAR + FRR) / 2`` at ``τ_F`` (sample estimate).
    far, frr : float
        False-accept rate of impostor pairs and false-reject rate of genuine pairs at ``τ_F``.
    n_genuine, n_impostor : int
    """

    threshold: float
    eer: float
    far: float
    frr: float
    n_genuine: int
    n_impostor: int
    STATUS: ClassVar[dict[str, Status]] = {
        "threshold": "sample_estimate",
        "eer": "sample_estimate",
        "far": "sample_estimate",
        "frr": "sample_estimate",
        "n_genuine": "descriptive",
        "n_impostor": "descriptive",
    }


def eer_threshold(genuine: npt.ArrayLike, impostor: npt.ArrayLike) -> EERResult:
    """``τ_F`` at the minimum equal error rate of genuine and impostor similarities.

    Parameters
    ----------
    genuine : array_like
        Similarities of same-identity pairs.
    impostor : array_like
        Similarities of different-identity pairs.

    Returns
    -------
    EERResult

    Notes
    -----
    Every observed score (and +∞) is a candidate threshold ``τ``; with
    ``FAR(τ) = #{impostor ≥ τ}/n_i`` and ``FRR(τ) = #{genuine < τ}/n_g`` the chosen ``τ``
    minimises ``|FAR − FRR|`` (ties: the lowest ``FAR + FRR``, then the smallest ``τ``),
    and the EER is the mean of the two there — the crossing point of the empirical ROC
    (scikit-learn's ``roc_curve`` convention: positive when ``score ≥ threshold``).

    Examples
    --------
    >>> from idaudit.inversion import eer_threshold
    >>> r = eer_threshold([0.9, 0.8, 0.7, 0.3], [0.1, 0.2, 0.4, 0.6])
    >>> r.threshold, r.eer
    (0.6, 0.25)
    """
    g = _scores(genuine, "genuine")
    i = _scores(impostor, "impostor")
    cand = np.unique(np.concatenate([g, i, [np.inf]]))  # ascending
    gs, is_ = np.sort(g), np.sort(i)
    frr = np.searchsorted(gs, cand, side="left") / g.size  # genuine < τ
    far = 1.0 - np.searchsorted(is_, cand, side="left") / i.size  # impostor ≥ τ
    gap = np.abs(far - frr)
    tied = np.flatnonzero(gap == gap.min())
    k = int(tied[np.argmin(far[tied] + frr[tied])])  # first (smallest τ) of the lowest means
    return EERResult(
        threshold=float(cand[k]),
        eer=float((far[k] + frr[k]) / 2.0),
        far=float(far[k]),
        frr=float(frr[k]),
        n_genuine=int(g.size),
        n_impostor=int(i.size),
    )


def attack_threshold(encoder: Any, crops: npt.NDArray[np.uint8]) -> float:
    """``τ_A``: the highest cosine similarity between two different real face crops (Eq. 14).

    Parameters
    ----------
    encoder : Encoder
        The target model.
    crops : numpy.ndarray of uint8, shape (n, S, S, 3)
        Aligned crops of real faces (``n ≥ 2``); an exact duplicate image would give 1.

    Returns
    -------
    float
        ``max_{i ≠ j} S(F(x_i), F(x_j))`` (sample estimate: it grows with ``n``).
    """
    emb = _unit_rows(encoder.encode(crops), "embeddings")
    if emb.shape[0] < 2:
        raise InvalidInputError(f"`crops` must hold at least 2 faces; got {emb.shape[0]}.")
    sims = emb @ emb.T
    np.fill_diagonal(sims, -np.inf)
    return float(sims.max())


@dataclass(frozen=True)
class TypeAccuracy:
    """Type I and Type II accuracy of a set of reconstructions at one threshold.

    Attributes
    ----------
    type_i : float
        Fraction of targets whose reconstruction matches the target image (Eq. 34).
    type_ii : float
        Mean over targets of the fraction of the identity's *other* images matched (Eq. 22's
        intent; targets without other images are left out and counted in ``n_type_ii``).
    per_target_i : numpy.ndarray of bool, shape (I,)
    per_target_ii : numpy.ndarray of float64, shape (I,)
        NaN for a target with no other image.
    threshold : float
    n_targets, n_type_ii : int
    """

    type_i: float
    type_ii: float
    per_target_i: npt.NDArray[np.bool_] = field(repr=False)
    per_target_ii: npt.NDArray[np.float64] = field(repr=False)
    threshold: float
    n_targets: int
    n_type_ii: int
    STATUS: ClassVar[dict[str, Status]] = {
        "type_i": "sample_estimate",
        "type_ii": "sample_estimate",
        "n_targets": "descriptive",
        "n_type_ii": "descriptive",
    }


def type_accuracy(
    reconstructions: npt.ArrayLike,
    targets: npt.ArrayLike,
    others: Sequence[npt.ArrayLike],
    threshold: float,
) -> TypeAccuracy:
    """Type I / II accuracy of reconstructions in one test model (seed 002, Eq. 22 and 34).

    Parameters
    ----------
    reconstructions : array_like, shape (I, dim)
        Test-model embeddings of the reconstructions ``F(x̂_i)``.
    targets : array_like, shape (I, dim)
        Test-model embeddings of the target images ``F(x^T_i)``.
    others : sequence of I array_like, each (J_i, dim)
        Embeddings of each identity's other images ``x^{j≠T}_i`` (``J_i`` may be 0).
    threshold : float
        ``τ_F`` of the test model, in [−1, 1].

    Returns
    -------
    TypeAccuracy

    Notes
    -----
    Eq. 22 prints ``ΣᵢΣⱼ 𝕀(·) / I``; its stated meaning ("the rate at which the
    reconstruction matches the identity's other images") is the per-target rate
    ``(1/J_i) Σⱼ 𝕀(S(F(x̂_i), F(x^j_i)) ≥ τ_F)`` averaged over targets, which is what is
    computed here (it lies in [0, 1]).

    Examples
    --------
    >>> import numpy as np
    >>> from idaudit.inversion import type_accuracy
    >>> e = np.eye(3)
    >>> acc = type_accuracy(e[:2], e[:2], [e[[0, 1]], e[[2]]], 0.5)
    >>> acc.type_i, acc.type_ii
    (1.0, 0.25)
    """
    tau = check_in_range(threshold, "threshold", -1.0, 1.0, closed="both")
    rec = _unit_rows(reconstructions, "reconstructions")
    tgt = _unit_rows(targets, "targets", rec.shape[1])
    if tgt.shape[0] != rec.shape[0]:
        raise InvalidInputError(
            f"`targets` must have one row per reconstruction; got {tgt.shape[0]} vs {rec.shape[0]}."
        )
    if len(others) != rec.shape[0]:
        raise InvalidInputError(
            f"`others` must hold one array per reconstruction; got {len(others)} vs {rec.shape[0]}."
        )
    match_i = (rec * tgt).sum(axis=1) >= tau
    per_ii = np.full(rec.shape[0], np.nan)
    for t, o in enumerate(others):
        arr = np.asarray(o, dtype=np.float64)
        if arr.size == 0:
            continue
        per_ii[t] = float(np.mean(_unit_rows(arr, "others", rec.shape[1]) @ rec[t] >= tau))
    has = ~np.isnan(per_ii)
    return TypeAccuracy(
        type_i=float(match_i.mean()),
        type_ii=float(per_ii[has].mean()) if has.any() else float("nan"),
        per_target_i=match_i,
        per_target_ii=per_ii,
        threshold=tau,
        n_targets=int(rec.shape[0]),
        n_type_ii=int(has.sum()),
    )


def joint_evaluation(
    reconstructions: Mapping[str, Mapping[str, npt.ArrayLike]],
    targets: Mapping[str, npt.ArrayLike],
    others: Mapping[str, Sequence[npt.ArrayLike]],
    thresholds: Mapping[str, float],
) -> xr.Dataset:
    """Type I / II accuracy for every target model × test model (seed 002, Sec. IV, Tab. III).

    Parameters
    ----------
    reconstructions : mapping
        ``reconstructions[target_model][test_model]``: ``(I, dim_test)`` test-model embeddings
        of the reconstructions made against ``target_model``.
    targets : mapping
        ``targets[test_model]``: ``(I, dim_test)`` embeddings of the target images.
    others : mapping
        ``others[test_model]``: per target, the identity's other images' embeddings.
    thresholds : mapping
        ``thresholds[test_model]``: ``τ_F``.

    Returns
    -------
    xarray.Dataset
        Dims ``target_model`` and ``test_model``; variables ``type_i``, ``type_ii`` (sample
        estimates) and ``n_targets``; ``type_i_avg`` / ``type_ii_avg`` over test models
        (the target model included: the joint evaluation's "Avg.").
    """
    target_models = list(reconstructions)
    test_models = list(thresholds)
    if not target_models or not test_models:
        raise InvalidInputError("`reconstructions` and `thresholds` must not be empty.")
    t1 = np.full((len(target_models), len(test_models)), np.nan)
    t2 = np.full_like(t1, np.nan)
    counts = np.zeros_like(t1, dtype=np.int64)
    for a, tm in enumerate(target_models):
        for b, sm in enumerate(test_models):
            if sm not in reconstructions[tm]:
                raise InvalidInputError(
                    f"`reconstructions[{tm!r}]` has no embeddings for test model {sm!r}."
                )
            acc = type_accuracy(reconstructions[tm][sm], targets[sm], others[sm], thresholds[sm])
            t1[a, b], t2[a, b], counts[a, b] = acc.type_i, acc.type_ii, acc.n_targets
    dims = ("target_model", "test_model")
    ds = xr.Dataset(
        {
            "type_i": variable(dims, t1, long_name="Type I accuracy", status="sample_estimate"),
            "type_ii": variable(dims, t2, long_name="Type II accuracy", status="sample_estimate"),
            "n_targets": variable(dims, counts, long_name="targets", status="descriptive"),
            "type_i_avg": variable(
                "target_model",
                t1.mean(axis=1),
                long_name="Type I accuracy averaged over test models",
                status="sample_estimate",
            ),
            "type_ii_avg": variable(
                "target_model",
                t2.mean(axis=1),
                long_name="Type II accuracy averaged over test models",
                status="sample_estimate",
            ),
            "threshold": variable(
                "test_model",
                [float(thresholds[m]) for m in test_models],
                long_name="tau_F of the test model",
                status="descriptive",
            ),
        },
        coords={"target_model": target_models, "test_model": test_models},
        attrs=provenance(title="joint_evaluation"),
    )
    return ds


def reference_bounds(
    targets: npt.ArrayLike,
    others: Sequence[npt.ArrayLike],
    random: npt.ArrayLike,
    threshold: float,
) -> xr.Dataset:
    """Tab. IV's "Original" (upper) and "Random" (lower) rows in one model.

    Parameters
    ----------
    targets : array_like, shape (I, dim)
        Embeddings of the target images.
    others : sequence of I array_like
        Each identity's other images' embeddings.
    random : array_like, shape (I, dim)
        Embeddings of unguided generator samples, one per target.
    threshold : float
        ``τ_F``.

    Returns
    -------
    xarray.Dataset
        Dim ``row`` = ``["original", "random"]``: ``type_i``, ``type_ii``, ``similarity``
        (mean cosine to the target; the target itself for "original", so 1).
    """
    tgt = _unit_rows(targets, "targets")
    rnd = _unit_rows(random, "random", tgt.shape[1])
    orig = type_accuracy(tgt, tgt, others, threshold)
    rand = type_accuracy(rnd, tgt, others, threshold)
    sim = [1.0, float((rnd * tgt).sum(axis=1).mean())]
    return xr.Dataset(
        {
            "type_i": variable(
                "row",
                [orig.type_i, rand.type_i],
                long_name="Type I accuracy",
                status="sample_estimate",
            ),
            "type_ii": variable(
                "row",
                [orig.type_ii, rand.type_ii],
                long_name="Type II accuracy",
                status="sample_estimate",
            ),
            "similarity": variable(
                "row",
                sim,
                long_name="mean cosine similarity to the target",
                status="sample_estimate",
            ),
        },
        coords={"row": ["original", "random"]},
        attrs=provenance(title="reference_bounds", settings={"threshold": threshold}),
    )


@dataclass(frozen=True)
class OODResult:
    """Out-of-domain decisions for ``n`` inputs (seed 002, Sec. III).

    Attributes
    ----------
    ood1 : numpy.ndarray of bool, shape (n,)
        Matching failure: no test model matches the reconstruction to the input (Eq. 20).
    ood2 : numpy.ndarray of bool, shape (n,)
        Face-detection failure: ``p_D < τ_D`` (Eq. 21).
    ood : numpy.ndarray of bool, shape (n,)
        ``ood1 ∨ ood2``.
    rate_ood1, rate_ood2, rate : float
        The three rates (Tab. XI: matching failure, detection failure, joint).
    """

    ood1: npt.NDArray[np.bool_] = field(repr=False)
    ood2: npt.NDArray[np.bool_] = field(repr=False)
    ood: npt.NDArray[np.bool_] = field(repr=False)
    rate_ood1: float
    rate_ood2: float
    rate: float
    STATUS: ClassVar[dict[str, Status]] = {
        "rate_ood1": "sample_estimate",
        "rate_ood2": "sample_estimate",
        "rate": "sample_estimate",
    }

    def breakdown(self) -> dict[str, float]:
        """Tab. XI's columns: matching failure, detection failure and the joint rate."""
        return {
            "matching_failure": self.rate_ood1,
            "detection_failure": self.rate_ood2,
            "ood": self.rate,
        }


class OODDetector:
    """Out-of-domain detection from an inversion (seed 002, Sec. III, Eq. 19–21).

    Parameters
    ----------
    thresholds : sequence of float
        ``τ_{F_m}`` of the ``M`` test models (not the target model).
    tau_d : float, default 0.9933
        Detection threshold (Tab. II's OODD setting).

    Examples
    --------
    >>> from idaudit.inversion import OODDetector
    >>> det = OODDetector([0.4, 0.3], tau_d=0.9)
    >>> r = det.detect([[0.5, 0.1], [0.1, 0.2], [0.9, 0.9]], [0.99, 0.99, 0.5])
    >>> r.ood.tolist(), r.breakdown()["ood"]
    ([False, True, True], 0.6666666666666666)
    """

    def __init__(self, thresholds: Sequence[float], *, tau_d: float = 0.9933) -> None:
        self.thresholds = thresholds
        self.tau_d = tau_d

    def detect(self, similarities: npt.ArrayLike, detection: npt.ArrayLike) -> OODResult:
        """Decide for ``n`` inputs.

        Parameters
        ----------
        similarities : array_like, shape (n, M)
            ``S(F_m(x̂), F_m(x))`` of each input and its reconstruction in each test model.
        detection : array_like, shape (n,)
            ``p_D`` of each reconstruction.

        Returns
        -------
        OODResult
        """
        taus = np.asarray(
            [check_in_range(t, "thresholds", -1.0, 1.0, closed="both") for t in self.thresholds]
        )
        if taus.size == 0:
            raise InvalidInputError("`thresholds` must name at least one test model.")
        tau_d = check_in_range(self.tau_d, "tau_d", 0.0, 1.0, closed="both")
        s = np.asarray(similarities, dtype=np.float64)
        if s.ndim != 2 or s.shape[1] != taus.size:
            raise InvalidInputError(
                f"`similarities` must have shape (n, {taus.size}); got {s.shape}."
            )
        p = np.asarray(detection, dtype=np.float64).ravel()
        if p.shape[0] != s.shape[0]:
            raise InvalidInputError(
                f"`detection` must have one score per input; got {p.shape[0]} vs {s.shape[0]}."
            )
        if s.shape[0] == 0:
            raise InvalidInputError("`similarities` must hold at least one input.")
        ood1: npt.NDArray[np.bool_] = np.asarray((s < taus[None, :]).all(axis=1))
        ood2: npt.NDArray[np.bool_] = np.asarray(p < tau_d)
        ood = ood1 | ood2
        return OODResult(ood1, ood2, ood, float(ood1.mean()), float(ood2.mean()), float(ood.mean()))
