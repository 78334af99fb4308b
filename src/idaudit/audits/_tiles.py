"""Complete adjacency in tiles: blocks of small identities against blocks, one product each.

With ``pairs="all"`` over thousands of identities of a few dozen rows each (CelebA's shape),
an audit costs per pair, not per identity. The tiled engine sorts the identities by row
count and cuts them into *blocks* of at most ``tile_size`` identities of equal count. A
*tile* is a pair of blocks ``(r, s)``, ``r <= s``: every identity pair between them (above
the diagonal when ``r == s``). Its cross inner products come from one BLAS product of the
two blocks' stacked rows, and every pair of the tile is reduced while those distances are
in cache, a group of rows of block ``r`` at a time (:class:`Tile`). A *tile row* is block
``r`` against every block ``s >= r``: the unit the resumable store writes.

An auditor runs on tiles when it implements ``_run_tile(tile)`` and its ``_tileable()`` says
yes for its parameters (GaussMech; MMD-TV without certified bounds or permutation tests):
the numbers equal its ``_run`` on the same pairs to rounding.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np
import numpy.typing as npt
import torch

__all__ = ["Block", "Side", "Tile", "TilePlan", "tile_groups"]

#: Identities per block when ``tile_size`` is None.
DEFAULT_TILE_SIZE = 64

# Working memory of one group of pairs (pooled distances and one kernel copy).
_GROUP_BYTES = 2**24

#: One tile's outputs: auditor label -> output name -> array over the tile's pairs.
TileResult = dict[str, dict[str, npt.NDArray[Any]]]


class TilePlan:
    """Identities cut into blocks of equal row count, and the pairs of every tile.

    Parameters
    ----------
    sizes : numpy.ndarray of int, shape (identities,)
        Rows of each identity, in the order of the call's identities.
    tile_size : int
        Most identities in a block.
    """

    def __init__(self, sizes: npt.NDArray[np.int64], tile_size: int) -> None:
        self.n_identities = len(sizes)
        self.tile_size = tile_size
        order = np.lexsort((np.arange(len(sizes)), sizes))  # by row count, then position
        cuts = np.flatnonzero(np.diff(sizes[order])) + 1
        self.blocks: list[npt.NDArray[np.int64]] = []
        for run in np.split(order, cuts):
            step = block_capacity(int(sizes[run[0]]), tile_size)
            self.blocks += [run[lo : lo + step] for lo in range(0, len(run), step)]

    @property
    def n_rows(self) -> int:
        """Number of tile rows (one per block)."""
        return len(self.blocks)

    def tiles(self, r: int) -> list[tuple[int, int]]:
        """Return the tiles of tile row ``r``."""
        first = r if len(self.blocks[r]) > 1 else r + 1  # a lone identity pairs with no one
        return [(r, s) for s in range(first, len(self.blocks))]

    def pair_codes(
        self, r: int, s: int
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.int64]]:
        """Pair indices and identity positions ``(a < b)`` of tile ``(r, s)``, in its order."""
        first, second = self.blocks[r], self.blocks[s]
        if r == s:
            ii, jj = np.triu_indices(len(first), 1)
        else:
            ii = np.repeat(np.arange(len(first)), len(second))
            jj = np.tile(np.arange(len(second)), len(first))
        x, y = first[ii], second[jj]
        a, b = np.minimum(x, y), np.maximum(x, y)
        n = self.n_identities
        index = a * (2 * n - a - 1) // 2 + (b - a - 1)  # lexicographic, as all_pairs
        return index, a, b

    def row_pairs(self, r: int) -> int:
        """Return the number of pairs in tile row ``r``."""
        k = len(self.blocks[r])
        rest = sum(len(b) for b in self.blocks[r + 1 :])
        return k * (k - 1) // 2 + k * rest


_SCRATCH = threading.local()


def scratch(name: str, shape: tuple[int, ...], device: torch.device) -> torch.Tensor:
    """Return a float64 buffer of ``shape`` that this thread reuses from group to group.

    Its contents are undefined; it stays valid until this thread asks for ``name`` again.
    Reusing it spares the page faults of a fresh allocation of several MiB per group.
    """
    buffers: dict[tuple[str, str], torch.Tensor] = _SCRATCH.__dict__.setdefault("buffers", {})
    size = math.prod(shape)
    key = (name, str(device))
    buf = buffers.get(key)
    if buf is None or buf.numel() < size:
        buf = buffers[key] = torch.empty(size, dtype=torch.float64, device=device)
    return buf[:size].view(shape)


def block_capacity(n: int, tile_size: int) -> int:
    """Return how many identities of ``n`` rows a block holds.

    ``tile_size``, or fewer where one identity against a whole block would take more than
    the group memory (the pooled distances of ``2n`` rows, and one kernel copy).
    """
    m = n * (2 * n - 1)  # distinct pairs of 2n pooled rows
    return max(1, min(tile_size, _GROUP_BYTES // (16 * m)))


@dataclass
class Block:
    """The rows of one block's identities, all with ``n`` rows: a (identities, n, d) array."""

    rows: npt.NDArray[np.float64]

    @property
    def n(self) -> int:
        return int(self.rows.shape[1])


class Side:
    """One block on a device, with what its pairs share: norms, within distances, means."""

    def __init__(self, block: Block, device: torch.device) -> None:
        self.block = block
        self.x = torch.from_numpy(block.rows).to(device)  # (k, n, d)
        self.device = device
        self.cache: dict[str, tuple[npt.NDArray[Any], ...]] = {}

    @cached_property
    def sq_norms(self) -> torch.Tensor:
        norms: torch.Tensor = torch.linalg.vecdot(self.x, self.x)  # (k, n)
        return norms

    @cached_property
    def within(self) -> torch.Tensor:
        """Squared distances of each identity's distinct row pairs, (k, n (n - 1) / 2)."""
        gram = self.x @ self.x.transpose(1, 2)  # (k, n, n)
        sq = self.sq_norms
        d2 = (sq[:, :, None] + sq[:, None, :] - 2.0 * gram).clamp_min_(0.0)
        iu = torch.triu_indices(self.block.n, self.block.n, 1, device=self.device)
        return d2[:, iu[0], iu[1]]


class Tile:
    """A group of identity pairs of one tile, all of sizes ``(n_a, n_b)``.

    Pair ``p`` joins identity ``ia[p]`` of side A (rows ``n_a`` each) and ``jb[p]`` of
    side B. What several auditors need is computed once and kept in ``cache``.
    """

    def __init__(self, side_a: Side, side_b: Side, ia: torch.Tensor, jb: torch.Tensor) -> None:
        self.a, self.b = side_a, side_b
        self.ia, self.jb = ia, jb
        self.n_a, self.n_b = side_a.block.n, side_b.block.n
        self.n_pairs = int(ia.shape[0])
        self.device = side_a.device
        self.cache: dict[str, Any] = {}

    @property
    def n_cross(self) -> int:
        return self.n_a * self.n_b

    @property
    def n_within_a(self) -> int:
        return self.n_a * (self.n_a - 1) // 2

    def pooled_sq_distances(self) -> torch.Tensor:
        r"""Squared distances of every pair's pooled sample, (pairs, m), m = N(N-1)/2.

        Columns: the :math:`n_a n_b` cross distances, then A's and B's distinct within pairs
        (:math:`\lVert u\rVert^2 + \lVert v\rVert^2 - 2u^\top v`, clamped at 0, as
        :func:`idaudit.ops.sq_distances_from_gram`).
        """
        if "pooled" in self.cache:
            cached: torch.Tensor = self.cache["pooled"]
            return cached
        a, b = self.a, self.b
        rows_a = torch.unique(self.ia)  # the side-A identities of this group, sorted
        g, k = len(rows_a), b.x.shape[0]
        xa = a.x[rows_a].reshape(-1, a.x.shape[-1])  # (g n_a, d)
        xb = b.x.reshape(-1, b.x.shape[-1])  # (k n_b, d)
        cross = scratch("cross", (g * self.n_a, k * self.n_b), self.device)
        torch.mm(xa, xb.T, out=cross)  # the only product per pair
        cross.mul_(-2.0).add_(a.sq_norms[rows_a].reshape(-1, 1)).add_(b.sq_norms.reshape(1, -1))
        cross.clamp_min_(0.0)
        per_pair = cross.view(g, self.n_a, k, self.n_b).permute(0, 2, 1, 3)  # (g, k, n_a, n_b)
        m_a, m_b = self.n_within_a, self.n_b * (self.n_b - 1) // 2
        c = self.n_cross
        pooled = scratch("pooled", (self.n_pairs, c + m_a + m_b), self.device)
        if self.n_pairs == g * k:  # every (A, B) combination, in order: strided copies
            pooled[:, :c].view(g, k, self.n_a, self.n_b).copy_(per_pair)
            pooled[:, c : c + m_a].view(g, k, m_a).copy_(a.within[rows_a][:, None, :])
            pooled[:, c + m_a :].view(g, k, m_b).copy_(b.within[None, :, :])
        else:  # above the diagonal of a block with itself
            local = torch.searchsorted(rows_a, self.ia) * k + self.jb  # pair -> (g k) position
            pooled[:, :c] = per_pair.reshape(g * k, c)[local]
            pooled[:, c : c + m_a] = a.within[self.ia]
            pooled[:, c + m_a :] = b.within[self.jb]
        self.cache["pooled"] = pooled
        return pooled

    def median_distance(self) -> torch.Tensor:
        """Median Euclidean distance over each pooled sample's distinct pairs, (pairs,).

        Exactly as :func:`numpy.median` (mean of the two middle values for an even count),
        selected on the squared distances.
        """
        if "median" in self.cache:
            cached: torch.Tensor = self.cache["median"]
            return cached
        d2 = self.pooled_sq_distances()
        m = d2.shape[1]
        lo, hi = (m - 1) // 2, m // 2
        if d2.device.type == "cpu":
            part = scratch("partition", tuple(d2.shape), d2.device).numpy()
            np.copyto(part, d2.numpy())
            part.partition(lo, axis=1)  # in place, in this thread's buffer
            low = part[:, lo]
            high = part[:, lo + 1 :].min(axis=1) if hi > lo else low
            mid = torch.from_numpy(np.stack([low, high], 1))
        else:
            low_t = torch.kthvalue(d2, lo + 1, dim=1).values
            high_t = torch.kthvalue(d2, hi + 1, dim=1).values if hi > lo else low_t
            mid = torch.stack([low_t, high_t], 1)
        median = (mid[:, 0].sqrt() + mid[:, 1].sqrt()) / 2.0
        self.cache["median"] = median.to(self.device)
        return self.cache["median"]  # type: ignore[no-any-return]


def _groups(
    k_a: int, k_b: int, diagonal: bool, m: int
) -> list[tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]]:
    """Pairs of a tile in groups of whole side-A identities, each group under the memory cap."""
    per_row = max(1, _GROUP_BYTES // (8 * 2 * m * max(k_b, 1)))  # side-A identities per group
    out = []
    for lo in range(0, k_a, per_row):
        rows = np.arange(lo, min(k_a, lo + per_row))
        ii = np.repeat(rows, k_b)
        jj = np.tile(np.arange(k_b), len(rows))
        if diagonal:
            keep = jj > ii
            ii, jj = ii[keep], jj[keep]
        if ii.size:
            out.append((ii, jj))
    return out


def tile_groups(
    block_a: Block, block_b: Block, diagonal: bool, device: torch.device
) -> Iterator[Tile]:
    """Yield the pairs of one tile, in :meth:`TilePlan.pair_codes` order, in groups (memory cap).

    Each group holds whole side-A identities; the two sides (their norms, within distances
    and cached per-identity values) are shared by every group.
    """
    side_a = Side(block_a, device)
    side_b = side_a if diagonal else Side(block_b, device)
    n = block_a.n + block_b.n
    for ii, jj in _groups(len(block_a.rows), len(block_b.rows), diagonal, n * (n - 1) // 2):
        yield Tile(side_a, side_b, torch.from_numpy(ii).to(device), torch.from_numpy(jj).to(device))


def rbf_sums(tile: Tile, sigma: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Return the RBF kernel's sums over each pooled sample: A-A (i != i'), B-B and A-B.

    The kernel is :func:`idaudit.ops.rbf_kernel`'s, evaluated on the pooled distances of
    :meth:`Tile.pooled_sq_distances` (each distinct pair once, so within sums are doubled).
    """
    scale = -0.5 / (sigma * sigma) / math.log(2.0)  # (pairs,), base-2 exponent
    pooled = tile.pooled_sq_distances()
    kernel = scratch("kernel", tuple(pooled.shape), tile.device)
    torch.mul(pooled, scale[:, None], out=kernel).exp2_()  # (pairs, m)
    c, m_a = tile.n_cross, tile.n_within_a
    return (
        2.0 * kernel[:, c : c + m_a].sum(1),
        2.0 * kernel[:, c + m_a :].sum(1),
        kernel[:, :c].sum(1),
    )
