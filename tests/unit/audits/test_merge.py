"""Tests of idaudit.audits.merge_audits: joining audit_pairs results over a shared pair list."""

from __future__ import annotations

import numpy as np
import pytest
import xarray as xr

from idaudit import (
    EmbeddingSet,
    GaussMechAuditor,
    InvalidInputError,
    MMDTVAuditor,
    ROCHTAuditor,
    audit_pairs,
    concat_conditions,
    merge_audits,
    sample_pairs,
    summarize,
)
from idaudit.exceptions import IdauditWarning


@pytest.fixture(scope="module")
def es() -> EmbeddingSet:
    gen = np.random.default_rng(21)
    centres = np.repeat(gen.normal(size=(6, 5)), 12, axis=0)
    return EmbeddingSet(
        centres + gen.normal(scale=0.8, size=(72, 5)), np.repeat(list("abcdef"), 12)
    )


@pytest.fixture(scope="module")
def runs(es: EmbeddingSet) -> tuple[list, xr.Dataset, xr.Dataset]:
    pairs = sample_pairs(es.identities, 10, rng=3)
    common = audit_pairs(es, pairs[:4], [ROCHTAuditor(n_folds=3, rng=0)], progress=False)
    mmd = audit_pairs(es, pairs, [MMDTVAuditor()], progress=False)
    return pairs, common, mmd


def test_union_of_pairs_with_gaps(runs: tuple) -> None:
    pairs, common, mmd = runs
    ds = merge_audits(common, mmd)
    assert list(zip(ds["identity_a"].values, ds["identity_b"].values, strict=True)) == pairs
    np.testing.assert_array_equal(ds["mmdtv_epsilon"].values, mmd["mmdtv_epsilon"].values)
    np.testing.assert_array_equal(ds["rocht_auc"].values[:4], common["rocht_auc"].values)
    assert np.isnan(ds["rocht_auc"].values[4:]).all()
    # a boolean with gaps becomes 1/0/NaN
    assert ds["rocht_corner"].dtype == np.float64
    np.testing.assert_array_equal(ds["rocht_corner"].values[:4], common["rocht_corner"].values)
    assert ds["rocht_auc"].attrs == common["rocht_auc"].attrs
    assert ds.attrs["auditors"] == "rocht,mmdtv"
    assert ds.attrs["n_pairs"] == 10
    assert ds.attrs["rocht.seed"] == common.attrs["rocht.seed"]
    assert ds.attrs["mmdtv.bandwidth_scale"] == mmd.attrs["mmdtv.bandwidth_scale"]
    np.testing.assert_array_equal(ds["n_a"].values, mmd["n_a"].values)


def test_summarize_common_medians_and_max_over_all(runs: tuple) -> None:
    _, common, mmd = runs
    summary = summarize(merge_audits(common, mmd))
    assert summary.n_pairs == 4
    eps = mmd["mmdtv_epsilon"].values
    # the Table 1 reading: medians over the common pairs, the MMD-TV maximum over all of its pairs
    assert summary["mmdtv_epsilon (median)"] == pytest.approx(np.median(eps[:4]))
    assert summary["mmdtv_epsilon (max)"] == pytest.approx(np.max(eps))
    assert summary["rocht_auc (median)"] == pytest.approx(np.median(common["rocht_auc"].values))


def test_netcdf_round_trip(runs: tuple, tmp_path) -> None:
    _, common, mmd = runs
    ds = merge_audits(common, mmd)
    path = tmp_path / "merged.nc"
    ds.to_netcdf(path)
    with xr.open_dataset(path) as back:
        xr.testing.assert_identical(back.load(), ds)


def test_chained_merges_keep_every_input_hash(es: EmbeddingSet, runs: tuple) -> None:
    pairs, common, mmd = runs
    gauss = audit_pairs(es, pairs[:6], [GaussMechAuditor()], progress=False)
    once = merge_audits(merge_audits(common, mmd), gauss)
    hashes = [ds.attrs["pairs_sha256"] for ds in (common, mmd, gauss)]
    assert once.attrs["merged_pairs_sha256"] == ",".join(hashes)
    xr.testing.assert_identical(once, merge_audits(common, mmd, gauss))


def test_order_of_inputs_sets_pair_order(runs: tuple) -> None:
    pairs, common, mmd = runs
    ds = merge_audits(mmd, common)
    assert list(zip(ds["identity_a"].values, ds["identity_b"].values, strict=True)) == pairs
    assert ds.attrs["auditors"] == "mmdtv,rocht"


def test_bad_inputs(es: EmbeddingSet, runs: tuple) -> None:
    pairs, common, mmd = runs
    with pytest.raises(InvalidInputError, match="at least one audit_pairs Dataset"):
        merge_audits()
    with pytest.raises(TypeError, match=r"`results\[1\]` must be an xarray.Dataset; got dict"):
        merge_audits(common, {})
    with pytest.raises(InvalidInputError, match="auditor label 'mmdtv' appears in more than one"):
        merge_audits(mmd, mmd)
    flipped = audit_pairs(
        es, [(b, a) for a, b in pairs[:2]], [MMDTVAuditor(name="m4")], progress=False
    )
    with pytest.raises(InvalidInputError, match=r"of an earlier input in reverse order"):
        merge_audits(common, flipped)
    twice = audit_pairs(es, [pairs[0], pairs[0]], [MMDTVAuditor(name="m5")], progress=False)
    with pytest.raises(InvalidInputError, match=r"appears twice in results\[0\]"):
        merge_audits(twice)
    with pytest.raises(InvalidInputError, match="is not an audit_pairs result"):
        merge_audits(common, xr.Dataset({"x": ("pair", [1.0])}))
    other = EmbeddingSet(es.embeddings[::-1].copy(), es.labels[::-1].copy())
    other_run = audit_pairs(other, pairs[:2], [MMDTVAuditor(name="m2")], progress=False)
    with pytest.raises(InvalidInputError, match="audited different data"):
        merge_audits(common, other_run)
    keep = np.ones(len(es.labels), dtype=bool)
    keep[np.flatnonzero(es.labels == pairs[0][0])[0]] = False  # one row fewer for that identity
    fewer = EmbeddingSet(es.embeddings[keep], es.labels[keep])
    shrunk = audit_pairs(fewer, pairs[:2], [MMDTVAuditor(name="m3")], progress=False)
    shrunk.attrs["input_sha256"] = common.attrs["input_sha256"]
    with pytest.raises(
        InvalidInputError, match=r"has rows \(12, 12\) in one input and \((11, 12|12, 11)\)"
    ):
        merge_audits(common, shrunk)


def test_run_settings_that_differ_keep_every_input_value(es: EmbeddingSet, runs: tuple) -> None:
    pairs, common, mmd = runs
    one = audit_pairs(es, pairs[:4], [ROCHTAuditor(n_folds=3, rng=0)], batch_size=1, progress=False)
    ds = merge_audits(one, mmd)
    assert ds.attrs["setting.batch_size"] == f"1,{mmd.attrs['setting.batch_size']}"
    assert ds.attrs["setting.device"] == "cpu"  # equal in both: kept as it is
    xr.testing.assert_equal(ds, merge_audits(common, mmd))  # the same values, coords, dims


def test_failure_rate_coords_are_kept_over_the_union() -> None:
    gen = np.random.default_rng(4)
    emb = gen.normal(size=(48, 3))
    emb[[0, 1, 2, 13]] = np.nan  # 'a' fails on 3 of its 12 outputs, 'b' on 1
    with pytest.warns(IdauditWarning, match="4 of 48 rows failed"):
        es = EmbeddingSet(emb, np.repeat(list("abcd"), 12), failures="keep")
    pairs = sample_pairs(es.identities, 6, rng=0)
    first = audit_pairs(es, pairs[:4], [ROCHTAuditor(n_folds=3, rng=0)], progress=False)
    second = audit_pairs(es, pairs[2:], [MMDTVAuditor()], progress=False)
    ds = merge_audits(first, second)
    every = audit_pairs(es, pairs, [MMDTVAuditor(name="all")], progress=False)
    for name in ("fail_rate_a", "fail_rate_b", "fail_pvalue"):
        assert ds[name].dims == ("pair",)
        # equal where the inputs overlap, and to an audit of every pair at once
        np.testing.assert_array_equal(ds[name].values, every[name].values)
        assert ds[name].attrs == first[name].attrs
    assert (ds["fail_rate_a"].values > 0).any()
    assert (ds["fail_pvalue"].values < 1).any()
    # other data: a pair's failure rates differ between the inputs
    other = second.assign_coords(fail_rate_a=second["fail_rate_a"] + 0.5)
    with pytest.raises(InvalidInputError, match=r"has fail_rate_a .* in one input and"):
        merge_audits(first, other)
    # stacked along condition: (condition, pair), attributes kept
    stacked = concat_conditions({"x": ds, "y": ds.copy()})
    assert stacked["fail_pvalue"].dims == ("condition", "pair")
    assert stacked["fail_pvalue"].attrs == ds["fail_pvalue"].attrs
    np.testing.assert_array_equal(stacked["fail_rate_b"].sel(condition="y"), ds["fail_rate_b"])
