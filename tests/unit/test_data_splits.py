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
