"""Soundness from pixels: reserved-test certificates of EmbeddingNoiseSwap stay under its proof.

Each repetition runs the whole image pipeline with fresh randomness: two source faces → MTCNN
detection, alignment and the dlib encoder inside the mechanism → embedding + N(0, σ² I) → a
fixed public decoder → an output face → MTCNN detection, alignment and encoding of the output
by ``audit_generator`` → the reserved-test certifier on the pair. With probability at least
1 − α the certified lower bound is at most the pair's true ε(δ), which the proved pair
guarantee bounds from above: a certificate above the guarantee may happen in at most a
fraction α of the repetitions.

The setting is chosen so that a wrong guarantee is caught:

* the decoder is the Gaussian pair's likelihood-ratio test: it returns public face 0 when
  ⟨y, u⟩ > t, else public face 1, with u = (e_A − e_B)/Δ_AB and t = the midpoint of the two
  means + ``SHIFT`` σ. It reads only the noisy embedding y and fixed public material (the two
  faces, u, t), so the proof applies; one threshold of the Gaussian pair's optimal tests, its
  exact ε(δ) (a closed form, checked below) is 76 % of the guarantee;
* Δ_AB / σ = ``MU`` = 1.25 at δ = 0.1: guarantee ε ≈ 1.72, while ``N_ROWS`` = 500 draws per
  identity leave 150 reserved test rows each, whose error-free ceiling is ε ≈ 3.59, about
  twice the guarantee (were the ceiling below the guarantee, no certificate could exceed it
  and the check could not fail).

Arithmetic (exact binomial model of the certificate for this two-output channel: test false
positives ~ Bin(150, Φ(SHIFT − MU/2)), false negatives ~ Bin(150, Φ(−MU/2 − SHIFT)), each
bounded by Clopper–Pearson at α/2 = 0.025, then Eq. 16):

* proved mechanism: P(certificate > guarantee) ≈ 4e-5 per repetition (the proof allows up to
  α = 0.05); mean certificate ≈ 0.66. Over ``N_REPS`` = 40 repetitions the claim allows
  K ~ Bin(40, ≤ 0.05): mean ≤ 2, sd ≤ √(40 · 0.05 · 0.95) ≈ 1.38; the one-sided
  ``binomtest(K, 40, 0.05)`` rejects at p < 1e-3 from K = 8 on, which a sound mechanism
  reaches with probability at most P(Bin(40, 0.05) ≥ 8) ≈ 7e-4 (≈ 0 at 4e-5 per repetition).
* a mechanism whose noise is ``BROKEN`` = 2 times smaller than the σ its guarantee is printed
  for (true ε ≈ 4.07 against the printed 1.72): P(certificate > printed guarantee) ≈ 0.95
  per repetition. Over ``N_REPS_BROKEN`` = 10 repetitions binomtest rejects at p < 1e-3 from
  K = 5 on; expected K ≈ 9.5, so the power is P(Bin(10, 0.95) ≥ 5) ≈ 1 − 3e-6. The main
  test has the same power against this mechanism (P(Bin(40, 0.95) ≥ 8) ≈ 1); against noise
  1.5 times too small (P ≈ 0.24 per repetition) its power is P(Bin(40, 0.24) ≥ 8) ≈ 0.78.

Each output is one of two fixed faces, so after the first detection of each face the
embedding cache answers for it (keyed by the output's pixels and the pipeline): every draw
still passes through ``audit_generator``'s output checks, cache and certifier.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from scipy.optimize import brentq
from scipy.stats import binomtest, norm

from idaudit.audits import GaussMechAuditor
from idaudit.certify import ReservedTestCertifier
from idaudit.exceptions import IdauditWarning
from idaudit.faces import (
    EmbeddingCache,
    FacePipeline,
    MTCNNDetector,
    ShippedFaceGenerator,
    TorchDlibEncoder,
)
from idaudit.pipeline import (
    AuditSettings,
    DrawSettings,
    EmbeddingNoiseSwap,
    FaceBank,
    audit_generator,
    encode_generator,
)

pytestmark = [pytest.mark.calibration, pytest.mark.slow, pytest.mark.faces]

ALPHA = 0.05
DELTA = 0.1
MU = 1.25  # Δ_AB / σ
SHIFT = 0.6  # the decoder's threshold past the midpoint of the two means, in units of σ
N_ROWS = 500  # draws per identity and repetition: 150 reserved test rows each
N_REPS = 40
N_REPS_BROKEN = 10
BROKEN = 2.0  # the broken mechanism adds σ / BROKEN while its guarantee is printed for σ
SOURCES, OUTPUTS = (0, 1), (2, 3)  # indices into ShippedFaceGenerator().sample(4, rng=0)


def _gaussian_epsilon(mu: float, delta: float) -> float:
    """ε(δ) of the Gaussian pair N(0, 1) vs N(μ, 1) (Balle & Wang 2018, Thm 8), by brentq."""

    def excess(eps: float) -> float:
        return norm.cdf(mu / 2 - eps / mu) - np.exp(eps) * norm.cdf(-mu / 2 - eps / mu) - delta

    return float(brentq(excess, 0.0, 50.0, xtol=1e-12))


def _threshold_epsilon(fpr: float, fnr: float, delta: float) -> float:
    """ε(δ) of a two-output channel with these error rates: the larger Eq. 2 bound, ≥ 0."""
    return max(0.0, np.log((1 - delta - fpr) / fnr), np.log((1 - delta - fnr) / fpr))


class _MemoryCache(EmbeddingCache):
    """The embedding cache's answers kept in memory: no file read per draw (40 000 draws)."""

    def __init__(self, directory) -> None:
        super().__init__(directory)
        self._entries: dict[str, tuple[str, np.ndarray, np.ndarray]] = {}

    def get_entry(self, key: str):
        entry = self._entries.get(key)
        if entry is None:
            self.misses += 1
        else:
            self.hits += 1
        return entry

    def put(self, key: str, embedding, status: str = "ok", meta=None) -> None:
        emb = np.zeros(0, np.float32) if embedding is None else np.asarray(embedding, np.float32)
        self._entries[key] = (str(status), emb, np.zeros(0) if meta is None else np.asarray(meta))
        self.writes += 1


class _ThresholdDecoder:
    """Public face 0 when ⟨y, u⟩ > t, else public face 1: fixed before any noise is drawn."""

    def __init__(self, e_a: np.ndarray, e_b: np.ndarray, sigma: float, faces: np.ndarray):
        diff = e_a - e_b
        self.u = diff / np.linalg.norm(diff)
        self.t = 0.5 * float((e_a + e_b) @ self.u) + SHIFT * sigma
        self.faces = faces

    def __call__(self, y: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        return np.array(self.faces[0] if float(y @ self.u) > self.t else self.faces[1])


def _certify(mech, images, pipe, cache, n_reps: int, seed: int) -> list[dict[str, float]]:
    out = []
    for rep in range(n_reps):
        cert = ReservedTestCertifier(
            n_candidates=1, n_select=1, alpha=ALPHA, delta=DELTA, rng=seed + rep, progress=False
        )
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", IdauditWarning)  # two outputs: repeated rows
            run = audit_generator(
                mech,
                images,
                models=pipe,
                cache=cache,
                rng=10_000 + seed + rep,
                progress=False,
                draws=DrawSettings(repeats=N_ROWS),
                audit=AuditSettings(
                    pairs=[("A", "B")], auditors=[GaussMechAuditor(delta=DELTA)], certifier=cert
                ),
            )
        c = run.certificates
        out.append({k: float(c[k].values[0]) for k in ("epsilon_lb", "epsilon_lb_ceiling")})
    return out


@pytest.fixture(scope="module")
def setting(tmp_path_factory):
    enc = TorchDlibEncoder()
    pipe = FacePipeline(MTCNNDetector(), enc, progress=False)
    faces = ShippedFaceGenerator().sample(4, rng=0)
    public = faces[list(OUTPUTS)]
    bank = FaceBank.from_images(public, enc)
    sources = {"A": [faces[SOURCES[0]]], "B": [faces[SOURCES[1]]]}
    probe = EmbeddingNoiseSwap(1.0, bank=bank, pipeline=pipe)
    e_a, e_b = probe.encode_sources([sources["A"][0], sources["B"][0]]).vectors
    sigma = float(np.linalg.norm(e_a - e_b)) / MU
    decoder = _ThresholdDecoder(e_a, e_b, sigma, public)
    mech = EmbeddingNoiseSwap(sigma, bank=bank, pipeline=pipe, decoder=decoder)
    guarantee = mech.pair_guarantee(sources["A"], sources["B"], DELTA)
    # the two public faces through the audit's own detection and encoding, once: the cache
    # then answers for every later draw (the outputs repeat these pixels exactly)
    cache = _MemoryCache(tmp_path_factory.mktemp("private-swap-cache"))
    outputs = encode_generator(
        lambda im: im,
        {0: [public[0]], 1: [public[1]]},
        models=pipe,
        draws=DrawSettings(min_rows=1),
        cache=cache,
        progress=False,
    )
    return {
        "pipe": pipe,
        "sources": sources,
        "e": (e_a, e_b),
        "sigma": sigma,
        "decoder": decoder,
        "bank": bank,
        "mech": mech,
        "guarantee": guarantee,
        "outputs": outputs,
        "cache": cache,
    }


@pytest.fixture(scope="module")
def proved(setting):
    s = setting
    return _certify(s["mech"], s["sources"], s["pipe"], s["cache"], N_REPS, seed=0)


@pytest.fixture(scope="module")
def broken(setting):
    s = setting
    too_little = EmbeddingNoiseSwap(
        s["sigma"] / BROKEN, bank=s["bank"], pipeline=s["pipe"], decoder=s["decoder"]
    )
    return _certify(too_little, s["sources"], s["pipe"], s["cache"], N_REPS_BROKEN, seed=1000)


def test_the_setting_lets_a_certificate_reach_the_guarantee(setting):
    g = setting["guarantee"]
    e_a, e_b = setting["e"]
    # both sources were found (not the fallback) and both public outputs are found and differ
    assert not np.allclose(e_a, setting["mech"].fallback)
    assert not np.allclose(e_b, setting["mech"].fallback)
    emb = setting["outputs"].embeddings
    assert (emb.counts[0], emb.counts[1]) == (1, 1)
    assert np.linalg.norm(emb.get(0)[0] - emb.get(1)[0]) > 0.1
    # the printed guarantee is the analytic Gaussian ε at Δ_AB / σ = MU (independent brentq)
    assert g.sensitivity == pytest.approx(np.linalg.norm(e_a - e_b), rel=1e-9)
    assert g.epsilon == pytest.approx(_gaussian_epsilon(MU, DELTA), rel=1e-6)
    # the decoder's exact ε(δ) stays under the guarantee (post-processing) and comes close
    exact = _threshold_epsilon(norm.cdf(SHIFT - MU / 2), norm.sf(MU / 2 + SHIFT), DELTA)
    assert 0.7 * g.epsilon < exact <= g.epsilon


def test_certificates_exceed_the_proved_guarantee_at_most_alpha_of_the_time(setting, proved):
    g = setting["guarantee"].epsilon
    certs = np.array([r["epsilon_lb"] for r in proved])
    ceiling = min(r["epsilon_lb_ceiling"] for r in proved)
    assert ceiling > 1.5 * g  # an error-free test would certify far above the guarantee
    k = int((certs > g).sum())
    assert binomtest(k, N_REPS, ALPHA, alternative="greater").pvalue > 1e-3, (k, certs)
    # the certificates are not empty: the exact model's mean is ≈ 0.66 (≈ 0.38 of g)
    assert certs.mean() > 0.2 * g, certs
    # every output was one of the two public faces: only they were ever detected and encoded
    assert setting["cache"].writes == 2


def test_the_same_check_rejects_a_mechanism_with_too_little_noise(setting, broken):
    g = setting["guarantee"].epsilon  # printed for σ; the mechanism adds σ / BROKEN
    certs = np.array([r["epsilon_lb"] for r in broken])
    k = int((certs > g).sum())
    assert binomtest(k, N_REPS_BROKEN, ALPHA, alternative="greater").pvalue < 1e-3, (k, certs)
