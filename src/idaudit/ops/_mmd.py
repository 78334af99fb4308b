"""Distances, RBF kernels, the unbiased MMD² and its permutation test, for many pairs at once."""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence

import numpy as np
import numpy.typing as npt
import scipy.linalg
import torch

from idaudit.exceptions import InvalidInputError

__all__ = [
    "PERMUTATION_BLOCK",
    "TIE_TOLERANCE",
    "median_heuristic",
    "mmd2_from_kernel",
    "mmd2_permutation_test",
    "pairwise_sq_distances",
    "permutation_splits",
    "rbf_kernel",
    "split_masks",
    "sq_distances_from_gram",
]

#: Permutations drawn per random block; block ``k`` always uses the random stream
#: ``SeedSequence(seed, spawn_key=(k,))``, whatever the chunking, so p-values do not depend on
#: batch sizes, and the first ``B`` permutations are the same for every ``n_permutations >= B``.
PERMUTATION_BLOCK = 1024

#: A permuted statistic counts as at least the observed one when it exceeds
#: ``observed - TIE_TOLERANCE``. Every term of Eq. 7 is an average of kernel values in [0, 1],
#: so float64 rounding is far below this, while exact ties (e.g. the mirrored split when
#: n_a == n_b) are counted as ties whatever the summation order.
TIE_TOLERANCE = 1e-12

# Eigenpairs of each centred kernel kept by the low-rank screen (see mmd2_permutation_test).
_SCREEN_RANK = 8


def pairwise_sq_distances(x: torch.Tensor, y: torch.Tensor | None = None) -> torch.Tensor:
    r"""Squared Euclidean distances between rows, batched over leading dimensions.

    Parameters
    ----------
    x : torch.Tensor, shape (..., n, d)
    y : torch.Tensor, shape (..., m, d), optional
        Defaults to ``x``; the diagonal is then set to exactly 0.

    Returns
    -------
    torch.Tensor, shape (..., n, m)
        :math:`\lVert x_i - y_j \rVert^2`, computed as
        :math:`\lVert x_i\rVert^2 + \lVert y_j\rVert^2 - 2 x_i^\top y_j` (one matrix product)
        and clamped at 0.

    Examples
    --------
    >>> import torch
    >>> from idaudit.ops import pairwise_sq_distances
    >>> pairwise_sq_distances(torch.tensor([[0.0, 0.0], [3.0, 4.0]], dtype=torch.float64))
    tensor([[ 0., 25.],
            [25.,  0.]], dtype=torch.float64)
    """
    if y is None:
        return sq_distances_from_gram(x @ x.transpose(-1, -2))
    xx = torch.linalg.vecdot(x, x)  # (..., n)
    yy = torch.linalg.vecdot(y, y)  # (..., m)
    d2: torch.Tensor = (xx[..., :, None] + yy[..., None, :]) - 2.0 * (x @ y.transpose(-1, -2))
    return d2.clamp_min_(0.0)  # (..., n, m)


def sq_distances_from_gram(gram: torch.Tensor) -> torch.Tensor:
    r"""Squared distances :math:`G_{ii} + G_{jj} - 2G_{ij}` from a Gram matrix (not modified).

    Parameters
    ----------
    gram : torch.Tensor, shape (..., n, n)
        Inner products :math:`G = X X^\top`.

    Returns
    -------
    torch.Tensor, shape (..., n, n)
        Clamped at 0, with an exactly zero diagonal.
    """
    sq = gram.diagonal(dim1=-2, dim2=-1)  # (..., n)
    one = torch.ones_like(sq)
    # -2 G + sq 1' + 1 sq' as one rank-2 update: a single pass over the matrices
    left = torch.stack([sq, one], dim=-1)  # (..., n, 2)
    right = torch.stack([one, sq], dim=-2)  # (..., 2, n)
    if gram.dim() == 3:
        d2 = torch.baddbmm(gram, left, right, beta=-2.0)
    else:
        d2 = left @ right - 2.0 * gram
    d2.clamp_min_(0.0)
    d2.diagonal(dim1=-2, dim2=-1).zero_()
    return d2


def median_heuristic(sq_dists: torch.Tensor, n: Sequence[int]) -> torch.Tensor:
    r"""Median Euclidean distance over the distinct pairs of each pooled sample.

    Parameters
    ----------
    sq_dists : torch.Tensor of float64, shape (pairs, n_max, n_max)
        Squared distances within each pooled sample (:func:`pairwise_sq_distances`); only the
        leading ``n[p]`` rows and columns of pair ``p`` are used.
    n : sequence of int, length pairs
        Pooled sample size of each pair (at least 2).

    Returns
    -------
    torch.Tensor of float64, shape (pairs,)
        The median of :math:`\{\lVert z_i - z_j\rVert : i < j \le n\}`, exactly as
        :func:`numpy.median` computes it (mean of the two middle values for an even count).

    Notes
    -----
    This is the median heuristic used to set the RBF bandwidth of MMD-TV per pair (seed 000,
    Section 3.3): the ``n(n-1)/2`` distinct-pair distances of the pooled sample, duplicates
    included.

    Examples
    --------
    >>> import torch
    >>> from idaudit.ops import median_heuristic, pairwise_sq_distances
    >>> z = torch.tensor([[[0.0], [1.0], [3.0]]], dtype=torch.float64)
    >>> median_heuristic(pairwise_sq_distances(z), [3])
    tensor([2.], dtype=torch.float64)
    """
    n_rows = [int(k) for k in n]
    n_pairs, n_max = sq_dists.shape[0], sq_dists.shape[-1]
    if len(n_rows) != n_pairs:
        raise InvalidInputError(f"`n` must hold one size per pair; got {len(n_rows)}.")
    # the strict upper triangle, row by row (the order of triu_indices): one slice per row
    dev = sq_dists.device
    vals = torch.empty(n_pairs, n_max * (n_max - 1) // 2, dtype=sq_dists.dtype, device=dev)
    start = 0
    for i in range(n_max - 1):
        vals[:, start : start + n_max - 1 - i] = sq_dists[:, i, i + 1 :]
        start += n_max - 1 - i
    # Select on squared distances (the root is monotone). Pair p has m_p valid entries, those
    # with column < n_p; its lower middle one is number lo_p = (m_p - 1) // 2. Setting
    # K - lo_p invalid entries to -inf and the rest to +inf, with K the largest lo_p, puts
    # every pair's lower middle value at position K and its upper one at K or K + 1, so one
    # selection with the same two positions serves the whole batch.
    m = np.array([k * (k - 1) // 2 for k in n_rows], dtype=np.int64)  # (pairs,)
    lo, hi = (m - 1) // 2, m // 2
    top = int(lo.max())
    padded_pairs = [p for p, k in enumerate(n_rows) if k < n_max]  # those with invalid entries
    if padded_pairs:
        ju = torch.cat([torch.arange(i + 1, n_max, device=dev) for i in range(n_max - 1)])
        padded = torch.as_tensor(padded_pairs, device=dev)
        n_t = torch.as_tensor(n_rows, device=dev)[padded, None]  # (padded, 1)
        sub = ju[None, :] >= n_t  # (padded, m_max); column < n implies row < n
        below = torch.as_tensor(top - lo, device=dev)[padded, None]  # (padded, 1)
        rank = sub.cumsum(1)  # 1-based rank among the invalid entries
        fill = torch.where(rank <= below, -math.inf, math.inf).to(vals.dtype)
        vals[padded] = torch.where(sub, fill, vals[padded])
    kth = [top] if top + 1 >= vals.shape[1] else [top, top + 1]
    if dev.type == "cpu":
        part = np.partition(vals.numpy(), kth, axis=1)
        mid = torch.from_numpy(np.ascontiguousarray(part[:, kth]))  # (pairs, 1 or 2)
    else:
        mid = torch.stack([torch.kthvalue(vals, k + 1, dim=1).values for k in kth], dim=1)
    upper = torch.as_tensor(hi > lo, device=mid.device)
    lower_d = mid[:, 0].sqrt()
    upper_d = torch.where(upper, mid[:, -1], mid[:, 0]).sqrt()
    return ((lower_d + upper_d) / 2.0).to(dev)  # numpy.median: mean of the middle two


def rbf_kernel(sq_dists: torch.Tensor, bandwidth: torch.Tensor) -> torch.Tensor:
    r"""Gaussian RBF kernel :math:`k(u, v) = \exp(-\lVert u - v\rVert^2 / 2\sigma^2)`.

    Parameters
    ----------
    sq_dists : torch.Tensor, shape (pairs, n, m)
        Squared distances.
    bandwidth : torch.Tensor, shape (pairs,)
        :math:`\sigma > 0` per pair.

    Returns
    -------
    torch.Tensor, shape (pairs, n, m)
        Kernel values in (0, 1]; ``k(x, x) = 1``, so MMD ≤ 2 d_TV applies (seed 000, Lemma 1).
    """
    scale = -0.5 / (bandwidth * bandwidth) / math.log(2.0)  # (pairs,), base-2 exponent
    return (sq_dists * scale[:, None, None]).exp2_()  # (pairs, n, m)


def mmd2_from_kernel(
    kernel: torch.Tensor, mask_a: torch.Tensor, mask_b: torch.Tensor
) -> torch.Tensor:
    r"""Unbiased MMD² (seed 000, Eq. 7) from pooled kernel matrices and membership masks.

    Parameters
    ----------
    kernel : torch.Tensor of float64, shape (pairs, n_max, n_max)
        Kernel matrix of each pooled (padded) sample.
    mask_a, mask_b : torch.Tensor of float64, shape (pairs, n_max)
        0/1 membership of each row in sample A and B (disjoint; padding in neither).

    Returns
    -------
    torch.Tensor of float64, shape (pairs,)
        .. math:: \widehat{\mathrm{MMD}}^2_u = \frac{1}{n(n-1)}\sum_{i\ne i'} k(x_i, x_{i'})
                  + \frac{1}{m(m-1)}\sum_{j\ne j'} k(y_j, y_{j'})
                  - \frac{2}{nm}\sum_{i,j} k(x_i, y_j).

        May be negative (it is unbiased).

    Examples
    --------
    >>> import torch
    >>> from idaudit.ops import mmd2_from_kernel
    >>> k = torch.eye(4, dtype=torch.float64)[None]
    >>> ma = torch.tensor([[1.0, 1.0, 0.0, 0.0]], dtype=torch.float64)
    >>> mmd2_from_kernel(k, ma, 1.0 - ma)
    tensor([0.], dtype=torch.float64)
    """
    n_a = mask_a.sum(-1)  # (pairs,)
    n_b = mask_b.sum(-1)  # (pairs,)
    diag = kernel.diagonal(dim1=-2, dim2=-1)  # (pairs, n_max)
    sums = kernel @ torch.stack([mask_a, mask_b], dim=-1)  # (pairs, n_max, 2): one pass
    k_a, k_b = sums[..., 0], sums[..., 1]  # row sums over A and over B
    s_aa = (k_a * mask_a).sum(-1) - (diag * mask_a).sum(-1)  # (pairs,)
    s_bb = (k_b * mask_b).sum(-1) - (diag * mask_b).sum(-1)  # (pairs,)
    s_ab = (k_a * mask_b).sum(-1)  # (pairs,)
    return s_aa / (n_a * (n_a - 1)) + s_bb / (n_b * (n_b - 1)) - 2.0 * s_ab / (n_a * n_b)


def permutation_splits(
    seed: int, n_permutations: int, n_max: int
) -> Iterator[tuple[int, npt.NDArray[np.intp]]]:
    """Random orderings of ``n_max`` items, one block of permutations at a time.

    Parameters
    ----------
    seed : int
        Non-negative seed; block ``k`` uses ``SeedSequence(seed, spawn_key=(k,))``.
    n_permutations : int
        Total number of permutations ``B``.
    n_max : int
        Largest pooled sample size to serve.

    Yields
    ------
    n_rows : int
        Permutations in this block (``PERMUTATION_BLOCK``, fewer in the last block).
    order : numpy.ndarray of intp, shape (n_rows, n_max)
        ``order[r]`` lists item indices by increasing iid uniform key. Keys are drawn item by
        item (column-major) for a full block, so the relative order of items ``0 .. n-1`` does
        not depend on ``n_max``, and the first ``B`` permutations do not depend on
        ``n_permutations >= B``. A pair of pooled size ``n`` splits as "the first ``n_a``
        items of ``0 .. n-1`` in this order" (:func:`split_masks`): a uniform draw of an
        ``n_a``-subset, the same for every batch it may sit in.
    """
    for k, start in enumerate(range(0, n_permutations, PERMUTATION_BLOCK)):
        gen = np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(k,)))
        keys = gen.random((n_max, PERMUTATION_BLOCK)).T  # (block, n_max), column-major draw
        n_rows = min(PERMUTATION_BLOCK, n_permutations - start)
        order = np.argsort(keys[:n_rows], axis=1, kind="stable")  # (n_rows, n_max)
        yield n_rows, order


def split_masks(order: npt.NDArray[np.intp], n_a: int, n_b: int) -> npt.NDArray[np.bool_]:
    """Group-A membership of each item under each permutation (see :func:`permutation_splits`).

    Parameters
    ----------
    order : numpy.ndarray of intp, shape (rows, n_max)
        From :func:`permutation_splits`, with ``n_max >= n_a + n_b``.
    n_a, n_b : int
        Group sizes.

    Returns
    -------
    numpy.ndarray of bool, shape (rows, n_a + n_b)
        Exactly ``n_a`` True per row: the first ``n_a`` of items ``0 .. n_a+n_b-1`` in order.
    """
    splitter = _Splitter(torch.from_numpy(np.ascontiguousarray(order)))
    return splitter.members(n_a, n_b).numpy()


class _Splitter:
    """Group-A masks for many pair sizes from one block of orderings (cheap per size)."""

    def __init__(self, order: torch.Tensor) -> None:
        rows, n_max = order.shape
        # int16 halves memory traffic against int32 (pooled sizes stay far below 32767)
        small = torch.int16 if n_max < 2**15 else torch.int32
        self.order = order.to(small)  # (rows, n_max)
        pos = torch.empty_like(order)
        pos.scatter_(1, order, torch.arange(n_max, device=order.device).expand(rows, n_max))
        self.pos = pos.to(small)  # (rows, n_max): position of each item in the ordering
        self._rank: dict[int, torch.Tensor] = {}

    def members(self, n_a: int, n_b: int) -> torch.Tensor:
        """Bool (rows, n_a + n_b): item in group A."""
        n = n_a + n_b
        if n not in self._rank:
            # rank[r, s]: how many of the first s+1 ordered items are < n (non-decreasing)
            self._rank[n] = (self.order < n).cumsum(1, dtype=torch.int32)
        rank = self._rank[n]
        target = torch.full((rank.shape[0], 1), n_a, dtype=rank.dtype, device=rank.device)
        # position of the n_a-th item < n = number of positions ranked below n_a
        last = torch.searchsorted(rank, target).to(self.pos.dtype)  # (rows, 1)
        return self.pos[:, :n] <= last


def _screen_allowed(device: torch.device) -> bool:
    """Float32 screening is exact only with true float32 products (no TF32/bfloat16)."""
    if torch.get_float32_matmul_precision() != "highest":
        return False
    return not (device.type == "cuda" and torch.backends.cuda.matmul.allow_tf32)


class _Group:
    """Kernel data of the pairs that share sizes (and hence permutations)."""

    def __init__(self, kernels: torch.Tensor, n_a: int, n_b: int, screen: bool) -> None:
        m, n, _ = kernels.shape
        self.m, self.n, self.n_a, self.n_b = m, n, n_a, n_b
        self.kernels = kernels  # (m, n, n) float64
        self.row_sums = kernels.sum(-1).T.contiguous()  # (n, m)
        self.diags = kernels.diagonal(dim1=-2, dim2=-1).T.contiguous()  # (n, m)
        self.total = self.row_sums.sum(0)  # (m,)
        self.trace = self.diags.sum(0)  # (m,)
        c_aa = 1.0 / (n_a * (n_a - 1))
        c_bb = 1.0 / (n_b * (n_b - 1))
        c_ab = 1.0 / (n_a * n_b)
        self.c_aa, self.c_bb, self.c_ab = c_aa, c_bb, c_ab
        # T(p) = c_q p'Kp - c_r p'r + c_d p'diag + c_0   (p: 0/1 indicator of group A)
        self.c_q = c_aa + c_bb + 2.0 * c_ab
        self.c_r = 2.0 * (c_bb + c_ab)
        self.c_d = c_bb - c_aa
        self.c_0 = c_bb * (self.total - self.trace)  # (m,)
        obs = torch.zeros(1, n, dtype=kernels.dtype, device=kernels.device)
        obs[0, :n_a] = 1.0
        self.observed = self.exact(obs)[0]  # (m,)
        self.screen = screen
        if screen:
            # double centring: p'Kp = p'K~p + 2 n_a (p'r)/n - n_a^2 mean(K) for sum(p) = n_a,
            # and K~ = HKH has entries ~10x smaller than K, so float32 errors shrink with them
            mean_row = self.row_sums.T / n  # (m, n)
            grand = self.total / (n * n)  # (m,)
            centred = kernels - mean_row[:, :, None] - mean_row[:, None, :] + grand[:, None, None]
            # sum_{i,j in A} |K~_ij| <= sum_{i in A} ||K~_i||_1: the scale of p'K~p's rounding
            abs_rows = centred.abs().sum(-1).T  # (n, m)
            stacked = centred.permute(1, 0, 2).reshape(n, m * n)  # (n, m*n)
            self.w32 = torch.cat([stacked, self.row_sums, self.diags, abs_rows], 1).to(
                torch.float32
            )  # (n, m*n + 3m)
            self.c_lin = 2.0 * self.c_q * n_a / n - self.c_r  # coefficient of p'r after centring
            self.c_0_centred = self.c_0 - self.c_q * n_a * n_a * grand  # (m,)
            # float32 rounding of two sums of n terms (bounded through absolute values) plus
            # storage, with a 2x margin
            self.rel_err = 2.0 * (2 * n + 6) * 2.0**-24
            self.rank = min(_SCREEN_RANK, n - 2)
            # the first screen's bound needs HKH positive semi-definite (true of RBF and
            # other positive definite kernels, not of every symmetric matrix in [0, 1]);
            # a Cholesky factorisation of HKH + tau I checks it, at a tenth of the
            # eigenpairs' cost. Where it fails, only the float32 screen runs.
            self.psd_shift = 1e-8 * (1.0 + float(centred.abs().amax()))
            shifted = centred + self.psd_shift * torch.eye(
                n, dtype=centred.dtype, device=centred.device
            )
            if self.rank >= 1 and not bool((torch.linalg.cholesky_ex(shifted).info != 0).any()):
                self._low_rank(centred)
            else:
                self.rank = 0

    def _low_rank(self, centred: torch.Tensor) -> None:
        r"""Top eigenpairs of each centred kernel, for the first, low-rank screen.

        ``HKH`` is positive semi-definite (checked, to :math:`-\tau`). With its ``r``
        largest eigenpairs :math:`(\lambda_k, v_k)` kept and every other eigenvalue in
        :math:`[-\tau, 2a + \tau]` (:math:`2a + \tau` the largest one not kept),
        :math:`p^\top HKH p = a\lVert p\rVert^2 + \sum_k (\lambda_k - a)(v_k^\top p)^2 + R`
        with :math:`|R| \le (a + \tau)(\lVert p\rVert^2 - \sum_k (v_k^\top p)^2)`.
        """
        m, n, r = self.m, self.n, self.rank
        values, vectors = _top_eigenpairs(centred, r + 1)  # (m, r+1), (m, n, r+1) ascending
        # every eigenvalue left out lies in [-tau, top]: centre a, radius a + tau
        tau = self.psd_shift
        half = (values[:, 0].clamp_min(0.0) - tau) / 2.0  # (m,): a
        self.lr_half = half
        self.lr_radius = half + tau
        self.lr_shift = values[:, 1:] - half[:, None]  # (m, r): lambda_k - a
        cols = torch.cat(
            [vectors[:, :, 1:], self.row_sums.T[:, :, None], self.diags.T[:, :, None]], 2
        )  # (m, n, r + 2)
        self.lr_w = cols.permute(1, 0, 2).reshape(n, m * (r + 2))  # (n, m (r + 2))
        # float64 rounding of the eigendecomposition and the products, generously
        self.lr_slack = 1e-9 * (1.0 + float(values.abs().max()))

    def exact(self, assign: torch.Tensor, pair: int | None = None) -> torch.Tensor:
        """Float64 statistics, (rows, m), for float64 0/1 assignments (rows, n).

        With ``pair``, only that pair of the group: (rows, 1).
        """
        sl = slice(None) if pair is None else slice(pair, pair + 1)
        kernels = self.kernels[sl]  # (m', n, n)
        m, n = kernels.shape[0], self.n
        stacked = kernels.permute(1, 0, 2).reshape(n, m * n)  # (n, m'*n)
        pk = (assign @ stacked).view(-1, m, n)  # (rows, m', n)
        pkp = (pk * assign[:, None, :]).sum(-1)  # (rows, m')
        pr = assign @ self.row_sums[:, sl]  # (rows, m')
        pd = assign @ self.diags[:, sl]  # (rows, m')
        out: torch.Tensor = self.c_q * pkp - self.c_r * pr + self.c_d * pd + self.c_0[sl]
        return out

    def count(self, members: torch.Tensor, threshold: torch.Tensor) -> torch.Tensor:
        """Per pair, how many rows of ``members`` (bool, (rows, n)) have T >= threshold."""
        if not self.screen:
            stats = self.exact(members.to(torch.float64))  # (rows, m)
            return (stats >= threshold).sum(0)
        if self.rank < 1:
            return self._count32(members, threshold, slice(None))
        # first screen: r eigen-directions per pair, float64, a few products per permutation
        m, n_a, r = self.m, self.n_a, self.rank
        pf = members.to(torch.float64)  # (rows, n)
        prod = (pf @ self.lr_w).view(-1, m, r + 2)  # (rows, m, r + 2)
        proj2 = prod[..., :r] ** 2  # (rows, m, r): (v_k' p)^2
        pr, pd = prod[..., r], prod[..., r + 1]  # (rows, m) each
        quad = self.lr_half * n_a + (proj2 * self.lr_shift).sum(-1)  # approximates p'HKHp
        bound = self.lr_radius * (n_a - proj2.sum(-1)).clamp_min(0.0) + self.lr_slack
        approx = self.c_q * quad + self.c_lin * pr + self.c_d * pd + self.c_0_centred
        err = self.c_q * bound + 1e-12
        sure_ge = approx - err >= threshold  # (rows, m)
        unsure = (approx + err >= threshold) & ~sure_ge
        counts = sure_ge.sum(0)
        for j in unsure.any(0).nonzero()[:, 0].tolist():
            rows = unsure[:, j].nonzero()[:, 0]
            counts[j] += self._count32(members[rows], threshold[j : j + 1], slice(j, j + 1))[0]
        return counts

    def _count32(
        self, members: torch.Tensor, threshold: torch.Tensor, pairs: slice
    ) -> torch.Tensor:
        """Float32 screen of the pairs ``pairs`` of the group, float64 where it is unsure."""
        m, n = self.m, self.n
        idx = torch.arange(m, device=members.device)[pairs]  # (m',)
        mm = idx.numel()
        w32 = self.w32  # (n, m' n + 3 m'): the columns of the pairs asked for
        if mm < m:
            cols = [(idx[:, None] * n + torch.arange(n, device=idx.device)).reshape(-1)]
            cols += [m * n + idx, m * n + m + idx, m * n + 2 * m + idx]
            w32 = w32[:, torch.cat(cols)]
        p32 = members.to(torch.float32)  # (rows, n)
        prod = p32 @ w32  # (rows, m' n + 3 m')
        pkp = (prod[:, : mm * n].view(-1, mm, n) * p32[:, None, :]).sum(-1).double()
        tail = prod[:, mm * n :].double()  # (rows, 3 m')
        pr, pd, pa = tail[:, :mm], tail[:, mm : 2 * mm], tail[:, 2 * mm :]  # (rows, m') each
        c_0 = self.c_0_centred[pairs]
        approx = self.c_q * pkp + self.c_lin * pr + self.c_d * pd + c_0
        err = self.rel_err * (
            self.c_q * pa.abs() + abs(self.c_lin) * pr.abs() + abs(self.c_d) * pd.abs()
        )
        err = err + 1e-13  # float64 rounding of the centring itself
        sure_ge = approx - err >= threshold  # (rows, m')
        unsure = (approx + err >= threshold) & ~sure_ge
        counts = sure_ge.sum(0)
        if bool(unsure.any()):
            for j in unsure.any(0).nonzero()[:, 0].tolist():
                rows = unsure[:, j].nonzero()[:, 0]
                pair = int(idx[j])
                stats = self.exact(members[rows].to(torch.float64), pair=pair)[:, 0]
                counts[j] += (stats >= threshold[j]).sum()
        return counts


def _top_eigenpairs(mats: torch.Tensor, k: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Return the ``k`` largest eigenpairs of symmetric matrices (m, n, n), ascending.

    On the CPU only those ``k`` are computed (LAPACK ``syevx``), on a GPU all of them.
    """
    n = mats.shape[-1]
    if mats.device.type != "cpu":
        values, vectors = torch.linalg.eigh(mats)
        return values[:, n - k :], vectors[:, :, n - k :]
    out_v = torch.empty(mats.shape[0], k, dtype=mats.dtype)
    out_x = torch.empty(mats.shape[0], n, k, dtype=mats.dtype)
    for j, mat in enumerate(mats.numpy()):
        w, v = scipy.linalg.eigh(
            mat, subset_by_index=[n - k, n - 1], driver="evx", check_finite=False
        )
        out_v[j], out_x[j] = torch.from_numpy(w), torch.from_numpy(v)
    return out_v, out_x


def mmd2_permutation_test(
    kernel: torch.Tensor,
    n_a: Sequence[int],
    n_b: Sequence[int],
    seed: int,
    n_permutations: int,
    *,
    return_null: bool = False,
    screen: bool | None = None,
    max_bytes: int = 2**27,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
    r"""Permutation test of the unbiased MMD² for many pairs, with Phipson–Smyth p-values.

    Parameters
    ----------
    kernel : torch.Tensor of float64, shape (pairs, n_max, n_max)
        Pooled kernel matrices (A rows first, then B rows, then padding), entries in [0, 1].
    n_a, n_b : sequence of int, length pairs
        Sample sizes of each pair.
    seed : int
        Seed of the permutations (:func:`permutation_splits`). Every pair of the same sizes
        sees the same permutations, and a pair's permutations depend neither on the other
        pairs nor on chunking.
    n_permutations : int
        Number of random permutations ``B``.
    return_null : bool, default False
        Also return every permuted statistic (computed in float64 throughout).
    screen : bool, optional
        Screen the permuted statistics in float32 first (see Notes). Default: on, unless
        float32 matrix products may use reduced precision (``torch`` matmul precision other
        than ``"highest"``, or TF32 on CUDA) or ``return_null`` is set. The p-values are the
        same either way.
    max_bytes : int, default 2**27
        Rough cap on the working memory of one matrix product.

    Returns
    -------
    pvalue : torch.Tensor of float64, shape (pairs,)
        :math:`(1 + b)/(1 + B)` with :math:`b = \#\{T^*_r \ge T_{obs} - 10^{-12}\}`.
    observed : torch.Tensor of float64, shape (pairs,)
        The observed unbiased MMD².
    null : torch.Tensor of float64, shape (pairs, B), or None
        Permuted statistics, when ``return_null``.

    Notes
    -----
    A permutation relabels the pooled sample: ``n_a`` items drawn uniformly without
    replacement become group A. With the 0/1 indicator :math:`p` of group A and the sums of
    Eq. 7, :math:`S_{AA} = p^\top K p - p^\top \mathrm{diag}K`,
    :math:`S_{AB} = p^\top K \mathbf 1 - p^\top K p`,
    :math:`S_{BB} = \mathbf 1^\top K \mathbf 1 - 2 p^\top K \mathbf 1 + p^\top K p -
    (1-p)^\top\mathrm{diag}K`, so the statistic is a quadratic form in :math:`p` and a block
    of permutations costs one matrix product :math:`P K` for all pairs of the same sizes.

    Screening: the products run in float32 on the doubly centred kernel
    :math:`HKH` (for :math:`\sum p = n_a`,
    :math:`p^\top K p = p^\top HKH p + 2n_a p^\top K\mathbf 1/n - n_a^2\bar K`), and every
    statistic carries a rigorous bound on its float32 rounding error (storage plus two sums of
    ``n`` terms, doubled). A permutation whose float32 statistic is within that bound of the
    threshold is recomputed in float64, so the count :math:`b` is exactly the float64 count.
    With separated identities almost nothing is recomputed; under :math:`H_0` a few percent.

    The p-value adds one to numerator and denominator (Phipson & Smyth 2010): never 0, and
    valid for a random sample of permutations. Ties within 1e-12 count as "at least".

    References
    ----------
    .. [1] B. Phipson and G. K. Smyth, "Permutation p-values should never be zero", Stat. Appl.
       Genet. Mol. Biol. 9(1), 2010.
    .. [2] A. Gretton et al., "A kernel two-sample test", JMLR 13, 2012.
    """
    device = kernel.device
    n_pairs = kernel.shape[0]
    if screen is None:
        screen = _screen_allowed(device) and not return_null
    members_of: dict[tuple[int, int], list[int]] = {}
    for p, sizes in enumerate(zip(n_a, n_b, strict=True)):
        members_of.setdefault(sizes, []).append(p)
    n_cap = max(a + b for a, b in members_of)
    # pairs per product so that one product's output stays under max_bytes
    rows_per_super = PERMUTATION_BLOCK * max(
        1, min(8, max_bytes // (8 * PERMUTATION_BLOCK * n_cap))
    )
    groups: list[tuple[_Group, torch.Tensor]] = []
    for (na, nb), members in members_of.items():
        n = na + nb
        per = max(1, max_bytes // (8 * rows_per_super * n))
        for lo in range(0, len(members), per):
            idx = torch.tensor(members[lo : lo + per], device=device)
            groups.append((_Group(kernel[idx, :n, :n], na, nb, screen), idx))
    observed = torch.empty(n_pairs, dtype=torch.float64, device=device)
    for group, idx in groups:
        observed[idx] = group.observed
    exceed = torch.zeros(n_pairs, dtype=torch.int64, device=device)
    null = (
        torch.empty(n_pairs, n_permutations, dtype=torch.float64, device=device)
        if return_null
        else None
    )
    blocks = permutation_splits(seed, n_permutations, n_cap)
    start = 0
    while start < n_permutations:
        orders = []
        n_rows = 0
        for rows, order in blocks:
            orders.append(order)
            n_rows += rows
            if n_rows >= rows_per_super:
                break
        splitter = _Splitter(torch.from_numpy(np.concatenate(orders)).to(device))
        for group, idx in groups:
            assign = splitter.members(group.n_a, group.n_b)  # (rows, n) bool
            threshold = group.observed - TIE_TOLERANCE  # (m,)
            if null is not None:
                stats = group.exact(assign.to(torch.float64))  # (rows, m)
                null[idx, start : start + n_rows] = stats.T
                exceed[idx] += (stats >= threshold).sum(0)
            else:
                exceed[idx] += group.count(assign, threshold)
        start += n_rows
    pvalue = (1.0 + exceed.to(torch.float64)) / (1.0 + n_permutations)
    return pvalue, observed, null
