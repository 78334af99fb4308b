"""Array input checks shared by the ``idaudit.dp`` functions.

Every public function in :mod:`idaudit.dp` accepts scalars or array_likes, broadcasts them like
numpy does and returns a Python ``float`` when every input was a scalar (0-d), an ``ndarray``
otherwise. These helpers do the conversion and the range checks, with messages that name the
argument, the rule and the first offending value.
"""

from __future__ import annotations

from typing import Any, TypeAlias

import numpy as np
import numpy.typing as npt

from idaudit.exceptions import InvalidInputError

FloatArray: TypeAlias = npt.NDArray[np.float64]


def as_float_array(value: Any, name: str) -> FloatArray:
    """Return ``value`` as a float64 array, raising ``TypeError`` if it is not numeric."""
    if isinstance(value, (str, bytes)):
        raise TypeError(f"`{name}` must be a real number or an array of them; got str.")
    try:
        arr = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise TypeError(
            f"`{name}` must be a real number or an array of them; got {type(value).__name__}."
        ) from exc
    return arr


def check_range(
    arr: FloatArray,
    name: str,
    low: float,
    high: float,
    *,
    closed: str = "both",
) -> None:
    """Raise ``InvalidInputError`` naming the first element of ``arr`` outside the interval.

    ``closed`` is one of ``"both"``, ``"left"``, ``"right"``, ``"neither"``; NaN is always
    rejected. Infinite bounds are written ``inf``.
    """
    left_closed = closed in ("both", "left")
    right_closed = closed in ("both", "right")
    with np.errstate(invalid="ignore"):
        ok = (arr >= low) if left_closed else (arr > low)
        ok &= (arr <= high) if right_closed else (arr < high)
    if not ok.all():
        bad = float(arr[~ok].flat[0]) if arr.ndim else float(arr)
        lb = "[" if left_closed else "("
        rb = "]" if right_closed else ")"
        raise InvalidInputError(
            f"`{name}` must be in {lb}{_fmt(low)}, {_fmt(high)}{rb}; got {bad!r}."
        )


def checked_arrays(*specs: tuple[Any, ...]) -> tuple[FloatArray, ...]:
    """Each ``(value, name, low, high[, closed])`` as a float64 array in its interval.

    Every value is converted (:func:`as_float_array`) before any interval is checked
    (:func:`check_range`), both in the order given: a call with several bad arguments raises
    the ``TypeError`` of the first non-numeric one before any range error.
    """
    arrays = tuple(as_float_array(value, name) for value, name, *_ in specs)
    for arr, (_, name, low, high, *closed) in zip(arrays, specs, strict=True):
        check_range(arr, name, low, high, closed=closed[0] if closed else "both")
    return arrays


def check_integer_valued(arr: FloatArray, name: str) -> None:
    """Raise ``InvalidInputError`` naming the first non-integer element of ``arr``."""
    with np.errstate(invalid="ignore"):
        ok = np.isfinite(arr) & (arr == np.round(arr))
    if not ok.all():
        bad = float(arr[~ok].flat[0]) if arr.ndim else float(arr)
        raise InvalidInputError(f"`{name}` must be integer-valued; got {bad!r}.")


def is_scalar(*values: Any) -> bool:
    """Return whether every value is 0-dimensional (then the result is a ``float``)."""
    return all(np.ndim(v) == 0 for v in values)


def finish(out: FloatArray, scalar: bool) -> Any:
    """Return ``out`` as ``float`` for scalar inputs, as a float64 ndarray otherwise."""
    if scalar:
        return float(out)
    return np.asarray(out, dtype=np.float64)


def log1mexp(x: FloatArray) -> FloatArray:
    """``log(1 - exp(x))`` for ``x <= 0``, accurate over the whole range (Mächler 2012)."""
    x = np.minimum(x, 0.0)
    with np.errstate(divide="ignore"):
        out: FloatArray = np.where(
            x > -np.log(2.0),
            np.log(-np.expm1(x)),
            np.log1p(-np.exp(x)),
        )
    return out


def _fmt(bound: float) -> str:
    if np.isinf(bound):
        return "inf" if bound > 0 else "-inf"
    return f"{bound:g}"
