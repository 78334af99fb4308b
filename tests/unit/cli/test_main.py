"""The ``idaudit`` entry point (idaudit.cli.main): exit codes, usage, version, flag names,
interrupts, closed pipes."""

from __future__ import annotations

import re
import warnings
from pathlib import Path

import numpy as np
import pytest

from idaudit.cli import main
from idaudit.exceptions import IdauditWarning


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


def test_demo_interrupt_promises_a_resume_only_when_the_cache_holds_faces(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    from idaudit.cli import _demo
    from idaudit.faces import EmbeddingCache

    def interrupted(args: object) -> int:
        raise KeyboardInterrupt

    monkeypatch.setattr(_demo, "run", interrupted)
    out = tmp_path / "d"
    out.mkdir()
    plain = (
        "idaudit demo: interrupted; files already written are complete (every file is written "
        "atomically)"
    )
    assert main(["demo", "--out", str(out)]) == 130
    assert capsys.readouterr().err == plain + ".\n"  # no cache yet: nothing to resume from
    (out / ".cache").mkdir()
    assert main(["demo", "--out", str(out)]) == 130
    assert capsys.readouterr().err == plain + ".\n"  # an empty cache: still nothing
    EmbeddingCache(out / ".cache").put("ab" * 32, np.ones(4, np.float32))
    assert main(["demo", "--out", str(out)]) == 130
    assert capsys.readouterr().err == (plain + ", and a re-run resumes from the embedding cache.\n")


def test_a_warning_during_a_progress_bar_gets_a_line_of_its_own(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    # a certifier warned from inside the benchmark's loop, and the line was glued to the
    # bar's tail ("noise_sweep (gaussian):  40%|####  | 2/5 [...]/path.py:12: IdauditWarning")
    import sys

    from tqdm import tqdm

    from idaudit.cli import _certify

    def run(args: object) -> int:
        for step in tqdm(range(3), desc="certify: development", file=sys.stderr):
            if step == 1:
                warnings.warn("can only certify epsilon_lb = 0", IdauditWarning, stacklevel=1)
        return 0

    monkeypatch.setattr(_certify, "run", run)
    with warnings.catch_warnings():
        warnings.simplefilter("always")  # shown, as outside pytest, not raised
        assert main(["certify", "x.npz", "--out", str(tmp_path / "o")]) == 0
    lines = [line.split("\r")[-1] for line in capsys.readouterr().err.split("\n")]
    assert "idaudit certify: warning: can only certify epsilon_lb = 0" in lines, lines


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


@pytest.mark.parametrize(
    "argv",
    [
        ["--version"],
        ["--help"],
        ["certify", "--help"],
        ["certify", "x.npz", "--alpha", "2"],
        ["audit", "x.npz", "--n-pairs", "-3"],
        ["embed", "photos", "--out", "emb.txt"],
        ["privacy", "a", "b", "c", "--out", "d", "--confidence", "2"],
        ["invert", "x.npy", "--out", "o", "--tau-a", "3"],
    ],
)
def test_help_version_and_argument_errors_load_no_heavy_library(argv: list[str]) -> None:
    # the console script answers --help, --version and a wrong flag without importing pandas,
    # xarray or torch (seconds on a loaded machine); a fresh process, as the shell runs it
    import subprocess
    import sys

    script = (
        "import sys\n"
        "sys.argv[0] = 'idaudit'  # what the console script's process sees\n"
        "from idaudit.cli import main\n"
        "try:\n"
        f"    main({argv!r})\n"
        "except SystemExit:\n"
        "    pass\n"
        "heavy = sorted(m for m in ('pandas', 'xarray', 'torch', 'scipy') if m in sys.modules)\n"
        "print('HEAVY', heavy)\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=True
    )
    assert "HEAVY []" in proc.stdout, proc.stdout[-500:]


def test_outside_the_command_importing_idaudit_registers_the_accessor() -> None:
    import subprocess
    import sys

    script = "import idaudit, xarray as xr; print(hasattr(xr.Dataset(), 'idaudit'))"
    proc = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=True
    )
    assert proc.stdout.strip() == "True"


def test_sigterm_exits_like_an_interrupt_and_leaves_no_empty_folder(tmp_path: Path) -> None:
    import signal
    import subprocess
    import sys

    out = tmp_path / "made" / "out"
    script = (
        "import sys, time, idaudit.cli._certify as c\n"
        "from idaudit.cli._common import out_dir\n"
        "def run(args):\n"
        f"    out_dir({str(out)!r})\n"
        "    print('ready', flush=True)\n"
        "    time.sleep(60)\n"
        "    return 0\n"
        "c.run = run\n"
        "from idaudit.cli import main\n"
        f"sys.exit(main(['certify', 'x.npz', '--out', {str(out)!r}]))\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "ready"
    assert out.is_dir()
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=60) == 128 + signal.SIGTERM
    assert not (tmp_path / "made").exists()


def _input_error_files(folder: Path) -> dict[str, Path]:
    """Inputs each sub-command must refuse at once: damaged, mislabelled, empty, missing."""
    import numpy as np

    gen = np.random.default_rng(0)
    good = folder / "good.npz"
    with open(good, "wb") as fh:  # laid out as `idaudit embed` writes it, ~32 kB
        np.savez(
            fh,
            embeddings=gen.normal(size=(60, 128)).astype(np.float32),
            labels=np.repeat([f"id{i}" for i in range(6)], 10),
            sources=np.array([f"id{i // 10}/{i}.jpg" for i in range(60)]),
            encoder=np.asarray("dlib"),
        )
    raw = bytearray(good.read_bytes())
    raw[2000:2400] = bytes(b ^ 0xFF for b in raw[2000:2400])
    (folder / "bad.npz").write_bytes(bytes(raw))
    (folder / "text.npz").write_text("label,e0\na,0.1\n")
    (folder / "empty").mkdir()
    (folder / "noimg" / "a").mkdir(parents=True)
    (folder / "noimg" / "a" / "notes.txt").write_text("no image here")
    return {"good": good, "bad": folder / "bad.npz", "text": folder / "text.npz"}


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["audit", "does_not_exist.npz"], "`embeddings` must be an existing file; got"),
        (["audit", "{empty}"], "`embeddings` folder '.*empty' holds no .csv, .npz or .parquet"),
        (["audit", "{bad}"], r"bad\.npz' is a damaged \.npz archive \(Bad CRC-32 for file"),
        (["audit", "{text}"], r"text\.npz' is not a \.npz archive .*: it holds text"),
        (["audit", "{good}", "--min-rows", "1"], "`--min-rows` must be >= 5, the fewest rows"),
        (["audit", "{good}", "--n-pairs", "16"], "`--n-pairs` must be at most the number"),
        (["certify", "does_not_exist.npz"], "`embeddings` must be an existing file; got"),
        (["certify", "{bad}"], r"bad\.npz' is a damaged \.npz archive \(Bad CRC-32 for file"),
        (["certify", "{good}", "--min-rows", "3"], "`--min-rows` must be >= 7, the fewest rows"),
        (["certify", "{good}", "--n-folds", "10"], "leaves 0 of the 6 identities"),
        (["invert", "{bad}"], r"bad\.npz' is a damaged \.npz archive \(Bad CRC-32 for file"),
        (["embed", "{empty}"], "`IMAGES_DIR` must hold one sub-folder per identity"),
        (["embed", "{noimg}"], "`IMAGES_DIR` holds 1 identity folder but no image files"),
        (["embed", "{noimg}", "--device", "cuda"], "`--device` must be cpu for --encoder dlib"),
        (["embed", "{noimg}", "--all-faces", "--cache", "c"], "`--cache` works without"),
        (["privacy", "a", "b", "c"], "`train` must be an existing folder; got 'a'"),
        (["privacy", "{empty}", "{empty}", "{empty}"], "`train` must hold one sub-folder"),
        (["privacy", "{noimg}", "{noimg}", "{noimg}"], "`train` holds no image file in its"),
        (["demo", "--out", "{text}/o"], "`--out` must be a folder that can be created"),
    ],
)
def test_input_errors_answer_in_one_line_before_torch_or_sklearn_load(
    tmp_path: Path, argv: list[str], message: str
) -> None:
    # every input error is checked before the library's heavy imports (torch, scikit-learn:
    # 3-30 s on a loaded machine), so the shell gets its one line at once; a fresh process
    import subprocess
    import sys

    files = _input_error_files(tmp_path)
    paths = {**{k: str(v) for k, v in files.items()}, "empty": str(tmp_path / "empty")}
    paths["noimg"] = str(tmp_path / "noimg")
    argv = [a.format(**paths) for a in argv]
    if argv[0] != "demo":
        argv += ["--out", str(tmp_path / ("o.npz" if argv[0] == "embed" else "o"))]
    script = (
        "import sys\n"
        "sys.argv[0] = 'idaudit'  # what the console script's process sees\n"
        "from idaudit.cli import main\n"
        "try:\n"
        f"    code = main({argv!r})\n"
        "except SystemExit as exc:\n"
        "    code = exc.code\n"
        "heavy = sorted(m for m in ('torch', 'sklearn') if m in sys.modules)\n"
        "print('EXIT', code, 'HEAVY', heavy)\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, cwd=tmp_path
    )
    assert "EXIT 2 HEAVY []" in proc.stdout, (proc.stdout[-500:], proc.stderr[-1000:])
    assert proc.stderr.count("\n") == 1, proc.stderr  # one line, no traceback
    assert proc.stderr.startswith(f"idaudit {argv[0]}: error: ")
    assert re.search(message, proc.stderr), proc.stderr


def test_python_dash_m_idaudit_is_the_command() -> None:
    import subprocess
    import sys

    proc = subprocess.run(
        [sys.executable, "-m", "idaudit", "--version"], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("idaudit ")
    proc = subprocess.run(
        [sys.executable, "-m", "idaudit", "audit", "missing.npz"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2
    assert proc.stderr == (
        "idaudit audit: error: `embeddings` must be an existing file; got 'missing.npz'.\n"
    )
