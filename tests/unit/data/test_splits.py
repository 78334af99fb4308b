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


def test_keep_splits_row_by_row_whatever_the_values(dup_es, es):
    # "keep": placement is the documented permutation prefix of the identity's rows, exactly
    # as for distinct rows, so copies of one value can sit on both sides
    assert dup_es.n_duplicates_ > 0
    straddles = 0
    for seed in range(20):
        dev, test = split_identities(dup_es, test_size=0.3, rng=seed)
        for label, n in dup_es.counts.items():
            target = min(max(int(np.floor(0.3 * n + 0.5)), 2), n - 2)
            assert test.counts[label] == target
            assert dev.counts[label] == n - target
        d = {r.tobytes() for r in dev.get("a")}
        straddles += not d.isdisjoint({r.tobytes() for r in test.get("a")})
    assert straddles > 0


def test_keep_places_rows_by_position_not_by_value():
    # two sets with the same labels, one all distinct and one made of a few repeated values:
    # the same positions go to the test side (the split never looks at the values)
    gen = np.random.default_rng(0)
    labels = ["a"] * 40 + ["b"] * 25
    distinct = EmbeddingSet(gen.normal(size=(65, 3)), labels, normalize=False)
    atoms = EmbeddingSet(gen.integers(0, 2, size=(65, 1)).astype(float), labels, normalize=False)
    assert atoms.n_duplicates_ == 61
    marker = np.arange(65.0)[:, None]  # row index as the value, to read positions back
    positions = EmbeddingSet(marker, labels, normalize=False)
    for seed in range(5):
        _, where = split_identities(positions, rng=seed)
        rows = where.embeddings.ravel().astype(int)  # test positions, in input order
        for case in (distinct, atoms):
            _, test = split_identities(case, rng=seed)
            np.testing.assert_array_equal(test.embeddings, case.embeddings[rows])


def test_collapse_splits_one_row_per_draw(dup_es):
    for seed in range(20):
        dev, test = split_identities(dup_es, test_size=0.3, rng=seed, duplicates="collapse")
        for label in dup_es.counts:
            d = [r.tobytes() for r in dev.get(label)]
            t = [r.tobytes() for r in test.get(label)]
            whole = {r.tobytes() for r in dup_es.get(label)}
            assert len(set(d)) == len(d)  # one row per draw
            assert len(set(t)) == len(t)
            assert set(d).isdisjoint(t)
            assert set(d) | set(t) == whole
            n = len(whole)
            assert len(t) == min(max(int(np.floor(0.3 * n + 0.5)), 2), n - 2)
        assert dev.n_duplicates_ == test.n_duplicates_ == 0
    # the same as splitting the deduplicated set with "keep"
    for one, two in zip(
        split_identities(dup_es, rng=3, duplicates="collapse"),
        split_identities(dup_es.drop_duplicates(), rng=3),
        strict=True,
    ):
        np.testing.assert_array_equal(one.embeddings, two.embeddings)


def test_both_readings_agree_without_duplicates(es):
    for seed in range(5):
        kept = split_identities(es, rng=seed)
        collapsed = split_identities(es, rng=seed, duplicates="collapse")
        for one, two in zip(kept, collapsed, strict=True):
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


def test_collapsed_split_ignores_other_identities_and_is_seeded(dup_es):
    _, full = split_identities(dup_es, rng=4, duplicates="collapse")
    _, part = split_identities(dup_es.subset(["a"]), rng=4, duplicates="collapse")
    np.testing.assert_array_equal(full.get("a"), part.get("a"))
    _, again = split_identities(dup_es, rng=np.random.default_rng(4), duplicates="collapse")
    np.testing.assert_array_equal(full.embeddings, again.embeddings)


def test_too_few_distinct_rows_to_collapse():
    # "a": one row six times and one other row: 7 rows, but only 2 draws
    x = np.r_[np.ones((6, 2)), [[2.0, 0.0]], np.arange(8.0).reshape(4, 2) + 3]
    es = EmbeddingSet(x, ["a"] * 7 + ["b"] * 4, normalize=False)
    with pytest.raises(
        InvalidInputError,
        match=r"identity 'a' has 7 row\(s\) but only 2 distinct one\(s\) "
        r"\(duplicates='collapse'\); splitting needs at least 4 \(2 per side\)",
    ):
        split_identities(es, duplicates="collapse")
    _, test = split_identities(es)  # seven draws: 2 to the test side
    assert test.counts["a"] == 2
    with pytest.raises(
        InvalidInputError, match=r"`duplicates` must be one of 'keep', 'collapse'; got True"
    ):
        split_identities(es, duplicates=True)


@pytest.mark.parametrize("test_size", [0.1, 0.3, 0.5, 0.8])
@pytest.mark.parametrize("n_dev", [2, 3, 5, 10])
def test_split_min_rows_is_the_smallest_identity_that_split_identities_leaves_n_dev(
    test_size, n_dev
):
    # brute force: split identities of 4, 5, ... rows and count their development rows
    from idaudit.data import split_min_rows

    def dev_rows(n):
        es = EmbeddingSet(np.random.default_rng(n).normal(size=(n, 3)), ["a"] * n)
        dev, _ = split_identities(es, test_size=test_size, rng=0)
        return len(dev)

    smallest = next(n for n in range(4, 200) if dev_rows(n) >= n_dev)
    assert split_min_rows(test_size, n_dev) == smallest


def test_split_min_rows_refuses_bad_arguments():
    from idaudit.data import split_min_rows

    with pytest.raises(InvalidInputError, match=r"`n_dev` must be >= 2; got 1"):
        split_min_rows(0.3, 1)
    with pytest.raises(InvalidInputError, match=r"`test_size` must be in \(0, 1\); got 1\.0"):
        split_min_rows(1.0, 5)
