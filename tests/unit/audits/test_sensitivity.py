"""Tests of the sensitivity analyses of seed 000, Section 4.4."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from idaudit import EmbeddingSet, InvalidInputError, MMDTVAuditor, ROCHTAuditor
from idaudit.audits import classifier_sensitivity, mmd_bandwidth_sweep, shapiro_residuals
from references import median_mmd


@pytest.fixture(scope="module")
def es() -> EmbeddingSet:
    gen = np.random.default_rng(0)
    rows = [gen.normal(size=(15, 6)) + 1.5 * np.eye(6)[k] for k in range(3)]
    return EmbeddingSet(np.vstack(rows), np.repeat(["a", "b", "c"], 15))


def test_bandwidth_sweep_equals_single_fits(es: EmbeddingSet) -> None:
    pairs = [("a", "b"), ("b", "c")]
    sweep = mmd_bandwidth_sweep(es, pairs, scales=(0.5, 1.0, 2.0), progress=False)
    assert dict(sweep["epsilon"].sizes) == {"scale": 3, "pair": 2}
    assert sweep["scale"].values.tolist() == [0.5, 1.0, 2.0]
    for i, scale in enumerate((0.5, 1.0, 2.0)):
        for k, (a, b) in enumerate(pairs):
            aud = MMDTVAuditor(bandwidth_scale=scale).fit(es.get(a), es.get(b))
            assert float(sweep["epsilon"][i, k]) == pytest.approx(aud.epsilon_, rel=1e-10)
        assert float(sweep["max_epsilon"][i]) == float(sweep["epsilon"][i].max())
    assert sweep["epsilon"].attrs["status"] == "sample_estimate"
    with pytest.raises(InvalidInputError, match="`scales` must be non-empty and distinct"):
        mmd_bandwidth_sweep(es, pairs, scales=(1.0, 1.0))


def test_shapiro_on_pooled_residuals() -> None:
    gen = np.random.default_rng(1)
    gauss = gen.normal(size=(300, 2))
    skewed = gen.exponential(size=(300, 1))
    labels = np.repeat(["a", "b", "c"], 100)
    es = EmbeddingSet(np.c_[gauss, skewed], labels, normalize=False)
    res = shapiro_residuals(es, max_rows=200, rng=4)
    # reference: the same rows (same generator draws) through scipy directly
    x = es.embeddings
    resid = np.vstack([x[labels == k] - x[labels == k].mean(0) for k in "abc"])
    keep = np.sort(np.random.default_rng(4).choice(300, size=200, replace=False))
    want = [stats.shapiro(resid[keep, j]).pvalue for j in range(3)]
    np.testing.assert_allclose(res.pvalue, want, rtol=1e-12)
    assert res.n_rejected == 1  # only the exponential coordinate, at p < 1e-3
    assert (res.n_rows, res.n_pooled) == (200, 300)
    assert "n_rejected=1/3" in repr(res)
    assert res.to_xarray().attrs["n_rejected"] == 1


def test_shapiro_needs_rows() -> None:
    es = EmbeddingSet(np.eye(3), ["a", "b", "c"])
    with pytest.raises(InvalidInputError, match="no identity with at least 2 rows"):
        shapiro_residuals(es)


def test_classifier_sensitivity(es: EmbeddingSet) -> None:
    pairs = [("a", "b"), ("a", "c")]
    ds = classifier_sensitivity(es, pairs, n_folds=3, n_estimators=15, rng=5, progress=False)
    diff = ds["rocht_auc"].values - ds["rocht_rf_auc"].values
    np.testing.assert_array_equal(ds["auc_difference"].values, diff)
    assert ds.attrs["mean_auc_difference"] == pytest.approx(diff.mean())
    # the folds of ROCHTAuditor(rng=5) itself (seed 000 §4.4: identical 5-fold splits), so the
    # logistic column is the main ROC-HT run's AUC, and the forest shares those folds
    aud = ROCHTAuditor(n_folds=3, rng=5).fit(es.get("a"), es.get("b"))
    assert float(ds["rocht_auc"][0]) == pytest.approx(aud.auc_, abs=1e-12)
    assert ds.attrs["rocht.seed"] == ds.attrs["rocht_rf.seed"] == aud.seed_
    gen = np.random.default_rng(9)
    ds_gen = classifier_sensitivity(
        es, pairs[:1], n_folds=3, n_estimators=5, rng=gen, progress=False
    )
    assert ds_gen.attrs["rocht.seed"] == ds_gen.attrs["rocht_rf.seed"]


def test_tv_witness_ratio_against_sklearn_and_amedian_mmd(es: EmbeddingSet) -> None:
    from sklearn.metrics import roc_curve

    from idaudit import audit_pairs
    from idaudit.audits import tv_witness_ratio

    pairs = [("a", "b"), ("a", "c"), ("b", "c")]
    ds = audit_pairs(es, pairs, [MMDTVAuditor(), ROCHTAuditor(rng=4)], progress=False)
    out = tv_witness_ratio(ds)
    expected = []
    for a, b in pairs:
        scores = ROCHTAuditor(rng=4).fit(es.get(a), es.get(b)).oof_scores_
        labels = np.r_[np.zeros(es.counts[a]), np.ones(es.counts[b])]
        fpr, tpr, _ = roc_curve(labels, scores)
        expected.append((tpr - fpr).max() / (median_mmd(es.get(a), es.get(b)) / 2))
    # float64 kernels on 30 points: agreement far below 1e-9
    np.testing.assert_allclose(out["ratio"].values, expected, rtol=1e-9)
    assert out.attrs["mean_ratio"] == pytest.approx(np.mean(expected), rel=1e-9)
    assert out["ratio"].attrs["status"] == "diagnostic"
    with pytest.raises(InvalidInputError, match=r"missing \['rocht_tv'\]"):
        tv_witness_ratio(ds.drop_vars("rocht_tv"))


def test_shapiro_max_rows_none_tests_every_row() -> None:
    gen = np.random.default_rng(12)
    labels = np.repeat(["a", "b"], 40)
    es = EmbeddingSet(gen.normal(size=(80, 2)), labels, normalize=False)
    res = shapiro_residuals(es, max_rows=None)
    x = es.embeddings
    resid = np.vstack([x[labels == k] - x[labels == k].mean(0) for k in "ab"])
    want = [stats.shapiro(resid[:, j]).pvalue for j in range(2)]
    np.testing.assert_allclose(res.pvalue, want, rtol=1e-12)
    assert (res.n_rows, res.n_pooled) == (80, 80)


def test_shapiro_counts_rejections_at_alpha() -> None:
    gen = np.random.default_rng(1)
    es = EmbeddingSet(gen.normal(size=(40, 3)), np.repeat(["a", "b"], 20))
    new = shapiro_residuals(es, alpha=0.5)
    assert new.alpha == 0.5
    assert new.n_rejected == int((new.pvalue < 0.5).sum())
    assert new.to_xarray().attrs["alpha"] == 0.5
