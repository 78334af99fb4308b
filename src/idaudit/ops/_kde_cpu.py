"""The CPU inner loops of the KDE evaluation, compiled with numba.

:func:`idaudit.ops.kde_on_grid` computes the factors with torch (vectorised exponentials) and
hands them here: per row, the two geometric sequences are built in a few kilobytes of
scratch, multiplied by one small BLAS product and scaled by the grid factor, all without the
GIL, so the threads of :func:`idaudit.audit_pairs` run side by side and no per-chunk tensor
traffic or Python dispatch is paid. Imported on the first CPU evaluation (numba compiles the
kernel once and caches it on disk).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar, cast

import numba
import numpy as np
import numpy.typing as npt

__all__ = ["factored_kde", "log_ratio_max"]

FloatArray = npt.NDArray[np.float64]
F = TypeVar("F", bound=Callable[..., Any])


def _jit(**options: Any) -> Callable[[F], F]:
    """``numba.njit(nogil=True)``, cached on disk where a cache can be written.

    Without a writable cache location (a read-only install and no writable home, as in some
    containers) numba refuses ``cache=True`` outright; the kernels are then compiled in
    memory, once per process.
    """

    def wrap(fn: F) -> F:
        try:
            jitted = numba.njit(nogil=True, cache=True, **options)(fn)
        except RuntimeError:  # "cannot cache function ...: no locator available"
            jitted = numba.njit(nogil=True, cache=False, **options)(fn)
        return cast(F, jitted)

    return wrap


@_jit(inline="always")
def _exp2(x: FloatArray, out: FloatArray, bits: npt.NDArray[np.int64]) -> None:
    r"""``out = 2**x`` for |x| <= 1022, to 1.5 ulp, in loops the compiler vectorises.

    ``2^x = 2^k e^{f \ln 2}`` with ``k`` the nearest integer and ``|f| <= 1/2``: the
    exponential of ``|f \ln 2| <= 0.35`` by its Taylor series to degree 14 (truncation below
    5e-18 relative), ``2^k`` by writing the exponent bits. The rounding of the Horner steps
    leaves at most ~1.3 ulp (libm's ``exp2`` is within 1 ulp but scalar here, and four times
    slower); the kernels' exponents carry more rounding than that themselves.
    """
    for i in range(x.size):
        k = np.floor(x[i] + 0.5)
        y = (x[i] - k) * 0.6931471805599453  # f ln 2, f = x - k exact
        p = 1.1470745597729725e-11  # 1/14!
        p = p * y + 1.6059043836821613e-10  # 1/13!
        p = p * y + 2.08767569878681e-09
        p = p * y + 2.505210838544172e-08
        p = p * y + 2.755731922398589e-07
        p = p * y + 2.7557319223985893e-06
        p = p * y + 2.48015873015873e-05
        p = p * y + 0.0001984126984126984
        p = p * y + 0.001388888888888889
        p = p * y + 0.008333333333333333
        p = p * y + 0.041666666666666664
        p = p * y + 0.16666666666666666
        p = p * y + 0.5
        p = p * y + 1.0
        out[i] = p * y + 1.0
        bits[i] = (np.int64(k) + 1023) << 52  # the float64 2^k
    scale = bits.view(np.float64)
    for i in range(x.size):
        out[i] *= scale[i]


# Kept as one function on purpose (over the 100-line rule): the per-row stages (grid units,
# the three _exp2 passes, the geometric sequences, the binary powering of R, the BLAS product
# and the symmetric write-out) share a dozen scratch arrays allocated once per call, and the
# loops are compiled together so LLVM vectorises them without a call boundary per row. Split
# into njit helpers, every row would pay calls passing those arrays, or rely on numba's
# inlining to get the same code back.
@_jit()
def factored_kde(
    values: FloatArray,
    mask: FloatArray,
    bandwidth: FloatArray,
    lo: FloatArray,
    step: FloatArray,
    block: int,
    powers: int,
    first: int,
    exp2_max: float,
    out: FloatArray,
    done: npt.NDArray[np.bool_],
) -> None:  # pragma: no cover - compiled; its numbers are tested through kde_on_grid
    r"""KDE densities on the grids by the factored route, row by row (see ``kde_on_grid``).

    Parameters
    ----------
    values : numpy.ndarray of float64, shape (rows, n)
        Samples (padded).
    mask : numpy.ndarray of float64, shape (rows, n) or (0, 0)
        1 for real samples, 0 for padding; empty when every sample is real.
    bandwidth, lo, step : numpy.ndarray of float64, shape (rows,)
        Kernel bandwidth, first grid point and grid step of each row.
    block, powers, first : int
        The layout: ``L``, ``P`` (grid point ``kappa = p L + j``, ``p = -P..P``) and grid
        point 0's position in the flattened ``(2P + 1, L)`` sums.
    exp2_max : float
        Largest base-2 exponent a factor may reach.
    out : numpy.ndarray of float64, shape (rows, n_grid)
        Written in place for the rows evaluated.
    done : numpy.ndarray of bool, shape (rows,)
        Set to whether each row was evaluated: a row whose factors would leave
        ``2^{+-exp2_max}`` is left for the other routes.

    Notes
    -----
    Per row: the samples in centred grid units :math:`t_i`, :math:`s = \Delta^2/2h^2`; the
    factors :math:`v_{i0} = 2^{-s t_i (t_i + 2 c_L)}` (:math:`c_L = (L-1)/2`, in base 2),
    :math:`W_i = 2^{2 s t_i}` and the grid factor :math:`2^{-s\kappa^2}` (even in
    :math:`\kappa`: half the grid gives it all) by :func:`_exp2`; :math:`R_i = W_i^L` by binary
    powering; the sequences :math:`v_{ij} = v_{i0} W_i^j` and :math:`q_{pi} = R_i^p` by
    successive products (each adding half an ulp); the sums over samples of every grid point
    as one small BLAS product; then the grid factor and the normalisation
    :math:`1/(n h\sqrt{2\pi})` (last, so that the factors' range does not depend on the
    scale of :math:`h`). An entry carries ~25 ulp of rounding at most (~3e-15 relative), below
    that of the exponents themselves.
    """
    rows, n = values.shape
    n_grid = out.shape[1]
    masked = mask.shape[0] > 0
    m = 2 * powers + 1
    half = (block - 1) / 2.0
    centre = (n_grid - 1) / 2.0
    far = powers * block + half  # the farthest grid point of the layout
    stretch = max(powers * block, block - 1)
    right = n_grid // 2  # grid point right + k reads tail[k] (|kappa| ascending)
    odd = n_grid % 2  # grid point right - 1 - k reads tail[k + odd]
    n_tail = n_grid - right
    log2e = 1.4426950408889634
    norm = 2.5066282746310002  # sqrt(2 pi)
    t = np.empty(n)
    arg = np.empty(max(n, n_tail))
    bits = np.empty(max(n, n_tail), dtype=np.int64)
    v = np.empty((block, n))  # v[j, i] = v0_i W_i^j
    q = np.empty((m, n))  # q[P + p, i] = R_i^p
    w = np.empty(n)
    r = np.empty(n)
    r_inv = np.empty(n)
    tail = np.empty(n_tail)
    sums = np.empty((m, block))
    flat = sums.reshape(m * block)
    kappa2 = np.empty(n_tail)
    for k in range(n_tail):
        kappa = right + k - centre
        kappa2[k] = kappa * kappa
    for row in range(rows):
        lo_r, step_r, h = lo[row], step[row], bandwidth[row]
        count = 0.0
        reach = 0.0
        for i in range(n):
            t[i] = (values[row, i] - lo_r) / step_r - centre
        if masked:
            for i in range(n):  # padding, whatever it holds, sits at the centre with weight 0
                t[i] = t[i] if mask[row, i] != 0.0 else 0.0
                count += mask[row, i]
        else:
            count = n
        for i in range(n):
            reach = max(reach, abs(t[i]))
        ratio = step_r / h
        s2 = 0.5 * ratio * ratio * log2e  # s in base 2
        # the bound of _Layout.exponent (the torch routes' criterion), per row
        bound = max(reach * (reach + 2.0 * half), 2.0 * reach * stretch, far * far)
        done[row] = s2 * bound <= exp2_max
        if not done[row]:
            continue
        for i in range(n):
            arg[i] = -s2 * t[i] * (t[i] + 2.0 * half)
        _exp2(arg[:n], v[0], bits[:n])
        for i in range(n):
            arg[i] = 2.0 * s2 * t[i]
        _exp2(arg[:n], w, bits[:n])
        for k in range(n_tail):
            arg[k] = -s2 * kappa2[k]
        _exp2(arg[:n_tail], tail, bits[:n_tail])
        if masked:
            for i in range(n):
                v[0, i] *= mask[row, i]
        for j in range(1, block):
            for i in range(n):
                v[j, i] = v[j - 1, i] * w[i]
        for i in range(n):
            q[powers, i] = 1.0
        if powers:
            for i in range(n):  # R = W^L by binary powering (w is free afterwards)
                r[i] = 1.0
            e = block
            while e:
                if e & 1:
                    for i in range(n):
                        r[i] *= w[i]
                e >>= 1
                if e:
                    for i in range(n):
                        w[i] *= w[i]
            for i in range(n):
                r_inv[i] = 1.0 / r[i]
            for p in range(1, powers + 1):
                for i in range(n):
                    q[powers + p, i] = q[powers + p - 1, i] * r[i]
                    q[powers - p, i] = q[powers - p + 1, i] * r_inv[i]
        np.dot(q, v.T, sums)  # (2P + 1, L): the sum over samples of every grid point
        # the normalisation comes last, so that the factors' range does not depend on h's scale
        weight = 1.0 / (count * h * norm)
        for k in range(n_tail):
            out[row, right + k] = flat[first + right + k] * tail[k] * weight
        for k in range(right):
            out[row, right - 1 - k] = flat[first + right - 1 - k] * tail[k + odd] * weight


@_jit()
def log_ratio_max(
    dens_a: FloatArray,
    dens_b: FloatArray,
    uniform: FloatArray,
    alpha: float,
    floor: float,
    out: FloatArray,
) -> None:  # pragma: no cover - compiled; tested through idaudit.ops.log_ratio_max
    """Write ``out[row] = max_k |log pa - log pb|`` of the smoothed, floored densities.

    One pass over both density rows; the maximum of the log-ratio is the log of the most
    extreme ratio, so two logarithms per row (per-point logarithms only for a row whose
    extreme ratio leaves float64's range, with floors below ~1e-290). A NaN density makes
    its row NaN, an infinite one ``inf``, as on the torch route.
    """
    rows, n_grid = dens_a.shape
    keep = 1.0 - alpha
    for row in range(rows):
        u = alpha * uniform[row]
        da, db = dens_a[row], dens_b[row]
        hi = 0.0
        lo = np.inf
        nan = False
        for k in range(n_grid):
            ratio = max(keep * da[k] + u, floor) / max(keep * db[k] + u, floor)
            hi = max(hi, ratio)
            lo = min(lo, ratio)
            nan |= np.isnan(da[k]) | np.isnan(db[k])
        if nan:
            out[row] = np.nan
        elif hi < np.inf and lo > 0.0:
            out[row] = max(np.log(hi), -np.log(lo))
        else:
            widest = 0.0
            for k in range(n_grid):
                la = np.log(max(keep * da[k] + u, floor))
                widest = max(widest, abs(la - np.log(max(keep * db[k] + u, floor))))
            out[row] = widest
