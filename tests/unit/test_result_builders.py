"""Every function that builds a result Dataset builds one that passes ``check_result_dataset``.

One small data set, every builder: ``audit_pairs``, ``merge_audits``, ``concat_conditions``,
the certifier's ``certificates_`` and ``candidates_``, ``sanity_controls``,
``audit_mechanism`` (with the mechanisms' truths), ``noise_sweep``, and the sensitivity
helpers. The demo's Dataset is checked by the CLI's demo test. Each result also round-trips
through netCDF unchanged, which the schema exists to guarantee.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
import xarray as xr

import idaudit as ida
from idaudit.audits import (
    classifier_sensitivity,
    concat_conditions,
    merge_audits,
    mmd_bandwidth_sweep,
    tv_witness_ratio,
)
from idaudit.benchmark import noise_sweep
from idaudit.certify import ReservedTestCertifier, sanity_controls
from idaudit.mechanisms import GaussianNoise, audit_mechanism
from idaudit.results import STATUSES, check_result_dataset

K, N, D = 5, 24, 4


@pytest.fixture(scope="module")
def es() -> ida.EmbeddingSet:
    gen = np.random.default_rng(0)
    x = np.repeat(gen.normal(size=(K, D)), N, axis=0) + 0.8 * gen.normal(size=(K * N, D))
    return ida.EmbeddingSet(x, np.repeat([f"p{i}" for i in range(K)], N))


def _audit(es: ida.EmbeddingSet) -> xr.Dataset:
    pairs = ida.sample_pairs(es.identities, 4, rng=0)
    return ida.audit_pairs(es, pairs, [ida.MMDTVAuditor(), ida.ROCHTAuditor()], progress=False)


def _merge(es: ida.EmbeddingSet) -> xr.Dataset:
    pairs = ida.sample_pairs(es.identities, 4, rng=0)
    few = ida.audit_pairs(es, pairs[:2], [ida.ROCHTAuditor()], progress=False)
    many = ida.audit_pairs(es, pairs, [ida.MMDTVAuditor()], batch_size=1, progress=False)
    return merge_audits(few, many)


def _conditions(es: ida.EmbeddingSet) -> xr.Dataset:
    other = ida.EmbeddingSet(es.embeddings[::-1], es.labels)
    return concat_conditions({"x": _audit(es), "y": _audit(other)})


def _certifier(es: ida.EmbeddingSet) -> ReservedTestCertifier:
    return ReservedTestCertifier(n_candidates=4, n_select=2, rng=0, progress=False).fit(es)


def _mechanism(es: ida.EmbeddingSet) -> xr.Dataset:
    mech = GaussianNoise(ida.EmbeddingSet(np.eye(3), ["a", "b", "c"]), sigma=0.5)
    return audit_mechanism(
        mech, [("a", "b"), ("b", "c")], [ida.GaussMechAuditor()], 20, rng=0, progress=False
    )


def _sweep(es: ida.EmbeddingSet) -> xr.Dataset:
    base = ida.EmbeddingSet(np.eye(4), ["a", "b", "c", "d"])
    return noise_sweep(base, [0.3, 1.0], n_pairs=3, n_per_identity=20, progress=False)


BUILDERS: dict[str, Callable[[ida.EmbeddingSet], xr.Dataset]] = {
    "audit_pairs": _audit,
    "merge_audits": _merge,
    "concat_conditions": _conditions,
    "certificates_": lambda es: _certifier(es).certificates_,
    "candidates_": lambda es: _certifier(es).candidates_,
    "sanity_controls": lambda es: sanity_controls(es, n_permutations=20, progress=False),
    "audit_mechanism": _mechanism,
    "noise_sweep": _sweep,
    "mmd_bandwidth_sweep": lambda es: mmd_bandwidth_sweep(
        es, [("p0", "p1")], [0.5, 1.0], progress=False
    ),
    "classifier_sensitivity": lambda es: classifier_sensitivity(
        es, [("p0", "p1")], n_estimators=5, progress=False
    ),
    "tv_witness_ratio": lambda es: tv_witness_ratio(_audit(es)),
}


@pytest.mark.parametrize("builder", list(BUILDERS))
def test_result_passes_the_schema_check_and_round_trips(
    builder: str, es: ida.EmbeddingSet, tmp_path: Path
) -> None:
    ds = BUILDERS[builder](es)
    check_result_dataset(ds)
    assert {ds[v].attrs["status"] for v in ds.data_vars} <= set(STATUSES)
    ds.to_netcdf(tmp_path / "r.nc")
    with xr.open_dataset(tmp_path / "r.nc") as back:
        xr.testing.assert_identical(back.load(), ds)


def test_counts_of_a_certificate_are_descriptive(es: ida.EmbeddingSet) -> None:
    cert = _certifier(es)
    for name in ("n_dev_a", "n_test_b", "test_fp", "test_fn"):
        assert cert.certificates_[name].attrs["status"] == "descriptive", name
    assert cert.certificates_["ufpr"].attrs["status"] == "certified_upper_bound"
    assert cert.candidates_["n_test_a"].attrs["status"] == "descriptive"
