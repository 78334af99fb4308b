"""One-run certificates: ε and GDP μ lower bounds from canaries whose identity a coin chose.

Steinke, Nasr & Jagielski (2023) and Mahloujifar, Melis & Chaudhuri (2024) audit a mechanism
from one run over m canaries. In idaudit's identity setting a canary is one mechanism call on
an input of identity a or of identity b of a pair, the choice made by an independent fair
coin; the attacker scores the output ("b" when high), guesses "b" for the outputs scoring at
or above a threshold and abstains on the rest. :func:`certify_one_run` takes the scores of the
canaries the coin sent to a and to b; :class:`OneRunCertifier` runs the whole experiment on an
:class:`~idaudit.data.EmbeddingSet` (each identity's rows are its iid outputs).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

import numpy as np
import numpy.typing as npt
import xarray as xr
from scipy import special, stats
from tqdm.auto import tqdm

from idaudit._device import thread_limit
from idaudit._results import Status, provenance, variable
from idaudit._validation import (
    Boolean,
    Classifier,
    Constraint,
    Interval,
    Options,
    RandomState,
    RngLike,
    check_in_range,
    check_pairs,
    check_random_state,
    spawn_seeds,
)
from idaudit.certify._base import CLASSIFIERS, BaseCertifier, fit_classifier, make_classifier, score
from idaudit.certify._scores import (
    GDP_ASSUMPTION,
    _numbers,
    check_scores,
    check_strategy,
    gdp_epsilon_at,
    seed_of,
)
from idaudit.data import EmbeddingSet, split_identities
from idaudit.dp import (
    one_run_epsilon,
    one_run_gdp_mu,
    one_run_gdp_refutes,
    one_run_p_value,
)
from idaudit.exceptions import InvalidInputError

__all__ = ["OneRunCertificate", "OneRunCertifier", "certify_one_run"]

OneRunStrategy = Literal["given", "split", "bonferroni"]
ONE_RUN_STRATEGIES: tuple[str, ...] = ("given", "split", "bonferroni")

#: The model the GDP-route ε(δ) of a one-run certificate rests on (that of certify_scores).
ONE_RUN_GDP_ASSUMPTION = GDP_ASSUMPTION

FloatArray = npt.NDArray[np.float64]


#: What a ``"given"`` or ``"split"`` bound assumes beyond the one-run theorem.
OBSERVED_GUESSES_ASSUMPTION = (
    "the number of guesses is the count observed above a threshold, where the one-run theorem "
    "fixes it before the run (the reading jax_privacy uses); thresholds='bonferroni' needs no "
    "such assumption"
)


@dataclass(frozen=True, eq=False, repr=False)
class OneRunCertificate:
    """What one run over m canaries certifies: ε(δ) and GDP μ lower bounds.

    Made by :func:`certify_one_run` (and :class:`OneRunCertifier`).

    Attributes
    ----------
    strategy : str
        ``"given"``, ``"split"`` or ``"bonferroni"``: how the guessing threshold was chosen.
    alpha, delta : float
        Error level and the δ of ``epsilon_lb_``.
    n_canaries : int
        m, the canaries certified on (under ``"split"`` only the evaluation canaries, fewer
        than given).
    n_a, n_b : int
        Canaries certified on whose coin chose a and b (under ``"split"`` the evaluation
        canaries', a random split of ``n_canaries``; otherwise all given).
    threshold : float
        The threshold behind ``epsilon_lb_``: guess "b" when score ≥ threshold.
    n_guesses, n_correct : int
        r and v at that threshold (status ``descriptive``).
    n_candidates : int
        Thresholds ``alpha`` was shared among (each tried at ``alpha / n_candidates``).
    epsilon_lb_ : float
        Certified lower bound on ε at ``delta`` (status ``certified_lower_bound``).
    mu_lb_ : float
        Certified lower bound on the GDP μ, from the f-DP variant (status
        ``certified_lower_bound``). ``epsilon_lb_`` and ``mu_lb_`` are two tests of the same
        run, each at level ``alpha``: both hold at once with probability at least
        ``1 - 2 alpha``.
    mu_threshold : float
        The threshold behind ``mu_lb_`` (guess "b" when score ≥ it); it may differ from
        ``threshold``, the two bounds being chosen separately among the same candidates.
    seed : int or None
        The seed of the ``"split"`` partition (``None`` for the other strategies).
    """

    strategy: str
    alpha: float
    delta: float
    n_canaries: int
    n_a: int
    n_b: int
    threshold: float
    n_guesses: int
    n_correct: int
    n_candidates: int
    epsilon_lb_: float
    mu_lb_: float
    mu_threshold: float
    seed: int | None = None

    #: The strongest status its bounds carry (``"bonferroni"``, and ε at δ = 0 for all).
    best_status: ClassVar[Status] = "certified_lower_bound"

    @property
    def observed_guesses(self) -> bool:
        """Whether a bound rests on the observed number of guesses rather than on the theorem.

        The one-run theorems bound an attacker whose number of guesses r is fixed before the
        run. ``"bonferroni"`` is a union over such fixed-count attacks, and at δ = 0 the ε
        bound conditions on the guesses made; ``"given"`` and ``"split"`` put the count
        observed at a threshold in r's place, which the theorem covers for neither ε at
        δ > 0 nor the f-DP μ (whose per-guess posterior is not bounded pointwise).
        """
        return self.strategy != "bonferroni"

    @property
    def statuses(self) -> dict[str, Status]:
        """Each reported quantity's status (a bound on the observed-r reading is an estimate)."""
        observed: Status = "sample_estimate"
        proven: Status = "certified_lower_bound"
        return {
            "epsilon_lb": observed if self.observed_guesses and self.delta > 0 else proven,
            "mu_lb": observed if self.observed_guesses else proven,
            "epsilon_gdp": "sample_estimate",
            "n_guesses": "descriptive",
            "n_correct": "descriptive",
        }

    @property
    def status(self) -> Status:
        """The formal status of ``epsilon_lb_``."""
        return self.statuses["epsilon_lb"]

    @property
    def epsilon_gdp_(self) -> float:
        """ε at ``delta`` of a ``mu_lb_``-GDP mechanism: status ``sample_estimate`` (a model)."""
        return gdp_epsilon_at(self.delta, self.mu_lb_)

    def to_xarray(self) -> xr.Dataset:
        """Return the certificate as a Dataset of scalars with statuses, settings in attrs.

        Returns
        -------
        xarray.Dataset
            Variables ``epsilon_lb``, ``mu_lb`` (``certified_lower_bound``),
            ``epsilon_gdp`` (``sample_estimate``, with its ``assumption``), ``n_guesses``,
            ``n_correct`` (``descriptive``); attrs: provenance and the settings.
        """
        statuses = self.statuses

        def var(value: Any, name: str, long_name: str, **attrs: Any) -> xr.Variable:
            if name in ("epsilon_lb", "mu_lb") and statuses[name] == "sample_estimate":
                attrs["assumption"] = OBSERVED_GUESSES_ASSUMPTION
            return variable((), value, long_name=long_name, status=statuses[name], **attrs)

        data = {
            "epsilon_lb": var(
                self.epsilon_lb_, "epsilon_lb", "one-run epsilon lower bound at delta", units="nats"
            ),
            "mu_lb": var(self.mu_lb_, "mu_lb", "one-run (f-DP) lower bound on the GDP mu"),
            "epsilon_gdp": var(
                self.epsilon_gdp_,
                "epsilon_gdp",
                "epsilon at delta of the mu_lb-GDP mechanism",
                units="nats",
                assumption=ONE_RUN_GDP_ASSUMPTION,
            ),
            "n_guesses": var(self.n_guesses, "n_guesses", "guesses at the threshold"),
            "n_correct": var(self.n_correct, "n_correct", "right guesses at the threshold"),
        }
        settings = {
            "strategy": self.strategy,
            "alpha": self.alpha,
            "delta": self.delta,
            "n_canaries": self.n_canaries,
            "n_a": self.n_a,
            "n_b": self.n_b,
            "threshold": self.threshold,
            "mu_threshold": self.mu_threshold,
            "n_candidates": self.n_candidates,
        }
        attrs = provenance(title="certify_one_run", seeds={"rng": self.seed}, settings=settings)
        return xr.Dataset(data, attrs=attrs)

    def __repr__(self) -> str:
        return (
            f"OneRunCertificate(strategy={self.strategy!r}, n_canaries={self.n_canaries}, "
            f"n_guesses={self.n_guesses}, n_correct={self.n_correct}, alpha={self.alpha:g}, "
            f"delta={self.delta:g}, epsilon_lb_={self.epsilon_lb_:.4g}, "
            f"mu_lb_={self.mu_lb_:.4g})  # status: {self.status}"
        )


def certify_one_run(
    scores_a: npt.ArrayLike,
    scores_b: npt.ArrayLike,
    *,
    alpha: float = 0.05,
    delta: float = 0.0,
    thresholds: OneRunStrategy = "bonferroni",
    threshold: float | npt.ArrayLike | None = None,
    split_fraction: float = 0.5,
    rng: RngLike = None,
) -> OneRunCertificate:
    r"""Certify ε(δ) and the GDP μ from one run over canaries (Steinke et al. 2023).

    Parameters
    ----------
    scores_a, scores_b : array_like, shape (n_a,), (n_b,)
        Attack scores of the canaries whose coin chose identity a (or "out") and identity b
        (or "in"); higher scores mean "b". Each canary's coin must be an independent fair
        coin, flipped before the run and never seen by the attacker: the class sizes are
        themselves random. No NaN (an output the attacker abstains on may score ``-inf``).
    alpha : float, default 0.05
        Error level in (0, 1) of ``epsilon_lb_`` (and, separately, of ``mu_lb_``).
    delta : float, default 0.0
        The δ of ``epsilon_lb_``, in [0, 1).
    thresholds : {"given", "split", "bonferroni"}, default "bonferroni"
        Where the attacker stops guessing:

        * ``"given"``: the ``threshold`` value(s), fixed before the run; ``alpha`` is shared
          among them.
        * ``"split"``: a seeded random ``split_fraction`` of the pooled canaries, each
          keeping its coin, chooses the threshold (the largest bound at ``alpha``); the
          other canaries are certified on it. The partition ignores the coins, so the
          evaluation canaries' coins stay independent fair coins, as the theorem needs
          (jax_privacy's ``Split`` partitions each class apart, which fixes how many
          evaluation canaries chose b up to one; idaudit does not).
        * ``"bonferroni"``: every distinct score; each is tried at ``alpha / m`` with m the
          canaries (a union over the m "guess the top k" attacks, a number fixed in advance).
    threshold : float or array_like, optional
        The threshold(s) for ``"given"`` (required there, refused elsewhere).
    split_fraction : float, default 0.5
        Share of the canaries choosing the threshold under ``"split"``, in (0, 1): the
        first ``int(m * split_fraction)`` of a seeded permutation of all m canaries.
    rng : int, numpy.random.SeedSequence, numpy.random.Generator or None
        Randomness of the ``"split"`` partition.

    Returns
    -------
    OneRunCertificate

    Raises
    ------
    InvalidInputError
        On empty or non-1-D scores, NaN, ``alpha``, ``delta`` or ``split_fraction`` out of
        range, an unknown strategy, or a missing, unexpected or non-numeric ``threshold``.

    Notes
    -----
    At a threshold t the attacker makes :math:`r = \#\{s \ge t\}` guesses, of which
    :math:`v = \#\{s_b \ge t\}` are right. :func:`~idaudit.dp.one_run_epsilon` turns
    :math:`(m, r, v)` into an ε lower bound and :func:`~idaudit.dp.one_run_gdp_mu` into a
    μ lower bound; the largest over the candidate thresholds is reported, each candidate
    at ``alpha / n_candidates``. Only the guess "b" is made (Steinke et al.'s
    :math:`k_- = 0`): negate the scores to guess "a" instead. Candidate thresholds are
    visited in decreasing order of their δ = 0 bound (a closed form that bounds every
    δ > 0 bound from above), and one whose bound cannot beat the best so far is skipped.

    The theorem bounds an attacker with a number of guesses fixed before the run; a fixed
    threshold's r is the count observed. At δ = 0 the bound conditions on r, and
    ``"bonferroni"`` is a union over the m fixed-count attacks "guess the top k", so both
    rest on the theorem; ``"given"`` and ``"split"`` at δ > 0 rest on reading the observed
    r as fixed (as jax_privacy does), which the theorem does not state (docs/certify.md).

    Compared with :func:`certify_scores` on the same scores: there the two classes are
    fixed samples and two error rates are bounded; here the coins are the randomness, the
    guesses' precision is bounded, and canaries the attacker abstains on still count in m.

    References
    ----------
    T. Steinke, M. Nasr, M. Jagielski, "Privacy Auditing with One (1) Training Run",
    NeurIPS 2023. S. Mahloujifar, L. Melis, K. Chaudhuri, "Auditing f-Differential Privacy
    in One Run", ICML 2025.

    Examples
    --------
    >>> import numpy as np
    >>> from idaudit.certify import certify_one_run
    >>> gen = np.random.default_rng(0)
    >>> bits = gen.random(2000) < 0.5
    >>> s = gen.normal(3.0 * bits, 1.0)  # scores of a mu = 3 GDP mechanism
    >>> cert = certify_one_run(s[~bits], s[bits])  # true epsilon(0) is inf
    >>> round(cert.epsilon_lb_, 3), cert.n_guesses, cert.n_correct, cert.status
    (3.69, 630, 628, 'certified_lower_bound')
    """
    check_strategy(alpha, delta, thresholds, threshold, ONE_RUN_STRATEGIES)
    a = check_scores(scores_a, "scores_a", empty=True)
    b = check_scores(scores_b, "scores_b", empty=True)
    if a.size + b.size == 0:
        raise InvalidInputError(
            "`scores_a` and `scores_b` must hold at least one canary; got none."
        )
    alpha, delta = float(alpha), float(delta) + 0.0
    if thresholds == "given":
        t = np.atleast_1d(_numbers(threshold, "threshold")).ravel()
        if t.size == 0 or np.isnan(t).any():
            raise InvalidInputError(f"`threshold` must be numbers, not NaN; got {threshold!r}.")
        return _certify(a, b, t, alpha, alpha / t.size, delta, "given", t.size, None)
    if thresholds == "bonferroni":
        m = a.size + b.size
        t = np.union1d(a, b)
        return _certify(a, b, t, alpha, alpha / m, delta, "bonferroni", m, None)
    frac = check_in_range(split_fraction, "split_fraction", 0.0, 1.0)
    seed = seed_of(rng)
    gen = check_random_state(rng)
    m = a.size + b.size
    cut = int(m * frac)
    if cut == 0 or cut == m:  # depends on m alone, never on the coins
        raise InvalidInputError(
            f"`split_fraction` = {frac:g} leaves no canary on one side of the split of "
            f"{m} canaries."
        )
    # one partition of the pooled canaries, each keeping its coin: drawn independently of
    # the coins, it leaves the evaluation canaries' coins independent fair coins (splitting
    # each class apart would fix how many of them chose b, up to one)
    pooled = np.concatenate((a, b))  # (m,)
    coin = np.arange(m) >= a.size  # (m,) True: the coin chose b
    sel = np.zeros(m, dtype=bool)
    sel[gen.permutation(m)[:cut]] = True
    a_sel, b_sel = pooled[sel & ~coin], pooled[sel & coin]
    a_eval, b_eval = pooled[~sel & ~coin], pooled[~sel & coin]
    chosen = _certify(a_sel, b_sel, np.union1d(a_sel, b_sel), alpha, alpha, delta, "split", 1)
    t = np.array([chosen.threshold, chosen.mu_threshold])
    out = _certify(a_eval, b_eval, t[:1], alpha, alpha, delta, "split", 1, seed, t[1:])
    return out


def _certify(
    a: FloatArray,
    b: FloatArray,
    t: FloatArray,
    alpha: float,
    level: float,
    delta: float,
    strategy: str,
    n_candidates: int,
    seed: int | None = None,
    t_mu: FloatArray | None = None,
) -> OneRunCertificate:
    """Best ε and μ bounds over the thresholds ``t`` (μ over ``t_mu`` when given)."""
    m = a.size + b.size
    r, v = _guesses(a, b, t)
    eps, i = _best_epsilon(m, r, v, delta, level)
    r_mu, v_mu = (r, v) if t_mu is None else _guesses(a, b, t_mu)
    mu, j = _best_mu(m, r_mu, v_mu, level)
    t_mu = t if t_mu is None else t_mu
    return OneRunCertificate(
        strategy=strategy,
        alpha=alpha,
        delta=delta,
        n_canaries=m,
        n_a=a.size,
        n_b=b.size,
        threshold=float(t[i]),
        n_guesses=int(r[i]),
        n_correct=int(v[i]),
        n_candidates=n_candidates,
        epsilon_lb_=eps,
        mu_lb_=mu,
        mu_threshold=float(t_mu[j]),
        seed=seed,
    )


def _guesses(a: FloatArray, b: FloatArray, t: FloatArray) -> tuple[Any, Any]:
    """Guesses r = #{s >= t} and right ones v = #{b >= t} at each threshold."""
    v = b.size - np.searchsorted(np.sort(b), t, side="left")  # (n_t,)
    r = v + a.size - np.searchsorted(np.sort(a), t, side="left")
    return r.astype(np.int64), v.astype(np.int64)


def _best_epsilon(m: int, r: Any, v: Any, delta: float, level: float) -> tuple[float, int]:
    """Largest one-run ε over the thresholds, and the index of the one that gives it."""
    with np.errstate(divide="ignore"):
        ceiling = np.where(  # the δ = 0 bound (closed form), >= the δ > 0 one
            v > 0, special.logit(stats.beta.ppf(level, np.maximum(v, 1), r - v + 1)), 0.0
        )
    # p(ε) >= F(v) + 2mδ(1 - F(v))/v (the i = v term) and refuting needs F(v) <= level, so a
    # threshold with 2mδ(1 - level)/v > level refutes nothing at this δ
    ceiling = np.where(2 * m * delta * (1 - level) > level * np.maximum(v, 1), 0.0, ceiling)
    best, arg = 0.0, 0
    for i in np.argsort(-ceiling, kind="stable"):
        if ceiling[i] <= best:
            break
        ri, vi = int(r[i]), int(v[i])
        if delta > 0 and best > 0 and one_run_p_value(m, ri, vi, best, delta) > level:
            continue  # cannot refute even the best ε so far
        eps = one_run_epsilon(m, ri, vi, delta=delta, alpha=level)
        if eps > best:
            best, arg = eps, int(i)
        if delta == 0:
            break  # the ceiling is the bound: the first is the best
    return best, arg


def _best_mu(m: int, r: Any, v: Any, level: float) -> tuple[float, int]:
    """Largest one-run GDP μ over the thresholds, and its index (most precise first)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        precision = np.where(r > 0, v / np.maximum(r, 1), 0.0)
    best, arg = 0.0, 0
    for i in np.argsort(-precision, kind="stable"):
        if precision[i] <= 0.5:
            break  # no more right than wrong guesses refutes nothing
        ri, vi = int(r[i]), int(v[i])
        if best > 0 and not one_run_gdp_refutes(m, ri, vi, best, alpha=level):
            continue  # cannot refute even the best μ so far
        mu = one_run_gdp_mu(m, ri, vi, alpha=level)
        if mu > best:
            best, arg = mu, int(i)
    return best, arg


class OneRunCertifier(BaseCertifier):
    r"""One-run ε and GDP μ lower bounds for identity-level DP from an EmbeddingSet.

    Every identity pair (a, b) becomes many canaries. A classifier is fitted per pair on
    development rows (a against b); each canary is one reserved row — identity b's if an
    independent fair coin says so, identity a's otherwise — scored by its pair's classifier;
    :func:`certify_one_run` turns the pooled scores into the certificate.

    Status: ``certified_lower_bound`` — with probability at least :math:`1-\alpha` over the
    coins, the mechanism is not (ε, δ)-DP at the identity level for the pairs given, for any
    ε < ``epsilon_lb_`` (and, as a separate test at level α, not μ-GDP for μ < ``mu_lb_``),
    assuming each identity's rows are iid draws of the mechanism on it and ``pairs`` was
    fixed without looking at the rows.

    Parameters
    ----------
    test_size : float, default 0.5
        Fraction of each identity's rows reserved as canary rows, in (0, 1); the rest fit the
        classifiers.
    alpha : float, default 0.05
        Error level in (0, 1).
    delta : float, default 0.0
        The δ of ``epsilon_lb_``, in [0, 1).
    thresholds : {"bonferroni", "split"}, default "bonferroni"
        How the guessing threshold on the pooled scores is chosen (:func:`certify_one_run`).
    split_fraction : float, default 0.5
        Share of the canaries choosing the threshold under ``"split"``, in (0, 1).
    classifier : {"logistic", "random_forest"} or estimator, default "logistic"
        The per-pair classifier, as in :class:`ReservedTestCertifier`; higher scores mean b.
    rng : int, numpy.random.SeedSequence, numpy.random.Generator or None, default 0
        Randomness of the split, the coins, the classifiers and the ``"split"`` partition.
    progress : bool, default True
        Show a progress bar over the pairs.

    Attributes
    ----------
    certificate_ : OneRunCertificate
        The certificate of the pooled canaries.
    epsilon_lb_ : float
        ``certificate_.epsilon_lb_`` (status ``certified_lower_bound``).
    mu_lb_ : float
        ``certificate_.mu_lb_`` (status ``certified_lower_bound``).
    canaries_ : xarray.Dataset
        Dim ``canary``: coords ``identity_a``, ``identity_b`` (its pair), variables ``coin``
        (1 when identity b's row was the output) and ``score`` (both ``descriptive``).

    Notes
    -----
    **Threat model.** The "dataset" of the one-run theorem is the m canary inputs; canary
    i's coin decides whether its input shows identity a or b of its pair, and the joint
    output is the m mechanism outputs. If the mechanism is (ε, δ)-DP at the identity level
    for each pair, the joint output is (ε, δ)-DP with respect to each coin (each output
    depends on its own input only), which is what Steinke et al. need. Rows must therefore
    never be shared between canaries: each identity's reserved rows are divided evenly among
    the pairs it belongs to (a number fixed by the counts, not the values), and canary slot
    j of a pair holds one row of a and one of b, of which the coin picks one (the other is
    discarded, so a slot's existence does not depend on the coin). Failed rows are outputs:
    with failures in ``es`` the certifier works on :meth:`EmbeddingSet.as_outputs`.

    Compared with :class:`ReservedTestCertifier` on the same rows: the reserved test bounds
    two error rates of each selected pair from all its test rows; one run pools every pair
    but uses one output per slot and bounds the guesses' precision, so it needs many pairs
    and wins when many pairs each leak a little (docs/certify.md measures both).

    Examples
    --------
    >>> import numpy as np
    >>> from idaudit.certify import OneRunCertifier
    >>> from idaudit.data import EmbeddingSet
    >>> gen = np.random.default_rng(0)
    >>> centres = gen.normal(0, 1, (20, 8))
    >>> x = np.repeat(centres, 40, axis=0) + gen.normal(0, 0.8, (800, 8))
    >>> es = EmbeddingSet(x, np.repeat(np.arange(20), 40), normalize=False)
    >>> pairs = [(2 * i, 2 * i + 1) for i in range(10)]
    >>> cert = OneRunCertifier(progress=False).fit(es, pairs)
    >>> cert.epsilon_lb_ > 1.0, cert.status
    (True, 'certified_lower_bound')
    """

    _fitted = "certificate_"
    _fit_call = "fit(es, pairs)"
    _fitted_names = ("certificate_", "epsilon_lb_", "mu_lb_", "canaries_")
    _parameter_constraints: ClassVar[dict[str, Constraint]] = {
        "test_size": Interval(0.0, 1.0),
        "alpha": Interval(0.0, 1.0),
        "delta": Interval(0.0, 1.0, closed="left"),
        "thresholds": Options(("bonferroni", "split")),
        "split_fraction": Interval(0.0, 1.0),
        "classifier": Classifier(CLASSIFIERS),
        "rng": RandomState(),
        "progress": Boolean(),
    }

    def __init__(
        self,
        *,
        test_size: float = 0.5,
        alpha: float = 0.05,
        delta: float = 0.0,
        thresholds: Literal["bonferroni", "split"] = "bonferroni",
        split_fraction: float = 0.5,
        classifier: Any = "logistic",
        rng: RngLike = 0,
        progress: bool = True,
    ) -> None:
        self.test_size = test_size
        self.alpha = alpha
        self.delta = delta
        self.thresholds = thresholds
        self.split_fraction = split_fraction
        self.classifier = classifier
        self.rng = rng
        self.progress = progress

    def fit(self, es: EmbeddingSet, pairs: Sequence[tuple[Any, Any]]) -> Any:
        """Run the one-run experiment on ``pairs`` of ``es`` and certify it.

        Parameters
        ----------
        es : EmbeddingSet
            Each identity's rows: iid outputs of the mechanism on it (at least 4 rows, the
            minimum of :func:`~idaudit.data.split_identities`).
        pairs : sequence of (label, label)
            The pairs whose canaries are pooled, fixed without looking at the rows.

        Returns
        -------
        OneRunCertifier
            ``self``.

        Raises
        ------
        TypeError
            If ``es`` is not an EmbeddingSet.
        InvalidInputError
            On a bad parameter, an unknown identity, or an identity too small to split.
        """
        self._forget()
        with thread_limit(1, pools="blas"):
            return self._fit(es, pairs)

    def _fit(self, es: EmbeddingSet, pairs: Sequence[tuple[Any, Any]]) -> Any:
        if not isinstance(es, EmbeddingSet):
            raise TypeError(f"`es` must be an idaudit.EmbeddingSet; got {type(es).__name__}.")
        p = self._checked_params()
        if es.n_failed_:
            es = es.as_outputs()  # failures are outputs: one atom, split and scored
        pairs = check_pairs(pairs, es.identities, unknown="which `es` does not contain")
        seed_split, seed_coins, seed_clf, seed_cert = spawn_seeds(check_random_state(self.rng), 4)
        identities = list(dict.fromkeys(label for pair in pairs for label in pair))
        dev, test = split_identities(
            es.subset(identities), test_size=p["test_size"], rng=seed_split
        )
        degree = {label: 0 for label in identities}
        for pair in pairs:
            for label in pair:
                degree[label] += 1
        share = {label: test.counts[label] // degree[label] for label in identities}
        used = dict.fromkeys(identities, 0)
        coins_gen = np.random.default_rng(seed_coins)
        base = make_classifier(p["classifier"])
        scores, coins, pair_index = [], [], []
        for k, (la, lb) in enumerate(tqdm(pairs, disable=not p["progress"], desc="one run")):
            n_slots = min(share[la], share[lb])
            rows_a = test.get(la)[used[la] : used[la] + n_slots]  # (n_slots, d)
            rows_b = test.get(lb)[used[lb] : used[lb] + n_slots]
            used[la] += share[la]
            used[lb] += share[lb]
            coin = coins_gen.random(n_slots) < 0.5  # (n_slots,) True: identity b's row
            if n_slots == 0:
                continue
            clf = fit_classifier(base, dev.get(la), dev.get(lb), seed_clf + k)
            scores.append(score(clf, np.where(coin[:, None], rows_b, rows_a)))
            coins.append(coin)
            pair_index.append(np.full(n_slots, k))
        if not scores:
            raise InvalidInputError(
                "`pairs` leave no canary: every pair needs a reserved row of each identity."
            )
        s, c, idx = np.concatenate(scores), np.concatenate(coins), np.concatenate(pair_index)
        cert = certify_one_run(
            s[~c],
            s[c],
            alpha=p["alpha"],
            delta=p["delta"],
            thresholds=p["thresholds"],
            split_fraction=p["split_fraction"],
            rng=seed_cert,
        )
        self.certificate_ = cert
        self.epsilon_lb_ = cert.epsilon_lb_
        self.mu_lb_ = cert.mu_lb_
        coords = {
            "identity_a": ("canary", np.array([pairs[i][0] for i in idx])),
            "identity_b": ("canary", np.array([pairs[i][1] for i in idx])),
        }
        data = {
            "coin": variable(
                "canary",
                c.astype(np.int8),
                long_name="1: identity b's row was the output",
                status="descriptive",
            ),
            "score": variable(
                "canary", s, long_name="the pair classifier's score (b high)", status="descriptive"
            ),
        }
        settings = {k: v for k, v in p.items() if isinstance(v, str | int | float) and k != "rng"}
        self.canaries_ = xr.Dataset(
            data,
            coords=coords,
            attrs=provenance(
                title="OneRunCertifier canaries",
                seeds={"rng": self.rng if isinstance(self.rng, int) else None},
                settings=settings,
            ),
        )
        return self
