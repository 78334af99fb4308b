"""The resumable zarr store of :func:`idaudit.audit_pairs` (``store=``).

Every chunk's per-pair results are written as the chunk finishes, then the chunk's flag in
``chunk_done``; a later call with the same embeddings, pairs, auditor parameters, seeds and
batch size skips the flagged chunks, and a store written for anything else is refused.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt
import xarray as xr

from idaudit._results import private_dir
from idaudit.exceptions import InvalidInputError

if TYPE_CHECKING:
    from idaudit.audits._plan import ChunkResult, OutputSpec, PairPlan


class _Store:
    """A zarr store of per-pair results that a later call can resume."""

    def __init__(self, path: Path, group: Any, specs: Sequence[OutputSpec], n_pairs: int) -> None:
        self.path = path
        self.group = group
        self.specs = {s.var: s for s in specs}
        self.n_pairs = n_pairs
        bs = group.attrs.get("batch_size")
        self.batch_size: int | None = None if bs is None else int(bs)

    @classmethod
    def open_or_create(
        cls,
        path: Path,
        specs: Sequence[OutputSpec],
        plan: PairPlan,
        attrs: dict[str, Any],
        parameters_sha256: str,
        batch_size: int | None,
    ) -> _Store:
        zarr = import_zarr()
        identity = {
            "input_sha256": attrs["input_sha256"],
            "pairs_sha256": attrs["pairs_sha256"],
            "parameters_sha256": parameters_sha256,
        }
        if path.exists():
            group, _ = open_existing(path, "chunked", identity, "batch_size", batch_size)
            return cls(path, group, specs, plan.n_pairs)
        private_dir(path, name="store")  # biometric results: owner-only, parents included
        i, j = plan.codes()  # positions, not label tuples: O(pairs) integers
        ids = _label_array(plan.identities)
        coords = xr.Dataset(coords={"identity_a": ("pair", ids[i]), "identity_b": ("pair", ids[j])})
        counts = np.asarray([plan.counts[x] for x in plan.identities], dtype=np.int64)
        coords = coords.assign_coords(n_a=("pair", counts[i]), n_b=("pair", counts[j]))
        coords.attrs.update(attrs)
        coords.attrs.update(identity)
        coords.to_zarr(str(path), mode="a", consolidated=False)
        group = zarr.open_group(str(path), mode="r+")
        return cls(path, group, specs, plan.n_pairs)

    def initialise(self, batch_size: int) -> None:
        """Create the (empty) result arrays, chunked like the pair chunks."""
        n_chunks = -(-self.n_pairs // batch_size)
        for s in self.specs.values():
            self.group.create_array(  # overwrite: what a run killed here left is void
                s.var,
                overwrite=True,
                shape=(self.n_pairs, *s.shape),
                chunks=(batch_size, *s.shape),
                dtype=s.dtype,
                fill_value=False if s.dtype is bool else np.nan,
                dimension_names=("pair", *s.dims),
                attributes={
                    "long_name": s.output.long_name,
                    "status": s.output.status,
                    "coordinates": "identity_a identity_b n_a n_b",
                },
            )
        # one flag per chunk, each its own (atomically written) file, set after the data
        self.group.create_array(
            "chunk_done",
            overwrite=True,
            shape=(n_chunks,),
            chunks=(1,),
            dtype=bool,
            fill_value=False,
            dimension_names=("chunk",),
            attributes={"long_name": "chunk finished and written", "status": "descriptive"},
        )
        self.group.attrs["batch_size"] = batch_size
        self.batch_size = batch_size

    def done(self) -> set[int]:
        flags = np.asarray(self.group["chunk_done"][:])
        return {int(k) for k in np.flatnonzero(flags)}

    def write(self, k: int, lo: int, hi: int, result: ChunkResult) -> None:
        for s in self.specs.values():
            self.group[s.var][lo:hi] = np.asarray(result[s.label][s.name], dtype=s.dtype)
        self.group["chunk_done"][k] = True

    def read(self, var: str) -> npt.NDArray[Any]:
        return np.asarray(self.group[var][:])


def import_zarr() -> Any:
    """Return the zarr module, or say which extra installs it."""
    try:
        import zarr
    except ImportError as exc:  # pragma: no cover - zarr is in the dask and test extras
        raise ImportError(
            '`store=` needs zarr; install it with pip install "idaudit[dask]".'
        ) from exc
    return zarr


#: What one unit of each engine's store is called in messages.
_UNITS = {"batch_size": "chunks", "tile_size": "tiles"}


def open_existing(
    path: Path, engine: str, identity: dict[str, str], size_name: str, size: int | None
) -> tuple[Any, int | None]:
    """Open a store written before, for ``engine`` and this call, to resume it.

    Refuses a folder that is not such a store, one written by the other engine, one written
    for other inputs, pairs or parameters (:func:`check_identity`), and one cut into other
    chunks or tiles than ``size`` (``size_name`` is ``"batch_size"`` or ``"tile_size"``).
    Returns the zarr group and the size it was written with (None before its first unit).
    """
    try:
        group = import_zarr().open_group(str(path), mode="r+")
    except Exception as exc:
        raise InvalidInputError(
            f"`store` {str(path)!r} exists but is not a zarr store written by audit_pairs ({exc})."
        ) from None
    written = group.attrs.get("engine", "chunked")  # stores from before the tiled engine
    if written != engine:
        raise InvalidInputError(
            f"`store` {str(path)!r} was written by the {written} engine; resume it with "
            f'engine="{written}" (or "auto"), or pass another path.'
        )
    check_identity(path, group.attrs, identity)
    stored: Any = group.attrs.get(size_name)
    if size is not None and stored is not None and int(stored) != size:
        raise InvalidInputError(
            f"`{size_name}` must match the store's {_UNITS[size_name]} ({int(stored)}) to resume "
            f"{str(path)!r}; got {size}. Leave it None to use the store's."
        )
    return group, None if stored is None else int(stored)


def check_identity(path: Path, stored: Any, identity: dict[str, str]) -> None:
    """Refuse a store whose recorded inputs, pairs or parameters differ from this call's."""
    for key, want in identity.items():
        have = stored.get(key)
        if have != want:
            what = {
                "input_sha256": "other embeddings",
                "pairs_sha256": "other pairs",
                "parameters_sha256": "other auditors, parameters or seeds",
            }[key]
            raise InvalidInputError(
                f"`store` {str(path)!r} holds results for {what} ({key} {have!r}, this "
                f"call {want!r}); pass another path, or delete it to start over."
            )


def _label_array(labels: list[Any]) -> npt.NDArray[Any]:
    """Labels for zarr: strings as variable-length strings (a specified zarr v3 type)."""
    arr = np.asarray(labels)
    return arr.astype(object) if arr.dtype.kind == "U" else arr
