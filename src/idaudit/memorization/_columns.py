"""Columns of the memorisation tables: flagging.csv, nnaa.csv and flagging_by_cohort.csv."""

from __future__ import annotations

__all__ = ["FLAGGING_COHORT_COLUMNS", "FLAGGING_COLUMNS", "NNAA_COLUMNS"]

#: The rates at each percentile's threshold, in both flagging tables.
_RATES: tuple[str, ...] = (
    "percentile",
    "threshold",
    "synthetic_pct",
    "heldout_pct",
    "n_synthetic",
    "n_heldout",
    "n_synthetic_flagged",
    "n_heldout_flagged",
)
#: Columns of ``flagging.csv``, in order.
FLAGGING_COLUMNS: tuple[str, ...] = (
    "metric",
    "axis",
    *_RATES,
    "p_value",
    "smallest_p_value",
    "ci_lower",
    "ci_upper",
)
#: Columns of ``nnaa.csv``, in order.
NNAA_COLUMNS: tuple[str, ...] = (
    "metric",
    "axis",
    "cohort",
    "aa_train_synth",
    "aa_heldout_synth",
    "privacy_loss",
    "ci_lower",
    "ci_upper",
    "aa_train_synth_ci_lower",
    "aa_train_synth_ci_upper",
    "aa_heldout_synth_ci_lower",
    "aa_heldout_synth_ci_upper",
    "n_train",
    "n_heldout",
    "n_synthetic",
    "n_bootstrap",
    "p_value",
    "n_permutations",
    "smallest_p_value",
    "interval_method",
    "below_min_size",
)
#: Columns of ``flagging_by_cohort.csv``: each cohort's rates at the pooled thresholds.
FLAGGING_COHORT_COLUMNS: tuple[str, ...] = (
    "metric",
    "axis",
    "cohort",
    *_RATES,
    "ci_lower",
    "ci_upper",
)
