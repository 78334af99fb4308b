"""``merge_audits``: several ``audit_pairs`` results on one EmbeddingSet as one Dataset."""

from __future__ import annotations

from typing import Any

import numpy as np
import xarray as xr

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
        included); ``auditors`` lists every label, ``n_pairs`` counts the union and
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
    if not results:
        raise InvalidInputError("`results` must hold at least one audit_pairs Dataset.")
    for k, ds in enumerate(results):
        if not isinstance(ds, xr.Dataset):
            raise TypeError(f"`results[{k}]` must be an xarray.Dataset; got {type(ds).__name__}.")
        missing = [c for c in ("identity_a", "identity_b", "n_a", "n_b") if c not in ds.coords]
        if "pair" not in ds.dims or missing or "auditors" not in ds.attrs:
            raise InvalidInputError(
                f"`results[{k}]` is not an audit_pairs result (needs dimension 'pair', the "
                "coordinates identity_a, identity_b, n_a, n_b and an 'auditors' attribute)."
            )
    for key in _SAME_DATA:
        values = {str(ds.attrs.get(key)) for ds in results}
        if len(values) > 1:
            raise InvalidInputError(
                f"`results` audited different data: their '{key}' attributes differ."
            )
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

    # the union of the pairs, in order of first appearance, with their row counts
    index: dict[tuple[Any, Any], int] = {}
    counts: list[tuple[int, int]] = []
    ids_a: list[Any] = []
    ids_b: list[Any] = []
    positions: list[np.ndarray] = []
    for k, ds in enumerate(results):
        pos = np.empty(ds.sizes["pair"], dtype=np.int64)
        seen: set[tuple[Any, Any]] = set()
        for i, (a, b, na, nb) in enumerate(
            zip(
                ds["identity_a"].values.tolist(),
                ds["identity_b"].values.tolist(),
                ds["n_a"].values.tolist(),
                ds["n_b"].values.tolist(),
                strict=True,
            )
        ):
            pair = (a, b)
            if pair in seen:
                raise InvalidInputError(
                    f"pair ({a!r}, {b!r}) appears twice in results[{k}]; its two values would "
                    "have to share one slot."
                )
            seen.add(pair)
            if pair not in index and (b, a) in index:
                raise InvalidInputError(
                    f"pair ({a!r}, {b!r}) of results[{k}] is pair ({b!r}, {a!r}) of an earlier "
                    "input in reverse order; audit every pair in one orientation (as "
                    "sample_pairs gives them) so their numbers line up."
                )
            if pair not in index:
                index[pair] = len(counts)
                counts.append((int(na), int(nb)))
                ids_a.append(a)
                ids_b.append(b)
            elif counts[index[pair]] != (int(na), int(nb)):
                raise InvalidInputError(
                    f"pair ({a!r}, {b!r}) has rows {counts[index[pair]]} in one input and "
                    f"{(int(na), int(nb))} in results[{k}]; were they audited on the same data?"
                )
            pos[i] = index[pair]
        positions.append(pos)
    n_total = len(counts)

    data_vars: dict[str, xr.Variable] = {}
    for ds, pos in zip(results, positions, strict=True):
        complete = pos.size == n_total  # an input's pairs are distinct (checked above)
        for var_name, var in ds.data_vars.items():
            name = str(var_name)
            if var.dims[:1] != ("pair",):
                raise InvalidInputError(
                    f"variable '{name}' does not run along 'pair' first; cannot merge it."
                )
            column = np.asarray(var.values)
            dtype = column.dtype
            if not complete and not np.issubdtype(dtype, np.floating):
                if np.issubdtype(dtype, np.bool_) or np.issubdtype(dtype, np.number):
                    dtype = np.dtype(np.float64)  # NaN marks the pairs not audited
                else:
                    raise InvalidInputError(
                        f"variable '{name}' of dtype {dtype} cannot hold gaps; merge inputs "
                        "that cover the same pairs."
                    )
            fill = np.nan if np.issubdtype(dtype, np.floating) else 0
            out = np.full((n_total, *column.shape[1:]), fill, dtype=dtype)
            out[pos] = column
            data_vars[name] = xr.Variable(var.dims, out, attrs=dict(var.attrs))

    attrs: dict[str, Any] = {}
    for ds in results:
        for key, value in ds.attrs.items():
            if key not in _PER_INPUT:
                attrs.setdefault(key, value)
    attrs["auditors"] = ",".join(labels)
    attrs["n_pairs"] = n_total
    # a merged input contributes the hashes of its own inputs, so chained merges keep them all
    attrs["merged_pairs_sha256"] = ",".join(
        str(ds.attrs.get("merged_pairs_sha256") or ds.attrs.get("pairs_sha256", ""))
        for ds in results
    )
    columns = {
        "identity_a": np.asarray(ids_a),
        "identity_b": np.asarray(ids_b),
        "n_a": np.asarray([c[0] for c in counts], dtype=np.int64),
        "n_b": np.asarray([c[1] for c in counts], dtype=np.int64),
    }
    coords = {
        name: xr.Variable("pair", column, attrs=dict(results[0][name].attrs))
        for name, column in columns.items()
    }
    return xr.Dataset(data_vars, coords=coords, attrs=attrs)
