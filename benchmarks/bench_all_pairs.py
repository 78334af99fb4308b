"""Audit every identity pair of a paper-sized condition, against the per-pair loop.

One synthetic condition the size of seed 000's VGGFace2 conditions (400 identities, 90-100
L2-normalised 512-d embeddings each, seeded; 79,800 unordered pairs):

1. GaussMech + MMD-TV + ROC-HT (AUC) on every pair with ``audit_pairs(es, "all", ...,
   keep="summary")``, against the straightforward per-pair loop of ``bench_audits.py``
   (scipy/scikit-learn). The loop is timed on a prefix of the pairs and extrapolated
   linearly to all of them (printed as such); the numbers of that prefix are compared.
2. KDE-LR at mix 0 and 0.01, and MMD-TV with 10^4-permutation tests: throughput on a prefix
   of the pairs and the projected time for all of them, against the per-pair loops (and the
   vectorised NumPy permutation baseline) on smaller prefixes.
3. The peak resident memory of every timed run (each runs in its own subprocess).
4. ``--dask``: the workload of part 1 on a prefix, on a 2-worker local cluster (process
   workers) against the local backend, and the overhead.
5. ``--load N``: every timing runs while N busy background processes hold cores; the script
   also times ``n_threads`` = 1 and 2 (three audits and KDE-LR) under the same load and prints
   the default against the best setting (the default should stay within 1.5x of it).
6. KDE-LR's numbers on the loop's pairs against the loop's (relative difference).

Usage::

    python benchmarks/bench_all_pairs.py                   # everything, all 79,800 pairs
    python benchmarks/bench_all_pairs.py --pairs 8000      # part 1 on a prefix, projected
    python benchmarks/bench_all_pairs.py --quick           # scaled-down condition (~1 min)
    python benchmarks/bench_all_pairs.py --load 1          # with one busy process
    python benchmarks/bench_all_pairs.py --dask            # also the dask overhead
"""

from __future__ import annotations

import argparse
import json
import math
import multiprocessing
import os
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))

from bench_audits import (
    SEED,
    base_gauss,
    base_kde,
    base_mmd,
    base_mmd_vectorised,
    base_roc,
    make_condition,
    max_diff,
)

import idaudit as ida
from idaudit._validation import spawn_seeds
from idaudit.data import all_pairs


# --------------------------------------------------------------------------- one measured run
def run_part(spec: dict[str, Any]) -> dict[str, Any]:
    """Run one timed part in this (fresh) process; return its time, peak RSS and numbers."""
    cond = spec["condition"]
    es = make_condition(*cond, SEED)
    ids = es.identities
    n_all = len(ids) * (len(ids) - 1) // 2
    n = spec["n_pairs"]
    pairs: Any = "all" if n >= n_all else all_pairs(ids, 0, n)
    kind = spec["kind"]
    fold_seed = spawn_seeds(0, 1)[0] % 2**32  # what ROCHTAuditor(rng=0) uses
    out: dict[str, Any] = {}
    if kind == "kde":  # numba's import and on-disk kernel cache: once per process, not timed
        warm = time.perf_counter()
        ida.KDELRAuditor().fit(es.get(ids[0])[:, :4], es.get(ids[1])[:, :4])
        out["warm_up_seconds"] = time.perf_counter() - warm
    rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    start = time.perf_counter()
    if kind == "three":
        auds = [ida.GaussMechAuditor(), ida.MMDTVAuditor(), ida.ROCHTAuditor(rng=0)]
        kw: dict[str, Any] = {"n_threads": spec.get("n_threads"), "progress": False}
        if spec.get("dask"):
            from distributed import Client, LocalCluster

            with (
                LocalCluster(
                    n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None
                ) as cluster,
                Client(cluster) as client,
            ):
                client.run(lambda: __import__("idaudit"))  # worker start-up is not timed
                start = time.perf_counter()
                ds = ida.audit_pairs(es, pairs, auds, backend="dask", client=client, **kw)
                out["seconds"] = time.perf_counter() - start
        else:
            ds = ida.audit_pairs(es, pairs, auds, **kw)
        k = spec.get("compare", 0)
        out["head"] = {
            v: ds[v].values[:k].tolist()
            for v in ("gaussmech_epsilon", "mmdtv_epsilon", "rocht_auc", "rocht_epsilon")
        }
        out["max_mmdtv"] = float(ds["mmdtv_epsilon"].max())
        out["inf_rocht"] = int(np.isinf(ds["rocht_epsilon"].values).sum())
    elif kind == "kde":
        auds = [ida.KDELRAuditor(0.0), ida.KDELRAuditor(0.01)]
        kw = {"n_threads": spec.get("n_threads"), "progress": False}
        ida.audit_pairs(es, pairs, auds, keep="summary", **kw)
        out["seconds"] = time.perf_counter() - start
        k = spec.get("compare", 0)  # the numbers of the first k pairs, for the loop (not timed)
        head = ida.audit_pairs(es, all_pairs(ids, 0, k), auds, progress=False) if k else None
        out["head"] = {
            v: [] if head is None else head[v].values.tolist()
            for v in ("kdelr_epsilon", "kdelr_mix0.01_epsilon")
        }
    elif kind == "perm":
        ds = ida.audit_pairs(
            es,
            pairs,
            [ida.MMDTVAuditor(n_permutations=10_000, rng=0)],
            keep="summary",
            progress=False,
        )
    elif kind == "loop_three":
        rows = [
            (
                base_gauss(es.get(a), es.get(b)),
                base_mmd(es.get(a), es.get(b), 0, None),
                base_roc(es.get(a), es.get(b), fold_seed),
            )
            for a, b in pairs
        ]
        out["head"] = {
            "gaussmech_epsilon": [r[0]["epsilon"] for r in rows],
            "mmdtv_epsilon": [r[1]["epsilon"] for r in rows],
            "rocht_auc": [r[2]["auc"] for r in rows],
            "rocht_epsilon": [r[2]["epsilon"] for r in rows],
        }
    elif kind == "loop_kde":
        rows = [base_kde(es.get(a), es.get(b), (0.0, 0.01)) for a, b in pairs]
        out["head"] = {
            "kdelr_epsilon": [r[0.0] for r in rows],
            "kdelr_mix0.01_epsilon": [r[0.01] for r in rows],
        }
    elif kind in ("loop_perm", "vec_perm"):
        fn = base_mmd if kind == "loop_perm" else base_mmd_vectorised
        gen = np.random.default_rng(0)
        for a, b in pairs:
            fn(es.get(a), es.get(b), 10_000, gen)
    out.setdefault("seconds", time.perf_counter() - start)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    out["peak_mib"] = peak / 1024
    out["grown_mib"] = (peak - rss0) / 1024
    out["n_pairs"] = n if pairs != "all" else n_all
    out["n_all"] = n_all
    return out


def measure(spec: dict[str, Any]) -> dict[str, Any]:
    """``run_part`` in a fresh interpreter, so peak memory is that run's alone."""
    proc = subprocess.run(
        [sys.executable, __file__, "--part", json.dumps(spec)],
        capture_output=True,
        text=True,
        check=False,
    )
    if proc.returncode:
        raise RuntimeError(f"part {spec} failed:\n{proc.stderr[-3000:]}")
    return dict(json.loads(proc.stdout.strip().splitlines()[-1]))


# --------------------------------------------------------------------------- background load
def _spin() -> None:  # pragma: no cover - runs in the load processes
    while True:
        pass


class Load:
    """``n`` busy single-threaded processes while the block runs."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.procs: list[Any] = []

    def __enter__(self) -> Load:
        ctx = multiprocessing.get_context("spawn")
        self.procs = [ctx.Process(target=_spin, daemon=True) for _ in range(self.n)]
        for p in self.procs:
            p.start()
        return self

    def __exit__(self, *exc: object) -> None:
        for p in self.procs:
            p.terminate()
            p.join()


# --------------------------------------------------------------------------- report
def show_threads(
    what: str, runs: dict[int, dict[str, Any]], default: dict[str, Any], load: int
) -> None:
    """Print each thread setting's time and the default's against the best."""
    print(f"threads ({what}, load {load}):")
    best = min(r["seconds"] for r in runs.values())
    for t, r in runs.items():
        print(f"  n_threads={t}: {r['seconds']:.2f} s")
    print(
        f"  default: {default['seconds']:.2f} s = "
        f"{default['seconds'] / best:.2f} x the best setting (target <= 1.5)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--part", help=argparse.SUPPRESS)
    parser.add_argument("--quick", action="store_true", help="scaled-down condition")
    parser.add_argument("--pairs", type=int, default=None, help="part 1 on this many pairs")
    parser.add_argument("--load", type=int, default=0, help="busy background processes")
    parser.add_argument("--dask", action="store_true", help="also time a 2-worker LocalCluster")
    parser.add_argument(
        "--skip-slow-loops",
        action="store_true",
        help="skip the per-permutation loop baseline (minutes per pair)",
    )
    args = parser.parse_args()
    if args.part:
        print(json.dumps(run_part(json.loads(args.part))))
        return
    cond = (60, 45, 50, 128) if args.quick else (400, 90, 100, 512)
    n_all = cond[0] * (cond[0] - 1) // 2
    n_main = min(args.pairs or n_all, n_all)
    sizes = {  # pairs of each timed run: (idaudit, loop)
        "three": (n_main, 40 if args.quick else 200),
        "kde": (200 if args.quick else 2000, 5 if args.quick else 10),
        "perm": (200 if args.quick else 1000, 1 if args.quick else 2),
    }
    cpus = len(os.sched_getaffinity(0))
    print(
        f"condition: {cond[0]} identities x {cond[1]}-{cond[2]} rows x {cond[3]} dims, "
        f"{n_all} pairs; {cpus} CPUs in the affinity mask; "
        f"background load: {args.load} busy process(es); load average before: "
        f"{os.getloadavg()[0]:.2f}"
    )
    rows: list[tuple[str, float, float, str]] = []

    def project(res: dict[str, Any]) -> float:
        return res["seconds"] * n_all / res["n_pairs"]

    with Load(args.load):
        three = measure(
            {"condition": cond, "kind": "three", "n_pairs": n_main, "compare": sizes["three"][1]}
        )
        loop3 = measure({"condition": cond, "kind": "loop_three", "n_pairs": sizes["three"][1]})
        kde = measure(
            {
                "condition": cond,
                "kind": "kde",
                "n_pairs": sizes["kde"][0],
                "compare": sizes["kde"][1],
            }
        )
        loopk = measure({"condition": cond, "kind": "loop_kde", "n_pairs": sizes["kde"][1]})
        perm = measure({"condition": cond, "kind": "perm", "n_pairs": sizes["perm"][0]})
        vecp = measure({"condition": cond, "kind": "vec_perm", "n_pairs": sizes["perm"][1]})
        loopp = (
            None
            if args.skip_slow_loops
            else measure({"condition": cond, "kind": "loop_perm", "n_pairs": sizes["perm"][1]})
        )
        threads = {
            t: measure(
                {"condition": cond, "kind": "three", "n_pairs": min(n_main, 2000), "n_threads": t}
            )
            for t in sorted({1, 2, cpus})
        }
        default_small = measure({"condition": cond, "kind": "three", "n_pairs": min(n_main, 2000)})
        n_kt = sizes["kde"][0] // 2
        kde_threads = {
            t: measure({"condition": cond, "kind": "kde", "n_pairs": n_kt, "n_threads": t})
            for t in sorted({1, 2, cpus})
        }
        kde_default = measure({"condition": cond, "kind": "kde", "n_pairs": n_kt})
        dask_res = local_res = None
        if args.dask:
            n_d = min(n_main, 4000)
            local_res = measure({"condition": cond, "kind": "three", "n_pairs": n_d})
            dask_res = measure({"condition": cond, "kind": "three", "n_pairs": n_d, "dask": True})
    print(f"load average after: {os.getloadavg()[0]:.2f}")

    def line(name: str, base: float, ours: float, note: str) -> None:
        rows.append((name, base, ours, note))

    line(
        "GaussMech + MMD-TV + ROC-HT, all pairs",
        project(loop3),
        project(three),
        f"loop: {loop3['n_pairs']} pairs timed, x{n_all / loop3['n_pairs']:.0f}; idaudit: "
        + (
            "all pairs"
            if three["n_pairs"] == n_all
            else f"{three['n_pairs']} pairs timed, x{n_all / three['n_pairs']:.1f}"
        ),
    )
    line(
        "KDE-LR mix 0 and 0.01, all pairs (projected)",
        project(loopk),
        project(kde),
        f"loop {loopk['n_pairs']} pairs, idaudit {kde['n_pairs']} pairs, both extrapolated; "
        f"idaudit's one-off kernel load {kde['warm_up_seconds']:.1f} s not included",
    )
    if loopp is not None:
        line(
            "MMD-TV + 10^4 permutations, all pairs (projected, loop)",
            project(loopp),
            project(perm),
            f"loop {loopp['n_pairs']} pairs, idaudit {perm['n_pairs']} pairs",
        )
    line(
        "MMD-TV + 10^4 permutations, all pairs (projected, vectorised)",
        project(vecp),
        project(perm),
        f"vectorised {vecp['n_pairs']} pairs, idaudit {perm['n_pairs']} pairs",
    )
    print()
    print(f"{'part':<62}{'baseline s':>12}{'idaudit s':>11}{'ratio':>8}")
    for name, tb, ti, note in rows:
        print(f"{name:<62}{tb:>12.1f}{ti:>11.1f}{tb / ti:>8.1f}   ({note})")
    print()
    print(
        f"throughput: three audits {three['n_pairs'] / three['seconds']:.0f} pairs/s, "
        f"KDE-LR {kde['n_pairs'] / kde['seconds']:.1f} pairs/s, "
        f"10^4-permutation MMD {perm['n_pairs'] / perm['seconds']:.1f} pairs/s"
    )
    print(
        "peak resident memory (MiB, whole subprocess / grown during the run): "
        + ", ".join(
            f"{k} {r['peak_mib']:.0f}/{r['grown_mib']:.0f}"
            for k, r in (("three", three), ("kde", kde), ("perm", perm), ("loop", loop3))
        )
    )
    k = loop3["n_pairs"]
    diffs = ", ".join(
        f"{v} {max_diff(loop3['head'][v], three['head'][v][:k]):.1e}"
        for v in ("gaussmech_epsilon", "mmdtv_epsilon", "rocht_auc", "rocht_epsilon")
    )
    print(f"largest differences on the first {k} pairs (loop vs idaudit): {diffs}")
    kk = loopk["n_pairs"]
    kde_diffs = ", ".join(
        f"{v} {np.max(np.abs(np.divide(kde['head'][v][:kk], loopk['head'][v]) - 1)):.1e}"
        for v in ("kdelr_epsilon", "kdelr_mix0.01_epsilon")
    )
    print(
        f"KDE-LR on the first {kk} pairs, largest relative difference (loop vs idaudit): "
        f"{kde_diffs}"
    )
    print(
        f"max MMD-TV epsilon over the pairs: {three['max_mmdtv']:.4f}; ROC-HT +inf: "
        f"{three['inf_rocht']} of {three['n_pairs']}"
    )
    print()
    show_threads(f"{min(n_main, 2000)} pairs, three audits", threads, default_small, args.load)
    show_threads(f"{n_kt} pairs, KDE-LR mix 0 and 0.01", kde_threads, kde_default, args.load)
    if dask_res is not None and local_res is not None:
        print(
            f"dask, 2 process workers ({dask_res['n_pairs']} pairs): {dask_res['seconds']:.2f} s "
            f"against local {local_res['seconds']:.2f} s: overhead "
            f"{dask_res['seconds'] / local_res['seconds']:.2f}x (start-up not timed)"
        )
    if not all(math.isfinite(r["seconds"]) for r in (*threads.values(), *kde_threads.values())):
        raise SystemExit(1)  # pragma: no cover


if __name__ == "__main__":
    main()
