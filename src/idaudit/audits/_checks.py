"""``check_auditor``: the contract every auditor must honour, as named, reusable checks."""

from __future__ import annotations

import inspect
import math
import pickle
import re
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from sklearn.base import clone

from idaudit._results import EPSILON_STATUSES
from idaudit.audits._base import LABEL_PATTERN, BaseAuditor
from idaudit.exceptions import InvalidInputError, NotFittedError

__all__ = ["AUDITOR_CHECKS", "check_auditor", "parametrize_auditor_checks"]


def _data(seed: int, n: int, d: int, shift: float) -> np.ndarray:
    gen = np.random.default_rng(seed)
    x = gen.normal(size=(n, d)) + shift
    out: np.ndarray = x / np.linalg.norm(x, axis=1, keepdims=True)
    return out


def _close(x: float, y: float, rtol: float) -> bool:
    if math.isinf(x) or math.isinf(y):
        return x == y
    return abs(x - y) <= rtol * max(1.0, abs(x), abs(y))


def _require(condition: bool, message: str) -> None:
    """Raise ``AssertionError(message)`` unless ``condition`` (kept under ``python -O``)."""
    if not condition:
        raise AssertionError(message)


def _pair(auditor: BaseAuditor) -> tuple[np.ndarray, np.ndarray]:
    n = max(12, 2 * auditor.min_rows())
    return _data(0, n, 6, 0.0), _data(1, n + 3, 6, 0.3)


def _same_outputs(x: BaseAuditor, y: BaseAuditor, rtol: float) -> bool:
    for out in x.outputs():
        a, b = getattr(x, out.name + "_"), getattr(y, out.name + "_")
        if not all(
            _close(float(u), float(v), rtol) for u, v in zip(np.ravel(a), np.ravel(b), strict=True)
        ):
            return False
    return True


# -- the checks, each named after the property it checks -----------------------------------


def check_params_round_trip(auditor: BaseAuditor) -> None:
    """``get_params``/``set_params``/``clone`` keep every parameter."""
    name = type(auditor).__name__
    params = auditor.get_params(deep=False)
    twin = clone(auditor)
    _require(twin.get_params(deep=False).keys() == params.keys(), f"{name}: clone lost parameters")
    twin.set_params(**params)
    for key, value in params.items():
        got = twin.get_params(deep=False)[key]
        _require(got is value or got == value, f"{name}: set_params/get_params round-trip of {key}")


def check_init_stores_only(auditor: BaseAuditor) -> None:
    """``__init__`` sets exactly its parameters, unchanged, and nothing else."""
    name = type(auditor).__name__
    params = auditor.get_params(deep=False)
    fresh = type(auditor)(**params)
    _require(
        set(vars(fresh)) == set(params),
        f"{name}: __init__ sets {sorted(set(vars(fresh)) - set(params))} besides its parameters",
    )
    for key, value in params.items():
        _require(vars(fresh)[key] is value, f"{name}: __init__ changed the parameter {key}")


def check_declares_constraints(auditor: BaseAuditor) -> None:
    """Every constructor parameter has a declared constraint, and no other name does."""
    name = type(auditor).__name__
    declared = set(type(auditor)._parameter_constraints)
    params = set(inspect.signature(type(auditor).__init__).parameters) - {"self"}
    _require(
        declared == params, f"{name}: constraints {sorted(declared)} vs parameters {sorted(params)}"
    )


def check_status_label_repr(auditor: BaseAuditor) -> None:
    """``status`` is an ε status, ``label`` a valid label, and the repr states the status."""
    name = type(auditor).__name__
    _require(auditor.status in EPSILON_STATUSES, f"{name}: unknown status {auditor.status!r}")
    _require(
        LABEL_PATTERN.fullmatch(auditor.label) is not None,
        f"{name}: label {auditor.label!r} does not match {LABEL_PATTERN.pattern}",
    )
    _require("status" in repr(auditor), f"{name}: repr does not state the formal status")


def check_not_fitted(auditor: BaseAuditor) -> None:
    """Check that reading ``epsilon_`` before ``fit`` raises ``NotFittedError``."""
    name = type(auditor).__name__
    fresh = clone(auditor)
    try:
        fresh.epsilon_  # noqa: B018 - the read is the check
    except NotFittedError:
        pass
    else:
        raise AssertionError(f"{name}: reading epsilon_ before fit did not raise NotFittedError")
    _require(not hasattr(fresh, "epsilon_"), f"{name}: hasattr(epsilon_) is True before fit")


def check_fit(auditor: BaseAuditor) -> None:
    """``fit`` returns ``self``; ``epsilon_`` is a float >= 0 or inf; every output is set."""
    name = type(auditor).__name__
    a, b = _pair(auditor)
    est = clone(auditor)
    _require(est.fit(a, b) is est, f"{name}: fit does not return self")
    eps = est.epsilon_
    _require(isinstance(eps, float), f"{name}: epsilon_ is {type(eps).__name__}, not float")
    _require(eps >= 0.0, f"{name}: epsilon_ = {eps!r} is not >= 0 or inf")
    for out in est.outputs():
        _require(hasattr(est, out.name + "_"), f"{name}: output {out.name!r} has no attribute")


def check_refit_idempotent(auditor: BaseAuditor) -> None:
    """Fitting twice on the same data gives the same outputs (a Generator ``rng`` aside)."""
    if isinstance(getattr(auditor, "rng", None), np.random.Generator):
        return  # a Generator advances by design: the second fit draws a new seed
    name = type(auditor).__name__
    a, b = _pair(auditor)
    est = clone(auditor)
    first = clone(auditor).fit(a, b)
    est.fit(_data(5, a.shape[0], 6, 0.5), b)  # fitted state from other data is replaced
    est.fit(a, b)
    _require(_same_outputs(first, est, 0.0), f"{name}: refitting changed the outputs")


def check_pickle(auditor: BaseAuditor) -> None:
    """Check that auditors pickle, fitted or not (dask ships them), keeping their outputs."""
    name = type(auditor).__name__
    a, b = _pair(auditor)
    fitted = clone(auditor).fit(a, b)
    try:
        again = pickle.loads(pickle.dumps(clone(auditor)))
        back = pickle.loads(pickle.dumps(fitted))
    except (TypeError, AttributeError, pickle.PicklingError) as exc:
        raise AssertionError(f"{name}: cannot be pickled ({exc})") from None
    _require(
        again.get_params(deep=False).keys() == auditor.get_params(deep=False).keys(),
        f"{name}: pickling lost parameters",
    )
    _require(_same_outputs(fitted, back, 0.0), f"{name}: pickling changed the outputs")


def _same_epsilon(auditor: BaseAuditor, change: Callable[..., Any], what: str) -> None:
    """Require ``epsilon_`` on the pair and on ``change(a, b)`` to agree (``what`` it is)."""
    a, b = _pair(auditor)
    eps = clone(auditor).fit(a, b).epsilon_
    changed = clone(auditor).fit(*change(a, b)).epsilon_
    _require(
        _close(eps, changed, 1e-9),
        f"{type(auditor).__name__}: not {what} ({eps!r} vs {changed!r})",
    )


def check_symmetry(auditor: BaseAuditor) -> None:
    """Check that swapping the identities keeps ``epsilon_`` when ``symmetric`` is True."""
    if auditor.symmetric:
        _same_epsilon(auditor, lambda a, b: (b, a), "symmetric")


def check_row_order(auditor: BaseAuditor) -> None:
    """Shuffling rows leaves ``epsilon_`` unchanged when ``row_order_invariant`` is True."""
    if auditor.row_order_invariant:
        gen = np.random.default_rng(2)
        _same_epsilon(
            auditor,
            lambda a, b: (a[gen.permutation(len(a))], b[gen.permutation(len(b))]),
            "row-order invariant",
        )


def check_bad_input(auditor: BaseAuditor) -> None:
    """1-D, empty, too short, non-finite and mismatched inputs raise the documented errors."""
    name = type(auditor).__name__
    a, b = _pair(auditor)
    bad: list[tuple[Any, Any, str]] = [
        (a[0], b, "2-D array"),
        (np.empty((0, 6)), b, "at least"),
        (a[:1], b, "at least"),
        (np.where(np.arange(6) == 2, np.nan, a), b, "NaN or inf"),
        (a, b[:, :5], "same number of features"),
    ]
    for x, y, message in bad:
        try:
            clone(auditor).fit(x, y)
        except InvalidInputError as exc:
            _require(re.search(message, str(exc)) is not None, f"{name}: bad message {exc!s}")
        else:
            raise AssertionError(f"{name}: bad input ({message}) was accepted")


def check_bad_params(auditor: BaseAuditor) -> None:
    """Each parameter's refused values raise at ``fit``, naming the parameter."""
    name = type(auditor).__name__
    a, b = _pair(auditor)
    for key, constraint in type(auditor)._parameter_constraints.items():
        for value in constraint.invalid():
            est = clone(auditor).set_params(**{key: value})
            try:
                est.fit(a, b)
            except (TypeError, InvalidInputError) as exc:
                _require(f"`{key}`" in str(exc), f"{name}: {key}={value!r} raised {exc!s}")
            else:
                raise AssertionError(f"{name}: {key}={value!r} was accepted")


def check_audit_pairs_matches_fit(auditor: BaseAuditor) -> None:
    """``audit_pairs`` over pairs of different sizes, batched by 1 and by all, equals ``fit``."""
    from idaudit.audits._engine import audit_pairs
    from idaudit.data import EmbeddingSet

    name = type(auditor).__name__
    n = max(12, 2 * auditor.min_rows())
    sizes = [(n, n + 3), (n + 1, n), (n + 4, n + 2)]
    rows, labels, pairs, singles = [], [], [], []
    for k, (na, nb) in enumerate(sizes):
        x, y = _data(10 + k, na, 6, 0.0), _data(20 + k, nb, 6, 0.2 * k + 0.1)
        rows += [x, y]
        labels += [f"p{k}a"] * na + [f"p{k}b"] * nb
        pairs.append((f"p{k}a", f"p{k}b"))
        singles.append(clone(auditor).fit(x, y))
    es = EmbeddingSet(np.vstack(rows), labels, normalize=False)
    for batch_size in (1, len(pairs)):
        ds = audit_pairs(es, pairs, [clone(auditor)], batch_size=batch_size, progress=False)
        for out in auditor.outputs():
            got = ds[f"{auditor.label}_{out.name}"].values
            for k, single in enumerate(singles):
                want = getattr(single, out.name + "_")
                if out.dims:
                    ok = np.shape(got[k]) == np.shape(want) and all(
                        _close(float(g), float(w), 1e-6)
                        for g, w in zip(np.ravel(got[k]), np.ravel(want), strict=True)
                    )
                else:
                    ok = (
                        bool(got[k]) == bool(want)
                        if out.dtype is bool
                        else _close(float(got[k]), float(want), 1e-6)
                    )
                _require(
                    ok,
                    f"{name}: audit_pairs(batch_size={batch_size}) {out.name} of pair {k} is "
                    f"{got[k]!r}, fit gives {want!r}",
                )


#: Every check of the auditor contract, by name, in the order :func:`check_auditor` runs them.
AUDITOR_CHECKS: dict[str, Callable[[BaseAuditor], None]] = {
    fn.__name__.removeprefix("check_"): fn
    for fn in (
        check_params_round_trip,
        check_init_stores_only,
        check_declares_constraints,
        check_status_label_repr,
        check_not_fitted,
        check_fit,
        check_refit_idempotent,
        check_pickle,
        check_symmetry,
        check_row_order,
        check_bad_input,
        check_bad_params,
        check_audit_pairs_matches_fit,
    )
}


def check_auditor(auditor: BaseAuditor) -> None:
    """Check that an auditor honours the idaudit estimator contract.

    Like scikit-learn's ``check_estimator``: run it on a new auditor (a subclass of
    :class:`BaseAuditor`) in its test suite, or run the checks one test each with
    :func:`parametrize_auditor_checks`. It works on copies (``sklearn.base.clone``), so
    ``auditor`` itself is left unfitted.

    Parameters
    ----------
    auditor : BaseAuditor
        An unfitted instance with the parameters to check.

    Raises
    ------
    AssertionError
        Naming every check of :data:`AUDITOR_CHECKS` that fails, and why:

        * ``params_round_trip``: ``get_params``/``set_params``/``clone`` round-trip;
        * ``init_stores_only``: ``__init__`` sets its parameters, unchanged, and nothing else;
        * ``declares_constraints``: one declared constraint per constructor parameter;
        * ``status_label_repr``: ``status`` is an ε status
          (:data:`idaudit.results.EPSILON_STATUSES`), ``label`` an identifier, and the repr
          states the status;
        * ``not_fitted``: reading ``epsilon_`` before ``fit`` raises ``NotFittedError``;
        * ``fit``: ``fit`` returns ``self``; ``epsilon_`` is a float ≥ 0 or ``+inf``;
        * ``refit_idempotent``: fitting again on the same data gives the same outputs;
        * ``pickle``: fitted and unfitted auditors survive ``pickle`` with their outputs;
        * ``symmetry`` / ``row_order``: swapping identities / shuffling rows leaves
          ``epsilon_`` unchanged when ``symmetric`` / ``row_order_invariant`` is True;
        * ``bad_input``: 1-D, empty, too-short, non-finite and dimension-mismatched inputs raise
          ``InvalidInputError`` with the documented messages;
        * ``bad_params``: every value a parameter's constraint refuses raises at ``fit``,
          naming the parameter;
        * ``audit_pairs_matches_fit``: :func:`idaudit.audit_pairs` over pairs of different
          sizes, in batches of 1 and of all pairs, equals ``fit`` pair by pair to 1e-6.

    Examples
    --------
    >>> from idaudit import GaussMechAuditor
    >>> from idaudit.audits import check_auditor
    >>> check_auditor(GaussMechAuditor())
    """
    _require(isinstance(auditor, BaseAuditor), f"{auditor!r} is not a BaseAuditor")
    failures = []
    for check_name, check in AUDITOR_CHECKS.items():
        try:
            check(auditor)
        except AssertionError as exc:
            failures.append(f"{check_name}: {exc}")
    if failures:
        raise AssertionError("\n".join(failures))


def parametrize_auditor_checks(auditors: Sequence[BaseAuditor]) -> Any:
    """Build a ``pytest.mark.parametrize`` running every named check on every auditor.

    Parameters
    ----------
    auditors : sequence of BaseAuditor
        Unfitted instances to check.

    Returns
    -------
    pytest.MarkDecorator
        Parametrizes the arguments ``auditor`` and ``check`` (a function taking the auditor),
        with ids ``"<auditor repr>-<check name>"``.

    Examples
    --------
    >>> from idaudit import GaussMechAuditor
    >>> from idaudit.audits import parametrize_auditor_checks
    >>> @parametrize_auditor_checks([GaussMechAuditor()])
    ... def test_contract(auditor, check):
    ...     check(auditor)
    """
    import pytest

    cases = [
        pytest.param(aud, check, id=f"{repr(aud).split('  #')[0]}-{check_name}")
        for aud in auditors
        for check_name, check in AUDITOR_CHECKS.items()
    ]
    return pytest.mark.parametrize(("auditor", "check"), cases)
