"""Embedding inversion (seed 002, DiffUMI): rebuild a face of the right identity from an embedding.

* Generators (:class:`LatentGenerator`): :class:`DiffusionGenerator` (a diffusers UNet sampled
  by deterministic, differentiable DDIM) and :class:`DCGANGenerator` (the shipped 64×64 DCGAN);
  :class:`FrameWarp` carries generated images onto an encoder's aligned crop.
* Step (a): :class:`LatentBank` (K² normality via :func:`dagostino_k2`, then face detection).
* Steps (b)–(c): :class:`RankedAdversary` → :class:`InversionResult`, with the attacks
  :class:`APGD` (white-box) and :class:`GreedyPixel` (black-box); :func:`max_iterations` (Eq. 18);
  :func:`calibrate_radius`.
* Evaluation: :func:`eer_threshold`, :func:`attack_threshold` (Eq. 14), :func:`type_accuracy`
  (Type I / II), :func:`joint_evaluation`, :func:`reference_bounds` and :class:`OODDetector`.
"""

from __future__ import annotations

from idaudit.inversion._adversary import (
    InversionResult,
    RankedAdversary,
    max_iterations,
    results_to_xarray,
)
from idaudit.inversion._attacks import APGD, AttackOutput, GreedyPixel, apgd_checkpoints, project
from idaudit.inversion._bank import LatentBank, detection_scores
from idaudit.inversion._calibrate import RadiusCalibration, calibrate_radius
from idaudit.inversion._evaluation import (
    EERResult,
    OODDetector,
    OODResult,
    TypeAccuracy,
    attack_threshold,
    eer_threshold,
    joint_evaluation,
    reference_bounds,
    type_accuracy,
)
from idaudit.inversion._generators import (
    DCGAN_RADIUS,
    DDPM_CELEBAHQ_256,
    DCGANGenerator,
    DiffusionGenerator,
    LatentGenerator,
    check_images,
)
from idaudit.inversion._normality import dagostino_k2
from idaudit.inversion._target import TargetModel
from idaudit.inversion._warp import FrameWarp

__all__ = [
    "APGD",
    "DCGAN_RADIUS",
    "DDPM_CELEBAHQ_256",
    "AttackOutput",
    "DCGANGenerator",
    "DiffusionGenerator",
    "EERResult",
    "FrameWarp",
    "GreedyPixel",
    "InversionResult",
    "LatentBank",
    "LatentGenerator",
    "OODDetector",
    "OODResult",
    "RadiusCalibration",
    "RankedAdversary",
    "TargetModel",
    "TypeAccuracy",
    "apgd_checkpoints",
    "attack_threshold",
    "calibrate_radius",
    "check_images",
    "dagostino_k2",
    "detection_scores",
    "eer_threshold",
    "joint_evaluation",
    "max_iterations",
    "project",
    "reference_bounds",
    "results_to_xarray",
    "type_accuracy",
]
