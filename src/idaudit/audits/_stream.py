"""``keep="summary"`` without holding every pair: running reductions and exact quantiles.

:class:`SummaryStream` takes the per-pair values of an :func:`idaudit.audit_pairs` call a
chunk (or a tile) at a time, in any order, and keeps what the summary needs: running maxima
with the first pair reaching them, counts, and each identity's largest value with its
partner. Quantiles are exact order statistics: the values are kept in memory while they are
small and otherwise written to a temporary file per variable, from which
:func:`order_statistics` selects the requested ranks by radix selection on the float64 bit
patterns (a few sequential passes, memory bounded by the selection buffer). Ties between
pairs are broken by pair order, so the result does not depend on the order chunks arrive in.
"""

from __future__ import annotations

import math
import tempfile
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt
import xarray as xr

from idaudit._results import CERTIFIED_STATUSES, check_result_dataset, reduction_attrs, variable

if TYPE_CHECKING:
    from idaudit.audits._plan import OutputSpec

__all__ = ["QUANTILES", "SummaryStream", "order_statistics"]

#: Quantile levels of ``keep="summary"`` (exact order statistics, see :func:`idaudit.audit_pairs`).
QUANTILES = (0.0, 0.01, 0.05, 0.25, 0.5, 0.75, 0.95, 0.99, 1.0)

# Values kept in memory for the quantiles before they go to temporary files (all variables).
_MEMORY_BYTES = 2**28
# Largest candidate set that radix selection finishes with one partition (8 bytes each).
_SELECT_ITEMS = 2**22
# Values read from a temporary file per step.
_READ_ITEMS = 2**20

_SIGN = np.uint64(1 << 63)
_NO_PAIR = np.iinfo(np.int64).max


def simultaneity(status: str, n_simultaneous: int) -> dict[str, Any]:
    """Return a certified output's ``n_simultaneous`` attribute (none for other statuses)."""
    if status in CERTIFIED_STATUSES:
        return {"n_simultaneous": int(n_simultaneous)}
    return {}


def quantile_ranks(n: int) -> npt.NDArray[np.int64]:
    """0-based ranks of :data:`QUANTILES` among ``n`` sorted values, as numpy's ``inverted_cdf``."""
    virtual = np.asarray(QUANTILES) * n - 1  # numpy's virtual index of the method
    below = np.floor(virtual)
    rank = np.where(virtual - below == 0, below, below + 1)
    out: npt.NDArray[np.int64] = np.clip(rank, 0, n - 1).astype(np.int64)
    return out


def _keys(values: npt.NDArray[np.float64]) -> npt.NDArray[np.uint64]:
    """Unsigned keys ordered like the float64 values (NaN excluded by the caller)."""
    keys = np.array(values, dtype=np.float64).view(np.uint64)  # a copy, flipped in place
    flip = keys >> np.uint64(63)  # 1 for negative values
    flip *= np.uint64(0x7FFF_FFFF_FFFF_FFFF)
    flip |= _SIGN  # negative: every bit; otherwise the sign bit
    keys ^= flip
    return keys


def _values(keys: npt.NDArray[np.uint64]) -> npt.NDArray[np.float64]:
    """Inverse of :func:`_keys`."""
    positive = (keys & _SIGN) != 0
    bits = np.where(positive, keys & ~_SIGN, ~keys)
    return bits.view(np.float64)


def order_statistics(
    chunks: Callable[[], Iterator[npt.NDArray[np.float64]]], n: int, ranks: Sequence[int]
) -> npt.NDArray[np.float64]:
    """Exact order statistics of values that arrive in chunks, in bounded memory.

    Parameters
    ----------
    chunks : callable
        Returns a fresh iterator over the values (float64 arrays, no NaN) each time it is
        called; every call must yield the same ``n`` values.
    n : int
        Number of values.
    ranks : sequence of int
        0-based ranks in ``[0, n)``.

    Returns
    -------
    numpy.ndarray of float64
        The value of each rank in the sorted values (``np.sort(values)[ranks]``).

    Notes
    -----
    Radix selection on the order-preserving 64-bit keys of the values: each pass over the
    chunks either counts the next 16 bits of the keys that share a rank's known prefix, or,
    once at most ``2**22`` keys share it, collects them and partitions. At most five passes;
    memory is one chunk plus the histograms and the collected keys.
    """
    # per rank: the key prefix found so far (top 64 - shift bits) and the rank within it
    state = [(0, 64, int(r)) for r in ranks]
    found: dict[int, np.uint64] = {}
    sizes = {(0, 64): n}
    while len(found) < len(state):
        open_ = {(p, s) for k, (p, s, _) in enumerate(state) if k not in found}
        small = {key for key in open_ if sizes[key] <= _SELECT_ITEMS or key[1] == 0}
        counts = {key: np.zeros(1 << 16, dtype=np.int64) for key in open_ - small}
        kept: dict[tuple[int, int], list[npt.NDArray[np.uint64]]] = {key: [] for key in small}
        for chunk in chunks():
            keys = _keys(chunk)
            for prefix, shift in open_:
                part = keys if shift == 64 else keys[(keys >> np.uint64(shift)) == prefix]
                if (prefix, shift) in kept:
                    kept[(prefix, shift)].append(part)
                else:
                    digit = (part >> np.uint64(shift - 16)) & np.uint64(0xFFFF)
                    counts[(prefix, shift)] += np.bincount(
                        digit.astype(np.int64), minlength=1 << 16
                    )
        for k, (prefix, shift, rank) in enumerate(state):
            if k in found:
                continue
            if (prefix, shift) in kept:
                pool = np.concatenate(kept[(prefix, shift)])
                found[k] = np.partition(pool, rank)[rank]
                continue
            cum = np.cumsum(counts[(prefix, shift)])
            digit = int(np.searchsorted(cum, rank, side="right"))
            below = int(cum[digit - 1]) if digit else 0
            state[k] = ((prefix << 16) | digit, shift - 16, rank - below)
            sizes[state[k][:2]] = int(cum[digit]) - below
    keys = np.array([found[k] for k in range(len(state))], dtype=np.uint64)
    return _values(keys)


class _Values:
    """One variable's per-pair values for its quantiles: in memory, or in a temporary file."""

    def __init__(self) -> None:
        self.parts: list[npt.NDArray[np.float64]] = []
        self.path: Path | None = None
        self.n = 0
        self.n_nan = 0

    @property
    def nbytes(self) -> int:
        return sum(p.nbytes for p in self.parts)

    def add(self, v: npt.NDArray[np.float64]) -> None:
        nan = np.isnan(v)
        if nan.any():  # the quantiles will be NaN; count them, keep the rest
            self.n_nan += int(nan.sum())
            v = v[~nan]
        self.n += v.size
        if self.path is None:
            self.parts.append(np.array(v, dtype=np.float64))
        else:
            with self.path.open("ab") as fh:
                np.ascontiguousarray(v, dtype=np.float64).tofile(fh)

    def spill(self, path: Path) -> None:
        """Move the values to ``path`` and write every later chunk there."""
        self.path = path
        with path.open("wb") as fh:
            for part in self.parts:
                part.tofile(fh)
        self.parts = []

    def chunks(self) -> Iterator[npt.NDArray[np.float64]]:
        if self.path is None:
            yield from self.parts
            return
        with self.path.open("rb") as fh:
            while True:
                part = np.fromfile(fh, dtype=np.float64, count=_READ_ITEMS)
                if not part.size:
                    return
                yield part

    def quantiles(self) -> npt.NDArray[np.float64]:
        if self.n_nan or not self.n:  # as numpy.quantile: NaN anywhere gives NaN
            return np.full(len(QUANTILES), np.nan)
        if self.path is None:
            return np.quantile(np.concatenate(self.parts), QUANTILES, method="inverted_cdf")
        return order_statistics(self.chunks, self.n, quantile_ranks(self.n).tolist())


class _Running:
    """Running maximum, first pair reaching it, count at it, ``+inf`` count, worst per identity."""

    def __init__(self, n_identities: int) -> None:
        self.top = -np.inf
        self.top_pair = _NO_PAIR
        self.top_a = self.top_b = -1
        self.n_at_top = 0
        self.n_inf = 0
        self.any = False
        self.worst = np.full(n_identities, np.nan)
        self.worst_pair = np.full(n_identities, _NO_PAIR, dtype=np.int64)
        self.partner = np.full(n_identities, -1, dtype=np.int64)

    def add(self, index: Any, a: Any, b: Any, v: npt.NDArray[np.float64], sides: _Sides) -> None:
        self.n_inf += int(np.isposinf(v).sum())
        self._maximum(index, a, b, v)
        self._worst(v, sides)

    def _maximum(self, index: Any, a: Any, b: Any, v: npt.NDArray[np.float64]) -> None:
        # numpy.argmax semantics: NaN is the largest value, and then nothing equals it
        nan = np.isnan(v)
        if nan.any() or math.isnan(self.top):
            cand = np.flatnonzero(nan)
            if math.isnan(self.top) and (not cand.size or self.top_pair < index[cand].min()):
                return
            k = int(cand[np.argmin(index[cand])])
            self.top, self.top_pair, self.top_a, self.top_b = math.nan, int(index[k]), a[k], b[k]
            self.n_at_top, self.any = 0, True
            return
        m = float(v.max())
        at = np.flatnonzero(v == m)
        k = int(at[np.argmin(index[at])])
        if not self.any or m > self.top:
            self.top, self.top_pair, self.top_a, self.top_b = m, int(index[k]), a[k], b[k]
            self.n_at_top, self.any = at.size, True
        elif m == self.top:
            self.n_at_top += at.size
            if index[k] < self.top_pair:
                self.top_pair, self.top_a, self.top_b = int(index[k]), a[k], b[k]

    def _worst(self, v: npt.NDArray[np.float64], sides: _Sides) -> None:
        """Each identity's largest value (NaN lowest) and, on ties, its first pair."""
        both = np.concatenate([v, v])
        nan = np.isnan(both)
        key = np.where(nan, -np.inf, both)
        best = np.full(len(self.worst), -np.inf)
        np.maximum.at(best, sides.who, key)  # the chunk's largest per identity
        at = key == best[sides.who]
        first = np.full(len(self.worst), _NO_PAIR, dtype=np.int64)
        np.minimum.at(first, sides.who[at], sides.order[at])
        ids = sides.present
        real = np.zeros(len(self.worst), dtype=bool)
        real[sides.who[~nan]] = True  # identities with a value that is not NaN
        val = np.where(real[ids], best[ids], np.nan)
        pair = first[ids]
        cur, cur_pair = self.worst[ids], self.worst_pair[ids]
        better = (val > cur) | (np.isnan(cur) & ~np.isnan(val))
        better |= ((val == cur) | (np.isnan(cur) & np.isnan(val))) & (pair < cur_pair)
        if not better.any():
            return
        # the partner of each identity's chosen pair: the entry (who, first[who])
        chosen = at & (sides.order == first[sides.who])
        partner = np.empty(len(self.worst), dtype=np.int64)
        partner[sides.who[chosen]] = sides.partner[chosen]
        ids = ids[better]
        self.worst[ids] = val[better]
        self.worst_pair[ids] = pair[better]
        self.partner[ids] = partner[ids]


class _Sides:
    """A chunk's pairs seen from each identity: (identity, partner, pair order), twice."""

    def __init__(self, index: Any, a: Any, b: Any, n_identities: int) -> None:
        self.who = np.concatenate([a, b])
        self.partner = np.concatenate([b, a])
        self.order = np.concatenate([index, index])
        self.present = np.flatnonzero(np.bincount(self.who, minlength=n_identities))


class SummaryStream:
    """The ``keep="summary"`` reductions of an :func:`idaudit.audit_pairs` call, fed by chunks.

    Parameters
    ----------
    specs : sequence of OutputSpec
        The scalar outputs of the call.
    identities : numpy.ndarray
        Identity labels; chunks give positions in it.
    n_pairs : int
        Pairs of the call (for the status of certified reductions).
    """

    def __init__(
        self, specs: Sequence[OutputSpec], identities: npt.NDArray[Any], n_pairs: int
    ) -> None:
        self.specs = list(specs)
        self.ids = identities
        self.n_pairs = n_pairs
        self.seen = np.zeros(len(identities), dtype=bool)
        self.running = {s.var: _Running(len(identities)) for s in self.specs if s.dtype is not bool}
        self.values = {s.var: _Values() for s in self.specs if s.dtype is not bool}
        self.counts = {s.var: 0 for s in self.specs if s.dtype is bool}
        self._tmp: tempfile.TemporaryDirectory[str] | None = None

    def add(
        self,
        index: npt.NDArray[np.int64],
        a: npt.NDArray[np.int64],
        b: npt.NDArray[np.int64],
        values: dict[str, npt.NDArray[Any]],
    ) -> None:
        """Add the pairs ``index`` (identity positions ``a``, ``b``) and their values."""
        if not len(index):
            return
        self.seen[a] = True
        self.seen[b] = True
        for var, count in self.counts.items():
            self.counts[var] = count + int(np.asarray(values[var]).sum())
        sides = _Sides(index, a, b, len(self.ids))
        for var, run in self.running.items():
            v = np.asarray(values[var], dtype=np.float64)
            run.add(index, a, b, v, sides)
            self.values[var].add(v)
        if self._tmp is None and sum(v.nbytes for v in self.values.values()) > _MEMORY_BYTES:
            self._tmp = tempfile.TemporaryDirectory(prefix="idaudit-summary-")
            for k, vals in enumerate(self.values.values()):
                vals.spill(Path(self._tmp.name) / f"values{k}.f8")

    def dataset(self, attrs: dict[str, Any]) -> xr.Dataset:
        """Return the summary Dataset (see :func:`idaudit.audit_pairs`) and free the files."""
        try:
            return self._dataset(attrs)
        finally:
            if self._tmp is not None:
                self._tmp.cleanup()
                self._tmp = None

    def _dataset(self, attrs: dict[str, Any]) -> xr.Dataset:
        present = np.flatnonzero(self.seen)
        ids = self.ids
        data: dict[str, xr.Variable] = {}
        for s in self.specs:
            name = s.output.long_name
            if s.dtype is bool:
                data[f"{s.var}_count"] = variable(
                    (), self.counts[s.var], long_name=f"pairs where: {name}", status="descriptive"
                )
                continue
            run = self.running[s.var]
            # a reduction over the pairs is certified only if their bounds hold jointly
            reduced = reduction_attrs(
                {
                    "status": s.output.status,
                    **simultaneity(s.output.status, s.output.n_simultaneous),
                },
                self.n_pairs,
            )
            data[f"{s.var}_max"] = variable((), run.top, long_name=f"largest {name}", **reduced)
            for side, code in (("a", run.top_a), ("b", run.top_b)):
                data[f"{s.var}_argmax_identity_{side}"] = variable(
                    (),
                    ids[code],
                    long_name=f"identity {side.upper()} of the first pair reaching the largest "
                    f"{name}",
                    status="descriptive",
                )
            data[f"{s.var}_n_at_max"] = variable(
                (),
                run.n_at_top,
                long_name=f"pairs reaching the largest {name}",
                status="descriptive",
            )
            data[f"{s.var}_quantile"] = variable(
                "quantile",
                self.values[s.var].quantiles(),
                long_name=f"quantiles of {name} over the pairs (exact order statistics)",
                **reduced,
            )
            data[f"{s.var}_n_inf"] = variable(
                (), run.n_inf, long_name=f"pairs where {name} is +inf", status="descriptive"
            )
            data[f"{s.var}_worst"] = variable(
                "identity",
                run.worst[present],
                long_name=f"largest {name} over the identity's pairs",
                **reduced,
            )
            data[f"{s.var}_worst_partner"] = variable(
                "identity",
                ids[run.partner[present]],
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
