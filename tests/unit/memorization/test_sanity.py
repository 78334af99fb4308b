"""The metric sanity check (idaudit.memorization._sanity) against scikit-learn's AUC."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.spatial.distance import cdist
from sklearn.metrics import roc_auc_score

from idaudit.exceptions import InvalidInputError
from idaudit.memorization import (
    metric_sanity,
    subjects_from_names,
)

# ------------------------------------------------------------------ metric sanity


def test_sanity_auc_matches_sklearn() -> None:
    gen = np.random.default_rng(10)
    emb = np.repeat(gen.standard_normal((6, 8)), 3, axis=0) + gen.standard_normal((18, 8))
    subjects = np.repeat(list("abcdef"), 3)
    res = metric_sanity(emb, subjects, n_permutations=0)
    iu, ju = np.triu_indices(18, 1)
    d = cdist(emb, emb, "cosine")[iu, ju]
    different = subjects[iu] != subjects[ju]
    assert res.auc == pytest.approx(roc_auc_score(different, d), abs=1e-12)
    assert (res.n_same_pairs, res.n_different_pairs, res.n_subjects) == (18, 135, 6)


def test_sanity_hand_case_and_errors() -> None:
    # two subjects, two images each on a line: same pairs at 1, different pairs at 9, 10, 10, 11
    pos = np.array([[0.0], [1.0], [10.0], [11.0]])
    res = metric_sanity(cdist(pos, pos), ["a", "a", "b", "b"], metric="precomputed",
                        n_permutations=200, rng=0)  # fmt: skip
    assert res.auc == 1.0
    # 3 labellings of 4 images into two pairs; the observed one (and only it) reaches AUC 1
    assert res.p_value == pytest.approx(1 / 3, abs=0.1)
    with pytest.raises(InvalidInputError, match="at least one subject with two images"):
        metric_sanity(pos, ["a", "b", "c", "d"], metric="euclidean")
    assert subjects_from_names(["P1-x.png", "q.png"], r"(?P<subject>P\d+)-") == ["P1", None]
