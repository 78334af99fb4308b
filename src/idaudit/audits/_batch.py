"""The pairs one kernel call covers (`Batch`), the cache one call shares, a pair's bad data.

An auditor's ``_run`` reads a :class:`Batch`: the pairs' rows, pooled and packed on a
device, their Gram matrices and masks, and values computed once per identity. This module
calls no auditor: the auditors (:mod:`idaudit.audits._base` and the routes) and the engine's
backends call into it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np
import numpy.typing as npt
import torch

from idaudit.exceptions import InvalidInputError
from idaudit.ops import PairBatch, pack_pairs

__all__ = ["Batch", "CallCache", "PairError"]

FloatArray = npt.NDArray[np.float64]


class PairError(InvalidInputError):
    """Bad data in one pair of a batch; ``pair_index`` says which (0-based, in the batch)."""

    def __init__(self, message: str, pair_index: int) -> None:
        super().__init__(message)
        self.pair_index = pair_index


@dataclass
class CallCache:
    """What one :func:`idaudit.audit_pairs` call computes once and reuses across its batches.

    One instance lives as long as a call (the local backend), a dask worker process's share of
    calls on one input (the dask backend, keyed by the input's hash, its ``failures`` setting
    and the device) or a series of :func:`idaudit.audits.logistic_oof_logits` calls
    (``shared=``); every :class:`Batch` of that span holds it as ``Batch.shared``. Everything
    in it depends on one identity or on the sizes of a pair, never on the pair itself, so a
    pair's numbers do not depend on which batch computed a cached value.

    Attributes
    ----------
    width : int, default 0
        Rows of the widest identity of the call. Each identity's rows and Gram block are
        zero-padded to it, so blocks cached for one batch fit every later one; 0 pads each
        identity to its own size.
    rows : dict
        Identity label -> its rows, numpy.ndarray of float64 of shape (n, d), looked up in the
        :class:`~idaudit.EmbeddingSet` once per call.
    failed : mapping or None, default None
        Identity label -> its failed outputs (:attr:`~idaudit.EmbeddingSet.failed_counts`),
        copied once per call when the first chunk needs it; None until then.
    per_identity : dict
        Cache name (``"rows_gram"``, ``"gaussmech"``, ...) -> identity label -> what
        :meth:`Batch.per_identity` computed for that identity under that name.
    rocht_folds : dict
        ``(n_folds, fold_seed)`` -> ``(n_a, n_b)`` -> the ROC-HT cross-validation folds of a
        pair of those sizes (they depend only on the sizes and the seed).
    """

    width: int = 0
    rows: dict[Any, FloatArray] = field(default_factory=dict)
    failed: Mapping[Any, int] | None = None
    per_identity: dict[str, dict[Any, Any]] = field(default_factory=dict)
    rocht_folds: dict[tuple[int, int], dict[tuple[int, int], Any]] = field(default_factory=dict)


class Batch:
    """The pairs one kernel call covers, plus a cache shared by the auditors run on them.

    Several auditors run on the same batch reuse expensive intermediate results through
    ``cache`` (pooled distances and median bandwidths for MMD-TV at several bandwidth scales,
    Gram matrices for ROC-HT), or compute what their siblings in ``auditors`` need in the
    same pass (KDE-LR's densities reduced for every ``mix`` at once), so nothing is computed
    twice.
    """

    def __init__(
        self,
        samples: Sequence[tuple[FloatArray, FloatArray]],
        device: torch.device,
        labels: Sequence[tuple[Any, Any]] | None = None,
        shared: CallCache | None = None,
        auditors: Sequence[Any] = (),  # BaseAuditor: this module imports no auditor
        failures: Sequence[tuple[int, int]] | None = None,
    ) -> None:
        self.samples = list(samples)
        self.device = device
        self.labels = None if labels is None else list(labels)
        # failed outputs of each pair's identities (EmbeddingSet.failed_counts): not in
        # ``samples``; the certified routes count them as an output atom
        self.failures = [(0, 0)] * len(self.samples) if failures is None else list(failures)
        # the auditors that will run on this batch, so that one can compute what its
        # siblings need in the same pass (KDE-LR reduces every mix while densities are hot)
        self.auditors = tuple(auditors)
        self.cache: dict[Any, Any] = {}
        # per-identity results reused across the batches of one audit_pairs call
        self.shared = CallCache() if shared is None else shared

    @cached_property
    def packed(self) -> PairBatch:
        """The pairs as one zero-padded float64 tensor on ``device``."""
        if self.labels is None:
            return pack_pairs(self.samples, self.device)
        return PairBatch(x=self._pooled_rows(), n_a=self.n_a, n_b=self.n_b)

    @property
    def n_pairs(self) -> int:
        """Number of pairs."""
        return len(self.samples)

    @cached_property
    def n_a(self) -> tuple[int, ...]:
        """Rows of identity A in each pair (no tensor is built)."""
        return tuple(int(a.shape[0]) for a, _ in self.samples)

    @cached_property
    def n_b(self) -> tuple[int, ...]:
        """Rows of identity B in each pair."""
        return tuple(int(b.shape[0]) for _, b in self.samples)

    def _identity_keys(self) -> list[tuple[Any, Any]]:
        """Cache key of both identities of each pair: labels, or positions in a single fit."""
        if self.labels is None:
            return [((p, 0), (p, 1)) for p in range(self.n_pairs)]
        return self.labels

    def _identity_cache(self, key: str) -> dict[Any, Any]:
        """Return the values cached under ``key``: per call with labels, per batch without."""
        if self.labels is None:
            return self.cache.setdefault(("per_identity", key), {})  # type: ignore[no-any-return]
        return self.shared.per_identity.setdefault(key, {})

    def uncached(self, key: str) -> dict[Any, FloatArray]:
        """Rows of each identity of the batch whose ``key`` value is not cached yet.

        Compute the value of each and pass them to :meth:`per_identity`. With identity labels
        the cache outlives the batch (``shared``), so a value is computed once per
        :func:`idaudit.audit_pairs` call whatever the number of pairs the identity is in;
        without labels (a single ``fit``) the keys are the pairs' positions.
        """
        cache = self._identity_cache(key)
        todo: dict[Any, FloatArray] = {}
        for (a, b), (rows_a, rows_b) in zip(self._identity_keys(), self.samples, strict=True):
            for k, rows in ((a, rows_a), (b, rows_b)):
                if k not in cache and k not in todo:
                    todo[k] = rows
        return todo

    def per_identity(self, key: str, computed: Mapping[Any, Any]) -> list[tuple[Any, Any]]:
        """Both identities' ``key`` values for each pair, once the ``computed`` ones are cached.

        ``computed`` maps each key :meth:`uncached` returned to its value.
        """
        cache = self._identity_cache(key)
        cache.update(computed)
        return [(cache[a], cache[b]) for a, b in self._identity_keys()]

    def _identities(self) -> list[tuple[Any, Any]]:
        """Rows and Gram matrix of both identities of each pair, zero-padded to the widest.

        The call's widest identity (``shared.width``) sets the padding, so blocks cached for one
        batch fit every later one.
        """

        def pad(rows: FloatArray) -> tuple[torch.Tensor, torch.Tensor]:
            width = max(self.shared.width, rows.shape[0])
            x = torch.zeros(width, rows.shape[1], dtype=torch.float64, device=self.device)
            x[: rows.shape[0]] = torch.from_numpy(rows).to(self.device)
            return x, x @ x.T  # (width, d), (width, width): zero outside the real rows

        todo = self.uncached("rows_gram")
        return self.per_identity("rows_gram", {k: pad(rows) for k, rows in todo.items()})

    def _blocks(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Return the padded rows of A and B and each pooled row's source position.

        Shapes (pairs, w_a, d), (pairs, w_b, d) and (pairs, n_max): pooled row ``r`` of pair
        ``p`` is row ``pos[p, r]`` of ``cat([A rows, B rows, one zero row])``.
        """
        if "blocks" in self.cache:
            cached: tuple[torch.Tensor, torch.Tensor, torch.Tensor] = self.cache["blocks"]
            return cached
        n_a, n_b = np.asarray(self.n_a), np.asarray(self.n_b)
        w_a, w_b = int(n_a.max()), int(n_b.max())
        n_max = int((n_a + n_b).max())
        identities = self._identities()
        xa = torch.stack([_fit(a[0], w_a, 0) for a, _ in identities])
        xb = torch.stack([_fit(b[0], w_b, 0) for _, b in identities])
        # pooled position r of pair p: A row r, then B row r - n_a, then padding
        r = np.arange(n_max)[None, :]
        pos = np.where(
            r < n_a[:, None],
            r,
            np.where(r < (n_a + n_b)[:, None], w_a + r - n_a[:, None], w_a + w_b),
        )  # (pairs, n_max)
        out = (xa, xb, torch.from_numpy(pos).to(self.device))
        self.cache["blocks"] = out
        return out

    def _pooled_rows(self) -> torch.Tensor:
        """Pooled rows (pairs, n_max, d), gathered from the per-identity rows."""
        xa, xb, pos = self._blocks()
        rows = torch.nn.functional.pad(torch.cat([xa, xb], 1), (0, 0, 0, 1))  # + a zero row
        return rows.gather(1, pos[:, :, None].expand(-1, -1, rows.shape[2]))

    def _pooled_gram(self) -> torch.Tensor:
        """Pooled Gram matrices (pairs, n_max, n_max) from per-identity blocks.

        Each identity's rows and own Gram block are computed once per call (``shared``); per
        pair only the A-B block is multiplied, straight into its place, and the identity
        blocks are copied in, so each entry is written once (stacking rows for one large
        product, or gathering padded blocks, moves more memory than the products cost).
        """
        n_a, n_b = self.n_a, self.n_b
        n_max = max(a + b for a, b in zip(n_a, n_b, strict=True))
        out = torch.empty(self.n_pairs, n_max, n_max, dtype=torch.float64, device=self.device)
        for p, (na, nb, ((xa, ga), (xb, gb))) in enumerate(
            zip(n_a, n_b, self._identities(), strict=True)
        ):
            end = na + nb
            torch.mm(xa[:na], xb[:nb].T, out=out[p, :na, na:end])  # the only per-pair product
            out[p, na:end, :na] = out[p, :na, na:end].T
            out[p, :na, :na] = ga[:na, :na]
            out[p, na:end, na:end] = gb[:nb, :nb]
            out[p, end:].zero_()
            out[p, :end, end:].zero_()
        return out

    def gram(self) -> torch.Tensor:
        """Inner products within each pooled sample, (pairs, n_max, n_max) (cached).

        With identity labels, each identity's own block is computed once per
        :func:`idaudit.audit_pairs` call and only the A-B block per pair: on 500 pairs of
        400 identities that is less than half the arithmetic of whole pooled products.
        """
        if "gram" in self.cache:
            gram: torch.Tensor = self.cache["gram"]
            return gram
        if self.labels is None:
            x = self.packed.x
            gram = x @ x.transpose(1, 2)  # (pairs, n_max, n_max)
        else:
            gram = self._pooled_gram()
        self.cache["gram"] = gram
        return gram

    def masks(self) -> tuple[torch.Tensor, torch.Tensor]:
        """Membership masks of A and B rows, each (pairs, n_max) (cached)."""
        if "masks" not in self.cache:
            n_a = torch.tensor(self.n_a, device=self.device)[:, None]  # (pairs, 1)
            n_ab = n_a + torch.tensor(self.n_b, device=self.device)[:, None]
            rows = torch.arange(int(n_ab.max()), device=self.device)  # (n_max,)
            self.cache["masks"] = (
                (rows < n_a).to(torch.float64),  # (pairs, n_max)
                ((rows >= n_a) & (rows < n_ab)).to(torch.float64),
            )
        masks: tuple[torch.Tensor, torch.Tensor] = self.cache["masks"]
        return masks


def _fit(t: torch.Tensor, width: int, dim: int) -> torch.Tensor:
    """``t`` cut or zero-padded to ``width`` along ``dim`` (cached blocks may be wider)."""
    have = t.shape[dim]
    if have >= width:
        return t.narrow(dim, 0, width)
    pad = [0, 0] * (t.dim() - dim - 1) + [0, width - have]
    return torch.nn.functional.pad(t, pad)
