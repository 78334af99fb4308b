"""Independent reference computations shared by several test modules (never idaudit code)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np


def loop_mmd2(x: np.ndarray, y: np.ndarray, sigma: float) -> float:
    """Unbiased MMD² of seed 000, Eq. 7, term by term with the RBF kernel at ``sigma``."""

    def k(u: np.ndarray, v: np.ndarray) -> float:
        return math.exp(-float(np.sum((u - v) ** 2)) / (2 * sigma**2))

    n, m = len(x), len(y)
    s_xx = sum(k(x[i], x[j]) for i in range(n) for j in range(n) if i != j)
    s_yy = sum(k(y[i], y[j]) for i in range(m) for j in range(m) if i != j)
    s_xy = sum(k(x[i], y[j]) for i in range(n) for j in range(m))
    return s_xx / (n * (n - 1)) + s_yy / (m * (m - 1)) - 2 * s_xy / (n * m)


def median_mmd(x: np.ndarray, y: np.ndarray) -> float:
    """MMD = sqrt(max(MMD², 0)) by explicit sums, RBF bandwidth = median pooled distance."""
    z = np.vstack([x, y])
    d = np.sqrt(((z[:, None, :] - z[None, :, :]) ** 2).sum(-1))
    sigma = np.median(d[np.triu_indices(len(z), 1)])
    k = np.exp(-(d**2) / (2 * sigma**2))
    n, m = len(x), len(y)
    kxx, kyy, kxy = k[:n, :n], k[n:, n:], k[:n, n:]
    mmd2 = (
        (kxx.sum() - np.trace(kxx)) / (n * (n - 1))
        + (kyy.sum() - np.trace(kyy)) / (m * (m - 1))
        - 2 * kxy.mean()
    )
    return float(np.sqrt(max(mmd2, 0.0)))


def summary_reference(full: Any, var: str, quantiles: Any) -> dict[str, Any]:
    """What ``keep="summary"`` must hold for one per-pair variable, by NumPy and pandas.

    ``full`` is the per-pair Dataset of the same call. The maximum and the first pair in pair
    order reaching it; how many pairs reach it and how many are +inf; the exact order
    statistics ``x_(ceil(q n))`` (``x_(1)`` at ``q = 0``) at ``quantiles``; and per identity
    its largest value over its pairs with the first partner reaching it.
    """
    import pandas as pd

    frame = full[["identity_a", "identity_b", var]].to_dataframe().reset_index(drop=True)
    values = frame[var]
    top = values.max()
    first = values.index[values == top][0]
    long = pd.concat(
        [
            pd.DataFrame({"who": frame["identity_a"], "partner": frame["identity_b"]}),
            pd.DataFrame({"who": frame["identity_b"], "partner": frame["identity_a"]}),
        ]
    )
    long["v"] = np.r_[values.to_numpy(), values.to_numpy()]
    long["order"] = np.r_[frame.index.to_numpy(), frame.index.to_numpy()]
    best = long.sort_values(["v", "order"], ascending=[False, True]).groupby("who").first()
    ordered = np.sort(values.to_numpy())
    n = ordered.size
    return {
        "max": top,
        "argmax_identity_a": frame["identity_a"][first],
        "argmax_identity_b": frame["identity_b"][first],
        "n_at_max": int((values == top).sum()),
        "n_inf": int(np.isposinf(values).sum()),
        "quantile": [ordered[max(int(np.ceil(q * n)), 1) - 1] for q in quantiles],
        "identity": best.index.to_numpy(),
        "worst": best["v"].to_numpy(),
        "worst_partner": best["partner"].to_numpy(),
    }


def assert_summary_matches(summ: Any, full: Any, var: str, quantiles: Any) -> None:
    """Assert that a ``keep="summary"`` Dataset holds :func:`summary_reference` for ``var``."""
    want = summary_reference(full, var, quantiles)
    assert float(summ[f"{var}_max"]) == want["max"], var
    for key in ("argmax_identity_a", "argmax_identity_b", "n_at_max", "n_inf"):
        assert summ[f"{var}_{key}"].item() == want[key], (var, key)
    np.testing.assert_array_equal(summ[f"{var}_quantile"].values, want["quantile"])
    np.testing.assert_array_equal(summ["identity"].values, want["identity"])
    np.testing.assert_array_equal(summ[f"{var}_worst"].values, want["worst"])
    np.testing.assert_array_equal(summ[f"{var}_worst_partner"].values, want["worst_partner"])
