"""Decision thresholds and exact intervals: τ_F at the EER, fixed-FMR operating points, τ_A."""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

import numpy as np
import numpy.typing as npt
import xarray as xr

from idaudit._results import Status, provenance, variable
from idaudit._validation import check_in_range, check_integer
from idaudit.dp import betting_mean_lower_bound, clopper_pearson_lower, clopper_pearson_upper
from idaudit.exceptions import IdauditWarning, InvalidInputError

__all__ = [
    "EERResult",
    "FMRResult",
    "attack_threshold",
    "eer_threshold",
    "fmr_thresholds",
    "impostor_pairs_needed",
    "mean_rate_interval",
    "proportion_interval",
]


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
