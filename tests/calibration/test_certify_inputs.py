"""Inputs that fake independence: repeated failed records and near copies.

Both identities draw from one law (a 3-dimensional standard normal; in the first case with a
failed output — an all-NaN row — at probability 0.5), so the true ε of the pair is 0 and any
certified ε_lb > 0 is a violation. The records are stored more than once:

* repeated failed records: identity a's 120 records, failures included, are each stored
  three times, identity b's once. Collapsing the successful copies but keeping every failed
  row raises a's failure rate among the rows from 0.5 to 0.75, which a test can read.
* near copies: every record of both identities is stored three times, each copy with
  independent noise of sd 3e-10 (a re-encoding, a float round trip). A 1-nearest-neighbour
  classifier finds a development copy of each test row.

α = 0.2, 40 repetitions; a sound path certifies ε_lb > 0 in at most 0.2 · 40 = 8 of them in
expectation (sd 2.5), and the binomial test below fails at p < 0.001.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from scipy.stats import binomtest
from sklearn.neighbors import KNeighborsClassifier

from idaudit import EmbeddingSet, ReservedTestCertifier
from idaudit.exceptions import IdauditWarning, InvalidInputError

pytestmark = [pytest.mark.calibration]

ALPHA = 0.2
N_REPS = 40
N_DRAWS = 40  # per identity, before copying


def _draws(gen: np.random.Generator, n: int, fail: float) -> np.ndarray:
    x = gen.standard_normal((n, 3))
    x[gen.random(n) < fail] = np.nan
    return x


def _set(x: np.ndarray, labels: np.ndarray) -> EmbeddingSet:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", IdauditWarning)  # "rows failed": expected
        return EmbeddingSet(x, labels)


def _at_most_nominal(n_bad: int, what: str) -> None:
    p = binomtest(n_bad, N_REPS, ALPHA, alternative="greater").pvalue
    assert p > 1e-3, f"{what}: eps_lb > 0 at a true epsilon of 0 in {n_bad}/{N_REPS} (p={p:.2g})"


def test_collapse_refuses_failed_records_it_cannot_tell_apart() -> None:
    """Keeping every failed record certified ε_lb > 0 in 30 of 40 runs; now refused.

    (Measured on the code that collapsed the successful copies and kept every failed row.)
    A path that refuses makes no claim, so no claim is broken; the refusal names the count.
    Identity b's records, stored once, would be kept: failed rows are separate draws where
    no successful row shows that records were copied.
    """
    positive, refused = 0, 0
    for rep in range(N_REPS):
        gen = np.random.default_rng([8, rep])
        xa, xb = _draws(gen, 120, 0.5), _draws(gen, 120, 0.5)
        x = np.vstack([xa, xa, xa, xb])  # every record of a stored three times, failures too
        es = _set(x, np.repeat(["a", "b"], [360, 120]))
        certifier = ReservedTestCertifier(
            duplicates="collapse", n_select=1, alpha=ALPHA, test_size=0.5, n_folds=2, rng=rep,
            progress=False,
        )  # fmt: skip
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", IdauditWarning)
                cert = certifier.fit(es, [("a", "b")])
        except InvalidInputError as err:
            refused += "1 candidate identity has successful rows recorded more" in str(err)
            continue
        positive += cert.epsilon_lb_ > 0
    _at_most_nominal(positive, "collapse with repeated failed records")
    assert refused == N_REPS


def _near_copies(rep: int) -> EmbeddingSet:
    gen = np.random.default_rng([9, rep])
    x = gen.standard_normal((2 * N_DRAWS, 3))
    copies = np.vstack([x + 3e-10 * gen.standard_normal(x.shape) for _ in range(3)])
    labels = np.tile(np.repeat(["a", "b"], N_DRAWS), 3)
    return EmbeddingSet(copies, labels)


def test_near_copies_collapse_and_are_counted() -> None:
    """Near copies certified ε_lb > 0 in 40 of 40 runs with collapse (1-NN); now in 1 of 40.

    (Measured on the code that collapsed exact copies only, where n_duplicates was 0.) With
    ``duplicates="keep"`` the certifier now warns with the count of near copies.
    """
    positive = 0
    for rep in range(N_REPS):
        cert = ReservedTestCertifier(
            duplicates="collapse", classifier=KNeighborsClassifier(n_neighbors=1), n_select=1,
            alpha=ALPHA, test_size=0.5, n_folds=2, rng=rep, progress=False,
        ).fit(_near_copies(rep), [("a", "b")])  # fmt: skip
        positive += cert.epsilon_lb_ > 0
        assert cert.certificates_.attrs["n_near_duplicates"] == 4 * N_DRAWS
    _at_most_nominal(positive, "collapse with near copies")
    with pytest.warns(IdauditWarning, match=r"and 160 are near copies of one"):
        ReservedTestCertifier(
            n_select=1, alpha=ALPHA, test_size=0.5, n_folds=2, rng=0, progress=False
        ).fit(_near_copies(0), [("a", "b")])
