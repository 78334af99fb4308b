"""One-dimensional Gaussian KDEs on uniform grids, many at once (KDE-LR, seed 000 Eq. 10-11)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch

__all__ = [
    "BANDWIDTH_RULES",
    "kde_bandwidth",
    "kde_on_grid",
    "log_ratio_max",
]

BANDWIDTH_RULES = ("silverman", "silverman-robust")

# Grid points per block of the blocked evaluation (see kde_on_grid, Notes).
_BLOCK = 8
# Rows per chunk of the evaluation, to bound the factors' memory (~5 KB per row at n = 100 on
# the CPU, whose kernel builds the sequences row by row; ~30 KB elsewhere).
_ROWS_PER_CHUNK = {"cpu": 4096, "cuda": 16384}
_LOG2E = 1.0 / math.log(2.0)
# Largest base-2 exponent any factor of the factored evaluation may reach: factors stay in
# [2^-960, 2^960], normal float64 numbers, and only terms below 2^-1022 of the peak are lost.
_EXP2_MAX = 960.0
# Whether CPU evaluations run the compiled kernel of idaudit.ops._kde_cpu (the torch routes
# run everywhere else; tests switch this off to check the torch routes on the CPU).
_COMPILED = True


def _compiled(name: str) -> Any:
    """Return the compiled CPU kernel ``name`` of :mod:`idaudit.ops._kde_cpu`.

    Imported on first use, so that ``import idaudit`` does not load numba; numba compiles each
    kernel once per machine and caches it on disk.
    """
    from idaudit.ops import _kde_cpu

    return getattr(_kde_cpu, name)


def kde_bandwidth(values: torch.Tensor, mask: torch.Tensor, rule: str) -> torch.Tensor:
    r"""Rule-of-thumb Gaussian KDE bandwidths, one per row.

    Parameters
    ----------
    values : torch.Tensor of float64, shape (rows, n_max)
        Samples, one 1-D sample per row (padded).
    mask : torch.Tensor of float64, shape (rows, n_max)
        1 for real samples, 0 for padding; at least 2 per row.
    rule : {"silverman", "silverman-robust"}
        ``"silverman"`` is what ``scipy.stats.gaussian_kde(bw_method="silverman")`` uses in
        one dimension, :math:`h = \hat\sigma\,(3n/4)^{-1/5} \approx 1.06\,\hat\sigma n^{-1/5}`
        with :math:`\hat\sigma` the standard deviation with ``ddof=1``;
        ``"silverman-robust"`` is :math:`0.9\,\min(\hat\sigma, \mathrm{IQR}/1.34)\,n^{-1/5}`
        (IQR by linear interpolation, as :func:`numpy.percentile`; when the IQR is 0 the
        rule falls back to :math:`\hat\sigma`).

    Returns
    -------
    torch.Tensor of float64, shape (rows,)
        Bandwidths; 0 where a row is constant.

    Examples
    --------
    >>> import torch
    >>> from idaudit.ops import kde_bandwidth
    >>> x = torch.tensor([[0.0, 1.0, 2.0, 3.0]], dtype=torch.float64)
    >>> round(float(kde_bandwidth(x, torch.ones_like(x), "silverman")[0]), 6)
    1.036335
    """
    n = mask.sum(-1)  # (rows,)
    mean = (values * mask).sum(-1) / n  # (rows,)
    resid = (values - mean[:, None]) * mask  # (rows, n_max)
    std = ((resid * resid).sum(-1) / (n - 1)).sqrt()  # (rows,), ddof = 1
    if rule == "silverman":
        # scipy's Silverman factor (n (d + 2) / 4)^(-1 / (d + 4)) at d = 1
        return std * (0.75 * n) ** -0.2
    if rule == "silverman-robust":
        padded = values.masked_fill(mask == 0, float("nan"))  # (rows, n_max)
        q = torch.nanquantile(
            padded, torch.tensor([0.25, 0.75], dtype=torch.float64, device=values.device), dim=-1
        )  # (2, rows)
        iqr = (q[1] - q[0]) / 1.34  # (rows,)
        spread = torch.where(iqr > 0, torch.minimum(std, iqr), std)  # (rows,)
        return 0.9 * spread * n**-0.2
    raise ValueError(f"`rule` must be one of {BANDWIDTH_RULES}; got {rule!r}.")


def kde_on_grid(
    values: torch.Tensor,
    mask: torch.Tensor | None,
    bandwidth: torch.Tensor,
    lo: torch.Tensor,
    step: torch.Tensor,
    n_grid: int,
    *,
    out: torch.Tensor | None = None,
) -> torch.Tensor:
    r"""Gaussian KDE densities on uniform grids, one KDE and one grid per row.

    Parameters
    ----------
    values : torch.Tensor of float64, shape (rows, n_max)
        Samples (padded).
    mask : torch.Tensor of float64, shape (rows, n_max), or None
        1 for real samples, 0 for padding; None when every sample is real.
    bandwidth : torch.Tensor of float64, shape (rows,)
        Kernel bandwidth :math:`h > 0` per row.
    lo, step : torch.Tensor of float64, shape (rows,)
        The grid of row ``r`` is ``lo[r] + k * step[r]``, ``k = 0 .. n_grid - 1``.
    n_grid : int
        Grid points per row.
    out : torch.Tensor of float64, shape (rows, n_grid), optional
        Where to write the densities (a contiguous tensor on the same device); a new tensor
        when None.

    Returns
    -------
    torch.Tensor of float64, shape (rows, n_grid)
        :math:`\hat p(g_k) = \frac{1}{n h \sqrt{2\pi}} \sum_i \exp\{-(g_k - x_i)^2 / 2h^2\}`,
        the value ``scipy.stats.gaussian_kde`` returns for the same bandwidth.

    Notes
    -----
    In grid units centred on the grid, :math:`t_i = (x_i - g_0)/\Delta - c` and
    :math:`\kappa_k = k - c` with :math:`c = (n_{grid} - 1)/2`, and with
    :math:`s = \Delta^2 / 2h^2`, each term is :math:`\exp\{-s (\kappa_k - t_i)^2\}`. Three exact
    routes evaluate the sums; each row takes the fastest one whose intermediate factors its
    :math:`s` and sample range keep inside float64's range.

    *Factored* (the usual route). The term factorises as
    :math:`e^{-s t_i^2 + 2 s t_i \kappa_k} \cdot e^{-s \kappa_k^2}`. Writing the grid in blocks
    of :math:`L \approx \sqrt{n_{grid}}` points, :math:`\kappa = pL + j`, splits the first
    factor into :math:`R_i^{\,p} \cdot v_{ij}` with :math:`R_i = e^{2 s t_i L}` and
    :math:`v_{ij} = e^{-s t_i^2 + 2 s t_i j}`. Both are geometric sequences (in :math:`p` and
    in :math:`j`), built with two or three exponentials per sample and one multiplication per
    entry, and the sums over samples of every grid point are one small
    :math:`(2P+1) \times n` by :math:`n \times L` matrix product per row (:math:`G n`
    multiply-adds, against :math:`G n` exponentials for direct evaluation). The route
    applies when every factor stays within :math:`2^{\pm 960}` — in practice when the grid
    step is at most ~0.25 bandwidths at 201 points — and loses only terms below
    :math:`2^{-1022}` of the kernel's peak. On the CPU a compiled kernel (numba; compiled once
    per machine and cached) runs it row by row without the GIL: the factors, sequences and
    product of a row stay in the core's caches and the threads of
    :func:`idaudit.audit_pairs` run side by side. Elsewhere (CUDA) torch kernels build the
    sequences by doubling over all rows at once and ``torch.bmm`` forms the products.

    *Blocked*. Within blocks of 8 points with centres :math:`c_b` and offsets :math:`j`,
    :math:`e^{-s(c_b + j - t_i)^2} = e^{-s(t_i - c_b)^2}\, e^{2 s t_i j}\,
    e^{-2 s c_b j - s j^2}`: one exponential per sample and block (grid step up to ~0.45
    bandwidths at 201 points).

    *Direct*. One exponential per grid point and sample, for coarser grids.

    Every route agrees with ``scipy.stats.gaussian_kde`` to ~3e-14 relative on KDE-LR's grids
    (exponents up to a few hundred) and to ~1e-12 in far tails, where the exponents approach
    900 and their own rounding, which any evaluation carries, dominates.

    Examples
    --------
    >>> import torch
    >>> from idaudit.ops import kde_on_grid
    >>> x = torch.tensor([[0.0]], dtype=torch.float64)
    >>> one = torch.ones(1, dtype=torch.float64)
    >>> dens = kde_on_grid(x, torch.ones_like(x), one, -one, one, 3)
    >>> [round(v, 6) for v in dens[0].tolist()]
    [0.241971, 0.398942, 0.241971]
    """
    rows = values.shape[0]
    dev = values.device
    if values.dtype != torch.float64:
        raise TypeError(f"`values` must be float64; got {values.dtype}.")
    if out is None:
        out = torch.empty(rows, n_grid, dtype=torch.float64, device=dev)
    elif out.shape != (rows, n_grid) or not out.is_contiguous() or out.device != dev:
        raise ValueError(
            f"`out` must be a contiguous ({rows}, {n_grid}) tensor on {dev}; got "
            f"{tuple(out.shape)} on {out.device}."
        )
    layout = _Layout(n_grid)
    if dev.type != "cpu" or not _COMPILED:
        return _torch_routes(values, mask, bandwidth, lo, step, layout, out)
    # on the CPU one compiled pass per row; the rare rows whose factors would leave float64's
    # range (coarse grids, far outliers) go to the blocked or direct route
    factored_kde = _compiled("factored_kde")
    done = np.empty(rows, dtype=np.bool_)
    arrays = [x.contiguous().numpy() for x in (values, bandwidth, lo, step)]
    m = np.empty((0, 0)) if mask is None else mask.contiguous().numpy()
    factored_kde(
        arrays[0],
        m,
        *arrays[1:],
        layout.block,
        layout.powers,
        layout.first,
        _EXP2_MAX,
        out.numpy(),
        done,
    )
    if not done.all():
        rest = torch.from_numpy(~done).nonzero()[:, 0]
        out[rest] = _torch_routes(
            values[rest],
            None if mask is None else mask[rest],
            bandwidth[rest],
            lo[rest],
            step[rest],
            layout,
            None,
        )
    return out


def _torch_routes(
    values: torch.Tensor,
    mask: torch.Tensor | None,
    bandwidth: torch.Tensor,
    lo: torch.Tensor,
    step: torch.Tensor,
    layout: _Layout,
    out: torch.Tensor | None,
) -> torch.Tensor:
    """Evaluate by the three torch routes, each row on the fastest one its factors allow."""
    rows, width = values.shape
    dev = values.device
    n_grid, centre = layout.n_grid, layout.centre
    if out is None:
        out = torch.empty(rows, n_grid, dtype=torch.float64, device=dev)
    t = (values - lo[:, None]).div_(step[:, None]).sub_(centre)  # (rows, n_max), grid units
    if mask is None:
        n = torch.full((rows,), float(width), dtype=torch.float64, device=dev)
    else:
        t.mul_(mask)  # padding sits at the grid's centre and is masked out of the sums
        n = mask.sum(-1)  # (rows,)
    s = 0.5 * (step / bandwidth) ** 2  # (rows,)
    weight = 1.0 / (n * bandwidth * math.sqrt(2.0 * math.pi))  # (rows,)
    reach = t.abs().amax(-1)  # (rows,) farthest sample from the grid's centre
    factored = layout.exponent(s, reach) <= _EXP2_MAX
    # blocked factors stay below e^150 and lose only terms below e^-595 of the peak
    blocked = ~factored & (s * (_BLOCK - 1) * (reach + centre + _BLOCK) <= 150.0)
    direct = ~(factored | blocked)
    per_chunk = _ROWS_PER_CHUNK["cuda" if dev.type == "cuda" else "cpu"]
    for route in (factored, blocked, direct):
        index = None if bool(route.all()) else route.nonzero()[:, 0]
        total = rows if index is None else index.numel()
        if total == 0:
            continue
        per = per_chunk if route is not direct else max(1, per_chunk // 8)
        for first in range(0, total, per):
            part = slice(first, first + per) if index is None else index[first : first + per]
            args = (t[part], None if mask is None else mask[part], s[part], weight[part])
            if route is factored:
                # written in place where the rows are contiguous in ``out``
                dst = out[part] if index is None else None
                dens = _factored(*args, layout, dst)
                if dst is None:
                    out[part] = dens
            else:
                fn = _blocked if route is blocked else _direct
                out[part] = fn(*args, n_grid, centre)
    return out


class _Layout:
    """Block layout of the factored route: ``kappa = p L + j``, ``p = -P..P``.

    ``L`` (``block``) has the parity of ``n_grid`` so that ``j = -(L-1)/2 .. (L-1)/2``
    steps like the grid (half-integers when the grid's centre is); ``first`` is grid point
    0's position in the flattened ``(2P + 1, L)`` block of sums.
    """

    def __init__(self, n_grid: int) -> None:
        block = max(1, round(math.sqrt(n_grid)))
        if block % 2 != n_grid % 2:
            block += 1
        self.n_grid = n_grid
        self.centre = (n_grid - 1) / 2.0
        self.block = block
        self.half = (block - 1) / 2.0
        self.powers = max(0, math.ceil(((n_grid - 1) / 2.0 - self.half) / block))
        self.first = round(self.powers * block + self.half - (n_grid - 1) / 2.0)

    def exponent(self, s: torch.Tensor, reach: torch.Tensor) -> torch.Tensor:
        """Largest |base-2 exponent| of any factor, per row (rows,)."""
        far = self.powers * self.block + self.half  # farthest grid point of the layout
        return (s * _LOG2E) * torch.maximum(
            torch.maximum(
                reach * (reach + 2 * self.half),  # v
                2 * reach * max(self.powers * self.block, self.block - 1),  # R^p, W^m
            ),
            torch.full_like(reach, far * far),  # q v <= 2^{s kappa^2}, the tail
        )


def _powers(buf: torch.Tensor, start: int, count: int, sign: int, ratio: torch.Tensor) -> None:
    """Fill ``buf[start + sign*m] = buf[start] * r^m``, ``m = 1..count``, by doubling.

    ``buf`` is (powers, rows, n); ``ratio`` (rows, n) holds ``r`` on entry and is overwritten
    (squared in place): each entry costs one multiplication, the whole sequence
    ``ceil(log2(count + 1)) - 1`` squarings, and every power used is one the entries reach.
    """
    done = 0  # buf[start .. start + sign*done] are filled; ratio holds r^(done + 1)
    while done < count:
        k = min(done + 1, count - done)
        if sign > 0:
            src = buf[start : start + k]
            dst = buf[start + done + 1 : start + done + 1 + k]
        else:
            src = buf[start - k + 1 : start + 1]
            dst = buf[start - done - k : start - done]
        torch.mul(src, ratio, out=dst)
        done += k
        if done < count:
            ratio.square_()  # done + 1 doubled


def _factored(
    t: torch.Tensor,
    mask: torch.Tensor | None,
    s: torch.Tensor,
    weight: torch.Tensor,
    layout: _Layout,
    out: torch.Tensor | None,
) -> torch.Tensor:
    """Factored evaluation (see :func:`kde_on_grid`); ``t`` in centred grid units."""
    rows, n = t.shape
    dev = t.device
    big, power, half = layout.block, layout.powers, layout.half
    s2 = s * _LOG2E  # (rows,) exponents in base 2
    if out is None:
        out = torch.empty(rows, layout.n_grid, dtype=torch.float64, device=dev)
    st = t * s2[:, None]  # (rows, n): s t
    # v0 = w 2^{-s t^2 - 2 s t half}, the in-block sequence's first entry; padding gives 0
    v0 = torch.exp2((t + 2.0 * half).mul_(st).neg_()).mul_(weight[:, None])
    if mask is not None:
        v0.mul_(mask)
    w = torch.exp2(2.0 * st)  # (rows, n): W = 2^{2 s t}, the in-block ratio
    kappa = torch.arange(layout.n_grid, dtype=torch.float64, device=dev) - layout.centre
    tail = torch.outer(s2, kappa * kappa).neg_().exp2_()  # (rows, G): 2^{-s kappa^2}
    # the factors are built power-major by doubling, v[j] = v0 W^j and q[P + p] = R^p, so
    # each step is one multiplication over every row and sample, and the sums over samples
    # are one batched product
    v = torch.empty(big, rows, n, dtype=torch.float64, device=dev)  # (L, rows, n)
    v[0] = v0
    _powers(v, 0, big - 1, +1, w)
    q = torch.empty(2 * power + 1, rows, n, dtype=torch.float64, device=dev)  # (2P+1, rows, n)
    q[power] = 1.0
    if power:
        r = torch.exp2((2.0 * big) * st)  # R = W^L, the block ratio
        q[power + 1] = r
        torch.reciprocal(r, out=q[power - 1])
        _powers(q, power + 1, power - 1, +1, r)
        _powers(q, power - 1, power - 1, -1, q[power - 1].clone())
    sums = torch.bmm(q.transpose(0, 1), v.permute(1, 2, 0))  # (rows, 2P + 1, L)
    flat = sums.view(rows, -1)[:, layout.first : layout.first + layout.n_grid]
    return torch.mul(flat, tail, out=out)


def _blocked(
    t: torch.Tensor,
    mask: torch.Tensor | None,
    s: torch.Tensor,
    weight: torch.Tensor,
    n_grid: int,
    centre: float,
) -> torch.Tensor:
    """Blocked evaluation (see :func:`kde_on_grid`); ``t`` in centred grid units."""
    dev, dt = t.device, t.dtype
    rows = t.shape[0]
    n_blocks = -(-n_grid // _BLOCK)
    j = torch.arange(_BLOCK, dtype=dt, device=dev) - (_BLOCK - 1) / 2.0  # (L,)
    c = torch.arange(n_blocks, dtype=dt, device=dev) * _BLOCK + (_BLOCK - 1) / 2.0 - centre
    s2 = s * _LOG2E  # (rows,), exponents in base 2
    # padded samples sit far outside the grid so that their terms vanish (2^-huge == 0)
    far = t if mask is None else t.masked_fill(mask == 0, 1e6)  # (rows, n)
    e = torch.sub(far[:, None, :], c[None, :, None])  # (rows, nb, n): t_i - c_b
    torch.mul(e, e, out=e)
    e.mul_(-s2[:, None, None]).exp2_()  # e^{-s (t_i - c_b)^2}
    v = ((2.0 * s2)[:, None, None] * j[None, :, None] * t[:, None, :]).exp2_()  # (rows, L, n)
    m = torch.bmm(e, v.transpose(1, 2))  # (rows, nb, L): sum over samples (the faster layout)
    fac = (-2.0 * s2[:, None, None] * c[None, :, None] * j - s2[:, None, None] * j * j).exp2_()
    dens = (m * fac).reshape(rows, n_blocks * _BLOCK)[:, :n_grid]  # (rows, n_grid)
    return dens * weight[:, None]


def _direct(
    t: torch.Tensor,
    mask: torch.Tensor | None,
    s: torch.Tensor,
    weight: torch.Tensor,
    n_grid: int,
    centre: float,
) -> torch.Tensor:
    """Direct evaluation, one exponential per (grid point, sample)."""
    k = torch.arange(n_grid, dtype=torch.float64, device=t.device) - centre  # (G,)
    z = k[None, :, None] - t[:, None, :]  # (rows, G, n)
    z = z.square_().mul_(-s[:, None, None]).exp_()
    if mask is not None:
        z.mul_(mask[:, None, :])
    return z.sum(-1) * weight[:, None]


def log_ratio_max(
    dens_a: torch.Tensor,
    dens_b: torch.Tensor,
    uniform: torch.Tensor,
    alpha: float,
    floor: float,
) -> torch.Tensor:
    r"""Largest absolute log-ratio of two smoothed, floored densities over a grid (Eq. 10-11).

    Parameters
    ----------
    dens_a, dens_b : torch.Tensor of float64, shape (rows, n_grid)
        KDE densities of the two identities on the same grid.
    uniform : torch.Tensor of float64, shape (rows,)
        Density of the uniform law on the grid's interval, ``1 / (hi - lo)``.
    alpha : float
        Mixture weight of the uniform, in [0, 1].
    floor : float
        Density floor :math:`\tau > 0`.

    Returns
    -------
    torch.Tensor of float64, shape (rows,)
        :math:`\max_k |\log \tilde p_A(g_k) - \log \tilde p_B(g_k)|` with
        :math:`\tilde p = \max\{(1-\alpha)\hat p + \alpha u, \tau\}`.
    """
    if not 0.0 <= alpha <= 1.0:
        raise ValueError(f"`alpha` must be in [0, 1]; got {alpha!r}.")
    if not floor > 0.0:
        raise ValueError(f"`floor` must be > 0; got {floor!r}.")
    if dens_a.device.type == "cpu" and _COMPILED:
        one_pass = _compiled("log_ratio_max")  # one pass over both rows, without the GIL
        out = torch.empty(dens_a.shape[0], dtype=torch.float64)
        arrays = (x.contiguous().numpy() for x in (dens_a, dens_b, uniform))
        one_pass(*arrays, float(alpha), float(floor), out.numpy())
        return out
    u = alpha * uniform[:, None]  # (rows, 1)
    pa = torch.add(u, dens_a, alpha=1.0 - alpha).clamp_min_(floor)  # (rows, G)
    pb = torch.add(u, dens_b, alpha=1.0 - alpha).clamp_min_(floor)
    # the log is monotone: max |log pa - log pb| = log of the most extreme ratio, so two
    # logarithms per row instead of two per grid point
    ratio = pa.div_(pb)  # (rows, G)
    return torch.maximum(ratio.amax(-1).log(), -ratio.amin(-1).log())
