from __future__ import annotations

import numpy as np
import pytest
from sklearn.metrics import roc_curve

from idaudit.exceptions import InvalidInputError
from idaudit.inversion import (
    EERResult,
    OODDetector,
    attack_threshold,
    eer_threshold,
    identity_scores,
    joint_evaluation,
    reference_bounds,
    type_accuracy,
)
from idaudit.inversion._evaluation import MIN_GENUINE_PAIRS
from idaudit.results import check_result_dataset


def test_eer_on_a_hand_computed_case() -> None:
    # genuine 0.9 0.8 0.7 0.3, impostor 0.1 0.2 0.4 0.6. At τ = 0.6: FRR = 1/4 (0.3 rejected),
    # FAR = 1/4 (0.6 accepted): the only threshold where the two rates are equal.
    r = eer_threshold([0.9, 0.8, 0.7, 0.3], [0.1, 0.2, 0.4, 0.6], method="empirical")
    assert (r.threshold, r.eer, r.far, r.frr) == (0.6, 0.25, 0.25, 0.25)
    perfect = eer_threshold([0.9, 0.8], [0.1, 0.2])
    # zero-error range (0.2, 0.8]: its midpoint, not the strict end 0.8
    assert (perfect.eer, perfect.threshold, perfect.method) == (0.0, 0.5, "midpoint")
    assert (perfect.n_genuine, perfect.n_impostor) == (2, 2)


def test_eer_matches_sklearn_roc_curve(rng: np.random.Generator) -> None:
    genuine = rng.normal(0.6, 0.15, 300)
    impostor = rng.normal(0.2, 0.15, 500)
    r = eer_threshold(genuine, impostor, method="empirical")
    y = np.r_[np.ones(300), np.zeros(500)]
    fpr, tpr, thr = roc_curve(y, np.r_[genuine, impostor], drop_intermediate=False)
    fnr = 1 - tpr
    gap = np.abs(fpr - fnr)
    tied = np.flatnonzero(gap == gap.min())
    k = tied[np.lexsort((thr[tied], (fpr + fnr)[tied]))[0]]  # same tie rule, independently
    assert r.eer == pytest.approx((fpr[k] + fnr[k]) / 2)
    assert (r.far, r.frr) == pytest.approx((fpr[k], fnr[k]))
    assert r.threshold == pytest.approx(thr[k])


def test_interpolated_eer_is_the_roc_root(rng: np.random.Generator) -> None:
    from scipy.interpolate import interp1d
    from scipy.optimize import brentq

    genuine = rng.normal(0.6, 0.15, 37)
    impostor = rng.normal(0.3, 0.15, 53)
    r = eer_threshold(genuine, impostor)
    assert r.method == "interpolate"
    # DiffMI's rule, independently: the root of 1 − x = TPR(x) on sklearn's ROC
    y = np.r_[np.ones(37), np.zeros(53)]
    fpr, tpr, _ = roc_curve(y, np.r_[genuine, impostor], drop_intermediate=False)
    ref = brentq(lambda x: 1.0 - x - interp1d(fpr, tpr)(x), 0.0, 1.0)
    assert r.eer == pytest.approx(ref, abs=1e-9)
    # τ_F lies between the two scores that bracket the crossing; the rates are counted there
    assert r.far == pytest.approx(np.mean(impostor >= r.threshold))
    assert r.frr == pytest.approx(np.mean(genuine < r.threshold))
    assert abs(r.far - r.eer) <= 1 / 53 + 1e-12
    assert abs(r.frr - r.eer) <= 1 / 37 + 1e-12


def test_eer_interval_is_exact_clopper_pearson() -> None:
    from scipy.stats import binomtest

    r = eer_threshold(np.linspace(0.8, 0.9, 12), np.linspace(0.1, 0.5, 66))
    assert (r.eer, r.n_genuine, r.n_impostor) == (0.0, 12, 66)
    # no error observed: each rate gets a two-sided exact 97.5 % interval (Bonferroni over 2)
    frr_hi = binomtest(0, 12).proportion_ci(0.975, method="exact").high
    far_hi = binomtest(0, 66).proportion_ci(0.975, method="exact").high
    assert r.eer_low == 0.0
    assert r.eer_high == pytest.approx((frr_hi + far_hi) / 2, rel=1e-9)
    assert r.eer_high > 0.1  # 12 genuine pairs cannot show a small EER
    assert EERResult.STATUS["eer_high"] == "diagnostic"


def test_type_accuracy_refuses_a_threshold_from_too_few_genuine_pairs() -> None:
    e = np.eye(3)
    few = eer_threshold(np.linspace(0.8, 0.9, 12), np.linspace(0.1, 0.5, 66))
    with pytest.raises(InvalidInputError, match="12 genuine pairs, fewer than `min_genuine` 30"):
        type_accuracy(e[:2], e[:2], [e[[0]], e[[1]]], few)
    assert MIN_GENUINE_PAIRS == 30
    ok = type_accuracy(e[:2], e[:2], [e[[0]], e[[1]]], few, min_genuine=12)
    assert ok.threshold == few.threshold
    with pytest.raises(InvalidInputError, match="fewer than"):
        joint_evaluation({"a": {"a": e[:2]}}, {"a": e[:2]}, {"a": [e[[0]], e[[1]]]}, {"a": few})


def test_identity_scores_on_constructed_embeddings() -> None:
    e = np.eye(4)
    targets = e[:3]
    # rec 0 is nearest its own target; rec 1 is nearer target 2 than its own; rec 2 own only
    rec = np.array([e[0], 0.6 * e[1] + 0.8 * e[2], e[2]])
    others = [np.array([e[0], e[3]]), np.array([e[1]]), np.zeros((0, 4))]
    ds = identity_scores(rec, targets, others, names=["a", "b", "c"])
    check_result_dataset(ds)
    np.testing.assert_allclose(ds.similarity.values, rec @ targets.T)
    np.testing.assert_allclose(ds.margin.values, [1.0, 0.6 - 0.8, 1.0])
    # gallery: a → {e0, e3}, b → {e1}; c has no other image (NaN)
    np.testing.assert_allclose(ds.gallery_similarity.sel(candidate="a").values, [0.5, 0.0, 0.0])
    np.testing.assert_allclose(ds.gallery_similarity.sel(candidate="b").values, [0.0, 0.6, 0.0])
    assert np.isnan(ds.gallery_similarity.sel(candidate="c").values).all()
    np.testing.assert_allclose(ds.gallery_margin.values[:2], [0.5, 0.6], equal_nan=True)
    # rank-1: rec a → e0 (a), rec b → e1 (b); rec c cannot be found (no gallery image)
    np.testing.assert_array_equal(ds.rank1.values, [1.0, 1.0, np.nan])
    assert float(ds.rank1_rate) == 1.0
    assert int(ds.n_gallery) == 3
    assert ds.rank1.attrs["status"] == "sample_estimate"
    with pytest.raises(
        InvalidInputError, match="`targets` must have one row per reconstruction; got 2 vs 3"
    ):
        identity_scores(rec, targets[:2], others)


def test_type_i_and_ii_on_constructed_embeddings() -> None:
    e = np.eye(4)
    rec = np.array([e[0], e[1], (e[2] + e[3]) / np.sqrt(2)])  # third: cos 0.707 to e2 and e3
    targets = np.array([e[0], e[2], e[2]])
    others = [
        np.array([e[0], e[0], e[1]]),  # 2 of 3 matched
        np.array([e[1]]),  # 1 of 1 (the reconstruction matches another image, not the target)
        np.zeros((0, 4)),  # no other image: left out of Type II
    ]
    acc = type_accuracy(rec, targets, others, threshold=0.7)
    np.testing.assert_array_equal(acc.per_target_i, [True, False, True])
    assert acc.type_i == pytest.approx(2 / 3)
    assert acc.type_ii == pytest.approx((2 / 3 + 1) / 2)
    assert (acc.n_targets, acc.n_type_ii) == (3, 2)
    higher = type_accuracy(rec, targets, others, threshold=0.8)
    assert higher.type_i == pytest.approx(1 / 3)
    with pytest.raises(InvalidInputError, match="`threshold` must be in"):
        type_accuracy(rec, targets, others, threshold=1.5)
    with pytest.raises(InvalidInputError, match="3 vs 4"):
        type_accuracy(rec, targets[:, :3], others, threshold=0.5)


def test_joint_evaluation_and_bounds_are_valid_results() -> None:
    e = np.eye(3)
    targets = {"a": e[:2], "b": e[:2]}
    others = {"a": [e[[0]], e[[2]]], "b": [e[[0]], e[[1]]]}
    recs = {"a": {"a": e[:2], "b": e[[0, 2]]}, "b": {"a": e[[2, 2]], "b": e[:2]}}
    ds = joint_evaluation(recs, targets, others, {"a": 0.5, "b": 0.5})
    check_result_dataset(ds)
    assert ds["type_i"].sel(target_model="a", test_model="a") == 1.0
    assert ds["type_ii"].sel(target_model="a", test_model="b") == 0.5
    # target b: test a matches 1 of 2 identities (0.5), test b both (1.0)
    assert ds["type_ii_avg"].sel(target_model="b") == pytest.approx((0.5 + 1.0) / 2)
    assert ds["type_i"].attrs["status"] == "sample_estimate"
    # identification next to Type I / II; the same model on both axes is recorded
    # rec e1's other images are {e2}: it is nearest neither identity, and loses the tie
    assert ds["rank1"].sel(target_model="a", test_model="a") == 0.5
    assert ds["similarity"].dims == ("target_model", "test_model", "target", "candidate")
    assert ds["margin"].sel(target_model="a", test_model="a") == 1.0
    assert bool(ds["same_weights"].sel(target_model="a", test_model="a"))
    assert not bool(ds["same_weights"].sel(target_model="a", test_model="b"))
    assert ds.attrs["same_weights"] == "a=a, b=b"
    port = joint_evaluation(recs, targets, others, {"a": 0.5, "b": 0.5}, same_weights=[("a", "b")])
    assert bool(port["same_weights"].sel(target_model="a", test_model="b"))
    assert port.attrs["same_weights"] == "a=a, a=b, b=b"
    bounds = reference_bounds(e[:2], others["b"], e[[2, 2]], 0.5)
    check_result_dataset(bounds)
    assert bounds["type_ii"].sel(row="original") == 1.0
    assert bounds["type_i"].sel(row="random") == 0.0


def test_ood_detector_logic() -> None:
    det = OODDetector([0.4, 0.3], tau_d=0.9)
    sims = [[0.5, 0.1], [0.1, 0.2], [0.9, 0.9], [0.39, 0.31]]
    p_d = [0.95, 0.99, 0.5, 0.9]
    r = det.detect(sims, p_d)
    # OOD1 only when *every* test model misses; OOD2 when p_D < tau_d (0.9 itself passes)
    assert r.ood1.tolist() == [False, True, False, False]
    assert r.ood2.tolist() == [False, False, True, False]
    assert r.ood.tolist() == [False, True, True, False]
    assert r.breakdown() == {"matching_failure": 0.25, "detection_failure": 0.25, "ood": 0.5}
    with pytest.raises(InvalidInputError, match=r"\(n, 2\)"):
        det.detect([[0.1, 0.2, 0.3]], [0.9])
    with pytest.raises(InvalidInputError, match="`thresholds` must be in"):
        OODDetector([1.2]).detect([[0.1]], [0.9])


def test_ood_detector_refuses_nan_instead_of_calling_it_in_domain() -> None:
    det = OODDetector([0.4, 0.3], tau_d=0.9)
    # NaN < τ is False, so without the check these inputs would be in-domain
    with pytest.raises(InvalidInputError, match="1 of 2 inputs hold NaN"):
        det.detect([[np.nan, np.nan], [0.5, 0.5]], [0.95, 0.95])
    with pytest.raises(InvalidInputError, match="1 of 2 scores are NaN"):
        det.detect([[0.5, 0.5], [0.5, 0.5]], [np.nan, 0.95])


def test_attack_threshold_is_the_largest_cross_similarity(rng: np.random.Generator) -> None:
    class Fixed:
        def __init__(self, emb: np.ndarray) -> None:
            self.emb = emb

        def encode(self, crops: np.ndarray) -> np.ndarray:
            return self.emb[: len(crops)]

    emb = rng.normal(size=(6, 5))
    unit = emb / np.linalg.norm(emb, axis=1, keepdims=True)
    sims = unit @ unit.T
    ref = max(sims[i, j] for i in range(6) for j in range(6) if i != j)
    crops = np.zeros((6, 4, 4, 3), np.uint8)
    assert attack_threshold(Fixed(emb), crops) == pytest.approx(ref)
    with pytest.raises(InvalidInputError, match="at least 2"):
        attack_threshold(Fixed(emb), crops[:1])


def test_eer_crossing_on_the_first_segment_keeps_the_highest_score() -> None:
    # One impostor above every genuine score but one. From τ = +∞ (FAR 0, FRR 1) the next ROC
    # point, τ = 0.9, accepts the impostor and one genuine pair: FAR 1, FRR 1/2, so
    # d = FAR − FRR goes from −1 to +1/2 and the crossing lies 2/3 along that first segment.
    r = eer_threshold([0.9, 0.5], [0.9])
    assert r.eer == pytest.approx(2 / 3)  # 0 + (2/3)·(1 − 0)
    # no finite τ above 0.9 decides differently from τ = +∞: τ_F is the highest score
    assert (r.threshold, r.far, r.frr) == (0.9, 1.0, 0.5)


def test_evaluation_refuses_empty_inputs_repeated_names_and_missing_models() -> None:
    e = np.eye(3)
    with pytest.raises(InvalidInputError, match=r"n >= 1; got \(0, 3\)"):
        type_accuracy(np.zeros((0, 3)), np.zeros((0, 3)), [], 0.5)
    with pytest.raises(InvalidInputError, match=r"`reconstructions` must have shape"):
        identity_scores(np.zeros((0, 3)), e[:2], [e[[0]], e[[1]]])
    with pytest.raises(InvalidInputError, match=r"`names` must be distinct; repeated: \['x'\]"):
        identity_scores(e[:2], e[:2], [e[[0]], e[[1]]], names=["x", "x"])
    recs = {"a": {"a": e[:2], "b": e[:2]}}
    with pytest.raises(
        InvalidInputError, match=r"`targets` has no entry for test model\(s\) \['b'\]"
    ):
        joint_evaluation(recs, {"a": e[:2]}, {"a": [e[[0]], e[[1]]]}, {"a": 0.5, "b": 0.5})
    with pytest.raises(
        InvalidInputError, match=r"`others` has no entry for test model\(s\) \['b'\]"
    ):
        joint_evaluation(
            recs, {"a": e[:2], "b": e[:2]}, {"a": [e[[0]], e[[1]]]}, {"a": 0.5, "b": 0.5}
        )


def test_more_bad_inputs_get_clear_errors() -> None:
    e = np.eye(3)
    # an empty gallery of the wrong dimension, and galleries given as a generator
    with pytest.raises(InvalidInputError, match=r"`others\[1\]` must have dimension 3"):
        type_accuracy(e[:2], e[:2], [e[[0]], np.zeros((0, 7))], 0.5)
    acc = type_accuracy(e[:2], e[:2], (g for g in [e[[0, 1]], e[[2]]]), 0.5)
    assert (acc.type_i, acc.type_ii) == (1.0, 0.25)
    with pytest.raises(InvalidInputError, match="must be one-dimensional; got shape"):
        eer_threshold(np.ones((2, 2)), [0.1])
    with pytest.raises(InvalidInputError, match="`genuine` must hold numbers"):
        eer_threshold(["high", "low"], [0.1])
    with pytest.raises(TypeError, match="`thresholds` must be a sequence of τ_F"):
        OODDetector(0.4)  # type: ignore[arg-type]
    det = OODDetector([0.4], tau_d=0.9)
    with pytest.raises(InvalidInputError, match=r"cosines in \[-1, 1\] and `detection`"):
        det.detect([[0.5]], [1.5])
    with pytest.raises(InvalidInputError, match=r"cosines in \[-1, 1\]"):
        det.detect([[1.2]], [0.95])
    recs = {"a": {"a": e[:2], "b": e[:2]}}
    targets, others = {"a": e[:2], "b": e[:2]}, {"a": [e[[0]], e[[1]]], "b": [e[[0]], e[[1]]]}
    with pytest.raises(InvalidInputError, match=r"has test model\(s\) \['b'\] without a threshold"):
        joint_evaluation(recs, targets, others, {"a": 0.5})
    with pytest.raises(InvalidInputError, match=r"`same_weights` pair \('a', 'B'\)"):
        joint_evaluation(recs, targets, others, {"a": 0.5, "b": 0.5}, same_weights=[("a", "B")])
    with pytest.raises(InvalidInputError, match="model names must be strings; got 0"):
        joint_evaluation({0: {0: e[:2]}}, {0: e[:2]}, {0: [e[[0]], e[[1]]]}, {0: 0.5})  # type: ignore[dict-item]
