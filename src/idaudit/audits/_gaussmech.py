"""GaussMech: Gaussian-calibration signal-to-noise diagnostic (seed 000, Section 3.1, Eq. 9)."""

from __future__ import annotations

import math
from typing import Any, ClassVar

import numpy as np
import numpy.typing as npt

from idaudit._validation import Constraint, Interval
from idaudit.audits._base import NAME, BaseAuditor, Output
from idaudit.audits._batch import Batch
from idaudit.audits._tiles import Side, Tile

__all__ = ["GaussMechAuditor"]


class GaussMechAuditor(BaseAuditor):
    r"""Invert the textbook Gaussian-mechanism calibration on mean shift over residual scale.

    **Status: diagnostic.** The calibration it inverts assumes additive, input-independent,
    isotropic Gaussian noise with a known global sensitivity and ε < 1; none of that holds for a
    generator, so the number is a Gaussian signal-to-noise score, not a DP statement.

    Parameters
    ----------
    delta : float, default 1e-5
        The δ of the calibration formula, in (0, 1).
    name : str, optional
        Variable prefix in :func:`idaudit.audit_pairs` results (default ``"gaussmech"``).

    Attributes
    ----------
    epsilon\_ : float
        :math:`\hat\varepsilon_{\mathrm{GaussMech}}` (Eq. 9); ``inf`` when both residual scales
        are 0 but the means differ, 0 when nothing differs.
    mean_distance\_ : float
        :math:`\hat\Delta_2 = \lVert\hat\mu_A - \hat\mu_B\rVert_2`.
    sigma\_ : float
        :math:`\max(\hat\sigma_A, \hat\sigma_B)`.
    n_a\_, n_b\_ : int
        Rows of each identity.

    Notes
    -----
    With :math:`\hat\mu_{id}` the mean embedding of an identity and
    :math:`\hat\sigma_{id} = \sqrt{\frac{1}{n_{id} d}\sum_i \lVert z_{id,i} - \hat\mu_{id}
    \rVert_2^2}` its root-mean-square residual per coordinate (no degrees-of-freedom
    correction, as the paper writes it),

    .. math:: \hat\varepsilon_{\mathrm{GaussMech}}(A, B) =
              \frac{\hat\Delta_2(A, B)\sqrt{2\ln(1.25/\delta)}}{\max(\hat\sigma_A,
              \hat\sigma_B)} \qquad \text{(seed 000, Eq. 9)}.

    The larger residual scale gives the smaller score. The formula is symmetric in the pair.

    References
    ----------
    .. [1] C. Dwork and A. Roth, "The algorithmic foundations of differential privacy",
       Found. Trends Theor. Comput. Sci. 9(3-4), 2014, Theorem A.1.

    Examples
    --------
    >>> import numpy as np
    >>> from idaudit import GaussMechAuditor
    >>> gen = np.random.default_rng(0)
    >>> a, b = gen.normal(0, 1, (50, 8)), gen.normal(0.5, 1, (50, 8))
    >>> aud = GaussMechAuditor().fit(a, b)
    >>> round(aud.epsilon_, 3), aud.status
    (7.256, 'diagnostic')
    """

    status = "diagnostic"
    symmetric = True
    row_order_invariant = True
    _prefix = "gaussmech"
    _parameter_constraints: ClassVar[dict[str, Constraint]] = {
        "delta": Interval(0.0, 1.0),
        "name": NAME,
    }

    def __init__(self, delta: float = 1e-5, *, name: str | None = None) -> None:
        self.delta = delta
        self.name = name

    def outputs(self) -> tuple[Output, ...]:
        """Per-pair outputs: ``epsilon``, ``mean_distance``, ``sigma``."""
        return (
            Output(
                "epsilon", "GaussMech epsilon (Gaussian-calibration diagnostic, Eq. 9)", self.status
            ),
            Output(
                "mean_distance", "L2 distance between the two mean embeddings", "sample_estimate"
            ),
            Output(
                "sigma", "larger per-coordinate RMS within-identity residual", "sample_estimate"
            ),
        )

    def _run(self, batch: Batch, seed: int | None) -> dict[str, Any]:
        # O(n d) per identity, computed once per audit_pairs call (plain numpy on the host
        # beats moving rows to a device); O(d) per pair
        todo = batch.uncached("gaussmech")
        stats = batch.per_identity("gaussmech", {k: _mean_and_rms(x) for k, x in todo.items()})
        dist = np.array([np.linalg.norm(ma - mb) for (ma, _), (mb, _) in stats])  # (pairs,)
        sigma = np.array([max(sa, sb) for (_, sa), (_, sb) in stats])  # (pairs,)
        return self._outputs(dist, sigma)

    def _tileable(self) -> bool:
        """Return True: the tiled engine can always run GaussMech."""
        return True

    def _run_tile(self, tile: Tile) -> dict[str, Any]:
        """Every pair of a tile from its identities' means and residual scales."""
        mean_a, rms_a = _block_stats(tile.a)
        mean_b, rms_b = _block_stats(tile.b)
        ia, jb = tile.ia.cpu().numpy(), tile.jb.cpu().numpy()
        # |m_a|^2 + |m_b|^2 - 2 m_a'm_b from one small product; where it cancels (means
        # closer than 1 % of their norms) the difference is taken row by row
        sq_a, sq_b = np.einsum("ij,ij->i", mean_a, mean_a), np.einsum("ij,ij->i", mean_b, mean_b)
        rows = np.unique(ia)
        with np.errstate(over="ignore", invalid="ignore"):  # overflow: recomputed below
            cross = mean_a[rows] @ mean_b.T  # (rows, k_b)
            d2 = sq_a[ia] + sq_b[jb] - 2.0 * cross[np.searchsorted(rows, ia), jb]
            close = ~(d2 > 1e-4 * (sq_a[ia] + sq_b[jb]))  # also where it overflowed (NaN)
            dist = np.sqrt(np.maximum(d2, 0.0))
            if close.any():  # an overflow here is a true +inf, as in _run
                dist[close] = np.linalg.norm(mean_a[ia[close]] - mean_b[jb[close]], axis=1)
        return self._outputs(dist, np.maximum(rms_a[ia], rms_b[jb]))

    def _outputs(
        self, dist: npt.NDArray[np.float64], sigma: npt.NDArray[np.float64]
    ) -> dict[str, Any]:
        """Eq. 9 from each pair's mean distance and larger residual scale."""
        scale = math.sqrt(2.0 * math.log(1.25 / float(self.delta)))
        with np.errstate(divide="ignore", invalid="ignore"):
            eps = dist * scale / sigma
        eps = np.where(sigma > 0, eps, np.where(dist > 0, np.inf, 0.0))
        return {"epsilon": eps, "mean_distance": dist, "sigma": sigma}


def _block_stats(side: Side) -> tuple[npt.NDArray[Any], ...]:
    """Mean rows (k, d) and residual scales (k,) of a tile side's identities (cached on it)."""
    if "gaussmech" not in side.cache:
        means, rms = zip(*(_mean_and_rms(x) for x in side.block.rows), strict=True)
        side.cache["gaussmech"] = (np.stack(means), np.stack(rms))
    return side.cache["gaussmech"]


def _mean_and_rms(x: npt.NDArray[np.float64]) -> tuple[npt.NDArray[np.float64], float]:
    """Mean row and RMS residual per coordinate, sqrt(sum ||x_i - mu||^2 / (n d))."""
    mu = x.mean(axis=0)  # (d,)
    resid = x - mu  # (n, d)
    return mu, math.sqrt(float(np.einsum("ij,ij->", resid, resid)) / x.size)
