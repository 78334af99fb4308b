"""audit_pairs over every pair: chunking, threads, summaries, resumable stores, process workers."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
import xarray as xr

from idaudit import (
    EmbeddingSet,
    GaussMechAuditor,
    InvalidInputError,
    KDELRAuditor,
    MMDTVAuditor,
    ROCHTAuditor,
    audit_pairs,
    sample_pairs,
)
from idaudit.audits import QUANTILES
from idaudit.data import all_pairs
from idaudit.results import check_result_dataset

SRC = str(Path(__file__).resolve().parents[2] / "src")


def make_es(n_id: int = 9, dim: int = 5, seed: int = 0) -> EmbeddingSet:
    gen = np.random.default_rng(seed)
    sizes = gen.integers(8, 13, size=n_id)  # unequal identities: chunks need padding
    rows = [gen.normal(size=(n, dim)) + 0.9 * np.eye(dim)[k % dim] for k, n in enumerate(sizes)]
    # two identical identities make exact ties (several pairs reach the same value)
    rows[1] = rows[0].copy()
    labels = [f"id{k:02d}" for k, r in enumerate(rows) for _ in range(len(r))]
    return EmbeddingSet(np.vstack(rows), labels)


def auditors() -> list:
    return [
        GaussMechAuditor(),
        KDELRAuditor(n_grid=41),
        MMDTVAuditor(n_permutations=40, rng=1),
        ROCHTAuditor(n_folds=3, rng=2),
    ]


@pytest.fixture(scope="module")
def es() -> EmbeddingSet:
    return make_es()


@pytest.fixture(scope="module")
def full(es: EmbeddingSet) -> xr.Dataset:
    return audit_pairs(es, "all", auditors(), progress=False)


def test_all_pairs_equals_audit_pairs_on_the_same_pairs(full: xr.Dataset, es: EmbeddingSet) -> None:
    ids = es.identities.tolist()
    m = len(ids)
    assert full.sizes["pair"] == m * (m - 1) // 2
    assert list(zip(full["identity_a"].values, full["identity_b"].values, strict=True)) == [
        (ids[i], ids[j]) for i in range(m) for j in range(i + 1, m)
    ]
    check_result_dataset(full)
    # the same pairs as an explicit list, in another (seeded shuffle) order
    shuffled = sample_pairs(es.identities, rng=3)
    other = audit_pairs(es, shuffled, auditors(), progress=False)
    index = {p: k for k, p in enumerate(shuffled)}
    back = other.isel(pair=[index[p] for p in all_pairs(es.identities)])
    xr.testing.assert_allclose(full.drop_attrs(), back.drop_attrs(), rtol=1e-6, atol=1e-12)
    np.testing.assert_array_equal(full["mmdtv_pvalue"], back["mmdtv_pvalue"])
    np.testing.assert_array_equal(full["rocht_corner"], back["rocht_corner"])
    # and each pair equals the auditors' own fit on that pair
    for k in (0, 7, 20):
        a, b = full["identity_a"].values[k], full["identity_b"].values[k]
        for aud in auditors():
            aud.fit(es.get(a), es.get(b))
            got = full[f"{aud.label}_epsilon"].values[k]
            assert got == pytest.approx(aud.epsilon_, rel=1e-6, abs=1e-12)


@pytest.mark.parametrize(("batch_size", "n_threads"), [(1, 1), (4, 3), (7, 2), (None, None)])
def test_chunk_size_and_threads_do_not_change_numbers(
    full: xr.Dataset, es: EmbeddingSet, batch_size: int | None, n_threads: int | None
) -> None:
    other = audit_pairs(
        es, "all", auditors(), batch_size=batch_size, n_threads=n_threads, progress=False
    )
    xr.testing.assert_allclose(other, full, rtol=1e-9, atol=1e-12)
    np.testing.assert_array_equal(other["mmdtv_pvalue"], full["mmdtv_pvalue"])
    np.testing.assert_array_equal(other["rocht_corner"], full["rocht_corner"])


def test_thread_counts_are_restored(es: EmbeddingSet) -> None:
    before = torch.get_num_threads()
    audit_pairs(es, "all", [GaussMechAuditor()], n_threads=2, progress=False)
    assert torch.get_num_threads() == before


def test_summary_equals_reductions_of_the_full_dataset(full: xr.Dataset, es: EmbeddingSet) -> None:
    # the same chunking as `full`, so every per-pair number is bit-identical
    summ = audit_pairs(es, "all", auditors(), keep="summary", progress=False)
    check_result_dataset(summ)
    assert summ.attrs["n_pairs"] == full.sizes["pair"]
    np.testing.assert_array_equal(summ["quantile"], QUANTILES)
    frame = full.drop_vars([v for v in full.data_vars if "per_dim" in v]).to_dataframe()
    frame = frame.reset_index(drop=True)
    checked = 0
    for var in full.data_vars:
        if full[var].dims != ("pair",):
            assert not any(k.startswith(var + "_") for k in summ.data_vars)
            continue
        values = frame[var]
        if values.dtype == bool:
            assert int(summ[f"{var}_count"]) == int(values.sum())
            continue
        top = values.max()
        first = values.index[values == top][0]  # first pair in pair order reaching it
        assert float(summ[f"{var}_max"]) == top
        assert summ[f"{var}_argmax_identity_a"].item() == frame["identity_a"][first]
        assert summ[f"{var}_argmax_identity_b"].item() == frame["identity_b"][first]
        assert int(summ[f"{var}_n_at_max"]) == int((values == top).sum())
        assert int(summ[f"{var}_n_inf"]) == int(np.isposinf(values).sum())
        # exact order statistics x_(ceil(q n)) (x_(1) at q = 0), written out
        ordered = np.sort(values.to_numpy())
        n = ordered.size
        want = [ordered[max(int(np.ceil(q * n)), 1) - 1] for q in QUANTILES]
        np.testing.assert_array_equal(summ[f"{var}_quantile"].values, want)
        # per identity: the largest value over its pairs and the first partner reaching it
        long = pd.concat(
            [
                pd.DataFrame({"who": frame["identity_a"], "partner": frame["identity_b"]}),
                pd.DataFrame({"who": frame["identity_b"], "partner": frame["identity_a"]}),
            ]
        )
        long["v"] = np.r_[values.to_numpy(), values.to_numpy()]
        long["order"] = np.r_[frame.index.to_numpy(), frame.index.to_numpy()]
        best = long.sort_values(["v", "order"], ascending=[False, True]).groupby("who").first()
        np.testing.assert_array_equal(summ["identity"].values, best.index.to_numpy())
        np.testing.assert_array_equal(summ[f"{var}_worst"].values, best["v"].to_numpy())
        np.testing.assert_array_equal(
            summ[f"{var}_worst_partner"].values, best["partner"].to_numpy()
        )
        checked += 1
    assert checked == 13
    # identities id00 and id01 are identical, so the data hold exact ties to break
    assert frame["gaussmech_epsilon"].duplicated().any()


def test_summary_on_a_pair_list(es: EmbeddingSet) -> None:
    pairs = sample_pairs(es.identities, 10, rng=0)
    ds = audit_pairs(es, pairs, [GaussMechAuditor()], progress=False)
    summ = audit_pairs(es, pairs, [GaussMechAuditor()], keep="summary", progress=False)
    assert float(summ["gaussmech_epsilon_max"]) == float(ds["gaussmech_epsilon"].max())
    involved = sorted({x for p in pairs for x in p})
    assert summ["identity"].values.tolist() == involved


# ------------------------------------------------------------------------------ stores
COUNTING = '''
import os, time
from idaudit import GaussMechAuditor

class CountingAuditor(GaussMechAuditor):
    """GaussMech that records the pairs it computes (and can be slowed down)."""

    seen = []

    def _run(self, batch, seed):
        time.sleep(float(os.environ.get("IDAUDIT_TEST_SLOW", "0")))
        type(self).seen.extend(batch.labels)
        return super()._run(batch, seed)
'''


def test_store_resumes_a_killed_run_without_recomputing(tmp_path: Path) -> None:
    (tmp_path / "counting.py").write_text(COUNTING)
    store = tmp_path / "results.zarr"
    script = textwrap.dedent(
        f"""
        import sys
        sys.path[:0] = [{SRC!r}, {str(tmp_path)!r}]
        sys.path.insert(0, {str(Path(__file__).parent)!r})
        from test_audits_all_pairs import make_es
        from counting import CountingAuditor
        from idaudit import audit_pairs
        audit_pairs(make_es(), "all", [CountingAuditor()], batch_size=3, n_threads=1,
                    store={str(store)!r}, progress=False)
        """
    )
    env = {**os.environ, "IDAUDIT_TEST_SLOW": "0.15"}
    proc = subprocess.Popen([sys.executable, "-c", script], env=env)
    try:
        import zarr

        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            time.sleep(0.05)
            try:
                n_done = int(
                    np.asarray(zarr.open_group(str(store), mode="r")["chunk_done"][:]).sum()
                )
            except Exception:  # not created yet
                continue
            if n_done >= 3:
                break
        assert proc.poll() is None, "the run finished before it could be interrupted"
        proc.send_signal(signal.SIGKILL)
        proc.wait(30)
    finally:
        if proc.poll() is None:
            proc.kill()
    flags = np.asarray(zarr.open_group(str(store), mode="r")["chunk_done"][:])
    assert 3 <= flags.sum() < flags.size
    sys.path.insert(0, str(tmp_path))
    try:
        from counting import CountingAuditor
    finally:
        sys.path.remove(str(tmp_path))
    es = make_es()
    pairs = all_pairs(es.identities)
    aud = CountingAuditor()
    resumed = audit_pairs(es, "all", [aud], store=store, progress=False)
    # exactly the pairs of the unfinished chunks were computed, each once
    unfinished = [p for k, done in enumerate(flags) if not done for p in pairs[3 * k : 3 * k + 3]]
    assert sorted(aud.seen) == sorted(unfinished)  # chunks may run side by side
    fresh = audit_pairs(es, "all", [GaussMechAuditor()], progress=False)
    assert resumed.sizes["pair"] == len(pairs)
    np.testing.assert_allclose(resumed["gaussmech_epsilon"], fresh["gaussmech_epsilon"], rtol=1e-12)
    # the finished store resumes with nothing left to do and the same Dataset
    again = CountingAuditor()
    CountingAuditor.seen = []
    xr.testing.assert_identical(
        audit_pairs(es, "all", [again], store=store, progress=False), resumed
    )
    assert CountingAuditor.seen == []
    on_disk = xr.open_zarr(store, consolidated=False)
    np.testing.assert_array_equal(on_disk["gaussmech_epsilon"], resumed["gaussmech_epsilon"])
    assert oct(store.stat().st_mode & 0o777) == oct(0o700)


def test_a_store_for_other_inputs_or_parameters_is_refused(tmp_path: Path) -> None:
    es = make_es()
    store = tmp_path / "s.zarr"
    audit_pairs(es, "all", [GaussMechAuditor()], store=store, batch_size=4, progress=False)
    with pytest.raises(InvalidInputError, match="holds results for other embeddings"):
        audit_pairs(make_es(seed=1), "all", [GaussMechAuditor()], store=store, progress=False)
    with pytest.raises(InvalidInputError, match="other auditors, parameters or seeds"):
        audit_pairs(es, "all", [GaussMechAuditor(delta=1e-3)], store=store, progress=False)
    with pytest.raises(InvalidInputError, match="other auditors, parameters or seeds"):
        audit_pairs(es, "all", [MMDTVAuditor(rng=None)], store=store, progress=False)
    with pytest.raises(InvalidInputError, match="holds results for other pairs"):
        audit_pairs(es, [("id00", "id02")], [GaussMechAuditor()], store=store, progress=False)
    with pytest.raises(
        InvalidInputError, match=r"`batch_size` must match the store's chunks \(4\)"
    ):
        audit_pairs(es, "all", [GaussMechAuditor()], store=store, batch_size=5, progress=False)
    (tmp_path / "plain").mkdir()
    with pytest.raises(InvalidInputError, match="is not a zarr store written by audit_pairs"):
        audit_pairs(es, "all", [GaussMechAuditor()], store=tmp_path / "plain", progress=False)


def test_bad_options(es: EmbeddingSet) -> None:
    with pytest.raises(InvalidInputError, match="`pairs` must be 'all' or a sequence"):
        audit_pairs(es, "every", [GaussMechAuditor()], progress=False)
    with pytest.raises(InvalidInputError, match="`keep` must be one of 'pairs', 'summary'"):
        audit_pairs(es, "all", [GaussMechAuditor()], keep="max", progress=False)  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError, match="`n_threads` must be >= 1; got 0"):
        audit_pairs(es, "all", [GaussMechAuditor()], n_threads=0, progress=False)
    one = EmbeddingSet(np.random.default_rng(0).normal(size=(5, 3)), ["a"] * 5)
    with pytest.raises(InvalidInputError, match='`pairs="all"` needs at least 2 identities'):
        audit_pairs(one, "all", [GaussMechAuditor()], progress=False)


# ------------------------------------------------------------------------------ memory
MEMORY = """
import resource, sys
sys.path.insert(0, {src!r})
import numpy as np
from idaudit import EmbeddingSet, GaussMechAuditor, MMDTVAuditor, audit_pairs
gen = np.random.default_rng(0)
n_id, n, d = 150, 16, 256
es = EmbeddingSet(gen.normal(size=(n_id * n, d)), np.repeat(np.arange(n_id), n))
# warm-up on two pairs, so that library code and allocator pools are in the baseline
audit_pairs(es, [(0, 1), (2, 3)], [GaussMechAuditor(), MMDTVAuditor()], progress=False)
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
s = audit_pairs(es, "all", [GaussMechAuditor(), MMDTVAuditor()], keep="summary",
                n_threads=2, progress=False)
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print((peak - base) * 1024, int(s.attrs["n_pairs"]))
"""


def test_peak_memory_stays_under_the_stated_bound() -> None:
    out = subprocess.run(
        [sys.executable, "-c", MEMORY.format(src=SRC)],
        capture_output=True,
        text=True,
        check=True,
        timeout=300,
    )
    grown, n_pairs = map(int, out.stdout.split())
    n_id, n, d = 150, 16, 256
    assert n_pairs == n_id * (n_id - 1) // 2
    # all pairs in one batch: the packed rows alone, (pairs, 2n, d) float64 = 732 MB
    naive = n_pairs * 2 * n * d * 8
    # the stated bound (docs/audit_pairs.md): n_threads chunks of batch_size pairs of
    # 8 (3 n_max d + 4 n_max^2) bytes each (batch_size 256 here), the per-identity caches
    # (identities x n x (2 d + n) x 8 B), and 8 B per pair and scalar output (8 here);
    # doubled as the generous margin for allocator slack and interpreter state
    n_max = 2 * n
    chunk = 256 * 8 * (3 * n_max * d + 4 * n_max**2)
    bound = 2 * (2 * chunk + n_id * n * (2 * d + n) * 8 + n_pairs * 8 * 8)
    assert grown < bound < naive / 2


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
        other = audit_pairs(es, "all", auditors(), backend="dask", client=client, progress=False)
        stored = audit_pairs(
            es,
            "all",
            auditors(),
            backend="dask",
            client=client,
            batch_size=6,
            store=tmp_path / "d.zarr",
            progress=False,
        )
    xr.testing.assert_allclose(other, full, rtol=1e-9, atol=1e-12)
    xr.testing.assert_allclose(stored, full, rtol=1e-9, atol=1e-12)
    np.testing.assert_array_equal(other["mmdtv_pvalue"], full["mmdtv_pvalue"])
    np.testing.assert_array_equal(stored["rocht_corner"], full["rocht_corner"])
