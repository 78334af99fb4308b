"""Tests of idaudit.audits.concat_conditions: several conditions along ``condition``."""

from __future__ import annotations

import numpy as np
import pytest
import xarray as xr

from idaudit import (
    EmbeddingSet,
    InvalidInputError,
    MMDTVAuditor,
    ROCHTAuditor,
    audit_pairs,
    concat_conditions,
    sample_pairs,
    summarize,
)


def _condition(seed: int, n_ids: int, n_pairs: int = 4) -> xr.Dataset:
    gen = np.random.default_rng(seed)
    labels = np.repeat([f"s{seed}_{k}" for k in range(n_ids)], 15)
    es = EmbeddingSet(gen.normal(size=(15 * n_ids, 6)), labels)
    pairs = sample_pairs(es.identities, n_pairs, rng=0)
    return audit_pairs(
        es, pairs, [MMDTVAuditor(), ROCHTAuditor(n_folds=3, rng=seed)], progress=False
    )


@pytest.fixture(scope="module")
def runs() -> dict[str, xr.Dataset]:
    return {"vgg": _condition(1, 5), "celeba": _condition(2, 6)}


def test_each_condition_comes_back_whole(runs: dict[str, xr.Dataset]) -> None:
    ds = concat_conditions(runs)
    assert dict(ds.sizes) == {"condition": 2, "pair": 4}
    assert list(ds["condition"].values) == ["vgg", "celeba"]
    for name, one in runs.items():
        back = ds.sel(condition=name)
        for var in one.data_vars:
            np.testing.assert_array_equal(back[var].values, one[var].values)
            assert back[var].attrs == one[var].attrs
        for coord in ("identity_a", "identity_b", "n_a", "n_b"):
            np.testing.assert_array_equal(back[coord].values, one[coord].values)
        # provenance that differs per condition is kept as a condition coordinate
        assert str(back["input_sha256"].values) == one.attrs["input_sha256"]
        assert int(back["rocht.seed"].values) == one.attrs["rocht.seed"]
        # the summary of one condition equals the summary of its own result
        assert summarize(back).to_dict() == summarize(one).to_dict()
    # shared hyperparameters stay attributes
    assert ds.attrs["mmdtv.bandwidth_scale"] == runs["vgg"].attrs["mmdtv.bandwidth_scale"]
    assert "input_sha256" not in ds.attrs


def test_netcdf_round_trip(runs: dict[str, xr.Dataset], tmp_path) -> None:
    ds = concat_conditions(runs)
    ds.to_netcdf(tmp_path / "conditions.nc")
    with xr.open_dataset(tmp_path / "conditions.nc") as back:
        xr.testing.assert_identical(back.load(), ds)


def test_bad_inputs(runs: dict[str, xr.Dataset]) -> None:
    with pytest.raises(TypeError, match="must be a mapping of condition name to Dataset; got list"):
        concat_conditions(list(runs.values()))
    with pytest.raises(InvalidInputError, match="at least one condition"):
        concat_conditions({})
    with pytest.raises(InvalidInputError, match=r"has 3 pairs, `results\['vgg'\]` 4"):
        concat_conditions({"vgg": runs["vgg"], "short": runs["celeba"].isel(pair=slice(3))})
    with pytest.raises(InvalidInputError, match="conditions must run the same auditors"):
        concat_conditions({"vgg": runs["vgg"], "x": runs["celeba"].drop_vars("rocht_auc")})
    with pytest.raises(InvalidInputError, match="summarise one at a time"):
        summarize(concat_conditions(runs))


def test_encoders_of_different_dimension_and_auditor_order() -> None:
    from idaudit import KDELRAuditor

    gen = np.random.default_rng(5)
    labels = np.repeat(["a", "b", "c"], 12)
    small = EmbeddingSet(gen.normal(size=(36, 4)), labels)
    large = EmbeddingSet(gen.normal(size=(36, 8)), labels)
    pairs = sample_pairs(small.identities, 3, rng=0)
    runs = {
        "d4": audit_pairs(small, pairs, [KDELRAuditor(), MMDTVAuditor()], progress=False),
        "d8": audit_pairs(large, pairs, [MMDTVAuditor(), KDELRAuditor()], progress=False),
    }
    ds = concat_conditions(runs)
    assert ds.sizes["embedding_dim"] == 8
    assert ds["n_embedding_dim"].values.tolist() == [4, 8]
    per_dim = ds["kdelr_epsilon_per_dim"].sel(condition="d4").values
    np.testing.assert_array_equal(per_dim[:, :4], runs["d4"]["kdelr_epsilon_per_dim"].values)
    assert np.isnan(per_dim[:, 4:]).all()
    # the same auditors in another order: one shared 'auditors' attribute, summaries per condition
    assert ds.attrs["auditors"] == "kdelr,mmdtv"
    for name, one in runs.items():
        got = summarize(ds.sel(condition=name)).to_dict()
        want = summarize(one).to_dict()
        assert got == {column: want[column] for column in got}


def test_mixed_label_types_are_refused() -> None:
    gen = np.random.default_rng(6)
    as_text = EmbeddingSet(gen.normal(size=(24, 3)), np.repeat(["a", "b"], 12))
    as_int = EmbeddingSet(gen.normal(size=(24, 3)), np.repeat([1, 2], 12))
    runs = {
        "text": audit_pairs(as_text, [("a", "b")], [MMDTVAuditor()], progress=False),
        "int": audit_pairs(as_int, [(1, 2)], [MMDTVAuditor()], progress=False),
    }
    with pytest.raises(InvalidInputError, match="are of different types"):
        concat_conditions(runs)


def test_a_numeric_setting_that_differs_stays_a_number(runs: dict[str, xr.Dataset]) -> None:
    # a blur's sigma on one condition, none (absent, or the "None" attr_value writes) on the
    # others: a float coordinate with NaN, not the strings "1.5" and "None"
    sets = {name: ds.copy() for name, ds in runs.items()}
    sets["vgg"].attrs["generator.sigma"] = 1.5
    sets["celeba"].attrs["generator.mode"] = "paired"
    third = runs["vgg"].copy()
    third.attrs["generator.sigma"] = "None"
    sets["none"] = third
    ds = concat_conditions(sets)
    sigma = ds["generator.sigma"]
    assert sigma.dtype == np.float64
    assert sigma.sel(condition="vgg").item() == 1.5
    assert np.isnan(sigma.sel(condition="celeba").item())
    assert np.isnan(sigma.sel(condition="none").item())
    # text stays text, with "None" where a condition has no value
    assert ds["generator.mode"].values.tolist() == ["None", "paired", "None"]
