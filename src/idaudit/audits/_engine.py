"""``audit_pairs``: many identity pairs through many auditors, one xarray.Dataset out."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
import xarray as xr
from tqdm.auto import tqdm

from idaudit._device import resolve_device
from idaudit._results import pair_dataset, provenance, variable
from idaudit._validation import check_integer, check_option, check_pairs
from idaudit.audits._base import BaseAuditor, Batch, PairError
from idaudit.data import EmbeddingSet
from idaudit.exceptions import InvalidInputError

__all__ = ["audit_pairs"]

# Working-memory target of one batch when ``batch_size`` is None.
_BATCH_BYTES = 2**28
_MAX_AUTO_BATCH = 256

ChunkResult = dict[str, dict[str, npt.NDArray[Any]]]


def audit_pairs(
    es: EmbeddingSet,
    pairs: Sequence[tuple[Any, Any]] | npt.ArrayLike,
    auditors: Sequence[BaseAuditor],
    *,
    device: str = "cpu",
    batch_size: int | None = None,
    progress: bool = True,
    backend: str = "local",
    client: Any = None,
) -> xr.Dataset:
    r"""Run several auditors over many identity pairs, batched, into one Dataset.

    Parameters
    ----------
    es : EmbeddingSet
        Embeddings grouped by identity (already filtered and normalised).
    pairs : sequence of (label, label) or array_like, shape (n_pairs, 2)
        Identity pairs, e.g. from :func:`idaudit.sample_pairs`. Each label must be in ``es``;
        the two labels of a pair must differ.
    auditors : sequence of BaseAuditor
        The audits to run, with distinct :attr:`~BaseAuditor.label` values (give ``name=`` to
        tell two auditors of one class apart). Their parameters are used as they are;
        ``device`` below replaces each auditor's own ``device``.
    device : {"cpu", "cuda"}, default "cpu"
        Where the batched kernels run. CUDA without a GPU raises.
    batch_size : int, optional
        Pairs per kernel call. ``None`` picks the largest batch whose working memory stays
        near 256 MiB (at most 256 pairs). The numbers do not depend on it.
    progress : bool, default True
        Show a tqdm bar over pairs.
    backend : {"local", "dask"}, default "local"
        ``"dask"`` sends chunks of ``batch_size`` pairs to the workers of a
        ``dask.distributed`` cluster and returns the same Dataset (floating-point values equal
        to rounding, ≤ 1e-12).
    client : dask.distributed.Client, optional
        The client to use with ``backend="dask"`` (default: the current one).

    Returns
    -------
    xarray.Dataset
        Dimension ``pair``; coordinates ``identity_a``, ``identity_b``, ``n_a``, ``n_b``; one
        variable ``"<label>_<output>"`` per auditor output (e.g. ``mmdtv_epsilon``,
        ``rocht_auc``), each with ``long_name`` and ``status`` attributes. Dataset attributes
        (scalars and strings only, so ``to_netcdf`` round-trips) record every auditor's
        parameters as ``"<label>.<param>"``, its class and status, the seed drawn from its
        ``rng`` (``"<label>.seed"``), the run settings actually used (``setting.device``,
        ``setting.batch_size`` — the resolved one when ``None`` was given —,
        ``setting.backend``), the versions of idaudit and its numerical dependencies, the
        SHA-256 of the embeddings (``input_sha256``) and of the pair list (``pairs_sha256``).
        Labels hold no ``.``, so every key splits unambiguously at its first dot. See
        ``docs/audit_pairs.md`` for the schema variable by variable.

    Raises
    ------
    InvalidInputError
        If a pair names an identity ``es`` does not hold (the message names it), pairs an
        identity with itself, an identity has fewer rows than an auditor needs, two auditors
        share a label, or an option is invalid.
    ImportError
        If ``backend="dask"`` and dask.distributed is not installed.

    Notes
    -----
    Every auditor's randomness comes from one seed drawn from its ``rng`` at the start of the
    call and shared by all pairs, so each pair's numbers equal ``auditor.fit(emb_a, emb_b)``
    with the same ``rng`` (to 1e-6, in practice to rounding), whatever the batch size, pair
    order or backend. Auditors run on the same batch share intermediate results: distances and
    median bandwidths across MMD-TV auditors, KDE densities across KDE-LR auditors with
    different ``alpha``.

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
    """
    if not isinstance(es, EmbeddingSet):
        raise TypeError(f"`es` must be an idaudit.EmbeddingSet; got {type(es).__name__}.")
    auditor_list = _check_auditors(auditors)
    dev = resolve_device(device)
    check_option(backend, "backend", ("local", "dask"))
    if batch_size is not None:
        batch_size = check_integer(batch_size, "batch_size", minimum=1)
    pair_list = check_pairs(pairs, es.identities, unknown="which `es` does not contain")
    for aud in auditor_list:
        aud._check_params()
        need = aud.min_rows()
        for label in dict.fromkeys(x for p in pair_list for x in p):
            if es.counts[label] < need:
                raise InvalidInputError(
                    f"identity {label!r} has {es.counts[label]} row(s); auditor "
                    f"{aud.label!r} needs at least {need} per identity."
                )
    seeds = [aud._draw_seed() for aud in auditor_list]
    if batch_size is None:
        batch_size = _auto_batch_size(es, pair_list, auditor_list)
    chunks = [pair_list[i : i + batch_size] for i in range(0, len(pair_list), batch_size)]
    bar = tqdm(total=len(pair_list), desc="audit_pairs", unit="pair", disable=not progress)
    try:
        if backend == "local":
            results = []
            shared: dict[Any, Any] = {}  # per-identity results reused across chunks
            for chunk in chunks:
                results.append(
                    _run_chunk(_samples(es, chunk), chunk, auditor_list, seeds, dev, shared)
                )
                bar.update(len(chunk))
        else:
            results = _run_dask(es, chunks, auditor_list, seeds, dev, client, bar)
    finally:
        bar.close()
    settings = {"device": str(dev), "batch_size": batch_size, "backend": backend}
    return _assemble(es, pair_list, auditor_list, seeds, results, settings)


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


def _samples(
    es: EmbeddingSet, chunk: Sequence[tuple[Any, Any]]
) -> list[tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]]:
    return [(es.get(a), es.get(b)) for a, b in chunk]


def _auto_batch_size(
    es: EmbeddingSet, pairs: Sequence[tuple[Any, Any]], auditors: Sequence[BaseAuditor]
) -> int:
    """Pairs per batch so that one batch's tensors take about ``_BATCH_BYTES``."""
    n_max = max(es.counts[a] + es.counts[b] for a, b in pairs)
    d = es.dim
    per_pair = 8 * (3 * n_max * d + 4 * n_max**2)  # rows, side copies, distances, kernel
    for aud in auditors:
        n_grid = getattr(aud, "n_grid", None)
        if n_grid is not None:  # two density grids, log temporaries, per-dimension rows
            per_pair += 8 * d * (6 * int(n_grid) + 8 * n_max)
        n_folds = getattr(aud, "n_folds", None)
        if n_folds is not None:  # per fold: Gram, S, Cholesky factor, line-search grid
            per_pair += 8 * int(n_folds) * (6 * n_max**2 + 40 * n_max)
    return int(min(_MAX_AUTO_BATCH, max(1, _BATCH_BYTES // per_pair)))


def _run_chunk(
    samples: list[tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]],
    labels: Sequence[tuple[Any, Any]],
    auditors: Sequence[BaseAuditor],
    seeds: Sequence[int | None],
    device: Any,
    shared: dict[Any, Any] | None = None,
) -> ChunkResult:
    """All auditors over one chunk of pairs (also the unit of work sent to dask workers)."""
    batch = Batch(samples, resolve_device(device), labels=labels, shared=shared)
    out: ChunkResult = {}
    for aud, seed in zip(auditors, seeds, strict=True):
        try:
            res = aud._run(batch, seed)
        except PairError as exc:
            a, b = labels[exc.pair_index]
            raise InvalidInputError(f"pair ({a!r}, {b!r}), auditor {aud.label!r}: {exc}") from None
        out[aud.label] = {o.name: np.asarray(res[o.name]) for o in aud.outputs()}
    return out


def _run_dask(
    es: EmbeddingSet,
    chunks: list[list[tuple[Any, Any]]],
    auditors: Sequence[BaseAuditor],
    seeds: Sequence[int | None],
    device: Any,
    client: Any,
    bar: Any,
) -> list[ChunkResult]:
    try:
        from distributed import as_completed, get_client
    except ImportError as exc:  # pragma: no cover - dask is a test dependency
        raise ImportError(
            'backend="dask" needs dask.distributed; install it with pip install "idaudit[dask]".'
        ) from exc
    if client is None:
        try:
            client = get_client()
        except ValueError:
            raise InvalidInputError(
                'backend="dask" needs a running dask.distributed Client; create one '
                "(dask.distributed.Client()) or pass `client=`."
            ) from None
    futures = [
        client.submit(
            _run_chunk,
            _samples(es, chunk),
            chunk,
            list(auditors),
            list(seeds),
            str(device),
            pure=False,
        )
        for chunk in chunks
    ]
    sizes = {f.key: len(c) for f, c in zip(futures, chunks, strict=True)}
    for fut in as_completed(futures):  # type: ignore[no-untyped-call]
        bar.update(sizes[fut.key])
    results: list[ChunkResult] = client.gather(futures)
    return results


def _assemble(
    es: EmbeddingSet,
    pairs: list[tuple[Any, Any]],
    auditors: Sequence[BaseAuditor],
    seeds: Sequence[int | None],
    results: list[ChunkResult],
    settings: dict[str, Any],
) -> xr.Dataset:
    data_vars: dict[str, xr.Variable] = {}
    for aud in auditors:
        for out in aud.outputs():
            name = f"{aud.label}_{out.name}"
            if name in data_vars:
                raise InvalidInputError(
                    f"two auditors produce the variable {name!r}; pass name=... to rename one."
                )
            values = np.concatenate([r[aud.label][out.name] for r in results])
            values = values.astype(bool if out.dtype is bool else np.float64)
            data_vars[name] = variable(
                ("pair", *out.dims), values, long_name=out.long_name, status=out.status
            )
    pair_text = "\n".join(f"{a!r}\t{b!r}" for a, b in pairs)
    attrs: dict[str, Any] = provenance(
        title="identity-level DP audits per identity pair (idaudit.audit_pairs)",
        inputs={
            "input_sha256": str(es.sha256),
            "pairs_sha256": hashlib.sha256(pair_text.encode()).hexdigest(),
        },
        settings=settings,
    )
    attrs["input_source"] = str(es.source or "")
    attrs["n_pairs"] = len(pairs)
    attrs["auditors"] = ",".join(a.label for a in auditors)
    for aud, seed in zip(auditors, seeds, strict=True):
        attrs[f"{aud.label}.class"] = type(aud).__name__
        attrs[f"{aud.label}.status"] = aud.status
        for key, value in aud.get_params(deep=False).items():
            attrs[f"{aud.label}.{key}"] = value
        if seed is not None:
            attrs[f"{aud.label}.seed"] = int(seed)
    return pair_dataset(
        pairs,
        data_vars,
        n_a=[es.counts[a] for a, _ in pairs],
        n_b=[es.counts[b] for _, b in pairs],
        attrs=attrs,
    )
