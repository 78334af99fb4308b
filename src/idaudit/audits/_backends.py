"""Where :func:`idaudit.audit_pairs` runs its chunks: threads of this process, or dask workers.

A chunk is a list of identity pairs; running it means running every auditor on one
:class:`~idaudit.audits._batch.Batch` of those pairs. The local backend keeps at most
``n_threads`` chunks in flight on a thread pool, each on one torch thread; the dask backend
scatters the embeddings once and keeps a bounded number of chunks in flight on the cluster.
The local backend shares one :class:`~idaudit.audits._batch.CallCache` across the chunks of a
call; a dask worker process keeps one per input, ``failures`` setting and device, so what
depends on one identity is computed once.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Iterable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from typing import Any, TypeVar

import numpy as np
import numpy.typing as npt
import torch

from idaudit._device import resolve_device, single_threaded
from idaudit.audits._base import BaseAuditor
from idaudit.audits._batch import Batch, CallCache, PairError
from idaudit.audits._plan import ChunkResult, PairPlan
from idaudit.data import EmbeddingSet
from idaudit.exceptions import InvalidInputError

K = TypeVar("K")
R = TypeVar("R")


def _run_chunk(
    samples: list[tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]],
    labels: Sequence[tuple[Any, Any]],
    auditors: Sequence[BaseAuditor],
    seeds: Sequence[int | None],
    device: Any,
    shared: CallCache | None = None,
    failures: Sequence[tuple[int, int]] | None = None,
) -> ChunkResult:
    """All auditors over one chunk of pairs (also the unit of work sent to dask workers)."""
    batch = Batch(
        samples,
        resolve_device(device),
        labels=labels,
        shared=shared,
        auditors=auditors,
        failures=failures,
    )
    out: ChunkResult = {}
    for aud, seed in zip(auditors, seeds, strict=True):
        try:
            res = aud._run(batch, seed)
        except PairError as exc:
            a, b = labels[exc.pair_index]
            raise InvalidInputError(f"pair ({a!r}, {b!r}), auditor {aud.label!r}: {exc}") from None
        out[aud.label] = {o.name: np.asarray(res[o.name]) for o in aud.outputs()}
    return out


def _chunk_of(
    es: EmbeddingSet,
    pairs: list[tuple[Any, Any]],
    auditors: Sequence[BaseAuditor],
    seeds: Sequence[int | None],
    device: Any,
    shared: CallCache,
) -> ChunkResult:
    """One chunk of ``pairs`` with the rows and failure counts of ``shared``, on one thread."""
    rows = shared.rows  # each identity's rows, looked up once per call
    for label in {x for p in pairs for x in p} - rows.keys():
        rows[label] = es.get(label)
    samples = [(rows[a], rows[b]) for a, b in pairs]
    if shared.failed is None:  # a copy over every identity: made once per call, not per chunk
        shared.failed = es.failed_counts
    failed = shared.failed
    failures = [(failed.get(a, 0), failed.get(b, 0)) for a, b in pairs]
    with single_threaded():
        return _run_chunk(samples, pairs, auditors, seeds, device, shared, failures)


def run_chunks(
    es: EmbeddingSet,
    plan: PairPlan,
    bounds: Sequence[tuple[int, int]],
    todo: Sequence[int],
    auditors: Sequence[BaseAuditor],
    seeds: Sequence[int | None],
    device: torch.device,
    *,
    n_threads: int,
    client: Any = None,
) -> Generator[tuple[int, ChunkResult], None, None]:
    """Yield ``(k, result)`` for every chunk ``k`` of ``todo`` (pairs ``bounds[k]``) as it finishes.

    Without ``client``, on ``n_threads`` threads of this process with at most ``n_threads``
    chunks in flight (memory bound); with a dask ``client`` (see :func:`dask_client`), on its
    workers with a bounded number in flight.
    """
    if not todo:
        return
    chunks = ((k, plan.pairs(*bounds[k])) for k in todo)  # pairs decoded as chunks start
    if client is not None:
        yield from _run_dask(es, chunks, auditors, seeds, device, client)
        return
    shared = CallCache(width=max(es.counts.values()))  # per-identity results reused across chunks

    def one(chunk: tuple[int, list[tuple[Any, Any]]]) -> ChunkResult:
        return _chunk_of(es, chunk[1], auditors, seeds, device, shared)

    n_threads = min(n_threads, len(todo))
    with single_threaded():  # held for the whole call, so threads never toggle it
        if n_threads == 1:
            for chunk in chunks:
                yield chunk[0], one(chunk)
            return
        for (k, _), result in run_bounded(one, chunks, n_threads, n_threads):
            yield k, result


def run_bounded(
    work: Callable[[K], R], items: Iterable[K], n_threads: int, in_flight: int
) -> Generator[tuple[K, R], None, None]:
    """Yield ``(item, work(item))`` for every item, run on ``n_threads`` threads of a pool.

    At most ``in_flight`` items are submitted at a time (what bounds the memory of the
    results waiting to be collected); results come in completion order. An exception in
    ``work`` cancels what is still queued and is raised.
    """
    pending = iter(items)
    with ThreadPoolExecutor(n_threads, thread_name_prefix="idaudit") as pool:
        running: dict[Future[R], K] = {}
        for item in pending:
            running[pool.submit(work, item)] = item
            if len(running) == in_flight:
                break
        try:
            while running:
                finished, _ = wait(running, return_when=FIRST_COMPLETED)
                for fut in finished:
                    item = running.pop(fut)
                    yield item, fut.result()
                    nxt = next(pending, None)
                    if nxt is not None:
                        running[pool.submit(work, nxt)] = nxt
        finally:
            for fut in running:
                fut.cancel()


# ---------------------------------------------------------------------------------- dask
def dask_client(client: Any) -> Any:
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


# one call cache per (input, failures setting, device) and worker process
_WORKER_CACHES: dict[tuple[str, str, str], CallCache] = {}


def _dask_chunk(
    es: EmbeddingSet,
    pairs: list[tuple[Any, Any]],
    auditors: list[BaseAuditor],
    seeds: list[int | None],
    device: str,
) -> ChunkResult:
    """One chunk on a dask worker; per-identity results are cached per worker process."""
    key = (str(es.sha256), es.failures, device)  # the same input may keep or drop failures
    cache = _WORKER_CACHES.get(key)
    if cache is None:
        if len(_WORKER_CACHES) >= 2:  # the cache must not grow with every call a worker sees
            _WORKER_CACHES.clear()
        cache = _WORKER_CACHES.setdefault(key, CallCache(width=max(es.counts.values())))
    return _chunk_of(es, pairs, auditors, seeds, device, cache)


def _run_dask(
    es: EmbeddingSet,
    chunks: Iterator[tuple[int, list[tuple[Any, Any]]]],
    auditors: Sequence[BaseAuditor],
    seeds: Sequence[int | None],
    device: torch.device,
    client: Any,
) -> Generator[tuple[int, ChunkResult], None, None]:
    """Chunks on the workers of ``client``, a bounded number in flight (see :func:`run_chunks`)."""
    from distributed import as_completed

    # once per worker; a fresh key, so a release from an earlier call cannot race this one
    es_future = client.scatter(es, broadcast=True, hash=False)
    slots = max(2, 2 * sum(client.nthreads().values()))  # chunks in flight: bounded memory
    chunk_of: dict[str, int] = {}

    def submit(k: int, pairs: list[tuple[Any, Any]]) -> Any:
        fut = client.submit(
            _dask_chunk, es_future, pairs, list(auditors), list(seeds), str(device), pure=False
        )
        chunk_of[fut.key] = k
        return fut

    first = [submit(*chunk) for _, chunk in zip(range(slots), chunks, strict=False)]
    queue = as_completed(first)  # type: ignore[no-untyped-call]
    for fut in queue:
        result: ChunkResult = fut.result()
        yield chunk_of.pop(fut.key), result
        nxt = next(chunks, None)
        if nxt is not None:
            queue.add(submit(*nxt))  # type: ignore[no-untyped-call]
        fut.release()
