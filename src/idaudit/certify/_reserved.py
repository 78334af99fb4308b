"""Reserved-test ROC certificates (seed 000, Section 4.3)."""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

import numpy as np
import numpy.typing as npt

from idaudit._device import thread_limit
from idaudit._results import provenance
from idaudit._validation import (
    Boolean,
    Classifier,
    Constraint,
    IntegerOrOption,
    Interval,
    Options,
    RandomState,
    RngLike,
    check_in_range,
    check_integer,
    check_pairs,
    check_random_state,
    spawn_seeds,
)
from idaudit.certify._base import (
    CLASSIFIERS,
    BaseCertifier,
    auc,
    fit_classifier,
    make_classifier,
    score,
)
from idaudit.certify._reserved_results import (
    _CURVE_LONG_NAMES,
    _candidates_dataset,
    _certificates_dataset,
)
from idaudit.certify._reserved_select import (
    _min_test_rows,
    _Plan,
    _select,
    _zero_error_bound,
)
from idaudit.certify._scores import certify_scores, seed_of
from idaudit.data import (
    DUPLICATES,
    NEAR_DUPLICATE_RTOL,
    EmbeddingSet,
    all_pairs,
    sample_pairs,
    split_identities,
    split_min_rows,
)
from idaudit.data._splits import n_test_rows, smallest_n
from idaudit.dp import epsilon_from_error_rates, epsilon_from_tradeoff
from idaudit.exceptions import IdauditWarning, InvalidInputError

__all__ = ["ReservedTestCertifier"]

FloatArray = npt.NDArray[np.float64]

_THRESHOLD_RULE = (
    "maximise, over development out-of-fold scores, the Eq. 16 bound obtained by substituting "
    "Clopper-Pearson upper bounds at the reserved test sizes for test error counts equal to "
    "their development estimates (k + 0.5)/(n + 1); both score directions; ties to the larger "
    "development TPR - FPR"
)
#: δ values of ``epsilon_lb_curve`` by default (the fit's own ``delta`` is added).
DEFAULT_DELTAS: tuple[float, ...] = (0.0, 1e-8, 1e-6, 1e-5, 1e-4, 1e-3, 1e-2, 0.05, 0.1)
TEST_THRESHOLDS: tuple[str, ...] = ("dev", "bonferroni", "band")

_RANKING_KEY = (
    "development-expected certified bound, then development out-of-fold AUC, then "
    "standardised development margin, then candidate order"
)


class _Deltas:
    """Constraint: a non-empty sequence of δ values in [0, 1), or None (the default grid)."""

    def check(self, value: Any, name: str) -> Any:
        if value is None:
            return None
        try:
            arr = np.asarray(value, dtype=np.float64).ravel()
        except (TypeError, ValueError) as exc:
            raise InvalidInputError(
                f"`{name}` must be a sequence of numbers; got {value!r}."
            ) from exc
        if arr.size == 0 or not np.all((arr >= 0.0) & (arr < 1.0)):
            raise InvalidInputError(
                f"`{name}` must hold at least one delta, each in [0, 1); got {arr.tolist()!r}."
            )
        return tuple(float(v) for v in arr)

    def invalid(self) -> tuple[Any, ...]:
        """Values this constraint refuses."""
        return ((), (1.0,), (-0.1,), "x")


class ReservedTestCertifier(BaseCertifier):
    r"""Certified ε lower bounds from a classifier evaluated once on reserved test data.

    The protocol of seed 000, Section 4.3: every adaptive choice (which pairs, which
    threshold, which classifier fit) uses a development split only; fixed classifiers and
    thresholds are then evaluated exactly once on an untouched test split, and exact one-sided
    confidence bounds on the two test error rates give a simultaneous certificate.

    Status: ``certified_lower_bound`` (the class attribute :attr:`status`, also shown in the
    repr) — with probability at least :math:`1-\alpha` (jointly over the ``n_select`` pairs, and
    over ``n_families`` conditions certified together), every reported ``epsilon_lb``, and
    hence ``epsilon_lb_``, is at most the true ε(δ) of its pair, assuming each identity's rows
    are iid draws from its output distribution (with ``duplicates="collapse"``: its distinct
    rows are) and the candidate ``pairs`` were fixed without looking at the rows (see
    :meth:`fit`).

    Parameters
    ----------
    test_size : float, default 0.3
        Fraction of each identity's rows reserved for the test split, in (0, 1).
    duplicates : {"keep", "collapse"}, default "keep"
        What an exact-duplicate row of an identity is (see Notes). ``"keep"``: a draw of its
        own — the mechanism repeated an output — so rows are split and counted one by one.
        ``"collapse"``: a repeated record of one draw (the same output stored or encoded
        twice), so each group of duplicates is one row on one side of the split and one
        trial in the Clopper–Pearson counts.
    n_candidates : int or "all", default 100
        How many pairs, from the start of ``pairs``, are scored on the development split.
        ``"all"``: every unordered pair of ``es.identities`` (complete adjacency; ``pairs``
        must be None), scored by the batched logistic regression of
        :func:`idaudit.audits.logistic_oof_logits` — the same folds and the exact optimum
        of the ``LogisticRegression`` that ``"logistic"`` fits pair by pair (which stops at
        lbfgs' tolerance), so the selection considers every pair the data can certify.
        Needs ``classifier="logistic"``.
    n_select : int, default 5
        How many vertex-disjoint pairs are certified. When the candidates allow fewer (a
        condition of 8 identities has at most 4 disjoint pairs; greedy selection on the
        development rows can find fewer still), :meth:`fit` certifies the ones there are,
        warns, and records ``n_select`` (pairs certified, the union bound's count) and
        ``n_select_requested`` in the attrs.
    alpha : float, default 0.05
        Family-wise error level in (0, 1) of the whole family of certificates.
    n_families : int, default 1
        Number of conditions certified together under one union bound (8 in the paper); each
        error-rate bound is taken at :math:`\alpha/(n_\text{families} \cdot n_\text{select}
        \cdot 2)`.
    delta : float, default 0.0
        The δ of the guarantee being refuted, in [0, 1); 0 certifies pure DP.
    test_thresholds : {"dev", "bonferroni", "band"}, default "dev"
        Which thresholds of each selected pair's fixed classifier the test split certifies
        (:func:`~idaudit.certify.certify_scores`). ``"dev"``: the one threshold chosen on
        development data (seed 000; one trade-off point per pair). ``"bonferroni"``: every
        threshold, Clopper–Pearson at a level divided by the test rows; ``"band"``: every
        threshold, an exact simultaneous band on the two test-score distributions (tighter
        than Bonferroni). The last two certify a trade-off curve per pair rather than a point,
        at the same α per pair (α / (n_families · n_select)), and report the threshold that is
        best at ``delta``.
    deltas : sequence of float, optional
        δ values of the ``epsilon_lb_curve`` variable, each in [0, 1). Default
        :data:`DEFAULT_DELTAS`; ``delta`` is always added.
    classifier : {"logistic", "random_forest"} or estimator, default "logistic"
        ``"logistic"``: scikit-learn ``LogisticRegression(C=1.0, solver="lbfgs",
        max_iter=1000)``, as in the paper. ``"random_forest"``: ``RandomForestClassifier``
        with 100 trees. Any other scikit-learn-style binary classifier (it needs ``get_params``
        so that :func:`sklearn.base.clone` can copy it) is cloned for every fit; it scores with
        ``decision_function`` if it has one, else with ``predict_proba(X)[:, 1]``. Every
        ``random_state`` parameter of a fit, at any depth of ``get_params(deep=True)`` (e.g.
        inside a ``Pipeline``), is set from ``rng``, replacing any value it had.
    n_folds : int, default 5
        Stratified folds for the development out-of-fold scores.
    rng : int, numpy.random.SeedSequence, numpy.random.Generator or None, default 0
        Randomness of the split, the folds and the classifiers.
    progress : bool, default True
        Show a progress bar over the candidate pairs.

    Attributes
    ----------
    status : str
        Class attribute, ``"certified_lower_bound"``: the formal status of ``epsilon_lb_`` and
        of the ``epsilon_lb`` variable of :attr:`certificates_` (see docs/status.md).
    certificates_ : xarray.Dataset
        One entry per selected pair (dim ``pair``, in selection order); variables listed in
        :meth:`fit`.
    epsilon_lb_ : float
        The largest certified lower bound — status ``certified_lower_bound``, at the joint
        confidence :math:`1-\alpha` stated above (what the certificate says about the
        mechanism: identity-level DP must hold for every pair, so each pair's bound refutes
        any smaller mechanism-wide ε). It is 0 when no pair could be certified above 0.
    epsilon_lb_curve_ : xarray.DataArray
        Dim ``delta``: the largest certified ε at every δ of ``deltas`` — status
        ``certified_lower_bound``, all δ and pairs at once (the same joint event: the
        certified trade-off points of every pair hold together).
    test_scores_ : list of (numpy.ndarray, numpy.ndarray)
        Each selected pair's test scores, oriented so that a larger score means identity_b
        (diagnostic; what the certificates were computed from).
    candidates_ : xarray.Dataset
        The development ranking of every candidate pair (diagnostic only).
    classifiers_ : list of estimators
        The fitted classifier of each selected pair (fit on all of its development rows).

    Notes
    -----
    For a test with error rates FPR, FNR an (ε, δ)-DP pair must satisfy seed 000, Eq. 2. With
    one-sided Clopper–Pearson upper bounds UFPR, UFNR at level
    :math:`\alpha' = \alpha/(n_\text{families}\, n_\text{select}\, 2)` (Section 4.3, a union
    bound over two rates, ``n_select`` pairs and ``n_families`` conditions; no independence
    needed), Eq. 16 gives

    .. math:: \varepsilon_{LB}(\delta) = \max\Big\{0,\ \ln\frac{1-\delta-\mathrm{UFPR}}
              {\mathrm{UFNR}},\ \ln\frac{1-\delta-\mathrm{UFNR}}{\mathrm{UFPR}}\Big\}.

    Choices the paper leaves open, made here:

    * **Split** — each identity's rows are split once with
      :func:`idaudit.data.split_identities` (only identities of the candidate pairs): a
      uniformly random subset of the rows, chosen without looking at their values, so iid
      rows give an iid test sample independent of the development rows.
    * **Exact duplicates** (rows the audits cannot tell apart, ``n_duplicates``) fit one of
      two models, and the certificate holds under the one chosen. ``"keep"`` (the default):
      the mechanism repeats outputs (atoms: a quantised encoder, a generator that falls back
      to one output, :class:`~idaudit.pipeline.EncodedGenerator` with a deterministic
      generator); every row is a draw, split and counted like any other, and a copy of a
      development row on the test side is a fresh draw that happens to repeat a value.
      ``"collapse"``: copies are repeated records of one draw; only the first row of each
      group is used, on both sides and in the counts — otherwise a copy of a development row
      on the test side lets a classifier that memorised it (a random forest, a nearest
      neighbour) certify ε > 0 between identical distributions, and copies on the test side
      inflate the number of trials. Keeping copies together but counting each is valid
      under neither model: under the first the values steer the split (a frequent output
      never fits the test quota, so the test sample misses it), under the second the counts
      are too large.
    * **Scores** — out-of-fold scores from ``n_folds`` stratified folds on the development
      rows of the pair; ``decision_function`` where available (logits for logistic
      regression, which do not saturate as probabilities do).
    * **Threshold rule** (goes beyond the paper) — not the raw empirical ratio, which favours
      extreme thresholds whose few errors the Clopper–Pearson penalty then punishes; instead
      the threshold and score direction that maximise the bound *expected after* the penalty:
      the development error rate is estimated as :math:`(k + 1/2)/(n + 1)` (so zero development
      errors do not promise zero test errors), scaled to the known test size :math:`m` as an
      expected count :math:`\hat k = m\,\hat p`, turned into
      :math:`\mathrm{Beta}^{-1}(1-\alpha'; \hat k+1, m-\hat k)` and substituted into Eq. 16.
      Only development scores and the test *sizes* (fixed by the split, not by test values)
      enter, so the test evaluation stays untouched and the guarantee is unaffected. The
      threshold is the midpoint between consecutive development scores.
    * **Ranking key** — the same development-expected bound, then the out-of-fold AUC, then
      the standardised margin between the two classes' scores, then the order in ``pairs``.
    * **Selection** — greedy in rank order, skipping any pair that shares an identity with one
      already chosen (Section 4.3); this spreads the evidence over identities and is not needed
      for the union bound.

    References
    ----------
    .. [1] P. Kairouz, S. Oh and P. Viswanath, "The composition theorem for differential
       privacy", ICML 2015.
    .. [2] C. J. Clopper and E. S. Pearson, "The use of confidence or fiducial limits
       illustrated in the case of the binomial", Biometrika 26(4), 1934.

    Examples
    --------
    >>> import numpy as np
    >>> from idaudit import EmbeddingSet, ReservedTestCertifier
    >>> gen = np.random.default_rng(0)
    >>> centres = gen.normal(size=(6, 8))
    >>> x = np.repeat(centres, 60, axis=0) + 0.3 * gen.normal(size=(360, 8))
    >>> es = EmbeddingSet(x, np.repeat(np.arange(6), 60))
    >>> cert = ReservedTestCertifier(n_select=3, rng=0, progress=False).fit(es)
    >>> cert.certificates_.sizes["pair"]
    3
    >>> cert.epsilon_lb_ > 0
    True
    """

    _fitted = "certificates_"
    _fit_call = "fit(es)"
    _fitted_names = (
        "certificates_",
        "epsilon_lb_",
        "epsilon_lb_curve_",
        "candidates_",
        "classifiers_",
        "test_scores_",
    )
    _parameter_constraints: ClassVar[dict[str, Constraint]] = {
        "test_size": Interval(0.0, 1.0),
        "duplicates": Options(DUPLICATES),
        "n_candidates": IntegerOrOption(("all",), minimum=1),
        "n_select": Interval(1, integer=True),
        "alpha": Interval(0.0, 1.0),
        "n_families": Interval(1, integer=True),
        "delta": Interval(0.0, 1.0, closed="left"),
        "test_thresholds": Options(TEST_THRESHOLDS),
        "deltas": _Deltas(),
        "classifier": Classifier(CLASSIFIERS),
        "n_folds": Interval(2, integer=True),
        "rng": RandomState(),
        "progress": Boolean(),
    }

    def __init__(
        self,
        *,
        test_size: float = 0.3,
        duplicates: Literal["keep", "collapse"] = "keep",
        n_candidates: int = 100,
        n_select: int = 5,
        alpha: float = 0.05,
        n_families: int = 1,
        delta: float = 0.0,
        test_thresholds: Literal["dev", "bonferroni", "band"] = "dev",
        deltas: Sequence[float] | None = None,
        classifier: Any = "logistic",
        n_folds: int = 5,
        rng: RngLike = 0,
        progress: bool = True,
    ) -> None:
        self.test_size = test_size
        self.duplicates = duplicates
        self.n_candidates = n_candidates
        self.n_select = n_select
        self.alpha = alpha
        self.n_families = n_families
        self.delta = delta
        self.test_thresholds = test_thresholds
        self.deltas = deltas
        self.classifier = classifier
        self.n_folds = n_folds
        self.rng = rng
        self.progress = progress

    def min_rows(self) -> int:
        """Fewest rows an identity of a candidate pair needs with the current parameters.

        The identity must be splittable (at least 2 rows on each side, see
        :func:`idaudit.data.split_identities`) and leave at least ``n_folds`` development rows
        (one per fold). With ``duplicates="collapse"`` these are distinct rows.

        Returns
        -------
        int

        Raises
        ------
        InvalidInputError
            If ``test_size`` or ``n_folds`` is out of range.

        Examples
        --------
        >>> from idaudit import ReservedTestCertifier
        >>> ReservedTestCertifier().min_rows()  # 7 rows: 2 test rows, 5 development rows
        7
        >>> ReservedTestCertifier(n_folds=2).min_rows()
        4
        """
        test_size = check_in_range(self.test_size, "test_size", 0.0, 1.0)
        n_folds = check_integer(self.n_folds, "n_folds", minimum=2)
        return split_min_rows(test_size, n_folds)

    # -- fitted attributes ------------------------------------------------------------------
    @property
    def alpha_per_bound_(self) -> float:
        """Level of each one-sided Clopper–Pearson bound, α / (n_families · n_select · 2)."""
        return float(self.certificates_.attrs["alpha_per_bound"])

    def fit(self, es: EmbeddingSet, pairs: Sequence[tuple[Any, Any]] | None = None) -> Any:
        r"""Split, select on development data, evaluate once on the reserved test data.

        Parameters
        ----------
        es : EmbeddingSet
            Embeddings and identity labels of one condition.
        pairs : sequence of (label, label), optional
            Candidate pairs in priority order; the first ``n_candidates`` are scored. The list
            and its order must be fixed **without looking at** ``es``: the order decides which
            pairs are cut at ``n_candidates`` and breaks ranking ties, so a list ordered by
            audits of these same rows (``audit_pairs`` on ``es``, which sees the test rows)
            lets the test split leak into selection and voids the guarantee. Use
            :func:`idaudit.data.sample_pairs`, or rank pairs on other data (another condition,
            or rows never passed to this certifier). Default:
            ``sample_pairs(es.identities, n_candidates, rng=rng)`` (or all pairs, if fewer), so
            with an integer ``rng`` the certifier scores the same common first pairs as
            ``audit_pairs`` on ``sample_pairs(es.identities, n, rng=rng)`` (seed 000, §4.3).
            With a ``Generator`` the pair list is drawn from it. The attribute
            ``candidate_pairs`` of the results records ``"default"`` or ``"given"``.

        Returns
        -------
        self
            With :attr:`certificates_`, a Dataset over the selected pairs (dim ``pair``,
            coords ``identity_a``, ``identity_b``, ``n_a``, ``n_b``, the rows per identity in
            ``es``) holding ``n_dev_a``, ``n_dev_b``, ``n_test_a``, ``n_test_b``,
            ``test_fp`` (test rows of ``identity_a`` predicted as ``identity_b``), ``test_fn``,
            ``test_fpr``, ``test_fnr``, ``ufpr``, ``ufnr`` (the one-sided upper bounds),
            ``test_auc``, ``epsilon_lb`` (status ``certified_lower_bound``), ``epsilon_lb_ceiling``
            (what zero test errors would certify at the pair's test sizes: no data can
            certify more, so a value at it says the test size, not the pipeline, is the
            limit), ``threshold``,
            ``direction`` (+1: predict ``identity_b`` when the score is ≥ ``threshold``;
            -1: when ≤), ``dev_auc``, ``dev_expected_epsilon`` and ``rank``. Its attrs hold
            the settings (``duplicates`` among them), ``n_duplicates`` (exact-duplicate rows
            among the candidate identities, counted before any collapsing; with
            ``"collapse"`` the ``n_dev_*`` and ``n_test_*`` sizes count draws, while ``n_a``,
            ``n_b`` stay the rows in ``es``), ``candidate_pairs`` and
            ``min_test_rows_for_nonzero`` (fewest test rows per identity at which zero test
            errors certify more than 0).

        Raises
        ------
        InvalidInputError
            If a parameter is out of range, a pair names an unknown identity or the same one
            twice, an identity is too small to split or to fold (the message names it and its
            count). No fitted attribute is left behind after an error.
        TypeError
            If ``es`` is not an :class:`~idaudit.data.EmbeddingSet` or ``classifier`` is not
            a usable estimator (no ``fit``, no scoring method, or not clonable).

        Warns
        -----
        IdauditWarning
            With ``duplicates="keep"``, when the candidate identities hold exact-duplicate rows
            (with their number): they were split and counted as separate draws, which is wrong
            if they are copies of one draw (then pass ``duplicates="collapse"``).
        IdauditWarning
            When a selected pair has so few reserved test rows that even zero test errors
            certify 0 (the message names the test sizes and the minimum needed): with zero
            errors both bounds are :math:`1 - \alpha'^{1/m}`, and Eq. 16 exceeds 0 only when
            :math:`m > \ln\alpha' / \ln((1 + \delta)/2)` test rows per identity (11 at the
            paper's :math:`\alpha' = 0.05/80`, δ = 0). The attribute
            ``min_test_rows_for_nonzero`` records that minimum.
        IdauditWarning
            When fewer than ``n_select`` vertex-disjoint pairs can be certified: the
            candidates involve fewer than ``2 n_select`` identities, or greedy selection in
            rank order finds fewer. The pairs there are are certified.
        """
        self._forget()
        # many small per-pair fits: multi-threaded BLAS only adds overhead (10x on 2 cores)
        with thread_limit(1, pools="blas"):
            return self._fit(es, pairs)

    def _fit(self, es: EmbeddingSet, pairs: Sequence[tuple[Any, Any]] | None) -> Any:
        if not isinstance(es, EmbeddingSet):
            raise TypeError(f"`es` must be an idaudit.EmbeddingSet; got {type(es).__name__}.")
        p = self._checked_params()
        n_failed = int(es.n_failed_)
        given = es
        if p["duplicates"] == "collapse":  # near copies are copies too (docs/certify.md)
            es = es.merge_near_duplicates()
        successes, split_duplicates = es, p["duplicates"]
        if n_failed:  # failures are outputs: split, classify and count them as an atom
            # repeated records collapse among the successful rows only: every failure is a
            # draw of its own, however alike the atoms look
            outputs = es.drop_duplicates() if split_duplicates == "collapse" else es
            es, split_duplicates = outputs.as_outputs(), "keep"
        seed_split, seed_pairs, seed_folds = spawn_seeds(check_random_state(self.rng), 3)
        pairs_given = pairs is not None
        every = p["n_candidates"] == "all"
        candidates = self._candidates(es, pairs, p, seed_pairs)
        identities = list(dict.fromkeys(label for pair in candidates for label in pair))
        if n_failed and p["duplicates"] == "collapse":
            _refuse_repeated_failures(successes, identities)
        _fit_n_select(p, len(candidates), len(identities))
        pool = es.subset(identities)
        dev, test = split_identities(
            pool, test_size=p["test_size"], rng=seed_split, duplicates=split_duplicates
        )
        n_duplicates = (
            _successful_duplicates(successes, identities) if n_failed else pool.n_duplicates_
        )
        known = [label for label in identities if label in given]
        n_near = given.subset(known).near_duplicates() if known else 0
        if (n_duplicates or n_near) and p["duplicates"] == "keep":
            near = (
                f" and {n_near} are near copies of one (every coordinate within "
                f"{NEAR_DUPLICATE_RTOL:g} relative, which distinct draws of a continuous law "
                "do not come)"
                if n_near
                else ""
            )
            warnings.warn(
                f"{n_duplicates} of the {len(pool)} rows of the {len(identities)} "
                "candidate identities are exact duplicates of an earlier row of the same "
                f"identity{near}; they were split and counted as separate draws, which is "
                "right when the mechanism repeats outputs. If they are copies of one draw (an "
                "output stored or encoded twice, perhaps with a little noise), pass "
                "duplicates='collapse'.",
                IdauditWarning,
                stacklevel=3,  # _fit -> fit -> the caller
            )
        _check_dev_rows(identities, es, dev, test, p["n_folds"])
        # the per-bound level for planning: Bonferroni over the pairs the candidates allow
        alpha_bound = p["alpha"] / (p["n_families"] * p["n_select"] * 2)
        fold_seeds = spawn_seeds(seed_folds, len(candidates))
        base = self._base_classifier()

        # select: development data only
        plans, order, chosen = _select(
            candidates,
            dev,
            test,
            base,
            fold_seeds,
            alpha_bound,
            p,
            progress=self.progress,
            batched=every,
        )
        if len(chosen) < p["n_select"]:
            alpha_bound = _fewer_selected(p, len(chosen), len(candidates))
        min_test = _min_test_rows(alpha_bound, p["delta"], p["test_thresholds"])
        self._warn_if_zero_ceiling(
            [(test.counts[candidates[i][0]], test.counts[candidates[i][1]]) for i in chosen],
            p,
            alpha_bound,
            min_test,
        )
        # evaluate: each selected pair's fixed classifier and threshold, once, on its test rows
        deltas = np.unique(np.append(p["deltas"] or DEFAULT_DELTAS, p["delta"]))
        rows, fitted = _evaluate(
            [candidates[i] for i in chosen],
            [plans[i] for i in chosen],
            [fold_seeds[i] for i in chosen],
            [order.index(i) for i in chosen],
            es,
            dev,
            test,
            base,
            _TestRule(alpha_bound, p["delta"], p["test_thresholds"], deltas),
        )
        # assemble, and assign only now, so an error above never leaves partial results behind
        attrs = self._attrs(
            p, alpha_bound, len(candidates), es, n_duplicates, pairs_given, min_test
        )
        attrs["n_near_duplicates"] = n_near
        attrs.update(_failure_attrs(es, n_failed))
        if every:  # every pair of the condition, in lexicographic order
            attrs.update(candidate_pairs="all", n_candidates="all")
        # Bonferroni over n_select pairs (and n_families conditions): all hold jointly
        certificates = _certificates_dataset(rows, attrs, p["n_select"] * p["n_families"], deltas)
        if p["test_thresholds"] != "dev":  # the reported point is the test scores' best
            for name, text in _CURVE_LONG_NAMES.items():
                certificates[name].attrs["long_name"] = text.format(p["test_thresholds"])
        certificates.attrs["test_thresholds"] = p["test_thresholds"]
        epsilon_lb = float(certificates["epsilon_lb"].max())
        certificates.attrs["epsilon_lb"] = epsilon_lb
        curve = certificates["epsilon_lb_curve"].max("pair")
        curve.attrs = dict(certificates["epsilon_lb_curve"].attrs)
        self.certificates_ = certificates
        self.epsilon_lb_ = epsilon_lb
        self.epsilon_lb_curve_ = curve.rename("epsilon_lb_curve")
        self.test_scores_ = [(r.pop("_scores_a"), r.pop("_scores_b")) for r in rows]
        self.candidates_ = _candidates_dataset(
            candidates, plans, order, chosen, es, dev, test, attrs
        )
        self.classifiers_ = fitted
        return self

    def _candidates(
        self,
        es: EmbeddingSet,
        pairs: Sequence[tuple[Any, Any]] | None,
        p: dict[str, Any],
        seed_pairs: int,
    ) -> list[tuple[Any, Any]]:
        """Return the candidate pairs: given, every pair, or the common first pairs (§4.3)."""
        if p["n_candidates"] == "all":
            if pairs is not None:
                raise InvalidInputError(
                    "`pairs` must be None with n_candidates='all' (every pair is a candidate); "
                    f"got {len(pairs)} pair(s)."
                )
            if not (isinstance(self.classifier, str) and self.classifier == "logistic"):
                raise InvalidInputError(
                    "n_candidates='all' scores every pair with the batched logistic regression; "
                    f"`classifier` must be 'logistic'; got {self.classifier!r}."
                )
            pairs = all_pairs(es.identities)  # lexicographic: fixed without seeing the rows
            p["n_candidates"] = len(pairs)
        elif pairs is None:
            m = len(es.identities)
            n_all = m * (m - 1) // 2
            # an int seed gives the same pair list as sample_pairs(ids, n, rng=seed), i.e. the
            # common first pairs that the audits of the same condition use (Sec. 4.3)
            pair_rng = seed_pairs if isinstance(self.rng, np.random.Generator) else self.rng
            pairs = sample_pairs(es.identities, min(p["n_candidates"], n_all), rng=pair_rng)
        unknown = "which `es` does not contain"
        return check_pairs(pairs, es.identities, unknown=unknown)[: p["n_candidates"]]

    # -- helpers --------------------------------------------------------------------------------
    @staticmethod
    def _warn_if_zero_ceiling(
        sizes: list[tuple[int, int]], p: dict[str, Any], alpha_bound: float, min_test: int
    ) -> None:
        """Warn when some selected pair cannot certify above 0 whatever its test errors."""
        capped = [
            (m_a, m_b)
            for m_a, m_b in sizes
            if not _zero_error_bound(m_a, m_b, alpha_bound, p["delta"], p["test_thresholds"]) > 0
        ]
        if not capped:
            return
        shown = ", ".join(f"({m_a}, {m_b})" for m_a, m_b in capped[:5])
        if len(capped) > 5:
            shown += ", ..."
        rows = smallest_n(lambda n: n_test_rows(n, p["test_size"]) >= min_test, start=4)
        warnings.warn(
            f"{len(capped)} of the {len(sizes)} selected pairs can only certify epsilon_lb = 0, "
            f"whatever their test errors: their reserved test sizes (n_test_a, n_test_b) are "
            f"{shown}, and at alpha_per_bound = {alpha_bound:.3g} (alpha / (n_families * "
            f"n_select * 2)), test_thresholds = {p['test_thresholds']!r} and delta = "
            f"{p['delta']:g} even zero test errors certify 0 below "
            f"{min_test} test rows per identity (about {rows} rows per identity at test_size = "
            f"{p['test_size']:g}). To certify above 0, use more rows per identity (or a larger "
            "test_size), fewer selected pairs or families, or a larger alpha.",
            IdauditWarning,
            stacklevel=4,  # _warn_if_zero_ceiling -> _fit -> fit -> the caller
        )

    def _base_classifier(self) -> Any:
        return make_classifier(self.classifier)

    def _attrs(
        self,
        p: dict[str, Any],
        alpha_bound: float,
        n_used: int,
        es: EmbeddingSet,
        n_duplicates: int,
        pairs_given: bool,
        min_test: int,
    ) -> dict[str, Any]:
        clf = self.classifier if isinstance(self.classifier, str) else repr(self.classifier)
        seed = seed_of(self.rng)
        return {
            **provenance(
                title="reserved-test certificates (idaudit.ReservedTestCertifier)",
                inputs={"input_sha256": str(es.sha256)},
            ),
            "method": "reserved-test ROC certificate (seed 000, Section 4.3)",
            "status": "certified_lower_bound",
            "confidence": (
                f"with probability >= {1 - p['alpha']:g} jointly over all certified pairs "
                f"(union bound over {p['n_families']} condition(s) x {p['n_select']} pairs x 2 "
                "error rates), every epsilon_lb is at most its pair's true epsilon(delta)"
            ),
            "alpha": p["alpha"],
            "alpha_per_bound": alpha_bound,
            "n_families": p["n_families"],
            "n_select": p["n_select"],
            "n_select_requested": p["n_select_requested"],
            "n_candidates": p["n_candidates"],
            "n_candidates_used": n_used,
            # "given": the caller's list, which must not have been chosen by looking at `es`
            "candidate_pairs": "given" if pairs_given else "default",
            "duplicates": p["duplicates"],
            "n_duplicates": n_duplicates,
            # fewest test rows per identity (equal on both sides) at which zero test errors
            # certify more than 0; below it every certificate is 0 by construction
            "min_test_rows_for_nonzero": min_test,
            "test_size": p["test_size"],
            "n_folds": p["n_folds"],
            "delta": p["delta"],
            "classifier": clf,
            "threshold_rule": _THRESHOLD_RULE,
            "ranking_key": _RANKING_KEY,
            "rng": type(self.rng).__name__ if seed is None else seed,
        }


def _fit_n_select(p: dict[str, Any], n_candidates: int, n_identities: int) -> None:
    """Lower ``p["n_select"]`` to the vertex-disjoint pairs the candidates allow, and say so.

    The count depends on the candidate list only (never on a row), so the union bound over it
    is fixed before the data are looked at. ``p["n_select_requested"]`` keeps the request.
    """
    requested = p["n_select"]
    available = n_identities // 2  # a matching of the candidate graph has at most this many
    p["n_select_requested"] = requested
    if available >= requested:
        return
    p["n_select"] = available
    warnings.warn(
        f"the {n_candidates} candidate pair(s) over {n_identities} identities hold at most "
        f"{available} vertex-disjoint pair(s); n_select={requested} asked for more, so at most "
        f"{available} are certified (the pairs greedy selection finds). The union bound is over "
        "the pairs certified (attrs n_select, n_select_requested).",
        IdauditWarning,
        stacklevel=4,  # _fit_n_select -> _fit -> fit -> the caller
    )


def _fewer_selected(p: dict[str, Any], n_chosen: int, n_candidates: int) -> float:
    """Certify the pairs greedy selection found when fewer than ``n_select``; return the level.

    Which pairs are certified is decided on development rows only, and the reserved test
    rows are independent of them, so the union bound may count the pairs actually chosen:
    each bound is taken at α / (n_families · n_chosen · 2), as if ``n_select`` had been
    ``n_chosen`` from the start.
    """
    warnings.warn(
        f"greedy selection in rank order over the {n_candidates} candidate pairs found "
        f"{n_chosen} vertex-disjoint pair(s), fewer than n_select={p['n_select']}; "
        "certifying those (attrs n_select, n_select_requested).",
        IdauditWarning,
        stacklevel=4,  # _fewer_selected -> _fit -> fit -> the caller
    )
    p["n_select"] = n_chosen
    return float(p["alpha"] / (p["n_families"] * n_chosen * 2))


def _check_dev_rows(
    identities: list[Any], es: EmbeddingSet, dev: EmbeddingSet, test: EmbeddingSet, n_folds: int
) -> None:
    """Refuse an identity with fewer development rows than folds (naming it and its rows)."""
    for label in identities:
        n_dev = dev.counts[label]
        if n_dev >= n_folds:
            continue
        n_draws = n_dev + test.counts[label]
        all_rows = (
            f"{es.counts[label]} rows in all, {n_draws} distinct; duplicates='collapse'"
            if n_draws != es.counts[label]
            else f"{es.counts[label]} in all"
        )
        raise InvalidInputError(
            f"identity {label!r} has {n_dev} development rows ({all_rows}); "
            f"`n_folds`={n_folds} folds need at least {n_folds}."
        )


def _refuse_repeated_failures(es: EmbeddingSet, identities: list[Any]) -> None:
    """Refuse ``duplicates="collapse"`` where failed rows may be repeated records.

    Under "collapse" a repeated row is a repeated record of one draw. Failed rows carry no
    value, so a second record of a failed draw cannot be told from a second failed draw;
    they are kept as separate draws, which holds when failed draws were recorded once. An
    identity whose *successful* rows include copies (exact, or near: ``es`` has them merged)
    shows that its records were copied, and then its failed rows may be copies too: keeping
    them all lets copies raise its failure rate (a test then tells the identities apart by
    their records), keeping one conditions on success. Neither certifies the mechanism, so
    such an identity with two or more failed rows is refused, with the counts.
    """
    counts = es.failed_counts
    many = {
        label: (counts.get(label, 0), int(es.subset([label]).n_duplicates_))
        for label in identities
        if counts.get(label, 0) > 1 and label in es and es.subset([label]).n_duplicates_
    }
    if many:
        shown = ", ".join(
            f"{label!r}: {n_failed} failed, {n_copies} copied" for label, (n_failed, n_copies)
            in list(many.items())[:5]
        )  # fmt: skip
        raise InvalidInputError(
            "duplicates='collapse' reads repeated rows as records of one draw, and failed "
            "rows carry no value that tells a second record of a failed draw from a second "
            f"failed draw: {len(many)} candidate "
            f"{'identity has' if len(many) == 1 else 'identities have'} successful rows "
            f"recorded more than once and two or more failed rows ({shown}"
            f"{', ...' if len(many) > 5 else ''}), so their failure counts may hold copies. "
            "Record each draw once and pass duplicates='keep', or build the EmbeddingSet "
            "with failures='drop' to certify the mechanism conditioned on success."
        )


def _successful_duplicates(successes: EmbeddingSet, identities: list[Any]) -> int:
    """Exact duplicates among the successful rows of ``identities`` (failure atoms aside)."""
    known = [label for label in identities if label in successes]
    return int(successes.subset(known).n_duplicates_) if known else 0


def _failure_attrs(es: EmbeddingSet, n_failed: int) -> dict[str, Any]:
    """Return what the certificate says about failed rows (docs/certify.md, "Failed rows")."""
    if n_failed:
        model = "the mechanism as run: failed rows are an output atom, split and counted"
    elif es.failures == "drop":
        model = "the mechanism conditioned on success: failed rows were dropped"
    else:
        model = "the mechanism as run: the input records no failed row"
    return {"failures": es.failures, "n_failed": n_failed, "data_model": model}


# -- evaluate on the test data (select: _reserved_select; assemble: _reserved_results) ------


@dataclass(frozen=True)
class _TestRule:
    """How the test split is certified: level per bound, δ, thresholds, and the δ grid."""

    alpha_bound: float
    delta: float
    mode: Literal["dev", "bonferroni", "band"]
    deltas: FloatArray


def _evaluate(
    pairs: list[tuple[Any, Any]],
    plans: list[_Plan],
    seeds: list[int],
    ranks: list[int],
    es: EmbeddingSet,
    dev: EmbeddingSet,
    test: EmbeddingSet,
    base: Any,
    rule: _TestRule,
) -> tuple[list[dict[str, Any]], list[Any]]:
    """Fit each selected pair's classifier on its development rows and certify on its test rows.

    Returns one row of certificate values per pair and the fitted classifiers.
    """
    rows: list[dict[str, Any]] = []
    fitted: list[Any] = []
    for (a, b), plan, seed, rank in zip(pairs, plans, seeds, ranks, strict=True):
        xa, xb = dev.get(a), dev.get(b)
        clf = fit_classifier(base, xa, xb, seed)
        ta = plan.direction * score(clf, test.get(a))  # (m_a,): larger means identity_b
        tb = plan.direction * score(clf, test.get(b))  # (m_b,)
        m_a, m_b = len(ta), len(tb)
        point = _certify_test(ta, tb, plan.direction * plan.threshold, rule)
        rows.append(
            {
                "identity_a": a,
                "identity_b": b,
                "n_a": es.counts[a],
                "n_b": es.counts[b],
                "n_dev_a": len(xa),
                "n_dev_b": len(xb),
                "n_test_a": m_a,
                "n_test_b": m_b,
                **point,
                "threshold": plan.direction * point.pop("oriented_threshold"),
                "test_fpr": point["test_fp"] / m_a,
                "test_fnr": point["test_fn"] / m_b,
                "test_auc": auc(ta, tb),
                "epsilon_lb_ceiling": _zero_error_bound(
                    m_a, m_b, rule.alpha_bound, rule.delta, rule.mode
                ),
                "direction": int(plan.direction),
                "dev_auc": plan.auc,
                "dev_expected_epsilon": plan.expected_epsilon,
                "rank": rank,
                "_scores_a": ta,
                "_scores_b": tb,
            }
        )
        fitted.append(clf)
    return rows, fitted


def _certify_test(ta: FloatArray, tb: FloatArray, tau: float, rule: _TestRule) -> dict[str, Any]:
    """Certify one pair's oriented test scores: the point at ``delta`` and the ε(δ) curve.

    Every mode goes through :func:`certify_scores` at ``2 · alpha_bound`` per pair
    (``alpha_bound`` per class): ``"dev"`` at the one development threshold ``tau`` (two
    Clopper–Pearson bounds at ``alpha_bound``), the others at every threshold, reporting the
    point that certifies the most at ``delta``.
    """
    level = 2.0 * rule.alpha_bound
    if rule.mode == "dev":
        cert = certify_scores(
            ta, tb, alpha=level, delta=rule.delta, thresholds="given", threshold=tau
        )
    else:
        cert = certify_scores(ta, tb, alpha=level, delta=rule.delta, thresholds=rule.mode)
    fpr_u, fnr_u = cert.fpr_upper, cert.fnr_upper
    best = int(np.argmax(epsilon_from_error_rates(fpr_u, fnr_u, rule.delta)))
    fps, fns, taus = cert.fp, cert.fn, cert.thresholds
    curve = np.asarray(epsilon_from_tradeoff(fpr_u, fnr_u, rule.deltas), dtype=np.float64)
    return {
        "test_fp": int(fps[best]),
        "test_fn": int(fns[best]),
        "ufpr": float(fpr_u[best]),
        "ufnr": float(fnr_u[best]),
        "epsilon_lb": float(epsilon_from_error_rates(fpr_u[best], fnr_u[best], rule.delta)),
        "epsilon_lb_curve": curve,
        "oriented_threshold": float(taus[best]),
    }
