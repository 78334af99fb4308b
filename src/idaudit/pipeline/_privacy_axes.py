"""The privacy check's two axes: flagging and NNAA on identity embeddings and on appearance.

:func:`_identity_axis` runs both tests on each encoder's embeddings (and the metric sanity
check with subjects); :func:`_appearance_axis` on whole images with LPIPS or SSIM, whose
distances go through the :class:`~idaudit.pipeline.PrivacyCache`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd

from idaudit.dp import clopper_pearson_lower, clopper_pearson_upper
from idaudit.exceptions import InvalidInputError
from idaudit.memorization import (
    FlaggingResult,
    NNAAResult,
    cap_indices,
    flagging,
    flagging_from_distances,
    metric_sanity,
    nnaa,
    nnaa_from_distances,
)
from idaudit.pipeline._folders import (
    SPLITS,
    CheckModels,
)
from idaudit.pipeline._privacy_cache import PrivacyCache
from idaudit.pipeline._privacy_inputs import _Embedded, _say
from idaudit.pipeline._privacy_report import (
    PrivacySettings,
)


@dataclass(frozen=True)
class _AxisRows:
    """Per-metric rows of the flagging, NNAA and sanity tables from one axis."""

    flagging: list[pd.DataFrame] = field(default_factory=list)
    nnaa: list[pd.DataFrame] = field(default_factory=list)
    sanity: list[pd.DataFrame] = field(default_factory=list)
    flagging_by_cohort: list[pd.DataFrame] = field(default_factory=list)


def _identity_axis(
    embedded: _Embedded,
    usable: list[str],
    models: CheckModels,
    settings: PrivacySettings,
    notes: list[str],
    stage: Callable[[str], None],
    subj: dict[str, npt.NDArray[Any]] | None = None,
) -> _AxisRows:
    """Run flagging, NNAA and (with subjects) the sanity check per encoder."""
    rows = _AxisRows()
    percentiles = np.asarray(settings.percentiles, dtype=np.float64)
    for index, encoder in enumerate(models.encoders):
        sets = {
            split: np.concatenate(
                [embedded.vectors[(index, split, c)][embedded.kept(split, c)] for c in usable]
            )
            for split in SPLITS
        }
        labels = {
            split: np.concatenate(
                [np.full(embedded.kept(split, c).size, c, dtype=object) for c in usable]
            )
            for split in SPLITS
        }
        stage(f"flagging ({encoder.name}): {settings.n_permutations} permutations")
        flagged = flagging(
            sets["train"],
            sets["heldout"],
            sets["synthetic"],
            cohorts=(labels["train"], labels["heldout"], labels["synthetic"]),
            subjects=None if subj is None else (subj["train"], subj["heldout"], None),
            metric="cosine",
            percentiles=percentiles,
            percentile_method=settings.percentile_method,  # type: ignore[arg-type]
            n_permutations=settings.n_permutations,
            confidence_level=settings.confidence_level,
            rng=settings.rng,
            device=settings.device,
        )
        rows.flagging.append(_with_axis(flagged.to_frame(encoder.name), "identity"))
        rows.flagging_by_cohort.append(
            _flagging_by_cohort(
                flagged, labels["heldout"], labels["synthetic"], encoder.name, "identity"
            )
        )
        stage(f"NNAA ({encoder.name}): {settings.n_bootstrap} split-half draws, per cohort")
        rows.nnaa.extend(
            _nnaa_by_cohort(
                partial(
                    nnaa,
                    sets["train"],
                    sets["heldout"],
                    sets["synthetic"],
                    subjects=None if subj is None else (subj["train"], subj["heldout"], None),
                    strata=(labels["train"], labels["heldout"]),  # relabel within cohorts
                    metric="cosine",
                    n_bootstrap=settings.n_bootstrap,
                    n_permutations=settings.nnaa_permutations,
                    max_samples=settings.max_samples,
                    confidence_level=settings.confidence_level,
                    rng=settings.rng,
                    device=settings.device,
                ),
                encoder.name,
                notes,
                axis="identity",
                per_cohort=partial(_slice_nnaa_call, labels),
                cohorts=usable,
            )
        )
        if subj is not None:
            frame = _sanity(encoder.name, subj, index, embedded, usable, settings.rng, notes)
            if frame is not None:
                rows.sanity.append(frame)
    return rows


def _appearance_axis(
    embedded: _Embedded,
    usable: list[str],
    models: CheckModels,
    store: PrivacyCache,
    settings: PrivacySettings,
    notes: list[str],
    stage: Callable[[str], None],
    subj: dict[str, npt.NDArray[Any]] | None = None,
) -> _AxisRows:
    """Run flagging and NNAA on whole images (LPIPS or SSIM), distances through the cache."""
    metric = models.appearance_identity["metric"]
    stage(f"flagging ({metric}): distances, {settings.n_permutations} permutations")
    distances = _AppearanceDistances(models, store)
    heldout_min: list[npt.NDArray[np.float64]] = []
    synthetic_min: list[npt.NDArray[np.float64]] = []
    heldout_cohort: list[npt.NDArray[Any]] = []
    synthetic_cohort: list[npt.NDArray[Any]] = []
    for cohort in usable:
        train = (embedded.kept_paths("train", cohort), embedded.kept_hashes("train", cohort))
        for split, nearest, strata in (
            ("heldout", heldout_min, heldout_cohort),
            ("synthetic", synthetic_min, synthetic_cohort),
        ):
            query = (embedded.kept_paths(split, cohort), embedded.kept_hashes(split, cohort))
            nearest.append(distances(query, train).min(axis=1))  # (n_query,)
            strata.append(np.full(len(query[1]), cohort, dtype=object))
    flagged = flagging_from_distances(
        np.concatenate(heldout_min),
        np.concatenate(synthetic_min),
        heldout_strata=np.concatenate(heldout_cohort),
        synthetic_strata=np.concatenate(synthetic_cohort),
        subjects=None if subj is None else (subj["heldout"], None),
        percentiles=np.asarray(settings.percentiles, dtype=np.float64),
        percentile_method=settings.percentile_method,  # type: ignore[arg-type]
        n_permutations=settings.n_permutations,
        confidence_level=settings.confidence_level,
        rng=settings.rng,
    )
    rows = _AxisRows(flagging=[_with_axis(flagged.to_frame(metric), "appearance")])
    rows.flagging_by_cohort.append(
        _flagging_by_cohort(
            flagged,
            np.concatenate(heldout_cohort),
            np.concatenate(synthetic_cohort),
            metric,
            "appearance",
        )
    )
    stage(f"NNAA ({metric}): distances, {settings.n_bootstrap} split-half draws, per cohort")
    rows.nnaa.extend(
        _nnaa_by_cohort(
            partial(_appearance_nnaa, embedded, usable, distances, settings, subj, list(usable)),
            metric,
            notes,
            axis="appearance",
            # the same call on one cohort: ``usable`` (the cohorts pooled) becomes ``[cohort]``
            per_cohort=lambda call, cohort: partial(
                call.func, *[[cohort] if a is usable else a for a in call.args], **call.keywords
            ),
            cohorts=usable,
        )
    )
    return rows


def _appearance_nnaa(
    embedded: _Embedded,
    usable: list[str],
    distances: _AppearanceDistances,
    settings: PrivacySettings,
    subj: dict[str, npt.NDArray[Any]] | None = None,
    order: list[str] | None = None,
) -> NNAAResult:
    """NNAA on seeded subsets of the three pooled sets (appearance distances are costly).

    ``subj`` holds the subjects of the training and held-out images of the cohorts in
    ``order`` (the run's usable cohorts, the pooled order of :func:`_subject_labels`); the
    rows of the cohorts in ``usable`` (all of them, or one) are picked from it.
    """
    order = list(usable) if order is None else order
    gen = np.random.default_rng(settings.rng)
    listed: dict[str, tuple[list[Path], list[str]]] = {}
    cohorts: dict[str, npt.NDArray[Any]] = {}
    labels: dict[str, Any] = {split: None for split in SPLITS}  # synthetic: own subjects
    for split in SPLITS:
        cohort_of = [c for c in order for _ in embedded.kept_paths(split, c)]
        rows = np.asarray([i for i, c in enumerate(cohort_of) if c in usable], dtype=np.intp)
        listed[split] = (
            [p for c in usable for p in embedded.kept_paths(split, c)],
            [h for c in usable for h in embedded.kept_hashes(split, c)],
        )
        cohorts[split] = np.asarray(cohort_of, dtype=object)[rows]
        if subj is not None and split != "synthetic":
            labels[split] = np.asarray(subj[split], dtype=object)[rows]
    # the cap draws whole subjects when they are given, so the subject-level test stays
    # exact on what the distances are computed for (cap_indices)
    keeps, cap_unit = cap_indices(
        (labels["train"], labels["heldout"], None),
        tuple(len(listed[split][0]) for split in SPLITS),  # type: ignore[arg-type]
        settings.lpips_max_samples,
        gen,
    )
    pooled: dict[str, tuple[list[Path], list[str]]] = {}
    subjects: dict[str, Any] = {"train": None, "heldout": None}
    strata: dict[str, npt.NDArray[Any]] = {}
    for split, keep in zip(SPLITS, keeps, strict=True):
        paths, hashes = listed[split]
        pooled[split] = ([paths[i] for i in keep], [hashes[i] for i in keep])
        if split != "synthetic":
            strata[split] = cohorts[split][keep]
            if subj is not None:
                subjects[split] = labels[split][keep]
    capped = any(k.size < len(listed[split][0]) for k, split in zip(keeps, SPLITS, strict=True))
    union = (
        [p for split in SPLITS for p in pooled[split][0]],
        [h for split in SPLITS for h in pooled[split][1]],
    )
    train, heldout, synthetic = (len(pooled[split][0]) for split in SPLITS)
    result = nnaa_from_distances(
        distances(union, union),  # (n_union, n_union), train then held-out then synthetic
        (train, heldout, synthetic),
        subjects=None if subj is None else (subjects["train"], subjects["heldout"], None),
        strata=(strata["train"], strata["heldout"]),
        n_bootstrap=settings.n_bootstrap,
        n_permutations=settings.nnaa_permutations,
        # already capped above: the whole union, so that nothing is cut a second time
        max_samples=max(2, len(union[0])),
        confidence_level=settings.confidence_level,
        rng=gen,
        device=settings.device,
    )
    return replace(result, cap_unit=cap_unit, capped=capped)


class _AppearanceDistances:
    """Appearance distances between two lists of images, through the cache.

    Whole images are read once per run (resized for SSIM) and shared by both uses. The
    cache asks for each missing unordered pair once, in one list; the metric evaluates the
    list in batches (:meth:`~idaudit.faces.SSIMDistance.pair_distances`, each image's own
    statistics or network features computed once).
    """

    def __init__(self, models: CheckModels, store: PrivacyCache) -> None:
        self.models = models
        self.store = store
        self.loader = _ImageLoader(models.appearance_size)

    def __call__(
        self, rows: tuple[list[Path], list[str]], cols: tuple[list[Path], list[str]]
    ) -> npt.NDArray[np.float64]:
        """``(len(rows), len(cols))`` distances; ``rows`` and ``cols`` are (paths, hashes)."""
        row_paths, row_hashes = rows
        col_paths, col_hashes = cols

        def compute(r: npt.NDArray[np.intp], c: npt.NDArray[np.intp]) -> npt.NDArray[np.float64]:
            # every image once: positions of rows and columns mapped to one list of paths
            paths = list(dict.fromkeys([row_paths[i] for i in r] + [col_paths[j] for j in c]))
            where = {p: k for k, p in enumerate(paths)}
            images = [self.loader(p) for p in paths]
            left = np.array([where[row_paths[i]] for i in r], dtype=np.intp)
            right = np.array([where[col_paths[j]] for j in c], dtype=np.intp)
            metric = self.models.appearance
            if hasattr(metric, "pair_distances"):
                values = metric.pair_distances(images, left, right, progress=False)
            else:  # any AppearanceDistance: row-wise pairs
                values = metric.distance([images[k] for k in left], [images[k] for k in right])
            return np.asarray(values, dtype=np.float64)

        return self.store.distances(
            self.models.appearance_identity, row_hashes, col_hashes, compute
        )


class _ImageLoader:
    """Whole images for the appearance metric, read once per run (resized for SSIM)."""

    def __init__(self, size: int | None) -> None:
        self.size = size
        self._memo: dict[Path, npt.NDArray[np.uint8]] = {}

    def __call__(self, path: Path) -> npt.NDArray[np.uint8]:
        if path not in self._memo:
            from PIL import Image

            from idaudit.faces import load_image

            image = load_image(path)
            if self.size is not None and image.shape[:2] != (self.size, self.size):
                image = np.asarray(
                    Image.fromarray(image).resize((self.size, self.size), Image.Resampling.BILINEAR)
                )
            self._memo[path] = image
        return self._memo[path]


def _with_axis(frame: pd.DataFrame, axis: str) -> pd.DataFrame:
    frame.insert(1, "axis", axis)
    return frame


def _nnaa_or_note(
    compute: Callable[[], NNAAResult], metric: str, notes: list[str]
) -> NNAAResult | None:
    """Run one NNAA; sets too small for it become a note, not a failed run."""
    try:
        return compute()
    except InvalidInputError as exc:
        _say(notes, f"NNAA skipped for {metric}: {exc}", warn=True)
        return None


def _nnaa_by_cohort(
    pooled: partial[NNAAResult],
    metric: str,
    notes: list[str],
    *,
    axis: str,
    per_cohort: Callable[[partial[NNAAResult], str], Callable[[], NNAAResult]],
    cohorts: list[str],
) -> list[pd.DataFrame]:
    """Run NNAA pooled over the cohorts and, with two or more, on each cohort alone.

    Returns the rows of ``nnaa.csv`` for one metric: ``cohort == "pooled"`` first, then one
    per cohort. Pooling dilutes a cohort whose generator memorises among cohorts whose
    generators do not, so each cohort also gets its own test and interval (same settings,
    same seed). A cohort too small for NNAA becomes a note (the pooled row still stands).
    """
    frames: list[pd.DataFrame] = []
    accuracy = _nnaa_or_note(pooled, metric, notes)
    if accuracy is not None:
        frame = _with_axis(accuracy.to_frame(metric), axis)
        frame.insert(2, "cohort", "pooled")
        frames.append(frame)
    if len(cohorts) < 2:
        return frames
    for cohort in cohorts:
        try:
            result = per_cohort(pooled, cohort)()
        except InvalidInputError as exc:
            _say(notes, f"NNAA of cohort {cohort} skipped for {metric}: {exc}")
            continue
        frame = _with_axis(result.to_frame(metric), axis)
        frame.insert(2, "cohort", cohort)
        frames.append(frame)
    return frames


def _slice_nnaa_call(
    labels: dict[str, npt.NDArray[Any]], call: partial[NNAAResult], cohort: str
) -> partial[NNAAResult]:
    """Restrict the pooled :func:`nnaa` call to one cohort's rows.

    ``call.args`` are the train, held-out and synthetic sets in ``labels``' order; the
    ``subjects`` keyword (three arrays or ``None``), when given, is cut the same way.
    """
    masks = [labels[split] == cohort for split in SPLITS]
    args = [x[m] for x, m in zip(call.args, masks, strict=True)]
    keywords = dict(call.keywords)
    if keywords.get("subjects") is not None:
        keywords["subjects"] = tuple(
            None if x is None else np.asarray(x)[m]
            for x, m in zip(keywords["subjects"], masks, strict=True)
        )
    if keywords.get("strata") is not None:
        keywords["strata"] = tuple(
            np.asarray(x)[m] for x, m in zip(keywords["strata"], masks[:2], strict=True)
        )
    return partial(call.func, *args, **keywords)


def _flagging_by_cohort(
    flagged: FlaggingResult,
    heldout_cohorts: npt.NDArray[Any],
    synthetic_cohorts: npt.NDArray[Any],
    metric: str,
    axis: str,
) -> pd.DataFrame:
    """Each cohort's synthetic and held-out rates at the pooled thresholds.

    Rows per cohort and percentile, in percent, with the exact two-sided Clopper–Pearson
    interval of the cohort's synthetic rate (given the threshold) at the run's level.
    """
    alpha = (1.0 - flagged.confidence_level) / 2.0
    tau = flagged.thresholds[:, None]  # (k, 1)
    frames = []
    for cohort in dict.fromkeys(np.concatenate([heldout_cohorts, synthetic_cohorts]).tolist()):
        d_h = flagged.heldout_distances[heldout_cohorts == cohort]
        d_s = flagged.synthetic_distances[synthetic_cohorts == cohort]
        k_s = (d_s[None, :] <= tau).sum(axis=1)  # (k,)
        k_h = (d_h[None, :] <= tau).sum(axis=1)  # (k,)
        lower = clopper_pearson_lower(k_s, d_s.size, alpha)
        upper = clopper_pearson_upper(k_s, d_s.size, alpha)
        frames.append(
            pd.DataFrame(
                {
                    "cohort": cohort,
                    "percentile": flagged.percentiles,
                    "threshold": flagged.thresholds,
                    "synthetic_pct": 100.0 * k_s / max(d_s.size, 1),
                    "heldout_pct": 100.0 * k_h / max(d_h.size, 1),
                    "n_synthetic": d_s.size,
                    "n_heldout": d_h.size,
                    "n_synthetic_flagged": k_s,
                    "n_heldout_flagged": k_h,
                    "ci_lower": 100.0 * np.asarray(lower, dtype=np.float64),
                    "ci_upper": 100.0 * np.asarray(upper, dtype=np.float64),
                }
            )
        )
    frame = pd.concat(frames, ignore_index=True)
    frame.insert(0, "metric", metric)
    return _with_axis(frame, axis)


def _sanity(
    metric: str,
    subj: dict[str, npt.NDArray[Any]],
    index: int,
    embedded: _Embedded,
    usable: list[str],
    seed: int,
    notes: list[str],
) -> pd.DataFrame | None:
    """Run the sanity check of encoder ``index`` on the real images, by their subjects."""
    vectors = np.concatenate(
        [
            embedded.vectors[(index, split, c)][embedded.kept(split, c)]
            for split in ("train", "heldout")
            for c in usable
        ]
    )
    subjects = np.concatenate([subj["train"], subj["heldout"]])
    try:
        result = metric_sanity(vectors, subjects, n_permutations=999, rng=seed)
    except InvalidInputError as exc:
        _say(notes, f"metric sanity check skipped for {metric}: {exc}", warn=True)
        return None
    return result.to_frame(metric)
