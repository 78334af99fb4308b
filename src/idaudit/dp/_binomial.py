"""One-sided exact (Clopper–Pearson) confidence bounds for a binomial proportion."""

from __future__ import annotations

from typing import Any, overload

import numpy as np
import numpy.typing as npt
from scipy import stats

from idaudit.dp._arrays import (
    FloatArray,
    as_float_array,
    check_integer_valued,
    check_range,
    finish,
    is_scalar,
)
from idaudit.exceptions import InvalidInputError

__all__ = ["clopper_pearson_lower", "clopper_pearson_upper"]


@overload
def clopper_pearson_upper(k: int, n: int, alpha: float = ...) -> float: ...
@overload
def clopper_pearson_upper(
    k: npt.ArrayLike, n: npt.ArrayLike, alpha: npt.ArrayLike = ...
) -> Any: ...
def clopper_pearson_upper(k: npt.ArrayLike, n: npt.ArrayLike, alpha: npt.ArrayLike = 0.05) -> Any:
    r"""One-sided exact upper confidence bound on a binomial proportion.

    Parameters
    ----------
    k : int or array_like of int
        Number of successes (e.g. test errors), ``0 <= k <= n``.
    n : int or array_like of int
        Number of trials, ``n >= 1``.
    alpha : float or array_like, default 0.05
        Error level in (0, 1): the bound holds with probability at least ``1 - alpha``.
        All three inputs broadcast.

    Returns
    -------
    float or numpy.ndarray of float64
        :math:`U` with :math:`\Pr[p \le U] \ge 1 - \alpha`; a ``float`` when every input is a
        scalar.

    Raises
    ------
    InvalidInputError
        If ``k`` or ``n`` is not integer-valued, ``n < 1``, ``k`` is outside [0, n], or
        ``alpha`` is outside (0, 1).

    Notes
    -----
    The Clopper–Pearson bound inverts the binomial tail exactly:

    .. math:: U = \begin{cases} 1 & k = n \\
              \mathrm{Beta}^{-1}(1-\alpha;\ k+1,\ n-k) & k < n \end{cases}

    evaluated with the Beta survival-function inverse (``scipy.stats.beta.isf``) so small
    ``alpha`` keeps full precision. At ``k = 0`` it reduces to :math:`1 - \alpha^{1/n}`. It is
    the one-sided upper limit of the two-sided interval at level ``2 * alpha``.

    In seed 000, Section 4.3 the upper bounds on the two test error rates, each at
    :math:`\alpha = 0.05/(8\cdot5\cdot2)`, are substituted into Eq. 16
    (:func:`epsilon_from_error_rates`) to certify ε lower bounds.

    References
    ----------
    .. [1] C. J. Clopper and E. S. Pearson, "The use of confidence or fiducial limits
       illustrated in the case of the binomial", Biometrika 26(4), 1934.

    Examples
    --------
    >>> from idaudit.dp import clopper_pearson_upper
    >>> round(clopper_pearson_upper(0, 10, 0.05), 6)
    0.258866
    >>> clopper_pearson_upper(10, 10, 0.05)
    1.0
    """
    scalar = is_scalar(k, n, alpha)
    kk, nn, a = _check(k, n, alpha)
    b = np.where(kk < nn, nn - kk, 1.0)  # placeholder shape parameter where k == n
    with np.errstate(invalid="ignore"):
        upper = stats.beta.isf(a, kk + 1.0, b)
    out = np.where(kk >= nn, 1.0, upper)
    return finish(out, scalar)


@overload
def clopper_pearson_lower(k: int, n: int, alpha: float = ...) -> float: ...
@overload
def clopper_pearson_lower(
    k: npt.ArrayLike, n: npt.ArrayLike, alpha: npt.ArrayLike = ...
) -> Any: ...
def clopper_pearson_lower(k: npt.ArrayLike, n: npt.ArrayLike, alpha: npt.ArrayLike = 0.05) -> Any:
    r"""One-sided exact lower confidence bound on a binomial proportion.

    Parameters
    ----------
    k : int or array_like of int
        Number of successes, ``0 <= k <= n``.
    n : int or array_like of int
        Number of trials, ``n >= 1``.
    alpha : float or array_like, default 0.05
        Error level in (0, 1): the bound holds with probability at least ``1 - alpha``.
        All three inputs broadcast.

    Returns
    -------
    float or numpy.ndarray of float64
        :math:`L` with :math:`\Pr[p \ge L] \ge 1 - \alpha`; a ``float`` when every input is a
        scalar.

    Raises
    ------
    InvalidInputError
        If ``k`` or ``n`` is not integer-valued, ``n < 1``, ``k`` is outside [0, n], or
        ``alpha`` is outside (0, 1).

    Notes
    -----
    .. math:: L = \begin{cases} 0 & k = 0 \\
              \mathrm{Beta}^{-1}(\alpha;\ k,\ n-k+1) & k > 0 \end{cases}

    At ``k = n`` it reduces to :math:`\alpha^{1/n}`. By symmetry,
    ``clopper_pearson_lower(k, n, a) == 1 - clopper_pearson_upper(n - k, n, a)``.

    References
    ----------
    .. [1] C. J. Clopper and E. S. Pearson, "The use of confidence or fiducial limits
       illustrated in the case of the binomial", Biometrika 26(4), 1934.

    Examples
    --------
    >>> from idaudit.dp import clopper_pearson_lower
    >>> round(clopper_pearson_lower(10, 10, 0.05), 6)
    0.741134
    >>> clopper_pearson_lower(0, 10, 0.05)
    0.0
    """
    scalar = is_scalar(k, n, alpha)
    kk, nn, a = _check(k, n, alpha)
    kpos = np.where(kk > 0, kk, 1.0)  # placeholder shape parameter where k == 0
    with np.errstate(invalid="ignore"):
        lower = stats.beta.ppf(a, kpos, nn - kk + 1.0)
    out = np.where(kk <= 0, 0.0, lower)
    return finish(out, scalar)


def _check(
    k: npt.ArrayLike, n: npt.ArrayLike, alpha: npt.ArrayLike, *, integer_k: bool = True
) -> tuple[FloatArray, FloatArray, FloatArray]:
    """Check and broadcast counts ``k`` of ``n`` trials and levels ``alpha`` (fresh float64 arrays).

    ``integer_k=False`` admits fractional ``k`` (a sum of rates in [0, 1]), still in [0, n].
    """
    kk = as_float_array(k, "k")
    nn = as_float_array(n, "n")
    a = as_float_array(alpha, "alpha")
    check_integer_valued(nn, "n")
    if integer_k:
        check_integer_valued(kk, "k")
    elif np.isnan(kk).any():
        raise InvalidInputError("`k` must be a number in [0, n]; got nan.")
    if (nn < 1).any():
        raise InvalidInputError(f"`n` must be a positive integer; got {int(nn[nn < 1].flat[0])}.")
    check_range(a, "alpha", 0.0, 1.0, closed="neither")
    kk, nn, a = np.broadcast_arrays(kk, nn, a)
    bad = (kk < 0) | (kk > nn)
    if bad.any():
        i = np.flatnonzero(bad.ravel())[0]
        raise InvalidInputError(
            f"`k` must be in [0, n]; got k = {int(kk.flat[i])} with n = {int(nn.flat[i])}."
        )
    return kk.astype(np.float64), nn.astype(np.float64), a.astype(np.float64)
