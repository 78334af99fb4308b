"""The ``"multisplit"`` threshold strategy of :func:`~idaudit.certify.certify_scores`.

Repeat the ``"split"`` strategy over many seeded partitions at level α/2 and report the
median bound (Meinshausen, Meier & Bühlmann 2009; jax_privacy's ``MultiSplit``): one split's
bound depends on the luck of its partition, the median much less.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import numpy.typing as npt
import xarray as xr

from idaudit._results import Status
from idaudit._validation import RngLike, check_integer, check_random_state, spawn_seeds
from idaudit.certify._scores import (
    STRATEGY_RUNNERS,
    ScoreCertificate,
    certify_scores,
    check_deltas,
    seed_of,
)
from idaudit.dp import epsilon_from_tradeoff

__all__ = ["MultiSplitCertificate", "certify_multisplit"]

FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True, eq=False, repr=False)
class MultiSplitCertificate(ScoreCertificate):
    """A :class:`ScoreCertificate` whose bounds are medians over many splits.

    Each of the ``n_splits`` splits chooses a threshold on one part of the scores and
    certifies it on the other at level α/2 (Clopper–Pearson at α/4 per rate); ``thresholds``,
    ``fp``, ``fn``, ``fpr_upper`` and ``fnr_upper`` hold one entry per split. Unlike the
    other strategies, the points do *not* hold jointly: each split's bounds hold on their
    own with probability at least 1 − α/2, and the *median* over splits of any one
    quantity derived from them — ``epsilon_lb_`` at ``delta``, ``mu_lb_``, each value of
    :meth:`epsilon_curve` — is a lower bound with probability at least 1 − α (at most half
    the splits can fail together with probability above α: Markov's inequality on the
    number of failing splits, whose mean is at most n_splits · α/2). Different quantities
    are separate statements, each at level α.
    """

    n_splits: int = 1

    #: The formal status of ``epsilon_lb_``, of each value of :meth:`epsilon_curve` and of
    #: ``mu_lb_`` (each a statement of its own at level ``alpha``).
    status: ClassVar[Status] = "certified_lower_bound"

    def to_xarray(self) -> xr.Dataset:
        """Return the certificate as :meth:`ScoreCertificate.to_xarray` does, one point per split.

        Returns
        -------
        xarray.Dataset
            As :meth:`ScoreCertificate.to_xarray`; the per-split bounds carry
            ``n_simultaneous = 1`` (each holds alone, at 1 − α/2), ``epsilon_lb`` and
            ``mu_lb`` are medians over ``n_splits`` (attr ``reduction``).
        """
        ds = ScoreCertificate.to_xarray(self)
        for name in ("fpr_upper", "fnr_upper"):
            ds[name].attrs["n_simultaneous"] = 1
        for name in ("epsilon_lb", "mu_lb"):
            ds[name].attrs["n_simultaneous"] = 1
            ds[name].attrs["reduction"] = f"median over {self.n_splits} splits at alpha/2"
        ds.attrs["setting.n_splits"] = self.n_splits
        return ds

    def _per_split(self, deltas: FloatArray) -> FloatArray:
        """ε of each split at each δ, shape (n_deltas, n_splits)."""
        return np.stack(
            [
                np.atleast_1d(
                    epsilon_from_tradeoff(
                        self.fpr_upper[i : i + 1],
                        self.fnr_upper[i : i + 1],
                        deltas,
                        one_sided=self.one_sided,
                    )
                )
                for i in range(self.thresholds.size)
            ],
            axis=1,
        )

    def epsilon_curve(self, deltas: npt.ArrayLike) -> xr.DataArray:
        """Median over splits of each split's certified ε at every δ in ``deltas``.

        Parameters
        ----------
        deltas : array_like, shape (n_deltas,)
            δ values in [0, 1).

        Returns
        -------
        xarray.DataArray
            Dim ``delta``; status ``certified_lower_bound`` *at each δ separately* (attr
            ``joint = "no"``): each value holds with probability at least ``1 - alpha``,
            not all of them at once.
        """
        d = check_deltas(deltas)
        return self._lower_bound_curve(
            d,
            np.median(self._per_split(d), axis=1),
            "median over splits of the certified epsilon at each delta",
            n_splits=self.n_splits,
            joint="no",
        )

    def __repr__(self) -> str:
        return (
            f"MultiSplitCertificate(n_splits={self.n_splits}, n_a={self.n_a}, n_b={self.n_b}, "
            f"alpha={self.alpha:g}, delta={self.delta:g}, epsilon_lb_={self.epsilon_lb_:.4g}, "
            f"mu_lb_={self.mu_lb_:.4g})  # status: {self.status}"
        )


def certify_multisplit(
    a: FloatArray,
    b: FloatArray,
    *,
    alpha: float,
    delta: float,
    split_fraction: float,
    one_sided: bool,
    n_splits: Any,
    rng: RngLike,
) -> MultiSplitCertificate:
    """Run ``"split"`` ``n_splits`` times at α/2 and take medians (checked inputs).

    Parameters
    ----------
    a, b : numpy.ndarray, shape (n_a,), (n_b,)
        Checked scores of class A and class B.
    alpha, delta, split_fraction, one_sided
        As in :func:`~idaudit.certify.certify_scores` (checked).
    n_splits : int
        Number of seeded partitions, >= 1.
    rng : int, numpy.random.SeedSequence, numpy.random.Generator or None
        Seeds the partitions (one independent seed each).

    Returns
    -------
    MultiSplitCertificate
    """
    n = check_integer(n_splits, "n_splits", minimum=1)
    seeds = spawn_seeds(check_random_state(rng), n)
    certs = [
        certify_scores(
            a,
            b,
            alpha=alpha / 2,
            delta=delta,
            thresholds="split",
            split_fraction=split_fraction,
            one_sided=one_sided,
            rng=s,
        )
        for s in seeds
    ]
    mu = float(np.median([c.mu_lb_ for c in certs]))
    return MultiSplitCertificate(
        strategy="multisplit",
        alpha=alpha,
        delta=delta,
        one_sided=one_sided,
        n_a=a.size,
        n_b=b.size,
        n_eval_a=certs[0].n_eval_a,
        n_eval_b=certs[0].n_eval_b,
        thresholds=np.array([c.thresholds[0] for c in certs]),
        fp=np.array([c.fp[0] for c in certs], dtype=np.int64),
        fn=np.array([c.fn[0] for c in certs], dtype=np.int64),
        fpr_upper=np.array([c.fpr_upper[0] for c in certs]),
        fnr_upper=np.array([c.fnr_upper[0] for c in certs]),
        level_a=alpha / 4,
        level_b=alpha / 4,
        epsilon_lb_=float(np.median([c.epsilon_lb_ for c in certs])),
        mu_lb_=mu,
        seed=seed_of(rng),
        n_splits=n,
    )


STRATEGY_RUNNERS["multisplit"] = certify_multisplit
