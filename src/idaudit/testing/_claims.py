"""Claims: a reported number together with its formal status (and, optionally, its truth).

Every check in :mod:`idaudit.testing` reads the status from what it is given and never
guesses it: a bare float is refused, because the sentence a number supports (a certified
lower bound, a sample estimate, a proved truth) is part of the number.
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import xarray as xr

from idaudit._results import Status, check_status
from idaudit._validation import is_integer
from idaudit.exceptions import InvalidInputError

__all__ = ["Claim", "read_claim", "read_epsilon"]

_EPSILON = "epsilon"


@dataclass(frozen=True)
class Claim:
    """A reported value with its formal status, and the truth it speaks about if it varies.

    Parameters
    ----------
    value : float or array_like
        The reported number, or a whole family of them (every pair, every δ of a curve,
        every threshold of a trade-off band): a family is one claim that holds only if all
        its members do.
    status : str
        Its formal status, a key of :data:`idaudit.results.STATUSES`
        (``"certified_lower_bound"``, ``"certified_upper_bound"``, ...).
    truth : float or array_like, optional
        The true value(s) the claim bounds, when they change from run to run (for instance
        the true error rates of the test a certifier chose on that run's data). Otherwise the
        truth is given once to :func:`~idaudit.testing.check_soundness`.
    quantity : str, default "epsilon"
        What the value is. The ε statements (:func:`~idaudit.testing.assert_private` and
        friends) compare only a claim whose quantity is ``"epsilon"``; name anything else
        (``"error_rate"``, ``"memorisation_rate"``) so that it is never read as an ε.
    n_simultaneous : int, default 1
        How many members of the family hold jointly at the stated confidence (as the
        ``n_simultaneous`` attribute of a result variable): a maximum over more members
        than that is not certified (:func:`idaudit.results.reduce_status`).

    Examples
    --------
    >>> from idaudit.testing import Claim
    >>> c = Claim(0.8, "certified_lower_bound")
    >>> c.status, c.quantity, c.n_simultaneous
    ('certified_lower_bound', 'epsilon', 1)
    """

    value: Any
    status: Status
    truth: Any = None
    quantity: str = "epsilon"
    n_simultaneous: int = 1

    def __post_init__(self) -> None:
        object.__setattr__(self, "status", check_status(self.status))
        if not isinstance(self.quantity, str) or not self.quantity:
            raise InvalidInputError(
                f"`quantity` must be a non-empty string; got {self.quantity!r}."
            )
        n_sim = self.n_simultaneous
        if not is_integer(n_sim) or n_sim < 1:
            raise InvalidInputError(f"`n_simultaneous` must be an integer >= 1; got {n_sim!r}.")


def read_claim(obj: Any, name: str) -> tuple[npt.NDArray[np.float64], Status, Any]:
    """Return ``(values, status, truth)`` of anything that states a number with its status.

    Parameters
    ----------
    obj : Claim, xarray.DataArray or fitted estimator
        A :class:`Claim`; a ``DataArray`` whose ``status`` attribute names its status (any
        variable of an idaudit result); a fitted certifier (``epsilon_lb_`` and its class
        attribute ``status``) or auditor (``epsilon_`` and ``status``).
    name : str
        What to call ``obj`` in error messages.

    Returns
    -------
    values : ndarray of float
        The value(s), at least 0-d.
    status : str
        The formal status.
    truth : object or None
        A :class:`Claim`'s own truth, else ``None``.

    Raises
    ------
    InvalidInputError
        If ``obj`` is a number or array without a status, a ``Dataset`` (pick one variable),
        a ``DataArray`` without a ``status`` attribute, or holds NaN.
    """
    truth = None
    if isinstance(obj, Claim):
        raw, status, truth = obj.value, obj.status, obj.truth
    elif isinstance(obj, xr.Dataset):
        raise InvalidInputError(
            f"`{name}` is a Dataset, whose variables carry different statuses; pass one "
            "variable, e.g. ds['mmdtv_epsilon_lb']."
        )
    elif isinstance(obj, xr.DataArray):
        _refuse_stacked(obj, name)
        if "status" not in obj.attrs:
            raise InvalidInputError(
                f"`{name}` is a DataArray without a 'status' attribute ({obj.name!r}); wrap "
                "it as Claim(values, status=...) to say what kind of statement it is."
            )
        raw, status = obj.values, check_status(obj.attrs["status"])
    elif isinstance(getattr(obj, "status", None), str) and (
        hasattr(obj, "epsilon_lb_") or hasattr(obj, "epsilon_")
    ):
        # a certifier reports epsilon_lb_ under its status; an auditor epsilon_
        attr = "epsilon_" if hasattr(obj, "epsilon_") else "epsilon_lb_"
        raw, status = getattr(obj, attr), check_status(obj.status)
    elif isinstance(obj, numbers.Number | np.ndarray | list | tuple):
        raise InvalidInputError(
            f"`{name}` is a number without a status ({type(obj).__name__}); wrap it as "
            "Claim(value, status='certified_lower_bound') (or the status it really has)."
        )
    else:
        raise TypeError(
            f"`{name}` must be a Claim, an xarray.DataArray with a 'status' attribute or a "
            f"fitted idaudit estimator; got {type(obj).__name__}."
        )
    try:
        values = np.asarray(raw, dtype=float)
    except (TypeError, ValueError) as err:
        raise InvalidInputError(f"`{name}` holds values that are not numbers: {raw!r}.") from err
    if np.isnan(values).any():
        raise InvalidInputError(
            f"`{name}` holds NaN ({int(np.isnan(values).sum())} of {values.size} values): a "
            "claim must state a number."
        )
    return values, status, truth


def _refuse_stacked(obj: xr.DataArray, name: str) -> None:
    # Dataset.to_dataarray() stacks variables of different meanings and statuses along
    # "variable" and keeps the Dataset's attributes: no status speaks for all of them
    if "variable" in obj.dims:
        raise InvalidInputError(
            f"`{name}` is stacked along a 'variable' dimension (Dataset.to_dataarray()): its "
            "variables carry their own meanings and statuses; pass one variable, e.g. "
            "ds['epsilon_lb']."
        )


def is_epsilon_name(name: Any) -> bool:
    """Whether a result variable's name says it is an ε (a ``_``-separated word ``epsilon``).

    Parameters
    ----------
    name : object
        The variable's name (``DataArray.name``).

    Returns
    -------
    bool
    """
    return isinstance(name, str) and _EPSILON in name.lower().split("_")


def read_epsilon(obj: Any, name: str) -> tuple[npt.NDArray[np.float64], Status, int]:
    """Return ``(values, status, n_simultaneous)`` of something that reports an ε.

    Parameters
    ----------
    obj : Claim, xarray.DataArray or fitted estimator
        A :class:`Claim` of quantity ``"epsilon"``; a ``DataArray`` whose name (a word
        ``epsilon``: ``epsilon_lb``, ``mmdtv_epsilon``, ``epsilon_ub``) or ``quantity``
        attribute says it is an ε; a fitted certifier or auditor (its ``epsilon_lb_`` or
        ``epsilon_``).
    name : str
        What to call ``obj`` in error messages.

    Returns
    -------
    values : ndarray of float
    status : str
    n_simultaneous : int
        How many values hold jointly (the ``n_simultaneous`` attribute; 1 when absent).

    Raises
    ------
    InvalidInputError
        If ``obj`` is not an ε (an error rate, an interval bound, a count), or as
        :func:`read_claim`.
    """
    values, status, _ = read_claim(obj, name)
    if isinstance(obj, Claim):
        quantity, n_sim = obj.quantity, int(obj.n_simultaneous)
        if isinstance(obj.value, xr.DataArray) and quantity == _EPSILON:
            # a result variable wrapped as a Claim keeps its own meaning
            inner = str(obj.value.attrs.get("quantity", ""))
            if inner != _EPSILON and not is_epsilon_name(obj.value.name):
                raise InvalidInputError(
                    f"`{name}` wraps the variable {obj.value.name!r}, which is not an epsilon "
                    "(its name has no word 'epsilon' and no attribute quantity='epsilon')."
                )
    elif isinstance(obj, xr.DataArray):
        quantity = str(obj.attrs.get("quantity", _EPSILON if is_epsilon_name(obj.name) else ""))
        n_sim = int(obj.attrs.get("n_simultaneous", 1))
        if quantity != _EPSILON:
            raise InvalidInputError(
                f"`{name}` ({obj.name!r}: {obj.attrs.get('long_name', 'no long_name')!r}) is "
                "not an epsilon: an epsilon statement compares only a variable named as one "
                "(epsilon, epsilon_lb, epsilon_ub, ...) or with attribute quantity='epsilon'."
            )
        return values, status, n_sim
    else:
        quantity, n_sim = _EPSILON, 1  # an estimator's epsilon_lb_ / epsilon_
    if quantity != _EPSILON:
        raise InvalidInputError(
            f"`{name}` is a claim about {quantity!r}, not an epsilon: an epsilon statement "
            "compares only Claim(..., quantity='epsilon')."
        )
    return values, status, n_sim
