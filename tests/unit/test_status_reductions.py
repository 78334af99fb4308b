"""A number derived from many certified ones is certified only when their multiplicity is paid.

``reduce_status`` is the one place that decides; these tests check its rule against the union
bound, then walk every reducer in the package (found by reading the source, so that a new one
that copies a status instead of deriving it fails here).
"""

from __future__ import annotations

import ast
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
import xarray as xr

import idaudit as ida
from idaudit.audits import table1, table2
from idaudit.exceptions import InvalidInputError
from idaudit.results import CERTIFIED_STATUSES, STATUSES, reduce_status, reduction_attrs

SRC = Path(ida.__file__).parent


@pytest.mark.parametrize("status", list(STATUSES))
def test_only_certified_statuses_pay_for_multiplicity(status: str) -> None:
    for n_values, n_sim in ((1, 1), (5, 5), (5, 4), (300, 1), (2, 10)):
        out = reduce_status(status, n_values, n_simultaneous=n_sim)
        if status in CERTIFIED_STATUSES and n_values > n_sim:
            assert out.status == "sample_estimate"
            assert f"{n_values}" in out.reason
            assert f"only {n_sim}" in out.reason
        else:
            assert out == (status, "")


def test_union_bound_behind_the_rule() -> None:
    # n bounds each failing with probability alpha / n_sim: the chance that any of the n fails
    # is at most n * alpha / n_sim, which is <= alpha exactly when n <= n_sim
    alpha = Fraction(1, 20)  # exact arithmetic: the rule must not hinge on rounding
    for n in range(1, 30):
        for n_sim in range(1, 30):
            certified = reduce_status("certified_lower_bound", n, n_simultaneous=n_sim).status
            assert (certified == "certified_lower_bound") == (n * alpha / n_sim <= alpha)


def test_reduction_attrs_reads_the_variable() -> None:
    attrs = {"status": "certified_upper_bound", "n_simultaneous": 4, "long_name": "x"}
    assert reduction_attrs(attrs, 4) == {"status": "certified_upper_bound", "n_simultaneous": 4}
    lowered = reduction_attrs(attrs, 5)
    assert lowered["status"] == "sample_estimate"
    assert "status_reason" in lowered
    assert reduction_attrs({"status": "certified_lower_bound"}, 2)["status"] == "sample_estimate"


@pytest.mark.parametrize(
    ("args", "kwargs"),
    [(("certified", 3), {}), (("diagnostic", 0), {}), (("diagnostic", 2), {"n_simultaneous": 0})],
)
def test_reduce_status_refuses_bad_input(args: tuple, kwargs: dict) -> None:
    with pytest.raises(InvalidInputError):
        reduce_status(*args, **kwargs)


# --------------------------------------------------------------------------- every reducer
def _embeddings(n_ids: int = 6, n: int = 12) -> ida.EmbeddingSet:
    gen = np.random.default_rng(0)
    x = gen.normal(size=(n_ids * n, 4))
    return ida.EmbeddingSet(x, np.repeat(np.arange(n_ids), n))


@pytest.mark.parametrize("n_simultaneous", [1, "pairs"])
def test_audit_pairs_summary(n_simultaneous: object) -> None:
    es = _embeddings()
    aud = ida.MMDTVAuditor(confidence_level=0.8, n_simultaneous=n_simultaneous)
    ds = ida.audit_pairs(es, "all", [aud], keep="summary", progress=False)
    expected = "certified_lower_bound" if n_simultaneous == "pairs" else "sample_estimate"
    for var in ("epsilon_lb", "epsilon_hs_lb", "mmd_lb"):
        for red in ("max", "quantile", "worst"):
            assert ds[f"mmdtv_{var}_{red}"].attrs["status"] == expected, (var, red)
    # per-pair variables keep their status and say how many hold jointly
    full = ida.audit_pairs(es, "all", [aud], progress=False)
    assert full["mmdtv_epsilon_lb"].attrs["status"] == "certified_lower_bound"
    assert full["mmdtv_epsilon_lb"].attrs["n_simultaneous"] == (
        15 if n_simultaneous == "pairs" else 1
    )


def _per_pair_with_certified_epsilon(n_simultaneous: int) -> xr.Dataset:
    es = _embeddings()
    ds = ida.audit_pairs(es, "all", [ida.MMDTVAuditor()], progress=False)
    # pretend the per-pair values were certified, each on its own or jointly
    ds["mmdtv_epsilon"].attrs.update(status="certified_lower_bound", n_simultaneous=n_simultaneous)
    return ds


@pytest.mark.parametrize(
    ("n_sim", "expected"), [(1, "sample_estimate"), (15, "certified_lower_bound")]
)
def test_summarize_and_table1(n_sim: int, expected: str) -> None:
    ds = _per_pair_with_certified_epsilon(n_sim)
    summary = ida.summarize(ds)
    for col, status in zip(summary.columns, summary.statuses, strict=True):
        if col.startswith("mmdtv_epsilon"):
            assert status == expected, col
    assert table1(ds).attrs["status"]["mmdtv"] == expected


def test_table2() -> None:
    cert = xr.Dataset(
        {
            "epsilon_lb": ("pair", [0.1, 0.2], {"status": "certified_lower_bound"}),
            "n_a": ("pair", [10, 10]),
        },
    )
    assert table2({"c": cert}).attrs["status"]["epsilon_lb"] == "sample_estimate"
    cert["epsilon_lb"].attrs["n_simultaneous"] = 2
    assert table2({"c": cert}).attrs["status"]["epsilon_lb"] == "certified_lower_bound"


def test_certifiers_record_how_many_bounds_hold_jointly() -> None:
    es = _embeddings(8, 30)
    cert = ida.ReservedTestCertifier(n_candidates=28, n_select=3, rng=0, progress=False).fit(es)
    for var in ("epsilon_lb", "ufpr", "ufnr"):
        assert cert.certificates_[var].attrs["n_simultaneous"] == 3
    assert reduction_attrs(cert.certificates_["epsilon_lb"].attrs, 3)["status"] == (
        "certified_lower_bound"
    )


# functions that read a status without deriving a new number from several values
_READS_ONLY = {
    ("_results.py", "check_result_dataset"): "validates the schema",
    ("audits/_tables.py", "markdown"): "prints the statuses a table builder derived",
    ("demo/_report.py", "_noise_table"): "prints certified_epsilon_max's status (derived)",
    ("memorization/_run.py", "_run"): "copies frame statuses into the JSON report",
}


def _reads_status(fn: ast.AST) -> bool:
    for n in ast.walk(fn):
        if (
            isinstance(n, ast.Call)
            and isinstance(n.func, ast.Attribute)
            and n.func.attr == "get"
            and isinstance(n.func.value, ast.Attribute)
            and n.func.value.attr == "attrs"
            and n.args
            and isinstance(n.args[0], ast.Constant)
            and n.args[0].value == "status"
        ):
            return True
        if (
            isinstance(n, ast.Subscript)
            and isinstance(n.ctx, ast.Load)
            and isinstance(n.value, ast.Attribute)
            and n.value.attr == "attrs"
            and isinstance(n.slice, ast.Constant)
            and n.slice.value == "status"
        ):
            return True
    return False


def _derives_status(fn: ast.AST) -> bool:
    for n in ast.walk(fn):
        if isinstance(n, ast.Call):
            f = n.func
            name = f.id if isinstance(f, ast.Name) else getattr(f, "attr", "")
            if name in ("reduce_status", "reduction_attrs"):
                return True
    return False


def test_every_function_that_reads_a_status_derives_it() -> None:
    readers, offenders = set(), []
    for path in sorted(SRC.rglob("*.py")):
        rel = path.relative_to(SRC).as_posix()
        for fn in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) and _reads_status(fn):
                readers.add((rel, fn.name))
                if not _derives_status(fn) and (rel, fn.name) not in _READS_ONLY:
                    offenders.append(f"{rel}:{fn.lineno} {fn.name}")
    assert not offenders, (
        f"these functions copy a status without reduce_status/reduction_attrs: {offenders}"
    )
    # the scan sees the known reducers, and the allow-list names nothing that went away
    assert ("plotting.py", "plot_certified_routes") in readers
    assert set(_READS_ONLY) <= readers


def test_pairs_resolution_keeps_advancing_the_callers_generator() -> None:
    # n_simultaneous="pairs" resolves on a copy of the auditor; a Generator rng must still be
    # the caller's object, so two calls draw two seeds
    es = _embeddings(3, 12)
    aud = ida.MMDTVAuditor(
        confidence_level=0.8, n_simultaneous="pairs", rng=np.random.default_rng(1)
    )
    seeds = {ida.audit_pairs(es, "all", [aud], progress=False).attrs["mmdtv.seed"] for _ in "ab"}
    assert len(seeds) == 2
    assert aud.n_simultaneous == "pairs"
