"""The memorisation statistics on CUDA give the CPU's numbers (skipped without CUDA)."""

from __future__ import annotations

import numpy as np
import pytest

from idaudit.memorization import flagging, nearest_neighbour_distances, nnaa

pytestmark = pytest.mark.gpu


def test_neighbours_flagging_and_nnaa_match_the_cpu() -> None:
    gen = np.random.default_rng(0)
    t, h, s = (gen.standard_normal((300, 64)) for _ in range(3))
    d_cpu, i_cpu = nearest_neighbour_distances(h, t)
    d_gpu, i_gpu = nearest_neighbour_distances(h, t, device="cuda")
    np.testing.assert_allclose(d_gpu, d_cpu, atol=1e-12)
    np.testing.assert_array_equal(i_gpu, i_cpu)
    a = flagging(t, h, s, n_permutations=499, rng=1)
    b = flagging(t, h, s, n_permutations=499, rng=1, device="cuda")
    np.testing.assert_array_equal(a.p_values, b.p_values)
    x = nnaa(t, h, s, n_bootstrap=100, rng=2)
    y = nnaa(t, h, s, n_bootstrap=100, rng=2, device="cuda")
    np.testing.assert_array_equal(x.bootstrap, y.bootstrap)
