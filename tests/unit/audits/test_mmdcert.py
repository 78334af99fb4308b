"""Certified MMD-TV (``MMDTVAuditor(confidence_level=...)``) against direct computations."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.spatial.distance import cdist, pdist

from idaudit import EmbeddingSet, InvalidInputError, MMDTVAuditor, audit_pairs
from idaudit.audits import check_auditor
from idaudit.dp import betting_mean_lower_bound, epsilon_from_mmd_hockey_stick, epsilon_from_tv
from idaudit.results import check_result_dataset
from references import loop_mmd2


@pytest.fixture
def pair() -> tuple[np.ndarray, np.ndarray]:
    gen = np.random.default_rng(5)
    return gen.normal(size=(60, 3)), gen.normal(1.5, 1.0, size=(51, 3))


def _halves(n: int, seed: int, role: int) -> tuple[np.ndarray, np.ndarray]:
    # the documented split: a permutation seeded by (seed, role, n); first floor(n/2) select
    perm = np.random.default_rng([seed, role, n]).permutation(n)
    return np.sort(perm[: n // 2]), perm[n // 2 :]


def test_betting_bound_matches_a_direct_computation(pair: tuple) -> None:
    a, b = pair
    aud = MMDTVAuditor(confidence_level=0.9, rng=3).fit(a, b)
    sa, ea = _halves(len(a), aud.seed_, 0)
    sb, eb = _halves(len(b), aud.seed_, 1)
    sigma = float(np.median(pdist(np.r_[a[sa], b[sb]])))
    assert aud.bandwidth_lb_ == pytest.approx(sigma, rel=1e-12)

    def k(x, y):
        return np.exp(-cdist(x, y, "sqeuclidean") / (2 * sigma**2))

    norm = math.sqrt(k(a[sa], a[sa]).mean() + k(b[sb], b[sb]).mean() - 2 * k(a[sa], b[sb]).mean())

    def f(x):
        return (k(x, a[sa]).mean(1) - k(x, b[sb]).mean(1)) / norm

    low_a = 2 * betting_mean_lower_bound((f(a[ea]) + 1) / 2, 0.05) - 1
    high_b = 1 - 2 * betting_mean_lower_bound((1 - f(b[eb])) / 2, 0.05)
    want = max(low_a - high_b, 0.0)
    assert want > 0
    assert aud.mmd_lb_ == pytest.approx(want, rel=1e-12)
    assert aud.epsilon_lb_ == pytest.approx(epsilon_from_tv(want / 2), rel=1e-12)
    assert aud.epsilon_hs_lb_ == pytest.approx(epsilon_from_mmd_hockey_stick(want), rel=1e-12)
    # the certified value is below the plug-in one here, and the plug-in is unchanged
    assert aud.epsilon_lb_ < aud.epsilon_
    assert aud.epsilon_ == MMDTVAuditor().fit(a, b).epsilon_


@pytest.mark.parametrize("bandwidth", ["median", 1.3])
def test_mcdiarmid_bound_matches_loop(pair: tuple, bandwidth) -> None:
    a, b = pair
    aud = MMDTVAuditor(confidence_level=0.95, bound="mcdiarmid", bandwidth=bandwidth, rng=1).fit(
        a, b
    )
    if bandwidth == "median":
        sa, ea = _halves(len(a), aud.seed_, 0)
        sb, eb = _halves(len(b), aud.seed_, 1)
        sigma = float(np.median(pdist(np.r_[a[sa], b[sb]])))
        xa, xb = a[ea], b[eb]
    else:  # a fixed bandwidth lets the bound use every row
        sigma, xa, xb = 1.3, a, b
    n, m = len(xa), len(xb)
    slack = math.sqrt(8 * (1 / n + 1 / m) * math.log(1 / 0.05))
    want = math.sqrt(max(loop_mmd2(xa, xb, sigma) - slack, 0.0))
    assert aud.mmd_lb_ == pytest.approx(want, rel=1e-10, abs=1e-12)
    assert aud.bandwidth_lb_ == pytest.approx(sigma, rel=1e-12)


def test_bandwidth_ignores_the_evaluation_rows(pair: tuple) -> None:
    a, b = pair
    aud = MMDTVAuditor(confidence_level=0.95, rng=0).fit(a, b)
    _, ea = _halves(len(a), aud.seed_, 0)
    moved = a.copy()
    moved[ea] += 5.0  # change only the rows the bound is computed on
    other = MMDTVAuditor(confidence_level=0.95, rng=0).fit(moved, b)
    assert other.bandwidth_lb_ == aud.bandwidth_lb_
    assert other.mmd_lb_ != aud.mmd_lb_


def test_union_bound_over_simultaneous_bounds(pair: tuple) -> None:
    a, b = pair
    one = MMDTVAuditor(confidence_level=0.95, rng=0).fit(a, b).mmd_lb_
    many = MMDTVAuditor(confidence_level=0.95, n_simultaneous=50, rng=0).fit(a, b).mmd_lb_
    assert many < one


def test_audit_pairs_outputs_and_statuses() -> None:
    gen = np.random.default_rng(0)
    x = np.repeat(np.eye(4)[:3], 20, axis=0) + 0.4 * gen.normal(size=(60, 4))
    es = EmbeddingSet(x, np.repeat(["a", "b", "c"], 20), normalize=False)
    pairs = [("a", "b"), ("b", "c"), ("a", "c")]
    aud = MMDTVAuditor(confidence_level=0.95, n_simultaneous=len(pairs), rng=7)
    ds = audit_pairs(es, pairs, [aud], progress=False)
    check_result_dataset(ds)
    for name in ("mmd_lb", "epsilon_lb", "epsilon_hs_lb"):
        assert ds[f"mmdtv_{name}"].attrs["status"] == "certified_lower_bound"
    assert ds["mmdtv_epsilon"].attrs["status"] == "sample_estimate"
    assert "jointly over 3 bounds" in ds["mmdtv_epsilon_lb"].attrs["long_name"]
    for p, (u, v) in enumerate(pairs):
        one = MMDTVAuditor(confidence_level=0.95, n_simultaneous=3, rng=7).fit(es.get(u), es.get(v))
        assert float(ds["mmdtv_epsilon_lb"][p]) == pytest.approx(one.epsilon_lb_, rel=1e-12)


@pytest.mark.parametrize(
    "params", [{"confidence_level": 0.9}, {"confidence_level": 0.9, "bound": "mcdiarmid"}]
)
def test_contract_suite(params: dict) -> None:
    check_auditor(MMDTVAuditor(**params))


@pytest.mark.parametrize(
    ("params", "error", "match"),
    [
        ({"confidence_level": 1.0}, InvalidInputError, r"`confidence_level` must be in \(0, 1\)"),
        (
            {"confidence_level": 0.9, "bound": "hoeffding"},
            InvalidInputError,
            "`bound` must be one of",
        ),
        (
            {"confidence_level": 0.9, "n_simultaneous": 0},
            InvalidInputError,
            "`n_simultaneous` must be",
        ),
        ({"confidence_level": "high"}, TypeError, "`confidence_level` must be a real number"),
    ],
)
def test_bad_parameters(pair: tuple, params: dict, error: type, match: str) -> None:
    a, b = pair
    with pytest.raises(error, match=match):
        MMDTVAuditor(**params).fit(a, b)


def test_needs_two_rows_per_half() -> None:
    gen = np.random.default_rng(0)
    with pytest.raises(InvalidInputError, match="at least 4"):
        MMDTVAuditor(confidence_level=0.9).fit(gen.normal(size=(3, 2)), gen.normal(size=(8, 2)))


def test_results_record_the_level(pair: tuple) -> None:
    a, b = pair
    es = EmbeddingSet(np.vstack([a, b]), np.repeat(["a", "b"], [len(a), len(b)]))
    ds = audit_pairs(es, "all", [MMDTVAuditor(confidence_level=0.9)], progress=False)
    assert ds.attrs["mmdtv.confidence_level"] == 0.9
