"""Every ```python block of docs/*.md runs as written, and says what its page says.

Each page's blocks run in order in one namespace (a reader pasting them into one interpreter),
inside a temporary working directory, on one torch thread (``tests/doc_blocks.py``). A block
that needs files makes them itself; one that cannot run here (a cluster, weights the user
downloads) says why on the line above its fence, and is listed in :data:`NOT_RUN`. Blocks that
include an example script (``--8<--``) are the scripts ``tests/unit/test_examples.py`` runs.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import Any

import pytest

from doc_blocks import (
    ROOT,
    Block,
    SnippetSession,
    fenced_blocks,
    one_torch_thread,
    python_blocks,
)

DOCS = ROOT / "docs"
PAGES = sorted(p for p in DOCS.glob("*.md") if python_blocks(p))

#: The blocks that do not run here, by page and index among the page's python blocks: each
#: states its reason above its fence (checked below); a new one must be added here on purpose.
NOT_RUN = {
    ("dask_cluster.md", 0),  # a SLURM cluster
    ("weights.md", 0),  # ArcFace / RetinaFace / LPIPS files the user downloads
}

#: The warnings a page's blocks give, as fragments of their messages (anything else fails).
EXPECTED_WARNINGS: dict[str, tuple[str, ...]] = {
    # 4 identities have 2 vertex-disjoint pairs: the certifier certifies those and says so;
    # and 6 pairs where pairs=100 asks for more: all are audited, never a silent cut
    "pipeline.md": (
        "n_select=5 asked for more",
        "can only certify epsilon_lb = 0",
        "`pairs` asks for 100 pairs, but the 4 identities kept have only 6; all 6 are audited.",
    ),
    # 10 held-out stand-in faces cannot resolve p = 1, 2, 5 %: the check warns rather than
    # reading a percentile it cannot resolve as a verdict
    "memorization.md": ("10 held-out images do not resolve p = 1, 2, 5 %",),
    # the quick start's audit of 4 identities asks for pairs=100: all 6 are audited, said
    "quickstart.md": (
        "`pairs` asks for 100 pairs, but the 4 identities kept have only 6; all 6 are audited.",
    ),
    # the page's example of a failed row, kept and counted: "nothing is dropped silently"
    "data.md": ("EmbeddingSet: 1 of 4 rows failed (no_face: 1); they are kept as failed",),
}


@pytest.fixture(scope="module")
def ran(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """``ran(page)``: the page's session after running all its blocks (once per module)."""
    sessions: dict[str, SnippetSession] = {}

    def run(page: str) -> SnippetSession:
        if page not in sessions:
            session = SnippetSession(python_blocks(DOCS / page), f"__docs_{page[:-3]}__")
            work = tmp_path_factory.mktemp(page.removesuffix(".md"))
            with pytest.MonkeyPatch.context() as mp, one_torch_thread():
                mp.chdir(work)
                session.namespace["__workdir__"] = work
                session.run_all()
            sessions[page] = session
        return sessions[page]

    return run


@pytest.mark.slow
@pytest.mark.parametrize("page", [p.name for p in PAGES])
def test_docs_page_python_blocks_run(page: str, ran: Any) -> None:
    session = ran(page)
    expected = EXPECTED_WARNINGS.get(page, ())
    for block, record in zip(session.blocks, session.runs, strict=True):
        unexpected = [w for w in record.warnings if not any(e in w for e in expected)]
        assert unexpected == [], f"{block.name} warns: {unexpected}"


# any line that opens or closes a fence: backticks or tildes, three or more, in a quote or not
_ANY_FENCE = re.compile(r"^[ \t]*(?:>[ \t]*)*(?P<fence>`{3,}|~{3,})[ \t]*(?P<info>[^\n`]*)$", re.M)


def test_no_python_block_escapes_the_runner() -> None:
    # the runner reads ```python fences of top-level pages: a block spelled otherwise (py,
    # python3, Python, {.python}), fenced with tildes or four backticks, quoted, or on a page
    # in a subfolder would never run, so each of those is refused here
    pages = [ROOT / "README.md", *sorted(DOCS.rglob("*.md"))]
    for page in pages:
        text = page.read_text(encoding="utf-8")
        for match in _ANY_FENCE.finditer(text):
            line = text.count("\n", 0, match.start()) + 1
            where = f"{page.relative_to(ROOT)}:{line}"
            assert match["fence"] == "```", f"{where}: fence with ``` only"
            assert not match.group(0).lstrip().startswith(">"), f"{where}: no fences in quotes"
            info = match["info"].strip()
            if "py" in info.lower():
                assert info.split()[0] == "python", f"{where}: spell the language 'python'"
        if page.parent != DOCS and page != ROOT / "README.md":
            where = f"{page.relative_to(ROOT)}: python blocks run only on top-level pages"
            assert python_blocks(page) == [], where


def test_every_docs_python_block_runs_or_says_why_not() -> None:
    not_run = set()
    for page in PAGES:
        for i, block in enumerate(python_blocks(page)):
            if block.not_run is not None:
                assert len(block.not_run.split()) >= 3, f"{block.name}: state the reason"
                not_run.add((page.name, i))
            if block.include is not None:
                _assert_example_is_run(block)
    assert not_run == NOT_RUN


def _assert_example_is_run(block: Block) -> None:
    """An included ``examples/`` script is run by tests/unit/test_examples.py; an included
    downstream pytest file (``test_*.py``) by a test that runs pytest on it."""
    assert block.include is not None
    path = Path(block.include)
    assert path.parts[0] == "examples", block.name
    assert (ROOT / path).is_file(), block.name
    if path.name.startswith("test_"):
        runners = [
            test
            for test in (ROOT / "tests").rglob("test_*.py")
            if all(f'"{part}"' in (text := test.read_text(encoding="utf-8")) for part in path.parts)
            and "pytest" in text
        ]
        assert runners, f"{block.name} includes {path}, which no test under tests/ runs"
        return
    tests = (ROOT / "tests" / "unit" / "test_examples.py").read_text(encoding="utf-8")
    assert re.search(rf'run_path\(str\(EXAMPLES / "{re.escape(path.name)}"\)', tests), (
        f"{block.name} includes {path}, which tests/unit/test_examples.py does not run"
    )


# ------------------------------------------------------------- what the pages say they give


@pytest.mark.slow
def test_pipeline_page_gives_what_it_says(ran: Any) -> None:
    ns = ran("pipeline.md").namespace
    run, n_identities, n_per_identity = ns["run"], 4, 10
    n_pairs = n_identities * (n_identities - 1) // 2
    assert run.results.sizes["pair"] == n_pairs  # pairs=100: all there are
    # "the four routes, each variable with its formal status"
    for name in ("gaussmech_epsilon", "kdelr_epsilon", "rocht_epsilon"):
        assert run.results[name].attrs["status"] == "diagnostic"
    assert run.results["mmdtv_epsilon"].attrs["status"] == "sample_estimate"
    assert run.certificates["epsilon_lb"].attrs["status"] == "certified_lower_bound"
    assert 1 <= run.certificates.sizes["pair"] <= 2  # vertex-disjoint pairs of 4 identities
    assert run.controls.sizes["identity"] == n_identities
    counts = run.embeddings.counts
    for column in ("ok", "no_face", "generator_error", "bad_output", "n_duplicate_rows"):
        assert column in counts.columns
    assert (counts["ok"] == n_per_identity).all()  # paired mode: no face lost to pixelation
    outcomes = run.embeddings.outcomes
    assert len(outcomes) == n_identities * n_per_identity  # one row per draw
    assert set(outcomes["status"]) == {"ok"}
    assert len(run.pair_table()) == n_pairs
    assert any((ns["__workdir__"] / "embeddings-cache").iterdir())
    # the example prints nothing; its last lines are expressions
    assert [r.stdout for r in ran("pipeline.md").runs] == [""]


def test_quickstart_installs_as_the_readme_does() -> None:
    """The site's quick start gives the README's venv, install and test commands, verbatim."""
    readme = [b.code for b in fenced_blocks(ROOT / "README.md") if b.language == "bash"][:2]
    quickstart = [b.code for b in fenced_blocks(DOCS / "quickstart.md") if b.language == "bash"]
    assert quickstart[:2] == readme
    assert readme[0].startswith("python3 -m venv .venv")


@pytest.mark.slow
def test_composition_page_block_reproduces_its_table(ran: Any) -> None:
    """The block after "Reproduce with:" prints the page's advanced and PLD columns."""
    (record,) = ran("composition.md").runs
    printed = {}
    for line in record.stdout.splitlines():
        k, values = line.split(" ", 1)
        printed[int(k)] = ast.literal_eval(values)  # [basic, advanced, pld]
    text = (DOCS / "composition.md").read_text(encoding="utf-8")
    rows = re.findall(r"^\| (\d+) \| [^|]+ \| ([\d.]+) \| ([\d.]+) \| [\d.]+ \|$", text, re.M)
    assert [int(k) for k, _, _ in rows] == [1, 10, 100, 1000] == sorted(printed)
    for k, advanced, pld in rows:
        for shown, value in ((advanced, printed[int(k)][1]), (pld, printed[int(k)][2])):
            decimals = len(shown.partition(".")[2])
            assert abs(value - float(shown)) <= 0.5 * 10.0**-decimals + 1e-9, (k, shown, value)
