"""Trade-off maths: the exact band, ε from trade-off points and the μ-GDP conversions."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import special, stats

from idaudit.dp import (
    band_local_level,
    clopper_pearson_upper,
    epsilon_from_error_rates,
    epsilon_from_tradeoff,
    gaussian_epsilon,
    gdp_delta,
    gdp_epsilon,
    gdp_mu_lower_bound,
    gdp_tradeoff,
    noncrossing_probability,
    score_error_counts,
    simultaneous_rate_bounds,
)
from idaudit.exceptions import InvalidInputError


def _multinomial_noncrossing(h: np.ndarray) -> float:
    """Independent O(n³) reference: carry the exact binomial law of N(h_i) forward."""
    n = h.size
    q = np.zeros(n + 1)
    q[0] = 1.0
    prev = 0.0
    for i, hi in enumerate(h):
        p = 0.0 if prev >= 1.0 else (hi - prev) / (1.0 - prev)
        new = np.zeros(n + 1)
        for m in range(n + 1):
            if q[m] > 0:
                new[m:] += q[m] * stats.binom.pmf(np.arange(n + 1 - m), n - m, p)
        new[: i + 1] = 0.0  # N(h_{i+1}) >= i + 1
        q, prev = new, hi
    return float(q.sum())


def _stepwise_noncrossing(h: np.ndarray) -> float:
    """Independent reference: the Poissonised recursion one boundary at a time, no blocks."""
    n = h.size
    lo, q = 0, np.ones(1)
    log_fact = special.gammaln(np.arange(1.0, n + 3.0))
    steps = np.diff(np.concatenate(([0.0], h, [1.0])))
    for i in range(n + 1):
        lam = n * steps[i]
        if lam > 0.0:
            k = np.arange(min(n, int(lam + 12.0 * math.sqrt(lam) + 30.0)) + 1, dtype=np.float64)
            q = np.convolve(q, np.exp(k * math.log(lam) - lam - log_fact[: k.size]))[: n + 1 - lo]
        if i < n and lo < i + 1:
            q, lo = q[i + 1 - lo :], i + 1
        if q.size == 0:
            return 0.0
    return float(q[n - lo] / stats.poisson.pmf(n, n)) if lo + q.size > n else 0.0


# 70 bounds: more than one block of 64 boundaries, so the far counts' block moves too
@pytest.mark.parametrize("n", [1, 2, 5, 17, 40, 70])
def test_noncrossing_matches_multinomial_recursion(n: int) -> None:
    gen = np.random.default_rng(n)
    for _ in range(3):
        h = np.sort(gen.uniform(0, 1, n)) ** 0.5
        # both sum non-negative terms; agreement to 1e-12 absolute
        assert noncrossing_probability(h) == pytest.approx(_multinomial_noncrossing(h), abs=1e-12)


@pytest.mark.parametrize("n", [65, 300, 3000])
def test_noncrossing_matches_the_stepwise_recursion_from_below(n: int) -> None:
    gen = np.random.default_rng(n)
    k = np.arange(n)
    cases = [  # band-shaped bounds (tight everywhere) and random ones with gaps and repeats
        stats.beta.isf(0.025 / math.sqrt(n), k + 1, n - k),
        np.sort(np.round(gen.uniform(0, 1, n) ** 0.7, 2)),
    ]
    for h in cases:
        ref = _stepwise_noncrossing(h)
        got = noncrossing_probability(h)
        # only negligible mass (terms < 1e-24) is dropped: equal to 1e-12, and below the
        # reference but for rounding ((n + 1) * 1e-14 relative at most)
        assert got == pytest.approx(ref, abs=1e-12)
        assert got <= ref * (1 + (n + 1) * 1e-14)


def test_noncrossing_closed_forms() -> None:
    # one point: P(U <= h) = h; min of two below 1/2 (second bound 1): 1 - 1/4
    assert noncrossing_probability([0.3]) == pytest.approx(0.3, abs=1e-14)
    assert noncrossing_probability([0.5, 1.0]) == pytest.approx(0.75, abs=1e-14)
    # all bounds 1: certain
    assert noncrossing_probability(np.ones(50)) == pytest.approx(1.0, abs=1e-12)


def test_band_level_is_exact_and_between_bonferroni_and_pointwise() -> None:
    for n in (10, 100, 1000):
        a = band_local_level(n, 0.025)
        assert 0.025 / n < a < 0.025
        k = np.arange(n)
        h = stats.beta.isf(a, k + 1, n - k)
        assert noncrossing_probability(h) >= 1 - 0.025  # conservative side of the root
        assert noncrossing_probability(h) == pytest.approx(1 - 0.025, abs=1e-5)  # and tight
    assert band_local_level(1, 0.1) == 0.1


@pytest.mark.parametrize(("n", "alpha"), [(12_000, 0.025), (12_000, 0.2), (20_000, 1e-4)])
def test_fast_band_level_is_checked_and_at_most_the_searched_one(n: int, alpha: float) -> None:
    # above 10⁴ draws the level starts from the table and is checked once; it must never be
    # less conservative than the searched root, and (a 5 % margin, table error < 5 %) within
    # 10 % of it
    from idaudit.dp import _tradeoff

    searched = _tradeoff._searched_level(n, alpha)
    fast = band_local_level(n, alpha)
    assert fast == _tradeoff._fast_level(n, alpha)
    assert searched * math.exp(-0.1) <= fast <= searched
    k = np.arange(n)
    h = stats.beta.isf(fast, k + 1, n - k)
    assert noncrossing_probability(h) >= 1 - alpha
    np.testing.assert_array_equal(simultaneous_rate_bounds(n, alpha)[:-1], h)


@pytest.mark.parametrize("row", [1, 5, 8, 12])  # α = 1e-6, 0.025, 0.2, 0.95
def test_band_level_table_is_the_searched_root_at_its_first_size(row: int) -> None:
    # the table's n = 10⁴ column against the root search it was made with (located to 1e-4
    # there, 1e-6 here): its other columns come from the same search at larger n
    from idaudit.dp import _tradeoff

    alpha = float(np.exp(_tradeoff._GRID_LOG_ALPHA[row]))
    searched = _tradeoff._searched_level(10_000, alpha)
    assert math.log(alpha / searched) == pytest.approx(_tradeoff._GRID_LOG_RATIO[row, 0], abs=2e-4)



def _band_table_script():  # type: ignore[no-untyped-def]
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[3] / "scripts" / "band_table.py"
    spec = importlib.util.spec_from_file_location("band_table", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_band_table_script_prints_the_table_as_it_stands_in_the_source() -> None:
    from pathlib import Path

    from idaudit.dp import _tradeoff

    script = _band_table_script()
    assert script.SIZES == (10_000, 30_000, 100_000, 300_000)
    source = Path(_tradeoff.__file__).read_text(encoding="utf-8")
    assert script.render(_tradeoff._GRID_LOG_RATIO) in source


def test_band_table_script_reproduces_the_first_column() -> None:
    # the rows test_band_level_table_is_the_searched_root_at_its_first_size leaves out (each
    # a root search at n = 10⁴, well under a second): together they cover the whole column,
    # here through the script that regenerates the table, to its 4 printed decimals
    from idaudit.dp import _tradeoff

    script = _band_table_script()
    rows = [0, 2, 3, 4, 6, 7, 9, 10, 11]
    alphas = [script.ALPHAS[i] for i in rows]
    got = script.band_table([10_000], alphas)  # (9, 1)
    np.testing.assert_array_equal(got[:, 0], _tradeoff._GRID_LOG_RATIO[rows, 0])

def test_fast_band_level_steps_down_until_the_check_passes(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    # a table that overshoots the root (level 20x too large) is caught by the check: the level
    # returned is still checked, and below the searched one
    from idaudit.dp import _tradeoff

    n, alpha = 12_000, 0.05
    monkeypatch.setattr(_tradeoff, "_tabulated_log_ratio", lambda n, alpha: 1.0)
    fast = _tradeoff._fast_level(n, alpha)
    assert fast <= _tradeoff._searched_level(n, alpha)
    k = np.arange(n)
    assert noncrossing_probability(stats.beta.isf(fast, k + 1, n - k)) >= 1 - alpha


def test_band_is_tighter_than_bonferroni_and_holds_by_simulation() -> None:
    n, alpha = 40, 0.1
    band = simultaneous_rate_bounds(n, alpha)
    bonf = simultaneous_rate_bounds(n, alpha, method="bonferroni")
    assert band.shape == (n + 1,)
    assert band[-1] == 1.0
    assert (band[:-1] < bonf[:-1]).all()
    np.testing.assert_allclose(bonf[:-1], clopper_pearson_upper(np.arange(n), n, alpha / n))
    # the (k+1)-th smallest uniform crosses u_k with probability alpha overall:
    # 40000 draws, sd sqrt(0.1 * 0.9 / 40000) = 0.0015; 4 sd tolerance
    u = np.sort(np.random.default_rng(0).random((40_000, n)), axis=1)
    rate = np.mean((u > band[:-1]).any(axis=1))
    assert rate == pytest.approx(alpha, abs=0.006)


def test_score_error_counts_by_loops() -> None:
    gen = np.random.default_rng(1)
    a, b = gen.integers(0, 5, 30).astype(float), gen.integers(2, 8, 20).astype(float)
    t, fp, fn = score_error_counts(a, b)
    np.testing.assert_array_equal(t, np.unique(np.concatenate([a, b])))
    np.testing.assert_array_equal(fp, [(a >= x).sum() for x in t])
    np.testing.assert_array_equal(fn, [(b < x).sum() for x in t])
    _, fp, fn = score_error_counts(a, b, [np.inf, -np.inf])
    assert fp.tolist() == [0, 30]
    assert fn.tolist() == [20, 0]


def test_epsilon_from_tradeoff_is_the_max_over_points() -> None:
    gen = np.random.default_rng(2)
    x, y = gen.uniform(0, 0.6, 25), gen.uniform(0, 0.6, 25)
    deltas = np.array([0.0, 1e-6, 0.01, 0.3])
    got = epsilon_from_tradeoff(x, y, deltas)
    pts = list(zip(x, y, strict=True))
    ref = [max(epsilon_from_error_rates(xi, yi, d) for xi, yi in pts) for d in deltas]
    np.testing.assert_allclose(got, ref, rtol=1e-13)
    one = epsilon_from_tradeoff(x, y, 0.01, one_sided=True)
    assert isinstance(one, float)
    ref_one = max(max(0.0, math.log((1 - 0.01 - yi) / xi)) for xi, yi in zip(x, y, strict=True))
    assert one == pytest.approx(ref_one, rel=1e-13)


def test_gdp_functions_against_scipy_and_the_gaussian_mechanism() -> None:
    x = np.linspace(0, 1, 11)
    np.testing.assert_allclose(
        gdp_tradeoff(x, 1.3), stats.norm.cdf(stats.norm.ppf(1 - x) - 1.3), atol=1e-15
    )
    for mu in (0.3, 1.0, 3.0):
        for eps in (0.0, 0.5, 2.0):
            direct = stats.norm.cdf(-eps / mu + mu / 2) - math.exp(eps) * stats.norm.cdf(
                -eps / mu - mu / 2
            )
            assert gdp_delta(eps, mu) == pytest.approx(direct, rel=1e-10)
        assert gdp_epsilon(1e-5, mu) == pytest.approx(gaussian_epsilon(1e-5, 1 / mu), rel=1e-14)
        assert gdp_delta(gdp_epsilon(1e-4, mu), mu) == pytest.approx(1e-4, rel=1e-9)
    assert gdp_epsilon(0.0, 1.0) == math.inf
    assert gdp_epsilon(0.1, 0.0) == 0.0


def test_mu_lower_bound_recovers_mu_on_exact_points() -> None:
    x = np.array([0.01, 0.1, 0.5])
    assert gdp_mu_lower_bound(x, gdp_tradeoff(x, 2.0)) == pytest.approx(2.0, rel=1e-12)
    assert gdp_mu_lower_bound([0.0, 1.0], [1.0, 0.0]) == 0.0  # trivial tests: no evidence
    assert gdp_mu_lower_bound([0.0], [0.5]) == math.inf


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: simultaneous_rate_bounds(0, 0.1), "`n` must be an integer >= 1"),
        (lambda: simultaneous_rate_bounds(5, 1.0), r"`alpha` must be in \(0, 1\)"),
        (lambda: simultaneous_rate_bounds(5, 0.1, method="dkw"), "`method` must be"),
        (lambda: noncrossing_probability([0.5, 0.2]), "non-decreasing"),
        (lambda: epsilon_from_tradeoff([0.1], [0.1, 0.2]), "same shape"),
        (lambda: epsilon_from_tradeoff([0.1], [1.2]), r"`fnr_upper` must be in \[0, 1\]"),
        (lambda: score_error_counts([], [1.0]), "`scores_a` must be a non-empty 1-D"),
        (lambda: score_error_counts([np.nan], [1.0]), "must not contain NaN"),
        (lambda: gdp_tradeoff(0.5, -1.0), r"`mu` must be in \[0, inf\]"),
    ],
)
def test_errors(call, match) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(InvalidInputError, match=match):
        call()


def test_epsilon_from_tradeoff_equals_the_dense_maximum_in_chunks() -> None:
    from idaudit.dp import epsilon_from_tradeoff

    gen = np.random.default_rng(5)
    x, y = gen.random(3000), gen.random(3000)
    deltas = np.linspace(0.0, 0.5, 3001)  # more (delta, point) terms than one chunk holds
    got = epsilon_from_tradeoff(x, y, deltas)
    # the dense maximum of the two Kairouz-Oh-Viswanath forms, written out on a subset
    for d in deltas[::500]:
        with np.errstate(divide="ignore", invalid="ignore"):
            terms = np.r_[np.log((1 - d - y) / x), np.log((1 - d - x) / y), 0.0]
        ref = np.nanmax(np.where(np.isfinite(terms) | (terms > 0), terms, np.nan))
        assert got[np.searchsorted(deltas, d)] == pytest.approx(ref, rel=1e-12)


def test_band_falls_back_to_bonferroni_below_a_resolvable_level() -> None:
    from idaudit.dp import band_local_level, simultaneous_rate_bounds

    for alpha in (1e-11, 1e-15, 1e-17):  # 1 - alpha within the recursion's rounding of 1
        assert band_local_level(50, alpha) == pytest.approx(alpha / 50, rel=1e-12)
        bonf = simultaneous_rate_bounds(50, alpha, method="bonferroni")
        np.testing.assert_array_equal(simultaneous_rate_bounds(50, alpha), bonf)
    assert band_local_level(50, 0.05) > 0.05 / 50  # the calibrated band above that


# --------------------------------------------------------------------------- kept bound tables
def _bounds_point_by_point(n: int, level: float) -> np.ndarray:
    """Brute force: one scipy call per count, then the running maximum and the final 1."""
    u = [float(stats.beta.isf(level, k + 1, n - k)) for k in range(n)]
    return np.concatenate((np.maximum.accumulate(u), [1.0]))


def test_kept_bound_tables_equal_scipy_point_by_point() -> None:
    from idaudit.dp import _tradeoff

    _tradeoff._BOUND_TABLES.clear()
    for n, alpha in ((1, 0.3), (37, 0.025), (500, 0.025), (500, 0.05), (501, 0.025)):
        for _ in range(2):  # made, then read back from the store
            got = simultaneous_rate_bounds(n, alpha, method="bonferroni")
            ref = _bounds_point_by_point(n, alpha / n)
            np.testing.assert_array_equal(got, ref)  # the same bits
            # and jax_privacy's form, beta.ppf(1 - level): equal up to its rounding of 1 - level
            k = np.arange(n)
            ppf = np.where(k < n, stats.beta.ppf(1 - alpha / n, k + 1, n - k), 1.0)
            np.testing.assert_allclose(got[:-1], np.maximum.accumulate(ppf), rtol=1e-9)
    band = simultaneous_rate_bounds(300, 0.025)
    np.testing.assert_array_equal(band, _bounds_point_by_point(300, band_local_level(300, 0.025)))


def test_kept_bound_tables_are_keyed_by_size_and_level() -> None:
    from idaudit.dp import _tradeoff

    store = _tradeoff._BOUND_TABLES
    store.clear()
    first = simultaneous_rate_bounds(200, 0.05, method="bonferroni")
    assert (store.hits, store.misses) == (0, 1)
    # another size, another level, the band at the same size: each its own table
    other_n = simultaneous_rate_bounds(201, 0.05, method="bonferroni")
    other_alpha = simultaneous_rate_bounds(200, 0.01, method="bonferroni")
    band = simultaneous_rate_bounds(200, 0.05)
    assert (store.hits, store.misses) == (0, 4)
    assert set(store.keys()) == {
        (200, 0.05 / 200),
        (201, 0.05 / 201),
        (200, 0.01 / 200),
        (200, band_local_level(200, 0.05)),
    }
    np.testing.assert_array_equal(other_n, _bounds_point_by_point(201, 0.05 / 201))
    np.testing.assert_array_equal(other_alpha, _bounds_point_by_point(200, 0.01 / 200))
    assert other_alpha[0] > first[0]
    assert band[0] < first[0]
    # a caller's copy can be written without touching the kept table
    first[:] = -1.0
    again = simultaneous_rate_bounds(200, 0.05, method="bonferroni")
    assert store.hits == 1
    np.testing.assert_array_equal(again, _bounds_point_by_point(200, 0.05 / 200))


def test_kept_bound_tables_stay_under_their_byte_cap() -> None:
    from idaudit.dp._tradeoff import _TableCache

    store = _TableCache(max_bytes=3 * 8 * 101)  # three tables of 101 floats
    for n in range(100, 106):
        store.get((n,), lambda n=n: np.zeros(101))
    assert store.keys() == [(103,), (104,), (105,)]  # least recently used first out
    store.get((103,), lambda: np.ones(101))  # a hit: still zeros, now most recent
    assert store.keys() == [(104,), (105,), (103,)]
    table = store.get((103,), lambda: np.ones(101))
    assert not table.any()
    assert not table.flags.writeable


def test_score_error_counts_at_every_score_equal_union_and_searchsorted() -> None:
    gen = np.random.default_rng(7)
    for _ in range(20):
        n_a, n_b = gen.integers(1, 60, 2)
        # rounded scores: many ties within and across classes; infinities and both zeros
        a = np.round(gen.normal(0, 1, n_a), 1)
        b = np.round(gen.normal(0.5, 1, n_b), 1)
        a[gen.random(n_a) < 0.1] = -np.inf
        b[gen.random(n_b) < 0.1] = np.inf
        a[gen.random(n_a) < 0.1] = -0.0
        t, fp, fn = score_error_counts(a, b)
        ref_t = np.union1d(a, b)
        np.testing.assert_array_equal(t, ref_t)
        np.testing.assert_array_equal(fp, [(a >= x).sum() for x in ref_t])
        np.testing.assert_array_equal(fn, [(b < x).sum() for x in ref_t])
        assert fp.dtype == fn.dtype == np.int64


def test_pareto_along_thresholds_keeps_the_lexsort_frontier() -> None:
    from idaudit.dp._tradeoff import _pareto

    gen = np.random.default_rng(3)
    for _ in range(50):
        m = int(gen.integers(1, 40))
        # points along ascending thresholds: FPR non-increasing, FNR non-decreasing, with ties
        x = np.sort(gen.integers(0, 8, m) / 8.0)[::-1].copy()
        y = np.sort(gen.integers(0, 8, m) / 8.0)
        xs, ys = _pareto(x, y)
        order = np.lexsort((y, x))  # the general path, written out
        best = np.minimum.accumulate(np.r_[np.inf, y[order][:-1]])
        keep = y[order] < best
        np.testing.assert_array_equal(xs, x[order][keep])
        np.testing.assert_array_equal(ys, y[order][keep])


def test_gdp_mu_lower_bound_is_the_max_over_all_points() -> None:
    gen = np.random.default_rng(4)
    for _ in range(30):
        x, y = gen.uniform(0, 1, (2, int(gen.integers(1, 30))))
        x[gen.random(x.size) < 0.2] = 0.0
        y[gen.random(y.size) < 0.2] = 1.0
        with np.errstate(invalid="ignore"):
            every = stats.norm.isf(x) - stats.norm.ppf(y)  # closed form at every point
        ref = max(0.0, float(np.max(np.where(np.isnan(every), -np.inf, every))))
        assert gdp_mu_lower_bound(x, y) == pytest.approx(ref, rel=1e-12)
