"""private_swap_sweep and its figure: the guarantee, the counts and the summaries recomputed."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.optimize import brentq
from scipy.stats import norm, spearmanr

from idaudit.audits import GaussMechAuditor, MMDTVAuditor
from idaudit.benchmark import private_swap_sweep
from idaudit.certify import ReservedTestCertifier
from idaudit.exceptions import InvalidInputError
from idaudit.faces import (
    FRAME_PAD_FRACTION,
    Face,
    FacePipeline,
    ShippedFaceGenerator,
    TorchDlibEncoder,
    arcface_template,
)
from idaudit.pipeline import FaceBank

SIGMAS = [0.01, 0.05, 0.2, 0.5]
PAIRS = [(0, 1), (2, 3), (0, 2)]


class _TemplateDetector:
    name = "template"

    def __repr__(self) -> str:
        return "TemplateDetector()"

    def detect(self, image: np.ndarray) -> list[Face]:
        pad = round(FRAME_PAD_FRACTION * 160)
        box = np.array([16.0, 16.0, 144.0, 144.0]) + pad
        return [Face(box=box, score=1.0, landmarks=arcface_template(160) + pad)]


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    enc = TorchDlibEncoder()
    gen = ShippedFaceGenerator()
    pipe = FacePipeline(_TemplateDetector(), enc, progress=False)
    bank = FaceBank.from_images(gen.sample(16, rng=0), enc)
    src = gen.sample(8, rng=1)
    images = {k: [src[2 * k], src[2 * k + 1]] for k in range(4)}
    ds = private_swap_sweep(
        images,
        SIGMAS,
        bank=bank,
        pipeline=pipe,
        pairs=PAIRS,
        repeats=15,
        auditors=[GaussMechAuditor(), MMDTVAuditor()],
        cache=tmp_path_factory.mktemp("cache"),
        progress=False,
    )
    return enc, bank, pipe, images, ds


def _bw_epsilon(delta: float, sigma: float, sens: float) -> float:
    """Balle & Wang's δ(ε) solved for ε here, independently of idaudit.dp."""

    def f(e: float) -> float:
        a, b = sens / (2 * sigma), e * sigma / sens
        return float(norm.cdf(a - b) - math.exp(e + norm.logcdf(-a - b))) - delta

    return brentq(f, 0.0, 1e5, xtol=1e-12) if f(0.0) > 0 else 0.0


def test_guarantees_are_the_closed_form_at_each_pairs_brute_force_sensitivity(setup):
    enc, _, _, images, ds = setup
    for i, (a, b) in enumerate(PAIRS):
        ea = np.stack([_embed(enc, im) for im in images[a]])
        eb = np.stack([_embed(enc, im) for im in images[b]])
        brute = max(np.linalg.norm(x - y) for x in ea for y in eb)
        assert float(ds["pair_sensitivity"][i]) == pytest.approx(brute, rel=1e-5)
        for s, sigma in enumerate(SIGMAS):
            want = _bw_epsilon(1e-5, sigma, brute)
            assert float(ds["guarantee_epsilon"][s, i]) == pytest.approx(want, rel=1e-4)
    for s, sigma in enumerate(SIGMAS):
        want = _bw_epsilon(1e-5, sigma, 2.0)
        assert float(ds["global_guarantee_epsilon"][s]) == pytest.approx(want, rel=1e-6)
    assert ds["guarantee_epsilon"].attrs["status"] == "certified_upper_bound"
    # proved with probability one, so every pair's guarantee holds at once
    assert ds["guarantee_epsilon"].attrs["n_simultaneous"] == len(PAIRS)
    assert ds["certified_epsilon"].attrs["status"] == "certified_lower_bound"
    # each σ's selected pairs are certified jointly: its largest keeps the status
    most = int(np.isfinite(ds["certified_epsilon"].values).sum(axis=1).max())
    assert ds["certified_epsilon"].attrs["n_simultaneous"] == most


def _embed(enc, im):
    e = ShippedFaceGenerator().embed(im[None], enc)[0].astype(np.float64)
    return e / np.linalg.norm(e)


def test_counts_and_summaries_follow_their_definitions(setup):
    *_, ds = setup
    cert, guar, ceil = (
        ds[v].values for v in ("certified_epsilon", "guarantee_epsilon", "certified_ceiling")
    )
    exceed = [
        sum(1 for c, g in zip(cr, gr, strict=True) if c == c and c > g)
        for cr, gr in zip(cert, guar, strict=True)
    ]
    np.testing.assert_array_equal(ds["n_exceed"].values, exceed)
    assert (ds["n_exceed"].values == 0).all()  # and a sound audit stays under the proof
    np.testing.assert_allclose(ds["tightness"].values, cert / guar)
    routes = ds["route"].values.tolist()
    assert routes == ["gaussmech", "mmdtv", "certified"]
    med_g = np.median(guar, axis=1)
    for r, rho, leaves, regime, not_run in zip(
        routes,
        ds["rank_correlation"].values,
        ds["leaves_endpoint_sigma"].values,
        ds["endpoint_regime"].values,
        ds["not_run"].values,
        strict=True,
    ):
        vals = cert if r == "certified" else ds[f"{r}_epsilon"].values
        med = np.array([np.nanmax(v) if r == "certified" else np.nanmedian(v) for v in vals])
        if r == "certified":
            med = np.array([np.nanmedian(v) for v in vals])
            end = [bool(np.any(c >= k)) for c, k in zip(cert, ceil, strict=True)]
        else:
            end = [bool(np.any(v == np.inf)) for v in vals]
        assert not_run == (0 if r == "certified" else int(np.isnan(vals).sum()))
        ok = np.isfinite(med)
        if ok.sum() >= 3:
            assert rho == pytest.approx(spearmanr(med[ok], med_g[ok]).statistic)
        if not any(end):
            assert (regime, math.isnan(leaves)) == ("never", True)
        elif end[-1]:
            assert (regime, math.isnan(leaves)) == ("stays", True)
        else:
            last = max(k for k in range(len(SIGMAS)) if end[k])
            assert (regime, leaves) == ("leaves", SIGMAS[last + 1])


def test_figure_has_every_route_and_both_guarantees_with_statuses(setup):
    from idaudit.plotting import plot_private_swap_sweep

    *_, ds = setup
    fig = plot_private_swap_sweep(ds)
    labels = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert len(labels) == 5
    assert any("GaussMech" in t and "diagnostic" in t for t in labels)
    assert any("MMD-TV" in t and "sample_estimate" in t for t in labels)
    assert any("certificate" in t and "certified_lower_bound" in t for t in labels)
    assert sum("guarantee" in t and "certified_upper_bound" in t for t in labels) == 2
    with pytest.raises(InvalidInputError, match="must be the output of"):
        plot_private_swap_sweep(ds.drop_vars("guarantee_epsilon"))


def test_bad_input(setup):
    _, bank, pipe, images, _ = setup
    kw = {"bank": bank, "pipeline": pipe, "progress": False}
    with pytest.raises(InvalidInputError, match=r"^`pairs` must hold at least one"):
        private_swap_sweep(images, [0.1], pairs=[], **kw)
    with pytest.raises(InvalidInputError, match=r"^`pairs` name identities without images: 9"):
        private_swap_sweep(images, [0.1], pairs=[(0, 9)], **kw)
    with pytest.raises(InvalidInputError, match=r"^`certifier.delta` must equal `delta`"):
        private_swap_sweep(
            images, [0.1], pairs=PAIRS, certifier=ReservedTestCertifier(delta=0.0), **kw
        )
    with pytest.raises(InvalidInputError, match=r"^`delta` must be in \(0, 1\)"):
        private_swap_sweep(images, [0.1], pairs=PAIRS, delta=0.0, **kw)
    with pytest.raises(InvalidInputError):
        private_swap_sweep(images, [0.0], pairs=PAIRS, **kw)


def test_eigenfaces_match_sklearn_pca():
    from sklearn.decomposition import PCA

    from idaudit.benchmark import EigenfaceEncoder

    gen = np.random.default_rng(5)
    crops = gen.integers(0, 256, size=(40, 16, 16, 3), dtype=np.uint8)
    enc = EigenfaceEncoder.fit(crops, dim=6)
    grey = crops.astype(np.float64).mean(axis=3).reshape(40, -1) / 255.0
    pca = PCA(n_components=6, svd_solver="full").fit(grey)
    # the same axes up to sign
    np.testing.assert_allclose(np.abs(enc.components @ pca.components_.T), np.eye(6), atol=1e-8)
    probe = gen.integers(0, 256, size=(5, 16, 16, 3), dtype=np.uint8)
    want = pca.transform(probe.astype(np.float64).mean(axis=3).reshape(5, -1) / 255.0)
    want *= np.sign(np.diag(enc.components @ pca.components_.T))  # the same signs
    want /= np.linalg.norm(want, axis=1, keepdims=True)
    np.testing.assert_allclose(enc.encode(probe), want, atol=1e-6)  # float32 output
    assert (enc.name, enc.dim, enc.input_size) == ("eigenfaces-6x16", 6, 16)
    with pytest.raises(TypeError, match="not differentiable"):
        enc.forward(None)
    with pytest.raises(InvalidInputError, match=r"more than `dim` = 6 faces; got 6"):
        EigenfaceEncoder.fit(crops[:6], dim=6)
    with pytest.raises(InvalidInputError, match=r"^`crops` must be uint8 of shape \(n, 16, 16"):
        enc.encode(probe[:, :8])
    with pytest.raises(InvalidInputError, match="orthonormal"):
        EigenfaceEncoder(enc.mean, 2 * enc.components, size=16)


def test_an_independent_auditor_encoder_keeps_the_guarantee(setup):
    # the outputs audited through another encoder than the mechanism's: the guarantee is a
    # property of the mechanism, the same for every auditor, and no certificate may exceed it
    from idaudit.benchmark import EigenfaceEncoder

    _, bank, pipe, images, ds = setup
    eig = EigenfaceEncoder.from_generator(64, dim=8, size=32, rng=3)
    other = private_swap_sweep(
        images,
        SIGMAS,
        bank=bank,
        pipeline=pipe,
        audit_pipeline=FacePipeline(_TemplateDetector(), eig, progress=False),
        pairs=PAIRS,
        repeats=15,
        auditors=[GaussMechAuditor(), MMDTVAuditor()],
        progress=False,
    )
    assert other.attrs["audit_encoder"] == "eigenfaces-8x32"
    assert other.attrs["mechanism_encoder"] == bank.encoder
    np.testing.assert_array_equal(other["guarantee_epsilon"], ds["guarantee_epsilon"])
    cert, guar = other["certified_epsilon"].values, other["guarantee_epsilon"].values
    assert np.isfinite(cert).any()
    assert not (cert[np.isfinite(cert)] > guar[np.isfinite(cert)]).any()


class _CountingDetector(_TemplateDetector):
    """The template detector, noting whether it ever saw a flat (one-colour) frame."""

    def __init__(self) -> None:
        self.saw_flat = False

    def detect(self, image: np.ndarray) -> list[Face]:
        self.saw_flat |= bool(image.min() == image.max())
        return super().detect(image)


def test_sigmas_are_sorted_and_a_route_never_at_an_endpoint_says_never(setup):
    """Unsorted σ: the summaries follow σ's order, not the argument's; an identity outside
    `pairs` never goes through the mechanism."""
    enc, bank, _, images, _ = setup
    counting = _CountingDetector()
    pipe = FacePipeline(counting, enc, progress=False)
    flat = {**images, 9: [np.full((64, 64, 3), 7, np.uint8)]}  # in no pair
    ds = private_swap_sweep(
        flat,
        [0.5, 0.02, 0.2],
        bank=bank,
        pipeline=pipe,
        pairs=[(0, 1)],
        repeats=10,
        auditors=[MMDTVAuditor()],
        progress=False,
    )
    assert ds["sigma"].values.tolist() == [0.02, 0.2, 0.5]
    assert np.isfinite(ds["mmdtv_epsilon"].values).all()  # MMD-TV is never +inf
    mmd = ds["route"].values.tolist().index("mmdtv")
    assert str(ds["endpoint_regime"].values[mmd]) == "never"
    assert math.isnan(float(ds["leaves_endpoint_sigma"].values[mmd]))
    assert int(ds["not_run"].values[mmd]) == 0
    assert not counting.saw_flat
    with pytest.raises(InvalidInputError, match=r"^`sigmas` must be positive and finite"):
        private_swap_sweep(flat, [0.0], bank=bank, pipeline=pipe, pairs=[(0, 1)], progress=False)
