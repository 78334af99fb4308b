"""From one query to k: composition of a per-query (ε, δ) guarantee, and what a test certifies."""

from __future__ import annotations

import math
import numbers
import sys
from typing import Any, Literal, NamedTuple

import numpy as np
from scipy import stats

from idaudit.dp._arrays import FloatArray
from idaudit.exceptions import InvalidInputError

__all__ = ["ComposedPrivacy", "compose_epsilon", "compose_error_rates"]

_METHODS = ("basic", "advanced", "pld")


class ComposedPrivacy(NamedTuple):
    """An (ε, δ) statement about k outputs, with how it was obtained.

    Attributes
    ----------
    epsilon : float
        ε of the k-fold release.
    delta : float
        δ of the k-fold release.
    k : int
        Number of outputs released about one identity.
    method : str
        ``"basic"``, ``"advanced"`` or ``"pld"`` (:func:`compose_epsilon`).
    """

    epsilon: float
    delta: float
    k: int
    method: str


def compose_epsilon(
    epsilon: float,
    delta: float,
    k: int,
    *,
    method: Literal["basic", "advanced", "pld"] = "basic",
    delta_prime: float | None = None,
    value_discretization_interval: float = 1e-4,
) -> ComposedPrivacy:
    r"""Compose a per-query (ε, δ) *guarantee* into one for k outputs of one identity.

    **Direction.** The result is an *upper* bound on the privacy loss of k independent
    outputs for a mechanism that is known to be (ε, δ)-DP per query — e.g. the reference
    guarantee of :class:`~idaudit.mechanisms.GaussianNoise`. Applied to a certified *lower*
    bound on a per-query ε it proves nothing: it neither bounds the k-fold ε from below
    (at δ > 0 the k-fold ε can grow far more slowly than k·ε) nor from above. What carries a
    per-query certificate over to k outputs is the tested error rates:
    :func:`compose_error_rates`. See docs/composition.md.

    Parameters
    ----------
    epsilon : float
        Per-query ε, in [0, inf).
    delta : float
        Per-query δ, in [0, 1).
    k : int
        Number of outputs released about one identity, at least 1.
    method : {"basic", "advanced", "pld"}, default "basic"
        ``"basic"``: (kε, kδ) (Dwork et al. 2006; Dwork & Roth 2014, Theorem 3.16).
        ``"advanced"``: the Dwork–Rothblum–Vadhan bound,
        :math:`\varepsilon' = \sqrt{2k\ln(1/\delta')}\,\varepsilon + k\varepsilon(e^\varepsilon
        - 1)` at :math:`\delta_k = k\delta + \delta'` (Dwork & Roth 2014, Theorem 3.20).
        ``"pld"``: the privacy-loss distribution of the worst (ε, δ)-DP pair composed k times
        by Google's ``dp-accounting`` (pessimistic discretisation, so an upper bound on the
        optimal composition of Kairouz, Oh & Viswanath), read off at the same
        :math:`\delta_k = k\delta + \delta'`.
    delta_prime : float, optional
        The slack δ' in (0, 1) of ``"advanced"`` and ``"pld"`` (required there; not used by
        ``"basic"``).
    value_discretization_interval : float, default 1e-4
        Grid step of the privacy-loss values for ``"pld"`` (smaller is tighter and slower).

    Returns
    -------
    ComposedPrivacy
        ``(epsilon, delta, k, method)``: the k-fold release is (epsilon, delta)-DP. When
        :math:`\delta_k \ge 1` the statement is vacuous and ``epsilon`` is 0.

    Raises
    ------
    InvalidInputError
        If an argument is out of range, ``method`` is unknown, or ``delta_prime`` is missing
        for ``"advanced"``/``"pld"``.
    ImportError
        If ``method="pld"`` and ``dp-accounting`` is not installed (the ``accounting`` extra).

    Notes
    -----
    The three routes bound the same quantity: the ε at which k adaptive uses of an
    (ε, δ)-DP mechanism remain DP. Basic composition is exact for pure DP (δ = 0: the
    privacy loss of k outputs is a sum of k losses each at most ε, and the worst case adds
    up); advanced composition trades a little δ for a √k growth; the PLD route evaluates the
    optimal composition numerically and is the smallest of the three (up to its
    discretisation, which errs on the safe side).

    References
    ----------
    .. [1] C. Dwork and A. Roth, "The algorithmic foundations of differential privacy",
       Found. Trends Theor. Comput. Sci. 9(3-4), 2014, Theorems 3.16 and 3.20.
    .. [2] C. Dwork, G. N. Rothblum and S. Vadhan, "Boosting and differential privacy",
       FOCS 2010.
    .. [3] P. Kairouz, S. Oh and P. Viswanath, "The composition theorem for differential
       privacy", ICML 2015.
    .. [4] Google DP team, ``dp-accounting`` (PyPI), privacy-loss-distribution accountant
       (Koskela et al. 2020; Doroshenko et al. 2022).

    Examples
    --------
    >>> from idaudit.dp import compose_epsilon
    >>> basic = compose_epsilon(0.5, 1e-6, 10)
    >>> basic.epsilon, round(basic.delta, 12)
    (5.0, 1e-05)
    >>> round(compose_epsilon(0.1, 0.0, 100, method="advanced", delta_prime=1e-5).epsilon, 3)
    5.85
    >>> round(compose_epsilon(0.1, 0.0, 100, method="pld", delta_prime=1e-5).epsilon, 2)
    4.31
    """
    eps = _check_real(epsilon, "epsilon", 0.0, math.inf, high_open=True)
    dlt = _check_real(delta, "delta", 0.0, 1.0, high_open=True)
    if isinstance(k, bool) or not isinstance(k, numbers.Integral):
        raise TypeError(f"`k` must be an integer; got {type(k).__name__}.")
    if k < 1:
        raise InvalidInputError(f"`k` must be >= 1; got {k!r}.")
    k = int(k)
    if method not in _METHODS:
        raise InvalidInputError(
            f"`method` must be one of {', '.join(map(repr, _METHODS))}; got {method!r}."
        )
    if method == "basic":
        if k * dlt >= 1.0:  # vacuous, as below
            return ComposedPrivacy(0.0, 1.0, k, method)
        return ComposedPrivacy(k * eps, k * dlt, k, method)
    if delta_prime is None:
        raise InvalidInputError(
            f"`delta_prime` must be given for method={method!r} (the slack delta' in (0, 1)); "
            "got None."
        )
    dp_ = _check_real(delta_prime, "delta_prime", 0.0, 1.0, low_open=True, high_open=True)
    delta_k = k * dlt + dp_
    if delta_k >= 1.0:
        return ComposedPrivacy(0.0, 1.0, k, method)
    if method == "advanced":
        eps_k = math.sqrt(2.0 * k * math.log(1.0 / dp_)) * eps + k * eps * math.expm1(eps)
        return ComposedPrivacy(eps_k, delta_k, k, method)
    step = _check_real(
        value_discretization_interval, "value_discretization_interval", 0.0, 1.0, low_open=True
    )
    return ComposedPrivacy(_pld_epsilon(eps, dlt, k, delta_k, step), delta_k, k, method)


def _pld_epsilon(eps: float, dlt: float, k: int, delta_k: float, step: float) -> float:
    try:
        from dp_accounting.pld import common, privacy_loss_distribution
    except ImportError as exc:  # pragma: no cover - exercised only without the extra
        raise ImportError(
            'method="pld" needs dp-accounting; install it with pip install "idaudit[accounting]" '
            "(scripts/install.sh installs it without its pinned dependencies)."
        ) from exc
    if eps == 0.0 and dlt == 0.0:
        return 0.0
    params = common.DifferentialPrivacyParameters(eps, dlt)
    pld = privacy_loss_distribution.from_privacy_parameters(
        params, value_discretization_interval=step
    )
    composed = pld.self_compose(k) if k > 1 else pld
    return max(float(composed.get_epsilon_for_delta(delta_k)), 0.0)


def compose_error_rates(fpr_upper: Any, fnr_upper: Any, k: int, delta: float = 0.0) -> float:
    r"""Certified lower bound on the ε of k outputs from one certified test of one output.

    A per-query certificate bounds the error rates of a fixed test from above
    (:math:`\mathrm{FPR} \le U_F`, :math:`\mathrm{FNR} \le U_N` with stated confidence).
    Applying the same test to each of k independent outputs and predicting identity B when
    at least j of them say B is a test of the k-fold release; its error rates are binomial
    tails, increasing in the per-query rates, so they are bounded by the tails at
    :math:`(U_F, U_N)`. Eq. 2 on those bounds, maximised over j, is a lower bound on the
    k-fold ε(δ) that holds whenever the per-query bounds hold — at the per-query
    certificate's confidence, with no new data.

    Parameters
    ----------
    fpr_upper, fnr_upper : float
        Upper confidence bounds on the per-query test's FPR and FNR (e.g. ``ufpr``, ``ufnr``
        of a :class:`~idaudit.certify.ReservedTestCertifier` certificate), in [0, 1].
    k : int
        Number of outputs, at least 1.
    delta : float, default 0.0
        δ of the k-fold guarantee being refuted, in [0, 1).

    Returns
    -------
    float
        :math:`\max_{j} \varepsilon_{\mathrm{KOV}}\big(\Pr[\mathrm{Bin}(k, U_F) \ge j],\
        \Pr[\mathrm{Bin}(k, U_N) \ge k - j + 1]\big)`, and never less than the one-output
        bound :func:`epsilon_from_error_rates` at :math:`(U_F, U_N)` (dropping k − 1 outputs is
        post-processing), which it equals at k = 1 (up to rounding). ``inf`` only where the
        exact value is infinite (a zero error rate under a positive numerator, e.g.
        :math:`U_F = 0 < U_N < 1`), never because a tail underflowed.

    Raises
    ------
    InvalidInputError
        If a rate is outside [0, 1], ``k < 1`` or ``delta`` is outside [0, 1).

    Notes
    -----
    Status: ``certified_lower_bound`` when the inputs are certified upper bounds on the error
    rates (the union bound that made them simultaneous carries over unchanged). Counting
    votes is one test among many, so the bound is valid but not the k-fold ε itself.

    Everything is computed in log space: each binomial tail is a running ``logaddexp`` of
    ``scipy.stats.binom.logpmf`` from its own end, so tails far below the smallest double
    (e.g. :math:`0.05^{300}`) keep their logarithm instead of underflowing to 0 (which made the
    bound ``inf``); :math:`1 - \mathrm{FPR}_k` and :math:`1 - \mathrm{FNR}_k` are the opposite
    tails, never ``1 -`` a rounded tail (whose cancellation overstated the bound), and
    :math:`\ln(1 - \delta - \mathrm{FPR}_k)` is formed with a stable
    :math:`\ln(1 - e^x)`; at one output, :math:`1 - \delta - U_F` is summed with one rounding.
    A rounding allowance of :math:`4(k + 1)` machine epsilons (relative) is then taken off, so
    the result is at most the exact value (0 where every vote carries no evidence,
    :math:`U_F + U_N = 1 - \delta`) and within about :math:`10^{-11}` of it for k up to 10⁴; it
    takes milliseconds.

    Examples
    --------
    >>> from idaudit.dp import compose_error_rates, epsilon_from_error_rates
    >>> round(epsilon_from_error_rates(0.2, 0.3), 4)
    1.2528
    >>> round(compose_error_rates(0.2, 0.3, 10), 4)   # pure DP: the worst case adds up
    12.5276
    >>> round(compose_error_rates(0.2, 0.3, 10, delta=0.05), 4)
    10.0713
    """
    uf = _check_real(fpr_upper, "fpr_upper", 0.0, 1.0)
    un = _check_real(fnr_upper, "fnr_upper", 0.0, 1.0)
    if isinstance(k, bool) or not isinstance(k, numbers.Integral):
        raise TypeError(f"`k` must be an integer; got {type(k).__name__}.")
    if k < 1:
        raise InvalidInputError(f"`k` must be >= 1; got {k!r}.")
    dlt = _check_real(delta, "delta", 0.0, 1.0, high_open=True)
    # discarding k - 1 outputs is post-processing: the one-output bound stays valid for k (and
    # at k = 1 the only vote is the one-output test itself)
    one = _one_output_epsilon(uf, un, dlt)
    if k == 1:
        return one
    log_delta = math.log(dlt) if dlt > 0.0 else -math.inf
    value = max(_log_kov_epsilon(*_log_vote_rates(int(k), uf, un), log_delta), one)
    if math.isinf(value) or value == one:
        return value
    # the tails carry a rounding error that grows with k: take it off, so that a vote whose
    # exact epsilon is 0 (UF + UN = 1 - delta) never certifies a positive one
    slack = 4.0 * (k + 1) * sys.float_info.epsilon * max(1.0, value)
    return max(value - slack, one)


def _one_output_epsilon(uf: float, un: float, dlt: float) -> float:
    """Eq. 2 at the per-query rates, each ``1 - δ - rate`` formed exactly (``math.fsum``).

    The exact numerator keeps its sign even when it is within rounding of 0 (e.g.
    ``1 - 0.3 - 0.7`` is 5.6e-17 for the doubles, which over a zero rate is ``inf``).
    """
    best = 0.0
    for rate, other in ((uf, un), (un, uf)):
        num = math.fsum((1.0, -dlt, -rate))
        if num <= 0.0:
            continue  # the inequality holds for every ε: no evidence
        if other == 0.0:
            return math.inf
        best = max(best, math.log(num) - math.log(other))
    return best


_LN2 = math.log(2.0)


def _log1mexp(x: FloatArray) -> FloatArray:
    """``ln(1 - e^x)`` for ``x <= 0``, without cancellation (Mächler 2012); ``-inf`` at 0."""
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        out: FloatArray = np.where(x > -_LN2, np.log(-np.expm1(x)), np.log1p(-np.exp(x)))
    return out


def _log_binom_tails(k: int, p: float) -> tuple[FloatArray, FloatArray]:
    """``(ln P[Bin(k, p) <= i], ln P[Bin(k, p) >= i])`` for ``i = 0..k``, in log space.

    Each tail is a running ``logaddexp`` of the log-pmf from its own end, so no tail
    underflows however small it is and none is formed as ``1 -`` the other. A tail above 1/2 is
    then recomputed from its (smaller, relatively accurate) complement with ``log1mexp``, which
    pins the logs near 0 to full absolute precision.
    """
    i = np.arange(k + 1)
    with np.errstate(divide="ignore", invalid="ignore"):
        log_pmf = np.asarray(stats.binom.logpmf(i, k, p), dtype=np.float64)
        log_le = np.minimum(np.logaddexp.accumulate(log_pmf), 0.0)
        log_ge = np.minimum(np.logaddexp.accumulate(log_pmf[::-1])[::-1], 0.0)
    # P[Bin <= i - 1] and P[Bin >= i] (i = 1..k) are complements: take the larger from the smaller
    lo, up = log_le[:-1].copy(), log_ge[1:].copy()
    log_le[:-1] = np.where(up < -_LN2, _log1mexp(up), lo)
    log_ge[1:] = np.where(lo < -_LN2, _log1mexp(lo), up)
    return log_le, log_ge


def _log_vote_rates(
    k: int, uf: float, un: float
) -> tuple[FloatArray, FloatArray, FloatArray, FloatArray]:
    """Return the logs of ``(1 - FPR_k, FPR_k, 1 - FNR_k, FNR_k)`` of the votes ``j = 1..k``.

    Vote j predicts B when at least j of the k outputs say B: ``FPR_k = P[Bin(k, UF) >= j]``
    and ``FNR_k = P[Bin(k, UN) >= k - j + 1]``; each complement is the opposite binomial tail.
    """
    le_f, ge_f = _log_binom_tails(k, uf)
    le_n, ge_n = _log_binom_tails(k, un)
    # j = 1..k: ge_f[j], le_f[j - 1], ge_n[k - j + 1] (k down to 1), le_n[k - j] (k - 1 down to 0)
    return le_f[:-1], ge_f[1:], le_n[-2::-1], ge_n[:0:-1]


def _log_kov_epsilon(
    log_tnr: FloatArray,
    log_fpr: FloatArray,
    log_tpr: FloatArray,
    log_fnr: FloatArray,
    log_delta: float,
) -> float:
    """Eq. 2 (:func:`epsilon_from_error_rates`) maximised over tests given by their log rates.

    ``max{0, ln((1 - δ - FPR)/FNR), ln((1 - δ - FNR)/FPR)}`` with ``1 - FPR`` and ``1 - FNR``
    passed in directly; a term with a numerator ≤ 0 is omitted and one with a positive
    numerator over a zero denominator is ``inf``, as there.
    """
    via_fnr = _log_ratio(_log_sub(log_tnr, log_delta), log_fnr)
    via_fpr = _log_ratio(_log_sub(log_tpr, log_delta), log_fpr)
    return max(0.0, float(np.max(via_fnr)), float(np.max(via_fpr)))


def _log_sub(log_a: FloatArray, log_b: float) -> FloatArray:
    """``ln(a - b)`` from ``ln a`` and ``ln b``; ``-inf`` where ``a <= b``."""
    if log_b == -math.inf:
        return log_a
    with np.errstate(invalid="ignore"):
        x = np.minimum(log_b - log_a, 0.0)  # log_a = -inf gives +inf -> 0 -> -inf below
        out: FloatArray = np.where(log_a > log_b, log_a + _log1mexp(x), -np.inf)
    return out


def _log_ratio(log_num: FloatArray, log_den: FloatArray) -> FloatArray:
    """``ln(num/den)`` from logs: ``-inf`` (omitted) at num = 0, else ``inf`` at den = 0."""
    with np.errstate(invalid="ignore"):
        out: FloatArray = np.where(log_num > -np.inf, log_num - log_den, -np.inf)
    return out


def _check_real(
    value: Any,
    name: str,
    low: float,
    high: float,
    *,
    low_open: bool = False,
    high_open: bool = False,
) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"`{name}` must be a real number; got {type(value).__name__}.")
    v = float(value)
    ok = (v > low if low_open else v >= low) and (v < high if high_open else v <= high)
    if math.isnan(v) or not ok:
        lb, rb = "(" if low_open else "[", ")" if high_open else "]"
        hi = "inf" if math.isinf(high) else f"{high:g}"
        raise InvalidInputError(f"`{name}` must be in {lb}{low:g}, {hi}{rb}; got {value!r}.")
    return v
