"""How DCGANGenerator's default radius was chosen: calibrate_radius on the shipped DCGAN.

Run:  PYTHONPATH=src python benchmarks/calibrate_dcgan_radius.py [--codes 16] [--steps 30]

Prints, per candidate L2 radius (and L∞ radius), the share of attacked bank codes whose K²
p-value stays ≥ 0.05 and whose image MTCNN still detects with p_D ≥ --tau-d (default 0.9933,
the OOD-detection threshold of seed 002, Tab. II: a radius that keeps reconstructions out of
OOD₂), and the mean
similarity the attack gained (dlib port, targets = other bank images).
"""

from __future__ import annotations

import argparse
import os
import time

import torch

from idaudit.faces import MTCNNDetector, TorchDlibEncoder
from idaudit.inversion import DCGANGenerator, FrameWarp, LatentBank, calibrate_radius


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--codes", type=int, default=16)
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--bank", type=int, default=64)
    parser.add_argument("--tau-d", type=float, default=0.9933, help="detection threshold")
    parser.add_argument("--norms", default="l2,linf")
    parser.add_argument("--radii", help="comma-separated radii (default: a grid per norm)")
    args = parser.parse_args()
    torch.set_num_threads(len(os.sched_getaffinity(0)))
    gen, enc, det = DCGANGenerator(), TorchDlibEncoder(), MTCNNDetector()
    t0 = time.perf_counter()
    bank = LatentBank.build(gen, args.bank, detector=det, rng=0)
    warp = FrameWarp.for_dcgan(gen, enc, n=32, rng=1)
    print(
        f"bank of {bank.volume} ({bank.n_drawn} drawn) and warp in {time.perf_counter() - t0:.0f} s"
    )
    grid = {"l2": [0.79, 1.5, 2.5, 4.0, 6.0], "linf": [0.25, 0.5, 1.0]}
    for norm in args.norms.split(","):
        radii = [float(r) for r in args.radii.split(",")] if args.radii else grid[norm]
        t0 = time.perf_counter()
        cal = calibrate_radius(
            gen,
            enc,
            bank,
            radii=radii,
            detector=det,
            norm=norm,
            n_codes=args.codes,
            t_max=args.steps,
            warp=warp,
            rng=0,
            tau_d=args.tau_d,
        )
        print(f"\n{norm}: calibrated radius {cal.radius:g}  ({time.perf_counter() - t0:.0f} s)")
        print(cal.table.to_dataframe().round(3).to_string())


if __name__ == "__main__":
    main()
