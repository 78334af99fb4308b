"""SequentialCertifier: stopping rules, path bookkeeping, and the bounds recomputed from counts."""

from __future__ import annotations

import numpy as np
import pytest

from idaudit import InvalidInputError, NotFittedError
from idaudit.certify import SequentialCertifier
from idaudit.data import EmbeddingSet
from idaudit.dp import anytime_upper_bound, epsilon_from_error_rates
from idaudit.mechanisms import GaussianNoise, LaplaceNoise
from idaudit.results import check_result_dataset


def _laplace(scale: float = 0.5, centres=(0.0, 1.0)) -> LaplaceNoise:
    base = EmbeddingSet(np.array(centres, dtype=float)[:, None], ["a", "b"], normalize=False)
    return LaplaceNoise(base, scale=scale)


def test_stops_at_target_with_a_consistent_path() -> None:
    mech = _laplace(0.5)  # true pure epsilon 2
    cert = SequentialCertifier(
        mech,
        [("a", "b")],
        target_epsilon=1.0,
        max_samples=5000,
        batch_size=50,
        rng=0,
        progress=False,
    ).fit()
    assert cert.stop_reason_ == "target_reached"
    assert cert.epsilon_lb_ >= 1.0
    assert cert.n_test_ < 5000
    assert cert.n_used_ == cert.n_test_ + 100
    path = cert.path_
    check_result_dataset(path)
    check_result_dataset(cert.certificates_)
    assert path.attrs["stop_reason"] == "target_reached"
    n = path["n"].values
    np.testing.assert_array_equal(n, np.arange(50, cert.n_test_ + 1, 50))
    np.testing.assert_array_equal(path["n_total"].values, n + 100)
    # the bounds are running minima of the anytime bound at the counts, and Eq. 16 of them
    alpha_bound = 0.05 / 2
    fp, fn = path["test_fp"].values[:, 0], path["test_fn"].values[:, 0]
    want_u = np.minimum.accumulate(anytime_upper_bound(fp, n, alpha_bound))
    want_v = np.minimum.accumulate(anytime_upper_bound(fn, n, alpha_bound))
    np.testing.assert_allclose(path["ufpr"].values[:, 0], want_u, rtol=1e-12)
    np.testing.assert_allclose(path["ufnr"].values[:, 0], want_v, rtol=1e-12)
    np.testing.assert_allclose(
        path["epsilon_lb"].values[:, 0], epsilon_from_error_rates(want_u, want_v), rtol=1e-12
    )
    assert np.all(np.diff(path["epsilon_lb_max"].values) >= 0)  # never decreases
    assert path["epsilon_lb"].attrs["status"] == "certified_lower_bound"
    assert path["ufpr"].attrs["status"] == "certified_upper_bound"
    assert cert.certificates_["epsilon_lb"].attrs["status"] == "certified_lower_bound"
    assert "certified_lower_bound" in repr(cert)


def test_the_fixed_test_is_the_one_counted() -> None:
    mech = _laplace(0.5)
    cert = SequentialCertifier(
        mech, [("a", "b")], max_samples=200, batch_size=100, rng=3, progress=False
    ).fit()
    c = cert.certificates_
    # replay the test draws: the per-identity generators are seeded as fit seeds them
    from idaudit._validation import spawn_seeds

    _, seed_test, _ = spawn_seeds(np.random.default_rng(3), 3)
    gens = [np.random.default_rng(s) for s in spawn_seeds(seed_test, 2)]
    xa = np.concatenate([mech.sample("a", 100, rng=gens[0]) for _ in range(2)])
    xb = np.concatenate([mech.sample("b", 100, rng=gens[1]) for _ in range(2)])
    clf = cert.classifiers_[0]
    d, t = float(c["direction"][0]), float(c["threshold"][0])
    # the tests see every output with a failure flag appended ([x, 0] here: none failed)
    predicts_b = lambda x: d * clf.decision_function(np.c_[x, np.zeros(len(x))]) >= d * t  # noqa: E731
    assert int(c["test_fp"][0]) == int(predicts_b(xa).sum())
    assert int(c["test_fn"][0]) == int((~predicts_b(xb)).sum())


def test_a_target_above_the_truth_stops_as_unreachable() -> None:
    mech = _laplace(2.0)  # true pure epsilon 0.5
    cert = SequentialCertifier(
        mech,
        [("a", "b")],
        target_epsilon=1.5,
        max_samples=20_000,
        batch_size=200,
        rng=0,
        progress=False,
    ).fit()
    assert cert.stop_reason_ == "target_unreachable"
    assert cert.n_test_ < 20_000
    assert cert.epsilon_lb_ < 0.5


def test_without_target_runs_to_max_samples_and_is_reproducible() -> None:
    mech = GaussianNoise(EmbeddingSet(np.eye(3), ["a", "b", "c"]), sigma=1.0)
    kw = {"max_samples": 120, "batch_size": 50, "delta": 1e-5, "rng": 4, "progress": False}
    one = SequentialCertifier(mech, [("a", "b"), ("b", "c")], **kw).fit()
    two = SequentialCertifier(mech, [("a", "b"), ("b", "c")], **kw).fit()
    assert one.stop_reason_ == "max_samples"
    np.testing.assert_array_equal(one.path_["n"].values, [50, 100, 120])  # last batch cut
    assert one.path_.sizes["pair"] == 2
    assert one.path_.attrs["setting.alpha_per_bound"] == pytest.approx(0.05 / 4)
    np.testing.assert_array_equal(one.path_["epsilon_lb"].values, two.path_["epsilon_lb"].values)
    assert one.epsilon_lb_ == float(one.certificates_["epsilon_lb"].max())


def test_not_fitted_and_bad_input() -> None:
    mech = _laplace()
    with pytest.raises(NotFittedError, match="call `fit"):
        SequentialCertifier(mech, [("a", "b")], max_samples=10).epsilon_lb_  # noqa: B018
    cases = [
        ({"pairs": [("a", "z")]}, InvalidInputError, "does not know"),
        ({"pairs": [("a", "a")]}, InvalidInputError, "a"),
        ({"alpha": 0.0}, InvalidInputError, r"`alpha` must be in \(0, 1\)"),
        ({"max_samples": 10, "batch_size": 50}, InvalidInputError, r"`max_samples` must be >= 50"),
        ({"n_dev": 5}, InvalidInputError, r"`n_dev` must be >= 10"),
        ({"target_epsilon": -1.0}, InvalidInputError, "`target_epsilon` must be in"),
        # every certificate is >= 0, so a target of 0 would "reach" itself after one batch
        ({"target_epsilon": 0.0}, InvalidInputError, r"`target_epsilon` must be in \(0, inf\)"),
        ({"delta": 1.0}, InvalidInputError, r"`delta` must be in \[0, 1\)"),
        ({"classifier": object()}, TypeError, "`classifier` must be 'logistic' or"),
        ({"classifier": "svm"}, InvalidInputError, "`classifier` must be one of 'logistic'"),
        ({"mechanism": object()}, TypeError, "`mechanism` must follow"),
    ]
    for change, error, match in cases:
        kw = {"mechanism": mech, "pairs": [("a", "b")], "max_samples": 100, "progress": False}
        kw.update(change)
        with pytest.raises(error, match=match):
            SequentialCertifier(**kw).fit()


def test_every_declared_constraint_refuses_its_invalid_values() -> None:
    mech = _laplace()
    base = {"mechanism": mech, "pairs": [("a", "b")], "max_samples": 100, "progress": False}
    assert set(SequentialCertifier._parameter_constraints) == set(
        SequentialCertifier(**base).get_params(deep=False)
    )
    for key, constraint in SequentialCertifier._parameter_constraints.items():
        for bad in constraint.invalid():
            with pytest.raises((TypeError, InvalidInputError), match=f"`{key}`"):
                SequentialCertifier(**{**base, key: bad}).fit()
