"""The results core: formal statuses, result Datasets, provenance and owner-only file writing.

Every number idaudit reports carries a *formal status* (what kind of statement it is), every
result Dataset is built and checked the same way, and every file written from biometric data
(embeddings, crops, anything derived from them) goes through the atomic, owner-only writers
here. Other modules import these names; none defines its own copy.
"""

from __future__ import annotations

import importlib.util
import json
import math
import numbers
import os
import platform
import tempfile
from collections.abc import Callable, Hashable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Literal, NamedTuple, get_args

import numpy as np
import pandas as pd
import xarray as xr

from idaudit._version import __version__
from idaudit.exceptions import InvalidInputError

__all__ = [
    "CERTIFIED_STATUSES",
    "EPSILON_STATUSES",
    "FAILURE_PAIR_COORDS",
    "PAIR_COORDS",
    "STATUSES",
    "AttrValue",
    "ReducedStatus",
    "Status",
    "atomic_path",
    "attr_value",
    "check_result_dataset",
    "check_status",
    "describe",
    "json_text",
    "pair_coords",
    "pair_dataset",
    "pair_frame",
    "private_dir",
    "provenance",
    "reconcile_attrs",
    "reduce_status",
    "reduction_attrs",
    "reduction_attrs_across",
    "variable",
    "write_atomic",
    "write_csv",
    "write_json",
    "write_netcdf",
    "write_text",
]

#: Every formal status a reported number can carry.
Status = Literal[
    "diagnostic",
    "sample_estimate",
    "certified_lower_bound",
    "certified_upper_bound",
    "reference",
    "descriptive",
]

#: Each status with the one-line meaning docs/status.md expands on (weakest ε statement first).
STATUSES: Mapping[str, str] = {
    "diagnostic": (
        "computed under modelling or aggregation assumptions the data do not satisfy, or chosen "
        "on the data it is evaluated on; not a bound at any confidence"
    ),
    "sample_estimate": (
        "the plug-in sample value of a population quantity with a valid population meaning; "
        "no confidence correction, so it can overshoot"
    ),
    "certified_lower_bound": (
        "a lower bound holding with a stated probability under the stated sampling model, "
        "every adaptive choice fixed before the evaluation data were seen"
    ),
    "certified_upper_bound": (
        "an upper bound holding with a stated probability (e.g. an exact one-sided "
        "Clopper-Pearson bound on an error rate), or an epsilon proved in closed form for a "
        "mechanism, which holds with probability one under its stated assumptions"
    ),
    "reference": (
        "a property of a benchmark mechanism proved in closed form (a true epsilon), the truth "
        "estimates are checked against"
    ),
    "descriptive": (
        "an exact property of the inputs or of the run (a count, a size, a setting), "
        "not an estimate of anything"
    ),
}
assert tuple(STATUSES) == get_args(Status)  # one list, two spellings

#: The statuses an ε estimated from audit data may carry (weakest first).
EPSILON_STATUSES: tuple[Status, ...] = ("diagnostic", "sample_estimate", "certified_lower_bound")

#: The statuses that hold with a stated probability; a number derived from several of them
#: keeps the status only when they hold jointly (:func:`reduce_status`).
CERTIFIED_STATUSES: tuple[Status, ...] = ("certified_lower_bound", "certified_upper_bound")

#: What a netCDF attribute may hold.
AttrValue = str | int | float


def check_status(status: Any) -> Status:
    """Return ``status`` if it is a known status label, else raise.

    Parameters
    ----------
    status : str
        A key of :data:`STATUSES`.

    Returns
    -------
    str
        ``status``.

    Raises
    ------
    InvalidInputError
        If ``status`` is not a known label.

    Examples
    --------
    >>> from idaudit._results import check_status
    >>> check_status("reference")
    'reference'
    """
    if not isinstance(status, str) or status not in STATUSES:
        raise InvalidInputError(f"`status` must be one of {', '.join(STATUSES)}; got {status!r}.")
    return status  # type: ignore[return-value]


class ReducedStatus(NamedTuple):
    """The status of a number derived from several others, and why it changed (if it did)."""

    status: Status
    reason: str


def reduce_status(status: Any, n_values: int, *, n_simultaneous: int = 1) -> ReducedStatus:
    """Status of a maximum, quantile, arg-max or summary over ``n_values`` numbers of one status.

    A maximum over certified bounds is certified only when the bounds hold *jointly*: the
    largest of n bounds each valid with probability 1 − α is valid with probability 1 − nα at
    worst (the pair that reaches it is chosen by the data). Each certified variable therefore
    records ``n_simultaneous``, the number of its values whose bounds hold together at its
    stated confidence (each was taken at level α / ``n_simultaneous``, or a simultaneous
    procedure covered that many). A number reduced from ``n_values`` of them stays certified
    when ``n_values <= n_simultaneous`` (the union bound then pays for every value it may
    pick; order statistics of jointly valid lower bounds are lower bounds on the same order
    statistics of the truths), and becomes a ``sample_estimate`` otherwise. Other statuses
    carry over unchanged. Every reducer in idaudit decides its status here.

    Parameters
    ----------
    status : str
        The status of the values reduced (a key of :data:`STATUSES`).
    n_values : int
        How many values the reduction looks at (pairs for a maximum over pairs), >= 1.
    n_simultaneous : int, default 1
        How many of those values hold jointly at the stated confidence, >= 1.

    Returns
    -------
    ReducedStatus
        ``(status, reason)``; ``reason`` is ``""`` when the status carried over, else a
        sentence for the result's ``status_reason`` attribute.

    Raises
    ------
    InvalidInputError
        If ``status`` is unknown or a count is below 1.

    Examples
    --------
    >>> from idaudit._results import reduce_status
    >>> reduce_status("certified_lower_bound", 300).status
    'sample_estimate'
    >>> reduce_status("certified_lower_bound", 300, n_simultaneous=300).status
    'certified_lower_bound'
    >>> reduce_status("diagnostic", 300).status
    'diagnostic'
    """
    checked = check_status(status)
    given: dict[str, object] = {"n_values": n_values, "n_simultaneous": n_simultaneous}
    for name, value in given.items():  # typed object: the annotations promise, this checks
        if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
            raise InvalidInputError(f"`{name}` must be an integer >= 1; got {value!r}.")
    if checked not in CERTIFIED_STATUSES or n_values <= n_simultaneous:
        return ReducedStatus(checked, "")
    return ReducedStatus(
        "sample_estimate",
        f"derived from {int(n_values)} {checked.replace('_', ' ')}s of which only "
        f"{int(n_simultaneous)} hold jointly at the stated confidence (the multiplicity is "
        "not paid for; set n_simultaneous to at least the number of values, e.g. "
        "n_simultaneous='pairs')",
    )


def reduction_attrs(attrs: Mapping[str, Any], n_values: int) -> dict[str, Any]:
    """Return the status attributes of a number reduced from ``n_values`` values of a variable.

    Reads the variable's ``status`` and ``n_simultaneous`` (1 when absent) and applies
    :func:`reduce_status`.

    Parameters
    ----------
    attrs : mapping
        The reduced variable's attributes.
    n_values : int
        How many of its values the reduction looks at.

    Returns
    -------
    dict
        ``status``; ``n_simultaneous`` when the result is still certified; ``status_reason``
        when the status was lowered.

    Examples
    --------
    >>> from idaudit._results import reduction_attrs
    >>> reduction_attrs({"status": "certified_lower_bound", "n_simultaneous": 5}, 5)
    {'status': 'certified_lower_bound', 'n_simultaneous': 5}
    """
    n_sim = int(attrs.get("n_simultaneous", 1))
    status, reason = reduce_status(attrs.get("status"), int(n_values), n_simultaneous=n_sim)
    out: dict[str, Any] = {"status": status}
    if status in CERTIFIED_STATUSES:
        out["n_simultaneous"] = n_sim
    if reason:
        out["status_reason"] = reason
    return out


def reduction_attrs_across(
    parts: Sequence[tuple[Mapping[str, Any], int]], *, what: str = "conditions"
) -> dict[str, Any]:
    """Status attributes of a number reduced over several families (conditions) at once.

    A column of a table with one row per condition, a maximum over conditions, a plot whose
    columns are conditions: each condition's values were certified as their own family,
    each family's bounds hold jointly at its stated confidence, and a reader of the whole
    column picks among all of them. The union bound then pays for every value only when
    the families were certified together (``n_families`` of the reserved-test certifier,
    ``n_simultaneous`` of any certified variable): each value of family c was taken at
    level α / ``n_simultaneous`` of c, so the union bound holds when the sum over the
    families of (values looked at / ``n_simultaneous``) is at most 1. Each family is first
    reduced on its own (:func:`reduction_attrs`); the joint status is then decided by
    :func:`reduce_status` on that sum (scaled to integers by the least common multiple of
    the ``n_simultaneous``). Other statuses carry over (the weakest wins).

    Parameters
    ----------
    parts : sequence of (mapping, int)
        Per family: the reduced variable's attributes (``status``, ``n_simultaneous``) and
        how many of its values the reduction looks at (>= 1).
    what : str, default "conditions"
        What the families are, for the ``status_reason`` sentence.

    Returns
    -------
    dict
        ``status``; ``n_simultaneous`` when the result is still certified;
        ``status_reason`` when the status was lowered.

    Raises
    ------
    InvalidInputError
        If ``parts`` is empty, a status is unknown or a count is below 1.

    Examples
    --------
    >>> from idaudit._results import reduction_attrs_across
    >>> cert = {"status": "certified_lower_bound", "n_simultaneous": 3}
    >>> reduction_attrs_across([(cert, 3), (cert, 3)])["status"]
    'sample_estimate'
    >>> joint = {"status": "certified_lower_bound", "n_simultaneous": 6}  # n_families=2
    >>> reduction_attrs_across([(joint, 3), (joint, 3)])["status"]
    'certified_lower_bound'
    """
    if not parts:
        raise InvalidInputError(f"`parts` must hold at least one family; got {parts!r}.")
    reduced = [reduction_attrs(attrs, n) for attrs, n in parts]
    statuses = [str(r["status"]) for r in reduced]
    # mixed statuses: the weakest ε statement decides (a certified family beside an
    # estimated one makes the column an estimate)
    rank: dict[str, int] = {s: i for i, s in enumerate(EPSILON_STATUSES)}
    weakest = min(statuses, key=lambda s: rank.get(s, len(rank)))
    if len(set(statuses)) > 1 or weakest not in CERTIFIED_STATUSES:
        out: dict[str, Any] = {"status": weakest}
        reasons = [str(r["status_reason"]) for r in reduced if "status_reason" in r]
        if reasons:
            out["status_reason"] = reasons[0]
        return out
    # family c's values were each taken at alpha / n_sim_c: the union bound over all of them
    # holds when sum_c n_c / n_sim_c <= 1, i.e. on the common scale N = lcm(n_sim_c) when
    # sum_c n_c N / n_sim_c <= N
    counts = [int(n) for _, n in parts]
    sims = [int(r["n_simultaneous"]) for r in reduced]
    scale = math.lcm(*sims)
    weighted = sum(n * (scale // s) for n, s in zip(counts, sims, strict=True))
    status, reason = reduce_status(weakest, weighted, n_simultaneous=scale)
    n_total = sum(counts)
    out = {"status": status}
    if status in CERTIFIED_STATUSES:
        out["n_simultaneous"] = n_total
    if reason:
        out["status_reason"] = (
            f"derived from {n_total} {weakest.replace('_', ' ')}s over {len(parts)} {what} "
            "certified as separate families (their union bound spends "
            f"{weighted / scale:.3g} times the stated alpha); certify the {len(parts)} {what} "
            f"as one family (n_families={len(parts)}) to keep the status"
        )
    return out


def attr_value(value: Any) -> AttrValue:
    """Convert a setting to a netCDF-safe attribute: a number or a string.

    Booleans and ``None`` become their names (netCDF has no boolean), integers ``int``, reals
    ``float``, strings stay, and anything else becomes its class name (an estimator or a
    callable passed as a setting).

    Examples
    --------
    >>> import numpy as np
    >>> from idaudit._results import attr_value
    >>> attr_value(True), attr_value(3), attr_value(np.float32(0.5)), attr_value(None)
    ('True', 3, 0.5, 'None')
    """
    if isinstance(value, (bool, np.bool_)) or value is None:
        return str(value)
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, numbers.Real):
        return float(value)
    if isinstance(value, str):
        return value
    return type(value).__name__


def describe(obj: Any) -> str:
    """``repr(obj)`` when it is one short line (settings), else the class name.

    A torch module's repr lists its layers, which says nothing about its weights.
    """
    text = repr(obj)
    if len(text) > 200 or "\n" in text:
        return type(obj).__name__
    return text


def variable(
    dims: str | Sequence[str],
    values: Any,
    *,
    long_name: str,
    status: Status,
    units: str | None = None,
    **attrs: Any,
) -> xr.Variable:
    """One result variable with its ``long_name``, ``status`` and (optional) ``units``.

    Parameters
    ----------
    dims : str or sequence of str
        Dimension names, e.g. ``"pair"`` or ``("pair", "embedding_dim")``.
    values : array_like
        The values.
    long_name : str
        Human-readable description.
    status : str
        Formal status (a key of :data:`STATUSES`).
    units : str, optional
        Units, when the number has any (``"nats"``, ``"s"``).
    **attrs
        Further attributes (converted with :func:`attr_value`).

    Returns
    -------
    xarray.Variable

    Examples
    --------
    >>> from idaudit._results import variable
    >>> v = variable("pair", [0.5, 1.0], long_name="epsilon", status="sample_estimate")
    >>> v.attrs["status"]
    'sample_estimate'
    """
    if not isinstance(long_name, str) or not long_name:
        raise InvalidInputError(f"`long_name` must be a non-empty string; got {long_name!r}.")
    var_attrs: dict[str, AttrValue] = {"long_name": long_name, "status": check_status(status)}
    if units is not None:
        var_attrs["units"] = units
    var_attrs.update({k: attr_value(v) for k, v in attrs.items()})
    return xr.Variable(dims, np.asarray(values), attrs=var_attrs)


def pair_coords(
    pairs: Sequence[tuple[Hashable, Hashable]],
    n_a: Sequence[int] | np.ndarray,
    n_b: Sequence[int] | np.ndarray,
) -> dict[str, tuple[str, np.ndarray]]:
    """Build the coordinates every per-pair Dataset carries (``identity_a/b``, ``n_a/b``).

    Parameters
    ----------
    pairs : sequence of (label, label)
        The identity pairs, in result order.
    n_a, n_b : sequence of int
        Rows of the first / second identity behind each pair's numbers.

    Returns
    -------
    dict
        ``{name: ("pair", values)}``, ready for ``xarray.Dataset(coords=...)``.
    """
    n_a = np.asarray(n_a, dtype=np.int64)
    n_b = np.asarray(n_b, dtype=np.int64)
    if n_a.shape != (len(pairs),) or n_b.shape != (len(pairs),):
        raise InvalidInputError(
            f"`n_a` and `n_b` must hold one count per pair ({len(pairs)}); "
            f"got {n_a.shape} and {n_b.shape}."
        )
    return {
        "identity_a": ("pair", np.asarray([a for a, _ in pairs])),
        "identity_b": ("pair", np.asarray([b for _, b in pairs])),
        "n_a": ("pair", n_a),
        "n_b": ("pair", n_b),
    }


def pair_dataset(
    pairs: Sequence[tuple[Hashable, Hashable]],
    data_vars: Mapping[str, xr.Variable],
    *,
    n_a: Sequence[int] | np.ndarray,
    n_b: Sequence[int] | np.ndarray,
    attrs: Mapping[str, Any],
) -> xr.Dataset:
    """Build a per-pair result Dataset (dim ``pair``) and check it.

    Parameters
    ----------
    pairs : sequence of (label, label)
        The identity pairs, in result order.
    data_vars : mapping of str to xarray.Variable
        Result variables made with :func:`variable`; each has ``pair`` as its first dim.
    n_a, n_b : sequence of int
        Rows of each identity behind each pair's numbers.
    attrs : mapping
        Dataset attributes, normally :func:`provenance` plus method settings.

    Returns
    -------
    xarray.Dataset
        Passes :func:`check_result_dataset`.

    Examples
    --------
    >>> from idaudit._results import pair_dataset, provenance, variable
    >>> ds = pair_dataset(
    ...     [("a", "b")], {"eps": variable("pair", [0.3], long_name="eps", status="diagnostic")},
    ...     n_a=[10], n_b=[12], attrs=provenance(title="example"))
    >>> int(ds.sizes["pair"])
    1
    """
    ds = xr.Dataset(
        dict(data_vars),
        coords=pair_coords(pairs, n_a, n_b),
        attrs={k: attr_value(v) for k, v in attrs.items()},
    )
    check_result_dataset(ds)
    return ds


def _version(module: str) -> str:
    if importlib.util.find_spec(module) is None:
        return "not installed"
    mod = __import__(module)
    return str(getattr(mod, "__version__", "unknown"))


def provenance(
    *,
    title: str,
    inputs: Mapping[str, str] | None = None,
    seeds: Mapping[str, int | None] | None = None,
    settings: Mapping[str, Any] | None = None,
) -> dict[str, AttrValue]:
    """Dataset attributes that let a saved result say where it came from.

    Parameters
    ----------
    title : str
        What the result is (the function that made it).
    inputs : mapping of str to str, optional
        Input name → content hash (``input_sha256``, ``pairs_sha256``, ...). Keys are used
        as given.
    seeds : mapping of str to int, optional
        Name → seed actually used; stored as ``seed.<name>`` (``None`` entries are skipped).
    settings : mapping, optional
        Run settings actually used (device, batch size, backend, thresholds); stored as
        ``setting.<name>`` through :func:`attr_value`.

    Returns
    -------
    dict
        ``title``, ``idaudit_version`` and the versions of numpy, scipy, torch and xarray, the
        Python version, then the given inputs, seeds and settings. No timestamp, so that one
        run's files are byte-for-byte reproducible.

    Examples
    --------
    >>> from idaudit._results import provenance
    >>> attrs = provenance(title="demo", seeds={"rng": 0}, settings={"device": "cpu"})
    >>> attrs["seed.rng"], attrs["setting.device"]
    (0, 'cpu')
    """
    attrs: dict[str, AttrValue] = {
        "title": title,
        "idaudit_version": __version__,
        "python_version": platform.python_version(),
    }
    for module in ("numpy", "scipy", "torch", "xarray"):
        attrs[f"{module}_version"] = _version(module)
    for key, digest in (inputs or {}).items():
        attrs[key] = str(digest)
    for key, seed in (seeds or {}).items():
        if seed is not None:
            attrs[f"seed.{key}"] = int(seed)
    for key, value in (settings or {}).items():
        attrs[f"setting.{key}"] = attr_value(value)
    return attrs


#: The coordinates every per-pair Dataset carries along ``pair`` (DESIGN, "Results").
PAIR_COORDS: tuple[str, ...] = ("identity_a", "identity_b", "n_a", "n_b")
#: Optional per-pair coordinates: each identity's failure rate and Fisher's test of equal
#: rates (``audit_pairs`` adds them; a pair has the same values in every result on one data set).
FAILURE_PAIR_COORDS: tuple[str, ...] = ("fail_rate_a", "fail_rate_b", "fail_pvalue")


def check_result_dataset(ds: xr.Dataset, *, require_provenance: bool = True) -> None:
    """Check that ``ds`` follows the result schema; raise listing every problem found.

    The rules (DESIGN, "Results"): every data variable has a non-empty ``long_name`` and a
    ``status`` from :data:`STATUSES`; Dataset attributes are strings or finite-or-infinite
    numbers only (so ``to_netcdf`` round-trips); ``idaudit_version`` is recorded; a Dataset
    with a ``pair`` dim carries the coords ``identity_a``, ``identity_b`` (distinct in every
    pair) and integer ``n_a``, ``n_b`` ≥ 0 along ``pair`` (their last dim: results stacked
    along ``condition`` carry them as ``(condition, pair)``).

    Parameters
    ----------
    ds : xarray.Dataset
        A result.
    require_provenance : bool, default True
        Whether ``idaudit_version`` must be among the attributes.

    Raises
    ------
    InvalidInputError
        Naming every rule broken.

    Examples
    --------
    >>> import xarray as xr
    >>> from idaudit._results import check_result_dataset
    >>> check_result_dataset(xr.Dataset({"x": ("pair", [1.0])}))
    Traceback (most recent call last):
    ...
    idaudit.exceptions.InvalidInputError: not a valid idaudit result: ...
    """
    if not isinstance(ds, xr.Dataset):
        raise TypeError(f"`ds` must be an xarray.Dataset; got {type(ds).__name__}.")
    problems: list[str] = []
    for name, var in ds.data_vars.items():
        long_name = var.attrs.get("long_name")
        if not isinstance(long_name, str) or not long_name:
            problems.append(f"variable {name!r} has no long_name")
        status = var.attrs.get("status")
        if not isinstance(status, str) or status not in STATUSES:  # a list is unhashable
            problems.append(f"variable {name!r} has status {status!r}, not one of STATUSES")
    for key, value in ds.attrs.items():
        if isinstance(value, (bool, np.bool_)) or not isinstance(
            value, (str, numbers.Integral, numbers.Real)
        ):
            problems.append(f"attribute {key!r} is {type(value).__name__}, not a str or number")
        elif isinstance(value, numbers.Real) and math.isnan(float(value)):
            problems.append(f"attribute {key!r} is NaN")
    if require_provenance and "idaudit_version" not in ds.attrs:
        problems.append("attribute 'idaudit_version' is missing")
    if "pair" in ds.dims:
        for coord in PAIR_COORDS:
            if coord not in ds.coords:
                problems.append(f"coordinate {coord!r} is missing")
            elif ds[coord].dims[-1:] != ("pair",):
                problems.append(
                    f"coordinate {coord!r} has dims {ds[coord].dims}, not ending in 'pair'"
                )
        if all(c in ds.coords for c in PAIR_COORDS):
            for coord in ("n_a", "n_b"):
                counts = ds[coord].values
                if not np.issubdtype(counts.dtype, np.integer) or (counts < 0).any():
                    problems.append(f"coordinate {coord!r} must hold integers >= 0")
            same = np.asarray(ds["identity_a"].values == ds["identity_b"].values)
            if same.any():
                problems.append(f"{int(same.sum())} pair(s) pair an identity with itself")
    if problems:
        raise InvalidInputError("not a valid idaudit result: " + "; ".join(problems) + ".")


def same_attr(a: Any, b: Any) -> bool:
    """Attribute equality that treats NaN as equal to NaN and compares arrays elementwise."""
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return bool(np.array_equal(np.asarray(a), np.asarray(b), equal_nan=True))
    if isinstance(a, float) and isinstance(b, float) and np.isnan(a) and np.isnan(b):
        return True
    return bool(a == b)


def reconcile_attrs(
    attrs: Sequence[Mapping[Hashable, Any]],
    *,
    skip: Sequence[str] = (),
    unordered: Sequence[str] = (),
    missing_differs: bool = True,
) -> tuple[dict[str, Any], dict[str, list[Any]]]:
    """Split the attributes of several results into those they share and those that differ.

    :func:`idaudit.merge_audits` and :func:`idaudit.concat_conditions` both combine results
    whose provenance may differ (seeds, run settings, input hashes): an attribute equal in
    every input stays one attribute, and the caller keeps one that differs per input (joined
    by commas, or as a ``condition`` coordinate), so nothing a result needs is lost.

    Parameters
    ----------
    attrs : sequence of mapping
        Each input's ``Dataset.attrs``, in input order.
    skip : sequence of str, default ()
        Keys left out of both outputs (the caller recomputes them).
    unordered : sequence of str, default ()
        Keys holding comma-separated lists whose order does not matter (``auditors``).
    missing_differs : bool, default True
        Whether an input without the key makes it differ. If False, only the inputs that
        have the key are compared.

    Returns
    -------
    shared : dict
        Key to the first value given, for the keys that agree (:func:`same_attr`), in order
        of first appearance.
    varying : dict
        Key to every input's value (``None`` where an input lacks it), for the others.

    Examples
    --------
    >>> from idaudit._results import reconcile_attrs
    >>> reconcile_attrs([{"a": 1, "b": 2}, {"a": 1, "b": 3}])
    ({'a': 1}, {'b': [2, 3]})
    """
    shared: dict[str, Any] = {}
    varying: dict[str, list[Any]] = {}
    for key in dict.fromkeys(str(k) for one in attrs for k in one):
        if key in skip:
            continue
        values = [one.get(key) for one in attrs]
        given = values if missing_differs else [one[key] for one in attrs if key in one]
        if key in unordered:
            same = len({frozenset(str(v).split(",")) for v in given}) == 1
        else:
            same = all(same_attr(given[0], v) for v in given[1:])
        if same:
            shared[key] = given[0]
        else:
            varying[key] = values
    return shared, varying


# -- owner-only atomic writes (embeddings and everything derived from them are biometric) ------


def private_dir(path: str | os.PathLike[str], *, name: str = "path") -> Path:
    """Create a folder and every missing parent owner-only (``0o700``); return it.

    ``Path.mkdir(parents=True, mode=0o700)`` gives the mode to the last folder only: the
    parents it creates get the umask's default (often ``0o755``), so other users could list
    a tree of biometric files. Here every level that is created is made ``0o700``
    explicitly (the umask can only narrow a mode, so each is ``chmod``-ed after creation);
    levels that already existed keep their own mode. Every folder idaudit writes to is made
    through this function.

    Parameters
    ----------
    path : str or os.PathLike
        The folder. It may exist already (then nothing changes), also when another process
        creates it at the same time.
    name : str, default "path"
        The argument name used in the error message (e.g. ``"store"``, ``"--out"``).

    Returns
    -------
    pathlib.Path
        ``path``.

    Raises
    ------
    InvalidInputError
        If ``path``, or one of its parents, exists and is not a folder; the message names it.
    OSError
        If a folder cannot be created (e.g. no permission).

    Examples
    --------
    >>> import stat, tempfile
    >>> from pathlib import Path
    >>> from idaudit.results import private_dir
    >>> root = Path(tempfile.mkdtemp())
    >>> out = private_dir(root / "a" / "b")
    >>> [oct(stat.S_IMODE(p.stat().st_mode)) for p in (root / "a", out)]
    ['0o700', '0o700']
    """
    target = Path(path)
    missing: list[Path] = []
    probe = target
    while not probe.is_dir():
        if probe.exists() or probe.is_symlink():  # a file, or a link to nowhere, in the way
            raise InvalidInputError(_not_a_folder(name, target, probe))
        missing.append(probe)
        if probe.parent == probe:  # pragma: no cover - a root that is no folder
            break
        probe = probe.parent
    for folder in reversed(missing):  # outermost first
        try:
            folder.mkdir(mode=0o700)
        except FileExistsError:  # made meanwhile by someone else: theirs, mode and all
            if not folder.is_dir():
                raise InvalidInputError(_not_a_folder(name, target, folder)) from None
            continue
        except NotADirectoryError:  # a parent was replaced by a file meanwhile
            raise InvalidInputError(_not_a_folder(name, target, folder.parent)) from None
        os.chmod(folder, 0o700)  # the umask may have narrowed the mode; never widen it
    return target


def _not_a_folder(name: str, target: Path, blocker: Path) -> str:
    what = "is a file" if blocker.is_file() else "is not a folder"
    if blocker == target:
        return f"`{name}` must be a folder; {str(target)!r} {what}."
    return f"`{name}` must be a folder; {str(target)!r} cannot be made: {str(blocker)!r} {what}."


@contextmanager
def atomic_path(path: str | os.PathLike[str]) -> Iterator[Path]:
    """Yield a temporary path to fill; on success it becomes ``path``, owner-only.

    The temporary file lies in the destination's folder; when the block ends it is made
    ``0o600`` and renamed over ``path`` (atomic on POSIX), so a reader never sees a partial
    file, and an exception in the block leaves none. The caller writes the file itself.
    """
    dest = Path(path)
    fd, name = tempfile.mkstemp(dir=dest.parent, prefix=f".{dest.name}.", suffix=".tmp")
    os.close(fd)
    tmp = Path(name)
    try:
        yield tmp
        os.chmod(tmp, 0o600)
        os.replace(tmp, dest)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def write_atomic(path: str | os.PathLike[str], write: Callable[[Path], Any]) -> Path:
    """Write a file atomically, owner-only: ``write(tmp)`` fills :func:`atomic_path`'s file.

    Parameters
    ----------
    path : path
        Destination.
    write : callable
        Called with the temporary path.

    Returns
    -------
    pathlib.Path
        ``path``.
    """
    with atomic_path(path) as tmp:
        write(tmp)
    return Path(path)


def write_text(text: str, path: str | os.PathLike[str]) -> Path:
    """Write UTF-8 text atomically, owner-only."""
    return write_atomic(path, lambda tmp: tmp.write_text(text, encoding="utf-8"))


def json_text(obj: Any) -> str:
    """Return the text :func:`write_json` writes for ``obj`` (a newline at the end)."""

    def plain(value: Any) -> Any:
        if isinstance(value, Mapping):
            return {str(k): plain(v) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return [plain(v) for v in value]
        if isinstance(value, np.ndarray):
            return plain(value.tolist())
        if isinstance(value, np.generic):
            return plain(value.item())
        if isinstance(value, float) and not math.isfinite(value):
            return str(value)
        if isinstance(value, Path):
            return str(value)
        return value

    return json.dumps(plain(obj), indent=2, sort_keys=True, allow_nan=False) + "\n"


def write_json(obj: Any, path: str | os.PathLike[str]) -> Path:
    """Write JSON atomically, owner-only (sorted keys, indented, NaN/inf refused).

    NumPy scalars and arrays are converted to Python numbers and lists. Non-finite floats
    are written as the strings ``"inf"``, ``"-inf"`` and ``"nan"`` (JSON has no such
    numbers), so no reader chokes on the file.
    """
    return write_text(json_text(obj), path)


def write_csv(frame: pd.DataFrame, path: str | os.PathLike[str], *, index: bool = False) -> Path:
    """Write a DataFrame to CSV atomically, owner-only."""
    return write_atomic(path, lambda tmp: frame.to_csv(tmp, index=index))


def write_netcdf(ds: xr.Dataset, path: str | os.PathLike[str]) -> Path:
    """Write a Dataset to netCDF-4 atomically, owner-only.

    Raises
    ------
    ImportError
        If no netCDF-4 writer is installed: ``netCDF4`` (a core dependency), or ``h5netcdf``
        with ``h5py``. netCDF-3, all scipy can write, cannot hold the 64-bit seeds and counts
        idaudit records.
    """
    has_netcdf4 = importlib.util.find_spec("netCDF4") is not None
    has_h5 = all(importlib.util.find_spec(m) for m in ("h5netcdf", "h5py"))
    if not (has_netcdf4 or has_h5):
        raise ImportError(
            "writing .nc results needs a netCDF-4 writer; install one with pip install netCDF4"
        )
    return write_atomic(path, lambda tmp: ds.to_netcdf(tmp))


def pair_frame(ds: xr.Dataset) -> pd.DataFrame:
    """One row per pair (per condition and pair, when stacked): the per-pair variables only.

    ``ds.to_dataframe()`` crosses every variable with every dimension, so KDE-LR's
    per-dimension terms blow a 100-pair result up to 100 × 512 rows; this view keeps the
    variables whose dimensions are ``pair`` (or ``condition`` and ``pair``) and the pair
    coordinates.

    Parameters
    ----------
    ds : xarray.Dataset
        A per-pair result (dim ``pair``).

    Returns
    -------
    pandas.DataFrame
        One row per pair; ``frame.attrs["status"]`` maps each variable's column to its
        formal status.

    Examples
    --------
    >>> import numpy as np
    >>> from idaudit import EmbeddingSet, KDELRAuditor, audit_pairs
    >>> from idaudit.results import pair_frame
    >>> es = EmbeddingSet(np.random.default_rng(0).normal(size=(60, 8)), np.repeat([0, 1, 2], 20))
    >>> ds = audit_pairs(es, [(0, 1), (0, 2)], [KDELRAuditor()], progress=False)
    >>> pair_frame(ds).shape[0], ds.to_dataframe().shape[0]
    (2, 16)
    """
    if "pair" not in ds.dims:
        raise ValueError("`ds` has no 'pair' dimension; it is not a per-pair result.")
    keep = {"pair", "condition"}
    names = [v for v in ds.data_vars if set(ds[v].dims) <= keep and "pair" in ds[v].dims]
    frame = ds[names].to_dataframe().reset_index()
    # each column's formal status travels with the table (pandas keeps attrs on copies)
    frame.attrs["status"] = {str(v): ds[v].attrs.get("status", "") for v in names}
    return frame
