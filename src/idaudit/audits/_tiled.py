"""The tiled engine of ``audit_pairs(es, "all", ...)``: tiles on threads or dask workers.

:func:`run_tiled` cuts the call's identities into blocks (:class:`~idaudit.audits._tiles.
TilePlan`), runs every auditor on every tile (:func:`_one_tile`) on ``n_threads``
threads of this process or on the workers of a ``dask.distributed`` cluster, and yields each
finished tile's pairs: the engine scatters them into per-pair arrays or feeds a
:class:`~idaudit.audits._stream.SummaryStream`. With a store, every tile row is written
as it completes (:class:`TileStore`) and a later call reads it back instead of recomputing.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Sequence
from contextlib import closing
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import torch

from idaudit._device import resolve_device, single_threaded
from idaudit._results import private_dir
from idaudit.audits._backends import run_bounded
from idaudit.audits._base import BaseAuditor
from idaudit.audits._batch import PairError
from idaudit.audits._store import import_zarr, open_existing
from idaudit.audits._tiles import Block, TilePlan, TileResult, tile_groups
from idaudit.exceptions import InvalidInputError

__all__ = ["TileStore", "run_tiled"]

#: Pairs of a tile or tile row: pair indices, identity positions and ``{var: values}``.
Pairs = tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.int64], dict[str, Any]]
#: The call's result variables: (variable, auditor label, output name).
Vars = Sequence[tuple[str, str, str]]


def blocks_of(
    rows: Callable[[Any], npt.NDArray[np.float64]], identities: Sequence[Any], plan: TilePlan
) -> list[Block]:
    """Each block's rows as one (identities, n, d) array."""
    return [Block(np.stack([rows(identities[k]) for k in codes])) for codes in plan.blocks]


def _flatten(result: TileResult, variables: Vars) -> dict[str, npt.NDArray[Any]]:
    return {var: result[label][name] for var, label, name in variables}


def _tile_error(exc: PairError, plan: TilePlan, r: int, s: int, ids: Sequence[Any]) -> Exception:
    _, a, b = plan.pair_codes(r, s)
    k = exc.pair_index
    return InvalidInputError(f"pair ({ids[a[k]]!r}, {ids[b[k]]!r}), {exc}")


def _one_tile(
    block_a: Block, block_b: Block, diagonal: bool, auditors: Sequence[BaseAuditor], device: Any
) -> TileResult:
    """Every auditor on every pair of one tile, in :meth:`TilePlan.pair_codes` order.

    Runs on one thread; also the task a dask worker runs. A bad pair raises
    :class:`PairError` with its position in the tile.
    """
    parts: list[TileResult] = []
    start = 0
    with single_threaded():
        for tile in tile_groups(block_a, block_b, diagonal, resolve_device(device)):
            out: TileResult = {}
            for aud in auditors:
                try:
                    res = aud._run_tile(tile)
                except PairError as exc:
                    message = f"auditor {aud.label!r}: {exc}"
                    raise PairError(message, pair_index=start + exc.pair_index) from None
                out[aud.label] = {o.name: np.asarray(res[o.name]) for o in aud.outputs()}
            parts.append(out)
            start += tile.n_pairs
    return {
        aud.label: {
            o.name: np.concatenate([p[aud.label][o.name] for p in parts]) for o in aud.outputs()
        }
        for aud in auditors
    }


class TileStore:
    """A zarr store with one group per finished tile row, which a later call resumes.

    The root's attributes identify the inputs, pairs, parameters and tile size; a row's group
    (``row000012``) holds ``pair_index`` and one array per variable along ``pair`` and is
    flagged ``done`` after its data, so a row cut short by an interruption is recomputed.
    Each row reads with ``xarray.open_zarr(path, group="row000012")``.
    """

    def __init__(self, path: Path, group: Any) -> None:
        self.path = path
        self.group = group
        self.variables: list[str] = []  # what every row must hold (set by run_tiled)

    @classmethod
    def open_or_create(
        cls, path: Path, identity: dict[str, Any], tile_size: int | None
    ) -> tuple[TileStore, int | None]:
        """Open ``path`` (checking it was written for this call) or create it.

        Returns the store and the tile size it was written with (None for a new store).
        """
        if path.exists():
            group, stored = open_existing(path, "tiled", identity, "tile_size", tile_size)
            return cls(path, group), stored
        private_dir(path, name="store")  # biometric results: owner-only, parents included
        group = import_zarr().open_group(str(path), mode="a")  # "w" would recreate the folder
        group.attrs.update({**identity, "engine": "tiled"})
        return cls(path, group), None

    def set_tile_size(self, tile_size: int) -> None:
        self.group.attrs["tile_size"] = int(tile_size)

    def done(self) -> set[int]:
        """Tile rows whose results are complete."""
        out = set()
        for name, sub in self.group.groups():
            if name.startswith("row") and sub.attrs.get("done"):
                out.add(int(name[3:]))
        return out

    def write(
        self,
        r: int,
        index: npt.NDArray[np.int64],
        values: dict[str, npt.NDArray[Any]],
        attrs: dict[str, dict[str, Any]],
    ) -> None:
        """Write tile row ``r`` (its pair indices and every variable), then flag it done."""
        sub = self.group.create_group(f"row{r:06d}", overwrite=True)
        arrays = {"pair_index": index, **values}
        for name, data in arrays.items():
            arr = sub.create_array(
                name,
                shape=data.shape,
                chunks=data.shape,
                dtype=data.dtype,
                dimension_names=("pair",),
                attributes=attrs.get(
                    name, {"long_name": "pair index in all_pairs order", "status": "descriptive"}
                ),
            )
            arr[:] = data
        sub.attrs["done"] = True

    def read(self, r: int) -> tuple[npt.NDArray[np.int64], dict[str, npt.NDArray[Any]]]:
        """Tile row ``r``'s pair indices and variables."""
        sub = self.group[f"row{r:06d}"]
        values = {name: np.asarray(arr[:]) for name, arr in sub.arrays()}
        missing = sorted({"pair_index", *self.variables} - values.keys())
        if missing:
            raise InvalidInputError(
                f"`store` {str(self.path)!r} is damaged: tile row {r} is marked done but lacks "
                f"{missing}; delete the store (or that row's group, row{r:06d}) to recompute it."
            )
        return values.pop("pair_index"), values


def run_tiled(
    plan: TilePlan,
    rows: Callable[[Any], npt.NDArray[np.float64]],
    identities: Sequence[Any],
    auditors: Sequence[BaseAuditor],
    variables: Vars,
    *,
    device: torch.device,
    n_threads: int,
    backend: str,
    client: Any,
    store: TileStore | None,
    store_attrs: dict[str, dict[str, Any]],
) -> Generator[Pairs, None, None]:
    """Yield every pair's values, tile row by tile row: read from ``store``, or run and stored.

    ``rows(identity)`` gives an identity's rows (the blocks are built only when a tile runs).
    """
    if store is not None:
        store.variables = [var for var, _, _ in variables]
    done = store.done() if store is not None else set()
    for r in sorted(done):
        assert store is not None
        index, values = store.read(r)
        yield (index, *_codes_of(plan, r), values)
    todo = [r for r in range(plan.n_rows) if r not in done]
    if not todo:
        return
    parts_of: dict[int, list[tuple[int, TileResult]]] = {r: [] for r in todo}
    remaining = {r: len(plan.tiles(r)) for r in todo}
    tiles = [t for r in todo for t in plan.tiles(r)]
    blocks = blocks_of(rows, identities, plan)
    if backend == "local":
        finished = _local(plan, blocks, tiles, auditors, device, n_threads, identities)
    else:
        finished = _dask(plan, blocks, tiles, auditors, device, client, identities)
    with closing(finished):
        for r, s, result in finished:
            index, a, b = plan.pair_codes(r, s)
            yield index, a, b, _flatten(result, variables)
            if store is None:
                continue
            parts_of[r].append((s, result))
            remaining[r] -= 1
            if remaining[r] == 0:  # the row is complete: write it in tile order
                parts = sorted(parts_of.pop(r), key=lambda item: item[0])
                index = np.concatenate([plan.pair_codes(r, s)[0] for s, _ in parts])
                values = {
                    var: np.concatenate([_flatten(res, variables)[var] for _, res in parts])
                    for var, _, _ in variables
                }
                store.write(r, index, values, store_attrs)


def _codes_of(plan: TilePlan, r: int) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    codes = [plan.pair_codes(r, s) for _, s in plan.tiles(r)]
    return np.concatenate([c[1] for c in codes]), np.concatenate([c[2] for c in codes])


def _local(
    plan: TilePlan,
    blocks: list[Block],
    tiles: list[tuple[int, int]],
    auditors: Sequence[BaseAuditor],
    device: torch.device,
    n_threads: int,
    identities: Sequence[Any],
) -> Generator[tuple[int, int, TileResult], None, None]:
    """Tiles on ``n_threads`` threads, at most ``2 n_threads`` in flight (bounded memory)."""

    def one(tile: tuple[int, int]) -> TileResult:
        r, s = tile
        try:
            return _one_tile(blocks[r], blocks[s], r == s, auditors, device)
        except PairError as exc:
            raise _tile_error(exc, plan, r, s, identities) from None

    n_threads = max(1, min(n_threads, len(tiles)))
    with single_threaded():
        for (r, s), result in run_bounded(one, tiles, n_threads, 2 * n_threads):
            yield r, s, result


def _dask(
    plan: TilePlan,
    blocks: list[Block],
    tiles: list[tuple[int, int]],
    auditors: Sequence[BaseAuditor],
    device: torch.device,
    client: Any,
    identities: Sequence[Any],
) -> Generator[tuple[int, int, TileResult], None, None]:
    """Tiles on a dask cluster: each block is scattered once; a task gets its two blocks."""
    from distributed import as_completed

    futures = client.scatter(blocks, hash=False)  # one future per block, no broadcast
    slots = max(2, 2 * sum(client.nthreads().values()))
    pending = iter(tiles)
    tile_of: dict[str, tuple[int, int]] = {}

    def submit(tile: tuple[int, int]) -> Any:
        r, s = tile
        fut = client.submit(
            _one_tile, futures[r], futures[s], r == s, list(auditors), str(device), pure=False
        )
        tile_of[fut.key] = tile
        return fut

    queue = as_completed([submit(t) for _, t in zip(range(slots), pending, strict=False)])  # type: ignore[no-untyped-call]
    for fut in queue:
        tile = tile_of.pop(fut.key)
        try:
            result: TileResult = fut.result()
        except PairError as exc:
            raise _tile_error(exc, plan, *tile, identities) from None
        yield (*tile, result)
        nxt = next(pending, None)
        if nxt is not None:
            queue.add(submit(nxt))  # type: ignore[no-untyped-call]
        fut.release()
