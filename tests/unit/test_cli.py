"""Unit tests for the ``idaudit`` command (run in-process through ``main``)."""

from __future__ import annotations

import os
import re
import stat
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import xarray as xr

from idaudit.cli import main
from idaudit.data import sample_pairs
from idaudit.exceptions import IdauditWarning, InvalidInputError
from idaudit.results import check_result_dataset


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
    # one row the reader must drop and count: a row without a label (a labelled row with a
    # NaN value is a failed output of its identity, kept by EmbeddingSet's failures="keep")
    frame.loc[3, "identity"] = np.nan
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
    check_result_dataset(ds)
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
    assert "### What each status means" in report
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
    # part one: anonymisers on synthetic faces, with real offline models
    for name in (
        "faces_results.nc",
        "faces_pairs.csv",
        "faces_table.csv",
        "linkage.csv",
        "epsilon_vs_strength.png",
        "contact_sheet.png",
    ):
        assert (out / name).is_file(), name
        assert _mode(out / name) == 0o600, name
    assert _mode(out / ".cache") == 0o700
    with xr.open_dataset(out / "faces_results.nc") as faces:
        faces = faces.load()
    assert list(faces["condition"].values) == ["none", "blur σ=3", "pixelate 8px", "swap mix=0.5"]
    assert list(faces["method"].values) == ["none", "blur", "pixelate", "swap"]
    assert faces.attrs["encoder"] == "dlib-resnet-v1-torch"
    assert "made-up people: no real person's face is used or written" in report
    assert "| none |" in report
    assert "Gaussian blur" in report
    assert "Latent face swap" in report
    table = pd.read_csv(out / "faces_table.csv")
    assert table.loc[table["condition"] == "none", "top1_rate"].item() > 0.9


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
        (["certify", "{npz}", "--alpha", "2"], r"`--alpha` must be in \(0, 1\); got 2.0."),
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


# -- flags are checked before the input is read ------------------------------------------


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["audit", "--n-pairs", "-3"], r"`--n-pairs` must be >= 1; got -3\."),
        (["audit", "--n-pairs", "0"], r"`--n-pairs` must be >= 1; got 0\."),
        (["audit", "--seed", "-1"], r"`--seed` must be >= 0; got -1\."),
        (["audit", "--kde-mix", "2"], r"`--kde-mix` must be in \[0, 1\]; got 2\.0\."),
        (["audit", "--kde-alpha", "nan"], r"`--kde-mix` must be in \[0, 1\]; got nan\."),
        (
            ["audit", "--kde-mix", "0", "0.0"],
            r"`--kde-mix` values must be distinct \(one KDE-LR auditor each\); got 0 0\.",
        ),
        (["audit", "--n-permutations", "-1"], r"`--n-permutations` must be >= 0; got -1\."),
        (["audit", "--threads", "0"], r"`--threads` must be >= 1; got 0\."),
        (
            ["audit", "--min-rows", "4"],
            r"`--min-rows` must be >= 5, the fewest rows per identity the chosen audits need; "
            r"got 4\.",
        ),
        (["audit", "--methods", "gaussmech", "--min-rows", "1"], r"`--min-rows` must be >= 2,"),
        (["audit", "--device", "tpu"], r"`--device` must be cpu, cuda or cuda:<i>; got 'tpu'\."),
        (["certify", "--alpha", "0"], r"`--alpha` must be in \(0, 1\); got 0\.0\."),
        (["certify", "--alpha", "nan"], r"`--alpha` must be in \(0, 1\); got nan\."),
        (["certify", "--delta", "1"], r"`--delta` must be in \[0, 1\); got 1\.0\."),
        (["certify", "--test-size", "1.5"], r"`--test-size` must be in \(0, 1\); got 1\.5\."),
        (["certify", "--n-candidates", "0"], r"`--n-candidates` must be >= 1; got 0\."),
        (["certify", "--n-select", "0"], r"`--n-select` must be >= 1; got 0\."),
        (["certify", "--n-families", "0"], r"`--n-families` must be >= 1; got 0\."),
        (["certify", "--n-folds", "1"], r"`--n-folds` must be >= 2; got 1\."),
        (["certify", "--n-permutations", "0"], r"`--n-permutations` must be >= 1; got 0\."),
        (["certify", "--seed", "-2"], r"`--seed` must be >= 0; got -2\."),
        (
            ["certify", "--min-rows", "6"],
            r"`--min-rows` must be >= 7, the fewest rows per identity the certifier needs to "
            r"split and fold; got 6\.",
        ),
        (
            ["certify", "--controls", "--min-rows", "9"],
            r"`--min-rows` must be >= 10, the fewest rows per identity the --controls need "
            r"\(2 x --n-folds\); got 9\.",
        ),
        # CUDA requested on a machine without it: refused even when only the controls use it
        (["audit", "--device", "cuda"], r"`--device` cuda needs CUDA, which is not available"),
        (["certify", "--device", "cuda"], r"`--device` cuda needs CUDA, which is not available"),
        (["certify", "--device", "cuda:1"], r"`--device` cuda:1 needs CUDA"),
    ],
)
def test_flags_are_checked_before_the_input_is_read(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    argv: list[str],
    message: str,
) -> None:
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    # the input does not exist: a flag error proves the flags were checked first
    command, *flags = argv
    out = tmp_path / "out"
    with pytest.raises(SystemExit) as exc:
        main([command, str(tmp_path / "missing.csv"), *flags, "--out", str(out), "--quiet"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1  # one line
    assert err.startswith(f"idaudit {command}: error: ")
    assert re.search(message, err), err
    assert not out.exists()  # nothing created for a run that cannot start


@pytest.fixture(scope="module")
def uneven_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Six identities of 30 rows, 'tiny' with 3 rows and 'small' with 6 (NPZ)."""
    gen = np.random.default_rng(3)
    counts = {**{f"p{i}": 30 for i in range(6)}, "tiny": 3, "small": 6}
    labels = np.concatenate([[k] * n for k, n in counts.items()])
    centres = gen.normal(size=(len(counts), 6))
    x = np.repeat(centres, list(counts.values()), axis=0) + 0.5 * gen.normal(size=(189, 6))
    path = tmp_path_factory.mktemp("uneven") / "uneven.npz"
    np.savez(path, embeddings=x, labels=labels)
    return path


def test_n_pairs_above_the_pairs_available_is_an_error(
    tmp_path: Path, uneven_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # 7 identities keep >= 5 rows ('tiny' is dropped): 21 pairs, as sample_pairs counts them
    with pytest.raises(InvalidInputError, match=r"at most the number of unordered pairs, 21"):
        sample_pairs([f"p{i}" for i in range(6)] + ["small"], 22)
    argv = ["audit", str(uneven_file), "--out", str(tmp_path / "o"), "--n-pairs", "22"]
    with pytest.raises(SystemExit) as exc:
        main([*argv, "--quiet"])
    assert exc.value.code == 2
    assert (
        "idaudit audit: error: `--n-pairs` must be at most the number of identity pairs "
        "available, 21 for the 7 identities with at least 5 rows; got 22.\n"
    ) in capsys.readouterr().err
    assert not (tmp_path / "o").exists()
    # without --n-pairs: 100, or all pairs when there are fewer, which is said (GaussMech
    # alone needs 2 rows per identity, so all 8 identities and their 28 pairs are kept)
    assert main([*argv[:-2], "--methods", "gaussmech", "--quiet"]) == 0
    printed = capsys.readouterr().out
    assert "auditing all 28 pairs of the 8 identities (fewer than the default --n-pairs 100)" in (
        printed
    )
    summary = (tmp_path / "o" / "summary.md").read_text(encoding="utf-8")
    assert "Pairs: all 28 pairs of the 8 identities kept;" in summary


def test_audit_drops_and_counts_identities_below_min_rows(
    tmp_path: Path, uneven_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "audit"
    argv = ["audit", str(uneven_file), "--out", str(out), "--n-pairs", "4", "--quiet"]
    # default: 5 rows, what ROC-HT's five folds need; 'tiny' (3 rows) goes
    assert main([*argv, "--methods", "gaussmech,rocht"]) == 0
    printed = capsys.readouterr().out
    line = (
        "Dropped 1 identity with fewer than 5 rows (`--min-rows`) before pairs were chosen, "
        "3 rows in all: tiny (3 rows)."
    )
    assert line in printed
    assert line in (out / "summary.md").read_text(encoding="utf-8")
    kept = [f"p{i}" for i in range(6)] + ["small"]
    with xr.open_dataset(out / "results.nc") as ds:
        assert ds.attrs["min_rows"] == 5
        assert ds.attrs["n_identities_dropped_min_rows"] == 1
        assert ds.attrs["n_rows_dropped_min_rows"] == 3
        assert ds.attrs["identities_dropped_min_rows"] == "tiny"
        # the pairs are sampled from the identities kept
        got = list(zip(ds["identity_a"].values, ds["identity_b"].values, strict=True))
    assert got == sample_pairs(kept, 4, rng=0)

    # without ROC-HT two rows are enough, and nothing is dropped (said so in the summary)
    assert main([*argv, "--methods", "gaussmech"]) == 0
    assert "Dropped" not in capsys.readouterr().out
    summary = (out / "summary.md").read_text(encoding="utf-8")
    assert "Identities with fewer than 2 rows (`--min-rows`): none." in summary
    with xr.open_dataset(out / "results.nc") as ds:
        assert ds.attrs["n_identities_dropped_min_rows"] == 0
        assert ds.attrs["identities_dropped_min_rows"] == ""

    # a larger --min-rows drops more; too large leaves too few identities
    assert main([*argv, "--methods", "gaussmech", "--min-rows", "10"]) == 0
    assert "Dropped 2 identities with fewer than 10 rows" in capsys.readouterr().out
    with xr.open_dataset(out / "results.nc") as ds:
        assert ds.attrs["identities_dropped_min_rows"] == "small, tiny"
        assert ds.attrs["n_rows_dropped_min_rows"] == 9
    with pytest.raises(SystemExit) as exc:
        main([*argv, "--min-rows", "31"])
    assert exc.value.code == 2
    assert "`--min-rows` 31 leaves 0 of the 8 identities; at least 2" in capsys.readouterr().err


def test_certify_drops_small_identities_and_relays_the_small_test_warning(
    tmp_path: Path, uneven_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "cert"
    argv = ["certify", str(uneven_file), "--out", str(out), "--n-select", "2", "--quiet"]
    # default --min-rows: 7 (2 test + 5 development rows), so 'tiny' and 'small' go; 30 rows
    # give 9 test rows, above the 7 that alpha' = 0.05 / 4 needs: no warning
    assert main(argv) == 0
    captured = capsys.readouterr()
    assert "Dropped 2 identities with fewer than 7 rows" in captured.out
    assert "warning" not in captured.err
    md = (out / "certificates.md").read_text(encoding="utf-8")
    assert "small (6 rows), tiny (3 rows)" in md
    assert "certifies 0 below 7 test rows per identity" in md
    for name in ("certificates.nc", "candidates.nc"):
        with xr.open_dataset(out / name) as ds:
            assert ds.attrs["n_identities_dropped_min_rows"] == 2
            assert ds.attrs["min_rows"] == 7
    # with --n-families 10, alpha' = 0.05 / 40 needs 10 test rows, one more than the 9 that
    # 30 rows give: every certificate is 0, and the command says so
    assert main([*argv, "--n-families", "10"]) == 0
    captured = capsys.readouterr()
    assert captured.err.startswith(
        "idaudit certify: warning: 2 of the 2 selected pairs can only certify epsilon_lb = 0"
    )
    assert "certify 0 below 10 test rows per identity" in captured.err
    md = (out / "certificates.md").read_text(encoding="utf-8")
    assert "## Warnings" in md
    assert "2 of the 2 selected pairs can only certify epsilon_lb = 0" in md
    with xr.open_dataset(out / "certificates.nc") as ds:
        assert float(ds["epsilon_lb"].max()) == 0.0


def test_certify_reads_duplicates_as_draws_or_as_copies(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # 6 identities of 25 draws, every draw stored twice
    gen = np.random.default_rng(3)
    x = np.repeat(gen.normal(size=(6, 4)), 25, axis=0) + 0.5 * gen.normal(size=(150, 4))
    path = tmp_path / "twice.npz"
    np.savez(path, embeddings=np.repeat(x, 2, axis=0), labels=np.repeat(np.arange(6), 50))
    argv = ["certify", str(path), "--n-select", "2", "--n-candidates", "4", "--quiet"]
    assert main([*argv, "--out", str(tmp_path / "keep")]) == 0
    assert "are exact duplicates" in capsys.readouterr().err  # relayed, with the way out
    with xr.open_dataset(tmp_path / "keep" / "certificates.nc") as ds:
        assert ds.attrs["duplicates"] == "keep"
        np.testing.assert_array_equal(ds["n_test_a"], 15)  # 50 rows, each a draw
    assert main([*argv, "--duplicates", "collapse", "--out", str(tmp_path / "one")]) == 0
    assert "warning" not in capsys.readouterr().err
    with xr.open_dataset(tmp_path / "one" / "certificates.nc") as ds:
        assert ds.attrs["duplicates"] == "collapse"
        # every row of a candidate identity has one copy: 25 per identity
        with xr.open_dataset(tmp_path / "one" / "candidates.nc") as cand:
            ids = set(cand["identity_a"].values) | set(cand["identity_b"].values)
        assert ds.attrs["n_duplicates"] == 25 * len(ids)
        np.testing.assert_array_equal(ds["n_test_a"], 8)  # 25 draws
    # --min-rows counts draws when collapsing: 25 < 26 leaves no identity
    with pytest.raises(SystemExit):
        main([*argv, "--duplicates", "collapse", "--min-rows", "26", "--out", str(tmp_path)])
    assert "`--min-rows` 26 leaves 0 of the 6 identities" in capsys.readouterr().err


def test_certify_collapse_reports_identities_dropped_for_too_few_distinct_rows(
    tmp_path: Path,
) -> None:
    # identities 0-5: 30 distinct rows each; identity 6: 20 rows but only 3 distinct
    gen = np.random.default_rng(4)
    x = np.r_[
        np.repeat(gen.normal(size=(6, 4)), 30, axis=0) + 0.5 * gen.normal(size=(180, 4)),
        np.tile(gen.normal(size=(3, 4)), (7, 1))[:20],
    ]
    path = tmp_path / "few.npz"
    np.savez(path, embeddings=x, labels=np.r_[np.repeat(np.arange(6), 30), np.full(20, 6)])
    argv = ["certify", str(path), "--n-select", "2", "--n-candidates", "4", "--quiet"]
    assert main([*argv, "--duplicates", "collapse", "--out", str(tmp_path / "out")]) == 0
    report = (tmp_path / "out" / "certificates.md").read_text()
    # the file holds 20 rows of identity 6: it is dropped for its 3 distinct rows
    assert "Dropped 1 identity with fewer than 7 distinct rows (`--min-rows`)" in report
    assert "6 (20 rows)" in report
    with xr.open_dataset(tmp_path / "out" / "certificates.nc") as ds:
        assert ds.attrs["n_identities_dropped_min_rows"] == 1
        assert ds.attrs["n_rows_dropped_min_rows"] == 20


# -- the output folder ----------------------------------------------------------------------


@pytest.mark.usefixtures("permissive_umask")  # a parent made 0777 & ~umask would show
def test_out_folder_and_parents_are_created_owner_only_before_the_audit(
    tmp_path: Path,
    embedding_files: dict[str, Path],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import idaudit.audits

    existing = tmp_path / "shared"
    existing.mkdir(mode=0o755)
    existing.chmod(0o755)
    out = existing / "a" / "b" / "out"
    modes: dict[Path, int] = {}

    def stop(*args: object, **kwargs: object) -> None:
        modes.update({f: _mode(f) for f in (existing, existing / "a", existing / "a" / "b", out)})
        raise RuntimeError("stop before computing")

    monkeypatch.setattr(idaudit.audits, "audit_pairs", stop)
    argv = ["audit", str(embedding_files["npz"]), "--out", str(out), "--quiet"]
    with pytest.raises(RuntimeError, match="stop before computing"):
        main(argv)
    for folder in (existing / "a", existing / "a" / "b", out):
        assert modes[folder] == 0o700, folder
    assert modes[existing] == 0o755  # a folder that existed keeps its mode
    # the run stopped before writing anything: the folders it made are gone, not the old one
    assert not (existing / "a").exists()
    assert _mode(existing) == 0o755


def test_a_stopped_run_keeps_folders_holding_files_and_folders_it_did_not_make(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import idaudit.cli._certify as certify_cli
    from idaudit.cli._common import out_dir

    made = tmp_path / "new" / "out"
    kept = tmp_path / "kept"
    kept.mkdir()

    def run(args: object) -> int:
        out_dir(made)
        (out_dir(tmp_path / "written" / "out") / "a.txt").write_text("done")
        out_dir(kept)
        raise InvalidInputError("stopped")

    monkeypatch.setattr(certify_cli, "run", run)
    with pytest.raises(SystemExit):
        main(["certify", "x.npz", "--out", str(made)])
    assert not (tmp_path / "new").exists()
    assert (tmp_path / "written" / "out" / "a.txt").read_text() == "done"
    assert kept.is_dir()


def test_unusable_out_folder_is_an_input_error(
    tmp_path: Path,
    embedding_files: dict[str, Path],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    import idaudit.audits

    def never(*args: object, **kwargs: object) -> None:
        raise AssertionError("the audit ran before the output folder was checked")

    monkeypatch.setattr(idaudit.audits, "audit_pairs", never)
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    for out in (blocker / "out", blocker):
        argv = ["audit", str(embedding_files["npz"]), "--out", str(out), "--quiet"]
        with pytest.raises(SystemExit) as exit_info:
            main(argv)
        assert exit_info.value.code == 2
        err = capsys.readouterr().err
        assert err.startswith(
            "idaudit audit: error: `--out` must be a folder that can be created and written to; "
            f"{str(out)!r}: "
        )
        assert err.count("\n") == 1


def test_read_only_out_folder_is_refused_before_the_audit(
    tmp_path: Path,
    embedding_files: dict[str, Path],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    out = tmp_path / "ro"
    out.mkdir(mode=0o500)
    real_access = os.access
    # root may write anywhere, so the folder is also reported unwritable to the check
    monkeypatch.setattr(
        os, "access", lambda path, mode: False if Path(path) == out else real_access(path, mode)
    )
    try:
        with pytest.raises(SystemExit):
            main(["audit", str(embedding_files["npz"]), "--out", str(out), "--quiet"])
    finally:
        out.chmod(0o700)
    assert f"{str(out)!r}: it is not writable." in capsys.readouterr().err
    assert not (out / "results.nc").exists()


# -- several conditions, flags in errors, interruption -----------------------------------------


def _condition_csvs(folder: Path) -> list[Path]:
    paths = []
    for k, name in enumerate(["arcface_vggface2_ff", "facenet_celeba_id"]):
        gen = np.random.default_rng(k)
        centres = gen.normal(size=(8, 6))
        x = np.repeat(centres, 20, axis=0) + (1.0 + k) * gen.normal(size=(160, 6))
        frame = pd.DataFrame(x, columns=[f"e{i}" for i in range(6)])
        frame.insert(0, "identity", np.repeat([f"p{i}" for i in range(8)], 20))
        frame.to_csv(folder / f"{name}.csv", index=False)
        paths.append(folder / f"{name}.csv")
    return paths


def test_audit_of_several_files_writes_table1_table2_and_figure3(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from idaudit.audits import GaussMechAuditor, audit_pairs, summarize
    from idaudit.data import EmbeddingSet

    folder = tmp_path / "csvs"
    folder.mkdir()
    paths = _condition_csvs(folder)
    out = tmp_path / "out"
    argv = [
        "audit",
        str(folder),
        "--out",
        str(out),
        "--n-pairs",
        "6",
        "--quiet",
        "--methods",
        "gaussmech,mmdtv,rocht",
        "--control-permutations",
        "20",
    ]
    assert main(argv) == 0
    for name in (
        "results.nc",
        "pairs.csv",
        "table1.md",
        "table1.csv",
        "table2.md",
        "table2.csv",
        "figure3.png",
    ):
        assert (out / name).is_file(), name
    t1 = pd.read_csv(out / "table1.csv")
    assert t1["condition"].tolist() == ["arcface_vggface2_ff", "facenet_celeba_id"]
    assert t1["encoder"].tolist() == ["arcface", "facenet"]
    assert t1["generator"].tolist() == ["ff", "id"]
    # Table 1's GaussMech median equals summarize() on the same file and pairs, run directly
    es = EmbeddingSet.from_csv(paths[0])
    ds = audit_pairs(
        es, sample_pairs(es.identities, 6, rng=0), [GaussMechAuditor()], progress=False
    )
    direct = summarize(ds)["gaussmech_epsilon (median)"]
    assert t1.loc[0, "gaussmech"] == pytest.approx(direct, rel=1e-9)
    with xr.open_dataset(out / "results.nc") as res:
        assert dict(res.sizes)["condition"] == 2
        assert list(res["encoder"].values) == ["arcface", "facenet"]
    assert "*certified_lower_bound*" in (out / "table2.md").read_text(encoding="utf-8")
    assert len(pd.read_csv(out / "pairs.csv")) == 12  # 2 conditions x 6 pairs, one row each


def test_manifest_names_the_conditions(tmp_path: Path) -> None:
    paths = _condition_csvs(tmp_path)
    manifest = tmp_path / "manifest.csv"
    pd.DataFrame({"file": [p.name for p in paths], "condition": ["A+B+C", "D+E+F"]}).to_csv(
        manifest, index=False
    )
    out = tmp_path / "out"
    argv = [
        "audit",
        *map(str, paths),
        "--manifest",
        str(manifest),
        "--out",
        str(out),
        "--n-pairs",
        "3",
        "--quiet",
        "--methods",
        "mmdtv",
        "--no-certify",
    ]
    assert main(argv) == 0
    t1 = pd.read_csv(out / "table1.csv")
    assert t1["dataset"].tolist() == ["B", "E"]


def test_misspelled_flag_prints_the_sub_command_usage(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["certify", "x.csv", "--n-selct", "3"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("usage: idaudit certify")
    assert "unrecognized arguments: --n-selct 3" in err


def test_library_errors_name_the_flags(
    tmp_path: Path, embedding_files: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    argv = [
        "audit",
        str(embedding_files["csv"]),
        "--out",
        str(tmp_path / "o"),
        "--vector-column",
        "nope",
    ]
    with pytest.raises(SystemExit):
        main(argv)
    err = capsys.readouterr().err
    assert "`--vector-column`" in err
    assert "`vector_column`" not in err


def test_vector_column_takes_several_columns(
    tmp_path: Path, embedding_files: dict[str, Path]
) -> None:
    out = tmp_path / "o"
    argv = [
        "audit",
        str(embedding_files["csv"]),
        "--out",
        str(out),
        "--n-pairs",
        "2",
        "--vector-column",
        "f0",
        "f1",
        "f2",
        "--methods",
        "gaussmech",
        "--quiet",
    ]
    assert main(argv) == 0
    with xr.open_dataset(out / "results.nc") as ds:
        assert ds.attrs["input_path"] == str(embedding_files["csv"])


def test_interrupt_exits_130_with_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    from idaudit.cli import _demo

    def interrupted(args: object) -> int:
        raise KeyboardInterrupt

    monkeypatch.setattr(_demo, "run", interrupted)
    assert main(["demo", "--out", str(tmp_path / "d")]) == 130
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert err.startswith("idaudit demo: interrupted")


def test_a_reader_that_closes_the_pipe_ends_the_command_quietly(tmp_path: Path) -> None:
    # `idaudit ... | head`: the reader leaves after a few bytes; the command must not report
    # "[Errno 32] Broken pipe" as an input error (rc 2) but end as Unix tools do (128 + SIGPIPE)
    import subprocess
    import sys

    out = tmp_path / "o"
    script = (
        "import sys, idaudit.cli._certify as c\n"
        "def run(args):\n"
        "    for _ in range(20000):\n"
        "        print('x' * 100)\n"
        "    return 0\n"
        "c.run = run\n"
        "from idaudit.cli import main\n"
        f"sys.exit(main(['certify', {str(tmp_path / 'e.npz')!r}, '--out', {str(out)!r}]))\n"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    assert proc.stdout is not None
    assert proc.stderr is not None
    assert proc.stdout.read(10) == b"x" * 10
    proc.stdout.close()  # the reader goes away, as `head -c 10` does
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == 141
    assert "Broken pipe" not in err
    assert "Exception ignored" not in err
