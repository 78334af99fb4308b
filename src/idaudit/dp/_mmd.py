"""ε lower bound from the maximum mean discrepancy via the hockey-stick divergence."""

from __future__ import annotations

from typing import Any, overload

import numpy as np
import numpy.typing as npt

from idaudit.dp._arrays import checked_arrays, finish, is_scalar
from idaudit.dp._tv import _epsilon_from_tv

__all__ = ["epsilon_from_mmd_hockey_stick"]


@overload
def epsilon_from_mmd_hockey_stick(mmd: float, delta: float = ...) -> float: ...
@overload
def epsilon_from_mmd_hockey_stick(mmd: npt.ArrayLike, delta: npt.ArrayLike = ...) -> Any: ...
def epsilon_from_mmd_hockey_stick(mmd: npt.ArrayLike, delta: npt.ArrayLike = 0.0) -> Any:
    r"""Smallest ε compatible with an MMD between adjacent output laws (González et al.).

    Parameters
    ----------
    mmd : float or array_like
        Maximum mean discrepancy (not squared) between the two output laws, for a kernel with
        values in [0, 1] (e.g. the RBF kernel), so ``0 <= mmd <= sqrt(2)``. Must be >= 0.
    delta : float or array_like, default 0.0
        The δ of the guarantee being tested, in [0, 1]. Broadcast against ``mmd``.

    Returns
    -------
    float or numpy.ndarray of float64
        The lower bound on ε, at least 0; ``inf`` where ``mmd >= sqrt(2)`` (and δ < 1).
        A ``float`` when both inputs are scalars.

    Raises
    ------
    InvalidInputError
        If ``mmd`` is negative or NaN, or ``delta`` is outside [0, 1].

    Notes
    -----
    For a kernel with :math:`0 \le k(x, y) \le 1`, splitting :math:`P_0 - P_1` into its
    positive and negative parts (each of mass :math:`d_{TV}`) gives
    :math:`\mathrm{MMD}^2 \le 2\,d_{TV}^2`. Combined with the (ε, δ)-DP bound on total
    variation (seed 000, Eq. 4):

    .. math:: \mathrm{MMD}(P_0, P_1) \le \sqrt{2}\,\Big(1 - \frac{2(1-\delta)}{1+e^\varepsilon}
              \Big),

    which inverts, with :math:`t = \mathrm{MMD}/\sqrt{2}`, to

    .. math:: \varepsilon \ge \ln\frac{1 + t - 2\delta}{1 - t}
              \overset{\delta=0}{=} 2\,\mathrm{artanh}(\mathrm{MMD}/\sqrt{2})

    (seed 000, Section 3.3, "Comparison to the hockey-stick-based bound"). It is tighter than
    the TV route of Eq. 14, :math:`2\,\mathrm{artanh}(\mathrm{MMD}/2)`, for non-negative
    kernels; the TV route only needs :math:`k(x, x) \le 1`. A kernel bounded in [0, 1] cannot
    produce ``mmd > sqrt(2)``; such values (and ``mmd == sqrt(2)``) are treated as the boundary
    and give ``inf``. When ``t <= delta`` the bound is vacuous and 0 is returned.

    Status: with the population MMD a population lower bound; with a plug-in sample MMD (as the
    audits use) a sample estimate without a one-sided confidence correction.

    References
    ----------
    .. [1] T. González, M. Dulce-Rubio, A. Ramdas and M. Ribero, "Sequentially auditing
       differential privacy", NeurIPS 2025.

    Examples
    --------
    >>> from idaudit.dp import epsilon_from_mmd_hockey_stick
    >>> round(epsilon_from_mmd_hockey_stick(0.5), 6)
    0.738998
    >>> round(epsilon_from_mmd_hockey_stick(0.5, delta=1e-5), 6)
    0.738983
    """
    scalar = is_scalar(mmd, delta)
    m, d = checked_arrays((mmd, "mmd", 0.0, np.inf), (delta, "delta", 0.0, 1.0))
    return finish(_epsilon_from_tv(m / np.sqrt(2.0), d), scalar)
