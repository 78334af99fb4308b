"""DDIM on CUDA gives the CPU's images and gradients (skipped without CUDA)."""

from __future__ import annotations

import pytest
import torch

pytestmark = pytest.mark.gpu


def test_ddim_on_cuda_matches_cpu() -> None:
    diffusers = pytest.importorskip("diffusers")
    from idaudit.inversion import DiffusionGenerator

    torch.manual_seed(0)
    unet = diffusers.UNet2DModel(
        sample_size=32,
        block_out_channels=(8, 16),
        layers_per_block=1,
        norm_num_groups=4,
        down_block_types=("DownBlock2D", "DownBlock2D"),
        up_block_types=("UpBlock2D", "UpBlock2D"),
    )
    x = torch.randn(2, 3, 32, 32)
    out = {}
    for dev in ("cpu", "cuda"):
        gen = DiffusionGenerator(unet, diffusers.DDIMScheduler(clip_sample=False), 3, device=dev)
        xt = x.to(dev).requires_grad_(True)
        img = gen.forward(xt)
        img.mean().backward()
        out[dev] = (img.detach().cpu(), xt.grad.cpu())
    torch.testing.assert_close(out["cuda"][0], out["cpu"][0], atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(out["cuda"][1], out["cpu"][1], atol=1e-5, rtol=1e-3)
