"""Certified trade-off points and ε(δ) curves from the scores of any two-class attack."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

import numpy as np
import numpy.typing as npt
import xarray as xr

from idaudit._results import Status, provenance, variable
from idaudit._validation import RngLike, check_in_range, check_option, check_random_state
from idaudit.dp import (
    band_local_level,
    clopper_pearson_table,
    clopper_pearson_upper,
    epsilon_from_tradeoff,
    gdp_epsilon,
    gdp_mu_lower_bound,
    score_error_counts,
    simultaneous_rate_bounds,
)
from idaudit.exceptions import InvalidInputError

__all__ = ["ScoreCertificate", "certify_scores"]

Strategy = Literal["given", "split", "bonferroni", "band", "multisplit"]
STRATEGIES: tuple[str, ...] = ("given", "split", "bonferroni", "band", "multisplit")
#: Runners of the strategies that live in other modules, registered there on import
#: (``"multisplit"``: :mod:`idaudit.certify._multisplit`, which builds on this module).
STRATEGY_RUNNERS: dict[str, Callable[..., ScoreCertificate]] = {}

#: The model the GDP-route ε(δ) rests on (an attribute of every such number).
GDP_ASSUMPTION = (
    "the mechanism is exactly mu-GDP (its trade-off curve is Gaussian) with mu = mu_lb; "
    "a model-based value, not a certified bound"
)

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


@dataclass(frozen=True, eq=False, repr=False)
class ScoreCertificate:
    """Certified trade-off points of threshold tests on two score samples.

    Made by :func:`certify_scores`. All trade-off points hold *jointly* with probability at
    least ``1 - alpha``, so every number derived from them (``epsilon_lb_``, the whole
    :meth:`epsilon_curve`, ``mu_lb_``) is certified at that level simultaneously.

    Attributes
    ----------
    strategy : str
        ``"given"``, ``"split"``, ``"bonferroni"`` or ``"band"``.
    alpha, delta : float
        The simultaneous error level and the δ of ``epsilon_lb_``.
    one_sided : bool
        Whether only the form ln((1 − δ − FNR)/FPR) was used.
    n_a, n_b : int
        Scores given per class; ``n_eval_a``, ``n_eval_b`` of them certified on (fewer
        under ``"split"``).
    thresholds : numpy.ndarray, shape (n_points,)
        The tests "say B when score ≥ t".
    fp, fn : numpy.ndarray of int, shape (n_points,)
        Their error counts on the evaluation scores.
    fpr_upper, fnr_upper : numpy.ndarray, shape (n_points,)
        Certified upper bounds on the tests' true error rates (status
        ``certified_upper_bound``, jointly valid).
    level_a, level_b : float
        The Clopper–Pearson level of each FPR / FNR bound.
    epsilon_lb_ : float
        Certified lower bound on ε at ``delta`` (status ``certified_lower_bound``).
    mu_lb_ : float
        Certified lower bound on the smallest μ for which the mechanism is μ-GDP (status
        ``certified_lower_bound``).
    """

    strategy: str
    alpha: float
    delta: float
    one_sided: bool
    n_a: int
    n_b: int
    n_eval_a: int
    n_eval_b: int
    thresholds: FloatArray
    fp: IntArray
    fn: IntArray
    fpr_upper: FloatArray
    fnr_upper: FloatArray
    level_a: float
    level_b: float
    epsilon_lb_: float
    mu_lb_: float
    seed: int | None = None

    #: The formal status of ``epsilon_lb_``, of :meth:`epsilon_curve` and of ``mu_lb_``.
    status: ClassVar[Status] = "certified_lower_bound"
    #: Each reported quantity's status.
    statuses: ClassVar[dict[str, Status]] = {
        "epsilon_lb": "certified_lower_bound",
        "epsilon_lb_curve": "certified_lower_bound",
        "mu_lb": "certified_lower_bound",
        "fpr_upper": "certified_upper_bound",
        "fnr_upper": "certified_upper_bound",
        "epsilon_gdp": "sample_estimate",
        "epsilon_gdp_curve": "sample_estimate",
    }

    @property
    def epsilon_gdp_(self) -> float:
        """ε at ``delta`` of a ``mu_lb_``-GDP mechanism: status ``sample_estimate`` (a model)."""
        return gdp_epsilon_at(self.delta, self.mu_lb_)

    def epsilon_curve(self, deltas: npt.ArrayLike) -> xr.DataArray:
        """Certified ε lower bound at every δ in ``deltas``, all holding at once.

        Parameters
        ----------
        deltas : array_like, shape (n_deltas,)
            δ values in [0, 1).

        Returns
        -------
        xarray.DataArray
            Dim ``delta``; attrs ``long_name``, ``status = "certified_lower_bound"``,
            ``alpha``, ``strategy`` and ``n_simultaneous`` (the trade-off points behind it).
        """
        d = check_deltas(deltas)
        eps = epsilon_from_tradeoff(self.fpr_upper, self.fnr_upper, d, one_sided=self.one_sided)
        return self._lower_bound_curve(
            d,
            eps,
            "certified epsilon lower bound at each delta (simultaneous)",
            n_simultaneous=int(self.thresholds.size),
        )

    def _lower_bound_curve(
        self, d: FloatArray, eps: Any, long_name: str, **attrs: Any
    ) -> xr.DataArray:
        """``eps`` along ``delta`` as the certified ``epsilon_lb_curve``, with ``attrs``."""
        return delta_curve(
            d,
            eps,
            "epsilon_lb_curve",
            long_name=long_name,
            status="certified_lower_bound",
            units="nats",
            alpha=self.alpha,
            strategy=self.strategy,
            **attrs,
        )

    def gdp_epsilon_curve(self, deltas: npt.ArrayLike) -> xr.DataArray:
        """ε(δ) of a ``mu_lb_``-GDP mechanism: model-based, status ``sample_estimate``.

        Parameters
        ----------
        deltas : array_like, shape (n_deltas,)
            δ values in [0, 1); δ = 0 gives ``inf`` when ``mu_lb_ > 0``.

        Returns
        -------
        xarray.DataArray
            Dim ``delta``; attrs ``status = "sample_estimate"`` and ``assumption`` (the μ-GDP
            model it rests on), never ``certified_lower_bound``.
        """
        d = check_deltas(deltas)
        eps = np.where(d > 0, gdp_epsilon(np.where(d > 0, d, 0.5), self.mu_lb_), np.nan)
        eps = np.where(d > 0, eps, gdp_epsilon_at(0.0, self.mu_lb_))
        return delta_curve(
            d,
            eps,
            "epsilon_gdp_curve",
            long_name="epsilon of the mu_lb-GDP mechanism at each delta",
            status="sample_estimate",
            units="nats",
            assumption=GDP_ASSUMPTION,
            mu_lb=self.mu_lb_,
        )

    def to_xarray(self) -> xr.Dataset:
        """Return the certificate as a Dataset: points along ``point``, scalars, attrs.

        Returns
        -------
        xarray.Dataset
            Variables ``threshold`` (coordinate), ``fp``, ``fn`` (``descriptive``),
            ``fpr_upper``, ``fnr_upper`` (``certified_upper_bound``), ``epsilon_lb``,
            ``mu_lb`` (``certified_lower_bound``) and ``epsilon_gdp`` (``sample_estimate``,
            with its ``assumption``); attrs: provenance and the settings.
        """
        joint = {"n_simultaneous": int(self.thresholds.size)}

        def var(dims: Any, values: Any, name: str, long_name: str, **attrs: Any) -> xr.Variable:
            return variable(
                dims,
                values,
                long_name=long_name,
                status=self.statuses.get(name, "descriptive"),
                **attrs,
            )

        data = {
            "fp": var("point", self.fp, "fp", "false positives on the evaluation scores"),
            "fn": var("point", self.fn, "fn", "false negatives on the evaluation scores"),
            "fpr_upper": var("point", self.fpr_upper, "fpr_upper", "FPR upper bound", **joint),
            "fnr_upper": var("point", self.fnr_upper, "fnr_upper", "FNR upper bound", **joint),
            "epsilon_lb": var(
                (),
                self.epsilon_lb_,
                "epsilon_lb",
                "certified epsilon lower bound at delta",
                units="nats",
                **joint,
            ),
            "mu_lb": var((), self.mu_lb_, "mu_lb", "certified lower bound on the GDP mu", **joint),
            "epsilon_gdp": var(
                (),
                self.epsilon_gdp_,
                "epsilon_gdp",
                "epsilon at delta of the mu_lb-GDP mechanism",
                units="nats",
                assumption=GDP_ASSUMPTION,
            ),
        }
        settings = {
            "strategy": self.strategy,
            "alpha": self.alpha,
            "delta": self.delta,
            "one_sided": self.one_sided,
            "n_a": self.n_a,
            "n_b": self.n_b,
            "n_eval_a": self.n_eval_a,
            "n_eval_b": self.n_eval_b,
            "level_a": self.level_a,
            "level_b": self.level_b,
        }
        attrs = provenance(title="certify_scores", seeds={"rng": self.seed}, settings=settings)
        return xr.Dataset(data, coords={"threshold": ("point", self.thresholds)}, attrs=attrs)

    def __repr__(self) -> str:
        return (
            f"ScoreCertificate(strategy={self.strategy!r}, n_a={self.n_a}, n_b={self.n_b}, "
            f"alpha={self.alpha:g}, delta={self.delta:g}, epsilon_lb_={self.epsilon_lb_:.4g}, "
            f"mu_lb_={self.mu_lb_:.4g})  # status: {self.status}"
        )


def certify_scores(
    scores_a: npt.ArrayLike,
    scores_b: npt.ArrayLike,
    *,
    alpha: float = 0.05,
    delta: float = 0.0,
    thresholds: Strategy = "bonferroni",
    threshold: float | npt.ArrayLike | None = None,
    split_fraction: float = 0.5,
    one_sided: bool = False,
    rng: RngLike = None,
    n_splits: int | None = None,
) -> ScoreCertificate:
    r"""Certify ε(δ) and the trade-off curve from the scores of a two-class attack.

    Parameters
    ----------
    scores_a, scores_b : array_like, shape (n_a,), (n_b,)
        Attack scores of iid outputs of the mechanism on input A and on its neighbour B;
        higher scores mean "class B". Negate them if B scores lower. No NaN.
    alpha : float, default 0.05
        Simultaneous error level in (0, 1): every trade-off point, and so every ε(δ) and μ
        derived from them, holds at once with probability at least ``1 - alpha``.
    delta : float, default 0.0
        The δ of ``epsilon_lb_``, in [0, 1).
    thresholds : {"given", "split", "bonferroni", "band", "multisplit"}, default "bonferroni"
        Which tests are certified and how α is shared (docs/certify.md):

        * ``"given"``: the ``threshold`` value(s), fixed before seeing the scores;
          Clopper–Pearson (CP) at α / (2k) per rate for k thresholds.
        * ``"split"``: a seeded random ``split_fraction`` of each class chooses the
          threshold with the largest CP ε (α/2 per rate); the rest certify it with CP at
          α/2 per rate.
        * ``"bonferroni"``: every distinct score; CP at α/(2 n_a) for each FPR and
          α/(2 n_b) for each FNR (a union over the counts the tests can have).
        * ``"band"``: every distinct score; the exact equal-local-level band on each
          class's tail rates, each at simultaneous level α/2
          (:func:`~idaudit.dp.simultaneous_rate_bounds`).
        * ``"multisplit"``: ``"split"`` over ``n_splits`` seeded partitions at α/2 each,
          reporting medians (Meinshausen et al. 2009; jax_privacy's ``MultiSplit``): a
          :class:`~idaudit.certify.MultiSplitCertificate`, whose values each hold at
          1 − α but not jointly.
    threshold : float or array_like, optional
        The threshold(s) for ``"given"`` (required there, refused elsewhere).
    split_fraction : float, default 0.5
        Share of each class used to choose the threshold under ``"split"``, in (0, 1).
    one_sided : bool, default False
        Use only ln((1 − δ − FNR)/FPR); the default also uses ln((1 − δ − FPR)/FNR), which
        the same bounds pay for (no α is spent on it).
    rng : int, numpy.random.SeedSequence, numpy.random.Generator or None
        Randomness of the ``"split"`` (and ``"multisplit"``) partitions.
    n_splits : int, optional
        Partitions of ``"multisplit"``, >= 1 (100 when not given); refused elsewhere.

    Returns
    -------
    ScoreCertificate

    Raises
    ------
    InvalidInputError
        On empty or non-1-D scores, NaN, ``alpha`` outside (0, 1), ``delta`` outside
        [0, 1), an unknown strategy, a missing or unexpected ``threshold``, an unexpected
        ``n_splits``, or too few scores to split.

    Notes
    -----
    A test "say B when score ≥ t" has FPR(t) = P_A(S ≥ t) and FNR(t) = P_B(S < t). For an
    (ε, δ)-DP mechanism every test satisfies FPR + e^ε FNR ≥ 1 − δ and the same with the
    rates swapped (Kairouz–Oh–Viswanath); upper bounds on the rates give a lower bound on
    ε for every δ (:func:`~idaudit.dp.epsilon_from_tradeoff`). Only the orientation
    "B when score ≥ t" is tested; the reverse orientation would need *lower* bounds on the
    rates, i.e. its own share of α, so it is left to the user (negate the scores, and
    halve α across the two runs when the direction is not known in advance).

    Examples
    --------
    >>> import numpy as np
    >>> from idaudit.certify import certify_scores
    >>> gen = np.random.default_rng(0)
    >>> a, b = gen.normal(0, 1, 1000), gen.normal(3, 1, 1000)
    >>> cert = certify_scores(a, b, alpha=0.05, thresholds="band")
    >>> 3.0 < cert.epsilon_lb_ < 5.0, cert.status  # mu = 3 GDP: true epsilon(0) is inf
    (True, 'certified_lower_bound')
    """
    a, b = _check_inputs(scores_a, scores_b, alpha, delta, thresholds, threshold)
    if thresholds != "multisplit" and n_splits is not None:
        raise InvalidInputError(
            f'`n_splits` is only used with thresholds="multisplit"; got thresholds={thresholds!r}.'
        )
    if not isinstance(one_sided, bool | np.bool_):
        raise InvalidInputError(f"`one_sided` must be True or False; got {one_sided!r}.")
    one_sided = bool(one_sided)
    delta = float(delta) + 0.0  # -0.0 becomes 0.0
    if thresholds in STRATEGY_RUNNERS:  # strategies defined in their own modules
        return STRATEGY_RUNNERS[thresholds](
            a,
            b,
            alpha=alpha,
            delta=delta,
            split_fraction=split_fraction,
            one_sided=one_sided,
            n_splits=100 if n_splits is None else n_splits,
            rng=rng,
        )
    if thresholds == "split":
        return _certify_split(a, b, alpha, delta, split_fraction, one_sided, rng, seed_of(rng))
    if thresholds == "given":
        t = np.atleast_1d(np.asarray(threshold, dtype=np.float64)).ravel()
        level = alpha / (2 * t.size)
        return _finish(a, b, t, "given", alpha, delta, one_sided, level, level, a.size, b.size)
    t, fp, fn = score_error_counts(a, b)
    method = "band" if thresholds == "band" else "bonferroni"
    band_a = simultaneous_rate_bounds(a.size, alpha / 2, method=method)  # (n_a + 1,)
    band_b = simultaneous_rate_bounds(b.size, alpha / 2, method=method)  # (n_b + 1,)
    if method == "band":
        level_a, level_b = band_local_level(a.size, alpha / 2), band_local_level(b.size, alpha / 2)
    else:
        level_a, level_b = alpha / (2 * a.size), alpha / (2 * b.size)
    return _build(
        thresholds,
        alpha,
        delta,
        one_sided,
        (a.size, b.size, a.size, b.size),
        t,
        fp,
        fn,
        band_a[fp],
        band_b[fn],
        level_a,
        level_b,
        None,
    )


def _finish(
    a: FloatArray,
    b: FloatArray,
    t: FloatArray,
    strategy: str,
    alpha: float,
    delta: float,
    one_sided: bool,
    level_a: float,
    level_b: float,
    n_a: int,
    n_b: int,
    seed: int | None = None,
) -> ScoreCertificate:
    """Clopper–Pearson bounds at the fixed thresholds ``t`` on the evaluation scores."""
    t, fp, fn = score_error_counts(a, b, t)
    fpr_u = np.asarray(clopper_pearson_upper(fp, a.size, level_a), dtype=np.float64).ravel()
    fnr_u = np.asarray(clopper_pearson_upper(fn, b.size, level_b), dtype=np.float64).ravel()
    return _build(
        strategy,
        alpha,
        delta,
        one_sided,
        (n_a, n_b, a.size, b.size),
        t,
        fp,
        fn,
        fpr_u,
        fnr_u,
        level_a,
        level_b,
        seed,
    )


def _build(
    strategy: str,
    alpha: float,
    delta: float,
    one_sided: bool,
    sizes: tuple[int, ...],
    t: FloatArray,
    fp: IntArray,
    fn: IntArray,
    fpr_u: FloatArray,
    fnr_u: FloatArray,
    level_a: float,
    level_b: float,
    seed: int | None,
) -> ScoreCertificate:
    eps = float(epsilon_from_tradeoff(fpr_u, fnr_u, delta, one_sided=one_sided))
    return ScoreCertificate(
        strategy=strategy,
        alpha=alpha,
        delta=delta,
        one_sided=one_sided,
        n_a=sizes[0],
        n_b=sizes[1],
        n_eval_a=sizes[2],
        n_eval_b=sizes[3],
        thresholds=t,
        fp=fp,
        fn=fn,
        fpr_upper=fpr_u,
        fnr_upper=fnr_u,
        level_a=level_a,
        level_b=level_b,
        epsilon_lb_=eps,
        mu_lb_=gdp_mu_lower_bound(fpr_u, fnr_u),
        seed=seed,
    )


def _certify_split(
    a: FloatArray,
    b: FloatArray,
    alpha: float,
    delta: float,
    fraction: float,
    one_sided: bool,
    rng: RngLike,
    seed: int | None,
) -> ScoreCertificate:
    """Choose the threshold on one part of each class, certify it on the other."""
    frac = check_in_range(fraction, "split_fraction", 0.0, 1.0)
    gen = check_random_state(rng)
    parts = []
    for scores in (b, a):  # class B is permuted first (jax_privacy's order)
        perm = gen.permutation(scores.size)
        cut = int(scores.size * frac)
        if cut < 1 or cut >= scores.size:
            raise InvalidInputError(
                f"`split_fraction` = {frac:g} leaves an empty part of {scores.size} scores; "
                "each class needs a score on both sides of the split."
            )
        parts.append((scores[perm[:cut]], scores[perm[cut:]]))
    (b_sel, b_eval), (a_sel, a_eval) = parts
    t, fp, fn = score_error_counts(a_sel, b_sel)
    # the kept tables: every split of one sample has the same sizes and level
    fpr_u = clopper_pearson_table(a_sel.size, alpha / 2)[fp]
    fnr_u = clopper_pearson_table(b_sel.size, alpha / 2)[fn]
    per_point = _per_point_epsilon(fpr_u, fnr_u, delta, one_sided)
    best = t[[int(np.argmax(per_point))]]  # the first of the largest, thresholds ascending
    return _finish(
        a_eval,
        b_eval,
        best,
        "split",
        alpha,
        delta,
        one_sided,
        alpha / 2,
        alpha / 2,
        a.size,
        b.size,
        seed,
    )


def _per_point_epsilon(x: FloatArray, y: FloatArray, delta: float, one_sided: bool) -> FloatArray:
    """Return the ε each (FPR, FNR) bound pair gives on its own (``x > 0``: CP bounds)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        out = np.where(1.0 - delta - y > 0, np.log(1.0 - delta - y) - np.log(x), 0.0)
        if not one_sided:
            swapped = np.where(1.0 - delta - x > 0, np.log(1.0 - delta - x) - np.log(y), 0.0)
            out = np.maximum(out, swapped)
    return np.asarray(np.maximum(out, 0.0), dtype=np.float64)


def gdp_epsilon_at(delta: float, mu: float) -> float:
    """ε at ``delta`` of a ``mu``-GDP mechanism (δ = 0: ``inf`` when μ > 0; μ ≤ 0: 0)."""
    if mu <= 0:
        return 0.0
    return float(gdp_epsilon(delta, mu)) if delta > 0 else np.inf


def seed_of(rng: RngLike) -> int | None:
    """Return the seed a certificate records: ``rng`` if an integer (not a bool), else None."""
    return int(rng) if isinstance(rng, int | np.integer) and not isinstance(rng, bool) else None


def delta_curve(d: FloatArray, values: Any, name: str, **attrs: Any) -> xr.DataArray:
    """``values`` along the ``delta`` coordinate ``d``, as the DataArray ``name`` with ``attrs``."""
    var = variable("delta", np.asarray(values, dtype=np.float64), **attrs)
    return xr.DataArray(var, coords={"delta": d}, name=name)


def _numbers(x: Any, name: str) -> FloatArray:
    """``x`` as a float64 array, refusing strings and complex numbers with a clear error."""
    raw = np.asarray(x)
    if raw.dtype.kind not in "biuf":
        raise InvalidInputError(f"`{name}` must hold real numbers; got dtype {raw.dtype}.")
    return np.asarray(raw, dtype=np.float64)


def check_deltas(deltas: npt.ArrayLike) -> FloatArray:
    """``deltas`` as a non-empty 1-D float64 array in [0, 1), or a clear error."""
    d = np.atleast_1d(_numbers(deltas, "deltas"))
    if d.ndim != 1 or d.size == 0:
        raise InvalidInputError(f"`deltas` must be a non-empty 1-D array; got shape {d.shape}.")
    if np.isnan(d).any() or (d < 0).any() or (d >= 1).any():
        bad = d[np.isnan(d) | (d < 0) | (d >= 1)][0]
        raise InvalidInputError(f"`deltas` must be in [0, 1); got {float(bad)!r}.")
    return d


def check_scores(x: Any, name: str, *, empty: bool = False) -> FloatArray:
    """``x`` as 1-D float64 scores without NaN (``empty``: none at all allowed), or an error."""
    s = _numbers(x, name)
    if s.ndim != 1 or (s.size == 0 and not empty):
        shape = "a 1-D array" if empty else "a non-empty 1-D array"
        raise InvalidInputError(f"`{name}` must be {shape} of scores; got shape {s.shape}.")
    if np.isnan(s).any():
        raise InvalidInputError(f"`{name}` must not contain NaN; got {int(np.isnan(s).sum())}.")
    return s


def check_strategy(
    alpha: Any, delta: Any, strategy: Any, threshold: Any, strategies: tuple[str, ...]
) -> None:
    """Check the levels, the threshold strategy, and that ``threshold`` comes with "given"."""
    check_in_range(alpha, "alpha", 0.0, 1.0)
    check_in_range(delta, "delta", 0.0, 1.0, closed="left")
    check_option(strategy, "thresholds", strategies)
    if strategy == "given" and threshold is None:
        raise InvalidInputError('`threshold` is required when thresholds="given"; got None.')
    if strategy != "given" and threshold is not None:
        raise InvalidInputError(
            f'`threshold` is only used with thresholds="given"; got thresholds={strategy!r}.'
        )


def _check_inputs(
    scores_a: npt.ArrayLike,
    scores_b: npt.ArrayLike,
    alpha: Any,
    delta: Any,
    strategy: Any,
    threshold: Any,
) -> tuple[FloatArray, FloatArray]:
    check_strategy(alpha, delta, strategy, threshold, STRATEGIES)
    if threshold is not None:
        t = _numbers(threshold, "threshold")
        if t.ndim > 1:
            raise InvalidInputError(f"`threshold` must be a number or 1-D; got shape {t.shape}.")
        if t.size == 0 or np.isnan(t).any():
            raise InvalidInputError(f"`threshold` must be numbers, not NaN; got {threshold!r}.")
    a, b = _numbers(scores_a, "scores_a"), _numbers(scores_b, "scores_b")  # both real, first
    return check_scores(a, "scores_a"), check_scores(b, "scores_b")
