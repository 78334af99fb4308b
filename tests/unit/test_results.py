"""The results core: statuses, Dataset building and checking, provenance, owner-only writers."""

from __future__ import annotations

import json
import re
import stat
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import xarray as xr

import idaudit as ida
from idaudit._results import (
    EPSILON_STATUSES,
    STATUSES,
    check_result_dataset,
    check_status,
    pair_dataset,
    provenance,
    variable,
    write_csv,
    write_json,
    write_text,
)
from idaudit.exceptions import InvalidInputError


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
