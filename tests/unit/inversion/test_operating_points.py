"""Fixed-FMR operating points and exact intervals, against brute force and scipy."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from idaudit.exceptions import IdauditWarning, InvalidInputError
from idaudit.inversion import (
    fmr_thresholds,
    joint_evaluation,
    proportion_interval,
    type_accuracy,
)
from idaudit.inversion._thresholds import impostor_pairs_needed
from idaudit.results import check_result_dataset


def _exact(k: int, n: int, level: float = 0.95) -> tuple[float, float]:
    ci = stats.binomtest(k, n).proportion_ci(confidence_level=level, method="exact")
    return ci.low, ci.high


def _brute_threshold(genuine: np.ndarray, impostor: np.ndarray, f: float) -> float:
    """Every observed score (and +inf), lowest first: the first whose false matches fit."""
    allowed = math.floor(f * impostor.size + 1e-9)
    cands = np.unique(np.concatenate([genuine, impostor, [np.inf]]))
    for lo in range(0, cands.size, 2000):  # chunks: (2000, n_impostor) comparisons at a time
        chunk = cands[lo : lo + 2000]
        fm = (impostor[None, :] >= chunk[:, None]).sum(axis=1)
        ok = np.flatnonzero(fm <= allowed)
        if ok.size:
            return float(chunk[ok[0]])
    raise AssertionError("+inf always qualifies")


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_fmr_thresholds_equal_a_brute_force_search(seed: int) -> None:
    rng = np.random.default_rng(seed)
    # scores rounded to 3 decimals: many ties, as cosines stored at low precision have
    genuine = np.round(rng.normal(0.55, 0.12, 400), 3)
    impostor = np.round(rng.normal(0.05, 0.1, 30_000), 3)
    r = fmr_thresholds(genuine, impostor, (1e-3, 1e-4))  # 30,000 >= 29,956: no warning
    for j, f in enumerate((1e-3, 1e-4)):
        tau = _brute_threshold(genuine, impostor, f)
        assert r.threshold[j] == tau
        n_fm, n_fnm = int((impostor >= tau).sum()), int((genuine < tau).sum())
        assert (r.n_false_match[j], r.n_false_nonmatch[j]) == (n_fm, n_fnm)
        assert n_fm <= f * impostor.size
        assert r.fmr[j] == n_fm / impostor.size
        assert r.fnmr[j] == n_fnm / genuine.size
        np.testing.assert_allclose((r.fmr_low[j], r.fmr_high[j]), _exact(n_fm, 30_000), rtol=1e-9)
        np.testing.assert_allclose((r.fnmr_low[j], r.fnmr_high[j]), _exact(n_fnm, 400), rtol=1e-9)
    check_result_dataset(r.to_xarray())


def test_impostor_pairs_needed_is_the_rule_of_three() -> None:
    # (1 - f)^n <= 0.05  <=>  n >= ln 0.05 / ln(1 - f): 2995 at 1e-3, 29956 at 1e-4
    assert impostor_pairs_needed(1e-3) == 2995
    assert impostor_pairs_needed(1e-4) == 29956
    n = impostor_pairs_needed(1e-3)
    assert stats.binomtest(0, n).proportion_ci(0.90, method="exact").high <= 1e-3  # one-sided 95 %
    assert stats.binomtest(0, n - 1).proportion_ci(0.90, method="exact").high > 1e-3


def test_too_few_impostor_pairs_are_refused_or_warned() -> None:
    rng = np.random.default_rng(0)
    genuine = rng.normal(0.5, 0.1, 50)
    with pytest.warns(IdauditWarning, match="not resolved by 500 impostor pairs"):
        r = fmr_thresholds(genuine, rng.normal(0, 0.1, 500), (1e-3,))
    assert np.isnan(r.threshold[0])
    assert not r.resolved[0]
    with pytest.warns(IdauditWarning, match="fewer than 2995"):
        r = fmr_thresholds(genuine, rng.normal(0, 0.1, 2000), (1e-3,))
    assert r.resolved[0]
    assert np.isfinite(r.threshold[0])
    with pytest.raises(InvalidInputError, match="`fmr` must hold rates in"):
        fmr_thresholds(genuine, genuine, (0.0,))


def test_type_i_interval_is_clopper_pearson() -> None:
    rng = np.random.default_rng(3)
    rec = rng.normal(size=(12, 8))
    tgt = rec + rng.normal(scale=0.9, size=(12, 8))
    others = [rec[t] + rng.normal(scale=1.0, size=(5, 8)) for t in range(12)]
    acc = type_accuracy(rec, tgt, others, 0.8)
    k = int(acc.per_target_i.sum())
    assert 0 < k < 12
    np.testing.assert_allclose((acc.type_i_low, acc.type_i_high), _exact(k, 12), rtol=1e-9)
    assert acc.n_type_ii_pairs == 60
    # Type II's interval is about Type II itself, the mean of the per-target rates
    assert acc.type_ii_low <= acc.type_ii <= acc.type_ii_high
    np.testing.assert_allclose(proportion_interval(3, 10, 0.9), _exact(3, 10, 0.9), rtol=1e-9)
    assert proportion_interval(8, 8)[0] == pytest.approx(0.025 ** (1 / 8))


def test_joint_evaluation_reports_intervals_and_fmr_points() -> None:
    rng = np.random.default_rng(4)
    rec = rng.normal(size=(10, 8))
    tgt = rec + rng.normal(scale=0.8, size=(10, 8))
    others = [rec[t] + rng.normal(scale=1.0, size=(4, 8)) for t in range(10)]
    points = fmr_thresholds(rng.normal(0.6, 0.15, 200), rng.normal(0.0, 0.2, 30_000))
    ds = joint_evaluation(
        {"m": {"m": rec}}, {"m": tgt}, {"m": others}, {"m": 0.3}, operating_points={"m": points}
    )
    check_result_dataset(ds)
    base = type_accuracy(rec, tgt, others, 0.3)
    assert float(ds["type_i_low"].sel(target_model="m", test_model="m")) == base.type_i_low
    assert ds["type_i_low"].attrs["status"] == "diagnostic"
    for j, tau in enumerate(points.threshold):
        at = type_accuracy(rec, tgt, others, float(tau))
        cell = ds.sel(target_model="m", test_model="m").isel(fmr=j)
        assert float(cell["type_i_fmr"]) == at.type_i
        assert float(cell["type_ii_fmr"]) == at.type_ii
        assert float(cell["type_i_fmr_high"]) == at.type_i_high
        assert float(ds["fmr_threshold"].sel(test_model="m").isel(fmr=j)) == tau
    np.testing.assert_array_equal(ds["fmr"].values, [1e-3, 1e-4])


def test_a_reject_all_threshold_matches_nothing() -> None:
    # 4 impostors above every genuine score and 3 false matches allowed (1e-3 of 3000): only
    # "reject all" (+inf) qualifies
    rng = np.random.default_rng(5)
    impostor = np.concatenate([rng.normal(0.0, 0.1, 2996), [0.99] * 4])
    points = fmr_thresholds(np.full(40, 0.5), impostor, (1e-3,))
    assert points.threshold[0] == np.inf
    assert points.fnmr[0] == 1.0
    e = np.eye(3)
    ds = joint_evaluation(
        {"m": {"m": e[:2]}}, {"m": e[:2]}, {"m": [e[[0]], e[[1]]]}, {"m": 0.5},
        operating_points={"m": points},
    )  # fmt: skip
    cell = ds.sel(target_model="m", test_model="m").isel(fmr=0)
    assert float(cell["type_i_fmr"]) == 0.0
    assert float(cell["type_i_fmr_high"]) == pytest.approx(1 - 0.025 ** (1 / 2))


def _type_ii_case(rates_hit: np.ndarray, j: int) -> tuple[np.ndarray, np.ndarray, list]:
    """Targets whose reconstruction matches ``rates_hit[t]`` of its ``j`` other images."""
    n = rates_hit.size
    e = np.eye(2)
    others = [np.vstack([e[0]] * k + [e[1]] * (j - k)) for k in rates_hit]
    return np.tile(e[0], (n, 1)), np.tile(e[0], (n, 1)), others


def test_type_ii_interval_is_for_the_same_quantity_as_its_point() -> None:
    # one target matches its single other image, the other none of its 9: Type II (the mean
    # of the per-target rates) is 0.5, and its interval must hold it (pooled pairs: 1/10)
    e = np.eye(4)
    acc = type_accuracy(e[:2], e[:2], [e[[0]], np.vstack([e[[2]]] * 9)], 0.5)
    assert acc.type_ii == 0.5
    assert acc.type_ii_low <= 0.5 <= acc.type_ii_high


@pytest.mark.parametrize(("a", "b"), [(1.0, 1.0), (0.3, 0.3), (5.0, 5.0)])
def test_type_ii_interval_covers_the_mean_rate(a: float, b: float) -> None:
    # per-identity match probabilities p ~ Beta(a, b), J = 5 other images each, I = 8
    # targets: the estimand is E[p] = a / (a + b). 300 seeded repetitions; misses ~
    # Bin(300, <= 0.05): expected <= 15, sd 3.8; the one-sided binomial test at 1e-3 fails
    # at about 27 misses (the pooled Clopper-Pearson interval missed 29 % at Beta(0.3, 0.3))
    rng = np.random.default_rng(7)
    truth, misses, n_reps = a / (a + b), 0, 300
    for _ in range(n_reps):
        hits = rng.binomial(5, rng.beta(a, b, 8))
        acc = type_accuracy(*_type_ii_case(hits, 5), 0.5)
        misses += not (acc.type_ii_low <= truth <= acc.type_ii_high)
    assert stats.binomtest(misses, n_reps, 0.05, alternative="greater").pvalue > 1e-3


def test_fmr_refusals_name_the_argument_and_print_plain_numbers() -> None:
    g, i = np.linspace(0.3, 0.9, 40), np.linspace(-0.5, 0.2, 5000)
    with pytest.raises(InvalidInputError, match=r"`fmr` must hold rates in .*; got \[0.0\]\.$"):
        fmr_thresholds(g, i, [0.0])
    with pytest.raises(InvalidInputError, match=r"`fmr` must hold rates in \(0, 1\); got \['a'\]"):
        fmr_thresholds(g, i, ["a"])  # type: ignore[list-item]
