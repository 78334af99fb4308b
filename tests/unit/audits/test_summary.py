"""Tests of idaudit.summarize: Table 1's row from a per-pair Dataset."""

from __future__ import annotations

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
    audit_pairs,
    summarize,
)


@pytest.fixture(scope="module")
def ds() -> xr.Dataset:
    gen = np.random.default_rng(0)
    rows = [gen.normal(size=(12, 5)) + 2.0 * np.eye(5)[k] for k in range(4)]
    es = EmbeddingSet(np.vstack(rows), np.repeat(["a", "b", "c", "d"], 12))
    pairs = [("a", "b"), ("a", "c"), ("b", "d"), ("c", "d"), ("a", "d")]
    auditors = [
        GaussMechAuditor(),
        KDELRAuditor(),
        KDELRAuditor(0.01),
        MMDTVAuditor(),
        ROCHTAuditor(n_folds=3),
    ]
    return audit_pairs(es, pairs, auditors, progress=False)


def test_table1_row(ds: xr.Dataset) -> None:
    row = summarize(ds)
    assert row.n_pairs == 5
    assert row.columns == (
        "gaussmech_epsilon (median)",
        "kdelr_epsilon (median)",
        "kdelr_mix0.01_epsilon (median)",
        "mmdtv_epsilon (median)",
        "mmdtv_epsilon (max)",
        "rocht_epsilon (+inf count)",
        "rocht_auc (median)",
    )
    for var in ("gaussmech_epsilon", "kdelr_epsilon", "kdelr_mix0.01_epsilon", "mmdtv_epsilon"):
        assert row[f"{var} (median)"] == np.median(ds[var].values)
    assert row["mmdtv_epsilon (max)"] == np.max(ds["mmdtv_epsilon"].values)
    assert row["rocht_epsilon (+inf count)"] == f"{int(np.isinf(ds['rocht_epsilon']).sum())}/5"
    assert row["rocht_auc (median)"] == np.median(ds["rocht_auc"].values)
    assert row.statuses[0] == "diagnostic"
    assert row.statuses[3] == "sample_estimate"


def test_common_pairs_only(ds: xr.Dataset) -> None:
    # a shorter audit merged in: medians over the pairs every method covers, max over all
    cut = ds.copy()
    cut["gaussmech_epsilon"] = cut["gaussmech_epsilon"].where(np.arange(5) < 3)
    row = summarize(cut)
    assert row.n_pairs == 3
    assert row["mmdtv_epsilon (median)"] == np.median(ds["mmdtv_epsilon"].values[:3])
    assert row["mmdtv_epsilon (max)"] == np.max(ds["mmdtv_epsilon"].values)
    # the maximum covers every pair MMD-TV saw, and says so
    assert "mmdtv_epsilon (max)" in repr(row)
    assert "(over 5 pairs)" in repr(row)
    assert row.to_xarray()["mmdtv_epsilon (max)"].attrs["n_pairs"] == 5
    assert row.to_xarray()["mmdtv_epsilon (median)"].attrs["n_pairs"] == 3


def test_exports(ds: xr.Dataset) -> None:
    row = summarize(ds)
    frame = row.to_pandas(name="synthetic")
    assert frame.index.tolist() == ["synthetic"]
    # the status travels with every number into pandas
    assert frame.columns.tolist() == list(zip(row.columns, row.statuses, strict=True))
    assert frame.columns.names == ["column", "status"]
    assert (
        frame[("mmdtv_epsilon (median)", "sample_estimate")].item() == row["mmdtv_epsilon (median)"]
    )
    assert frame.droplevel("status", axis=1).columns.tolist() == list(row.columns)
    assert row.to_dict()["rocht_auc (median)"] == row["rocht_auc (median)"]
    as_ds = row.to_xarray()
    assert as_ds["rocht_epsilon (+inf count)"].item() == row["rocht_epsilon (+inf count)"]
    assert as_ds["mmdtv_epsilon (median)"].attrs["status"] == "sample_estimate"
    text = repr(row)
    assert text.startswith("AuditSummary over 5 common pairs")
    assert "[sample_estimate]" in text
    with pytest.raises(KeyError):
        row["nothing"]


def test_refuses_foreign_datasets(ds: xr.Dataset) -> None:
    with pytest.raises(InvalidInputError, match="no 'auditors' attribute"):
        summarize(xr.Dataset())
    with pytest.raises(InvalidInputError, match="lacks the variable"):
        summarize(ds.drop_vars("mmdtv_epsilon"))
    with pytest.raises(TypeError, match=r"`ds` must be an xarray\.Dataset"):
        summarize({})  # type: ignore[arg-type]


# -- median_auc_rocs: Figure 3's curves, refitted here so that plotting only draws -----------


def _two_conditions() -> tuple[xr.Dataset, dict[str, EmbeddingSet]]:
    from idaudit.audits import concat_conditions

    sets, runs = {}, {}
    for k, name in enumerate(["near", "far"]):
        gen = np.random.default_rng(k)
        x = np.repeat(gen.normal(size=(4, 5)), 15, axis=0) + (1 + k) * gen.normal(size=(60, 5))
        sets[name] = EmbeddingSet(x, np.repeat(["p0", "p1", "p2", "p3"], 15))
        pairs = [("p0", "p1"), ("p0", "p2"), ("p1", "p3"), ("p2", "p3")]
        runs[name] = audit_pairs(sets[name], pairs, [ROCHTAuditor(rng=0)], progress=False)
    return concat_conditions(runs), sets


def test_median_auc_rocs_refits_each_condition_s_lower_median_pair() -> None:
    from idaudit.audits import median_auc_rocs

    ds, sets = _two_conditions()
    rocs = median_auc_rocs(ds, sets, n_folds=4, rng=3)
    assert len(rocs) == 2
    for (label, fit), name in zip(rocs.items(), ["near", "far"], strict=True):
        part = ds.sel(condition=name)
        auc = part["rocht_auc"].values
        k = int(np.argsort(auc, kind="stable")[1])  # lower median of 4 values
        a, b = part["identity_a"].values[k], part["identity_b"].values[k]
        assert label == f"{name}: {a} vs {b}"
        ref = ROCHTAuditor(n_folds=4, rng=3).fit(sets[name].get(a), sets[name].get(b))
        np.testing.assert_array_equal(fit.fpr_, ref.fpr_)
        np.testing.assert_array_equal(fit.tpr_, ref.tpr_)
        assert fit.auc_ == ref.auc_
    # one condition, one EmbeddingSet: the label is the pair alone
    (label,) = median_auc_rocs(ds.sel(condition="near"), sets["near"])
    assert ": " not in label


def test_median_auc_rocs_names_what_is_missing() -> None:
    from idaudit.audits import median_auc_rocs

    ds, sets = _two_conditions()
    with pytest.raises(InvalidInputError, match="`embeddings` has no condition 'far'"):
        median_auc_rocs(ds, {"near": sets["near"]})
    with pytest.raises(InvalidInputError, match="no 'rocht_auc' variable"):
        median_auc_rocs(ds.drop_vars("rocht_auc"), sets)


def _audit(shift: float) -> xr.Dataset:
    from idaudit import GaussMechAuditor, KDELRAuditor, ROCHTAuditor, audit_pairs

    gen = np.random.default_rng(0)
    k, n, d = 6, 20, 6
    x = gen.normal(size=(k * n, d)) + shift * np.repeat(np.eye(d)[:k], n, axis=0)
    es = EmbeddingSet(x, np.repeat([f"p{i}" for i in range(k)], n))
    auditors = [GaussMechAuditor(), KDELRAuditor(), ROCHTAuditor(rng=0)]
    return audit_pairs(es, "all", auditors, progress=False)


def test_discordant_routes_fire_only_when_identities_are_indistinguishable() -> None:
    from idaudit.audits import discordant_routes

    same = _audit(0.0)  # every identity drawn from one distribution
    s = summarize(same)
    assert abs(float(s["rocht_auc (median)"]) - 0.5) < 0.1
    got = discordant_routes(same)
    assert got, "large diagnostics beside an AUC near 0.5 must be flagged"
    # it says what an AUC near 0.5 shows (this classifier cannot separate them), never that
    # there is no leakage: a difference in shape or spread defeats a linear classifier
    assert all("may reflect estimation noise" in g for g in got)
    assert not any("not identity leakage" in g for g in got)
    # which sentences fire follows the stated thresholds on the summary's own numbers
    assert any(g.startswith("GaussMech") for g in got) == (
        float(s["gaussmech_epsilon (median)"]) > 1
    )
    assert any(g.startswith("KDE-LR") for g in got) == (float(s["kdelr_epsilon (median)"]) > 10)
    k, n = map(int, str(s["rocht_epsilon (+inf count)"]).split("/"))
    assert any(g.startswith("ROC-HT") for g in got) == (k / n >= 0.5)
    # the summary row gives the same sentences as the Dataset
    assert discordant_routes(s) == got
    # well-separated identities: the classifier tells them apart, nothing is flagged
    apart = _audit(6.0)
    assert float(summarize(apart)["rocht_auc (median)"]) > 0.9
    assert discordant_routes(apart) == []
    with pytest.raises(TypeError, match=r"`result` must be an xarray\.Dataset"):
        discordant_routes("nope")  # type: ignore[arg-type]


def test_discordant_routes_use_the_certificate_test_auc_without_rocht() -> None:
    from idaudit.audits import AuditSummary, discordant_routes

    s = AuditSummary(10, ("gaussmech_epsilon (median)",), (4.0,), ("diagnostic",))
    assert discordant_routes(s) == []  # no AUC known: nothing to compare
    cert = xr.Dataset({"test_auc": ("pair", [0.45, 0.55, 0.52])})
    (sentence,) = discordant_routes(s, certificates=cert)
    assert "median test AUC of the certificates is 0.520" in sentence
    cert["test_auc"][:] = [0.9, 0.95, 1.0]
    assert discordant_routes(s, certificates=cert) == []
    # a positive certificate proves leakage: the large diagnostic may be right, nothing is said
    proven = xr.Dataset({"test_auc": ("pair", [0.5, 0.5]), "epsilon_lb": ("pair", [0.0, 0.3])})
    assert discordant_routes(s, certificates=proven) == []


def test_discordant_routes_do_not_deny_a_difference_the_classifier_misses() -> None:
    # identities that differ in spread, not in mean: logistic regression is at chance, a
    # random-forest certificate proves leakage, and the warning must not say "no leakage"
    from idaudit import GaussMechAuditor, KDELRAuditor, ROCHTAuditor, audit_pairs
    from idaudit.audits import discordant_routes
    from idaudit.certify import ReservedTestCertifier

    gen = np.random.default_rng(3)
    k, n, d = 4, 60, 4
    scales = np.repeat([0.2, 1.0, 3.0, 6.0], n)[:, None]
    es = EmbeddingSet(
        gen.normal(size=(k * n, d)) * scales, np.repeat(list("abcd"), n), normalize=False
    )
    auditors = [GaussMechAuditor(), KDELRAuditor(), ROCHTAuditor(rng=0)]
    ds = audit_pairs(es, "all", auditors, progress=False)
    got = discordant_routes(ds)
    assert all("not identity leakage" not in g for g in got)
    cert = ReservedTestCertifier(
        n_candidates=6, n_select=2, classifier="random_forest", rng=0, progress=False
    ).fit(es)
    assert cert.epsilon_lb_ > 0
    assert discordant_routes(ds, certificates=cert.certificates_) == []
