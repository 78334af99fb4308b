"""TargetModel (idaudit.inversion._target) on the real chain on CPU: DCGAN → fixed warp → torch
port of dlib (shipped weights only; the ``chain`` fixture is in conftest.py)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch

pytestmark = pytest.mark.faces


def test_gradients_reach_the_latent_through_dcgan_warp_and_dlib(chain: dict[str, Any]) -> None:
    from idaudit.inversion._target import TargetModel

    model = TargetModel(chain["generator"], chain["encoder"], chain["warp"])
    z = chain["generator"].sample_latents(2, rng=0).requires_grad_(True)
    target = torch.nn.functional.normalize(torch.ones(2, 128), dim=1)
    model.similarity(z, target).sum().backward()
    assert z.grad is not None
    assert torch.isfinite(z.grad).all()
    assert z.grad.abs().sum() > 0
    # directional derivative against a central difference (the chain is smooth here)
    v = torch.nn.functional.normalize(
        torch.randn(2, 100, generator=torch.Generator().manual_seed(0)), dim=1
    )
    h = 1e-2
    with torch.no_grad():
        fp = model.similarity(z + h * v, target)
        fm = model.similarity(z - h * v, target)
    numeric = ((fp - fm) / (2 * h)).numpy()
    analytic = (z.grad * v).sum(dim=1).numpy()
    np.testing.assert_allclose(analytic, numeric, rtol=0.1, atol=2e-3)
