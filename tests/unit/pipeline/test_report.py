"""The report renderer: the one table, and each section's words checked once, here.

The documents (``idaudit audit``, ``certify``, ``privacy``, the demo) are assembled from these
sections; their own tests check only that the sections are there and that no over-claim is.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import xarray as xr

from idaudit._markdown import verdict_section
from idaudit.pipeline.report import (
    MMDTV_CEILING,
    MMDTV_SEPARATED,
    audit_bullets,
    ceiling_section,
    ceiling_warnings,
    certificate_bullets,
    certificate_table,
    column_flag,
    controls_section,
    median_interval,
)


def _cert(lb: list[float], ceiling: list[float], n_test: int = 30) -> xr.Dataset:
    k = len(lb)
    return xr.Dataset(
        {
            "epsilon_lb": ("pair", lb, {"status": "certified_lower_bound"}),
            "epsilon_lb_ceiling": ("pair", ceiling, {"status": "descriptive"}),
            "n_test_a": ("pair", [n_test] * k),
            "n_test_b": ("pair", [n_test] * k),
            "test_fp": ("pair", [0] * k),
            "test_fn": ("pair", [0] * k),
            "test_auc": ("pair", [1.0] * k),
        },
        coords={
            "identity_a": ("pair", [f"a{i}" for i in range(k)]),
            "identity_b": ("pair", [f"b{i}" for i in range(k)]),
        },
        attrs={"min_test_rows_for_nonzero": 9},
    )


def _audit(medians: list[float], seed: int = 0, n_pairs: int = 15) -> xr.Dataset:
    """One condition's per-pair MMD-TV ε and ROC AUC around the given medians."""
    gen = np.random.default_rng(seed)
    mmd = medians[0] + gen.uniform(-0.01, 0.01, n_pairs)
    auc = medians[1] + gen.uniform(-0.001, 0.001, n_pairs)
    return xr.Dataset(
        {"mmdtv_epsilon": ("pair", mmd), "rocht_auc": ("pair", auc)},
        attrs={"auditors": "mmdtv,rocht", "mmdtv.class": "MMDTVAuditor",
               "rocht.class": "ROCHTAuditor"},
    )  # fmt: skip


def test_the_mmdtv_scale_is_the_closed_form() -> None:
    # 2 artanh(x) = ln((1 + x) / (1 - x)): the TV bound MMD / 2 at MMD = sqrt(2), and at the
    # MMD of two point masses with the median-heuristic bandwidth, sqrt(2 - 2 exp(-1/2))
    x = math.sqrt(2.0) / 2.0
    assert pytest.approx(math.log((1 + x) / (1 - x)), rel=1e-12) == MMDTV_CEILING
    assert pytest.approx(1.7627, abs=1e-4) == MMDTV_CEILING
    y = math.sqrt(2.0 - 2.0 * math.exp(-0.5)) / 2.0
    assert pytest.approx(math.log((1 + y) / (1 - y)), rel=1e-12) == MMDTV_SEPARATED


def test_the_median_interval_is_the_tabled_order_statistic_interval() -> None:
    # n = 15: the distribution-free 95 % interval of the median is [x(4), x(12)]
    # (binomial(15, 1/2): P(4 <= B <= 11) = 0.965, the narrowest symmetric one >= 0.95)
    from scipy.stats import binom

    assert binom.cdf(11, 15, 0.5) - binom.cdf(3, 15, 0.5) == pytest.approx(0.9648, abs=1e-4)
    x = np.arange(1.0, 16.0)
    med, low, high = median_interval(np.random.default_rng(0).permutation(x))
    assert (med, low, high) == (8.0, 4.0, 12.0)
    assert np.isnan(median_interval([np.nan])[0])


def test_a_column_flag_says_when_a_column_carries_nothing() -> None:
    assert column_flag([np.inf, np.inf, np.nan]) == (
        "+∞ on every row: this column carries no information here"
    )
    assert column_flag([np.inf, 2.0]) is None
    assert "at its ceiling on every row" in str(column_flag([1.75, 1.75], [1.75, 1.75]))
    assert column_flag([1.75, 1.2], [1.75, 1.75]) is None
    assert "ceiling 0 on every row" in str(column_flag([0.0, 0.0], [0.0, 0.0]))


def test_the_ceiling_is_explained_once_with_its_counts() -> None:
    certs = {"A": _cert([1.75, 1.2], [1.75, 1.75]), "B": _cert([0.0], [0.0], n_test=2)}
    text = "\n".join(ceiling_section(certs))
    assert text.count("what zero test errors certify") == 1
    assert "A ceiling of 0 means the test sizes certify nothing" in text
    assert "Here: 1 of the 3 certificates sit at their ceiling, 1 have a ceiling of 0" in text
    (warning,) = ceiling_warnings(certs)
    assert warning.startswith("Condition `B` can only certify 0: with 2 test rows per identity")
    assert "(at least 9 are needed)" in warning
    rows = certificate_table(certs).splitlines()
    assert rows[3] == "| A | a0 vs b0 | 30, 30 | 0, 0 | 1 | 1.75 ⚑ | 1.75 |"
    assert rows[4] == "| A | a1 vs b1 | 30, 30 | 0, 0 | 1 | 1.2 | 1.75 |"


def test_certificates_say_at_least_and_a_zero_ceiling_says_nothing() -> None:
    (a, b) = certificate_bullets({"A": _cert([0.2777], [0.2777]), "B": _cert([0.0], [0.0])})
    assert a.status == "certified_lower_bound"
    # two conditions certified as separate families: each holds at its own confidence
    assert a.text.startswith(
        "`A` leaks at least ε = 0.2777 (at its own confidence: the conditions were certified "
        "separately) on its most separable certified pair"
    )
    assert "at its ceiling ⚑" in a.text
    assert "orders nothing" in a.text
    assert b.status == "descriptive"
    assert b.text == (
        "`B` has a certificate ceiling of 0 at its test sizes: it can certify nothing, and its "
        "0 is no evidence either way."
    )
    # certified as one family of two (n_simultaneous = 2): no such clause
    joint = {k: _cert([0.2777], [0.2777]) for k in "AB"}
    for c in joint.values():
        c["epsilon_lb"].attrs["n_simultaneous"] = 2
    (a, _) = certificate_bullets(joint)
    assert a.text.startswith("`A` leaks at least ε = 0.2777 on its most separable certified pair")


def test_every_positive_certificate_stays_in_the_verdict() -> None:
    # three conditions whose ceiling is 0 before the only certificate (the reported audit)
    certs = {k: _cert([0.0], [0.0]) for k in "abc"}
    certs["d_swap"] = _cert([0.224], [1.2])
    parts = {k: _audit([0.5, 0.9], i) for i, k in enumerate(certs)}
    verdict = "\n".join(verdict_section(audit_bullets(parts, certs)))
    assert "`d_swap` leaks at least ε = 0.224 (at its own confidence" in verdict
    assert verdict.count("certificate ceiling of 0") == 1
    assert (
        "- **descriptive** — `a`, `b` and `c` have a certificate ceiling of 0 at their test "
        "sizes: they can certify nothing" in verdict
    )
    # five positive certificates and two estimates do not fit one by one: merged, all kept
    many = {k: _cert([0.1 * (i + 1)], [1.2]) for i, k in enumerate("pqrst")}
    many["z"] = _cert([0.0], [0.0])
    parts = {k: _audit([0.5, 0.9], i) for i, k in enumerate(many)}
    bullets = audit_bullets(parts, many)
    text = "\n".join(verdict_section(bullets))
    for k, bound in zip("pqrst", ("0.1", "0.2", "0.3", "0.4", "0.5"), strict=True):
        assert f"`{k}` ε ≥ {bound} (ceiling 1.2)" in text
    assert "5 conditions are proven to leak (each at its own confidence" in text
    assert "`z` has a certificate ceiling of 0" in text
    # one bound not certified: the merged bullet takes the weaker word and says so
    many["q"]["epsilon_lb"].attrs["status"] = "sample_estimate"
    (merged, *_) = audit_bullets(parts, many)
    assert merged.status == "sample_estimate"
    assert merged.text.startswith("5 conditions have a positive bound, not every one certified")
    assert "`q` ε ≥ 0.2 (ceiling 1.2, not certified: " in merged.text
    assert "not distinguishable here" in text


def test_estimates_order_conditions_only_where_their_intervals_separate() -> None:
    apart = "\n".join(
        verdict_section(audit_bullets({"A": _audit([0.50, 1.0]), "B": _audit([0.95, 1.0], 1)}))
    )
    assert "orders the conditions `A` < `B`: their 95 % order-statistic intervals" in apart
    assert f"(ceiling {MMDTV_CEILING:.2f})" in apart
    # 0.733 vs 0.743 (the case): intervals overlap, so no order is claimed
    close = "\n".join(
        verdict_section(audit_bullets({"A": _audit([0.733, 1.0]), "B": _audit([0.743, 1.0], 1)}))
    )
    assert "By the median MMD-TV ε (ceiling 1.76) the conditions are not distinguishable" in close
    assert "leaks least" not in close


def test_no_interval_is_named_where_there_is_none() -> None:
    # one pair: a median and no interval; three pairs: no 95 % order-statistic interval
    one = "\n".join(verdict_section(audit_bullets({"solo": _audit([0.63, 0.9], n_pairs=1)})))
    assert "median MMD-TV ε (ceiling 1.76) is `solo` 0.6" in one
    assert "with too few pairs for a 95 % interval." in one
    assert "order-statistic interval" not in one
    few = {"A": _audit([0.63, 0.9], n_pairs=3), "B": _audit([0.39, 0.9], 1, n_pairs=3)}
    text = "\n".join(verdict_section(audit_bullets(few)))
    assert "not distinguishable here: `A` and `B` have too few pairs for a 95 % interval" in text
    assert "intervals overlap" not in text
    assert "order-statistic interval" not in text
    empty = _audit([0.63, 0.9])
    empty["mmdtv_epsilon"][:] = np.nan
    text = "\n".join(verdict_section(audit_bullets({"A": empty, "B": _audit([0.5, 0.9])})))
    assert "has no value here" not in text  # B has values
    assert "`A` has too few pairs" in text


def test_the_diagnostics_bullet_names_only_the_diagnostics_that_ran() -> None:
    only_mmdtv = _audit([0.5, 0.9]).drop_vars("rocht_auc")
    only_mmdtv.attrs.update(auditors="mmdtv")
    text = "\n".join(verdict_section(audit_bullets({"A": only_mmdtv})))
    assert "**diagnostic**" not in text
    assert "GaussMech" not in text
    with_rocht = _audit([0.5, 0.9]).assign(rocht_epsilon=("pair", np.full(15, np.inf)))
    text = "\n".join(verdict_section(audit_bullets({"A": with_rocht})))
    assert (
        "- **diagnostic** — ROC-HT's +∞ count is a diagnostic, not on a bound's ε scale: it "
        "orders nothing and proves nothing." in text
    )
    assert "GaussMech" not in text


def test_the_controls_reading_follows_the_auc() -> None:
    attrs = {"n_rejected": 0, "n_identities": 6, "alpha": 0.05}
    for auc, says in (
        (0.41, "0.41, below 0.5, as under the null"),
        (0.51, "0.51, close to 0.5, as under the null"),
        (0.8, "0.8, above what the null gives"),
    ):
        text = "\n".join(controls_section({**attrs, "mean_auc": auc}, rows_per_half=30))
        assert f"Mean split-half out-of-fold ROC AUC: {says}" in text
        assert "(here about 30 per half)" in text
        assert "0 of 6 (about 0.3 expected with no artefact)" in text


def test_table2_flags_a_certificate_column_whose_every_ceiling_is_zero() -> None:
    # 3 test rows per class certify nothing at any error count: the column's zeros are no
    # evidence, and table2.md says so under the header, as the per-pair table does
    from idaudit.audits import table2
    from idaudit.pipeline.report import frame_table

    nothing = {"x": _cert([0.0, 0.0], [0.0, 0.0], n_test=3), "y": _cert([0.0], [0.0], n_test=3)}
    text = frame_table(table2(nothing))
    assert "⚑ ceiling 0 on every pair: these test sizes certify nothing" in text
    # one pair whose test sizes can certify: no flag
    some = {**nothing, "z": _cert([0.0], [1.2])}
    assert "ceiling 0 on every pair" not in frame_table(table2(some))
    # a condition whose certificates carry no ceiling could certify: no flag either
    unknown = {**nothing, "w": _cert([2.0], [9.0]).drop_vars("epsilon_lb_ceiling")}
    assert "ceiling 0 on every pair" not in frame_table(table2(unknown))
