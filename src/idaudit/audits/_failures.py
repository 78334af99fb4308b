"""Failure rates per identity and Fisher's exact test of equal rates per pair.

A failed output (no face, an unreadable image, NaN, zero norm) is an output of the mechanism
(docs/status.md, rule 1). The certified routes count it; the diagnostics and sample estimates
compute on the successful rows, so every per-pair result says how often each identity failed
and whether the two rates differ, and :func:`idaudit.audit_pairs` warns when they do.
"""

from __future__ import annotations

import functools
import math
import warnings
from collections.abc import Sequence
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt
import xarray as xr
from scipy.special import gammaln

from idaudit._results import variable
from idaudit.data import EmbeddingSet
from idaudit.exceptions import IdauditWarning

__all__ = ["PairFailures", "fisher_exact_pvalue"]

#: Relative tolerance under which two tables count as equally likely (R's fisher.test).
_TIE = 1e-7
#: Distinct (failed, outputs) count pairs tested at most; beyond, p-values are not computed.
_MAX_TESTS = 2_000_000


def fisher_exact_pvalue(failed_a: int, n_a: int, failed_b: int, n_b: int) -> float:
    """Two-sided p-value of Fisher's exact test that two identities fail at the same rate.

    The number of A's failures given every margin is hypergeometric; the p-value sums the
    probabilities of the tables no more likely than the observed one (within a relative
    ``1e-7``, as R's ``fisher.test`` and, up to that tolerance, ``scipy.stats.fisher_exact``).

    Parameters
    ----------
    failed_a, n_a, failed_b, n_b : int
        Failed outputs and all outputs of each identity (``0 <= failed <= n``).

    Returns
    -------
    float
        In (0, 1]; 1 when no output or every output failed.
    """
    total, failed = n_a + n_b, failed_a + failed_b
    if failed in (0, total):
        return 1.0
    lf = _log_factorials(total)
    x = np.arange(max(0, n_a - (total - failed)), min(failed, n_a) + 1)
    # log P[X = x] for X ~ Hypergeometric(total, failed, n_a), up to the constant term
    log_pmf = -lf[x] - lf[failed - x] - lf[n_a - x] - lf[total - failed - n_a + x]
    observed = log_pmf[failed_a - x[0]]
    tail = log_pmf[log_pmf <= observed + math.log1p(_TIE)]
    const = lf[failed] + lf[total - failed] + lf[n_a] + lf[n_b] - lf[total]
    return min(1.0, math.fsum(np.exp(tail + const).tolist()))


@functools.lru_cache(maxsize=4)
def _log_factorial_table(size: int) -> npt.NDArray[np.float64]:
    table: npt.NDArray[np.float64] = gammaln(np.arange(size + 1) + 1.0)
    table.flags.writeable = False
    return table


def _log_factorials(n: int) -> npt.NDArray[np.float64]:
    """``log k!`` for ``k = 0..n`` (at least), from a cached table grown in powers of two."""
    return _log_factorial_table(1 << max(int(n), 1).bit_length())


class Plan(Protocol):
    """What :class:`PairFailures` needs of ``audit_pairs``' pair plan."""

    identities: list[Any]
    n_pairs: int
    is_all: bool

    def codes(self) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
        """Positions in ``identities`` of both identities of every pair."""

    def pairs(self, lo: int, hi: int) -> list[tuple[Any, Any]]:
        """Pairs ``lo .. hi - 1`` as label tuples."""


class PairFailures:
    """Each identity's failure rate and the test of equal rates for the pairs of one call.

    Identities with the same (failed, outputs) counts share a signature, and a pair's
    p-value is its two signatures' p-value, so the test runs once per distinct pair of
    signatures that the pairs use (not at all when nothing failed). With ``failures="drop"``
    the set no longer knows its failures: rates and p-values are NaN.
    """

    def __init__(self, es: EmbeddingSet, plan: Plan) -> None:
        self.plan = plan
        self.known = es.failures == "keep"
        failed = es.failed_counts
        self.failed = np.array([failed.get(k, 0) for k in plan.identities], dtype=np.int64)
        self.outputs = self.failed + np.array([es.counts[k] for k in plan.identities])
        self.rate = self.failed / self.outputs if self.known else np.full(len(self.failed), np.nan)
        sigs, sig = np.unique(
            np.stack([self.failed, self.outputs], axis=1), axis=0, return_inverse=True
        )
        self.sig = sig.reshape(-1)
        self.tested = bool(self.known and self.failed.any())
        self.table = np.full((len(sigs), len(sigs)), 1.0 if self.known else np.nan)
        if self.tested:
            self._test(sigs)

    def _test(self, sigs: npt.NDArray[np.int64]) -> None:
        if self.plan.is_all:
            size = np.bincount(self.sig, minlength=len(sigs))
            u, v = np.triu_indices(len(sigs))
            used = (u != v) | (size[u] > 1)  # a signature meets itself only if two share it
            u, v = u[used], v[used]
        else:
            i, j = self.plan.codes()
            both = np.unique(np.sort(np.stack([self.sig[i], self.sig[j]], axis=1), axis=1), axis=0)
            u, v = both[:, 0], both[:, 1]
        if len(u) > _MAX_TESTS:
            self.table[:] = np.nan
            self.tested = False
            return
        for a, b in zip(u.tolist(), v.tolist(), strict=True):
            (fa, na), (fb, nb) = sigs[a], sigs[b]
            self.table[a, b] = self.table[b, a] = fisher_exact_pvalue(fa, na, fb, nb)

    def pvalues(self) -> npt.NDArray[np.float64]:
        """Fisher's exact p-value of every pair, in pair order."""
        i, j = self.plan.codes()
        out: npt.NDArray[np.float64] = self.table[self.sig[i], self.sig[j]]
        return out

    def smallest(self) -> tuple[float, tuple[Any, Any] | None]:
        """Return the smallest p-value over the pairs and the first pair reaching it."""
        if not self.tested:
            return (1.0 if self.known else math.nan), None
        if not self.plan.is_all:
            p = self.pvalues()
            k = int(np.argmin(p))
            return float(p[k]), self.plan.pairs(k, k + 1)[0]
        # every pair: the smallest entry over the signature pairs that occur, then its first
        # pair in order (identity i before j, i < j), without one array over all pairs
        size = np.bincount(self.sig, minlength=len(self.table))
        occurs = np.outer(size > 0, size > 0) & ~np.diag(size < 2)
        masked = np.where(occurs, self.table, np.inf)
        u, v = np.unravel_index(int(np.argmin(masked)), masked.shape)
        return float(masked[u, v]), self._first_pair(int(u), int(v))

    def _first_pair(self, u: int, v: int) -> tuple[Any, Any]:
        ids = self.plan.identities
        for i in range(len(ids)):
            want = v if self.sig[i] == u else (u if self.sig[i] == v else -1)
            if want < 0:
                continue
            later = np.flatnonzero(self.sig[i + 1 :] == want)
            if later.size:
                return ids[i], ids[i + 1 + int(later[0])]
        raise AssertionError("the signature pair occurs")  # pragma: no cover

    def warn_if_unequal(self, level: float = 0.05) -> None:
        """Warn when some pair's failure rates differ at ``level`` / number of pairs."""
        p, pair = self.smallest()
        if pair is None or not p < level / self.plan.n_pairs:
            return
        a, b = pair
        i, j = self.plan.identities.index(a), self.plan.identities.index(b)
        warnings.warn(
            f"failure rates differ between identities: {a!r} failed on {self.failed[i]} of "
            f"{self.outputs[i]} outputs and {b!r} on {self.failed[j]} of {self.outputs[j]} "
            f"(Fisher's exact test p = {p:.3g}, below {level:g} / {self.plan.n_pairs} pairs). "
            "Diagnostics and sample estimates are computed on the successful rows and are "
            "conditional on success; certified bounds count failures as outputs "
            "(docs/status.md, rule 1).",
            IdauditWarning,
            stacklevel=3,
        )

    def attrs(self) -> dict[str, Any]:
        """Return the data model the result's certified variables hold for."""
        if not self.known:
            model = "conditioned on success: failed rows were dropped (failures='drop')"
        elif self.failed.any():
            model = "the mechanism as run: failed outputs are an atom of the output space"
        else:
            model = "the mechanism as run: the input records no failed row"
        return {"failures": "keep" if self.known else "drop", "data_model": model}

    def attach(self, ds: xr.Dataset, keep: str) -> xr.Dataset:
        """Add the failure rates, the tests' p-values and the data model to a result."""
        ds.attrs.update(self.attrs())
        if keep == "summary":
            where = {label: k for k, label in enumerate(self.plan.identities)}
            present = [where[k] for k in ds["identity"].values.tolist()]
            p, pair = self.smallest()
            reached = "" if pair is None else f" (first reached by ({pair[0]!r}, {pair[1]!r}))"
            return ds.assign(
                fail_rate=variable(
                    "identity",
                    self.rate[present],
                    long_name="share of the identity's outputs the pipeline failed on",
                    status="descriptive",
                ),
                fail_pvalue_min=variable(
                    (),
                    p,
                    long_name="smallest p-value of Fisher's exact test of equal failure rates "
                    f"over the pairs{reached}",
                    status="sample_estimate",
                ),
            )
        # pair metadata like n_a and n_b, so merged and stacked results line them up
        i, j = self.plan.codes()
        return ds.assign_coords(
            fail_rate_a=_rate_variable(self.rate[i], "identity_a"),
            fail_rate_b=_rate_variable(self.rate[j], "identity_b"),
            fail_pvalue=variable(
                "pair",
                self.pvalues(),
                long_name="p-value of Fisher's exact test (two-sided) of equal failure rates",
                status="sample_estimate",
            ),
        )


def _rate_variable(values: Sequence[float] | npt.NDArray[np.float64], who: str) -> xr.Variable:
    return variable(
        "pair",
        values,
        long_name=f"share of {who}'s outputs the pipeline failed on (NaN: failures dropped)",
        status="descriptive",
    )
