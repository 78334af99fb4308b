"""Result schema and file writing: the public home of :mod:`idaudit._results`.

* :data:`STATUSES` — every formal status a reported number can carry, with its meaning
  (``Status`` is the same list as a ``typing.Literal``); :data:`EPSILON_STATUSES` — those an
  ε estimated from audit data may carry. See ``docs/status.md``.
* :func:`reduce_status`, :func:`reduction_attrs` — the status of a maximum, quantile or
  summary over many numbers: certified only when their multiplicity is paid for;
  :func:`reduction_attrs_across` — the same over several conditions certified as families.
* :func:`variable`, :func:`pair_dataset`, :func:`provenance` — build result Datasets the way
  idaudit's own functions do; :func:`check_result_dataset` checks one; :func:`pair_frame`
  is the one-row-per-pair table view.
* :func:`write_atomic`, :func:`write_text`, :func:`write_json`, :func:`write_csv`,
  :func:`write_netcdf` — atomic, owner-only (``0o600``) writers for anything derived from
  biometric data; :func:`private_dir` — the owner-only (``0o700``) folder they go in, every
  missing parent included.
"""

from __future__ import annotations

from idaudit._results import (
    CERTIFIED_STATUSES,
    EPSILON_STATUSES,
    STATUSES,
    Status,
    check_result_dataset,
    pair_dataset,
    pair_frame,
    private_dir,
    provenance,
    reduce_status,
    reduction_attrs,
    reduction_attrs_across,
    variable,
    write_atomic,
    write_csv,
    write_json,
    write_netcdf,
    write_text,
)

__all__ = [
    "CERTIFIED_STATUSES",
    "EPSILON_STATUSES",
    "STATUSES",
    "Status",
    "check_result_dataset",
    "pair_dataset",
    "pair_frame",
    "private_dir",
    "provenance",
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
