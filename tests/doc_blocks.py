"""The fenced blocks of README.md and docs/*.md, and a reader pasting them into one interpreter.

One mechanism for every page: ``tests/unit/test_readme.py`` runs the README's blocks and
``tests/unit/test_docs_snippets.py`` every docs page's, both through :class:`SnippetSession`.

A ```python block runs unless the line right above its fence says why it cannot::

    <!-- not run: needs a SLURM cluster and dask-jobqueue -->

(an HTML comment: invisible on GitHub and on the site, so the page's own text must tell the
reader what the block needs). A block holding only a ``--8<-- "path"`` line is the file at
``path``, included by pymdownx.snippets when the site is built.
"""

from __future__ import annotations

import contextlib
import io
import re
import sys
import textwrap
import types
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]

# an opening fence (possibly indented, inside a list item) up to the closing fence at the
# same indentation
_FENCE = re.compile(
    r"^(?P<indent>[ \t]*)```(?P<lang>\w*)[^\n]*\n(?P<code>.*?)^(?P=indent)```[ \t]*$",
    flags=re.S | re.M,
)
_NOT_RUN = re.compile(r"<!--\s*not run:\s*(?P<reason>\S.*?)\s*-->\s*$")
_INCLUDE = re.compile(r'^--8<--\s+"(?P<path>[^"]+)"\s*$')


@dataclass(frozen=True)
class Block:
    """One fenced block of a Markdown file."""

    path: Path
    line: int  # 1-based line of the opening fence
    language: str
    code: str  # dedented to the fence's indentation
    not_run: str | None = None  # the stated reason, when the block is marked not runnable
    include: str | None = None  # the included file, for a ``--8<--`` block

    @property
    def name(self) -> str:
        return f"{self.path.name}:{self.line}"


def fenced_blocks(path: Path) -> list[Block]:
    """Every fenced block of ``path``, in order."""
    text = path.read_text(encoding="utf-8")
    found = []
    for match in _FENCE.finditer(text):
        line = text.count("\n", 0, match.start()) + 1
        above = text[: match.start()].rstrip("\n").rsplit("\n", 1)[-1]
        reason = _NOT_RUN.search(above)
        code = textwrap.dedent(match["code"])
        include = _INCLUDE.match(code.strip())
        found.append(
            Block(
                path,
                line,
                match["lang"],
                code,
                reason["reason"] if reason else None,
                include["path"] if include else None,
            )
        )
    return found


def blocks_of(path: Path, language: str) -> list[str]:
    """The code of every ``language`` block of ``path``, in order."""
    return [b.code for b in fenced_blocks(path) if b.language == language]


def python_blocks(path: Path) -> list[Block]:
    return [b for b in fenced_blocks(path) if b.language == "python"]


@dataclass
class BlockRun:
    """What running one block printed and warned."""

    stdout: str
    warnings: list[str]


@dataclass
class SnippetSession:
    """A reader pasting ``blocks`` in order into one interpreter (blocks run at most once).

    The namespace is a module's, registered in ``sys.modules`` under ``name``, so that what the
    blocks define pickles as it does in a reader's ``__main__`` (dask and the auditor contract
    suite pickle auditors). Blocks marked not runnable and ``--8<--`` includes are not pasted:
    their record is empty.
    """

    blocks: list[Block]
    name: str = "__docs__"
    runs: list[BlockRun] = field(default_factory=list)

    def __post_init__(self) -> None:
        module = types.ModuleType(self.name)
        sys.modules[self.name] = module
        self.namespace: dict[str, Any] = module.__dict__

    def run_through(self, index: int) -> BlockRun:
        """Run every block up to ``index`` not yet run; the record of block ``index``."""
        while len(self.runs) <= index:
            block = self.blocks[len(self.runs)]
            if block.not_run is not None or block.include is not None:
                self.runs.append(BlockRun("", []))
                continue
            out = io.StringIO()
            # warnings are recorded, not raised: each test asserts the ones its block may give
            with contextlib.redirect_stdout(out), warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                exec(compile(block.code, f"{block.name} (python block)", "exec"), self.namespace)
            self.runs.append(BlockRun(out.getvalue(), [str(w.message) for w in caught]))
        return self.runs[index]

    def run_all(self) -> list[BlockRun]:
        if self.blocks:
            self.run_through(len(self.blocks) - 1)
        return self.runs


@contextlib.contextmanager
def one_torch_thread() -> Iterator[None]:
    """MTCNN and dlib on one torch thread: on a loaded two-core machine two threads are ~8x
    slower per frame (README, "idaudit embed"); restored afterwards."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)
