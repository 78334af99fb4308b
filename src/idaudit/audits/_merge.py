"""``merge_audits``: several ``audit_pairs`` results on one EmbeddingSet as one Dataset."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import xarray as xr

from idaudit.exceptions import InvalidInputError

__all__ = ["merge_audits"]

_PAIR_COORDS = ("identity_a", "identity_b", "n_a", "n_b")
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
    if not results:
        raise InvalidInputError("`results` must hold at least one audit_pairs Dataset.")
    for k, ds in enumerate(results):
        if not isinstance(ds, xr.Dataset):
            raise TypeError(f"`results[{k}]` must be an xarray.Dataset; got {type(ds).__name__}.")
        missing = [c for c in _PAIR_COORDS if c not in ds.coords]
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

    # the checks xarray's join cannot word: each input's pairs are distinct, a pair is audited
    # in one orientation only, and a pair has the same row counts wherever it appears
    counts: dict[tuple[Any, Any], tuple[int, int]] = {}  # the union, in order of first appearance
    for k, ds in enumerate(results):
        seen: set[tuple[Any, Any]] = set()
        for a, b, na, nb in zip(
            *(ds[c].values.tolist() for c in _PAIR_COORDS[:2]),
            *(ds[c].values.tolist() for c in _PAIR_COORDS[2:]),
            strict=True,
        ):
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
    for ds in results:
        complete = ds.sizes["pair"] == len(counts)  # its pairs are distinct (checked above)
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

    # xarray joins on the (identity_a, identity_b) index; NaN fills the pairs an input did not
    # audit (integers and booleans with gaps become float64), and each variable keeps its attrs
    indexed = [
        ds.drop_vars(["n_a", "n_b"]).set_index(pair=["identity_a", "identity_b"]) for ds in results
    ]
    joined = xr.merge(indexed, join="outer", compat="no_conflicts", combine_attrs="override")
    order = pd.MultiIndex.from_tuples(list(counts), names=["identity_a", "identity_b"])
    merged = joined.isel(pair=joined.indexes["pair"].get_indexer(order)).reset_index("pair")
    sizes = np.asarray(list(counts.values()), dtype=np.int64).reshape(-1, 2)  # (pairs, 2)
    merged = merged.assign_coords(n_a=("pair", sizes[:, 0]), n_b=("pair", sizes[:, 1]))
    for name in _PAIR_COORDS:
        merged[name].attrs = dict(results[0][name].attrs)

    attrs: dict[str, Any] = {}
    for key in dict.fromkeys(k for ds in results for k in ds.attrs):
        if key in _PER_INPUT:
            continue
        given = [ds.attrs[key] for ds in results if key in ds.attrs]
        # a run setting that differs between the inputs (e.g. setting.batch_size) keeps every
        # input's value, in input order
        same = all(str(v) == str(given[0]) for v in given)
        attrs[key] = given[0] if same else ",".join(str(ds.attrs.get(key, "")) for ds in results)
    attrs["auditors"] = ",".join(labels)
    attrs["n_pairs"] = len(counts)
    # a merged input contributes the hashes of its own inputs, so chained merges keep them all
    attrs["merged_pairs_sha256"] = ",".join(
        str(ds.attrs.get("merged_pairs_sha256") or ds.attrs.get("pairs_sha256", ""))
        for ds in results
    )
    merged.attrs = attrs
    return merged
