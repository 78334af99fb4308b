"""Independent reference computations shared by several test modules (never idaudit code)."""

from __future__ import annotations

import math

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
