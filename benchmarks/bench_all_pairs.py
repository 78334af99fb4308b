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

``--shape celeba``: a synthetic condition of CelebA's shape (10,177 identities x 30
L2-normalised 512-d rows, 51,780,576 pairs; :func:`make_celeba_condition`: identity centres on
a 16-dimensional curved manifold, multivariate Student-t noise with 3 degrees of freedom):

1. GaussMech + MMD-TV with ``keep="summary"`` on the tiled path (``engine="tiled"``) over
   every pair of the first identities (1,100 of them: 604,450 pairs, 1.17 % of all pairs), and
   on today's path (``engine="chunked"``, the first 20,000 of those pairs) and the
   straightforward per-pair loop (the first 2,000); every time is projected *linearly* to all
   pairs and printed as microseconds per pair and hours, with the ratios to the tiled path.
2. ROC-HT and KDE-LR (mix 0 and 0.01) on the first 500 pairs, projected the same way.
3. The peak resident memory of every timed run (each in its own subprocess, which builds the
   whole condition first, 1.2 GiB of embeddings, then keeps the audited identities only;
   the peak is reset after the build and read from ``/proc/self/status``).
4. The first call's overhead: a fresh process audits all 496 pairs of 32 identities twice.
5. The numbers of all 210 pairs of the first 21 identities: tiled path against the loop and
   against today's path (largest relative difference).
6. ``--load N``: the timings run while N busy processes hold cores; the tiled prefix is also
   timed idle and the ratio printed, per available core.
7. ``--full``: the tiled path on all 51,780,576 pairs (about an hour on 2 cores): time, peak
   resident memory and every output's maximum with the first pair reaching it.

Usage::

    python benchmarks/bench_all_pairs.py                   # everything, all 79,800 pairs
    python benchmarks/bench_all_pairs.py --pairs 8000      # part 1 on a prefix, projected
    python benchmarks/bench_all_pairs.py --quick           # scaled-down condition (~1 min)
    python benchmarks/bench_all_pairs.py --load 1          # with one busy process
    python benchmarks/bench_all_pairs.py --dask            # also the dask overhead
    python benchmarks/bench_all_pairs.py --shape celeba    # CelebA shape, 1.17 % prefix (~5 min)
    python benchmarks/bench_all_pairs.py --shape celeba --quick    # 2,000 identities (~2 min)
    python benchmarks/bench_all_pairs.py --shape celeba --load 1   # with one busy process
    python benchmarks/bench_all_pairs.py --shape celeba --full     # all 51.8 M pairs (~1 h)
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
    if "celeba" in spec:
        return run_celeba_part(spec)
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


# --------------------------------------------------------------------------- CelebA shape
CELEBA = (10_177, 30, 512)  # identities, rows per identity, dimension
CELEBA_QUICK = (2_000, 30, 512)
CELEBA_AUDITORS = ("gaussmech", "mmdtv")


def make_celeba_condition(
    n_identities: int = CELEBA[0],
    n_rows: int = CELEBA[1],
    dim: int = CELEBA[2],
    seed: int = SEED,
    *,
    latent_dim: int = 16,
    df: float = 3.0,
) -> ida.EmbeddingSet:
    r"""Many small identities on a low-dimensional manifold, with heavy-tailed noise.

    Parameters
    ----------
    n_identities, n_rows, dim : int
        Identities (labels ``id00000``, ``id00001``, ...), rows per identity, dimension.
    seed : int
        Seed of the one generator everything is drawn from.
    latent_dim : int, default 16
        Dimension of the identity manifold.
    df : float, default 3.0
        Degrees of freedom of the Student-t noise (``> 2``).

    Returns
    -------
    EmbeddingSet
        ``n_identities * n_rows`` L2-normalised float64 rows.

    Notes
    -----
    Identity centres are :math:`c = g(z W)`, normalised, with :math:`z \sim N(0, I_k)`,
    :math:`W` a fixed random :math:`k \times d` map with :math:`N(0, 1/k)` entries and
    :math:`g(h) = h + \tanh(h)^2 / 2` applied per coordinate (a curved image of the latent
    space, not a linear subspace). Every row is :math:`c + s\,u / \sqrt{w / \nu}` with
    :math:`u \sim N(0, I_d)` and :math:`w \sim \chi^2_\nu` drawn per row (multivariate
    Student t, :math:`\nu` = ``df``), then L2-normalised. The scale
    :math:`s = 1.6 / \sqrt{d} \cdot \sqrt{(\nu - 2) / \nu}` gives the noise the per-coordinate
    variance of :func:`bench_audits.make_condition`'s Gaussian noise (standard deviation
    :math:`1.6 / \sqrt{d}`), with occasional rows far from their centre.
    """
    gen = np.random.default_rng(seed)
    lift = gen.normal(scale=1 / math.sqrt(latent_dim), size=(latent_dim, dim))  # (k, d)
    h = gen.normal(size=(n_identities, latent_dim)) @ lift  # (identities, d)
    centres = h + 0.5 * np.tanh(h) ** 2
    centres /= np.linalg.norm(centres, axis=1, keepdims=True)
    scale = 1.6 / math.sqrt(dim) * math.sqrt((df - 2) / df)
    x = np.empty((n_identities * n_rows, dim))
    step = 1024  # identities drawn at a time, in place in ``x``
    for lo in range(0, n_identities, step):
        hi = min(lo + step, n_identities)
        block = x[lo * n_rows : hi * n_rows].reshape(hi - lo, n_rows, dim)  # a view
        gen.standard_normal(out=block)
        block *= scale / np.sqrt(gen.chisquare(df, size=(hi - lo, n_rows, 1)) / df)
        block += centres[lo:hi, None, :]
        block /= np.linalg.norm(block, axis=2, keepdims=True)
    labels = np.repeat(np.array([f"id{k:05d}" for k in range(n_identities)]), n_rows)
    return ida.EmbeddingSet(x, labels)


def n_pairs_of(n_identities: int) -> int:
    """Unordered pairs of ``n_identities`` identities."""
    return n_identities * (n_identities - 1) // 2


def prefix_identities(n_identities: int, share: float = 0.01) -> int:
    """The fewest identities, rounded up to a multiple of 100, whose pairs reach ``share``."""
    target = share * n_pairs_of(n_identities)
    n = math.ceil((1 + math.sqrt(1 + 8 * target)) / 2)
    return min(n_identities, math.ceil(n / 100) * 100)


def relative_diff(x: Any, y: Any) -> float:
    """Largest |x - y| / |y| over the entries (0 where both are 0)."""
    x, y = np.asarray(x, float), np.asarray(y, float)
    den = np.where(y == 0, 1.0, np.abs(y))
    return float(np.max(np.abs(x - y) / den, initial=0.0))


def rss_mib(field: str) -> float:
    """``VmRSS`` (now) or ``VmHWM`` (peak) of this process from ``/proc/self/status``, MiB."""
    with open("/proc/self/status") as fh:
        kib = next(int(line.split()[1]) for line in fh if line.startswith(f"{field}:"))
    return kib / 1024


def reset_peak_rss() -> None:
    """Reset this process's peak resident memory (``VmHWM``) to its current size."""
    with open("/proc/self/clear_refs", "w") as fh:
        fh.write("5")


def run_celeba_part(spec: dict[str, Any]) -> dict[str, Any]:
    """One timed part on the CelebA-shaped condition (see :func:`run_part`)."""
    kind = spec["kind"]
    out: dict[str, Any] = {}
    if kind == "first_call":  # a tiny input: what the first call costs on top of the work
        es = make_celeba_condition(32, *spec["celeba"][1:])
        auds = [ida.MMDTVAuditor()]
        for key in ("first", "second"):
            start = time.perf_counter()
            ida.audit_pairs(es, "all", auds, keep="summary", progress=False)
            out[key] = time.perf_counter() - start
        out["n_pairs"] = n_pairs_of(32)
        return out
    full = make_celeba_condition(*spec["celeba"])
    n_sub = spec.get("n_sub") or len(full.identities)
    es = full if n_sub == len(full.identities) else full.subset(full.identities[:n_sub])
    del full
    ids = es.identities
    n = spec.get("n_pairs") or n_pairs_of(len(ids))
    pairs: Any = "all" if n >= n_pairs_of(len(ids)) else all_pairs(ids, 0, n)
    three = [ida.GaussMechAuditor(), ida.MMDTVAuditor()]
    kw: dict[str, Any] = {"progress": spec.get("progress", False), "keep": "summary"}
    if kind == "kde":  # numba's import and on-disk kernel cache: once per process, not timed
        warm = time.perf_counter()
        ida.KDELRAuditor().fit(es.get(ids[0])[:, :4], es.get(ids[1])[:, :4])
        out["warm_up_seconds"] = time.perf_counter() - warm
    out["build_peak_mib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    reset_peak_rss()  # from here on, VmHWM is the peak while auditing
    out["before_mib"] = rss_mib("VmRSS")
    start = time.perf_counter()
    if kind == "tiled":
        ds = ida.audit_pairs(es, "all", three, engine="tiled", **kw)
        out["engine"] = ds.attrs["setting.engine"]
        out["maxima"] = {
            v: [
                float(ds[f"{v}_max"]),
                str(ds[f"{v}_argmax_identity_a"].values),
                str(ds[f"{v}_argmax_identity_b"].values),
                int(ds[f"{v}_n_at_max"]),
            ]
            for v in (str(k)[: -len("_max")] for k in ds.data_vars if str(k).endswith("_max"))
            if f"{v}_argmax_identity_a" in ds
        }
    elif kind == "chunked":
        ds = ida.audit_pairs(es, pairs, three, engine="chunked", **kw)
        out["engine"] = ds.attrs["setting.engine"]
    elif kind == "loop":
        for a, b in pairs:
            base_gauss(es.get(a), es.get(b))
            base_mmd(es.get(a), es.get(b), 0, None)
    elif kind == "roc":
        ida.audit_pairs(es, pairs, [ida.ROCHTAuditor(rng=0)], **kw)
    elif kind == "kde":
        ida.audit_pairs(es, pairs, [ida.KDELRAuditor(0.0), ida.KDELRAuditor(0.01)], **kw)
    elif kind == "compare":  # the numbers of all pairs of the first identities, three ways
        tiled = ida.audit_pairs(es, "all", three, engine="tiled", progress=False)
        chunked = ida.audit_pairs(es, "all", three, engine="chunked", progress=False)
        loop = [
            (base_gauss(es.get(a), es.get(b)), base_mmd(es.get(a), es.get(b), 0, None))
            for a, b in zip(tiled["identity_a"].values, tiled["identity_b"].values, strict=True)
        ]
        base = {
            "gaussmech_epsilon": [r[0]["epsilon"] for r in loop],
            "mmdtv_epsilon": [r[1]["epsilon"] for r in loop],
            "mmdtv_mmd2": [r[1]["mmd2"] for r in loop],
        }
        same_order = all(
            np.array_equal(tiled[c].values, chunked[c].values) for c in ("identity_a", "identity_b")
        )
        out["same_order"] = same_order
        out["vs_loop"] = {v: relative_diff(tiled[v].values, y) for v, y in base.items()}
        out["vs_chunked"] = {v: relative_diff(tiled[v].values, chunked[v].values) for v in base}
    else:
        raise ValueError(f"unknown part {kind!r}")
    out["seconds"] = time.perf_counter() - start
    out["peak_mib"] = rss_mib("VmHWM")
    out["n_pairs"] = n_pairs_of(len(ids)) if pairs == "all" or kind == "tiled" else n
    return out


def import_seconds() -> float:
    """Seconds to ``import idaudit`` in a fresh interpreter."""
    code = "import time; t = time.perf_counter(); import idaudit; print(time.perf_counter() - t)"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return float(proc.stdout.strip().splitlines()[-1])


def show_maxima(maxima: dict[str, list[Any]]) -> None:
    """Print every output's maximum over the pairs and the first pair reaching it."""
    for v, (value, a, b, count) in maxima.items():
        print(f"  {v:<28} max {value:10.4f}  first at ({a}, {b}), {count} pair(s) at the max")


def celeba_full(cond: tuple[int, int, int]) -> None:
    """Every pair of the condition on the tiled path, in this process; print the summary."""
    n_all = n_pairs_of(cond[0])
    print(f"tiled path (GaussMech + MMD-TV, keep='summary') on all {n_all:,} pairs ...")
    res = run_celeba_part({"celeba": cond, "kind": "tiled", "progress": True})
    print(
        f"time {res['seconds']:.0f} s = {res['seconds'] / 60:.1f} min "
        f"({res['seconds'] / res['n_pairs'] * 1e6:.1f} us/pair; target <= 52 min); "
        f"peak RSS {max(res['peak_mib'], res['build_peak_mib']) / 1024:.2f} GiB "
        f"(target <= 8 GiB): {res['build_peak_mib'] / 1024:.2f} GiB building the condition, "
        f"{res['peak_mib'] / 1024:.2f} GiB auditing ({res['before_mib'] / 1024:.2f} GiB "
        f"before the audit); engine {res['engine']}"
    )
    show_maxima(res["maxima"])


def celeba_main(args: argparse.Namespace) -> None:
    """The ``--shape celeba`` benchmark (see the module docstring)."""
    cond = CELEBA_QUICK if args.quick else CELEBA
    n_all = n_pairs_of(cond[0])
    cpus = len(os.sched_getaffinity(0))
    print(
        f"condition: {cond[0]:,} identities x {cond[1]} rows x {cond[2]} dims (identity "
        f"manifold of dimension 16, Student-t noise, df 3), {n_all:,} pairs; {cpus} CPUs in "
        f"the affinity mask; background load: {args.load} busy process(es); load average "
        f"before: {os.getloadavg()[0]:.2f}"
    )
    if args.full:
        with Load(args.load):
            celeba_full(cond)
        return
    n_sub = min(args.subset or prefix_identities(cond[0]), cond[0])
    n_prefix = n_pairs_of(n_sub)
    small = {"chunked": 2000 if args.quick else 20_000, "loop": 200 if args.quick else 2000}
    n_other = 100 if args.quick else 500

    def spec(kind: str, n_pairs: int | None = None, **extra: Any) -> dict[str, Any]:
        return {"celeba": cond, "n_sub": n_sub, "kind": kind, "n_pairs": n_pairs, **extra}

    idle = measure(spec("tiled")) if args.load else None
    with Load(args.load):
        runs = {
            "straightforward loop (GaussMech + MMD, scipy)": measure(spec("loop", small["loop"])),
            "today's path (engine='chunked')": measure(spec("chunked", small["chunked"])),
            "tiled path (engine='tiled')": measure(spec("tiled")),
        }
        others = {
            "ROC-HT (rng=0)": measure(spec("roc", n_other)),
            "KDE-LR mix 0 and 0.01": measure(spec("kde", n_other)),
        }
        first = measure({"celeba": cond, "kind": "first_call"})
        imported = import_seconds()
    compare = measure({"celeba": cond, "n_sub": 21, "kind": "compare"})
    print(f"load average after: {os.getloadavg()[0]:.2f}")

    def us(res: dict[str, Any]) -> float:
        return res["seconds"] / res["n_pairs"] * 1e6

    def hours(res: dict[str, Any]) -> float:
        return res["seconds"] / res["n_pairs"] * n_all / 3600

    print()
    print(
        f"measured prefix: every pair of the first {n_sub:,} identities = {n_prefix:,} pairs "
        f"= {100 * n_prefix / n_all:.2f} % of the condition's {n_all:,}; the loop and today's "
        f"path on the first pairs of that prefix. Times are projected LINEARLY to all "
        f"{n_all:,} pairs (time per pair x pairs). GaussMech + MMD-TV, keep='summary', "
        f"default threads."
    )
    head = (
        f"{'path':<48}{'pairs timed':>12}{'seconds':>9}{'us/pair':>10}{'projected h':>13}"
        f"{'peak RSS MiB':>14}{'before MiB':>12}"
    )
    print(head)
    for name, r in {**runs, **others}.items():
        print(
            f"{name:<48}{r['n_pairs']:>12,}{r['seconds']:>9.1f}{us(r):>10.1f}{hours(r):>13.2f}"
            f"{r['peak_mib']:>14.0f}{r['before_mib']:>12.0f}"
        )
    loop, chunked, tiled = runs.values()
    kde_warm = others["KDE-LR mix 0 and 0.01"]["warm_up_seconds"]
    print(
        f"ratios (per pair): loop / tiled {us(loop) / us(tiled):.1f}x, chunked / tiled "
        f"{us(chunked) / us(tiled):.1f}x; tiled {us(tiled):.1f} us/pair = "
        f"{hours(tiled) * 60:.0f} min projected for {n_all:,} pairs (target <= 60 us/pair, "
        f"i.e. <= 52 min for 51,780,576 pairs); engines recorded: {chunked['engine']}, "
        f"{tiled['engine']}"
    )
    print(
        f"peak RSS: while auditing (whole process, its subset of the condition held; "
        f"'before': at the start of the audit); building the whole condition first "
        f"{tiled['build_peak_mib'] / 1024:.2f} GiB (target <= 8 GiB for the full run: --full "
        f"measures it); KDE-LR's one-off kernel load {kde_warm:.1f} s not included"
    )
    if idle is not None:
        ratio = tiled["seconds"] / idle["seconds"]
        free = max(cpus - args.load, 1)
        print(
            f"tiled path under load {args.load}: {tiled['seconds']:.1f} s against idle "
            f"{idle['seconds']:.1f} s = {ratio:.2f}x; per available core "
            f"({free} of {cpus}): {ratio * free / cpus:.2f}x (target <= 1.5)"
        )
    print(
        f"first call (fresh process, MMD-TV, all {first['n_pairs']} pairs of 32 identities): "
        f"first {first['first']:.3f} s, second {first['second']:.3f} s, overhead "
        f"{first['first'] - first['second']:.3f} s; 'import idaudit' {imported:.2f} s before it"
    )
    print(
        f"all pairs of the first 21 identities ({n_pairs_of(21)} pairs), largest relative "
        f"difference, tiled vs loop: "
        + ", ".join(f"{v} {d:.1e}" for v, d in compare["vs_loop"].items())
        + "; tiled vs chunked: "
        + ", ".join(f"{v} {d:.1e}" for v, d in compare["vs_chunked"].items())
        + f"; same pair order: {compare['same_order']}"
    )
    print(f"maxima over the measured prefix ({n_prefix:,} pairs, tiled path):")
    show_maxima(tiled["maxima"])


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
    parser.add_argument(
        "--shape",
        choices=("paper", "celeba"),
        default="paper",
        help="paper: 400 identities x 90-100 rows; celeba: 10,177 identities x 30 rows",
    )
    parser.add_argument("--quick", action="store_true", help="scaled-down condition")
    parser.add_argument(
        "--subset", type=int, default=None, help="celeba: identities of the measured prefix"
    )
    parser.add_argument(
        "--full", action="store_true", help="celeba: the tiled path on every pair (~1 h)"
    )
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
    if args.shape == "celeba":
        celeba_main(args)
        return
    if args.full or args.subset:
        parser.error("--full and --subset go with --shape celeba")
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
