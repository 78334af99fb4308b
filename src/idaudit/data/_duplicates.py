"""Exact and near copies among an identity's rows: grouped by their bits or within a tolerance."""

from __future__ import annotations

import numbers

import numpy as np
import numpy.typing as npt

from idaudit.exceptions import InvalidInputError

__all__ = ["NEAR_DUPLICATE_RTOL", "check_rtol", "duplicate_groups", "near_groups"]


def duplicate_groups(
    vectors: npt.NDArray[np.float64], codes: npt.NDArray[np.intp]
) -> npt.NDArray[np.intp]:
    """Group id per row: rows share one iff same identity and identical values (0.0 == -0.0).

    ``vectors`` are the rows as stored (normalised when the set normalises), so two rows
    pointing the same way are one group when they normalise to the same vector.

    Rows are keyed by an exact integer hash of their bits (wrapping uint64 arithmetic) and
    their identity; rows whose key repeats are then compared bit for bit, with a full row sort
    as the fallback in the (astronomically unlikely) event of a hash collision.
    """
    bits = np.ascontiguousarray(vectors + 0.0).view(np.uint64)  # (n, d); + 0.0 folds -0.0 into 0.0
    mult = np.random.default_rng(0x1DA0D17).integers(1, 2**63, size=bits.shape[1], dtype=np.uint64)
    key = bits @ (mult | np.uint64(1))  # (n,) odd multipliers, wraps modulo 2**64
    key ^= codes.astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15)
    _, first, group = np.unique(key, return_index=True, return_inverse=True)
    group = group.ravel()
    rep = first[group]  # (n,) first row with the same key
    cand = np.flatnonzero(rep != np.arange(len(rep)))
    if (codes[cand] == codes[rep[cand]]).all() and (bits[cand] == bits[rep[cand]]).all():
        out: npt.NDArray[np.intp] = group.astype(np.intp)
        return out
    keyed = np.ascontiguousarray(np.column_stack([codes.astype(np.uint64), bits]))
    rows = keyed.view(np.dtype((np.void, keyed.dtype.itemsize * keyed.shape[1]))).ravel()
    _, exact = np.unique(rows, return_inverse=True)
    return exact.astype(np.intp).ravel()


#: Relative tolerance under which two different rows of one identity are near copies
#: (:meth:`EmbeddingSet.near_duplicates`): every coordinate within 1e-7 times the identity's
#: spread (root mean square distance of its rows to their mean).
NEAR_DUPLICATE_RTOL = 1e-7


def check_rtol(rtol: float | None) -> float:
    """Check the ``rtol`` of the near-copy methods; None means :data:`NEAR_DUPLICATE_RTOL`."""
    if rtol is None:
        return NEAR_DUPLICATE_RTOL
    value: object = rtol  # the annotation is the promise; the check is for what was passed
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not 0 < rtol <= 1e-3:
        raise InvalidInputError(f"`rtol` must be in (0, 1e-3]; got {rtol!r}.")
    return float(rtol)


def near_groups(
    vectors: npt.NDArray[np.float64],
    codes: npt.NDArray[np.intp],
    group: npt.NDArray[np.intp],
    rtol: float,
    min_dim: int = 2,
) -> npt.NDArray[np.intp]:
    """Exact-duplicate groups merged with near copies (same identity, within ``rtol``).

    The tolerance is relative to the identity's spread (the root mean square distance of
    its rows to their mean), so that data concentrated in a small region are not read as
    copies. Rows are projected on one fixed random direction and sorted by identity, then
    projection: two near copies lie within ``rtol * spread * ||u||_1`` of each other along
    it, so only neighbours that close in the sorted order are compared coordinate by
    coordinate (the offset grows until no pair is that close). Below ``min_dim`` dimensions
    (2; 3 for L2-normalised rows, which lie on a circle in two) distinct draws come that
    close by chance, and the groups are returned unchanged.
    """
    n, d = vectors.shape
    if d < min_dim or n < 2:
        return group
    u = np.random.default_rng(0x1DA0D18).standard_normal(d)
    n_ids = int(codes.max()) + 1
    count = np.bincount(codes, minlength=n_ids)[:, None]  # (ids, 1)
    mean = np.zeros((n_ids, d))
    np.add.at(mean, codes, vectors)
    mean /= np.maximum(count, 1)
    sq = np.bincount(codes, weights=((vectors - mean[codes]) ** 2).sum(axis=1), minlength=n_ids)
    spread = np.sqrt(sq / np.maximum(count[:, 0], 1))  # (ids,)
    scale = spread[codes]  # (n,) the tolerance's unit for each row
    proj = vectors @ u  # (n,)
    order = np.lexsort((proj, codes))
    ps, cs, ss = proj[order], codes[order], scale[order]
    reach = rtol * np.abs(u).sum()
    # union-find over rows, each exact group joined from the start (root: its first row)
    _, first, inverse = np.unique(group, return_index=True, return_inverse=True)
    parent = first[inverse.ravel()].astype(np.intp)

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = int(parent[i])
        return i

    offset = 1
    while offset < n:
        top = np.maximum(ss[offset:], ss[:-offset])
        close = (cs[offset:] == cs[:-offset]) & (ps[offset:] - ps[:-offset] <= reach * top)
        if not close.any():
            break
        for i in np.flatnonzero(close):
            a, b = order[i], order[i + offset]
            if find(int(a)) == find(int(b)):
                continue
            if np.abs(vectors[a] - vectors[b]).max() <= rtol * scale[a]:
                ra, rb = find(int(a)), find(int(b))
                parent[max(ra, rb)] = min(ra, rb)
        offset += 1
    out: npt.NDArray[np.intp] = np.asarray([find(i) for i in range(n)], dtype=np.intp)
    return out
