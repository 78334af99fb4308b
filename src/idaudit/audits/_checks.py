"""``check_auditor``: the contract every auditor must honour, as one reusable check suite."""

from __future__ import annotations

import math
import re
from typing import Any

import numpy as np
from sklearn.base import clone

from idaudit._results import EPSILON_STATUSES
from idaudit.audits._base import LABEL_PATTERN, BaseAuditor
from idaudit.exceptions import InvalidInputError, NotFittedError

__all__ = ["check_auditor"]


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


def check_auditor(auditor: BaseAuditor) -> None:
    """Check that an auditor honours the idaudit estimator contract.

    Like scikit-learn's ``check_estimator``: run it on a new auditor (a subclass of
    :class:`BaseAuditor`) in its test suite. It works on copies (``sklearn.base.clone``), so
    ``auditor`` itself is left unfitted.

    Parameters
    ----------
    auditor : BaseAuditor
        An unfitted instance with the parameters to check.

    Raises
    ------
    AssertionError
        Naming the first property that fails:

        * ``get_params``/``set_params``/``clone`` round-trip;
        * reading ``epsilon_`` before ``fit`` raises ``NotFittedError`` (and ``hasattr`` is
          False);
        * ``fit`` returns ``self``; ``epsilon_`` is a float ≥ 0 or ``+inf``; ``status`` is a
          known status and ``label`` an identifier;
        * swapping the identities leaves ``epsilon_`` unchanged when ``symmetric`` is True;
        * shuffling rows leaves ``epsilon_`` unchanged when ``row_order_invariant`` is True;
        * 1-D, empty, too-short, non-finite and dimension-mismatched inputs raise
          ``InvalidInputError`` with the documented messages;
        * :func:`idaudit.audit_pairs` over pairs of different sizes, in batches of 1 and of
          all pairs, equals ``fit`` pair by pair to 1e-6.

    Examples
    --------
    >>> from idaudit import GaussMechAuditor
    >>> from idaudit.audits import check_auditor
    >>> check_auditor(GaussMechAuditor())
    """
    from idaudit.audits._engine import audit_pairs
    from idaudit.data import EmbeddingSet

    _require(isinstance(auditor, BaseAuditor), f"{auditor!r} is not a BaseAuditor")
    name = type(auditor).__name__
    params = auditor.get_params(deep=False)
    twin = clone(auditor)
    _require(twin.get_params(deep=False).keys() == params.keys(), f"{name}: clone lost parameters")
    twin.set_params(**params)
    for key, value in params.items():
        got = twin.get_params(deep=False)[key]
        _require(got is value or got == value, f"{name}: set_params/get_params round-trip of {key}")
    _require(auditor.status in EPSILON_STATUSES, f"{name}: unknown status {auditor.status!r}")
    _require(
        LABEL_PATTERN.fullmatch(auditor.label) is not None,
        f"{name}: label {auditor.label!r} does not match {LABEL_PATTERN.pattern}",
    )
    _require("status" in repr(auditor), f"{name}: repr does not state the formal status")

    fresh = clone(auditor)
    try:
        fresh.epsilon_  # noqa: B018 - the read is the check
    except NotFittedError:
        pass
    else:
        raise AssertionError(f"{name}: reading epsilon_ before fit did not raise NotFittedError")
    _require(not hasattr(fresh, "epsilon_"), f"{name}: hasattr(epsilon_) is True before fit")

    n = max(12, 2 * auditor.min_rows())
    a, b = _data(0, n, 6, 0.0), _data(1, n + 3, 6, 0.3)
    est = clone(auditor)
    _require(est.fit(a, b) is est, f"{name}: fit does not return self")
    eps = est.epsilon_
    _require(isinstance(eps, float), f"{name}: epsilon_ is {type(eps).__name__}, not float")
    _require(eps >= 0.0, f"{name}: epsilon_ = {eps!r} is not >= 0 or inf")
    for out in est.outputs():
        _require(hasattr(est, out.name + "_"), f"{name}: output {out.name!r} has no attribute")

    if auditor.symmetric:
        swapped = clone(auditor).fit(b, a).epsilon_
        _require(_close(eps, swapped, 1e-9), f"{name}: not symmetric ({eps!r} vs {swapped!r})")
    if auditor.row_order_invariant:
        gen = np.random.default_rng(2)
        shuffled = clone(auditor).fit(a[gen.permutation(n)], b[gen.permutation(n + 3)]).epsilon_
        _require(
            _close(eps, shuffled, 1e-9),
            f"{name}: not row-order invariant ({eps!r} vs {shuffled!r})",
        )

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
