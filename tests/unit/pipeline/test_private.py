"""EmbeddingNoiseSwap: its guarantee against closed forms, its Δ against brute force, its paths."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.optimize import brentq
from scipy.stats import norm

from idaudit.exceptions import InvalidInputError
from idaudit.faces import (
    FRAME_PAD_FRACTION,
    Face,
    FacePipeline,
    ShippedFaceGenerator,
    TorchDlibEncoder,
    arcface_template,
)
from idaudit.pipeline import EmbeddingNoiseSwap, FaceBank, PrivacyGuarantee
from idaudit.results import CERTIFIED_STATUSES


class _TemplateDetector:
    """The DCGAN's aligned face on an enlarged 160-px frame, or nothing when the frame is dark."""

    name = "template"

    def detect(self, image: np.ndarray) -> list[Face]:
        if image.mean() <= 30:
            return []
        pad = round(FRAME_PAD_FRACTION * 160)
        box = np.array([16.0, 16.0, 144.0, 144.0]) + pad
        return [Face(box=box, score=1.0, landmarks=arcface_template(160) + pad)]


@pytest.fixture(scope="module")
def parts():
    enc = TorchDlibEncoder()
    gen = ShippedFaceGenerator()
    z = gen.sample_latents(24, rng=0)
    bank = FaceBank.from_images(gen.generate(z), enc, latents=z, generator="dcgan-faces-64")
    sources = gen.generate(gen.sample_latents(6, rng=1))  # not bank faces
    return enc, bank, FacePipeline(_TemplateDetector(), enc, progress=False), sources


def _mech(parts, sigma=0.5, **kw):
    _, bank, pipe, _ = parts
    return EmbeddingNoiseSwap(sigma, bank=bank, pipeline=pipe, **kw)


def _balle_wang_delta(eps: float, sigma: float, sens: float) -> float:
    """δ(ε) of the Gaussian mechanism (Balle & Wang 2018, Theorem 8), written out here."""
    a, b = sens / (2 * sigma), eps * sigma / sens
    return float(norm.cdf(a - b) - math.exp(eps) * norm.cdf(-a - b))


@pytest.mark.parametrize("sigma", [0.3, 1.0, 4.0])
@pytest.mark.parametrize("delta", [1e-6, 1e-3])
def test_guarantee_is_the_analytic_gaussian_epsilon_at_sensitivity_two(parts, sigma, delta):
    g = _mech(parts, sigma).guarantee(delta)
    assert isinstance(g, PrivacyGuarantee)
    assert g.status == "certified_upper_bound"
    assert g.status in CERTIFIED_STATUSES
    assert (g.sensitivity, g.sigma, g.delta, g.scope) == (2.0, sigma, delta, "any two inputs")
    # independent: the root of the closed form, found here with brentq
    want = brentq(lambda e: _balle_wang_delta(e, sigma, 2.0) - delta, 0.0, 500.0, xtol=1e-12)
    assert g.epsilon == pytest.approx(want, rel=1e-6)
    assert _balle_wang_delta(g.epsilon, sigma, 2.0) == pytest.approx(delta, rel=1e-5)
    assert any("deterministic" in a for a in g.assumptions)


def test_pair_sensitivity_is_the_brute_force_maximum_distance(parts):
    _, _, _, sources = parts
    mech = _mech(parts, 0.7)
    a, b = list(sources[:3]), list(sources[3:])
    ea, eb = mech.encode_sources(a), mech.encode_sources(b)
    brute = max(float(np.linalg.norm(x - y)) for x in ea.vectors for y in eb.vectors)
    g = mech.pair_guarantee(a, b, 1e-5)
    assert g.scope == "pair"
    assert g.sensitivity == pytest.approx(brute, rel=1e-9)
    assert 0 < g.sensitivity < 2
    assert mech.pair_guarantee(ea, eb, 1e-5) == g  # embeddings or images: the same
    want = brentq(lambda e: _balle_wang_delta(e, 0.7, brute) - 1e-5, 0.0, 500.0, xtol=1e-12)
    assert g.epsilon == pytest.approx(want, rel=1e-6)
    assert g.epsilon < mech.guarantee(1e-5).epsilon


def test_embeddings_before_the_noise_are_unit_vectors(parts):
    _, _, _, sources = parts
    e = _mech(parts).encode_sources(list(sources)).vectors
    np.testing.assert_allclose(np.linalg.norm(e, axis=1), 1.0, atol=1e-9)


def test_a_face_not_found_maps_to_the_fixed_fallback_before_the_noise(parts):
    mech = _mech(parts, 0.4)
    dark_a = np.zeros((64, 64, 3), np.uint8)
    dark_b = np.full((64, 64, 3), 20, np.uint8)
    dark_b[10:20, 10:50] = 60  # a different image, still no face found
    e = mech.encode_sources([dark_a, dark_b]).vectors
    dim = e.shape[1]
    np.testing.assert_array_equal(e, np.full((2, dim), 1 / math.sqrt(dim)))
    # the output law does not depend on which undetectable input: same noise, same face
    for seed in range(5):
        np.testing.assert_array_equal(mech(dark_a, rng=seed), mech(dark_b, rng=seed))
    outs = {mech(dark_a, rng=s).tobytes() for s in range(12)}
    assert len(outs) > 1  # not a fixed output image (a point mass would leak)
    # a pair with an undetectable source is still within the sphere's diameter
    assert mech.pair_guarantee([dark_a], list(parts[3][:2]), 1e-5).sensitivity <= 2.0


def test_decoder_returns_the_nearest_public_face(parts):
    _, bank, _, _ = parts
    mech = _mech(parts, 1e-6)  # no noise to speak of: a bank face decodes to itself
    for i in (0, 7, 23):
        np.testing.assert_array_equal(mech(bank.images[i], rng=i), bank.images[i])
    y = np.random.default_rng(3).standard_normal(bank.dim)
    best = max(range(bank.volume), key=lambda i: float(bank.embeddings[i].astype(float) @ y))
    np.testing.assert_array_equal(mech.decode(y, np.random.default_rng(0)), bank.images[best])


def test_the_noise_is_gaussian_with_standard_deviation_sigma(parts):
    mech = _mech(parts, 0.25)
    e = np.zeros(128)
    draws = np.stack([mech.release(e, np.random.default_rng(s)) for s in range(40)]).ravel()
    from scipy.stats import kstest

    assert kstest(draws / 0.25, "norm").pvalue > 1e-3


def test_deterministic_under_rng_and_independent_of_batching(parts):
    _, _, _, sources = parts
    mech = _mech(parts, 0.6)
    a = [mech(im, rng=11) for im in sources]
    b = mech.batch(list(sources), [11] * len(sources))
    for x, y in zip(a, b, strict=True):
        np.testing.assert_array_equal(x, y)
    outs = {mech(sources[0], rng=s).tobytes() for s in range(12)}
    assert len(outs) > 1


def test_refine_moves_the_face_by_inversion(parts):
    from idaudit.inversion import DCGANGenerator

    mech = _mech(parts, 0.3, refine=1, generator=DCGANGenerator())
    _, bank, _, sources = parts
    out = mech(sources[0], rng=5)
    assert out.shape == (64, 64, 3)
    assert out.dtype == np.uint8
    assert not any((out == im).all() for im in bank.images)  # moved off the bank


@pytest.mark.parametrize(
    ("sigma", "message"),
    [
        (0.0, "`sigma` must be in (0, inf); got 0.0."),
        (-1.0, "`sigma` must be in (0, inf); got -1.0."),
        (float("nan"), "`sigma` must be in (0, inf); got nan."),
        (float("inf"), "`sigma` must be in (0, inf); got inf."),
    ],
)
def test_bad_sigma(parts, sigma, message):
    with pytest.raises(InvalidInputError, match=f"^{__import__('re').escape(message)}$"):
        _mech(parts, sigma)


@pytest.mark.parametrize("delta", [0.0, 1.0, 1.5, -0.1, float("nan")])
def test_bad_delta(parts, delta):
    with pytest.raises(InvalidInputError, match=r"^`delta` must be in \(0, 1\); got "):
        _mech(parts).guarantee(delta)


def test_bank_without_embeddings_or_from_another_encoder(parts):
    enc, bank, pipe, _ = parts
    from idaudit.inversion import LatentBank

    latent = LatentBank(
        latents=np.zeros((1, 100), np.float32),
        images=bank.images[:1],
        p_k=np.ones(1),
        p_d=np.ones(1),
        n_drawn=1,
        n_rejected_k=0,
        n_rejected_d=0,
        tau_k=0.0,
        tau_d=0.0,
        generator="dcgan",
    )
    with pytest.raises(InvalidInputError, match=r"^`bank` must be a FaceBank holding embeddings"):
        EmbeddingNoiseSwap(1.0, bank=latent, pipeline=pipe)
    other = FaceBank(images=bank.images, embeddings=bank.embeddings, encoder="arcface")
    with pytest.raises(
        InvalidInputError, match=r"^`bank` embeddings were made by encoder 'arcface' "
    ):
        EmbeddingNoiseSwap(1.0, bank=other, pipeline=pipe)
    with pytest.raises(InvalidInputError, match=r"^`embeddings` must be finite and of unit norm"):
        FaceBank(images=bank.images, embeddings=2 * bank.embeddings, encoder=enc.name)
    with pytest.raises(InvalidInputError, match=r"^`refine` > 0 moves a bank face"):
        EmbeddingNoiseSwap(1.0, bank=bank, pipeline=pipe, refine=3)
    from idaudit.inversion import DCGANGenerator

    renamed = FaceBank(
        images=bank.images,
        embeddings=bank.embeddings,
        encoder=enc.name,
        latents=bank.latents,
        generator="stylegan",
    )
    with pytest.raises(InvalidInputError, match=r"^`bank` faces come from generator 'stylegan'"):
        EmbeddingNoiseSwap(1.0, bank=renamed, pipeline=pipe, refine=3, generator=DCGANGenerator())


@pytest.mark.parametrize(
    ("image", "message"),
    [
        (np.zeros((64, 64, 3), np.float32), r"^`image` must be a non-empty \(H, W, 3\) uint8"),
        (np.zeros((64, 64), np.uint8), r"^`image` must be a non-empty \(H, W, 3\) uint8"),
    ],
)
def test_bad_images_fail_before_any_work(parts, image, message):
    mech = _mech(parts)
    with pytest.raises(InvalidInputError, match=message):
        mech(image, rng=0)
    with pytest.raises(InvalidInputError, match=message):
        mech.pair_guarantee([image], [image], 1e-5)


def test_guarantee_refuses_a_decoder_that_reads_the_input(parts):
    _, bank, _, sources = parts

    def leaky(noisy, rng, source):
        return source

    mech = _mech(parts, decoder=leaky)
    np.testing.assert_array_equal(mech(sources[0], rng=0), sources[0])  # it runs, and leaks
    with pytest.raises(InvalidInputError, match=r"^no guarantee: the decoder reads the input"):
        mech.guarantee(1e-5)
    with pytest.raises(InvalidInputError, match=r"^no guarantee"):
        mech.pair_guarantee(list(sources[:1]), list(sources[1:2]), 1e-5)
    ok = _mech(parts, decoder=lambda noisy, rng: bank.images[0])
    assert ok.guarantee(1e-5).epsilon == _mech(parts).guarantee(1e-5).epsilon


def test_with_sigma_changes_only_sigma(parts):
    _, _, _, sources = parts
    mech = _mech(parts, 0.5)
    other = mech.with_sigma(0.1)
    assert (mech.sigma, other.sigma) == (0.5, 0.1)
    assert other.guarantee(1e-5).epsilon == _mech(parts, 0.1).guarantee(1e-5).epsilon
    np.testing.assert_array_equal(other(sources[0], rng=3), _mech(parts, 0.1)(sources[0], rng=3))
    with pytest.raises(InvalidInputError, match=r"^`sigma` must be in \(0, inf\)"):
        mech.with_sigma(float("nan"))


class _RaisingDetector:
    name = "raises"

    def detect(self, image: np.ndarray) -> list[Face]:
        raise RuntimeError("cannot read this frame")


def test_frames_the_mechanism_cannot_read_map_to_the_fallback_before_the_noise(parts):
    """A tiny frame or a failing detector is no error (an error is an observable outcome)."""
    enc, bank, _, sources = parts
    mech = _mech(parts, 0.4)
    tiny = np.ascontiguousarray(sources[0][::3, ::3][:20, :20])  # the same face, 20 px
    thin = np.full((16, 64, 3), 200, np.uint8)
    dark = np.zeros((64, 64, 3), np.uint8)  # no face found: the fallback
    e = mech.encode_sources([tiny, thin, dark]).vectors
    dim = e.shape[1]
    np.testing.assert_array_equal(e, np.full((3, dim), 1 / math.sqrt(dim)))
    for seed in range(4):  # the same law as any unreadable frame: same noise, same face
        np.testing.assert_array_equal(mech(tiny, rng=seed), mech(dark, rng=seed))
        np.testing.assert_array_equal(mech(thin, rng=seed), mech(dark, rng=seed))
    failing = EmbeddingNoiseSwap(
        0.4, bank=bank, pipeline=FacePipeline(_RaisingDetector(), enc, progress=False)
    )
    e2 = failing.encode_sources(list(sources[:2])).vectors
    np.testing.assert_array_equal(e2, np.full((2, dim), 1 / math.sqrt(dim)))
    np.testing.assert_array_equal(failing(sources[0], rng=1), mech(dark, rng=1))
    assert "32 pixels" in mech.guarantee(1e-5).covers
    assert mech.pair_guarantee([tiny], list(sources[:2]), 1e-5).sensitivity <= 2.0


def test_audits_judge_outputs_by_the_banks_size_never_the_sources(parts):
    """Sources of two sizes: every draw is ok (the source's size was `bad_output` before)."""
    from PIL import Image as PILImage

    from idaudit.pipeline import EncodedGenerator

    _, bank, pipe, sources = parts
    big = np.asarray(PILImage.fromarray(sources[1]).resize((96, 96), PILImage.BICUBIC))
    mech = _mech(parts, 0.3)
    engine = EncodedGenerator(mech, None, {0: [sources[0]], 1: [sources[1], big]}, pipeline=pipe)
    _, records = engine.encode_draws(1, [0, 1, 1, 0], [1, 2, 3, 4])
    assert [r["status"] for r in records] == ["ok"] * 4
    assert engine.output_shape == mech.output_size == bank.images.shape[1:3]
    custom = _mech(parts, decoder=lambda noisy, rng: np.zeros((80, 40, 3), np.uint8))
    assert custom.output_size is None
    engine = EncodedGenerator(custom, None, {1: [sources[1], big]}, pipeline=pipe)
    _, records = engine.encode_draws(1, [0, 1], [1, 2])
    assert all(r["status"] != "bad_output" for r in records)


def test_paired_mode_is_refused(parts):
    """Paired mode reads the source frame, which the mechanism never releases."""
    from idaudit.pipeline import DrawSettings, EncodedGenerator, audit_generator

    _, _, pipe, sources = parts
    images = {0: list(sources[:2]), 1: list(sources[2:4])}
    with pytest.raises(InvalidInputError, match=r"^`mode`='paired' reads the source frame"):
        EncodedGenerator(_mech(parts), None, images, pipeline=pipe, mode="paired")
    with pytest.raises(InvalidInputError, match=r"^`mode`='paired' reads the source frame"):
        audit_generator(
            _mech(parts), images, models=pipe, draws=DrawSettings(mode="paired"), progress=False
        )


def _mp_delta(eps: float, sigma: float, sens: float) -> float:
    """δ(ε) of the Gaussian mechanism in 50-digit arithmetic (mpmath), independent of scipy."""
    import mpmath as mp

    with mp.workdps(50):
        e, s, d = mp.mpf(eps), mp.mpf(sigma), mp.mpf(sens)
        return mp.ncdf(d / (2 * s) - e * s / d) - mp.exp(e) * mp.ncdf(-d / (2 * s) - e * s / d)


@pytest.mark.parametrize("sigma", [0.005, 0.02, 0.1, 0.5, 2.0])
@pytest.mark.parametrize("delta", [1e-10, 1e-5, 0.05])
def test_the_guarantees_epsilon_is_rounded_up_never_down(parts, sigma, delta):
    """δ(ε) at the reported ε, in 50 digits, is at most δ: the ε is never below the true root."""
    g = _mech(parts, sigma).guarantee(delta)
    assert _mp_delta(g.epsilon, sigma, 2.0) <= delta
    assert _mp_delta(g.epsilon * (1 - 1e-9), sigma, 2.0) > delta  # and no looser than that


def test_pair_sensitivity_is_exact_for_near_sources(parts):
    """Two sources a hair apart: the direct norm, not the expanded square (which cancels)."""
    _, _, _, sources = parts
    mech = _mech(parts, 0.5)
    near = sources[0].copy()
    near[0, 0, 0] ^= 1  # one bit: the embedding moves by ~1e-7 or stays
    ea, eb = mech.encode_sources([sources[0]]), mech.encode_sources([near])
    want = float(np.linalg.norm(ea.vectors[0] - eb.vectors[0]))
    assert mech.pair_guarantee(ea, eb, 1e-5).sensitivity == want


def test_pair_guarantee_checks_delta_and_decoder_before_encoding_anything(parts):
    enc, bank, _, sources = parts

    class _Refusing:
        name = "refusing"

        def detect(self, image):
            raise AssertionError("encoded an image before checking delta")

    refusing = FacePipeline(_Refusing(), enc, progress=False)
    mech = EmbeddingNoiseSwap(0.5, bank=bank, pipeline=refusing)
    with pytest.raises(InvalidInputError, match=r"^`delta` must be in \(0, 1\)"):
        mech.pair_guarantee(list(sources[:1]), list(sources[1:2]), 2.0)
    leaky = EmbeddingNoiseSwap(
        0.5, bank=bank, pipeline=refusing, decoder=lambda noisy, rng, source: source
    )
    with pytest.raises(InvalidInputError, match=r"^no guarantee"):
        leaky.pair_guarantee(list(sources[:1]), list(sources[1:2]), 1e-5)


def test_pair_guarantee_takes_images_or_its_own_encodings_not_any_unit_vectors(parts):
    _, bank, pipe, sources = parts
    mech = _mech(parts, 0.5)
    dim = bank.dim
    a, b = np.zeros((1, dim)), np.zeros((1, dim))
    a[0, 0], b[0, 0] = 1.0, 1.0  # identical "embeddings" would prove ε = 0
    with pytest.raises(TypeError, match=r"^`sources_a` must be source images or"):
        mech.pair_guarantee(a, b, 1e-5)
    other = EmbeddingNoiseSwap(0.5, bank=bank, pipeline=pipe, fallback=np.arange(1.0, dim + 1))
    foreign = other.encode_sources(list(sources[:1]))
    with pytest.raises(InvalidInputError, match=r"^`sources_b` was encoded by encoder"):
        mech.pair_guarantee(mech.encode_sources(list(sources[1:2])), foreign, 1e-5)


def test_a_bank_whose_embeddings_the_encoder_did_not_make_is_refused(parts):
    """The name matches, the vectors do not: re-encoding two bank faces tells them apart."""
    enc, bank, pipe, _ = parts
    shuffled = FaceBank(
        images=bank.images,
        embeddings=bank.embeddings[::-1].copy(),
        encoder=enc.name,
    )
    with pytest.raises(InvalidInputError, match=r"^`bank` embeddings are not the mechanism's"):
        EmbeddingNoiseSwap(1.0, bank=shuffled, pipeline=pipe)
