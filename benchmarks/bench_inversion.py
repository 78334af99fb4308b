"""Inversion on CPU: time and queries per attack, batched targets, DDIM checkpointing.

    python benchmarks/bench_inversion.py [--targets 32] [--bank 64] [--t-max 10] [--budget Q]
        [--attack-targets 4] [--skip-attacks] [--skip-invert-many] [--skip-ddim] [--threads N]

Sections:

1. Similarity gained, queries and seconds per attack with the shipped DCGAN prior under one
   query budget ``Q`` (``--budget``, default ``V + 3 · 40``; Eq. 18, N = 3, no early stop),
   each attack with idaudit's defaults and side by side with the reference settings
   (docs/inversion.md, "Departures"): white-box APGD through the torch port of dlib from a
   random point on the ε-sphere (default), from the code itself (``init="code"``, idaudit's
   former default) and with Croce's integer checkpoints (``checkpoints="code"``); the
   black-box GreedyPixel querying dlib itself (step 0.5, the DCGAN's calibrated L∞ radius)
   with its defaults (a partial last visit, the best point kept) and as the authors' loop
   (``last_visit="skip", keep="last"``); the one-coordinate CoordinateSearch in the same L∞
   ball. ``--skip-attacks`` skips it.
2. ``invert_many`` on ``--targets`` targets against the straightforward loop of ``invert``
   (same settings, identical results); the target is ≥ 5× at 32 targets.
3. DDIM on a small random UNet (64×64, 10 steps): forward + backward through the whole chain
   with and without gradient checkpointing, and DiffMI's shortcut gradient (sampled without
   a graph) — seconds, and the bytes autograd keeps for the backward pass (summed over saved
   tensors, an exact count on any device).

Timings are single runs on whatever else the machine is doing; say so next to them.
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np
import torch

from idaudit.faces import DlibEncoder, MTCNNDetector, TorchDlibEncoder
from idaudit.inversion import (
    DCGANGenerator,
    DiffusionGenerator,
    FrameWarp,
    LatentBank,
    RankedAdversary,
)


def saved_bytes(fn) -> tuple[float, int]:
    """Run ``fn`` (forward + backward) and count the bytes autograd saved for backward."""
    total = 0

    def pack(t: torch.Tensor) -> torch.Tensor:
        nonlocal total
        total += t.numel() * t.element_size()
        return t

    start = time.perf_counter()
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        fn()
    return time.perf_counter() - start, total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--targets", type=int, default=32)
    parser.add_argument("--bank", type=int, default=64)
    parser.add_argument("--t-max", type=int, default=10)
    parser.add_argument("--top-n", type=int, default=3)
    parser.add_argument("--skip-attacks", action="store_true", help="skip section 1")
    parser.add_argument("--skip-invert-many", action="store_true", help="skip section 2")
    parser.add_argument("--skip-ddim", action="store_true", help="skip section 3")
    parser.add_argument("--attack-targets", type=int, default=4)
    parser.add_argument("--budget", type=int, default=None, help="Q (default: V + 3 * 40)")
    parser.add_argument("--threads", type=int, default=len(os.sched_getaffinity(0)))
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    if args.budget is None:
        args.budget = args.bank + 3 * 40
    print(
        f"torch {torch.__version__}, {torch.get_num_threads()} threads, "
        f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs"
    )

    gen, white, black = DCGANGenerator(), TorchDlibEncoder(), DlibEncoder()
    bank = LatentBank.build(gen, args.bank, detector=MTCNNDetector(), rng=0)
    warp = FrameWarp.for_dcgan(gen, white, rng=1)
    z = white.encode(gen.generator.crops(gen.generator.sample(args.targets, rng=9), white))
    zb = black.encode(gen.generator.crops(gen.generator.sample(args.targets, rng=9), black))

    print(
        f"\n1. per attack (DCGAN, V={bank.volume}, N=3, query budget Q={args.budget} "
        f"(Eq. 18: {(args.budget - bank.volume) // 3} queries per code), "
        f"{args.attack_targets} targets, no early stop)"
    )
    k = 0 if args.skip_attacks else args.attack_targets
    linf = gen.default_radius["linf"]
    rows: list[tuple[str, object, np.ndarray, str, str, dict]] = [
        ("APGD L2 2.5, defaults (sphere start)", white, z, "apgd", "l2", {}),
        ("APGD, init='code' (former default)", white, z, "apgd", "l2", {"init": "code"}),
        (
            "APGD, Croce's checkpoints",
            white,
            z,
            "apgd",
            "l2",
            {"attack_options": {"checkpoints": "code"}},
        ),
        (f"GreedyPixel Linf {linf}, defaults", black, zb, "greedypixel", "linf", {}),
        (
            "GreedyPixel, authors' loop",
            black,
            zb,
            "greedypixel",
            "linf",
            {"attack_options": {"last_visit": "skip", "keep": "last"}},
        ),
        (f"CoordinateSearch Linf {linf}", black, zb, "coordinate", "linf", {}),
    ]
    for name, enc, targets, attack, norm, extra in rows:
        adv = RankedAdversary(
            gen,
            enc,
            bank=bank,
            top_n=3,
            attack=attack,
            norm=norm,
            warp=warp,
            query_budget=args.budget,
            rng=0,
            **extra,
        )
        adv.bank_embeddings()
        if k == 0:
            break
        start = time.perf_counter()
        res = adv.invert_many(targets[:k])
        sec = (time.perf_counter() - start) / k
        gain = np.array([r.similarity - r.initial_similarity for r in res])
        spent = [r.queries for r in res]
        print(
            f"  {name:38s} {sec:7.2f} s/target  queries {min(spent):5d}-{max(spent):5d}  "
            f"similarity gain {gain.mean():+.4f} (min {gain.min():+.4f}, "
            f"max {gain.max():+.4f})"
        )
    if args.skip_invert_many:
        if not args.skip_ddim:
            ddim_section()
        return
    print(
        f"\n2. invert_many vs a loop of invert ({args.targets} targets, APGD, N={args.top_n}, "
        f"t_max={args.t_max})"
    )
    adv = RankedAdversary(
        gen, white, bank=bank, top_n=args.top_n, t_max=args.t_max, warp=warp, rng=0
    )
    adv.bank_embeddings()
    start = time.perf_counter()
    loop = [adv.invert(t) for t in z]
    t_loop = time.perf_counter() - start
    start = time.perf_counter()
    many = adv.invert_many(z)
    t_many = time.perf_counter() - start
    gap = max(abs(a.similarity - b.similarity) for a, b in zip(loop, many, strict=True))
    ratio = t_loop / t_many
    print(f"  loop of invert   {t_loop:8.1f} s")
    print(
        f"  invert_many      {t_many:8.1f} s   ×{ratio:.2f} "
        f"({'meets' if ratio >= 5 else 'misses'} the 5× target); max |Δ similarity| {gap:.1e}"
    )

    if not args.skip_ddim:
        ddim_section()


def ddim_section() -> None:
    """Section 3: DDIM forward + backward, full and shortcut gradients, with checkpointing."""
    print("\n3. DDIM, small random UNet (64×64, 10 steps, batch 2): forward + backward")
    from diffusers import DDIMScheduler, UNet2DModel

    torch.manual_seed(0)
    unet = UNet2DModel(
        sample_size=64,
        block_out_channels=(32, 64, 64),
        layers_per_block=1,
        down_block_types=("DownBlock2D", "AttnDownBlock2D", "DownBlock2D"),
        up_block_types=("UpBlock2D", "AttnUpBlock2D", "UpBlock2D"),
    )
    x_t = torch.randn(2, 3, 64, 64)
    runs = [("full", False), ("full", True), ("shortcut", False)]
    seconds = {}
    for gradient, ckpt in runs:
        ddim = DiffusionGenerator(unet, DDIMScheduler(), 10, checkpointing=ckpt, gradient=gradient)
        x = x_t.clone().requires_grad_(True)
        sec, nbytes = saved_bytes(lambda ddim=ddim, x=x: ddim.forward(x).mean().backward())
        seconds[gradient, ckpt] = sec
        print(
            f"  gradient={gradient:8s} checkpointing={ckpt!s:5s}  {sec:6.2f} s   "
            f"saved for backward {nbytes / 2**20:8.1f} MiB"
        )
    print(
        f"  shortcut / full (no checkpointing): "
        f"{seconds['shortcut', False] / seconds['full', False]:.2f} of the time"
    )


if __name__ == "__main__":
    main()
