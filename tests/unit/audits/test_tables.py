"""Unit tests for Table 1 / Table 2 layouts (idaudit.audits._tables)."""

from __future__ import annotations

import numpy as np
import pytest
import xarray as xr

import idaudit as ida
from idaudit.audits import concat_conditions, table1, table2
from idaudit.audits._tables import condition_fields


def _stacked() -> xr.Dataset:
    runs = {}
    for k, name in enumerate(["ArcFace+VGGFace2+FF", "FaceNet+CelebA+ID"]):
        gen = np.random.default_rng(k)
        x = np.repeat(gen.normal(size=(5, 4)), 12, axis=0) + (1 + k) * gen.normal(size=(60, 4))
        es = ida.EmbeddingSet(x, np.repeat([f"p{i}" for i in range(5)], 12))
        auditors = [
            ida.GaussMechAuditor(),
            ida.KDELRAuditor(mix=0.0),
            ida.KDELRAuditor(mix=0.01),
            ida.MMDTVAuditor(),
            ida.ROCHTAuditor(rng=0),
        ]
        runs[name] = ida.audit_pairs(
            es, ida.sample_pairs(es.identities, 6, rng=0), auditors, progress=False
        )
    return concat_conditions(runs)


def test_condition_fields() -> None:
    assert condition_fields("arcface_vggface2_ff") == {
        "encoder": "arcface",
        "dataset": "vggface2",
        "generator": "ff",
    }
    assert condition_fields("mine") == {"encoder": "mine", "dataset": "", "generator": ""}


def test_table1_medians_equal_numpy_on_the_common_pairs() -> None:
    ds = _stacked()
    t1 = table1(ds)
    assert t1["condition"].tolist() == ["ArcFace+VGGFace2+FF", "FaceNet+CelebA+ID"]
    assert t1["dataset"].tolist() == ["VGGFace2", "CelebA"]
    for i, name in enumerate(t1["condition"]):
        part = ds.sel(condition=name)
        labels = str(part.attrs["auditors"]).split(",")
        eps = {lab: np.asarray(part[f"{lab}_epsilon"].values, float) for lab in labels}
        common = np.all([~np.isnan(v) for v in eps.values()], axis=0)
        kd0 = "kdelr"  # the mix = 0 auditor keeps the plain label
        assert t1.loc[i, "gaussmech"] == pytest.approx(np.median(eps["gaussmech"][common]))
        assert t1.loc[i, "kdelr_mix0"] == pytest.approx(np.median(eps[kd0][common]))
        assert t1.loc[i, "mmdtv"] == pytest.approx(np.median(eps["mmdtv"][common]))
        n_inf = int(np.isposinf(eps["rocht"][common]).sum())
        assert t1.loc[i, "rocht_inf"] == f"{n_inf}/{int(common.sum())}"
    assert t1.attrs["status"]["mmdtv"] == "sample_estimate"
    assert t1.attrs["status"]["gaussmech"] == "diagnostic"


def test_table2_ranges() -> None:
    cert = xr.Dataset(
        {
            "epsilon_lb": (
                "pair",
                [0.0, 0.7, 1.3],
                {"status": "certified_lower_bound", "n_simultaneous": 5},
            ),
            "test_auc": ("pair", [0.9, 0.95, 1.0]),
            "n_test_a": ("pair", [10, 10, 12]),
            "n_test_b": ("pair", [10, 11, 10]),
        }
    )
    t2 = table2({"a_b_c": cert})
    row = t2.iloc[0]
    assert row["epsilon_lb"] == "0.000–1.300"
    assert row["auc"] == "0.900–1.000"
    assert row["test_n_per_class"] == "10–12"
    assert (row["n_positive"], row["n_above_1"], row["n_pairs"]) == (2, 1, 3)
    # 3 bounds holding jointly over 5: the range is certified
    assert t2.attrs["status"]["epsilon_lb"] == "certified_lower_bound"
    # bounds that each hold alone: their range over 3 pairs is not
    cert["epsilon_lb"].attrs["n_simultaneous"] = 1
    assert table2({"a_b_c": cert}).attrs["status"]["epsilon_lb"] == "sample_estimate"


def _eq16_zero_errors(m_a: int, m_b: int, alpha: float, delta: float = 0.0) -> float:
    """Eq. 16 at zero test errors, from scipy's beta quantile (Clopper-Pearson, independently)."""
    from scipy.stats import beta

    u_a, u_b = beta.ppf(1 - alpha, 1, m_a), beta.ppf(1 - alpha, 1, m_b)
    return max(0.0, np.log((1 - delta - u_a) / u_b), np.log((1 - delta - u_b) / u_a))


def test_table2_reports_ceilings_and_counts_the_certificates_at_them() -> None:
    from idaudit import EmbeddingSet, ReservedTestCertifier
    from idaudit.audits._tables import at_ceiling

    gen = np.random.default_rng(0)
    x = np.repeat(gen.normal(size=(6, 5)) * 4, 24, axis=0) + gen.normal(size=(144, 5))
    es = EmbeddingSet(x, np.repeat([f"p{i}" for i in range(6)], 24))
    cert = ReservedTestCertifier(n_candidates=15, n_select=3, rng=0, progress=False)
    c = cert.fit(es).certificates_
    alpha = float(c.attrs["alpha_per_bound"])
    expected = [
        _eq16_zero_errors(int(a), int(b), alpha)
        for a, b in zip(c["n_test_a"].values, c["n_test_b"].values, strict=True)
    ]
    # the ceiling equals Eq. 16 on scipy's zero-error Clopper-Pearson bounds (rtol: rounding)
    np.testing.assert_allclose(c["epsilon_lb_ceiling"].values, expected, rtol=1e-9)
    assert c["epsilon_lb_ceiling"].attrs["status"] == "descriptive"
    flags = at_ceiling(c)
    errors = c["test_fp"].values + c["test_fn"].values
    assert flags.any()
    # every error-free pair certifies its ceiling; a pair with errors certifies less
    assert (flags[errors == 0]).all()
    t2 = table2({"a_b_c": c})
    lo, hi = min(expected), max(expected)
    want = f"{lo:.3f}" if f"{lo:.3f}" == f"{hi:.3f}" else f"{lo:.3f}–{hi:.3f}"
    assert t2.loc[0, "epsilon_lb_ceiling"] == want
    assert t2.loc[0, "n_at_ceiling"] == int(flags.sum())
    assert t2.attrs["status"]["epsilon_lb_ceiling"] == "descriptive"
    # the existing columns stay, in their order
    cols = list(t2.columns)
    old = ["test_n_per_class", "auc", "epsilon_lb", "n_positive", "n_above_1", "n_pairs"]
    assert [col for col in cols if col in old] == old
    # one pair pushed below its ceiling loses its flag
    moved = c.copy(deep=True)
    moved["epsilon_lb"].values[0] = moved["epsilon_lb_ceiling"].values[0] - 1e-9
    assert not at_ceiling(moved)[0]


def test_table1_keeps_the_common_pairs_of_the_methods_that_ran() -> None:
    # GaussMech failed on every pair of every condition: its column is NaN and flagged, and
    # the other methods keep their medians over the pairs common to them (not zero pairs)
    ds = _stacked()
    ds["gaussmech_epsilon"] = ds["gaussmech_epsilon"] * np.nan
    t1 = table1(ds)
    assert t1["gaussmech"].isna().all()
    assert t1.attrs["flags"] == {"gaussmech": "no value on any pair"}
    for i, name in enumerate(t1["condition"]):
        part = ds.sel(condition=name)
        eps = {lab: np.asarray(part[f"{lab}_epsilon"].values, float) for lab in ("kdelr", "mmdtv")}
        eps["rocht"] = np.asarray(part["rocht_epsilon"].values, float)
        eps["kdelr_mix0.01"] = np.asarray(part["kdelr_mix0.01_epsilon"].values, float)
        common = np.all([~np.isnan(v) for v in eps.values()], axis=0)
        assert t1.loc[i, "n_pairs"] == common.sum() > 0
        assert t1.loc[i, "mmdtv"] == pytest.approx(np.median(eps["mmdtv"][common]))
    # a method failing in one condition only: that row's cell is NaN, no column flag
    one = _stacked()
    one["gaussmech_epsilon"][0] = np.nan
    t1 = table1(one)
    assert np.isnan(t1.loc[0, "gaussmech"]) and np.isfinite(t1.loc[1, "gaussmech"])
    assert "flags" not in t1.attrs


def test_the_summary_and_the_report_table_use_the_same_common_pairs_as_table1() -> None:
    # one method failed on every pair: Table 1, summarize and the report's table keep the
    # other methods' pairs (numpy on the pairs where the others all have a value)
    from idaudit.audits import summarize
    from idaudit.audits._tables import common_pairs
    from idaudit.pipeline.report import audit_table

    ds = _stacked().sel(condition="ArcFace+VGGFace2+FF")
    ds["kdelr_epsilon"] = ds["kdelr_epsilon"] * np.nan
    others = ["gaussmech_epsilon", "kdelr_mix0.01_epsilon", "mmdtv_epsilon", "rocht_epsilon"]
    expected = np.all([~np.isnan(ds[v].values) for v in others], axis=0)
    common, empty = common_pairs(ds, ["kdelr_epsilon", *others])
    np.testing.assert_array_equal(common, expected)
    assert empty == ("kdelr_epsilon",)
    summary = summarize(ds)
    assert summary.n_pairs == expected.sum() == table1(ds)["n_pairs"].item()
    cell = dict(zip(summary.columns, summary.values, strict=True))
    assert cell["kdelr_epsilon (no value on any pair)"] == "–"
    assert cell["mmdtv_epsilon (median)"] == pytest.approx(
        np.median(ds["mmdtv_epsilon"].values[expected])
    )
    text = audit_table(ds)
    assert "⚑ no value on any pair" in text
    assert f"| {int(expected.sum())} |" in text
    # no method with a value anywhere: no pair is common
    for v in others:
        ds[v] = ds[v] * np.nan
    assert not common_pairs(ds, ["kdelr_epsilon", *others])[0].any()
