"""MMD-TV: pure-DP ε from the unbiased MMD² via total variation (seed 000, Section 3.3)."""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import numpy.typing as npt
import torch
import xarray as xr

from idaudit import dp
from idaudit._device import resolve_device
from idaudit._validation import (
    Constraint,
    Device,
    IntegerOrOption,
    Interval,
    OptionOrPositive,
    Options,
    Positive,
    RandomState,
    RngLike,
    check_integer,
    check_pair,
    check_random_state,
    spawn_seeds,
)
from idaudit.audits._base import NAME, BaseAuditor, Output
from idaudit.audits._batch import Batch, PairError
from idaudit.audits._mmdcert import BOUNDS, OptionalLevel, mmd_lower_bound
from idaudit.audits._tiles import Tile, rbf_sums
from idaudit.ops import (
    median_heuristic,
    mmd2_from_kernel,
    mmd2_permutation_test,
    rbf_kernel,
    sq_distances_from_gram,
)

__all__ = ["MMDPermutationResult", "MMDTVAuditor"]


@dataclass(frozen=True)
class MMDPermutationResult:
    r"""Result of :meth:`MMDTVAuditor.permutation_test`.

    Attributes
    ----------
    statistic : float
        Observed unbiased MMD² (Eq. 7).
    pvalue : float
        Phipson–Smyth p-value :math:`(1 + b)/(1 + B)`.
    null_distribution : numpy.ndarray of float64, shape (n_permutations,)
        MMD² under each random relabelling.
    n_permutations : int
        ``B``.
    bandwidth : float
        RBF bandwidth σ used.
    """

    statistic: float
    pvalue: float
    null_distribution: npt.NDArray[np.float64]
    n_permutations: int
    bandwidth: float

    def __repr__(self) -> str:
        return (
            f"MMDPermutationResult(statistic={self.statistic:.6g}, pvalue={self.pvalue:.6g}, "
            f"n_permutations={self.n_permutations}, bandwidth={self.bandwidth:.6g})"
        )

    def to_xarray(self) -> xr.Dataset:
        """Return the result as a Dataset (dim ``permutation`` for the null distribution)."""
        return xr.Dataset(
            {
                "null_distribution": (
                    "permutation",
                    self.null_distribution,
                    {"long_name": "unbiased MMD^2 under random relabelling"},
                )
            },
            attrs={
                "statistic": self.statistic,
                "pvalue": self.pvalue,
                "n_permutations": self.n_permutations,
                "bandwidth": self.bandwidth,
            },
        )


_ZERO_BANDWIDTH = (
    "the median-heuristic bandwidth is 0 (more than half of the pooled rows are identical); "
    "pass a positive `bandwidth`."
)


def _estimates(mmd2: npt.NDArray[np.float64], sigma: npt.NDArray[np.float64]) -> dict[str, Any]:
    """Return MMD-TV's sample-estimate outputs from each pair's unbiased MMD² and bandwidth."""
    mmd = np.sqrt(np.maximum(mmd2, 0.0))  # clip before the root (Section 4.1)
    return {
        "epsilon": np.asarray(dp.epsilon_from_tv(mmd / 2.0), dtype=np.float64),
        "epsilon_hs": np.asarray(dp.epsilon_from_mmd_hockey_stick(mmd), dtype=np.float64),
        "mmd2": mmd2,
        "mmd": mmd,
        "bandwidth": sigma,
    }


def _with_failure_atom(x: npt.NDArray[np.float64], n_failed: int) -> npt.NDArray[np.float64]:
    """Rows ``[x, 0]`` and ``n_failed`` atoms ``[0, ..., 0, 1]``: every output, failures included.

    The atom is orthogonal to every successful embedding (at distance ``sqrt(|x|^2 + 1)``), so
    an RBF kernel tells failures apart from successes and the certified bound on the MMD of the
    outputs (and the TV bound it gives) holds for the mechanism as run, failures included.
    """
    out = np.zeros((x.shape[0] + n_failed, x.shape[1] + 1))
    out[: x.shape[0], :-1] = x
    out[x.shape[0] :, -1] = 1.0
    return out


class MMDTVAuditor(BaseAuditor):
    r"""Pure-DP ε lower-bound route from the unbiased MMD² and the total-variation inequality.

    **Status: sample estimate** (``epsilon_``, ``epsilon_hs_``). At the population level Eq. 14
    is a valid lower bound on the ε of any pure-DP mechanism; here the population MMD is
    replaced by the unbiased sample estimate without a one-sided confidence correction, so the
    number is a point estimate that can overshoot.

    **Status: certified lower bound** (``epsilon_lb_``, ``epsilon_hs_lb_``, with
    ``confidence_level`` set). A one-sided finite-sample lower confidence bound on the
    population MMD (``bound``), computed with a bandwidth that does not depend on the rows the
    bound uses, is substituted into the same two maps; the results are below the pair's pure ε
    with probability at least ``confidence_level`` (per pair; see ``n_simultaneous``). Under
    :func:`idaudit.audit_pairs`, the failed outputs an :class:`~idaudit.EmbeddingSet` keeps
    (``failures="keep"``) enter the certified bound as one more output value (an atom
    orthogonal to every embedding), so it holds for the mechanism as run, failures included;
    the sample estimates use the successful rows.

    Parameters
    ----------
    bandwidth : "median" or float, default "median"
        RBF bandwidth σ: the median Euclidean distance over the distinct pairs of each pair's
        pooled sample (the median heuristic, σ*), or a fixed positive value.
    bandwidth_scale : float, default 1.0
        Multiplies the bandwidth (the paper's sweep uses 0.5, 0.75, 1, 1.5, 2).
    n_permutations : int, default 0
        When positive, :meth:`fit` also runs a permutation test with this many permutations
        and sets ``pvalue_`` (the paper uses 10,000).
    rng : int, numpy.random.SeedSequence, numpy.random.Generator or None, default 0
        Seed of the permutations and of the half split of the certified bound.
    device : {"cpu", "cuda"}, default "cpu"
        Where :meth:`fit` runs the kernels.
    name : str, optional
        Variable prefix in :func:`idaudit.audit_pairs` results (default ``"mmdtv"``).
    confidence_level : float or None, default None
        When set (e.g. 0.95), also compute the certified bounds ``mmd_lb_``, ``epsilon_lb_``
        and ``epsilon_hs_lb_`` at this confidence level, in (0, 1).
    bound : {"betting", "bernstein", "mcdiarmid"}, default "betting"
        The finite-sample bound (docs/mmdtv.md, "Certified MMD-TV"). ``"betting"`` and
        ``"bernstein"``: each identity's rows are split in half at random (seeded by ``rng``);
        the bandwidth (median heuristic, or the fixed value) and the empirical witness
        function come from one half, and a betting (Waudby-Smith & Ramdas) or
        empirical-Bernstein (Maurer & Pontil) lower bound on the witness's mean difference from
        the other. ``"mcdiarmid"``: McDiarmid's inequality for the unbiased MMD² (Gretton et al.
        2012); the median-heuristic bandwidth comes from one half and the statistic from the
        other; with a fixed bandwidth every row is used.
    n_simultaneous : int or "pairs", default 1
        Number of bounds that must hold together: each bound is taken at level
        ``(1 - confidence_level) / n_simultaneous`` (union bound), so all of them, and their
        maximum, hold jointly with probability at least ``confidence_level``. ``"pairs"``: the
        number of pairs :func:`idaudit.audit_pairs` audits in the call (1 for :meth:`fit`). With
        the default 1 each pair's bound holds at ``confidence_level`` on its own, and a maximum or
        quantile over several pairs is labelled ``sample_estimate``
        (:func:`idaudit.results.reduce_status`).

    Attributes
    ----------
    epsilon\_ : float
        :math:`\ln\frac{1 + \widehat{\mathrm{MMD}}/2}{1 - \widehat{\mathrm{MMD}}/2}` (Eq. 12/14).
    epsilon_hs\_ : float
        The hockey-stick route of González et al., :math:`2\,\mathrm{artanh}
        (\widehat{\mathrm{MMD}}/\sqrt 2)`, tighter than ``epsilon_`` for this kernel (same
        status).
    mmd2\_ : float
        Unbiased :math:`\widehat{\mathrm{MMD}}^2_u` (Eq. 7); may be negative.
    mmd\_ : float
        :math:`\sqrt{\max(\widehat{\mathrm{MMD}}^2_u, 0)}`.
    bandwidth\_ : float
        σ used.
    pvalue\_ : float
        Permutation p-value (only when ``n_permutations > 0``).
    n_a\_, n_b\_ : int
        Rows of each identity.
    seed\_ : int
        The 63-bit seed drawn from ``rng`` for the permutations and the split.
    mmd_lb\_ : float
        Lower confidence bound on the population MMD (only with ``confidence_level``); status
        ``certified_lower_bound``.
    epsilon_lb\_ : float
        :math:`2\,\mathrm{artanh}(\mathrm{MMD}_{LB}/2)` (Eq. 14 at the bound); status
        ``certified_lower_bound``.
    epsilon_hs_lb\_ : float
        :math:`2\,\mathrm{artanh}(\mathrm{MMD}_{LB}/\sqrt 2)`; status
        ``certified_lower_bound``.
    bandwidth_lb\_ : float
        The σ of the certified bound (chosen on the selection half); ``nan`` if it was 0.

    Notes
    -----
    For a kernel with :math:`k(x, x) \le 1`, :math:`\mathrm{MMD} \le 2 d_{TV}` (Lemma 1), and
    a pure ε-DP mechanism has :math:`d_{TV} \le \tanh(\varepsilon/2)` (Eq. 4-5), so
    (Theorem 1, Eq. 14)

    .. math:: \varepsilon \ge \ln\frac{1 + \mathrm{MMD}/2}{1 - \mathrm{MMD}/2}.

    The kernel is :math:`k(u, v) = \exp(-\lVert u - v\rVert^2 / 2\sigma^2)`; negative
    :math:`\widehat{\mathrm{MMD}}^2_u` is clipped to 0 before the square root (Section 4.1).
    ``epsilon_`` is :func:`idaudit.dp.epsilon_from_tv` at ``mmd_ / 2``; ``epsilon_hs_`` is
    :func:`idaudit.dp.epsilon_from_mmd_hockey_stick` at δ = 0. The p-value counts permuted
    statistics at least the observed one (within 1e-12) and is :math:`(1 + b)/(1 + B)`
    (Phipson & Smyth); see :func:`idaudit.ops.mmd2_permutation_test`.

    References
    ----------
    .. [1] A. Gretton et al., "A kernel two-sample test", JMLR 13, 2012.
    .. [2] B. K. Sriperumbudur et al., "On integral probability metrics, φ-divergences and
       binary classification", 2009.
    .. [3] B. Phipson and G. K. Smyth, "Permutation p-values should never be zero", 2010.

    Examples
    --------
    >>> import numpy as np
    >>> from idaudit import MMDTVAuditor
    >>> gen = np.random.default_rng(0)
    >>> a, b = gen.normal(0, 1, (40, 8)), gen.normal(0.5, 1, (40, 8))
    >>> aud = MMDTVAuditor(n_permutations=999, rng=0).fit(a, b)
    >>> round(aud.epsilon_, 4), round(aud.epsilon_hs_, 4), aud.pvalue_, aud.status
    (0.2692, 0.3831, 0.001, 'sample_estimate')
    >>> a, b = gen.normal(0, 1, (300, 2)), gen.normal(2, 1, (300, 2))
    >>> cert = MMDTVAuditor(confidence_level=0.95, rng=0).fit(a, b)
    >>> round(cert.mmd_lb_, 3) < round(cert.mmd_, 3), round(cert.epsilon_lb_, 3)
    (True, 0.688)
    """

    status = "sample_estimate"
    symmetric = True
    row_order_invariant = True
    _prefix = "mmdtv"
    _parameter_constraints: ClassVar[dict[str, Constraint]] = {
        "bandwidth": OptionOrPositive(("median",)),
        "bandwidth_scale": Positive(),
        "n_permutations": Interval(0, integer=True),
        "rng": RandomState(),
        "device": Device(),
        "name": NAME,
        "confidence_level": OptionalLevel(),
        "bound": Options(BOUNDS),
        "n_simultaneous": IntegerOrOption(("pairs",), minimum=1),
    }
    _random = True

    def __init__(
        self,
        bandwidth: str | float = "median",
        bandwidth_scale: float = 1.0,
        n_permutations: int = 0,
        *,
        rng: RngLike = 0,
        device: str = "cpu",
        name: str | None = None,
        confidence_level: float | None = None,
        bound: str = "betting",
        n_simultaneous: int | str = 1,
    ) -> None:
        self.bandwidth = bandwidth
        self.bandwidth_scale = bandwidth_scale
        self.n_permutations = n_permutations
        self.rng = rng
        self.device = device
        self.name = name
        self.confidence_level = confidence_level
        self.bound = bound
        self.n_simultaneous = n_simultaneous

    def min_rows(self) -> int:
        """Fewest rows per identity: 2, or 4 with a confidence level (2 per half of the split)."""
        return 2 if self.confidence_level is None else 4

    def _n_simultaneous(self) -> int:
        """Return the number of jointly valid bounds (``"pairs"`` unresolved: one pair)."""
        return 1 if self.n_simultaneous == "pairs" else int(self.n_simultaneous)

    def _for_pairs(self, n_pairs: int) -> MMDTVAuditor:
        """Resolve ``n_simultaneous="pairs"`` to the number of pairs audited together."""
        if self.n_simultaneous != "pairs":
            return self
        # a shallow copy: a Generator ``rng`` stays the caller's object, so it advances
        resolved = copy.copy(self)
        resolved.n_simultaneous = int(n_pairs)
        return resolved

    def outputs(self) -> tuple[Output, ...]:
        """Return the per-pair outputs (``pvalue`` only with permutations)."""
        out: tuple[Output, ...] = (
            Output("epsilon", "MMD-TV epsilon, ln((1 + MMD/2)/(1 - MMD/2)) (Eq. 14)", self.status),
            Output(
                "epsilon_hs",
                "MMD hockey-stick epsilon, 2 artanh(MMD/sqrt(2)) (Gonzalez et al.)",
                self.status,
            ),
            Output("mmd2", "unbiased MMD^2 with RBF kernel (Eq. 7)", "sample_estimate"),
            Output("mmd", "sqrt(max(MMD^2, 0))", "sample_estimate"),
            Output("bandwidth", "RBF bandwidth sigma", "sample_estimate"),
        )
        confidence_level = self.confidence_level
        if confidence_level is not None:
            joint = self._n_simultaneous()
            level = f"confidence {confidence_level:g}"
            if joint > 1:
                level += f" jointly over {joint} bounds"
            out += (
                Output(
                    "mmd_lb",
                    f"lower confidence bound on the population MMD ({self.bound}, {level})",
                    "certified_lower_bound",
                    n_simultaneous=joint,
                ),
                Output(
                    "epsilon_lb",
                    f"certified MMD-TV epsilon, 2 artanh(MMD_LB / 2) ({level})",
                    "certified_lower_bound",
                    n_simultaneous=joint,
                ),
                Output(
                    "epsilon_hs_lb",
                    f"certified MMD hockey-stick epsilon, 2 artanh(MMD_LB / sqrt(2)) ({level})",
                    "certified_lower_bound",
                    n_simultaneous=joint,
                ),
                Output(
                    "bandwidth_lb",
                    "RBF bandwidth of the certified bound (chosen on the selection half)",
                    "sample_estimate",
                ),
            )
        if int(self.n_permutations) > 0:
            out += (
                Output(
                    "pvalue",
                    f"permutation p-value of MMD^2, (1 + b)/(1 + B), B={int(self.n_permutations)}",
                    "sample_estimate",
                ),
            )
        return out

    def _run(self, batch: Batch, seed: int | None) -> dict[str, Any]:
        kernel, sigma = self._kernel(batch)
        mask_a, mask_b = batch.masks()
        mmd2 = mmd2_from_kernel(kernel, mask_a, mask_b).cpu().numpy()  # (pairs,)
        out = _estimates(mmd2, sigma.cpu().numpy())
        if int(self.n_permutations) > 0:
            assert seed is not None
            pvalue, _, _ = mmd2_permutation_test(
                kernel, batch.n_a, batch.n_b, seed, int(self.n_permutations)
            )
            out["pvalue"] = pvalue.cpu().numpy()
        if self.confidence_level is not None:
            assert seed is not None
            out.update(self._certified(batch, seed))
        return out

    def _tileable(self) -> bool:
        """Whether the tiled engine can run this auditor: no certified bound, no permutations."""
        return self.confidence_level is None and int(self.n_permutations) == 0

    def _run_tile(self, tile: Tile) -> dict[str, Any]:
        """Return the sample estimates of every pair of a tile, from its pooled distances."""
        if self.bandwidth == "median":
            sigma = tile.median_distance() * float(self.bandwidth_scale)
        else:
            value = float(self.bandwidth) * float(self.bandwidth_scale)
            sigma = torch.full((tile.n_pairs,), value, dtype=torch.float64, device=tile.device)
        if bool((sigma <= 0).any()):
            raise PairError(_ZERO_BANDWIDTH, pair_index=int((sigma <= 0).nonzero()[0, 0]))
        s_aa, s_bb, s_ab = rbf_sums(tile, sigma)
        n_a, n_b = tile.n_a, tile.n_b
        mmd2 = s_aa / (n_a * (n_a - 1)) + s_bb / (n_b * (n_b - 1)) - 2.0 * s_ab / (n_a * n_b)
        return _estimates(mmd2.cpu().numpy(), sigma.cpu().numpy())

    def _certified(self, batch: Batch, seed: int) -> dict[str, Any]:
        """Compute the certified bounds of every pair (one seeded split each, see _mmdcert)."""
        level = self.confidence_level
        assert level is not None  # only called with a confidence level
        alpha = (1.0 - level) / self._n_simultaneous()
        fixed = None if self.bandwidth == "median" else float(self.bandwidth)
        mmd_lb, sigma = np.empty(batch.n_pairs), np.empty(batch.n_pairs)
        for p, ((a, b), (fail_a, fail_b)) in enumerate(
            zip(batch.samples, batch.failures, strict=True)
        ):
            if fail_a or fail_b:  # failed outputs are an atom of the output space
                a, b = _with_failure_atom(a, fail_a), _with_failure_atom(b, fail_b)
            mmd_lb[p], sigma[p] = mmd_lower_bound(
                a,
                b,
                alpha=alpha,
                bound=self.bound,  # type: ignore[arg-type]
                bandwidth=fixed,
                bandwidth_scale=float(self.bandwidth_scale),
                seed=seed,
            )
        return {
            "mmd_lb": mmd_lb,
            "epsilon_lb": np.asarray(dp.epsilon_from_tv(mmd_lb / 2.0), dtype=np.float64),
            "epsilon_hs_lb": np.asarray(dp.epsilon_from_mmd_hockey_stick(mmd_lb), dtype=np.float64),
            "bandwidth_lb": sigma,
        }

    def _kernel(self, batch: Batch) -> tuple[torch.Tensor, torch.Tensor]:
        """RBF kernel matrices of the pooled samples and their bandwidths (cached parts)."""
        if "sq_dists" not in batch.cache:  # (pairs, n_max, n_max)
            batch.cache["sq_dists"] = sq_distances_from_gram(batch.gram())
        d2 = batch.cache["sq_dists"]
        if self.bandwidth == "median":
            if "median" not in batch.cache:
                n = [a + b for a, b in zip(batch.n_a, batch.n_b, strict=True)]
                batch.cache["median"] = median_heuristic(d2, n)  # (pairs,)
            sigma = batch.cache["median"] * float(self.bandwidth_scale)
        else:
            sigma = torch.full(
                (batch.n_pairs,),
                float(self.bandwidth) * float(self.bandwidth_scale),
                dtype=torch.float64,
                device=batch.device,
            )
        if bool((sigma <= 0).any()):
            raise PairError(_ZERO_BANDWIDTH, pair_index=int((sigma <= 0).nonzero()[0, 0]))
        return rbf_kernel(d2, sigma), sigma

    def permutation_test(
        self,
        emb_a: npt.ArrayLike,
        emb_b: npt.ArrayLike,
    ) -> MMDPermutationResult:
        r"""Permutation test of :math:`H_0: P_A = P_B` with the unbiased MMD² statistic.

        Every setting comes from this auditor: its kernel and bandwidth, ``n_permutations``
        (which must be at least 1 here) and ``rng``. The p-value equals ``pvalue_`` of
        ``fit`` on the same data.

        Parameters
        ----------
        emb_a : array_like, shape (n_a, d)
        emb_b : array_like, shape (n_b, d)

        Returns
        -------
        MMDPermutationResult

        Notes
        -----
        :math:`p = (1 + b)/(1 + B)` with :math:`b` the number of relabellings whose MMD² is
        at least the observed one; never 0, and valid (super-uniform under :math:`H_0`) for
        randomly drawn permutations (Phipson & Smyth 2010). All relabellings are evaluated
        as matrix products (see :func:`idaudit.ops.mmd2_permutation_test`).

        Examples
        --------
        >>> import numpy as np
        >>> from idaudit import MMDTVAuditor
        >>> gen = np.random.default_rng(1)
        >>> aud = MMDTVAuditor(n_permutations=499, rng=0)
        >>> res = aud.permutation_test(gen.normal(size=(30, 5)), gen.normal(size=(30, 5)))
        >>> res.null_distribution.shape, 0 < res.pvalue <= 1
        ((499,), True)
        """
        self._check_params()
        n_perm = check_integer(self.n_permutations, "n_permutations", minimum=1)
        a, b = check_pair(emb_a, emb_b)
        seed = spawn_seeds(check_random_state(self.rng), 1)[0]
        batch = Batch([(a, b)], resolve_device(self.device))
        kernel, sigma = self._kernel(batch)
        pb = batch.packed
        pvalue, observed, null = mmd2_permutation_test(
            kernel, pb.n_a, pb.n_b, seed, n_perm, return_null=True
        )
        assert null is not None
        return MMDPermutationResult(
            statistic=float(observed[0]),
            pvalue=float(pvalue[0]),
            null_distribution=null[0].cpu().numpy(),
            n_permutations=n_perm,
            bandwidth=float(sigma[0]),
        )
