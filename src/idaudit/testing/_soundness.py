"""Soundness of a claim over many seeded runs: one event per run, an exact binomial test.

A certified bound with confidence ``1 - alpha`` is *sound* when, over independent runs on a
mechanism whose truth is known, it is violated in at most a fraction ``alpha`` of them. The
count of violating runs is then at most Binomial(n_reps, alpha), and a one-sided exact
binomial test of "violation rate <= alpha" (``scipy.stats.binomtest``) decides. A claim that
is a whole family (all pairs, all δ of a curve) is one event per run: the run violates it when
any member misses, which is what the family's simultaneous guarantee bounds.
"""

from __future__ import annotations

import math
import warnings
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal

import numpy as np
import numpy.typing as npt
import xarray as xr

from idaudit._results import CERTIFIED_STATUSES, Status
from idaudit._validation import check_in_range, check_integer, check_option, is_integer
from idaudit.exceptions import IdauditWarning, InvalidInputError
from idaudit.testing._claims import read_claim

__all__ = [
    "SoundnessResult",
    "assert_sound",
    "check_claims",
    "check_rate",
    "check_soundness",
    "smallest_testable_alpha",
]

_ALTERNATIVES = ("greater", "two-sided")
_SHOWN_SEEDS = 10


@dataclass(frozen=True)
class SoundnessResult:
    """The outcome of a soundness (or rate) check over seeded runs.

    Attributes
    ----------
    name : str
        What was checked (the claim's name, or ``"claim"``).
    n_violations : int
        Runs in which the claim missed its truth (or the counted event happened).
    n_reps : int
        Runs.
    alpha : float
        The nominal level: the violation rate a sound claim may reach.
    pvalue : float
        Exact binomial p-value of the count against ``alpha`` (one-sided "rate <= alpha"
        unless ``alternative`` is ``"two-sided"``).
    significance : float
        The check fails when ``pvalue <= significance``.
    alternative : {"greater", "two-sided"}
        ``"greater"``: soundness (the rate may be below ``alpha``); ``"two-sided"``: the rate
        is pinned at ``alpha`` (a calibrated p-value, a documented overshoot rate).
    tightness : float
        Mean over runs of claim / truth (for a family, its member closest to its truth): 1 is
        tight, near 0 (lower bound) or far above 1 (upper bound) vacuous; NaN where no run had
        a finite, non-zero truth.
    failing_seeds : tuple of int
        The seeds of the violating runs, to rerun one alone.
    status : str or None
        The claim's formal status (``None`` for a bare count).
    """

    name: str
    n_violations: int
    n_reps: int
    alpha: float
    pvalue: float
    significance: float
    alternative: Literal["greater", "two-sided"] = "greater"
    tightness: float = math.nan
    failing_seeds: tuple[int, ...] = ()
    status: Status | None = None

    @property
    def rate(self) -> float:
        """The observed violation rate ``n_violations / n_reps``."""
        return self.n_violations / self.n_reps

    def power(self, rate: float) -> float:
        """Return the chance that the check fails when the true violation rate is ``rate``.

        Parameters
        ----------
        rate : float
            A violation rate in [0, 1].

        Returns
        -------
        float
            ``P(pvalue <= significance)`` for a count drawn at ``rate`` over ``n_reps`` runs
            (one-sided checks; the two-sided test's upper tail for ``alternative="two-sided"``
            is not computed here: NaN).
        """
        rate = check_in_range(rate, "rate", 0.0, 1.0, closed="both")
        if self.alternative != "greater":
            return math.nan
        return _power(self.n_reps, self.alpha, self.significance, rate)

    @property
    def detectable_rate(self) -> float:
        """The violation rate the check catches with probability 0.8 (1.0 if none does)."""
        if self.alternative != "greater":
            return math.nan
        return _detectable_rate(self.n_reps, self.alpha, self.significance)

    @property
    def sound(self) -> bool:
        """Whether the count is consistent with the nominal level (``pvalue > significance``)."""
        return self.pvalue > self.significance

    def message(self) -> str:
        """Return the full account: count, level, p-value, tolerance, tightness, seeds."""
        mean = self.n_reps * self.alpha
        sd = math.sqrt(self.n_reps * self.alpha * (1 - self.alpha))
        hypothesis = (
            f"violation rate <= {self.alpha:g}"
            if self.alternative == "greater"
            else f"rate = {self.alpha:g} (two-sided)"
        )
        verdict = "consistent with" if self.sound else "rejects"
        lines = [
            f"{self.name}: {self.n_violations} of {self.n_reps} runs violated "
            f"(rate {self.rate:.3g}) at nominal level alpha = {self.alpha:g}"
            + (f" [{self.status}]" if self.status else ""),
            f"exact binomial p-value {self.pvalue:.3g} {verdict} H0 '{hypothesis}' at "
            f"significance {self.significance:g} (under H0: mean {mean:.3g}, sd {sd:.3g})",
        ]
        if self.alternative == "greater":
            lines.append(
                f"power: {self.power(min(1.0, 2 * self.alpha)):.2f} against twice the level; "
                f"a rate of {self.detectable_rate:.3g} is caught with probability 0.8"
            )
        if not math.isnan(self.tightness):
            lines.append(f"tightness (mean claim / truth): {self.tightness:.3g}")
        if self.failing_seeds:
            shown = ", ".join(str(s) for s in self.failing_seeds[:_SHOWN_SEEDS])
            more = len(self.failing_seeds) - _SHOWN_SEEDS
            lines.append(f"failing seeds: {shown}" + (f" (+{more} more)" if more > 0 else ""))
        return "\n".join(lines)

    def __repr__(self) -> str:
        return (
            f"SoundnessResult(name={self.name!r}, n_violations={self.n_violations}, "
            f"n_reps={self.n_reps}, alpha={self.alpha:g}, pvalue={self.pvalue:.4g}, "
            f"sound={self.sound})"
        )


def smallest_testable_alpha(n_reps: int) -> float:
    """Return the smallest nominal level ``n_reps`` runs can test: one expected violation.

    Below it a sound claim is expected never to miss, and a check cannot tell it from one
    that misses at several times its level (at ``n_reps * alpha = 0.5``, a claim violated
    five times as often as it should still passes the 0.01 test three times in four).

    Parameters
    ----------
    n_reps : int
        Runs, at least 1.

    Returns
    -------
    float
        ``1 / n_reps``.

    Examples
    --------
    >>> from idaudit.testing import smallest_testable_alpha
    >>> smallest_testable_alpha(200)
    0.005
    """
    return 1.0 / check_integer(n_reps, "n_reps", minimum=1)


def _check_level(alpha: Any, n_reps: Any, significance: Any) -> tuple[float, int, float]:
    alpha = check_in_range(alpha, "alpha", 0.0, 1.0)
    n_reps = check_integer(n_reps, "n_reps", minimum=1)
    significance = check_in_range(significance, "significance", 0.0, 1.0)
    # one expected violation at the nominal level; the tolerance keeps alpha = 1 / n_reps
    # (49 * (1/49) < 1 in floating point) on the testable side
    if n_reps * alpha < 1.0 - 1e-9:
        needed = math.ceil(1 / alpha - 1e-9)
        raise InvalidInputError(
            f"`n_reps` = {n_reps} is too small to test `alpha` = {alpha:g}: the smallest level "
            f"{n_reps} runs resolve is {smallest_testable_alpha(n_reps):g} (one expected "
            f"violation); use n_reps >= {needed}."
        )
    return alpha, n_reps, significance


_LOW_POWER = 0.2  # warn below this chance of catching a claim violated at twice its level
_DETECT = 0.8


def _critical_count(n_reps: int, alpha: float, significance: float) -> int:
    """Smallest count the one-sided test rejects at: P(X >= c | alpha) <= significance."""
    from scipy import stats

    # sf(c - 1) = P(X >= c) decreases in c; isf gives the boundary, checked around it
    c = int(stats.binom.isf(significance, n_reps, alpha)) + 1
    while c > 0 and stats.binom.sf(c - 2, n_reps, alpha) <= significance:
        c -= 1
    while c <= n_reps and stats.binom.sf(c - 1, n_reps, alpha) > significance:
        c += 1
    return c


def _power(n_reps: int, alpha: float, significance: float, rate: float) -> float:
    from scipy import stats

    c = _critical_count(n_reps, alpha, significance)
    return 0.0 if c > n_reps else float(stats.binom.sf(c - 1, n_reps, rate))


def _detectable_rate(n_reps: int, alpha: float, significance: float) -> float:
    from scipy import optimize, stats

    c = _critical_count(n_reps, alpha, significance)
    if c > n_reps:
        return 1.0
    return float(
        optimize.brentq(lambda r: stats.binom.sf(c - 1, n_reps, r) - _DETECT, alpha, 1.0)
    )


def _warn_low_power(result: SoundnessResult) -> None:
    power = result.power(min(1.0, 2 * result.alpha))
    if power < _LOW_POWER:
        warnings.warn(
            f"{result.name}: {result.n_reps} runs at alpha = {result.alpha:g} catch a claim "
            f"violated at twice its level with probability {power:.2f} only (a rate of "
            f"{result.detectable_rate:.3g} is caught with probability 0.8): a pass says little; "
            "raise n_reps (or --idaudit-reps-scale).",
            IdauditWarning,
            stacklevel=3,
        )


def _binom_pvalue(k: int, n: int, p: float, alternative: str) -> float:
    from scipy import stats

    return float(stats.binomtest(k, n, p, alternative=alternative).pvalue)


def check_rate(
    n_events: int,
    n_reps: int,
    alpha: float,
    *,
    alternative: Literal["greater", "two-sided"] = "greater",
    significance: float = 0.01,
    name: str = "event",
) -> SoundnessResult:
    """Test a count of events over independent runs against a nominal rate.

    For events that are not a claim compared with a truth: the rejections of a test under
    its null (a type-I error rate), the misses of a confidence sequence checked at every look,
    or a documented overshoot rate pinned as a regression.

    Parameters
    ----------
    n_events : int
        Runs in which the event happened, in ``[0, n_reps]``.
    n_reps : int
        Independent runs; ``n_reps * alpha`` must be at least 1 (see
        :func:`smallest_testable_alpha`).
    alpha : float
        The nominal rate, in (0, 1).
    alternative : {"greater", "two-sided"}, default "greater"
        ``"greater"`` tests "rate <= alpha" (a guarantee); ``"two-sided"`` tests
        "rate = alpha" (a calibrated or documented rate).
    significance : float, default 0.01
        The check fails when the exact binomial p-value is at most this.
    name : str, default "event"
        What is counted, for the message.

    Returns
    -------
    SoundnessResult

    Examples
    --------
    >>> from idaudit.testing import check_rate
    >>> res = check_rate(12, 300, 0.05)
    >>> res.sound, round(res.pvalue, 3)
    (True, 0.822)
    """
    alpha, n_reps, significance = _check_level(alpha, n_reps, significance)
    n_events = check_integer(n_events, "n_events", minimum=0)
    if n_events > n_reps:
        raise InvalidInputError(f"`n_events` must be <= n_reps = {n_reps}; got {n_events}.")
    alternative = check_option(alternative, "alternative", _ALTERNATIVES)  # type: ignore[assignment]
    result = SoundnessResult(
        name=name,
        n_violations=n_events,
        n_reps=n_reps,
        alpha=alpha,
        pvalue=_binom_pvalue(n_events, n_reps, alpha, alternative),
        significance=significance,
        alternative=alternative,
    )
    if alternative == "greater":
        _warn_low_power(result)
    return result


def _check_truth(truth: Any, status: Status, name: str) -> npt.NDArray[np.float64]:
    """Truth as floats; refuse NaN, and an infinite truth the claim could never violate."""
    if truth is None:
        raise InvalidInputError(
            f"`truth` is missing for {name}: give it to the check, or as Claim(..., truth=...)."
        )
    if isinstance(truth, str | bytes) or np.asarray(truth).dtype.kind in "USOb":
        raise TypeError(f"`truth` must be a number or an array of numbers; got {truth!r}.")
    try:
        values = np.asarray(truth, dtype=float)
    except (TypeError, ValueError) as err:
        raise TypeError(f"`truth` must be a number or an array of numbers; got {truth!r}.") from err
    if np.isnan(values).any():
        raise InvalidInputError(f"`truth` holds NaN for {name}; got {truth!r}.")
    unreachable = np.inf if status == "certified_lower_bound" else -np.inf
    if values.size and np.all(values == unreachable):
        raise InvalidInputError(
            f"`truth` is {unreachable} for {name}, a {status}: no claim can miss it, so the "
            "check could not fail. Give a finite truth (for a Gaussian mechanism, ε(δ) at a "
            "δ > 0)."
        )
    return values


def _not_empty(values: npt.NDArray[np.float64], name: str) -> None:
    if values.size == 0:
        raise InvalidInputError(
            f"{name} holds no values (shape {values.shape}): an empty family claims nothing "
            "and could never be violated, so the check could not fail."
        )


def _against_truth(
    values: npt.NDArray[np.float64], truth: npt.NDArray[np.float64], name: str
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """Broadcast the truth to the claim's shape; a truth that would grow the claim is refused."""
    try:
        shape = np.broadcast_shapes(values.shape, truth.shape)
    except ValueError:
        shape = None
    if shape != values.shape:
        raise InvalidInputError(
            f"{name} has shape {values.shape}, which does not match the truth's "
            f"{truth.shape}: the truth must have the claim's shape or broadcast to it "
            "without growing it."
        )
    return values, np.broadcast_to(truth, shape)


def _certified(status: Status, name: str) -> Status:
    if status not in CERTIFIED_STATUSES:
        raise InvalidInputError(
            f"{name} has status {status!r}, which states no probability: only "
            f"{' and '.join(CERTIFIED_STATUSES)} claims can be sound or unsound at a level "
            "alpha. Count how often another number overshoots with check_rate instead; for an "
            "auditor's certified route pass its bound, e.g. ds['mmdtv_epsilon_lb'] or "
            "Claim(aud.epsilon_lb_, 'certified_lower_bound')."
        )
    return status


def _violations(
    values: npt.NDArray[np.float64], truth: npt.NDArray[np.float64], status: Status
) -> tuple[npt.NDArray[np.bool_], npt.NDArray[np.float64]]:
    """Per-run violation and claim / truth ratio; axis 0 of both arrays is the run."""
    lower = status == "certified_lower_bound"
    missed = np.asarray(values > truth if lower else values < truth)
    n = values.shape[0]
    event: npt.NDArray[np.bool_] = np.asarray(missed.reshape(n, -1).any(axis=1))
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = (values / truth).reshape(n, -1)
    if ratio.shape[1] == 0:  # an empty family claims nothing and misses nothing
        return event, np.full(n, np.nan)
    usable = np.isfinite(ratio)
    # the member closest to its truth: the largest ratio of a lower bound, the smallest of an
    # upper bound
    best = np.where(usable, ratio, -np.inf if lower else np.inf)
    per_run = best.max(axis=1) if lower else best.min(axis=1)
    per_run[~usable.any(axis=1)] = np.nan
    return event, per_run


def _result(
    name: str,
    event: npt.NDArray[np.bool_],
    ratio: npt.NDArray[np.float64],
    seeds: Sequence[int],
    alpha: float,
    significance: float,
    status: Status,
) -> SoundnessResult:
    k, n = int(event.sum()), int(event.size)
    finite = ratio[np.isfinite(ratio)]
    result = SoundnessResult(
        name=name,
        n_violations=k,
        n_reps=n,
        alpha=alpha,
        pvalue=_binom_pvalue(k, n, alpha, "greater"),
        significance=significance,
        tightness=float(finite.mean()) if finite.size else math.nan,
        failing_seeds=tuple(int(s) for s, e in zip(seeds, event, strict=True) if e),
        status=status,
    )
    _warn_low_power(result)
    return result


def _run_seeds(rng: Any, n_reps: int) -> list[int]:
    """Per-run seeds: spawned from an int or a SeedSequence, drawn by a Generator, or given.

    From an int (or ``SeedSequence``), run ``i`` gets the first 63 bits of the state of
    ``SeedSequence(rng).spawn(n_reps)[i]``: different ``rng`` give independent replications
    (``rng + i`` would make ``rng = 0`` and ``rng = 1`` share all runs but one).
    """
    if is_integer(rng):
        rng = np.random.SeedSequence(check_integer(rng, "rng", minimum=0))
    if isinstance(rng, np.random.SeedSequence):
        return [int(c.generate_state(2, np.uint64)[0] >> np.uint64(1)) for c in rng.spawn(n_reps)]
    if isinstance(rng, np.random.Generator):
        return [int(s) for s in rng.integers(0, 2**63 - 1, size=n_reps, dtype=np.int64)]
    if isinstance(rng, Sequence | np.ndarray | range) and not isinstance(rng, str | bytes):
        seeds = [check_integer(s, "rng", minimum=0) for s in rng]
        if len(seeds) != n_reps:
            raise InvalidInputError(
                f"`rng` as a sequence must hold one seed per run: {len(seeds)} vs n_reps = "
                f"{n_reps}."
            )
        repeated = sorted(s for s, c in Counter(seeds).items() if c > 1)
        if repeated:
            raise InvalidInputError(
                f"`rng` as a sequence must hold distinct seeds (a repeated seed repeats its "
                f"run, which is not an independent replication); repeated: {repeated[:5]}."
            )
        return seeds
    raise TypeError(
        "`rng` must be an int or a numpy.random.SeedSequence (run seeds spawned from it), a "
        f"sequence of distinct seeds or a numpy.random.Generator; got {type(rng).__name__}."
    )


def check_soundness(
    make_claim: Callable[[Any, int], Any],
    mechanism: Callable[[int], Any],
    truth: Any = None,
    *,
    n_reps: int,
    alpha: float,
    rng: Any = 0,
    significance: float = 0.01,
) -> Any:
    """Run a claim on a known mechanism ``n_reps`` times and test its violation rate.

    Run ``i`` with seed ``s_i`` draws ``data = mechanism(s_i)``, computes
    ``claim = make_claim(data, s_i)`` and records one event: the claim (all of its members,
    if it is a family) misses the truth. A sound claim at level ``alpha`` is violated in at
    most a fraction ``alpha`` of runs; the count is tested with an exact one-sided binomial
    test.

    Parameters
    ----------
    make_claim : callable ``(data, seed) -> claim``
        Computes the claim from one run's data: a :class:`~idaudit.testing.Claim`, a
        ``DataArray`` with a ``status`` attribute, a fitted certifier, or a mapping of names
        to those (several claims checked on the same runs). The status must be
        ``"certified_lower_bound"`` (violated when the value exceeds the truth) or
        ``"certified_upper_bound"`` (violated when it falls below).
    mechanism : callable ``seed -> data``
        Draws one run's data from its seed (for instance
        ``lambda s: sample_embeddings(mech, 100, rng=s)``).
    truth : float, array_like or mapping, optional
        The true value (or values, broadcast against a family); with several named claims, a
        mapping of names to truths. Omit it for claims that carry their own
        (``Claim(..., truth=...)``, e.g. the true error rates of the test a run chose).
    n_reps : int
        Runs; ``n_reps * alpha`` must be at least 1 (:func:`smallest_testable_alpha`).
        Choose it from the test's power: at ``n_reps`` runs the count's sd is
        ``sqrt(n_reps * alpha * (1 - alpha))``.
    alpha : float
        The nominal level of the claim, in (0, 1).
    rng : int, SeedSequence, sequence of int or numpy.random.Generator, default 0
        Per-run seeds. From an int or a ``SeedSequence``, run ``i`` gets a seed derived from
        ``numpy.random.SeedSequence(rng).spawn(n_reps)[i]``, so different ``rng`` give
        independent replications; a sequence gives distinct seeds one by one (e.g.
        ``range(n_reps)`` for runs seeded 0, 1, ...); a ``Generator`` draws them. Every
        failing run's seed is reported, to rerun it alone.
    significance : float, default 0.01
        The check fails when the p-value is at most this: the chance that a sound claim fails
        the check.

    Returns
    -------
    SoundnessResult or dict of str to SoundnessResult
        One result, or one per name when ``make_claim`` returns a mapping.

    Raises
    ------
    InvalidInputError
        If a claim is NaN, has no status or a status that states no probability, changes
        status between runs or does not match the truth's shape; if the truth is NaN or
        infinite where the claim could never miss it; if ``n_reps`` is too small for
        ``alpha``.

    See Also
    --------
    assert_sound : raise with the whole account when the check fails.
    check_claims : the same test on claims already computed for every run at once.

    Examples
    --------
    >>> import numpy as np
    >>> from idaudit.dp import clopper_pearson_upper
    >>> from idaudit.testing import Claim, check_soundness
    >>> p = 0.3  # a Bernoulli rate, bounded from above by Clopper-Pearson at 0.9
    >>> res = check_soundness(
    ...     lambda k, seed: Claim(clopper_pearson_upper(k, 50, 0.1), "certified_upper_bound"),
    ...     lambda seed: int(np.random.default_rng(seed).binomial(50, p)),
    ...     p,
    ...     n_reps=200,
    ...     alpha=0.1,
    ... )
    >>> res.sound, res.n_violations <= 30
    (True, True)
    """
    alpha, n_reps, significance = _check_level(alpha, n_reps, significance)
    if not callable(make_claim):
        raise TypeError(f"`make_claim` must be callable; got {type(make_claim).__name__}.")
    if not callable(mechanism):
        raise TypeError(f"`mechanism` must be callable; got {type(mechanism).__name__}.")
    seeds = _run_seeds(rng, n_reps)
    names: list[str] = []
    statuses: dict[str, Status] = {}
    events: dict[str, list[bool]] = {}
    ratios: dict[str, list[float]] = {}
    single = True
    for i, seed in enumerate(seeds):
        out = make_claim(mechanism(seed), seed)
        # a Dataset is a mapping too, but of variables with their own statuses: refused below
        single = not isinstance(out, Mapping) or isinstance(out, xr.Dataset)
        claims = {"claim": out} if single else dict(out)
        where = f"run {i} (seed {seed})"
        if not claims:
            raise InvalidInputError(f"`make_claim` returned no claims in {where}.")
        if i == 0:
            names = list(claims)
        elif sorted(claims) != sorted(names):
            raise InvalidInputError(
                f"`make_claim` returned claims {sorted(claims)} in {where}, but "
                f"{sorted(names)} in run 0."
            )
        for name, obj in claims.items():
            label = f"`make_claim`'s {name!r} in {where}" if not single else f"the claim in {where}"
            values, status, own_truth = read_claim(obj, label)
            given = truth.get(name) if isinstance(truth, Mapping) else truth
            if own_truth is not None and given is not None:
                raise InvalidInputError(
                    f"{label} carries its own truth, and `truth` gives one too: give one."
                )
            _certified(status, label)
            if statuses.setdefault(name, status) != status:
                raise InvalidInputError(
                    f"{label} has status {status!r}, but {statuses[name]!r} in run 0."
                )
            _not_empty(values, label)
            t = _check_truth(given if own_truth is None else own_truth, status, label)
            values, t = _against_truth(values, t, label)
            event, ratio = _violations(values[None], t[None], status)
            events.setdefault(name, []).append(bool(event[0]))
            ratios.setdefault(name, []).append(float(ratio[0]))
    results = {
        name: _result(
            name,
            np.asarray(events[name]),
            np.asarray(ratios[name]),
            seeds,
            alpha,
            significance,
            statuses[name],
        )
        for name in names
    }
    return results["claim"] if single else results


def check_claims(
    claims: Any,
    truth: Any,
    *,
    alpha: float,
    significance: float = 0.01,
    seeds: Sequence[int] | None = None,
    name: str | None = None,
) -> SoundnessResult:
    """Test claims computed for all runs at once (axis 0, or the first dim, is the run).

    The batched form of :func:`check_soundness`: for instance one ``audit_pairs`` call over
    many disjoint copies of one identity pair, each copy a run. Every run is one event.

    Parameters
    ----------
    claims : Claim or xarray.DataArray
        Values of shape ``(n_reps, ...)`` with a ``certified_…`` status.
    truth : float or array_like
        The truth, broadcast against the values.
    alpha : float
        The nominal level, in (0, 1); ``n_reps * alpha`` must be at least 1.
    significance : float, default 0.01
        The check fails when the p-value is at most this.
    seeds : sequence of int, optional
        A label per run for the failing-seeds list (default: the run index).
    name : str, optional
        What is checked (default: the DataArray's name, else ``"claim"``).

    Returns
    -------
    SoundnessResult

    Examples
    --------
    >>> import numpy as np
    >>> from idaudit.testing import Claim, check_claims
    >>> lb = np.random.default_rng(0).uniform(0.0, 1.05, size=200)  # 5 % exceed 1
    >>> check_claims(Claim(lb, "certified_lower_bound"), 1.0, alpha=0.05).sound
    True
    """
    label = "`claims`"
    values, status, own_truth = read_claim(claims, label)
    if values.ndim == 0:
        raise InvalidInputError(f"{label} must have a run axis first; got a single value.")
    alpha, n_reps, significance = _check_level(alpha, values.shape[0], significance)
    if own_truth is not None:
        raise InvalidInputError("give the truth as `truth`, not inside the Claim.")
    _certified(status, label)
    _not_empty(values, label)
    t = _check_truth(truth, status, label)
    values, t = _against_truth(values, t, label)
    labels = list(range(n_reps)) if seeds is None else [int(s) for s in seeds]
    if len(labels) != n_reps:
        raise InvalidInputError(f"`seeds` must hold one label per run: {len(labels)} vs {n_reps}.")
    event, ratio = _violations(values, t, status)
    label_name = name or str(getattr(claims, "name", None) or "claim")
    return _result(label_name, event, ratio, labels, alpha, significance, status)


def assert_sound(result: SoundnessResult | Mapping[str, SoundnessResult]) -> None:
    """Raise ``AssertionError`` with the whole account when a check failed.

    Parameters
    ----------
    result : SoundnessResult or mapping of them
        From :func:`check_soundness`, :func:`check_claims` or :func:`check_rate`.

    Raises
    ------
    AssertionError
        Naming the count, the nominal level, the exact p-value, the arithmetic of the
        tolerance (mean and sd under the nominal level), the tightness and the failing seeds.

    Examples
    --------
    >>> from idaudit.testing import assert_sound, check_rate
    >>> assert_sound(check_rate(40, 200, 0.2))
    >>> assert_sound(check_rate(70, 200, 0.2))  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    AssertionError: unsound: event: 70 of 200 runs violated (rate 0.35) ... p-value 5.51e-07 ...
    """
    __tracebackhide__ = True  # pytest shows the caller's line, not this one
    given: object = result  # the annotation is the promise; the check is for what was passed
    results: list[Any] = []
    if isinstance(given, SoundnessResult):
        results = [given]
    elif isinstance(given, Mapping):
        results = [
            replace(r, name=str(k)) if isinstance(r, SoundnessResult) else r
            for k, r in given.items()
        ]
    if not results or not all(isinstance(r, SoundnessResult) for r in results):
        raise TypeError(
            f"`result` must be a SoundnessResult or a mapping of them; got {type(result).__name__}."
        )
    failed = [r for r in results if not r.sound]
    if failed:
        kind = "unsound" if failed[0].alternative == "greater" else "miscalibrated"
        raise AssertionError(f"{kind}: " + "\n\n".join(r.message() for r in failed))
