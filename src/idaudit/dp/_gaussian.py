"""The analytic Gaussian mechanism (Balle & Wang 2018), computed in the log domain."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, overload

import numpy as np
import numpy.typing as npt
from scipy import optimize, special

from idaudit.dp._arrays import (
    FloatArray,
    checked_arrays,
    finish,
    is_scalar,
    log1mexp,
)

__all__ = ["calibrate_gaussian_sigma", "gaussian_delta", "gaussian_epsilon"]

# brentq tolerances: the root is located to ~1e-13 relative, far below any reported digit
_XTOL = 1e-14
_RTOL = 4.0 * np.finfo(float).eps
_MAX_DOUBLINGS = 2000


@overload
def gaussian_delta(epsilon: float, sigma: float, sensitivity: float = ...) -> float: ...
@overload
def gaussian_delta(
    epsilon: npt.ArrayLike, sigma: npt.ArrayLike, sensitivity: npt.ArrayLike = ...
) -> Any: ...
def gaussian_delta(
    epsilon: npt.ArrayLike, sigma: npt.ArrayLike, sensitivity: npt.ArrayLike = 1.0
) -> Any:
    r"""Exact δ(ε) of the Gaussian mechanism (analytic Gaussian mechanism, Balle & Wang 2018).

    Parameters
    ----------
    epsilon : float or array_like
        Privacy parameter ε in [0, inf].
    sigma : float or array_like
        Standard deviation of the added isotropic Gaussian noise, in (0, inf).
    sensitivity : float or array_like, default 1.0
        L2 sensitivity Δ of the released function, in (0, inf). All three inputs broadcast.

    Returns
    -------
    float or numpy.ndarray of float64
        The smallest δ for which adding :math:`N(0, \sigma^2 I)` to a Δ-sensitive function is
        (ε, δ)-DP; a ``float`` when every input is a scalar.

    Raises
    ------
    InvalidInputError
        If ``epsilon`` is negative or NaN, or ``sigma`` or ``sensitivity`` is not a positive
        finite number.

    Notes
    -----
    Balle & Wang (2018, Theorem 8) show the Gaussian mechanism is (ε, δ)-DP iff

    .. math:: \delta \ge \Phi\Big(\frac{\Delta}{2\sigma} - \frac{\varepsilon\sigma}{\Delta}\Big)
              - e^\varepsilon\,\Phi\Big(-\frac{\Delta}{2\sigma}
              - \frac{\varepsilon\sigma}{\Delta}\Big),

    the hockey-stick divergence between :math:`N(0, \sigma^2)` and :math:`N(\Delta, \sigma^2)`.
    With :math:`a, b` the two arguments, it is evaluated as

    .. math:: \log\delta = \log\Phi(a) + \log\big(1 - e^{\varepsilon + \log\Phi(b)
              - \log\Phi(a)}\big)

    using ``scipy.special.log_ndtr`` and an accurate ``log(1 - exp(x))``, so δ keeps about
    1e-9 relative accuracy down to the bottom of the double range (1e-300), where the direct
    formula has lost its second term to underflow. At ε = 0 it equals the
    total variation between the two Gaussians, :math:`2\Phi(\Delta/2\sigma) - 1 =
    \operatorname{erf}(\Delta/(2\sqrt{2}\sigma))`, evaluated in the second form (the
    difference of two Φ values near 1/2 would lose the digits of a small δ); at ε = inf
    it is 0. Only the ratio σ/Δ matters. This is the reference guarantee of the calibrated
    noise benchmark of seed 000, Section 5.2.

    References
    ----------
    .. [1] B. Balle and Y.-X. Wang, "Improving the Gaussian mechanism for differential privacy:
       analytical calibration and optimal denoising", ICML 2018.

    Examples
    --------
    >>> from idaudit.dp import gaussian_delta
    >>> float(f"{gaussian_delta(1.0, 3.0):.6g}")
    0.000207512
    """
    scalar = is_scalar(epsilon, sigma, sensitivity)
    eps, ratio = _check_with_ratio((epsilon, "epsilon", 0.0, np.inf), sigma, sensitivity)
    return finish(np.exp(_log_delta(eps, ratio)), scalar)


@overload
def gaussian_epsilon(delta: float, sigma: float, sensitivity: float = ...) -> float: ...
@overload
def gaussian_epsilon(
    delta: npt.ArrayLike, sigma: npt.ArrayLike, sensitivity: npt.ArrayLike = ...
) -> Any: ...
def gaussian_epsilon(
    delta: npt.ArrayLike, sigma: npt.ArrayLike, sensitivity: npt.ArrayLike = 1.0
) -> Any:
    r"""Smallest ε for which the Gaussian mechanism is (ε, δ)-DP.

    Parameters
    ----------
    delta : float or array_like
        Privacy parameter δ in [0, 1].
    sigma : float or array_like
        Noise standard deviation, in (0, inf).
    sensitivity : float or array_like, default 1.0
        L2 sensitivity Δ, in (0, inf). All three inputs broadcast.

    Returns
    -------
    float or numpy.ndarray of float64
        ε ≥ 0 solving :func:`gaussian_delta` (ε) = δ; ``inf`` at δ = 0 (the Gaussian mechanism
        is never pure DP); 0 when δ is at least the ε = 0 value
        :math:`2\Phi(\Delta/2\sigma) - 1`. A ``float`` when every input is a scalar.

    Raises
    ------
    InvalidInputError
        If ``delta`` is outside [0, 1], or ``sigma`` or ``sensitivity`` is not a positive
        finite number.

    Notes
    -----
    δ(ε) is strictly decreasing in ε, so the root of
    :math:`\log\delta(\varepsilon) - \log\delta` is bracketed by doubling an upper end from 1
    and found with Brent's method (``scipy.optimize.brentq``) in the log domain, so δ as small as
    1e-300 is handled. Elements are solved one at a time.

    References
    ----------
    .. [1] B. Balle and Y.-X. Wang, "Improving the Gaussian mechanism for differential privacy:
       analytical calibration and optimal denoising", ICML 2018.

    Examples
    --------
    >>> from idaudit.dp import gaussian_epsilon
    >>> round(gaussian_epsilon(1e-5, 3.0), 6)
    1.271088
    """
    scalar = is_scalar(delta, sigma, sensitivity)
    dlt, ratio = _check_with_ratio((delta, "delta", 0.0, 1.0), sigma, sensitivity)
    return finish(_each(_epsilon_scalar, dlt, ratio), scalar)


@overload
def calibrate_gaussian_sigma(epsilon: float, delta: float, sensitivity: float = ...) -> float: ...
@overload
def calibrate_gaussian_sigma(
    epsilon: npt.ArrayLike, delta: npt.ArrayLike, sensitivity: npt.ArrayLike = ...
) -> Any: ...
def calibrate_gaussian_sigma(
    epsilon: npt.ArrayLike, delta: npt.ArrayLike, sensitivity: npt.ArrayLike = 1.0
) -> Any:
    r"""Smallest noise scale σ that makes the Gaussian mechanism (ε, δ)-DP (Balle & Wang, Alg. 1).

    Parameters
    ----------
    epsilon : float or array_like
        Target ε in [0, inf).
    delta : float or array_like
        Target δ in (0, 1).
    sensitivity : float or array_like, default 1.0
        L2 sensitivity Δ, in (0, inf). All three inputs broadcast.

    Returns
    -------
    float or numpy.ndarray of float64
        σ with :func:`gaussian_delta` (ε, σ, Δ) = δ; any larger σ is also (ε, δ)-DP. A
        ``float`` when every input is a scalar.

    Raises
    ------
    InvalidInputError
        If ``epsilon`` is negative, infinite or NaN, ``delta`` is outside (0, 1), or
        ``sensitivity`` is not a positive finite number.

    Notes
    -----
    δ(ε; σ) is strictly decreasing in σ and depends on σ/Δ only, so the root in
    :math:`u = \log(\sigma/\Delta)` of :math:`\log\delta(\varepsilon; e^u) - \log\delta` is
    bracketed by stepping outwards from :math:`u = 0` and found with Brent's method; σ is
    :math:`\Delta e^u`. At ε = 0 the answer is the closed form
    :math:`\sigma = \Delta / (2\,\Phi^{-1}((1+\delta)/2)) = \Delta / (2\sqrt{2}\,
    \operatorname{erf}^{-1}(\delta))`, evaluated in the second form, which keeps full
    precision for small δ (the first rounds :math:`(1+\delta)/2`). Unlike the classical calibration
    :math:`\sigma = \Delta\sqrt{2\ln(1.25/\delta)}/\varepsilon` (valid for ε < 1 only), this is
    exact for every ε ≥ 0.

    References
    ----------
    .. [1] B. Balle and Y.-X. Wang, "Improving the Gaussian mechanism for differential privacy:
       analytical calibration and optimal denoising", ICML 2018.

    Examples
    --------
    >>> from idaudit.dp import calibrate_gaussian_sigma
    >>> round(calibrate_gaussian_sigma(1.0, 1e-5), 6)
    3.730632
    """
    scalar = is_scalar(epsilon, delta, sensitivity)
    eps, dlt, sens = checked_arrays(
        (epsilon, "epsilon", 0.0, np.inf, "left"),
        (delta, "delta", 0.0, 1.0, "neither"),
        (sensitivity, "sensitivity", 0.0, np.inf, "neither"),
    )
    eps, dlt, sens = np.broadcast_arrays(eps, dlt, sens)
    return finish(_each(lambda e, d, s: _sigma_ratio_scalar(e, d) * s, eps, dlt, sens), scalar)


def _each(solve: Callable[..., float], *arrays: FloatArray) -> FloatArray:
    """``solve`` on Python floats, once per element of the (broadcast) ``arrays``.

    A plain loop, not ``np.vectorize``: a ufunc would also report the floating-point flags
    that a discarded ``np.where`` branch inside ``solve`` raised under its own ``errstate``.
    """
    out = np.empty(arrays[0].shape, dtype=np.float64)
    for idx in np.ndindex(out.shape):
        out[idx] = solve(*(float(a[idx]) for a in arrays))
    return out


def _check_with_ratio(
    spec: tuple[Any, ...], sigma: npt.ArrayLike, sensitivity: npt.ArrayLike
) -> tuple[FloatArray, FloatArray]:
    """Return the argument of ``spec`` (checked by ``checked_arrays``) and σ/Δ, broadcast."""
    value, sig, sens = checked_arrays(
        spec,
        (sigma, "sigma", 0.0, np.inf, "neither"),
        (sensitivity, "sensitivity", 0.0, np.inf, "neither"),
    )
    value, ratio = np.broadcast_arrays(value, sig / sens)
    return value, ratio


def _log_delta(eps: FloatArray, ratio: FloatArray) -> FloatArray:
    """``log δ(ε)`` for noise-to-sensitivity ratio ``ratio = σ/Δ`` (arrays, validated)."""
    eps, ratio = np.broadcast_arrays(np.asarray(eps, float), np.asarray(ratio, float))
    finite = np.isfinite(eps)
    e = np.where(finite, eps, 0.0)  # ε = inf handled below (δ = 0)
    a = 0.5 / ratio - e * ratio
    b = -0.5 / ratio - e * ratio
    log_phi_a = special.log_ndtr(a)
    # log of e^ε Φ(b) / Φ(a) <= 0; rounding can push it a hair above 0, where δ is 0 to
    # within double precision of Φ(a)
    x = e + special.log_ndtr(b) - log_phi_a
    general = log_phi_a + log1mexp(x)
    # at ε = 0 the difference Φ(a) − Φ(b) cancels when δ is small (both terms near 1/2);
    # its closed form erf(1/(2√2 r)) has no cancellation
    out: FloatArray = np.where(finite, np.where(e == 0.0, _log_tv(ratio), general), -np.inf)
    return out


def _log_tv(ratio: FloatArray) -> FloatArray:
    """``log`` of the total variation erf(1/(2√2 r)) between N(0, r²) and N(1, r²)."""
    z = 0.5 / (math.sqrt(2.0) * ratio)
    with np.errstate(divide="ignore"):  # only the branch np.where discards can hit log(0)
        out: FloatArray = np.where(z < 1.0, np.log(special.erf(z)), np.log1p(-special.erfc(z)))
    return out


def _log_delta_scalar(eps: float, ratio: float) -> float:
    return float(_log_delta(np.asarray(eps), np.asarray(ratio)))


def _epsilon_scalar(delta: float, ratio: float) -> float:
    """ε solving δ(ε; σ/Δ = ratio) = delta for one validated element."""
    if delta == 0.0:
        return math.inf
    target = math.log(delta)
    if _log_delta_scalar(0.0, ratio) <= target:
        return 0.0

    def f(e: float) -> float:
        return _log_delta_scalar(e, ratio) - target

    hi = 1.0
    for _ in range(_MAX_DOUBLINGS):
        if f(hi) < 0.0:
            break
        hi *= 2.0
    root: float = optimize.brentq(f, 0.0, hi, xtol=_XTOL, rtol=_RTOL)
    return float(root)


def _sigma_ratio_scalar(eps: float, delta: float) -> float:
    """σ/Δ solving δ(ε; σ/Δ) = delta for one validated element."""
    if eps == 0.0:
        # total variation between N(0, r²) and N(1, r²) is 2Φ(1/2r) − 1 = erf(1/(2√2 r));
        # inverting erf directly keeps small δ exact, where (1 + δ)/2 would round it away
        return 0.5 / (math.sqrt(2.0) * float(special.erfinv(delta)))
    target = math.log(delta)

    def f(u: float) -> float:
        # decreasing in u = log(σ/Δ)
        return _log_delta_scalar(eps, math.exp(u)) - target

    lo, hi = 0.0, 0.0
    while f(lo) < 0.0:
        lo -= 1.0
    while f(hi) > 0.0:
        hi += 1.0
    if lo == hi:
        return math.exp(lo)
    root: float = optimize.brentq(f, lo, hi, xtol=_XTOL, rtol=_RTOL)
    return math.exp(root)
