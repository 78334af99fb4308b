"""``certify_scores``: strategies, α split, result object and errors."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
import xarray as xr

from idaudit.certify import ScoreCertificate, certify_scores
from idaudit.dp import clopper_pearson_upper, epsilon_from_error_rates, simultaneous_rate_bounds
from idaudit.exceptions import InvalidInputError

DOCS = Path(__file__).resolve().parents[3] / "docs" / "certify.md"


def _scores(n: int = 200, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    gen = np.random.default_rng(seed)
    return gen.normal(0, 1, n), gen.normal(2, 1, n + 10)


def test_given_is_clopper_pearson_with_alpha_split_over_thresholds_and_rates() -> None:
    a, b = _scores()
    t = [0.5, 1.0, 1.5]
    cert = certify_scores(a, b, alpha=0.1, delta=1e-3, thresholds="given", threshold=t)
    fp = np.array([(a >= x).sum() for x in t])
    fn = np.array([(b < x).sum() for x in t])
    fpr_u = clopper_pearson_upper(fp, a.size, 0.1 / 6)  # 3 thresholds x 2 rates
    fnr_u = clopper_pearson_upper(fn, b.size, 0.1 / 6)
    np.testing.assert_allclose(cert.fpr_upper, fpr_u, rtol=1e-14)
    np.testing.assert_allclose(cert.fnr_upper, fnr_u, rtol=1e-14)
    ref = max(epsilon_from_error_rates(x, y, 1e-3) for x, y in zip(fpr_u, fnr_u, strict=True))
    assert cert.epsilon_lb_ == pytest.approx(ref, rel=1e-13)


def test_bonferroni_and_band_use_the_simultaneous_bounds_per_count() -> None:
    a, b = _scores()
    bonf = certify_scores(a, b, alpha=0.05, thresholds="bonferroni")
    band = certify_scores(a, b, alpha=0.05, thresholds="band")
    np.testing.assert_array_equal(bonf.thresholds, np.union1d(a, b))
    u_a = simultaneous_rate_bounds(a.size, 0.025, method="bonferroni")
    np.testing.assert_allclose(bonf.fpr_upper, u_a[bonf.fp], rtol=1e-14)
    assert bonf.level_a == pytest.approx(0.025 / a.size)
    assert bonf.level_b == pytest.approx(0.025 / b.size)
    assert (band.fpr_upper <= bonf.fpr_upper).all()
    assert (band.fnr_upper <= bonf.fnr_upper).all()
    assert band.epsilon_lb_ > bonf.epsilon_lb_ > 0


def test_split_is_seeded_and_certifies_one_threshold_on_the_rest() -> None:
    a, b = _scores()
    c1 = certify_scores(a, b, thresholds="split", rng=3)
    c2 = certify_scores(a, b, thresholds="split", rng=3)
    assert c1.thresholds.shape == (1,)
    assert c1.thresholds[0] == c2.thresholds[0]
    assert c1.epsilon_lb_ == c2.epsilon_lb_
    assert (c1.n_eval_a, c1.n_eval_b) == (100, 105)  # the other half of each class
    assert c1.level_a == pytest.approx(0.025)


def test_curves_statuses_and_dataset() -> None:
    a, b = _scores()
    cert = certify_scores(a, b, alpha=0.05, delta=1e-5, thresholds="band")
    curve = cert.epsilon_curve([0.0, 1e-5, 1e-3])
    assert isinstance(curve, xr.DataArray)
    assert curve.dims == ("delta",)
    assert curve.attrs["status"] == "certified_lower_bound"
    assert curve.sel(delta=1e-5).item() == pytest.approx(cert.epsilon_lb_)
    assert (np.diff(curve.values) <= 0).all()  # ε(δ) non-increasing
    gdp = cert.gdp_epsilon_curve([0.0, 1e-5])
    assert gdp.attrs["status"] == "sample_estimate"
    assert "mu-GDP" in gdp.attrs["assumption"]
    assert gdp.values[0] == np.inf
    ds = cert.to_xarray()
    assert ds["epsilon_lb"].attrs["status"] == "certified_lower_bound"
    assert ds["mu_lb"].attrs["status"] == "certified_lower_bound"
    assert ds["epsilon_gdp"].attrs["status"] == "sample_estimate"
    assert ds["fpr_upper"].attrs["status"] == "certified_upper_bound"
    assert ds.sizes["point"] == cert.thresholds.size
    assert "# status: certified_lower_bound" in repr(cert)
    assert isinstance(cert, ScoreCertificate)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"alpha": 1.0}, r"`alpha` must be in \(0, 1\)"),
        ({"delta": 1.0}, r"`delta` must be in \[0, 1\)"),
        ({"thresholds": "dkw"}, "`thresholds` must be one of"),
        ({"thresholds": "given"}, "`threshold` is required"),
        ({"threshold": 0.3}, "only used with"),
        ({"thresholds": "split", "split_fraction": 0.001}, "leaves an empty part"),
        (
            {"thresholds": "bonferroni", "n_splits": 5},
            '`n_splits` is only used with thresholds="multisplit"; got thresholds=\'bonferroni\'',
        ),
        ({"n_splits": 100}, "`n_splits` is only used with"),
    ],
)
def test_bad_settings(kwargs, match) -> None:  # type: ignore[no-untyped-def]
    a, b = _scores(50)
    with pytest.raises(InvalidInputError, match=match):
        certify_scores(a, b, **kwargs)


def test_bad_scores() -> None:
    with pytest.raises(InvalidInputError, match="`scores_a` must be a non-empty 1-D"):
        certify_scores([], [1.0])
    with pytest.raises(InvalidInputError, match="`scores_b` must not contain NaN"):
        certify_scores([1.0], [np.nan])
    with pytest.raises(InvalidInputError, match=r"`deltas` must be in \[0, 1\)"):
        certify_scores([0.0, 1.0], [2.0, 3.0]).epsilon_curve([0.5, 1.0])


def test_docs_snippet_runs() -> None:
    text = DOCS.read_text(encoding="utf-8")
    section = text[text.index("## `certify_scores`") :]
    blocks = re.findall(r"^```python\n(.*?)^```", section, flags=re.S | re.M)
    assert blocks
    namespace: dict[str, object] = {}
    for code in blocks:
        exec(compile(code, "docs/certify.md", "exec"), namespace)
    assert namespace["cert"].status == "certified_lower_bound"  # type: ignore[attr-defined]


def test_non_numeric_inputs_get_clear_errors() -> None:
    a, b = np.arange(5.0), np.arange(5.0) + 1
    with pytest.raises(InvalidInputError, match="`scores_a` must hold real numbers"):
        certify_scores(["x", "y"], b)
    with pytest.raises(InvalidInputError, match="`scores_b` must hold real numbers"):
        certify_scores(a, b + 1j)
    with pytest.raises(InvalidInputError, match="`threshold` must hold real numbers"):
        certify_scores(a, b, thresholds="given", threshold="abc")
    with pytest.raises(InvalidInputError, match=r"`threshold` must be a number or 1-D"):
        certify_scores(a, b, thresholds="given", threshold=[[1.0, 2.0]])
    with pytest.raises(InvalidInputError, match="`one_sided` must be True or False"):
        certify_scores(a, b, one_sided="no")  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError, match="`deltas` must hold real numbers"):
        certify_scores(a, b).epsilon_curve(["a"])
    assert certify_scores(a, b, delta=-0.0).delta == 0.0


def _cp_point_by_point(counts: np.ndarray, n: int, level: float) -> np.ndarray:
    """Brute force: a scipy Beta quantile per count of the certificate, 1 at k = n."""
    from scipy import stats

    table = [float(stats.beta.isf(level, k + 1, n - k)) for k in range(n)]
    table = np.concatenate((np.maximum.accumulate(table), [1.0]))  # the band's running max
    return table[counts]


@pytest.mark.parametrize("strategy", ["bonferroni", "band"])
def test_kept_tables_give_the_point_by_point_bounds(strategy: str) -> None:
    from idaudit.dp import _tradeoff, band_local_level

    _tradeoff._BOUND_TABLES.clear()
    runs = [(120, 0.05), (120, 0.05), (121, 0.05), (120, 0.1), (120, 0.05)]
    for n, alpha in runs:  # repeated, then another n, another alpha, then the first again
        a, b = _scores(n, seed=n)
        cert = certify_scores(a, b, alpha=alpha, thresholds=strategy)
        if strategy == "band":
            level_a, level_b = band_local_level(n, alpha / 2), band_local_level(n + 10, alpha / 2)
        else:
            level_a, level_b = alpha / (2 * n), alpha / (2 * (n + 10))
        np.testing.assert_array_equal(cert.fpr_upper, _cp_point_by_point(cert.fp, n, level_a))
        np.testing.assert_array_equal(cert.fnr_upper, _cp_point_by_point(cert.fn, n + 10, level_b))
        assert (cert.level_a, cert.level_b) == (level_a, level_b)
    # (120, 0.05), (121, 0.05), (120, 0.1) each made their own two tables; the rest were read
    assert _tradeoff._BOUND_TABLES.misses == 6
    assert _tradeoff._BOUND_TABLES.hits == 4
