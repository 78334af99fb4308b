"""One-run certificate against the reserved-test certificate on the same rows.

Identities are Gaussian clouds N(c_i, σ² I) in d = 16 (``normalize=False``): a pair (a, b) is
exactly μ-GDP with μ = ‖c_a − c_b‖/σ, so its true ε(δ) is known (``gdp_epsilon``). Pairs are
disjoint; every pair has the same separation μ. Both certifiers get the same EmbeddingSet,
the same pairs, α = 0.05 and δ (0 and 1e-5), their default classifier (logistic) and test_size:

* ``ReservedTestCertifier(n_select=min(5, n_pairs), n_candidates=n_pairs)``: development
  selects pairs and thresholds, the reserved test rows of each selected pair certify one
  point (Clopper–Pearson at α/(2 · n_select)).
* ``OneRunCertifier()``: half of each identity's rows are canary slots, one coin per slot,
  all pairs pooled, the best threshold at α / m (``thresholds="bonferroni"``).

Printed: median certified ε(δ) over seeds and the true ε(δ) of every pair (inf at δ = 0),
and the one run's certified GDP μ lower bound (the truth is μ).

Usage::

    python benchmarks/bench_one_run.py            # 3 seeds per row (a few minutes)
    python benchmarks/bench_one_run.py --quick    # 1 seed
"""

from __future__ import annotations

import argparse
import warnings

import numpy as np

from idaudit.certify import OneRunCertifier, ReservedTestCertifier
from idaudit.data import EmbeddingSet
from idaudit.dp import gdp_epsilon
from idaudit.exceptions import IdauditWarning

DELTAS = (0.0, 1e-5)


def _data(n_pairs: int, rows: int, mu: float, seed: int) -> tuple[EmbeddingSet, list]:
    gen = np.random.default_rng(seed)
    d = 16
    centres = gen.normal(0, 1, (n_pairs, d)) * 10.0  # pairs far from each other
    step = np.zeros(d)
    step[0] = mu  # σ = 1: the two identities of a pair are μ apart
    c = np.concatenate([centres, centres + step])  # (2 n_pairs, d)
    x = np.repeat(c, rows, axis=0) + gen.normal(0, 1, (2 * n_pairs * rows, d))
    labels = np.repeat(np.arange(2 * n_pairs), rows)
    pairs = [(i, i + n_pairs) for i in range(n_pairs)]
    return EmbeddingSet(x, labels, normalize=False), pairs


def main() -> None:
    """Print the comparison table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    seeds = [0] if args.quick else [0, 1, 2]
    rows_table = [(5, 200, 3.0), (5, 200, 1.0), (50, 40, 3.0), (50, 40, 1.0), (200, 20, 3.0)]
    print(
        "| pairs | rows per identity | μ | δ | true ε(δ) | reserved test | one run | one run μ_lb |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for n_pairs, rows, mu in rows_table:
        for delta in DELTAS:
            res, one, one_mu = [], [], []
            for seed in seeds:
                es, pairs = _data(n_pairs, rows, mu, seed)
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", IdauditWarning)  # "can only certify 0"
                    rt = ReservedTestCertifier(
                        n_select=min(5, n_pairs),
                        n_candidates=n_pairs,
                        delta=delta,
                        rng=seed,
                        progress=False,
                    ).fit(es, pairs)
                orc = OneRunCertifier(delta=delta, rng=seed, progress=False).fit(es, pairs)
                res.append(rt.epsilon_lb_)
                one.append(orc.epsilon_lb_)
                one_mu.append(orc.mu_lb_)
            true = gdp_epsilon(delta, mu) if delta > 0 else np.inf
            print(
                f"| {n_pairs} | {rows} | {mu:g} | {delta:g} | {true:.3f} | "
                f"{np.median(res):.3f} | {np.median(one):.3f} | {np.median(one_mu):.3f} |",
                flush=True,
            )


if __name__ == "__main__":
    main()
