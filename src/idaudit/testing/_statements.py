"""Assertions about ε that read the status of what they compare and refuse what it cannot say.

Three sentences, three functions:

=============================  ==========================================  =====================
function                       sentence                                    statuses that say it
=============================  ==========================================  =====================
:func:`assert_epsilon_below`   "the reported <status> is at most ``bound``"  the one named
:func:`assert_epsilon_above`   "the mechanism's ε exceeds ``bound``"       certified lower bound,
                                                                           reference
:func:`assert_private`         "the mechanism is ``epsilon``-DP"           certified upper bound,
                                                                           reference
=============================  ==========================================  =====================

A certified *lower* bound below 2 says that the audit certified no ε above 2; it never says
that the mechanism is 2-DP, and :func:`assert_private` refuses it.
"""

from __future__ import annotations

import math
import numbers
from typing import Any

import numpy as np
import numpy.typing as npt

from idaudit._results import Status, check_status, reduce_status
from idaudit.exceptions import InvalidInputError, UnsupportedStatementError
from idaudit.testing._claims import read_claim, read_epsilon

__all__ = ["assert_epsilon_above", "assert_epsilon_below", "assert_private"]


def _values(
    result: Any, allowed: tuple[str, ...], sentence: str, hint: str, *, reduced: bool = False
) -> tuple[npt.NDArray[np.float64], Status]:
    values, status, n_simultaneous = read_epsilon(result, "result")
    if values.size == 0:
        raise InvalidInputError(
            f"`result` holds no values: '{sentence}' cannot be checked on an empty family."
        )
    if status not in allowed:
        raise UnsupportedStatementError(
            f"`result` has status {status!r}, which cannot support '{sentence}' (only "
            f"{' or '.join(repr(s) for s in allowed)} can). {hint}"
        )
    if reduced:
        # the sentence speaks of the largest member: a maximum over the family, certified
        # only when the members hold jointly (the results core decides, as for every reducer)
        got, reason = reduce_status(status, values.size, n_simultaneous=n_simultaneous)
        if got != status:
            raise UnsupportedStatementError(
                f"`result` is a family of {values.size} {status} values of which "
                f"{n_simultaneous} hold jointly: their maximum has status {got!r}, which "
                f"cannot support '{sentence}' ({reason})."
            )
    return values, status


def _finite(value: Any, name: str) -> float:
    """Return a finite level as a float (at ±inf or NaN a comparison is decided in advance)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"`{name}` must be a real number; got {type(value).__name__}.")
    if not math.isfinite(value):
        raise InvalidInputError(
            f"`{name}` must be a finite number; got {value!r} (a comparison with an infinite "
            "or NaN level is decided before any value is read)."
        )
    return float(value)


def _where(mask: npt.NDArray[np.bool_], values: npt.NDArray[np.float64]) -> str:
    if values.ndim == 0:
        return f"{float(values):.6g}"
    idx = np.argwhere(mask)
    shown = ", ".join(f"{tuple(int(j) for j in i)}: {values[tuple(i)]:.6g}" for i in idx[:5])
    return f"{len(idx)} of {values.size} values ({shown}{', ...' if len(idx) > 5 else ''})"


def assert_epsilon_below(
    result: Any, bound: float, *, status: str = "certified_lower_bound"
) -> None:
    """Assert that every reported ε of the given status is at most ``bound``.

    With the default status the sentence is "the audit certified no ε above ``bound``":
    what a benchmark states about an anonymiser it audited. It is not "the mechanism is
    ``bound``-DP" (see :func:`assert_private`).

    Parameters
    ----------
    result : Claim, xarray.DataArray or fitted estimator
        What reports the ε (its status is read from it, never assumed).
    bound : float
        The bound, a finite number.
    status : str, default "certified_lower_bound"
        The status the reported ε must have; a result of another status is refused, so a
        sample estimate is never passed off as a certificate (or the reverse).

    Raises
    ------
    UnsupportedStatementError
        If the result's status is not ``status``.
    InvalidInputError
        If the result is not an ε or holds no values.
    AssertionError
        If some value exceeds ``bound``.

    Examples
    --------
    >>> from idaudit.testing import Claim, assert_epsilon_below
    >>> assert_epsilon_below(Claim([0.4, 1.2], "certified_lower_bound"), 2.0)
    """
    __tracebackhide__ = True  # pytest shows the caller's line, not this one
    check_status(status)
    bound = _finite(bound, "bound")
    values, got = _values(
        result,
        (status,),
        f"the reported {status} is at most {bound:g}",
        f"Pass status={_status_of(result)!r} if that is the statement you mean.",
    )
    over = values > bound
    if over.any():
        raise AssertionError(f"the {got} exceeds {bound:g} at {_where(over, values)}.")


def _status_of(result: Any) -> str:
    """Return the formal status ``result`` carries (read as every check here reads it).

    Parameters
    ----------
    result : Claim, xarray.DataArray or fitted estimator
        What reports the number.

    Returns
    -------
    str
    """
    return read_claim(result, "result")[1]


def assert_epsilon_above(result: Any, bound: float) -> None:
    """Assert a certified leak: the mechanism's ε exceeds ``bound``.

    Only a certified lower bound (or a proved reference value) says so; a sample estimate
    can overshoot and a diagnostic rests on assumptions the data do not meet.

    Parameters
    ----------
    result : Claim, xarray.DataArray or fitted estimator
        What reports the ε.
    bound : float
        The bound, a finite number.

    Raises
    ------
    UnsupportedStatementError
        If the result's status is neither ``"certified_lower_bound"`` nor ``"reference"``,
        or the result is a family of more certified values than hold jointly (its
        ``n_simultaneous``): "some member exceeds ``bound``" is a statement about their
        maximum, whose status :func:`idaudit.results.reduce_status` lowers to a sample
        estimate.
    InvalidInputError
        If the result is not an ε or holds no values.
    AssertionError
        If no value exceeds ``bound``.

    Examples
    --------
    >>> from idaudit.testing import Claim, assert_epsilon_above
    >>> assert_epsilon_above(Claim([0.1, 1.3], "certified_lower_bound", n_simultaneous=2), 1.0)
    """
    __tracebackhide__ = True  # pytest shows the caller's line, not this one
    bound = _finite(bound, "bound")
    values, got = _values(
        result,
        ("certified_lower_bound", "reference"),
        f"the mechanism's epsilon exceeds {bound:g}",
        "A sample estimate can overshoot the truth; certify it (e.g. ReservedTestCertifier, "
        "MMDTVAuditor(confidence_level=...)) first.",
        reduced=True,
    )
    if not (values > bound).any():
        raise AssertionError(
            f"no {got} exceeds {bound:g}: the largest is {float(values.max()):.6g}."
        )


def assert_private(result: Any, epsilon: float) -> None:
    """Assert that the mechanism is ``epsilon``-DP (at the result's δ).

    Only a certified upper bound or a proved reference value says so. An audit's certified
    lower bound can never show privacy: it bounds ε from below.

    Parameters
    ----------
    result : Claim, xarray.DataArray or fitted estimator
        What reports the ε.
    epsilon : float
        The privacy level to assert, a finite number.

    Raises
    ------
    UnsupportedStatementError
        If the result's status is neither ``"certified_upper_bound"`` nor ``"reference"``
        (a lower bound, a sample estimate or a diagnostic), or it is a family of more
        certified upper bounds than hold jointly (``n_simultaneous``): every member at most
        ``epsilon`` speaks of their maximum.
    InvalidInputError
        If the result is not an ε or holds no values.
    AssertionError
        If some value exceeds ``epsilon``.

    Examples
    --------
    >>> import numpy as np
    >>> from idaudit.data import EmbeddingSet
    >>> from idaudit.mechanisms import LaplaceNoise
    >>> from idaudit.testing import Claim, assert_private
    >>> mech = LaplaceNoise(EmbeddingSet([[0.0], [1.0]], ["a", "b"], normalize=False), 1.0)
    >>> assert_private(Claim(mech.pair_epsilon("a", "b"), "reference"), 1.0)
    """
    __tracebackhide__ = True  # pytest shows the caller's line, not this one
    epsilon = _finite(epsilon, "epsilon")
    values, got = _values(
        result,
        ("certified_upper_bound", "reference"),
        f"the mechanism is {epsilon:g}-DP",
        "An audit bounds epsilon from below: a lower bound at or below a level shows only "
        "that the audit found no more; assert_epsilon_below(result, bound) states that.",
        reduced=True,
    )
    over = values > epsilon
    if over.any():
        raise AssertionError(f"the {got} exceeds {epsilon:g} at {_where(over, values)}.")
