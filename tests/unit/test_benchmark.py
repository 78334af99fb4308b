"""Unit tests for idaudit.benchmark.noise_sweep."""

from __future__ import annotations

import numpy as np
import pytest
import xarray as xr

from idaudit.audits import GaussMechAuditor, MMDTVAuditor, ROCHTAuditor
from idaudit.benchmark import noise_sweep
from idaudit.data import EmbeddingSet
from idaudit.exceptions import InvalidInputError


@pytest.fixture(scope="module")
def base() -> EmbeddingSet:
    return EmbeddingSet(np.random.default_rng(4).normal(size=(8, 4)), np.arange(8))


@pytest.fixture(scope="module")
def sweep(base: EmbeddingSet) -> xr.Dataset:
    return noise_sweep(
        base,
        [0.05, 0.5, 5.0],
        mechanism="laplace",
        n_pairs=6,
        n_per_identity=60,
        auditors=[GaussMechAuditor(), MMDTVAuditor(), ROCHTAuditor(rng=0)],
        progress=False,
    )


def test_schema(sweep: xr.Dataset) -> None:
    assert dict(sweep.sizes) == {"scale": 3, "pair": 6, "delta": 9}
    np.testing.assert_allclose(sweep["scale"], [0.05, 0.5, 5.0])
    np.testing.assert_allclose(sweep["noise_sd"], np.sqrt(2) * np.array([0.05, 0.5, 5.0]))
    for name in ("gaussmech_epsilon", "mmdtv_epsilon", "rocht_auc", "true_epsilon"):
        assert sweep[name].dims == ("scale", "pair"), name
    assert sweep["reference_epsilon"].dims == ("scale",)
    assert sweep["certified_epsilon_max"].dims == ("scale",)
    assert sweep["certified_epsilon"].attrs["status"] == "certified_lower_bound"
    assert sweep["certified_epsilon_curve"].dims == ("scale", "delta")
    assert sweep["certified_epsilon_curve"].attrs["status"] == "certified_lower_bound"
    assert sweep["true_epsilon_curve"].attrs["status"] == "reference"
    for name, var in sweep.data_vars.items():
        assert {"long_name", "status"} <= set(var.attrs), name
    assert sweep.attrs["mechanism"] == "laplace"
    assert sweep.attrs["reference_delta"] == 0.0
    assert sweep.attrs["truth_kind"] == "exact"
    for value in sweep.attrs.values():
        assert isinstance(value, (str, int, float)), value


def test_truth_is_the_l1_distance_over_the_scale(base: EmbeddingSet, sweep: xr.Dataset) -> None:
    for i, scale in enumerate(sweep["scale"].values):
        for j in range(sweep.sizes["pair"]):
            a = sweep["identity_a"].values[j].item()
            b = sweep["identity_b"].values[j].item()
            l1 = np.abs(base.get(a) - base.get(b)).sum()
            assert float(sweep["true_epsilon"][i, j]) == pytest.approx(l1 / scale)
        assert float(sweep["reference_epsilon"][i]) == pytest.approx(
            2 * np.abs(base.embeddings).sum(axis=1).max() / scale
        )


def test_sweep_runs_from_separable_to_chance(sweep: xr.Dataset) -> None:
    auc = sweep["rocht_auc"].median("pair").values
    assert auc[0] == 1.0
    assert auc[-1] < 0.75
    # the certificate is sound against the exact truth and loses power with the noise
    cert = sweep["certified_epsilon"]
    chosen = cert.notnull()
    assert int(chosen.sum("pair")[0]) >= 1
    assert bool((cert <= sweep["true_epsilon"]).where(chosen, True).all())
    assert float(sweep["certified_epsilon_max"][0]) > float(sweep["certified_epsilon_max"][-1])
    # the pure-DP MMD-TV sample estimates stay below the (large) truth
    assert bool((sweep["mmdtv_epsilon"] <= sweep["true_epsilon"]).all())


def test_gaussian_sweep_defaults(base: EmbeddingSet) -> None:
    ds = noise_sweep(
        base,
        [0.3, 3.0],
        n_pairs=4,
        n_per_identity=30,
        auditors=[GaussMechAuditor()],
        certify=False,
        progress=False,
    )
    assert ds.attrs["mechanism"] == "gaussian"
    assert ds.attrs["reference_delta"] == 1e-5
    assert "certified_epsilon" not in ds
    np.testing.assert_allclose(ds["noise_sd"], [0.3, 3.0])
    # larger noise, smaller epsilon
    assert (ds["true_epsilon"][1] < ds["true_epsilon"][0]).all()
    assert float(ds["reference_epsilon"][1]) < float(ds["reference_epsilon"][0])


def test_same_rng_same_sweep(base: EmbeddingSet) -> None:
    kwargs = {
        "n_pairs": 3,
        "n_per_identity": 20,
        "auditors": [MMDTVAuditor()],
        "certify": False,
        "progress": False,
    }
    one = noise_sweep(base, [0.5], rng=1, **kwargs)
    two = noise_sweep(base, [0.5], rng=1, **kwargs)
    three = noise_sweep(base, [0.5], rng=2, **kwargs)
    xr.testing.assert_identical(one, two)
    assert not one["mmdtv_mmd2"].equals(three["mmdtv_mmd2"])


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"scales": [0.1, -1.0]}, InvalidInputError, "must be positive and finite; got -1.0"),
        ({"scales": [0.1, 0.1]}, InvalidInputError, "`scales` must be distinct"),
        ({"scales": []}, InvalidInputError, "`scales` must hold at least one value"),
        ({"mechanism": "uniform"}, InvalidInputError, "`mechanism` must be one of"),
        ({"delta": 1.0}, InvalidInputError, r"`delta` must be in \[0, 1\); got 1.0"),
        ({"n_pairs": 0}, InvalidInputError, "`n_pairs` must be >= 1; got 0"),
        (
            {"n_pairs": 29},
            InvalidInputError,
            "`n_pairs` must be at most the number of unordered pairs, 28 for 8 identities; got 29",
        ),
        ({"certify": "yes"}, TypeError, "`certify` must be a bool"),
    ],
)
def test_bad_input(base: EmbeddingSet, kwargs: dict, error: type, message: str) -> None:
    args = {"scales": [0.5], "progress": False, **kwargs}
    with pytest.raises(error, match=message):
        noise_sweep(base, **args)


def test_base_must_be_an_embedding_set() -> None:
    with pytest.raises(TypeError, match=r"`base` must be an idaudit\.EmbeddingSet"):
        noise_sweep(np.eye(3), [1.0])  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("mechanism", "delta", "cert_delta"),
    [("gaussian", None, 0.0), ("laplace", None, 1e-5), ("gaussian", 1e-3, 1e-5)],
)
def test_certifier_at_another_delta_is_refused(
    base: EmbeddingSet, mechanism: str, delta: float | None, cert_delta: float
) -> None:
    from idaudit.certify import ReservedTestCertifier

    sweep_delta = {"gaussian": 1e-5, "laplace": 0.0}[mechanism] if delta is None else delta
    message = (
        rf"`certifier.delta` must equal the sweep's `delta`, at which `true_epsilon` is stated; "
        rf"got certifier.delta={cert_delta!r} and delta={sweep_delta!r}"
    )
    with pytest.raises(InvalidInputError, match=message):
        noise_sweep(
            base,
            [0.5],
            mechanism=mechanism,  # type: ignore[arg-type]
            delta=delta,
            n_pairs=4,
            certifier=ReservedTestCertifier(delta=cert_delta),
            progress=False,
        )


def test_certifier_and_truth_share_the_delta(base: EmbeddingSet) -> None:
    from idaudit.certify import ReservedTestCertifier

    # a delta = 0 certificate of Gaussian noise: the truth follows to the pure epsilon (inf)
    ds = noise_sweep(
        base,
        [0.3],
        delta=0.0,
        n_pairs=4,
        n_per_identity=30,
        auditors=[GaussMechAuditor()],
        certifier=ReservedTestCertifier(n_candidates=4, n_select=1, delta=0.0, progress=False),
        progress=False,
    )
    assert ds.attrs["reference_delta"] == ds.attrs["certifier.delta"] == 0.0
    assert np.isposinf(ds["true_epsilon"]).all()
    assert int(ds["certified_epsilon"].notnull().sum()) == 1


def test_certifier_must_be_a_reserved_test_certifier(base: EmbeddingSet) -> None:
    with pytest.raises(TypeError, match=r"`certifier` must be an idaudit\.certify\.ReservedTest"):
        noise_sweep(base, [0.5], certifier=object(), progress=False)  # type: ignore[arg-type]


def test_certifier_without_certify_is_refused(base: EmbeddingSet) -> None:
    from idaudit.certify import ReservedTestCertifier

    with pytest.raises(InvalidInputError, match="`certifier` is given but `certify` is False"):
        noise_sweep(base, [0.5], certifier=ReservedTestCertifier(), certify=False, progress=False)


def test_sequential_certificate_joins_the_sweep(base: EmbeddingSet) -> None:
    from idaudit.certify import SequentialCertifier

    template = SequentialCertifier(
        None, [], max_samples=100, batch_size=50, n_dev=20, rng=0, progress=False
    )
    ds = noise_sweep(
        base,
        [0.2, 2.0],
        mechanism="laplace",
        n_pairs=3,
        n_per_identity=30,
        auditors=[MMDTVAuditor(confidence_level=0.9, n_simultaneous=3)],
        certify=False,
        sequential=template,
        progress=False,
    )
    assert ds["sequential_epsilon"].dims == ("scale", "pair")
    assert ds["sequential_epsilon"].attrs["status"] == "certified_lower_bound"
    assert ds["mmdtv_epsilon_hs_lb"].attrs["status"] == "certified_lower_bound"
    np.testing.assert_array_equal(ds["sequential_n_used"].values, [120, 120])
    np.testing.assert_allclose(
        ds["sequential_epsilon_max"].values, ds["sequential_epsilon"].max("pair").values
    )
    # sound on this run, and more noise certifies less
    assert bool((ds["sequential_epsilon"] <= ds["true_epsilon"]).all())
    assert float(ds["sequential_epsilon_max"][0]) >= float(ds["sequential_epsilon_max"][1])
    with pytest.raises(InvalidInputError, match=r"`sequential\.delta` must equal"):
        noise_sweep(
            base,
            [1.0],
            mechanism="gaussian",
            n_pairs=2,
            sequential=template,
            certify=False,
            progress=False,
        )
    with pytest.raises(TypeError, match="`sequential` must be"):
        noise_sweep(base, [1.0], n_pairs=2, sequential=object(), progress=False)


def test_certified_curve_lies_under_the_truth_of_its_pairs(
    base: EmbeddingSet, sweep: xr.Dataset
) -> None:
    # Laplace noise on a point base: a pair's pure epsilon is L1 / b exactly (seed 000,
    # Section 5.2); at delta > 0 the same number is an upper bound on epsilon(delta), and the
    # curve says so
    cert = sweep["certified_epsilon"]
    at_zero = sweep["certified_epsilon_curve"].sel(delta=0.0)
    np.testing.assert_allclose(at_zero.values, sweep["certified_epsilon_max"].values)
    for i, scale in enumerate(sweep["scale"].values):
        chosen = np.flatnonzero(np.isfinite(cert[i].values))
        eps0 = max(
            np.abs(
                base.get(sweep["identity_a"].values[j].item())
                - base.get(sweep["identity_b"].values[j].item())
            ).sum()
            / scale
            for j in chosen
        )
        np.testing.assert_allclose(sweep["true_epsilon_curve"][i].values, eps0, rtol=1e-12)
        exact = sweep["true_epsilon_curve_exact"][i].values
        assert exact.tolist() == (sweep["delta"].values == 0.0).tolist()
        curve = sweep["certified_epsilon_curve"][i].values
        assert (curve <= sweep["true_epsilon_curve"][i].values + 1e-12).all()
        assert (np.diff(curve) <= 1e-12).all()  # non-increasing in delta


def test_gaussian_true_curve_is_balle_wang_at_every_delta(base: EmbeddingSet) -> None:
    from scipy import optimize, stats

    ds = noise_sweep(
        base,
        [1.0],
        mechanism="gaussian",
        n_pairs=4,
        n_per_identity=40,
        auditors=[GaussMechAuditor()],
        progress=False,
    )
    chosen = np.flatnonzero(np.isfinite(ds["certified_epsilon"][0].values))
    l2 = max(
        np.linalg.norm(
            base.get(ds["identity_a"].values[j].item())
            - base.get(ds["identity_b"].values[j].item())
        )
        for j in chosen
    )

    def delta_of(eps: float) -> float:  # Balle & Wang (2018), Theorem 8, written out here
        r = l2 / 1.0
        return stats.norm.cdf(r / 2 - eps / r) - np.exp(eps) * stats.norm.cdf(-r / 2 - eps / r)

    for d in ds["delta"].values:
        got = float(ds["true_epsilon_curve"].sel(delta=d)[0])
        if d == 0.0:
            assert got == np.inf  # Gaussian noise has no finite pure epsilon
        elif delta_of(0.0) <= d:
            assert got == 0.0
        else:
            ref = optimize.brentq(lambda e, d=d: delta_of(e) - d, 0.0, 200.0, xtol=1e-13)
            assert got == pytest.approx(ref, rel=1e-7)
    assert bool(ds["true_epsilon_curve_exact"].all())
    curve = ds["certified_epsilon_curve"][0].values
    assert (curve <= ds["true_epsilon_curve"][0].values + 1e-12).all()
