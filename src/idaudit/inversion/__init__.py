"""Embedding inversion (seed 002, DiffUMI): rebuild a face of the right identity from an embedding.

* Generators (:class:`LatentGenerator`): :class:`DiffusionGenerator` (a diffusers UNet sampled
  by deterministic, differentiable DDIM) and :class:`DCGANGenerator` (the shipped 64×64 DCGAN);
  :class:`FrameWarp` carries generated images onto an encoder's aligned crop.
* Step (a): :class:`LatentBank` (K² normality via :func:`dagostino_k2`, then face detection).
* Steps (b)–(c): :class:`RankedAdversary` → :class:`InversionResult`, with the attacks
  :class:`APGD` (white-box) and :class:`GreedyPixel` (black-box); :func:`max_iterations` (Eq. 18);
  :func:`calibrate_radius`.
* Evaluation: :func:`eer_threshold`, :func:`fmr_thresholds` (fixed false-match-rate operating
  points), :func:`proportion_interval` (exact Clopper–Pearson),
  :func:`mean_rate_interval` (betting, a mean of rates), :func:`attack_threshold`
  (Eq. 14), :func:`type_accuracy`
  (Type I / II), :func:`identity_scores` (rank-1 identification and own-vs-other margins),
  :func:`joint_evaluation`, :func:`reference_bounds` and :class:`OODDetector`;
  :func:`results_to_xarray` stacks :class:`InversionResult` objects into one Dataset.

``__all__`` lists these and the result classes they return (:class:`AttackOutput`,
:class:`RadiusCalibration`, :class:`EERResult`, :class:`FMRResult`, :class:`TypeAccuracy`,
:class:`OODResult`).
"""

from __future__ import annotations

from idaudit.inversion._adversary import BLACK_BOX_BUDGET as BLACK_BOX_BUDGET
from idaudit.inversion._adversary import (
    InversionResult,
    RankedAdversary,
    max_iterations,
    results_to_xarray,
)
from idaudit.inversion._attacks import APGD, AttackOutput, GreedyPixel
from idaudit.inversion._bank import LatentBank
from idaudit.inversion._calibrate import RadiusCalibration, calibrate_radius
from idaudit.inversion._evaluation import (
    TypeAccuracy,
    identity_scores,
    joint_evaluation,
    reference_bounds,
    type_accuracy,
)
from idaudit.inversion._generators import DCGANGenerator, DiffusionGenerator, LatentGenerator
from idaudit.inversion._normality import dagostino_k2
from idaudit.inversion._ood import OODDetector, OODResult
from idaudit.inversion._thresholds import (
    EERResult,
    FMRResult,
    attack_threshold,
    eer_threshold,
    fmr_thresholds,
    mean_rate_interval,
    proportion_interval,
)
from idaudit.inversion._warp import FrameWarp

__all__ = [
    "APGD",
    "AttackOutput",
    "DCGANGenerator",
    "DiffusionGenerator",
    "EERResult",
    "FMRResult",
    "FrameWarp",
    "GreedyPixel",
    "InversionResult",
    "LatentBank",
    "LatentGenerator",
    "OODDetector",
    "OODResult",
    "RadiusCalibration",
    "RankedAdversary",
    "TypeAccuracy",
    "attack_threshold",
    "calibrate_radius",
    "dagostino_k2",
    "eer_threshold",
    "fmr_thresholds",
    "identity_scores",
    "joint_evaluation",
    "max_iterations",
    "mean_rate_interval",
    "proportion_interval",
    "reference_bounds",
    "results_to_xarray",
    "type_accuracy",
]
