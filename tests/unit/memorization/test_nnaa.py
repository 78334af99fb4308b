"""Nearest-neighbour adversarial accuracy (idaudit.memorization._nnaa) against loops and
independent references of the split-half interval and the permutation test."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.spatial.distance import cdist
from scipy.stats import norm

from idaudit.exceptions import InvalidInputError
from idaudit.memorization import (
    MIN_INTERVAL_SIZE,
    nnaa,
    nnaa_from_distances,
)

# ------------------------------------------------------------------ references


def _aa_loops(da_a: np.ndarray, da_b: np.ndarray, db_b: np.ndarray) -> float:
    """AA(A, B) written out point by point from full distance matrices (diagonals excluded)."""
    n_a, n_b = da_b.shape
    closer_a = sum(
        min(da_a[i, j] for j in range(n_a) if j != i) < da_b[i].min() for i in range(n_a)
    )
    closer_b = sum(
        min(db_b[i, j] for j in range(n_b) if j != i) < da_b[:, i].min() for i in range(n_b)
    )
    return 0.5 * (closer_a / n_a + closer_b / n_b)


def _loss_loops(t: np.ndarray, h: np.ndarray, s: np.ndarray, metric: str) -> float:
    d = lambda a, b: cdist(a, b, metric)  # noqa: E731
    return _aa_loops(d(h, h), d(h, s), d(s, s)) - _aa_loops(d(t, t), d(t, s), d(s, s))


def _split_reference(t, h, s, n_bootstrap, seed):
    """The documented split recipe, recomputed half by half from the embeddings with cdist."""
    gen = np.random.default_rng(seed).spawn(2)[0]  # the splits' stream (no cap here)
    orders = [np.argsort(gen.random((n_bootstrap, len(x))), axis=1) for x in (t, h, s)]

    def values(idx):
        def aa(a, c):
            own_a, own_c, cross = (
                cdist(a, a, "cosine"),
                cdist(c, c, "cosine"),
                cdist(a, c, "cosine"),
            )
            np.fill_diagonal(own_a, np.inf)  # a point is not its own neighbour
            np.fill_diagonal(own_c, np.inf)
            return 0.5 * (
                np.mean(own_a.min(1) < cross.min(1)) + np.mean(own_c.min(1) < cross.min(0))
            )

        ts, hs = aa(t[idx[0]], s[idx[2]]), aa(h[idx[1]], s[idx[2]])
        return np.array([ts, hs, hs - ts])

    out = []
    for b in range(n_bootstrap):
        half_a = [o[b, : len(x) // 2] for o, x in zip(orders, (t, h, s), strict=True)]
        half_b = [
            o[b, len(x) // 2 : 2 * (len(x) // 2)] for o, x in zip(orders, (t, h, s), strict=True)
        ]
        out.append(values(half_a) - values(half_b))
    return np.array(out)


def _permutation_reference(t, h, s, n_permutations, seed, metric="cosine"):
    """The documented relabelling recipe, one loop iteration and one cdist per relabelling."""
    gen = np.random.default_rng(seed).spawn(2)[1]  # the relabellings' stream
    pooled = np.concatenate([t, h])
    n_t = len(t)
    observed = _loss_loops(t, h, s, metric)
    draws = np.argsort(gen.random((n_permutations, len(pooled))), axis=1)
    exceed = 0
    for order in draws:
        new_t, new_h = pooled[order[:n_t]], pooled[order[n_t:]]
        exceed += _loss_loops(new_t, new_h, s, metric) >= observed - 1e-12
    return (1 + exceed) / (1 + n_permutations)


# ------------------------------------------------------------------ point values


def test_nnaa_point_estimate_matches_loops() -> None:
    gen = np.random.default_rng(7)
    t, h = gen.standard_normal((25, 6)), gen.standard_normal((22, 6))
    s = np.concatenate([t[:10] + 0.05 * gen.standard_normal((10, 6)), gen.standard_normal((9, 6))])
    res = nnaa(t, h, s, n_bootstrap=0, n_permutations=0, metric="euclidean")
    d = lambda a, b: cdist(a, b)  # noqa: E731
    assert res.aa_train_synth == pytest.approx(_aa_loops(d(t, t), d(t, s), d(s, s)), abs=1e-15)
    assert res.aa_heldout_synth == pytest.approx(_aa_loops(d(h, h), d(h, s), d(s, s)), abs=1e-15)
    assert res.privacy_loss == pytest.approx(res.aa_heldout_synth - res.aa_train_synth)
    assert np.isnan(res.ci["privacy_loss"]).all()
    assert np.isnan(res.p_value)
    assert res.interval_note.startswith("no interval: sets of 25, 22, 19 images")


# ------------------------------------------------------------------ permutation test


@pytest.mark.parametrize(("sizes", "copies"), [((5, 4, 6), 0), ((6, 6, 5), 4)])
def test_nnaa_p_value_equals_a_brute_force_loop(sizes: tuple[int, int, int], copies: int) -> None:
    gen = np.random.default_rng(sum(sizes) + copies)
    t, h, s = (gen.standard_normal((n, 3)) for n in sizes)
    s[:copies] = t[:copies] + 0.05 * gen.standard_normal((copies, 3))  # memorised images
    res = nnaa(t, h, s, n_bootstrap=0, n_permutations=60, rng=4)
    assert res.p_value == _permutation_reference(t, h, s, 60, 4)
    assert res.n_permutations == 60


def test_nnaa_p_value_is_exact_at_two_images_per_set() -> None:
    # 2 images per set: 6 relabellings of 4 real images, each as likely under H0; the p-value
    # is valid (>= 1/(1+B), on the grid k/(1+B)) even though no interval can be reported
    x = np.random.default_rng(3).standard_normal((3, 2, 4))
    res = nnaa(*x, n_permutations=99, rng=1)
    assert 0.01 <= res.p_value <= 1.0
    assert round(res.p_value * 100, 9).is_integer()
    assert res.p_value == _permutation_reference(*x, 99, 1)


def test_nnaa_p_value_is_one_sided_for_memorisation() -> None:
    gen = np.random.default_rng(5)
    t, h = gen.standard_normal((2, 30, 8))
    towards_train = nnaa(t, h, t + 0.05 * gen.standard_normal((30, 8)), n_bootstrap=0, rng=0)
    towards_held = nnaa(t, h, h + 0.05 * gen.standard_normal((30, 8)), n_bootstrap=0, rng=0)
    assert towards_train.privacy_loss > 0.3
    assert towards_train.p_value == 1 / 1000
    assert towards_held.privacy_loss < -0.3
    assert towards_held.p_value == 1.0


# ------------------------------------------------------------------ split-half interval


def test_nnaa_split_half_interval_matches_the_documented_recipe() -> None:
    gen = np.random.default_rng(8)
    t, h = gen.standard_normal((30, 5)), gen.standard_normal((25, 5))  # 25: one image left out
    s = t[:22] + 0.3 * gen.standard_normal((22, 5))
    res = nnaa(t, h, s, n_bootstrap=40, n_permutations=0, rng=11)
    ref = _split_reference(t, h, s, 40, 11)
    np.testing.assert_allclose(res.bootstrap, ref, atol=1e-15)
    # Var(full) = max((n // 2) / n) * mean((θ(A) - θ(B))²) / 2, here max(15/30, 12/25, 11/22)
    se = np.sqrt(0.5 * np.mean(ref**2, axis=0) / 2)
    point = np.array([res.aa_train_synth, res.aa_heldout_synth, res.privacy_loss])
    z = norm.ppf(0.975)
    for i, name in enumerate(("aa_train_synth", "aa_heldout_synth", "privacy_loss")):
        assert res.std_error[name] == pytest.approx(se[i], rel=1e-12)
        lo, hi = (-1.0, 1.0) if name == "privacy_loss" else (0.0, 1.0)  # clipped to the range
        expected = np.clip([point[i] - z * se[i], point[i] + z * se[i]], lo, hi)
        assert res.ci[name] == pytest.approx(tuple(expected), rel=1e-12)
    assert res.interval_method == "split_half"
    assert res.n_bootstrap == 40


def test_nnaa_intervals_are_clipped_to_the_range_of_each_number() -> None:
    # synthetic = the training images themselves, held-out far away: AA(train, synth) = 0,
    # AA(held-out, synth) = 1, loss = 1 on the full data, but not in every half-split (a
    # half of the training set need not hold the copies in the synthetic half), so the
    # unclipped interval would reach below 0 and above 1
    gen = np.random.default_rng(2)
    t = gen.standard_normal((24, 4))
    h = 100.0 + gen.standard_normal((24, 4))
    res = nnaa(t, h, t.copy(), n_bootstrap=50, n_permutations=0, metric="euclidean")
    assert (res.aa_train_synth, res.aa_heldout_synth, res.privacy_loss) == (0.0, 1.0, 1.0)
    assert res.std_error["privacy_loss"] > 0.01
    assert res.std_error["aa_train_synth"] > 0.01
    assert res.ci["aa_train_synth"][0] == 0.0
    assert res.ci["privacy_loss"][1] == 1.0
    for name, (lo, hi) in res.ci.items():
        low_end = -1.0 if name == "privacy_loss" else 0.0
        assert low_end <= lo <= hi <= 1.0, name


def test_nnaa_reports_no_interval_below_the_minimum_size() -> None:
    gen = np.random.default_rng(4)
    small = nnaa(*gen.standard_normal((3, 2, 4)), n_bootstrap=100, n_permutations=19)
    assert small.below_min_size
    assert small.interval_method == "none"
    assert all(np.isnan(v).all() for v in small.ci.values())  # no (0.5, 0.5) any more
    assert small.n_bootstrap == 0
    assert small.bootstrap.shape == (0, 3)
    assert "at least 20 in each" in small.interval_note
    assert 0.0 < small.p_value <= 1.0  # the test is still reported
    n = MIN_INTERVAL_SIZE
    t, h, s = (
        gen.standard_normal((n, 4)),
        gen.standard_normal((n, 4)),
        gen.standard_normal((n - 1, 4)),
    )
    assert nnaa(t, h, s, n_bootstrap=20).below_min_size
    ok = nnaa(t, h, gen.standard_normal((n, 4)), n_bootstrap=20, n_permutations=0)
    assert not ok.below_min_size
    assert ok.interval_note == ""
    assert np.isfinite(ok.ci["privacy_loss"]).all()


def test_nnaa_streams_are_independent_and_seeded() -> None:
    x = np.random.default_rng(6).standard_normal((3, 22, 4))
    a = nnaa(*x, n_bootstrap=30, n_permutations=50, rng=9)
    b = nnaa(*x, n_bootstrap=30, n_permutations=80, rng=9)
    c = nnaa(*x, n_bootstrap=60, n_permutations=50, rng=9)
    np.testing.assert_array_equal(a.bootstrap, b.bootstrap)  # splits ignore n_permutations
    assert a.p_value == c.p_value  # relabellings ignore n_bootstrap
    assert a.p_value == nnaa(*x, n_bootstrap=30, n_permutations=50, rng=9).p_value


def test_nnaa_cap_and_precomputed_route_agree() -> None:
    gen = np.random.default_rng(9)
    t, h, s = (
        gen.standard_normal((40, 4)),
        gen.standard_normal((24, 4)),
        gen.standard_normal((30, 4)),
    )
    kw = {"max_samples": 20, "n_bootstrap": 25, "n_permutations": 40, "rng": 3}
    a = nnaa(t, h, s, metric="euclidean", **kw)
    x = np.concatenate([t, h, s])
    b = nnaa_from_distances(cdist(x, x), (40, 24, 30), **kw)
    assert (a.n_train, a.n_heldout, a.n_synthetic) == (20, 20, 20)
    np.testing.assert_allclose(a.bootstrap, b.bootstrap, atol=1e-12)
    assert a.p_value == b.p_value
    # the cap is a seeded subset drawn in the order train, held-out, synthetic
    keep = np.random.default_rng(3)
    it = np.sort(keep.choice(40, 20, replace=False))
    ih = np.sort(keep.choice(24, 20, replace=False))
    is_ = np.sort(keep.choice(30, 20, replace=False))
    c = nnaa(t[it], h[ih], s[is_], n_bootstrap=0, n_permutations=0, metric="euclidean")
    assert c.aa_train_synth == a.aa_train_synth


# ------------------------------------------------------------------ results


def test_nnaa_frame_columns_and_statuses() -> None:
    x = np.random.default_rng(0).standard_normal((3, 20, 4))
    frame = nnaa(*x, n_bootstrap=5, n_permutations=9).to_frame("dlib")
    assert list(frame.columns) == [
        "metric", "aa_train_synth", "aa_heldout_synth", "privacy_loss", "ci_lower", "ci_upper",
        "aa_train_synth_ci_lower", "aa_train_synth_ci_upper", "aa_heldout_synth_ci_lower",
        "aa_heldout_synth_ci_upper", "n_train", "n_heldout", "n_synthetic", "n_bootstrap",
        "p_value", "n_permutations", "smallest_p_value", "interval_method", "below_min_size",
    ]  # fmt: skip
    status = frame.attrs["status"]
    assert status["ci_lower"] == "sample_estimate"  # asymptotic interval
    assert status["p_value"] == "sample_estimate"
    assert status["n_train"] == status["below_min_size"] == "descriptive"
    assert set(frame.columns) - {"metric"} == set(status)
    assert frame.attrs["interval_note"] == ""


def test_nnaa_to_xarray_carries_the_test_and_the_flag(tmp_path) -> None:
    x = np.random.default_rng(1).standard_normal((3, 6, 4))
    res = nnaa(*x, n_bootstrap=5, n_permutations=9)
    ds = res.to_xarray()
    assert float(ds["p_value"]) == res.p_value
    assert ds["p_value"].attrs["status"] == "sample_estimate"
    assert bool(ds["below_min_size"])
    assert np.isnan(float(ds["ci_lower"]))
    assert ds.attrs["setting.interval_method"] == "none"
    assert "at least 20" in ds.attrs["setting.interval_note"]
    pytest.importorskip("scipy.io")
    path = tmp_path / "nnaa.nc"
    ds.to_netcdf(path)  # string attrs and a boolean flag round-trip


def test_nnaa_bad_input() -> None:
    x = np.ones((3, 4)) + np.eye(3, 4)
    with pytest.raises(InvalidInputError, match="`n_bootstrap` must be >= 0; got -5"):
        nnaa(x, x, x, n_bootstrap=-5)
    with pytest.raises(InvalidInputError, match="`n_permutations` must be >= 0; got -1"):
        nnaa(x, x, x, n_permutations=-1)
    with pytest.raises(InvalidInputError, match="`n_permutations` must be >= 0; got -2"):
        nnaa_from_distances(np.zeros((9, 9)), (3, 3, 3), n_permutations=-2)
    with pytest.raises(InvalidInputError, match="`heldout` must hold at least 2 rows"):
        nnaa(x, x[:1], x)
    with pytest.raises(InvalidInputError, match=r"\(9, 9\) for sizes \(3, 3, 3\); got \(8, 8\)"):
        nnaa_from_distances(np.zeros((8, 8)), (3, 3, 3))


@pytest.mark.parametrize("seed", [0, 1])
def test_nnaa_interval_is_centred_on_the_estimate_despite_duplicates(seed: int) -> None:
    # Half the synthetic set are near-copies of training faces. Resampling with replacement
    # duplicates images and changes nearest neighbours, which shifted the old percentile
    # interval well below the estimate (seed 0: 0.275 in [0.008, 0.334]); the split-half
    # interval is symmetric about the estimate unless clipped.
    g = np.random.default_rng(seed)
    t, h = g.standard_normal((2, 60, 16))
    s = np.vstack([t[:30] + 0.05 * g.standard_normal((30, 16)), g.standard_normal((30, 16))])
    res = nnaa(t, h, s, n_bootstrap=200, n_permutations=0, rng=seed)
    for name in ("aa_train_synth", "aa_heldout_synth", "privacy_loss"):
        lo, hi = res.ci[name]
        assert (lo + hi) / 2 == pytest.approx(getattr(res, name), abs=1e-12), name


def _aa_brute(t: np.ndarray, h: np.ndarray, s: np.ndarray) -> float:
    """privacy loss = AA(held-out, synth) - AA(train, synth), written out with cdist."""
    from scipy.spatial.distance import cdist

    def aa(a: np.ndarray, b: np.ndarray) -> float:
        daa, dbb, dab = cdist(a, a), cdist(b, b), cdist(a, b)
        np.fill_diagonal(daa, np.inf)
        np.fill_diagonal(dbb, np.inf)
        left = np.mean(daa.min(axis=1) < dab.min(axis=1))
        right = np.mean(dbb.min(axis=1) < dab.T.min(axis=1))
        return 0.5 * (left + right)

    return aa(h, s) - aa(t, s)


def test_strata_keep_relabellings_within_each_cohort() -> None:
    import itertools

    # two cohorts 5 apart whose train/held-out mixes differ: A has 4 train + 1 held-out,
    # B has 1 train + 4 held-out; relabelling across cohorts would change the null
    gen = np.random.default_rng(11)
    t = np.r_[gen.normal(0, 1, (4, 2)), gen.normal(5, 1, (1, 2))]
    h = np.r_[gen.normal(0, 1, (1, 2)), gen.normal(5, 1, (4, 2))]
    s = np.r_[gen.normal(0, 1, (3, 2)), gen.normal(5, 1, (3, 2))]
    strata = (np.array(list("AAAAB")), np.array(list("ABBBB")))
    observed = _aa_brute(t, h, s)
    real = np.r_[t, h]
    losses = []
    for ta in itertools.combinations([0, 1, 2, 3, 5], 4):  # the 25 within-cohort relabellings
        for tb in itertools.combinations([4, 6, 7, 8, 9], 1):
            train = list(ta) + list(tb)
            held = [i for i in range(10) if i not in train]
            losses.append(_aa_brute(real[train], real[held], s))
    exact = np.mean(np.asarray(losses) >= observed - 1e-12)  # 0.12 here
    kw = {"metric": "euclidean", "n_bootstrap": 0, "n_permutations": 6000}
    res = nnaa(t, h, s, strata=strata, **kw)
    # Monte Carlo over the 25 equally likely relabellings: sd = sqrt(.12 * .88 / 6000) = 0.004,
    # so 0.02 is five sd; relabelling across cohorts gives 0.33 on the same data
    assert res.p_value == pytest.approx(exact, abs=0.02)
    assert nnaa(t, h, s, **kw).p_value > exact + 0.1
    assert res.privacy_loss == pytest.approx(observed, abs=1e-12)
    d = np.ones((6, 6))
    with pytest.raises(InvalidInputError, match="`distances` must be >= 0"):
        nnaa_from_distances(-d, (2, 2, 2), n_bootstrap=0)
    with pytest.raises(InvalidInputError, match="`strata` must label every heldout row"):
        nnaa(t, h, s, strata=(strata[0], strata[1][:3]), n_bootstrap=0)


# ------------------------------------------------------------------ partial selection


@pytest.mark.parametrize("exclude_diagonal", [False, True])
def test_masked_minimum_by_partial_selection_equals_a_brute_force_masked_minimum(
    exclude_diagonal: bool,
) -> None:
    import torch

    from idaudit.memorization._nnaa_kernel import _SCAN, _MaskedMin

    gen = np.random.default_rng(11)
    n = 3 * _SCAN  # wider than the selection, so some rows fall back to the full minimum
    # integer distances: many ties, also across the edge of each row's selected columns
    d = gen.integers(0, 6, (n, n)).astype(np.float64)
    present = gen.random((40, n)) < np.linspace(0.02, 1.0, 40)[:, None]  # sparse to full
    present[-1] = True  # every column present: the plain row minimum
    present[0] = False  # none present: inf
    kernel = _MaskedMin(torch.from_numpy(d), exclude_diagonal=exclude_diagonal)
    got = kernel(torch.from_numpy(present)).numpy()  # (40, n)
    ref = np.where(present[:, None, :], d[None], np.inf)  # (40, n, n) brute force
    if exclude_diagonal:
        ref[:, np.arange(n), np.arange(n)] = np.inf
    np.testing.assert_array_equal(got, ref.min(axis=2))
    full = kernel(torch.ones((1, n), dtype=torch.bool)).numpy()
    np.testing.assert_array_equal(full[0], ref[-1].min(axis=1))
