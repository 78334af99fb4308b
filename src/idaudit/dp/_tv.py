"""Total variation and pure/approximate DP (seed 000, Section 2.2, Eq. 4-5)."""

from __future__ import annotations

from typing import Any, overload

import numpy as np
import numpy.typing as npt
from scipy import special

from idaudit.dp._arrays import FloatArray, checked_arrays, finish, is_scalar

__all__ = ["epsilon_from_tv", "tv_bound"]


@overload
def tv_bound(epsilon: float, delta: float = ...) -> float: ...
@overload
def tv_bound(epsilon: npt.ArrayLike, delta: npt.ArrayLike = ...) -> Any: ...
def tv_bound(epsilon: npt.ArrayLike, delta: npt.ArrayLike = 0.0) -> Any:
    r"""Largest total variation distance an (ε, δ)-DP mechanism allows between adjacent inputs.

    Parameters
    ----------
    epsilon : float or array_like
        Privacy parameter ε in [0, inf].
    delta : float or array_like, default 0.0
        Privacy parameter δ in [0, 1]. Broadcast against ``epsilon``.

    Returns
    -------
    float or numpy.ndarray of float64
        :math:`\min\{1, (e^\varepsilon - 1 + 2\delta)/(e^\varepsilon + 1)\}`; a ``float`` when
        both inputs are scalars.

    Raises
    ------
    InvalidInputError
        If ``epsilon`` is negative or NaN, or ``delta`` lies outside [0, 1].

    Notes
    -----
    Any (ε, δ)-DP mechanism satisfies
    :math:`\beta_I(A) + \beta_{II}(A) \ge 2(1-\delta)/(1+e^\varepsilon)` for every test
    :math:`A`, hence (seed 000, Eq. 4)

    .. math:: d_{TV}(M(D_0), M(D_1)) \le \frac{e^\varepsilon - 1 + 2\delta}{e^\varepsilon + 1}
              = \tanh(\varepsilon/2) + \frac{2\delta}{1 + e^\varepsilon}.

    The second form is the one evaluated, so large ε does not overflow. For δ = 0 the bound is
    :math:`\tanh(\varepsilon/2)`. This is a property of a *claimed* guarantee, not an estimate.

    References
    ----------
    .. [1] P. Kairouz, S. Oh and P. Viswanath, "The composition theorem for differential
       privacy", ICML 2015.
    .. [2] E. Ghazi and I. Issa, "Total variation meets differential privacy", IEEE J. Sel.
       Areas Inf. Theory 5:207–220, 2024.

    Examples
    --------
    >>> from idaudit.dp import tv_bound
    >>> round(tv_bound(1.0), 6)
    0.462117
    >>> round(tv_bound(1.0, delta=1e-5), 6)
    0.462123
    """
    scalar = is_scalar(epsilon, delta)
    eps, dlt = checked_arrays((epsilon, "epsilon", 0.0, np.inf), (delta, "delta", 0.0, 1.0))
    eps, dlt = np.broadcast_arrays(eps, dlt)
    # expit(-ε) = 1 / (1 + e^ε) without overflow (ε may be inf)
    out = np.tanh(eps / 2.0) + 2.0 * dlt * special.expit(-eps)
    return finish(np.minimum(out, 1.0), scalar)


@overload
def epsilon_from_tv(tv: float, delta: float = ...) -> float: ...
@overload
def epsilon_from_tv(tv: npt.ArrayLike, delta: npt.ArrayLike = ...) -> Any: ...
def epsilon_from_tv(tv: npt.ArrayLike, delta: npt.ArrayLike = 0.0) -> Any:
    r"""Smallest ε compatible with a total variation distance (inverse of :func:`tv_bound`).

    Parameters
    ----------
    tv : float or array_like
        Total variation distance (or a lower bound on it) between the output laws of two
        adjacent inputs, in [0, 1].
    delta : float or array_like, default 0.0
        The δ of the (ε, δ)-DP guarantee being tested, in [0, 1]. Broadcast against ``tv``.

    Returns
    -------
    float or numpy.ndarray of float64
        :math:`\max\{0, \ln((1 + tv - 2\delta)/(1 - tv))\}`; ``inf`` where ``tv == 1`` (and
        δ < 1). A ``float`` when both inputs are scalars.

    Raises
    ------
    InvalidInputError
        If ``tv`` or ``delta`` lies outside [0, 1] (or is NaN).

    Notes
    -----
    Inverting Eq. 4 of seed 000 for ε: a mechanism whose adjacent output laws are ``tv`` apart in
    total variation cannot be (ε, δ)-DP for any smaller ε. At δ = 0 this is seed 000, Eq. 5,

    .. math:: \varepsilon \ge \ln\frac{1 + d_{TV}}{1 - d_{TV}} = 2\,\mathrm{artanh}(d_{TV}),

    evaluated as ``log1p(tv) - log1p(-tv)`` for accuracy near 0. When ``tv <= delta`` the
    bound is vacuous and 0 is returned. The formal status of the result is that of the ``tv``
    it is given: a population TV gives a population lower bound, a sample estimate of TV gives a
    sample estimate of that bound.

    References
    ----------
    .. [1] P. Kairouz, S. Oh and P. Viswanath, "The composition theorem for differential
       privacy", ICML 2015.

    Examples
    --------
    >>> from idaudit.dp import epsilon_from_tv
    >>> round(epsilon_from_tv(0.5), 6)
    1.098612
    >>> epsilon_from_tv(1.0)
    inf
    """
    scalar = is_scalar(tv, delta)
    t, dlt = checked_arrays((tv, "tv", 0.0, 1.0), (delta, "delta", 0.0, 1.0))
    return finish(_epsilon_from_tv(t, dlt), scalar)


def _epsilon_from_tv(t: FloatArray, dlt: FloatArray) -> FloatArray:
    """ε from TV for validated arrays; ``t`` may exceed 1 (treated as the boundary)."""
    t, dlt = np.broadcast_arrays(t, dlt)
    num = t - 2.0 * dlt  # numerator is 1 + num
    with np.errstate(divide="ignore", invalid="ignore"):
        eps = np.log1p(num) - np.log1p(-np.minimum(t, 1.0))
    eps = np.where(num <= -1.0, 0.0, eps)  # 1 + tv - 2δ <= 0: no constraint
    eps = np.where((t >= 1.0) & (num > -1.0), np.inf, eps)
    out: FloatArray = np.maximum(eps, 0.0)
    return out
