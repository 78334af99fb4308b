"""Hypothesis-testing characterisation of DP (seed 000, Eq. 2, 15 and 16)."""

from __future__ import annotations

from typing import Any, overload

import numpy as np
import numpy.typing as npt

from idaudit.dp._arrays import (
    FloatArray,
    as_float_array,
    check_range,
    checked_arrays,
    finish,
    is_scalar,
)
from idaudit.exceptions import InvalidInputError

__all__ = ["epsilon_from_error_rates", "epsilon_from_roc", "exact_corner"]


@overload
def epsilon_from_error_rates(fpr: float, fnr: float, delta: float = ...) -> float: ...
@overload
def epsilon_from_error_rates(
    fpr: npt.ArrayLike, fnr: npt.ArrayLike, delta: npt.ArrayLike = ...
) -> Any: ...
def epsilon_from_error_rates(
    fpr: npt.ArrayLike, fnr: npt.ArrayLike, delta: npt.ArrayLike = 0.0
) -> Any:
    r"""Smallest ε that one test's error rates allow (Kairouz–Oh–Viswanath).

    Parameters
    ----------
    fpr : float or array_like
        False-positive rate (type I error) of a test between two adjacent inputs, in [0, 1].
    fnr : float or array_like
        False-negative rate (type II error, 1 − TPR) of the same test, in [0, 1].
    delta : float or array_like, default 0.0
        The δ of the guarantee being tested, in [0, 1]. All three inputs broadcast.

    Returns
    -------
    float or numpy.ndarray of float64
        The lower bound on ε, at least 0 and possibly ``inf``; a ``float`` when every input is
        a scalar.

    Raises
    ------
    InvalidInputError
        If any input lies outside [0, 1] or is NaN.

    Notes
    -----
    An (ε, δ)-DP mechanism forces every test to satisfy
    :math:`\mathrm{FPR} + e^\varepsilon\,\mathrm{FNR} \ge 1 - \delta` and
    :math:`\mathrm{FNR} + e^\varepsilon\,\mathrm{FPR} \ge 1 - \delta` (seed 000, Eq. 2).
    Solving for ε gives (Eq. 16)

    .. math:: \varepsilon \ge \max\Big\{0,\ \ln\frac{1-\delta-\mathrm{FPR}}{\mathrm{FNR}},\
              \ln\frac{1-\delta-\mathrm{FNR}}{\mathrm{FPR}}\Big\},

    where a term is omitted when its numerator is ≤ 0 (the inequality then holds for every ε),
    and a term with a positive numerator over a zero denominator is ``+inf`` (no finite ε
    suffices). The result is symmetric in ``(fpr, fnr)``.

    Status: with the true error rates of a fixed test it is a population lower bound; with
    one-sided upper confidence bounds on both rates (e.g. :func:`clopper_pearson_upper` on a
    reserved test set) it is a certified lower bound at the union-bound level; with plug-in
    empirical rates it is only a sample estimate.

    References
    ----------
    .. [1] P. Kairouz, S. Oh and P. Viswanath, "The composition theorem for differential
       privacy", ICML 2015.

    Examples
    --------
    >>> from idaudit.dp import epsilon_from_error_rates
    >>> round(epsilon_from_error_rates(0.1, 0.2), 6)
    2.079442
    >>> epsilon_from_error_rates(0.0, 0.5)
    inf
    """
    scalar = is_scalar(fpr, fnr, delta)
    a, b, d = checked_arrays(
        (fpr, "fpr", 0.0, 1.0), (fnr, "fnr", 0.0, 1.0), (delta, "delta", 0.0, 1.0)
    )
    a, b, d = np.broadcast_arrays(a, b, d)
    out = np.maximum(_log_ratio_term(1.0 - d - a, b), _log_ratio_term(1.0 - d - b, a))
    return finish(np.maximum(out, 0.0), scalar)


def epsilon_from_roc(fpr: npt.ArrayLike, tpr: npt.ArrayLike) -> float:
    r"""Pure-DP ε implied by the operating points of a ROC curve (seed 000, Eq. 15).

    Parameters
    ----------
    fpr, tpr : array_like, shape (n_points,)
        False- and true-positive rates of the operating points, e.g. the first two outputs of
        :func:`sklearn.metrics.roc_curve`. Each in [0, 1]; same shape (scalars allowed).

    Returns
    -------
    float
        :math:`\max_i \max\{\ln\max(1, \mathrm{TPR}_i/\mathrm{FPR}_i),\
        \ln\max(1, (1-\mathrm{FPR}_i)/(1-\mathrm{TPR}_i))\}`; ``inf`` when some point has
        ``fpr == 0`` and ``tpr > 0``, or ``tpr == 1`` and ``fpr < 1``. Never negative.

    Raises
    ------
    InvalidInputError
        If the shapes differ, there are no points, or a rate lies outside [0, 1].

    Notes
    -----
    Each operating point is one test, so this is :func:`epsilon_from_error_rates` at δ = 0 with
    FNR = 1 − TPR, maximised over the points. The points (0, 0) and (1, 1) carry no evidence
    and contribute 0. The infinite values at the zero-denominator endpoints are algebraically
    correct for Eq. 15 and are returned as ``inf``, never clipped; they do not by themselves
    mean the two laws are perfectly separated — see :func:`exact_corner` for that stricter
    event.

    Status: evaluated on out-of-fold ROC points chosen after looking at the data, this is a
    sample estimate (a diagnostic), not a confidence certificate.

    References
    ----------
    .. [1] P. Kairouz, S. Oh and P. Viswanath, "The composition theorem for differential
       privacy", ICML 2015.

    Examples
    --------
    >>> from idaudit.dp import epsilon_from_roc
    >>> round(epsilon_from_roc([0.0, 0.1, 0.5, 1.0], [0.0, 0.6, 0.9, 1.0]), 6)
    1.791759
    >>> epsilon_from_roc([0.0, 0.0, 1.0], [0.0, 0.2, 1.0])
    inf
    """
    f, t = _check_roc(fpr, tpr)
    with np.errstate(divide="ignore", invalid="ignore"):
        # ln(TPR/FPR), counted only where TPR > 0; inf where FPR == 0 < TPR
        up = np.where(t > 0.0, np.log(t) - np.log(f), 0.0)
        # ln((1-FPR)/(1-TPR)), counted only where FPR < 1; inf where TPR == 1 > FPR
        down = np.where(f < 1.0, np.log1p(-f) - np.log1p(-t), 0.0)
    return float(max(0.0, float(np.max(up)), float(np.max(down))))


def exact_corner(fpr: npt.ArrayLike, tpr: npt.ArrayLike) -> bool:
    """Whether a ROC curve passes through the exact corner (FPR, TPR) = (0, 1).

    Parameters
    ----------
    fpr, tpr : array_like, shape (n_points,)
        Operating points, as for :func:`epsilon_from_roc`.

    Returns
    -------
    bool
        ``True`` if some point has ``fpr == 0`` and ``tpr == 1`` exactly: one threshold
        separates the two samples without error (seed 000, Section 3.4). This is stricter than
        ``epsilon_from_roc(fpr, tpr) == inf``, which any point with FPR = 0 < TPR triggers.

    Examples
    --------
    >>> from idaudit.dp import exact_corner
    >>> exact_corner([0.0, 0.0, 1.0], [0.0, 1.0, 1.0])
    True
    >>> exact_corner([0.0, 0.0, 1.0], [0.0, 0.9, 1.0])
    False
    """
    f, t = _check_roc(fpr, tpr)
    return bool(np.any((f == 0.0) & (t == 1.0)))


def _log_ratio_term(num: FloatArray, den: FloatArray) -> FloatArray:
    """``ln(num/den)``; ``-inf`` (omitted) where ``num <= 0``; ``inf`` where ``den == 0 < num``."""
    with np.errstate(divide="ignore", invalid="ignore"):
        out: FloatArray = np.where(num > 0.0, np.log(num) - np.log(den), -np.inf)
    return out


def _check_roc(fpr: npt.ArrayLike, tpr: npt.ArrayLike) -> tuple[FloatArray, FloatArray]:
    f = as_float_array(fpr, "fpr")
    t = as_float_array(tpr, "tpr")
    if f.shape != t.shape:
        raise InvalidInputError(
            f"`fpr` and `tpr` must have the same shape; got {f.shape} vs {t.shape}."
        )
    if f.size == 0:
        raise InvalidInputError("`fpr` and `tpr` must hold at least one operating point; got 0.")
    check_range(f, "fpr", 0.0, 1.0)
    check_range(t, "tpr", 0.0, 1.0)
    return f.ravel(), t.ravel()
