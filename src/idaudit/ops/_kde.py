"""One-dimensional Gaussian KDEs on uniform grids, many at once (KDE-LR, seed 000 Eq. 10-11)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch

from idaudit._validation import is_integer

__all__ = [
    "BANDWIDTH_RULES",
    "kde_bandwidth",
    "kde_on_grid",
    "log_ratio_max",
]

BANDWIDTH_RULES = ("silverman", "silverman-robust")

# Grid points per block of the blocked evaluation (see kde_on_grid, Notes).
_BLOCK = 8
# Working memory of one chunk of rows of the torch routes (their factors, or the direct
# route's (rows, n_grid, n) terms), whatever n and n_grid: the rows per chunk follow from it.
_CHUNK_BYTES = {"cpu": 2**24, "cuda": 2**29}
_LOG2E = 1.0 / math.log(2.0)
# Largest base-2 exponent any factor of the factored evaluation may reach: factors stay in
# [2^-960, 2^960], normal float64 numbers, and only terms below 2^-1022 of the peak are lost.
_EXP2_MAX = 960.0
# Whether CPU evaluations run the compiled kernels of idaudit.ops._kde_cpu (the torch routes
# run everywhere else, and on the CPU where numba cannot be loaded; tests switch this off to
# check the torch routes on the CPU).
_COMPILED = True


def _compiled(name: str) -> Any:
    """Return the compiled CPU kernel ``name`` of :mod:`idaudit.ops._kde_cpu`, or None.

    Imported on first use, so that ``import idaudit`` does not load numba. Where numba cannot
    be imported (a broken install) the CPU falls back to the torch routes — the same numbers,
    slower — with one :class:`~idaudit.exceptions.IdauditWarning`.
    """
    global _COMPILED
    try:
        from idaudit.ops import _kde_cpu
    except ImportError as exc:  # pragma: no cover - numba is a dependency
        import warnings

        from idaudit.exceptions import IdauditWarning

        warnings.warn(
            f"numba could not be loaded ({exc}); the KDE sums run on torch kernels instead, "
            "several times slower. Reinstall it with `pip install numba`.",
            IdauditWarning,
            stacklevel=3,
        )
        _COMPILED = False
        return None
    return getattr(_kde_cpu, name)


def _chunk_rows(per_row_bytes: int, device: torch.device) -> int:
    """Rows per chunk so that a chunk's working memory stays near ``_CHUNK_BYTES``."""
    budget = _CHUNK_BYTES["cuda" if device.type == "cuda" else "cpu"]
    return max(1, budget // max(1, per_row_bytes))


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
        Bandwidths; exactly 0 where a row's real samples are all equal.

    Examples
    --------
    >>> import torch
    >>> from idaudit.ops import kde_bandwidth
    >>> x = torch.tensor([[0.0, 1.0, 2.0, 3.0]], dtype=torch.float64)
    >>> round(float(kde_bandwidth(x, torch.ones_like(x), "silverman")[0]), 6)
    1.036335
    """
    if rule not in BANDWIDTH_RULES:
        raise ValueError(f"`rule` must be one of {BANDWIDTH_RULES}; got {rule!r}.")
    real = mask > 0  # (rows, n_max)
    n = mask.sum(-1)  # (rows,)
    mean = torch.where(real, values, 0.0).sum(-1) / n  # (rows,)
    resid = torch.where(real, values - mean[:, None], 0.0)  # (rows, n_max)
    # scaled by the largest residual, so that squares neither underflow (spreads ~1e-170)
    # nor overflow (values ~1e160)
    scale = resid.abs().amax(-1)  # (rows,)
    unit = resid / torch.where(scale > 0, scale, 1.0)[:, None]
    std = scale * ((unit * unit).sum(-1) / (n - 1)).sqrt()  # (rows,), ddof = 1
    # a constant row has bandwidth exactly 0 (its rounded mean leaves residuals ~1e-17)
    constant = torch.where(real, values, -math.inf).amax(-1) == torch.where(
        real, values, math.inf
    ).amin(-1)
    std = std.masked_fill(constant, 0.0)
    if rule == "silverman":
        # scipy's Silverman factor (n (d + 2) / 4)^(-1 / (d + 4)) at d = 1
        return std * (0.75 * n) ** -0.2
    # "silverman-robust"
    padded = values.masked_fill(~real, float("nan"))  # (rows, n_max)
    q = torch.nanquantile(
        padded, torch.tensor([0.25, 0.75], dtype=torch.float64, device=values.device), dim=-1
    )  # (2, rows)
    iqr = (q[1] - q[0]) / 1.34  # (rows,)
    spread = torch.where(iqr > 0, torch.minimum(std, iqr), std)  # (rows,)
    return 0.9 * spread * n**-0.2


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
    and cached on disk where a cache can be written, else once per process) runs it row by
    row without the GIL: the factors, sequences and product of a row (~300 · n bytes of
    scratch) stay in the core's caches and the threads of :func:`idaudit.audit_pairs` run
    side by side. Elsewhere (CUDA) torch kernels build the
    sequences by doubling over all rows at once and ``torch.bmm`` forms the products.

    *Blocked*. Within blocks of 8 points with centres :math:`c_b` and offsets :math:`j`,
    :math:`e^{-s(c_b + j - t_i)^2} = e^{-s(t_i - c_b)^2}\, e^{2 s t_i j}\,
    e^{-2 s c_b j - s j^2}`: one exponential per sample and block (grid step up to ~0.45
    bandwidths at 201 points).

    *Direct*. One exponential per grid point and sample, for coarser grids.

    Every route agrees with ``scipy.stats.gaussian_kde`` to ~3e-14 relative on KDE-LR's grids
    (exponents up to a few hundred). Some regimes cost digits: far tails, where the exponents
    approach 900 and carry their own rounding (~1e-12 on the factored route; the blocked
    route keeps terms only down to e^-595 of the peak, so densities that far below it, far
    under any floor KDE-LR uses, are approximate), and bandwidths hundreds of times below
    the grid step with values far from zero in bandwidth units (~1e-11, for scipy too; the
    difference of grid point and sample is itself rounded). The normalisation is applied
    last, so none of this depends on the data's scale.

    The torch routes run in chunks of rows of about 16 MiB of working memory on the CPU and
    512 MiB on CUDA (at least one row each), whatever the number of samples and grid points;
    the inputs, the output and a few copies of the samples come on top.

    Raises
    ------
    TypeError
        If an argument is not a float64 tensor (``values`` not 2-D).
    ValueError
        If a shape or device does not match ``values``, ``values`` has no column, a
        bandwidth or step is not finite and positive, a step exceeds ~1e154 bandwidths (the
        kernel's scale in grid units overflows), a mask row has no real sample, or
        ``n_grid < 1``.

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
    rows, _ = _check_grid_inputs(values, mask, bandwidth, lo, step, n_grid, out)
    n_grid = int(n_grid)
    dev = values.device
    if out is None:
        out = torch.empty(rows, n_grid, dtype=torch.float64, device=dev)
    layout = _Layout(n_grid)
    factored_kde = _compiled("factored_kde") if dev.type == "cpu" and _COMPILED else None
    if factored_kde is None:
        return _torch_routes(values, mask, bandwidth, lo, step, layout, out)
    # on the CPU one compiled pass per row; the rare rows whose factors would leave float64's
    # range (coarse grids, far outliers) go to the blocked or direct route
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


def _check_grid_inputs(
    values: Any,
    mask: Any,
    bandwidth: Any,
    lo: Any,
    step: Any,
    n_grid: Any,
    out: Any,
) -> tuple[int, int]:
    """Check :func:`kde_on_grid`'s arguments; return ``(rows, n_max)``.

    The compiled kernel reads raw memory, so a wrong shape or dtype would give silent garbage
    there: every argument is checked, with one message naming it.
    """
    if not isinstance(values, torch.Tensor) or values.dim() != 2:
        raise TypeError(
            f"`values` must be a 2-D torch.Tensor (rows, n_max); got {type(values).__name__}"
            + (f" of shape {tuple(values.shape)}" if isinstance(values, torch.Tensor) else "")
            + "."
        )
    rows, width = values.shape
    dev = values.device
    if not is_integer(n_grid) or n_grid < 1:
        raise ValueError(f"`n_grid` must be an integer >= 1; got {n_grid!r}.")
    if width == 0:
        raise ValueError("`values` must hold at least one sample per row; got 0 columns.")
    shapes: dict[str, tuple[int, ...]] = {
        "values": (rows, width),
        "bandwidth": (rows,),
        "lo": (rows,),
        "step": (rows,),
    }
    given = {"values": values, "bandwidth": bandwidth, "lo": lo, "step": step}
    if mask is not None:
        shapes["mask"], given["mask"] = (rows, width), mask
    if out is not None:
        shapes["out"], given["out"] = (rows, int(n_grid)), out
    for name, x in given.items():
        if not isinstance(x, torch.Tensor):
            raise TypeError(f"`{name}` must be a torch.Tensor; got {type(x).__name__}.")
        if x.dtype != torch.float64:
            raise TypeError(f"`{name}` must be float64; got {x.dtype}.")
        if tuple(x.shape) != shapes[name] or x.device != dev:
            raise ValueError(
                f"`{name}` must have shape {shapes[name]} on {dev} (values has {rows} rows of "
                f"{width}); got {tuple(x.shape)} on {x.device}."
            )
    if out is not None and not out.is_contiguous():
        raise ValueError("`out` must be contiguous.")
    for name, x in (("bandwidth", bandwidth), ("step", step)):
        if not bool(((x > 0) & torch.isfinite(x)).all()):
            raise ValueError(f"`{name}` must be finite and > 0 in every row.")
    if not bool(torch.isfinite((step / bandwidth) ** 2).all()):
        raise ValueError(
            "`step` / `bandwidth` must stay below ~1e154 (the kernel's scale in grid units "
            "overflows beyond); the grid is too coarse for these bandwidths."
        )
    if mask is not None and not bool((mask.amax(-1) > 0).all()):
        raise ValueError("`mask` must mark at least one real sample in every row.")
    return rows, width


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
        # padding sits at the grid's centre (whatever it holds) and is masked out of the sums
        t = torch.where(mask > 0, t, 0.0)
        n = mask.sum(-1)  # (rows,)
    s = 0.5 * (step / bandwidth) ** 2  # (rows,)
    weight = 1.0 / (n * bandwidth * math.sqrt(2.0 * math.pi))  # (rows,)
    reach = t.abs().amax(-1)  # (rows,) farthest sample from the grid's centre
    factored = layout.exponent(s, reach) <= _EXP2_MAX
    # blocked factors stay below e^150 and lose only terms below e^-595 of the peak
    blocked = ~factored & (s * (_BLOCK - 1) * (reach + centre + _BLOCK) <= 150.0)
    direct = ~(factored | blocked)
    m_rows = 2 * layout.powers + 1
    per_row = {  # bytes of working memory per row of each route
        "factored": 8 * ((layout.block + m_rows + 4) * width + 2 * n_grid),
        "blocked": 8 * ((-(-n_grid // _BLOCK) + 2 * _BLOCK) * width + 3 * n_grid),
        "direct": 8 * (2 * n_grid * width + n_grid),
    }
    for name, route in (("factored", factored), ("blocked", blocked), ("direct", direct)):
        index = None if bool(route.all()) else route.nonzero()[:, 0]
        total = rows if index is None else index.numel()
        if total == 0:
            continue
        per = _chunk_rows(per_row[name], dev)
        for first in range(0, total, per):
            part = slice(first, first + per) if index is None else index[first : first + per]
            args = (t[part], None if mask is None else mask[part], s[part], weight[part])
            if name == "factored":
                # written in place where the rows are contiguous in ``out``
                dst = out[part] if index is None else None
                dens = _factored(*args, layout, dst)
                if dst is None:
                    out[part] = dens
            else:
                fn = _blocked if name == "blocked" else _direct
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
    # v0 = 2^{-s t^2 - 2 s t half}, the in-block sequence's first entry; padding gives 0
    v0 = torch.exp2((t + 2.0 * half).mul_(st).neg_())
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
    # the normalisation comes last, so that the factors' range does not depend on h's scale
    return torch.mul(flat, tail, out=out).mul_(weight[:, None])


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
    e = torch.sub(t[:, None, :], c[None, :, None])  # (rows, nb, n): t_i - c_b
    torch.mul(e, e, out=e)
    e.mul_(-s2[:, None, None]).exp2_()  # e^{-s (t_i - c_b)^2}
    if mask is not None:
        e.mul_(mask[:, None, :])  # padded samples contribute nothing
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
        :math:`\tilde p = \max\{(1-\alpha)\hat p + \alpha u, \tau\}`; NaN where a density
        is NaN, ``inf`` where one is infinite.

    Raises
    ------
    TypeError
        If an argument is not a float64 tensor.
    ValueError
        If ``alpha`` is outside [0, 1], ``floor`` is not positive, or the shapes or devices
        do not match.
    """
    if not 0.0 <= alpha <= 1.0:
        raise ValueError(f"`alpha` must be in [0, 1]; got {alpha!r}.")
    if not floor > 0.0:
        raise ValueError(f"`floor` must be > 0; got {floor!r}.")
    for name, x in (("dens_a", dens_a), ("dens_b", dens_b), ("uniform", uniform)):
        if not isinstance(x, torch.Tensor) or x.dtype != torch.float64:
            raise TypeError(f"`{name}` must be a float64 torch.Tensor; got {x!r:.60}.")
        if x.device != dens_a.device:
            raise ValueError(f"`{name}` is on {x.device}, `dens_a` on {dens_a.device}.")
    if (
        dens_a.dim() != 2
        or dens_a.shape[1] == 0
        or dens_b.shape != dens_a.shape
        or uniform.shape != dens_a.shape[:1]
    ):
        raise ValueError(
            "`dens_a` and `dens_b` must have the same shape (rows, n_grid), n_grid >= 1, and "
            f"`uniform` (rows,); got {tuple(dens_a.shape)}, {tuple(dens_b.shape)} and "
            f"{tuple(uniform.shape)}."
        )
    one_pass = _compiled("log_ratio_max") if dens_a.device.type == "cpu" and _COMPILED else None
    if one_pass is not None:  # one pass over both rows, without the GIL
        out = torch.empty(dens_a.shape[0], dtype=torch.float64)
        arrays = (x.contiguous().numpy() for x in (dens_a, dens_b, uniform))
        one_pass(*arrays, float(alpha), float(floor), out.numpy())
        return out
    u = alpha * uniform[:, None]  # (rows, 1)
    pa = torch.add(u, dens_a, alpha=1.0 - alpha).clamp_min_(floor)  # (rows, G)
    pb = torch.add(u, dens_b, alpha=1.0 - alpha).clamp_min_(floor)
    # the log is monotone: max |log pa - log pb| = log of the most extreme ratio, so two
    # logarithms per row instead of two per grid point
    ratio = pa / pb  # (rows, G)
    hi, lo = ratio.amax(-1), ratio.amin(-1)
    out = torch.maximum(hi.log(), -lo.log())
    # a ratio beyond float64's range (floors below ~1e-290): per-point logarithms there
    wide = (hi == math.inf) | (lo == 0.0)
    if bool(wide.any()):
        rows = wide.nonzero()[:, 0]
        out[rows] = (pa[rows].log() - pb[rows].log()).abs().amax(-1)
    return out
