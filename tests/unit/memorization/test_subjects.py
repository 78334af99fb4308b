"""Subject-aware inference: checks, numbers unchanged without subjects, percentile methods."""

from __future__ import annotations

import numpy as np
import pytest

from idaudit.exceptions import InvalidInputError
from idaudit.memorization import flagging, flagging_from_distances, nnaa, nnaa_from_distances
from idaudit.memorization._subjects import read_subject_map, subjects_for_files


def _sets(seed: int = 0):
    gen = np.random.default_rng(seed)
    return gen.standard_normal((40, 4)), gen.standard_normal((40, 4)), gen.standard_normal((30, 4))


def test_linear_percentile_matches_numpy() -> None:
    gen = np.random.default_rng(3)
    heldout, synthetic = gen.random(57), gen.random(31)
    pct = [1, 2.5, 5, 10, 33.3, 50]
    res = flagging_from_distances(
        heldout, synthetic, percentiles=pct, percentile_method="linear", n_permutations=99
    )
    expected = np.percentile(heldout, pct)  # NumPy's default ("linear")
    np.testing.assert_array_equal(res.thresholds, expected)
    np.testing.assert_array_equal(
        res.n_synthetic_flagged, (synthetic[None] <= expected[:, None]).sum(1)
    )
    order = flagging_from_distances(heldout, synthetic, percentiles=pct, n_permutations=0)
    np.testing.assert_array_equal(
        order.thresholds, np.percentile(heldout, pct, method="inverted_cdf")
    )


def test_linear_permutation_counts_match_numpy_on_each_relabelling() -> None:
    from idaudit.memorization._flagging import _flag_counts

    gen = np.random.default_rng(4)
    values = np.sort(gen.random(30))
    labels = gen.random((20, 30)) < 0.5
    labels[:, 0] = True
    counts = _flag_counts(labels, values, np.array([7.0, 50.0]), "linear")
    for row, lab in zip(counts, labels, strict=True):
        tau = np.percentile(values[lab], [7.0, 50.0])
        np.testing.assert_array_equal(row, (values[~lab][None] <= tau[:, None]).sum(1))


def test_singleton_subjects_give_the_image_level_numbers() -> None:
    t, h, s = _sets()
    base = flagging(t, h, s, percentiles=[10, 20], n_permutations=199, metric="euclidean")
    given = flagging(
        t, h, s, subjects=(np.arange(40), np.arange(40) + 40, np.arange(30)), percentiles=[10, 20],
        n_permutations=199, metric="euclidean",
    )  # fmt: skip
    # singleton subjects are the image-level test; the units are numbered differently, so
    # the draws (not the law) differ: same observed numbers, p-values within MC error
    np.testing.assert_array_equal(base.n_synthetic_flagged, given.n_synthetic_flagged)
    np.testing.assert_allclose(base.p_values, given.p_values, atol=0.1)
    a = nnaa(t, h, s, n_bootstrap=50, n_permutations=49, metric="euclidean")
    b = nnaa(t, h, s, subjects=(np.arange(40), np.arange(40) + 40, None), n_bootstrap=50,
             n_permutations=49, metric="euclidean")  # fmt: skip
    assert a.privacy_loss == b.privacy_loss
    assert abs(a.p_value - b.p_value) < 0.15  # labels sort as strings: other draws, same law


def test_subject_in_train_and_heldout_is_refused() -> None:
    t, h, s = _sets()
    subjects = (np.arange(40) // 4, np.arange(40) // 4 + 9, None)  # subject 9 on both sides
    with pytest.raises(InvalidInputError, match=r"1 subject\(s\) have images in both"):
        flagging(t, h, s, subjects=subjects, n_permutations=9)
    with pytest.raises(InvalidInputError, match="disjoint from the training partition"):
        nnaa(t, h, s, subjects=subjects, n_bootstrap=0, n_permutations=9)
    d = np.zeros((110, 110))
    with pytest.raises(InvalidInputError, match="have images in both"):
        nnaa_from_distances(d, (40, 40, 30), subjects=subjects)


def test_bad_subject_arrays() -> None:
    t, h, s = _sets()
    with pytest.raises(InvalidInputError, match=r"`subjects\[1\] \(heldout\)` must hold one"):
        flagging(t, h, s, subjects=(None, np.arange(3), None))
    with pytest.raises(InvalidInputError, match="must be three label arrays"):
        nnaa(t, h, s, subjects=(None, None))
    with pytest.raises(InvalidInputError, match="must be \\(heldout_subjects"):
        flagging_from_distances(np.ones(3), np.ones(3), subjects=(None,))
    with pytest.raises(InvalidInputError, match="a subject has distances in two cohorts"):
        flagging_from_distances(
            np.arange(4.0), np.arange(4.0), heldout_strata=[0, 1, 0, 1],
            subjects=([1, 1, 2, 2], None), n_permutations=9,
        )  # fmt: skip
    with pytest.raises(InvalidInputError, match="percentile_method"):
        flagging_from_distances(np.ones(3), np.ones(3), percentile_method="nearest")


def test_subject_map_file(tmp_path) -> None:
    good = tmp_path / "subjects.csv"
    good.write_text("file,subject\na/p1_x.png,p1\np2_y.png,p2\n")
    mapping = read_subject_map(good)
    assert subjects_for_files(["a/p1_x.png", "b/p2_y.png"], mapping=mapping) == ["p1", "p2"]
    with pytest.raises(InvalidInputError, match=r"1 file\(s\) missing from the `subjects` map"):
        subjects_for_files(["a/p3.png"], mapping=mapping)
    bad = tmp_path / "bad.csv"
    bad.write_text("name,who\nx.png,1\n")
    with pytest.raises(InvalidInputError, match="must have a file column"):
        read_subject_map(bad)
    with pytest.raises(InvalidInputError, match="file not found"):
        read_subject_map(tmp_path / "none.csv")


def test_subject_pattern() -> None:
    assert subjects_for_files(["c/p01_a.png"], pattern=r"^(p\d+)_") == ["p01"]
    with pytest.raises(InvalidInputError, match="must have a capture group"):
        subjects_for_files(["c/p01_a.png"], pattern=r"^p\d+_")
    with pytest.raises(InvalidInputError, match=r"does not match the file name 'x\.png'"):
        subjects_for_files(["c/x.png"], pattern=r"^(p\d+)_")
