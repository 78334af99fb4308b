"""Every pair on CUDA gives the CPU's numbers, summaries and store (skipped without a GPU)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import xarray as xr

from idaudit import (
    EmbeddingSet,
    GaussMechAuditor,
    KDELRAuditor,
    MMDTVAuditor,
    ROCHTAuditor,
    audit_pairs,
)

pytestmark = pytest.mark.gpu


def auditors() -> list:
    return [
        GaussMechAuditor(),
        KDELRAuditor(),
        KDELRAuditor(0.01),
        MMDTVAuditor(n_permutations=300, rng=1),
        ROCHTAuditor(rng=2),
    ]


@pytest.fixture(scope="module")
def es() -> EmbeddingSet:
    gen = np.random.default_rng(0)
    sizes = gen.integers(20, 31, size=12)
    rows = [gen.normal(size=(n, 24)) + 0.7 * np.eye(24)[k] for k, n in enumerate(sizes)]
    labels = [f"id{k:02d}" for k, n in enumerate(sizes) for _ in range(n)]
    return EmbeddingSet(np.vstack(rows), labels)


@pytest.mark.parametrize("batch_size", [None, 7])
def test_all_pairs_on_cuda_match_cpu(es: EmbeddingSet, batch_size: int | None) -> None:
    cpu = audit_pairs(es, "all", auditors(), device="cpu", progress=False)
    gpu = audit_pairs(es, "all", auditors(), device="cuda", batch_size=batch_size, progress=False)
    # the same float64 maths on another BLAS: agreement to rounding
    xr.testing.assert_allclose(gpu, cpu, rtol=1e-9, atol=1e-12)
    # permutations are drawn on the host and folds by scikit-learn: identical
    np.testing.assert_array_equal(gpu["mmdtv_pvalue"], cpu["mmdtv_pvalue"])
    np.testing.assert_array_equal(gpu["rocht_corner"], cpu["rocht_corner"])


def test_summary_and_store_on_cuda(es: EmbeddingSet, tmp_path: Path) -> None:
    cpu = audit_pairs(es, "all", auditors(), keep="summary", progress=False)
    gpu = audit_pairs(
        es,
        "all",
        auditors(),
        device="cuda",
        keep="summary",
        store=tmp_path / "g.zarr",
        progress=False,
    )
    xr.testing.assert_allclose(gpu, cpu, rtol=1e-9, atol=1e-12)
    # a store written on the GPU resumes on the CPU (the device does not change the numbers)
    again = audit_pairs(
        es, "all", auditors(), keep="summary", store=tmp_path / "g.zarr", progress=False
    )
    xr.testing.assert_identical(again, gpu)


def test_tiled_engine_on_cuda_matches_cpu(es: EmbeddingSet) -> None:
    tiled = [GaussMechAuditor(), MMDTVAuditor(), MMDTVAuditor(bandwidth_scale=0.5, name="m2")]
    cpu = audit_pairs(es, "all", tiled, device="cpu", tile_size=4, progress=False)
    gpu = audit_pairs(es, "all", tiled, device="cuda", tile_size=4, progress=False)
    assert gpu.attrs["setting.engine"] == "tiled"
    # the same float64 maths on another BLAS; medians selected by torch.kthvalue
    xr.testing.assert_allclose(gpu, cpu.assign_attrs(gpu.attrs), rtol=1e-9, atol=1e-12)
    summary = audit_pairs(es, "all", tiled, device="cuda", keep="summary", progress=False)
    local = audit_pairs(es, "all", tiled, keep="summary", progress=False)
    xr.testing.assert_allclose(summary, local.assign_attrs(summary.attrs), rtol=1e-9)
