"""Coverage, width and power of four NNAA intervals, and the permutation test's rejection rate.

    python benchmarks/study_nnaa_interval.py [--reps 400] [--draws 200] [--permutations 199]
                                             [--truth-reps 20000] [--scenarios null40 ...]
                                             [--save FILE.npz | --from-saved FILE.npz]

Scenarios (Euclidean distances; train, held-out and synthetic sizes, dimension):

* ``null40``, ``null80``, ``null60``, ``null64``: training, held-out and synthetic points
  i.i.d. N(0, I_d); 40/40/40 (d = 8), 80/30/50 (d = 8), 60/60/60 (d = 8 and d = 64).
* ``copies40``, ``copies60``, ``copies80``: training and held-out points i.i.d. N(0, I_8);
  every synthetic point is a training point (drawn without replacement) plus N(0, 0.75² I_8)
  noise, which puts the privacy loss near 0.25; 40/40/40, 60/60/60, 80/30/50.
* ``null10`` … ``copies20``: the same laws at 10, 15 and 20 per set, to choose the minimum set
  size below which no interval is reported.

Truth (the estimand of every interval): the expectation of each statistic at the scenario's
set sizes. Under the null it is exact: a point of ``A``'s nearest neighbour among the other
``n_A - 1 + n_B`` points is uniformly one of them, so ``E AA(A, B) = ½[(n_A - 1)/(n_A - 1 +
n_B) + (n_B - 1)/(n_B - 1 + n_A)]`` (0.5 - O(1/n); the loss is 0 for equal sizes and -0.0025
at 80/30/50). For the copies scenarios it is a Monte Carlo mean over ``--truth-reps`` fresh
data sets (standard error printed).

Methods (``--draws`` draws each, 95 % level):

* ``half_sampling``: idaudit's former interval, each draw a random half of every set with the
  neighbours recomputed, centred quantiles of the draws added to the estimate.
* ``fixed_neighbour``: every point's own-versus-cross indicator computed once on the full
  data; percentile bootstrap of the indicator means, resampling each set with replacement.
* ``with_replacement``: a with-replacement resample of every set, nearest neighbours
  recomputed (a duplicate is at distance 0 from its copy), percentile interval.
* ``split_half``: the new default, :func:`idaudit.memorization.nnaa` (a normal interval from
  the variance of disjoint half-splits). Below idaudit's minimum set size the study's own
  implementation of the same recipe is used (marked ``*``), since idaudit reports none there.

Columns: ``coverage`` of the truth; ``width`` = mean width / (2 · 1.96 · sd of the estimate
over reps); ``excl0`` = share of intervals excluding 0 (power under copies, for the loss);
``perm`` = share of permutation p-values <= 0.05 (size under the null, power under copies).

Size-adjusted power. A method whose interval is too narrow excludes 0 more often under the
null as well as under memorisation, so raw power rewards under-coverage. When a copies
scenario and the null scenario of the same sizes and dimension were both run (``null40`` and
``copies40``, ``null60`` and ``copies60``, ``null80`` and ``copies80``), the study also prints
each method's power at the *same* one-sided error: with ``lo`` the lower end of a method's
interval for the loss and ``est`` the estimate, a method rejects "no memorisation" when
``est - c (est - lo) > 0``, i.e. when ``est / (est - lo) > c``; ``c`` is set to the 97.5 %
quantile of that ratio over the null scenario's data sets, so that every method rejects 2.5 %
of null data sets (the upper tail of a two-sided 95 % interval; ``c = 1`` for an interval at
its nominal level). The permutation test enters at ``p <= 0.025``, its exact level. The
critical ratio ``c`` is estimated from the null reps, so the adjusted power carries that
estimate's error too. Every method shares the estimate, so at equal error they come close
to the estimate's own power: the row ``estimate alone`` rejects when the estimate exceeds
the 97.5 % quantile of the null twin's estimates. ``--save`` keeps every rep's numbers
(``.npz``); ``--from-saved FILE`` prints this analysis again from them.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch
from scipy.stats import norm

from idaudit.memorization import MIN_INTERVAL_SIZE, nnaa

Z = float(norm.ppf(0.975))
NOISE = 0.75
SCENARIOS: dict[str, tuple[str, tuple[int, int, int], int]] = {
    "null40": ("null", (40, 40, 40), 8),
    "null80": ("null", (80, 30, 50), 8),
    "null60": ("null", (60, 60, 60), 8),
    "null64": ("null", (60, 60, 60), 64),
    "copies40": ("copies", (40, 40, 40), 8),
    "copies60": ("copies", (60, 60, 60), 8),
    "copies80": ("copies", (80, 30, 50), 8),
    **{f"{k}{n}": (k, (n, n, n), 8) for k in ("null", "copies") for n in (10, 15, 20)},
}
NAMES = ("aa_train_synth", "aa_heldout_synth", "privacy_loss")
METHODS = ("half_sampling", "fixed_neighbour", "with_replacement", "split_half")


def draw(kind: str, sizes: tuple[int, int, int], dim: int, gen: np.random.Generator):
    """One data set of the scenario: train, held-out, synthetic."""
    n_t, n_h, n_s = sizes
    t, h = gen.standard_normal((n_t, dim)), gen.standard_normal((n_h, dim))
    if kind == "null":
        return t, h, gen.standard_normal((n_s, dim))
    parents = gen.choice(n_t, size=n_s, replace=n_s > n_t)
    return t, h, t[parents] + NOISE * gen.standard_normal((n_s, dim))


def _masked_min(d: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Row minima of ``d`` (r, c) over the columns in ``mask`` (b, c): (b, r)."""
    return torch.where(mask[:, None, :], d[None], torch.inf).min(dim=-1).values


def _blocks(t, h, s) -> dict[str, torch.Tensor]:
    x = {k: torch.from_numpy(v) for k, v in (("t", t), ("h", h), ("s", s))}
    out = {a + b: torch.cdist(x[a], x[b]) for a, b in ("tt", "hh", "ss", "ts", "hs")}
    for k in ("tt", "hh", "ss"):
        out[k].fill_diagonal_(torch.inf)
    return out


def subset_values(blocks, masks) -> np.ndarray:
    """(b, 3) statistics on the subsets ``masks`` (bool (b, n) per set), neighbours recomputed."""
    mt, mh, ms = masks
    own_s = _masked_min(blocks["ss"], ms)

    def aa(own_a, cross_a, ma, cross_s):
        fa = ((own_a < cross_a) & ma).sum(1).double() / ma.sum(1)
        fs = ((own_s < cross_s) & ms).sum(1).double() / ms.sum(1)
        return 0.5 * (fa + fs)

    ts = aa(_masked_min(blocks["tt"], mt), _masked_min(blocks["ts"], ms), mt,
            _masked_min(blocks["ts"].T, mt))  # fmt: skip
    hs = aa(_masked_min(blocks["hh"], mh), _masked_min(blocks["hs"], ms), mh,
            _masked_min(blocks["hs"].T, mh))  # fmt: skip
    return torch.stack([ts, hs, hs - ts], 1).numpy()


def _parts(gen: np.random.Generator, b: int, n: int, parts: int) -> list[torch.Tensor]:
    """``parts`` disjoint random subsets of size n // parts, as (b, n) masks."""
    order = np.argsort(gen.random((b, n)), axis=1)
    m = n // parts
    out = []
    for k in range(parts):
        mask = np.zeros((b, n), dtype=bool)
        np.put_along_axis(mask, order[:, k * m : (k + 1) * m], True, axis=1)
        out.append(torch.from_numpy(mask))
    return out


def half_sampling(blocks, sizes, point, gen, draws):
    """Former idaudit interval: centred quantiles of random half-samples."""
    masks = []
    for n in sizes:
        order = np.argsort(gen.random((draws, n)), axis=1)[:, : max(2, n // 2)]
        mask = np.zeros((draws, n), dtype=bool)
        np.put_along_axis(mask, order, True, axis=1)
        masks.append(torch.from_numpy(mask))
    v = subset_values(blocks, masks)
    return point + np.quantile(v - v.mean(0), [0.025, 0.975], axis=0)


def fixed_neighbour(blocks, sizes, gen, draws):
    """Percentile bootstrap of the full-data indicators, each set resampled with replacement."""
    b = blocks
    own_s = b["ss"].min(1).values
    ind = {
        "t": (b["tt"].min(1).values < b["ts"].min(1).values).double(),
        "h": (b["hh"].min(1).values < b["hs"].min(1).values).double(),
        "st": (own_s < b["ts"].min(0).values).double(),
        "sh": (own_s < b["hs"].min(0).values).double(),
    }
    w = [torch.from_numpy(gen.multinomial(n, np.full(n, 1 / n), draws)).double() for n in sizes]
    ts = 0.5 * (w[0] @ ind["t"] / sizes[0] + w[2] @ ind["st"] / sizes[2])
    hs = 0.5 * (w[1] @ ind["h"] / sizes[1] + w[2] @ ind["sh"] / sizes[2])
    v = torch.stack([ts, hs, hs - ts], 1).numpy()
    return np.quantile(v, [0.025, 0.975], axis=0)


def with_replacement(blocks, sizes, gen, draws):
    """Percentile bootstrap recomputing neighbours on with-replacement resamples."""
    idx = [torch.from_numpy(gen.integers(0, n, (draws, n))) for n in sizes]
    own = {k: blocks[k].clone().fill_diagonal_(0.0) for k in ("tt", "hh", "ss")}

    def sub(d, rows, cols, is_own):
        m = d[rows[:, :, None], cols[:, None, :]]  # (draws, n_r, n_c)
        if is_own:
            m.diagonal(dim1=1, dim2=2).fill_(torch.inf)  # position, not image: copies count
        return m

    ss = sub(own["ss"], idx[2], idx[2], True).min(2).values
    out = []
    for key, cross, i in (("tt", "ts", 0), ("hh", "hs", 1)):
        aa_own = sub(own[key], idx[i], idx[i], True).min(2).values
        c = sub(blocks[cross], idx[i], idx[2], False)
        out.append(0.5 * ((aa_own < c.min(2).values).double().mean(1)
                          + (ss < c.min(1).values).double().mean(1)))  # fmt: skip
    v = torch.stack([out[0], out[1], out[1] - out[0]], 1).numpy()
    return np.quantile(v, [0.025, 0.975], axis=0)


def split_half_reference(blocks, sizes, point, gen, draws):
    """The split-half recipe written out independently (for sizes below idaudit's minimum)."""
    parts = [_parts(gen, draws, n, 2) for n in sizes]
    a = subset_values(blocks, [p[0] for p in parts])
    b = subset_values(blocks, [p[1] for p in parts])
    ratio = max((n // 2) / n for n in sizes)
    se = np.sqrt(ratio * np.mean((a - b) ** 2, axis=0) / 2)
    lo = np.clip(point - Z * se, [0, 0, -1], [1, 1, 1])
    hi = np.clip(point + Z * se, [0, 0, -1], [1, 1, 1])
    return np.stack([lo, hi])


def truth(kind: str, sizes: tuple[int, int, int], dim: int, reps: int) -> tuple[np.ndarray, float]:
    """Expected (AA_ts, AA_hs, loss) at these sizes: exact under the null, else Monte Carlo."""
    n_t, n_h, n_s = sizes
    if kind == "null":
        aa = [0.5 * ((n - 1) / (n - 1 + n_s) + (n_s - 1) / (n_s - 1 + n)) for n in (n_t, n_h)]
        return np.array([aa[0], aa[1], aa[1] - aa[0]]), 0.0
    gen = np.random.default_rng([31337, *sizes])
    vals = []
    for _ in range(reps):
        blocks = _blocks(*draw(kind, sizes, dim, gen))
        vals.append(subset_values(blocks, [torch.ones((1, n), dtype=bool) for n in sizes])[0])
    vals = np.array(vals)
    return vals.mean(0), float(vals[:, 2].std() / np.sqrt(reps))


def one_rep(kind, sizes, dim, rep, draws, n_perm):
    """Intervals of every method (method -> (2, 3)), the estimate and the p-value."""
    gen = np.random.default_rng([2027, rep])
    t, h, s = draw(kind, sizes, dim, gen)
    blocks = _blocks(t, h, s)
    point = subset_values(blocks, [torch.ones((1, n), dtype=bool) for n in sizes])[0]
    res = nnaa(t, h, s, metric="euclidean", n_bootstrap=draws, n_permutations=n_perm, rng=rep)
    assert np.allclose(point, [res.aa_train_synth, res.aa_heldout_synth, res.privacy_loss])
    out = {
        "half_sampling": half_sampling(blocks, sizes, point, gen, draws),
        "fixed_neighbour": fixed_neighbour(blocks, sizes, gen, draws),
        "with_replacement": with_replacement(blocks, sizes, gen, draws),
    }
    if min(sizes) >= MIN_INTERVAL_SIZE:
        out["split_half"] = np.array([[res.ci[k][j] for k in NAMES] for j in (0, 1)])
    else:
        out["split_half"] = split_half_reference(blocks, sizes, point, gen, draws)
    return point, out, res.p_value


def study(name: str, reps: int, draws: int, n_perm: int, truth_reps: int) -> dict:
    """Run one scenario, print its table and return its per-rep numbers."""
    kind, sizes, dim = SCENARIOS[name]
    start = time.time()
    target, mc_se = truth(kind, sizes, dim, truth_reps)
    points, p_values = [], []
    ci = {m: [] for m in METHODS}
    for rep in range(reps):
        point, out, p = one_rep(kind, sizes, dim, rep, draws, n_perm)
        points.append(point)
        p_values.append(p)
        for m in METHODS:
            ci[m].append(out[m])
    points = np.array(points)
    sd = points.std(0)
    perm = np.mean(np.array(p_values) <= 0.05)
    star = "*" if min(sizes) < MIN_INTERVAL_SIZE else ""
    print(
        f"\n{name}: {kind}, sizes {sizes}, d={dim}, {reps} reps, {draws} draws; truth "
        f"{np.round(target, 4).tolist()} (MC se {mc_se:.4f}); sd of the estimates "
        f"{np.round(sd, 4).tolist()}; "
        f"permutation test rejects {perm:.3f} at 0.05 ({n_perm} permutations); "
        f"{time.time() - start:.0f} s"
    )
    print(f"  {'method':<18}" + "".join(f"{q:>30}" for q in ("AA(train,synth)",
          "AA(held-out,synth)", "privacy loss")) + f"{'excl0':>8}")  # fmt: skip
    print(f"  {'':<18}" + f"{'coverage  width':>30}" * 3)
    for m in METHODS:
        c = np.array(ci[m])  # (reps, 2, 3)
        cov = np.mean((c[:, 0] <= target) & (target <= c[:, 1]), axis=0)
        width = np.mean(c[:, 1] - c[:, 0], axis=0) / (2 * Z * sd)
        excl = np.mean((c[:, 0, 2] > 0) | (c[:, 1, 2] < 0))
        cells = "".join(f"{cov[i]:>21.3f}{width[i]:>9.2f}" for i in range(3))
        print(f"  {m + (star if m == 'split_half' else ''):<18}{cells}{excl:>8.3f}")
    return {
        "points": points,
        "p_values": np.array(p_values),
        **{m: np.array(ci[m]) for m in METHODS},
    }


def rejection_ratio(est: np.ndarray, lo: np.ndarray) -> np.ndarray:
    """``est / (est - lo)``: the rule ``est - c (est - lo) > 0`` rejects when it exceeds ``c``.

    Where the lower end is not below the estimate (``est - lo <= 0``) the rule rejects for
    every ``c >= 0`` if ``est > 0`` (+inf) and for none if ``est <= 0`` (-inf).
    """
    width = est - lo
    safe = np.where(width > 0, width, 1.0)
    return np.where(width > 0, est / safe, np.where(est > 0, np.inf, -np.inf))


def size_adjusted(results: dict[str, dict]) -> None:
    """Power of every method on copies at the one-sided error 0.025 fixed on its null twin."""
    for name, res in results.items():
        kind, sizes, dim = SCENARIOS[name]
        twin = next((k for k, v in SCENARIOS.items() if v == ("null", sizes, dim)), None)
        if kind != "copies" or twin not in results:
            continue
        null = results[twin]
        print(f"\nsize-adjusted power, {name} against {twin} (one-sided 0.025):")
        print(f"  {'method':<18}{'c':>8}{'null rate at c=1':>18}{'power at c=1':>14}"
              f"{'adjusted power':>16}")  # fmt: skip
        for m in METHODS:
            ratio = {
                key: rejection_ratio(r["points"][:, 2], r[m][:, 0, 2])
                for key, r in ((twin, null), (name, res))
            }
            c = float(np.quantile(ratio[twin], 0.975))
            print(
                f"  {m:<18}{c:>8.3f}{np.mean(ratio[twin] > 1):>18.3f}"
                f"{np.mean(ratio[name] > 1):>14.3f}{np.mean(ratio[name] > c):>16.3f}"
            )
        # the estimate alone against its own null quantile: what any interval around the
        # same estimate comes to once its error is fixed
        cut = float(np.quantile(null["points"][:, 2], 0.975))
        power = np.mean(res["points"][:, 2] > cut)
        print(f"  {'estimate alone':<18}{cut:>8.3f}{'':>18}{'':>14}{power:>16.3f}")
        print(
            f"  {'permutation test':<18}{'':>8}{np.mean(null['p_values'] <= 0.025):>18.3f}"
            f"{np.mean(res['p_values'] <= 0.025):>14.3f}{'(exact)':>16}"
        )


def load(path: str) -> dict[str, dict]:
    """The per-rep numbers a ``--save`` run wrote, by scenario."""
    out: dict[str, dict] = {}
    with np.load(path) as saved:
        for key in saved.files:
            scenario, part = key.split(".", 1)
            out.setdefault(scenario, {})[part] = saved[key]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=400)
    parser.add_argument("--draws", type=int, default=200)
    parser.add_argument("--permutations", type=int, default=199)
    parser.add_argument("--truth-reps", type=int, default=20000)
    parser.add_argument("--scenarios", nargs="*", default=list(SCENARIOS))
    parser.add_argument("--save", help="write every rep's numbers to this .npz file")
    parser.add_argument(
        "--from-saved", metavar="NPZ", help="print the size-adjusted power of a --save file"
    )
    args = parser.parse_args()
    if args.from_saved:
        size_adjusted(load(args.from_saved))
        return
    torch.set_num_threads(1)  # small matrices: threads only wait for each other
    results = {
        name: study(name, args.reps, args.draws, args.permutations, args.truth_reps)
        for name in args.scenarios
    }
    size_adjusted(results)
    if args.save:
        np.savez_compressed(
            args.save, **{f"{n}.{k}": v for n, r in results.items() for k, v in r.items()}
        )


if __name__ == "__main__":
    main()
