"""The results core: statuses, Dataset building and checking, provenance, owner-only writers."""

from __future__ import annotations

import json
import os
import re
import stat
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import xarray as xr

import idaudit as ida
from idaudit._results import check_status
from idaudit.exceptions import InvalidInputError
from idaudit.results import (
    EPSILON_STATUSES,
    STATUSES,
    check_result_dataset,
    pair_dataset,
    private_dir,
    provenance,
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
    from idaudit.memorization import PrivacyCache, model_key

    base = _shared_base(tmp_path)
    cache = PrivacyCache(base / "x" / "y" / "cache")
    compute = lambda idx: (["ok"] * len(idx), np.ones((len(idx), 2), np.float32))  # noqa: E731
    cache.embeddings({"name": "toy"}, "train", "a", ["h1"], compute, dim=2)
    key = model_key({"name": "toy"})
    _assert_created_private(base, base / "x" / "y" / "cache" / "embeddings" / key / "train")


@pytest.mark.usefixtures("permissive_umask")
def test_privacy_check_out_folders_are_owner_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import idaudit.memorization._run as run

    for split in ("train", "heldout", "synthetic"):
        (tmp_path / "in" / split / "a").mkdir(parents=True)
    base = _shared_base(tmp_path)
    out = base / "x" / "y" / "out"

    def stop(**kwargs: object) -> None:  # the output folders exist by now; no model is loaded
        raise RuntimeError("stop before the models")

    monkeypatch.setattr(run, "build_models", stop)
    roots = [tmp_path / "in" / s for s in ("train", "heldout", "synthetic")]
    with pytest.raises(RuntimeError, match="stop before the models"):
        run.run_privacy_check(*roots, out, threads=1, progress=False)
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
