"""``merge_audits``: several ``audit_pairs`` results on one EmbeddingSet as one Dataset."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import xarray as xr

from idaudit._results import (
    FAILURE_PAIR_COORDS,
    PAIR_COORDS,
    check_result_dataset,
    reconcile_attrs,
)
from idaudit.exceptions import InvalidInputError

__all__ = ["merge_audits"]
# attributes that must agree between the inputs: they say which data were audited
_SAME_DATA = ("input_sha256",)
# attributes that describe one input's pair list and would be wrong for the union
_PER_INPUT = ("pairs_sha256", "merged_pairs_sha256", "n_pairs", "auditors")


def merge_audits(*results: xr.Dataset) -> xr.Dataset:
    """Join :func:`idaudit.audit_pairs` results that ran different auditors on different pairs.

    Seed 000's Table 1 audits the first 100 pairs with every method, ROC-HT on 200 and MMD-TV on
    500 of one pair list. Run :func:`idaudit.audit_pairs` once per pair count and merge: the
    result has every pair of any input, and a variable is NaN on the pairs its auditor did not
    see, which is how :func:`idaudit.summarize` finds the common pairs.

    Parameters
    ----------
    *results : xarray.Dataset
        Results of :func:`idaudit.audit_pairs` on the same :class:`~idaudit.EmbeddingSet`
        (equal ``input_sha256``), each auditor label in only one of them.

    Returns
    -------
    xarray.Dataset
        Dimension ``pair`` over the union of the pairs, in order of first appearance (a pair
        is the ordered ``(identity_a, identity_b)``); coordinates ``identity_a``,
        ``identity_b``, ``n_a``, ``n_b``. Float variables keep their dtype, with NaN where not
        audited; a boolean variable that has such gaps becomes float64 (1.0 / 0.0 / NaN). The
        attributes are the union of the inputs' (per-auditor ``<label>.*`` attributes
        included; an attribute whose value differs between inputs, such as the run setting
        ``setting.batch_size``, holds every input's value joined by commas, in input order);
        ``auditors`` lists every label, ``n_pairs`` counts the union and
        ``merged_pairs_sha256`` lists each input's ``pairs_sha256`` (a merged input's own list,
        so chained merges keep every hash).

    Raises
    ------
    TypeError
        If an argument is not an ``xarray.Dataset``.
    InvalidInputError
        If no result is given, the inputs audited different data, an auditor label or a
        variable appears in two inputs, an input is not an ``audit_pairs`` result, one pair
        has different row counts in two inputs, a pair appears in both orientations, or one
        input holds a pair twice.

    Examples
    --------
    >>> import numpy as np
    >>> from idaudit import EmbeddingSet, MMDTVAuditor, ROCHTAuditor, audit_pairs, sample_pairs
    >>> from idaudit.audits import merge_audits
    >>> gen = np.random.default_rng(0)
    >>> es = EmbeddingSet(gen.normal(size=(80, 4)), np.repeat(list("abcd"), 20))
    >>> pairs = sample_pairs(es.identities, 6, rng=0)
    >>> both = audit_pairs(es, pairs[:2], [ROCHTAuditor()], progress=False)
    >>> mmd = audit_pairs(es, pairs, [MMDTVAuditor()], progress=False)
    >>> ds = merge_audits(both, mmd)
    >>> ds.sizes["pair"], int(ds["rocht_auc"].notnull().sum())
    (6, 2)
    """
    _check_inputs(results)
    labels = _distinct_names(results)
    counts = _pair_union(results)
    _check_gaps(results, len(counts))
    merged = _join(results, counts)

    order = dict.fromkeys(str(k) for ds in results for k in ds.attrs if k not in _PER_INPUT)
    # a run setting that differs between the inputs (e.g. setting.batch_size) keeps every
    # input's value, in input order
    shared, varying = reconcile_attrs(
        [ds.attrs for ds in results], skip=_PER_INPUT, missing_differs=False
    )
    attrs: dict[str, Any] = {
        key: shared[key]
        if key in shared
        else ",".join("" if v is None else str(v) for v in varying[key])
        for key in order
    }
    attrs["auditors"] = ",".join(labels)
    attrs["n_pairs"] = len(counts)
    # a merged input contributes the hashes of its own inputs, so chained merges keep them all
    attrs["merged_pairs_sha256"] = ",".join(
        str(ds.attrs.get("merged_pairs_sha256") or ds.attrs.get("pairs_sha256", ""))
        for ds in results
    )
    merged.attrs = attrs
    return merged


def _check_inputs(results: tuple[xr.Dataset, ...]) -> None:
    """Each input is an ``audit_pairs`` result, and all audited the same data."""
    if not results:
        raise InvalidInputError("`results` must hold at least one audit_pairs Dataset.")
    for k, ds in enumerate(results):
        if not isinstance(ds, xr.Dataset):
            raise TypeError(f"`results[{k}]` must be an xarray.Dataset; got {type(ds).__name__}.")
        what = (
            f"`results[{k}]` is not an audit_pairs result (needs dimension 'pair', the "
            "coordinates identity_a, identity_b, n_a, n_b and an 'auditors' attribute)"
        )
        missing = [c for c in PAIR_COORDS if c not in ds.coords]
        if "pair" not in ds.dims or missing or "auditors" not in ds.attrs:
            raise InvalidInputError(what + ".")
        try:
            check_result_dataset(ds, require_provenance=False)
        except InvalidInputError as err:
            raise InvalidInputError(f"{what}: {err}") from err
    for key in _SAME_DATA:
        values = {str(ds.attrs.get(key)) for ds in results}
        if len(values) > 1:
            raise InvalidInputError(
                f"`results` audited different data: their '{key}' attributes differ."
            )


def _distinct_names(results: tuple[xr.Dataset, ...]) -> list[str]:
    """Every input's auditor labels, in input order; a label or variable in two is refused."""
    labels: list[str] = []
    for k, ds in enumerate(results):
        for label in str(ds.attrs["auditors"]).split(","):
            if label in labels:
                raise InvalidInputError(
                    f"auditor label '{label}' appears in more than one of `results` (again in "
                    f"results[{k}]); give the auditors distinct names."
                )
            labels.append(label)
    seen_vars: set[str] = set()
    for k, ds in enumerate(results):
        names = {str(name) for name in ds.data_vars}
        clash = seen_vars & names
        if clash:
            raise InvalidInputError(
                f"variable(s) {sorted(clash)} appear in more than one of `results` (again in "
                f"results[{k}])."
            )
        seen_vars |= names
    return labels


def _pair_union(results: tuple[xr.Dataset, ...]) -> dict[tuple[Any, Any], tuple[int, int]]:
    """Each pair's row counts, over the union of the pairs in order of first appearance.

    The checks xarray's join cannot word: each input's pairs are distinct, a pair is audited in
    one orientation only, and a pair has the same row counts wherever it appears.
    """
    counts: dict[tuple[Any, Any], tuple[int, int]] = {}
    for k, ds in enumerate(results):
        seen: set[tuple[Any, Any]] = set()
        for a, b, na, nb in zip(*(ds[c].values.tolist() for c in PAIR_COORDS), strict=True):
            pair, rows = (a, b), (int(na), int(nb))
            if pair in seen:
                raise InvalidInputError(
                    f"pair ({a!r}, {b!r}) appears twice in results[{k}]; its two values would "
                    "have to share one slot."
                )
            seen.add(pair)
            if pair not in counts and (b, a) in counts:
                raise InvalidInputError(
                    f"pair ({a!r}, {b!r}) of results[{k}] is pair ({b!r}, {a!r}) of an earlier "
                    "input in reverse order; audit every pair in one orientation (as "
                    "sample_pairs gives them) so their numbers line up."
                )
            if counts.setdefault(pair, rows) != rows:
                raise InvalidInputError(
                    f"pair ({a!r}, {b!r}) has rows {counts[pair]} in one input and {rows} in "
                    f"results[{k}]; were they audited on the same data?"
                )
    return counts


def _check_gaps(results: tuple[xr.Dataset, ...], n_pairs: int) -> None:
    """Every variable runs along ``pair`` first and, where it will have gaps, can hold NaN."""
    for ds in results:
        complete = ds.sizes["pair"] == n_pairs  # its pairs are distinct (checked before)
        for name, var in ds.data_vars.items():
            if var.dims[:1] != ("pair",):
                raise InvalidInputError(
                    f"variable '{name}' does not run along 'pair' first; cannot merge it."
                )
            kind = var.dtype.kind
            if not complete and kind not in "fcbiu":
                raise InvalidInputError(
                    f"variable '{name}' of dtype {var.dtype} cannot hold gaps; merge inputs "
                    "that cover the same pairs."
                )


def _join(
    results: tuple[xr.Dataset, ...], counts: dict[tuple[Any, Any], tuple[int, int]]
) -> xr.Dataset:
    """Join the inputs' variables over the union of the pairs, with every pair coordinate."""
    # xarray joins on the (identity_a, identity_b) index; NaN fills the pairs an input did not
    # audit (integers and booleans with gaps become float64), and each variable keeps its attrs
    per_pair = ["n_a", "n_b", *FAILURE_PAIR_COORDS]
    indexed = [
        ds.drop_vars(per_pair, errors="ignore").set_index(pair=["identity_a", "identity_b"])
        for ds in results
    ]
    joined = xr.merge(indexed, join="outer", compat="no_conflicts", combine_attrs="override")
    order = pd.MultiIndex.from_tuples(list(counts), names=["identity_a", "identity_b"])
    merged = joined.isel(pair=joined.indexes["pair"].get_indexer(order)).reset_index("pair")
    sizes = np.asarray(list(counts.values()), dtype=np.int64).reshape(-1, 2)  # (pairs, 2)
    merged = merged.assign_coords(n_a=("pair", sizes[:, 0]), n_b=("pair", sizes[:, 1]))
    for name in PAIR_COORDS:
        merged[name].attrs = dict(results[0][name].attrs)
    return merged.assign_coords(_failure_coords(results, list(counts)))


def _failure_coords(
    results: tuple[xr.Dataset, ...], union: list[tuple[Any, Any]]
) -> dict[str, xr.Variable]:
    """Build the optional failure-rate coordinates over the union, NaN where no input has one.

    Results of one data set give a pair the same failure rates and p-value in every input;
    values that differ mean the inputs audited different data.
    """
    where = {pair: i for i, pair in enumerate(union)}
    out: dict[str, xr.Variable] = {}
    for name in FAILURE_PAIR_COORDS:
        having = [(k, ds) for k, ds in enumerate(results) if name in ds.coords]
        if not having:
            continue
        values = np.full(len(union), np.nan)  # (pairs,)
        for k, ds in having:
            pairs = zip(*(ds[c].values.tolist() for c in PAIR_COORDS[:2]), strict=True)
            pos = [where[pair] for pair in pairs]
            new = np.asarray(ds[name].values, dtype=np.float64)
            old = values[pos]
            clash = ~np.isnan(old) & ~np.isnan(new) & (old != new)
            if clash.any():
                i = int(np.flatnonzero(clash)[0])
                a, b = union[pos[i]]
                raise InvalidInputError(
                    f"pair ({a!r}, {b!r}) has {name} {old[i]:g} in one input and {new[i]:g} "
                    f"in results[{k}]; were they audited on the same data?"
                )
            values[pos] = np.where(np.isnan(old), new, old)
        out[name] = xr.Variable("pair", values, attrs=dict(having[0][1][name].attrs))
    return out
