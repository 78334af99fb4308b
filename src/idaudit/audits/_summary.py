"""Summaries of an ``audit_pairs`` Dataset: Table 1's row and Figure 3's ROC curves (seed 000).

``summarize`` gives the row, ``median_auc_rocs`` the refitted median-AUC curves.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
import xarray as xr

from idaudit._results import reduction_attrs
from idaudit.audits._rocht import ROCHTAuditor
from idaudit.audits._tables import common_pairs
from idaudit.exceptions import InvalidInputError

__all__ = ["AuditSummary", "median_auc_rocs", "summarize"]


@dataclass(frozen=True)
class AuditSummary:
    """One row of seed 000's Table 1, computed from a per-pair audit Dataset.

    Attributes
    ----------
    n_pairs : int
        Common pairs: those where every ε variable has a value. Medians and ``+inf`` counts are
        over these pairs.
    columns : tuple of str
        Column names, ``"<variable> (<statistic>)"``, e.g. ``"mmdtv_epsilon (median)"``,
        ``"rocht_epsilon (+inf count)"``, ``"rocht_auc (median)"``, ``"mmdtv_epsilon (max)"``.
    values : tuple of (float or str)
        The numbers; ``+inf`` counts are strings ``"k/n"``.
    statuses : tuple of str
        The formal status of each column's variable.
    column_pairs : tuple of int
        How many pairs each column is computed over: ``n_pairs`` for medians and counts, every
        pair its auditor covers for the MMD-TV maximum.
    """

    n_pairs: int
    columns: tuple[str, ...]
    values: tuple[float | str, ...]
    statuses: tuple[str, ...]
    column_pairs: tuple[int, ...] = ()

    def __getitem__(self, column: str) -> float | str:
        try:
            return self.values[self.columns.index(column)]
        except ValueError:
            raise KeyError(column) from None

    def to_dict(self) -> dict[str, float | str]:
        """Return ``{column: value}`` in column order."""
        return dict(zip(self.columns, self.values, strict=True))

    def to_pandas(self, name: Any = None) -> pd.DataFrame:
        """Return a one-row DataFrame (index ``name``), ready to stack several conditions.

        The columns are a two-level index, ``(column, status)``, so the formal status of every
        number travels with it into pandas (``frame.droplevel("status", axis=1)`` drops it).
        """
        index = pd.MultiIndex.from_arrays(
            [list(self.columns), list(self.statuses)], names=["column", "status"]
        )
        return pd.DataFrame([list(self.values)], index=[name], columns=index)

    def to_xarray(self) -> xr.Dataset:
        """Return the row as a Dataset of 0-d variables (``status``, ``n_pairs`` attrs)."""
        counts = self.column_pairs or (self.n_pairs,) * len(self.columns)
        return xr.Dataset(
            {
                col: ((), val, {"status": status, "n_pairs": k})
                for col, val, status, k in zip(
                    self.columns, self.values, self.statuses, counts, strict=True
                )
            },
            attrs={"n_pairs": self.n_pairs},
        )

    def __repr__(self) -> str:
        width = max(len(c) for c in self.columns)
        lines = [f"AuditSummary over {self.n_pairs} common pairs"]
        counts = self.column_pairs or (self.n_pairs,) * len(self.columns)
        for col, val, status, k in zip(
            self.columns, self.values, self.statuses, counts, strict=True
        ):
            text = val if isinstance(val, str) else f"{val:.6g}"
            over = "" if k == self.n_pairs else f"  (over {k} pairs)"
            lines.append(f"  {col:<{width}}  {text:>12}  [{status}]{over}")
        return "\n".join(lines)


def summarize(ds: xr.Dataset) -> AuditSummary:
    """Summarise an :func:`idaudit.audit_pairs` Dataset as Table 1 of seed 000 does.

    Parameters
    ----------
    ds : xarray.Dataset
        Result of :func:`idaudit.audit_pairs` (its ``auditors`` and ``<label>.class``
        attributes say which variables belong to which method).

    Returns
    -------
    AuditSummary
        Per auditor, in the order they were run: for ROC-HT the count of ``+inf`` ε over the
        common pairs as ``"k/n"`` and the median AUC; for the others the median ε over the
        common pairs; for MMD-TV also the maximum ε over every pair it covers (the paper's
        "maximum over 500 pairs": audit those with their own :func:`idaudit.audit_pairs` call
        and join the results with :func:`idaudit.merge_audits`).

    Raises
    ------
    InvalidInputError
        If ``ds`` lacks the attributes or variables :func:`idaudit.audit_pairs` writes, or no
        pair has every ε.

    Notes
    -----
    Table 1 of seed 000 reports, on the first 100 pairs shared by all methods, the median ε of
    GaussMech, KDE-LR (α = 0 and 0.01) and MMD-TV, the number of pairs whose raw OOF ROC-HT
    ε is ``+inf`` and the median ROC AUC. Each column keeps its formal status.

    Examples
    --------
    >>> import numpy as np
    >>> from idaudit import EmbeddingSet, MMDTVAuditor, ROCHTAuditor, audit_pairs, summarize
    >>> gen = np.random.default_rng(0)
    >>> es = EmbeddingSet(gen.normal(size=(60, 8)) + np.repeat(np.eye(8)[:3] * 3, 20, axis=0),
    ...                   np.repeat(["a", "b", "c"], 20))
    >>> ds = audit_pairs(es, [("a", "b"), ("a", "c"), ("b", "c")],
    ...                  [MMDTVAuditor(), ROCHTAuditor()], progress=False)
    >>> summarize(ds)["rocht_epsilon (+inf count)"]
    '3/3'
    """
    if not isinstance(ds, xr.Dataset):
        raise TypeError(f"`ds` must be an xarray.Dataset; got {type(ds).__name__}.")
    if "condition" in ds.dims:
        raise InvalidInputError(
            "`ds` holds several conditions; summarise one at a time, e.g. "
            "summarize(ds.sel(condition=name))."
        )
    labels = str(ds.attrs.get("auditors", "")).split(",")
    if labels == [""]:
        raise InvalidInputError(
            "`ds` has no 'auditors' attribute; pass a Dataset made by idaudit.audit_pairs."
        )
    eps_vars = [f"{lab}_epsilon" for lab in labels]
    missing = [v for v in eps_vars if v not in ds]
    if missing:
        raise InvalidInputError(f"`ds` lacks the variable(s) {missing}; was it filtered?")
    common, empty = common_pairs(ds, eps_vars)
    n = int(common.sum())
    if n == 0:
        raise InvalidInputError("no pair of `ds` has a value for every epsilon variable.")
    columns: list[str] = []
    values: list[float | str] = []
    statuses: list[str] = []

    column_pairs: list[int] = []

    def add(column: str, value: float | str, var: str, over: int = n) -> None:
        columns.append(column)
        values.append(value)
        # a median or maximum over pairs is certified only if their bounds hold jointly
        statuses.append(str(reduction_attrs(ds[var].attrs, max(int(over), 1))["status"]))
        column_pairs.append(over)

    for lab, var in zip(labels, eps_vars, strict=True):
        cls = ds.attrs.get(f"{lab}.class", "")
        eps = np.asarray(ds[var].values, dtype=np.float64)
        if var in empty:  # the method failed on every pair: said, not a median of nothing
            add(f"{var} (no value on any pair)", "–", var)
        elif cls == "ROCHTAuditor":
            add(f"{var} (+inf count)", f"{int(np.isposinf(eps[common]).sum())}/{n}", var)
            if f"{lab}_auc" in ds:
                auc = np.asarray(ds[f"{lab}_auc"].values, dtype=np.float64)
                add(f"{lab}_auc (median)", float(np.median(auc[common])), f"{lab}_auc")
        else:
            add(f"{var} (median)", float(np.median(eps[common])), var)
            if cls == "MMDTVAuditor":
                add(f"{var} (max)", float(np.nanmax(eps)), var, int(np.sum(~np.isnan(eps))))
    return AuditSummary(n, tuple(columns), tuple(values), tuple(statuses), tuple(column_pairs))


def median_auc_rocs(
    ds: xr.Dataset,
    embeddings: Any,
    *,
    n_folds: int = 5,
    rng: int = 0,
) -> dict[str, ROCHTAuditor]:
    """Refit the out-of-fold ROC of each condition's median-AUC pair (seed 000, Figure 3 right).

    A result stores each pair's ``rocht_auc``, not its curve. This picks, per condition, the
    pair whose AUC is the (lower) median and fits a :class:`ROCHTAuditor` on its rows again,
    so that :func:`idaudit.plotting.plot_rocs` can draw the curves.

    Parameters
    ----------
    ds : xarray.Dataset
        A per-pair result with ``rocht_auc`` (dim ``pair``, or ``condition`` and ``pair``).
    embeddings : EmbeddingSet or mapping of condition to EmbeddingSet
        The rows the result was computed on.
    n_folds : int, default 5
        Folds of the refitted ROC.
    rng : int, default 0
        Seed of the refitted folds (so the refitted AUC may differ a little from the stored
        one).

    Returns
    -------
    dict of str to ROCHTAuditor
        ``"<condition>: <a> vs <b>"`` (``"<a> vs <b>"`` without a ``condition`` dim) → the
        fitted auditor (``fpr_``, ``tpr_``, ``auc_``), in the order of ``ds``'s conditions.

    Raises
    ------
    InvalidInputError
        If ``ds`` has no ``rocht_auc`` or ``embeddings`` lacks a condition of ``ds``.

    Examples
    --------
    >>> import numpy as np
    >>> from idaudit import EmbeddingSet, ROCHTAuditor, audit_pairs
    >>> from idaudit.audits import median_auc_rocs
    >>> x = np.random.default_rng(0).normal(size=(60, 4))
    >>> es = EmbeddingSet(x, np.repeat(["a", "b", "c"], 20))
    >>> ds = audit_pairs(es, [("a", "b"), ("a", "c")], [ROCHTAuditor(rng=0)], progress=False)
    >>> rocs = median_auc_rocs(ds, es)
    >>> list(rocs)
    ['a vs b']
    """
    if not isinstance(ds, xr.Dataset):
        raise TypeError(f"`ds` must be an xarray.Dataset; got {type(ds).__name__}.")
    if "rocht_auc" not in ds:
        raise InvalidInputError(
            "`ds` has no 'rocht_auc' variable; audit the pairs with a ROCHTAuditor first."
        )
    if "condition" in ds.dims:
        parts = [(str(c), ds.sel(condition=c)) for c in ds["condition"].values]
    else:
        parts = [("", ds)]
    rocs: dict[str, ROCHTAuditor] = {}
    for name, part in parts:
        if isinstance(embeddings, Mapping):
            if name not in embeddings:
                raise InvalidInputError(
                    f"`embeddings` has no condition {name!r}; it has {sorted(embeddings)}."
                )
            es = embeddings[name]
        else:
            es = embeddings
        auc = np.asarray(part["rocht_auc"].values, dtype=np.float64)
        k = int(np.argsort(auc, kind="stable")[(len(auc) - 1) // 2])  # the lower median
        a, b = part["identity_a"].values[k], part["identity_b"].values[k]
        fit = ROCHTAuditor(n_folds=n_folds, rng=rng).fit(es.get(a), es.get(b))
        rocs[f"{name + ': ' if name else ''}{a} vs {b}"] = fit
    return rocs
