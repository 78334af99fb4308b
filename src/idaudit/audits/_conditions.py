"""``concat_conditions``: audits of several conditions stacked along ``condition``."""

from __future__ import annotations

import numbers
from collections.abc import Hashable, Mapping
from typing import Any

import numpy as np
import xarray as xr

from idaudit._results import (
    FAILURE_PAIR_COORDS,
    PAIR_COORDS,
    check_result_dataset,
    reconcile_attrs,
)
from idaudit.exceptions import InvalidInputError

__all__ = ["concat_conditions"]


def concat_conditions(results: Mapping[Hashable, xr.Dataset]) -> xr.Dataset:
    """Stack per-pair audit results of several conditions along a new ``condition`` dimension.

    A condition is one generator × encoder × dataset setting (a row of seed 000's Table 1).
    Each gets its own :func:`idaudit.audit_pairs` (or :func:`idaudit.merge_audits`) result on
    its own identities; this function lines them up pair slot by pair slot so that
    ``ds.sel(condition=name)`` gives back each one, provenance included.

    Parameters
    ----------
    results : mapping of condition name to xarray.Dataset
        Per-pair results with the same variables and the same number of pairs (Table 1 audits
        the first 100 pairs of every condition); names become the ``condition`` coordinate.

    Returns
    -------
    xarray.Dataset
        Dimensions ``(condition, pair)``. ``identity_a``, ``identity_b``, ``n_a`` and ``n_b``
        become ``(condition, pair)`` coordinates. Attributes equal across conditions (the
        auditors and their hyperparameters, as a rule) stay attributes; any that differ (input
        hashes, seeds) become ``condition`` coordinates of the same name, so nothing a result
        needs to reproduce itself is lost. Variable attributes (``status``) must agree. A
        trailing dimension of different sizes (``embedding_dim`` of KDE-LR's per-coordinate
        terms, e.g. a 128-d and a 512-d encoder) is NaN-padded to the largest, and each
        condition's size kept as the coordinate ``n_<dim>``.

    Raises
    ------
    TypeError
        If ``results`` is not a mapping of Datasets.
    InvalidInputError
        If it is empty, the Datasets hold different variables or pair counts, a variable's
        attributes differ between conditions, or the identity labels are of different types
        (numbers in one condition, text in another).

    Examples
    --------
    >>> import numpy as np
    >>> from idaudit import EmbeddingSet, MMDTVAuditor, audit_pairs, sample_pairs
    >>> from idaudit.audits import concat_conditions
    >>> gen = np.random.default_rng(0)
    >>> sets = {c: EmbeddingSet(gen.normal(size=(60, 4)), np.repeat(list("abc"), 20))
    ...         for c in ("x", "y")}
    >>> runs = {c: audit_pairs(es, sample_pairs(es.identities, 3, rng=0), [MMDTVAuditor()],
    ...                        progress=False) for c, es in sets.items()}
    >>> ds = concat_conditions(runs)
    >>> dict(ds.sizes), ds["input_sha256"].dims
    ({'condition': 2, 'pair': 3}, ('condition',))
    """
    names, sets = _check_conditions(results)
    _check_alike(names, sets)
    # attributes equal across conditions stay attributes, those that differ become coordinates
    shared, varying = reconcile_attrs([ds.attrs for ds in sets], unordered=("auditors",))
    stacked, extra_sizes = _stack(names, sets)
    for var in sets[0].data_vars:
        stacked[var].attrs = dict(sets[0][var].attrs)
    for coord in (*PAIR_COORDS, *FAILURE_PAIR_COORDS):
        having = [ds for ds in sets if coord in ds.coords]
        if having:
            stacked[coord].attrs = dict(having[0][coord].attrs)
    for key, values in varying.items():
        if key in stacked.variables:
            raise InvalidInputError(
                f"attribute '{key}' differs between conditions and clashes with a variable name."
            )
        stacked = stacked.assign_coords({key: ("condition", _column(values))})
    for key, sizes in extra_sizes.items():
        if len(set(sizes)) > 1:
            stacked = stacked.assign_coords({key: ("condition", np.asarray(sizes, dtype=np.int64))})
    stacked.attrs = shared
    return stacked


def _check_conditions(
    results: Mapping[Hashable, xr.Dataset],
) -> tuple[list[Hashable], list[xr.Dataset]]:
    """Check each condition's result on its own; return the names and the results."""
    if not isinstance(results, Mapping):
        raise TypeError(
            "`results` must be a mapping of condition name to Dataset; got "
            f"{type(results).__name__}."
        )
    if not results:
        raise InvalidInputError("`results` must hold at least one condition.")
    names = list(results)
    sets = list(results.values())
    for name, ds in zip(names, sets, strict=True):
        if not isinstance(ds, xr.Dataset):
            raise TypeError(
                f"`results[{name!r}]` must be an xarray.Dataset; got {type(ds).__name__}."
            )
        what = (
            f"`results[{name!r}]` is not a per-pair audit result (needs dimension 'pair' "
            f"and the coordinates {', '.join(PAIR_COORDS)})"
        )
        if "pair" not in ds.dims or any(c not in ds.coords for c in PAIR_COORDS):
            raise InvalidInputError(what + ".")
        if "condition" in ds.dims:
            raise InvalidInputError(f"`results[{name!r}]` already has a 'condition' dimension.")
        try:
            check_result_dataset(ds, require_provenance=False)
        except InvalidInputError as err:
            raise InvalidInputError(f"{what}: {err}") from err
    return names, sets


def _check_alike(names: list[Hashable], sets: list[xr.Dataset]) -> None:
    """Every condition holds the first one's variables, pair count and label type."""
    first_name, first = names[0], sets[0]
    want_vars = sorted(str(v) for v in first.data_vars)
    for name, ds in zip(names[1:], sets[1:], strict=True):
        got = sorted(str(v) for v in ds.data_vars)
        if got != want_vars:
            raise InvalidInputError(
                f"`results[{name!r}]` holds the variables {got}, `results[{first_name!r}]` "
                f"holds {want_vars}; conditions must run the same auditors."
            )
        if ds.sizes["pair"] != first.sizes["pair"]:
            raise InvalidInputError(
                f"`results[{name!r}]` has {ds.sizes['pair']} pairs, `results[{first_name!r}]` "
                f"{first.sizes['pair']}; audit the same number of pairs per condition (slice "
                "with ds.isel(pair=slice(n)))."
            )
        for var in want_vars:
            if ds[var].attrs != first[var].attrs:
                raise InvalidInputError(
                    f"variable '{var}' has different attributes in `results[{name!r}]` and "
                    f"`results[{first_name!r}]`; were they made by the same auditors?"
                )
        for coord in ("identity_a", "identity_b"):
            kinds = {first[coord].dtype.kind, ds[coord].dtype.kind}
            if len(kinds) > 1 and not kinds <= {"U", "S", "O"} and not kinds <= {"i", "u"}:
                raise InvalidInputError(
                    f"identity labels of `results[{name!r}]` ({ds[coord].dtype}) and "
                    f"`results[{first_name!r}]` ({first[coord].dtype}) are of different types; "
                    "a stacked result could not be saved. Use one label type (e.g. str)."
                )


def _stack(
    names: list[Hashable], sets: list[xr.Dataset]
) -> tuple[xr.Dataset, dict[str, list[int]]]:
    """Stack the conditions along ``condition`` (no attrs); return each trailing dim's sizes."""
    bare = []
    for ds in sets:
        ds = ds.copy(deep=False)
        ds.attrs = {}
        # an optional pair coordinate (failure rates) that a condition lacks is NaN there
        for coord in FAILURE_PAIR_COORDS:
            if coord not in ds.coords and any(coord in other.coords for other in sets):
                ds = ds.assign_coords({coord: ("pair", np.full(ds.sizes["pair"], np.nan))})
        bare.append(ds)
    # trailing dimensions (KDE-LR's embedding_dim) may differ between conditions: NaN-pad to the
    # largest and keep each condition's own size as a coordinate
    extra_sizes: dict[str, list[int]] = {}
    for dim in dict.fromkeys(d for ds in sets for d in ds.dims if d != "pair"):
        sizes = [int(ds.sizes.get(dim, 0)) for ds in sets]
        extra_sizes[f"n_{dim}"] = sizes
        largest = max(sizes)
        bare = [
            ds.pad({dim: (0, largest - size)}) if 0 < size < largest else ds
            for ds, size in zip(bare, sizes, strict=True)
        ]
    condition = xr.Variable("condition", np.asarray(names))
    stacked = xr.concat(
        bare,
        dim=xr.DataArray(condition, dims="condition", name="condition"),
        data_vars="all",
        coords="all",
        compat="equals",
        join="exact",
        combine_attrs="drop",
    )
    return stacked, extra_sizes


def _column(values: list[Any]) -> np.ndarray:
    """One attribute across conditions as a netCDF-friendly 1-d array.

    Numbers stay numbers: where every given value is a real number (``None``, the ``"None"``
    that :func:`idaudit.results.attr_value` writes for it, or a missing attribute counting as
    not given), the column is float64 with NaN where none was given, so that a blur's
    ``sigma`` of 1.5 is a number beside a condition that has no sigma. Any other mix is
    text, with ``"None"`` where a condition has no value.
    """
    missing = [v is None or (isinstance(v, str) and v == "None") for v in values]
    given = [v for v, gone in zip(values, missing, strict=True) if not gone]
    if given and all(
        isinstance(v, numbers.Real) and not isinstance(v, (bool, np.bool_)) for v in given
    ):
        if len(given) == len(values) and len({type(v) for v in values}) == 1:
            return np.asarray(values)  # one numeric type throughout: kept as it is
        return np.asarray([float(v) if v in given else np.nan for v in values], dtype=np.float64)
    if len(given) < len(values) or len({type(v) for v in values}) > 1:
        return np.asarray([str(v) for v in values])
    return np.asarray(values)
