"""Metric sanity check: whether a model's distances put a subject's own images closer."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd
import torch
from scipy.stats import rankdata

from idaudit._results import Status
from idaudit._validation import RngLike, check_integer, check_random_state
from idaudit.exceptions import InvalidInputError
from idaudit.memorization._neighbours import Metric, check_vectors, pairwise_distances
from idaudit.memorization._subjects import subject_regex

__all__ = ["SANITY_STATUS", "SanityResult", "metric_sanity", "subjects_from_names"]

#: Formal status of every column of :meth:`SanityResult.to_frame`.
SANITY_STATUS: dict[str, Status] = {
    "auc": "sample_estimate",
    "p_value": "sample_estimate",
    "n_images": "descriptive",
    "n_subjects": "descriptive",
    "n_same_pairs": "descriptive",
    "n_different_pairs": "descriptive",
    "n_permutations": "descriptive",
}

_PERMUTATION_BLOCK = 64


@dataclass(frozen=True)
class SanityResult:
    """Same-subject against different-subject distances for one metric.

    Attributes
    ----------
    auc : float
        Probability that a different-subject pair is farther apart than a same-subject pair
        (ties count one half); 0.5 means the metric ignores who is pictured. Status: sample
        estimate.
    p_value : float
        One-sided subject-label permutation p-value of that AUC (NaN with
        ``n_permutations=0``).
    n_images, n_subjects, n_same_pairs, n_different_pairs, n_permutations : int
    """

    auc: float
    p_value: float
    n_images: int
    n_subjects: int
    n_same_pairs: int
    n_different_pairs: int
    n_permutations: int

    def to_frame(self, metric: str | None = None) -> pd.DataFrame:
        """One row with every attribute; ``frame.attrs["status"]`` holds the statuses."""
        frame = pd.DataFrame([{name: getattr(self, name) for name in SANITY_STATUS}])
        if metric is not None:
            frame.insert(0, "metric", metric)
        frame.attrs["status"] = dict(SANITY_STATUS)
        return frame


def subjects_from_names(names: Sequence[str], pattern: str) -> list[str | None]:
    r"""Subject id of each file name by ``re.search(pattern, name)``; ``None`` where none.

    The id is the named group ``subject`` when the pattern has one, else group 1, else the
    whole match.

    Examples
    --------
    >>> from idaudit.memorization import subjects_from_names
    >>> subjects_from_names(["p01_a.png", "p01_b.png", "x.png"], r"^(p\d+)_")
    ['p01', 'p01', None]
    """
    regex = subject_regex(pattern)
    out: list[str | None] = []
    for name in names:
        m = regex.search(name)
        if m is None:
            out.append(None)
        elif "subject" in regex.groupindex:
            out.append(m.group("subject"))
        else:
            out.append(m.group(1) if regex.groups else m.group(0))
    return out


def metric_sanity(
    x: npt.ArrayLike,
    subjects: Sequence[Any] | npt.ArrayLike,
    *,
    metric: Metric | str = "cosine",
    n_permutations: int = 999,
    rng: RngLike = 0,
    device: str | torch.device = "cpu",
) -> SanityResult:
    """Check that a metric ranks same-subject pairs closer than different-subject pairs.

    Parameters
    ----------
    x : array_like
        Embeddings ``(n, d)``, or with ``metric="precomputed"`` a square ``(n, n)`` distance
        matrix.
    subjects : sequence, shape (n,)
        Subject (patient, person) of each image.
    metric : {"cosine", "euclidean", "precomputed"}, default "cosine"
    n_permutations : int, default 999
        Subject-label permutations for the p-value; 0 skips it.
    rng : int, SeedSequence or Generator, default 0
    device : str or torch.device, default "cpu"

    Returns
    -------
    SanityResult

    Notes
    -----
    Over the ``n(n-1)/2`` pairs, the AUC is the Mann–Whitney statistic
    ``(R_diff - n_d(n_d + 1)/2) / (n_s n_d)`` from the mid-ranks of all pair distances. The
    pairs share images and are not independent, so the Mann–Whitney p-value would not be
    valid; instead the subject labels are permuted over the images (the ranks stay) and the
    p-value is ``(1 + #{AUC* >= AUC}) / (1 + B)``, exact under the null hypothesis that the
    labels are exchangeable given the images. The check is the manuscript's ordinal
    verification of each recognition model (seed 003, "Practical notes").

    Examples
    --------
    >>> import numpy as np
    >>> from idaudit.memorization import metric_sanity
    >>> gen = np.random.default_rng(0)
    >>> centres = gen.standard_normal((5, 16))
    >>> emb = np.repeat(centres, 4, axis=0) + 0.3 * gen.standard_normal((20, 16))
    >>> res = metric_sanity(emb, np.repeat(np.arange(5), 4), n_permutations=99)
    >>> res.auc > 0.9, res.p_value
    (True, 0.01)
    """
    labels = np.asarray(subjects)
    if metric == "precomputed":
        d = np.asarray(x, dtype=np.float64)
        if d.ndim != 2 or d.shape[0] != d.shape[1]:
            raise InvalidInputError(f"`x` must be a square distance matrix; got {d.shape}.")
    else:
        d = pairwise_distances(check_vectors(x, "x"), metric=metric, device=device)  # type: ignore[arg-type]
    n = d.shape[0]
    if labels.shape != (n,):
        raise InvalidInputError(
            f"`subjects` must hold one label per image ({n}); got {labels.shape}."
        )
    n_permutations = check_integer(n_permutations, "n_permutations", minimum=0)
    _, codes = np.unique(labels, return_inverse=True)
    iu, ju = np.triu_indices(n, k=1)
    same = codes[iu] == codes[ju]
    n_same, n_diff = int(same.sum()), int((~same).sum())
    if n_same == 0 or n_diff == 0:
        raise InvalidInputError(
            "`subjects` must give at least one subject with two images and two subjects; "
            f"got {n_same} same-subject and {n_diff} different-subject pairs."
        )
    ranks = rankdata(d[iu, ju])  # mid-ranks, ascending distance

    def auc_of(same_mask: npt.NDArray[np.bool_]) -> npt.NDArray[np.float64]:
        r_same = (same_mask * ranks).sum(axis=-1)
        r_diff = ranks.sum() - r_same
        return (r_diff - n_diff * (n_diff + 1) / 2) / (n_same * n_diff)  # type: ignore[no-any-return]

    auc = float(auc_of(same))
    p_value = float("nan")
    if n_permutations:
        gen = check_random_state(rng)
        exceed = 0
        for start in range(0, n_permutations, _PERMUTATION_BLOCK):
            b = min(_PERMUTATION_BLOCK, n_permutations - start)
            perm = gen.permuted(np.broadcast_to(codes, (b, n)), axis=1)  # (b, n)
            mask = perm[:, iu] == perm[:, ju]  # (b, pairs)
            exceed += int((auc_of(mask) >= auc - 1e-12).sum())
        p_value = (1.0 + exceed) / (1.0 + n_permutations)
    return SanityResult(
        auc=auc,
        p_value=p_value,
        n_images=n,
        n_subjects=int(codes.max() + 1),
        n_same_pairs=n_same,
        n_different_pairs=n_diff,
        n_permutations=n_permutations,
    )
