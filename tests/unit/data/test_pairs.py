import itertools

import numpy as np
import pytest

from idaudit.data import EmbeddingSet, sample_pairs
from idaudit.exceptions import IdauditWarning, InvalidInputError


def _reference(identities, n, seed):
    """Enumerate all sorted pairs with itertools, shuffle the list once, take a prefix."""
    pairs = list(itertools.combinations(sorted(set(identities)), 2))
    order = np.random.default_rng(seed).permutation(len(pairs))
    return [pairs[i] for i in order[:n]]


@pytest.mark.parametrize("m", [2, 3, 17, 60])
def test_matches_itertools_reference(m):
    ids = [f"id{i:03d}" for i in range(m)][::-1]
    total = m * (m - 1) // 2
    assert sample_pairs(ids, rng=5) == _reference(ids, total, 5)
    assert sample_pairs(ids, min(10, total), rng=5) == _reference(ids, min(10, total), 5)


def test_prefix_stable_and_unique():
    ids = np.arange(400)
    short = sample_pairs(ids, 100, rng=0)
    long = sample_pairs(ids, 500, rng=0)
    assert short == long[:100]
    assert len(set(long)) == 500
    assert all(a < b for a, b in long)


def test_returns_python_scalars():
    pairs = sample_pairs(np.array([3, 1, 2]), rng=0)
    assert all(type(a) is int and type(b) is int for a, b in pairs)
    pairs = sample_pairs(np.array(["x", "y"]), rng=0)
    assert pairs == [("x", "y")]
    assert type(pairs[0][0]) is str


def test_accepts_generator_and_seed_sequence():
    ids = range(10)
    a = sample_pairs(ids, 5, rng=np.random.default_rng(7))
    b = sample_pairs(ids, 5, rng=np.random.SeedSequence(7))
    assert a == b == sample_pairs(ids, 5, rng=7)
    assert sample_pairs(ids, 5, rng=8) != a


def test_duplicates_ignored_and_zero_pairs():
    assert sample_pairs(["a", "b", "a"], rng=0) == [("a", "b")]
    assert sample_pairs(["a", "b"], 0, rng=0) == []


def test_large_prefix_decodes_like_the_reference():
    m = 2000  # ~2 million pairs, never materialised as a list
    pairs = sample_pairs(np.arange(m), 3000, rng=1)
    assert len(set(pairs)) == 3000
    assert all(0 <= a < b < m for a, b in pairs)
    order = np.random.default_rng(1).permutation(m * (m - 1) // 2)
    for position in (0, 2999):
        k = int(order[position])
        ref = next(itertools.islice(itertools.combinations(range(m), 2), k, None))
        assert pairs[position] == ref


@pytest.mark.parametrize(
    ("args", "exc", "match"),
    [
        ((["a"], None), InvalidInputError, "at least 2 distinct labels; got 1"),
        ((["a", "b"], -1), InvalidInputError, r"`n` must be >= 0; got -1"),
        ((["a", "b"], 1.5), TypeError, "`n` must be an integer"),
        ((["a", 1], None), TypeError, "mutually orderable"),
        (("ab", None), InvalidInputError, "not a single string"),
        ((np.zeros((2, 2)), None), InvalidInputError, "must be 1-D"),
        (
            (EmbeddingSet(np.eye(2), ["a", "b"]), None),
            TypeError,
            r"got an EmbeddingSet \(pass es.identities\)",
        ),
    ],
)
def test_bad_input(args, exc, match):
    with pytest.raises(exc, match=match):
        sample_pairs(*args, rng=0)


def test_more_pairs_than_exist_returns_all_with_a_warning_naming_both():
    # never a silent cut: the rule audit_generator's `pairs` follows too
    with pytest.warns(
        IdauditWarning,
        match=r"^`n` asks for 4 pairs, but 3 identities have only 3; all 3 are returned\.$",
    ):
        pairs = sample_pairs(["c", "a", "b"], 4, rng=0)
    assert pairs == sample_pairs(["c", "a", "b"], rng=0)
