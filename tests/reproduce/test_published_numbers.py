"""Numbers seed 000 publishes that can be recomputed without the authors' data.

A change in any of them must be deliberate: these tests pin idaudit to the paper and to an
independent implementation, never to idaudit's own output.
"""

from __future__ import annotations

import numpy as np
import pytest

from idaudit.dp import clopper_pearson_upper, epsilon_from_error_rates, gaussian_epsilon

pytestmark = pytest.mark.reproduce


def test_zero_error_certificates_match_section_4_3() -> None:
    # "a balanced zero-error test gives eps_LB = 0 at n = 10 per class, 0.454 at n = 15, and
    # 1.277 at n = 30", under the 40-pair correction alpha = 0.05 / (8 * 5 * 2) (Section 4.3)
    alpha = 0.05 / (8 * 5 * 2)
    got = [
        epsilon_from_error_rates(u, u)
        for u in (clopper_pearson_upper(0, n, alpha) for n in (10, 15, 30))
    ]
    # the paper prints three decimals: half a unit of the last place
    np.testing.assert_allclose(got, [0.0, 0.454, 1.277], atol=5e-4)


def test_celeba_upper_error_bound_matches_section_4_3() -> None:
    # "the globally corrected one-sided upper error bound is at least 0.522 with only 10 test
    # samples per class"
    assert clopper_pearson_upper(0, 10, 0.05 / 80) == pytest.approx(0.522, abs=5e-4)


@pytest.mark.parametrize(
    ("sigma", "sensitivity", "delta"),
    [(1.0, 1.0, 1e-5), (0.5, 2.0, 1e-6), (4.0, 2.0, 1e-5), (8.0, 2.0, 1e-5)],
)
def test_analytic_gaussian_matches_dp_accounting(
    sigma: float, sensitivity: float, delta: float
) -> None:
    # Google's dp-accounting computes eps(delta) of the Gaussian mechanism from a discretised
    # privacy-loss distribution (pessimistic rounding at 1e-4 in the loss): an independent
    # implementation of the quantity Balle & Wang's Theorem 8 gives in closed form.
    from dp_accounting.pld import privacy_loss_distribution

    pld = privacy_loss_distribution.from_gaussian_mechanism(
        standard_deviation=sigma, sensitivity=sensitivity, value_discretization_interval=1e-4
    )
    reference = pld.get_epsilon_for_delta(delta)
    # the discretisation moves eps by at most the interval (1e-4), upwards
    assert gaussian_epsilon(delta, sigma, sensitivity) == pytest.approx(reference, abs=1e-4)


def test_gaussian_benchmark_reference_curve_matches_dp_accounting() -> None:
    # Section 5.2's reference: sensitivity 2 (the diameter of the unit sphere) across the noise
    # levels of the demo from sd 0.5 up (smaller sd gives eps in the hundreds, whose
    # privacy-loss distribution is too wide for a quick reference computation); the
    # mechanism-wide guarantee GaussianNoise states is that curve.
    from dp_accounting.pld import privacy_loss_distribution

    from idaudit.data import EmbeddingSet
    from idaudit.mechanisms import GaussianNoise

    base = EmbeddingSet(np.eye(4), ["a", "b", "c", "d"])
    for sigma in (0.5, 1.0, 2.0, 4.0, 8.0):
        mech = GaussianNoise(base, float(sigma))
        pld = privacy_loss_distribution.from_gaussian_mechanism(
            standard_deviation=float(sigma), sensitivity=2.0, value_discretization_interval=1e-4
        )
        assert mech.reference_epsilon(1e-5) == pytest.approx(
            pld.get_epsilon_for_delta(1e-5), abs=1e-4
        )
