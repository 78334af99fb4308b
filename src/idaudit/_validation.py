"""Input checks shared by every module (numpy only).

One check per kind of input, each raising :class:`~idaudit.exceptions.InvalidInputError`
(a :class:`ValueError`) or :class:`TypeError` with a message that names the argument, the rule
and the value.
"""

from __future__ import annotations

import numbers
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol, TypeAlias

import numpy as np
import numpy.typing as npt

from idaudit.exceptions import InvalidInputError

__all__ = [
    "Anything",
    "Boolean",
    "Classifier",
    "Constraint",
    "Device",
    "IntegerOrOption",
    "Interval",
    "Label",
    "MechanismLike",
    "NoneOr",
    "OptionOrPositive",
    "Options",
    "Positive",
    "RandomState",
    "RngLike",
    "check_embeddings",
    "check_in_range",
    "check_integer",
    "check_option",
    "check_pair",
    "check_pairs",
    "check_positive_number",
    "check_random_state",
    "spawn_seeds",
    "validate_params",
]

#: Anything accepted as ``rng``: an int seed, a ``SeedSequence``, a ``Generator`` or ``None``
#: (fresh OS entropy, not reproducible).
RngLike: TypeAlias = "int | np.integer[Any] | np.random.SeedSequence | np.random.Generator | None"


def check_random_state(rng: RngLike) -> np.random.Generator:
    """Normalise ``rng`` to a :class:`numpy.random.Generator` (SPEC 7).

    Parameters
    ----------
    rng : int, numpy.random.SeedSequence, numpy.random.Generator or None
        Seed material. A ``Generator`` is returned as is (it is *not* copied, so repeated calls
        advance it); ``None`` draws fresh entropy from the OS.

    Returns
    -------
    numpy.random.Generator

    Raises
    ------
    TypeError
        If ``rng`` is of another type (``numpy.random.RandomState`` included: it is legacy).
    """
    if isinstance(rng, np.random.Generator):
        return rng
    if rng is None or isinstance(rng, np.random.SeedSequence):
        return np.random.default_rng(rng)
    if is_integer(rng):
        if int(rng) < 0:
            raise InvalidInputError(f"`rng` must be a non-negative integer seed; got {rng!r}.")
        return np.random.default_rng(int(rng))
    raise TypeError(
        "`rng` must be an int, numpy.random.SeedSequence, numpy.random.Generator or None; "
        f"got {type(rng).__name__}."
    )


def spawn_seeds(rng: RngLike, n: int) -> list[int]:
    """Draw ``n`` independent 63-bit integer seeds from ``rng``.

    Used to seed per-task generators (folds, permutations, torch generators) so that results
    do not depend on how the work is batched or distributed.
    """
    gen = check_random_state(rng)
    return [int(s) for s in gen.integers(0, 2**63 - 1, size=n, dtype=np.int64)]


def is_integer(value: object) -> bool:
    """Whether ``value`` is an integer: a :class:`numbers.Integral` other than ``bool``.

    Typed on ``object``, so the check does not narrow a parameter annotated ``int``: mypy
    takes ``isinstance(k, numbers.Integral)`` to be false for an ``int`` and would skip the
    rest of the function as unreachable.
    """
    return not isinstance(value, bool) and isinstance(value, numbers.Integral)


def check_integer(value: Any, name: str, *, minimum: int | None = None) -> int:
    """Return ``value`` as ``int`` after checking its type and lower bound."""
    if not is_integer(value):
        raise TypeError(f"`{name}` must be an integer; got {type(value).__name__}.")
    if minimum is not None and value < minimum:
        raise InvalidInputError(f"`{name}` must be >= {minimum}; got {_python(value)!r}.")
    return int(value)


def check_in_range(
    value: Any,
    name: str,
    low: float | None = None,
    high: float | None = None,
    *,
    closed: str = "neither",
) -> float:
    """Return ``value`` as ``float`` after checking it is in range (never NaN).

    Parameters
    ----------
    value : float
        The value to check.
    name : str
        The argument's name, for the message.
    low, high : float or None
        Bounds; ``None`` is an open bound at -inf / inf (so an infinite value is refused).
    closed : {"neither", "left", "right", "both"}
        Which bounds are included.
    """
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"`{name}` must be a real number; got {type(value).__name__}.")
    v = float(value)
    left_ok = v > -np.inf if low is None else (v >= low if closed in ("left", "both") else v > low)
    right_ok = (
        v < np.inf if high is None else (v <= high if closed in ("right", "both") else v < high)
    )
    if np.isnan(v) or not (left_ok and right_ok):
        lb = "[" if closed in ("left", "both") else "("
        rb = "]" if closed in ("right", "both") else ")"
        lo = "-inf" if low is None else f"{low:g}"
        hi = "inf" if high is None else f"{high:g}"
        raise InvalidInputError(f"`{name}` must be in {lb}{lo}, {hi}{rb}; got {_python(value)!r}.")
    return v


def check_option(value: Any, name: str, options: tuple[str, ...]) -> str:
    """Check that ``value`` is one of the allowed string options."""
    if value not in options:
        allowed = ", ".join(repr(o) for o in options)
        raise InvalidInputError(f"`{name}` must be one of {allowed}; got {value!r}.")
    return str(value)


def check_embeddings(
    x: npt.ArrayLike, name: str = "embeddings", *, min_rows: int = 2
) -> npt.NDArray[np.float64]:
    """Validate one sample of embeddings and return it as a C-contiguous float64 array.

    Parameters
    ----------
    x : array_like, shape (n, d)
        Embeddings, one row per sample.
    name : str
        The argument's name, for the message.
    min_rows : int
        Fewest rows accepted.

    Returns
    -------
    numpy.ndarray of float64, shape (n, d)

    Raises
    ------
    InvalidInputError
        If ``x`` is not 2-D, is empty, has fewer than ``min_rows`` rows or holds NaN/inf.
        Auditors never drop rows themselves: filter with :class:`idaudit.EmbeddingSet`.
    """
    try:
        arr = np.asarray(x, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"`{name}` must be a numeric array; got {type(x).__name__}.") from exc
    if arr.ndim != 2:
        raise InvalidInputError(
            f"`{name}` must be a 2-D array of shape (n_samples, n_features); "
            f"got {arr.ndim}-D with shape {arr.shape}."
        )
    if arr.shape[1] == 0:
        raise InvalidInputError(f"`{name}` must have at least one feature; got shape {arr.shape}.")
    if arr.shape[0] < min_rows:
        raise InvalidInputError(f"`{name}` must have at least {min_rows} rows; got {arr.shape[0]}.")
    if not np.isfinite(arr).all():
        bad = int((~np.isfinite(arr)).any(axis=1).sum())
        raise InvalidInputError(
            f"`{name}` holds {bad} row(s) with NaN or inf; drop them first "
            "(idaudit.EmbeddingSet drops and counts them)."
        )
    return np.ascontiguousarray(arr)


def check_pair(
    emb_a: npt.ArrayLike, emb_b: npt.ArrayLike, *, min_rows: int = 2
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """Validate the two samples of one identity pair.

    Returns both as float64 arrays; raises if either fails :func:`check_embeddings` or if their
    dimensions differ (message ``"... 512 vs 128"``).
    """
    a = check_embeddings(emb_a, "emb_a", min_rows=min_rows)
    b = check_embeddings(emb_b, "emb_b", min_rows=min_rows)
    if a.shape[1] != b.shape[1]:
        raise InvalidInputError(
            "`emb_a` and `emb_b` must have the same number of features; "
            f"got {a.shape[1]} vs {b.shape[1]}."
        )
    return a, b


def check_pairs(pairs: Any, known: Iterable[Any], *, unknown: str) -> list[tuple[Any, Any]]:
    """Validate a list of identity pairs against the identities that exist.

    Parameters
    ----------
    pairs : sequence of (label, label) or array_like, shape (n_pairs, 2)
        At least one pair; each names two different identities.
    known : iterable
        The identities that exist, as stored (e.g. ``EmbeddingSet.identities``).
    unknown : str
        How the error for a label not in ``known`` ends, e.g. ``"which `es` does not contain"``.

    Returns
    -------
    list of tuple
        The pairs, each label replaced by the stored label it equals (so ``1.0`` or
        ``np.int64(1)`` become the stored ``1``).

    Raises
    ------
    TypeError
        If ``pairs`` is a string or not iterable.
    InvalidInputError
        If it is empty, an array of another shape, an item is not a pair, a label is unknown,
        a bool or unhashable, or a pair names one identity twice; the message names the item
        (``pairs[k]``).
    """
    if isinstance(pairs, np.ndarray):
        if pairs.ndim != 2 or pairs.shape[1] != 2:
            raise InvalidInputError(
                "`pairs` must be a sequence of (identity_a, identity_b) or an array of shape "
                f"(n_pairs, 2); got an array of shape {pairs.shape}."
            )
        items: list[Any] = pairs.tolist()
    else:
        try:
            if isinstance(pairs, (str, bytes)):
                raise TypeError
            items = list(pairs)
        except TypeError:
            raise TypeError(
                "`pairs` must be a sequence of (identity_a, identity_b); got "
                f"{type(pairs).__name__}."
            ) from None
    if not items:
        raise InvalidInputError("`pairs` must hold at least one pair; got none.")
    stored = {_python(label): _python(label) for label in known}
    out: list[tuple[Any, Any]] = []
    for k, item in enumerate(items):
        if isinstance(item, (str, bytes)) or not hasattr(item, "__len__") or len(item) != 2:
            raise InvalidInputError(
                f"`pairs[{k}]` must be a pair (identity_a, identity_b); got {item!r}."
            )
        found = []
        for label in map(_python, item):
            if isinstance(label, bool):  # True == 1: it would silently name identity 1
                raise InvalidInputError(f"`pairs[{k}]` names {label!r}; labels are not bools.")
            try:
                found.append(stored[label])
            except (KeyError, TypeError):  # TypeError: unhashable, so not a label
                raise InvalidInputError(
                    f"`pairs[{k}]` names identity {label!r}, {unknown}."
                ) from None
        a, b = found
        if a == b:
            raise InvalidInputError(
                f"`pairs[{k}]` pairs identity {a!r} with itself; an audit needs two identities."
            )
        out.append((a, b))
    return out


def _python(value: Any) -> Any:
    """Return the Python scalar a NumPy scalar holds; anything else unchanged."""
    return value.item() if isinstance(value, np.generic) else value


def check_positive_number(value: Any, name: str) -> float:
    """``value`` as a finite positive float, or a TypeError/InvalidInputError naming it."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"`{name}` must be a real number; got {type(value).__name__}.")
    v = float(value)
    if not np.isfinite(v) or v <= 0:
        raise InvalidInputError(f"`{name}` must be a finite number > 0; got {value!r}.")
    return v


# -- declared parameter constraints ----------------------------------------------------------
#
# An estimator lists one constraint per constructor parameter in ``_parameter_constraints``
# (the idea of scikit-learn's ``_parameter_constraints``, written small); ``validate_params``
# checks them all at ``fit``, so ``__init__`` only stores and every message has one spelling.


class Constraint(Protocol):
    """What a parameter constraint does: return the checked value or raise naming ``name``."""

    def check(self, value: Any, name: str) -> Any:
        """Return ``value`` (converted, e.g. to ``float``) or raise naming ``name``."""

    def invalid(self) -> tuple[Any, ...]:
        """Values this constraint refuses (used by the estimator check suites)."""


@dataclass(frozen=True)
class Interval:
    """A real (``integer=False``) or integer number in an interval.

    Integers take ``low`` as their minimum (``closed`` is ignored; ``high`` must be None).
    """

    low: float | None = None
    high: float | None = None
    closed: str = "neither"
    integer: bool = False

    def check(self, value: Any, name: str) -> Any:
        if self.integer:
            return check_integer(value, name, minimum=None if self.low is None else int(self.low))
        return check_in_range(value, name, self.low, self.high, closed=self.closed)

    def invalid(self) -> tuple[Any, ...]:
        if self.integer:
            return ("3", 2.5) + (() if self.low is None else (int(self.low) - 1,))
        out: tuple[Any, ...] = ("0.5", float("nan"))
        if self.low is not None:
            out += (self.low - 1.0,)
        if self.high is not None:
            out += (self.high + 1.0,)
        return out


@dataclass(frozen=True)
class Options:
    """One of a few allowed values (strings, as a rule)."""

    values: tuple[Any, ...]

    def check(self, value: Any, name: str) -> Any:
        return check_option(value, name, self.values)

    def invalid(self) -> tuple[Any, ...]:
        return ("no such option",)


@dataclass(frozen=True)
class Positive:
    """A finite real number > 0."""

    def check(self, value: Any, name: str) -> float:
        return check_positive_number(value, name)

    def invalid(self) -> tuple[Any, ...]:
        return (0.0, -1.0, float("inf"), "1")


@dataclass(frozen=True)
class OptionOrPositive:
    """A named rule (one of ``options``) or a finite positive number, e.g. a bandwidth."""

    options: tuple[str, ...]

    def check(self, value: Any, name: str) -> Any:
        rule = " or ".join(repr(o) for o in self.options) + " or a positive number"
        if isinstance(value, str):
            if value not in self.options:
                raise InvalidInputError(f"`{name}` must be {rule}; got {value!r}.")
            return value
        if not isinstance(value, bool) and isinstance(value, numbers.Real):
            return check_positive_number(value, name)
        raise TypeError(f"`{name}` must be {rule}; got {type(value).__name__}.")

    def invalid(self) -> tuple[Any, ...]:
        return ("no such rule", -1.0, [1.0])


@dataclass(frozen=True)
class IntegerOrOption:
    """A named rule (one of ``options``) or an integer of at least ``minimum``."""

    options: tuple[str, ...]
    minimum: int = 1

    def check(self, value: Any, name: str) -> Any:
        if isinstance(value, str):
            if value not in self.options:
                rule = " or ".join(repr(o) for o in self.options)
                raise InvalidInputError(
                    f"`{name}` must be {rule} or an integer >= {self.minimum}; got {value!r}."
                )
            return value
        return check_integer(value, name, minimum=self.minimum)

    def invalid(self) -> tuple[Any, ...]:
        return ("no such rule", 2.5, self.minimum - 1)


@dataclass(frozen=True)
class RandomState:
    """Anything :func:`check_random_state` accepts; a ``Generator`` is not advanced."""

    def check(self, value: Any, name: str) -> Any:
        if not isinstance(value, np.random.Generator):
            check_random_state(value)  # type and sign only
        return value

    def invalid(self) -> tuple[Any, ...]:
        return (-1, "seed", 1.5)


@dataclass(frozen=True)
class Boolean:
    """``True`` or ``False``."""

    def check(self, value: Any, name: str) -> bool:
        if not isinstance(value, (bool, np.bool_)):
            raise TypeError(f"`{name}` must be a bool; got {type(value).__name__}.")
        return bool(value)

    def invalid(self) -> tuple[Any, ...]:
        return ("yes", 1)


@dataclass(frozen=True)
class Device:
    """A torch device that can run here (``"cpu"``, ``"cuda"``, ``"cuda:<i>"``); no fallback."""

    def check(self, value: Any, name: str) -> Any:
        from idaudit._device import resolve_device  # torch only when a device is checked

        resolve_device(value)
        return value

    def invalid(self) -> tuple[Any, ...]:
        return ("tpu", 3)


@dataclass(frozen=True)
class Label:
    """``None`` or a name matching ``pattern`` and not in ``reserved`` (a variable prefix)."""

    pattern: str
    rule: str
    reserved: frozenset[str] = frozenset()

    def check(self, value: Any, name: str) -> Any:
        import re

        if value is not None and (
            not isinstance(value, str)
            or re.fullmatch(self.pattern, value) is None
            or value in self.reserved
        ):
            raise InvalidInputError(f"`{name}` must be None or {self.rule}; got {value!r}.")
        return value

    def invalid(self) -> tuple[Any, ...]:
        return ("1st", "a b", *sorted(self.reserved))


@dataclass(frozen=True)
class NoneOr:
    """``None`` (the parameter is not used), or a value ``inner`` accepts.

    E.g. ``NoneOr(Interval(0.0, None))``: ``None`` or a finite number > 0.
    """

    inner: Constraint

    def check(self, value: Any, name: str) -> Any:
        return None if value is None else self.inner.check(value, name)

    def invalid(self) -> tuple[Any, ...]:
        return self.inner.invalid()


@dataclass(frozen=True)
class Anything:
    """Any value: the rule is checked where its meaning is known.

    For a parameter whose check needs another input of ``fit`` (e.g. ``pairs``, checked
    against the mechanism's identities); it refuses nothing here, so :meth:`invalid` is empty.
    """

    def check(self, value: Any, name: str) -> Any:
        return value

    def invalid(self) -> tuple[Any, ...]:
        return ()


@dataclass(frozen=True)
class MechanismLike:
    """Anything with ``identities`` and a callable ``sample`` (the Mechanism protocol).

    The protocol is :class:`idaudit.mechanisms.Mechanism`: ``sample(identity, n, *, rng)``
    returns ``n`` outputs of the mechanism for ``identity``.
    """

    def check(self, value: Any, name: str) -> Any:
        if not (hasattr(value, "identities") and callable(getattr(value, "sample", None))):
            raise TypeError(
                f"`{name}` must follow the idaudit.mechanisms.Mechanism protocol "
                f"(`identities` and `sample(identity, n, *, rng)`); got {type(value).__name__}."
            )
        return value

    def invalid(self) -> tuple[Any, ...]:
        return (None, "mechanism")


@dataclass(frozen=True)
class Classifier:
    """A named classifier (one of ``options``) or a clonable scikit-learn-style classifier.

    An estimator needs ``fit``, ``get_params`` (so that :func:`sklearn.base.clone` can copy
    it) and ``decision_function`` or ``predict_proba``, and cloning it must succeed. A name is
    returned as is; what it means is up to the estimator that declares the constraint.
    """

    options: tuple[str, ...]

    def check(self, value: Any, name: str) -> Any:
        named = ", ".join(repr(o) for o in self.options)
        if isinstance(value, str):
            if value not in self.options:
                raise InvalidInputError(
                    f"`{name}` must be one of {named} or a scikit-learn-style estimator; "
                    f"got {value!r}."
                )
            return value
        if not all(hasattr(value, m) for m in ("fit", "get_params")) or not (
            hasattr(value, "decision_function") or hasattr(value, "predict_proba")
        ):
            raise TypeError(
                f"`{name}` must be {named} or a scikit-learn-style estimator with `fit`, "
                "`get_params` (so that it can be cloned) and `decision_function` or "
                f"`predict_proba`; got {type(value).__name__}."
            )
        from sklearn.base import clone  # scikit-learn only when an estimator is checked

        try:
            clone(value)
        except (TypeError, RuntimeError, AttributeError, ValueError) as exc:
            raise TypeError(
                f"`{name}` must be clonable with sklearn.base.clone; cloning "
                f"{type(value).__name__} failed: {exc}"
            ) from exc
        return value

    def invalid(self) -> tuple[Any, ...]:
        return ("no such classifier", object())


def validate_params(
    params: Mapping[str, Any], constraints: Mapping[str, Constraint]
) -> dict[str, Any]:
    """Check every parameter against its declared constraint; return the checked values.

    Parameters
    ----------
    params : mapping
        Parameter name -> value (``estimator.get_params(deep=False)``).
    constraints : mapping
        Parameter name -> constraint, one for every parameter.

    Returns
    -------
    dict
        Parameter name -> the value the constraint returned (e.g. ``float(value)``).

    Raises
    ------
    TypeError, InvalidInputError
        From the first constraint that fails, naming the parameter.
    KeyError
        If a parameter has no declared constraint (a programming error of the estimator).

    Examples
    --------
    >>> from idaudit._validation import Interval, validate_params
    >>> validate_params({"n": 3}, {"n": Interval(1, integer=True)})
    {'n': 3}
    """
    missing = sorted(set(params) - set(constraints))
    if missing:
        raise KeyError(f"no constraint declared for the parameter(s) {missing}")
    return {key: constraints[key].check(value, key) for key, value in params.items()}
