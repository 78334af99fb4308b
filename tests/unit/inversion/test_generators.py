from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

pytest.importorskip("diffusers")
from diffusers import DDIMScheduler, UNet2DModel

from idaudit.exceptions import InvalidInputError, MissingWeightsError
from idaudit.inversion import DiffusionGenerator, LatentGenerator


def _tiny_unet(seed: int = 0) -> UNet2DModel:
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return UNet2DModel(
            sample_size=32,
            block_out_channels=(8, 16),
            layers_per_block=1,
            norm_num_groups=4,
            down_block_types=("DownBlock2D", "AttnDownBlock2D"),
            up_block_types=("AttnUpBlock2D", "UpBlock2D"),
        )


def _scheduler() -> DDIMScheduler:
    return DDIMScheduler(beta_schedule="linear", beta_start=1e-4, beta_end=0.02, clip_sample=True)


def test_ddim_sampler_equals_diffusers_own_loop() -> None:
    unet = _tiny_unet()
    gen = DiffusionGenerator(unet, _scheduler(), num_inference_steps=3)
    assert isinstance(gen, LatentGenerator)
    x_t = torch.randn(2, 3, 32, 32, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        ours = gen.forward(x_t)
        ref_sched = _scheduler()
        ref_sched.set_timesteps(3)
        x = x_t.clone()
        for t in ref_sched.timesteps:
            eps = unet(x, t).sample
            x = ref_sched.step(eps, t, x, eta=0.0).prev_sample
        ref = ((x + 1) / 2).clamp(0, 1)
    torch.testing.assert_close(ours, ref, atol=1e-5, rtol=1e-5)


def test_gradients_reach_the_latent_through_ddim_with_and_without_checkpointing() -> None:
    x_t = torch.randn(1, 3, 32, 32, generator=torch.Generator().manual_seed(2))
    grads = []
    for ckpt in (True, False):
        sched = DDIMScheduler(clip_sample=False)  # clipping would cut gradients where it binds
        gen = DiffusionGenerator(_tiny_unet(), sched, num_inference_steps=2, checkpointing=ckpt)
        x = x_t.clone().requires_grad_(True)
        gen.forward(x).mean().backward()
        assert x.grad is not None
        grads.append(x.grad.clone())
    assert torch.isfinite(grads[0]).all()
    assert grads[0].abs().sum() > 0
    torch.testing.assert_close(grads[0], grads[1], atol=1e-6, rtol=1e-5)
    # the same gradient through diffusers' own scheduler loop (an independent implementation)
    unet = _tiny_unet()
    sched = DDIMScheduler(clip_sample=False)
    sched.set_timesteps(2)
    x = x_t.clone().requires_grad_(True)
    y = x
    for t in sched.timesteps:
        y = sched.step(unet(y, t).sample, t, y, eta=0.0).prev_sample
    ((y + 1) / 2).clamp(0, 1).mean().backward()
    assert x.grad is not None
    torch.testing.assert_close(grads[1], x.grad, atol=1e-6, rtol=1e-4)


def test_shortcut_gradient_is_diffmis_closed_form() -> None:
    x_t = torch.randn(2, 3, 32, 32, generator=torch.Generator().manual_seed(4)) * 2.0
    w = torch.randn(2, 3, 32, 32, generator=torch.Generator().manual_seed(5))
    full = DiffusionGenerator(_tiny_unet(), _scheduler(), num_inference_steps=3)
    short = DiffusionGenerator(_tiny_unet(), _scheduler(), 3, gradient="shortcut")
    x = x_t.clone().requires_grad_(True)
    image = short.forward(x)  # (2, 3, 32, 32)
    (image * w).sum().backward()  # L = <w, x̂>: ∂L/∂x̂ = w
    with torch.no_grad():
        ref_image = full.forward(x_t)
    torch.testing.assert_close(image.detach(), ref_image, atol=0.0, rtol=0.0)  # same values
    inside = (ref_image > 0) & (ref_image < 1)
    assert 0 < int(inside.sum()) < inside.numel()  # clip_sample: both branches are exercised
    assert x.grad is not None
    # exactly 0.5 · ∂L/∂x̂ · 1[0 < x̂ < 1]: no UNet Jacobian
    torch.testing.assert_close(x.grad, 0.5 * w * inside, atol=0.0, rtol=0.0)
    xf = x_t.clone().requires_grad_(True)
    (full.forward(xf) * w).sum().backward()
    assert xf.grad is not None
    assert not torch.allclose(xf.grad, x.grad)  # the full gradient is another quantity
    with pytest.raises(InvalidInputError, match="`gradient` must be 'full', 'shortcut' or"):
        DiffusionGenerator(_tiny_unet(), _scheduler(), 2, gradient="exact")  # type: ignore[arg-type]


def test_from_pretrained_loads_a_local_folder_once_and_never_downloads(tmp_path: Path) -> None:
    unet = _tiny_unet(4)
    unet.save_pretrained(tmp_path)
    _scheduler().save_pretrained(tmp_path)
    gen = DiffusionGenerator.from_pretrained(tmp_path, num_inference_steps=2)
    ref = DiffusionGenerator(unet, _scheduler(), num_inference_steps=2)
    x = torch.randn(1, 3, 32, 32, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        torch.testing.assert_close(gen.forward(x), ref.forward(x))
    with pytest.raises(MissingWeightsError, match="google/ddpm-celebahq-256"):
        DiffusionGenerator.from_pretrained(tmp_path / "absent")


@pytest.mark.slow
def test_ddpm_celebahq_config_has_the_published_parameter_count() -> None:
    # Ho et al. (2020), Appendix B: "our LSUN and CelebA-HQ models have 114 million parameters"
    gen = DiffusionGenerator.from_config("ddpm-celebahq-256", num_inference_steps=2)
    n = sum(p.numel() for p in gen.unet.parameters())
    assert n == pytest.approx(114e6, rel=0.01)
    assert gen.latent_shape == (3, 256, 256)
    assert gen.default_radius["l2"] == pytest.approx(35.0)


def test_bad_generator_inputs() -> None:
    gen = DiffusionGenerator(_tiny_unet(), _scheduler(), num_inference_steps=1)
    with pytest.raises(InvalidInputError, match=r"\(n, 3, 32, 32\)"):
        gen.forward(torch.zeros(1, 3, 16, 16))
    with pytest.raises(InvalidInputError, match="`num_inference_steps` must be >= 1"):
        DiffusionGenerator(_tiny_unet(), _scheduler(), num_inference_steps=0)
    with pytest.raises(InvalidInputError, match="`name`"):
        DiffusionGenerator.from_config("ddpm-cifar10")
    with pytest.raises(TypeError, match="`scheduler`"):
        DiffusionGenerator(_tiny_unet(), object())
    assert np.isclose(gen.default_radius["l2"], 35.0 * np.sqrt(3 * 32 * 32 / (3 * 256 * 256)))
