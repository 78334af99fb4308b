"""The batched kernels on CUDA give the CPU's numbers (skipped where there is no GPU)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import xarray as xr

from idaudit import (
    EmbeddingSet,
    GaussMechAuditor,
    KDELRAuditor,
    MMDTVAuditor,
    ROCHTAuditor,
    audit_pairs,
)
from idaudit.ops import (
    fit_kernel_logistic,
    kde_bandwidth,
    kde_on_grid,
    median_heuristic,
    mmd2_permutation_test,
    pack_pairs,
    pairwise_sq_distances,
    rbf_kernel,
)

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def es() -> EmbeddingSet:
    gen = np.random.default_rng(0)
    sizes = [40, 37, 45, 39]
    rows = [gen.normal(size=(n, 32)) + 0.8 * np.eye(32)[k] for k, n in enumerate(sizes)]
    return EmbeddingSet(np.vstack(rows), np.repeat(["a", "b", "c", "d"], sizes))


def test_audit_pairs_on_cuda_matches_cpu(es: EmbeddingSet) -> None:
    pairs = [("a", "b"), ("a", "c"), ("b", "d"), ("c", "d")]
    auditors = [
        GaussMechAuditor(),
        KDELRAuditor(),
        KDELRAuditor(0.01),
        MMDTVAuditor(n_permutations=500, rng=1),
        ROCHTAuditor(rng=2),
    ]
    cpu = audit_pairs(es, pairs, auditors, device="cpu", progress=False)
    gpu = audit_pairs(es, pairs, auditors, device="cuda", progress=False)
    # different BLAS, same float64 maths: agreement to rounding
    xr.testing.assert_allclose(gpu, cpu, rtol=1e-9)
    # permutations are drawn on the host, so the p-values are identical
    np.testing.assert_array_equal(gpu["mmdtv_pvalue"], cpu["mmdtv_pvalue"])


def test_fit_on_cuda(es: EmbeddingSet) -> None:
    a, b = es.get("a"), es.get("b")
    for aud in (KDELRAuditor(), MMDTVAuditor(n_permutations=200), ROCHTAuditor()):
        on_cpu = type(aud)(**aud.get_params()).fit(a, b)
        on_gpu = type(aud)(**{**aud.get_params(), "device": "cuda"}).fit(a, b)
        assert on_gpu.epsilon_ == pytest.approx(on_cpu.epsilon_, rel=1e-9)


def test_kernels_on_cuda_match_cpu() -> None:
    gen = np.random.default_rng(1)
    samples = [(gen.normal(size=(30, 16)), gen.normal(0.2, 1, size=(25, 16))) for _ in range(3)]
    out = {}
    for dev in ("cpu", "cuda"):
        batch = pack_pairs(samples, dev)
        d2 = pairwise_sq_distances(batch.x)
        sigma = median_heuristic(d2, [55] * 3)
        kernel = rbf_kernel(d2, sigma)
        pv, obs, _ = mmd2_permutation_test(kernel, batch.n_a, batch.n_b, 3, 1000)
        values, mask = batch.side("a")
        rows = values.permute(0, 2, 1).reshape(48, -1)
        mrows = mask.repeat_interleave(16, 0)
        h = kde_bandwidth(rows, mrows, "silverman")
        dens = kde_on_grid(rows, mrows, h, rows.amin(-1) - 3 * h, 0.01 + 0 * h, 201)
        gram = batch.x @ batch.x.transpose(1, 2)
        y = torch.cat([torch.zeros(30), torch.ones(25)]).to(dev, torch.float64).expand(3, -1)
        fit = fit_kernel_logistic(gram[:, :55, :55], y, torch.ones_like(y)[:, None, :])
        out[dev] = [t.cpu() for t in (sigma, pv, obs, dens, fit.logits)]
    for c, g in zip(out["cpu"], out["cuda"], strict=True):
        torch.testing.assert_close(g, c, rtol=1e-9, atol=1e-12)
