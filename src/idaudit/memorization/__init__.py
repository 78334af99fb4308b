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

Folders of images to a whole check: :func:`idaudit.pipeline.run_privacy_check` (``idaudit
privacy`` on the command line), which reads the images, embeds them, calls the functions here
on arrays and returns an :class:`idaudit.pipeline.PrivacyReport`.
"""

from __future__ import annotations

from idaudit.memorization._columns import (
    FLAGGING_COHORT_COLUMNS,
    FLAGGING_COLUMNS,
    NNAA_COLUMNS,
)
from idaudit.memorization._flagging import (
    DEFAULT_PERCENTILES,
    FLAGGING_STATUS,
    FlaggingResult,
    check_percentiles,
    flagging,
    flagging_from_distances,
)
from idaudit.memorization._neighbours import nearest_neighbour_distances, pairwise_distances
from idaudit.memorization._nnaa import (
    MIN_INTERVAL_SIZE,
    NNAA_STATUS,
    NNAA_TEST_STATUS,
    NNAAResult,
    cap_indices,
    nnaa,
    nnaa_from_distances,
)
from idaudit.memorization._power import (
    flagging_smallest_p,
    nnaa_smallest_p,
    power_notes,
    smallest_p_value,
    unresolved_percentiles,
)
from idaudit.memorization._sanity import (
    SANITY_STATUS,
    SanityResult,
    metric_sanity,
    subjects_from_names,
)
from idaudit.memorization._subjects import read_subject_map, subjects_for_files

__all__ = [
    "DEFAULT_PERCENTILES",
    "FLAGGING_COHORT_COLUMNS",
    "FLAGGING_COLUMNS",
    "FLAGGING_STATUS",
    "MIN_INTERVAL_SIZE",
    "NNAA_COLUMNS",
    "NNAA_STATUS",
    "NNAA_TEST_STATUS",
    "SANITY_STATUS",
    "FlaggingResult",
    "NNAAResult",
    "SanityResult",
    "cap_indices",
    "check_percentiles",
    "flagging",
    "flagging_from_distances",
    "flagging_smallest_p",
    "metric_sanity",
    "nearest_neighbour_distances",
    "nnaa",
    "nnaa_from_distances",
    "nnaa_smallest_p",
    "pairwise_distances",
    "power_notes",
    "read_subject_map",
    "smallest_p_value",
    "subjects_for_files",
    "subjects_from_names",
    "unresolved_percentiles",
]
