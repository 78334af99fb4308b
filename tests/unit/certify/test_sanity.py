"""Unit tests for idaudit.certify.sanity_controls (split-half controls, seed 000 §4.4)."""

from __future__ import annotations

import numpy as np
import pytest
import xarray as xr
from scipy import stats

from idaudit.certify import sanity_controls
from idaudit.data import EmbeddingSet
from idaudit.exceptions import InvalidInputError


@pytest.fixture(scope="module")
def es() -> EmbeddingSet:
    gen = np.random.default_rng(0)
    centres = gen.normal(size=(6, 5))
    counts = [20, 21, 20, 25, 20, 30]
    x = np.concatenate(
        [c + 0.5 * gen.normal(size=(n, 5)) for c, n in zip(centres, counts, strict=False)]
    )
    labels = np.concatenate([[f"id{i}"] * n for i, n in enumerate(counts)])
    return EmbeddingSet(x, labels)


@pytest.fixture(scope="module")
def controls(es: EmbeddingSet) -> xr.Dataset:
    return sanity_controls(es, n_permutations=300, rng=3, progress=False)


def test_schema(es: EmbeddingSet, controls: xr.Dataset) -> None:
    assert controls.sizes["identity"] == 6
    np.testing.assert_array_equal(controls["identity"], es.identities)
    # halves of sizes floor(n/2) and ceil(n/2)
    np.testing.assert_array_equal(controls["n_half_a"], [10, 10, 10, 12, 10, 15])
    np.testing.assert_array_equal(controls["n_half_b"], [10, 11, 10, 13, 10, 15])
    for name, var in controls.data_vars.items():
        assert {"long_name", "status"} <= set(var.attrs), name
    for value in controls.attrs.values():
        assert isinstance(value, (str, int, float))


def test_values_under_the_null(controls: xr.Dataset) -> None:
    p = controls["mmd_pvalue"].values
    # Phipson-Smyth p-values lie in [1/(B+1), 1]
    assert (p >= 1 / 301 - 1e-12).all()
    assert (p <= 1).all()
    np.testing.assert_array_equal(controls["rejected"], p <= 0.05)
    assert controls.attrs["n_rejected"] == int(controls["rejected"].sum())
    assert controls.attrs["rejection_rate"] == pytest.approx(float(controls["rejected"].mean()))
    assert controls.attrs["mean_auc"] == pytest.approx(float(controls["auc"].mean()))
    assert controls.attrs["n_corners"] == 0
    # unbiased MMD^2 between two halves of one identity is near zero (|value| << the
    # cross-identity values of this fixture, which exceed 0.3)
    assert np.abs(controls["mmd2"]).max() < 0.15
    assert 0.2 < float(controls["auc"].mean()) < 0.8


def test_controls_are_reproducible_and_seeded(es: EmbeddingSet) -> None:
    one = sanity_controls(es, ["id0", "id3"], n_permutations=10, rng=1, progress=False)
    two = sanity_controls(es, ["id0", "id3"], n_permutations=10, rng=1, progress=False)
    three = sanity_controls(es, ["id0", "id3"], n_permutations=10, rng=2, progress=False)
    xr.testing.assert_identical(one, two)
    assert not np.array_equal(one["mmd2"], three["mmd2"])  # other halves


def test_bad_input(es: EmbeddingSet) -> None:
    with pytest.raises(InvalidInputError, match="names identity 'nobody'"):
        sanity_controls(es, ["nobody"], progress=False)
    with pytest.raises(InvalidInputError, match=r"identity 'id0' has 20 rows; .* at least 22"):
        sanity_controls(es, ["id0"], n_folds=11, progress=False)
    with pytest.raises(InvalidInputError, match=r"`alpha` must be in \(0, 1\); got 1.0"):
        sanity_controls(es, alpha=1.0, progress=False)
    with pytest.raises(TypeError, match=r"`es` must be an idaudit\.EmbeddingSet"):
        sanity_controls(np.zeros((3, 3)), progress=False)  # type: ignore[arg-type]
    with pytest.raises(
        InvalidInputError, match=r"`split` must be one of 'shuffled', 'ordered'; got 'random'"
    ):
        sanity_controls(es, split="random", progress=False)  # type: ignore[arg-type]


def test_statuses_and_split_attr(controls: xr.Dataset) -> None:
    # the split-half AUC is a statistic of the sample, as rocht_auc is
    assert controls["auc"].attrs["status"] == "sample_estimate"
    assert controls["corner"].attrs["status"] == "diagnostic"
    assert controls.attrs["split"] == "shuffled"


def test_ordered_halves_are_first_and_second_half(es: EmbeddingSet) -> None:
    # ordered halves involve no randomness: the MMD^2 of the halves (which does not depend on
    # the permutations) is the same for any rng, unlike that of shuffled halves
    kw = {"n_permutations": 10, "progress": False}
    one = sanity_controls(es, ["id0", "id5"], split="ordered", rng=1, **kw)
    two = sanity_controls(es, ["id0", "id5"], split="ordered", rng=2, **kw)
    np.testing.assert_array_equal(one["mmd2"], two["mmd2"])
    np.testing.assert_array_equal(one["n_half_a"], [10, 15])
    assert one.attrs["split"] == "ordered"
    # reversing the rows of one identity swaps its halves, leaving the symmetric MMD^2 as is
    # when the count is even (30 rows of id5: halves of 15 and 15)
    rows = es.get("id5")
    flipped = EmbeddingSet(rows[::-1], ["id5"] * len(rows))
    back = sanity_controls(flipped, split="ordered", **kw)
    np.testing.assert_allclose(back["mmd2"], one["mmd2"].values[1:], rtol=1e-9)


def _sessions(shift: float) -> EmbeddingSet:
    """20 identities x 20 rows; rows 10-19 of each identity come from a second session."""
    gen = np.random.default_rng(0)
    n_id, n_rows = 20, 20
    x = np.repeat(gen.normal(size=(n_id, 4)), n_rows, axis=0)
    x += 0.3 * gen.normal(size=x.shape)
    x[:, 0] += shift * np.tile(np.repeat([0.0, 1.0], n_rows // 2), n_id)
    return EmbeddingSet(x, np.repeat(np.arange(n_id), n_rows), normalize=False)


def test_ordered_split_sees_a_session_shift_that_shuffled_cannot() -> None:
    # second-session rows shifted by 2 within-identity sds along one axis, stored in order
    es = _sessions(0.6)
    kw = {"n_permutations": 100, "rng": 0, "progress": False}
    shuffled = sanity_controls(es, split="shuffled", **kw)
    ordered = sanity_controls(es, split="ordered", **kw)
    null = sanity_controls(_sessions(0.0), split="ordered", **kw)
    # Shuffled halves are exchangeable whatever the rows hold: a rejection count consistent
    # with a rate <= 0.05 (sd sqrt(20 * 0.05 * 0.95) = 1 around 1; binomtest at 0.01 fails at
    # about 5 or more) and AUC near chance. Observed: 1 of 20, mean AUC 0.42.
    for ctl in (shuffled, null):
        k = int(ctl.attrs["n_rejected"])
        assert stats.binomtest(k, 20, 0.05, alternative="greater").pvalue > 0.01
        assert float(ctl.attrs["mean_auc"]) < 0.65
    # ordered halves are the two sessions: most controls reject (observed 17 of 20) and the
    # classifier separates them (mean AUC 0.86)
    k = int(ordered.attrs["n_rejected"])
    assert stats.binomtest(k, 20, 0.05, alternative="greater").pvalue < 1e-6
    assert float(ordered.attrs["mean_auc"]) > 0.75


def _stored_twice(n_id: int = 20, n_draws: int = 12) -> EmbeddingSet:
    """n_id identities of n_draws iid draws each, every draw stored twice in a row."""
    gen = np.random.default_rng(1)
    centres = np.repeat(gen.normal(size=(n_id, 4)), n_draws, axis=0)
    draws = centres + 0.3 * gen.normal(size=centres.shape)
    labels = np.repeat(np.arange(n_id), n_draws)
    return EmbeddingSet(np.repeat(draws, 2, axis=0), np.repeat(labels, 2), normalize=False)


def test_collapse_controls_the_draws_not_the_copies() -> None:
    es = _stored_twice()
    kw = {"split": "ordered", "n_permutations": 100, "rng": 0, "progress": False}
    kept = sanity_controls(es, **kw)  # type: ignore[arg-type]
    collapsed = sanity_controls(es, duplicates="collapse", **kw)  # type: ignore[arg-type]
    np.testing.assert_array_equal(kept["n_half_a"], 12)  # 24 rows: 12 + 12
    np.testing.assert_array_equal(collapsed["n_half_a"], 6)  # 12 draws: 6 + 6
    assert collapsed.attrs["duplicates"] == "collapse"
    assert kept.attrs["duplicates"] == "keep"
    # Read as separate draws, ordered halves keep each pair of copies together while the
    # permutations separate them: many controls reject (observed 12 of 20). Collapsed, the
    # halves hold distinct iid draws and the null is true: a count consistent with a rate
    # <= 0.05 (sd 1 around 1 over 20 controls; binomtest at 0.01 fails at about 5; observed 1).
    assert (
        stats.binomtest(int(kept.attrs["n_rejected"]), 20, 0.05, alternative="greater").pvalue
        < 1e-6
    )
    assert (
        stats.binomtest(int(collapsed.attrs["n_rejected"]), 20, 0.05, alternative="greater").pvalue
        > 0.01
    )


def test_collapse_needs_enough_distinct_rows() -> None:
    es = _stored_twice(n_id=2, n_draws=8)
    with pytest.raises(
        InvalidInputError,
        match=r"identity 0 has 16 rows but only 8 distinct ones \(duplicates='collapse'\); "
        r".* at least 10",
    ):
        sanity_controls(es, duplicates="collapse", progress=False)
    with pytest.raises(
        InvalidInputError, match=r"`duplicates` must be one of 'keep', 'collapse'; got 'merge'"
    ):
        sanity_controls(es, duplicates="merge", progress=False)  # type: ignore[arg-type]
