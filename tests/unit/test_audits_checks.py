"""The shared contract suite, run over every auditor (and shown to catch a broken one)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from idaudit.audits import (
    BaseAuditor,
    GaussMechAuditor,
    KDELRAuditor,
    MMDTVAuditor,
    Output,
    ROCHTAuditor,
    check_auditor,
)
from idaudit.audits._base import Batch


@pytest.mark.parametrize(
    "auditor",
    [
        GaussMechAuditor(),
        GaussMechAuditor(delta=0.1, name="gm_loose"),
        KDELRAuditor(),
        KDELRAuditor(alpha=0.01, bandwidth="silverman-robust", n_grid=51),
        MMDTVAuditor(),
        MMDTVAuditor(bandwidth=0.8, n_permutations=50, rng=3),
        ROCHTAuditor(n_folds=3),
        ROCHTAuditor(n_folds=3, classifier="random_forest", n_estimators=5),
    ],
    ids=lambda a: repr(a).split("  #")[0],
)
def test_every_auditor_honours_the_contract(auditor: BaseAuditor) -> None:
    check_auditor(auditor)


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
