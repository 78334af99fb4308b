"""Privacy maths: from test errors, total variation, MMD and Gaussian noise to (ε, δ).

Pure functions on numpy arrays (scipy only), vectorised: scalars in give a ``float`` out,
array_likes broadcast and give an ``ndarray``. Bad values raise
:class:`~idaudit.exceptions.InvalidInputError` naming the argument, the rule and the value.

==========================================  =====================================================
:func:`epsilon_from_tv`                     ε ≥ ln((1 + TV)/(1 − TV)) (seed 000, Eq. 5)
:func:`tv_bound`                            TV ≤ (e^ε − 1 + 2δ)/(e^ε + 1) (Eq. 4)
:func:`epsilon_from_error_rates`            ε from one test's FPR and FNR (Eq. 2, 16)
:func:`epsilon_from_roc`                    ε maximised over ROC operating points (Eq. 15)
:func:`exact_corner`                        whether a ROC reaches (FPR, TPR) = (0, 1)
:func:`clopper_pearson_upper`, ``_lower``   one-sided exact binomial confidence bounds
:func:`epsilon_from_mmd_hockey_stick`       ε ≥ 2 artanh(MMD/√2) and its δ > 0 form
:func:`gaussian_delta`                      δ(ε) of the Gaussian mechanism (Balle & Wang)
:func:`gaussian_epsilon`                    ε(δ) of the Gaussian mechanism
:func:`calibrate_gaussian_sigma`            smallest σ for (ε, δ)-DP
:func:`anytime_upper_bound`, ``_lower``     confidence sequences for a rate (valid at every n)
:func:`betting_mean_lower_bound`            betting lower bound on a mean in [0, 1]
:func:`bernstein_mean_lower_bound`          empirical-Bernstein lower bound on a mean in [0, 1]
:func:`compose_epsilon`                     per-query (ε, δ) guarantee → k outputs (basic,
                                            advanced, exact PLD): an *upper* bound
:func:`compose_error_rates`                 per-query certified test → certified *lower* bound
                                            for k outputs
:func:`score_error_counts`                  FP/FN counts of the tests "B when score ≥ t"
:func:`simultaneous_rate_bounds`            upper bounds on a tail rate at every threshold at
                                            once (exact band or Bonferroni)
:func:`band_local_level`                    the band's calibrated per-count level
:func:`clopper_pearson_table`               Clopper–Pearson bounds at every count (kept)
:func:`noncrossing_probability`             P(uniform order statistics stay below a boundary)
:func:`epsilon_from_tradeoff`               ε(δ) for many δ from certified trade-off points
:func:`gdp_tradeoff`                        μ-GDP trade-off G_μ(x) = Φ(Φ⁻¹(1−x) − μ)
:func:`gdp_delta`, :func:`gdp_epsilon`      μ-GDP ↔ (ε, δ) (Dong–Roth–Su Cor. 2.13)
:func:`gdp_mu_lower_bound`                  μ lower bound from trade-off points
:func:`one_run_epsilon`                     ε lower bound from one run: m canaries, r guesses,
                                            v right (Steinke, Nasr & Jagielski 2023)
:func:`one_run_p_value`                     its tail bound on v under (ε, δ)-DP
:func:`one_run_gdp_mu`                      GDP μ lower bound from one run (f-DP variant,
                                            Mahloujifar, Melis & Chaudhuri 2024)
:func:`one_run_gdp_refutes`                 whether one run refutes μ-GDP
==========================================  =====================================================

Each function's docstring states the formal status of what it returns: these are exact maps;
the status of the ε is inherited from the input (population quantity, sample estimate or
confidence bound).
"""

from __future__ import annotations

from idaudit.dp._binomial import clopper_pearson_lower, clopper_pearson_upper
from idaudit.dp._composition import ComposedPrivacy, compose_epsilon, compose_error_rates
from idaudit.dp._confseq import (
    anytime_lower_bound,
    anytime_upper_bound,
    bernstein_mean_lower_bound,
    betting_mean_lower_bound,
)
from idaudit.dp._gaussian import calibrate_gaussian_sigma, gaussian_delta, gaussian_epsilon
from idaudit.dp._hypothesis import epsilon_from_error_rates, epsilon_from_roc, exact_corner
from idaudit.dp._mmd import epsilon_from_mmd_hockey_stick
from idaudit.dp._one_run import (
    one_run_epsilon,
    one_run_gdp_mu,
    one_run_gdp_refutes,
    one_run_p_value,
)
from idaudit.dp._tradeoff import (
    band_local_level,
    clopper_pearson_table,
    epsilon_from_tradeoff,
    gdp_delta,
    gdp_epsilon,
    gdp_mu_lower_bound,
    gdp_tradeoff,
    noncrossing_probability,
    score_error_counts,
    simultaneous_rate_bounds,
)
from idaudit.dp._tv import epsilon_from_tv, tv_bound

__all__ = [
    "ComposedPrivacy",
    "anytime_lower_bound",
    "anytime_upper_bound",
    "band_local_level",
    "bernstein_mean_lower_bound",
    "betting_mean_lower_bound",
    "calibrate_gaussian_sigma",
    "clopper_pearson_lower",
    "clopper_pearson_table",
    "clopper_pearson_upper",
    "compose_epsilon",
    "compose_error_rates",
    "epsilon_from_error_rates",
    "epsilon_from_mmd_hockey_stick",
    "epsilon_from_roc",
    "epsilon_from_tradeoff",
    "epsilon_from_tv",
    "exact_corner",
    "gaussian_delta",
    "gaussian_epsilon",
    "gdp_delta",
    "gdp_epsilon",
    "gdp_mu_lower_bound",
    "gdp_tradeoff",
    "noncrossing_probability",
    "one_run_epsilon",
    "one_run_gdp_mu",
    "one_run_gdp_refutes",
    "one_run_p_value",
    "score_error_counts",
    "simultaneous_rate_bounds",
    "tv_bound",
]
