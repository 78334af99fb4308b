"""Memorisation check (seed 003): how close do a generator's samples sit to its training set.

Array-level statistics, usable on any embeddings or distances:

=====================================  ==========================================================
:func:`flagging`,                      rates at thresholds calibrated on held-out distances, a
:func:`flagging_from_distances`        permutation p-value and an exact Clopper–Pearson interval
                                       (a betting interval on group shares when synthetic
                                       groups hold several images)
:func:`nnaa`, :func:`nnaa_from_distances`  nearest-neighbour adversarial accuracy, privacy loss,
                                       exact permutation p-value, split-half intervals
:func:`metric_sanity`                  same- vs different-subject distances: AUC, permutation test
:func:`nearest_neighbour_distances`,   batched torch kernels, memory-bounded in blocks
:func:`pairwise_distances`
=====================================  ==========================================================

Folders to seed 003's outputs: :func:`run_privacy_check` → :class:`PrivacyReport`, with the
content-hash cache :class:`PrivacyCache` (``idaudit privacy`` on the command line).
"""

from __future__ import annotations

from idaudit.memorization._cache import PrivacyCache, model_key
from idaudit.memorization._flagging import (
    DEFAULT_PERCENTILES,
    FLAGGING_STATUS,
    FlaggingResult,
    flagging,
    flagging_from_distances,
)
from idaudit.memorization._neighbours import nearest_neighbour_distances, pairwise_distances
from idaudit.memorization._nnaa import (
    MIN_INTERVAL_SIZE,
    NNAA_STATUS,
    NNAA_TEST_STATUS,
    NNAAResult,
    nnaa,
    nnaa_from_distances,
)
from idaudit.memorization._report import (
    CacheUse,
    InputListing,
    ModelsUsed,
    PrivacyReport,
    PrivacySettings,
)
from idaudit.memorization._run import (
    FLAGGING_COHORT_COLUMNS,
    FLAGGING_COLUMNS,
    NNAA_COLUMNS,
    OUTPUT_FILES,
    run_privacy_check,
)
from idaudit.memorization._sanity import (
    SANITY_STATUS,
    SanityResult,
    metric_sanity,
    subjects_from_names,
)

__all__ = [
    "DEFAULT_PERCENTILES",
    "FLAGGING_COHORT_COLUMNS",
    "FLAGGING_COLUMNS",
    "FLAGGING_STATUS",
    "MIN_INTERVAL_SIZE",
    "NNAA_COLUMNS",
    "NNAA_STATUS",
    "NNAA_TEST_STATUS",
    "OUTPUT_FILES",
    "SANITY_STATUS",
    "CacheUse",
    "FlaggingResult",
    "InputListing",
    "ModelsUsed",
    "NNAAResult",
    "PrivacyCache",
    "PrivacyReport",
    "PrivacySettings",
    "SanityResult",
    "flagging",
    "flagging_from_distances",
    "metric_sanity",
    "model_key",
    "nearest_neighbour_distances",
    "nnaa",
    "nnaa_from_distances",
    "pairwise_distances",
    "run_privacy_check",
    "subjects_from_names",
]
