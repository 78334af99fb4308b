"""Tests of KDELRAuditor against a per-dimension scipy.stats.gaussian_kde loop (Eq. 10-11)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import gaussian_kde

import idaudit.audits._kdelr as kdelr_module
from idaudit import EmbeddingSet, InvalidInputError, KDELRAuditor, audit_pairs


def reference(a: np.ndarray, b: np.ndarray, alpha: float, robust: bool = False) -> np.ndarray:
    """Seed 000, Section 3.2 and 4.1, one coordinate at a time with scipy's gaussian_kde."""
    out = []
    for j in range(a.shape[1]):
        kdes, hs = [], []
        for x in (a[:, j], b[:, j]):
            if robust:
                iqr = np.subtract(*np.percentile(x, [75, 25]))
                h = 0.9 * min(np.std(x, ddof=1), iqr / 1.34) * len(x) ** -0.2
                kdes.append(gaussian_kde(x, bw_method=h / np.std(x, ddof=1)))
            else:
                kdes.append(gaussian_kde(x, bw_method="silverman"))
            hs.append(np.sqrt(kdes[-1].covariance[0, 0]))
        both = np.r_[a[:, j], b[:, j]]
        lo, hi = both.min() - 3 * max(hs), both.max() + 3 * max(hs)
        grid = np.linspace(lo, hi, 201)
        u = 1.0 / (hi - lo)
        la = np.log(np.maximum((1 - alpha) * kdes[0](grid) + alpha * u, 1e-12))
        lb = np.log(np.maximum((1 - alpha) * kdes[1](grid) + alpha * u, 1e-12))
        out.append(np.max(np.abs(la - lb)))
    return np.array(out)


@pytest.fixture
def pair() -> tuple[np.ndarray, np.ndarray]:
    gen = np.random.default_rng(2)
    a = gen.normal(size=(30, 6))
    b = np.c_[gen.normal(0.4, 1.5, size=(25, 5)), gen.standard_t(2, size=(25, 1))]
    a /= np.linalg.norm(a, axis=1, keepdims=True)
    b /= np.linalg.norm(b, axis=1, keepdims=True)
    return a, b


@pytest.mark.parametrize("alpha", [0.0, 0.01, 1.0])
def test_matches_gaussian_kde_loop(pair: tuple[np.ndarray, np.ndarray], alpha: float) -> None:
    a, b = pair
    aud = KDELRAuditor(mix=alpha).fit(a, b)
    want = reference(a, b, alpha)
    # float64 rounding of two routes to the same densities (~1e-13 relative)
    np.testing.assert_allclose(aud.epsilon_per_dim_, want, rtol=1e-9, atol=1e-9)
    assert aud.epsilon_ == pytest.approx(want.sum(), rel=1e-9)
    if alpha == 1.0:
        assert aud.epsilon_ == 0.0  # both densities are the same uniform


def test_robust_bandwidth_matches(pair: tuple[np.ndarray, np.ndarray]) -> None:
    a, b = pair
    aud = KDELRAuditor(mix=0.01, bandwidth="silverman-robust").fit(a, b)
    np.testing.assert_allclose(aud.epsilon_per_dim_, reference(a, b, 0.01, robust=True), rtol=1e-9)


def test_smoothing_lowers_the_score(pair: tuple[np.ndarray, np.ndarray]) -> None:
    a, b = pair
    raw = KDELRAuditor(mix=0.0).fit(a, b).epsilon_
    smooth = KDELRAuditor(mix=0.01).fit(a, b).epsilon_
    assert smooth < raw  # seed 000, Section 4.4: alpha = 0.01 gives the smaller value


def test_alphas_share_one_density_evaluation(
    pair: tuple[np.ndarray, np.ndarray], monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = []
    original = kdelr_module.kde_on_grid

    def counting(*args: object, **kwargs: object) -> object:
        calls.append(1)
        return original(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(kdelr_module, "kde_on_grid", counting)
    a, b = pair
    es = EmbeddingSet(np.r_[a, b], ["a"] * len(a) + ["b"] * len(b), normalize=False)
    auditors = [KDELRAuditor(0.0), KDELRAuditor(0.01), KDELRAuditor(0.1)]
    ds = audit_pairs(es, [("a", "b")], auditors, progress=False)
    assert len(calls) == 2  # one KDE per identity, shared by the three alphas
    want = KDELRAuditor(0.1).fit(a, b).epsilon_
    assert float(ds["kdelr_mix0.1_epsilon"][0]) == pytest.approx(want, rel=1e-12)


def test_identity_pieces_are_computed_once_per_identity(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # 6 identities, all 15 pairs in chunks of 4: each identity's coordinates, bandwidths and
    # ranges are computed once, and the scores equal one fit per pair
    calls: list[int] = []
    original = kdelr_module._identity_pieces

    def counting(*args: object, **kwargs: object) -> object:
        calls.append(1)
        return original(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(kdelr_module, "_identity_pieces", counting)
    gen = np.random.default_rng(3)
    rows = [gen.normal(0.2 * k, 1.0, size=(12 + k, 4)) for k in range(6)]
    labels = [f"id{k}" for k, r in enumerate(rows) for _ in range(len(r))]
    es = EmbeddingSet(np.concatenate(rows), labels, normalize=False)
    ds = audit_pairs(es, "all", [KDELRAuditor()], batch_size=4, n_threads=1, progress=False)
    assert len(calls) == 6
    pairs = zip(ds["identity_a"].values, ds["identity_b"].values, strict=True)
    for k, (a, b) in enumerate(pairs):
        want = KDELRAuditor().fit(es.get(a), es.get(b)).epsilon_
        assert float(ds["kdelr_epsilon"][k]) == pytest.approx(want, rel=1e-12)


@pytest.mark.parametrize("mix", [0.0, 0.01])
def test_constant_coordinates_have_closed_form_terms(mix: float) -> None:
    # a constant coordinate is a point mass: the same atom on both sides gives equal marginals
    # (term 0); two different atoms, or an atom against a density, an unbounded ratio (+inf)
    gen = np.random.default_rng(0)
    a, b = gen.normal(size=(10, 5)), gen.normal(0.3, 1.2, size=(12, 5))
    a[:, 1], b[:, 1] = 0.25, 0.25  # the same atom
    a[:, 2], b[:, 2] = -0.5, 0.5  # disjoint atoms
    b[:, 3] = 0.1  # an atom against a density (its mean rounds: residuals of ~1e-17)
    aud = KDELRAuditor(mix=mix).fit(a, b)
    per_dim = aud.epsilon_per_dim_
    assert per_dim[1] == 0.0
    assert per_dim[2] == np.inf
    assert per_dim[3] == np.inf
    assert aud.epsilon_ == np.inf
    # the coordinates with densities keep their scipy reference terms
    free = [0, 4]
    np.testing.assert_allclose(per_dim[free], reference(a[:, free], b[:, free], mix), rtol=1e-9)
    # and the order of the identities does not matter (up to the rounding of a swapped sum)
    swapped = KDELRAuditor(mix=mix).fit(b, a).epsilon_per_dim_
    np.testing.assert_allclose(swapped, per_dim, rtol=1e-12)


def test_only_shared_atoms_give_a_finite_sum() -> None:
    gen = np.random.default_rng(1)
    a, b = gen.normal(size=(10, 3)), gen.normal(0.5, 1.0, size=(10, 3))
    a[:, 0], b[:, 0] = 0.7, 0.7
    want = reference(a[:, 1:], b[:, 1:], 0.0).sum()  # the atom adds log(1) = 0
    assert KDELRAuditor().fit(a, b).epsilon_ == pytest.approx(want, rel=1e-9)
    # at mix 1 both smoothed densities are one uniform, atoms or not
    b[:, 2] = 3.0
    assert KDELRAuditor(mix=1.0).fit(a, b).epsilon_ == 0.0


def test_constant_coordinates_through_audit_pairs() -> None:
    # several pairs per density evaluation (identities stacked, padded and masked) give each
    # pair its own closed-form terms; no pair is dropped as a failure
    gen = np.random.default_rng(3)
    rows = [gen.normal(size=(8 + k, 3)) for k in range(3)]
    rows[0][:, 2] = 0.5
    rows[1][:, 2] = 0.5
    labels = [f"id{k}" for k, r in enumerate(rows) for _ in range(len(r))]
    es = EmbeddingSet(np.concatenate(rows), labels, normalize=False)
    ds = audit_pairs(es, "all", [KDELRAuditor()], batch_size=3, n_threads=1, progress=False)
    got = {
        (str(a), str(b)): ds["kdelr_epsilon_per_dim"][k].values
        for k, (a, b) in enumerate(
            zip(ds["identity_a"].values, ds["identity_b"].values, strict=True)
        )
    }
    assert got[("id0", "id1")][2] == 0.0
    assert got[("id0", "id2")][2] == np.inf
    assert got[("id1", "id2")][2] == np.inf
    np.testing.assert_allclose(
        got[("id0", "id1")][:2], reference(rows[0][:, :2], rows[1][:, :2], 0.0), rtol=1e-9
    )


@pytest.mark.parametrize(
    ("params", "match"),
    [
        ({"mix": 1.5}, r"`mix` must be in \[0, 1\]; got 1.5"),
        ({"bandwidth": "scott"}, "`bandwidth` must be one of 'silverman', 'silverman-robust'"),
        ({"n_grid": 1}, "`n_grid` must be >= 2; got 1"),
        ({"margin": 0.0}, r"`margin` must be in \(0, inf\)"),
        ({"floor": -1.0}, r"`floor` must be in \(0, inf\)"),
    ],
)
def test_bad_parameters(params: dict, match: str) -> None:
    gen = np.random.default_rng(0)
    with pytest.raises(InvalidInputError, match=match):
        KDELRAuditor(**params).fit(gen.normal(size=(5, 2)), gen.normal(size=(5, 2)))


@pytest.mark.parametrize("compiled", [True, False], ids=["compiled", "torch"])
def test_groups_of_pairs_of_different_sizes_change_nothing(
    monkeypatch: pytest.MonkeyPatch, compiled: bool
) -> None:
    # several pairs per density evaluation (what CUDA does: identities zero-padded to the
    # widest and masked) give each pair exactly its own fit
    import idaudit.ops._kde as kde_module

    monkeypatch.setattr(kde_module, "_COMPILED", compiled)
    monkeypatch.setitem(kdelr_module._ROWS_PER_GROUP, "cpu", 3 * 5)  # 3 pairs of 5-d rows
    gen = np.random.default_rng(11)
    rows = [gen.normal(0.1 * k, 1.0 + 0.1 * k, size=(9 + 3 * k, 5)) for k in range(5)]
    labels = [f"id{k}" for k, r in enumerate(rows) for _ in range(len(r))]
    es = EmbeddingSet(np.concatenate(rows), labels, normalize=False)
    auditors = [KDELRAuditor(), KDELRAuditor(0.01, floor=1e-9, name="smooth")]
    ds = audit_pairs(es, "all", auditors, batch_size=7, n_threads=1, progress=False)
    pairs = zip(ds["identity_a"].values, ds["identity_b"].values, strict=True)
    for k, (a, b) in enumerate(pairs):
        for aud in auditors:
            want = aud.fit(es.get(a), es.get(b)).epsilon_per_dim_
            # the same densities up to rounding in a different order of operations
            np.testing.assert_allclose(
                ds[f"{aud.label}_epsilon_per_dim"][k].values, want, rtol=1e-10
            )


def test_rounded_constant_is_an_atom_and_nearly_constant_is_refused() -> None:
    gen = np.random.default_rng(14)
    a, b = gen.normal(size=(3, 4)), gen.normal(size=(3, 4))
    b[:, 2] = 0.1  # its mean rounds: residuals of ~1e-17, still a constant coordinate
    assert KDELRAuditor(mix=0.01).fit(a, b).epsilon_per_dim_[2] == np.inf
    a, b = gen.normal(size=(10, 3)), gen.normal(size=(10, 3))
    a[:, 1] = 0.0
    a[0, 1] = 1e-160  # a spread 1e160 times below the grid step
    with pytest.raises(InvalidInputError, match="bandwidth of coordinate 1 of identity A"):
        KDELRAuditor().fit(a, b)


def test_floors_below_float64_ratios_stay_finite() -> None:
    # floor 1e-310: the extreme density ratio exceeds 1.8e308, its logarithm does not
    gen = np.random.default_rng(15)
    a, b = gen.normal(0, 0.01, (30, 1)), gen.normal(5, 0.01, (30, 1))
    want = reference_floor(a, b, 1e-310)
    assert KDELRAuditor(floor=1e-310).fit(a, b).epsilon_ == pytest.approx(want, rel=1e-12)


def reference_floor(a: np.ndarray, b: np.ndarray, floor: float) -> float:
    """Eq. 10-11 at mix 0 with a given floor, in logs point by point (scipy's KDEs)."""
    total = 0.0
    for j in range(a.shape[1]):
        ka = gaussian_kde(a[:, j], bw_method="silverman")
        kb = gaussian_kde(b[:, j], bw_method="silverman")
        h = max(np.sqrt(ka.covariance[0, 0]), np.sqrt(kb.covariance[0, 0]))
        both = np.r_[a[:, j], b[:, j]]
        grid = np.linspace(both.min() - 3 * h, both.max() + 3 * h, 201)
        la = np.log(np.maximum(ka(grid), floor))
        lb = np.log(np.maximum(kb(grid), floor))
        total += float(np.max(np.abs(la - lb)))
    return total
