"""One-run auditing: ε and GDP μ lower bounds from m canaries, r guesses and v correct ones.

Steinke, Nasr & Jagielski (NeurIPS 2023) audit a mechanism in a single run: each of m canaries
is included or not by an independent fair coin, the attacker sees the one output and commits
to r guesses (abstaining on the rest), and v of them are right. If the mechanism is (ε, δ)-DP
with respect to every canary, v cannot be much larger than a Binomial(r, e^ε/(1 + e^ε)) count;
seeing more refutes ε. Mahloujifar, Melis & Chaudhuri (2024) run the same experiment against a
hypothesised trade-off curve f; here f is the Gaussian curve G_μ, which gives a lower bound on
the GDP μ.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from scipy import special, stats

from idaudit._validation import check_in_range, is_integer
from idaudit.exceptions import InvalidInputError

__all__ = ["one_run_epsilon", "one_run_gdp_mu", "one_run_gdp_refutes", "one_run_p_value"]

#: Points of the coarse grid searched for the largest refuted ε (or μ) before bisection.
_GRID = 16
#: Bisection steps after the grid (the bracket shrinks by a further 2**-44).
_BISECT = 44
#: Largest μ searched by the f-DP variant (G_40 is indistinguishable from "no privacy").
_MU_MAX = 40.0


def _counts(n_canaries: Any, n_guesses: Any, n_correct: Any) -> tuple[int, int, int]:
    """Check 0 <= correct <= guesses <= canaries, canaries >= 1, all integers."""
    names = ("n_canaries", "n_guesses", "n_correct")
    values = (n_canaries, n_guesses, n_correct)
    for name, value in zip(names, values, strict=True):
        if not is_integer(value):
            raise TypeError(f"`{name}` must be an integer; got {type(value).__name__}.")
    m, r, v = (int(x) for x in values)
    if m < 1:
        raise InvalidInputError(f"`n_canaries` must be >= 1; got {m}.")
    if not 0 <= r <= m:
        raise InvalidInputError(f"`n_guesses` must be in [0, n_canaries = {m}]; got {r}.")
    if not 0 <= v <= r:
        raise InvalidInputError(f"`n_correct` must be in [0, n_guesses = {r}]; got {v}.")
    return m, r, v


def _p_value(m: int, r: int, v: int, epsilon: float, delta: float) -> float:
    """Steinke et al.'s tail bound on P[at least v of r guesses correct] (no checks)."""
    if v == 0:
        return 1.0
    q = float(special.expit(epsilon))  # e^ε / (1 + e^ε), stable for large ε
    # tail(k) = P[Binomial(r, q) >= k] for k = v, v - 1, ..., 0
    tail = stats.binom.sf(np.arange(v - 1, -2, -1), r, q)  # (v + 1,): tail(v), tail(v-1), ...
    head = float(tail[0])
    if delta == 0.0:
        return head
    # δ term: max over i = 1..v of (tail(v - i) - tail(v)) / i (Theorem 5.2's sup over i)
    spread = float(np.max((tail[1:] - head) / np.arange(1, v + 1)))
    return min(1.0, head + 2.0 * m * delta * spread)


def one_run_p_value(
    n_canaries: int, n_guesses: int, n_correct: int, epsilon: float, delta: float = 0.0
) -> float:
    r"""Probability bound of ``n_correct`` or more right guesses under (ε, δ)-DP.

    Parameters
    ----------
    n_canaries : int
        m, the canaries, each included by an independent fair coin, >= 1.
    n_guesses : int
        r, the guesses the attacker committed to (it abstained on the other m − r), in [0, m].
    n_correct : int
        v, the right guesses, in [0, r].
    epsilon : float
        The ε of the hypothesis, >= 0.
    delta : float, default 0.0
        The δ of the hypothesis, in [0, 1].

    Returns
    -------
    float
        An upper bound, valid for every mechanism (ε, δ)-DP with respect to each canary and
        every attacker, on the probability of ``n_correct`` or more right guesses: a p-value
        for the hypothesis "(ε, δ)-DP".

    Raises
    ------
    InvalidInputError
        If a count is out of range or ``epsilon``, ``delta`` is out of range.
    TypeError
        If a count is not an integer.

    Notes
    -----
    With :math:`q = e^\varepsilon/(1 + e^\varepsilon)` and
    :math:`F(k) = \Pr[\mathrm{Binomial}(r, q) \ge k]`, Steinke, Nasr & Jagielski (2023,
    Theorem 5.2) bound

    .. math:: \Pr[W \ge v] \le F(v) + 2m\delta \max_{1 \le i \le v} \frac{F(v - i) - F(v)}{i}.

    With δ = 0 it is the binomial tail alone (their Theorem 3.1).

    References
    ----------
    T. Steinke, M. Nasr, M. Jagielski, "Privacy Auditing with One (1) Training Run",
    NeurIPS 2023, arXiv:2305.08846.

    Examples
    --------
    >>> from idaudit.dp import one_run_p_value
    >>> round(one_run_p_value(1000, 100, 80, 0.5), 6)
    0.000103
    """
    m, r, v = _counts(n_canaries, n_guesses, n_correct)
    eps = check_in_range(epsilon, "epsilon", 0.0, None, closed="left")
    d = check_in_range(delta, "delta", 0.0, 1.0, closed="both")
    return _p_value(m, r, v, eps, d)


def one_run_epsilon(
    n_canaries: int,
    n_guesses: int,
    n_correct: int,
    *,
    delta: float = 0.0,
    alpha: float = 0.05,
) -> float:
    r"""Lower bound on ε from one run: the largest ε whose (ε, δ)-DP claim is refuted.

    Parameters
    ----------
    n_canaries : int
        m, the canaries, each included (or, in idaudit's identity setting, fed as identity b
        rather than a) by an independent fair coin, >= 1.
    n_guesses : int
        r, the guesses committed to, in [0, m]; fixed, or one of several candidates paid for
        by dividing ``alpha`` among them.
    n_correct : int
        v, the right guesses, in [0, r].
    delta : float, default 0.0
        The δ of the refuted claims, in [0, 1).
    alpha : float, default 0.05
        Error level in (0, 1).

    Returns
    -------
    float
        ε_lb >= 0 — status ``certified_lower_bound``: with probability at least
        ``1 - alpha`` over the coins (and the mechanism), the mechanism is not
        (ε, δ)-DP with respect to every canary for any ε < ε_lb. 0 when nothing is refuted.

    Raises
    ------
    InvalidInputError
        If a count, ``delta`` or ``alpha`` is out of range.
    TypeError
        If a count is not an integer.

    Notes
    -----
    The bound is :math:`\sup\{\varepsilon \ge 0 : p(\varepsilon) \le \alpha\}` with
    :math:`p` of :func:`one_run_p_value`. Any ε with :math:`p(\varepsilon) \le \alpha` may
    be reported: the rejection region of each ε is contained in
    :math:`\{W \ge v_\varepsilon\}` with :math:`p_\varepsilon(v_\varepsilon) \le \alpha`,
    and a mechanism that is (ε₀, δ)-DP is (ε, δ)-DP for every ε ≥ ε₀, so the union over the
    refuted ε ≥ ε₀ is one tail event of probability at most α. With δ = 0 the bound has a
    closed form, :math:`\mathrm{logit}\,\mathrm{Beta}^{-1}(\alpha;\,v,\,r - v + 1)`: the
    logit of the one-sided Clopper–Pearson lower bound on the precision v / r. With δ > 0 it
    is searched on [0, that value] (a grid of 16 steps, then 44 bisection steps), and the
    value returned is always one whose p-value was computed to be at most α.

    References
    ----------
    T. Steinke, M. Nasr, M. Jagielski, "Privacy Auditing with One (1) Training Run",
    NeurIPS 2023, arXiv:2305.08846.

    Examples
    --------
    >>> from idaudit.dp import one_run_epsilon
    >>> round(one_run_epsilon(1000, 100, 80, alpha=0.05), 4)
    0.9584
    >>> round(one_run_epsilon(1000, 100, 80, delta=1e-5, alpha=0.05), 4)
    0.9553
    """
    m, r, v = _counts(n_canaries, n_guesses, n_correct)
    d = check_in_range(delta, "delta", 0.0, 1.0, closed="left")
    a = check_in_range(alpha, "alpha", 0.0, 1.0)
    if v == 0:
        return 0.0
    q_lb = float(stats.beta.ppf(a, v, r - v + 1))  # P[Bin(r, q) >= v] <= α iff q <= q_lb
    eps0 = max(0.0, float(special.logit(q_lb)))
    if d == 0.0 or eps0 == 0.0:
        return eps0

    def refuted(eps: float) -> bool:
        return _p_value(m, r, v, eps, d) <= a

    return _largest(refuted, eps0)


def _largest(refuted: Any, high: float, low: float = 0.0) -> float:
    """Largest x in [low, high] found with ``refuted(x)`` (``low`` when none): grid, bisection.

    Scans the grid from the top, so the value found is at or above the last grid point that
    is refuted, and every value returned was itself found refuted (or is ``low``).
    """
    grid = np.linspace(low, high, _GRID + 1)
    i = next((j for j in range(_GRID, -1, -1) if refuted(float(grid[j]))), None)
    if i is None:
        return float(low)
    if i == _GRID:
        return float(high)
    lo, hi = float(grid[i]), float(grid[i + 1])  # refuted(lo), not refuted(hi)
    for _ in range(_BISECT):
        mid = 0.5 * (lo + hi)
        if mid in (lo, hi):
            break
        if refuted(mid):
            lo = mid
        else:
            hi = mid
    return lo


def _gdp_refuted(m: int, r: int, v: int, alpha: float, mu: float) -> bool:
    """Whether v of r right guesses refutes μ-GDP at level α (Mahloujifar et al.'s recursion).

    The recursion builds, from the last right guess backwards, the least probability mass a
    G_μ-DP mechanism must put on "right" and "wrong" guesses for the event to have
    probability α; the claim is refuted when that mass exceeds the r / m the guesses have.
    """
    if v == 0:
        return False
    right = alpha * v / m  # mass on right guesses
    wrong = alpha * (r - v) / m  # mass on wrong guesses
    for i in range(v - 1, -1, -1):
        # a G_μ-DP mechanism that puts `right` on a right guess puts at least
        # Φ(Φ⁻¹(right) − μ) on the wrong one (the trade-off curve, mirrored)
        floor = float(special.ndtr(special.ndtri(right) - mu))
        if floor <= wrong:
            break  # nothing moves any more
        right = min(right + i / (r - i) * (floor - wrong), 1.0)
        wrong = floor
    return right + wrong > r / m


def one_run_gdp_refutes(
    n_canaries: int, n_guesses: int, n_correct: int, mu: float, *, alpha: float = 0.05
) -> bool:
    r"""Whether one run's right guesses refute μ-GDP at level α (the f-DP test).

    Parameters
    ----------
    n_canaries, n_guesses, n_correct : int
        m, r and v as in :func:`one_run_epsilon`.
    mu : float
        The μ of the claim, >= 0.
    alpha : float, default 0.05
        Error level in (0, 1).

    Returns
    -------
    bool
        True when ``n_correct`` right guesses out of ``n_guesses`` would happen with
        probability at most ``alpha`` under every mechanism μ-GDP with respect to each canary.

    Raises
    ------
    InvalidInputError
        If a count, ``mu`` or ``alpha`` is out of range.
    TypeError
        If a count is not an integer.

    Notes
    -----
    See :func:`one_run_gdp_mu`, which reports the largest μ this test refutes.

    Examples
    --------
    >>> from idaudit.dp import one_run_gdp_refutes
    >>> one_run_gdp_refutes(1000, 100, 80, 0.3), one_run_gdp_refutes(1000, 100, 80, 0.4)
    (True, False)
    """
    m, r, v = _counts(n_canaries, n_guesses, n_correct)
    level = check_in_range(alpha, "alpha", 0.0, 1.0)
    return _gdp_refuted(m, r, v, level, check_in_range(mu, "mu", 0.0, None, closed="left"))


def one_run_gdp_mu(
    n_canaries: int, n_guesses: int, n_correct: int, *, alpha: float = 0.05
) -> float:
    r"""Lower bound on the GDP μ from one run (the f-DP audit with Gaussian trade-offs).

    Parameters
    ----------
    n_canaries, n_guesses, n_correct : int
        m, r and v as in :func:`one_run_epsilon`.
    alpha : float, default 0.05
        Error level in (0, 1).

    Returns
    -------
    float
        μ_lb >= 0 — status ``certified_lower_bound``: with probability at least
        ``1 - alpha`` the mechanism is not μ-GDP with respect to every canary for any
        μ < μ_lb. Translating it into ε(δ) (:func:`~idaudit.dp.gdp_epsilon`) assumes the
        trade-off curve *is* Gaussian: that ε is a ``sample_estimate`` of a model, not a
        certified bound (an (ε, δ)-DP mechanism need not be G_μ-DP for the μ with the same
        (ε, δ)).

    Raises
    ------
    InvalidInputError
        If a count or ``alpha`` is out of range.
    TypeError
        If a count is not an integer.

    Notes
    -----
    Mahloujifar, Melis & Chaudhuri (2024) test an f-DP claim from the same one-run
    experiment by a recursion over the right guesses that uses the whole trade-off curve
    f instead of its (ε, δ) corners; here :math:`f = G_\mu`,
    :math:`G_\mu(x) = \Phi(\Phi^{-1}(1 - x) - \mu)`. The largest refuted μ is searched on
    [0, 40] as in :func:`one_run_epsilon` (every refuted μ is a valid report: a μ₀-GDP
    mechanism is μ-GDP for every μ ≥ μ₀).

    References
    ----------
    S. Mahloujifar, L. Melis, K. Chaudhuri, "Auditing f-Differential Privacy in One Run",
    ICML 2025, arXiv:2410.22235.

    Examples
    --------
    >>> from idaudit.dp import one_run_gdp_mu
    >>> round(one_run_gdp_mu(1000, 100, 80, alpha=0.05), 3)
    0.364
    """
    m, r, v = _counts(n_canaries, n_guesses, n_correct)
    a = check_in_range(alpha, "alpha", 0.0, 1.0)
    if v == 0:
        return 0.0

    def refuted(mu: float) -> bool:
        return _gdp_refuted(m, r, v, a, mu)

    high = 1.0
    while high < _MU_MAX and refuted(high):
        high = min(2.0 * high, _MU_MAX)
    return _largest(refuted, high)
