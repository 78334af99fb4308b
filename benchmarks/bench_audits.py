"""Time the four audits: straightforward per-pair scipy/scikit-learn loops against idaudit.

One synthetic condition the size of seed 000's VGGFace2 conditions (400 identities, 90-100
L2-normalised 512-d embeddings each, seeded) is audited part by part, as the paper does:

* MMD-TV with 10^4-permutation tests on 100 pairs,
* MMD-TV on 500 pairs,
* KDE-LR at alpha = 0 and 0.01 on 100 pairs,
* ROC-HT (5-fold logistic regression) on 200 pairs,
* GaussMech on 500 pairs.

The baseline is what a careful script would do pair by pair: scipy's ``pdist``/``cdist`` and a
loop over permutations indexing the kernel matrix, ``scipy.stats.gaussian_kde`` per dimension,
``sklearn`` ``LogisticRegression`` per fold with ``roc_curve``/``roc_auc_score``. The
permutation tests have a second, vectorised NumPy baseline: blocks of permutations as 0/1
indicator rows, the statistic as a quadratic form through one product ``P @ K`` per block. It
tests the very same permutations as the loop, so its MMD² and p-values must equal the loop's;
the script prints the largest differences. Everything runs in the same process on the same
machine; after a warm-up every side (loop, vectorised, idaudit) is timed the same way: one
run each, or the best of ``--repeats`` runs each. The script prints both times, the ratio per
part (for the permutation tests against both baselines), overall against the loop baseline
and overall with the vectorised permutation baseline in its place, and the largest difference
between the numbers.

Usage::

    python benchmarks/bench_audits.py              # the full condition (~3 minutes)
    python benchmarks/bench_audits.py --quick      # a scaled-down condition (~20 s)
    python benchmarks/bench_audits.py --threads 1  # torch on one thread (busy machines)
    python benchmarks/bench_audits.py --repeats 3  # best of three runs, every side
"""

from __future__ import annotations

import argparse
import math
import time
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import torch
from scipy.spatial.distance import cdist, pdist
from scipy.stats import gaussian_kde
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import roc_auc_score, roc_curve
from sklearn.model_selection import StratifiedKFold

import idaudit as ida
from idaudit._validation import spawn_seeds

SEED = 20260817


# --------------------------------------------------------------------------- the condition
def make_condition(
    n_identities: int, n_min: int, n_max: int, dim: int, seed: int
) -> ida.EmbeddingSet:
    """Identity centres on the sphere plus isotropic noise, then L2-normalised (as in §4.1)."""
    gen = np.random.default_rng(seed)
    centres = gen.normal(size=(n_identities, dim))
    centres /= np.linalg.norm(centres, axis=1, keepdims=True)
    sizes = gen.integers(n_min, n_max + 1, size=n_identities)
    rows, labels = [], []
    for k, n in enumerate(sizes):
        noise = gen.normal(scale=1.6 / math.sqrt(dim), size=(n, dim))
        rows.append(centres[k] + noise)
        labels += [f"id{k:04d}"] * int(n)
    return ida.EmbeddingSet(np.vstack(rows), labels)


# --------------------------------------------------------------------------- baselines
PERM_BLOCK = 1000  # permutations drawn (and, in the vectorised baseline, evaluated) at a time


def pooled_kernel(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Gaussian kernel on the pooled sample, bandwidth = median pairwise distance."""
    z = np.vstack([a, b])
    sigma = float(np.median(pdist(z)))
    return np.exp(-cdist(z, z, "sqeuclidean") / (2 * sigma**2))  # (n, n)


def mmd_outputs(mmd2: float) -> dict:
    mmd = math.sqrt(max(mmd2, 0.0))
    return {
        "epsilon": math.log((1 + mmd / 2) / (1 - mmd / 2)),
        "epsilon_hs": 2 * math.atanh(mmd / math.sqrt(2)),
        "mmd2": mmd2,
    }


def draw_orders(gen: np.random.Generator, n_perm: int, n: int) -> Iterator[np.ndarray]:
    """Random orderings of the pooled sample, ``PERM_BLOCK`` rows at a time.

    Both permutation baselines draw through this, so they test the very same permutations
    and must give the very same p-values.
    """
    for start in range(0, n_perm, PERM_BLOCK):
        yield np.argsort(gen.random((min(PERM_BLOCK, n_perm - start), n)), axis=1)


def base_mmd(a: np.ndarray, b: np.ndarray, n_perm: int, gen: np.random.Generator) -> dict:
    """Per-pair loop: the statistic from sub-matrices, one permutation at a time."""
    n_a, n_b = len(a), len(b)
    k = pooled_kernel(a, b)

    def stat(ia: np.ndarray, ib: np.ndarray) -> float:
        kaa, kbb, kab = k[np.ix_(ia, ia)], k[np.ix_(ib, ib)], k[np.ix_(ia, ib)]
        return float(
            (kaa.sum() - np.trace(kaa)) / (n_a * (n_a - 1))
            + (kbb.sum() - np.trace(kbb)) / (n_b * (n_b - 1))
            - 2 * kab.mean()
        )

    obs = stat(np.arange(n_a), np.arange(n_a, n_a + n_b))
    out = mmd_outputs(obs)
    if n_perm:
        count = 0
        for orders in draw_orders(gen, n_perm, n_a + n_b):
            for perm in orders:
                count += stat(perm[:n_a], perm[n_a:]) >= obs - 1e-12
        out["pvalue"] = (1 + count) / (1 + n_perm)
    return out


def base_mmd_vectorised(
    a: np.ndarray, b: np.ndarray, n_perm: int, gen: np.random.Generator
) -> dict:
    """Careful NumPy: a block of permutations as 0/1 indicator rows, one product ``P @ K``.

    With the indicator p of group A, S_AA = p'Kp - p'diag(K), S_AB = p'K1 - p'Kp and
    S_BB = 1'K1 - 2p'K1 + p'Kp - (1 - p)'diag(K): the same unbiased MMD^2 as ``base_mmd``.
    """
    n_a, n_b = len(a), len(b)
    n = n_a + n_b
    k = pooled_kernel(a, b)  # (n, n)
    diag, row, total = np.diag(k), k.sum(1), k.sum()  # (n,), (n,), ()

    def stats(p: np.ndarray) -> np.ndarray:  # p: (m, n) indicators of group A
        pkp = ((p @ k) * p).sum(1)  # (m,)
        pk1 = p @ row  # (m,)
        pd = p @ diag  # (m,)
        s_aa = pkp - pd
        s_bb = total - 2 * pk1 + pkp - (diag.sum() - pd)
        s_ab = pk1 - pkp
        return s_aa / (n_a * (n_a - 1)) + s_bb / (n_b * (n_b - 1)) - 2 * s_ab / (n_a * n_b)

    obs = float(stats(np.r_[np.ones(n_a), np.zeros(n_b)][None])[0])
    out = mmd_outputs(obs)
    if n_perm:
        count = 0
        for orders in draw_orders(gen, n_perm, n):
            p = np.zeros(orders.shape)  # (m, n)
            np.put_along_axis(p, orders[:, :n_a], 1.0, axis=1)
            count += int((stats(p) >= obs - 1e-12).sum())
        out["pvalue"] = (1 + count) / (1 + n_perm)
    return out


def base_kde(a: np.ndarray, b: np.ndarray, alphas: tuple[float, ...]) -> dict:
    eps = dict.fromkeys(alphas, 0.0)
    for j in range(a.shape[1]):
        ka = gaussian_kde(a[:, j], bw_method="silverman")
        kb = gaussian_kde(b[:, j], bw_method="silverman")
        h = max(math.sqrt(ka.covariance[0, 0]), math.sqrt(kb.covariance[0, 0]))
        both = np.r_[a[:, j], b[:, j]]
        lo, hi = both.min() - 3 * h, both.max() + 3 * h
        grid = np.linspace(lo, hi, 201)
        pa, pb = ka(grid), kb(grid)
        for alpha in alphas:
            u = alpha / (hi - lo)
            la = np.log(np.maximum((1 - alpha) * pa + u, 1e-12))
            lb = np.log(np.maximum((1 - alpha) * pb + u, 1e-12))
            eps[alpha] += float(np.max(np.abs(la - lb)))
    return eps


def base_roc(a: np.ndarray, b: np.ndarray, fold_seed: int) -> dict:
    x = np.vstack([a, b])
    y = np.r_[np.zeros(len(a)), np.ones(len(b))]
    oof = np.empty(len(y))
    for tr, te in StratifiedKFold(5, shuffle=True, random_state=fold_seed).split(x, y):
        clf = LogisticRegression(C=1.0, max_iter=1000).fit(x[tr], y[tr])
        oof[te] = clf.predict_proba(x[te])[:, 1]
    fpr, tpr, _ = roc_curve(y, oof)
    with np.errstate(divide="ignore", invalid="ignore"):
        up = np.where(tpr > 0, np.log(tpr) - np.log(fpr), 0.0)
        down = np.where(fpr < 1, np.log1p(-fpr) - np.log1p(-tpr), 0.0)
    return {
        "epsilon": float(max(0.0, up.max(), down.max())),
        "auc": float(roc_auc_score(y, oof)),
    }


def base_gauss(a: np.ndarray, b: np.ndarray) -> dict:
    mu_a, mu_b = a.mean(0), b.mean(0)
    s_a = math.sqrt(((a - mu_a) ** 2).sum() / a.size)
    s_b = math.sqrt(((b - mu_b) ** 2).sum() / b.size)
    return {
        "epsilon": float(
            np.linalg.norm(mu_a - mu_b) * math.sqrt(2 * math.log(1.25 / 1e-5)) / max(s_a, s_b)
        )
    }


# --------------------------------------------------------------------------- harness
def timed(fn: Callable[[], Any], repeats: int) -> tuple[float, Any]:
    """Best wall time over ``repeats`` runs, and the last result."""
    best = math.inf
    for _ in range(repeats):
        start = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - start)
    return best, out


def max_diff(x: np.ndarray, y: np.ndarray) -> float:
    """Largest |x - y| over finite entries; inf if the infinite entries differ."""
    x, y = np.asarray(x, float), np.asarray(y, float)
    if not np.array_equal(np.isinf(x), np.isinf(y)) or not np.array_equal(
        x[np.isinf(x)], y[np.isinf(y)]
    ):
        return math.inf
    fin = np.isfinite(x)
    return float(np.max(np.abs(x[fin] - y[fin]), initial=0.0))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="scaled-down condition")
    parser.add_argument("--threads", type=int, default=None, help="torch threads")
    parser.add_argument(
        "--repeats", type=int, default=1, help="runs per timing, best kept (every side alike)"
    )
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    repeats = max(1, args.repeats)
    if args.quick:
        n_id, n_min, n_max, dim = 60, 45, 50, 128
        n_perm_pairs, n_perm, n_mmd, n_kde, n_roc, n_gauss = 10, 2000, 50, 10, 20, 50
    else:
        n_id, n_min, n_max, dim = 400, 90, 100, 512
        n_perm_pairs, n_perm, n_mmd, n_kde, n_roc, n_gauss = 100, 10_000, 500, 100, 200, 500
    es = make_condition(n_id, n_min, n_max, dim, SEED)
    pairs = ida.sample_pairs(es.identities, max(n_mmd, n_gauss, n_roc, n_perm_pairs), rng=0)
    print(
        f"condition: {n_id} identities x {n_min}-{n_max} rows x {dim} dims; "
        f"torch {torch.__version__}, {torch.get_num_threads()} threads; "
        + ("one timed run" if repeats == 1 else f"best of {repeats} timed runs")
        + " per side after a warm-up"
    )
    # warm up both sides (imports, first kernel calls, BLAS threads)
    ida.audit_pairs(
        es,
        pairs[:2],
        [
            ida.GaussMechAuditor(),
            ida.KDELRAuditor(),
            ida.MMDTVAuditor(n_permutations=10),
            ida.ROCHTAuditor(),
        ],
        progress=False,
    )
    a0, b0 = es.get(pairs[0][0]), es.get(pairs[0][1])
    base_mmd(a0, b0, 10, np.random.default_rng(0))
    base_mmd_vectorised(a0, b0, 10, np.random.default_rng(0))
    fold_seed = spawn_seeds(0, 1)[0] % 2**32  # what ROCHTAuditor(rng=0) uses
    rows = []

    def part(
        name: str,
        base_fn: Callable[[], Any],
        ida_fn: Callable[[], Any],
        compare: Callable[[Any, Any], str],
    ) -> Any:
        t_base, base = timed(base_fn, repeats)
        t_ida, ours = timed(ida_fn, repeats)
        rows.append((name, t_base, t_ida, compare(base, ours)))
        print(
            f"  {name}: baseline {t_base:.2f} s, idaudit {t_ida:.2f} s, "
            f"x{t_base / t_ida:.1f}; {rows[-1][3]}",
            flush=True,
        )
        return base

    def samples(k: int) -> list:
        return [(es.get(a), es.get(b)) for a, b in pairs[:k]]

    # 1. permutation tests: the per-permutation loop, then vectorised NumPy on the same permutations
    def base_perm() -> list:
        gen = np.random.default_rng(0)
        return [base_mmd(a, b, n_perm, gen) for a, b in samples(n_perm_pairs)]

    def vec_perm() -> list:
        gen = np.random.default_rng(0)
        return [base_mmd_vectorised(a, b, n_perm, gen) for a, b in samples(n_perm_pairs)]

    def ida_perm() -> Any:
        return ida.audit_pairs(
            es,
            pairs[:n_perm_pairs],
            [ida.MMDTVAuditor(n_permutations=n_perm, rng=0)],
            progress=False,
        )

    def cmp_perm(base: list, ds: Any) -> str:
        e = max_diff([r["epsilon"] for r in base], ds["mmdtv_epsilon"].values)
        p = max_diff([r["pvalue"] for r in base], ds["mmdtv_pvalue"].values)
        return f"max |d eps| {e:.1e}, max |d p| {p:.1e} (p-values: different random permutations)"

    perm_name = f"MMD-TV + {n_perm} permutations, {n_perm_pairs} pairs"
    loop = part(perm_name, base_perm, ida_perm, cmp_perm)
    t_vec, vec = timed(vec_perm, repeats)
    t_perm_ida = rows[-1][2]
    d_mmd2 = max_diff([r["mmd2"] for r in loop], [r["mmd2"] for r in vec])
    d_p = max_diff([r["pvalue"] for r in loop], [r["pvalue"] for r in vec])
    vec_diff = f"vectorised vs loop: max |d mmd2| {d_mmd2:.1e}, max |d p| {d_p:.1e} (same perms)"
    print(
        f"  {perm_name}: vectorised NumPy baseline {t_vec:.2f} s, idaudit {t_perm_ida:.2f} s, "
        f"x{t_vec / t_perm_ida:.1f}; {vec_diff}",
        flush=True,
    )
    # separated identities give p = 1/(1 + B) everywhere, so also compare the two baselines
    # (untimed) where p-values spread: split-half pairs of single identities, as under H0
    halves = [es.get(i) for i in es.identities[:5]]
    gen_loop, gen_vec = np.random.default_rng(1), np.random.default_rng(1)
    null_loop = [base_mmd(x[::2], x[1::2], 2000, gen_loop)["pvalue"] for x in halves]
    null_vec = [base_mmd_vectorised(x[::2], x[1::2], 2000, gen_vec)["pvalue"] for x in halves]
    null_diff = (
        f"split-half null pairs, 2000 perms: loop p {np.round(null_loop, 4).tolist()}, "
        f"max |d p| vectorised vs loop {max_diff(null_loop, null_vec):.1e}"
    )
    print(f"  {null_diff}", flush=True)

    # 2. MMD-TV
    part(
        f"MMD-TV, {n_mmd} pairs",
        lambda: [base_mmd(a, b, 0, np.random.default_rng(0)) for a, b in samples(n_mmd)],
        lambda: ida.audit_pairs(es, pairs[:n_mmd], [ida.MMDTVAuditor()], progress=False),
        lambda base, ds: "max |d eps| {:.1e}, max |d eps_hs| {:.1e}, max |d mmd2| {:.1e}".format(
            max_diff([r["epsilon"] for r in base], ds["mmdtv_epsilon"].values),
            max_diff([r["epsilon_hs"] for r in base], ds["mmdtv_epsilon_hs"].values),
            max_diff([r["mmd2"] for r in base], ds["mmdtv_mmd2"].values),
        ),
    )

    # 3. KDE-LR
    def cmp_kde(base: list, ds: Any) -> str:
        e0 = np.array([r[0.0] for r in base])
        e1 = np.array([r[0.01] for r in base])
        r0 = max_diff(e0, ds["kdelr_epsilon"].values) / np.max(e0)
        r1 = max_diff(e1, ds["kdelr_mix0.01_epsilon"].values) / np.max(e1)
        return f"max relative |d eps| alpha=0: {r0:.1e}, alpha=0.01: {r1:.1e}"

    part(
        f"KDE-LR alpha 0 and 0.01, {n_kde} pairs",
        lambda: [base_kde(a, b, (0.0, 0.01)) for a, b in samples(n_kde)],
        lambda: ida.audit_pairs(
            es, pairs[:n_kde], [ida.KDELRAuditor(0.0), ida.KDELRAuditor(0.01)], progress=False
        ),
        cmp_kde,
    )

    # 4. ROC-HT
    part(
        f"ROC-HT logistic, {n_roc} pairs",
        lambda: [base_roc(a, b, fold_seed) for a, b in samples(n_roc)],
        lambda: ida.audit_pairs(es, pairs[:n_roc], [ida.ROCHTAuditor(rng=0)], progress=False),
        lambda base, ds: "max |d AUC| {:.1e}, max |d eps| {:.1e} ({} of {} eps = +inf)".format(
            max_diff([r["auc"] for r in base], ds["rocht_auc"].values),
            max_diff([r["epsilon"] for r in base], ds["rocht_epsilon"].values),
            int(np.isinf(ds["rocht_epsilon"].values).sum()),
            n_roc,
        ),
    )

    # 5. GaussMech
    part(
        f"GaussMech, {n_gauss} pairs",
        lambda: [base_gauss(a, b) for a, b in samples(n_gauss)],
        lambda: ida.audit_pairs(es, pairs[:n_gauss], [ida.GaussMechAuditor()], progress=False),
        lambda base, ds: "max |d eps| {:.1e}".format(
            max_diff([r["epsilon"] for r in base], ds["gaussmech_epsilon"].values)
        ),
    )

    total_base = sum(r[1] for r in rows)
    total_ida = sum(r[2] for r in rows)
    total_vec = total_base - rows[0][1] + t_vec
    print()
    print(f"{'part':<52}{'baseline s':>11}{'idaudit s':>11}{'ratio':>8}")
    for k, (name, tb, ti, _) in enumerate(rows):
        label = f"{name} (loop)" if k == 0 else name
        print(f"{label:<52}{tb:>11.2f}{ti:>11.2f}{tb / ti:>8.1f}")
        if k == 0:
            label = f"{name} (vectorised)"
            print(f"{label:<52}{t_vec:>11.2f}{ti:>11.2f}{t_vec / ti:>8.1f}")
    for label, tb in (
        ("overall, permutation loop baseline", total_base),
        ("overall, vectorised permutation baseline", total_vec),
    ):
        print(f"{label:<52}{tb:>11.2f}{total_ida:>11.2f}{tb / total_ida:>8.1f}")
    print()
    for name, _, _, diff in rows:
        print(f"{name}: {diff}")
    print(f"{perm_name}: {vec_diff}")
    print(null_diff)


if __name__ == "__main__":
    main()
