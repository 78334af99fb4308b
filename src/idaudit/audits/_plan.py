"""The types every part of :func:`idaudit.audit_pairs` shares: the pairs, the outputs, a chunk.

:class:`PairPlan` holds the pairs of one call (an explicit list, or every unordered pair
decoded on demand), :class:`OutputSpec` one result variable, :data:`ChunkResult` what running
one chunk of pairs returns. The engine builds them; the backends, the store, the summaries
and the tiled engine read them. This module imports none of those, so the engine's modules
form no import cycle.
"""

from __future__ import annotations

import hashlib
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from idaudit._validation import check_pairs
from idaudit.audits._base import BaseAuditor, Output
from idaudit.data import EmbeddingSet, decode_pair_indices, n_pairs_of
from idaudit.exceptions import IdauditWarning, InvalidInputError

__all__ = ["ChunkResult", "OutputSpec", "PairPlan", "output_specs"]

#: One chunk's outputs: auditor label -> output name -> array over the chunk's pairs.
ChunkResult = dict[str, dict[str, npt.NDArray[Any]]]


class PairPlan:
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
                    stacklevel=4,
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


@dataclass(frozen=True)
class OutputSpec:
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


def output_specs(auditors: Sequence[BaseAuditor], es: EmbeddingSet) -> list[OutputSpec]:
    """One :class:`OutputSpec` per output of every auditor (``"<label>_<output>"``)."""
    sizes = {"embedding_dim": es.dim}
    specs: list[OutputSpec] = []
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
            specs.append(OutputSpec(var, aud.label, out.name, out, tuple(out.dims), shape))
    return specs
