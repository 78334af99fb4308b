"""Shared pytest configuration: marker handling and common fixtures."""

from __future__ import annotations

import os
from collections.abc import Iterator

import numpy as np
import pytest
from hypothesis import settings

# Property tests draw the same examples on every run, so a CI result is reproducible; the
# "explore" profile (IDAUDIT_HYPOTHESIS=explore) searches fresh random examples on each run.
settings.register_profile("default", derandomize=True, database=None, deadline=None)
settings.register_profile("explore", derandomize=False, database=None, deadline=None)
settings.load_profile(os.environ.get("IDAUDIT_HYPOTHESIS", "default"))

# idaudit's own pytest plugin (markers, idaudit_rng, known_mechanism, --idaudit-reps-scale),
# also for a checkout whose installed metadata predates its entry point; where the entry
# point loaded it already, pytest registers it once.
pytest_plugins = ["idaudit.testing.plugin"]


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Skip this suite's ``gpu`` tests where CUDA is absent (torch imported only if needed).

    Here, not in the installed plugin: a project with idaudit installed keeps its own ``gpu``
    marker and tests untouched.
    """
    gpu = [item for item in items if item.get_closest_marker("gpu") is not None]
    if not gpu:
        return
    try:
        import torch

        has_cuda = bool(torch.cuda.is_available())
    except ImportError:  # pragma: no cover
        has_cuda = False
    if has_cuda:
        return
    skip = pytest.mark.skip(reason="needs CUDA; this machine has none")
    for item in gpu:
        item.add_marker(skip)


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """``-n auto``: one worker per CPU this process may run on.

    xdist's own count is the machine's (or, with psutil, its physical cores); the CPU affinity
    honours ``taskset``, cgroups' cpusets and container limits, so a shared machine is not
    oversubscribed.
    """
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not Linux
        return max(1, os.cpu_count() or 1)


@pytest.fixture
def rng() -> np.random.Generator:
    """A fresh, seeded generator for one test."""
    return np.random.default_rng(20260817)


@pytest.fixture
def permissive_umask() -> Iterator[None]:
    """Run one test under umask 000, so a folder mode that only the umask narrowed shows.

    ``mkdir(parents=True, mode=0o700)`` gives the parents it creates ``0o777 & ~umask``: under
    000 they come out world-writable, so a test of owner-only folders fails if one is made so.
    """
    before = os.umask(0o000)
    try:
        yield
    finally:
        os.umask(before)
