"""Tightness of certified ε(δ) from attack scores: idaudit's strategies next to jax_privacy's.

Mechanisms with a known ε(δ): Gaussian with μ = 1 (scores N(0, 1) vs N(1, 1); exactly 1-GDP,
true ε(0) = inf so δ = 0 is not reported for it) and Laplace (Lap(0, 1) vs Lap(1, 1): ε(δ) =
max(0, 1 + 2 ln(1 − δ))). Per class n ∈ {30, 100, 1000, 10⁴}; α = 0.05; seeded repetitions.
Printed: mean certified ε(δ) / true ε(δ) at δ ∈ {0, 1e-5, 1e-3} for

* idaudit ``split``, ``bonferroni``, ``band`` (certified lower bounds), and ``gdp`` (ε of the
  certified μ_lb-GDP curve: a model-based *sample estimate*, shown for comparison only);
* jax_privacy's formulas (tests/jax_privacy_reference.py, re-derived): ``jax-bonf``
  (Clopper–Pearson, Bonferroni over the empirical hull's thresholds, ``one_sided=False``) and
  ``jax-gdp`` (its GDP route, also model-based).

``split`` is also jax_privacy's ``Split`` formula (Clopper–Pearson at α/2 per rate on the
held-out half). The last columns name the tightest strategy of the row among those with a
proof (``split``, ``bonferroni``, ``band``; jax's hull-Bonferroni divides α by a data-chosen
count, see ``--validity``) and give ``band`` / ``jax-bonf``.

Two studies behind docs/certify.md are options:

* ``--validity``: how often jax_privacy's hull-Bonferroni bounds fail, on mechanisms chosen to
  stress the data-chosen hull (identical classes, a "jittered randomized response" whose
  trade-off curve is two straight segments, so every threshold on a segment attains the true
  ε, a short high-ε segment at the corner, Laplace): per scenario the rate of reps where its
  ε(0), or its ε(δ) anywhere on a δ grid, exceeds the truth, and where some certified point's
  true FPR or FNR exceeds its bound, each with a one-sided binomial test against α.
* ``--variants``: other exactly calibrated order-statistic bands (local levels weighted away
  from or toward the extreme counts, or constraints only on a geometric grid of counts with
  the counts in between rounded up to the next grid point), tightness next to the
  equal-local-level band.

Usage::

    python benchmarks/bench_tradeoff.py              # about two minutes on 2 cores
    python benchmarks/bench_tradeoff.py --quick      # fewer repetitions
    python benchmarks/bench_tradeoff.py --validity   # about 15 minutes (2000 reps/scenario)
    python benchmarks/bench_tradeoff.py --variants   # about ten seconds
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
from scipy import optimize, stats

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

import jax_privacy_reference as jref
from idaudit.certify import certify_scores
from idaudit.dp import (
    epsilon_from_tradeoff,
    gdp_epsilon,
    noncrossing_probability,
    score_error_counts,
)

ALPHA = 0.05
DELTAS = (0.0, 1e-5, 1e-3)
MU = 1.0
PROVEN = ("split", "bonferroni", "band")
COLUMNS = ("split", "bonferroni", "band", "gdp*", "jax-bonf", "jax-gdp*")


def _truth(mech: str, delta: float) -> float:
    if mech == "gaussian":
        return float(gdp_epsilon(delta, MU))
    return max(0.0, 1.0 + 2.0 * np.log1p(-delta))


def _sample(mech: str, gen: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    if mech == "gaussian":
        return gen.normal(0.0, 1.0, n), gen.normal(MU, 1.0, n)
    return gen.laplace(0.0, 1.0, n), gen.laplace(1.0, 1.0, n)


def _one(a: np.ndarray, b: np.ndarray, delta: float, seed: int) -> dict[str, float]:
    out: dict[str, float] = {}
    for strategy in ("split", "bonferroni", "band"):
        cert = certify_scores(a, b, alpha=ALPHA, delta=delta, thresholds=strategy, rng=seed)
        out[strategy] = cert.epsilon_lb_
        if strategy == "bonferroni":
            out["gdp*"] = cert.epsilon_gdp_
    out["jax-bonf"] = jref.epsilon_cp(b, a, ALPHA, delta, one_sided=False)
    out["jax-gdp*"] = jref.epsilon_gdp(b, a, ALPHA, delta) if delta > 0 else np.inf
    return out


def main(quick: bool = False) -> None:
    """Print the tightness table."""
    reps = {30: 40, 100: 40, 1000: 10, 10_000: 3} if not quick else {30: 8, 100: 8, 1000: 3}
    print(f"mean certified eps / true eps; alpha = {ALPHA}; Gaussian mu = {MU}, Laplace eps = 1")
    print("(* = model-based GDP value, a sample estimate, not a certified bound)")
    head = f"{'mechanism':9s} {'n':>6s} {'delta':>6s} {'true':>6s} " + " ".join(
        f"{c:>10s}" for c in COLUMNS
    )
    print(head + "  tightest proven  band/jax-bonf")
    for mech in ("gaussian", "laplace"):
        for n, r in reps.items():
            rows = {d: {c: [] for c in COLUMNS} for d in DELTAS}
            for rep in range(r):
                a, b = _sample(mech, np.random.default_rng(rep), n)
                for d in DELTAS:
                    if mech == "gaussian" and d == 0.0:
                        continue
                    for k, v in _one(a, b, d, rep).items():
                        rows[d][k].append(v)
            for d in DELTAS:
                if mech == "gaussian" and d == 0.0:
                    continue
                truth = _truth(mech, d)
                ratio = {c: float(np.mean(rows[d][c])) / truth for c in COLUMNS}
                best = max(PROVEN, key=lambda c: ratio[c])
                cells = " ".join(f"{ratio[c]:10.3f}" for c in COLUMNS)
                rel = ratio["band"] / ratio["jax-bonf"]
                line = f"{mech:9s} {n:6d} {d:6.0e} {truth:6.3f} {cells}  {best:15s} {rel:.3f}"
                print(line, flush=True)


# ---- --validity: jax_privacy's hull-Bonferroni against the truth ---------------------------

VALIDITY_DELTAS = np.array([0.0, 1e-5, 1e-3, 1e-2, 0.1])


def _two_segments(p_a: float, p_b: float) -> tuple:
    """Scores in [0, 2]: mass ``p`` uniform on [1, 2] and ``1 - p`` uniform on [0, 1].

    The likelihood ratio is constant on each half, so the trade-off curve is two straight
    segments and every threshold on the steeper one attains the same ε at δ = 0.
    """

    def sample(gen: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
        a = np.where(gen.random(n) < p_a, 1 + gen.random(n), gen.random(n))
        b = np.where(gen.random(n) < p_b, 1 + gen.random(n), gen.random(n))
        return a, b

    def rates(t: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        tc = np.clip(t, 0.0, 2.0)
        fpr = np.where(tc <= 1, p_a + (1 - p_a) * (1 - tc), p_a * (2 - tc))  # P_A(S >= t)
        fnr = np.where(tc <= 1, (1 - p_b) * tc, (1 - p_b) + p_b * (tc - 1))  # P_B(S < t)
        return fpr, fnr

    grid = np.linspace(0.0, 2.0, 4001)  # the vertices (t = 0, 1, 2) are on the grid
    x, y = rates(grid)

    def truth(d: np.ndarray) -> np.ndarray:
        pts = epsilon_from_tradeoff(np.clip(x, 0, 1), np.clip(y, 0, 1), d)
        return np.asarray(pts, dtype=np.float64)

    return sample, rates, truth


def _validity_scenarios() -> dict[str, tuple]:
    q1, q3, q5 = (1 / (1 + np.exp(e)) for e in (1.0, 3.0, 5.0))
    normal = (
        lambda g, n: (g.normal(0, 1, n), g.normal(0, 1, n)),
        lambda t: (stats.norm.sf(t), stats.norm.cdf(t)),
        lambda d: np.zeros_like(d),
    )
    laplace = (
        lambda g, n: (g.laplace(0, 1, n), g.laplace(1, 1, n)),
        lambda t: (stats.laplace.sf(t), stats.laplace.cdf(t - 1.0)),
        lambda d: np.maximum(0.0, 1.0 + 2.0 * np.log1p(-d)),
    )
    return {
        "identical N(0,1)": normal,
        "jittered RR eps=1": _two_segments(q1, 1 - q1),
        "jittered RR eps=3": _two_segments(q3, 1 - q3),
        "jittered RR eps=5": _two_segments(q5, 1 - q5),
        "corner eps=3 p=.005": _two_segments(0.005, 0.005 * np.exp(3.0)),
        "Laplace eps=1": laplace,
    }


def validity(reps: int) -> None:
    """Print failure rates of jax_privacy's hull-Bonferroni bounds (one-sided binomtest)."""
    sizes = {
        "identical N(0,1)": (30, 100, 1000, 10_000),
        "corner eps=3 p=.005": (100, 1000, 10_000),
        "Laplace eps=1": (30, 1000),
    }
    print(f"jax_privacy hull-Bonferroni (one_sided=False): failure rates over {reps} reps")
    print(
        "| scenario | n | alpha | mean m | eps(0) > truth | any eps(delta) > truth "
        "| any point uncovered |"
    )
    for alpha in (0.2, 0.45):  # jax_privacy requires significance < 0.5
        for name, (sample, rates, truth_of) in _validity_scenarios().items():
            truth = truth_of(VALIDITY_DELTAS)
            for n in sizes.get(name, (30, 1000, 10_000)):
                count = np.zeros(3, dtype=int)  # eps(0), any delta, any point
                m_sum = 0
                for rep in range(reps):
                    a, b = sample(np.random.default_rng([rep, n, int(1000 * alpha)]), n)
                    t, tn, fn = jref.pruned_counts(b, a)
                    s = alpha / len(fn)
                    fnr_u, fpr_u = jref.cp_upper(fn, n, s / 2), jref.cp_upper(n - tn, n, s / 2)
                    eps = epsilon_from_tradeoff(fpr_u, fnr_u, VALIDITY_DELTAS)
                    fpr, fnr = rates(t)
                    count += [
                        eps[0] > truth[0] + 1e-12,
                        np.any(eps > truth + 1e-12),
                        np.any(fpr > fpr_u) or np.any(fnr > fnr_u),
                    ]
                    m_sum += len(fn)
                cells = " | ".join(
                    f"{k / reps:.4f} (p = {stats.binomtest(k, reps, alpha, 'greater').pvalue:.2g})"
                    for k in count
                )
                print(f"| {name} | {n} | {alpha} | {m_sum / reps:.1f} | {cells} |", flush=True)


# ---- --variants: other exactly calibrated bands ---------------------------------------------


def _variant_bounds(n: int, alpha: float, kind: str, param: float) -> np.ndarray:
    """Bounds u_0..u_n of a band with local levels c·w_k, c set so the band holds at 1 − α."""
    k = np.arange(n, dtype=np.float64)
    j = np.minimum(k + 1, n - k)  # distance to the nearer end of the counts
    if kind == "equal":
        w = np.ones(n)
    elif kind == "less-at-ends":
        w = j / (j + param)
    elif kind == "more-at-ends":
        w = 1 + param / j
    else:  # "grid": constraints only where j is on a geometric grid of ratio `param`
        grid = np.unique(np.round(param ** np.arange(80)))
        w = np.isin(j, grid).astype(np.float64)

    def bounds(log_c: float) -> np.ndarray:
        a = np.minimum(np.exp(log_c) * w, 0.5)
        u = np.where(a > 0, stats.beta.isf(np.where(a > 0, a, 0.5), k + 1, n - k), 1.0)
        # u_k may be lowered to min_{i >= k} u_i: V_(k+1) <= V_(i+1) <= u_i, the same event;
        # a count between two grid points is so rounded up to the next grid point
        return np.minimum.accumulate(u[::-1])[::-1]

    def gap(log_c: float) -> float:
        return noncrossing_probability(bounds(log_c)) - (1.0 - alpha)

    lo, hi = np.log(alpha / w.sum()), np.log(min(alpha, 0.5) / w.max())
    root = hi if gap(hi) >= 0 else optimize.brentq(gap, lo, hi, xtol=1e-6)
    while gap(root) < 0:
        root -= 1e-6
    return np.concatenate((bounds(root), [1.0]))


def variants() -> None:
    """Print the tightness of band variants (mean certified ε / true ε; α = 0.05)."""
    kinds = [
        ("equal", 0.0),
        ("less-at-ends", 2.0),
        ("less-at-ends", 10.0),
        ("more-at-ends", 5.0),
        ("grid", 1.25),
        ("grid", 1.5),
    ]
    cases = [("gaussian", 1e-5), ("gaussian", 1e-3), ("laplace", 0.0), ("laplace", 1e-3)]
    print("band variants: mean certified eps / true eps, alpha = 0.05")
    print(f"{'n':>5s} {'variant':18s} " + " ".join(f"{m[:5]} {d:<6g}" for m, d in cases))
    for n, reps in ((30, 200), (100, 200), (1000, 40)):
        bands = {kd: _variant_bounds(n, ALPHA / 2, *kd) for kd in kinds}
        sums = {kd: np.zeros(len(cases)) for kd in kinds}
        for mech in ("gaussian", "laplace"):
            idx = [i for i, c in enumerate(cases) if c[0] == mech]
            deltas = np.array([cases[i][1] for i in idx])
            for rep in range(reps):
                a, b = _sample(mech, np.random.default_rng(rep), n)
                _, fp, fn = score_error_counts(a, b)
                for kd, u in bands.items():
                    sums[kd][idx] += epsilon_from_tradeoff(u[fp], u[fn], deltas)
        for kd in kinds:
            ratio = [sums[kd][i] / reps / _truth(*cases[i]) for i in range(len(cases))]
            label = kd[0] + (f"({kd[1]:g})" if kd[0] != "equal" else "")
            print(f"{n:5d} {label:18s} " + " ".join(f"{r:12.4f}" for r in ratio), flush=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repetitions, n <= 1000")
    parser.add_argument(
        "--validity",
        type=int,
        nargs="?",
        const=2000,
        metavar="REPS",
        help="the jax_privacy validity study (default 2000 reps/scenario)",
    )
    parser.add_argument("--variants", action="store_true", help="the band-variant study")
    args = parser.parse_args()
    if args.validity:
        validity(args.validity)
    elif args.variants:
        variants()
    else:
        main(args.quick)
