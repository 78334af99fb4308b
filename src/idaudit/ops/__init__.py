"""Batched torch kernels behind the audits: many pairs, permutations and folds per call.

Every function takes float64 tensors that already live on the target device (``"cpu"`` or
``"cuda"``) and returns tensors on the same device; none imports anything else from idaudit.
Pairs of different sizes share one call through zero padding plus 0/1 masks
(:class:`PairBatch`), so the masked sums are exact and a pair's result does not depend on the
other pairs in the batch. On the CPU the KDE sums (:func:`kde_on_grid`, :func:`log_ratio_max`)
run in compiled kernels (numba, :mod:`idaudit.ops._kde_cpu`), row by row without the GIL; the
torch kernels, exact to the same rounding, run on CUDA.

==============================  ===============================================================
:class:`PairBatch`,             pairs stacked as one padded tensor ``(pairs, n_max, d)``
:func:`pack_pairs`
:func:`pairwise_sq_distances`   squared Euclidean distances, batched (also from a Gram matrix)
:func:`median_heuristic`        median distance over distinct pairs of each pooled sample
:func:`rbf_kernel`              Gaussian RBF kernel matrices
:func:`mmd2_from_kernel`        unbiased MMD² (seed 000, Eq. 7)
:func:`mmd2_permutation_test`   permutation p-values, permutations as matrix products
:func:`kde_bandwidth`           Silverman bandwidths (scipy's, and the robust variant)
:func:`kde_on_grid`             1-D Gaussian KDEs on uniform grids
:func:`log_ratio_max`           KDE-LR's per-dimension log-ratio maximum (Eq. 10-11)
:func:`fit_kernel_logistic`     many L2 logistic regressions by Newton in dual form
==============================  ===============================================================
"""

from __future__ import annotations

from idaudit.ops._kde import kde_bandwidth, kde_on_grid, log_ratio_max
from idaudit.ops._logistic import KernelLogisticFit, fit_kernel_logistic
from idaudit.ops._mmd import (
    median_heuristic,
    mmd2_from_kernel,
    mmd2_permutation_test,
    pairwise_sq_distances,
    rbf_kernel,
    sq_distances_from_gram,
)
from idaudit.ops._pack import PairBatch, pack_pairs

__all__ = [
    "KernelLogisticFit",
    "PairBatch",
    "fit_kernel_logistic",
    "kde_bandwidth",
    "kde_on_grid",
    "log_ratio_max",
    "median_heuristic",
    "mmd2_from_kernel",
    "mmd2_permutation_test",
    "pack_pairs",
    "pairwise_sq_distances",
    "rbf_kernel",
    "sq_distances_from_gram",
]
