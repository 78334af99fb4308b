"""The tiled engine of ``audit_pairs(es, "all", ...)`` and the streaming summaries.

References are independent of the code under test: each auditor's own ``fit`` on the pair
(the per-pair path), the chunked engine, numpy's sort and quantile, and pandas group-bys.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest
import xarray as xr

import idaudit.audits._stream as stream_module
from idaudit import (
    EmbeddingSet,
    GaussMechAuditor,
    IdauditWarning,
    InvalidInputError,
    MMDTVAuditor,
    ROCHTAuditor,
    audit_pairs,
)
from idaudit.audits._stream import QUANTILES, order_statistics
from idaudit.audits._tiles import TilePlan
from references import assert_summary_matches

HERE = Path(__file__).resolve().parent
SRC = str(HERE.parents[2] / "src")


def tiled_auditors() -> list:
    return [
        GaussMechAuditor(),
        MMDTVAuditor(),
        MMDTVAuditor(bandwidth_scale=0.5, name="mmd_narrow"),
        MMDTVAuditor(bandwidth=0.8, name="mmd_fixed"),
    ]


def ragged(sizes: list[int], dim: int = 6, seed: int = 0) -> EmbeddingSet:
    """Identities of the given row counts, with identity 1 a copy of 0 (exact ties)."""
    gen = np.random.default_rng(seed)
    rows = [gen.normal(size=(n, dim)) + 0.8 * np.eye(dim)[k % dim] for k, n in enumerate(sizes)]
    if sizes[0] == sizes[1]:
        rows[1] = rows[0].copy()
    labels = [f"id{k:03d}" for k, n in enumerate(sizes) for _ in range(n)]
    return EmbeddingSet(np.vstack(rows), labels)


@pytest.fixture(scope="module")
def es() -> EmbeddingSet:
    # unequal sizes from 2 to 300 rows, several identities per size (blocks of one size)
    sizes = [7, 7, 2, 3, 7, 7, 3, 12, 2, 300, 7, 12, 5, 7, 3, 7, 40, 7, 2, 5, 7, 7]
    return ragged(sizes)


@pytest.fixture(scope="module")
def tiled(es: EmbeddingSet) -> xr.Dataset:
    return audit_pairs(es, "all", tiled_auditors(), progress=False, tile_size=3, engine="tiled")


def test_tiled_equals_each_pairs_own_fit(tiled: xr.Dataset, es: EmbeddingSet) -> None:
    assert tiled.attrs["setting.engine"] == "tiled"
    gen = np.random.default_rng(5)
    picks = gen.choice(tiled.sizes["pair"], size=40, replace=False)
    for k in picks.tolist():
        a, b = tiled["identity_a"].values[k], tiled["identity_b"].values[k]
        for aud in tiled_auditors():
            aud.fit(es.get(a), es.get(b))
            for out in aud.outputs():
                got = float(tiled[f"{aud.label}_{out.name}"].values[k])
                want = float(getattr(aud, out.name + "_"))
                assert got == pytest.approx(want, rel=1e-6, abs=1e-12), (a, b, aud.label, out)


@pytest.mark.parametrize(("tile_size", "n_threads"), [(1, 1), (2, 2), (5, 1), (64, 2)])
def test_tiled_equals_chunked_whatever_tile_size_and_threads(
    tiled: xr.Dataset, es: EmbeddingSet, tile_size: int, n_threads: int
) -> None:
    chunked = audit_pairs(es, "all", tiled_auditors(), progress=False, engine="chunked")
    other = audit_pairs(
        es, "all", tiled_auditors(), progress=False, tile_size=tile_size, n_threads=n_threads
    )
    assert other.attrs["setting.tile_size"] == tile_size
    for var in chunked.data_vars:
        np.testing.assert_allclose(other[var], chunked[var], rtol=1e-9, atol=1e-12, err_msg=var)
        # whatever the tiles, the same pairs meet the same products: identical numbers
        np.testing.assert_allclose(other[var], tiled[var], rtol=1e-12, atol=1e-15, err_msg=var)
    np.testing.assert_array_equal(other["identity_a"], chunked["identity_a"])
    np.testing.assert_array_equal(other["identity_b"], chunked["identity_b"])


def test_tile_plan_covers_every_pair_once() -> None:
    sizes = np.array([3, 1, 3, 2, 3, 3, 2, 1, 3])
    plan = TilePlan(sizes, tile_size=2)
    for block in plan.blocks:  # a block holds one row count
        assert len(set(sizes[block].tolist())) == 1
        assert len(block) <= 2
    index = np.concatenate(
        [plan.pair_codes(r, s)[0] for r in range(plan.n_rows) for _, s in plan.tiles(r)]
    )
    n = len(sizes)
    np.testing.assert_array_equal(np.sort(index), np.arange(n * (n - 1) // 2))
    assert sum(plan.row_pairs(r) for r in range(plan.n_rows)) == n * (n - 1) // 2


def test_identities_too_small_are_left_out_and_counted() -> None:
    es = ragged([6, 6, 1, 5, 1, 4])
    with pytest.warns(
        IdauditWarning, match="leaves out 2 identities with fewer than 2 successful rows"
    ):
        ds = audit_pairs(es, "all", [MMDTVAuditor()], progress=False)
    assert ds.attrs["n_identities_excluded"] == 2
    assert json.loads(ds.attrs["identities_excluded"]) == ["id002", "id004"]
    assert ds.sizes["pair"] == 6  # 4 identities left
    audited = set(ds["identity_a"].values) | set(ds["identity_b"].values)
    assert audited == {"id000", "id001", "id003", "id005"}
    # a listed pair naming one still raises
    with pytest.raises(InvalidInputError, match="identity 'id002' has 1 row"):
        audit_pairs(es, [("id000", "id002")], [MMDTVAuditor()], progress=False)
    with pytest.raises(InvalidInputError, match="needs at least 2 identities with 2 rows"):
        audit_pairs(ragged([6, 1, 1]), "all", [MMDTVAuditor()], progress=False)


def test_engine_option_is_checked() -> None:
    es = ragged([6, 6, 5])
    with pytest.raises(InvalidInputError, match='engine="tiled" cannot run this call: it audits'):
        audit_pairs(es, [("id000", "id001")], [GaussMechAuditor()], engine="tiled")
    with pytest.raises(InvalidInputError, match=r"auditor\(s\) \['rocht'\] have no tiled kernel"):
        audit_pairs(es, "all", [GaussMechAuditor(), ROCHTAuditor()], engine="tiled")
    with pytest.raises(InvalidInputError, match="`engine` must be one of"):
        audit_pairs(es, "all", [GaussMechAuditor()], engine="fast")
    with pytest.raises(InvalidInputError, match="`tile_size` must be"):
        audit_pairs(es, "all", [GaussMechAuditor()], tile_size=0)
    # certified MMD-TV and permutation tests run chunked under "auto"
    ds = audit_pairs(es, "all", [MMDTVAuditor(n_permutations=9)], progress=False)
    assert ds.attrs["setting.engine"] == "chunked"


def test_zero_bandwidth_names_the_pair() -> None:
    same = np.tile([1.0, 0.0, 0.0], (8, 1))  # a and b: eight identical rows
    rows = np.vstack([same, np.random.default_rng(0).normal(size=(4, 3))])
    es = EmbeddingSet(rows, np.repeat(["a", "b", "c"], 4))
    with pytest.raises(InvalidInputError, match=r"pair \('a', 'b'\), auditor 'mmdtv': the median"):
        audit_pairs(es, "all", [MMDTVAuditor()], progress=False, engine="tiled")


def test_a_size_the_running_engine_cannot_use_is_refused_or_named() -> None:
    small = ragged([3, 4, 5])
    with pytest.raises(
        InvalidInputError, match='`batch_size` sets the chunked engine; engine="tiled"'
    ):
        audit_pairs(small, "all", [GaussMechAuditor()], engine="tiled", batch_size=8)
    with pytest.raises(
        InvalidInputError, match='`tile_size` sets the tiled engine; engine="chunked"'
    ):
        audit_pairs(small, "all", [GaussMechAuditor()], engine="chunked", tile_size=2)
    # "auto" picks the engine: the unused size is named, and the numbers are those of the run
    with pytest.warns(
        IdauditWarning, match='`batch_size` is not used: engine="auto" runs the tiled'
    ):
        got = audit_pairs(small, "all", [GaussMechAuditor()], batch_size=8, progress=False)
    assert got.attrs["setting.engine"] == "tiled"
    with pytest.warns(
        IdauditWarning, match='`tile_size` is not used: engine="auto" runs the chunked'
    ):
        audit_pairs(small, [("id000", "id001")], [GaussMechAuditor()], tile_size=2, progress=False)


# ------------------------------------------------------------------------------ summaries
@pytest.mark.parametrize("spill", [False, True])
def test_streamed_summary_equals_reductions_of_the_full_dataset(
    tiled: xr.Dataset, es: EmbeddingSet, spill: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    if spill:  # every value goes to the temporary files; selection refines over 16 keys
        monkeypatch.setattr(stream_module, "_MEMORY_BYTES", 0)
        monkeypatch.setattr(stream_module, "_SELECT_ITEMS", 16)
        monkeypatch.setattr(stream_module, "_READ_ITEMS", 37)
    summ = audit_pairs(es, "all", tiled_auditors(), keep="summary", progress=False, tile_size=3)
    assert summ.attrs["n_pairs"] == tiled.sizes["pair"]
    for var in tiled.data_vars:
        if not var.startswith(("gaussmech", "mmd")) or tiled[var].dims != ("pair",):
            continue
        assert_summary_matches(summ, tiled, var, QUANTILES)
    # identities 0 and 1 are copies: several pairs tie at some maxima, the first is reported
    assert int(summ["gaussmech_epsilon_n_at_max"]) >= 1


def test_chunked_summary_streams_the_same(es: EmbeddingSet, tiled: xr.Dataset) -> None:
    summ = audit_pairs(
        es, "all", tiled_auditors(), keep="summary", progress=False, engine="chunked", batch_size=7
    )
    tiled_summary = audit_pairs(es, "all", tiled_auditors(), keep="summary", progress=False)
    for var in summ.data_vars:
        if summ[var].dtype.kind == "f":
            np.testing.assert_allclose(summ[var], tiled_summary[var], rtol=1e-9, err_msg=var)
        else:
            np.testing.assert_array_equal(summ[var], tiled_summary[var], err_msg=var)


@pytest.mark.parametrize("seed", range(6))
def test_order_statistics_equal_numpy_sort(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(stream_module, "_SELECT_ITEMS", 8)  # force every refinement level
    gen = np.random.default_rng(seed)
    parts = [
        gen.normal(size=300) * 10.0 ** gen.integers(-300, 300, size=300),  # every binade
        np.repeat(gen.normal(size=3), 200),  # heavy ties
        np.array([0.0, -0.0, np.inf, -np.inf, 5e-324, -5e-324, 1.0, 1.0 + 2**-52]),
        gen.integers(-3, 3, size=400).astype(float),
    ]
    values = np.concatenate(parts)
    gen.shuffle(values)
    chunks = np.array_split(values, 7)
    ranks = sorted(set(gen.integers(0, values.size, size=20).tolist()) | {0, values.size - 1})
    got = order_statistics(lambda: iter(chunks), values.size, ranks)
    np.testing.assert_array_equal(got, np.sort(values)[ranks])


def test_nan_values_give_nan_quantiles_as_numpy() -> None:
    values = stream_module._Values()
    values.add(np.array([1.0, np.nan, 2.0]))
    assert np.isnan(values.quantiles()).all()
    assert np.isnan(np.quantile([1.0, np.nan, 2.0], QUANTILES, method="inverted_cdf")).all()


# ------------------------------------------------------------------------------ stores
SLOW_TILES = '''
import os, time
from idaudit import GaussMechAuditor

class SlowTiles(GaussMechAuditor):
    """GaussMech that counts the tiles it computes and can be slowed down."""

    seen = []

    def _run_tile(self, tile):
        time.sleep(float(os.environ.get("IDAUDIT_TEST_SLOW", "0")))
        type(self).seen.append((tile.a.block.rows.shape, tile.n_pairs))
        return super()._run_tile(tile)
'''


def test_tiled_store_resumes_a_killed_run_without_recomputing(tmp_path: Path) -> None:
    (tmp_path / "slow_tiles.py").write_text(SLOW_TILES)
    store = tmp_path / "tiles.zarr"
    script = textwrap.dedent(
        f"""
        import sys
        sys.path[:0] = [{SRC!r}, {str(tmp_path)!r}, {str(HERE)!r}, {str(HERE.parents[1])!r}]
        from test_tiles import ragged  # which imports tests/references.py
        from slow_tiles import SlowTiles
        from idaudit import audit_pairs
        audit_pairs(ragged([5] * 12), "all", [SlowTiles()], tile_size=2, n_threads=1,
                    store={str(store)!r}, progress=False)
        """
    )
    env = {**os.environ, "IDAUDIT_TEST_SLOW": "0.1"}
    proc = subprocess.Popen([sys.executable, "-c", script], env=env)
    import zarr

    def done_rows() -> set[int]:
        try:
            group = zarr.open_group(str(store), mode="r")
        except Exception:  # not created yet
            return set()
        return {int(n[3:]) for n, g in group.groups() if g.attrs.get("done")}

    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and len(done_rows()) < 2:
            time.sleep(0.05)
        assert proc.poll() is None, "the run finished before it could be interrupted"
        proc.send_signal(signal.SIGKILL)
        proc.wait(30)
    finally:
        if proc.poll() is None:
            proc.kill()
    finished = done_rows()
    assert 2 <= len(finished) < 6  # 12 identities of 5 rows: 6 blocks, 6 tile rows
    sys.path.insert(0, str(tmp_path))
    try:
        from slow_tiles import SlowTiles
    finally:
        sys.path.remove(str(tmp_path))
    es = ragged([5] * 12)
    SlowTiles.seen = []
    resumed = audit_pairs(es, "all", [SlowTiles()], store=store, progress=False)
    # only the tiles of unfinished rows ran: 6 - r tiles in row r (groups of <= 2 identities)
    plan = TilePlan(np.full(12, 5), 2)
    want = sum(len(plan.tiles(r)) for r in range(plan.n_rows) if r not in finished)
    assert len(SlowTiles.seen) == want
    fresh = audit_pairs(es, "all", [GaussMechAuditor()], progress=False, engine="chunked")
    xr.testing.assert_allclose(resumed, fresh.assign_attrs(resumed.attrs), rtol=1e-12)
    # a finished store resumes with nothing to compute, to the same Dataset
    SlowTiles.seen = []
    again = audit_pairs(es, "all", [SlowTiles()], store=store, progress=False)
    assert SlowTiles.seen == []
    xr.testing.assert_identical(again, resumed)
    row = xr.open_zarr(store, group="row000000", consolidated=False)
    assert row["gaussmech_epsilon"].attrs["status"] == "diagnostic"
    assert oct(store.stat().st_mode & 0o777) == oct(0o700)


def test_tiled_store_refuses_other_calls(tmp_path: Path) -> None:
    es = ragged([5] * 6)
    store = tmp_path / "s.zarr"
    audit_pairs(es, "all", [GaussMechAuditor()], store=store, tile_size=2, progress=False)
    with pytest.raises(InvalidInputError, match="holds results for other embeddings"):
        audit_pairs(
            ragged([5] * 6, seed=1), "all", [GaussMechAuditor()], store=store, progress=False
        )
    with pytest.raises(InvalidInputError, match="other auditors, parameters or seeds"):
        audit_pairs(es, "all", [GaussMechAuditor(delta=1e-3)], store=store, progress=False)
    with pytest.raises(InvalidInputError, match=r"`tile_size` must match the store's tiles \(2\)"):
        audit_pairs(es, "all", [GaussMechAuditor()], store=store, tile_size=3, progress=False)
    with pytest.raises(InvalidInputError, match="written by the tiled engine"):
        audit_pairs(es, "all", [GaussMechAuditor()], store=store, engine="chunked", progress=False)
    chunked = tmp_path / "c.zarr"
    audit_pairs(es, "all", [GaussMechAuditor()], store=chunked, engine="chunked", progress=False)
    with pytest.raises(InvalidInputError, match="written by the chunked engine"):
        audit_pairs(es, "all", [GaussMechAuditor()], store=chunked, engine="tiled", progress=False)


# ------------------------------------------------------------------------------ memory
MEMORY = """
import resource, sys
sys.path.insert(0, {src!r})
import numpy as np
import idaudit.audits._stream as stream
from idaudit import EmbeddingSet, GaussMechAuditor, audit_pairs
stream._MEMORY_BYTES = 2**23  # spill beyond 8 MiB; read and select 2**16 values at a time
stream._SELECT_ITEMS = stream._READ_ITEMS = 2**16
gen = np.random.default_rng(0)
n_id = {n_id}
es = EmbeddingSet(gen.normal(size=(3 * n_id, 4)), np.repeat(np.arange(n_id), 3))
small = es.subset(es.identities[:300])  # warm up: imports, thread pools, a spilled summary
audit_pairs(small, "all", [GaussMechAuditor()], keep="summary", progress=False, n_threads=2)
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
summary = audit_pairs(es, "all", [GaussMechAuditor()], keep="summary", progress=False,
                      n_threads=2, tile_size=256)
print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - base, int(summary.attrs["n_pairs"]))
"""


def peak_growth_kib(n_id: int) -> int:
    """Peak resident memory a summary of every pair of ``n_id`` identities adds, in KiB."""
    out = subprocess.run(
        [sys.executable, "-c", MEMORY.format(src=SRC, n_id=n_id)],
        capture_output=True,
        text=True,
        check=True,
        timeout=600,
    )
    grown_kib, n_pairs = map(int, out.stdout.split())
    assert n_pairs == n_id * (n_id - 1) // 2
    return grown_kib


def test_summary_memory_does_not_grow_with_the_pairs() -> None:
    # 1,000 and 2,500 identities: 0.5 M and 3.1 M pairs. Keeping GaussMech's three outputs
    # per pair (the naive reduction) would grow by 3 x 8 bytes x 2.6 M = 60 MiB between
    # them, a per-pair Dataset by far more (its label coordinates); the stream's memory is
    # its fixed buffers (read and selection chunks, tiles in flight), the same for both.
    small, large = peak_growth_kib(1000), peak_growth_kib(2500)
    naive = 3 * 8 * (2500 * 2499 - 1000 * 999) / 2 / 1024  # KiB
    assert large - small < naive / 5, (small, large, naive)
    # and the whole of it stays under the fixed buffers' bound here (8 MiB of values, 2**16
    # keys per read and selection, four tiles of 256 x 256 pairs in flight), with margin
    assert large < 64 * 1024, large


def test_an_identity_whose_every_output_failed_is_left_out_and_counted() -> None:
    rows = np.random.default_rng(3).normal(size=(12, 4))
    rows[:3] = np.nan  # identity "a": three failed outputs, no successful row
    labels = np.repeat(["a", "b", "c", "d"], 3)
    with pytest.warns(IdauditWarning, match="failed"):
        es = EmbeddingSet(rows, labels, failures="keep")
    with pytest.warns(IdauditWarning, match="leaves out 1 identity with fewer than 2 successful"):
        ds = audit_pairs(es, "all", [GaussMechAuditor()], progress=False)
    assert json.loads(ds.attrs["identities_excluded"]) == ["a"]
    assert ds.sizes["pair"] == 3


def test_auto_resumes_a_store_with_the_engine_that_wrote_it(tmp_path: Path) -> None:
    es = ragged([5] * 6)
    chunked = tmp_path / "c.zarr"
    first = audit_pairs(
        es, "all", [GaussMechAuditor()], store=chunked, engine="chunked", progress=False
    )
    again = audit_pairs(es, "all", [GaussMechAuditor()], store=chunked, progress=False)
    assert again.attrs["setting.engine"] == "chunked"
    xr.testing.assert_identical(again, first)


def test_a_damaged_tile_row_is_reported(tmp_path: Path) -> None:
    import zarr

    es = ragged([5] * 6)
    store = tmp_path / "t.zarr"
    audit_pairs(es, "all", [GaussMechAuditor()], store=store, tile_size=2, progress=False)
    del zarr.open_group(str(store), mode="r+")["row000001"]["gaussmech_sigma"]
    with pytest.raises(InvalidInputError, match=r"is damaged: tile row 1 is marked done but lacks"):
        audit_pairs(es, "all", [GaussMechAuditor()], store=store, progress=False)


def test_gaussmech_overflow_gives_inf_as_fit() -> None:
    rows = np.random.default_rng(4).normal(size=(9, 3)) * 1e160
    es = EmbeddingSet(rows, np.repeat(["a", "b", "c"], 3), normalize=False)
    ds = audit_pairs(es, "all", [GaussMechAuditor()], progress=False, engine="tiled")
    with np.errstate(over="ignore"):  # the per-pair path overflows to +inf as well
        want = GaussMechAuditor().fit(es.get("a"), es.get("b")).mean_distance_
    assert np.isinf(want)
    assert np.isinf(ds["gaussmech_mean_distance"].values).all()
