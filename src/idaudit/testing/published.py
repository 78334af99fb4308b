"""Published numbers idaudit can recompute without the authors' data, with their sources.

Each entry is a :class:`PublishedValue`: the number as printed (or as an independent
implementation computes it), the tolerance that printing or that implementation allows, the
source, and the inputs to recompute it from. :func:`idaudit.test` recomputes every one of
them with the installed idaudit; a downstream test can do the same::

    from idaudit.dp import clopper_pearson_upper, epsilon_from_error_rates
    from idaudit.testing.published import ZERO_ERROR_CERTIFICATES

    for v in ZERO_ERROR_CERTIFICATES:
        u = clopper_pearson_upper(0, v.inputs["n"], v.inputs["alpha"])
        assert abs(epsilon_from_error_rates(u, u) - v.value) <= v.atol, v.source
"""

from __future__ import annotations

from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

__all__ = [
    "ANALYTIC_GAUSSIAN",
    "CELEBA_UPPER_ERROR_BOUND",
    "ZERO_ERROR_CERTIFICATES",
    "PublishedValue",
    "all_values",
]


@dataclass(frozen=True)
class PublishedValue:
    """One published number.

    Attributes
    ----------
    name : str
        What the number is.
    value : float
        The number.
    atol : float
        Absolute tolerance of a recomputation (half a unit of the last printed place, or the
        stated accuracy of the reference implementation).
    source : str
        Where it is published or how it was computed independently.
    inputs : mapping
        The inputs that recompute it.
    """

    name: str
    value: float
    atol: float
    source: str
    inputs: MappingProxyType[str, Any] = field(default_factory=lambda: MappingProxyType({}))


_SEED_000 = 'Seed 000 ("Picture the Epsilon"), Section 4.3'
_ALPHA_40_PAIRS = 0.05 / (8 * 5 * 2)  # 40 pairs, two one-sided bounds each (Section 4.3)

#: "A balanced zero-error test gives ε_LB = 0 at n = 10 per class, 0.454 at n = 15 and
#: 1.277 at n = 30" under the 40-pair correction α = 0.05 / (8 · 5 · 2): recomputed as
#: ``epsilon_from_error_rates(u, u)`` with ``u = clopper_pearson_upper(0, n, alpha)``.
ZERO_ERROR_CERTIFICATES: tuple[PublishedValue, ...] = tuple(
    PublishedValue(
        f"zero-error certificate at n = {n} per class",
        value,
        5e-4,
        _SEED_000,
        MappingProxyType({"n": n, "alpha": _ALPHA_40_PAIRS}),
    )
    for n, value in ((10, 0.0), (15, 0.454), (30, 1.277))
)

#: "The globally corrected one-sided upper error bound is at least 0.522 with only 10 test
#: samples per class": ``clopper_pearson_upper(0, 10, 0.05 / 80)``.
CELEBA_UPPER_ERROR_BOUND = PublishedValue(
    "Clopper-Pearson upper error bound at 0 errors of 10, alpha = 0.05 / 80",
    0.522,
    5e-4,
    _SEED_000,
    MappingProxyType({"k": 0, "n": 10, "alpha": 0.05 / 80}),
)

_PLD = (
    "Google dp-accounting 0.6.0, privacy_loss_distribution.from_gaussian_mechanism "
    "(value_discretization_interval = 1e-4, pessimistic) .get_epsilon_for_delta: an "
    "independent implementation of the analytic Gaussian mechanism (Balle & Wang 2018, "
    "Theorem 8), which seed 000 (Section 5.2) names as the benchmark's reference"
)

#: ε(δ) of the Gaussian mechanism at (σ, Δ, δ), from an independent implementation. The
#: discretisation moves ε up by at most its interval 1e-4, and the values are rounded to
#: 1e-5: a recomputation agrees within 1.1e-4.
ANALYTIC_GAUSSIAN: tuple[PublishedValue, ...] = tuple(
    PublishedValue(
        f"analytic Gaussian epsilon at sigma = {s:g}, sensitivity = {d:g}, delta = {dl:g}",
        value,
        1.1e-4,
        _PLD,
        MappingProxyType({"sigma": s, "sensitivity": d, "delta": dl}),
    )
    for s, d, dl, value in (
        (1.0, 1.0, 1e-5, 4.37718),
        (0.5, 2.0, 1e-6, 26.35696),
        (0.5, 2.0, 1e-5, 24.38161),
        (1.0, 2.0, 1e-5, 9.99726),
        (4.0, 2.0, 1e-5, 1.99309),
        (8.0, 2.0, 1e-5, 0.92634),
    )
)


def all_values() -> tuple[PublishedValue, ...]:
    """Every published value in this module.

    Returns
    -------
    tuple of PublishedValue

    Examples
    --------
    >>> from idaudit.testing.published import all_values
    >>> len(all_values())
    10
    """
    return (*ZERO_ERROR_CERTIFICATES, CELEBA_UPPER_ERROR_BOUND, *ANALYTIC_GAUSSIAN)
