"""Each row of docs/inversion.md's "Departures from the seed and its reference code" table.

Every test gives the arguments the table names for the reference behaviour and checks that
they really produce it, against an independent computation (scipy, PIL, a closed form, or the
published loop written out here).
"""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np
import pytest
import torch
from diffusers import DDIMScheduler, UNet2DModel
from PIL import Image
from scipy import stats

from idaudit.exceptions import InvalidInputError
from idaudit.inversion import (
    APGD,
    DiffusionGenerator,
    FrameWarp,
    GreedyPixel,
    LatentBank,
    RankedAdversary,
)
from idaudit.inversion._attacks import apgd_checkpoints
from toys import LinearEncoder, LinearGenerator, MeanDetector


def _cosine_to(c: torch.Tensor, seen: list[torch.Tensor] | None = None) -> Any:
    def f(x: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
        if seen is not None:
            seen.append(x.detach().clone())
        return torch.nn.functional.cosine_similarity(x, c[rows], dim=1)

    return f


# -- row 1: APGD's start -------------------------------------------------------------------
def test_apgd_random_init_starts_on_the_sphere_and_code_init_at_the_code() -> None:
    g = torch.Generator().manual_seed(0)
    x0, c = torch.randn(5, 30, generator=g), torch.randn(5, 30, generator=g)
    eps = 0.7
    seen: list[torch.Tensor] = []
    APGD(eps=eps, t_max=3, init="random").run(_cosine_to(c, seen), x0, row_seeds=range(5))
    dist = (seen[0] - x0).norm(dim=1)  # the first query is the start
    np.testing.assert_allclose(dist.numpy(), eps, rtol=1e-5)  # on the sphere, not inside
    again: list[torch.Tensor] = []
    APGD(eps=eps, t_max=3).run(_cosine_to(c, again), x0, row_seeds=range(5))
    torch.testing.assert_close(again[0], seen[0], rtol=0, atol=0)  # seeded
    # the directions are isotropic: the mean of 400 random unit vectors of R^30 has norm
    # about 1/sqrt(400) = 0.05; a biased start (one direction) would give up to 1
    many: list[torch.Tensor] = []
    x_many = torch.zeros(400, 30)
    APGD(eps=1.0, t_max=1).run(_cosine_to(torch.ones(400, 30), many), x_many, row_seeds=range(400))
    assert float(many[0].mean(dim=0).norm()) < 0.1
    at_code: list[torch.Tensor] = []
    APGD(eps=eps, t_max=3, init="code").run(_cosine_to(c, at_code), x0)
    torch.testing.assert_close(at_code[0], x0, rtol=0, atol=0)
    # L∞: on the cube's surface, as Croce's code (autopgd_base.py: t = 2·rand − 1, then
    # x + ε·t / max|t|), written out here from the same seeded draw
    cube: list[torch.Tensor] = []
    APGD(norm="linf", eps=eps, t_max=1).run(_cosine_to(c, cube), x0, row_seeds=range(5))
    for r in range(5):
        seed = int(np.random.SeedSequence([r, 0]).generate_state(1)[0] >> 1)  # (row, restart 0)
        t = 2.0 * torch.rand(x0[r].shape, generator=torch.Generator().manual_seed(seed)) - 1.0
        croce = x0[r] + eps * t / t.abs().max()
        torch.testing.assert_close(cube[0][r], croce, rtol=0.0, atol=1e-6)
    d = (cube[0] - x0).abs().amax(dim=1)  # every row's L∞ distance is ε: on the sphere
    np.testing.assert_allclose(d.numpy(), eps, rtol=1e-5)


def test_apgd_restarts_keep_the_best_and_count_every_query() -> None:
    g = torch.Generator().manual_seed(1)
    x0, w = torch.randn(4, 12, generator=g), torch.randn(12, 12, generator=g)

    def bumpy(x: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
        return torch.sin(3 * x @ w).mean(dim=1)

    out = APGD(eps=0.5, t_max=10, n_restarts=3).run(bumpy, x0, row_seeds=[1, 2, 3, 4])
    assert (out.queries == 3 * 11).all()
    assert all(len(h) == 33 for h in out.history)
    singles = []
    for r in range(3):  # restart r of a row is its own seeded run
        seeds = [
            int(np.random.SeedSequence([s, r]).generate_state(1)[0] >> 1) for s in (1, 2, 3, 4)
        ]
        one = APGD(eps=0.5, t_max=10, n_restarts=1)
        singles.append(one._run_once(bumpy, x0, _starts(x0, 0.5, seeds), float("inf")).values)
    np.testing.assert_allclose(out.values.numpy(), torch.stack(singles).amax(dim=0).numpy())
    with pytest.raises(InvalidInputError, match="`n_restarts` > 1 needs `init='random'`"):
        APGD(n_restarts=2, init="code").run(bumpy, x0)


def _starts(x0: torch.Tensor, eps: float, seeds: list[int]) -> torch.Tensor:
    from idaudit.inversion._attacks import random_starts

    return random_starts(x0, eps, "l2", seeds)


# -- row 7: APGD's checkpoints ---------------------------------------------------------------
def test_code_checkpoints_follow_croces_integer_recurrence() -> None:
    # autopgd_base.py: k = max(int(.22 n), 1); after each check k = max(k - max(int(.03 n), 1),
    # max(int(.06 n), 1)); written out by hand for n = 99: 21, +19, +17, +15, +13, +11
    assert apgd_checkpoints(99, "code") == [21, 40, 57, 72, 85, 96]
    assert apgd_checkpoints(99) == [0, 22, 41, 57, 70, 80, 87, 93, 99]
    for n in (100, 200, 1000):  # the two rules agree there
        assert apgd_checkpoints(n, "code") == apgd_checkpoints(n)[1:]


def test_code_checkpoints_halve_at_exactly_rho() -> None:
    # 11 of the first 22 steps improve; rho = 0.5: "code" (<=) halves at 22, "paper" (<) not
    v = np.zeros(101)  # first checkpoint at 22 under both rules (n = 100)
    v[1:23:2] = np.arange(1, 12)  # calls 1, 3, ..., 21 improve on the previous
    v[2:23:2] = 0.0

    def run(rule: str) -> list[float]:
        seen: list[float] = []

        def f(x: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
            seen.append(float(x.detach()[0, 0]))
            pull = -(x[:, 0] - 0.1).abs()
            return torch.as_tensor(v[len(seen) - 1], dtype=x.dtype) + pull - pull.detach()

        APGD(eps=1.0, t_max=100, rho=0.5, init="code", checkpoints=rule).run(  # type: ignore[arg-type]
            f, torch.zeros(1, 1, dtype=torch.float64)
        )
        return seen

    paper, code = run("paper"), run("code")
    assert paper[:23] == code[:23]
    # "code" restarts at the best point (call 21) with the halved step: the next query differs
    assert paper[23] != code[23]


def _croce_apgd_l2(f: Any, x: torch.Tensor, eps: float, n_iter: int, rho: float = 0.75) -> list:
    """Croce's ``attack_single_run`` (L2, one row, maximising, start at ``x``), written out.

    Returns every point queried. The oscillation count reads a record of the iterates'
    values (``loss_steps``) that a reset to the best point leaves alone, and whose entry
    before the first iterate is the zero the record was filled with.
    """

    def unit(v: torch.Tensor) -> torch.Tensor:
        return v / (v.norm() + 1e-12)

    def ball(v: torch.Tensor) -> torch.Tensor:
        return x + unit(v - x) * min(eps, float((v - x).norm()))

    k = max(int(0.22 * n_iter), 1)
    k_min, k_decr = max(int(0.06 * n_iter), 1), max(int(0.03 * n_iter), 1)
    seen = [x.clone()]
    value, grad = f(x)
    x_adv, x_old, x_best, g_best, best = x.clone(), x.clone(), x.clone(), grad, value
    loss_steps = np.zeros(n_iter)
    step, counter, best_last, reduced_last = 2.0 * eps, 0, best, True
    for i in range(n_iter):
        momentum, x_old = x_adv - x_old, x_adv.clone()
        a = 0.75 if i > 0 else 1.0
        z = ball(x_adv + step * unit(grad))
        x_adv = ball(x_adv + (z - x_adv) * a + momentum * (1 - a))
        seen.append(x_adv.clone())
        value, grad = f(x_adv)
        loss_steps[i] = value
        if value > best:
            x_best, g_best, best = x_adv.clone(), grad, value
        counter += 1
        if counter == k:
            ups = sum(loss_steps[i - c] > loss_steps[i - c - 1] for c in range(k))  # [-1]: 0
            halve = ups <= k * rho or (not reduced_last and best_last >= best)
            reduced_last, best_last = halve, best
            if halve:
                step, x_adv, grad = step / 2.0, x_best.clone(), g_best
            k, counter = max(k - k_decr, k_min), 0
    return seen


@pytest.mark.parametrize("n_iter", [100, 99, 37])
@pytest.mark.parametrize("case", ["reset", "first_window", "smooth"])
def test_code_checkpoints_count_oscillations_as_croce_does(case: str, n_iter: int) -> None:
    v = np.zeros(101)
    if case == "reset":  # a halving at 22 resets to the best; Croce then compares with v[22]
        v[5], v[22] = 10.0, 0.0
        steps = [0.01] * 15 + [-0.005] * 4
        v[23:42] = np.cumsum(steps)
        v[42:] = np.linspace(0.5, 0.6, 59)
    elif case == "first_window":  # Croce's first comparison is v[1] > 0, not v[1] > v[0]
        v[0], v[1] = 0.5, 0.3
        v[2:23] = 0.3 + np.cumsum([0.01] * 16 + [-0.001] * 5)
        v[23:] = np.linspace(1.0, 2.0, 78)
    w = torch.randn(20, 20, generator=torch.Generator().manual_seed(0), dtype=torch.float64)

    def value(x: torch.Tensor, calls: int) -> torch.Tensor:  # (B,) values of (B, d) points
        if case == "smooth":
            return torch.sin(2 * x @ w).mean(dim=1) + 0.3 * torch.cos(3 * x).mean(dim=1)
        pull = -(x[:, 0] - 0.1).abs()  # a gradient that moves x; the values are scripted
        return torch.as_tensor(v[calls], dtype=x.dtype) + pull - pull.detach()

    d = 20 if case == "smooth" else 1
    x0 = torch.randn(1, d, generator=torch.Generator().manual_seed(n_iter), dtype=torch.float64)
    ref_calls: list[int] = []

    def ref_f(x: torch.Tensor) -> tuple[float, torch.Tensor]:
        x = x.detach().requires_grad_(True)
        f = value(x, len(ref_calls))
        ref_calls.append(1)
        (g,) = torch.autograd.grad(f.sum(), x)
        return float(f.detach()[0]), g

    reference = _croce_apgd_l2(ref_f, x0, 1.0, n_iter)
    ours: list[torch.Tensor] = []

    def f(x: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
        ours.append(x.detach().clone())
        return value(x, len(ours) - 1)

    APGD(eps=1.0, t_max=n_iter, init="code", checkpoints="code").run(f, x0)
    assert len(ours) == len(reference)
    # scripted values: the same points to rounding; on the smooth objective rounding
    # (Croce's +1e-12 norms) grows to 5e-5 over 100 steps, far below a step (>= 2/2^8)
    tol = 1e-3 if case == "smooth" else 1e-9
    torch.testing.assert_close(torch.cat(ours), torch.cat(reference), atol=tol, rtol=0.0)


# -- row 8: GreedyPixel's last visit -----------------------------------------------------------
def _published_greedy(f: Any, x0: torch.Tensor, order: list[int], eps: float, t_max: int) -> Any:
    """The authors' loop on one row, written out: whole visits only, return the last iterate."""
    n_ch = x0.shape[0]
    x, spent, value = x0.clone(), 0, None
    for p in itertools.cycle(order):
        if spent + 2**n_ch > t_max:
            break
        cands = []
        for s in itertools.product((-1.0, 1.0), repeat=n_ch):
            c = x.clone()
            c[:, p] = x0[:, p] + eps * torch.tensor(s)
            cands.append(c)
        vals = [float(f(c[None])) for c in cands]
        j = int(np.argmax(vals))
        x, value = cands[j], vals[j]
        spent += len(cands)
    return x, value, spent


def test_greedypixel_skip_and_last_give_the_authors_loop() -> None:
    g = torch.Generator().manual_seed(3)
    x0 = torch.randn(1, 3, 1, 5, generator=g)  # 3 channels, 5 pixels
    target = torch.randn(1, 3, 1, 5, generator=g)

    def f(x: torch.Tensor) -> torch.Tensor:
        x = x.reshape(-1, 3, 1, 5)
        return -(x - target).square().sum(dim=(1, 2, 3)) + torch.sin(5 * x).sum(dim=(1, 2, 3))

    priority = torch.arange(15.0).reshape(1, 3, 1, 5)  # order: pixels 4, 3, 2, 1, 0
    t_max = 8 * 7 + 5  # 7 whole visits and 5 queries left
    out = GreedyPixel(eps=0.6, t_max=t_max, last_visit="skip", keep="last").run(
        lambda x, rows: f(x), x0, f(x0), priority
    )
    ref_x, ref_v, spent = _published_greedy(f, x0[0].reshape(3, 5), [4, 3, 2, 1, 0], 0.6, t_max)
    assert spent == 56
    assert int(out.queries[0]) == 56
    torch.testing.assert_close(out.latents[0].reshape(3, 5), ref_x, rtol=0, atol=0)
    assert float(out.values[0]) == pytest.approx(ref_v, rel=1e-6)
    default = GreedyPixel(eps=0.6, t_max=t_max).run(lambda x, rows: f(x), x0, f(x0), priority)
    assert int(default.queries[0]) == t_max  # the partial visit spends the budget exactly
    assert float(default.values[0]) >= float(out.values[0])  # best seen >= last iterate


# -- rows 2 and 3: radius per encoder, black-box defaults --------------------------------------
class _ImageLatentGenerator:
    """Cheap generator of image-shaped latents ``(3, s, s)`` → 8×8 images."""

    name = "image-latent-toy"
    image_size = 8
    device = torch.device("cpu")

    def __init__(self, side: int) -> None:
        self.latent_shape = (3, side, side)
        self.seed_radius_scale = float(np.sqrt(3 * side * side / (3 * 256 * 256)))
        self.default_radius = {"l2": 35.0 * self.seed_radius_scale, "linf": 0.15}

    def forward(self, latents: torch.Tensor) -> torch.Tensor:
        pooled = torch.nn.functional.adaptive_avg_pool2d(latents, 8)
        return torch.sigmoid(pooled)


class _FaceNetLike(LinearEncoder):
    seed_l2_radius = 25.0


def _image_bank(gen: _ImageLatentGenerator, n: int = 3) -> LatentBank:
    z = torch.randn((n, *gen.latent_shape), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        im = (gen.forward(z) * 255).round().to(torch.uint8).permute(0, 2, 3, 1).numpy()
    return LatentBank(z.numpy(), im, np.ones(n), np.ones(n), n, 0, 0, 0.0, 0.0, gen.name)


def test_facenet_declares_25_and_the_adversary_scales_it() -> None:
    from idaudit.faces import InceptionResnetV1Encoder

    assert InceptionResnetV1Encoder.seed_l2_radius == 25.0  # seed 002, Tab. II
    gen = _ImageLatentGenerator(256)
    bank = _image_bank(gen)
    target = np.ones((1, 6), np.float32)
    kw: dict[str, Any] = {"bank": bank, "top_n": 1, "t_max": 1, "tau_a": -1.0}
    facenet = RankedAdversary(gen, _FaceNetLike(), **kw)
    facenet.invert_many(target)
    assert facenet.settings_["eps"] == pytest.approx(25.0)
    other = RankedAdversary(gen, LinearEncoder(), **kw)
    other.invert_many(target)
    assert other.settings_["eps"] == pytest.approx(35.0)


def test_black_box_defaults_are_diffmis_budget_and_one_percent_of_pixels() -> None:
    gen = _ImageLatentGenerator(256)
    kw: dict[str, Any] = {"bank": _image_bank(gen), "top_n": 1, "attack": "greedypixel"}
    adv = RankedAdversary(gen, LinearEncoder(differentiable=False), tau_a=-1.0, **kw)
    adv.invert_many(np.ones((1, 6), np.float32))
    assert adv.settings_["query_budget"] == 10_000
    assert adv.settings_["sparsity"] == 655  # 1 % of 256 × 256, as DiffMI
    # on a small image latent the 1 % share really bounds the pixels moved: 1 % of 20² = 4
    small = _ImageLatentGenerator(20)
    enc = LinearEncoder(differentiable=False)
    bank = _image_bank(small, 2)
    run = RankedAdversary(small, enc, bank=bank, top_n=1, attack="greedypixel", t_max=8 * 12)
    res = run.invert_many(np.ones((1, 6), np.float32))[0]
    assert run.settings_["sparsity"] == 4
    moved = np.abs(res.latent - bank.latents[run.top_n_codes(np.ones(6))[0][0, 0]]) > 0
    assert moved.any(axis=0).sum() <= 4  # pixels (all channels move together)


# -- row 4: antialiased resize -----------------------------------------------------------------
def test_resize_is_antialiased_like_pil_and_spreads_the_gradient_evenly() -> None:
    rng = np.random.default_rng(0)
    im = rng.integers(0, 256, size=(256, 256, 3), dtype=np.uint8)
    ref = np.asarray(Image.fromarray(im).resize((112, 112), Image.BICUBIC), float) / 255.0
    x = torch.from_numpy(im).permute(2, 0, 1)[None].float() / 255.0
    ours = FrameWarp.resize(112)(x)[0].permute(1, 2, 0).numpy()
    # PIL filters and rounds to 8 bits: within 3 grey levels everywhere, 0.4 on average
    assert np.abs(ours - ref).max() <= 3 / 255
    assert np.abs(ours - ref).mean() <= 0.4 / 255
    plain = FrameWarp.resize(112, antialias=False)(x)[0].permute(1, 2, 0).numpy()
    assert np.abs(plain - ref).mean() > 10 * np.abs(ours - ref).mean()
    for antialias, ok in ((True, True), (False, False)):
        flat = torch.full((1, 3, 256, 256), 0.5, requires_grad=True)
        FrameWarp.resize(112, antialias=antialias)(flat).sum().backward()
        assert flat.grad is not None
        rows = flat.grad[0, 0].sum(dim=1)  # gradient mass of each source row
        even = bool((rows > 0).all()) and float(rows.max() / rows.min()) < 1.5
        assert even is ok


def test_bilinear_mode_is_diffmis_torchvision_resize() -> None:
    transforms = pytest.importorskip("torchvision.transforms")
    x = torch.rand(2, 3, 256, 256, generator=torch.Generator().manual_seed(0))
    reference = transforms.Resize((112, 112), antialias=True)(x)  # DiffMI's (bilinear default)
    ours = FrameWarp.resize(112, mode="bilinear")(x)
    torch.testing.assert_close(ours, reference, atol=1e-5, rtol=0.0)
    # the default (bicubic, idaudit's own pipeline) is a different filter
    assert float((FrameWarp.resize(112)(x) - reference).abs().mean()) > 0.005
    with pytest.raises(InvalidInputError, match="`mode` must be 'bicubic' or 'bilinear'; got"):
        FrameWarp.resize(112, mode="nearest")  # type: ignore[arg-type]


# -- row 5: the bank's normality filter -----------------------------------------------------------
def test_per_channel_normality_is_diffmis_filter() -> None:
    gen = _ImageLatentGenerator(16)
    bank = LatentBank.build(
        gen, 6, detector=MeanDetector(), tau_k=0.5, tau_d=0.0, rng=0, normality="per_channel"
    )
    assert bank.normality == "per_channel"
    for code in bank.latents.astype(np.float64):
        ch = code.reshape(3, -1)
        np.testing.assert_allclose(ch.mean(axis=1), 0.0, atol=1e-5)
        np.testing.assert_allclose(ch.std(axis=1, ddof=1), 1.0, rtol=1e-5)
        # K² is location-scale invariant: each standardised channel passed alone
        assert (stats.normaltest(ch, axis=1).pvalue >= 0.5 - 1e-6).all()
        assert stats.normaltest(code.ravel()).pvalue >= 0.5 - 1e-6
    np.testing.assert_allclose(
        bank.p_k,
        stats.normaltest(bank.latents.reshape(6, -1).astype(np.float64), axis=1).pvalue,
        rtol=1e-5,
    )
    paper = LatentBank.build(gen, 6, detector=MeanDetector(), tau_k=0.5, tau_d=0.0, rng=0)
    assert paper.normality == "code"
    # the paper's single test keeps raw draws: their channels are not standardised
    assert np.abs(paper.latents.reshape(6, 3, -1).mean(axis=2)).max() > 1e-3


# -- row 6: the shortcut gradient --------------------------------------------------------------
def _tiny_unet() -> UNet2DModel:
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        unet = UNet2DModel(
            sample_size=16,
            block_out_channels=(8, 16),
            layers_per_block=1,
            norm_num_groups=4,
            down_block_types=("DownBlock2D", "DownBlock2D"),
            up_block_types=("UpBlock2D", "UpBlock2D"),
        )
    return unet.eval().requires_grad_(False)


def _clipping_scheduler() -> DDIMScheduler:
    return DDIMScheduler(beta_schedule="linear", beta_start=1e-4, beta_end=0.02, clip_sample=True)


def _diffmi_reconstruct(unet: UNet2DModel, latents: torch.Tensor, steps: int) -> torch.Tensor:
    """DiffMI's sampling loop (attacks/diffusion.py ``reconstruct``), batch of one, written out.

    A clone of the latents is overwritten step by step under ``no_grad``; the autograd graph
    sees only the clone, the affine map to [0, 1] and the final ``clamp``.
    """
    scheduler = _clipping_scheduler()
    scheduler.set_timesteps(steps)
    x_t = latents.clone()
    for i in range(len(latents)):
        for t in scheduler.timesteps:
            with torch.no_grad():
                residual = unet(x_t[i : i + 1], t).sample
                x_t[i : i + 1] = scheduler.step(residual, t, x_t[i : i + 1]).prev_sample
    return (x_t / 2 + 0.5).clamp(0, 1)


def test_shortcut_is_the_gradient_diffmis_loop_computes() -> None:
    unet = _tiny_unet()
    x_t = torch.randn(2, 3, 16, 16, generator=torch.Generator().manual_seed(1)) * 3.0
    w = torch.randn(2, 3, 16, 16, generator=torch.Generator().manual_seed(2))
    x_ref = x_t.clone().requires_grad_(True)
    reference = _diffmi_reconstruct(unet, x_ref, 2)
    (g_ref,) = torch.autograd.grad((reference * w).sum(), x_ref)
    clipped = (reference.detach() <= 0) | (reference.detach() >= 1)
    assert int(clipped.sum()) > 0  # the clipped pixels are exercised
    grads = {}
    for mode in ("shortcut", "shortcut_unmasked"):
        x = x_t.clone().requires_grad_(True)
        image = DiffusionGenerator(unet, _clipping_scheduler(), 2, gradient=mode).forward(x)
        # the same images (float32 DDIM arithmetic in a different order)
        torch.testing.assert_close(image.detach(), reference.detach(), atol=1e-5, rtol=0.0)
        (grads[mode],) = torch.autograd.grad((image * w).sum(), x)
    # "shortcut" is DiffMI's gradient: its clamp passes none at clipped pixels
    torch.testing.assert_close(grads["shortcut"], g_ref, atol=0.0, rtol=0.0)
    assert bool((g_ref[clipped] == 0).all())
    # "shortcut_unmasked" is the option that does pass it: 0.5 · ∂L/∂x̂ on every pixel
    torch.testing.assert_close(grads["shortcut_unmasked"], 0.5 * w, atol=0.0, rtol=0.0)
    assert float((grads["shortcut_unmasked"] - g_ref).abs().max()) > 0.1


def test_toy_generators_still_work_with_the_new_defaults() -> None:
    gen, enc = LinearGenerator(), LinearEncoder()
    bank = LatentBank.build(gen, 2, detector=MeanDetector(), tau_k=0.0, tau_d=0.0, rng=0)
    res = RankedAdversary(gen, enc, bank=bank, top_n=1, t_max=5).invert(np.ones(enc.dim))
    assert res.queries == 2 + 6


def test_the_new_options_refuse_bad_values() -> None:
    f = _cosine_to(torch.ones(1, 3))
    x0 = torch.ones(1, 3)
    with pytest.raises(InvalidInputError, match="`init` must be one of"):
        APGD(init="zero").run(f, x0)  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError, match="`n_restarts` must be"):
        APGD(n_restarts=0).run(f, x0)
    with pytest.raises(InvalidInputError, match="`checkpoints` must be one of"):
        APGD(checkpoints="croce").run(f, x0)  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError, match="`last_visit` must be one of"):
        GreedyPixel(last_visit="never").run(f, x0, f(x0, torch.tensor([0])))  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError, match="`keep` must be one of"):
        GreedyPixel(keep="first").run(f, x0, f(x0, torch.tensor([0])))  # type: ignore[arg-type]
    gen, enc = LinearGenerator(), LinearEncoder()
    bank = LatentBank.build(gen, 2, detector=MeanDetector(), tau_k=0.0, tau_d=0.0, rng=0)
    with pytest.raises(InvalidInputError, match="`normality` must be one of"):
        LatentBank.build(gen, 2, detector=MeanDetector(), normality="channel")  # type: ignore[arg-type]
    target = np.ones(enc.dim)
    for kw, match in (
        ({"attack_options": {"keep": "last"}}, r"`attack_options` for 'apgd' may hold"),
        ({"attack": "greedypixel", "init": "code"}, "`init` and `n_restarts` are APGD's"),
        ({"attack": "greedypixel", "sparsity": "some"}, "`sparsity` must be one of"),
        ({"n_restarts": 2, "init": "code"}, r"`n_restarts` > 1 needs `init='random'`"),
    ):
        adv = RankedAdversary(gen, enc, bank=bank, top_n=1, t_max=2, **kw)
        with pytest.raises(InvalidInputError, match=match):
            adv.invert(target)
