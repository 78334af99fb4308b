"""Images in, audit out: a face pipeline audited end to end.

==============================  ==========================================================
:func:`audit_generator`         image → image callable over source images → faces → the
                                four audits, certificates, controls, provenance
:func:`encode_generator`        its first half: outputs → per-draw outcomes → embeddings
:func:`compare_conditions`      several generators on the identities and pairs common to all
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
    ConditionComparison,
    GeneratorAudit,
    GeneratorEmbeddings,
    audit_generator,
    compare_conditions,
    encode_generator,
)
from idaudit.pipeline._images import (
    GaussianBlur,
    ImageMechanism,
    LatentFaceSwap,
    Pixelate,
    PixelNoise,
)
from idaudit.pipeline._linkage import LinkageReport, linkage_report
from idaudit.pipeline._private import EmbeddingNoiseSwap, FaceBank, PrivacyGuarantee

__all__ = [
    "ConditionComparison",
    "EmbeddingNoiseSwap",
    "FaceBank",
    "GaussianBlur",
    "GeneratorAudit",
    "GeneratorEmbeddings",
    "ImageMechanism",
    "LatentFaceSwap",
    "LinkageReport",
    "PixelNoise",
    "Pixelate",
    "PrivacyGuarantee",
    "audit_generator",
    "compare_conditions",
    "encode_generator",
    "linkage_report",
]
