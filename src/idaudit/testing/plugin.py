"""idaudit's pytest plugin: markers, a per-test seeded generator, known mechanisms, a reps scale.

Registered through the ``pytest11`` entry point ``idaudit.testing.plugin``, so every pytest
run in an environment with idaudit loads it. It is inert unless used: it imports nothing of
idaudit's science (numpy, scipy, xarray) until a test asks for one of its fixtures (loading
it costs ``import idaudit``, whose result accessor loads xarray and pandas), and it changes
no test that does not use its markers or fixtures.

* markers ``calibration`` (many seeded repetitions) and ``reproduce`` (recomputes published
  numbers); it registers no ``gpu`` marker and skips nothing, so a project's own markers and
  tests are left as they are;
* fixture ``idaudit_rng``: a ``numpy.random.Generator`` seeded from the test's id, the same
  on every machine and under pytest-xdist; its seed is printed in the report of a failed test;
* fixture ``known_mechanism``: a :class:`~idaudit.testing.KnownPair` with a proved ε(δ),
  Laplace and Gaussian (parametrise it indirectly to choose one);
* fixture ``idaudit_reps``: ``idaudit_reps(n)`` scales a number of repetitions by the option
  ``--idaudit-reps-scale`` (0.25 for a quick run, 4 for a paper run; reported in the header).
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable, Generator
from typing import Any

import pytest

_SEED_KEY = pytest.StashKey[int]()
_MARKERS = (
    "calibration: coverage / type-I error checks over many seeded repetitions",
    "reproduce: recomputes published numbers from independent references",
)


def pytest_addoption(parser: pytest.Parser) -> None:
    """Add ``--idaudit-reps-scale``."""
    group = parser.getgroup("idaudit")
    group.addoption(
        "--idaudit-reps-scale",
        type=float,
        default=None,
        metavar="FACTOR",
        help="scale the repetitions of tests that use the idaudit_reps fixture "
        "(0.25: a quick run, 4: a paper run; default 1).",
    )


def pytest_configure(config: pytest.Config) -> None:
    """Register the markers and check the option."""
    for line in _MARKERS:
        config.addinivalue_line("markers", line)
    scale = config.getoption("--idaudit-reps-scale", default=None)
    if scale is not None and not 0 < scale < math.inf:
        raise pytest.UsageError(f"--idaudit-reps-scale must be finite and > 0; got {scale!r}.")


def pytest_report_header(config: pytest.Config) -> str | None:
    """Report the repetitions scale when it was given."""
    scale = config.getoption("--idaudit-reps-scale", default=None)
    if scale is None:
        return None
    return f"idaudit: repetitions scaled by {scale:g} (--idaudit-reps-scale)"


def seed_of(nodeid: str) -> int:
    """Return the 63-bit seed of a test id (stable across machines, runs and xdist workers).

    Parameters
    ----------
    nodeid : str
        pytest's test id, e.g. ``"tests/test_x.py::test_y[1]"``.

    Returns
    -------
    int
    """
    digest = hashlib.sha256(nodeid.encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "little") >> 1


@pytest.fixture
def idaudit_rng(request: pytest.FixtureRequest) -> Any:
    """Give a ``numpy.random.Generator`` seeded from the test's id; its seed shows on failure."""
    import numpy as np

    seed = seed_of(request.node.nodeid)
    request.node.stash[_SEED_KEY] = seed
    return np.random.default_rng(seed)


@pytest.fixture
def idaudit_reps(request: pytest.FixtureRequest) -> Callable[[int], int]:
    """``idaudit_reps(n)``: ``n`` repetitions times ``--idaudit-reps-scale`` (at least 1)."""
    scale = request.config.getoption("--idaudit-reps-scale", default=None) or 1.0

    def reps(n: int) -> int:
        return max(1, round(n * scale))

    return reps


@pytest.fixture(params=["laplace", "gaussian"])
def known_mechanism(request: pytest.FixtureRequest) -> Any:
    """Two point identities with a proved ε(δ): :func:`idaudit.testing.known_pair`.

    Parametrised over ``"laplace"`` (pure ε = 1) and ``"gaussian"`` (σ = 1 at distance 1:
    ε(δ) by the analytic Gaussian mechanism). Choose one with
    ``@pytest.mark.parametrize("known_mechanism", ["laplace"], indirect=True)``.
    """
    from idaudit.testing import known_pair

    return known_pair(request.param)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, Any, Any]:
    """Add the ``idaudit_rng`` seed to the report of a failed test that used it."""
    report = yield
    seed = item.stash.get(_SEED_KEY, None)
    if seed is not None and report.failed:
        report.sections.append(
            ("idaudit", f"idaudit_rng seed: {seed} (numpy.random.default_rng({seed}))")
        )
    return report
