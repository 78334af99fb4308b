"""Every command and snippet of the README runs as written, and says what the README says.

The ```python blocks run in order in one namespace, as a reader pastes them, inside a temporary
working directory (``tests/doc_blocks.py``, the mechanism every docs page's blocks run with);
each makes the files it reads. The ```bash blocks' ``idaudit`` commands run in-process through
``idaudit.cli.main`` on small inputs the harness writes where the README's paths point
(``photos/``, ``conditions/``, ``train/`` ...); the install and test lines are checked against
what CI runs.
"""

from __future__ import annotations

import re
import runpy
import shlex
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from doc_blocks import (
    ROOT,
    SnippetSession,
    blocks_of,
    fenced_blocks,
    one_torch_thread,
    python_blocks,
)
from idaudit.exceptions import IdauditWarning

README = ROOT / "README.md"
CI_RUN = ROOT / ".ci" / "run"
#: The README's (and CI's) test command; CI runs exactly this line in a fresh environment.
TEST_COMMAND = "scripts/install.sh test && python -m pytest"
SEED = 0


def synthetic_images_by_identity(n_identities: int, n_per_identity: int) -> dict[str, list[Any]]:
    """``{"id0": [uint8 (64, 64, 3), ...], ...}`` from the shipped DCGAN (made-up people)."""
    from idaudit.faces import synthetic_identities

    ids = synthetic_identities(n_identities, n_per_identity, rng=SEED)
    return {f"id{k}": list(ids.images[ids.labels == k]) for k in range(n_identities)}


# --------------------------------------------------------------------------- python blocks

#: The README's ``audit_generator`` example: 4 made-up identities x 8 DCGAN faces (6 pairs:
#: ``pairs=100`` audits all of them, as documented; 8 rows each are enough for ROC-HT's 5 folds).
N_IDENTITIES, N_PER_IDENTITY = 4, 8


@pytest.fixture(scope="module")
def readme(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SnippetSession]:
    work = tmp_path_factory.mktemp("readme")
    with pytest.MonkeyPatch.context() as mp, one_torch_thread():
        mp.chdir(work)
        yield SnippetSession(python_blocks(README), "__readme__")


def test_readme_python_blocks_are_the_ones_tested() -> None:
    # a new block needs its own test below; none is marked not runnable
    blocks = python_blocks(README)
    assert len(blocks) == 5
    assert [b.not_run for b in blocks] == [None] * 5


@pytest.mark.slow  # block 0: 20 identities x 60 rows, all 190 pairs
def test_readme_python_example_runs(readme: SnippetSession) -> None:
    run = readme.run_through(0)
    assert run.warnings == []
    text = run.stdout
    # the summary names every status, and the certificate line prints a finite bound
    for status in ("[diagnostic]", "[sample_estimate]"):
        assert status in text
    assert "AuditSummary over 50 common pairs" in text
    bound = float(re.search(r"certified lower bound on epsilon: (\S+)", text).group(1))
    assert 0.0 < bound < float("inf")
    ns = readme.namespace
    assert ns["ds"].sizes["pair"] == 50
    assert ns["cert"].certificates_.sizes["pair"] == 5
    # "largest MMD-TV over all 190 pairs", printed on the line after the summary
    assert ns["every"].attrs["n_pairs"] == 190
    largest = float(ns["every"]["mmdtv_epsilon_max"])
    assert f"\n{largest!r}\n" in text
    assert 0.0 < largest < float("inf")


@pytest.mark.slow  # needs block 0's names
def test_readme_certified_routes_run(readme: SnippetSession) -> None:
    run = readme.run_through(1)
    assert run.warnings == []
    lines = run.stdout.splitlines()
    # "0: 60 rows are too few for it"
    assert lines[0] == "classifier-free certificate: 0.0"
    eps, reason, n_used = lines[1].split()
    assert float(eps) > 0.0
    assert reason in {"target_reached", "max_samples"}
    assert 0 < int(n_used) <= 2000
    assert lines[2].startswith("ComposedPrivacy(")
    assert "k=100" in lines[2]
    assert readme.namespace["seq"].stop_reason_ == reason


@pytest.mark.slow
def test_readme_faces_to_embeddings_runs(readme: SnippetSession) -> None:
    run = readme.run_through(2)
    assert run.warnings == []
    emb, outcomes = readme.namespace["emb"], readme.namespace["outcomes"]
    assert list(outcomes["status"]) == ["ok", "ok"]  # one face in each photo
    assert np.asarray(emb).shape == (2, 128)  # dlib's 128-d descriptors


@pytest.mark.slow
def test_readme_audit_generator_runs(readme: SnippetSession) -> None:
    run = readme.run_through(3)
    # pairs=100 asks for more than the 6 pairs of 4 identities: all of them are audited, and
    # a warning names both numbers (never a silent cut)
    assert run.warnings == [
        "`pairs` asks for 100 pairs, but the 4 identities kept have only 6; all 6 are audited."
    ]
    result = readme.namespace["run"]
    assert result.results.sizes["pair"] == N_IDENTITIES * (N_IDENTITIES - 1) // 2
    statuses = {
        name: result.results[name].attrs["status"]
        for name in ("gaussmech_epsilon", "kdelr_epsilon", "mmdtv_epsilon", "rocht_epsilon")
    }
    assert statuses == {
        "gaussmech_epsilon": "diagnostic",
        "kdelr_epsilon": "diagnostic",
        "mmdtv_epsilon": "sample_estimate",
        "rocht_epsilon": "diagnostic",
    }
    counts = result.embeddings.counts
    assert len(counts) == N_IDENTITIES
    assert (counts["ok"] == N_PER_IDENTITY).all()  # paired mode loses no blurred face
    assert any(Path("embeddings-cache").iterdir())  # relative to the reader's folder


@pytest.mark.slow
def test_readme_inversion_example_runs(readme: SnippetSession) -> None:
    run = readme.run_through(4)
    assert run.warnings == []
    # "print(res.similarity, res.initial_similarity, res.rank, res.queries)"
    similarity, initial, rank, queries = run.stdout.split()
    res = readme.namespace["res"]
    assert float(similarity) == res.similarity
    # the ranked adversary returns its best code: never below where the bank started it
    assert float(similarity) >= float(initial) - 1e-6
    assert 1 <= int(rank) <= 2  # top_n=2
    # queries: the bank's 32 codes, then for each of the top 2 its start and at most t_max=20
    # steps (tau_a=0.99 may stop an attack early)
    assert 32 < int(queries) <= 32 + 2 * (1 + 20)
    assert readme.namespace["bank"].volume == 32
    assert np.asarray(readme.namespace["z"]).shape == (128,)


def test_readme_has_only_python_and_bash_blocks() -> None:
    assert {b.language for b in fenced_blocks(README)} == {"python", "bash"}


# ----------------------------------------------------------------------------- bash blocks


def commands(path: Path) -> list[list[str]]:
    """Every command of every ```bash block: lines split on ``&&``, comments stripped."""
    found = []
    for code in blocks_of(path, "bash"):
        for line in code.splitlines():
            words = shlex.split(line, comments=True)
            while words:
                cut = words.index("&&") if "&&" in words else len(words)
                found.append(words[:cut])
                words = words[cut + 1 :]
    return found


def _kind(words: list[str]) -> str:
    if words[0] == "idaudit":
        return "idaudit"
    if words[0] == "scripts/install.sh":
        return "install"
    if words[:3] == ["python3", "-m", "venv"] or (
        words[0] == "." and words[1].endswith("activate")
    ):
        return "venv"
    if words[:3] == ["python", "-m", "pytest"]:
        return "test"
    if words[0] == "python" and words[1].startswith("examples/"):
        return "example"
    return "unknown"


def test_readme_bash_commands_are_all_handled() -> None:
    kinds = [_kind(c) for c in commands(README)]
    assert "unknown" not in kinds, commands(README)[kinds.index("unknown")]
    idaudit = [c[1] for c in commands(README) if c[0] == "idaudit"]
    # one test below per command (audit twice: one file, a folder of conditions)
    assert idaudit == ["demo", "embed", "audit", "certify", "audit", "privacy"]


def test_readme_install_and_test_lines_are_what_ci_runs() -> None:
    readme = README.read_text(encoding="utf-8")
    ci = CI_RUN.read_text(encoding="utf-8")
    # the README's test line is CI's last line, verbatim
    assert TEST_COMMAND in readme
    assert ci.rstrip().splitlines()[-1] == TEST_COMMAND
    not_run = [c for c in commands(README) if _kind(c) in {"install", "venv", "test"}]
    assert not_run == [
        ["python3", "-m", "venv", ".venv"],
        [".", ".venv/bin/activate"],
        ["scripts/install.sh"],
        ["scripts/install.sh", "test"],
        ["python", "-m", "pytest"],
    ]
    # CI does the same steps: a fresh venv made with python3 -m venv, then activated
    assert re.search(r"^python3 -m venv ", ci, flags=re.M)
    assert re.search(r'^source "?\S+/bin/activate"?$', ci, flags=re.M)
    assert (ROOT / "scripts" / "install.sh").is_file()


def test_readme_install_notes_name_the_packages_installed_without_dependencies() -> None:
    """The note on pip's expected resolver ERROR names what scripts/install.sh installs with
    ``--no-deps``, the packages the ERROR block is about."""
    script = (ROOT / "scripts" / "install.sh").read_text(encoding="utf-8")
    no_deps = {
        word.strip('"').split("==")[0]
        for line in script.splitlines()
        if "--no-deps" in line and not line.lstrip().startswith("#")
        for word in line.split()
        if "==" in word
    }
    assert no_deps == {
        "facenet-pytorch",
        "lpips",
        "gan-face-generate",
        "insightface",
        "dp-accounting",
    }
    readme = README.read_text(encoding="utf-8")
    note = readme[readme.index("Near its end") : readme.index("Nothing installed is")]
    for name in no_deps:
        assert name in note, name


def _idaudit_commands(name: str) -> list[list[str]]:
    return [c[1:] for c in commands(README) if c[:2] == ["idaudit", name]]


def _main(argv: list[str]) -> int:
    from idaudit.cli import main

    return main(argv)


@pytest.fixture
def in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _save_faces(folder: Path, images: list[Any], size: int = 160) -> None:
    """PNG photos, enlarged from the DCGAN's 64 x 64 to a photo-like size."""
    from PIL import Image

    folder.mkdir(parents=True)
    for i, image in enumerate(images):
        Image.fromarray(image).resize((size, size), Image.BICUBIC).save(folder / f"{i:02d}.png")


@pytest.mark.slow
def test_readme_demo_command(in_tmp: Path) -> None:
    (argv,) = _idaudit_commands("demo")
    assert argv == ["demo", "--out", "idaudit-demo"]
    # the full demo takes minutes of wall-clock time; --quick is its test-sized configuration
    with one_torch_thread():
        assert _main([*argv, "--quick", "--quiet"]) == 0
    out = in_tmp / "idaudit-demo"
    # the files "What `idaudit demo` does" lists
    listed = (
        "epsilon_vs_strength.png",
        "contact_sheet.png",
        "noise_sweep.png",
        "epsilon_curve.png",
    )
    for name in ("report.md", *listed):
        assert (out / name).is_file(), name
    assert list(out.glob("*.nc"))
    assert list(out.glob("*.csv"))
    assert (out / ".cache").is_dir()


@pytest.mark.slow
def test_readme_embed_audit_certify_commands(
    in_tmp: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # photos/: two identities, one sub-folder each, 8 photos (certify needs 7 rows)
    faces = synthetic_images_by_identity(2, 8)
    for identity, images in faces.items():
        _save_faces(in_tmp / "photos" / identity, images)
    (embed,) = _idaudit_commands("embed")
    audit, _ = _idaudit_commands("audit")
    (certify,) = _idaudit_commands("certify")
    assert embed == ["embed", "photos/", "--out", "embeddings.npz"]
    with one_torch_thread():
        assert _main(embed) == 0
    assert (in_tmp / "embeddings.npz").is_file()
    assert (in_tmp / "embeddings.outcomes.csv").is_file()
    assert (in_tmp / "embeddings.cache").is_dir()  # the checkpoint cache beside --out
    with np.load(in_tmp / "embeddings.npz") as npz:
        assert npz["embeddings"].shape == (16, 128)
        assert sorted(set(npz["labels"].tolist())) == ["id0", "id1"]

    assert audit == ["audit", "embeddings.npz", "--out", "audit/"]
    assert _main(audit) == 0
    for name in ("results.nc", "pairs.csv", "summary.md"):
        assert (in_tmp / "audit" / name).is_file(), name
    summary = (in_tmp / "audit" / "summary.md").read_text(encoding="utf-8")
    assert summary.startswith("# idaudit audit\n\n## Verdict\n")
    assert "MMD-TV [95% CI]" in summary

    assert certify == ["certify", "embeddings.npz", "--out", "certificates/"]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert _main(certify) == 0
    for name in ("certificates.nc", "candidates.nc", "certificates.md"):
        assert (in_tmp / "certificates" / name).is_file(), name
    assert not [w for w in caught if issubclass(w.category, IdauditWarning)]
    capsys.readouterr()


@pytest.mark.slow
def test_readme_audit_conditions_command(in_tmp: Path) -> None:
    """``conditions/``: one CSV of embeddings per condition, named encoder_dataset_generator."""
    import pandas as pd

    rng = np.random.default_rng(SEED)
    (in_tmp / "conditions").mkdir()
    centres = rng.normal(size=(6, 16))
    labels = np.repeat([f"id{i}" for i in range(6)], 20)
    for name, noise in (("dlib_synthetic_blur", 1.0), ("dlib_synthetic_none", 0.3)):
        emb = centres[np.repeat(np.arange(6), 20)] + noise * rng.normal(size=(120, 16))
        frame = pd.DataFrame(emb, columns=[f"e{j}" for j in range(16)])
        frame.insert(0, "identity", labels)
        frame.to_csv(in_tmp / "conditions" / f"{name}.csv", index=False)
    _, argv = _idaudit_commands("audit")
    assert argv == ["audit", "conditions/", "--out", "paper/"]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert _main(argv) == 0
    assert [str(w.message) for w in caught] == []
    # "Table 1, Table 2, Figure 3"
    for name in ("results.nc", "table1.md", "table1.csv", "table2.md", "table2.csv", "figure3.png"):
        assert (in_tmp / "paper" / name).is_file(), name
    table1 = (in_tmp / "paper" / "table1.md").read_text()
    assert "blur" in table1
    assert "none" in table1


@pytest.mark.slow
def test_readme_privacy_command_and_example(in_tmp: Path) -> None:
    (argv,) = _idaudit_commands("privacy")
    assert argv == ["privacy", "train/", "heldout/", "synthetic/", "--out", "results/"]
    example = ROOT / "examples" / "memorization_demo.py"
    build_folders = runpy.run_path(str(example), run_name="memorization_demo")["build_folders"]
    # one cohort "dcgan" in each root; the memorising generator's near-copies as synthetic/
    roots = build_folders(in_tmp / "images", 12, SEED)
    for name, root in (("train", "train"), ("heldout", "heldout"), ("synthetic", "memorising")):
        roots[root].rename(in_tmp / name)
    with one_torch_thread(), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert _main(argv) == 0
    assert [str(w.message) for w in caught] == []
    out = in_tmp / "results"
    for name in (
        "flagging.csv",
        "nnaa.csv",
        "privacy_results.json",
        "below_threshold.png",
        "nnaa.png",
        "report.md",
    ):
        assert (out / name).is_file(), name
    assert (out / "cache").is_dir()
    # the example line: its default run (4 x 40 DCGAN faces through MTCNN and dlib, twice
    # the privacy check) takes minutes here, so it is checked to exist and run as documented
    (line,) = [c for c in commands(README) if _kind(c) == "example"]
    assert line == ["python", "examples/memorization_demo.py"]
    assert example.is_file()
    assert 'if __name__ == "__main__":' in example.read_text(encoding="utf-8")
