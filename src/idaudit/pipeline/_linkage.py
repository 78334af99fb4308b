"""Re-identification of anonymised faces: the first numbers an anonymiser study reports."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt
import pandas as pd
from scipy import stats
from scipy.spatial.distance import cdist

from idaudit._validation import check_in_range
from idaudit.exceptions import InvalidInputError

__all__ = ["LinkageReport", "linkage_report"]


class _EncodedDraws(Protocol):
    """What linkage reads of a :class:`~idaudit.pipeline.GeneratorEmbeddings`."""

    @property
    def rows(self) -> pd.DataFrame: ...  # identity, source_index, draw per vector

    @property
    def vectors(self) -> npt.NDArray[np.float64]: ...  # (n, d), aligned with ``rows``


@dataclass(frozen=True)
class LinkageReport:
    """Re-identification of anonymised outputs against the original faces.

    Status of every rate: ``sample_estimate``, with an exact (Clopper–Pearson) two-sided
    confidence interval at ``confidence_level``.

    Attributes
    ----------
    top1_rate : float
        Share of anonymised faces whose nearest original face (among the originals of *other*
        source images) belongs to the same identity: closed-set identification.
    top1_low, top1_high : float
        Its exact confidence interval.
    n_probes : int
        Source images whose anonymised face was tried (those whose identity has another
        source image; one trial each).
    chance : float
        The rate a random guess gets, ``1 / n_identities``.
    match_rate : float
        Share of (original, anonymised) pairs of the *same* source image whose embedding
        distance is below ``threshold``: the verification a recogniser performs.
    match_low, match_high : float
        Its exact confidence interval.
    n_pairs : int
        Source images with a usable original and anonymised face (one trial each).
    threshold : float
        Distance threshold (dlib's same-person distance, 0.6, by default).
    confidence_level : float
        Confidence level of the intervals.
    """

    top1_rate: float
    top1_low: float
    top1_high: float
    n_probes: int
    chance: float
    match_rate: float
    match_low: float
    match_high: float
    n_pairs: int
    threshold: float
    confidence_level: float

    def to_dict(self) -> dict[str, Any]:
        """Return the fields as a plain dict (a table row)."""
        return asdict(self)


def _exact(k: int, n: int, confidence_level: float) -> tuple[float, float, float]:
    if n == 0:
        return float("nan"), float("nan"), float("nan")
    ci = stats.binomtest(k, n).proportion_ci(confidence_level=confidence_level, method="exact")
    return k / n, float(ci.low), float(ci.high)


def linkage_report(
    reference: _EncodedDraws,
    anonymised: _EncodedDraws,
    *,
    identities: Sequence[Any] | None = None,
    threshold: float = 0.6,
    confidence_level: float = 0.95,
) -> LinkageReport:
    """Top-1 identification and same-source matching of anonymised faces against originals.

    Parameters
    ----------
    reference : GeneratorEmbeddings
        The original faces (e.g. :func:`encode_generator` of the identity map).
    anonymised : GeneratorEmbeddings
        The same sources through the anonymiser, with the same ``rng`` and sampling, so that
        draw ``(identity, source_index, draw)`` of one matches the other.
    identities : sequence of labels, optional
        Restrict to these identities (default: all that appear in both).
    threshold : float, default 0.6
        Distance under which two faces count as the same person. dlib's published threshold
        is 0.6 on its raw descriptors, whose norms are close to but not exactly 1; idaudit's
        encoders return unit-norm rows, on which the same number is used.
    confidence_level : float, default 0.95
        Level of the exact two-sided intervals.

    Returns
    -------
    LinkageReport

    Notes
    -----
    *Top-1 identification* is a closed-set search: each anonymised face is compared with
    every original face of a different source image (leave-one-source-out, so matching a
    photo to itself does not count as recognising the person) and assigned the identity of
    the nearest. *Matching* asks whether the anonymised face and the original it came from
    are still "the same person" for the recogniser. Both are sample estimates over the faces
    given; the intervals treat source images as independent trials (the usual binomial
    reading). A source drawn several times (``sampling="with_replacement"`` or
    ``repeats > 1``) is one trial, its first usable draw: repeated draws of one image are
    not independent (a deterministic anonymiser returns the same face each time), and
    counting them would narrow the intervals without adding evidence.
    """
    threshold = check_in_range(threshold, "threshold", 0.0, None)
    confidence_level = check_in_range(confidence_level, "confidence_level", 0.0, 1.0)
    keys = ["identity", "source_index", "draw"]
    ref = reference.rows.assign(row=np.arange(len(reference.rows)))
    ano = anonymised.rows.assign(row=np.arange(len(anonymised.rows)))
    if identities is not None:
        wanted = set(identities)
        ref = ref[ref["identity"].isin(wanted)]
        ano = ano[ano["identity"].isin(wanted)]
    # one trial per source image: repeated draws of a source (sampling with replacement,
    # repeats > 1) are not independent of each other, so only its first usable draw counts
    both = ano.merge(ref, on=keys, suffixes=("_a", "_r"))
    both = both.sort_values("draw").drop_duplicates(["identity", "source_index"])
    ano = ano.sort_values("draw").drop_duplicates(["identity", "source_index"])
    if both.empty:
        raise InvalidInputError(
            "`reference` and `anonymised` share no draw (identity, source_index, draw); "
            "encode both with the same sources, sampling and rng."
        )
    # same-source matching
    xa = anonymised.vectors[both["row_a"].to_numpy()]  # (m, d)
    xr_ = reference.vectors[both["row_r"].to_numpy()]  # (m, d)
    dist = np.linalg.norm(xa - xr_, axis=1)  # (m,)
    match = _exact(int((dist < threshold).sum()), len(dist), confidence_level)
    # leave-one-source-out identification over the reference gallery
    gallery = reference.vectors[ref["row"].to_numpy()]  # (g, d)
    g_id = ref["identity"].to_numpy()
    g_src = ref["source_index"].to_numpy()
    probes = anonymised.vectors[ano["row"].to_numpy()]  # (p, d)
    p_id = ano["identity"].to_numpy()
    p_src = ano["source_index"].to_numpy()
    d = cdist(probes, gallery)  # (p, g)
    same_source = (p_id[:, None] == g_id[None, :]) & (p_src[:, None] == g_src[None, :])
    d[same_source] = np.inf
    has_other = np.array(
        [bool(((g_id == i) & (g_src != s)).any()) for i, s in zip(p_id, p_src, strict=True)]
    )
    nearest = g_id[np.argmin(d, axis=1)] if len(gallery) else np.array([])
    hits = (nearest == p_id) & has_other
    top1 = _exact(int(hits.sum()), int(has_other.sum()), confidence_level)
    n_ids = len(set(g_id.tolist()))
    return LinkageReport(
        top1_rate=top1[0],
        top1_low=top1[1],
        top1_high=top1[2],
        n_probes=int(has_other.sum()),
        chance=1.0 / n_ids if n_ids else float("nan"),
        match_rate=match[0],
        match_low=match[1],
        match_high=match[2],
        n_pairs=len(dist),
        threshold=float(threshold),
        confidence_level=float(confidence_level),
    )
