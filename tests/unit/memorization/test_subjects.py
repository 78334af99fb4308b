"""Subject-aware inference: checks, numbers unchanged without subjects, percentile methods."""

from __future__ import annotations

import numpy as np
import pytest

from idaudit.dp import betting_mean_lower_bound
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


def test_cap_draws_whole_subjects_a_fixed_number_per_set() -> None:
    from idaudit.memorization._nnaa import cap_indices, subsample_indices

    train = np.repeat(np.arange(30), 4)  # 30 subjects x 4 photos
    heldout = np.repeat(np.arange(10), 2)  # 10 subjects x 2 photos
    # pooled mean photos per subject: (120 + 20) / 40 = 3.5, so a cap of 36 keeps 10 subjects
    keep, unit = cap_indices((train, heldout, None), (120, 20, 50), 36, np.random.default_rng(0))
    assert unit == "subjects"
    kept = np.unique(train[keep[0]])
    assert kept.size == 10
    np.testing.assert_array_equal(np.sort(keep[0]), np.flatnonzero(np.isin(train, kept)))
    np.testing.assert_array_equal(keep[1], np.arange(20))  # 10 subjects <= 10: all kept
    assert keep[2].size == 36  # synthetic singletons: 36 images, as the image cap
    # without subjects: the image cap and its seeded draws, unchanged
    got, unit = cap_indices((None, None, None), (120, 20, 50), 36, np.random.default_rng(5))
    gen = np.random.default_rng(5)
    want = [subsample_indices(n, 36, gen) for n in (120, 20, 50)]
    assert unit == "images"
    for a, b in zip(got, want, strict=True):
        np.testing.assert_array_equal(a, b)


def test_nnaa_records_the_subject_cap() -> None:
    t, h, s = _sets(1)
    labels = np.arange(40) // 4
    res = nnaa(t, h, s, subjects=(labels, labels + 50, None), max_samples=20, n_bootstrap=0,
               n_permutations=9)  # fmt: skip
    assert (res.cap_unit, res.capped, res.n_train, res.n_heldout) == ("subjects", True, 20, 20)
    assert res.to_xarray().attrs["setting.cap_unit"] == "subjects"
    res = nnaa(t, h, s, max_samples=20, n_bootstrap=0, n_permutations=9)
    assert (res.cap_unit, res.capped) == ("images", True)


def test_appearance_nnaa_caps_by_whole_subjects() -> None:
    from pathlib import Path
    from types import SimpleNamespace

    from scipy.spatial.distance import cdist

    from idaudit.pipeline._privacy_axes import _appearance_nnaa

    gen = np.random.default_rng(4)
    sizes = {"train": 60, "heldout": 24, "synthetic": 30}
    vectors = {f"{split}{i}": gen.standard_normal(4) for split, n in sizes.items()
               for i in range(n)}  # fmt: skip
    names = {split: [f"{split}{i}" for i in range(n)] for split, n in sizes.items()}
    embedded = SimpleNamespace(
        kept_paths=lambda split, cohort: [Path(n) for n in names[split]],
        kept_hashes=lambda split, cohort: names[split],
    )

    def distances(rows, cols):
        return cdist(*(np.array([vectors[h] for h in side[1]]) for side in (rows, cols)))

    settings = SimpleNamespace(rng=0, lpips_max_samples=24, n_bootstrap=0, nnaa_permutations=9,
                               confidence_level=0.95, device="cpu")  # fmt: skip
    subj = {"train": np.repeat(np.arange(20), 3).astype(str), "heldout": np.repeat(
        np.arange(100, 108), 3).astype(str)}  # fmt: skip
    res = _appearance_nnaa(embedded, ["c"], distances, settings, subj)
    # 3 photos per subject everywhere: a cap of 24 keeps 8 whole subjects of each real set
    assert (res.cap_unit, res.capped, res.n_train, res.n_heldout) == ("subjects", True, 24, 24)
    assert res.n_synthetic == 24  # synthetic singletons: the image cap
    res = _appearance_nnaa(embedded, ["c"], distances, settings, None)
    assert (res.cap_unit, res.n_train, res.n_heldout, res.n_synthetic) == ("images", 24, 24, 24)


def test_flagging_interval_by_group_only_when_a_group_holds_several_images() -> None:
    gen = np.random.default_rng(6)
    d_h, d_s = gen.random(50), gen.random(40)
    plain = flagging_from_distances(d_h, d_s, percentiles=[20], n_permutations=0)
    singles = flagging_from_distances(d_h, d_s, subjects=(None, np.arange(40)),
                                      percentiles=[20], n_permutations=0)  # fmt: skip
    assert plain.interval_method == singles.interval_method == "clopper_pearson"
    np.testing.assert_array_equal(plain.ci_lower, singles.ci_lower)
    grouped = flagging_from_distances(d_h, d_s, subjects=(None, np.arange(40) // 4),
                                      percentiles=[20], n_permutations=0)  # fmt: skip
    assert (grouped.interval_method, grouped.n_synthetic_groups) == ("betting_by_group", 10)
    # the betting bound on the ten groups' flagged shares, each side at 0.025
    shares = (d_s <= grouped.thresholds[0]).reshape(10, 4).mean(axis=1)
    assert grouped.ci_lower[0] == betting_mean_lower_bound(shares, 0.025)
    assert grouped.ci_upper[0] == 1.0 - betting_mean_lower_bound(1.0 - shares, 0.025)
    assert grouped.ci_lower[0] <= grouped.synthetic_rate[0] <= grouped.ci_upper[0]
    assert grouped.to_xarray().attrs["setting.interval_method"] == "betting_by_group"
