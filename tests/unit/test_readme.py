"""The README's first Python example runs as written and reports labelled numbers."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

README = Path(__file__).resolve().parents[2] / "README.md"


def test_readme_python_example_runs():
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), flags=re.S)
    assert blocks, "README has no python example"
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(blocks[0], str(README), "exec"), {"__name__": "__readme__"})
    text = out.getvalue()
    # the summary names every status, and the certificate line prints a finite bound
    for status in ("[diagnostic]", "[sample_estimate]"):
        assert status in text
    bound = float(re.search(r"certified lower bound on epsilon: (\S+)", text).group(1))
    assert 0.0 < bound < float("inf")
