"""Unit tests for the ``idaudit`` command (run in-process through ``main``)."""

from __future__ import annotations

import re
import stat
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import xarray as xr

from idaudit.cli import main
from idaudit.exceptions import IdauditWarning


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.fixture(scope="module")
def embedding_files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    gen = np.random.default_rng(0)
    k, n, d = 8, 30, 6
    x = np.repeat(gen.normal(size=(k, d)), n, axis=0) + 0.6 * gen.normal(size=(k * n, d))
    labels = np.repeat([f"p{i}" for i in range(k)], n)
    folder = tmp_path_factory.mktemp("emb")
    frame = pd.DataFrame(x, columns=[f"f{i}" for i in range(d)])
    frame.insert(0, "identity", labels)
    frame.loc[3, "f2"] = np.nan  # one row the reader must drop and count
    frame.to_csv(folder / "emb.csv", index=False)
    np.savez(folder / "emb.npz", embeddings=x, labels=labels)
    return {"csv": folder / "emb.csv", "npz": folder / "emb.npz"}


@pytest.mark.slow
def test_demo_writes_report_results_and_figure(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "demo"
    assert main(["demo", "--out", str(out), "--quick", "--quiet"]) == 0
    printed = capsys.readouterr().out
    for name in ("report.md", "results.nc", "noise_sweep.png"):
        path = out / name
        assert path.is_file(), name
        assert str(path) in printed
        assert _mode(path) == 0o600, name  # biometric-data rule: owner-only
    assert _mode(out) == 0o700
    assert not list(out.glob(".*.tmp"))  # no temporary files left behind
    with xr.open_dataset(out / "results.nc") as ds:
        ds = ds.load()
    assert dict(ds.sizes) == {"mechanism": 2, "noise_sd": 3, "pair": 6, "embedding_dim": 8}
    assert list(ds["mechanism"].values) == ["gaussian", "laplace"]
    assert ds["certified_epsilon"].attrs["status"] == "certified_lower_bound"
    assert ds["true_epsilon_exact"].dtype == bool
    assert ds["true_epsilon_exact"].values.all()
    # soundness on the demo itself: no certified pair above its exact truth
    cert, truth = ds["certified_epsilon"], ds["true_epsilon"]
    assert bool((cert <= truth).where(cert.notnull(), True).all())
    # AUC falls from separable towards chance along the sweep
    auc = ds["rocht_auc"].median("pair")
    assert (auc.isel(noise_sd=0) == 1.0).all()
    assert (auc.isel(noise_sd=-1) < 0.8).all()
    report = (out / "report.md").read_text(encoding="utf-8")
    assert "## What each status means" in report
    for status in ("certified_lower_bound", "sample_estimate", "diagnostic", "reference"):
        assert f"**{status}**" in report
    # each (mechanism, noise level) is one certificate family at alpha = 0.05: the report
    # states the sweep-wide union bound, 2 x 3 families x 0.05 = 0.3, and how to get one family
    assert ds.attrs["certificate_families"] == 6
    assert ds.attrs["certifier.n_families"] == 1
    assert "some* family has a violation is bounded only by 6 × α = 0.3" in report
    assert "`n_families=6`" in report
    table_rows = [line for line in report.splitlines() if line.startswith("| 0.1 ")]
    assert len(table_rows) == 2  # the first noise level, once per mechanism
    assert (out / "noise_sweep.png").read_bytes().startswith(b"\x89PNG")


def test_audit_command(
    tmp_path: Path, embedding_files: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "audit"
    argv = ["audit", str(embedding_files["csv"]), "--out", str(out), "--n-pairs", "5"]
    with warnings.catch_warnings():
        # the command reports dropped rows once, in its own output, not again as a warning
        warnings.simplefilter("error", IdauditWarning)
        assert main([*argv, "--methods", "gaussmech,mmdtv", "--quiet"]) == 0
    printed = capsys.readouterr().out
    assert "dropped 1 (missing: 1)" in printed
    with xr.open_dataset(out / "results.nc") as ds:
        assert ds.sizes["pair"] == 5
        assert set(ds.attrs["auditors"].split(",")) == {"gaussmech", "mmdtv"}
    summary = (out / "summary.md").read_text(encoding="utf-8")
    assert "| mmdtv_epsilon (median) |" in summary
    assert "sample_estimate" in summary
    assert _mode(out / "summary.md") == 0o600


@pytest.mark.slow
def test_certify_command_with_controls(
    tmp_path: Path, embedding_files: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "cert"
    argv = ["certify", str(embedding_files["npz"]), "--out", str(out), "--n-select", "2"]
    assert (
        main([*argv, "--n-candidates", "8", "--controls", "--n-permutations", "50", "--quiet"]) == 0
    )
    printed = capsys.readouterr().out
    assert "certified_lower_bound" in printed
    with xr.open_dataset(out / "certificates.nc") as ds:
        assert ds.sizes["pair"] == 2
        assert ds.attrs["status"] == "certified_lower_bound"
        largest = float(ds["epsilon_lb"].max())
    with xr.open_dataset(out / "controls.nc") as ctl:
        assert ctl.sizes["identity"] == 8
    with xr.open_dataset(out / "candidates.nc") as cand:
        assert cand.sizes["pair"] == 8
    md = (out / "certificates.md").read_text(encoding="utf-8")
    assert f"**{largest:.3f}**" in md
    assert "Same-identity split-half controls" in md


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["certify", "missing.csv"], "`embeddings` must be an existing file"),
        (["audit", "{csv}", "--methods", "gaussmech,psychic"], "`--methods` must be"),
        (["certify", "{npz}", "--alpha", "2"], r"`alpha` must be in \(0, 1\); got 2.0."),
        (["audit", "{txt}"], r"must end in .csv, .npz, .parquet or .pq; got 'emb.txt'"),
    ],
)
def test_errors_exit_with_status_2(
    tmp_path: Path,
    embedding_files: dict[str, Path],
    capsys: pytest.CaptureFixture[str],
    argv: list[str],
    message: str,
) -> None:
    txt = tmp_path / "emb.txt"
    txt.write_text("x")
    paths = {"csv": embedding_files["csv"], "npz": embedding_files["npz"], "txt": txt}
    argv = [a.format(**paths) for a in argv]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", IdauditWarning)  # the CSV's dropped row
        with pytest.raises(SystemExit) as exc:
            main([*argv, "--out", str(tmp_path / "o"), "--quiet"])
    assert exc.value.code == 2
    assert re.search(message, capsys.readouterr().err)


def test_version_and_help(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["--version"])
    assert exc.value.code == 0
    assert capsys.readouterr().out.startswith("idaudit ")
    with pytest.raises(SystemExit):
        main(["demo", "--help"])
    text = capsys.readouterr().out
    assert "--out" in text
    assert "--quick" not in text


def test_writing_netcdf_without_a_netcdf4_backend_names_the_package(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import importlib.util

    from idaudit import _demo

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a: None if name in ("netCDF4", "h5py") else real(name, *a),
    )
    with pytest.raises(ImportError, match=r"netCDF-4 writer; install one with pip install netCDF4"):
        _demo.write_netcdf(xr.Dataset({"x": ("a", [1.0])}), tmp_path / "x.nc")
    assert not list(tmp_path.iterdir())


def test_atomic_write_leaves_nothing_on_failure(tmp_path: Path) -> None:
    from idaudit._demo import write_atomic, write_text

    def boom(tmp: Path) -> None:
        tmp.write_text("partial")
        raise RuntimeError("interrupted")

    with pytest.raises(RuntimeError, match="interrupted"):
        write_atomic(tmp_path / "out.md", boom)
    assert not list(tmp_path.iterdir())
    path = write_text("hello", tmp_path / "out.md")
    assert path.read_text() == "hello"
    assert _mode(path) == 0o600


def test_unusable_out_folder_is_an_input_error(
    tmp_path: Path, embedding_files: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    argv = ["audit", str(embedding_files["csv"]), "--out", str(blocker / "out"), "--quiet"]
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    assert exit_info.value.code == 2
    assert "idaudit audit: error:" in capsys.readouterr().err
