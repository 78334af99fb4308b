"""``audit_pairs``: many identity pairs (or all of them) through many auditors, one result.

The engine cuts the pairs into chunks of ``batch_size`` pairs, runs every auditor on each
chunk (one batched kernel call per auditor and chunk) and puts the chunks back together:
in memory (``keep="pairs"``), as running summaries (``keep="summary"``) or in a zarr store
that a later call resumes (``store=``). Chunks run side by side on CPU threads (each on one
torch thread) or on the workers of a ``dask.distributed`` cluster.

This module validates the call, plans it (pairs, engine, outputs, attributes), runs it on
one of the two engines and hands the values to their destination. The types those parts
share are in :mod:`idaudit.audits._plan`; the backends that run the chunks are in
:mod:`idaudit.audits._backends`, the tiled engine in :mod:`idaudit.audits._tiled`, the
resumable store in :mod:`idaudit.audits._store` and the summaries in
:mod:`idaudit.audits._stream`.
"""

from __future__ import annotations

import hashlib
import json
import os
import warnings
from collections.abc import Callable, Sequence
from contextlib import closing
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
from idaudit._validation import check_integer, check_option
from idaudit._version import __version__
from idaudit.audits._backends import dask_client, run_chunks
from idaudit.audits._base import BaseAuditor
from idaudit.audits._failures import PairFailures
from idaudit.audits._plan import OutputSpec, PairPlan, output_specs
from idaudit.audits._store import _Store
from idaudit.audits._stream import SummaryStream, simultaneity
from idaudit.audits._tiled import TileStore, run_tiled
from idaudit.audits._tiles import DEFAULT_TILE_SIZE, TilePlan
from idaudit.data import EmbeddingSet
from idaudit.exceptions import IdauditWarning, InvalidInputError

__all__ = ["audit_pairs"]

# Working-memory target of one batch when ``batch_size`` is None.
_BATCH_BYTES = 2**28
_MAX_AUTO_BATCH = 256

Keep = Literal["pairs", "summary"]
Engine = Literal["auto", "tiled", "chunked"]
#: Where a run puts a group of pairs' values: ``add(pair_index, codes_a, codes_b, values)``.
Add = Callable[[Any, Any, Any, dict[str, npt.NDArray[Any]]], None]


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
        many pairs reach it (``V_n_at_max``), ``V_quantile`` along ``quantile`` (levels 0,
        0.01, 0.05, 0.25, 0.5, 0.75, 0.95, 0.99 and 1; the exact order statistic
        :math:`x_{(\lceil qn \rceil)}`, numpy's ``method="inverted_cdf"``, so ``+inf`` values
        stay ``+inf``), ``V_n_inf`` (pairs with
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
    # validate
    auditor_list, dev = _validate(es, auditors, device, backend=backend, keep=keep, engine=engine)
    if batch_size is not None:
        batch_size = check_integer(batch_size, "batch_size", minimum=1)
    if n_threads is not None:
        n_threads = check_integer(n_threads, "n_threads", minimum=1)
    if tile_size is not None:
        tile_size = check_integer(tile_size, "tile_size", minimum=1)
    # plan: the pairs, the engine, the seeds, the outputs and the attributes
    plan, auditor_list = _plan(es, pairs, auditor_list)
    tiled = _choose_engine(engine, store, plan, auditor_list, batch_size, tile_size)
    seeds = [aud._draw_seed() for aud in auditor_list]
    specs = output_specs(auditor_list, es)
    attrs = _attributes(es, plan, auditor_list, seeds)
    kept = [s for s in specs if keep == "pairs" or not s.dims]
    call = _Call(es, plan, auditor_list, seeds, specs, kept, attrs, dev, backend, client, store)
    # destination: every pair's values in memory, or running summaries
    sink: _PairValues | SummaryStream = (
        SummaryStream(kept, np.asarray(plan.identities), plan.n_pairs)
        if keep == "summary"
        else _PairValues(es, plan, kept)
    )
    # run: chunks of pairs or tiles of identities, each also into a resumable store if asked
    threads = n_threads if n_threads is not None else available_cpus()
    with tqdm(total=plan.n_pairs, desc="audit_pairs", unit="pair", disable=not progress) as bar:
        if tiled:
            settings = _run_tiles(call, sink.add, bar.update, threads, tile_size)
        else:
            settings = _run_chunks(call, sink.add, bar.update, threads, batch_size)
    # the run settings actually used (they do not change the numbers)
    attrs.update({"setting.device": str(dev), "setting.backend": backend, **settings})
    failures = PairFailures(es, plan)
    failures.warn_if_unequal()
    return failures.attach(sink.dataset(attrs), keep)


# ---------------------------------------------------------------------------------- validate
def _validate(
    es: Any, auditors: Any, device: str, *, backend: str, keep: str, engine: str
) -> tuple[list[BaseAuditor], Any]:
    """Check the inputs and options; return the auditors as a list and the device."""
    if not isinstance(es, EmbeddingSet):
        raise TypeError(f"`es` must be an idaudit.EmbeddingSet; got {type(es).__name__}.")
    auditor_list = _check_auditors(auditors)
    dev = resolve_device(device)
    check_option(backend, "backend", ("local", "dask"))
    check_option(keep, "keep", ("pairs", "summary"))
    check_option(engine, "engine", ("auto", "tiled", "chunked"))
    return auditor_list, dev


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


# ---------------------------------------------------------------------------------- plan
def _plan(
    es: EmbeddingSet, pairs: Any, auditors: list[BaseAuditor]
) -> tuple[PairPlan, list[BaseAuditor]]:
    """Return the pairs of the call, and the auditors set up for that many pairs."""
    for aud in auditors:
        aud._check_params()
    plan = PairPlan(es, pairs, min_rows=max(aud.min_rows() for aud in auditors))
    auditors = [aud._for_pairs(plan.n_pairs) for aud in auditors]
    for aud in auditors:
        need = aud.min_rows()
        for label in plan.involved():
            if es.counts[label] < need:
                raise InvalidInputError(
                    f"identity {label!r} has {es.counts[label]} row(s); auditor "
                    f"{aud.label!r} needs at least {need} per identity."
                )
    return plan, auditors


def _choose_engine(
    engine: str,
    store: Any,
    plan: PairPlan,
    auditors: Sequence[BaseAuditor],
    batch_size: int | None,
    tile_size: int | None,
) -> bool:
    """Whether the call runs on the tiled engine (a store resumes with the engine that wrote it)."""
    asked = engine
    if engine == "auto" and store is not None:
        engine = _stored_engine(Path(store)) or engine
    tiled = _use_tiles(engine, plan, auditors)
    _check_unused_size(asked, tiled, batch_size, tile_size)
    return tiled


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


def _use_tiles(engine: str, plan: PairPlan, auditors: Sequence[BaseAuditor]) -> bool:
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
        stacklevel=4,
    )


@dataclass(frozen=True)
class _Call:
    """What both engines need of one call."""

    es: EmbeddingSet
    plan: PairPlan
    auditors: Sequence[BaseAuditor]
    seeds: Sequence[int | None]
    specs: Sequence[OutputSpec]
    kept: Sequence[OutputSpec]
    attrs: dict[str, Any]
    device: Any
    backend: str
    client: Any
    store: Any


# ---------------------------------------------------------------------------------- run
def _run_chunks(
    call: _Call, add: Add, advance: Callable[[int], Any], n_threads: int, batch_size: int | None
) -> dict[str, Any]:
    """Run the chunked engine: chunks of pairs through the auditors' batched kernels."""
    es, plan, auditors, seeds, kept = call.es, call.plan, call.auditors, call.seeds, call.kept
    sink: _Store | None = None
    if call.store is not None:
        sink = _Store.open_or_create(
            Path(call.store),
            call.specs,
            plan,
            call.attrs,
            _parameters_sha256(auditors, seeds),
            batch_size,
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

    advance(plan.n_pairs - sum(bounds[k][1] - bounds[k][0] for k in todo))
    client = dask_client(call.client) if call.backend == "dask" and todo else None
    chunks = run_chunks(
        es, plan, bounds, todo, auditors, seeds, call.device, n_threads=n_threads, client=client
    )
    with closing(chunks):  # an error below stops the threads or tasks still running
        for k, result in chunks:
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
    if sink is not None:
        add(np.arange(plan.n_pairs), *plan.codes(), {s.var: sink.read(s.var) for s in kept})
    return {"setting.engine": "chunked", "setting.batch_size": batch_size}


def _run_tiles(
    call: _Call, add: Add, advance: Callable[[int], Any], n_threads: int, tile_size: int | None
) -> dict[str, Any]:
    """Run the tiled engine: blocks of equal-size identities, one product per pair of blocks."""
    es, plan, kept = call.es, call.plan, call.kept
    sink: TileStore | None = None
    if call.store is not None:
        identity = {
            "input_sha256": call.attrs["input_sha256"],
            "pairs_sha256": call.attrs["pairs_sha256"],
            "parameters_sha256": _parameters_sha256(call.auditors, [None] * len(call.auditors)),
        }
        sink, stored = TileStore.open_or_create(Path(call.store), identity, tile_size)
        tile_size = stored or tile_size
    tile_size = tile_size or DEFAULT_TILE_SIZE
    if sink is not None:
        sink.set_tile_size(tile_size)
    sizes = np.asarray([es.counts[x] for x in plan.identities], dtype=np.int64)
    tiles = TilePlan(sizes, tile_size)
    store_attrs = {
        s.var: {"long_name": s.output.long_name, "status": s.output.status} for s in kept
    }
    pairs = run_tiled(
        tiles,
        es.get,
        plan.identities,
        call.auditors,
        [(s.var, s.label, s.name) for s in kept],
        device=call.device,
        n_threads=n_threads,
        backend=call.backend,
        client=dask_client(call.client) if call.backend == "dask" else None,
        store=sink,
        store_attrs=store_attrs,
    )
    with closing(pairs):
        for index, a, b, values in pairs:
            add(index, a, b, values)
            advance(len(index))
    return {"setting.engine": "tiled", "setting.tile_size": tile_size}


def _attributes(
    es: EmbeddingSet, plan: PairPlan, auditors: Sequence[BaseAuditor], seeds: Sequence[int | None]
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


# ---------------------------------------------------------------------------------- destination
class _PairValues:
    """The ``keep="pairs"`` destination: every pair's values in memory, one Dataset at the end."""

    def __init__(self, es: EmbeddingSet, plan: PairPlan, specs: Sequence[OutputSpec]) -> None:
        self.es, self.plan, self.specs = es, plan, specs
        self.values: dict[str, npt.NDArray[Any]] = {
            s.var: np.empty((plan.n_pairs, *s.shape), dtype=s.dtype) for s in specs
        }

    def add(self, index: Any, a: Any, b: Any, chunk: dict[str, npt.NDArray[Any]]) -> None:
        for s in self.specs:
            self.values[s.var][index] = chunk[s.var]

    def dataset(self, attrs: dict[str, Any]) -> xr.Dataset:
        pairs = self.plan.pairs(0, self.plan.n_pairs)
        data_vars = {
            s.var: variable(
                ("pair", *s.dims),
                self.values[s.var].astype(s.dtype, copy=False),
                long_name=s.output.long_name,
                status=check_status(s.output.status),
                **simultaneity(s.output.status, s.output.n_simultaneous),
            )
            for s in self.specs
        }
        counts = self.es.counts
        return pair_dataset(
            pairs,
            data_vars,
            n_a=[counts[a] for a, _ in pairs],
            n_b=[counts[b] for _, b in pairs],
            attrs=attrs,
        )
