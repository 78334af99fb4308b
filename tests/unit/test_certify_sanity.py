"""Unit tests for idaudit.certify.sanity_controls (split-half controls, seed 000 §4.4)."""

from __future__ import annotations

import numpy as np
import pytest
import xarray as xr

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
    with pytest.raises(InvalidInputError, match=r"`level` must be in \(0, 1\); got 1.0"):
        sanity_controls(es, level=1.0, progress=False)
    with pytest.raises(TypeError, match=r"`es` must be an idaudit\.EmbeddingSet"):
        sanity_controls(np.zeros((3, 3)), progress=False)  # type: ignore[arg-type]
