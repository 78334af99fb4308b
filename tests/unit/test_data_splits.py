import numpy as np
import pytest

from idaudit.data import EmbeddingSet, split_identities
from idaudit.exceptions import InvalidInputError


@pytest.fixture
def es():
    sizes = {"a": 10, "b": 4, "c": 5, "d": 33, "e": 100}
    labels = [k for k, n in sizes.items() for _ in range(n)]
    x = np.random.default_rng(2).normal(size=(len(labels), 6))
    return EmbeddingSet(x, labels)


def test_test_counts_follow_the_documented_rule(es):
    dev, test = split_identities(es, test_size=0.3, rng=0)
    # round(0.3 n) half up, then at least 2 rows per side
    assert test.counts == {"a": 3, "b": 2, "c": 2, "d": 10, "e": 30}
    assert dev.counts == {"a": 7, "b": 2, "c": 3, "d": 23, "e": 70}
    _, test_half = split_identities(es, test_size=0.5, rng=0)
    assert test_half.counts["c"] == 3  # 2.5 rounds half up


def test_sides_partition_each_identity(es):
    dev, test = split_identities(es, rng=3)
    for label in es.identities:
        whole = {tuple(r) for r in es.get(label)}
        d = {tuple(r) for r in dev.get(label)}
        t = {tuple(r) for r in test.get(label)}
        assert d.isdisjoint(t)
        assert d | t == whole
    assert dev.sha256 == test.sha256 == es.sha256


def test_deterministic_and_seed_dependent(es):
    d1, t1 = split_identities(es, rng=0)
    d2, t2 = split_identities(es, rng=np.random.default_rng(0))
    np.testing.assert_array_equal(t1.embeddings, t2.embeddings)
    np.testing.assert_array_equal(d1.embeddings, d2.embeddings)
    _, t3 = split_identities(es, rng=1)
    assert not np.array_equal(t1.get("e"), t3.get("e"))


def test_split_of_an_identity_ignores_other_identities(es):
    _, full = split_identities(es, rng=4)
    _, part = split_identities(es.subset(["d", "e"]), rng=4)
    np.testing.assert_array_equal(full.get("d"), part.get("d"))
    np.testing.assert_array_equal(full.get("e"), part.get("e"))


def test_too_small_identity_is_named():
    es = EmbeddingSet(np.random.default_rng(0).normal(size=(7, 3)), ["a"] * 4 + ["tiny"] * 3)
    with pytest.raises(
        InvalidInputError, match=r"identity 'tiny' has 3 row\(s\); splitting needs at least 4"
    ):
        split_identities(es)


def test_bad_arguments(es):
    with pytest.raises(InvalidInputError, match=r"`test_size` must be in \(0, 1\); got 1.0"):
        split_identities(es, test_size=1.0)
    with pytest.raises(TypeError, match="`es` must be an EmbeddingSet"):
        split_identities(np.eye(3))


# -- exact duplicates -------------------------------------------------------------------------


@pytest.fixture
def dup_es():
    """Identities whose rows repeat with multiplicities 1 to 4 (a: 30 rows, b: 12, c: 25)."""
    gen = np.random.default_rng(5)
    blocks, labels = [], []
    for label, n_distinct in (("a", 12), ("b", 5), ("c", 10)):
        distinct = gen.normal(size=(n_distinct, 3))
        copies = gen.integers(1, 5, size=n_distinct)
        rows = np.repeat(distinct, copies, axis=0)
        blocks.append(rows[gen.permutation(len(rows))])  # copies scattered over the input
        labels += [label] * len(rows)
    return EmbeddingSet(np.concatenate(blocks), labels, normalize=False)


def test_no_duplicate_group_straddles_the_split(dup_es):
    assert dup_es.n_duplicates_ > 0
    for seed in range(20):
        dev, test = split_identities(dup_es, test_size=0.3, rng=seed)
        for label, n in dup_es.counts.items():
            d = {r.tobytes() for r in dev.get(label)}
            t = {r.tobytes() for r in test.get(label)}
            assert d.isdisjoint(t), (seed, label)
            assert dev.counts[label] + test.counts[label] == n
            # never above the documented target, and at least two rows each side
            target = min(max(int(np.floor(0.3 * n + 0.5)), 2), n - 2)
            assert 2 <= test.counts[label] <= target
            assert dev.counts[label] >= 2


def test_row_level_split_lets_copies_straddle(dup_es):
    # the same data without grouping: some copy lands on both sides for some seed
    straddles = 0
    for seed in range(20):
        dev, test = split_identities(dup_es, rng=seed, group_duplicates=False)
        d = {r.tobytes() for r in dev.get("a")}
        straddles += not d.isdisjoint({r.tobytes() for r in test.get("a")})
    assert straddles > 0


def test_grouping_does_not_move_a_split_without_duplicates(es):
    # same rng -> the same rows as the row-level split whenever every row is distinct
    for seed in range(5):
        grouped = split_identities(es, rng=seed)
        rows = split_identities(es, rng=seed, group_duplicates=False)
        for one, two in zip(grouped, rows, strict=True):
            np.testing.assert_array_equal(one.embeddings, two.embeddings)
            np.testing.assert_array_equal(one.labels, two.labels)


def test_split_is_the_documented_permutation_prefix(es):
    # the split written out from its documented recipe (not through idaudit): a 63-bit base
    # seed from rng, a SeedSequence keyed by the SHA-256 of repr(label), and the first n_test
    # rows of that generator's permutation; the certificates depend on exactly these rows
    import hashlib
    import math

    for seed in range(3):
        base = int(np.random.default_rng(seed).integers(0, 2**63 - 1, size=1, dtype=np.int64)[0])
        dev, test = split_identities(es, rng=seed)
        for label in es.counts:  # labels as Python objects: repr('a'), not repr(np.str_('a'))
            rows = es.get(label)
            n = len(rows)
            n_test = min(max(math.floor(0.3 * n + 0.5), 2), n - 2)
            digest = hashlib.sha256(repr(label).encode()).digest()
            key = (int.from_bytes(digest[:4], "little"), int.from_bytes(digest[4:8], "little"))
            perm = np.random.default_rng(np.random.SeedSequence(base, spawn_key=key)).permutation(n)
            want = {rows[i].tobytes() for i in perm[:n_test]}
            assert {r.tobytes() for r in test.get(label)} == want
            assert {r.tobytes() for r in dev.get(label)} == {
                rows[i].tobytes() for i in perm[n_test:]
            }


def test_grouped_split_ignores_other_identities_and_is_seeded(dup_es):
    _, full = split_identities(dup_es, rng=4)
    _, part = split_identities(dup_es.subset(["a"]), rng=4)
    np.testing.assert_array_equal(full.get("a"), part.get("a"))
    _, again = split_identities(dup_es, rng=np.random.default_rng(4))
    np.testing.assert_array_equal(full.embeddings, again.embeddings)


def test_too_few_distinct_rows_to_keep_copies_together():
    # "a": one row six times and one other row: its groups (6, 1) cannot give two test rows
    x = np.r_[np.ones((6, 2)), [[2.0, 0.0]], np.arange(8.0).reshape(4, 2) + 3]
    es = EmbeddingSet(x, ["a"] * 7 + ["b"] * 4, normalize=False)
    with pytest.raises(
        InvalidInputError,
        match=r"identity 'a' has 7 rows but only 2 distinct ones; keeping exact duplicates "
        r"together leaves fewer than 2 rows for the test side \(target 2\)",
    ):
        split_identities(es)
    _, test = split_identities(es, group_duplicates=False)
    assert test.counts["a"] == 2
    with pytest.raises(TypeError, match="`group_duplicates` must be a bool; got str"):
        split_identities(es, group_duplicates="yes")
