"""The non-crossing recursion of :func:`idaudit.dp.noncrossing_probability`, compiled with numba.

The law of the Poissonised counting process is carried forward boundary by boundary (see the
public function's notes). Two things make it fast without giving up a digit of validity:

* Mass far above the boundary is advanced many steps at once. The boundary rises by one
  count per step and the counting process never falls, so a count at or above ``i + m`` after
  boundary ``i`` meets the next ``m`` boundaries whatever it does: that part of the law is
  convolved once with the Poisson law of the whole block's increment (a sum of independent
  Poisson increments is Poisson), exactly. Only the ``m`` counts next to the boundary are
  carried step by step.
* Every step only adds and multiplies non-negative numbers. Mass is only ever dropped, never
  invented: the Poisson kernels are cut where their terms fall below ``1e-30`` and counts whose
  mass falls below ``1e-24`` are dropped at the top. The result is therefore a lower bound on
  the exact probability up to floating-point rounding (relative ``(n + 1) · 1e-14`` at most,
  see :data:`ROUNDING_PER_STEP`), which is what a band's calibration needs.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, TypeVar, cast

import numba
import numpy as np
import numpy.typing as npt

__all__ = ["ROUNDING_PER_STEP", "noncrossing_lower"]

FloatArray = npt.NDArray[np.float64]
F = TypeVar("F", bound=Callable[..., Any])

#: Relative rounding a step can add: a sum of at most ~60 non-negative products (each kernel
#: term an ``exp`` of an argument below ~2000 in magnitude, 2000 · 1.1e-16 relative) stays
#: below 1e-14; over ``n + 1`` steps the computed probability is within ``(n + 1) · 1e-14``
#: relative of the computed-without-rounding one.
ROUNDING_PER_STEP = 1e-14
# counts whose mass is below this are dropped (a loss, never a gain, of probability)
_PRUNE = 1e-24
# kernel terms past the mean and below this are dropped (likewise a loss)
_KERNEL_CUT = 1e-30
# the boundaries a block carries step by step; the rest of the law moves once per block
_BLOCK = 64


def _jit(fn: F) -> F:
    """``numba.njit(nogil=True)``, cached on disk where a cache can be written."""
    try:
        return cast(F, numba.njit(nogil=True, cache=True)(fn))
    except RuntimeError:  # "cannot cache function ...: no locator available"
        return cast(F, numba.njit(nogil=True, cache=False)(fn))


@_jit
def _poisson_kernel(lam: float, log_fact: FloatArray, cap: int) -> FloatArray:  # pragma: no cover
    """Poisson(``lam``) pmf at 0..width, cut past the mean where it falls below 1e-30."""
    width = min(cap, int(lam + 12.0 * math.sqrt(lam) + 30.0))
    out = np.empty(width + 1)
    log_lam = math.log(lam)
    for k in range(width + 1):
        out[k] = math.exp(k * log_lam - lam - log_fact[k])
        if k > lam and out[k] < _KERNEL_CUT:
            return out[: k + 1]
    return out


@_jit
def _convolve_add(
    q: FloatArray, q_len: int, kernel: FloatArray, out: FloatArray, out_len: int
) -> None:  # pragma: no cover
    """``out[t] += Σ_k q[t − k] kernel[k]`` for ``t < out_len`` (the inner loop vectorises)."""
    for k in range(min(kernel.size, out_len)):
        c = kernel[k]
        for t in range(min(q_len, out_len - k)):
            out[t + k] += q[t] * c


@_jit
def _noncrossing_mass(h: FloatArray, log_fact: FloatArray, block: int) -> float:  # pragma: no cover
    """``P[N(h_i) ≥ i ∀ i, N(1) = n]`` for a rate-``n`` Poisson process, from below."""
    n = h.size
    steps = np.empty(n + 1)  # increments of s: h_1 - 0, ..., 1 - h_n
    prev = 0.0
    for i in range(n):
        steps[i] = h[i] - prev
        prev = h[i]
    steps[n] = 1.0 - prev
    q = np.zeros(n + 1)  # q[c - lo] = P(N(s) = c, every boundary so far met)
    q[0] = 1.0
    lo, q_len = 0, 1
    whole = np.zeros(n + 1)  # the next law, aligned at lo
    near = np.zeros(n + 1)  # the counts next to the boundary, aligned at near_lo
    scratch = np.zeros(n + 1)
    i = 0
    while i <= n:
        b = min(block, n + 1 - i)  # steps i .. i + b - 1, boundaries i + 1 .. i + b
        split = max(0, min(q_len, i + b - lo))  # q[split:] meets every boundary of the block
        # the counts next to the boundary, step by step
        near_lo, near_len = lo, split
        near[:near_len] = q[:near_len]
        for s in range(i, i + b):
            lam = n * steps[s]
            if near_len > 0 and lam > 0.0:
                kernel = _poisson_kernel(lam, log_fact, n)
                out_len = min(near_len + kernel.size - 1, n + 1 - near_lo)
                scratch[:out_len] = 0.0
                _convolve_add(near, near_len, kernel, scratch, out_len)
                near[:out_len] = scratch[:out_len]
                near_len = out_len
            if s < n and near_lo < s + 1:  # keep N(h_{s+1}) >= s + 1
                cut = min(near_len, s + 1 - near_lo)
                near[: near_len - cut] = near[cut:near_len].copy()
                near_len -= cut
                near_lo = s + 1
            while near_len > 0 and near[near_len - 1] <= _PRUNE:
                near_len -= 1
        # the rest, one convolution with the block's whole increment
        far_end = 0
        if split < q_len:
            lam = 0.0
            for s in range(i, i + b):
                lam += n * steps[s]
            kernel = _poisson_kernel(lam, log_fact, n) if lam > 0.0 else np.ones(1)
            far_end = split + min(q_len - split + kernel.size - 1, n + 1 - lo - split)
        end = max(far_end, near_lo - lo + near_len)
        whole[:end] = 0.0
        if split < q_len:
            _convolve_add(q[split:q_len], q_len - split, kernel, whole[split:], far_end - split)
        whole[near_lo - lo : near_lo - lo + near_len] += near[:near_len]
        new_lo = max(lo, i + b) if i + b - 1 < n else lo
        q_len = max(0, end - (new_lo - lo))
        q[:q_len] = whole[new_lo - lo : new_lo - lo + q_len]
        lo = new_lo
        while q_len > 0 and q[q_len - 1] <= _PRUNE:
            q_len -= 1
        if q_len == 0:
            return 0.0
        i += b
    return q[n - lo] if lo + q_len > n else 0.0


def noncrossing_lower(h: FloatArray, log_fact: FloatArray) -> float:
    """``P[N(h_i) ≥ i ∀ i, N(1) = n]`` from below; ``log_fact[k] = ln k!`` for k ≤ n + 1."""
    return float(_noncrossing_mass(np.ascontiguousarray(h, dtype=np.float64), log_fact, _BLOCK))
