"""Audit every identity pair of a paper-sized condition on a CUDA device.

The condition of ``bench_all_pairs.py`` (400 identities x 90-100 x 512, 79,800 pairs). On the
GPU, all pairs go through GaussMech + MMD-TV + ROC-HT, KDE-LR at mix 0 and 0.01, and MMD-TV
with 10^4-permutation tests (target: everything for one condition in under 60 s). The first
``--check`` pairs are recomputed on the CPU and the largest differences printed; the device
name, the times and the peak GPU memory are printed too.

Usage::

    python benchmarks/gpu_all_pairs.py               # everything (needs CUDA)
    python benchmarks/gpu_all_pairs.py --quick       # scaled-down condition
    python benchmarks/gpu_all_pairs.py --device cuda:1

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

from bench_audits import SEED, make_condition, max_diff

import idaudit as ida
from idaudit.data import all_pairs


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="scaled-down condition")
    parser.add_argument("--device", default="cuda", help="CUDA device (default: cuda)")
    parser.add_argument("--check", type=int, default=200, help="pairs recomputed on the CPU")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        print(
            "gpu_all_pairs: CUDA is not available here (torch.cuda.is_available() is "
            "False); nothing was measured.",
            file=sys.stderr,
        )
        return 2
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
