"""The results core: statuses, Dataset building and checking, provenance, owner-only writers."""

from __future__ import annotations

import ast
import json
import os
import re
import stat
from collections.abc import Callable
from fractions import Fraction
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import xarray as xr

import idaudit as ida
from idaudit._results import check_status
from idaudit.audits import (
    classifier_sensitivity,
    concat_conditions,
    merge_audits,
    mmd_bandwidth_sweep,
    table1,
    table2,
    tv_witness_ratio,
)
from idaudit.benchmark import noise_sweep
from idaudit.certify import ReservedTestCertifier, sanity_controls
from idaudit.exceptions import InvalidInputError
from idaudit.mechanisms import GaussianNoise, audit_mechanism
from idaudit.results import (
    CERTIFIED_STATUSES,
    EPSILON_STATUSES,
    STATUSES,
    check_result_dataset,
    pair_dataset,
    private_dir,
    provenance,
    reduce_status,
    reduction_attrs,
    variable,
    write_csv,
    write_json,
    write_text,
)


def _valid() -> xr.Dataset:
    return pair_dataset(
        [("a", "b"), ("a", "c")],
        {"eps": variable("pair", [0.1, np.inf], long_name="epsilon", status="diagnostic")},
        n_a=[3, 3],
        n_b=[4, 5],
        attrs=provenance(title="test", seeds={"rng": 7}, settings={"device": "cpu"}),
    )


def test_epsilon_statuses_are_statuses() -> None:
    assert set(EPSILON_STATUSES) <= set(STATUSES)
    assert "descriptive" in STATUSES


def test_check_status_refuses_unknown_label() -> None:
    with pytest.raises(InvalidInputError, match="`status` must be one of"):
        check_status("certified")


def test_valid_dataset_passes_and_round_trips(tmp_path: Path) -> None:
    ds = _valid()
    check_result_dataset(ds)
    ds.to_netcdf(tmp_path / "r.nc")
    back = xr.load_dataset(tmp_path / "r.nc")
    check_result_dataset(back)
    assert back.attrs["seed.rng"] == 7
    assert back.attrs["setting.device"] == "cpu"


@pytest.mark.parametrize(
    ("breakage", "message"),
    [
        (lambda ds: ds["eps"].attrs.pop("status"), "has status None"),
        (lambda ds: ds["eps"].attrs.update(status="exact"), "has status 'exact'"),
        (lambda ds: ds["eps"].attrs.pop("long_name"), "has no long_name"),
        (lambda ds: ds.attrs.update(flag=True), "attribute 'flag' is bool"),
        (lambda ds: ds.attrs.update(params={"a": 1}), "attribute 'params' is dict"),
        (lambda ds: ds.attrs.update(x=float("nan")), "attribute 'x' is NaN"),
        (lambda ds: ds.attrs.pop("idaudit_version"), "'idaudit_version' is missing"),
    ],
)
def test_each_broken_rule_is_named(breakage: object, message: str) -> None:
    ds = _valid()
    breakage(ds)  # type: ignore[operator]
    with pytest.raises(InvalidInputError, match=message):
        check_result_dataset(ds)


def test_missing_pair_coord_and_self_pair_are_named() -> None:
    ds = _valid().drop_vars("n_b")
    with pytest.raises(InvalidInputError, match="coordinate 'n_b' is missing"):
        check_result_dataset(ds)
    ds = _valid().assign_coords(identity_b=("pair", ["b", "a"]))
    with pytest.raises(InvalidInputError, match="1 pair\\(s\\) pair an identity with itself"):
        check_result_dataset(ds)


def test_audit_pairs_result_passes_the_check() -> None:
    rng = np.random.default_rng(0)
    es = ida.EmbeddingSet(rng.normal(size=(60, 4)), np.repeat(["a", "b", "c"], 20))
    ds = ida.audit_pairs(es, [("a", "b"), ("b", "c")], [ida.MMDTVAuditor()], progress=False)
    check_result_dataset(ds)


def test_writers_are_owner_only_and_exact(tmp_path: Path) -> None:
    frame = pd.DataFrame({"x": [1.5, 2.0], "y": ["a", "b"]})
    paths = [
        write_text("hello\n", tmp_path / "t.md"),
        write_json(
            {"eps": np.float64(np.inf), "n": np.int64(3), "v": np.arange(2)}, tmp_path / "j"
        ),
        write_csv(frame, tmp_path / "c.csv"),
    ]
    for path in paths:
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert json.loads((tmp_path / "j").read_text()) == {"eps": "inf", "n": 3, "v": [0, 1]}
    pd.testing.assert_frame_equal(pd.read_csv(tmp_path / "c.csv"), frame)
    assert not list(tmp_path.glob(".*.tmp"))


def test_failed_write_leaves_nothing(tmp_path: Path) -> None:
    class Unserialisable:
        pass

    with pytest.raises(TypeError):
        write_json({"x": Unserialisable()}, tmp_path / "bad.json")
    assert list(tmp_path.iterdir()) == []


def test_status_page_lists_exactly_the_defined_labels() -> None:
    page = Path(__file__).parents[2] / "docs" / "status.md"
    rows = re.findall(r"^\| `([a-z_]+)` \|", page.read_text(encoding="utf-8"), flags=re.M)
    assert rows == list(STATUSES)


@pytest.mark.parametrize(
    ("breakage", "message"),
    [
        (lambda ds: ds["eps"].attrs.update(status=["diagnostic"]), "has status \\['diagnostic'\\]"),
        (lambda ds: ds["eps"].attrs.update(status=np.array(["x", "y"])), "has status"),
        (lambda ds: ds["eps"].attrs.update(long_name=3), "has no long_name"),
        (lambda ds: ds.assign_coords(n_a=("pair", [-1, 3])), "'n_a' must hold integers >= 0"),
        (lambda ds: ds.assign_coords(n_b=("pair", [1.0, 3.0])), "'n_b' must hold integers >= 0"),
        (lambda ds: ds.attrs.update(x=np.array([1.0])), "attribute 'x' is ndarray"),
    ],
)
def test_malformed_values_are_named_not_crashed_on(breakage: object, message: str) -> None:
    ds = _valid()
    out = breakage(ds)  # type: ignore[operator]
    ds = out if isinstance(out, xr.Dataset) else ds
    with pytest.raises(InvalidInputError, match=message):
        check_result_dataset(ds)


# -- owner-only folders: every level private_dir creates is 0700 -------------------------------


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def _shared_base(tmp_path: Path) -> Path:
    """A folder that existed before: it must keep its (group/world-readable) mode."""
    base = tmp_path / "shared"
    base.mkdir()
    base.chmod(0o755)
    return base


def _assert_created_private(base: Path, leaf: Path) -> None:
    """Every folder from ``base`` (exclusive) down to ``leaf`` is 0700; ``base`` is 0755."""
    levels = [leaf, *leaf.parents]
    created = levels[: levels.index(base)]
    assert created, f"{leaf} is not under {base}"
    for folder in created:
        assert folder.is_dir(), folder
        assert oct(_mode(folder)) == oct(0o700), folder
    assert oct(_mode(base)) == oct(0o755)


@pytest.mark.usefixtures("permissive_umask")
def test_private_dir_makes_every_missing_level_owner_only(tmp_path: Path) -> None:
    base = _shared_base(tmp_path)
    leaf = base / "a" / "b" / "c"
    assert private_dir(leaf) == leaf
    _assert_created_private(base, leaf)
    assert private_dir(str(leaf)) == leaf  # exists: nothing changes, nothing raised


@pytest.mark.parametrize("umask", [0o000, 0o022, 0o277], ids=oct)
def test_private_dir_sets_the_mode_whatever_the_umask(tmp_path: Path, umask: int) -> None:
    # 0o277 narrows mkdir's 0o700 to 0o500: only an explicit chmod gives the owner write back
    before = os.umask(umask)
    try:
        leaf = private_dir(tmp_path / "a" / "b")
    finally:
        os.umask(before)
    assert [oct(_mode(p)) for p in (tmp_path / "a", leaf)] == [oct(0o700)] * 2


@pytest.mark.usefixtures("permissive_umask")
def test_private_dir_keeps_the_mode_of_existing_levels(tmp_path: Path) -> None:
    base = _shared_base(tmp_path)
    (base / "a").mkdir()
    (base / "a").chmod(0o750)
    private_dir(base / "a" / "b")
    assert oct(_mode(base / "a")) == oct(0o750)
    assert oct(_mode(base / "a" / "b")) == oct(0o700)
    (base / "c").mkdir()
    (base / "c").chmod(0o755)
    private_dir(base / "c")  # the folder itself existed: left as it is
    assert oct(_mode(base / "c")) == oct(0o755)


def test_private_dir_refuses_a_file_in_the_way(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    with pytest.raises(
        InvalidInputError, match=re.escape(f"`out` must be a folder; {str(blocker)!r} is a file.")
    ):
        private_dir(blocker, name="out")
    deeper = blocker / "x" / "y"
    message = (
        f"`path` must be a folder; {str(deeper)!r} cannot be made: {str(blocker)!r} is a file."
    )
    with pytest.raises(InvalidInputError, match=re.escape(message)):
        private_dir(deeper)
    assert blocker.read_text() == "not a folder"


def test_private_dir_is_safe_when_another_process_makes_the_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    leaf = tmp_path / "a" / "b"
    real_mkdir = Path.mkdir

    def racing_mkdir(self: Path, *args: object, **kwargs: object) -> None:
        if self == leaf:  # someone else makes it (with their own mode) just before us
            real_mkdir(self, mode=0o755)
            os.chmod(self, 0o755)
        real_mkdir(self, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(Path, "mkdir", racing_mkdir)
    assert private_dir(leaf) == leaf
    assert oct(_mode(tmp_path / "a")) == oct(0o700)
    assert oct(_mode(leaf)) == oct(0o755)  # theirs: not ours to change


# each place that used to make folders, driven through its public entry point


@pytest.mark.usefixtures("permissive_umask")
def test_audit_store_folders_are_owner_only(tmp_path: Path) -> None:
    pytest.importorskip("zarr")
    base = _shared_base(tmp_path)
    store = base / "x" / "y" / "store"
    es = ida.EmbeddingSet(np.random.default_rng(0).normal(size=(30, 3)), np.repeat([0, 1, 2], 10))
    ida.audit_pairs(es, "all", [ida.GaussMechAuditor()], store=store, progress=False)
    _assert_created_private(base, store)


@pytest.mark.usefixtures("permissive_umask")
def test_embedding_cache_folders_are_owner_only(tmp_path: Path) -> None:
    from idaudit.faces import EmbeddingCache

    base = _shared_base(tmp_path)
    cache = EmbeddingCache(base / "x" / "y" / "cache")
    cache.put("ab" * 32, np.ones(3, np.float32))
    _assert_created_private(base, base / "x" / "y" / "cache" / "ab")


@pytest.mark.usefixtures("permissive_umask")
def test_privacy_cache_folders_are_owner_only(tmp_path: Path) -> None:
    from idaudit.pipeline import PrivacyCache
    from idaudit.pipeline._privacy_cache import model_key

    base = _shared_base(tmp_path)
    cache = PrivacyCache(base / "x" / "y" / "cache")
    compute = lambda r, c: np.ones(len(r))  # noqa: E731
    cache.distances({"name": "toy"}, ["h1"], ["h2"], compute)
    key = model_key({"name": "toy"})
    assert (base / "x" / "y" / "cache" / "appearance" / f"{key}.npz").is_file()
    _assert_created_private(base, base / "x" / "y" / "cache" / "appearance")


@pytest.mark.usefixtures("permissive_umask")
def test_privacy_check_out_folders_are_owner_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import idaudit.pipeline._privacy as run
    from idaudit.faces import FaceModelOptions

    for split in ("train", "heldout", "synthetic"):
        (tmp_path / "in" / split / "a").mkdir(parents=True)
    base = _shared_base(tmp_path)
    out = base / "x" / "y" / "out"

    def stop(options: object) -> None:  # the output folders exist by now; no model is loaded
        raise RuntimeError("stop before the models")

    monkeypatch.setattr(run, "build_models", stop)
    roots = [tmp_path / "in" / s for s in ("train", "heldout", "synthetic")]
    with pytest.raises(RuntimeError, match="stop before the models"):
        run.run_privacy_check(
            *roots, out, models=FaceModelOptions(dlib="torch", threads=1), progress=False
        )
    _assert_created_private(base, out / "cache")


@pytest.mark.usefixtures("permissive_umask")
def test_demo_out_folders_are_owner_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import idaudit.demo._run as demo  # run_demo looks run_face_demo up here

    def stop(*args: object, **kwargs: object) -> None:
        raise RuntimeError("stop before the face demo")

    monkeypatch.setattr(demo, "run_face_demo", stop)
    base = _shared_base(tmp_path)
    out = base / "x" / "y" / "demo"
    with pytest.raises(RuntimeError, match="stop before the face demo"):
        demo.run_demo(out, config=demo.QUICK, progress=False)
    _assert_created_private(base, out)


# -- NetCDF and atomic writers (as the commands use them) ---------------------------------


def test_writing_netcdf_without_a_netcdf4_backend_names_the_package(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import importlib.util

    from idaudit import results

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a: None if name in ("netCDF4", "h5py") else real(name, *a),
    )
    with pytest.raises(ImportError, match=r"netCDF-4 writer; install one with pip install netCDF4"):
        results.write_netcdf(xr.Dataset({"x": ("a", [1.0])}), tmp_path / "x.nc")
    assert not list(tmp_path.iterdir())


def test_atomic_write_leaves_nothing_on_failure(tmp_path: Path) -> None:
    from idaudit.results import write_atomic, write_text

    def boom(tmp: Path) -> None:
        tmp.write_text("partial")
        raise RuntimeError("interrupted")

    with pytest.raises(RuntimeError, match="interrupted"):
        write_atomic(tmp_path / "out.md", boom)
    assert not list(tmp_path.iterdir())
    path = write_text("hello", tmp_path / "out.md")
    assert path.read_text() == "hello"
    assert _mode(path) == 0o600


# -- statuses of reductions ------------------------------------------------------------------
# A number derived from many certified ones is certified only when their multiplicity is paid.
# ``reduce_status`` is the one place that decides; these tests check its rule against the union
# bound, then walk every reducer in the package (found by reading the source, so that a new one
# that copies a status instead of deriving it fails here).

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
    ("_results.py", "pair_frame"): "copies each variable's own status beside its column",
    ("pipeline/report.py", "audit_table"): "prints the statuses table1 derived",
    ("pipeline/report.py", "audit_document"): "prints the statuses table2 derived",
    ("pipeline/report.py", "frame_table"): "prints the statuses a table builder derived",
    ("demo/_noise_report.py", "_noise_table"): "prints certified_epsilon_max's status (derived)",
    ("pipeline/_privacy_report.py", "to_dict"): "copies frame statuses into the JSON report",
    ("benchmark.py", "private_swap_sweep"): "copies each route's per-pair status to its pairs",
    ("testing/_claims.py", "read_claim"): "reads a claim; the assertions reduce the family",
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
            if name in ("reduce_status", "reduction_attrs", "reduction_attrs_across"):
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
    assert ("plotting/_sweeps.py", "plot_certified_routes") in readers
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


# -- every result builder --------------------------------------------------------------------
# Every function that builds a result Dataset builds one that passes ``check_result_dataset``.
# One small data set, every builder: ``audit_pairs``, ``merge_audits``, ``concat_conditions``,
# the certifier's ``certificates_`` and ``candidates_``, ``sanity_controls``,
# ``audit_mechanism`` (with the mechanisms' truths), ``noise_sweep``, and the sensitivity
# helpers. The demo's Dataset is checked by the CLI's demo test. Each result also round-trips
# through netCDF unchanged, which the schema exists to guarantee.

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


def test_pair_frame_is_one_row_per_pair_and_carries_the_statuses() -> None:
    gen = np.random.default_rng(0)
    es = ida.EmbeddingSet(gen.normal(size=(60, 8)), np.repeat([0, 1, 2], 20))
    auditors = [ida.GaussMechAuditor(), ida.KDELRAuditor(), ida.MMDTVAuditor()]
    ds = ida.audit_pairs(es, [(0, 1), (0, 2), (1, 2)], auditors, progress=False)
    frame = ds.idaudit.pairs()
    assert len(frame) == 3
    assert len(ds.to_dataframe()) == 3 * 8  # the per-coordinate KDE-LR terms repeat each pair
    assert "kdelr_epsilon_per_dim" not in frame.columns
    assert frame.attrs["status"]["gaussmech_epsilon"] == "diagnostic"
    assert frame.attrs["status"]["mmdtv_epsilon"] == "sample_estimate"
    for name, status in frame.attrs["status"].items():
        assert status == ds[name].attrs["status"]


def test_reduction_attrs_across_pays_for_every_family() -> None:
    from idaudit.results import reduction_attrs_across

    # Bonferroni over families: 3 conditions x 2 pairs, each bound at alpha / n_simultaneous
    alone = {"status": "certified_lower_bound", "n_simultaneous": 2}
    together = {"status": "certified_lower_bound", "n_simultaneous": 6}
    lowered = reduction_attrs_across([(alone, 2)] * 3)
    assert lowered["status"] == "sample_estimate"
    assert "over 3 conditions" in lowered["status_reason"]
    assert "n_families=3" in lowered["status_reason"]
    assert reduction_attrs_across([(together, 2)] * 3) == {
        "status": "certified_lower_bound",
        "n_simultaneous": 6,
    }
    # unequal families: 3 values at alpha/6 and 2 at alpha/4 spend exactly alpha (3/6 + 2/4)
    three, two = (
        {"status": "certified_lower_bound", "n_simultaneous": n} for n in (6, 4)
    )
    assert reduction_attrs_across([(three, 3), (two, 2)])["status"] == "certified_lower_bound"
    assert reduction_attrs_across([(three, 3), (two, 3)])["status"] == "sample_estimate"
    # one smaller family breaks the union bound for all
    assert reduction_attrs_across([(together, 2), (together, 2), (alone, 2)])["status"] == (
        "sample_estimate"
    )
    # the weakest status wins; non-certified statuses carry over
    mixed = [(together, 2), ({"status": "diagnostic"}, 2)]
    assert reduction_attrs_across(mixed)["status"] == "diagnostic"
    with pytest.raises(InvalidInputError, match="`parts` must hold at least one family"):
        reduction_attrs_across([])
