"""Nearest-neighbour distances (idaudit.memorization._neighbours) against scipy's ``cdist``
and scikit-learn."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.spatial.distance import cdist
from sklearn.neighbors import NearestNeighbors

from idaudit.exceptions import InvalidInputError
from idaudit.memorization import (
    nearest_neighbour_distances,
    pairwise_distances,
)

# ------------------------------------------------------------------ nearest neighbours


@pytest.mark.parametrize("metric", ["cosine", "euclidean"])
def test_nearest_neighbours_match_cdist_in_small_blocks(metric: str) -> None:
    gen = np.random.default_rng(1)
    q, r = gen.standard_normal((37, 12)), gen.standard_normal((53, 12))
    ref = cdist(q, r, metric)
    # 3 rows of 53 doubles per block: many blocks, the last one partial
    d, i = nearest_neighbour_distances(q, r, metric=metric, block_bytes=8 * 53 * 3)
    atol = 1e-12 if metric == "cosine" else 1e-7  # |q|²+|r|²-2<q,r> cancels for euclidean
    np.testing.assert_allclose(d, ref.min(axis=1), rtol=0, atol=atol)
    np.testing.assert_array_equal(i, ref.argmin(axis=1))
    np.testing.assert_allclose(
        pairwise_distances(q, r, metric=metric, block_bytes=64), ref, rtol=0, atol=atol
    )


def test_leave_one_out_matches_sklearn() -> None:
    x = np.random.default_rng(2).standard_normal((40, 6))
    d, i = nearest_neighbour_distances(x, metric="euclidean", block_bytes=100)
    dist, idx = NearestNeighbors(n_neighbors=2).fit(x).kneighbors(x)
    np.testing.assert_allclose(d, dist[:, 1], atol=1e-7)
    np.testing.assert_array_equal(i, idx[:, 1])


def test_neighbour_inputs_are_checked() -> None:
    with pytest.raises(
        InvalidInputError, match=r"embedding dimensions must match.*3 \(queries\) vs 4"
    ):
        nearest_neighbour_distances(np.ones((2, 3)), np.ones((2, 4)))
    with pytest.raises(InvalidInputError, match="zero row"):
        nearest_neighbour_distances(np.zeros((2, 3)), np.ones((2, 3)))
    with pytest.raises(InvalidInputError, match="finite"):
        nearest_neighbour_distances(np.array([[np.nan, 1.0]]), np.ones((2, 2)))
