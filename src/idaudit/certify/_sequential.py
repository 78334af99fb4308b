"""Anytime-valid sequential ε certificates: draw test outputs until the bound is good enough."""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Sequence
from typing import Any, ClassVar

import numpy as np
import numpy.typing as npt
import xarray as xr
from tqdm.auto import tqdm

from idaudit._device import thread_limit
from idaudit._results import Status, pair_coords, provenance, reduction_attrs, variable
from idaudit._validation import (
    Anything,
    Boolean,
    Classifier,
    Constraint,
    Interval,
    MechanismLike,
    NoneOr,
    RandomState,
    RngLike,
    check_pairs,
    check_random_state,
    spawn_seeds,
    validate_params,
)
from idaudit.certify._base import (
    BaseCertifier,
    auc,
    fit_classifier,
    make_classifier,
    oof_scores_of,
    score,
    threshold_cuts,
)
from idaudit.certify._scores import seed_of
from idaudit.dp import anytime_upper_bound, epsilon_from_error_rates
from idaudit.exceptions import IdauditWarning, InvalidInputError

__all__ = ["SequentialCertifier"]

FloatArray = npt.NDArray[np.float64]

#: Why the sampling stopped (the ``stop_reason`` attribute of ``path_``).
STOP_REASONS = ("target_reached", "target_unreachable", "max_samples")


class SequentialCertifier(BaseCertifier):
    r"""Certified ε lower bounds that stay valid however long one keeps sampling.

    A classifier and a threshold are fixed per pair on a *development* draw from the
    mechanism; test outputs are then drawn in batches and the false-positive and
    false-negative counts of the fixed test feed one-sided *confidence sequences*
    (:func:`idaudit.dp.anytime_upper_bound`) for the two error rates. Substituted into
    Eq. 16 of seed 000 they give an ε lower bound that holds at every sample size
    simultaneously, so sampling may stop whenever the bound is good enough — or hopeless —
    without any correction for having looked.

    Status: ``certified_lower_bound`` — with probability at least :math:`1 - \alpha`, jointly
    over all pairs and all sample sizes, every ``epsilon_lb`` on the path (and hence
    ``epsilon_lb_``) is at most its pair's true ε(δ), when the mechanism's outputs for an
    identity are iid and the pairs were chosen without looking at its outputs. A row of NaN
    returned by ``sample`` is a failed output; the tests see every output as ``[x, 0]`` and a
    failure as ``[0, ..., 0, 1]``, and the counts include failures, so the certificate holds
    for the mechanism as run, failures included (docs/certify.md, "Failed rows").

    Parameters
    ----------
    mechanism : Mechanism
        Anything with ``identities`` and ``sample(identity, n, *, rng)``
        (:class:`idaudit.mechanisms.Mechanism`).
    pairs : sequence of (label, label)
        The identity pairs to certify, fixed before sampling.
    classifier : "logistic" or estimator, default "logistic"
        ``"logistic"``: ROC-HT's ``LogisticRegression(C=1.0, solver="lbfgs",
        max_iter=1000)``, as :class:`~idaudit.certify.ReservedTestCertifier`'s. Or a
        scikit-learn-style binary classifier (cloned; scored with ``decision_function`` if it
        has one, else ``predict_proba(X)[:, 1]``; every ``random_state`` is set from ``rng``).
    alpha : float, default 0.05
        Family-wise error level in (0, 1); each of the ``2 * len(pairs)`` confidence sequences
        is run at :math:`\alpha / (2\,n_\text{pairs})` (union bound).
    target_epsilon : float, optional
        A finite ε > 0. Stop as soon as the largest certified bound reaches this value, or
        once no pair can reach it any more. Without it, sampling runs to ``max_samples``.
    max_samples : int
        Most test outputs drawn per identity (development draws not included), at least
        ``batch_size``.
    n_dev : int, default 100
        Development outputs per identity (classifier, threshold and direction), at least
        ``2 * n_folds``.
    batch_size : int, default 50
        Test outputs drawn per identity between two looks at the bound.
    delta : float, default 0.0
        The δ of the guarantee being refuted, in [0, 1); 0 certifies pure DP.
    n_folds : int, default 5
        Stratified folds for the development out-of-fold scores that choose the threshold.
    rng : int, numpy.random.SeedSequence, numpy.random.Generator or None, default 0
        Randomness of the draws, the folds and the classifier.
    progress : bool, default True
        Show a progress bar over the looks.

    Attributes
    ----------
    status : str
        Class attribute, ``"certified_lower_bound"``.
    epsilon_lb_ : float
        Largest certified bound over the pairs at the stopping time.
    certificates_ : xarray.Dataset
        Per pair (dim ``pair``): ``epsilon_lb`` (certified lower bound), ``ufpr``, ``ufnr``
        (anytime upper confidence bounds, ``certified_upper_bound``), ``test_fp``, ``test_fn``,
        ``n_test``, ``threshold``, ``direction``, ``dev_auc``.
    n_used_ : int
        Outputs drawn per identity in all: ``n_dev`` plus the test outputs drawn.
    n_test_ : int
        Test outputs drawn per identity.
    stop_reason_ : str
        ``"target_reached"``, ``"target_unreachable"`` or ``"max_samples"``.
    path_ : xarray.Dataset
        The certificate at every look: dim ``n`` (test outputs per identity; coordinate
        ``n_total`` adds ``n_dev``) and ``pair``; variables ``epsilon_lb`` (n, pair),
        ``epsilon_lb_max`` (n), ``ufpr``, ``ufnr``, ``test_fp``, ``test_fn`` (n, pair), and the
        attribute ``stop_reason``.
    classifiers_ : list of estimators
        The fixed classifier of each pair (fit on its development draws), on outputs with a
        failure flag appended (``d + 1`` features: ``[x, 0]``, or ``[0, ..., 0, 1]``).

    Notes
    -----
    **Why it is valid at every n.** For a fixed test (classifier and threshold chosen on
    development draws only), the test errors on fresh iid outputs are iid Bernoulli with the
    test's true FPR and FNR. :func:`~idaudit.dp.anytime_upper_bound` is a confidence sequence:
    with probability :math:`1 - \alpha'` the running upper bound stays above the true rate at
    *every* n. A union bound over the two rates of every pair makes all of them hold together
    with probability :math:`1 - \alpha`, and on that event Eq. 16 at the bounds is below the
    true ε(δ) at every n — in particular at any stopping time, however chosen. The bounds
    are made monotone by running minima (an intersection of confidence sets is one too).

    **Stopping.** ``target_reached``: the largest bound is at least ``target_epsilon``.
    ``target_unreachable``: for every pair, either even zero further errors up to
    ``max_samples`` cannot lift the bound to the target, or the target exceeds an *upper*
    confidence bound on the fixed test's population ε (Eq. 2 at the anytime *lower* bounds on
    both rates, at the same :math:`\alpha'`): the certificate of a test converges to that
    population value, so it would get there only on the α-probability event. Stopping early
    never affects validity. ``max_samples``: the budget is spent.

    **Threshold.** On development out-of-fold scores, both score directions and every
    midpoint between consecutive scores are tried. The bound *expected* at a planned size m
    puts the development error rates :math:`(k + 1/2)/(n + 1)`, as expected counts at m,
    through the anytime bound. Without a target the threshold maximising it at
    ``max_samples`` is kept; with one, the threshold whose expected bound first reaches the
    target at the smallest m (24 geometric steps up to ``max_samples``), ties to the larger
    bound at ``max_samples``, then to the larger TPR − FPR.

    References
    ----------
    .. [1] I. Waudby-Smith and A. Ramdas, "Estimating means of bounded random variables by
       betting", J. R. Stat. Soc. B 86(1), 2024.
    .. [2] T. González, M. Dulce-Rubio, A. Ramdas and M. Ribero, "Sequentially auditing
       differential privacy", NeurIPS 2025.
    .. [3] P. Kairouz, S. Oh and P. Viswanath, "The composition theorem for differential
       privacy", ICML 2015.

    Examples
    --------
    >>> import numpy as np
    >>> from idaudit.certify import SequentialCertifier
    >>> from idaudit.data import EmbeddingSet
    >>> from idaudit.mechanisms import LaplaceNoise
    >>> mech = LaplaceNoise(EmbeddingSet(np.array([[0.0], [1.0]]), ["a", "b"],
    ...                                  normalize=False), scale=0.5)   # true pure ε = 2
    >>> cert = SequentialCertifier(mech, [("a", "b")], target_epsilon=1.0, max_samples=5000,
    ...                            rng=0, progress=False).fit()
    >>> cert.stop_reason_, cert.n_test_, round(cert.epsilon_lb_, 3)
    ('target_reached', 250, 1.03)
    """

    _fitted: ClassVar[str] = "epsilon_lb_"
    _fit_call: ClassVar[str] = "fit()"
    _fitted_names = (
        "epsilon_lb_",
        "certificates_",
        "n_used_",
        "n_test_",
        "stop_reason_",
        "path_",
        "classifiers_",
    )
    _parameter_constraints: ClassVar[dict[str, Constraint]] = {
        "mechanism": MechanismLike(),
        "pairs": Anything(),  # checked against the mechanism's identities in fit
        "classifier": Classifier(("logistic",)),
        "alpha": Interval(0.0, 1.0),
        # every certificate is >= 0, so a target of 0 would be reached at once
        "target_epsilon": NoneOr(Interval(0.0, None)),
        "max_samples": Interval(1, integer=True),
        "n_dev": Interval(2, integer=True),
        "batch_size": Interval(1, integer=True),
        "delta": Interval(0.0, 1.0, closed="left"),
        "n_folds": Interval(2, integer=True),
        "rng": RandomState(),
        "progress": Boolean(),
    }

    def __init__(
        self,
        mechanism: Any,
        pairs: Sequence[tuple[Any, Any]],
        *,
        classifier: Any = "logistic",
        alpha: float = 0.05,
        target_epsilon: float | None = None,
        max_samples: int,
        n_dev: int = 100,
        batch_size: int = 50,
        delta: float = 0.0,
        n_folds: int = 5,
        rng: RngLike = 0,
        progress: bool = True,
    ) -> None:
        self.mechanism = mechanism
        self.pairs = pairs
        self.classifier = classifier
        self.alpha = alpha
        self.target_epsilon = target_epsilon
        self.max_samples = max_samples
        self.n_dev = n_dev
        self.batch_size = batch_size
        self.delta = delta
        self.n_folds = n_folds
        self.rng = rng
        self.progress = progress

    # ------------------------------------------------------------------------------ fit
    def fit(self) -> SequentialCertifier:
        """Fix the tests on a development draw, then sample test outputs until a stop rule fires.

        Returns
        -------
        self

        Raises
        ------
        InvalidInputError
            If a parameter is out of range, or a pair names an identity the mechanism does not
            know or the same identity twice.
        TypeError
            If ``mechanism`` lacks ``identities``/``sample`` or ``classifier`` is not a usable
            estimator.
        """
        self._forget()
        with thread_limit(1, pools="blas"):  # many small fits
            return self._fit()

    def _fit(self) -> SequentialCertifier:
        p = self._checked_params()
        mech = self.mechanism
        known = np.asarray(mech.identities).tolist()
        pairs = check_pairs(self.pairs, known, unknown="which the mechanism does not know")
        labels = list(dict.fromkeys(x for pair in pairs for x in pair))
        seed_dev, seed_test, seed_fit = spawn_seeds(check_random_state(self.rng), 3)
        dev_seeds = dict(zip(labels, spawn_seeds(seed_dev, len(labels)), strict=True))
        test_gens = {
            label: np.random.default_rng(s)
            for label, s in zip(labels, spawn_seeds(seed_test, len(labels)), strict=True)
        }
        fit_seeds = spawn_seeds(seed_fit, len(pairs))
        alpha_bound = p["alpha"] / (2 * len(pairs))
        dev = {label: _draw(mech, label, p["n_dev"], dev_seeds[label]) for label in labels}
        base = make_classifier(p["classifier"])

        plans: list[tuple[float, float, float]] = []  # (direction, threshold, dev AUC)
        fitted: list[Any] = []
        for (a, b), seed in zip(pairs, fit_seeds, strict=True):
            oof = oof_scores_of(base, dev[a], dev[b], p["n_folds"], seed)
            direction, tau, auc = _plan(
                oof[: p["n_dev"]],
                oof[p["n_dev"] :],
                p["max_samples"],
                alpha_bound,
                p["delta"],
                p["target_epsilon"],
            )
            plans.append((direction, tau, auc))
            fitted.append(fit_classifier(base, dev[a], dev[b], seed))

        n_pairs = len(pairs)
        fp = np.zeros(n_pairs, dtype=np.int64)
        fn = np.zeros(n_pairs, dtype=np.int64)
        ufpr = np.ones(n_pairs)
        ufnr = np.ones(n_pairs)
        looks: list[dict[str, Any]] = []
        n_test = 0
        reason = "max_samples"
        target = p["target_epsilon"]
        bar = tqdm(total=p["max_samples"], desc="sequential certificate", disable=not p["progress"])
        previous, warned = dev, False
        try:
            while n_test < p["max_samples"]:
                step = min(p["batch_size"], p["max_samples"] - n_test)
                draws = {label: _draw(mech, label, step, test_gens[label]) for label in labels}
                # each draw against the one before it (the development draw, then the last
                # test batch): consecutive draws of an honest mechanism never coincide
                if not warned:
                    warned = _warn_if_draws_repeat(previous, draws)
                previous = draws
                n_test += step
                for i, ((a, b), (direction, tau, _)) in enumerate(zip(pairs, plans, strict=True)):
                    fp[i] += int(np.count_nonzero(direction * score(fitted[i], draws[a]) >= tau))
                    fn[i] += int(np.count_nonzero(direction * score(fitted[i], draws[b]) < tau))
                # one vectorised call: the bounds now, the zero-further-error bounds at
                # max_samples, and the lower bounds (as upper bounds on the other outcome)
                counts = np.concatenate([fp, fn, fp, fn, n_test - fp, n_test - fn])
                sizes = np.repeat(
                    [n_test, n_test, p["max_samples"], p["max_samples"], n_test, n_test], n_pairs
                )
                u = np.asarray(anytime_upper_bound(counts, sizes, alpha_bound)).reshape(6, n_pairs)
                ufpr = np.minimum(ufpr, u[0])
                ufnr = np.minimum(ufnr, u[1])
                eps = np.asarray(epsilon_from_error_rates(ufpr, ufnr, p["delta"]), dtype=float)
                looks.append(
                    {
                        "n": n_test,
                        "eps": eps,
                        "ufpr": ufpr.copy(),
                        "ufnr": ufnr.copy(),
                        "fp": fp.copy(),
                        "fn": fn.copy(),
                    }
                )
                bar.update(step)
                if target is None:
                    continue
                if float(eps.max()) >= target:
                    reason = "target_reached"
                    break
                # best case: no further error until max_samples
                best = np.asarray(
                    epsilon_from_error_rates(
                        np.minimum(ufpr, u[2]), np.minimum(ufnr, u[3]), p["delta"]
                    )
                )
                # upper confidence bound on each fixed test's population epsilon
                ceiling = np.asarray(epsilon_from_error_rates(1.0 - u[4], 1.0 - u[5], p["delta"]))
                if n_test < p["max_samples"] and not np.any((best >= target) & (ceiling >= target)):
                    reason = "target_unreachable"
                    break
        finally:
            bar.close()

        attrs = self._attrs(p, alpha_bound, reason, len(pairs))
        self.path_ = _path_dataset(looks, pairs, p["n_dev"], attrs)
        self.certificates_ = _certificates_dataset(looks[-1], pairs, plans, p["n_dev"], attrs)
        self.epsilon_lb_ = float(looks[-1]["eps"].max())
        self.n_test_ = n_test
        self.n_used_ = p["n_dev"] + n_test
        self.stop_reason_ = reason
        self.classifiers_ = fitted
        return self

    # ------------------------------------------------------------------------ helpers
    def _checked_params(self) -> dict[str, Any]:
        p = validate_params(self.get_params(deep=False), self._parameter_constraints)
        # the rules that tie two parameters together
        if p["n_dev"] < 2 * p["n_folds"]:
            raise InvalidInputError(
                f"`n_dev` must be >= {2 * p['n_folds']} (two per fold for n_folds="
                f"{p['n_folds']}); got {p['n_dev']!r}."
            )
        if p["max_samples"] < p["batch_size"]:
            raise InvalidInputError(
                f"`max_samples` must be >= {p['batch_size']} (batch_size); "
                f"got {p['max_samples']!r}."
            )
        return p

    def _attrs(self, p: dict[str, Any], alpha_bound: float, reason: str, n_pairs: int) -> Any:
        clf = (
            p["classifier"] if isinstance(p["classifier"], str) else type(p["classifier"]).__name__
        )
        attrs = provenance(
            title="anytime-valid sequential certificate (idaudit.certify.SequentialCertifier)",
            seeds={"rng": seed_of(self.rng)},
            settings={
                "alpha": p["alpha"],
                "alpha_per_bound": alpha_bound,
                "delta": p["delta"],
                "n_dev": p["n_dev"],
                "batch_size": p["batch_size"],
                "max_samples": p["max_samples"],
                "target_epsilon": p["target_epsilon"],
                "n_folds": p["n_folds"],
                "classifier": clf,
                "mechanism": repr(self.mechanism),
            },
        )
        attrs["status"] = "certified_lower_bound"
        attrs["stop_reason"] = reason
        attrs["confidence"] = (
            f"with probability >= {1 - p['alpha']:g} jointly over all {n_pairs} pair(s), both "
            "error rates (union bound) and every sample size, every epsilon_lb is at most its "
            "pair's true epsilon(delta)"
        )
        return attrs


# -- development side -------------------------------------------------------------------------


def _warn_if_draws_repeat(
    before: dict[Any, FloatArray], test: dict[Any, FloatArray]
) -> bool:
    """Warn when an identity's test draw repeats the draw before it row for row.

    ``before`` is the development draw (for the first test batch) or the previous test
    batch: the two come from different seeds or from further along one generator. A
    mechanism whose outputs vary within a draw but come out the same, in the same order,
    again ignores its ``rng`` (it reseeds itself, from ``n`` say, or replays a fixed list),
    so the test rows repeat earlier rows and the certificate's independence assumption
    fails. A constant mechanism (one value repeated) repeats itself legitimately and is not
    counted. Return whether it warned.
    """
    repeated = []
    for label, rows in test.items():
        m = min(len(rows), len(before[label]))
        first = before[label][:m]
        varies = m > 1 and bool(np.any(first != first[0]))
        if varies and np.array_equal(rows[:m], first):
            repeated.append(label)
    if repeated:
        warnings.warn(
            f"{len(repeated)} of the {len(test)} identities ({', '.join(map(repr, repeated[:5]))}"
            f"{', ...' if len(repeated) > 5 else ''}) gave the same outputs, row for row, to "
            "a test draw and the draw before it, which use different random streams: the "
            "mechanism's sample() seems to ignore its rng, so the test rows are not fresh "
            "draws and the certificate does not hold. Make sample() draw from the rng it is "
            "given.",
            IdauditWarning,
            stacklevel=4,  # _warn_if_draws_repeat <- _fit <- fit <- the caller
        )
    return bool(repeated)


def _draw(mech: Any, label: Any, n: int, rng: Any) -> FloatArray:
    """``n`` outputs as ``[x, 0]``, a failed output (an all-NaN row) as the atom ``[0, 1]``.

    Failures are outputs of the mechanism: the tests see them and the counts include them,
    so the certificate holds for the mechanism as run (docs/certify.md, "Failed rows").
    """
    out = np.asarray(mech.sample(label, n, rng=rng), dtype=np.float64)
    if out.ndim != 2 or out.shape[0] != n:
        raise InvalidInputError(
            f"the mechanism must return {n} rows (shape (n, d)) for identity {label!r}; "
            f"got shape {out.shape}."
        )
    failed = np.isnan(out).all(axis=1)
    bad = np.flatnonzero(~failed & ~np.isfinite(out).all(axis=1))
    if bad.size:
        raise InvalidInputError(
            f"the mechanism returned {bad.size} row(s) for identity {label!r} that are neither "
            f"finite nor all-NaN (a failed output), first row {int(bad[0])}: "
            f"{out[bad[0]].tolist()[:4]}."
        )
    x = np.zeros((n, out.shape[1] + 1))
    x[~failed, :-1] = out[~failed]
    x[failed, -1] = 1.0
    return x


def _plan(
    sa: FloatArray,
    sb: FloatArray,
    n_plan: int,
    alpha_bound: float,
    delta: float,
    target: float | None = None,
) -> tuple[float, float, float]:
    """Direction, threshold and development AUC of the test to fix (see the class Notes).

    Without a target: maximise the bound expected at ``n_plan``. With one: minimise the planned
    sample size at which the expected bound first reaches it (on a geometric grid up to
    ``n_plan``), ties to the larger bound expected at ``n_plan``.
    """
    n_a, n_b = len(sa), len(sb)
    grid = np.unique(np.geomspace(min(10, n_plan), n_plan, 24).round())  # (g,) planned sizes
    # the expected bound depends on a cut only through its development error counts, so the
    # anytime bounds are computed once per possible count: (g, n_a + 1) and (g, n_b + 1)
    rate_a = (np.arange(n_a + 1) + 0.5) / (n_a + 1.0)  # development rates, kept off 0
    rate_b = (np.arange(n_b + 1) + 0.5) / (n_b + 1.0)
    u_a = np.asarray(anytime_upper_bound(grid[:, None] * rate_a, grid[:, None], alpha_bound))
    u_b = np.asarray(anytime_upper_bound(grid[:, None] * rate_b, grid[:, None], alpha_bound))
    best: tuple[float, float, float, float, float] | None = None
    for c in threshold_cuts(sa, sb):
        expected = np.asarray(  # (g, c): the bound expected at each planned size
            epsilon_from_error_rates(u_a[:, c.fp], u_b[:, n_b - c.tp], delta)
        )
        at_plan = expected[-1]  # (c,)
        if target is None:
            first = np.zeros_like(at_plan)
        else:  # planned size at which the target is first reached (inf: never)
            reached = expected >= target
            first = np.where(reached.any(axis=0), grid[reached.argmax(axis=0)], np.inf)
        i = int(np.lexsort((c.youden, at_plan, -first))[-1])
        cand = (
            -float(first[i]),
            float(at_plan[i]),
            float(c.youden[i]),
            c.direction,
            c.threshold(i),
        )
        if best is None or cand[:3] > best[:3]:
            best = cand
    if best is None:  # every development score equal: a test that never predicts b
        return 1.0, math.inf, 0.5
    direction, tau = best[3], best[4]
    return direction, tau, auc(direction * sa, direction * sb)


# -- results ---------------------------------------------------------------------------------

#: The anytime bounds and test error counts of the path and of the certificates: their name,
#: their key in a look, long name and status.
_TEST_VARIABLES: tuple[tuple[str, str, str, Status], ...] = (
    ("ufpr", "ufpr", "anytime upper confidence bound on the FPR", "certified_upper_bound"),
    ("ufnr", "ufnr", "anytime upper confidence bound on the FNR", "certified_upper_bound"),
    ("test_fp", "fp", "test rows of identity_a predicted as identity_b", "descriptive"),
    ("test_fn", "fn", "test rows of identity_b predicted as identity_a", "descriptive"),
)


def _test_variables(
    dims: str | tuple[str, ...], values: Callable[[str], Any], n_pairs: int, counted: str = ""
) -> dict[str, xr.Variable]:
    """Return the anytime bounds and error counts (``counted`` ends the counts' long names)."""
    out = {}
    for name, key, long_name, status in _TEST_VARIABLES:
        if status == "descriptive":
            out[name] = variable(dims, values(key), long_name=long_name + counted, status=status)
        else:  # all pairs' bounds hold jointly (union bound)
            out[name] = variable(
                dims, values(key), long_name=long_name, status=status, n_simultaneous=n_pairs
            )
    return out


def _path_dataset(
    looks: list[dict[str, Any]], pairs: list[tuple[Any, Any]], n_dev: int, attrs: Any
) -> xr.Dataset:
    n = np.asarray([look["n"] for look in looks], dtype=np.int64)

    def stack(key: str) -> Any:
        return np.stack([look[key] for look in looks])  # (looks, pairs)

    eps = stack("eps")
    coords: dict[str, Any] = dict(pair_coords(pairs, [n_dev] * len(pairs), [n_dev] * len(pairs)))
    coords["n"] = ("n", n, {"long_name": "test outputs drawn per identity"})
    coords["n_total"] = (
        "n",
        n + n_dev,
        {"long_name": "outputs drawn per identity, development included"},
    )
    ds = xr.Dataset(
        {
            "epsilon_lb": variable(
                ("n", "pair"),
                eps,
                long_name="certified lower bound on epsilon (Eq. 16 at anytime bounds)",
                status="certified_lower_bound",
                n_simultaneous=len(pairs),  # all pairs' bounds hold jointly (union bound)
            ),
            "epsilon_lb_max": variable(
                "n",
                eps.max(axis=1),
                long_name="largest certified lower bound over the pairs",
                **reduction_attrs(
                    {"status": "certified_lower_bound", "n_simultaneous": len(pairs)}, len(pairs)
                ),
            ),
            **_test_variables(("n", "pair"), stack, len(pairs), " so far"),
        },
        coords=coords,
        attrs=dict(attrs),
    )
    return ds


def _certificates_dataset(
    last: dict[str, Any],
    pairs: list[tuple[Any, Any]],
    plans: list[tuple[float, float, float]],
    n_dev: int,
    attrs: Any,
) -> xr.Dataset:
    n_test = int(last["n"])
    k = len(pairs)
    data = {
        "epsilon_lb": variable(
            "pair",
            last["eps"],
            long_name="certified lower bound on epsilon at the stopping time",
            status="certified_lower_bound",
            n_simultaneous=len(pairs),  # all pairs' bounds hold jointly (union bound)
        ),
        **_test_variables("pair", last.__getitem__, len(pairs)),
        "n_test": variable(
            "pair", np.full(k, n_test), long_name="test outputs per identity", status="descriptive"
        ),
        "threshold": variable(
            "pair",
            # the test applied is direction * score >= tau: as a threshold on the score
            # itself (the direction's rule below) that is direction * tau
            [d * t for d, t, _ in plans],
            long_name="score threshold chosen on development draws (applied as direction says)",
            status="diagnostic",
        ),
        "direction": variable(
            "pair",
            [int(d) for d, _, _ in plans],
            long_name="+1: predict identity_b when score >= threshold; -1: when <=",
            status="diagnostic",
        ),
        "dev_auc": variable(
            "pair",
            [auc for _, _, auc in plans],
            long_name="development out-of-fold ROC AUC",
            status="diagnostic",
        ),
    }
    coords = pair_coords(pairs, [n_dev + n_test] * k, [n_dev + n_test] * k)
    ds = xr.Dataset(data, coords=coords, attrs=dict(attrs))
    ds.attrs["epsilon_lb"] = float(np.max(last["eps"]))
    return ds
