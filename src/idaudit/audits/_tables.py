"""Seed 000's tables from per-condition results: Table 1 (audits) and Table 2 (certificates)."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd
import xarray as xr

from idaudit._results import reduction_attrs_across
from idaudit.exceptions import InvalidInputError

__all__ = ["condition_fields", "read_manifest", "table1", "table2"]

#: The three parts of a condition name, in the paper's order.
CONDITION_FIELDS = ("encoder", "dataset", "generator")

#: A certificate is "at its ceiling" when it equals what zero test errors certify. Both are
#: the same float expression (Eq. 16 of Clopper-Pearson bounds) evaluated on the same sizes, so
#: equal ones agree to rounding; 1e-12 is far above that rounding and far below the 0.001 that
#: the reports print.
CEILING_ATOL = 1e-12


def ceiling_reached(epsilon_lb: npt.ArrayLike, ceiling: npt.ArrayLike) -> npt.NDArray[np.bool_]:
    """Whether certified values sit at a positive zero-error ceiling (elementwise).

    A value is at its ceiling when it equals what an error-free test certifies at its test
    sizes (within :data:`CEILING_ATOL`) *and* that ceiling is positive: then the test size,
    not the pipeline, sets it (with a positive ceiling, any test error lowers Eq. 16, so
    equality means no error). A ceiling of 0 is not "reached": such test sizes certify
    nothing whatever the errors (:func:`zero_ceiling`).

    Parameters
    ----------
    epsilon_lb, ceiling : array_like of float
        Certified values and their ceilings (broadcast; NaN is never at a ceiling).

    Returns
    -------
    numpy.ndarray of bool
    """
    lb = np.asarray(epsilon_lb, dtype=np.float64)
    top = np.asarray(ceiling, dtype=np.float64)
    return np.asarray((top > 0) & (np.abs(lb - top) <= CEILING_ATOL), dtype=bool)


#: The flag of a certificate column whose every ceiling is 0.
ZERO_CEILING_FLAG = "ceiling 0 on every pair: these test sizes certify nothing"


def zero_ceiling(certificates: xr.Dataset) -> npt.NDArray[np.bool_]:
    """Which certified pairs have test sizes that cannot certify anything (ceiling 0)."""
    if "epsilon_lb_ceiling" not in certificates:
        return np.zeros(certificates.sizes.get("pair", 0), dtype=bool)
    return np.asarray(certificates["epsilon_lb_ceiling"].values <= 0.0, dtype=bool)


def at_ceiling(certificates: xr.Dataset) -> npt.NDArray[np.bool_]:
    """Which certified pairs sit at their positive ceiling (:func:`ceiling_reached`).

    Parameters
    ----------
    certificates : xarray.Dataset
        A ``ReservedTestCertifier(...).fit(...).certificates_``.

    Returns
    -------
    numpy.ndarray of bool, shape (n_pairs,)
        All ``False`` when the Dataset has no ``epsilon_lb_ceiling`` (certificates saved
        before it existed).
    """
    lb = np.asarray(certificates["epsilon_lb"].values, dtype=np.float64)
    if "epsilon_lb_ceiling" not in certificates:
        return np.zeros(lb.shape, dtype=bool)
    return ceiling_reached(lb, certificates["epsilon_lb_ceiling"].values)


def condition_fields(name: str) -> dict[str, str]:
    """Split a condition name such as ``"arcface_vggface2_ff"`` into encoder, dataset, generator.

    Parts are separated by ``_``, ``-``, ``+`` or ``.``; a name with another number of parts
    keeps its whole text as ``encoder`` and leaves the other two empty.

    Examples
    --------
    >>> from idaudit.audits._tables import condition_fields
    >>> condition_fields("ArcFace+VGGFace2+FF")
    {'encoder': 'ArcFace', 'dataset': 'VGGFace2', 'generator': 'FF'}
    """
    parts = [p for p in re.split(r"[_\-+.]", str(name)) if p]
    if len(parts) != 3:
        return {"encoder": str(name), "dataset": "", "generator": ""}
    return dict(zip(CONDITION_FIELDS, parts, strict=True))


def _fields(ds: xr.Dataset, name: str) -> dict[str, str]:
    out = condition_fields(name)
    for key in CONDITION_FIELDS:
        if key in ds.coords and "condition" in ds[key].dims:
            out[key] = str(ds[key].sel(condition=name).values)
    return out


def _auditor(ds: xr.Dataset, cls: str, **params: Any) -> str | None:
    for label in str(ds.attrs.get("auditors", "")).split(","):
        if not label or ds.attrs.get(f"{label}.class") != cls:
            continue
        if all(_close(ds.attrs.get(f"{label}.{k}"), v) for k, v in params.items()):
            return label
    return None


def _close(a: Any, b: Any) -> bool:
    try:
        return bool(np.isclose(float(a), float(b)))
    except (TypeError, ValueError):
        return bool(a == b)


def common_pairs(
    ds: xr.Dataset, variables: Iterable[str]
) -> tuple[npt.NDArray[np.bool_], tuple[str, ...]]:
    """Return the pairs where every method has a value, and the methods with a value on none.

    A method without a value on any pair (it failed on all of them) is left out of the
    selection, so that it does not empty the other methods' medians; it is returned for the
    caller to say so. When no method has a value anywhere, no pair is selected.

    Parameters
    ----------
    ds : xarray.Dataset
        One condition's :func:`idaudit.audit_pairs` results.
    variables : iterable of str
        The ε variables (dim ``pair``) whose values define the common pairs.

    Returns
    -------
    common : numpy.ndarray of bool, shape (n_pairs,)
    empty : tuple of str
        The variables with no value on any pair.
    """
    common = np.ones(ds.sizes["pair"], dtype=bool)
    names = list(variables)
    empty = []
    for var in names:
        valid = ~np.isnan(np.asarray(ds[var].values, dtype=np.float64))
        if valid.any():
            common &= valid
        else:
            empty.append(var)
    if names and len(empty) == len(names):
        common[:] = False
    return common, tuple(empty)


def table1(ds: xr.Dataset) -> pd.DataFrame:
    """Table 1's layout: one row per condition, medians over the pairs common to all methods.

    Parameters
    ----------
    ds : xarray.Dataset
        :func:`idaudit.audit_pairs` results stacked along ``condition``
        (:func:`idaudit.audits.concat_conditions`), or one condition without that dim.

    Returns
    -------
    pandas.DataFrame
        Columns ``condition``, ``encoder``, ``dataset``, ``generator`` (from the condition
        name or coordinates of those names), ``n_pairs``, then — where the auditor was run —
        ``gaussmech`` (median, diagnostic), ``kdelr_mix0`` and ``kdelr_mix0.01`` (median,
        diagnostic: the paper's α = 0 and 10⁻²), ``mmdtv`` (median, sample estimate),
        ``rocht_inf`` (``"k/n"`` raw OOF values equal to +∞, diagnostic) and ``roc_auc``
        (median, sample estimate). Each column's status is in ``df.attrs["status"]``. A
        method without a value on any pair of a condition (it failed on all of them) is
        left out of that condition's common pairs, its median NaN; when that holds in every
        condition, ``df.attrs["flags"]`` names the column.
    """
    parts = (
        [(str(c), ds.sel(condition=c)) for c in ds["condition"].values]
        if "condition" in ds.dims
        else [(str(ds.attrs.get("condition", "")), ds)]
    )
    rows = []
    per_condition: dict[str, list[tuple[Any, int]]] = {}
    empty: dict[str, list[str]] = {}  # column -> conditions where it has no value at all
    for name, part in parts:
        cols: dict[str, tuple[str, str]] = {}
        gm = _auditor(part, "GaussMechAuditor")
        if gm:
            cols["gaussmech"] = (f"{gm}_epsilon", "median")
        for mix in (0.0, 0.01):
            kd = _auditor(part, "KDELRAuditor", mix=mix)
            if kd:
                cols[f"kdelr_mix{mix:g}"] = (f"{kd}_epsilon", "median")
        mm = _auditor(part, "MMDTVAuditor")
        if mm:
            cols["mmdtv"] = (f"{mm}_epsilon", "median")
        rh = _auditor(part, "ROCHTAuditor")
        if rh:
            cols["rocht_inf"] = (f"{rh}_epsilon", "inf")
            cols["roc_auc"] = (f"{rh}_auc", "median")
        if not cols:
            raise InvalidInputError(
                f"condition {name!r} holds no result of a known auditor (attribute 'auditors')."
            )
        eps = {var: col for col, (var, _) in cols.items() if var.endswith("_epsilon")}
        common, none = common_pairs(part, eps)
        for var in none:
            empty.setdefault(eps[var], []).append(name)
        n = int(common.sum())
        row: dict[str, Any] = {"condition": name, **_fields(ds, name), "n_pairs": n}
        for col, (var, how) in cols.items():
            values = np.asarray(part[var].values, dtype=np.float64)[common]
            if var in none:
                row[col] = "–" if how == "inf" else float("nan")
                continue
            row[col] = (
                f"{int(np.isposinf(values).sum())}/{n}"
                if how == "inf"
                else (float(np.median(values)) if n else float("nan"))
            )
        rows.append(row)
        for col, (var, _) in cols.items():
            per_condition.setdefault(col, []).append((part[var].attrs, max(n, 1)))
    frame = pd.DataFrame(rows)
    # a column is read across conditions: one function decides its status over all of them
    frame.attrs["status"] = {
        col: str(reduction_attrs_across(parts)["status"]) for col, parts in per_condition.items()
    }
    flags = {col: "no value on any pair" for col, names in empty.items() if len(names) == len(rows)}
    if flags:
        frame.attrs["flags"] = flags
    return frame


def table2(certificates: Mapping[str, xr.Dataset]) -> pd.DataFrame:
    """Table 2's layout: reserved-test certificates per condition, as ranges over the pairs.

    Parameters
    ----------
    certificates : mapping of condition to xarray.Dataset
        Each a ``ReservedTestCertifier(...).fit(...).certificates_``.

    Returns
    -------
    pandas.DataFrame
        One row per condition: ``condition``, ``encoder``, ``dataset``, ``generator``,
        ``test_n_per_class`` (range of the test sizes), ``auc`` (range of the reserved-test
        AUC), ``epsilon_lb`` (range of the certified lower bounds; the column is
        ``certified_lower_bound`` only when every pair of every condition holds jointly —
        the conditions certified as one family, ``n_families`` at least the number of
        conditions — and ``sample_estimate`` otherwise, with the reason in
        ``df.attrs["status_reason"]``), ``epsilon_lb_ceiling`` (range of the ceilings: what zero
        test errors certify at each pair's test sizes, status ``descriptive``; ``"–"`` for
        certificates without it), ``n_positive`` and ``n_above_1`` (how many pairs certify
        ε > 0 and ε > 1), ``n_at_ceiling`` (how many certificates equal their ceiling, i.e.
        are limited by the test size, not the pipeline; see :func:`at_ceiling`) and
        ``n_pairs``. When every pair's ceiling is 0, ``df.attrs["flags"]`` says so for
        ``epsilon_lb`` (its zeros are no evidence either way).
    """
    rows = []
    for name, cert in certificates.items():
        lb = np.asarray(cert["epsilon_lb"].values, dtype=np.float64)
        auc_name = "test_auc" if "test_auc" in cert else None
        sizes = np.concatenate(
            [np.asarray(cert[c].values) for c in ("n_test_a", "n_test_b") if c in cert]
            or [np.asarray(cert["n_a"].values)]
        )
        auc = np.asarray(cert[auc_name].values, dtype=np.float64) if auc_name else np.array([])
        ceiling = (
            np.asarray(cert["epsilon_lb_ceiling"].values, dtype=np.float64)
            if "epsilon_lb_ceiling" in cert
            else np.array([])
        )
        rows.append(
            {
                "condition": name,
                **condition_fields(name),
                "test_n_per_class": _range(sizes, "{:d}"),
                "auc": _range(auc, "{:.3f}"),
                "epsilon_lb": _range(lb, "{:.3f}"),
                "epsilon_lb_ceiling": _range(ceiling, "{:.3f}"),
                "n_positive": int((lb > 0).sum()),
                "n_above_1": int((lb > 1).sum()),
                "n_at_ceiling": int(at_ceiling(cert).sum()) if ceiling.size else "–",
                "n_pairs": int(lb.size),
            }
        )
    frame = pd.DataFrame(rows)
    # the column is read across conditions (its largest value, a ranking): certified only
    # when every condition's pairs hold jointly with every other's, i.e. the conditions were
    # certified as one family (n_families); one function decides
    column: dict[str, Any] = (
        reduction_attrs_across(
            [(c["epsilon_lb"].attrs, max(c.sizes["pair"], 1)) for c in certificates.values()]
        )
        if certificates
        else {"status": "certified_lower_bound"}
    )
    frame.attrs["status"] = {
        "epsilon_lb": str(column["status"]),
        "epsilon_lb_ceiling": "descriptive",
        "auc": "sample_estimate",
    }
    if "status_reason" in column:
        frame.attrs["status_reason"] = {"epsilon_lb": str(column["status_reason"])}
    with_ceiling = all("epsilon_lb_ceiling" in c for c in certificates.values())
    ceilings = [zero_ceiling(c) for c in certificates.values()] if with_ceiling else []
    if sum(z.size for z in ceilings) and all(z.all() for z in ceilings):
        # every pair's test sizes certify nothing: the column's zeros are no evidence
        frame.attrs["flags"] = {"epsilon_lb": ZERO_CEILING_FLAG}
    return frame


def _range(values: np.ndarray, fmt: str) -> str:
    if values.size == 0:
        return "–"
    lo, hi = values.min(), values.max()
    if np.issubdtype(values.dtype, np.integer):
        lo, hi = int(lo), int(hi)
    return fmt.format(lo) if lo == hi else f"{fmt.format(lo)}–{fmt.format(hi)}"


def read_manifest(path: str | Path) -> dict[str, str]:
    """Read a manifest CSV with columns ``file`` and ``condition`` → {file name: condition}."""
    frame = pd.read_csv(path)
    missing = {"file", "condition"} - set(frame.columns)
    if missing:
        raise InvalidInputError(
            f"`--manifest` {str(path)!r} must have the columns file and condition; "
            f"missing {sorted(missing)}."
        )
    return {
        Path(str(f)).name: str(c) for f, c in zip(frame["file"], frame["condition"], strict=True)
    }
