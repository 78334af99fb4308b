"""Hypothesis properties of the auditors and of audit_pairs."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from idaudit import (
    EmbeddingSet,
    GaussMechAuditor,
    KDELRAuditor,
    MMDTVAuditor,
    audit_pairs,
)

SETTINGS = settings(
    max_examples=15, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow]
)


def sample(seed: int, n: int, d: int, shift: float = 0.0, scale: float = 1.0) -> np.ndarray:
    """Continuous data (no ties, no constant coordinates) from an integer seed."""
    return np.random.default_rng(seed).normal(shift, scale, size=(n, d))


pair_args = st.tuples(
    st.integers(0, 2**31),  # seed
    st.integers(3, 14),  # n_a
    st.integers(3, 14),  # n_b
    st.integers(1, 5),  # d
    st.floats(-1.0, 1.0),  # shift of B
)

SYMMETRIC = [GaussMechAuditor(), KDELRAuditor(), KDELRAuditor(mix=0.01), MMDTVAuditor()]


@SETTINGS
@given(args=pair_args)
@pytest.mark.parametrize("auditor", SYMMETRIC, ids=lambda a: a.label)
def test_symmetric_in_the_pair(auditor: object, args: tuple) -> None:
    seed, n_a, n_b, d, shift = args
    a, b = sample(seed, n_a, d), sample(seed + 1, n_b, d, shift)
    ab = type(auditor)(**auditor.get_params()).fit(a, b).epsilon_  # type: ignore[attr-defined]
    ba = type(auditor)(**auditor.get_params()).fit(b, a).epsilon_  # type: ignore[attr-defined]
    assert ab == pytest.approx(ba, rel=1e-9, abs=1e-12)
    assert ab >= 0.0


@SETTINGS
@given(args=pair_args, perm_seed=st.integers(0, 1000))
@pytest.mark.parametrize("auditor", SYMMETRIC, ids=lambda a: a.label)
def test_invariant_to_row_order(auditor: object, args: tuple, perm_seed: int) -> None:
    seed, n_a, n_b, d, shift = args
    a, b = sample(seed, n_a, d), sample(seed + 1, n_b, d, shift)
    gen = np.random.default_rng(perm_seed)
    fit = type(auditor)(**auditor.get_params()).fit  # type: ignore[attr-defined]
    want = fit(a, b).epsilon_
    got = (
        type(auditor)(**auditor.get_params())
        .fit(  # type: ignore[attr-defined]
            a[gen.permutation(n_a)], b[gen.permutation(n_b)]
        )
        .epsilon_
    )
    assert got == pytest.approx(want, rel=1e-9, abs=1e-12)


@SETTINGS
@given(seed=st.integers(0, 2**31), d=st.integers(1, 6), scale=st.floats(0.1, 10.0))
def test_mmd2_near_zero_under_one_distribution(seed: int, d: int, scale: float) -> None:
    a, b = sample(seed, 60, d, scale=scale), sample(seed + 1, 60, d, scale=scale)
    aud = MMDTVAuditor().fit(a, b)
    # unbiased: centred on 0 with sd ~ 1/n; an identity difference gives MMD^2 ~ 0.1 and more
    assert abs(aud.mmd2_) < 0.05
    assert aud.epsilon_ < 0.25


@SETTINGS
@given(
    seed=st.integers(0, 2**31),
    sizes=st.lists(st.integers(2, 9), min_size=2, max_size=6),
    n_pairs=st.integers(1, 6),
    batch_size=st.integers(1, 4),
)
def test_schema_and_batch_equality_for_any_pairs(
    seed: int, sizes: list[int], n_pairs: int, batch_size: int
) -> None:
    gen = np.random.default_rng(seed)
    labels = np.repeat(np.arange(len(sizes)), sizes)
    es = EmbeddingSet(gen.normal(size=(len(labels), 3)), labels)
    all_pairs = [(i, j) for i in range(len(sizes)) for j in range(i + 1, len(sizes))]
    pairs = [all_pairs[k % len(all_pairs)] for k in range(n_pairs)]
    auditors = [GaussMechAuditor(), MMDTVAuditor(n_permutations=19, rng=seed)]
    ds = audit_pairs(es, pairs, auditors, batch_size=batch_size, progress=False)
    assert dict(ds.sizes) == {"pair": n_pairs}
    assert ds["n_a"].values.tolist() == [sizes[a] for a, _ in pairs]
    assert ds["n_b"].values.tolist() == [sizes[b] for _, b in pairs]
    for k, (a, b) in enumerate(pairs):
        one = MMDTVAuditor(n_permutations=19, rng=seed).fit(es.get(a), es.get(b))
        assert float(ds["mmdtv_mmd2"][k]) == pytest.approx(one.mmd2_, rel=1e-9, abs=1e-12)
        assert float(ds["mmdtv_pvalue"][k]) == one.pvalue_
        assert 1 / 20 <= one.pvalue_ <= 1.0
