"""Every Examples section in idaudit's docstrings runs and prints what it shows."""

from __future__ import annotations

import doctest
import importlib
import pkgutil

import pytest

import idaudit

MODULES = sorted(m.name for m in pkgutil.walk_packages(idaudit.__path__, "idaudit."))


@pytest.mark.parametrize("name", MODULES)
def test_examples(name: str) -> None:
    module = importlib.import_module(name)
    finder = doctest.DocTestFinder(exclude_empty=True)
    runner = doctest.DocTestRunner(
        optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE, verbose=False
    )
    report: list[str] = []
    for test in finder.find(module, name):
        # a fresh namespace: every example must import what it uses, as a reader copying it would
        test.globs = {"__name__": name}
        runner.run(test, out=report.append)
    assert runner.failures == 0, "".join(report)
