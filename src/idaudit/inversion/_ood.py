"""Out-of-domain detection from an inversion: matching and face-detection failures."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np
import numpy.typing as npt

from idaudit._results import Status
from idaudit._validation import check_in_range
from idaudit.exceptions import InvalidInputError

__all__ = ["OODDetector", "OODResult"]


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
        given: object = thresholds  # the annotation is the promise; check what was passed
        if isinstance(given, str) or not isinstance(given, Iterable):
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
