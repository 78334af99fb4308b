import warnings

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from idaudit.data import EmbeddingSet, sample_pairs, split_identities
from idaudit.exceptions import IdauditWarning


@st.composite
def labelled_rows(draw):
    n_ids = draw(st.integers(1, 5))
    sizes = draw(st.lists(st.integers(1, 6), min_size=n_ids, max_size=n_ids))
    labels = [f"id{i}" for i, size in enumerate(sizes) for _ in range(size)]
    dim = draw(st.integers(1, 4))
    # small integers make exact duplicates likely
    values = draw(
        st.lists(
            st.lists(st.integers(-3, 3), min_size=dim, max_size=dim).filter(any),
            min_size=len(labels),
            max_size=len(labels),
        )
    )
    return np.array(values, dtype=float), labels, draw(st.randoms(use_true_random=False))


@settings(max_examples=50, deadline=None)
@given(labelled_rows())
def test_embedding_set_invariant_to_row_order(case):
    x, labels, rnd = case
    order = list(range(len(labels)))
    rnd.shuffle(order)
    a = EmbeddingSet(x, labels)
    b = EmbeddingSet(x[order], [labels[i] for i in order])
    assert a.counts == b.counts
    assert a.n_duplicates_ == b.n_duplicates_
    for label in a.identities:
        rows_a = sorted(map(tuple, a.get(label).round(12)))
        rows_b = sorted(map(tuple, b.get(label).round(12)))
        assert rows_a == rows_b


@settings(max_examples=50, deadline=None)
@given(labelled_rows())
def test_duplicates_count_matches_set_semantics(case):
    x, labels, _ = case
    # duplicates are judged on the stored rows: the normalised ones, or the raw ones
    for es in (EmbeddingSet(x, labels), EmbeddingSet(x, labels, normalize=False)):
        stored = (es.embeddings + 0.0).tolist()  # + 0.0: -0.0 and 0.0 are one value
        distinct = {(lab, tuple(row)) for lab, row in zip(es.labels.tolist(), stored, strict=True)}
        assert es.n_duplicates_ == len(labels) - len(distinct)
        kept = es.drop_duplicates()
        assert len(kept) == len(distinct)
        assert kept.n_duplicates_ == 0


@settings(max_examples=50, deadline=None)
@given(labelled_rows(), st.data())
def test_failed_rows_partition_the_outputs(case, data):
    # any rows may fail (by outcome); keep and drop agree on the successful rows, and
    # successful + failed rows account for every labelled row of every identity
    x, labels, rnd = case
    fail = data.draw(st.lists(st.booleans(), min_size=len(labels), max_size=len(labels)))
    if all(fail):
        fail[0] = False
    outcomes = ["no_face" if f else "ok" for f in fail]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", IdauditWarning)
        keep = EmbeddingSet(x, labels, outcomes=outcomes)
        drop = EmbeddingSet(x, labels, outcomes=outcomes, failures="drop")
    np.testing.assert_array_equal(keep.embeddings, drop.embeddings)
    assert keep.counts == drop.counts
    assert keep.n_failed_ == drop.n_dropped_ == sum(fail)
    for label in set(labels):
        n = labels.count(label)
        assert keep.n_outputs(label) == n
        assert keep.failed_counts[label] == sum(
            f for f, k in zip(fail, labels, strict=True) if k == label
        )
    out = keep.as_outputs()
    assert out.labels.tolist() == labels
    np.testing.assert_array_equal(out.embeddings[:, -1], np.asarray(fail, dtype=float))
    np.testing.assert_array_equal(out.embeddings[~np.asarray(fail), :-1], keep.embeddings)
    # the failures travel with their identity into a subset, in input order
    some = sorted(set(labels))[: 1 + rnd.randrange(len(set(labels)))]
    if any(keep.counts.get(k, 0) for k in some):
        sub = keep.subset(some)
        assert sub.as_outputs().labels.tolist() == [k for k in labels if k in some]


@settings(max_examples=50, deadline=None)
@given(labelled_rows(), st.integers(-8, 8))
def test_power_of_two_multiples_are_duplicates_after_normalisation(case, k):
    # x and 2^k x normalise to the same bits (scaling by a power of two is exact)
    x, labels, _ = case
    doubled = EmbeddingSet(np.r_[x, np.ldexp(x, k)], labels + labels)
    single = EmbeddingSet(x, labels)
    assert doubled.n_duplicates_ == single.n_duplicates_ + len(labels)


@settings(max_examples=50, deadline=None)
@given(st.integers(2, 40), st.integers(0, 2**32 - 1), st.data())
def test_sample_pairs_prefix_property_and_uniqueness(m, seed, data):
    total = m * (m - 1) // 2
    n_short = data.draw(st.integers(0, total))
    full = sample_pairs(range(m), rng=seed)
    assert sample_pairs(range(m), n_short, rng=seed) == full[:n_short]
    assert len(set(full)) == total
    assert all(a < b for a, b in full)


@settings(max_examples=30, deadline=None)
@given(
    st.lists(st.integers(4, 15), min_size=1, max_size=4),
    st.floats(0.05, 0.95),
    st.integers(0, 1000),
)
def test_split_sizes_and_disjointness(sizes, test_size, seed):
    labels = [i for i, size in enumerate(sizes) for _ in range(size)]
    x = np.arange(len(labels) * 2, dtype=float).reshape(-1, 2) + 1.0  # distinct rows
    es = EmbeddingSet(x, labels, normalize=False)
    dev, test = split_identities(es, test_size=test_size, rng=seed)
    assert len(dev) + len(test) == len(es)
    for label, n in es.counts.items():
        assert dev.counts[label] >= 2
        assert test.counts[label] >= 2
        assert dev.counts[label] + test.counts[label] == n
    both = np.concatenate([dev.embeddings, test.embeddings])
    assert len({tuple(r) for r in both}) == len(es)
