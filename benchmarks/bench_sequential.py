"""Samples needed to certify a given ε: anytime-valid sequential vs fixed-n reserved test.

Mechanism: ``LaplaceNoise`` on two point identities, centres 0 and 1 in d = 1, scale 1, so the
pair's pure ε is exactly 1. α = 0.05 for both routes (one pair: 0.025 per error rate).

For each repetition, ``SequentialCertifier`` fixes a logistic-regression test on 100
development outputs per identity, then draws test outputs in batches of 50 until the bound
reaches the target (or the target is out of reach, or 20,000 outputs per identity). Its
number of test outputs per identity is recorded.

The fixed-n comparator uses *the same fixed test* (same classifier and threshold, whose true
error rates are computed in closed form) with one-sided Clopper–Pearson bounds on m test
outputs per identity, as the reserved-test certificate does. A fixed-n certificate must commit
to m before seeing the test data; printed are the m at which it reaches the target with
probability 50 % and 90 % (4,000 simulated test sets per m), per repetition, then the median
over repetitions. Comparing the sequential median stopping n with the fixed m at 90 % power is
the honest comparison: that m is what a user who wants to succeed nine times in ten has to
commit to, while the sequential certificate adapts to the test it got. The sequential bound is
wider at any one n (it is valid at all of them), so with a known good test a fixed m near its
50 % point can be cheaper.

Usage::

    python benchmarks/bench_sequential.py            # 20 repetitions (a few minutes)
    python benchmarks/bench_sequential.py --quick    # 5 repetitions
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np
from scipy import stats

import idaudit as ida
from idaudit.certify import SequentialCertifier
from idaudit.dp import clopper_pearson_upper, epsilon_from_error_rates
from idaudit.mechanisms import LaplaceNoise

ALPHA = 0.05
TARGETS = (0.3, 0.5, 0.7)
MAX = 20_000
GRID = np.unique(np.round(np.geomspace(20, MAX, 60)).astype(int))


def true_rates(cert: SequentialCertifier) -> tuple[float, float]:
    """FPR and FNR of the fixed test 'predict b iff d * score >= d * t' under Laplace(0|1, 1)."""
    clf = cert.classifiers_[0]
    c = cert.certificates_
    d, t = float(c["direction"][0]), float(c["threshold"][0])
    w, b0 = float(clf.coef_[0, 0]), float(clf.intercept_[0])
    cut = (t - b0) / w  # score = w x + b0 crosses t here
    upward = d * w > 0  # predict b for x >= cut
    la, lb = stats.laplace(0.0, 1.0), stats.laplace(1.0, 1.0)
    return (la.sf(cut), lb.cdf(cut)) if upward else (la.cdf(cut), lb.sf(cut))


def fixed_n_points(fpr: float, fnr: float, target: float, gen: np.random.Generator) -> tuple:
    """Smallest m with P[fixed-n certificate >= target] >= 0.5 and >= 0.9 (inf if none)."""
    out = []
    power = []
    for m in GRID:
        fp = gen.binomial(m, fpr, size=4000)
        fn = gen.binomial(m, fnr, size=4000)
        eps = epsilon_from_error_rates(
            clopper_pearson_upper(fp, m, ALPHA / 2), clopper_pearson_upper(fn, m, ALPHA / 2)
        )
        power.append(float(np.mean(eps >= target)))
    power = np.asarray(power)
    for level in (0.5, 0.9):
        hit = np.flatnonzero(power >= level)
        out.append(float(GRID[hit[0]]) if hit.size else float("inf"))
    return tuple(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    reps = 5 if args.quick else 20
    print(f"{reps} repetitions; {len(os.sched_getaffinity(0))} CPU cores available")
    base = ida.EmbeddingSet(np.array([[0.0], [1.0]]), ["a", "b"], normalize=False)
    mech = LaplaceNoise(base, scale=1.0)
    print(f"true pure epsilon = {mech.pair_epsilon('a', 'b'):g}, alpha = {ALPHA}")
    header = (
        f"{'target':>6} {'seq. median n':>14} {'seq. 90% n':>11} {'seq. reached':>12} "
        f"{'fixed n, 50% power':>19} {'fixed n, 90% power':>19}"
    )
    print(header)
    start = time.perf_counter()
    gen = np.random.default_rng(0)
    for target in TARGETS:
        seq_n, reached, m50, m90 = [], 0, [], []
        for r in range(reps):
            cert = SequentialCertifier(
                mech,
                [("a", "b")],
                alpha=ALPHA,
                target_epsilon=target,
                max_samples=MAX,
                batch_size=50,
                n_dev=100,
                rng=r,
                progress=False,
            ).fit()
            ok = cert.stop_reason_ == "target_reached"
            reached += ok
            seq_n.append(cert.n_test_ if ok else np.inf)
            a, b = fixed_n_points(*true_rates(cert), target, gen)
            m50.append(a)
            m90.append(b)
        q90 = np.quantile(seq_n, 0.9, method="inverted_cdf")
        print(
            f"{target:>6.2f} {np.median(seq_n):>14.0f} {q90:>11.0f} "
            f"{reached:>9}/{reps} {np.median(m50):>19.0f} {np.median(m90):>19.0f}"
        )
    print(f"total {time.perf_counter() - start:.0f} s (inf: not reached within {MAX})")


if __name__ == "__main__":
    main()
