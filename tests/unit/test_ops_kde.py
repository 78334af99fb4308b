"""Tests of idaudit.ops._kde against scipy.stats.gaussian_kde and numpy."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from scipy.stats import gaussian_kde

from idaudit.ops import kde_bandwidth, kde_on_grid, log_ratio_max
from idaudit.ops._kde import _S_MAX


def padded(rows: list[np.ndarray]) -> tuple[torch.Tensor, torch.Tensor]:
    width = max(len(r) for r in rows)
    values = np.zeros((len(rows), width))
    mask = np.zeros((len(rows), width))
    for i, r in enumerate(rows):
        values[i, : len(r)] = r
        mask[i, : len(r)] = 1.0
    return torch.from_numpy(values), torch.from_numpy(mask)


@pytest.fixture
def rows() -> list[np.ndarray]:
    gen = np.random.default_rng(3)
    return [
        gen.normal(0.0, 0.02, size=40),
        gen.standard_t(3, size=25) * 0.05,
        np.r_[gen.normal(-1, 0.1, 30), gen.normal(1, 0.1, 30)],  # bimodal
    ]


def test_silverman_bandwidth_is_scipys(rows: list[np.ndarray]) -> None:
    values, mask = padded(rows)
    got = kde_bandwidth(values, mask, "silverman").numpy()
    want = [math.sqrt(gaussian_kde(r, bw_method="silverman").covariance[0, 0]) for r in rows]
    np.testing.assert_allclose(got, want, rtol=1e-13)  # same formula, rounding only


def test_robust_silverman_bandwidth(rows: list[np.ndarray]) -> None:
    values, mask = padded(rows)
    got = kde_bandwidth(values, mask, "silverman-robust").numpy()
    want = []
    for r in rows:
        iqr = np.subtract(*np.percentile(r, [75, 25]))
        want.append(0.9 * min(np.std(r, ddof=1), iqr / 1.34) * len(r) ** -0.2)
    np.testing.assert_allclose(got, want, rtol=1e-13)


def test_robust_bandwidth_falls_back_to_std_when_iqr_is_zero() -> None:
    r = np.r_[np.zeros(10), 1.0, -1.0]  # IQR 0, std > 0
    values, mask = padded([r])
    got = kde_bandwidth(values, mask, "silverman-robust").item()
    assert got == pytest.approx(0.9 * np.std(r, ddof=1) * 12**-0.2, rel=1e-13)


def test_unknown_rule() -> None:
    values, mask = padded([np.arange(3.0)])
    with pytest.raises(ValueError, match="`rule` must be one of"):
        kde_bandwidth(values, mask, "scott")


@pytest.mark.parametrize("margin", [3.0, 40.0])  # 40 bandwidths: coarse grid, direct route
def test_densities_match_gaussian_kde(rows: list[np.ndarray], margin: float) -> None:
    values, mask = padded(rows)
    h = kde_bandwidth(values, mask, "silverman")
    lo = torch.tensor([r.min() for r in rows], dtype=torch.float64) - margin * h
    hi = torch.tensor([r.max() for r in rows], dtype=torch.float64) + margin * h
    got = kde_on_grid(values, mask, h, lo, (hi - lo) / 200, 201).numpy()
    for i, r in enumerate(rows):
        want = gaussian_kde(r, bw_method="silverman")(np.linspace(float(lo[i]), float(hi[i]), 201))
        # the blocked route is an exact factorisation: agreement to rounding (~1e-13); atol
        # admits denormal tails (< 1e-250, far below the KDE-LR floor of 1e-12)
        np.testing.assert_allclose(got[i], want, rtol=1e-10, atol=1e-250)


def test_blocked_and_direct_routes_agree_with_scipy() -> None:
    gen = np.random.default_rng(4)
    r = gen.normal(size=30)
    values, mask = padded([r, r])
    h = kde_bandwidth(values, mask, "silverman")
    lo = torch.tensor([-3.0, -3.0], dtype=torch.float64)
    step = torch.tensor([0.03, 0.3], dtype=torch.float64)
    s = 0.5 * (step / h) ** 2
    # row 0 takes the blocked route, row 1 (grid step > 0.45 bandwidths) the direct one
    assert bool(s[0] <= _S_MAX(100.0))
    assert bool(s[1] > _S_MAX(100.0))
    got = kde_on_grid(values, mask, h, lo, step, 201).numpy()
    ref = gaussian_kde(r, "silverman")
    for i in range(2):
        want = ref(-3.0 + float(step[i]) * np.arange(201))
        np.testing.assert_allclose(got[i], want, rtol=1e-10, atol=1e-250)


def test_log_ratio_max_matches_numpy() -> None:
    gen = np.random.default_rng(6)
    pa, pb = gen.random((2, 3, 11)) * np.array([[1e-20], [1.0], [5.0]])
    uniform = np.array([0.5, 2.0, 0.1])
    for alpha in (0.0, 0.01, 1.0):
        got = log_ratio_max(
            torch.from_numpy(pa), torch.from_numpy(pb), torch.from_numpy(uniform), alpha, 1e-12
        ).numpy()
        ta = np.maximum((1 - alpha) * pa + alpha * uniform[:, None], 1e-12)
        tb = np.maximum((1 - alpha) * pb + alpha * uniform[:, None], 1e-12)
        np.testing.assert_allclose(got, np.abs(np.log(ta) - np.log(tb)).max(1), rtol=1e-14)
