"""Soundness from pixels: reserved-test certificates of EmbeddingNoiseSwap stay under its proof.

Each repetition runs the whole image pipeline — source image → detection, alignment, encoder →
embedding + N(0, σ²I) → nearest public DCGAN face → detection, alignment and encoder of the
output → the reserved-test certifier on two fixed pairs — with fresh randomness. With
probability at least 1 − α every certified lower bound is at most its pair's true ε(δ), which
the proved pair guarantee bounds from above; so a certificate above the guarantee may happen
in at most a fraction α of the repetitions.

n_reps = 40 at α = 0.05: under the claim at most 2 exceedances are expected (sd
√(40 · 0.05 · 0.95) ≈ 1.38); binomtest(k, 40, 0.05, "greater") rejects at 0.001 from k = 8 on.
A wrong guarantee that certificates beat half the time (expected 20) is rejected with
p ≈ 1e-15, and the second test checks that the same harness does reject a guarantee that
is too small.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from scipy.stats import binomtest

from idaudit.audits import GaussMechAuditor
from idaudit.certify import ReservedTestCertifier
from idaudit.exceptions import IdauditWarning
from idaudit.faces import (
    FRAME_PAD_FRACTION,
    Face,
    FacePipeline,
    ShippedFaceGenerator,
    TorchDlibEncoder,
    arcface_template,
)
from idaudit.pipeline import (
    AuditSettings,
    DrawSettings,
    EmbeddingNoiseSwap,
    FaceBank,
    audit_generator,
)

pytestmark = [pytest.mark.calibration, pytest.mark.slow]

ALPHA = 0.05
DELTA = 0.05
N_REPS = 40
SIGMA = 0.02  # noise norm ≈ 0.02·√128 ≈ 0.23 against pair distances ≈ 0.4-0.5: certificates > 0
PAIRS = [(0, 1), (2, 3)]


class _TemplateDetector:
    """The DCGAN's aligned face on the enlarged frame (its outputs are aligned so)."""

    name = "template"

    def __repr__(self) -> str:
        return "TemplateDetector()"

    def detect(self, image: np.ndarray) -> list[Face]:
        pad = round(FRAME_PAD_FRACTION * 160)
        box = np.array([16.0, 16.0, 144.0, 144.0]) + pad
        return [Face(box=box, score=1.0, landmarks=arcface_template(160) + pad)]


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    enc = TorchDlibEncoder()
    gen = ShippedFaceGenerator()
    pipe = FacePipeline(_TemplateDetector(), enc, progress=False)
    bank = FaceBank.from_images(gen.sample(24, rng=0), enc)
    sources = gen.sample(4, rng=1)
    images = {k: [sources[k]] for k in range(4)}
    mech = EmbeddingNoiseSwap(SIGMA, bank=bank, pipeline=pipe)
    guarantee = {p: mech.pair_guarantee([sources[p[0]]], [sources[p[1]]], DELTA) for p in PAIRS}
    cache = tmp_path_factory.mktemp("private-swap-cache")  # outputs repeat: encode each once
    certified = []
    for rep in range(N_REPS):
        cert = ReservedTestCertifier(
            n_candidates=2, n_select=2, alpha=ALPHA, delta=DELTA, rng=rep, progress=False
        )
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", IdauditWarning)  # fewer disjoint pairs on some reps
            run = audit_generator(
                mech,
                images,
                models=pipe,
                cache=cache,
                rng=1000 + rep,
                progress=False,
                draws=DrawSettings(repeats=40),
                audit=AuditSettings(pairs=PAIRS, auditors=[GaussMechAuditor()], certifier=cert),
            )
        c = run.certificates
        certified.append(
            {
                (int(a), int(b)): float(e)
                for a, b, e in zip(
                    c["identity_a"].values,
                    c["identity_b"].values,
                    c["epsilon_lb"].values,
                    strict=True,
                )
            }
        )
    return guarantee, certified


def _exceed(certified, bound) -> int:
    return sum(any(e > bound(p) for p, e in rep.items()) for rep in certified)


def test_certificates_exceed_the_proved_guarantee_at_most_alpha_of_the_time(runs):
    guarantee, certified = runs
    k = _exceed(certified, lambda p: guarantee[p].epsilon)
    assert binomtest(k, N_REPS, ALPHA, alternative="greater").pvalue > 1e-3, k
    # the pipeline does distinguish the pairs: the check is not about empty certificates
    assert sum(max(rep.values()) > 0 for rep in certified) >= N_REPS // 4


def test_the_same_check_rejects_a_guarantee_that_is_too_small(runs):
    _, certified = runs
    k = _exceed(certified, lambda p: 0.0)  # claiming ε = 0: any positive certificate refutes it
    assert binomtest(k, N_REPS, ALPHA, alternative="greater").pvalue < 1e-3, k
