"""Memorisation statistics at seed 003's scale: idaudit against plain NumPy, same numbers.

    python benchmarks/bench_memorization.py [--n 1000] [--dim 512] [--bootstrap 1000]
                                            [--baseline-draws 10] [--big 100000]

Sections (one run prints every ratio):

1. Flagging: nearest-training distances of 1000 held-out and 1000 synthetic embeddings
   (dim 512, cosine) against 1000 training ones, thresholds at p = 1, 2, 5, 10, 20, exact
   intervals and the 9999-permutation p-values. Baseline: NumPy written the straightforward
   way (one matrix product per set, one loop iteration per permutation, drawing the same
   permutations from the same generator).
2. NNAA with ``--bootstrap`` recomputed-neighbour draws. Baselines: (a) straightforward NumPy,
   recomputing every distance from the resampled embeddings in each draw (the definition),
   timed on ``--baseline-draws`` draws and scaled to all of them; (b) vectorised NumPy, the
   strongest alternative: distance matrices computed once, each draw a masked row minimum
   over the resampled columns, timed on 100 draws and scaled. The draws are the documented
   recipe, so both baselines must reproduce idaudit's draws exactly (checked on the ones
   they time).
3. Flagging against ``--big`` training embeddings (10⁵ by default): idaudit's blocked torch
   search against a blocked NumPy search.

Times are wall-clock seconds on this machine with the thread count idaudit picks by default
(the CPUs this process may use, less the busy ones); the load average is printed with them.
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np
import torch

from idaudit.memorization import flagging, nearest_neighbour_distances, nnaa
from idaudit.memorization._images import default_threads
from idaudit.memorization._nnaa import half_size

PERCENTILES = (1.0, 2.0, 5.0, 10.0, 20.0)


def unit(x: np.ndarray) -> np.ndarray:
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def data(n: int, dim: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    gen = np.random.default_rng(seed)
    train = unit(gen.standard_normal((n, dim)))
    heldout = unit(gen.standard_normal((n, dim)))
    synth = unit(gen.standard_normal((n, dim)))
    synth[: n // 10] = unit(train[: n // 10] + 0.05 * gen.standard_normal((n // 10, dim)))
    return train, heldout, synth


# ---------------------------------------------------------------- straightforward baselines


def numpy_flagging(t, h, s, n_perm: int, seed: int):
    d_h = (1.0 - h @ t.T).min(axis=1)
    d_s = (1.0 - s @ t.T).min(axis=1)
    n_h = d_h.size
    ranks = [max(1, int(np.ceil(round(p * n_h / 100.0, 9)))) for p in PERCENTILES]
    tau = np.sort(d_h)[np.array(ranks) - 1]
    observed = np.array([(d_s <= x).sum() for x in tau])
    # the permutations idaudit draws: the pooled values sorted, labels shuffled row by row
    pooled = np.concatenate([d_h, d_s])
    order = np.argsort(pooled, kind="stable")
    labels = np.concatenate([np.ones(n_h, bool), np.zeros(d_s.size, bool)])[order]
    values = pooled[order]
    gen = np.random.default_rng(seed)
    exceed = np.zeros(len(ranks), int)
    for _ in range(n_perm):
        perm = gen.permuted(labels)
        hv, sv = values[perm], values[~perm]
        cut = np.sort(hv)[np.array(ranks) - 1]
        exceed += np.array([(sv <= c).sum() for c in cut]) >= observed
    return tau, observed, (1.0 + exceed) / (1.0 + n_perm)


def _aa(own_a, cross, own_b):
    return 0.5 * (np.mean(own_a < cross.min(axis=1)) + np.mean(own_b < cross.min(axis=0)))


def numpy_nnaa_draws(t, h, s, draws, which):
    """Straightforward: distances recomputed from the resampled embeddings in every draw."""
    out = []
    for b in which:
        it, ih, is_ = (d[b] for d in draws)

        def own(x, idx):
            d = 1.0 - x[idx] @ x[idx].T
            d[idx[:, None] == idx[None, :]] = np.inf  # copies of a point are not neighbours
            return d.min(axis=1)

        own_s = own(s, is_)
        ts = _aa(own(t, it), 1.0 - t[it] @ s[is_].T, own_s)
        hs = _aa(own(h, ih), 1.0 - h[ih] @ s[is_].T, own_s)
        out.append((ts, hs, hs - ts))
    return np.array(out)


def vectorised_nnaa_draws(t, h, s, draws, which):
    """Strongest NumPy alternative: matrices once, then a masked minimum per draw."""
    tt, hh, ss = (1.0 - x @ x.T for x in (t, h, s))
    for m in (tt, hh, ss):
        np.fill_diagonal(m, np.inf)
    ts, hs = 1.0 - t @ s.T, 1.0 - h @ s.T
    out = []
    for b in which:
        it, ih, is_ = (d[b] for d in draws)
        pt, ph, ps = (
            np.bincount(i, minlength=n) > 0
            for i, n in zip((it, ih, is_), (len(t), len(h), len(s)), strict=True)
        )

        def masked(m, rows, cols_present):
            return np.where(cols_present[None, :], m[rows], np.inf).min(axis=1)

        own_s = masked(ss, is_, ps)
        aa_ts = 0.5 * (
            np.mean(masked(tt, it, pt) < masked(ts, it, ps))
            + np.mean(own_s < masked(ts.T, is_, pt))
        )
        aa_hs = 0.5 * (
            np.mean(masked(hh, ih, ph) < masked(hs, ih, ps))
            + np.mean(own_s < masked(hs.T, is_, ph))
        )
        out.append((aa_ts, aa_hs, aa_hs - aa_ts))
    return np.array(out)


def timed(fn):
    start = time.perf_counter()
    value = fn()
    return value, time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1000)
    parser.add_argument("--dim", type=int, default=512)
    parser.add_argument("--bootstrap", type=int, default=1000)
    parser.add_argument("--permutations", type=int, default=9999)
    parser.add_argument("--baseline-draws", type=int, default=10)
    parser.add_argument("--big", type=int, default=100_000)
    args = parser.parse_args()
    threads = default_threads()
    torch.set_num_threads(threads)
    print(
        f"threads {threads} of {len(os.sched_getaffinity(0))} CPUs; load average "
        f"{os.getloadavg()[0]:.1f} (a busy machine: compare the ratios, not the seconds)"
    )
    t, h, s = data(args.n, args.dim)

    # 1. flagging
    res, t_ida = timed(
        lambda: flagging(t, h, s, percentiles=PERCENTILES, n_permutations=args.permutations, rng=0)
    )
    (tau, observed, p_np), t_np = timed(lambda: numpy_flagging(t, h, s, args.permutations, 0))
    same = (
        np.allclose(res.thresholds, tau, rtol=0, atol=1e-12)
        and np.array_equal(res.n_synthetic_flagged, observed)
        and np.array_equal(res.p_values, p_np)
    )
    print(
        f"\n1. flagging {args.n}x{args.n}x{args.n}, dim {args.dim}, {args.permutations} "
        f"permutations: idaudit {t_ida:.2f} s, straightforward NumPy {t_np:.2f} s, "
        f"ratio {t_np / t_ida:.1f}x; identical thresholds, counts and p-values: {same}"
    )
    print(f"   synthetic % at p={PERCENTILES}: {np.round(100 * res.synthetic_rate, 1).tolist()}")

    # 2. NNAA
    nn, t_nnaa = timed(lambda: nnaa(t, h, s, n_bootstrap=args.bootstrap, rng=0))
    gen = np.random.default_rng(0)  # the documented recipe (no cap below max_samples)
    draws = [
        np.argsort(gen.random((args.bootstrap, len(x))), axis=1)[:, : half_size(len(x))]
        for x in (t, h, s)
    ]
    k = min(args.baseline_draws, args.bootstrap)
    ref, t_plain = timed(lambda: numpy_nnaa_draws(t, h, s, draws, range(k)))
    kv = min(100, args.bootstrap)
    vec, t_vec = timed(lambda: vectorised_nnaa_draws(t, h, s, draws, range(kv)))
    plain_all = t_plain * args.bootstrap / k
    vec_all = t_vec * args.bootstrap / kv
    print(
        f"\n2. NNAA {args.n}x{args.n}x{args.n}, dim {args.dim}, {args.bootstrap} draws: "
        f"idaudit {t_nnaa:.2f} s (privacy loss {nn.privacy_loss:+.4f}, 95% "
        f"[{nn.ci['privacy_loss'][0]:+.4f}, {nn.ci['privacy_loss'][1]:+.4f}])"
    )
    print(
        f"   straightforward NumPy: {t_plain:.2f} s for {k} draws -> {plain_all:.0f} s for "
        f"{args.bootstrap}; ratio {plain_all / t_nnaa:.0f}x; identical draws: "
        f"{np.array_equal(ref, nn.bootstrap[:k])}"
    )
    print(
        f"   vectorised NumPy:      {t_vec:.2f} s for {kv} draws -> {vec_all:.1f} s for "
        f"{args.bootstrap}; ratio {vec_all / t_nnaa:.1f}x; identical draws: "
        f"{np.array_equal(vec, nn.bootstrap[:kv])}"
    )

    # 3. flagging against a big training set
    big = unit(np.random.default_rng(1).standard_normal((args.big, args.dim)))
    q = np.concatenate([h, s])
    (d_ida, _), t_big = timed(lambda: nearest_neighbour_distances(q, big))

    def numpy_blocks():
        out = np.empty(len(q))
        for i in range(0, len(q), 100):
            out[i : i + 100] = (1.0 - q[i : i + 100] @ big.T).min(axis=1)
        return out

    d_np, t_big_np = timed(numpy_blocks)
    _, t_flag_big = timed(lambda: flagging(big, h, s, n_permutations=args.permutations))
    print(
        f"\n3. nearest training image for {len(q)} queries among {args.big} (dim "
        f"{args.dim}): idaudit {t_big:.2f} s, blocked NumPy {t_big_np:.2f} s (ratio "
        f"{t_big_np / t_big:.1f}x; max |difference| {np.abs(d_ida - d_np).max():.1e}); whole "
        f"flagging with {args.permutations} permutations: {t_flag_big:.2f} s; peak block "
        f"{8 * 83 * args.big / 2**20:.0f} MiB"
    )


if __name__ == "__main__":
    main()
