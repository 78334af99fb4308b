"""What the commands share (idaudit.cli._common): flag checks, output folders, input columns."""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import xarray as xr

from idaudit.cli import main
from idaudit.exceptions import InvalidInputError


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


# -- flags are checked before the input is read ------------------------------------------


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["audit", "--n-pairs", "-3"], r"`--n-pairs` must be >= 1; got -3\."),
        (["audit", "--n-pairs", "0"], r"`--n-pairs` must be >= 1; got 0\."),
        (["audit", "--seed", "-1"], r"`--seed` must be >= 0; got -1\."),
        (["audit", "--kde-mix", "2"], r"`--kde-mix` must be in \[0, 1\]; got 2\.0\."),
        (["audit", "--kde-mix", "nan"], r"`--kde-mix` must be in \[0, 1\]; got nan\."),
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


def test_a_text_column_is_left_out_of_the_vectors_and_said(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    gen = np.random.default_rng(1)
    frame = pd.DataFrame(gen.normal(size=(40, 3)), columns=["e0", "e1", "e2"])
    frame.insert(0, "identity", np.repeat(["a", "b", "c", "d"], 10))
    frame.insert(1, "file", [f"img{i}.png" for i in range(40)])
    frame.to_csv(tmp_path / "emb.csv", index=False)
    out = tmp_path / "o"
    argv = ["audit", str(tmp_path / "emb.csv"), "--out", str(out), "--methods", "gaussmech"]
    assert main([*argv, "--quiet"]) == 0
    printed = capsys.readouterr().out
    assert "note: column(s) ['file'] hold text, not numbers, and are left out" in printed
    assert "dim 3" in printed
    # a range of columns in file order chooses them explicitly
    argv = ["audit", str(tmp_path / "emb.csv"), "--out", str(tmp_path / "o2")]
    assert main([*argv, "--methods", "gaussmech", "--vector-column", "e0:e1", "--quiet"]) == 0
    assert "dim 2" in capsys.readouterr().out


def test_a_lone_text_column_is_the_label_and_ambiguity_names_the_flag(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # columns e0..e5 then `subject`: the labels, said in a note that names the flag
    gen = np.random.default_rng(2)
    frame = pd.DataFrame(gen.normal(size=(40, 6)), columns=[f"e{j}" for j in range(6)])
    frame["subject"] = np.repeat(["a", "b", "c", "d"], 10)
    frame.to_csv(tmp_path / "emb.csv", index=False)
    argv = ["audit", str(tmp_path / "emb.csv"), "--out", str(tmp_path / "o")]
    assert main([*argv, "--methods", "gaussmech", "--quiet"]) == 0
    printed = capsys.readouterr().out
    assert (
        "note: no column of '" + str(tmp_path / "emb.csv") + "' is named label or identity or "
        "id; column 'subject', the only one holding text, is taken as the identity labels "
        "(name the label column with `--label-column` to choose another).\n"
    ) in printed
    assert "40 rows, 4 identities, dim 6" in printed
    # a second text column makes it ambiguous: refused, naming the flag
    frame["file"] = [f"img{i}.png" for i in range(40)]
    frame.to_csv(tmp_path / "two.csv", index=False)
    with pytest.raises(SystemExit) as exc:
        main(["certify", str(tmp_path / "two.csv"), "--out", str(tmp_path / "c"), "--quiet"])
    assert exc.value.code == 2
    assert capsys.readouterr().err == (
        "idaudit certify: error: cannot tell which column of '"
        + str(tmp_path / "two.csv")
        + "' holds the identity labels: none is named label, identity, id, and 2 columns hold "
        "text (['subject', 'file']); name the label column with `--label-column`.\n"
    )
