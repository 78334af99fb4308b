"""``audit_pairs``: many identity pairs (or all of them) through many auditors, one result.

The engine cuts the pairs into chunks of ``batch_size`` pairs, runs every auditor on each
chunk (one batched kernel call per auditor and chunk) and puts the chunks back together:
in memory (``keep="pairs"``), as running summaries (``keep="summary"``) or in a zarr store
that a later call resumes (``store=``). Chunks run side by side on CPU threads (each on one
torch thread) or on the workers of a ``dask.distributed`` cluster.

This module plans the call (pairs, chunks, outputs, attributes) and assembles the result;
the backends that run the chunks are in :mod:`idaudit.audits._backends` and the resumable
store in :mod:`idaudit.audits._store`.
"""

from __future__ import annotations

import hashlib
import json
import os
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np
import numpy.typing as npt
import xarray as xr
from tqdm.auto import tqdm

from idaudit._device import available_cpus, resolve_device
from idaudit._results import (
    attr_value,
    check_status,
    pair_dataset,
    provenance,
    variable,
)
from idaudit._validation import check_integer, check_option, check_pairs
from idaudit._version import __version__
from idaudit.audits._backends import ChunkResult, _run_dask, _run_local
from idaudit.audits._base import BaseAuditor, Output
from idaudit.audits._failures import PairFailures
from idaudit.audits._store import _Store
from idaudit.audits._stream import QUANTILES, SummaryStream, simultaneity
from idaudit.audits._tiled import TileStore, blocks_of, run_tiled
from idaudit.audits._tiles import DEFAULT_TILE_SIZE, TilePlan
from idaudit.data import EmbeddingSet, decode_pair_indices, n_pairs_of
from idaudit.exceptions import IdauditWarning, InvalidInputError

__all__ = ["QUANTILES", "audit_pairs"]

# Working-memory target of one batch when ``batch_size`` is None.
_BATCH_BYTES = 2**28
_MAX_AUTO_BATCH = 256

Keep = Literal["pairs", "summary"]
Engine = Literal["auto", "tiled", "chunked"]


def audit_pairs(
    es: EmbeddingSet,
    pairs: Sequence[tuple[Any, Any]] | npt.ArrayLike | Literal["all"],
    auditors: Sequence[BaseAuditor],
    *,
    device: str = "cpu",
    batch_size: int | None = None,
    progress: bool = True,
    backend: str = "local",
    client: Any = None,
    keep: Keep = "pairs",
    store: str | os.PathLike[str] | None = None,
    n_threads: int | None = None,
    engine: Engine = "auto",
    tile_size: int | None = None,
) -> xr.Dataset:
    r"""Run several auditors over many identity pairs, or all of them, into one Dataset.

    Parameters
    ----------
    es : EmbeddingSet
        Embeddings grouped by identity (already filtered and normalised).
    pairs : sequence of (label, label), array_like of shape (n_pairs, 2), or "all"
        Identity pairs, e.g. from :func:`idaudit.sample_pairs`; each label must be in ``es``
        and the two labels of a pair must differ. ``"all"``: every unordered pair of
        ``es.identities`` (complete adjacency, seed 000 Section 2.5), in the lexicographic
        order of :func:`idaudit.data.all_pairs`, generated chunk by chunk. Identities with
        fewer rows than an auditor needs are left out of ``"all"`` (with an
        :class:`~idaudit.exceptions.IdauditWarning`; attributes ``n_identities_excluded``
        and ``identities_excluded``), where a listed pair naming one raises.
    auditors : sequence of BaseAuditor
        The audits to run, with distinct :attr:`~BaseAuditor.label` values (give ``name=`` to
        tell two auditors of one class apart). Their parameters are used as they are;
        ``device`` below replaces each auditor's own ``device``.
    device : {"cpu", "cuda"}, default "cpu"
        Where the batched kernels run. CUDA without a GPU raises.
    batch_size : int, optional
        Pairs per chunk of the chunked engine (one kernel call per auditor). ``None`` picks
        the largest chunk whose working memory stays near 256 MiB (at most 256 pairs); with a
        ``store`` that already holds chunks, the store's. The numbers do not depend on it.
        The tiled engine does not use it: refused with ``engine="tiled"``, and an
        :class:`~idaudit.exceptions.IdauditWarning` when ``"auto"`` runs the tiled engine.
    progress : bool, default True
        Show a tqdm bar over pairs.
    backend : {"local", "dask"}, default "local"
        ``"local"`` runs chunks on ``n_threads`` threads of this process. ``"dask"`` sends
        them to the workers of a ``dask.distributed`` cluster (thread or process workers: the
        embeddings are scattered once, each task carries only its pair labels, auditors and
        seeds) and gives the same numbers.
    client : dask.distributed.Client, optional
        The client to use with ``backend="dask"`` (default: the current one).
    keep : {"pairs", "summary"}, default "pairs"
        ``"pairs"`` returns the per-pair Dataset. ``"summary"`` returns summaries over the
        pairs (see Returns) in memory that does not grow with the number of pairs: running
        maxima and counts, and for the exact quantiles each scalar output's values, kept in
        memory up to 256 MiB in all and beyond that in temporary files (8 bytes per pair
        and output) from which the order statistics are selected exactly.
    store : path, optional
        A zarr store (directory, e.g. ``"results.zarr"``) that receives every chunk as it
        finishes. If it exists and was written for the same embeddings, pairs, auditor
        parameters, seeds and batch size (tile size), finished chunks (tile rows) are not
        recomputed (resume after an interruption); a store written for anything else is
        refused. The chunked engine's store reads with ``xarray.open_zarr(store)``; the
        tiled engine's holds one group per tile row, ``xarray.open_zarr(store,
        group="row000012")`` (the same call with the same arguments reads all of it back).
        Needs ``pip install "idaudit[dask]"`` or ``zarr``.
    n_threads : int, optional
        CPU threads of the local backend: that many chunks run at once, each on one torch
        thread. Default: the CPUs this process may use (``len(os.sched_getaffinity(0))``),
        at most the number of chunks. Ignored by the dask backend (workers set their own).
    engine : {"auto", "tiled", "chunked"}, default "auto"
        ``"chunked"`` runs chunks of ``batch_size`` pairs, each auditor's batched kernel per
        chunk. ``"tiled"`` (only with ``pairs="all"`` and auditors that have a tiled
        kernel: GaussMech, and MMD-TV without ``confidence_level`` or permutations) groups
        identities of equal row count into blocks and reduces every pair of two blocks from
        one product of their rows (docs/audit_pairs.md, "CelebA scale"): the engine for many
        small identities. ``"auto"`` picks ``"tiled"`` where it applies. Both give the same
        numbers (to rounding).
    tile_size : int, optional
        Identities per block of the tiled engine (default 64, or the store's). The numbers
        do not depend on it. Refused with ``engine="chunked"``; an
        :class:`~idaudit.exceptions.IdauditWarning` when ``"auto"`` runs the chunked engine.

    Returns
    -------
    xarray.Dataset
        With ``keep="pairs"``: dimension ``pair``; coordinates ``identity_a``,
        ``identity_b``, ``n_a``, ``n_b``; one variable ``"<label>_<output>"`` per auditor
        output (e.g. ``mmdtv_epsilon``, ``rocht_auc``), each with ``long_name`` and
        ``status`` attributes. Dataset attributes (scalars and strings only, so
        ``to_netcdf`` round-trips) record every auditor's parameters as
        ``"<label>.<param>"``, its class and status, the seed drawn from its ``rng``
        (``"<label>.seed"``), the run settings actually used (``setting.device``,
        ``setting.backend``, ``setting.engine``, and ``setting.batch_size`` (chunked) or
        ``setting.tile_size`` (tiled), the resolved one when ``None`` was given), with
        ``pairs="all"`` the identities left out (``n_identities_excluded``,
        ``identities_excluded`` as a JSON list), the versions of idaudit and its numerical
        dependencies, the SHA-256 of the embeddings (``input_sha256``) and of the pair list
        (``pairs_sha256``).
        Parameter names hold no ``.``, so every key splits unambiguously at its last dot. See
        ``docs/audit_pairs.md`` for the schema variable by variable.

        With ``keep="summary"``: for every per-pair float output ``V`` (one number per pair)
        ``V_max`` with the first pair reaching it (``V_argmax_identity_a``/``_b``) and how
        many pairs reach it (``V_n_at_max``), ``V_quantile`` along ``quantile`` (levels
        :data:`QUANTILES`; the exact order statistic :math:`x_{(\lceil qn \rceil)}`, numpy's
        ``method="inverted_cdf"``, so ``+inf`` values stay ``+inf``), ``V_n_inf`` (pairs with
        ``+inf``), and along ``identity`` each identity's largest value over its pairs
        ``V_worst`` and that pair's other identity ``V_worst_partner`` (first in pair order on
        ties); ``V_count`` for boolean outputs. The same attributes as above plus ``n_pairs``.

    Raises
    ------
    InvalidInputError
        If a pair names an identity ``es`` does not hold (the message names it), pairs an
        identity with itself, an identity has fewer rows than an auditor needs, two auditors
        share a label, an option is invalid, or ``store`` holds results for other inputs or
        parameters (the message says which).
    ImportError
        If ``backend="dask"`` and dask.distributed is not installed, or ``store`` is given
        and zarr is not.

    Notes
    -----
    Every auditor's randomness comes from one seed drawn from its ``rng`` at the start of the
    call and shared by all pairs, so each pair's numbers equal ``auditor.fit(emb_a, emb_b)``
    with the same ``rng`` (to 1e-6, in practice to rounding), whatever the batch size, pair
    order, thread count or backend. What depends on one identity is computed once per call
    and reused by all of its pairs: its rows and Gram block (MMD-TV distances and ROC-HT),
    its mean and residual scale (GaussMech), the cross-validation folds of each pair of
    sizes (ROC-HT); per pair only the cross block is multiplied. Auditors run on the same
    chunk share intermediate results: distances and median bandwidths across MMD-TV
    auditors, KDE densities across KDE-LR auditors with different ``mix``.

    Memory: about ``n_threads`` chunks' working memory (≤ ~256 MiB each by default) plus the
    per-identity caches (identities × w × (w + d) × 8 bytes, w the largest identity) plus
    the result (``keep="pairs"``: every variable; ``"summary"``: 8 bytes per pair and scalar
    output), whatever the number of pairs; docs/audit_pairs.md gives the growth with
    identities, samples and dimension.

    Examples
    --------
    >>> import numpy as np
    >>> from idaudit import EmbeddingSet, GaussMechAuditor, MMDTVAuditor, audit_pairs
    >>> gen = np.random.default_rng(0)
    >>> es = EmbeddingSet(gen.normal(size=(90, 16)) + np.repeat(np.eye(16)[:3], 30, axis=0),
    ...                   np.repeat(["a", "b", "c"], 30))
    >>> ds = audit_pairs(es, [("a", "b"), ("a", "c")], [GaussMechAuditor(), MMDTVAuditor()],
    ...                  progress=False)
    >>> ds["mmdtv_epsilon"].dims, ds["mmdtv_epsilon"].attrs["status"]
    (('pair',), 'sample_estimate')
    >>> summary = audit_pairs(es, "all", [MMDTVAuditor()], keep="summary", progress=False)
    >>> str(summary["mmdtv_epsilon_argmax_identity_a"].values), int(summary.attrs["n_pairs"])
    ('a', 3)
    """
    if not isinstance(es, EmbeddingSet):
        raise TypeError(f"`es` must be an idaudit.EmbeddingSet; got {type(es).__name__}.")
    auditor_list = _check_auditors(auditors)
    dev = resolve_device(device)
    check_option(backend, "backend", ("local", "dask"))
    check_option(keep, "keep", ("pairs", "summary"))
    check_option(engine, "engine", ("auto", "tiled", "chunked"))
    if batch_size is not None:
        batch_size = check_integer(batch_size, "batch_size", minimum=1)
    if n_threads is not None:
        n_threads = check_integer(n_threads, "n_threads", minimum=1)
    if tile_size is not None:
        tile_size = check_integer(tile_size, "tile_size", minimum=1)
    for aud in auditor_list:
        aud._check_params()
    plan = _Plan(es, pairs, min_rows=max(aud.min_rows() for aud in auditor_list))
    auditor_list = [aud._for_pairs(plan.n_pairs) for aud in auditor_list]
    for aud in auditor_list:
        need = aud.min_rows()
        for label in plan.involved():
            if es.counts[label] < need:
                raise InvalidInputError(
                    f"identity {label!r} has {es.counts[label]} row(s); auditor "
                    f"{aud.label!r} needs at least {need} per identity."
                )
    asked = engine
    if engine == "auto" and store is not None:  # resume a store with the engine that wrote it
        engine = _stored_engine(Path(store)) or engine
    tiled = _use_tiles(engine, plan, auditor_list)
    _check_unused_size(asked, tiled, batch_size, tile_size)
    seeds = [aud._draw_seed() for aud in auditor_list]
    specs = _specs(auditor_list, es)
    attrs = _attributes(es, plan, auditor_list, seeds)
    kept = [s for s in specs if keep == "pairs" or not s.dims]
    ids = np.asarray(plan.identities)
    stream = SummaryStream(kept, ids, plan.n_pairs) if keep == "summary" else None
    values = _allocate(kept, plan.n_pairs) if stream is None else {}

    def add(index: Any, a: Any, b: Any, chunk: dict[str, npt.NDArray[Any]]) -> None:
        if stream is not None:
            stream.add(index, a, b, chunk)
            return
        for s in kept:
            values[s.var][index] = chunk[s.var]

    bar = tqdm(total=plan.n_pairs, desc="audit_pairs", unit="pair", disable=not progress)
    threads = n_threads if n_threads is not None else available_cpus()
    try:
        if tiled:
            settings = _run_tiles(
                es,
                plan,
                auditor_list,
                kept,
                attrs,
                add,
                bar.update,
                device=dev,
                n_threads=threads,
                backend=backend,
                client=client,
                store=store,
                tile_size=tile_size,
            )
        else:
            settings = _run_chunks(
                es,
                plan,
                auditor_list,
                seeds,
                specs,
                kept,
                attrs,
                add,
                bar.update,
                device=dev,
                n_threads=threads,
                backend=backend,
                client=client,
                store=store,
                batch_size=batch_size,
            )
    finally:
        bar.close()
    # the run settings actually used (they do not change the numbers)
    attrs.update({"setting.device": str(dev), "setting.backend": backend, **settings})
    failures = PairFailures(es, plan)
    failures.warn_if_unequal()
    ds = _assemble(es, plan, kept, values, attrs) if stream is None else stream.dataset(attrs)
    return failures.attach(ds, keep)


def _stored_engine(path: Path) -> Engine | None:
    """Return the engine that wrote the store at ``path``, or None (none, or not zarr)."""
    try:
        import zarr

        attrs = zarr.open_group(str(path), mode="r").attrs if path.exists() else None
    except Exception:  # not a zarr store: opening it for the call says so
        return None
    if attrs is None:
        return None
    return "tiled" if attrs.get("engine") == "tiled" else "chunked"


def _use_tiles(engine: str, plan: _Plan, auditors: Sequence[BaseAuditor]) -> bool:
    """Whether the call runs on the tiled engine (and why not, when it was asked for)."""
    if engine == "chunked":
        return False
    why = None
    if not plan.is_all:
        why = 'it audits pairs="all" only'
    else:
        slow = [a.label for a in auditors if not a._tileable()]
        if slow:
            why = (
                f"auditor(s) {slow} have no tiled kernel (GaussMech and MMD-TV without "
                "confidence_level or permutations do)"
            )
    if why is not None and engine == "tiled":
        raise InvalidInputError(f'engine="tiled" cannot run this call: {why}; use "chunked".')
    return why is None


def _check_unused_size(
    asked: str, tiled: bool, batch_size: int | None, tile_size: int | None
) -> None:
    """Refuse a size the engine asked for cannot use; warn when "auto" chose that engine."""
    if tiled and batch_size is not None:
        name, owner, running = "batch_size", "chunked", "tiled"
    elif not tiled and tile_size is not None:
        name, owner, running = "tile_size", "tiled", "chunked"
    else:
        return
    if asked == running:
        raise InvalidInputError(
            f'`{name}` sets the {owner} engine; engine="{running}" does not use it. Drop it, '
            f'or pass engine="{owner}".'
        )
    warnings.warn(
        f'`{name}` is not used: engine="{asked}" runs the {running} engine for this call; '
        f'pass engine="{owner}" to use it.',
        IdauditWarning,
        stacklevel=3,
    )


def _run_chunks(
    es: EmbeddingSet,
    plan: _Plan,
    auditors: Sequence[BaseAuditor],
    seeds: Sequence[int | None],
    specs: Sequence[_Spec],
    kept: Sequence[_Spec],
    attrs: dict[str, Any],
    add: Any,
    advance: Any,
    *,
    device: Any,
    n_threads: int,
    backend: str,
    client: Any,
    store: Any,
    batch_size: int | None,
) -> dict[str, Any]:
    """Run the chunked engine: chunks of pairs through the auditors' batched kernels."""
    sink: _Store | None = None
    if store is not None:
        sink = _Store.open_or_create(
            Path(store), specs, plan, attrs, _parameters_sha256(auditors, seeds), batch_size
        )
        batch_size = sink.batch_size or batch_size
    if batch_size is None:
        batch_size = _auto_batch_size(es, plan.n_max(), auditors)
    if sink is not None and sink.batch_size is None:
        sink.initialise(batch_size)
    n_chunks = -(-plan.n_pairs // batch_size)
    bounds = [(k * batch_size, min(plan.n_pairs, (k + 1) * batch_size)) for k in range(n_chunks)]
    done = sink.done() if sink is not None else set()
    todo = [k for k in range(n_chunks) if k not in done]

    def collect(k: int, result: ChunkResult) -> None:
        lo, hi = bounds[k]
        if sink is not None:
            sink.write(k, lo, hi, result)
        else:
            add(
                np.arange(lo, hi),
                *plan.codes(lo, hi),
                {s.var: result[s.label][s.name] for s in kept},
            )
        advance(hi - lo)

    advance(plan.n_pairs - sum(bounds[k][1] - bounds[k][0] for k in todo))
    width = max(es.counts.values())
    if not todo:
        pass
    elif backend == "local":
        _run_local(es, plan, bounds, todo, auditors, seeds, device, n_threads, width, collect)
    else:
        _run_dask(es, plan, bounds, todo, auditors, seeds, device, client, collect)
    if sink is not None:
        add(np.arange(plan.n_pairs), *plan.codes(), {s.var: sink.read(s.var) for s in kept})
    return {"setting.engine": "chunked", "setting.batch_size": batch_size}


def _run_tiles(
    es: EmbeddingSet,
    plan: _Plan,
    auditors: Sequence[BaseAuditor],
    kept: Sequence[_Spec],
    attrs: dict[str, Any],
    add: Any,
    advance: Any,
    *,
    device: Any,
    n_threads: int,
    backend: str,
    client: Any,
    store: Any,
    tile_size: int | None,
) -> dict[str, Any]:
    """Run the tiled engine: blocks of equal-size identities, one product per pair of blocks."""
    sink: TileStore | None = None
    if store is not None:
        identity = {
            "input_sha256": attrs["input_sha256"],
            "pairs_sha256": attrs["pairs_sha256"],
            "parameters_sha256": _parameters_sha256(auditors, [None] * len(auditors)),
        }
        sink, stored = TileStore.open_or_create(Path(store), identity, tile_size)
        tile_size = stored or tile_size
    tile_size = tile_size or DEFAULT_TILE_SIZE
    if sink is not None:
        sink.set_tile_size(tile_size)
    sizes = np.asarray([es.counts[x] for x in plan.identities], dtype=np.int64)
    tiles = TilePlan(sizes, tile_size)
    store_attrs = {
        s.var: {"long_name": s.output.long_name, "status": s.output.status} for s in kept
    }
    run_tiled(
        tiles,
        lambda: blocks_of(es.get, plan.identities, tiles),
        plan.identities,
        auditors,
        [(s.var, s.label, s.name) for s in kept],
        add,
        device=device,
        n_threads=n_threads,
        backend=backend,
        client=_dask_client(client) if backend == "dask" else None,
        store=sink,
        store_attrs=store_attrs,
        progress=advance,
    )
    return {"setting.engine": "tiled", "setting.tile_size": tile_size}


def _dask_client(client: Any) -> Any:
    """Return the given client, or the current one (raising clearly when there is none)."""
    try:
        from distributed import get_client
    except ImportError as exc:  # pragma: no cover - dask is a test dependency
        raise ImportError(
            'backend="dask" needs dask.distributed; install it with pip install "idaudit[dask]".'
        ) from exc
    if client is not None:
        return client
    try:
        return get_client()
    except ValueError:
        raise InvalidInputError(
            'backend="dask" needs a running dask.distributed Client; create one '
            "(dask.distributed.Client()) or pass `client=`."
        ) from None


# ---------------------------------------------------------------------------------- the pairs
class _Plan:
    """The pairs of one call: an explicit list, or every unordered pair decoded on demand."""

    def __init__(self, es: EmbeddingSet, pairs: Any, min_rows: int = 1) -> None:
        self.identities: list[Any] = es.identities.tolist()
        self.counts = es.counts
        self.is_all = isinstance(pairs, str)
        self.excluded: list[Any] = []
        if self.is_all:
            if pairs != "all":
                raise InvalidInputError(
                    "`pairs` must be 'all' or a sequence of (identity_a, identity_b); "
                    f"got {pairs!r}."
                )
            if len(self.identities) < 2:
                raise InvalidInputError(
                    f'`pairs="all"` needs at least 2 identities; `es` has {len(self.identities)}.'
                )
            # identities too small for an auditor are left out of "all", and counted: those
            # whose every output failed (no successful row) as well
            failed_only = [x for x in es.failed_counts if x not in self.counts]
            self.excluded = sorted(
                [x for x in self.identities if self.counts[x] < min_rows] + failed_only,
                key=lambda x: (str(type(x)), x),
            )
            if self.excluded:
                self.identities = [x for x in self.identities if self.counts[x] >= min_rows]
                shown = ", ".join(map(repr, self.excluded[:5]))
                more = f" and {len(self.excluded) - 5} more" if len(self.excluded) > 5 else ""
                if len(self.identities) < 2:
                    raise InvalidInputError(
                        f'`pairs="all"` needs at least 2 identities with {min_rows} rows or '
                        f"more (the auditors' minimum); `es` has {len(self.identities)}."
                    )
                warnings.warn(
                    f'pairs="all" leaves out {len(self.excluded)} '
                    f"{'identity' if len(self.excluded) == 1 else 'identities'} with fewer than "
                    f"{min_rows} successful rows, the auditors' minimum: {shown}{more}. The "
                    "result records them (attributes n_identities_excluded, "
                    "identities_excluded).",
                    IdauditWarning,
                    stacklevel=3,
                )
            self.n_pairs = n_pairs_of(len(self.identities))
            self.pair_list: list[tuple[Any, Any]] = []
        else:
            failed = es.failed_counts
            all_failed = {k for k in failed if k not in es.counts}
            unknown = "which `es` does not contain"
            if all_failed:  # a label `es` knows only from failed outputs: say so
                unknown += (
                    " as an identity with a successful row (these identities' every output "
                    f"failed: {sorted(map(repr, all_failed))[:5]}; the audits compute on "
                    "successful rows, ReservedTestCertifier certifies them with the failures)"
                )
            self.pair_list = check_pairs(pairs, es.identities, unknown=unknown)
            self.n_pairs = len(self.pair_list)

    def pairs(self, lo: int, hi: int) -> list[tuple[Any, Any]]:
        """Pairs ``lo .. hi - 1`` as label tuples."""
        hi = min(hi, self.n_pairs)
        if not self.is_all:
            return self.pair_list[lo:hi]
        i, j = decode_pair_indices(np.arange(lo, hi), len(self.identities))
        ids = self.identities
        return [(ids[a], ids[b]) for a, b in zip(i.tolist(), j.tolist(), strict=True)]

    def codes(
        self, lo: int = 0, hi: int | None = None
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
        """Positions in ``identities`` of both identities of pairs ``lo .. hi - 1``."""
        hi = self.n_pairs if hi is None else min(hi, self.n_pairs)
        if self.is_all:
            return decode_pair_indices(np.arange(lo, hi), len(self.identities))
        if not hasattr(self, "_codes"):
            where = {label: k for k, label in enumerate(self.identities)}
            i = np.fromiter((where[a] for a, _ in self.pair_list), np.int64, self.n_pairs)
            j = np.fromiter((where[b] for _, b in self.pair_list), np.int64, self.n_pairs)
            self._codes = (i, j)
        return self._codes[0][lo:hi], self._codes[1][lo:hi]

    def involved(self) -> list[Any]:
        """Every identity that appears in a pair."""
        if self.is_all:
            return self.identities
        return list(dict.fromkeys(x for p in self.pair_list for x in p))

    def n_max(self) -> int:
        """Largest pooled size of a pair."""
        if self.is_all:
            top = sorted(self.counts.values())[-2:]
            return int(sum(top))
        return max(self.counts[a] + self.counts[b] for a, b in self.pair_list)

    def sha256(self) -> str:
        """SHA-256 of ``repr(a)<TAB>repr(b)`` lines, streamed for ``"all"``."""
        digest = hashlib.sha256()
        if self.is_all:  # the same text, one identity's pairs per join (no tuple per pair)
            reprs = [repr(x) for x in self.identities]
            first = True
            for i, label in enumerate(reprs[:-1]):
                prefix = label + "\t"
                digest.update(
                    ((not first) * "\n" + prefix + ("\n" + prefix).join(reprs[i + 1 :])).encode()
                )
                first = False
            return digest.hexdigest()
        step = 1 << 16
        for lo in range(0, self.n_pairs, step):
            text = "\n".join(f"{a!r}\t{b!r}" for a, b in self.pairs(lo, lo + step))
            digest.update((("\n" if lo else "") + text).encode())
        return digest.hexdigest()


# ---------------------------------------------------------------------------------- outputs
@dataclass(frozen=True)
class _Spec:
    """One result variable: where it comes from and its shape per pair."""

    var: str
    label: str
    name: str
    output: Output
    dims: tuple[str, ...]
    shape: tuple[int, ...]

    @property
    def dtype(self) -> type:
        return bool if self.output.dtype is bool else np.float64


def _specs(auditors: Sequence[BaseAuditor], es: EmbeddingSet) -> list[_Spec]:
    sizes = {"embedding_dim": es.dim}
    specs: list[_Spec] = []
    for aud in auditors:
        for out in aud.outputs():
            var = f"{aud.label}_{out.name}"
            if any(s.var == var for s in specs):
                raise InvalidInputError(
                    f"two auditors produce the variable {var!r}; pass name=... to rename one."
                )
            unknown = [d for d in out.dims if d not in sizes]
            if unknown:  # pragma: no cover - a new auditor must declare its dimension here
                raise InvalidInputError(f"output {var!r} has dims {unknown} of unknown size.")
            shape = tuple(sizes[d] for d in out.dims)
            specs.append(_Spec(var, aud.label, out.name, out, tuple(out.dims), shape))
    return specs


def _allocate(specs: Sequence[_Spec], n_pairs: int) -> dict[str, npt.NDArray[Any]]:
    return {s.var: np.empty((n_pairs, *s.shape), dtype=s.dtype) for s in specs}


def _attributes(
    es: EmbeddingSet, plan: _Plan, auditors: Sequence[BaseAuditor], seeds: Sequence[int | None]
) -> dict[str, Any]:
    attrs: dict[str, Any] = provenance(
        title="identity-level DP audits per identity pair (idaudit.audit_pairs)",
        inputs={"input_sha256": str(es.sha256), "pairs_sha256": plan.sha256()},
    )
    attrs["input_source"] = str(es.source or "")
    attrs["n_pairs"] = plan.n_pairs
    attrs["pairs"] = "all" if plan.is_all else "list"
    if plan.is_all:
        attrs["n_identities_excluded"] = len(plan.excluded)
        attrs["identities_excluded"] = json.dumps([attr_value(x) for x in plan.excluded])
    attrs["auditors"] = ",".join(a.label for a in auditors)
    for aud, seed in zip(auditors, seeds, strict=True):
        attrs[f"{aud.label}.class"] = type(aud).__name__
        attrs[f"{aud.label}.status"] = aud.status
        for key, value in aud.recorded_params().items():
            attrs[f"{aud.label}.{key}"] = attr_value(value)
        if seed is not None:
            attrs[f"{aud.label}.seed"] = int(seed)
    return attrs


def _parameters_sha256(auditors: Sequence[BaseAuditor], seeds: Sequence[int | None]) -> str:
    """Hash of everything besides the inputs that decides the numbers."""
    record = [
        [
            aud.label,
            type(aud).__name__,
            {k: attr_value(v) for k, v in sorted(aud.recorded_params().items())},
            seed,
        ]
        for aud, seed in zip(auditors, seeds, strict=True)
    ]
    text = json.dumps({"idaudit": __version__, "auditors": record}, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()


def _check_auditors(auditors: Any) -> list[BaseAuditor]:
    if isinstance(auditors, BaseAuditor):
        auditors = [auditors]
    try:
        items = list(auditors)
    except TypeError:
        raise TypeError(
            f"`auditors` must be a sequence of auditors; got {type(auditors).__name__}."
        ) from None
    if not items:
        raise InvalidInputError("`auditors` must hold at least one auditor; got none.")
    for k, aud in enumerate(items):
        if not isinstance(aud, BaseAuditor):
            raise TypeError(
                f"`auditors[{k}]` must be an idaudit auditor (e.g. MMDTVAuditor()); "
                f"got {type(aud).__name__}."
            )
    labels = [a.label for a in items]
    for label in labels:
        if labels.count(label) > 1:
            raise InvalidInputError(
                f"two auditors share the label {label!r}; pass name=... to tell them apart."
            )
    return items


def _auto_batch_size(es: EmbeddingSet, n_max: int, auditors: Sequence[BaseAuditor]) -> int:
    """Pairs per batch so that one batch's tensors take about ``_BATCH_BYTES``."""
    d = es.dim
    per_pair = 8 * (3 * n_max * d + 4 * n_max**2)  # rows, side copies, distances, kernel
    for aud in auditors:
        if getattr(aud, "n_grid", None) is not None:  # per-coordinate maxima (the densities
            per_pair += 8 * d * 2  # are evaluated a group of pairs at a time, ~10 MiB)
        n_folds = getattr(aud, "n_folds", None)
        if n_folds is not None:  # centred Gram, its float32 copy, per-fold Newton vectors
            per_pair += 8 * (2 * n_max**2 + 20 * int(n_folds) * n_max)
    return int(min(_MAX_AUTO_BATCH, max(1, _BATCH_BYTES // per_pair)))


# ---------------------------------------------------------------------------------- results
def _assemble(
    es: EmbeddingSet,
    plan: _Plan,
    specs: Sequence[_Spec],
    values: dict[str, npt.NDArray[Any]],
    attrs: dict[str, Any],
) -> xr.Dataset:
    pairs = plan.pairs(0, plan.n_pairs)
    data_vars = {
        s.var: variable(
            ("pair", *s.dims),
            values[s.var].astype(s.dtype, copy=False),
            long_name=s.output.long_name,
            status=check_status(s.output.status),
            **simultaneity(s.output.status, s.output.n_simultaneous),
        )
        for s in specs
    }
    return pair_dataset(
        pairs,
        data_vars,
        n_a=[es.counts[a] for a, _ in pairs],
        n_b=[es.counts[b] for _, b in pairs],
        attrs=attrs,
    )
