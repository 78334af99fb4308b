"""The batched D'Agostino K² normality test (idaudit.inversion._normality) against scipy."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.stats
import torch

from idaudit.exceptions import InvalidInputError
from idaudit.inversion import dagostino_k2


@pytest.mark.parametrize("n", [8, 20, 100, 3 * 16 * 16])
def test_batched_k2_equals_scipy_normaltest(n: int) -> None:
    g = torch.Generator().manual_seed(n)
    x = torch.randn(64, n, generator=g, dtype=torch.float64)
    x[:8] = x[:8] ** 3  # heavy tails
    x[8:16] = x[8:16].abs()  # skewed
    stat, p = dagostino_k2(x)
    with np.errstate(all="ignore"):
        import warnings

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # scipy warns that kurtosistest wants n >= 20
            ref = scipy.stats.normaltest(x.numpy(), axis=1)
    np.testing.assert_allclose(stat.numpy(), ref.statistic, rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(p.numpy(), ref.pvalue, rtol=1e-6, atol=1e-12)


def test_k2_accepts_latent_shaped_rows_and_refuses_short_ones() -> None:
    x = torch.randn(3, 3, 4, 4, generator=torch.Generator().manual_seed(0))
    _, p = dagostino_k2(x)
    ref = scipy.stats.normaltest(x.reshape(3, -1).double().numpy(), axis=1).pvalue
    np.testing.assert_allclose(p.numpy(), ref, rtol=1e-6)
    with pytest.raises(InvalidInputError, match="n >= 8"):
        dagostino_k2(torch.randn(2, 7))
