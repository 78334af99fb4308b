import hashlib
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from sklearn.preprocessing import normalize as sk_normalize

from idaudit.data import EmbeddingSet, split_identities
from idaudit.data._embeddings import DROP_REASONS
from idaudit.exceptions import IdauditWarning, InvalidInputError


@pytest.fixture
def clean():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(12, 5))
    labels = ["b"] * 4 + ["a"] * 5 + ["c"] * 3
    return x, labels


def test_normalises_rows_like_sklearn(clean):
    x, labels = clean
    es = EmbeddingSet(x, labels)
    np.testing.assert_allclose(es.embeddings, sk_normalize(x), rtol=1e-15, atol=1e-16)
    assert es.embeddings.dtype == np.float64
    assert es.identities.tolist() == ["a", "b", "c"]
    assert es.counts == {"a": 5, "b": 4, "c": 3}
    assert (es.dim, len(es), es.n_identities) == (5, 12, 3)
    np.testing.assert_allclose(es.get("c"), sk_normalize(x[9:]), rtol=1e-15)
    assert es.n_dropped_ == 0
    assert es.dropped_ == dict.fromkeys(DROP_REASONS, 0)
    assert es.n_duplicates_ == 0
    assert es.source is None


def test_keeps_input_row_order_and_read_only(clean):
    x, labels = clean
    es = EmbeddingSet(x, labels)
    assert es.labels.tolist() == labels
    with pytest.raises(ValueError, match="read-only"):
        es.embeddings[0, 0] = 1.0


def test_drops_and_counts_each_reason_once():
    x = np.ones((9, 3))
    x[0, 1] = np.nan  # missing
    x[1] = [np.inf, 1.0, 1.0]  # non_finite
    x[2] = [np.nan, np.inf, 0.0]  # NaN first: missing
    x[3] = 0.0  # zero_norm
    x[4] = [1e-6, 0.0, 0.0]  # norm == 1e-6: dropped ("at most", seed 000 Sec. 4.1)
    x[5] = [1.1e-6, 0.0, 0.0]  # kept
    labels = ["a", "a", "a", "a", "b", "b", None, "b", np.nan]  # two missing labels
    with pytest.warns(IdauditWarning, match=r"dropped 7 of 9 rows \(missing: 4, non_finite: 1"):
        es = EmbeddingSet(x, labels, failures="drop")
    assert es.dropped_ == {"missing": 4, "unparseable": 0, "non_finite": 1, "zero_norm": 2}
    assert es.n_dropped_ == 7
    assert es.counts == {"b": 2}
    np.testing.assert_allclose(es.get("b"), [[1, 0, 0], np.ones(3) / np.sqrt(3)])
    assert es.failed_counts == {"b": 0}
    assert (es.n_failed_, es.failures) == (0, "drop")


def test_keeps_failed_rows_as_outputs_of_their_identity():
    x = np.ones((9, 3))
    x[0, 1] = np.nan  # a: missing
    x[1] = [np.inf, 1.0, 1.0]  # a: non_finite
    x[2] = [np.nan, np.inf, 0.0]  # a: NaN first, missing
    x[3] = 0.0  # a: zero_norm
    x[4] = [1e-6, 0.0, 0.0]  # b: zero_norm
    x[5] = [1.1e-6, 0.0, 0.0]  # b: succeeds
    labels = ["a", "a", "a", "a", "b", "b", None, "b", np.nan]  # rows 6 and 8: no label
    with (
        pytest.warns(IdauditWarning, match=r"dropped 2 of 9 rows \(missing: 2\)"),
        pytest.warns(
            IdauditWarning,
            match=r"EmbeddingSet: 5 of 9 rows failed \(missing: 2, non_finite: 1, zero_norm: 2\); "
            r"they are kept as failed outputs \(certificates count them; diagnostics compute "
            r"on the 2 successful rows\)",
        ),
    ):
        es = EmbeddingSet(x, labels)
    assert es.failures == "keep"
    # only the unlabelled rows are removed entirely
    assert es.dropped_ == {"missing": 2, "unparseable": 0, "non_finite": 0, "zero_norm": 0}
    assert es.n_dropped_ == 2
    assert es.n_failed_ == 5
    assert es.failure_reasons_ == {"missing": 2, "unparseable": 0, "non_finite": 1, "zero_norm": 2}
    # the successful rows are exactly those of failures="drop"
    assert es.counts == {"b": 2}
    assert es.identities.tolist() == ["b"]
    assert len(es) == 2
    np.testing.assert_allclose(es.get("b"), [[1, 0, 0], np.ones(3) / np.sqrt(3)])
    # every row of "a" failed: it has outputs but no successful row
    assert es.failed_counts == {"a": 4, "b": 1}
    assert "a" not in es
    assert es.failure_codes("a").tolist() == ["missing", "non_finite", "missing", "zero_norm"]
    assert es.failure_codes("b").tolist() == ["zero_norm"]
    assert (es.n_outputs("a"), es.n_outputs("b")) == (4, 3)
    with pytest.raises(InvalidInputError, match="identity 'a' is not in this EmbeddingSet"):
        es.get("a")


def test_outcomes_override_the_vectors():
    x = np.array([[1.0, 0.0], [0.0, 2.0], [np.nan, np.nan], [3.0, 4.0], [np.nan, 1.0]])
    outcomes = ["ok", "no_face", "error", "ok", "ok"]
    with pytest.warns(
        IdauditWarning, match=r"3 of 5 rows failed \(missing: 1, error: 1, no_face: 1\)"
    ):
        es = EmbeddingSet(x, ["a", "a", "b", "b", "b"], outcomes=outcomes)
    # a finite vector with a failure code fails; a NaN vector marked "ok" fails by the rules
    assert es.failure_codes("a").tolist() == ["no_face"]
    assert es.failure_codes("b").tolist() == ["error", "missing"]
    assert es.failure_reasons_ == {
        "missing": 1,
        "unparseable": 0,
        "non_finite": 0,
        "zero_norm": 0,
        "error": 1,
        "no_face": 1,
    }
    np.testing.assert_allclose(es.embeddings, [[1.0, 0.0], [0.6, 0.8]])
    assert es.failure_codes("a").dtype.kind == "U"
    # drop: the old behaviour, outcome codes counted beside the row rules
    with pytest.warns(
        IdauditWarning, match=r"dropped 3 of 5 rows \(missing: 1, error: 1, no_face: 1\)"
    ):
        dropped = EmbeddingSet(x, ["a", "a", "b", "b", "b"], outcomes=outcomes, failures="drop")
    assert dropped.dropped_ == {
        "missing": 1,
        "unparseable": 0,
        "non_finite": 0,
        "zero_norm": 0,
        "error": 1,
        "no_face": 1,
    }
    assert dropped.failed_counts == {"a": 0, "b": 0}
    assert dropped.n_failed_ == 0
    assert dropped.failure_codes("a").tolist() == []
    np.testing.assert_array_equal(dropped.embeddings, es.embeddings)
    # an unlabelled row is dropped whatever its outcome, under the row rules
    with pytest.warns(IdauditWarning, match=r"dropped 1 of 3 rows \(missing: 1\)"):
        es = EmbeddingSet(np.eye(3), ["a", None, "a"], outcomes=["ok", "no_face", "ok"])
    assert es.n_failed_ == 0
    # every outcome "ok": nothing fails, no warning
    es = EmbeddingSet(np.eye(3), ["a", "b", "a"], outcomes=np.array(["ok"] * 3))
    assert es.failed_counts == {"a": 0, "b": 0}
    assert es.failure_reasons_ == dict.fromkeys(DROP_REASONS, 0)


def test_as_outputs_appends_one_failure_atom_in_input_order():
    x = np.array(
        [
            [0.0, 2.0],  # b ok
            [3.0, 4.0],  # a ok
            [np.nan, 0.0],  # a missing
            [5.0, 5.0],  # c no_face (a finite vector, overridden)
            [0.0, 0.0],  # a zero_norm
            [-1.0, 0.0],  # b ok
        ]
    )
    labels = ["b", "a", "a", "c", "a", "b"]
    with pytest.warns(IdauditWarning, match="3 of 6 rows failed"):
        es = EmbeddingSet(x, labels, outcomes=["ok", "ok", "ok", "no_face", "ok", "ok"])
    out = es.as_outputs()
    np.testing.assert_array_equal(
        out.embeddings,
        [
            [0.0, 1.0, 0.0],
            [0.6, 0.8, 0.0],
            [0.0, 0.0, 1.0],
            [0.0, 0.0, 1.0],
            [0.0, 0.0, 1.0],
            [-1.0, 0.0, 0.0],
        ],
    )
    assert out.labels.tolist() == labels
    assert out.identities.tolist() == ["a", "b", "c"]  # c: every row failed
    assert out.counts == {"a": 3, "b": 2, "c": 1}
    assert (out.dim, out.normalize, out.failures, out.n_failed_) == (3, False, "keep", 0)
    assert out.failed_counts == {"a": 0, "b": 0, "c": 0}
    assert out.n_dropped_ == 0
    assert out.n_duplicates_ == 1  # a's two failures are one atom
    assert (out.sha256, out.source) == (es.sha256, es.source)
    # raw vectors pass through as stored when the set does not normalise
    raw = EmbeddingSet([[2.0, 0.0], [0.0, 3.0]], ["a", "b"], normalize=False).as_outputs()
    np.testing.assert_array_equal(raw.embeddings, [[2.0, 0.0, 0.0], [0.0, 3.0, 0.0]])


def test_derived_sets_carry_the_failures_of_the_identities_they_keep():
    x = np.array(
        [[1.0, 0.0], [np.nan, 0.0], [0.0, 1.0], [1.0, 1.0], [0.0, 0.0], [1.0, 0.0], [2.0, 0.0]]
    )
    labels = ["a", "a", "b", "b", "b", "c", "c"]
    outcomes = ["ok", "ok", "ok", "no_face", "ok", "ok", "ok"]
    with pytest.warns(IdauditWarning, match="3 of 7 rows failed"):
        es = EmbeddingSet(x, labels, outcomes=outcomes)
    sub = es.subset(["b"])
    assert sub.failed_counts == {"b": 2}
    assert sub.failure_codes("b").tolist() == ["no_face", "zero_norm"]
    assert sub.counts == {"b": 1}
    assert sub.failures == "keep"
    np.testing.assert_array_equal(sub.as_outputs().embeddings, [[0, 1, 0], [0, 0, 1], [0, 0, 1]])
    # filter counts successful rows; the identities kept keep their failed rows
    kept, small = es.filter(min_rows=2)
    assert small == {"a": 1, "b": 1}
    assert kept.failed_counts == {"c": 0}
    kept, small = es.filter(min_rows=1)
    assert kept is es
    assert small == {}
    # drop_duplicates removes repeated successful rows only (c's rows normalise to one)
    dedup = es.drop_duplicates()
    assert dedup.counts == {"a": 1, "b": 1, "c": 1}
    assert dedup.failed_counts == es.failed_counts
    assert dedup.as_outputs().labels.tolist() == ["a", "a", "b", "b", "b", "c"]


def test_all_failed_identity_is_carried_and_filtered():
    x = np.array([[1.0, 0.0], [0.0, 1.0], [np.nan, 1.0], [np.inf, 0.0]])
    with pytest.warns(IdauditWarning, match="2 of 4 rows failed"):
        es = EmbeddingSet(x, ["a", "a", "z", "z"])
    assert es.identities.tolist() == ["a"]
    assert es.failed_counts == {"a": 0, "z": 2}
    assert es.n_outputs("z") == 2
    assert es.as_outputs().counts == {"a": 2, "z": 2}
    both = es.subset(["z", "a"])
    assert both.failed_counts == {"a": 0, "z": 2}
    with pytest.raises(InvalidInputError, match=r"every row of the identities \['z'\] failed"):
        es.subset(["z"])
    kept, small = es.filter(min_rows=1)
    assert small == {"z": 0}
    assert kept.failed_counts == {"a": 0}
    with pytest.raises(InvalidInputError, match="identity 'q' is not in this EmbeddingSet"):
        es.n_outputs("q")
    with pytest.raises(InvalidInputError, match="identity 'q' is not in this EmbeddingSet"):
        es.failure_codes("q")


def test_split_identities_splits_successful_rows_only():
    x = np.r_[np.eye(4), np.eye(4), np.full((2, 4), np.nan)]
    labels = ["a"] * 4 + ["b"] * 4 + ["a", "b"]
    with pytest.warns(IdauditWarning, match="2 of 10 rows failed"):
        es = EmbeddingSet(x, labels)
    dev, test = split_identities(es, rng=0)
    assert dev.n_failed_ == test.n_failed_ == 0
    assert len(dev) + len(test) == len(es)
    # splitting every output instead: the failure atoms are rows like any other
    dev, test = split_identities(es.as_outputs(), rng=0)
    assert len(dev) + len(test) == 10
    n_atoms = sum(int(part.embeddings[:, -1].sum()) for part in (dev, test))
    assert n_atoms == 2


def test_failed_rows_labels_must_be_orderable_with_the_others():
    x = [[1.0, 0.0], [np.nan, 0.0]]
    with pytest.raises(TypeError, match="mutually orderable"):
        EmbeddingSet(x, ["a", 1])
    with pytest.warns(IdauditWarning, match="dropped 1 of 2"):
        es = EmbeddingSet(x, ["a", 1], failures="drop")
    assert es.counts == {"a": 1}


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        (
            {"outcomes": ["ok"]},
            InvalidInputError,
            r"`outcomes` must have one entry per row .* 1 vs 2",
        ),
        (
            {"outcomes": ["ok", None]},
            InvalidInputError,
            r"`outcomes` must hold strings .* got NoneType",
        ),
        (
            {"outcomes": np.array([0, 1])},
            InvalidInputError,
            r"`outcomes` must hold strings .* got int \(2 of 2 entries",
        ),
        (
            {"outcomes": ["ok", ""]},
            InvalidInputError,
            r"`outcomes` must hold non-empty strings.* row 1",
        ),
        ({"outcomes": "ok"}, InvalidInputError, r"`outcomes` must be a 1-D sequence of strings"),
        ({"outcomes": [["ok"], ["ok"]]}, InvalidInputError, r"`outcomes` must be 1-D"),
        (
            {"failures": "maybe"},
            InvalidInputError,
            r"`failures` must be one of 'keep', 'drop'; got 'maybe'",
        ),
        (
            {"failures": None},
            TypeError,
            r"`failures` must be 'keep' or 'drop' \(a str\); got NoneType",
        ),
    ],
)
def test_bad_outcomes_and_failures_are_refused(kwargs, error, match):
    with pytest.raises(error, match=match):
        EmbeddingSet(np.eye(2), ["a", "b"], **kwargs)


def test_normalize_false_keeps_raw_vectors_and_zero_rows():
    x = np.array([[0.0, 0.0], [3.0, 4.0], [np.inf, 1.0], [1.0, 1.0]])
    with pytest.warns(IdauditWarning, match="non_finite: 1"):
        es = EmbeddingSet(x, [0, 0, 1, 1], normalize=False)
    np.testing.assert_array_equal(es.embeddings, x[[0, 1, 3]])
    assert es.dropped_["zero_norm"] == 0
    assert es.normalize is False


def test_huge_values_normalise_without_overflow():
    es = EmbeddingSet([[3e200, 4e200], [1.0, 0.0]], ["a", "a"])
    np.testing.assert_allclose(es.embeddings[0], [0.6, 0.8], rtol=1e-15)


def test_counts_exact_duplicates_within_identity_only():
    x = np.array(
        [
            [1.0, 2.0],
            [1.0, 2.0],  # duplicate of row 0 (same identity)
            [1.0, 2.0],  # another duplicate
            [2.0, 4.0],  # same direction: normalises to the same vector as row 0
            [1.0, 2.0],  # identical values, other identity: not a duplicate
            [0.0, 1.0],
            [-0.0, 1.0],  # equal to the previous row (0.0 == -0.0)
        ]
    )
    es = EmbeddingSet(x, ["a", "a", "a", "a", "b", "c", "c"])
    assert es.n_duplicates_ == 4
    # raw vectors kept: [2, 4] is a different row
    assert EmbeddingSet(x, ["a", "a", "a", "a", "b", "c", "c"], normalize=False).n_duplicates_ == 3


def test_duplicates_are_detected_on_the_vectors_the_audits_use():
    # [1, 0] and [2, 0] are one point on the unit circle, as are [0, 1] and [0, 3]
    x = [[1.0, 0.0], [2.0, 0.0], [0.0, 1.0], [0.0, 3.0]]
    es = EmbeddingSet(x, ["a", "a", "b", "b"])
    assert es.n_duplicates_ == 2
    assert np.array_equal(es.get("a")[0], es.get("a")[1])
    assert EmbeddingSet(x, ["a", "a", "b", "b"], normalize=False).n_duplicates_ == 0


def test_drop_duplicates_keeps_the_first_row_of_each_group():
    x = np.array([[3.0, 0.0], [0.0, 2.0], [1.0, 0.0], [0.0, 1.0], [0.0, 5.0], [1.0, 1.0]])
    es = EmbeddingSet(x, ["a", "a", "a", "b", "b", "a"])
    assert es.n_duplicates_ == 2  # row 2 repeats row 0; row 4 repeats row 3
    out = es.drop_duplicates()
    assert out.counts == {"a": 3, "b": 1}
    assert out.n_duplicates_ == 0
    np.testing.assert_array_equal(out.get("a"), es.get("a")[[0, 1, 3]])
    np.testing.assert_array_equal(out.get("b"), es.get("b")[[0]])
    assert out.sha256 == es.sha256
    assert out.dropped_ == dict.fromkeys(DROP_REASONS, 0)
    # nothing to drop: the same rows
    clean = EmbeddingSet(np.eye(3), ["a", "a", "b"])
    np.testing.assert_array_equal(clean.drop_duplicates().embeddings, clean.embeddings)


def test_labels_as_python_scalars_and_integer_labels():
    es = EmbeddingSet(np.eye(4), np.array([10, 2, 10, 2]))
    assert es.identities.tolist() == [2, 10]
    assert list(es.counts) == [2, 10]
    assert all(type(k) is int for k in es.counts)
    assert es.get(np.int64(10)).shape == (2, 4)
    assert 2 in es
    assert "2" not in es


def test_float_labels_with_missing_become_integers():
    with pytest.warns(IdauditWarning, match="missing: 1"):
        es = EmbeddingSet(np.eye(3), np.array([1.0, np.nan, 2.0]))
    assert es.labels.dtype == np.int64
    assert es.identities.tolist() == [1, 2]


def test_sha256_of_arrays_is_documented_recipe(clean):
    x, labels = clean
    h = hashlib.sha256(b"idaudit-embeddings-v1")
    h.update(repr(x.shape).encode())
    h.update(x.astype("<f8").tobytes())
    h.update("\n".join(repr(v) for v in labels).encode())
    assert EmbeddingSet(x, labels).sha256 == h.hexdigest()


def test_sha256_with_outcomes_is_documented_recipe(clean):
    x, labels = clean
    outcomes = ["ok"] * 11 + ["no_face"]
    h = hashlib.sha256(b"idaudit-embeddings-v1")
    h.update(repr(x.shape).encode())
    h.update(x.astype("<f8").tobytes())
    h.update("\n".join(repr(v) for v in labels).encode())
    without = h.hexdigest()
    h.update(b"\x00outcomes\x00")
    h.update("\n".join(outcomes).encode())
    with pytest.warns(IdauditWarning, match="1 of 12 rows failed"):
        es = EmbeddingSet(x, labels, outcomes=outcomes)
    assert es.sha256 == h.hexdigest()
    assert EmbeddingSet(x, labels).sha256 == without
    assert EmbeddingSet(x, labels, outcomes=["ok"] * 12).sha256 not in (without, es.sha256)


def test_sha256_changes_with_values_and_label_types():
    x = np.eye(2)
    base = EmbeddingSet(x, [1, 2]).sha256
    assert EmbeddingSet(x.copy(), [1, 2]).sha256 == base
    assert EmbeddingSet(x, ["1", "2"]).sha256 != base
    y = x.copy()
    y[0, 1] = 1e-12
    assert EmbeddingSet(y, [1, 2]).sha256 != base


def test_subset_keeps_rows_and_provenance(clean):
    x, labels = clean
    es = EmbeddingSet(x, labels)
    sub = es.subset(["c", "a"])
    assert sub.identities.tolist() == ["a", "c"]
    assert sub.counts == {"a": 5, "c": 3}
    np.testing.assert_array_equal(sub.get("a"), es.get("a"))
    assert sub.sha256 == es.sha256
    assert sub.n_dropped_ == 0
    assert es.subset("b").counts == {"b": 4}


def test_subset_recounts_duplicates():
    x = np.array([[1.0, 0.0], [1.0, 0.0], [0.0, 1.0], [0.0, 1.0]])
    es = EmbeddingSet(x, ["a", "a", "b", "c"])
    assert es.n_duplicates_ == 1
    assert es.subset(["b", "c"]).n_duplicates_ == 0


def test_repr_mentions_sizes_drops_and_hash():
    x = np.ones((4, 3))
    x[0] = 0.0
    with pytest.warns(IdauditWarning):
        es = EmbeddingSet(x, ["a", "a", "b", "b"], failures="drop")
    text = repr(es)
    assert "n=3" in text
    assert "identities=2" in text
    assert "dim=3" in text
    assert "dropped=1 (zero_norm: 1)" in text
    assert "failed" not in text
    assert "duplicates=1" in text
    assert es.sha256[:12] in text
    with pytest.warns(IdauditWarning):
        kept = EmbeddingSet(x, ["a", "a", "b", "b"])
    assert "n=3, identities=2, dim=3, normalized=True, failed=1 (zero_norm: 1), dropped=0" in (
        repr(kept)
    )


@pytest.mark.parametrize(
    ("embeddings", "labels", "match"),
    [
        (np.ones(3), ["a"] * 3, r"`embeddings` must be a 2-D array .* got 1-D"),
        (np.ones((0, 3)), [], r"at least one row and one column; got shape \(0, 3\)"),
        (np.ones((3, 2)), ["a", "b"], r"one entry per row of `embeddings`; got 2 vs 3"),
        (np.ones((2, 2)), [["a"], ["b"]], r"`labels` must be 1-D"),
        (np.ones((2, 2)), "ab", "`labels` must be a 1-D sequence"),
    ],
)
def test_bad_input(embeddings, labels, match):
    with pytest.raises(InvalidInputError, match=match):
        EmbeddingSet(embeddings, labels)


def test_all_rows_dropped_raises():
    with (
        pytest.raises(InvalidInputError, match=r"no rows left after dropping 2 of 2: zero_norm: 2"),
    ):
        EmbeddingSet(np.zeros((2, 3)), ["a", "b"], failures="drop")
    with pytest.raises(
        InvalidInputError,
        match=r"no rows left: none of the 3 rows succeeded; 2 failed \(zero_norm: 1, "
        r"no_face: 1\); 1 dropped \(missing: 1\)",
    ):
        EmbeddingSet(
            np.array([[0.0, 0.0], [1.0, 1.0], [1.0, 1.0]]),
            ["a", "b", None],
            outcomes=["ok", "no_face", "ok"],
        )


def test_bad_parameters_and_types():
    with pytest.raises(InvalidInputError, match=r"`min_norm` must be in \[0, inf\); got -1"):
        EmbeddingSet(np.eye(2), ["a", "b"], min_norm=-1)
    with pytest.raises(TypeError, match="`normalize` must be a bool"):
        EmbeddingSet(np.eye(2), ["a", "b"], normalize="yes")
    with pytest.raises(TypeError, match="mutually orderable"):
        EmbeddingSet(np.eye(2), ["a", 1])
    with pytest.raises(TypeError, match="`embeddings` must be a numeric array"):
        EmbeddingSet([["x", "y"]], ["a"])


def test_unknown_identity_is_named():
    es = EmbeddingSet(np.eye(2), ["ann", "bob"])
    with pytest.raises(InvalidInputError, match=r"identity 'zoe' is not in this EmbeddingSet"):
        es.get("zoe")
    with pytest.raises(InvalidInputError, match=r"identity 'zoe' is not in this EmbeddingSet"):
        es.subset(["ann", "zoe"])
    with pytest.raises(InvalidInputError, match="at least one identity"):
        es.subset([])


# ---------------------------------------------------------------------- read / filter


def test_read_chooses_the_reader_by_suffix(tmp_path: Path) -> None:
    x = np.arange(12, dtype=float).reshape(4, 3) + 1.0
    labels = np.array(["a", "a", "b", "b"])
    np.savez(tmp_path / "e.npz", embeddings=x, labels=labels)
    frame = pd.DataFrame(x, columns=["e0", "e1", "e2"])
    frame.insert(0, "identity", labels)
    frame.to_csv(tmp_path / "e.CSV", index=False)
    frame.to_parquet(tmp_path / "e.pq", index=False)
    expected = x / np.linalg.norm(x, axis=1, keepdims=True)
    for name in ("e.npz", "e.CSV", "e.pq"):
        es = EmbeddingSet.read(tmp_path / name)
        np.testing.assert_allclose(es.embeddings, expected, rtol=1e-12)
        assert es.labels.tolist() == labels.tolist()
        assert es.source == str(tmp_path / name)
    assert EmbeddingSet.read(tmp_path / "e.npz").sha256 == (
        EmbeddingSet.from_npz(tmp_path / "e.npz").sha256
    )
    (tmp_path / "e.txt").write_text("x")
    with pytest.raises(InvalidInputError, match=r"`path` must end in .csv, .npz, .parquet"):
        EmbeddingSet.read(tmp_path / "e.txt")


def test_filter_drops_small_identities_and_counts_them() -> None:
    labels = ["a"] * 3 + ["b"] + ["c"] * 2 + ["d"]
    es = EmbeddingSet(np.eye(7), labels)
    kept, dropped = es.filter(min_rows=2)
    assert dropped == {"b": 1, "d": 1}
    assert kept.counts == {"a": 3, "c": 2}
    np.testing.assert_array_equal(kept.get("c"), np.eye(7)[[4, 5]])
    assert kept.sha256 == es.sha256
    same, none = es.filter(min_rows=1)
    assert same is es
    assert none == {}
    with pytest.raises(InvalidInputError, match=r"`min_rows` 4 leaves none of the 4 identities"):
        es.filter(min_rows=4)
    with pytest.raises(InvalidInputError, match=r"`min_rows` must be >= 1; got 0"):
        es.filter(min_rows=0)


@pytest.mark.parametrize(
    ("codes", "match"),
    [
        (["OK", "ok", "ok", "ok"], "exactly 'ok'"),
        ([" ok", "ok", "ok", "ok"], "exactly 'ok'"),
        (["missing", "ok", "ok", "ok"], "differ from the row rules"),
    ],
)
def test_outcome_codes_that_would_be_misread_are_refused(codes: list[str], match: str) -> None:
    with pytest.raises(InvalidInputError, match=match):
        EmbeddingSet(np.ones((4, 2)), list("aabb"), outcomes=codes)


def test_near_duplicates_are_counted_and_merged() -> None:
    gen = np.random.default_rng(5)
    x = gen.normal(size=(30, 4))
    rows = np.vstack([x, x[:6] + 2e-9 * gen.normal(size=(6, 4)), x[6:8], [[np.nan] * 4]])
    labels = np.r_[np.repeat(["a", "b"], 15), ["a"] * 6, ["a"] * 2, ["b"]]
    with pytest.warns(IdauditWarning, match="1 of 39 rows failed"):
        es = EmbeddingSet(rows, labels)
    # rows 6, 7 are exact copies, rows 0-5 near copies (normalised: still within 1e-7)
    assert (es.n_duplicates_, es.near_duplicates()) == (2, 6)
    assert es.near_duplicates(rtol=1e-12) == 0
    merged = es.merge_near_duplicates()
    assert (merged.n_duplicates_, merged.near_duplicates(), merged.n_failed_) == (8, 0, 1)
    assert merged.drop_duplicates().counts == {"a": 15, "b": 15}
    # one dimension: distinct continuous draws come within 1e-7 by chance, so none is counted
    one = EmbeddingSet(np.r_[x[:, 0], x[:3, 0] + 1e-12][:, None], np.zeros(33), normalize=False)
    assert one.near_duplicates() == 0
    with pytest.raises(InvalidInputError, match=r"`rtol` must be in \(0, 1e-3\]; got 0.1"):
        es.near_duplicates(rtol=0.1)
