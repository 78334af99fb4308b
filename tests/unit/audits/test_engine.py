"""Tests of idaudit.audit_pairs: schema, batching, attributes, errors and the dask backend."""

from __future__ import annotations

import hashlib
import importlib.util
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import xarray as xr

from idaudit import (
    EmbeddingSet,
    GaussMechAuditor,
    InvalidInputError,
    KDELRAuditor,
    MMDTVAuditor,
    ROCHTAuditor,
    __version__,
    audit_pairs,
    sample_pairs,
)
from idaudit.audits._stream import QUANTILES
from idaudit.data import all_pairs
from idaudit.results import check_result_dataset
from references import assert_summary_matches
from standins import all_pairs_auditors, uneven_embeddings


@pytest.fixture(scope="module")
def es() -> EmbeddingSet:
    gen = np.random.default_rng(0)
    sizes = [12, 15, 10, 14, 11]  # unequal identities: batches need padding
    rows = [gen.normal(size=(n, 6)) + 1.5 * np.eye(6)[k] for k, n in enumerate(sizes)]
    labels = [f"id{k}" for k, n in enumerate(sizes) for _ in range(n)]
    return EmbeddingSet(np.vstack(rows), labels)


PAIRS = [("id0", "id1"), ("id2", "id4"), ("id1", "id3"), ("id0", "id4"), ("id3", "id4")]


def auditors() -> list:
    return [
        GaussMechAuditor(),
        KDELRAuditor(),
        KDELRAuditor(mix=0.01),
        MMDTVAuditor(n_permutations=60, rng=1),
        ROCHTAuditor(n_folds=3, rng=2),
    ]


@pytest.fixture(scope="module")
def ds(es: EmbeddingSet) -> xr.Dataset:
    return audit_pairs(es, PAIRS, auditors(), progress=False)


def test_schema(ds: xr.Dataset, es: EmbeddingSet) -> None:
    assert dict(ds.sizes) == {"pair": 5, "embedding_dim": 6}
    assert set(ds.coords) == {
        "identity_a",
        "identity_b",
        "n_a",
        "n_b",
        "fail_rate_a",
        "fail_rate_b",
        "fail_pvalue",
    }
    # no row failed: rates 0, and Fisher's exact test of equal rates gives 1
    assert ds["fail_rate_a"].values.tolist() == [0.0] * 5
    assert ds["fail_pvalue"].values.tolist() == [1.0] * 5
    assert ds["identity_a"].values.tolist() == [a for a, _ in PAIRS]
    assert ds["n_b"].values.tolist() == [es.counts[b] for _, b in PAIRS]
    expected = {
        "gaussmech_epsilon": "diagnostic",
        "gaussmech_mean_distance": "sample_estimate",
        "gaussmech_sigma": "sample_estimate",
        "kdelr_epsilon": "diagnostic",
        "kdelr_epsilon_per_dim": "diagnostic",
        "kdelr_mix0.01_epsilon": "diagnostic",
        "kdelr_mix0.01_epsilon_per_dim": "diagnostic",
        "mmdtv_epsilon": "sample_estimate",
        "mmdtv_epsilon_hs": "sample_estimate",
        "mmdtv_mmd2": "sample_estimate",
        "mmdtv_mmd": "sample_estimate",
        "mmdtv_bandwidth": "sample_estimate",
        "mmdtv_pvalue": "sample_estimate",
        "rocht_epsilon": "diagnostic",
        "rocht_auc": "sample_estimate",
        "rocht_tv": "diagnostic",
        "rocht_corner": "diagnostic",
    }
    assert {v: ds[v].attrs["status"] for v in ds.data_vars} == expected
    assert all(ds[v].attrs["long_name"] for v in ds.data_vars)
    assert ds["rocht_corner"].dtype == bool
    # the per-coordinate KDE-LR terms sum to the pair's epsilon (Eq. 11)
    assert ds["kdelr_epsilon_per_dim"].dims == ("pair", "embedding_dim")
    np.testing.assert_allclose(
        ds["kdelr_epsilon_per_dim"].sum("embedding_dim"), ds["kdelr_epsilon"], rtol=1e-12
    )


def test_attributes(ds: xr.Dataset, es: EmbeddingSet) -> None:
    assert ds.attrs["idaudit_version"] == __version__
    assert ds.attrs["input_sha256"] == es.sha256
    text = "\n".join(f"{a!r}\t{b!r}" for a, b in PAIRS)
    assert ds.attrs["pairs_sha256"] == hashlib.sha256(text.encode()).hexdigest()
    assert ds.attrs["auditors"] == "gaussmech,kdelr,kdelr_mix0.01,mmdtv,rocht"
    assert ds.attrs["mmdtv.class"] == "MMDTVAuditor"
    assert ds.attrs["mmdtv.n_permutations"] == 60
    assert ds.attrs["mmdtv.seed"] == MMDTVAuditor(rng=1).fit(*[es.get("id0"), es.get("id1")]).seed_
    assert ds.attrs["kdelr_mix0.01.mix"] == 0.01
    assert ds.attrs["rocht.name"] == "None"
    assert all(isinstance(v, (str, int, float)) for v in ds.attrs.values())
    # the run settings actually used, the automatic batch size resolved
    assert ds.attrs["setting.device"] == "cpu"
    assert ds.attrs["setting.backend"] == "local"
    assert isinstance(ds.attrs["setting.batch_size"], int)
    assert ds.attrs["setting.batch_size"] >= 1
    check_result_dataset(ds)
    fixed = audit_pairs(es, PAIRS[:2], [GaussMechAuditor()], batch_size=1, progress=False)
    assert fixed.attrs["setting.batch_size"] == 1


def test_labels_of_run_level_attributes_are_refused(es: EmbeddingSet) -> None:
    with pytest.raises(InvalidInputError, match=r"other than 'seed' and 'setting'; got 'setting'"):
        audit_pairs(es, PAIRS[:1], [GaussMechAuditor(name="setting")], progress=False)


def test_netcdf_round_trip(ds: xr.Dataset, tmp_path: object) -> None:
    engine = next(
        (
            e
            for e, m in (("netcdf4", "netCDF4"), ("h5netcdf", "h5py"))
            if importlib.util.find_spec(m)
        ),
        None,
    )
    if engine is None:
        pytest.skip("no netCDF4 engine (pip install netCDF4)")
    path = f"{tmp_path}/audit.nc"
    ds.to_netcdf(path, engine=engine)
    assert xr.load_dataset(path, engine=engine).identical(ds)


def test_each_pair_equals_fit(ds: xr.Dataset, es: EmbeddingSet) -> None:
    for k, (a, b) in enumerate(PAIRS):
        for aud in auditors():
            aud.fit(es.get(a), es.get(b))
            for out in aud.outputs():
                got = ds[f"{aud.label}_{out.name}"].values[k]
                want = getattr(aud, out.name + "_")
                if out.dtype is bool:
                    assert bool(got) == want
                else:
                    assert got == pytest.approx(want, rel=1e-9, abs=1e-12)


@pytest.mark.parametrize("batch_size", [1, 2, 5])
def test_batch_size_does_not_change_numbers(
    ds: xr.Dataset, es: EmbeddingSet, batch_size: int
) -> None:
    other = audit_pairs(es, PAIRS, auditors(), batch_size=batch_size, progress=False)
    xr.testing.assert_allclose(other, ds, rtol=1e-9)
    np.testing.assert_array_equal(other["mmdtv_pvalue"], ds["mmdtv_pvalue"])
    np.testing.assert_array_equal(other["rocht_corner"], ds["rocht_corner"])


def test_pair_order_does_not_change_a_pairs_numbers(ds: xr.Dataset, es: EmbeddingSet) -> None:
    other = audit_pairs(es, PAIRS[::-1], auditors(), progress=False)
    xr.testing.assert_allclose(other.isel(pair=slice(None, None, -1)), ds, rtol=1e-9)


def test_pairs_as_array(ds: xr.Dataset, es: EmbeddingSet) -> None:
    other = audit_pairs(es, np.array(PAIRS), [GaussMechAuditor()], progress=False)
    np.testing.assert_array_equal(other["gaussmech_epsilon"], ds["gaussmech_epsilon"])
    assert other["identity_a"].values.tolist() == [a for a, _ in PAIRS]


def test_dask_backend_gives_the_identical_dataset(ds: xr.Dataset, es: EmbeddingSet) -> None:
    distributed = pytest.importorskip("distributed")
    with distributed.Client(processes=False, n_workers=1, threads_per_worker=1) as client:
        other = audit_pairs(es, PAIRS, auditors(), backend="dask", client=client, progress=False)
        again = audit_pairs(es, PAIRS, auditors(), backend="dask", progress=False)
    with_local_chunks = audit_pairs(es, PAIRS, auditors(), progress=False)
    # the results are identical; only the recorded run setting says which backend ran
    for result in (other, again):
        assert result.attrs.pop("setting.backend") == "dask"
    assert with_local_chunks.attrs.pop("setting.backend") == "local"
    xr.testing.assert_identical(other, with_local_chunks)
    local = ds.copy()
    assert local.attrs.pop("setting.backend") == "local"
    xr.testing.assert_identical(again, local)


def test_dask_backend_needs_a_client(es: EmbeddingSet) -> None:
    pytest.importorskip("distributed")
    with pytest.raises(InvalidInputError, match=r"needs a running dask\.distributed Client"):
        audit_pairs(es, PAIRS, [GaussMechAuditor()], backend="dask", progress=False)


@pytest.mark.parametrize(
    ("pairs", "match"),
    [
        ([("id0", "nobody")], r"`pairs\[0\]` names identity 'nobody', which `es` does not contain"),
        ([("id0", "id1"), ("id2", "id2")], r"`pairs\[1\]` pairs identity 'id2' with itself"),
        ([("id0",)], r"`pairs\[0\]` must be a pair"),
        ([], "`pairs` must hold at least one pair"),
        (np.array(["id0", "id1"]), r"array of shape \(n_pairs, 2\); got an array of shape \(2,\)"),
        ([("id0", True)], r"`pairs\[0\]` names True; labels are not bools"),
    ],
)
def test_bad_pairs(es: EmbeddingSet, pairs: object, match: str) -> None:
    with pytest.raises(InvalidInputError, match=match):
        audit_pairs(es, pairs, [GaussMechAuditor()], progress=False)


def test_bad_arguments(es: EmbeddingSet) -> None:
    with pytest.raises(TypeError, match=r"`es` must be an idaudit\.EmbeddingSet"):
        audit_pairs(np.zeros((3, 2)), PAIRS, [GaussMechAuditor()])  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError, match="two auditors share the label 'mmdtv'"):
        audit_pairs(es, PAIRS, [MMDTVAuditor(), MMDTVAuditor(bandwidth_scale=2.0)])
    with pytest.raises(InvalidInputError, match="`auditors` must hold at least one auditor"):
        audit_pairs(es, PAIRS, [])
    with pytest.raises(TypeError, match=r"`auditors\[0\]` must be an idaudit auditor"):
        audit_pairs(es, PAIRS, ["mmdtv"])  # type: ignore[list-item]
    with pytest.raises(InvalidInputError, match="`batch_size` must be >= 1; got 0"):
        audit_pairs(es, PAIRS, [GaussMechAuditor()], batch_size=0)
    with pytest.raises(InvalidInputError, match="`backend` must be one of 'local', 'dask'"):
        audit_pairs(es, PAIRS, [GaussMechAuditor()], backend="ray")
    with pytest.raises(
        InvalidInputError,
        match="identity 'id2' has 10 row\\(s\\); auditor 'rocht' needs at least 11",
    ):
        audit_pairs(es, PAIRS, [ROCHTAuditor(n_folds=11)], progress=False)


def test_progress_bar_is_optional(es: EmbeddingSet, capsys: pytest.CaptureFixture[str]) -> None:
    audit_pairs(es, PAIRS[:1], [GaussMechAuditor()], progress=False)
    assert "audit_pairs" not in capsys.readouterr().err
    audit_pairs(es, PAIRS[:1], [GaussMechAuditor()], progress=True)
    assert "audit_pairs" in capsys.readouterr().err


def test_pairs_are_reported_with_the_stored_labels() -> None:
    gen = np.random.default_rng(4)
    es = EmbeddingSet(gen.normal(size=(30, 3)), np.repeat([1, 2, 3], 10))
    ds = audit_pairs(es, [(1.0, np.int32(2))], [GaussMechAuditor()], progress=False)
    assert ds["identity_a"].values.tolist() == [1]
    assert ds["identity_a"].dtype.kind == "i"
    assert ds["identity_b"].values.tolist() == [2]


# -- every pair (pairs="all"): chunking, summaries, memory -----------------------------------
# (stores: test_store.py; threads and dask process workers: test_backends.py)

SRC = str(Path(__file__).resolve().parents[3] / "src")


@pytest.fixture(scope="module")
def uneven_es() -> EmbeddingSet:
    return uneven_embeddings()


@pytest.fixture(scope="module")
def full(uneven_es: EmbeddingSet) -> xr.Dataset:
    return audit_pairs(uneven_es, "all", all_pairs_auditors(), progress=False)


def test_all_pairs_equals_audit_pairs_on_the_same_pairs(
    full: xr.Dataset, uneven_es: EmbeddingSet
) -> None:
    ids = uneven_es.identities.tolist()
    m = len(ids)
    assert full.sizes["pair"] == m * (m - 1) // 2
    assert list(zip(full["identity_a"].values, full["identity_b"].values, strict=True)) == [
        (ids[i], ids[j]) for i in range(m) for j in range(i + 1, m)
    ]
    check_result_dataset(full)
    # the same pairs as an explicit list, in another (seeded shuffle) order
    shuffled = sample_pairs(uneven_es.identities, rng=3)
    other = audit_pairs(uneven_es, shuffled, all_pairs_auditors(), progress=False)
    index = {p: k for k, p in enumerate(shuffled)}
    back = other.isel(pair=[index[p] for p in all_pairs(uneven_es.identities)])
    xr.testing.assert_allclose(full.drop_attrs(), back.drop_attrs(), rtol=1e-6, atol=1e-12)
    np.testing.assert_array_equal(full["mmdtv_pvalue"], back["mmdtv_pvalue"])
    np.testing.assert_array_equal(full["rocht_corner"], back["rocht_corner"])
    # and each pair equals the auditors' own fit on that pair
    for k in (0, 7, 20):
        a, b = full["identity_a"].values[k], full["identity_b"].values[k]
        for aud in all_pairs_auditors():
            aud.fit(uneven_es.get(a), uneven_es.get(b))
            got = full[f"{aud.label}_epsilon"].values[k]
            assert got == pytest.approx(aud.epsilon_, rel=1e-6, abs=1e-12)


def test_summary_equals_reductions_of_the_full_dataset(
    full: xr.Dataset, uneven_es: EmbeddingSet
) -> None:
    # the same chunking as `full`, so every per-pair number is bit-identical
    summ = audit_pairs(uneven_es, "all", all_pairs_auditors(), keep="summary", progress=False)
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
        assert_summary_matches(summ, full, var, QUANTILES)
        checked += 1
    assert checked == 13
    # identities id00 and id01 are identical, so the data hold exact ties to break
    assert frame["gaussmech_epsilon"].duplicated().any()


def test_summary_on_a_pair_list(uneven_es: EmbeddingSet) -> None:
    pairs = sample_pairs(uneven_es.identities, 10, rng=0)
    ds = audit_pairs(uneven_es, pairs, [GaussMechAuditor()], progress=False)
    summ = audit_pairs(uneven_es, pairs, [GaussMechAuditor()], keep="summary", progress=False)
    assert float(summ["gaussmech_epsilon_max"]) == float(ds["gaussmech_epsilon"].max())
    involved = sorted({x for p in pairs for x in p})
    assert summ["identity"].values.tolist() == involved


def test_bad_options(uneven_es: EmbeddingSet) -> None:
    with pytest.raises(InvalidInputError, match="`pairs` must be 'all' or a sequence"):
        audit_pairs(uneven_es, "every", [GaussMechAuditor()], progress=False)
    with pytest.raises(InvalidInputError, match="`keep` must be one of 'pairs', 'summary'"):
        audit_pairs(uneven_es, "all", [GaussMechAuditor()], keep="max", progress=False)  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError, match="`n_threads` must be >= 1; got 0"):
        audit_pairs(uneven_es, "all", [GaussMechAuditor()], n_threads=0, progress=False)
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
