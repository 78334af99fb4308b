"""Audit every identity pair of a paper-sized condition on a CUDA device.

The condition of ``bench_all_pairs.py`` (400 identities x 90-100 x 512, 79,800 pairs). On the
GPU, all pairs go through GaussMech + MMD-TV + ROC-HT, KDE-LR at mix 0 and 0.01, and MMD-TV
with 10^4-permutation tests (target: everything for one condition in under 60 s). The first
``--check`` pairs are recomputed on the CPU and the largest differences printed; the device
name, the times and the peak GPU memory are printed too.

``--shape celeba``: the CelebA-shaped condition of ``bench_all_pairs.py`` (10,177 identities
x 30 x 512, 51,780,576 pairs). GaussMech + MMD-TV with ``keep="summary"`` on the tiled path
(``engine="tiled"``) over every pair of the first ``--subset`` identities (default 1,100:
604,450 pairs, 1.17 %), projected linearly to all pairs; ``--full`` runs every pair instead.
All pairs of the first identities covering ``--check`` pairs are then audited on the tiled
path on the GPU and on the CPU, and the largest differences printed.

Usage::

    python benchmarks/gpu_all_pairs.py               # everything (needs CUDA)
    python benchmarks/gpu_all_pairs.py --quick       # scaled-down condition
    python benchmarks/gpu_all_pairs.py --device cuda:1
    python benchmarks/gpu_all_pairs.py --shape celeba            # 1.17 % prefix, projected
    python benchmarks/gpu_all_pairs.py --shape celeba --quick    # 2,000 identities
    python benchmarks/gpu_all_pairs.py --shape celeba --full     # all 51.8 M pairs

Without CUDA the script says so and exits with status 2.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).parent))

from bench_all_pairs import (
    CELEBA,
    CELEBA_QUICK,
    make_celeba_condition,
    n_pairs_of,
    prefix_identities,
)
from bench_audits import SEED, make_condition, max_diff

import idaudit as ida
from idaudit.data import all_pairs


def celeba(args: argparse.Namespace) -> int:
    """The tiled path on the CelebA-shaped condition on ``args.device``; see the docstring."""
    dev = torch.device(args.device)
    cond = CELEBA_QUICK if args.quick else CELEBA
    full = make_celeba_condition(*cond)
    n_all = n_pairs_of(cond[0])
    n_sub = cond[0] if args.full else min(args.subset or prefix_identities(cond[0]), cond[0])
    es = full if n_sub == cond[0] else full.subset(full.identities[:n_sub])
    print(
        f"device: {torch.cuda.get_device_name(dev)}; torch {torch.__version__}; condition "
        f"{cond[0]:,} identities x {cond[1]} x {cond[2]}, {n_all:,} pairs; timed: all pairs "
        f"of the first {n_sub:,} identities ({n_pairs_of(n_sub):,} pairs, "
        f"{100 * n_pairs_of(n_sub) / n_all:.2f} %)"
    )
    auds = [ida.GaussMechAuditor(), ida.MMDTVAuditor()]
    kw = {"engine": "tiled", "progress": False}
    # warm-up: CUDA context, kernels and cuBLAS handles are not part of the timing
    ida.audit_pairs(full.subset(full.identities[:8]), "all", auds, device=args.device, **kw)
    torch.cuda.synchronize(dev)
    torch.cuda.reset_peak_memory_stats(dev)
    start = time.perf_counter()
    ds = ida.audit_pairs(es, "all", auds, device=args.device, keep="summary", **kw)
    torch.cuda.synchronize(dev)
    seconds = time.perf_counter() - start
    peak = torch.cuda.max_memory_allocated(dev) / 2**20
    per_pair = seconds / int(ds.attrs["n_pairs"])
    print(
        f"tiled path, GaussMech + MMD-TV: {seconds:.2f} s, {per_pair * 1e6:.2f} us/pair, "
        f"all {n_all:,} pairs {per_pair * n_all / 60:.1f} min"
        + ("" if args.full else " (projected linearly)")
        + f"; peak GPU memory {peak:.0f} MiB; engine {ds.attrs['setting.engine']}"
    )
    for v in ("gaussmech_epsilon", "mmdtv_epsilon"):
        print(
            f"  {v}: max {float(ds[f'{v}_max']):.4f} at "
            f"({ds[f'{v}_argmax_identity_a'].values}, {ds[f'{v}_argmax_identity_b'].values})"
        )
    k = next(m for m in range(2, cond[0] + 1) if n_pairs_of(m) >= min(args.check, n_all))
    head = full.subset(full.identities[:k])
    gpu = ida.audit_pairs(head, "all", auds, device=args.device, **kw)
    cpu = ida.audit_pairs(head, "all", auds, device="cpu", **kw)
    worst = ", ".join(
        f"{v} {max_diff(cpu[v].values, gpu[v].values):.1e}"
        for v in cpu.data_vars
        if cpu[v].dtype != bool
    )
    print(f"largest |GPU - CPU| on all {n_pairs_of(k)} pairs of {k} identities: {worst}")
    assert np.isfinite(seconds)
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="scaled-down condition")
    parser.add_argument("--device", default="cuda", help="CUDA device (default: cuda)")
    parser.add_argument("--check", type=int, default=200, help="pairs recomputed on the CPU")
    parser.add_argument(
        "--shape",
        choices=("paper", "celeba"),
        default="paper",
        help="paper: 400 identities x 90-100 rows; celeba: 10,177 identities x 30 rows",
    )
    parser.add_argument(
        "--subset", type=int, default=None, help="celeba: identities of the timed prefix"
    )
    parser.add_argument("--full", action="store_true", help="celeba: every pair")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        print(
            "gpu_all_pairs: CUDA is not available here (torch.cuda.is_available() is "
            "False); nothing was measured.",
            file=sys.stderr,
        )
        return 2
    if args.shape == "celeba":
        return celeba(args)
    if args.full or args.subset:
        parser.error("--full and --subset go with --shape celeba")
    dev = torch.device(args.device)
    cond = (60, 45, 50, 128) if args.quick else (400, 90, 100, 512)
    es = make_condition(*cond, SEED)
    n_all = cond[0] * (cond[0] - 1) // 2
    print(
        f"device: {torch.cuda.get_device_name(dev)}; torch {torch.__version__}; "
        f"condition {cond[0]} identities x {cond[1]}-{cond[2]} x {cond[3]}, {n_all} pairs"
    )
    parts = {
        "GaussMech + MMD-TV + ROC-HT": [
            ida.GaussMechAuditor(),
            ida.MMDTVAuditor(),
            ida.ROCHTAuditor(rng=0),
        ],
        "KDE-LR mix 0 and 0.01": [ida.KDELRAuditor(0.0), ida.KDELRAuditor(0.01)],
        "MMD-TV, 10^4 permutations": [ida.MMDTVAuditor(n_permutations=10_000, rng=0, name="perm")],
    }
    # warm-up: CUDA context, kernels and cuBLAS handles are not part of the timings
    ida.audit_pairs(
        es,
        all_pairs(es.identities, 0, 4),
        [a for auds in parts.values() for a in auds],
        device=args.device,
        progress=False,
    )
    total = 0.0
    check = all_pairs(es.identities, 0, min(args.check, n_all))
    for name, auds in parts.items():
        torch.cuda.synchronize(dev)
        torch.cuda.reset_peak_memory_stats(dev)
        start = time.perf_counter()
        ds = ida.audit_pairs(es, "all", auds, device=args.device, progress=False)
        torch.cuda.synchronize(dev)
        seconds = time.perf_counter() - start
        total += seconds
        peak = torch.cuda.max_memory_allocated(dev) / 2**20
        cpu = ida.audit_pairs(es, check, auds, device="cpu", progress=False)
        worst = max(
            max_diff(cpu[v].values, ds[v].values[: len(check)])
            for v in cpu.data_vars
            if cpu[v].dtype != bool
        )
        flips = sum(
            int((cpu[v].values != ds[v].values[: len(check)]).sum())
            for v in cpu.data_vars
            if cpu[v].dtype == bool
        )
        print(
            f"{name:<30} {seconds:8.2f} s  {n_all / seconds:9.0f} pairs/s  "
            f"peak GPU memory {peak:7.0f} MiB  largest |GPU - CPU| on {len(check)} pairs "
            f"{worst:.1e}, boolean flips {flips}"
        )
        assert np.isfinite(seconds)
    print(f"{'everything':<30} {total:8.2f} s  (target < 60 s for one condition)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
