"""Speed of ``certify_scores`` and of the NNAA point estimate next to the peers' own code.

Both sides run in this one process, one thread each (``threadpoolctl`` caps BLAS/OpenMP,
``torch.set_num_threads(1)``, ``JAX_PLATFORMS=cpu``), alternating call by call, on identical
inputs; the tables give median times and the median over rounds of the ratio idaudit / peer
of the two calls of a round (below 1: idaudit faster).

Cases (n scores per class, Gaussian scores N(0, 1) vs N(1, 1), α = 0.05):

* ``bonferroni``: ``certify_scores(a, b, thresholds="bonferroni")`` against jax_privacy's
  ``CanaryScoreAuditor(b, a).epsilon_clopper_pearson(0.05, threshold_strategy=Bonferroni())``
  (constructor included: it sorts the scores and prunes the thresholds to the convex hull,
  which idaudit's call also has to do its way), and against the same jax call on an auditor
  built beforehand ("jax, no set-up"); ``one_sided=False`` on both sides (idaudit's default).
* ``given``: one threshold fixed in advance, against jax's ``Explicit(threshold)`` (both
  ``one_sided=False``; the two ε agree to the last digit, printed).
* ``band``: ``thresholds="band"`` after its first call, against jax's ``Bonferroni``.
* ``multisplit``: ``thresholds="multisplit", n_splits=20`` against jax's
  ``MultiSplit(num_samples=20)`` (auditor built in the call on both).
* ``straightforward``: the computation ``certify_scores`` did per call before its bound tables
  were kept: every distinct score a threshold (``np.union1d`` and two ``searchsorted``), a
  Clopper–Pearson bound per count with ``scipy.stats.beta.isf``, then ε and μ.
* ``first call``: the first ``certify_scores`` call at a sample size (tables not yet made;
  for ``"band"`` its calibration: up to 10⁴ per class a root search of the checked
  non-crossing probability, above it a tabulated level checked once), with every cache
  emptied before each timed call; wall and CPU seconds (the CPU time of this process, which
  a loaded machine does not inflate as much).
* ``nnaa``: ``nnaa(train, held-out, synthetic, n_bootstrap=0, n_permutations=0,
  metric="euclidean")`` on 1000 × 1000 × 1000 rows of dimension 128, against syntheval's
  ``NearestNeighbourAdversarialAccuracy`` with ``nn_dist="euclid"`` and the held-out set
  (its privacy loss is idaudit's, printed), and against a straightforward numpy script
  (``scipy.spatial.distance.cdist`` blocks and row minima).

The peers come from the ``bench-peers`` extra (``pip install -e ".[bench-peers]"``:
jax-privacy, syntheval, threadpoolctl). On Python 3.11 with torch 2.14 and numpy 2.4 they
install with their own dependencies without replacing torch, numpy or scipy (jax-privacy 2.0.0
brings jax and jaxlib 0.10 CPU wheels, dp-accounting, chex and optax; syntheval 1.7.3 brings
lightgbm, seaborn and rich); check with ``pip install --dry-run`` first on another setup and add
``--no-deps`` plus the packages listed here if it would replace one.

Usage::

    python benchmarks/bench_certify_speed.py            # about two minutes on one core
    python benchmarks/bench_certify_speed.py --quick    # fewer repetitions
    python benchmarks/bench_certify_speed.py --large    # also the band's first call at 1e6
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from collections.abc import Callable
from typing import Any

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import numpy as np
import torch
from scipy import special, stats
from scipy.spatial.distance import cdist
from threadpoolctl import threadpool_limits

import idaudit.dp._tradeoff as tradeoff
from idaudit.certify import certify_scores
from idaudit.dp import epsilon_from_tradeoff
from idaudit.memorization import nnaa

SEED = 20261205
ALPHA = 0.05


def alternate(
    ours: Callable[[int], Any], peer: Callable[[int], Any], reps: int
) -> tuple[float, float, float]:
    """Median seconds of each side and median ratio of adjacent calls over ``reps`` rounds.

    Round ``r`` calls both sides on input set ``r`` (each side cycles through its inputs);
    one warm-up call each; the order inside a round alternates. The ratio of the two calls of
    one round is taken before the median, so a load spike shared by both does not move it.
    """
    ours(0)
    peer(0)
    t_ours, t_peer = [], []
    for r in range(reps):
        order = ((ours, t_ours), (peer, t_peer)) if r % 2 == 0 else ((peer, t_peer), (ours, t_ours))
        for fn, out in order:
            start = time.perf_counter()
            fn(r)
            out.append(time.perf_counter() - start)
    ratios = [x / y for x, y in zip(t_ours, t_peer, strict=True)]
    return statistics.median(t_ours), statistics.median(t_peer), statistics.median(ratios)


def row(case: str, peer: str, ours: float, theirs: float, ratio: float) -> None:
    print(f"| {case} | {peer} | {ours * 1e3:.2f} | {theirs * 1e3:.2f} | {ratio:.2f}× |")


def straightforward_bonferroni(a: np.ndarray, b: np.ndarray, alpha: float) -> tuple[float, float]:
    """Per call: every threshold, a Clopper–Pearson bound per count (scipy), then ε and μ."""
    t = np.union1d(a, b)
    fp = a.size - np.searchsorted(np.sort(a), t, side="left")
    fn = np.searchsorted(np.sort(b), t, side="left")

    def bounds(n: int, level: float) -> np.ndarray:
        k = np.arange(n, dtype=np.float64)
        u = np.maximum.accumulate(stats.beta.isf(level, k + 1.0, n - k))
        return np.concatenate((u, [1.0]))

    x = bounds(a.size, alpha / (2 * a.size))[fp]
    y = bounds(b.size, alpha / (2 * b.size))[fn]
    eps = float(epsilon_from_tradeoff(x, y, 0.0))
    with np.errstate(invalid="ignore"):
        mu = special.ndtri(1.0 - x) - special.ndtri(y)
    return eps, max(0.0, float(np.nanmax(mu)))


def clear_caches() -> None:
    tables = getattr(tradeoff, "_BOUND_TABLES", None)  # absent before the tables were kept
    if tables is not None:
        tables.clear()
    tradeoff._calibrated_level.cache_clear()


def certify_part(n: int, reps: int, n_sets: int = 5) -> None:
    from jax_privacy import auditing

    # jax's set-up time depends on the data (its hull pruning repeats until no point drops),
    # so the rounds cycle through several seeded score sets
    gens = np.random.default_rng(SEED).spawn(n_sets)
    sets = [(g.normal(0.0, 1.0, n), g.normal(1.0, 1.0, n)) for g in gens]
    bonf = auditing.Bonferroni()
    built = [auditing.CanaryScoreAuditor(b, a) for a, b in sets]
    thr = 0.5
    explicit = auditing.Explicit(thr)

    def jax_bonf(r: int) -> float:
        a, b = sets[r % n_sets]
        auditor = auditing.CanaryScoreAuditor(b, a)
        return float(auditor.epsilon_clopper_pearson(ALPHA, one_sided=False))

    multi = auditing.MultiSplit(num_samples=20, seed=0)

    def jax_multi(r: int) -> float:
        a, b = sets[r % n_sets]
        auditor = auditing.CanaryScoreAuditor(b, a)
        return float(
            auditor.epsilon_clopper_pearson(ALPHA, one_sided=False, threshold_strategy=multi)
        )

    def jax_bonf_built(r: int) -> float:
        auditor = built[r % n_sets]
        return float(
            auditor.epsilon_clopper_pearson(ALPHA, one_sided=False, threshold_strategy=bonf)
        )

    def jax_given(r: int) -> float:
        a, b = sets[r % n_sets]
        auditor = auditing.CanaryScoreAuditor(b, a)
        return float(
            auditor.epsilon_clopper_pearson(ALPHA, one_sided=False, threshold_strategy=explicit)
        )

    def ours(strategy: str, **kw: Any) -> Callable[[int], float]:
        def call(r: int) -> float:
            a, b = sets[r % n_sets]
            return certify_scores(a, b, alpha=ALPHA, thresholds=strategy, **kw).epsilon_lb_  # type: ignore[arg-type]

        return call

    ours_bonf, ours_band = ours("bonferroni"), ours("band")
    ours_given = ours("given", threshold=thr)

    def plain(r: int) -> tuple[float, float]:
        return straightforward_bonferroni(*sets[r % n_sets], ALPHA)

    print(
        f"\n### certify_scores, n = {n} scores per class, {reps} rounds over {n_sets} score sets\n"
    )
    print("| case | against | idaudit ms | peer ms | idaudit / peer |")
    print("|---|---|---|---|---|")
    row('"bonferroni"', "jax Bonferroni", *alternate(ours_bonf, jax_bonf, reps))
    row('"bonferroni"', "jax Bonferroni, no set-up", *alternate(ours_bonf, jax_bonf_built, reps))
    row('"given" (1 threshold)', "jax Explicit", *alternate(ours_given, jax_given, reps))
    row('"band" (after 1st call)', "jax Bonferroni", *alternate(ours_band, jax_bonf, reps))
    ours_multi = ours("multisplit", n_splits=20, rng=0)
    row('"multisplit" (20 splits)', "jax MultiSplit(20)", *alternate(ours_multi, jax_multi, reps))
    row('"bonferroni"', "straightforward", *alternate(ours_bonf, plain, reps))
    print(
        f"\nε on the first set: idaudit given {ours_given(0):.12f}, jax Explicit "
        f"{jax_given(0):.12f}; idaudit bonferroni {ours_bonf(0):.6f}, band {ours_band(0):.6f}, "
        f"jax Bonferroni {jax_bonf(0):.6f} (hull points only: not jointly valid, docs/certify.md)"
    )


def first_calls(sizes: list[int]) -> None:
    gen = np.random.default_rng(SEED + 1)
    certify_scores([0.0, 1.0], [1.0, 2.0], thresholds="band")  # load the compiled kernel
    print("\n### first call at a sample size (every cache emptied before it)\n")
    print('| n | "bonferroni" s | "band" s (wall) | "band" s (CPU) | band level |')
    print("|---|---|---|---|---|")
    for n in sizes:
        a, b = gen.normal(0.0, 1.0, n), gen.normal(1.0, 1.0, n)
        times = []
        for strategy in ("bonferroni", "band"):
            clear_caches()
            start, cpu = time.perf_counter(), time.process_time()
            certify_scores(a, b, alpha=ALPHA, thresholds=strategy)  # type: ignore[arg-type]
            times += [time.perf_counter() - start, time.process_time() - cpu]
        level = ALPHA / 2 / tradeoff.band_local_level(n, ALPHA / 2)
        print(f"| {n} | {times[0]:.3f} | {times[2]:.2f} | {times[3]:.2f} | α/2 / {level:.1f} |")


def nnaa_part(reps: int, n: int = 1000, dim: int = 128) -> None:
    import pandas as pd
    from syntheval.metrics.privacy.metric_nn_adversarial_accuracy import (
        NearestNeighbourAdversarialAccuracy,
    )

    gen = np.random.default_rng(SEED + 2)
    train, held = gen.standard_normal((2, n, dim))
    copies = train[: n // 4] + 0.3 * gen.standard_normal((n // 4, dim))  # near-copies
    synth = np.concatenate([copies, gen.standard_normal((n - n // 4, dim))])
    cols = [f"x{i}" for i in range(dim)]
    frames = [pd.DataFrame(x, columns=cols) for x in (train, held, synth)]

    def ours(r: int) -> float:
        return nnaa(
            train, held, synth, n_bootstrap=0, n_permutations=0, metric="euclidean"
        ).privacy_loss

    def theirs(r: int) -> float:
        metric = NearestNeighbourAdversarialAccuracy(
            frames[0],
            frames[2],
            hout_data=frames[1],
            cat_cols=[],
            num_cols=cols,
            nn_dist="euclid",
            do_preprocessing=False,
        )
        return float(metric.evaluate()["priv_loss"])

    def plain(r: int) -> float:
        def aa(x: np.ndarray, s: np.ndarray) -> float:
            xx, ss, xs = cdist(x, x), cdist(s, s), cdist(x, s)
            np.fill_diagonal(xx, np.inf)
            np.fill_diagonal(ss, np.inf)
            left = np.mean(xx.min(1) < xs.min(1))
            right = np.mean(ss.min(1) < xs.min(0))
            return 0.5 * (left + right)

        return aa(held, synth) - aa(train, synth)

    print(f"\n### NNAA point estimate, {n} × {n} × {n} rows, d = {dim}, {reps} alternating reps\n")
    print("| case | against | idaudit ms | peer ms | idaudit / peer |")
    print("|---|---|---|---|---|")
    row("nnaa (euclidean)", "syntheval NNAA", *alternate(ours, theirs, reps))
    row("nnaa (euclidean)", "straightforward (cdist)", *alternate(ours, plain, reps))
    print(
        f"\nprivacy loss: idaudit {ours(0):.6f}, syntheval {theirs(0):.6f}, "
        f"straightforward {plain(0):.6f}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repetitions")
    parser.add_argument("--large", action="store_true", help="band's first call at 1e6 too")
    args = parser.parse_args()
    reps = 11 if args.quick else 41
    torch.set_num_threads(1)
    with threadpool_limits(1):
        certify_part(10_000, reps)
        first_calls([1_000, 10_000, 100_000] + ([1_000_000] if args.large else []))
        nnaa_part(5 if args.quick else 15)


if __name__ == "__main__":
    main()
