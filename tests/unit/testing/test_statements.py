"""Assertions about ε read the result's status and refuse what it cannot say."""

from __future__ import annotations

import math

import numpy as np
import pytest
import xarray as xr

from idaudit.certify import ReservedTestCertifier, certify_scores
from idaudit.exceptions import InvalidInputError, UnsupportedStatementError
from idaudit.testing import (
    Claim,
    assert_epsilon_above,
    assert_epsilon_below,
    assert_private,
    known_pair,
)


def test_a_lower_bound_never_shows_privacy() -> None:
    lb = Claim(0.3, "certified_lower_bound")
    with pytest.raises(UnsupportedStatementError, match=r"status 'certified_lower_bound'.*1-DP"):
        assert_private(lb, 1.0)
    # ... whatever its value: the refusal is not a comparison
    with pytest.raises(UnsupportedStatementError):
        assert_private(Claim(100.0, "certified_lower_bound"), 1.0)


def test_estimates_and_diagnostics_never_certify_a_leak() -> None:
    for status in ("sample_estimate", "diagnostic", "certified_upper_bound"):
        with pytest.raises(UnsupportedStatementError, match=f"status '{status}'"):
            assert_epsilon_above(Claim(5.0, status), 1.0)


def test_below_requires_the_named_status() -> None:
    with pytest.raises(UnsupportedStatementError, match="Pass status='sample_estimate'"):
        assert_epsilon_below(Claim(0.1, "sample_estimate"), 2.0)
    assert_epsilon_below(Claim(0.1, "sample_estimate"), 2.0, status="sample_estimate")


def test_comparisons_pass_and_fail_on_the_values() -> None:
    lb = Claim([0.4, 2.5, 1.0], "certified_lower_bound", n_simultaneous=3)
    assert_epsilon_above(lb, 2.0)
    with pytest.raises(
        AssertionError, match=r"no certified_lower_bound exceeds 3: the largest is 2\.5"
    ):
        assert_epsilon_above(lb, 3.0)
    assert_epsilon_below(lb, 2.5)
    with pytest.raises(AssertionError, match=r"exceeds 2 at 1 of 3 values \(\(1,\): 2.5\)"):
        assert_epsilon_below(lb, 2.0)
    ref = known_pair("laplace", distance=2.0)  # pure epsilon exactly 2
    assert_private(Claim(ref.epsilon(), "reference"), 2.0)
    with pytest.raises(AssertionError, match=r"reference exceeds 1\.5"):
        assert_private(Claim(ref.epsilon(), "reference"), 1.5)


def test_statuses_are_read_from_fitted_results() -> None:
    gen = np.random.default_rng(0)
    cert = certify_scores(gen.normal(0, 1, 200), gen.normal(3, 1, 200), alpha=0.05)
    assert_epsilon_above(cert, 0.5)  # a 3-sd shift: a certified leak
    with pytest.raises(UnsupportedStatementError):
        assert_private(cert, 100.0)
    with pytest.raises(InvalidInputError, match="number without a status"):
        assert_private(cert.epsilon_lb_, 100.0)
    assert_epsilon_below(cert.epsilon_curve([1e-3, 1e-2]), 50.0)  # a DataArray's status
    with pytest.raises(ValueError, match="`bound` must be a finite number"):
        assert_epsilon_below(cert, float("nan"))
    with pytest.raises(ValueError, match="'nope'"):
        assert_epsilon_below(cert, 1.0, status="nope")


def _reserved_certificates() -> xr.Dataset:
    kp = known_pair("laplace", distance=3.0)
    cert = ReservedTestCertifier(
        n_select=1, n_candidates=1, alpha=0.05, rng=0, progress=False
    ).fit(kp.draw(200, rng=1), [kp.pair])
    return cert.certificates_


def test_epsilon_statements_refuse_what_is_not_an_epsilon() -> None:
    certs = _reserved_certificates()
    # an upper bound on an error rate is certified, but it is no epsilon
    with pytest.raises(InvalidInputError, match=r"'ufpr'.*is not an epsilon"):
        assert_private(certs["ufpr"], 0.5)
    with pytest.raises(InvalidInputError, match="claim about 'error_rate', not an epsilon"):
        assert_private(Claim(0.01, "certified_upper_bound", quantity="error_rate"), 0.5)
    with pytest.raises(InvalidInputError, match="wraps the variable 'ufpr', which is not an"):
        assert_private(Claim(certs["ufpr"], "certified_upper_bound"), 0.5)
    # a variable named as an epsilon, or marked as one, is read
    assert_epsilon_above(certs["epsilon_lb"], 0.5)
    marked = certs["ufpr"].rename("u").assign_attrs(quantity="epsilon")
    assert_private(marked, 0.5)


def test_a_stacked_dataset_is_refused() -> None:
    certs = _reserved_certificates()
    with pytest.raises(InvalidInputError, match="stacked along a 'variable' dimension"):
        assert_epsilon_above(certs.to_dataarray(), 10.0)


def test_some_member_above_needs_jointly_valid_bounds() -> None:
    # three bounds each valid at 1 - alpha: their maximum is valid at 1 - 3 alpha only
    separate = Claim([0.4, 2.5, 1.0], "certified_lower_bound")
    with pytest.raises(
        UnsupportedStatementError,
        match=r"family of 3 certified_lower_bound values of which 1 hold jointly: their "
        r"maximum has status 'sample_estimate'",
    ):
        assert_epsilon_above(separate, 2.0)
    with pytest.raises(UnsupportedStatementError, match="maximum has status 'sample_estimate'"):
        assert_private(Claim([0.4, 0.5], "certified_upper_bound", n_simultaneous=1), 1.0)
    assert_private(Claim([0.4, 0.5], "certified_upper_bound", n_simultaneous=2), 1.0)
    # the attribute of a result variable is read the same way
    lb = xr.DataArray(
        [0.4, 2.5], dims="pair", name="epsilon_lb", attrs={"status": "certified_lower_bound"}
    )
    with pytest.raises(UnsupportedStatementError, match="'sample_estimate'"):
        assert_epsilon_above(lb, 2.0)
    assert_epsilon_above(lb.assign_attrs(n_simultaneous=2), 2.0)
    # reference values carry over: proved truths need no union bound
    assert_epsilon_above(Claim([0.4, 2.5], "reference"), 2.0)


@pytest.mark.parametrize(
    "check",
    [
        lambda c: assert_epsilon_below(c, 1.0),
        lambda c: assert_epsilon_above(c, 1.0),
        lambda c: assert_private(c, 1.0),
    ],
    ids=["below", "above", "private"],
)
def test_an_empty_family_is_refused(check) -> None:
    for status in ("certified_lower_bound", "certified_upper_bound"):
        with pytest.raises(InvalidInputError, match=r"holds no values: .* empty family"):
            check(Claim([], status))


def test_levels_must_be_finite_numbers() -> None:
    lb = Claim(0.5, "certified_lower_bound")
    for value in (math.inf, -math.inf, math.nan):
        with pytest.raises(InvalidInputError, match=r"`bound` must be a finite number; got"):
            assert_epsilon_below(lb, value)
        with pytest.raises(InvalidInputError, match=r"`bound` must be a finite number; got"):
            assert_epsilon_above(lb, value)
        with pytest.raises(InvalidInputError, match=r"`epsilon` must be a finite number; got"):
            assert_private(Claim(0.5, "reference"), value)
    with pytest.raises(TypeError, match="`bound` must be a real number; got str"):
        assert_epsilon_below(lb, "2.0")  # type: ignore[arg-type]
