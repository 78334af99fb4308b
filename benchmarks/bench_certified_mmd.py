"""Power of the certified MMD-TV bounds against the truth and against the reserved-test ROC route.

Part 1 — certified ε / true ε. ``LaplaceNoise`` on two point identities at L1 distance 1 (d = 1:
centres 0 and 1; d = 8: centres 0 and (1/8, ..., 1/8)), scale b = 1/2, so the pair's pure ε is
exactly 2. At n = 30, 100, 300, 1000 outputs per identity, every route runs on the *same* draws
at the same α = 0.05 (confidence 0.95, one pair):

* ``MMDTVAuditor(confidence_level=0.95, bound=...)`` for the three bounds, through the hockey-stick
  map (``epsilon_hs_lb``, the tighter of the two for the RBF kernel) and, for the betting bound,
  also through the TV map of Eq. 14 (``epsilon_lb``);
* ``ReservedTestCertifier(n_select=1, n_candidates=1)`` (70/30 split, logistic regression);
* for reference, the *uncertified* plug-in hockey-stick MMD estimate (``epsilon_hs``, a sample
  estimate).

Printed: the median over repetitions of ε / true ε (0 = nothing certified).

Part 2 — the MMD bound itself: mmd_lb / population MMD for two Gaussians N(0, I) and
N((1.5, 0), I) in d = 2, whose MMD at the chosen bandwidth is known in closed form.

Usage::

    python benchmarks/bench_certified_mmd.py            # 10 repetitions (a few minutes)
    python benchmarks/bench_certified_mmd.py --quick    # 3 repetitions
"""

from __future__ import annotations

import argparse
import math
import os
import time
import warnings

import numpy as np

import idaudit as ida
from idaudit.exceptions import IdauditWarning
from idaudit.mechanisms import GaussianNoise, LaplaceNoise, sample_embeddings

SIZES = (30, 100, 300, 1000)
BOUNDS = ("betting", "bernstein", "mcdiarmid")


def laplace_pair(dim: int) -> LaplaceNoise:
    centre_b = np.full(dim, 1.0 / dim)  # L1 distance 1 from the origin
    base = ida.EmbeddingSet(np.stack([np.zeros(dim), centre_b]), ["a", "b"], normalize=False)
    return LaplaceNoise(base, scale=0.5)


def gaussian_mmd(delta: float, s: float, sigma: float, d: int) -> float:
    v = 2 * s**2
    c = (sigma**2 / (sigma**2 + v)) ** (d / 2)
    return math.sqrt(2 * c * (1 - math.exp(-(delta**2) / (2 * (sigma**2 + v)))))


def part1(reps: int) -> None:
    cols = [f"MMD {b}" for b in BOUNDS] + ["MMD betting (TV map)", "reserved ROC", "plug-in (unc.)"]
    for dim in (1, 8):
        mech = laplace_pair(dim)
        truth = mech.pair_epsilon("a", "b")
        print(f"\nLaplace, d = {dim}, true pure epsilon = {truth:g}: median certified eps / truth")
        print(f"{'n':>6} " + " ".join(f"{c:>20}" for c in cols))
        for n in SIZES:
            rows = []
            for r in range(reps):
                es = sample_embeddings(mech, n, rng=1000 * n + r)
                a, b = es.get("a"), es.get("b")
                row = []
                for bound in BOUNDS:
                    aud = ida.MMDTVAuditor(confidence_level=0.95, bound=bound, rng=r).fit(a, b)
                    row.append(aud.epsilon_hs_lb_)
                aud = ida.MMDTVAuditor(confidence_level=0.95, rng=r).fit(a, b)
                row.append(aud.epsilon_lb_)
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", IdauditWarning)  # zero-ceiling warning at n=30
                    cert = ida.ReservedTestCertifier(
                        n_select=1, n_candidates=1, rng=r, progress=False
                    ).fit(es, [("a", "b")])
                row.append(cert.epsilon_lb_)
                row.append(aud.epsilon_hs_)
                rows.append(row)
            med = np.median(np.asarray(rows) / truth, axis=0)
            print(f"{n:>6} " + " ".join(f"{v:>20.3f}" for v in med))


def part2(reps: int) -> None:
    base = ida.EmbeddingSet(np.array([[0.0, 0.0], [1.5, 0.0]]), ["a", "b"], normalize=False)
    mech = GaussianNoise(base, sigma=1.0)
    print("\nGaussian, d = 2, |mu_a - mu_b| = 1.5: median mmd_lb / population MMD (closed form)")
    print(f"{'n':>6} " + " ".join(f"{b:>12}" for b in BOUNDS))
    for n in SIZES:
        ratios = []
        for r in range(reps):
            es = sample_embeddings(mech, n, rng=7000 + n + r)
            row = []
            for bound in BOUNDS:
                aud = ida.MMDTVAuditor(confidence_level=0.95, bound=bound, rng=r).fit(
                    es.get("a"), es.get("b")
                )
                row.append(aud.mmd_lb_ / gaussian_mmd(1.5, 1.0, aud.bandwidth_lb_, 2))
            ratios.append(row)
        med = np.median(np.asarray(ratios), axis=0)
        print(f"{n:>6} " + " ".join(f"{v:>12.3f}" for v in med))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    reps = 3 if args.quick else 10
    print(f"{reps} repetitions; {len(os.sched_getaffinity(0))} CPU cores available")
    start = time.perf_counter()
    part1(reps)
    part2(reps)
    print(f"\ntotal {time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    main()
