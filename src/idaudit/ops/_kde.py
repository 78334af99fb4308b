"""One-dimensional Gaussian KDEs on uniform grids, many at once (KDE-LR, seed 000 Eq. 10-11)."""

from __future__ import annotations

import math

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
# Rows per chunk of the evaluation, to bound memory (~20 KB per row at n = 100).
_ROWS_PER_CHUNK = 1024
_LOG2E = 1.0 / math.log(2.0)


def _S_MAX(centre: float) -> float:
    """Largest s for which the blocked factors stay below e^80 and lose only terms < e^-590."""
    return 150.0 / ((_BLOCK - 1) * (2.0 * centre + 2 * _BLOCK))


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
    mask: torch.Tensor,
    bandwidth: torch.Tensor,
    lo: torch.Tensor,
    step: torch.Tensor,
    n_grid: int,
) -> torch.Tensor:
    r"""Gaussian KDE densities on uniform grids, one KDE and one grid per row.

    Parameters
    ----------
    values : torch.Tensor of float64, shape (rows, n_max)
        Samples (padded).
    mask : torch.Tensor of float64, shape (rows, n_max)
        1 for real samples, 0 for padding.
    bandwidth : torch.Tensor of float64, shape (rows,)
        Kernel bandwidth :math:`h > 0` per row.
    lo, step : torch.Tensor of float64, shape (rows,)
        The grid of row ``r`` is ``lo[r] + k * step[r]``, ``k = 0 .. n_grid - 1``.
    n_grid : int
        Grid points per row.

    Returns
    -------
    torch.Tensor of float64, shape (rows, n_grid)
        :math:`\hat p(g_k) = \frac{1}{n h \sqrt{2\pi}} \sum_i \exp\{-(g_k - x_i)^2 / 2h^2\}`,
        the value ``scipy.stats.gaussian_kde`` returns for the same bandwidth.

    Notes
    -----
    In grid units :math:`t_i = (x_i - g_0)/\Delta` and :math:`s = \Delta^2 / 2h^2` each term
    is :math:`\exp\{-s (k - t_i)^2\}`. Splitting the grid into blocks of 8 points with centres
    :math:`c_b` and offsets :math:`j` gives the exact factorisation

    .. math:: e^{-s(c_b + j - t_i)^2}
              = e^{-s(t_i - c_b)^2}\, e^{2 s t_i j}\, e^{-2 s c_b j - s j^2},

    so a block needs one exponential per sample and a small matrix product for its 8 points
    (about 7 times fewer exponentials than direct evaluation). With coordinates centred on the
    grid the factors stay within float64 range whenever :math:`s` is small (the grid step at
    most ~0.45 bandwidths at 201 points); rows with a coarser grid are evaluated directly.
    Both routes agree with direct evaluation to ~1e-13 relative.

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
    out = torch.empty(rows, n_grid, dtype=torch.float64, device=values.device)
    centre = (n_grid - 1) / 2.0
    t = ((values - lo[:, None]) / step[:, None] - centre) * mask  # (rows, n_max), grid units
    s = 0.5 * (step / bandwidth) ** 2  # (rows,)
    n = mask.sum(-1)  # (rows,)
    weight = mask / (n * bandwidth * math.sqrt(2.0 * math.pi))[:, None]  # (rows, n_max)
    safe = s <= _S_MAX(centre)  # (rows,)
    for lo_r in range(0, rows, _ROWS_PER_CHUNK):
        sl = slice(lo_r, lo_r + _ROWS_PER_CHUNK)
        out[sl] = _blocked(t[sl], weight[sl], s[sl], n_grid, centre)
    unsafe = (~safe).nonzero()[:, 0]
    if unsafe.numel():
        out[unsafe] = _direct(t[unsafe], weight[unsafe], s[unsafe], n_grid, centre)
    return out


def _blocked(
    t: torch.Tensor, weight: torch.Tensor, s: torch.Tensor, n_grid: int, centre: float
) -> torch.Tensor:
    """Blocked evaluation (see :func:`kde_on_grid`); ``t`` in centred grid units."""
    dev, dt = t.device, t.dtype
    rows = t.shape[0]
    n_blocks = -(-n_grid // _BLOCK)
    j = torch.arange(_BLOCK, dtype=dt, device=dev) - (_BLOCK - 1) / 2.0  # (L,)
    c = torch.arange(n_blocks, dtype=dt, device=dev) * _BLOCK + (_BLOCK - 1) / 2.0 - centre
    # rows whose s is too large for this route get s = 0 here (finite, replaced later)
    s2 = torch.where(s <= _S_MAX(centre), s, 0.0) * _LOG2E  # (rows,), exponents in base 2
    # padded samples sit far outside the grid so that their terms vanish (2^-huge == 0)
    far = t.masked_fill(weight == 0, 1e6)  # (rows, n)
    e = torch.sub(far[:, None, :], c[None, :, None])  # (rows, nb, n): t_i - c_b
    torch.mul(e, e, out=e)
    e.mul_(-s2[:, None, None]).exp2_()  # e^{-s (t_i - c_b)^2}
    v = ((2.0 * s2)[:, None, None] * j[None, :, None] * t[:, None, :]).exp2_()  # (rows, L, n)
    m = torch.bmm(e, v.transpose(1, 2))  # (rows, nb, L): sum over samples (the faster layout)
    fac = (-2.0 * s2[:, None, None] * c[None, :, None] * j - s2[:, None, None] * j * j).exp2_()
    out = (m * fac).reshape(rows, n_blocks * _BLOCK)[:, :n_grid]  # (rows, n_grid)
    return out * weight.amax(-1, keepdim=True)  # one weight 1/(n h sqrt(2 pi)) per row


def _direct(
    t: torch.Tensor, weight: torch.Tensor, s: torch.Tensor, n_grid: int, centre: float
) -> torch.Tensor:
    """Direct evaluation, one exponential per (grid point, sample)."""
    k = torch.arange(n_grid, dtype=torch.float64, device=t.device) - centre  # (G,)
    out = torch.empty(t.shape[0], n_grid, dtype=torch.float64, device=t.device)
    per = max(1, _ROWS_PER_CHUNK // 8)
    for lo in range(0, t.shape[0], per):
        sl = slice(lo, lo + per)
        z = k[None, :, None] - t[sl, None, :]  # (rows, G, n)
        z = z.square_().mul_(-s[sl, None, None]).exp_()
        out[sl] = (z * weight[sl, None, :]).sum(-1)
    return out


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
    u = alpha * uniform[:, None]  # (rows, 1)
    pa = torch.add(u, dens_a, alpha=1.0 - alpha).clamp_min_(floor)  # (rows, G)
    pb = torch.add(u, dens_b, alpha=1.0 - alpha).clamp_min_(floor)
    # the log is monotone: max |log pa - log pb| = log of the most extreme ratio, so two
    # logarithms per row instead of two per grid point
    ratio = pa.div_(pb)  # (rows, G)
    return torch.maximum(ratio.amax(-1).log(), -ratio.amin(-1).log())
