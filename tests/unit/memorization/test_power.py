"""When a memorisation test cannot reject: smallest attainable p-values and coarse percentiles."""

from __future__ import annotations

import itertools
from collections import namedtuple

import numpy as np
import pandas as pd
import pytest
from scipy.special import comb

from idaudit.memorization import flagging_from_distances
from idaudit.memorization._power import power_notes, smallest_p_value, unresolved_percentiles
from idaudit.pipeline._privacy_report import _markdown_nnaa, _verdict_flagging, _verdict_nnaa


def test_smallest_p_value_counts_the_distinct_relabellings() -> None:
    # 2 + 2 images: C(4, 2) = 6 relabellings, so the exact test never goes below 1/6
    assert smallest_p_value([(2, 2)], 9999) == pytest.approx(1 / 6)
    # within two cohorts of 2 + 2: 6 · 6 = 36
    assert smallest_p_value([(2, 2), (2, 2)], 9999) == pytest.approx(1 / 36)
    assert smallest_p_value([(40, 40)], 199) == pytest.approx(1 / 200)  # the Monte-Carlo floor
    assert smallest_p_value([(5, 7)], 10**6) == pytest.approx(1 / comb(12, 5))


def test_the_flagging_test_on_two_images_per_split_never_goes_below_the_bound() -> None:
    # the most extreme data: both synthetic images closer than both held-out ones
    p_seen = []
    for seed in range(5):
        res = flagging_from_distances(
            [1.0, 1.1], [0.1, 0.2], percentiles=[50], n_permutations=999, rng=seed
        )
        p_seen.append(float(res.p_values[0]))
    bound = smallest_p_value([(2, 2)], 999)
    # every p-value is the +1 estimate of 1/6: (1 + b)/(1000) with b ~ Binomial(999, 1/6);
    # 3 sd of b is 35, so none falls below (1 + 166.5 - 35)/1000 = 0.132
    assert min(p_seen) > bound - 0.035
    assert min(p_seen) > 0.05  # it cannot reject at 5 %
    # the exact count, by enumerating the relabellings: 1 of the 6 is as extreme
    pooled = [1.0, 1.1, 0.1, 0.2]
    extreme = sum(
        1 for syn in itertools.combinations(range(4), 2) if max(pooled[i] for i in syn) <= 0.2
    )
    assert extreme / comb(4, 2) == pytest.approx(bound)


def test_percentiles_the_held_out_count_cannot_resolve() -> None:
    # 2 held-out images: the first order statistic already flags 50 % of them
    assert unresolved_percentiles([1, 2, 5, 10, 20], 2) == [1, 2, 5, 10, 20]
    assert unresolved_percentiles([1, 2, 5, 10, 20], 20) == [1, 2]
    assert unresolved_percentiles([1, 2, 5, 10, 20], 100) == []


_Row = namedtuple(
    "_Row",
    "metric cohort p_value n_permutations n_train n_heldout n_synthetic privacy_loss ci_lower "
    "ci_upper below_min_size",
)


def test_no_verdict_instead_of_no_evidence_without_power() -> None:
    tiny = _Row("m", "pooled", 0.168, 999, 2, 2, 2, 0.1, np.nan, np.nan, True)
    words = _verdict_nnaa(tiny, 0.05, 0.95)
    assert "no evidence" not in words
    assert "cannot reject" in words
    large = tiny._replace(n_train=40, n_heldout=40, p_value=0.4)
    assert _verdict_nnaa(large, 0.05, 0.95).startswith("no evidence of memorisation")
    rows = pd.DataFrame(
        {"percentile": [1.0, 5.0], "synthetic_pct": [50.0, 50.0], "heldout_pct": [50.0, 50.0],
         "p_value": [0.5, 0.5], "n_heldout": [2, 2], "n_synthetic": [2, 2]}
    )  # fmt: skip
    assert _verdict_flagging(rows, 0.05, smallest_p_value([(2, 2)], 999)).startswith("no verdict")
    flag = rows.assign(metric="m")
    nnaa = pd.DataFrame([tiny._asdict()])
    notes = power_notes(flag, nnaa, 0.05, 999)
    assert len(notes) == 3  # flagging without power, coarse percentiles, NNAA without power
    assert "0.167 > 0.05" in notes[0]


def test_the_canned_aa_sentence_follows_the_table() -> None:
    base = {
        "metric": "m", "cohort": "pooled", "privacy_loss": 0.0, "ci_lower": np.nan,
        "ci_upper": np.nan, "p_value": 0.5, "n_permutations": 99, "n_train": 30,
        "n_heldout": 30, "n_synthetic": 30, "below_min_size": False,
    }  # fmt: skip
    above = pd.DataFrame([{**base, "aa_train_synth": 0.8, "aa_heldout_synth": 0.8}])
    below = pd.DataFrame([{**base, "aa_train_synth": 0.4, "aa_heldout_synth": 0.45}])
    assert "here both AA values sit above 0.5 in every row" in "\n".join(
        _markdown_nnaa(above, 10, 0.95)
    )
    text = "\n".join(_markdown_nnaa(below, 10, 0.95))
    assert "both AA values sit above 0.5" not in text
    assert "not every row of this table does" in text


def test_the_privacy_verdict_on_two_images_per_split_never_says_no_evidence() -> None:
    # the case: 2 images per split, so every p-value is at least 1/6 (the flagging
    # test: C(4, 2) = 6 relabellings; NNAA: train and held-out relabelled, C(4, 2) = 6) and
    # no test can reject at 0.05, whatever the images; the most extreme data is drawn
    from idaudit.memorization._nnaa import nnaa_from_distances
    from idaudit.pipeline._privacy_report import privacy_verdict

    flag = flagging_from_distances(
        [1.0, 1.1], [0.1, 0.2], percentiles=[50], n_permutations=999, rng=0
    ).to_frame(metric="dlib")
    points = np.array([[0.0], [0.1], [5.0], [5.1], [0.05], [0.06]])  # train, held-out, synth
    distances = np.abs(points - points.T)
    nn = nnaa_from_distances(distances, (2, 2, 2), n_permutations=999, n_bootstrap=10)
    nnaa = nn.to_frame(metric="dlib").assign(cohort="pooled")
    lines = privacy_verdict(flag, nnaa, 0.05, 999)
    text = "\n".join(lines)
    (bullet,) = [line for line in lines if line.startswith("- ")]
    assert bullet.startswith("- **estimate** — **dlib**: flagging, no verdict: with these set")
    assert "the smallest attainable p-value is 0.167 > 0.05" in text
    assert "NNAA, no verdict (p = " in text
    assert "no evidence of memorisation" not in text
    assert "no evidence either way" in text


def _subjects(gen: np.random.Generator, n_subjects: int, per: int) -> tuple[np.ndarray, np.ndarray]:
    centres = gen.normal(size=(n_subjects, 8))
    photos = np.concatenate([c + 0.3 * gen.normal(size=(per, 8)) for c in centres])
    return photos, np.repeat(np.arange(n_subjects), per)


def test_the_nnaa_floor_counts_subjects_not_images() -> None:
    from idaudit.memorization import nnaa
    from idaudit.memorization._power import nnaa_smallest_p

    gen = np.random.default_rng(0)
    train, s_t = _subjects(gen, 2, 10)
    held, s_h = _subjects(gen, 2, 10)
    memorised = train + 0.01 * gen.normal(size=train.shape)  # synthetic = near copies
    res = nnaa(train, held, memorised, subjects=(s_t, s_h + 100, None), n_bootstrap=0,
               n_permutations=999, rng=0)  # fmt: skip
    row = res.to_frame("cosine")
    row.insert(1, "cohort", "pooled")
    r = next(row.itertuples())
    # whole subjects move: C(2 + 2, 2) = 6 relabellings, not C(40, 20) over the 40 images
    assert nnaa_smallest_p(r) == pytest.approx(1 / comb(4, 2))
    words = _verdict_nnaa(r, 0.05, 0.95)
    assert words.startswith("no verdict")
    assert "no evidence" not in words
    assert res.smallest_p_value == pytest.approx(1 / 6)
    # the Monte-Carlo p-value estimates a share >= 1/6: (1 + b)/1000, b ~ Bin(999, >= 1/6),
    # 3 sd = 35, so it stays above 0.132
    assert res.p_value > 0.132
    notes = power_notes(pd.DataFrame(columns=["metric"]), row, 0.05, 999)
    assert len(notes) == 1
    assert "0.167 > 0.05" in notes[0]


def test_the_nnaa_floor_counts_relabellings_within_strata() -> None:
    from idaudit.memorization import nnaa

    gen = np.random.default_rng(2)
    train, held = gen.normal(size=(4, 8)), gen.normal(size=(4, 8))
    memorised = train + 0.01 * gen.normal(size=train.shape)
    cohort = np.array(["a", "b", "c", "d"])  # four cohorts of 1 + 1 images
    res = nnaa(train, held, memorised, strata=(cohort, cohort), n_bootstrap=0,
               n_permutations=9999, rng=0)  # fmt: skip
    row = res.to_frame("cosine")
    row.insert(1, "cohort", "pooled")
    words = _verdict_nnaa(next(row.itertuples()), 0.05, 0.95)
    # within-cohort swaps only: 2^4 = 16 relabellings (C(8, 4) = 70 if pooled)
    assert "no evidence" not in words
    assert "0.0625 > 0.05" in words
    assert res.smallest_p_value == pytest.approx(1 / 2**4)
    pooled = nnaa(train, held, memorised, n_bootstrap=0, n_permutations=9999, rng=0)
    assert pooled.smallest_p_value == pytest.approx(1 / comb(8, 4))


def test_the_flagging_floor_counts_subjects_and_cohorts() -> None:
    from idaudit.memorization import flagging
    from idaudit.memorization._power import flagging_smallest_p

    gen = np.random.default_rng(1)
    train = gen.normal(size=(40, 8))
    held, s_h = _subjects(gen, 2, 10)
    memorised = train[:20] + 0.01 * gen.normal(size=(20, 8))
    s_s = np.repeat([0, 1], 10)  # two generated identities of 10 samples
    res = flagging(train, held, memorised, subjects=(None, s_h, s_s), percentiles=[1, 5],
                   n_permutations=999, rng=0)  # fmt: skip
    rows = res.to_frame("cosine")
    assert (rows["synthetic_pct"] == 100.0).all()  # every synthetic image is flagged
    p_min = flagging_smallest_p(rows, None, "cosine", 999)
    assert p_min == pytest.approx(1 / comb(4, 2))  # 2 + 2 subjects
    assert _verdict_flagging(rows, 0.05, p_min).startswith("no verdict")
    empty = pd.DataFrame(columns=["metric", "cohort", "n_train", "n_heldout", "n_permutations"])
    assert any("0.167 > 0.05" in n for n in power_notes(rows, empty, 0.05, 999))
    # cohorts multiply the counts: 2 cohorts of 1 + 1 subjects, 2 · 2 = 4 relabellings
    by = flagging_from_distances(
        [1.0, 1.1, 1.0, 1.1], [0.1, 0.2, 0.1, 0.2], heldout_strata=["a", "a", "b", "b"],
        synthetic_strata=["a", "a", "b", "b"], subjects=([0, 0, 1, 1], [0, 0, 1, 1]),
        percentiles=[50], n_permutations=999, rng=0,
    )  # fmt: skip
    assert by.smallest_p_value == pytest.approx(1 / 4)
