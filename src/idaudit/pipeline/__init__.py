"""Images in, audit out: a face pipeline audited end to end.

==============================  ==========================================================
:func:`audit_generator`         image → image callable over source images → faces → the
                                four audits, certificates, controls, provenance
:func:`encode_generator`        its first half: outputs → per-draw outcomes → embeddings
:func:`compare_conditions`      several generators on the identities and pairs common to all
:func:`run_privacy_check`       folders of train / held-out / synthetic images → seed 003's
                                memorisation check (:class:`PrivacyReport`),
                                with the content-hash cache :class:`PrivacyCache`
:class:`EncodedGenerator`       encoder ∘ image generator over source images (seed 000,
                                Section 2.5): the draws' engine, one outcome per draw
:class:`DrawSettings`,          the workflows' settings: how sources are drawn and kept;
:class:`AuditSettings`,         pairs, auditors, certifier, controls, device; the privacy
:class:`PrivacyStatistics`      check's percentiles, permutations, bootstrap, subjects, seed
:func:`linkage_report`          re-identification: top-1 identification, same-person matches
:class:`GaussianBlur`           Gaussian blur (σ in pixels)
:class:`Pixelate`               mosaic (block side in pixels, random grid offset)
:class:`PixelNoise`             Gaussian pixel noise (σ in grey levels)
:class:`LatentFaceSwap`         G((1 − mix) z_id + mix z_donor) on the shipped DCGAN
:class:`EmbeddingNoiseSwap`     embedding + N(0, σ²I) → nearest public face: proved (ε, δ)
==============================  ==========================================================
"""

from __future__ import annotations

from idaudit.pipeline._audit import (
    GeneratorAudit,
    GeneratorEmbeddings,
    audit_generator,
    encode_generator,
)
from idaudit.pipeline._compare import ConditionComparison, compare_conditions
from idaudit.pipeline._draws import DRAW_STATUSES, EncodedGenerator
from idaudit.pipeline._images import (
    GaussianBlur,
    ImageMechanism,
    LatentFaceSwap,
    Pixelate,
    PixelNoise,
)
from idaudit.pipeline._linkage import LinkageReport, linkage_report
from idaudit.pipeline._privacy import run_privacy_check
from idaudit.pipeline._privacy_cache import PrivacyCache
from idaudit.pipeline._privacy_report import (
    CacheUse,
    InputListing,
    ModelsUsed,
    PrivacyReport,
    PrivacySettings,
)
from idaudit.pipeline._private import (
    EmbeddingNoiseSwap,
    FaceBank,
    PrivacyGuarantee,
    SourceEmbeddings,
)
from idaudit.pipeline._settings import AuditSettings, DrawSettings, PrivacyStatistics

__all__ = [
    "DRAW_STATUSES",
    "AuditSettings",
    "CacheUse",
    "ConditionComparison",
    "DrawSettings",
    "EmbeddingNoiseSwap",
    "EncodedGenerator",
    "FaceBank",
    "GaussianBlur",
    "GeneratorAudit",
    "GeneratorEmbeddings",
    "ImageMechanism",
    "InputListing",
    "LatentFaceSwap",
    "LinkageReport",
    "ModelsUsed",
    "PixelNoise",
    "Pixelate",
    "PrivacyCache",
    "PrivacyGuarantee",
    "PrivacyReport",
    "PrivacySettings",
    "PrivacyStatistics",
    "SourceEmbeddings",
    "audit_generator",
    "compare_conditions",
    "encode_generator",
    "linkage_report",
    "run_privacy_check",
]
