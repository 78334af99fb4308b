"""The published values carried as data agree with their independent sources."""

from __future__ import annotations

import pytest

from idaudit.testing import published

pytestmark = pytest.mark.reproduce


def test_analytic_gaussian_values_are_dp_accounting_s() -> None:
    from dp_accounting.pld import privacy_loss_distribution

    for v in published.ANALYTIC_GAUSSIAN:
        pld = privacy_loss_distribution.from_gaussian_mechanism(
            standard_deviation=v.inputs["sigma"],
            sensitivity=v.inputs["sensitivity"],
            value_discretization_interval=1e-4,
        )
        # rounded to 1e-5 from the live value
        assert v.value == pytest.approx(pld.get_epsilon_for_delta(v.inputs["delta"]), abs=6e-6)


def test_seed_000_values_are_as_printed() -> None:
    assert [v.value for v in published.ZERO_ERROR_CERTIFICATES] == [0.0, 0.454, 1.277]
    assert [v.inputs["n"] for v in published.ZERO_ERROR_CERTIFICATES] == [10, 15, 30]
    assert published.CELEBA_UPPER_ERROR_BOUND.value == 0.522
    assert all("Section 4.3" in v.source for v in published.ZERO_ERROR_CERTIFICATES)
    assert len(published.all_values()) == 10
