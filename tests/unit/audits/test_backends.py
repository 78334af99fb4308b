"""audit_pairs over every pair on threads and dask process workers (idaudit.audits._backends)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
import xarray as xr

from idaudit import (
    EmbeddingSet,
    GaussMechAuditor,
    MMDTVAuditor,
    audit_pairs,
)
from standins import all_pairs_auditors, uneven_embeddings


@pytest.fixture(scope="module")
def es() -> EmbeddingSet:
    return uneven_embeddings()


@pytest.fixture(scope="module")
def full(es: EmbeddingSet) -> xr.Dataset:
    return audit_pairs(es, "all", all_pairs_auditors(), progress=False)


@pytest.mark.parametrize(("batch_size", "n_threads"), [(1, 1), (4, 3), (7, 2), (None, None)])
def test_chunk_size_and_threads_do_not_change_numbers(
    full: xr.Dataset, es: EmbeddingSet, batch_size: int | None, n_threads: int | None
) -> None:
    other = audit_pairs(
        es, "all", all_pairs_auditors(), batch_size=batch_size, n_threads=n_threads, progress=False
    )
    xr.testing.assert_allclose(other, full, rtol=1e-9, atol=1e-12)
    np.testing.assert_array_equal(other["mmdtv_pvalue"], full["mmdtv_pvalue"])
    np.testing.assert_array_equal(other["rocht_corner"], full["rocht_corner"])


def test_thread_counts_are_restored(es: EmbeddingSet) -> None:
    before = torch.get_num_threads()
    audit_pairs(es, "all", [GaussMechAuditor()], n_threads=2, progress=False)
    assert torch.get_num_threads() == before


# ------------------------------------------------------------------------------ dask
def test_process_workers_give_the_local_numbers(
    full: xr.Dataset, es: EmbeddingSet, tmp_path: Path
) -> None:
    distributed = pytest.importorskip("distributed")
    with (
        distributed.LocalCluster(
            n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None
        ) as cluster,
        distributed.Client(cluster) as client,
    ):
        other = audit_pairs(
            es, "all", all_pairs_auditors(), backend="dask", client=client, progress=False
        )
        stored = audit_pairs(
            es,
            "all",
            all_pairs_auditors(),
            backend="dask",
            client=client,
            batch_size=6,
            store=tmp_path / "d.zarr",
            progress=False,
        )
        # the tiled engine: each task is one tile, built on the worker from its two blocks
        tiled = [GaussMechAuditor(), MMDTVAuditor(), MMDTVAuditor(bandwidth_scale=2.0, name="m2")]
        tiles_dask = audit_pairs(
            es, "all", tiled, backend="dask", client=client, tile_size=2, progress=False
        )
        tiles_stored = audit_pairs(
            es,
            "all",
            tiled,
            backend="dask",
            client=client,
            tile_size=3,
            store=tmp_path / "t.zarr",
            keep="summary",
            progress=False,
        )
    tiles_local = audit_pairs(es, "all", tiled, tile_size=2, n_threads=1, progress=False)
    assert tiles_dask.attrs["setting.engine"] == "tiled"
    xr.testing.assert_allclose(tiles_dask, tiles_local.assign_attrs(tiles_dask.attrs), rtol=1e-12)
    local_summary = audit_pairs(es, "all", tiled, tile_size=3, keep="summary", progress=False)
    xr.testing.assert_allclose(tiles_stored, local_summary.assign_attrs(tiles_stored.attrs))
    xr.testing.assert_allclose(other, full, rtol=1e-9, atol=1e-12)
    xr.testing.assert_allclose(stored, full, rtol=1e-9, atol=1e-12)
    np.testing.assert_array_equal(other["mmdtv_pvalue"], full["mmdtv_pvalue"])
    np.testing.assert_array_equal(stored["rocht_corner"], full["rocht_corner"])
