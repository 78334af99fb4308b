"""Failure rates and Fisher's exact test of equal rates in audit_pairs results."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from scipy.stats import fisher_exact

import idaudit as ida
from idaudit.audits._failures import fisher_exact_pvalue
from idaudit.exceptions import IdauditWarning


def test_fisher_pvalue_equals_scipy() -> None:
    gen = np.random.default_rng(0)
    for _ in range(500):
        na, nb = (int(v) for v in gen.integers(1, 200, 2))
        fa, fb = int(gen.integers(0, na + 1)), int(gen.integers(0, nb + 1))
        ref = fisher_exact([[fa, na - fa], [fb, nb - fb]]).pvalue
        assert fisher_exact_pvalue(fa, na, fb, nb) == pytest.approx(ref, rel=1e-9)


def _set(failed: dict[str, int], n: int = 30, failures: str = "keep") -> ida.EmbeddingSet:
    gen = np.random.default_rng(1)
    rows, labels = [], []
    for label, k in failed.items():
        x = gen.normal(size=(n, 3))
        x[:k] = np.nan  # k failed outputs
        rows.append(x)
        labels += [label] * n
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", IdauditWarning)
        return ida.EmbeddingSet(np.vstack(rows), labels, failures=failures)


@pytest.mark.parametrize("pairs", ["all", [("a", "c"), ("b", "d"), ("a", "b")]])
def test_rates_and_pvalues_per_pair_and_in_the_summary(pairs: object) -> None:
    failed = {"a": 0, "b": 3, "c": 3, "d": 20}
    es = _set(failed)
    aud = [ida.MMDTVAuditor()]
    with pytest.warns(IdauditWarning, match="failure rates differ"):
        ds = ida.audit_pairs(es, pairs, aud, progress=False)
    for a, b, ra, rb, p in zip(
        ds["identity_a"].values.tolist(),
        ds["identity_b"].values.tolist(),
        ds["fail_rate_a"].values,
        ds["fail_rate_b"].values,
        ds["fail_pvalue"].values,
        strict=True,
    ):
        assert (ra, rb) == (failed[a] / 30, failed[b] / 30)
        ref = fisher_exact([[failed[a], 30 - failed[a]], [failed[b], 30 - failed[b]]]).pvalue
        assert p == pytest.approx(ref, rel=1e-9)
    assert ds.attrs["failures"] == "keep"
    assert ds.attrs["data_model"].startswith("the mechanism as run")
    with pytest.warns(IdauditWarning, match="failure rates differ"):
        top = ida.audit_pairs(es, pairs, aud, keep="summary", progress=False)
    p = ds["fail_pvalue"].values
    assert float(top["fail_pvalue_min"]) == p.min()
    k = int(np.argmin(p))  # the first pair reaching the minimum is named
    first = (ds["identity_a"].values.tolist()[k], ds["identity_b"].values.tolist()[k])
    assert f"({first[0]!r}, {first[1]!r})" in top["fail_pvalue_min"].attrs["long_name"]
    rates = dict(zip(top["identity"].values.tolist(), top["fail_rate"].values, strict=True))
    assert rates == {k: failed[k] / 30 for k in rates}


def test_no_warning_when_rates_agree_and_nan_when_failures_were_dropped() -> None:
    es = _set({"a": 2, "b": 3, "c": 2})
    with warnings.catch_warnings():
        warnings.simplefilter("error", IdauditWarning)  # equal enough: no warning
        ds = ida.audit_pairs(es, "all", [ida.MMDTVAuditor()], progress=False)
    assert (ds["fail_pvalue"].values > 0.05).all()
    dropped = _set({"a": 2, "b": 20, "c": 2}, failures="drop")
    ds = ida.audit_pairs(dropped, "all", [ida.MMDTVAuditor()], progress=False)
    assert np.isnan(ds["fail_rate_a"].values).all()
    assert np.isnan(ds["fail_pvalue"].values).all()
    assert ds.attrs["failures"] == "drop"
    assert ds.attrs["data_model"].startswith("conditioned on success")
