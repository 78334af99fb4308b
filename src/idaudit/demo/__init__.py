"""The ``idaudit demo`` job as a library: anonymisers on synthetic faces, beside calibrated noise.

Part one (:func:`run_face_demo`): synthetic identities from the shipped DCGAN (made-up
people), detected by MTCNN and encoded by dlib, audited under no anonymisation, Gaussian
blur, pixelation and a latent face swap — the four audits, reserved-test certificates and
re-identification rates. Part two: the calibrated-noise benchmark of seed 000, Section 5.2
(:func:`demo_identities` plus Gaussian or Laplace noise), where every pair's true ε is known,
as a reference for what the audits can and cannot say. :func:`run_demo` runs both and writes
``report.md`` with the tables and figures; ``idaudit demo`` is its command line.

Examples
--------
>>> from idaudit.demo import QUICK, run_demo
>>> result = run_demo("idaudit-demo", config=QUICK, progress=False)  # doctest: +SKIP
>>> result.faces.table[["condition", "top1_rate", "mmdtv_median"]]  # doctest: +SKIP
"""

from __future__ import annotations

from idaudit.demo._config import QUICK, DemoConfig
from idaudit.demo._faces import (
    FACE_SEED,
    FACES_QUICK,
    FaceDemoConfig,
    FaceDemoResult,
    run_face_demo,
)
from idaudit.demo._noise import DEMO_SEED, demo_identities
from idaudit.demo._run import DemoResult, run_demo

__all__ = [
    "DEMO_SEED",
    "FACES_QUICK",
    "FACE_SEED",
    "QUICK",
    "DemoConfig",
    "DemoResult",
    "FaceDemoConfig",
    "FaceDemoResult",
    "demo_identities",
    "run_demo",
    "run_face_demo",
]
