"""Unit tests for idaudit.certify.ReservedTestCertifier."""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import pytest
import xarray as xr
from scipy import stats
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.ensemble import RandomForestClassifier
from sklearn.linear_model import LogisticRegression, SGDClassifier
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from statsmodels.stats.proportion import proportion_confint

import idaudit.certify._reserved as reserved
from idaudit.certify import ReservedTestCertifier
from idaudit.data import EmbeddingSet, all_pairs, sample_pairs, split_identities
from idaudit.exceptions import IdauditWarning, InvalidInputError, NotFittedError


def _clusters(
    n_identities: int = 8, n_rows: int = 60, dim: int = 6, spread: float = 0.35, seed: int = 0
) -> EmbeddingSet:
    gen = np.random.default_rng(seed)
    centres = gen.normal(size=(n_identities, dim))
    x = np.repeat(centres, n_rows, axis=0) + spread * gen.normal(size=(n_identities * n_rows, dim))
    return EmbeddingSet(x, np.repeat(np.arange(n_identities), n_rows))


@pytest.fixture(scope="module")
def es() -> EmbeddingSet:
    return _clusters()


@pytest.fixture
def captured(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """Record the development/test split the certifier uses."""
    box: dict[str, Any] = {}

    def spy(es: EmbeddingSet, test_size: float, rng: Any, **kwargs: Any) -> Any:
        box["dev"], box["test"] = split_identities(es, test_size=test_size, rng=rng, **kwargs)
        box["kwargs"] = kwargs
        return box["dev"], box["test"]

    monkeypatch.setattr(reserved, "split_identities", spy)
    return box


# -- the published zero-error values, through the certifier -------------------------------


@pytest.mark.parametrize(
    ("n_rows", "n_test", "expected"), [(33, 10, 0.0), (50, 15, 0.454), (100, 30, 1.277)]
)
def test_zero_error_certificates_reproduce_the_paper(
    n_rows: int, n_test: int, expected: float
) -> None:
    # 10 identities, far apart: every test is error-free; alpha = 0.05 / (8 * 5 * 2) per bound
    gen = np.random.default_rng(1)
    x = np.repeat(10.0 * np.eye(10), n_rows, axis=0) + 0.01 * gen.normal(size=(10 * n_rows, 10))
    es = EmbeddingSet(x, np.repeat(np.arange(10), n_rows))
    cert = ReservedTestCertifier(n_select=5, n_families=8, alpha=0.05, rng=0, progress=False)
    pairs = [(0, 1), (2, 3), (4, 5), (6, 7), (8, 9)]
    if expected == 0.0:
        # 10 test rows per class cannot certify above 0 at this level: the fit says so
        with pytest.warns(IdauditWarning, match=r"5 of the 5 selected pairs can only certify"):
            cert.fit(es, pairs)
    else:
        cert.fit(es, pairs)  # no warning (pytest turns an IdauditWarning into an error)
    c = cert.certificates_
    assert c.attrs["min_test_rows_for_nonzero"] == 11
    np.testing.assert_array_equal(c["n_test_a"], n_test)
    np.testing.assert_array_equal(c["test_fp"] + c["test_fn"], 0)
    assert c.attrs["alpha_per_bound"] == pytest.approx(0.000625)
    # seed 000, Section 4.3: 0, 0.454 and 1.277 at 10, 15 and 30 test samples per class
    np.testing.assert_allclose(c["epsilon_lb"], expected, atol=5e-4)
    assert cert.epsilon_lb_ == pytest.approx(expected, abs=5e-4)


# -- the certificate is what the test split says -------------------------------------------


def test_certificates_match_an_independent_recomputation(
    es: EmbeddingSet, captured: dict[str, Any]
) -> None:
    cert = ReservedTestCertifier(
        n_select=3, n_candidates=10, alpha=0.1, n_families=2, rng=6, progress=False
    )
    cert.fit(es)
    c, test = cert.certificates_, captured["test"]
    alpha_bound = 0.1 / (2 * 3 * 2)
    assert cert.alpha_per_bound_ == pytest.approx(alpha_bound)
    for i, clf in enumerate(cert.classifiers_):
        a, b = c["identity_a"].values[i].item(), c["identity_b"].values[i].item()
        thr, sign = float(c["threshold"][i]), int(c["direction"][i])
        sa = clf.decision_function(test.get(a))
        sb = clf.decision_function(test.get(b))
        pred_a = sign * sa >= sign * thr  # predicted identity_b
        pred_b = sign * sb >= sign * thr
        fp, fn = int(pred_a.sum()), int((~pred_b).sum())
        assert (int(c["test_fp"][i]), int(c["test_fn"][i])) == (fp, fn)
        m_a, m_b = len(sa), len(sb)
        assert (int(c["n_test_a"][i]), int(c["n_test_b"][i])) == (m_a, m_b)
        # one-sided CP upper bound = upper end of the two-sided interval at 2 * alpha
        u_a = proportion_confint(fp, m_a, alpha=2 * alpha_bound, method="beta")[1]
        u_b = proportion_confint(fn, m_b, alpha=2 * alpha_bound, method="beta")[1]
        u_a = 1.0 if fp == m_a else u_a
        u_b = 1.0 if fn == m_b else u_b
        np.testing.assert_allclose([c["ufpr"][i], c["ufnr"][i]], [u_a, u_b], rtol=1e-9)
        terms = [0.0]
        if 1 - u_a > 0:
            terms.append(np.log((1 - u_a) / u_b))
        if 1 - u_b > 0:
            terms.append(np.log((1 - u_b) / u_a))
        np.testing.assert_allclose(c["epsilon_lb"][i], max(terms), rtol=1e-12)
        # test AUC of the fixed classifier, against scikit-learn
        from sklearn.metrics import roc_auc_score

        y = np.r_[np.zeros(m_a), np.ones(m_b)]
        np.testing.assert_allclose(
            c["test_auc"][i], roc_auc_score(y, sign * np.r_[sa, sb]), rtol=1e-12
        )
    assert cert.epsilon_lb_ == pytest.approx(float(c["epsilon_lb"].max()))


def test_dev_curve_is_eq16_at_every_delta_of_the_one_certified_point(es: EmbeddingSet) -> None:
    cert = ReservedTestCertifier(
        n_select=3, n_candidates=10, delta=1e-3, deltas=[0.0, 0.2], rng=6, progress=False
    ).fit(es)
    c = cert.certificates_
    assert c["delta"].values.tolist() == [0.0, 1e-3, 0.2]  # the fit's own delta is added
    curve = c["epsilon_lb_curve"]
    assert curve.dims == ("pair", "delta")
    assert curve.attrs["status"] == "certified_lower_bound"
    assert curve.attrs["n_simultaneous"] == 3
    for i in range(c.sizes["pair"]):
        u_a, u_b = float(c["ufpr"][i]), float(c["ufnr"][i])
        for d in c["delta"].values:
            terms = [0.0]  # Eq. 16 written out at each delta
            for x, y in ((u_a, u_b), (u_b, u_a)):
                if 1 - d - x > 0 and y > 0:
                    terms.append(np.log((1 - d - x) / y))
            assert float(curve.sel(delta=d)[i]) == pytest.approx(max(terms), rel=1e-12)
    np.testing.assert_array_equal(curve.sel(delta=1e-3).values, c["epsilon_lb"].values)
    np.testing.assert_array_equal(cert.epsilon_lb_curve_.values, curve.max("pair").values)
    assert cert.epsilon_lb_curve_.attrs["status"] == "certified_lower_bound"


@pytest.mark.parametrize("mode", ["bonferroni", "band"])
def test_curve_modes_certify_every_test_threshold_of_the_fixed_classifier(
    es: EmbeddingSet, captured: dict[str, Any], mode: str
) -> None:
    from idaudit.certify import certify_scores

    cert = ReservedTestCertifier(
        n_select=2, n_candidates=8, alpha=0.1, test_thresholds=mode, rng=3, progress=False
    ).fit(es)
    c, test = cert.certificates_, captured["test"]
    alpha_bound = 0.1 / (2 * 2)
    deltas = c["delta"].values
    for i, clf in enumerate(cert.classifiers_):
        a, b = c["identity_a"].values[i].item(), c["identity_b"].values[i].item()
        sign = int(c["direction"][i])
        # the fixed classifier's test scores, recomputed from the captured split
        sa = sign * clf.decision_function(test.get(a))
        sb = sign * clf.decision_function(test.get(b))
        np.testing.assert_array_equal(cert.test_scores_[i][0], sa)
        ref = certify_scores(sa, sb, alpha=2 * alpha_bound, thresholds=mode)
        assert float(c["epsilon_lb"][i]) == pytest.approx(ref.epsilon_lb_, rel=1e-12)
        np.testing.assert_allclose(
            c["epsilon_lb_curve"][i].values, ref.epsilon_curve(deltas).values, rtol=1e-12
        )
        # the reported point: its counts at its threshold, and its bounds give epsilon_lb
        t = sign * float(c["threshold"][i])
        assert int(c["test_fp"][i]) == int(np.sum(sa >= t))
        assert int(c["test_fn"][i]) == int(np.sum(sb < t))
        assert float(c["epsilon_lb"][i]) <= float(c["epsilon_lb_ceiling"][i]) + 1e-12
    dev = ReservedTestCertifier(n_select=2, n_candidates=8, alpha=0.1, rng=3, progress=False)
    dev_ceiling = dev.fit(es).certificates_["epsilon_lb_ceiling"].values
    assert "simultaneous upper bound" in c["ufpr"].attrs["long_name"]
    assert c.attrs["test_thresholds"] == mode
    # certifying every threshold costs level: an error-free test certifies less than "dev"
    assert (c["epsilon_lb_ceiling"].values < dev_ceiling).all()


def test_selection_never_sees_the_test_split(
    es: EmbeddingSet, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = ReservedTestCertifier(n_select=3, n_candidates=10, rng=2, progress=False).fit(es)

    def scrambled(es: EmbeddingSet, test_size: float, rng: Any, **kwargs: Any) -> Any:
        dev, test = split_identities(es, test_size=test_size, rng=rng, **kwargs)
        noise = np.random.default_rng(9).normal(size=test.embeddings.shape)
        return dev, EmbeddingSet(noise, test.labels, normalize=False)

    monkeypatch.setattr(reserved, "split_identities", scrambled)
    second = ReservedTestCertifier(n_select=3, n_candidates=10, rng=2, progress=False).fit(es)
    # every development-side decision is identical; only the test outcomes differ
    xr.testing.assert_identical(first.candidates_, second.candidates_)
    for name in ("threshold", "direction", "dev_auc", "rank"):
        np.testing.assert_array_equal(first.certificates_[name], second.certificates_[name])
    assert not np.array_equal(first.certificates_["test_auc"], second.certificates_["test_auc"])


def test_selected_pairs_are_vertex_disjoint_and_best_ranked(es: EmbeddingSet) -> None:
    pairs = sample_pairs(es.identities, rng=3)
    cert = ReservedTestCertifier(n_select=3, n_candidates=20, rng=0, progress=False)
    cert.fit(es, pairs)
    c, cand = cert.certificates_, cert.candidates_
    ids = np.r_[c["identity_a"].values, c["identity_b"].values]
    assert len(set(ids.tolist())) == 6
    assert cand.sizes["pair"] == 20
    assert int(cand["selected"].sum()) == 3
    # the first selected pair is the top-ranked candidate
    assert int(c["rank"][0]) == 0
    top = int(np.argmin(cand["rank"].values))
    assert (cand["identity_a"].values[top], cand["identity_b"].values[top]) == (
        c["identity_a"].values[0],
        c["identity_b"].values[0],
    )
    # ranks are ordered by the development-expected bound
    ordered = cand["dev_expected_epsilon"].values[np.argsort(cand["rank"].values)]
    assert (np.diff(ordered) <= 1e-12).all()


def test_only_the_first_n_candidates_are_scored(es: EmbeddingSet) -> None:
    pairs = sample_pairs(es.identities, rng=1)
    cert = ReservedTestCertifier(n_select=2, n_candidates=5, rng=0, progress=False)
    cert.fit(es, pairs)
    got = list(
        zip(
            cert.candidates_["identity_a"].values,
            cert.candidates_["identity_b"].values,
            strict=False,
        )
    )
    assert got == pairs[:5]
    assert cert.certificates_.attrs["n_candidates_used"] == 5


def test_positive_delta_lowers_the_bound(es: EmbeddingSet) -> None:
    pure = ReservedTestCertifier(n_select=2, n_candidates=8, rng=0, progress=False).fit(es)
    approx = ReservedTestCertifier(n_select=2, n_candidates=8, delta=0.05, rng=0, progress=False)
    approx.fit(es)
    c = approx.certificates_
    u_a, u_b = c["ufpr"].values, c["ufnr"].values
    with np.errstate(divide="ignore", invalid="ignore"):
        terms = np.stack(
            [
                np.zeros_like(u_a),
                np.where(1 - 0.05 - u_a > 0, np.log((1 - 0.05 - u_a) / u_b), 0),
                np.where(1 - 0.05 - u_b > 0, np.log((1 - 0.05 - u_b) / u_a), 0),
            ]
        )
    np.testing.assert_allclose(c["epsilon_lb"], terms.max(axis=0), rtol=1e-12)
    assert approx.epsilon_lb_ <= pure.epsilon_lb_ + 1e-12


def test_the_same_rng_gives_the_same_certificates(es: EmbeddingSet) -> None:
    cert = ReservedTestCertifier(n_select=2, n_candidates=6, rng=4, progress=False)
    one = cert.fit(es).certificates_
    two = ReservedTestCertifier(n_select=2, n_candidates=6, rng=4, progress=False).fit(es)
    xr.testing.assert_identical(one, two.certificates_)
    three = ReservedTestCertifier(n_select=2, n_candidates=6, rng=5, progress=False).fit(es)
    assert not three.certificates_.identical(one)


@pytest.mark.parametrize(
    "classifier",
    ["random_forest", make_pipeline(StandardScaler(), LogisticRegression(C=0.5))],
    ids=["random_forest", "pipeline"],
)
def test_other_classifiers(es: EmbeddingSet, classifier: Any) -> None:
    cert = ReservedTestCertifier(n_select=2, classifier=classifier, rng=0)
    cert.set_params(progress=False).fit(es, [(0, 1), (2, 3), (1, 2)])
    assert cert.certificates_.sizes["pair"] == 2
    assert (cert.certificates_["test_auc"] > 0.9).all()
    assert cert.epsilon_lb_ > 0.5


def test_no_signal_certifies_nothing() -> None:
    gen = np.random.default_rng(0)
    es = EmbeddingSet(gen.normal(size=(240, 3)), np.repeat(np.arange(6), 40))
    cert = ReservedTestCertifier(n_select=3, rng=0, progress=False).fit(es)
    assert cert.epsilon_lb_ < 0.5


# -- small data: the ceiling of a certificate --------------------------------------------


def _zero_error_epsilon(m: int, alpha_bound: float, delta: float) -> float:
    """Eq. 16 at the statsmodels Clopper-Pearson bound for 0 errors in m rows, both classes."""
    # a one-sided bound at level a is the upper end of the two-sided interval at 2a
    u = proportion_confint(0, m, alpha=2 * alpha_bound, method="beta")[1]
    return max(0.0, float(np.log((1 - delta - u) / u))) if 1 - delta - u > 0 else 0.0


@pytest.mark.parametrize(
    ("n_select", "n_families", "alpha", "delta", "expected"),
    [
        (2, 20, 0.05, 0.0, 11),  # the paper's alpha' = 0.05 / 80
        (2, 3, 0.05, 0.0, 8),
        (2, 1, 0.1, 0.1, 7),
        (1, 1, 0.2, 0.5, 9),  # ln(a) / ln((1 + delta) / 2) = 8.004: just above an integer
        (1, 1, 0.1, 0.6, 14),  # more than the 12 test rows below: warns
    ],
)
def test_min_test_rows_for_nonzero_is_where_zero_errors_first_certify(
    n_select: int, n_families: int, alpha: float, delta: float, expected: int
) -> None:
    # closed form: zero errors give U = 1 - a^(1/m) on both sides, and Eq. 16 is positive iff
    # m > ln(a) / ln((1 + delta) / 2); the expected values are floor of that, plus one
    alpha_bound = alpha / (n_families * n_select * 2)
    assert expected == int(np.floor(np.log(alpha_bound) / np.log((1 + delta) / 2))) + 1
    assert _zero_error_epsilon(expected - 1, alpha_bound, delta) == 0.0
    assert _zero_error_epsilon(expected, alpha_bound, delta) > 0.0
    # through the certifier: 4 far-apart identities with 40 rows (12 test rows each)
    gen = np.random.default_rng(0)
    x = np.repeat(10.0 * np.eye(4), 40, axis=0) + 0.01 * gen.normal(size=(160, 4))
    es = EmbeddingSet(x, np.repeat(np.arange(4), 40))
    cert = ReservedTestCertifier(
        n_select=n_select,
        n_families=n_families,
        alpha=alpha,
        delta=delta,
        rng=0,
        progress=False,
    )
    if expected > 12:
        with pytest.warns(IdauditWarning, match=f"certify 0 below {expected} test rows"):
            cert.fit(es, [(0, 1), (2, 3)])
        assert cert.epsilon_lb_ == 0.0
    else:
        cert.fit(es, [(0, 1), (2, 3)])  # no warning: pytest would turn it into an error
        assert cert.epsilon_lb_ > 0.0
    assert cert.alpha_per_bound_ == pytest.approx(alpha_bound)
    assert cert.certificates_.attrs["min_test_rows_for_nonzero"] == expected


def test_too_few_test_rows_warn_and_certify_zero() -> None:
    # 6 separable identities with 8 rows: 2 test rows each, alpha' = 0.05 / 6 needs 7
    gen = np.random.default_rng(1)
    x = np.repeat(10.0 * np.eye(6), 8, axis=0) + 0.01 * gen.normal(size=(48, 6))
    es = EmbeddingSet(x, np.repeat(np.arange(6), 8))
    cert = ReservedTestCertifier(n_select=3, n_folds=2, rng=0, progress=False)
    with pytest.warns(IdauditWarning) as record:
        cert.fit(es)
    (warning,) = record
    assert warning.filename == __file__  # points at the caller's `fit`
    message = str(warning.message)
    assert "3 of the 3 selected pairs can only certify epsilon_lb = 0" in message
    assert "(n_test_a, n_test_b) are (2, 2), (2, 2), (2, 2)" in message
    assert "even zero test errors certify 0 below 7 test rows per identity" in message
    assert "about 22 rows per identity at test_size = 0.3" in message
    c = cert.certificates_
    np.testing.assert_array_equal(c["test_fp"] + c["test_fn"], 0)  # perfect, yet 0
    assert cert.epsilon_lb_ == 0.0
    assert c.attrs["min_test_rows_for_nonzero"] == 7
    # 22 rows per identity give 7 test rows: the same data certify above 0, without a warning
    x = np.repeat(10.0 * np.eye(6), 22, axis=0) + 0.01 * gen.normal(size=(132, 6))
    es = EmbeddingSet(x, np.repeat(np.arange(6), 22))
    with warnings.catch_warnings():
        warnings.simplefilter("error", IdauditWarning)
        cert.fit(es)
    np.testing.assert_array_equal(cert.certificates_["n_test_a"], 7)
    assert cert.epsilon_lb_ > 0


# -- duplicate rows -------------------------------------------------------------------------


def _duplicated_null(seed: int, n_distinct: int = 50) -> EmbeddingSet:
    """Two identities with the same N(0, I_8) law, every row present twice."""
    gen = np.random.default_rng(seed)
    x = np.repeat(gen.normal(size=(2 * n_distinct, 8)), 2, axis=0)  # (4 n_distinct, 8)
    return EmbeddingSet(x, np.repeat(["a", "b"], 2 * n_distinct), normalize=False)


def test_collapsed_copies_do_not_certify_identical_distributions() -> None:
    # The true epsilon is 0 and every draw is stored twice. Read as separate draws, one copy
    # of a row can sit in development and the other in test, where a random forest
    # recognises it and "certifies" epsilon > 0.5. Collapsed, each draw is one row on one
    # side: a positive bound is a violation the certificate allows with probability
    # <= alpha = 0.05 per seed, so at most one of five seeds may be positive.
    bounds = []
    for seed in range(5):
        cert = ReservedTestCertifier(
            duplicates="collapse",
            n_select=1,
            n_folds=2,
            classifier="random_forest",
            rng=seed,
            progress=False,
        )
        cert.fit(_duplicated_null(seed))  # no warning: the copies were declared
        bounds.append(cert.epsilon_lb_)
        np.testing.assert_array_equal(cert.certificates_["n_test_a"], 15)  # 50 draws, not 100
    assert sum(b > 0 for b in bounds) <= 1, bounds


def test_kept_duplicates_are_split_row_by_row_counted_and_warned(
    captured: dict[str, Any],
) -> None:
    es = _duplicated_null(0, n_distinct=20)
    cert = ReservedTestCertifier(n_select=1, n_folds=2, rng=0, progress=False)
    with pytest.warns(
        IdauditWarning,
        match=r"40 of the 80 rows of the 2 candidate identities are exact duplicates .* "
        r"split and counted as separate draws.* pass duplicates='collapse'",
    ) as record:
        cert.fit(es)
    assert record[0].filename == __file__  # points at the caller's `fit`
    assert captured["kwargs"] == {"duplicates": "keep"}
    # every row is a draw: 12 of the 40 rows of each identity are tested, copies or not
    assert captured["test"].counts == {"a": 12, "b": 12}
    np.testing.assert_array_equal(cert.certificates_["n_test_a"], 12)
    assert cert.certificates_.attrs["duplicates"] == "keep"
    assert cert.certificates_.attrs["n_duplicates"] == 40
    assert cert.candidates_.attrs["n_duplicates"] == 40


def test_collapsed_duplicates_are_one_draw_on_each_side_and_in_the_counts(
    captured: dict[str, Any],
) -> None:
    es = _duplicated_null(0, n_distinct=20)
    cert = ReservedTestCertifier(duplicates="collapse", n_select=1, n_folds=2, rng=0)
    cert.set_params(progress=False).fit(es)
    assert captured["kwargs"] == {"duplicates": "collapse"}
    for label in ("a", "b"):
        dev = [r.tobytes() for r in captured["dev"].get(label)]
        test = [r.tobytes() for r in captured["test"].get(label)]
        assert len(set(dev)) == len(dev) == 14  # 20 draws: 14 + 6, one row each
        assert len(set(test)) == len(test) == 6
        assert set(dev).isdisjoint(test)
    c = cert.certificates_
    np.testing.assert_array_equal(c["n_test_a"], 6)
    np.testing.assert_array_equal(c["n_dev_b"], 14)
    np.testing.assert_array_equal(c["n_a"], 40)  # the rows of `es`
    assert c.attrs["duplicates"] == "collapse"
    assert c.attrs["n_duplicates"] == 40
    # the Clopper-Pearson bounds count draws: k errors out of 6 trials
    two_sided = 2 * c.attrs["alpha_per_bound"]
    for k, u in ((c["test_fp"], c["ufpr"]), (c["test_fn"], c["ufnr"])):
        ref = proportion_confint(int(k[0]), 6, alpha=two_sided, method="beta")[1]
        assert float(u[0]) == pytest.approx(ref, rel=1e-9)


def test_collapsed_identity_needs_enough_draws() -> None:
    x = np.r_[np.ones((10, 2)), np.eye(2), np.random.default_rng(0).normal(size=(30, 2))]
    es = EmbeddingSet(x, ["a"] * 12 + ["b"] * 15 + ["c"] * 15, normalize=False)
    with pytest.raises(
        InvalidInputError, match=r"identity 'a' has 12 row\(s\) but only 3 distinct"
    ):
        ReservedTestCertifier(duplicates="collapse", n_select=1, progress=False).fit(es)
    with pytest.raises(
        InvalidInputError, match=r"`duplicates` must be one of 'keep', 'collapse'; got 'drop'"
    ):
        ReservedTestCertifier(duplicates="drop", progress=False).fit(es)


def test_collapsed_identity_too_small_to_fold_names_its_distinct_rows() -> None:
    # 15 rows but 6 distinct: the split fits (2 test draws), the 4 development draws do not
    # fill 5 folds; the message must count draws, not the 15 rows the user sees in `es`
    gen = np.random.default_rng(0)
    x = np.r_[gen.normal(size=(5, 2)), np.ones((10, 2)), gen.normal(size=(20, 2))]
    es = EmbeddingSet(x, ["a"] * 15 + ["b"] * 20, normalize=False)
    cert = ReservedTestCertifier(duplicates="collapse", n_select=1, progress=False)
    assert cert.min_rows() == 7
    with pytest.raises(
        InvalidInputError,
        match=r"identity 'a' has 4 development rows \(15 rows in all, 6 distinct; "
        r"duplicates='collapse'\); `n_folds`=5 folds need at least 5",
    ):
        cert.fit(es)


def test_attrs_record_duplicates_and_where_the_pairs_came_from(es: EmbeddingSet) -> None:
    default = ReservedTestCertifier(n_select=2, n_candidates=6, rng=0, progress=False).fit(es)
    assert default.certificates_.attrs["candidate_pairs"] == "default"
    assert default.certificates_.attrs["n_duplicates"] == 0
    given = ReservedTestCertifier(n_select=2, n_candidates=6, rng=0, progress=False)
    given.fit(es, sample_pairs(es.identities, 6, rng=0))
    assert given.certificates_.attrs["candidate_pairs"] == "given"
    # the same pairs, so the same certificates; only the provenance differs
    for name in default.certificates_.data_vars:
        np.testing.assert_array_equal(default.certificates_[name], given.certificates_[name])


# -- custom classifiers ---------------------------------------------------------------------


class _NoParams:
    """Has ``fit`` and ``decision_function`` but no ``get_params``: cannot be cloned."""

    def fit(self, x: Any, y: Any) -> _NoParams:
        return self

    def decision_function(self, x: Any) -> Any:
        return np.zeros(len(x))


class _ChangesItsParams(ClassifierMixin, BaseEstimator):  # type: ignore[misc]
    """``__init__`` alters a parameter, which ``sklearn.base.clone`` refuses."""

    def __init__(self, c: float = 1.0) -> None:
        self.c = 2 * c

    def fit(self, x: Any, y: Any) -> _ChangesItsParams:
        return self

    def decision_function(self, x: Any) -> Any:
        return np.zeros(len(x))


def test_classifiers_that_cannot_be_cloned_are_refused(es: EmbeddingSet) -> None:
    with pytest.raises(TypeError, match=r"`classifier` must be .* `get_params`.*got _NoParams"):
        ReservedTestCertifier(classifier=_NoParams(), progress=False).fit(es)
    with pytest.raises(
        TypeError, match=r"`classifier` must be clonable .* cloning _ChangesItsParams failed"
    ):
        ReservedTestCertifier(classifier=_ChangesItsParams(), progress=False).fit(es)
    assert not hasattr(ReservedTestCertifier(), "certificates_")


@pytest.mark.parametrize(
    ("classifier", "keys"),
    [
        (
            make_pipeline(StandardScaler(), RandomForestClassifier(n_estimators=10)),
            ["randomforestclassifier__random_state"],
        ),
        (SGDClassifier(loss="log_loss", random_state=123), ["random_state"]),
    ],
    ids=["forest_in_pipeline", "sgd"],
)
def test_every_random_state_is_seeded_from_rng(
    es: EmbeddingSet, classifier: Any, keys: list[str]
) -> None:
    pairs = [(0, 1), (2, 3), (4, 5)]

    def certify(rng: int) -> ReservedTestCertifier:
        cert = ReservedTestCertifier(n_select=2, classifier=classifier, rng=rng, progress=False)
        return cert.fit(es, pairs)

    one, two = certify(7), certify(7)
    for clf in one.classifiers_:
        for key in keys:
            value = clf.get_params(deep=True)[key]
            assert isinstance(value, int)
            assert value != 123  # a seed from `rng` replaces the caller's value
    xr.testing.assert_identical(one.certificates_, two.certificates_)
    assert classifier.get_params(deep=True)[keys[0]] in (None, 123)  # the original is untouched
    seeds = [clf.get_params(deep=True)[keys[0]] for clf in certify(8).classifiers_]
    assert seeds != [clf.get_params(deep=True)[keys[0]] for clf in one.classifiers_]


# -- result schema --------------------------------------------------------------------------


def test_dataset_schema_and_netcdf_round_trip(es: EmbeddingSet, tmp_path: Any) -> None:
    cert = ReservedTestCertifier(n_select=2, n_candidates=6, rng=0, progress=False).fit(es)
    for ds in (cert.certificates_, cert.candidates_):
        assert set(ds.coords) >= {"identity_a", "identity_b", "n_a", "n_b"}
        for name, var in ds.data_vars.items():
            assert {"long_name", "status"} <= set(var.attrs), name
        for value in ds.attrs.values():
            assert isinstance(value, (str, int, float)), value
    c = cert.certificates_
    assert c["epsilon_lb"].attrs["status"] == "certified_lower_bound"
    assert c.attrs["status"] == "certified_lower_bound"
    assert c.attrs["input_sha256"] == es.sha256
    path = tmp_path / "cert.nc"
    c.to_netcdf(path)
    with xr.open_dataset(path) as back:
        xr.testing.assert_allclose(back.load(), c)


# -- bad input ------------------------------------------------------------------------------


def test_reading_results_before_fit_raises() -> None:
    cert = ReservedTestCertifier()
    with pytest.raises(NotFittedError, match=r"call `fit\(es\)` before reading `epsilon_lb_`"):
        _ = cert.epsilon_lb_
    with pytest.raises(NotFittedError, match="`alpha_per_bound_`"):
        _ = cert.alpha_per_bound_
    assert not hasattr(cert, "certificates_")


@pytest.mark.parametrize(
    ("params", "error", "message"),
    [
        ({"alpha": 1.5}, InvalidInputError, r"`alpha` must be in \(0, 1\); got 1.5."),
        ({"alpha": 0.0}, InvalidInputError, r"`alpha` must be in \(0, 1\); got 0.0."),
        ({"test_size": 1.0}, InvalidInputError, r"`test_size` must be in \(0, 1\); got 1.0."),
        ({"delta": 1.0}, InvalidInputError, r"`delta` must be in \[0, 1\); got 1.0."),
        ({"n_select": 0}, InvalidInputError, "`n_select` must be >= 1; got 0."),
        ({"n_families": 0}, InvalidInputError, "`n_families` must be >= 1; got 0."),
        ({"n_folds": 1}, InvalidInputError, "`n_folds` must be >= 2; got 1."),
        ({"n_candidates": 2.5}, TypeError, "`n_candidates` must be an integer; got float."),
        ({"classifier": "svm"}, InvalidInputError, "`classifier` must be one of 'logistic'"),
        ({"classifier": object()}, TypeError, "`classifier` must be 'logistic'"),
        (
            {"test_thresholds": "all"},
            InvalidInputError,
            "`test_thresholds` must be one of 'dev', 'bonferroni', 'band'",
        ),
        ({"deltas": [0.5, 1.0]}, InvalidInputError, r"`deltas` must hold at least one delta"),
        ({"deltas": []}, InvalidInputError, r"each in \[0, 1\); got \[\]"),
    ],
)
def test_bad_parameters(
    es: EmbeddingSet, params: dict[str, Any], error: type, message: str
) -> None:
    with pytest.raises(error, match=message):
        ReservedTestCertifier(progress=False, **params).fit(es)


def test_bad_pairs(es: EmbeddingSet) -> None:
    cert = ReservedTestCertifier(n_select=1, progress=False)
    match = r"`pairs\[0\]` names identity 99, which `es` does not contain"
    with pytest.raises(InvalidInputError, match=match):
        cert.fit(es, [(0, 99)])
    with pytest.raises(InvalidInputError, match=r"`pairs\[0\]` pairs identity 1 with itself"):
        cert.fit(es, [(1, 1)])
    with pytest.raises(InvalidInputError, match=r"`pairs\[0\]` must be a pair \(identity_a, iden"):
        cert.fit(es, [(0, 1, 2)])
    with pytest.raises(InvalidInputError, match=r"`pairs\[0\]` names identity \[0\]"):
        cert.fit(es, [([0], 1)])  # unhashable: not a label
    with pytest.raises(TypeError, match=r"`es` must be an idaudit\.EmbeddingSet"):
        cert.fit(np.zeros((4, 2)))  # type: ignore[arg-type]


def _cp_upper(k: np.ndarray, n: np.ndarray, level: float) -> np.ndarray:
    """One-sided Clopper–Pearson upper bound from scipy's beta quantile (1 when k = n)."""
    upper = stats.beta.ppf(1.0 - level, k + 1, n - k)
    return np.where(k >= n, 1.0, upper)


def _assert_union_bound_over(cert: ReservedTestCertifier, n_pairs: int) -> None:
    """The certified pairs, the level of each bound and the bounds themselves agree."""
    c = cert.certificates_
    assert c.sizes["pair"] == n_pairs
    assert c.attrs["n_select"] == n_pairs
    assert cert.alpha_per_bound_ == pytest.approx(0.05 / (n_pairs * 2), rel=1e-15)
    assert c["epsilon_lb"].attrs["n_simultaneous"] == n_pairs
    level = cert.alpha_per_bound_
    fp, n_a = c["test_fp"].values, c["n_test_a"].values
    np.testing.assert_allclose(c["ufpr"].values, _cp_upper(fp, n_a, level), rtol=1e-9)


def test_fewer_disjoint_pairs_than_asked_certifies_those_there_are(es: EmbeddingSet) -> None:
    # four identities allow two disjoint pairs: n_select=3 certifies two, as n_select=2 does
    candidates = [(0, 1), (2, 3), (0, 2)]
    with pytest.warns(
        IdauditWarning, match=r"the 3 candidate pair\(s\) over 4 identities hold at most 2"
    ):
        lowered = ReservedTestCertifier(n_select=3, rng=0, progress=False).fit(es, candidates)
    asked = ReservedTestCertifier(n_select=2, rng=0, progress=False).fit(es, candidates)
    assert lowered.certificates_.attrs["n_select_requested"] == 3
    assert asked.certificates_.attrs["n_select_requested"] == 2
    _assert_union_bound_over(lowered, 2)
    for name in ("epsilon_lb", "ufpr", "ufnr", "threshold"):
        np.testing.assert_array_equal(lowered.certificates_[name], asked.certificates_[name])


def test_greedy_selection_short_of_n_select_certifies_what_it_found(es: EmbeddingSet) -> None:
    # a star: five identities but every pair shares identity 0 -> greedy finds only 1
    star = [(0, k) for k in range(1, 6)]
    with pytest.warns(IdauditWarning, match=r"over the 5 candidate pairs found 1 vertex-disjoint"):
        cert = ReservedTestCertifier(n_select=2, progress=False).fit(es, star)
    _assert_union_bound_over(cert, 1)
    assert cert.certificates_.attrs["n_select_requested"] == 2
    # a path a-b, b-c, c-d whose middle pair separates best, so it ranks first: two disjoint
    # pairs exist (a-b and c-d), but greedy selection takes b-c and then finds no other
    gen = np.random.default_rng(0)
    centres = np.repeat([0.0, 1.0, 10.0, 11.0], 40)[:, None]
    path = EmbeddingSet(
        centres + 0.5 * gen.normal(size=(160, 1)), np.repeat(list("abcd"), 40), normalize=False
    )
    with pytest.warns(IdauditWarning, match="over the 3 candidate pairs found 1"):
        cert = ReservedTestCertifier(n_select=2, progress=False).fit(
            path, [("a", "b"), ("b", "c"), ("c", "d")]
        )
    _assert_union_bound_over(cert, 1)
    assert (
        str(cert.certificates_.identity_a[0].item()),
        str(cert.certificates_.identity_b[0].item()),
    ) == ("b", "c")


def test_small_identities_are_named() -> None:
    gen = np.random.default_rng(0)
    labels = np.r_[np.repeat(["a", "b"], 30), ["c"] * 3]
    es = EmbeddingSet(gen.normal(size=(63, 4)), labels)
    with pytest.raises(InvalidInputError, match="identity 'c' has 3 row"):
        ReservedTestCertifier(n_select=1, progress=False).fit(es, [("a", "c")])
    labels = np.r_[np.repeat(["a", "b"], 30), ["c"] * 6]
    es = EmbeddingSet(gen.normal(size=(66, 4)), labels)
    with pytest.raises(InvalidInputError, match="identity 'c' has 4 development rows"):
        ReservedTestCertifier(n_select=1, progress=False).fit(es, [("a", "c")])


def test_a_failed_fit_leaves_no_certificates(es: EmbeddingSet) -> None:
    cert = ReservedTestCertifier(n_select=2, n_candidates=6, rng=0, progress=False).fit(es)
    assert cert.epsilon_lb_ > 0
    with pytest.raises(InvalidInputError):
        cert.set_params(n_folds=99).fit(es, [(0, 1), (2, 3), (0, 2)])
    for name in ("certificates_", "epsilon_lb_", "candidates_", "classifiers_"):
        with pytest.raises(NotFittedError):
            getattr(cert, name)


def test_an_error_during_test_evaluation_leaves_no_certificates(
    es: EmbeddingSet, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = {"n": 0}
    real = reserved.certify_scores

    def failing(*args: Any, **kwargs: Any) -> Any:
        calls["n"] += 1
        if calls["n"] == 2:  # second selected pair
            raise RuntimeError("disk full")
        return real(*args, **kwargs)

    monkeypatch.setattr(reserved, "certify_scores", failing)
    cert = ReservedTestCertifier(n_select=2, n_candidates=6, rng=0, progress=False)
    with pytest.raises(RuntimeError, match="disk full"):
        cert.fit(es)
    assert not hasattr(cert, "certificates_")
    assert not hasattr(cert, "epsilon_lb_")


def test_sklearn_estimator_contract() -> None:
    from sklearn.base import clone

    cert = ReservedTestCertifier(n_select=3, alpha=0.01)
    assert cert.get_params()["n_select"] == 3
    assert "status" not in cert.get_params()
    twin = clone(cert)
    assert twin.get_params() == cert.get_params()
    assert repr(cert) == (
        "ReservedTestCertifier(alpha=0.01, n_select=3)  # status: certified_lower_bound"
    )


def test_status_is_certified_lower_bound() -> None:
    assert ReservedTestCertifier.status == "certified_lower_bound"
    assert "epsilon_lb_" in ReservedTestCertifier.__doc__
    assert "certified lower bound" in ReservedTestCertifier.__doc__


@pytest.mark.parametrize(
    ("test_size", "n_folds"), [(0.3, 5), (0.3, 2), (0.5, 3), (0.1, 5), (0.8, 4)]
)
def test_min_rows_is_the_fewest_rows_that_split_and_fold(test_size: float, n_folds: int) -> None:
    cert = ReservedTestCertifier(test_size=test_size, n_folds=n_folds)
    need = cert.min_rows()

    def dev_rows(n: int) -> int:
        es = EmbeddingSet(np.random.default_rng(0).normal(size=(n, 3)), [0] * n)
        try:
            dev, _ = split_identities(es, test_size=test_size, rng=0)
        except InvalidInputError:  # too few rows to split at all
            return 0
        return int(dev.counts[0])

    assert dev_rows(need) >= n_folds
    assert dev_rows(need - 1) < n_folds
    with pytest.raises(InvalidInputError, match=r"`n_folds` must be >= 2; got 1\."):
        ReservedTestCertifier(n_folds=1).min_rows()


# -- n_candidates="all": every pair scored by the batched logistic path --------------------


@pytest.fixture(scope="module")
def uneven_es() -> EmbeddingSet:
    gen = np.random.default_rng(0)
    sizes = gen.integers(30, 41, size=10)
    rows = [gen.normal(size=(n, 8)) + 0.45 * np.eye(8)[k % 8] for k, n in enumerate(sizes)]
    labels = [f"id{k}" for k, n in enumerate(sizes) for _ in range(n)]
    return EmbeddingSet(np.vstack(rows), labels)


def test_all_candidates_select_as_the_pair_by_pair_path(uneven_es: EmbeddingSet) -> None:
    every = ReservedTestCertifier(n_candidates="all", n_select=3, progress=False).fit(uneven_es)
    listed = ReservedTestCertifier(n_candidates=45, n_select=3, progress=False).fit(
        uneven_es, all_pairs(uneven_es.identities)
    )
    assert every.candidates_.sizes["pair"] == 45
    got, want = every.certificates_, listed.certificates_
    np.testing.assert_array_equal(got["identity_a"], want["identity_a"])
    np.testing.assert_array_equal(got["identity_b"], want["identity_b"])
    np.testing.assert_array_equal(got["test_fp"], want["test_fp"])
    np.testing.assert_array_equal(got["test_fn"], want["test_fn"])
    np.testing.assert_allclose(got["epsilon_lb"], want["epsilon_lb"], rtol=1e-12)
    # thresholds are midpoints of development logits, which lbfgs gets to ~1e-3 here
    np.testing.assert_allclose(got["threshold"], want["threshold"], atol=5e-3)
    assert got.attrs["candidate_pairs"] == "all"
    assert got["epsilon_lb"].attrs["status"] == "certified_lower_bound"


def test_all_candidates_errors(uneven_es: EmbeddingSet) -> None:
    with pytest.raises(InvalidInputError, match="`pairs` must be None with n_candidates='all'"):
        ReservedTestCertifier(n_candidates="all", progress=False).fit(uneven_es, [("id0", "id1")])
    with pytest.raises(InvalidInputError, match="`classifier` must be 'logistic'"):
        ReservedTestCertifier(n_candidates="all", classifier="random_forest", progress=False).fit(
            uneven_es
        )
    with pytest.raises(InvalidInputError, match="`n_candidates` must be 'all' or an integer >= 1"):
        ReservedTestCertifier(n_candidates="every", progress=False).fit(uneven_es)


def test_the_ceiling_is_what_an_error_free_test_certifies(es: EmbeddingSet) -> None:
    cert = ReservedTestCertifier(n_select=2, n_candidates=6, rng=0, progress=False).fit(es)
    c = cert.certificates_
    level = cert.alpha_per_bound_
    m_a, m_b = c["n_test_a"].values, c["n_test_b"].values
    # Eq. 16 at the zero-error Clopper-Pearson bounds, computed from scipy's beta quantile
    u_a, u_b = _cp_upper(np.zeros_like(m_a), m_a, level), _cp_upper(np.zeros_like(m_b), m_b, level)
    expected = np.maximum(np.log(np.maximum((1 - u_a) / u_b, (1 - u_b) / u_a)), 0.0)
    np.testing.assert_allclose(c["epsilon_lb_ceiling"].values, expected, rtol=1e-9)
    assert (c["epsilon_lb"].values <= c["epsilon_lb_ceiling"].values + 1e-12).all()
    assert c["epsilon_lb_ceiling"].attrs["status"] == "descriptive"
    # zero test errors reach the ceiling exactly
    errorless = (c["test_fp"].values == 0) & (c["test_fn"].values == 0)
    np.testing.assert_array_equal(
        c["epsilon_lb"].values[errorless], c["epsilon_lb_ceiling"].values[errorless]
    )
