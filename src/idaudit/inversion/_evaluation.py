"""Thresholds, Type I / II accuracy, the joint target × test evaluation and OOD detection."""

from __future__ import annotations

import math
import warnings
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

import numpy as np
import numpy.typing as npt
import xarray as xr

from idaudit._results import Status, provenance, variable
from idaudit._validation import check_in_range, check_integer
from idaudit.dp import betting_mean_lower_bound, clopper_pearson_lower, clopper_pearson_upper
from idaudit.exceptions import IdauditWarning, InvalidInputError

__all__ = [
    "MIN_GENUINE_PAIRS",
    "EERResult",
    "FMRResult",
    "OODDetector",
    "OODResult",
    "TypeAccuracy",
    "attack_threshold",
    "eer_threshold",
    "fmr_thresholds",
    "identity_scores",
    "joint_evaluation",
    "mean_rate_interval",
    "proportion_interval",
    "reference_bounds",
    "type_accuracy",
]


#: Fewest genuine pairs behind ``τ_F`` for which Type I / II are reported. With 30 genuine
#: pairs and no observed error, the exact two-sided 95 % interval on the FRR still reaches
#: 0.116 (``1 − 0.025^{1/30}``); with the demo's former 12 it reached 0.265.
MIN_GENUINE_PAIRS = 30


def _scores(x: Any, name: str) -> npt.NDArray[np.float64]:
    try:
        arr = np.asarray(x, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise InvalidInputError(f"`{name}` must hold numbers; got {x!r:.60}.") from exc
    if arr.ndim > 1:
        raise InvalidInputError(f"`{name}` must be one-dimensional; got shape {arr.shape}.")
    arr = arr.ravel()
    if arr.size == 0:
        raise InvalidInputError(f"`{name}` must hold at least one score.")
    if not np.isfinite(arr).all():
        raise InvalidInputError(f"`{name}` must be finite; got NaN or inf.")
    return arr


def _unit_rows(x: Any, name: str, dim: int | None = None) -> npt.NDArray[np.float64]:
    arr = np.asarray(x, dtype=np.float64)
    if arr.ndim == 1:
        arr = arr[None]
    if arr.ndim != 2 or arr.shape[0] == 0:
        raise InvalidInputError(f"`{name}` must have shape (n, dim) with n >= 1; got {arr.shape}.")
    if dim is not None and arr.shape[1] != dim:
        raise InvalidInputError(f"`{name}` must have dimension {dim}; got {arr.shape[1]} vs {dim}.")
    norms = np.linalg.norm(arr, axis=1, keepdims=True)
    if not np.isfinite(arr).all() or (norms <= 1e-12).any():
        raise InvalidInputError(f"`{name}` rows must be finite and non-zero.")
    out: npt.NDArray[np.float64] = arr / norms
    return out


@dataclass(frozen=True)
class EERResult:
    """The threshold at the equal error rate, with its counts and an exact interval.

    Attributes
    ----------
    threshold : float
        ``τ_F``: pairs with similarity ``≥ τ_F`` are called the same person.
    eer : float
        The equal error rate (sample estimate; see :func:`eer_threshold` for the rule).
    far, frr : float
        False-accept rate of impostor pairs and false-reject rate of genuine pairs at ``τ_F``.
    n_genuine, n_impostor : int
        Pairs behind the estimate.
    eer_low, eer_high : float
        Exact interval for ``(FAR + FRR) / 2`` at ``τ_F``: Clopper–Pearson intervals for the
        two rates at level ``1 − (1 − confidence_level)/2`` each, averaged (Bonferroni). It
        treats ``τ_F`` as fixed although it was chosen on the same scores: ``diagnostic``.
    method : str
        ``"interpolate"``, ``"midpoint"`` (zero-error range) or ``"empirical"``.
    confidence_level : float
    """

    threshold: float
    eer: float
    far: float
    frr: float
    n_genuine: int
    n_impostor: int
    eer_low: float = float("nan")
    eer_high: float = float("nan")
    method: str = "empirical"
    confidence_level: float = 0.95
    STATUS: ClassVar[dict[str, Status]] = {
        "threshold": "sample_estimate",
        "eer": "sample_estimate",
        "far": "sample_estimate",
        "frr": "sample_estimate",
        "n_genuine": "descriptive",
        "n_impostor": "descriptive",
        "eer_low": "diagnostic",
        "eer_high": "diagnostic",
    }


def eer_threshold(
    genuine: npt.ArrayLike,
    impostor: npt.ArrayLike,
    *,
    method: Literal["interpolate", "empirical"] = "interpolate",
    confidence_level: float = 0.95,
) -> EERResult:
    """``τ_F`` at the equal error rate of genuine and impostor similarities.

    Parameters
    ----------
    genuine : array_like
        Similarities of same-identity pairs.
    impostor : array_like
        Similarities of different-identity pairs.
    method : {"interpolate", "empirical"}, default "interpolate"
        How ``τ_F`` and the EER are read off the ROC (Notes).
    confidence_level : float, default 0.95
        Of the exact interval ``[eer_low, eer_high]``.

    Returns
    -------
    EERResult

    Notes
    -----
    With ``FAR(τ) = #{impostor ≥ τ}/n_i`` and ``FRR(τ) = #{genuine < τ}/n_g`` at every
    observed score (and +∞), ``d(τ) = FAR − FRR`` rises as ``τ`` falls.

    * ``"interpolate"``: between the last ROC point with ``d < 0`` and the first with
      ``d ≥ 0`` the point ``s = −d₀/(d₁ − d₀)`` of the way along the segment gives the EER
      ``FAR₀ + s(FAR₁ − FAR₀)`` (DiffMI's EER: the root of ``1 − x = TPR(x)`` on the
      piecewise-linear ROC) and ``τ_F = τ₀ + s(τ₁ − τ₀)`` (idaudit's rule; DiffMI
      interpolates its thresholds over FPR instead, which on an untied ROC returns a
      segment's end, so its τ_F can differ while the EER agrees). On the first segment
      (from ``τ = +∞``) ``τ_F`` is the highest score: no finite ``τ`` above it decides
      differently. When genuine and impostor
      scores separate (EER 0), every ``τ`` in ``(max impostor, min genuine]`` has no error
      and ``τ_F`` is the midpoint of that range (method ``"midpoint"``), not its strict end.
    * ``"empirical"``: the observed score minimising ``|FAR − FRR|`` (ties: the lowest
      ``FAR + FRR``, then the smallest ``τ``); EER = their mean there (scikit-learn's
      ``roc_curve`` convention).

    ``far``/``frr`` are the observed rates at the returned ``τ_F``, and the interval is built
    from those error counts.

    Examples
    --------
    >>> from idaudit.inversion import eer_threshold
    >>> r = eer_threshold([0.9, 0.8, 0.7, 0.3], [0.1, 0.2, 0.4, 0.6], method="empirical")
    >>> r.threshold, r.eer
    (0.6, 0.25)
    >>> eer_threshold([0.9, 0.8], [0.1, 0.2]).threshold  # zero-error range (0.2, 0.8]
    0.5
    """
    if method not in ("interpolate", "empirical"):
        raise InvalidInputError(f"`method` must be 'interpolate' or 'empirical'; got {method!r}.")
    level = check_in_range(confidence_level, "confidence_level", 0.0, 1.0)
    g = _scores(genuine, "genuine")
    i = _scores(impostor, "impostor")
    gs, is_ = np.sort(g), np.sort(i)

    def rates(tau: float) -> tuple[int, int]:  # (impostors accepted, genuine rejected)
        return (
            int(i.size - np.searchsorted(is_, tau, side="left")),
            int(np.searchsorted(gs, tau, side="left")),
        )

    cand = np.unique(np.concatenate([g, i, [np.inf]]))  # ascending
    frr = np.searchsorted(gs, cand, side="left") / g.size  # genuine < τ
    far = 1.0 - np.searchsorted(is_, cand, side="left") / i.size  # impostor ≥ τ
    used: str = method
    if method == "empirical":
        gap = np.abs(far - frr)
        tied = np.flatnonzero(gap == gap.min())
        k = int(tied[np.argmin(far[tied] + frr[tied])])  # first (smallest τ) of the lowest means
        tau, eer = float(cand[k]), float((far[k] + frr[k]) / 2.0)
    elif gs[0] > is_[-1]:  # separated: the zero-error range (max impostor, min genuine]
        tau, eer, used = float((gs[0] + is_[-1]) / 2.0), 0.0, "midpoint"
    else:
        d = (far - frr)[::-1]  # descending τ: rises from −1 (τ = +∞) to +1
        tau_desc = cand[::-1]
        k1 = int(np.argmax(d >= 0))  # first point at or past the crossing; k1 ≥ 1
        k0 = k1 - 1
        s_ = float(-d[k0] / (d[k1] - d[k0]))
        far_desc = far[::-1]
        eer = float(far_desc[k0] + s_ * (far_desc[k1] - far_desc[k0]))
        if np.isfinite(tau_desc[k0]):
            tau = float(tau_desc[k0] + s_ * (tau_desc[k1] - tau_desc[k0]))
        else:
            # Crossing on the first segment, from τ = +∞: every finite τ above the highest
            # score makes the same decisions (reject all), so τ_F is that score.
            tau = float(tau_desc[k1])
    n_fa, n_fr = rates(tau)
    a = (1.0 - level) / 2.0  # per rate: Bonferroni over the two
    lo = (
        float(clopper_pearson_lower(n_fa, i.size, a / 2))
        + float(clopper_pearson_lower(n_fr, g.size, a / 2))
    ) / 2.0
    hi = (
        float(clopper_pearson_upper(n_fa, i.size, a / 2))
        + float(clopper_pearson_upper(n_fr, g.size, a / 2))
    ) / 2.0
    return EERResult(
        threshold=tau,
        eer=eer,
        far=n_fa / i.size,
        frr=n_fr / g.size,
        n_genuine=int(g.size),
        n_impostor=int(i.size),
        eer_low=lo,
        eer_high=hi,
        method=used,
        confidence_level=level,
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


def proportion_interval(k: int, n: int, confidence_level: float = 0.95) -> tuple[float, float]:
    """Exact two-sided Clopper–Pearson interval for ``k`` successes out of ``n``.

    Each side is a one-sided exact bound at ``(1 − confidence_level)/2``; ``(nan, nan)``
    when ``n = 0``.

    Examples
    --------
    >>> from idaudit.inversion import proportion_interval
    >>> [round(v, 4) for v in proportion_interval(8, 8)]  # 8 of 8: [0.025^(1/8), 1]
    [0.6306, 1.0]
    """
    level = check_in_range(confidence_level, "confidence_level", 0.0, 1.0)
    n = check_integer(n, "n", minimum=0)
    k = check_integer(k, "k", minimum=0)
    if k > n:
        raise InvalidInputError(f"`k` must be <= `n` ({n}); got {k}.")
    if n == 0:
        return float("nan"), float("nan")
    a = (1.0 - level) / 2.0
    return float(clopper_pearson_lower(k, n, a)), float(clopper_pearson_upper(k, n, a))


def mean_rate_interval(
    rates: npt.ArrayLike, confidence_level: float = 0.95
) -> tuple[float, float]:
    """Two-sided interval for the mean of independent rates in [0, 1] (one per target).

    Each side is the betting bound of Waudby-Smith & Ramdas (2024) at
    ``(1 − confidence_level)/2`` (:func:`idaudit.dp.betting_mean_lower_bound`; the upper
    side on ``1 − rate``), in the order given: valid at every number of targets, for the
    quantity Type II's point estimate averages. ``(nan, nan)`` without a rate.

    Examples
    --------
    >>> from idaudit.inversion import mean_rate_interval
    >>> lo, hi = mean_rate_interval([0.2, 0.4, 0.0, 0.6, 0.2, 0.4, 0.2, 0.0] * 4)
    >>> bool(0.0 < lo < 0.25 < hi < 0.5)
    True
    """
    level = check_in_range(confidence_level, "confidence_level", 0.0, 1.0)
    x = np.asarray(rates, dtype=np.float64).ravel()
    if x.size == 0:
        return float("nan"), float("nan")
    a = (1.0 - level) / 2.0
    return betting_mean_lower_bound(x, a), 1.0 - betting_mean_lower_bound(1.0 - x, a)


def impostor_pairs_needed(fmr: float, confidence_level: float = 0.95) -> int:
    """Fewest impostor pairs for which zero false matches bound the FMR by ``fmr``.

    ``n ≥ ln(1 − confidence_level) / ln(1 − fmr)``: with fewer, even a run with no false
    match leaves the exact one-sided upper bound above ``fmr`` (the "rule of 3": about
    ``3/fmr`` at 95 %; ISO/IEC 19795-1).
    """
    return math.ceil(math.log(1.0 - confidence_level) / math.log1p(-fmr) - 1e-9)


@dataclass(frozen=True)
class FMRResult:
    """Decision thresholds at fixed false-match rates (ISO/IEC 19795-1 operating points).

    Attributes
    ----------
    fmr_target : numpy.ndarray of float64, shape (k,)
        The rates asked for.
    threshold : numpy.ndarray of float64, shape (k,)
        The lowest observed score ``τ`` with ``#{impostor ≥ τ} ≤ ⌊f · n_impostor⌋`` (``+inf``
        when only "reject all" qualifies); NaN where not resolved.
    fmr, fnmr : numpy.ndarray of float64, shape (k,)
        Observed false-match and false-non-match rates at ``threshold``.
    n_false_match, n_false_nonmatch : numpy.ndarray of int64, shape (k,)
    fmr_low, fmr_high, fnmr_low, fnmr_high : numpy.ndarray of float64, shape (k,)
        Exact two-sided Clopper–Pearson intervals at ``confidence_level`` (``diagnostic``:
        the threshold was read off the same scores).
    n_needed : numpy.ndarray of int64, shape (k,)
        Impostor pairs that resolve each rate at ``confidence_level``
        (:func:`impostor_pairs_needed`).
    resolved : numpy.ndarray of bool, shape (k,)
        ``n_impostor ≥ ⌈1/f⌉``: at least one false match can be afforded.
    n_genuine, n_impostor : int
    confidence_level : float
    """

    fmr_target: npt.NDArray[np.float64]
    threshold: npt.NDArray[np.float64]
    fmr: npt.NDArray[np.float64]
    fnmr: npt.NDArray[np.float64]
    n_false_match: npt.NDArray[np.int64]
    n_false_nonmatch: npt.NDArray[np.int64]
    fmr_low: npt.NDArray[np.float64]
    fmr_high: npt.NDArray[np.float64]
    fnmr_low: npt.NDArray[np.float64]
    fnmr_high: npt.NDArray[np.float64]
    n_needed: npt.NDArray[np.int64]
    resolved: npt.NDArray[np.bool_]
    n_genuine: int
    n_impostor: int
    confidence_level: float
    STATUS: ClassVar[dict[str, Status]] = {
        "threshold": "sample_estimate",
        "fmr": "sample_estimate",
        "fnmr": "sample_estimate",
        "fmr_low": "diagnostic",
        "fmr_high": "diagnostic",
        "fnmr_low": "diagnostic",
        "fnmr_high": "diagnostic",
        "n_false_match": "descriptive",
        "n_false_nonmatch": "descriptive",
        "n_needed": "descriptive",
        "resolved": "descriptive",
    }

    def to_xarray(self) -> xr.Dataset:
        """One Dataset with dim ``fmr`` (the target rates), every variable with its status.

        The observed rate :attr:`fmr` is the variable ``fmr_observed``.
        """
        names = {
            "threshold": "decision threshold at the false-match rate",
            "fmr": "observed false-match rate at the threshold",
            "fnmr": "observed false-non-match rate at the threshold",
            "fmr_low": "exact lower end of the FMR interval",
            "fmr_high": "exact upper end of the FMR interval",
            "fnmr_low": "exact lower end of the FNMR interval",
            "fnmr_high": "exact upper end of the FNMR interval",
            "n_false_match": "impostor pairs at or above the threshold",
            "n_false_nonmatch": "genuine pairs below the threshold",
            "n_needed": "impostor pairs that resolve the rate",
            "resolved": "enough impostor pairs for one false match",
        }
        # the observed FMR is stored as "fmr_observed": "fmr" is the dim of the target rates
        data = {
            ("fmr_observed" if k == "fmr" else k): variable(
                "fmr", getattr(self, k), long_name=v, status=self.STATUS[k]
            )
            for k, v in names.items()
        }
        return xr.Dataset(
            data,
            coords={"fmr": self.fmr_target},
            attrs=provenance(
                title="fmr_thresholds",
                settings={
                    "n_genuine": self.n_genuine,
                    "n_impostor": self.n_impostor,
                    "confidence_level": self.confidence_level,
                },
            ),
        )


def fmr_thresholds(
    genuine: npt.ArrayLike,
    impostor: npt.ArrayLike,
    fmr: Sequence[float] = (1e-3, 1e-4),
    *,
    confidence_level: float = 0.95,
) -> FMRResult:
    """Thresholds at fixed false-match rates, with their error counts and exact intervals.

    Parameters
    ----------
    genuine, impostor : array_like
        Similarities of same-identity and different-identity pairs.
    fmr : sequence of float, default (1e-3, 1e-4)
        False-match rates in (0, 1) (the ISO/IEC 19795-1 operating points face-recognition
        papers report besides the EER).
    confidence_level : float, default 0.95
        Of the intervals and of :func:`impostor_pairs_needed`.

    Returns
    -------
    FMRResult

    Warns
    -----
    IdauditWarning
        When a rate is not resolved (fewer than ``⌈1/f⌉`` impostor pairs: its threshold is
        NaN), or resolved with fewer than ``n_needed`` pairs (zero false matches would not
        bound the FMR by ``f``).

    Notes
    -----
    A pair with similarity ``≥ τ`` is a match. The threshold is the lowest observed score
    (genuine or impostor) or ``+inf`` whose false-match count ``#{impostor ≥ τ}`` is at most
    ``⌊f · n_impostor⌋``, so the FNMR is the lowest any observed threshold gives at an
    observed FMR ``≤ f``.

    Examples
    --------
    >>> import numpy as np
    >>> from idaudit.inversion import fmr_thresholds
    >>> rng = np.random.default_rng(0)
    >>> r = fmr_thresholds(rng.normal(0.6, 0.1, 500), rng.normal(0.0, 0.1, 40_000), [1e-3])
    >>> int(r.n_false_match[0]) <= 40, bool(r.resolved[0])
    (True, True)
    """
    level = check_in_range(confidence_level, "confidence_level", 0.0, 1.0)
    g = _scores(genuine, "genuine")
    i = _scores(impostor, "impostor")
    try:
        rates = np.asarray(fmr, dtype=np.float64).ravel()
    except (TypeError, ValueError):
        raise InvalidInputError(f"`fmr` must hold rates in (0, 1); got {fmr!r}.") from None
    if rates.size == 0 or not ((rates > 0) & (rates < 1)).all():
        raise InvalidInputError(f"`fmr` must hold rates in (0, 1); got {rates.tolist()}.")
    gs, is_ = np.sort(g), np.sort(i)
    cand = np.unique(np.concatenate([g, i, [np.inf]]))  # ascending
    fm_count = i.size - np.searchsorted(is_, cand, side="left")  # impostor ≥ τ, descending
    k = len(rates)
    out: dict[str, Any] = {
        "threshold": np.full(k, np.nan),
        "n_false_match": np.zeros(k, np.int64),
        "n_false_nonmatch": np.zeros(k, np.int64),
        **{name: np.full(k, np.nan) for name in ("fmr_low", "fmr_high", "fnmr_low", "fnmr_high")},
    }
    needed = np.array([impostor_pairs_needed(f, level) for f in rates], np.int64)
    resolved = i.size >= np.ceil(1.0 / rates - 1e-9)
    for j, f in enumerate(rates):
        if not resolved[j]:
            warnings.warn(
                f"FMR {f:g} is not resolved by {i.size} impostor pairs (one false match is "
                f"already 1/{i.size} > {f:g}); its threshold is NaN. It needs >= "
                f"{int(needed[j])} impostor pairs at {level:.0%}.",
                IdauditWarning,
                stacklevel=2,
            )
            continue
        if i.size < needed[j]:
            warnings.warn(
                f"FMR {f:g} rests on {i.size} impostor pairs, fewer than {int(needed[j])}: "
                f"even no false match would not bound the FMR by {f:g} at {level:.0%}.",
                IdauditWarning,
                stacklevel=2,
            )
        allowed = math.floor(f * i.size + 1e-9)
        tau = float(cand[int(np.argmax(fm_count <= allowed))])  # +inf qualifies always
        n_fm = int(i.size - np.searchsorted(is_, tau, side="left"))
        n_fnm = int(np.searchsorted(gs, tau, side="left"))
        out["threshold"][j] = tau
        out["n_false_match"][j], out["n_false_nonmatch"][j] = n_fm, n_fnm
        out["fmr_low"][j], out["fmr_high"][j] = proportion_interval(n_fm, i.size, level)
        out["fnmr_low"][j], out["fnmr_high"][j] = proportion_interval(n_fnm, g.size, level)
    fmr_obs = np.where(resolved, out["n_false_match"] / i.size, np.nan)
    fnmr_obs = np.where(resolved, out["n_false_nonmatch"] / g.size, np.nan)
    return FMRResult(
        fmr_target=rates,
        fmr=fmr_obs,
        fnmr=fnmr_obs,
        n_needed=needed,
        resolved=np.asarray(resolved, bool),
        n_genuine=int(g.size),
        n_impostor=int(i.size),
        confidence_level=level,
        **out,
    )


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


def _galleries(others: Any, n: int, dim: int) -> list[npt.NDArray[np.float64] | None]:
    """Each identity's other images as unit rows (``None`` when it has none), checked."""
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
    out: list[npt.NDArray[np.float64] | None] = []
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
    return out


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
    rec = _unit_rows(reconstructions, "reconstructions")
    tgt = _unit_rows(targets, "targets", rec.shape[1])
    if tgt.shape[0] != rec.shape[0]:
        raise InvalidInputError(
            f"`targets` must have one row per reconstruction; got {tgt.shape[0]} vs {rec.shape[0]}."
        )
    galleries = _galleries(others, rec.shape[0], rec.shape[1])
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
    rec = _unit_rows(reconstructions, "reconstructions")
    tgt = _unit_rows(targets, "targets", rec.shape[1])
    n = rec.shape[0]
    if tgt.shape[0] != n:
        raise InvalidInputError(
            f"`targets` must have one row per reconstruction; got {tgt.shape[0]} vs {n}."
        )
    galleries = _galleries(others, n, rec.shape[1])
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
        if isinstance(thresholds, str) or not isinstance(thresholds, Iterable):
            raise TypeError(
                f"`thresholds` must be a sequence of τ_F, one per test model; got "
                f"{type(thresholds).__name__}."
            )
        self.thresholds = list(thresholds)
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

        Raises
        ------
        InvalidInputError
            When a similarity or a detection score is NaN or infinite. A NaN compares false
            with every threshold and would be counted in-domain; it is refused instead of being
            counted either way.
        """
        taus = np.asarray(
            [check_in_range(t, "thresholds", -1.0, 1.0, closed="both") for t in self.thresholds]
        )
        if taus.size == 0:
            raise InvalidInputError("`thresholds` must name at least one test model.")
        tau_d = check_in_range(self.tau_d, "tau_d", 0.0, 1.0, closed="both")
        try:
            s = np.asarray(similarities, dtype=np.float64)
            p = np.asarray(detection, dtype=np.float64).ravel()
        except (TypeError, ValueError) as exc:
            raise InvalidInputError("`similarities` and `detection` must hold numbers.") from exc
        if s.ndim != 2 or s.shape[1] != taus.size:
            raise InvalidInputError(
                f"`similarities` must have shape (n, {taus.size}); got {s.shape}."
            )
        if p.shape[0] != s.shape[0]:
            raise InvalidInputError(
                f"`detection` must have one score per input; got {p.shape[0]} vs {s.shape[0]}."
            )
        if s.shape[0] == 0:
            raise InvalidInputError("`similarities` must hold at least one input.")
        # NaN compares False with every threshold, so it would count as in-domain: refuse it.
        if not np.isfinite(s).all():
            bad = int((~np.isfinite(s)).any(axis=1).sum())
            raise InvalidInputError(
                f"`similarities` must be finite; {bad} of {s.shape[0]} inputs hold NaN or inf."
            )
        if not np.isfinite(p).all():
            bad = int((~np.isfinite(p)).sum())
            raise InvalidInputError(
                f"`detection` must be finite; {bad} of {p.shape[0]} scores are NaN or inf "
                "(score 0 for an image where no face was found)."
            )
        if (np.abs(s) > 1.0 + 1e-6).any() or ((p < 0.0) | (p > 1.0)).any():
            raise InvalidInputError(
                "`similarities` must be cosines in [-1, 1] and `detection` probabilities in "
                f"[0, 1]; got ranges [{s.min():.4g}, {s.max():.4g}] and [{p.min():.4g}, "
                f"{p.max():.4g}]."
            )
        ood1: npt.NDArray[np.bool_] = np.asarray((s < taus[None, :]).all(axis=1))
        ood2: npt.NDArray[np.bool_] = np.asarray(p < tau_d)
        ood = ood1 | ood2
        return OODResult(ood1, ood2, ood, float(ood1.mean()), float(ood2.mean()), float(ood.mean()))
