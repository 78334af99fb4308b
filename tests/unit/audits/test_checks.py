"""The shared contract suite, run over every auditor (and shown to catch a broken one)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

import numpy as np
import pytest

from idaudit._validation import Constraint, Interval
from idaudit.audits import (
    BaseAuditor,
    GaussMechAuditor,
    KDELRAuditor,
    MMDTVAuditor,
    Output,
    ROCHTAuditor,
    check_auditor,
    parametrize_auditor_checks,
)
from idaudit.audits._base import NAME
from idaudit.audits._batch import Batch
from idaudit.audits._checks import AUDITOR_CHECKS

AUDITORS = [
    GaussMechAuditor(),
    GaussMechAuditor(delta=0.1, name="gm_loose"),
    KDELRAuditor(),
    KDELRAuditor(mix=0.01, bandwidth="silverman-robust", n_grid=51),
    MMDTVAuditor(),
    MMDTVAuditor(bandwidth=0.8, n_permutations=50, rng=3),
    ROCHTAuditor(n_folds=3),
    ROCHTAuditor(n_folds=3, classifier="random_forest", n_estimators=5),
]


@parametrize_auditor_checks(AUDITORS)
def test_every_auditor_honours_the_contract(
    auditor: BaseAuditor, check: Callable[[BaseAuditor], None]
) -> None:
    check(auditor)


def test_check_auditor_runs_every_named_check() -> None:
    assert set(AUDITOR_CHECKS) >= {
        "bad_params",
        "refit_idempotent",
        "pickle",
        "init_stores_only",
        "audit_pairs_matches_fit",
    }
    check_auditor(GaussMechAuditor())


class _LopsidedAuditor(BaseAuditor):
    """Claims symmetry but reports the mean of A's first coordinate (a broken auditor)."""

    status = "diagnostic"
    _prefix = "lopsided"

    def __init__(self, *, name: str | None = None) -> None:
        self.name = name

    def outputs(self) -> tuple[Output, ...]:
        return (Output("epsilon", "broken", self.status),)

    def _run(self, batch: Batch, seed: int | None) -> dict[str, Any]:
        return {"epsilon": np.array([abs(a[:, 0].mean()) for a, _ in batch.samples])}


def test_the_suite_catches_a_broken_auditor() -> None:
    with pytest.raises(AssertionError, match="_LopsidedAuditor: not symmetric"):
        check_auditor(_LopsidedAuditor())


class _SloppyAuditor(BaseAuditor):
    """Validates nothing, works in __init__, keeps state between fits, and holds a lock."""

    _prefix = "sloppy"
    _parameter_constraints: ClassVar[dict[str, Constraint]] = {
        "scale": Interval(0.0, None),
        "name": NAME,
    }

    def __init__(self, scale: float = 1.0, *, name: str | None = None) -> None:
        import threading

        self.scale = scale
        self.name = name
        self.calls = 0  # state set in __init__, and changed by every fit
        self.lock = threading.Lock()  # cannot be pickled

    def _check_params(self) -> None:  # skips the declared constraints
        pass

    def outputs(self) -> tuple[Output, ...]:
        return (Output("epsilon", "grows with every fit", self.status),)

    def _run(self, batch: Batch, seed: int | None) -> dict[str, Any]:
        self.calls += 1
        return {"epsilon": np.full(len(batch.samples), float(self.calls))}


def test_the_suite_names_every_broken_rule() -> None:
    with pytest.raises(AssertionError) as info:
        check_auditor(_SloppyAuditor())
    report = str(info.value)
    for check in ("init_stores_only", "refit_idempotent", "pickle", "bad_params"):
        assert f"{check}: _SloppyAuditor" in report, check
    assert "scale='0.5' was accepted" in report
