"""Tests of idaudit.ops._mmd against scipy, numpy and plain O(n^2) loops."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from scipy.spatial.distance import cdist, pdist
from scipy.stats import chisquare

from idaudit.ops import (
    median_heuristic,
    mmd2_from_kernel,
    mmd2_permutation_test,
    pack_pairs,
    pairwise_sq_distances,
    rbf_kernel,
)
from idaudit.ops._mmd import PERMUTATION_BLOCK, permutation_splits, split_masks
from references import loop_mmd2


def kernels_of(samples: list[tuple[np.ndarray, np.ndarray]]) -> tuple:
    batch = pack_pairs(samples)
    d2 = pairwise_sq_distances(batch.x)
    sigma = median_heuristic(d2, [a + b for a, b in zip(batch.n_a, batch.n_b, strict=True)])
    return batch, rbf_kernel(d2, sigma), sigma


@pytest.fixture
def samples() -> list[tuple[np.ndarray, np.ndarray]]:
    gen = np.random.default_rng(5)
    sizes = [(9, 7), (6, 6), (4, 11)]  # pooled sizes 16, 12 (even counts) and 15
    return [(gen.normal(size=(a, 5)), gen.normal(0.5, 1, size=(b, 5))) for a, b in sizes]


def test_sq_distances_match_cdist() -> None:
    gen = np.random.default_rng(0)
    x, y = gen.normal(size=(2, 7, 5)), gen.normal(size=(2, 4, 5))
    got = pairwise_sq_distances(torch.from_numpy(x), torch.from_numpy(y)).numpy()
    for p in range(2):
        # rtol: the Gram expansion loses ~1e-15 relative on distances of order 10
        np.testing.assert_allclose(got[p], cdist(x[p], y[p], "sqeuclidean"), rtol=1e-12)
    same = pairwise_sq_distances(torch.from_numpy(x)).numpy()
    np.testing.assert_array_equal(np.diagonal(same, axis1=1, axis2=2), 0.0)
    np.testing.assert_allclose(same[1], cdist(x[1], x[1], "sqeuclidean"), rtol=1e-12, atol=1e-12)


def test_median_heuristic_is_numpy_median_of_pdist(samples: list) -> None:
    _batch, _, sigma = kernels_of(samples)
    want = [np.median(pdist(np.vstack(pair))) for pair in samples]
    # rtol: sqrt of Gram-expanded squared distances, ~1e-15 relative
    np.testing.assert_allclose(sigma.numpy(), want, rtol=1e-12)


def test_median_heuristic_on_many_pooled_sizes() -> None:
    # pooled sizes from 2 to 31 in one batch (odd and even pair counts, heavy padding),
    # against numpy.median of the distances computed directly from the rows; rows drawn
    # from a coarse grid make many exact ties, which selection must count like sorting
    gen = np.random.default_rng(11)
    sizes = [(1, 1), (1, 2), (2, 2), (3, 4), (10, 3), (15, 16), (7, 7), (2, 29)]
    samples = [
        (gen.integers(0, 3, size=(a, 3)).astype(float), gen.integers(0, 3, size=(b, 3)) * 1.0)
        for a, b in sizes
    ]
    _batch, _, sigma = kernels_of(samples)
    want = [np.median(pdist(np.vstack(pair))) for pair in samples]
    np.testing.assert_allclose(sigma.numpy(), want, rtol=1e-12, atol=1e-12)


def test_median_counts_duplicate_rows() -> None:
    # three identical rows and one far away: distances 0, 0, 0, 5, 5, 5 -> median 2.5
    z = np.array([[0.0, 0.0], [0.0, 0.0], [0.0, 0.0], [3.0, 4.0]])
    d2 = pairwise_sq_distances(torch.from_numpy(z)[None])
    assert float(median_heuristic(d2, [4])[0]) == pytest.approx(2.5, rel=1e-12)


def test_mmd2_matches_quadratic_loop(samples: list) -> None:
    batch, kernel, sigma = kernels_of(samples)
    got = mmd2_from_kernel(kernel, *batch.masks()).numpy()
    want = [loop_mmd2(a, b, float(s)) for (a, b), s in zip(samples, sigma, strict=True)]
    np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-14)  # summation order only


def test_rbf_kernel_closed_form() -> None:
    d2 = torch.tensor([[[0.0, 2.0], [2.0, 0.0]]], dtype=torch.float64)
    k = rbf_kernel(d2, torch.tensor([2.0], dtype=torch.float64)).numpy()
    np.testing.assert_allclose(k[0], [[1.0, math.exp(-0.25)], [math.exp(-0.25), 1.0]])


def test_split_masks_sizes_and_prefix_stability() -> None:
    ((_, order_small),) = list(permutation_splits(3, 50, 10))
    ((_, order_big),) = list(permutation_splits(3, 50, 25))
    small = split_masks(order_small, 4, 6)
    big = split_masks(order_big, 4, 6)
    np.testing.assert_array_equal(small.sum(1), 4)
    # a pair's permutations do not depend on the largest pooled size in its batch
    np.testing.assert_array_equal(small, big)
    # nor, for the first B, on the total number of permutations
    first = np.concatenate([o for _, o in permutation_splits(3, 30, 10)])
    np.testing.assert_array_equal(split_masks(first, 4, 6), small[:30])


def test_split_masks_are_uniform_subsets() -> None:
    # all C(5, 2) = 10 subsets equally likely over 4 blocks of permutations
    orders = np.concatenate([o for _, o in permutation_splits(11, 4 * PERMUTATION_BLOCK, 9)])
    member = split_masks(orders, 2, 3)
    codes = member @ (1 << np.arange(5))
    counts = np.bincount(codes, minlength=32)[np.unique(codes)]
    assert len(counts) == 10
    assert chisquare(counts).pvalue > 1e-3  # fails only if the draw is not uniform


def test_permutation_test_matches_plain_loop_over_same_splits(samples: list) -> None:
    batch, kernel, _ = kernels_of(samples)
    n_perm = 300
    pvalue, observed, null = mmd2_permutation_test(
        kernel, batch.n_a, batch.n_b, 9, n_perm, return_null=True
    )
    orders = np.concatenate([o for _, o in permutation_splits(9, n_perm, batch.n_max)])
    for p, (a, b) in enumerate(samples):
        n_a, n = len(a), len(a) + len(b)
        k = kernel[p, :n, :n].numpy()

        def stat(ia: np.ndarray, ib: np.ndarray, k: np.ndarray = k, n_a: int = n_a) -> float:
            n_b = len(ib)
            kaa, kbb = k[np.ix_(ia, ia)], k[np.ix_(ib, ib)]
            return (
                (kaa.sum() - np.trace(kaa)) / (n_a * (n_a - 1))
                + (kbb.sum() - np.trace(kbb)) / (n_b * (n_b - 1))
                - 2 * k[np.ix_(ia, ib)].mean()
            )

        obs = stat(np.arange(n_a), np.arange(n_a, n))
        member = split_masks(orders, n_a, n - n_a)
        perm_stats = np.array([stat(np.flatnonzero(r), np.flatnonzero(~r)) for r in member])
        assert observed[p].item() == pytest.approx(obs, abs=1e-13)
        np.testing.assert_allclose(null[p].numpy(), perm_stats, atol=1e-13)
        count = int(np.sum(perm_stats >= obs - 1e-12))
        assert pvalue[p].item() == (1 + count) / (1 + n_perm)


def test_screened_and_float64_pvalues_are_identical() -> None:
    gen = np.random.default_rng(8)
    # H0 pairs put many permuted statistics near the observed one: the re-check path runs
    samples = [(gen.normal(size=(20, 6)), gen.normal(size=(20, 6))) for _ in range(4)]
    samples += [(gen.normal(size=(15, 6)), gen.normal(0.3, 1, size=(22, 6)))]
    # n_a == n_b: the mirrored split ties the observed statistic exactly, and float32
    # rounding alone would misplace it; few splits, so it recurs many times
    samples += [(gen.normal(size=(3, 6)), gen.normal(size=(3, 6))) for _ in range(8)]
    batch, kernel, _ = kernels_of(samples)
    p_screen, _, _ = mmd2_permutation_test(kernel, batch.n_a, batch.n_b, 1, 2000, screen=True)
    p_exact, _, _ = mmd2_permutation_test(kernel, batch.n_a, batch.n_b, 1, 2000, screen=False)
    np.testing.assert_array_equal(p_screen.numpy(), p_exact.numpy())


def test_pvalues_do_not_depend_on_batch(samples: list) -> None:
    batch, kernel, sigma = kernels_of(samples)
    together, _, _ = mmd2_permutation_test(kernel, batch.n_a, batch.n_b, 4, 700)
    for p, pair in enumerate(samples):
        one = pack_pairs([pair])
        k1 = rbf_kernel(pairwise_sq_distances(one.x), sigma[p : p + 1])
        alone, _, _ = mmd2_permutation_test(k1, one.n_a, one.n_b, 4, 700)
        assert alone.item() == together[p].item()


def test_exact_ties_count_as_at_least() -> None:
    # an exchangeable kernel gives every split the same statistic up to rounding: b == B
    k4 = torch.tensor(np.eye(4) * 0.5 + 0.5, dtype=torch.float64)[None]
    for screen in (True, False):
        pvalue, _, _ = mmd2_permutation_test(k4, [2], [2], 0, 50, screen=screen)
        assert pvalue.item() == 1.0


@pytest.mark.parametrize("shift", [0.0, 0.4, 2.0])
def test_low_rank_screen_bounds_hold(shift: float) -> None:
    # The first screen replaces p'HKHp by its projection on the top eigenvectors plus a
    # bound on the rest. Against the float64 statistic of 3000 random splits the bound must
    # hold every time (it is a bound, not a tolerance), from identical to separated samples.
    from idaudit.ops._mmd import _Group

    gen = np.random.default_rng(int(10 * shift))
    pairs = [(gen.normal(size=(30, 8)), gen.normal(shift, 1, size=(25, 8))) for _ in range(3)]
    _batch, kernel, _ = kernels_of(pairs)
    group = _Group(kernel, 30, 25, screen=True)
    assert group.rank == 8
    members = torch.from_numpy(np.argsort(gen.random((3000, 55)), axis=1) < 30)
    exact = group.exact(members.to(torch.float64))  # (rows, 3)
    pf = members.to(torch.float64)
    prod = (pf @ group.lr_w).view(-1, 3, group.rank + 2)
    proj2 = prod[..., : group.rank] ** 2
    quad = group.lr_half * 30 + (proj2 * group.lr_shift).sum(-1)
    bound = group.lr_radius * (30 - proj2.sum(-1)) + group.lr_slack
    approx = (
        group.c_q * quad
        + group.c_lin * prod[..., group.rank]
        + group.c_d * prod[..., group.rank + 1]
        + group.c_0_centred
    )
    gap = (approx - exact).abs()
    assert bool((gap <= group.c_q * bound).all())


def test_screen_is_exact_for_a_kernel_that_is_not_positive_semidefinite() -> None:
    # a thresholded 0/1 "kernel" has entries in [0, 1] but negative eigenvalues, where the
    # low-rank screen's bound does not hold: the screen must notice and the p-value must
    # still be the float64 one
    gen = np.random.default_rng(0)
    z = gen.standard_normal((1, 30, 3))
    z[:, :15] += 0.5
    k = torch.from_numpy((((z[:, :, None] - z[:, None]) ** 2).sum(-1) < 2.0).astype(float))
    assert float(torch.linalg.eigvalsh(k[0]).min()) < -1.0
    screened, _, _ = mmd2_permutation_test(k, [15], [15], 0, 2000, screen=True)
    exact, _, _ = mmd2_permutation_test(k, [15], [15], 0, 2000, screen=False)
    assert screened.item() == exact.item()
