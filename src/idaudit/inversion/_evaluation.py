"""Type I / II accuracy, rank-1 identification, the joint target × test evaluation."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np
import numpy.typing as npt
import xarray as xr

from idaudit._results import Status, provenance, variable
from idaudit._validation import check_in_range, check_integer
from idaudit.exceptions import InvalidInputError
from idaudit.inversion._thresholds import (
    EERResult,
    FMRResult,
    _unit_rows,
    mean_rate_interval,
    proportion_interval,
)

__all__ = [
    "MIN_GENUINE_PAIRS",
    "TypeAccuracy",
    "identity_scores",
    "joint_evaluation",
    "reference_bounds",
    "type_accuracy",
]


#: Fewest genuine pairs behind ``τ_F`` for which Type I / II are reported. With 30 genuine
#: pairs and no observed error, the exact two-sided 95 % interval on the FRR still reaches
#: 0.116 (``1 − 0.025^{1/30}``); with the demo's former 12 it reached 0.265.
MIN_GENUINE_PAIRS = 30

_Rows = npt.NDArray[np.float64]  # (n, dim) unit rows


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
    type_i_low, type_i_high : float
        Exact two-sided Clopper–Pearson interval at ``confidence_level`` for Type I: matched
        targets out of ``n_targets``. Exact when the targets are independent and ``τ_F``
        was fixed on other data, which the function cannot check: ``diagnostic``.
    type_ii_low, type_ii_high : float
        Interval at ``confidence_level`` for ``type_ii`` itself, the mean of the per-target
        rates: the betting interval over the targets (:func:`mean_rate_interval`), valid at
        every number of targets when they are independent (the images of one identity share
        a reconstruction, so pooling their pairs into one binomial would not be). Not exact;
        ``diagnostic`` as Type I's, since ``τ_F`` may come from the same data.
    n_type_ii_pairs : int
        (reconstruction, other image) pairs behind Type II.
    confidence_level : float
    """

    type_i: float
    type_ii: float
    per_target_i: npt.NDArray[np.bool_] = field(repr=False)
    per_target_ii: npt.NDArray[np.float64] = field(repr=False)
    threshold: float
    n_targets: int
    n_type_ii: int
    type_i_low: float = float("nan")
    type_i_high: float = float("nan")
    type_ii_low: float = float("nan")
    type_ii_high: float = float("nan")
    n_type_ii_pairs: int = 0
    confidence_level: float = 0.95
    STATUS: ClassVar[dict[str, Status]] = {
        "type_i": "sample_estimate",
        "type_ii": "sample_estimate",
        "type_i_low": "diagnostic",
        "type_i_high": "diagnostic",
        "type_ii_low": "diagnostic",
        "type_ii_high": "diagnostic",
        "n_targets": "descriptive",
        "n_type_ii": "descriptive",
        "n_type_ii_pairs": "descriptive",
    }


def _embeddings(
    reconstructions: Any, targets: Any, others: Any
) -> tuple[_Rows, _Rows, list[_Rows | None]]:
    """Reconstructions, targets and galleries (``None`` for no image) as checked unit rows."""
    rec = _unit_rows(reconstructions, "reconstructions")
    n, dim = rec.shape
    tgt = _unit_rows(targets, "targets", dim)
    if tgt.shape[0] != n:
        raise InvalidInputError(
            f"`targets` must have one row per reconstruction; got {tgt.shape[0]} vs {n}."
        )
    if isinstance(others, np.ndarray) and others.ndim != 3:
        raise InvalidInputError(
            f"`others` must hold one (J_i, dim) array per reconstruction; got an array of "
            f"shape {others.shape}."
        )
    items = list(others)
    if len(items) != n:
        raise InvalidInputError(
            f"`others` must hold one array per reconstruction; got {len(items)} vs {n}."
        )
    out: list[_Rows | None] = []
    for i, o in enumerate(items):
        arr = np.asarray(o, dtype=np.float64)
        if arr.size == 0:
            if arr.ndim == 2 and arr.shape[1] != dim:
                raise InvalidInputError(
                    f"`others[{i}]` must have dimension {dim}; got an empty {arr.shape} array."
                )
            out.append(None)
        else:
            out.append(_unit_rows(arr, f"others[{i}]", dim))
    return rec, tgt, out


def _threshold(threshold: float | EERResult, min_genuine: int) -> float:
    min_genuine = check_integer(min_genuine, "min_genuine", minimum=1)
    if isinstance(threshold, EERResult):
        if threshold.n_genuine < min_genuine:
            raise InvalidInputError(
                f"`threshold` comes from {threshold.n_genuine} genuine pairs, fewer than "
                f"`min_genuine` {min_genuine}: Type I / II at such a tau_F are not reported. "
                "Use more images per identity to set tau_F."
            )
        threshold = threshold.threshold
    return check_in_range(threshold, "threshold", -1.0, 1.0, closed="both")


def type_accuracy(
    reconstructions: npt.ArrayLike,
    targets: npt.ArrayLike,
    others: Sequence[npt.ArrayLike],
    threshold: float | EERResult,
    *,
    min_genuine: int = MIN_GENUINE_PAIRS,
    confidence_level: float = 0.95,
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
    threshold : float or EERResult
        ``τ_F`` of the test model, in [−1, 1]. An :class:`EERResult` is refused when it rests
        on fewer than ``min_genuine`` genuine pairs; a plain float is taken as given.
    min_genuine : int, default MIN_GENUINE_PAIRS (30)
        Fewest genuine pairs behind an :class:`EERResult` threshold.
    confidence_level : float, default 0.95
        Of the intervals on Type I (exact Clopper–Pearson) and Type II (betting, over
        targets).

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
    tau = _threshold(threshold, min_genuine)
    rec, tgt, galleries = _embeddings(reconstructions, targets, others)
    match_i = (rec * tgt).sum(axis=1) >= tau
    per_ii = np.full(rec.shape[0], np.nan)
    pairs = 0
    for t, g in enumerate(galleries):
        if g is not None:
            matched = g @ rec[t] >= tau
            per_ii[t] = float(np.mean(matched))
            pairs += int(matched.size)
    has = ~np.isnan(per_ii)
    i_low, i_high = proportion_interval(int(match_i.sum()), int(rec.shape[0]), confidence_level)
    # over targets: Type II averages per-target rates, and one target's pairs share x̂
    ii_low, ii_high = mean_rate_interval(per_ii[has], confidence_level)
    return TypeAccuracy(
        type_i=float(match_i.mean()),
        type_ii=float(per_ii[has].mean()) if has.any() else float("nan"),
        per_target_i=match_i,
        per_target_ii=per_ii,
        threshold=tau,
        n_targets=int(rec.shape[0]),
        n_type_ii=int(has.sum()),
        type_i_low=i_low,
        type_i_high=i_high,
        type_ii_low=ii_low,
        type_ii_high=ii_high,
        n_type_ii_pairs=pairs,
        confidence_level=float(confidence_level),
    )


def identity_scores(
    reconstructions: npt.ArrayLike,
    targets: npt.ArrayLike,
    others: Sequence[npt.ArrayLike],
    *,
    names: Sequence[str] | None = None,
) -> xr.Dataset:
    """Rank-1 identification and own-vs-other margins: does a reconstruction find *its* identity.

    Parameters
    ----------
    reconstructions : array_like, shape (I, dim)
        Embeddings ``F(x̂_i)`` of the reconstructions.
    targets : array_like, shape (I, dim)
        Embeddings of the target images ``F(x^T_j)``.
    others : sequence of I array_like, each (J_j, dim)
        The gallery: each identity's *other* images (for synthetic identities, held-out
        images of each identity). ``J_j`` may be 0.
    names : sequence of str, optional
        Target names (default ``"0"``, ``"1"``, …).

    Returns
    -------
    xarray.Dataset
        Dims ``target`` (the reconstruction) and ``candidate`` (the identity compared with):

        * ``similarity`` (target, candidate): ``S(F(x̂_i), F(x^T_j))``, the own-vs-other matrix.
        * ``margin`` (target): own target minus the best other target,
          ``S_ii − max_{j≠i} S_ij`` (> 0: closer to its own target than to any other).
        * ``gallery_similarity`` (target, candidate): mean cosine of ``x̂_i`` to identity ``j``'s
          other images (NaN when ``J_j = 0``); ``gallery_margin``: its own-minus-best-other.
        * ``rank1`` (target): 1 when the nearest image of the gallery of all identities'
          other images belongs to identity ``i`` (NaN when ``J_i = 0``: it cannot be found).
        * ``rank1_rate``, ``mean_margin``, ``mean_gallery_margin``: means over the targets
          where defined; ``n_gallery``: gallery images.

    Notes
    -----
    Type I / II ask whether a reconstruction clears ``τ_F``; in a crowded embedding space a
    reconstruction can clear it for several identities. Rank-1 identification and the margin
    ask whether it is nearer its own identity than the others, with no threshold. Chance
    rank-1 is about ``1/I`` when the identities have similar gallery sizes.

    Examples
    --------
    >>> import numpy as np
    >>> from idaudit.inversion import identity_scores
    >>> e = np.eye(3)
    >>> ds = identity_scores(e[:2], e[:2], [e[[0]], e[[2]]])
    >>> ds.rank1.values.tolist(), float(ds.mean_margin)
    ([1.0, 0.0], 1.0)
    """
    rec, tgt, galleries = _embeddings(reconstructions, targets, others)
    n = rec.shape[0]
    labels = [str(k) for k in range(n)] if names is None else [str(x) for x in names]
    if len(labels) != n:
        raise InvalidInputError(f"`names` must name every target; got {len(labels)} vs {n}.")
    if len(set(labels)) != n:
        twice = sorted({x for x in labels if labels.count(x) > 1})
        raise InvalidInputError(f"`names` must be distinct; repeated: {twice}.")
    sim = rec @ tgt.T  # (I, I)
    gal_sim = np.full((n, n), np.nan)
    gallery, owner = [], []
    for j, g in enumerate(galleries):  # g: (J_j, dim) unit rows, or None
        if g is None:
            continue
        gal_sim[:, j] = (rec @ g.T).mean(axis=1)
        gallery.append(g)
        owner.extend([j] * g.shape[0])
    rank1 = np.full(n, np.nan)
    if gallery:
        nearest = np.asarray(owner)[np.argmax(rec @ np.concatenate(gallery).T, axis=1)]  # (I,)
        has = np.isfinite(gal_sim[np.arange(n), np.arange(n)])
        rank1[has] = (nearest == np.arange(n))[has]

    def margin(m: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
        off = np.where(np.eye(n, dtype=bool), np.nan, m)
        out = np.full(n, np.nan)
        if n > 1:
            for t in range(n):
                if np.isfinite(m[t, t]) and np.isfinite(off[t]).any():
                    out[t] = m[t, t] - np.nanmax(off[t])
        return out

    def mean(x: npt.NDArray[np.float64]) -> float:
        return float(np.nanmean(x)) if np.isfinite(x).any() else float("nan")

    m_t, m_g = margin(sim), margin(gal_sim)
    dims = ("target", "candidate")
    return xr.Dataset(
        {
            "similarity": variable(
                dims, sim, long_name="cosine of reconstruction to target", status="sample_estimate"
            ),
            "margin": variable(
                "target",
                m_t,
                long_name="own-target minus best other-target similarity",
                status="sample_estimate",
            ),
            "gallery_similarity": variable(
                dims,
                gal_sim,
                long_name="mean cosine of reconstruction to the identity's other images",
                status="sample_estimate",
            ),
            "gallery_margin": variable(
                "target",
                m_g,
                long_name="own minus best other identity, over other images",
                status="sample_estimate",
            ),
            "rank1": variable(
                "target",
                rank1,
                long_name="rank-1 identification in the gallery of other images",
                status="sample_estimate",
            ),
            "rank1_rate": variable(
                (), mean(rank1), long_name="rank-1 identification rate", status="sample_estimate"
            ),
            "mean_margin": variable(
                (), mean(m_t), long_name="mean own-vs-other margin", status="sample_estimate"
            ),
            "mean_gallery_margin": variable(
                (),
                mean(m_g),
                long_name="mean own-vs-other margin over other images",
                status="sample_estimate",
            ),
            "n_gallery": variable((), len(owner), long_name="gallery images", status="descriptive"),
        },
        coords={"target": labels, "candidate": labels},
        attrs=provenance(title="identity_scores"),
    )


def joint_evaluation(
    reconstructions: Mapping[str, Mapping[str, npt.ArrayLike]],
    targets: Mapping[str, npt.ArrayLike],
    others: Mapping[str, Sequence[npt.ArrayLike]],
    thresholds: Mapping[str, float | EERResult],
    *,
    same_weights: Iterable[tuple[str, str]] = (),
    min_genuine: int = MIN_GENUINE_PAIRS,
    operating_points: Mapping[str, FMRResult] | None = None,
    confidence_level: float = 0.95,
) -> xr.Dataset:
    """Type I / II and identification for every target model × test model (Sec. IV, Tab. III).

    Parameters
    ----------
    reconstructions : mapping
        ``reconstructions[target_model][test_model]``: ``(I, dim_test)`` test-model embeddings
        of the reconstructions made against ``target_model``.
    targets : mapping
        ``targets[test_model]``: ``(I, dim_test)`` embeddings of the target images.
    others : mapping
        ``others[test_model]``: per target, the identity's other images' embeddings (the
        gallery of :func:`identity_scores`; held-out images for synthetic identities).
    thresholds : mapping
        ``thresholds[test_model]``: ``τ_F``, a float or an :class:`EERResult` (refused below
        ``min_genuine`` genuine pairs, see :func:`type_accuracy`).
    same_weights : iterable of (str, str), optional
        ``(target_model, test_model)`` pairs that are the same network (for instance a torch
        port and its C++ original). A model name shared by both axes counts too. Such a test
        model is no independent check: it is recorded in ``same_weights`` and in the attrs.
    min_genuine : int, default MIN_GENUINE_PAIRS (30)
    operating_points : mapping, optional
        ``operating_points[test_model]``: an :class:`FMRResult` of that test model
        (:func:`fmr_thresholds`), all with the same rates. Type I / II are then also given at
        each fixed-FMR threshold (dim ``fmr``).
    confidence_level : float, default 0.95
        Of the exact Clopper–Pearson intervals.

    Returns
    -------
    xarray.Dataset
        Dims ``target_model`` and ``test_model``; variables ``type_i``, ``type_ii``, their
        exact intervals ``type_i_low``/``type_i_high``/``type_ii_low``/``type_ii_high``
        (``diagnostic``, see :class:`TypeAccuracy`),
        ``rank1`` (rank-1 identification rate), ``margin`` and ``gallery_margin`` (mean
        own-vs-other margins), all sample estimates; ``similarity`` with dims
        ``(target_model, test_model, target, candidate)`` (the own-vs-other matrix);
        ``same_weights`` (bool) and ``n_targets``; ``type_i_avg`` / ``type_ii_avg`` over test
        models (the target model included: the joint evaluation's "Avg."). The attr
        ``same_weights`` lists the shared-weight pairs as ``"target=test"`` (``"none"``).
        With ``operating_points``: ``fmr_threshold`` (test_model, fmr), ``type_i_fmr``,
        ``type_ii_fmr`` and their ``_low``/``_high`` ends (target_model, test_model, fmr);
        NaN where a rate is not resolved.
    """
    target_models = list(reconstructions)
    test_models = list(thresholds)
    if not target_models or not test_models:
        raise InvalidInputError("`reconstructions` and `thresholds` must not be empty.")
    _check_model_names(reconstructions, test_models, same_weights)
    for name, mapping in (("targets", targets), ("others", others)):
        missing = [m for m in test_models if m not in mapping]
        if missing:
            raise InvalidInputError(
                f"`{name}` has no entry for test model(s) {missing}; every test model in "
                "`thresholds` needs its target embeddings and gallery."
            )
    shared = {(str(a), str(b)) for a, b in same_weights}
    shared |= {(m, m) for m in target_models if m in test_models}
    points = _check_points(operating_points, test_models)
    t1 = np.full((len(target_models), len(test_models)), np.nan)
    t2, r1, mg, gm = (np.full_like(t1, np.nan) for _ in range(4))
    ends = {k: np.full_like(t1, np.nan) for k in ("i_low", "i_high", "ii_low", "ii_high")}
    n_fmr = 0 if points is None else len(points[test_models[0]].fmr_target)
    at_fmr = {
        k: np.full((len(target_models), len(test_models), n_fmr), np.nan)
        for k in ("type_i", "type_ii", "i_low", "i_high", "ii_low", "ii_high")
    }
    counts = np.zeros_like(t1, dtype=np.int64)
    same = np.zeros_like(t1, dtype=bool)
    n_i = None
    mats: list[list[npt.NDArray[np.float64]]] = []
    for a, tm in enumerate(target_models):
        row = []
        for b, sm in enumerate(test_models):
            if sm not in reconstructions[tm]:
                raise InvalidInputError(
                    f"`reconstructions[{tm!r}]` has no embeddings for test model {sm!r}."
                )
            acc = type_accuracy(
                reconstructions[tm][sm],
                targets[sm],
                others[sm],
                thresholds[sm],
                min_genuine=min_genuine,
                confidence_level=confidence_level,
            )
            ends["i_low"][a, b], ends["i_high"][a, b] = acc.type_i_low, acc.type_i_high
            ends["ii_low"][a, b], ends["ii_high"][a, b] = acc.type_ii_low, acc.type_ii_high
            if points is not None:
                for j, tau_j in enumerate(points[sm].threshold):
                    if np.isnan(tau_j):
                        continue  # not resolved
                    if tau_j > 1.0:  # "reject all" (+inf): no cosine reaches it
                        i_ends = proportion_interval(0, acc.n_targets, confidence_level)
                        ii_ends = mean_rate_interval(np.zeros(acc.n_type_ii), confidence_level)
                        values = (0.0, 0.0 if acc.n_type_ii else np.nan, *i_ends, *ii_ends)
                    else:
                        got = type_accuracy(
                            reconstructions[tm][sm],
                            targets[sm],
                            others[sm],
                            float(tau_j),
                            confidence_level=confidence_level,
                        )
                        values = (
                            got.type_i,
                            got.type_ii,
                            got.type_i_low,
                            got.type_i_high,
                            got.type_ii_low,
                            got.type_ii_high,
                        )
                    for key, val in zip(
                        ("type_i", "type_ii", "i_low", "i_high", "ii_low", "ii_high"),
                        values,
                        strict=True,
                    ):
                        at_fmr[key][a, b, j] = val
            ids = identity_scores(reconstructions[tm][sm], targets[sm], others[sm])
            if n_i is not None and acc.n_targets != n_i:
                raise InvalidInputError(
                    f"every target and test model must hold the same targets; got "
                    f"{acc.n_targets} vs {n_i}."
                )
            n_i = acc.n_targets
            t1[a, b], t2[a, b], counts[a, b] = acc.type_i, acc.type_ii, acc.n_targets
            r1[a, b] = float(ids.rank1_rate)
            mg[a, b] = float(ids.mean_margin)
            gm[a, b] = float(ids.mean_gallery_margin)
            same[a, b] = (tm, sm) in shared
            row.append(ids.similarity.values)
        mats.append(row)
    ds = _joint_dataset(
        {"type_i": t1, "type_ii": t2, "rank1": r1, "margin": mg, "gallery_margin": gm},
        np.asarray(mats),
        same,
        counts,
        [_threshold(thresholds[m], min_genuine) for m in test_models],
        target_models,
        test_models,
        n_i or 0,
    )
    ds.attrs["same_weights"] = ", ".join(f"{a}={b}" for a, b in sorted(shared)) or "none"
    ds.attrs["confidence_level"] = float(confidence_level)
    dims = ("target_model", "test_model")
    for key, name, what in (
        ("i_low", "type_i_low", "Type I"),
        ("i_high", "type_i_high", "Type I"),
        ("ii_low", "type_ii_low", "Type II (betting, over targets)"),
        ("ii_high", "type_ii_high", "Type II (betting, over targets)"),
    ):
        side = "lower" if key.endswith("low") else "upper"
        exact = "exact " if what == "Type I" else ""
        ds[name] = variable(
            dims,
            ends[key],
            long_name=f"{exact}{side} end of the {what} interval",
            status="diagnostic",
        )
    if points is not None:
        ds = ds.assign_coords(fmr=points[test_models[0]].fmr_target)
        ds["fmr_threshold"] = variable(
            ("test_model", "fmr"),
            np.stack([points[m].threshold for m in test_models]),
            long_name="decision threshold at the false-match rate",
            status="sample_estimate",
        )
        fdims = (*dims, "fmr")
        rows: tuple[tuple[str, str, str, Status], ...] = (
            ("type_i", "type_i_fmr", "Type I accuracy at the FMR threshold", "sample_estimate"),
            ("type_ii", "type_ii_fmr", "Type II accuracy at the FMR threshold", "sample_estimate"),
            ("i_low", "type_i_fmr_low", "exact lower end of Type I at the FMR", "diagnostic"),
            ("i_high", "type_i_fmr_high", "exact upper end of Type I at the FMR", "diagnostic"),
            ("ii_low", "type_ii_fmr_low", "lower end of Type II at the FMR", "diagnostic"),
            ("ii_high", "type_ii_fmr_high", "upper end of Type II at the FMR", "diagnostic"),
        )
        for key, name, label, status in rows:
            ds[name] = variable(fdims, at_fmr[key], long_name=label, status=status)
    return ds


def _check_points(
    points: Mapping[str, FMRResult] | None, test_models: list[str]
) -> Mapping[str, FMRResult] | None:
    """Every test model has an :class:`FMRResult`, all at the same rates."""
    if points is None:
        return None
    missing = [m for m in test_models if m not in points]
    if missing:
        raise InvalidInputError(f"`operating_points` has no FMRResult for test model(s) {missing}.")
    bad = [m for m in test_models if not isinstance(points[m], FMRResult)]
    if bad:
        raise TypeError(f"`operating_points[{bad[0]!r}]` must be an FMRResult (fmr_thresholds).")
    first = points[test_models[0]].fmr_target
    if any(not np.array_equal(points[m].fmr_target, first) for m in test_models):
        raise InvalidInputError("every FMRResult in `operating_points` must use the same rates.")
    return points


def _check_model_names(
    reconstructions: Mapping[str, Mapping[str, Any]],
    test_models: list[Any],
    same_weights: Iterable[tuple[str, str]],
) -> None:
    """Model names are strings; every test model has a threshold; shared pairs exist."""
    target_models = list(reconstructions)
    bad = [m for m in (*target_models, *test_models) if not isinstance(m, str)]
    if bad:
        raise InvalidInputError(f"model names must be strings; got {bad[0]!r}.")
    for tm in target_models:
        extra = [m for m in reconstructions[tm] if m not in test_models]
        if extra:
            raise InvalidInputError(
                f"`reconstructions[{tm!r}]` has test model(s) {extra} without a threshold in "
                "`thresholds`: give one or drop them."
            )
    for pair in same_weights:
        a, b = pair
        if a not in target_models or b not in test_models:
            raise InvalidInputError(
                f"`same_weights` pair ({a!r}, {b!r}) must be (target model, test model) of "
                f"{target_models} and {test_models}."
            )


def _joint_dataset(
    rates: dict[str, npt.NDArray[np.float64]],
    similarity: npt.NDArray[np.float64],
    same: npt.NDArray[np.bool_],
    counts: npt.NDArray[np.int64],
    taus: list[float],
    target_models: list[str],
    test_models: list[str],
    n_targets: int,
) -> xr.Dataset:
    """Assemble :func:`joint_evaluation`'s Dataset from its per-(target, test model) arrays."""
    t1, t2 = rates["type_i"], rates["type_ii"]
    r1, mg, gm = rates["rank1"], rates["margin"], rates["gallery_margin"]
    dims = ("target_model", "test_model")
    kw: dict[str, Any] = {"status": "sample_estimate"}
    ds = xr.Dataset(
        {
            "type_i": variable(dims, t1, long_name="Type I accuracy", **kw),
            "type_ii": variable(dims, t2, long_name="Type II accuracy", **kw),
            "rank1": variable(
                dims, r1, long_name="rank-1 identification rate among other images", **kw
            ),
            "margin": variable(
                dims, mg, long_name="mean own-target minus best other-target similarity", **kw
            ),
            "gallery_margin": variable(
                dims, gm, long_name="mean own minus best other identity, over other images", **kw
            ),
            "similarity": variable(
                (*dims, "target", "candidate"),
                similarity,
                long_name="cosine of each reconstruction to each target",
                **kw,
            ),
            "same_weights": variable(
                dims,
                same,
                long_name="test model has the target model's weights",
                status="descriptive",
            ),
            "n_targets": variable(dims, counts, long_name="targets", status="descriptive"),
            "type_i_avg": variable(
                "target_model",
                t1.mean(axis=1),
                long_name="Type I accuracy averaged over test models",
                **kw,
            ),
            "type_ii_avg": variable(
                "target_model",
                t2.mean(axis=1),
                long_name="Type II accuracy averaged over test models",
                **kw,
            ),
            "threshold": variable(
                "test_model",
                taus,
                long_name="tau_F of the test model",
                status="descriptive",
            ),
        },
        coords={
            "target_model": target_models,
            "test_model": test_models,
            "target": np.arange(n_targets),
            "candidate": np.arange(n_targets),
        },
        attrs=provenance(title="joint_evaluation"),
    )
    return ds


def reference_bounds(
    targets: npt.ArrayLike,
    others: Sequence[npt.ArrayLike],
    random: npt.ArrayLike,
    threshold: float | EERResult,
    *,
    min_genuine: int = MIN_GENUINE_PAIRS,
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
    tau = _threshold(threshold, min_genuine)
    orig = type_accuracy(tgt, tgt, others, tau)
    rand = type_accuracy(rnd, tgt, others, tau)
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
        attrs=provenance(title="reference_bounds", settings={"threshold": tau}),
    )
