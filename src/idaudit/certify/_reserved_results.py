"""The reserved-test certifier's result Datasets: certificates and the candidate ranking."""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt
import xarray as xr

from idaudit._results import CERTIFIED_STATUSES, Status, pair_dataset, variable
from idaudit.certify._reserved_select import _Plan
from idaudit.data import EmbeddingSet

FloatArray = npt.NDArray[np.float64]


_CERT_VARS: dict[str, tuple[str, Status]] = {
    "n_dev_a": ("development rows of identity_a", "descriptive"),
    "n_dev_b": ("development rows of identity_b", "descriptive"),
    "n_test_a": ("reserved test rows of identity_a", "descriptive"),
    "n_test_b": ("reserved test rows of identity_b", "descriptive"),
    "test_fp": ("test rows of identity_a predicted as identity_b", "descriptive"),
    "test_fn": ("test rows of identity_b predicted as identity_a", "descriptive"),
    "test_fpr": ("test false-positive rate", "sample_estimate"),
    "test_fnr": ("test false-negative rate", "sample_estimate"),
    "ufpr": ("one-sided Clopper-Pearson upper bound on the FPR", "certified_upper_bound"),
    "ufnr": ("one-sided Clopper-Pearson upper bound on the FNR", "certified_upper_bound"),
    "test_auc": ("ROC AUC of the fixed classifier on the test split", "sample_estimate"),
    "epsilon_lb": ("certified lower bound on epsilon (Eq. 16)", "certified_lower_bound"),
    # what an error-free test certifies at these test sizes and level: no data can certify more
    "epsilon_lb_ceiling": (
        "largest epsilon_lb these test sizes can certify (zero test errors)",
        "descriptive",
    ),
    "threshold": ("score threshold chosen on development data", "descriptive"),
    "direction": ("+1: predict identity_b when score >= threshold; -1: when <=", "descriptive"),
    "dev_auc": ("development out-of-fold ROC AUC", "diagnostic"),
    "dev_expected_epsilon": ("development-expected certified bound", "diagnostic"),
    "rank": ("position in the development ranking (0 = best)", "descriptive"),
}


#: Long names of the reported point's variables when every test threshold is certified.
_CURVE_LONG_NAMES = {
    "threshold": "test threshold whose certified point gives the most at delta ({} bounds)",
    "ufpr": "simultaneous upper bound on the FPR at that threshold ({} over test counts)",
    "ufnr": "simultaneous upper bound on the FNR at that threshold ({} over test counts)",
}


def _certificates_dataset(
    rows: list[dict[str, Any]], attrs: dict[str, Any], n_simultaneous: int, deltas: FloatArray
) -> xr.Dataset:
    """Build the certificates; each certified variable says how many of its values hold jointly."""

    def joint(status: Status) -> dict[str, Any]:
        return {"n_simultaneous": n_simultaneous} if status in CERTIFIED_STATUSES else {}

    ds = pair_dataset(
        [(r["identity_a"], r["identity_b"]) for r in rows],
        {
            name: variable("pair", [r[name] for r in rows], long_name=ln, status=st, **joint(st))
            for name, (ln, st) in _CERT_VARS.items()
        },
        n_a=[r["n_a"] for r in rows],
        n_b=[r["n_b"] for r in rows],
        attrs=attrs,
    )
    curves = np.stack([r["epsilon_lb_curve"] for r in rows]) if rows else np.zeros((0, 0))
    ds["epsilon_lb_curve"] = variable(
        ("pair", "delta"),
        curves.reshape(len(rows), deltas.size),
        long_name="certified lower bound on epsilon at each delta (all deltas at once)",
        status="certified_lower_bound",
        **joint("certified_lower_bound"),
    )
    ds = ds.assign_coords(delta=("delta", deltas, {"long_name": "delta of epsilon_lb_curve"}))
    return ds


def _candidates_dataset(
    candidates: list[tuple[Any, Any]],
    plans: list[_Plan],
    order: list[int],
    chosen: list[int],
    es: EmbeddingSet,
    dev: EmbeddingSet,
    test: EmbeddingSet,
    attrs: dict[str, Any],
) -> xr.Dataset:
    rank = np.empty(len(candidates), dtype=np.int64)
    rank[order] = np.arange(len(candidates))
    chosen_set = set(chosen)

    def var(values: Any, long_name: str, status: Status = "diagnostic") -> xr.Variable:
        return variable("pair", values, long_name=long_name, status=status)

    a_labels = [a for a, _ in candidates]
    b_labels = [b for _, b in candidates]
    return pair_dataset(
        candidates,
        {
            "dev_expected_epsilon": var(
                [p.expected_epsilon for p in plans], "development-expected certified bound"
            ),
            "dev_auc": var([p.auc for p in plans], "development out-of-fold ROC AUC"),
            "dev_margin": var([p.margin for p in plans], "standardised development score margin"),
            "rank": var(rank, "position in the development ranking (0 = best)", "descriptive"),
            "selected": var(
                [i in chosen_set for i in range(len(candidates))],
                "selected for certification",
                "descriptive",
            ),
            "n_dev_a": var([dev.counts[a] for a in a_labels], "development rows", "descriptive"),
            "n_dev_b": var([dev.counts[b] for b in b_labels], "development rows", "descriptive"),
            "n_test_a": var([test.counts[a] for a in a_labels], "test rows", "descriptive"),
            "n_test_b": var([test.counts[b] for b in b_labels], "test rows", "descriptive"),
        },
        n_a=[es.counts[a] for a in a_labels],
        n_b=[es.counts[b] for b in b_labels],
        attrs={**attrs, "status": "diagnostic"},
    )
