"""Tests of idaudit.ops._pack: the padded pair layout every kernel shares."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from idaudit.ops import pack_pairs


def test_pack_layout_and_masks() -> None:
    gen = np.random.default_rng(0)
    pairs = [
        (gen.normal(size=(3, 4)), gen.normal(size=(2, 4))),
        (gen.normal(size=(1, 4)), gen.normal(size=(5, 4))),
    ]
    batch = pack_pairs(pairs)
    assert tuple(batch.x.shape) == (2, 6, 4)
    assert batch.x.dtype == torch.float64
    assert (batch.n_a, batch.n_b) == ((3, 1), (2, 5))
    np.testing.assert_array_equal(batch.x[0, :3].numpy(), pairs[0][0])
    np.testing.assert_array_equal(batch.x[0, 3:5].numpy(), pairs[0][1])
    np.testing.assert_array_equal(batch.x[0, 5].numpy(), 0.0)  # padding is zero
    mask_a, mask_b = batch.masks()
    np.testing.assert_array_equal(mask_a.numpy(), [[1, 1, 1, 0, 0, 0], [1, 0, 0, 0, 0, 0]])
    np.testing.assert_array_equal(mask_b.numpy(), [[0, 0, 0, 1, 1, 0], [0, 1, 1, 1, 1, 1]])


def test_side_gathers_each_identity_left_aligned() -> None:
    gen = np.random.default_rng(1)
    pairs = [
        (gen.normal(size=(3, 2)), gen.normal(size=(2, 2))),
        (gen.normal(size=(1, 2)), gen.normal(size=(4, 2))),
    ]
    batch = pack_pairs(pairs)
    rows_b, mask_b = batch.side("b")
    assert tuple(rows_b.shape) == (2, 4, 2)
    np.testing.assert_array_equal(rows_b[0, :2].numpy(), pairs[0][1])
    np.testing.assert_array_equal(rows_b[0, 2:].numpy(), 0.0)
    np.testing.assert_array_equal(rows_b[1].numpy(), pairs[1][1])
    np.testing.assert_array_equal(mask_b.numpy(), [[1, 1, 0, 0], [1, 1, 1, 1]])
    rows_a, mask_a = batch.side("a")
    np.testing.assert_array_equal(rows_a[1, :1].numpy(), pairs[1][0])
    np.testing.assert_array_equal(mask_a.numpy(), [[1, 1, 1], [1, 0, 0]])


def test_pack_rejects_empty() -> None:
    with pytest.raises(ValueError, match="at least one pair"):
        pack_pairs([])
