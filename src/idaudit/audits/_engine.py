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
    CERTIFIED_STATUSES,
    attr_value,
    check_result_dataset,
    check_status,
    pair_dataset,
    provenance,
    reduction_attrs,
    variable,
)
from idaudit._validation import check_integer, check_option, check_pairs
from idaudit._version import __version__
from idaudit.audits._backends import ChunkResult, _run_dask, _run_local
from idaudit.audits._base import BaseAuditor, Output
from idaudit.audits._failures import PairFailures
from idaudit.audits._store import _Store
from idaudit.data import EmbeddingSet, decode_pair_indices, n_pairs_of
from idaudit.exceptions import InvalidInputError

__all__ = ["QUANTILES", "audit_pairs"]

# Working-memory target of one batch when ``batch_size`` is None.
_BATCH_BYTES = 2**28
_MAX_AUTO_BATCH = 256

#: Quantile levels of ``keep="summary"`` (exact order statistics, see :func:`audit_pairs`).
QUANTILES = (0.0, 0.01, 0.05, 0.25, 0.5, 0.75, 0.95, 0.99, 1.0)

Keep = Literal["pairs", "summary"]


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
        order of :func:`idaudit.data.all_pairs`, generated chunk by chunk.
    auditors : sequence of BaseAuditor
        The audits to run, with distinct :attr:`~BaseAuditor.label` values (give ``name=`` to
        tell two auditors of one class apart). Their parameters are used as they are;
        ``device`` below replaces each auditor's own ``device``.
    device : {"cpu", "cuda"}, default "cpu"
        Where the batched kernels run. CUDA without a GPU raises.
    batch_size : int, optional
        Pairs per chunk (one kernel call per auditor). ``None`` picks the largest chunk whose
        working memory stays near 256 MiB (at most 256 pairs); with a ``store`` that already
        holds chunks, the store's. The numbers do not depend on it.
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
        pairs (see Returns) without holding per-pair vectors or batch tensors: only one float
        per pair and scalar output is kept, to make the quantiles exact.
    store : path, optional
        A zarr store (directory, e.g. ``"results.zarr"``) that receives every chunk as it
        finishes. If it exists and was written for the same embeddings, pairs, auditor
        parameters, seeds and batch size, finished chunks are not recomputed (resume after an
        interruption); a store written for anything else is refused. Readable with
        ``xarray.open_zarr`` (needs ``pip install "idaudit[dask]"`` or ``zarr``).
    n_threads : int, optional
        CPU threads of the local backend: that many chunks run at once, each on one torch
        thread. Default: the CPUs this process may use (``len(os.sched_getaffinity(0))``),
        at most the number of chunks. Ignored by the dask backend (workers set their own).

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
        ``setting.batch_size`` — the resolved one when ``None`` was given —,
        ``setting.backend``), the versions of idaudit and its numerical dependencies, the
        SHA-256 of the embeddings (``input_sha256``) and of the pair list (``pairs_sha256``).
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
    if batch_size is not None:
        batch_size = check_integer(batch_size, "batch_size", minimum=1)
    if n_threads is not None:
        n_threads = check_integer(n_threads, "n_threads", minimum=1)
    plan = _Plan(es, pairs)
    for aud in auditor_list:
        aud._check_params()
    auditor_list = [aud._for_pairs(plan.n_pairs) for aud in auditor_list]
    for aud in auditor_list:
        need = aud.min_rows()
        for label in plan.involved():
            if es.counts[label] < need:
                raise InvalidInputError(
                    f"identity {label!r} has {es.counts[label]} row(s); auditor "
                    f"{aud.label!r} needs at least {need} per identity."
                )
    seeds = [aud._draw_seed() for aud in auditor_list]
    specs = _specs(auditor_list, es)
    attrs = _attributes(es, plan, auditor_list, seeds)
    sink: _Store | None = None
    if store is not None:
        sink = _Store.open_or_create(
            Path(store), specs, plan, attrs, _parameters_sha256(auditor_list, seeds), batch_size
        )
        batch_size = sink.batch_size or batch_size
    if batch_size is None:
        batch_size = _auto_batch_size(es, plan.n_max(), auditor_list)
    if sink is not None and sink.batch_size is None:
        sink.initialise(batch_size)
    n_chunks = -(-plan.n_pairs // batch_size)
    bounds = [(k * batch_size, min(plan.n_pairs, (k + 1) * batch_size)) for k in range(n_chunks)]
    done = sink.done() if sink is not None else set()
    todo = [k for k in range(n_chunks) if k not in done]
    kept = [s for s in specs if keep == "pairs" or not s.dims]
    values = {s.var: None for s in kept} if sink is not None else _allocate(kept, plan.n_pairs)

    def collect(k: int, result: ChunkResult) -> None:
        lo, hi = bounds[k]
        if sink is not None:
            sink.write(k, lo, hi, result)
        else:
            for s in kept:
                values[s.var][lo:hi] = result[s.label][s.name]  # type: ignore[index]
        bar.update(hi - lo)

    bar = tqdm(total=plan.n_pairs, desc="audit_pairs", unit="pair", disable=not progress)
    bar.update(plan.n_pairs - sum(bounds[k][1] - bounds[k][0] for k in todo))
    width = max(es.counts.values())
    try:
        if not todo:
            pass
        elif backend == "local":
            threads = n_threads if n_threads is not None else available_cpus()
            _run_local(es, plan, bounds, todo, auditor_list, seeds, dev, threads, width, collect)
        else:
            _run_dask(es, plan, bounds, todo, auditor_list, seeds, dev, client, collect)
    finally:
        bar.close()
    if sink is not None:
        values = {s.var: sink.read(s.var) for s in kept}
    # the run settings actually used (they do not change the numbers)
    attrs.update(
        {"setting.device": str(dev), "setting.batch_size": batch_size, "setting.backend": backend}
    )
    failures = PairFailures(es, plan)
    failures.warn_if_unequal()
    if keep == "summary":
        ds = _summary(es, plan, kept, values, attrs)  # type: ignore[arg-type]
    else:
        ds = _assemble(es, plan, kept, values, attrs)  # type: ignore[arg-type]
    return failures.attach(ds, keep)


# ---------------------------------------------------------------------------------- the pairs
class _Plan:
    """The pairs of one call: an explicit list, or every unordered pair decoded on demand."""

    def __init__(self, es: EmbeddingSet, pairs: Any) -> None:
        self.identities: list[Any] = es.identities.tolist()
        self.counts = es.counts
        self.is_all = isinstance(pairs, str)
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

    def codes(self) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
        """Positions in ``identities`` of both identities of every pair."""
        if self.is_all:
            return decode_pair_indices(np.arange(self.n_pairs), len(self.identities))
        where = {label: k for k, label in enumerate(self.identities)}
        i = np.fromiter((where[a] for a, _ in self.pair_list), np.int64, self.n_pairs)
        j = np.fromiter((where[b] for _, b in self.pair_list), np.int64, self.n_pairs)
        return i, j

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
            **_simultaneity(s.output),
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


def _simultaneity(output: Output) -> dict[str, Any]:
    """Return a certified output's ``n_simultaneous`` attribute (none for other statuses)."""
    if output.status in CERTIFIED_STATUSES:
        return {"n_simultaneous": int(output.n_simultaneous)}
    return {}


def _summary(
    es: EmbeddingSet,
    plan: _Plan,
    specs: Sequence[_Spec],
    values: dict[str, npt.NDArray[Any]],
    attrs: dict[str, Any],
) -> xr.Dataset:
    """Reductions over the pairs of every scalar output (see :func:`audit_pairs`)."""
    i, j = plan.codes()
    ids = np.asarray(plan.identities)
    present = np.unique(np.concatenate([i, j]))
    order = np.arange(plan.n_pairs)
    data: dict[str, xr.Variable] = {}
    for s in specs:
        v = values[s.var]
        name = s.output.long_name
        # a reduction over the pairs is certified only if their bounds hold jointly
        reduced = reduction_attrs(
            {"status": s.output.status, **_simultaneity(s.output)}, plan.n_pairs
        )
        if s.dtype is bool:
            data[f"{s.var}_count"] = variable(
                (), int(v.sum()), long_name=f"pairs where: {name}", status="descriptive"
            )
            continue
        top = int(np.argmax(v))  # the first pair reaching the maximum
        data[f"{s.var}_max"] = variable((), v[top], long_name=f"largest {name}", **reduced)
        for side, codes in (("a", i), ("b", j)):
            data[f"{s.var}_argmax_identity_{side}"] = variable(
                (),
                ids[codes[top]],
                long_name=f"identity {side.upper()} of the first pair reaching the largest {name}",
                status="descriptive",
            )
        data[f"{s.var}_n_at_max"] = variable(
            (),
            int((v == v[top]).sum()),
            long_name=f"pairs reaching the largest {name}",
            status="descriptive",
        )
        data[f"{s.var}_quantile"] = variable(
            "quantile",
            np.quantile(v, QUANTILES, method="inverted_cdf"),
            long_name=f"quantiles of {name} over the pairs (exact order statistics)",
            **reduced,
        )
        data[f"{s.var}_n_inf"] = variable(
            (),
            int(np.isposinf(v).sum()),
            long_name=f"pairs where {name} is +inf",
            status="descriptive",
        )
        # each identity's largest value over its pairs: sort (identity, -value, pair order)
        who = np.concatenate([i, j])
        partner = np.concatenate([j, i])
        both = np.concatenate([v, v])
        rank = np.lexsort((np.concatenate([order, order]), -both, who))
        first = rank[np.r_[True, who[rank][1:] != who[rank][:-1]]]  # one row per identity
        data[f"{s.var}_worst"] = variable(
            "identity",
            both[first],
            long_name=f"largest {name} over the identity's pairs",
            **reduced,
        )
        data[f"{s.var}_worst_partner"] = variable(
            "identity",
            ids[partner[first]],
            long_name=f"the other identity of the pair giving the identity's largest {name}",
            status="descriptive",
        )
    out_attrs = {**attrs, "keep": "summary", "quantile_method": "inverted_cdf"}
    ds = xr.Dataset(
        data,
        coords={"quantile": ("quantile", np.asarray(QUANTILES)), "identity": ids[present]},
        attrs=out_attrs,
    )
    check_result_dataset(ds)
    return ds
