"""Folders to seed 003's outputs: :func:`run_privacy_check`, step by step.

The steps, each over the frozen :class:`~idaudit.pipeline.PrivacySettings`: scan the three
roots (:func:`_scan_cohorts`), hash the files (:func:`_hash_files`), embed them through the
cache (:func:`_embed`), keep the cohorts with a usable face in every split
(:func:`_usable_cohorts`), measure the identity axis (:func:`_identity_axis`) and the
appearance axis (:func:`_appearance_axis`), and gather the results (:func:`_report`).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import tempfile
import warnings
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd

from idaudit._device import available_cpus, default_threads, thread_limit
from idaudit._results import (
    Status,
    private_dir,
    provenance,
    write_atomic,
    write_csv,
    write_text,
)
from idaudit.dp import clopper_pearson_lower, clopper_pearson_upper
from idaudit.exceptions import IdauditWarning, InvalidInputError
from idaudit.faces import FaceModelOptions
from idaudit.memorization import (
    FLAGGING_COHORT_COLUMNS,
    FLAGGING_COLUMNS,
    FLAGGING_STATUS,
    NNAA_COLUMNS,
    NNAA_STATUS,
    NNAA_TEST_STATUS,
    SANITY_STATUS,
    FlaggingResult,
    NNAAResult,
    cap_indices,
    flagging,
    flagging_from_distances,
    metric_sanity,
    nnaa,
    nnaa_from_distances,
    power_notes,
    read_subject_map,
    subjects_for_files,
)
from idaudit.pipeline._folders import (
    MIN_IMAGE_SIDE,
    SPLITS,
    CheckModels,
    CohortFiles,
    MemoDetector,
    build_models,
    embed_images,
    hash_files,
    scan_root,
)
from idaudit.pipeline._privacy_cache import PrivacyCache, model_key
from idaudit.pipeline._privacy_report import (
    CacheUse,
    InputListing,
    ModelsUsed,
    PrivacyReport,
    PrivacySettings,
)
from idaudit.pipeline._settings import PrivacyStatistics

__all__ = ["OUTPUT_FILES", "run_privacy_check"]

#: Files written to ``out`` (``sanity.csv`` only with ``subject_pattern``).
OUTPUT_FILES: tuple[str, ...] = (
    "flagging.csv",
    "flagging_by_cohort.csv",
    "nnaa.csv",
    "privacy_results.json",
    "below_threshold.png",
    "nnaa.png",
    "report.md",
)
_IMAGE_STATUSES = ("ok", "no_face", "too_small", "unreadable", "bad_format")
_COUNT_COLUMNS = ("n_files", "n_not_image", "n_duplicates", *_IMAGE_STATUSES)

#: Key of one split and cohort, e.g. ``("train", "a")``.
_SplitCohort = tuple[str, str]


@dataclass(frozen=True)
class _Cohorts:
    """The three roots as scanned: cohorts common to all of them and those left out."""

    roots: dict[str, Path]
    scanned: dict[str, dict[str, tuple[list[Path], int]]]
    common: list[str]
    missing: dict[str, str]  # cohort -> why it is not in all three roots


@dataclass(frozen=True)
class _Embedded:
    """Every image of every split and cohort: its file, detection status and embeddings."""

    files: dict[_SplitCohort, CohortFiles]
    status: dict[_SplitCohort, npt.NDArray[np.str_]]
    vectors: dict[tuple[int, str, str], npt.NDArray[np.float32]]  # (encoder, split, cohort)

    def kept(self, split: str, cohort: str) -> npt.NDArray[np.intp]:
        """Return the indices of the images with a usable face."""
        return np.flatnonzero(self.status[(split, cohort)] == "ok")

    def kept_paths(self, split: str, cohort: str) -> list[Path]:
        """Return the paths of the images with a usable face."""
        paths = self.files[(split, cohort)].paths
        return [paths[i] for i in self.kept(split, cohort)]

    def kept_hashes(self, split: str, cohort: str) -> list[str]:
        """Return the content hashes of the images with a usable face."""
        hashes = self.files[(split, cohort)].hashes
        return [hashes[i] for i in self.kept(split, cohort)]

    def n_usable(self, split: str, cohort: str) -> int:
        """Count the images with a usable face."""
        return int((self.status[(split, cohort)] == "ok").sum())


@dataclass(frozen=True)
class _AxisRows:
    """Per-metric rows of the flagging, NNAA and sanity tables from one axis."""

    flagging: list[pd.DataFrame] = field(default_factory=list)
    nnaa: list[pd.DataFrame] = field(default_factory=list)
    sanity: list[pd.DataFrame] = field(default_factory=list)
    flagging_by_cohort: list[pd.DataFrame] = field(default_factory=list)


def _say(notes: list[str], text: str, *, warn: bool = False) -> None:
    notes.append(text)
    if warn:
        warnings.warn(text, IdauditWarning, stacklevel=3)


def _listing_digest(root: Path, files: CohortFiles) -> str:
    """SHA-256 over ``relative path<TAB>content hash`` lines of one split and cohort."""
    lines = "".join(
        f"{p.relative_to(root)}\t{h}\n" for p, h in zip(files.paths, files.hashes, strict=True)
    )
    return hashlib.sha256(lines.encode()).hexdigest()


def _table(
    rows: list[pd.DataFrame], columns: Sequence[str], status: dict[str, Status]
) -> pd.DataFrame:
    """Concatenate per-metric rows into one table whose ``attrs["status"]`` covers every column."""
    frame = (
        pd.concat(rows, ignore_index=True)[list(columns)]
        if rows
        else pd.DataFrame(columns=list(columns))
    )
    frame.attrs["status"] = {"metric": "descriptive", "axis": "descriptive", **status}
    return frame


def run_privacy_check(
    train: str | os.PathLike[str],
    heldout: str | os.PathLike[str],
    synthetic: str | os.PathLike[str],
    out: str | os.PathLike[str] | None = None,
    *,
    models: FaceModelOptions | None = None,
    statistics: PrivacyStatistics | None = None,
    cache: str | os.PathLike[str] | PrivacyCache | None = None,
    progress: bool = True,
) -> PrivacyReport:
    """Run seed 003's privacy analysis on three folders of images.

    Parameters
    ----------
    train, heldout, synthetic : path
        Roots with one sub-folder per cohort: the generator's training images, real images
        of the same cohorts never used in training, and the generator's samples. Cohorts
        missing from one or two roots are skipped and named.
    out : path, optional
        Folder for ``flagging.csv``, ``nnaa.csv``, ``privacy_results.json``,
        ``below_threshold.png``, ``nnaa.png`` and ``report.md`` (created ``0700``); the
        cache goes to ``out/cache`` unless ``cache`` says otherwise. Nothing is written
        without it (the cache then lives in a temporary folder for the run).
    models : FaceModelOptions, optional
        The detector, identity encoders and appearance metric
        (:class:`~idaudit.faces.FaceModelOptions`). Default: ``FaceModelOptions(dlib="torch")``,
        MTCNN and dlib's recogniser run by :class:`~idaudit.faces.TorchDlibEncoder` (metric
        ``dlib-resnet-v1-torch``; on ``device``, 10–20× faster than dlib on the CPU, raw
        descriptors within 5e-6 of dlib's, about 5e-7 on face chips); ``dlib="cpp"`` runs
        dlib itself (:class:`~idaudit.faces.DlibEncoder`, metric ``dlib-resnet-v1``; CPU
        only), ``dlib=None`` none (recorded as ``None``). ``arcface``, ``adaface``,
        ``lvface``: further identity encoders (InsightFace ``w600k_r50.onnx`` or its
        ``buffalo_l`` folder, an AdaFace IR checkpoint or its folder, an LVFace ``.onnx``).
        ``retinaface``: InsightFace ``det_10g.onnx`` (or its folder) as detector.
        ``lpips``: torchvision's AlexNet weights, and the appearance axis is LPIPS;
        otherwise SSIM on images resized to 64 px, named ``ssim-gaussian1.5-64px``
        everywhere. ``aligned``: the inputs are aligned face crops (ArcFace template), no
        detection. ``threads``: CPU threads for torch and onnxruntime, never more than the
        CPUs this process may use (``os.sched_getaffinity``); the BLAS and OpenMP pools get
        the same limit for the call. Default: those CPUs less the ones busy by the 1-minute
        load average (one busy CPU is allowed for this process), at most 8 (seed 003's
        default), at least 1. ``device``: where the models run.
    statistics : PrivacyStatistics, optional
        Percentiles, permutations, bootstrap draws, set caps, confidence level, duplicate
        files, subjects and seed (:class:`PrivacyStatistics`; default ``PrivacyStatistics()``).
    cache : path or PrivacyCache, optional
        Where embeddings and distances are cached.
    progress : bool, default True
        Show a progress bar over the (model, split, cohort) embedding steps.

    Returns
    -------
    PrivacyReport

    Raises
    ------
    TypeError
        ``models`` that is not a :class:`~idaudit.faces.FaceModelOptions`, or
        ``statistics`` that is not a :class:`PrivacyStatistics`.
    InvalidInputError
        An empty root, no cohort common to the three roots, no cohort left with usable
        faces in every split, or a cohort whose synthetic files are at least half
        byte-identical copies of its training files (the same folder given twice).
    MissingWeightsError
        A model file that is not on disk (nothing is downloaded).
    """
    if models is None:
        models = FaceModelOptions(dlib="torch")
    elif not isinstance(models, FaceModelOptions):
        raise TypeError(
            "`models` must be an idaudit.faces.FaceModelOptions; got "
            f"{type(models).__name__}."
        )
    if statistics is None:
        statistics = PrivacyStatistics()
    elif not isinstance(statistics, PrivacyStatistics):
        raise TypeError(
            "`statistics` must be an idaudit.pipeline.PrivacyStatistics; got "
            f"{type(statistics).__name__}."
        )
    cpus = available_cpus()
    asked = models.threads
    settings = PrivacySettings(
        percentiles=tuple(statistics.percentiles),
        n_bootstrap=statistics.n_bootstrap,
        max_samples=statistics.max_samples,
        lpips_max_samples=statistics.lpips_max_samples,
        n_permutations=statistics.n_permutations,
        confidence_level=statistics.confidence_level,
        duplicates=statistics.duplicates,
        aligned=models.aligned,
        subject_pattern=statistics.subject_pattern,
        # seed 003 runs at most 8 threads unless asked for more
        threads=min(8, default_threads()) if asked is None else min(asked, cpus),
        device=models.device,
        rng=statistics.rng,
        subjects=None if statistics.subjects is None else str(statistics.subjects),
        percentile_method=statistics.percentile_method,
        nnaa_permutations=statistics.nnaa_permutations,
        dlib_runtime=models.dlib,
        progress=progress,
    )
    notes: list[str] = []
    if asked is not None and asked > cpus:
        _say(notes, f"threads: {asked} asked, capped at the {cpus} CPU(s) this process may use.")
    cohorts = _scan_cohorts(
        {"train": Path(train), "heldout": Path(heldout), "synthetic": Path(synthetic)}, notes
    )

    with ExitStack() as stack:
        stack.enter_context(thread_limit(settings.threads))
        store = _open_cache(cache, out, stack)
        counters_before = dict(store.counters)
        out_dir = None if out is None else _make_out(Path(out))
        built = build_models(replace(models, threads=settings.threads))
        report = _run(settings, cohorts, built, store, counters_before, notes)
        # tests the set sizes leave without power are said so, never read as "no evidence"
        for text in power_notes(
            report.flagging,
            report.nnaa,
            1.0 - settings.confidence_level,
            settings.n_permutations,
            report.flagging_by_cohort,
        ):
            _say(report.notes, text, warn=True)
        if out_dir is not None:
            report.files.update(_write_outputs(report, out_dir))
        return report


def _make_out(out: Path) -> Path:
    return private_dir(out, name="out")


def _open_cache(
    cache: str | os.PathLike[str] | PrivacyCache | None,
    out: str | os.PathLike[str] | None,
    stack: ExitStack,
) -> PrivacyCache:
    """Open the cache asked for, else ``out/cache``, else a temporary folder for the run."""
    if isinstance(cache, PrivacyCache):
        return cache
    if cache is not None:
        return PrivacyCache(cache)
    if out is not None:
        return PrivacyCache(_make_out(Path(out)) / "cache")
    return PrivacyCache(stack.enter_context(tempfile.TemporaryDirectory()))


def _scan_cohorts(roots: dict[str, Path], notes: list[str]) -> _Cohorts:
    """Scan the three roots; cohorts missing from any of them are left out, and said so."""
    scanned = {split: scan_root(roots[split], split) for split in SPLITS}
    names = [set(scanned[split]) for split in SPLITS]
    common = sorted(set.intersection(*names))
    missing: dict[str, str] = {}
    for cohort in sorted(set.union(*names) - set(common)):
        absent_from = [split for split in SPLITS if cohort not in scanned[split]]
        missing[cohort] = f"missing from {' and '.join(absent_from)}"
    if not common:
        raise InvalidInputError(
            "no cohort folder is common to train, heldout and synthetic; cohorts: "
            + ", ".join(f"{split}: {sorted(scanned[split])}" for split in SPLITS)
        )
    if missing:
        _say(
            notes,
            "cohorts skipped (not in all three roots): "
            + "; ".join(f"{cohort} ({why})" for cohort, why in missing.items()),
            warn=True,
        )
    return _Cohorts(roots=roots, scanned=scanned, common=common, missing=missing)


def _run(
    settings: PrivacySettings,
    cohorts: _Cohorts,
    models: CheckModels,
    store: PrivacyCache,
    counters_before: dict[str, int],
    notes: list[str],
) -> PrivacyReport:
    """Run the steps from scanned folders to the report (nothing written yet)."""
    files = _hash_files(cohorts, settings.duplicates, notes)
    embedded = _embed(files, models, store, settings)
    unreadable = _unreadable_files(embedded, cohorts, notes)
    usable, no_face = _usable_cohorts(embedded, cohorts.common, notes)
    subj = _subject_labels(settings, cohorts, embedded, usable, notes)
    with _stages(settings, 2 * len(models.encoders) + 2) as stage:
        identity = _identity_axis(embedded, usable, models, settings, notes, stage, subj)
        appearance = _appearance_axis(embedded, usable, models, store, settings, notes, stage, subj)
    return _report(
        settings,
        cohorts,
        embedded,
        usable,
        skipped={**cohorts.missing, **no_face},
        unreadable=unreadable,
        rows=_AxisRows(
            flagging=identity.flagging + appearance.flagging,
            nnaa=identity.nnaa + appearance.nnaa,
            sanity=identity.sanity,
            flagging_by_cohort=identity.flagging_by_cohort + appearance.flagging_by_cohort,
        ),
        models=models,
        cache=CacheUse(
            root=str(store.root),
            counters={k: int(v - counters_before.get(k, 0)) for k, v in store.counters.items()},
        ),
        notes=notes,
    )


@contextlib.contextmanager
def _stages(settings: PrivacySettings, total: int) -> Iterator[Callable[[str], None]]:
    """Show a progress bar over the statistics stages (permutations, draws, distances).

    Yields ``stage(text)``, which closes the stage before and names the one starting, so the
    minutes spent on 9,999 permutations or 1,000 split-half draws are never silent.
    """
    from tqdm.auto import tqdm

    bar = tqdm(total=total, desc="statistics", unit="stage", disable=not settings.progress)
    started = [False]

    def stage(text: str) -> None:
        if started[0]:
            bar.update(1)
        started[0] = True
        bar.set_postfix_str(text, refresh=True)

    try:
        yield stage
        if started[0]:
            bar.update(1)
    finally:
        bar.close()


def _hash_files(
    cohorts: _Cohorts, duplicates: str, notes: list[str]
) -> dict[_SplitCohort, CohortFiles]:
    """Hash every file of every split and cohort; note duplicates and train/other overlaps."""
    files = {
        (split, cohort): hash_files(
            *cohorts.scanned[split][cohort], collapse=duplicates == "collapse"
        )
        for split in SPLITS
        for cohort in cohorts.common
    }
    _duplicate_notes(files, cohorts.common, notes)
    return files


def _embed(
    files: dict[_SplitCohort, CohortFiles],
    models: CheckModels,
    store: PrivacyCache,
    settings: PrivacySettings,
) -> _Embedded:
    """Detect and embed every image with every identity encoder, through the cache."""
    from tqdm.auto import tqdm

    detector = MemoDetector(models.detector)
    vectors: dict[tuple[int, str, str], npt.NDArray[np.float32]] = {}
    status: dict[_SplitCohort, npt.NDArray[np.str_]] = {}
    bar = tqdm(
        total=len(models.encoders) * len(files), desc="embeddings", disable=not settings.progress
    )
    for index, (encoder, identity) in enumerate(
        zip(models.encoders, models.encoder_identities, strict=True)
    ):
        for (split, cohort), cohort_files in files.items():
            bar.update(1)

            def compute(
                which: list[int], cohort_files: CohortFiles = cohort_files, encoder: Any = encoder
            ) -> Any:
                paths = [cohort_files.paths[i] for i in which]
                image_status, embeddings, _ = embed_images(
                    paths, detector, encoder, aligned=settings.aligned
                )
                return image_status, embeddings

            image_status, embeddings = store.embeddings(
                identity, split, cohort, cohort_files.hashes, compute, dim=encoder.dim
            )
            vectors[(index, split, cohort)] = embeddings
            if index == 0:
                status[(split, cohort)] = image_status
            elif not np.array_equal(image_status, status[(split, cohort)]):  # pragma: no cover
                # every encoder shares one detector, so a difference means a stale cache
                raise InvalidInputError(
                    f"detections differ between encoders for {split}/{cohort}; clear the cache."
                )
    bar.close()
    return _Embedded(files=files, status=status, vectors=vectors)


def _unreadable_files(embedded: _Embedded, cohorts: _Cohorts, notes: list[str]) -> dict[str, str]:
    """Name the files that could not be read as images, and the images refused as too small.

    Returns ``{"<split>/<path relative to that root>": status}`` for the unreadable and
    bad-format files (every one, sorted); both kinds are also said in the notes (the first
    20 names in each).
    """
    found: dict[str, dict[str, str]] = {"unreadable": {}, "too_small": {}}
    for (split, cohort), cohort_files in embedded.files.items():
        status = embedded.status[(split, cohort)]
        for path, image_status in zip(cohort_files.paths, status.tolist(), strict=True):
            kind = "too_small" if image_status == "too_small" else "unreadable"
            if image_status in ("unreadable", "bad_format", "too_small"):
                name = f"{split}/{path.relative_to(cohorts.roots[split]).as_posix()}"
                found[kind][name] = image_status
    for kind, what in (
        ("unreadable", "could not be read as images (unreadable or bad_format) and were left out"),
        (
            "too_small",
            f"have a shorter side below {MIN_IMAGE_SIDE} px and were refused (too_small)",
        ),
    ):
        names = sorted(found[kind])
        if names:
            more = f", ... ({len(names) - 20} more)" if len(names) > 20 else ""
            _say(notes, f"{len(names)} file(s) {what}: {', '.join(names[:20])}{more}.")
    return dict(sorted(found["unreadable"].items()))


def _usable_cohorts(
    embedded: _Embedded, common: list[str], notes: list[str]
) -> tuple[list[str], dict[str, str]]:
    """Split the cohorts into those with a usable face in every split and the others."""
    usable: list[str] = []
    no_face: dict[str, str] = {}
    for cohort in common:
        why = _why_unusable(embedded, cohort)
        if why:
            no_face[cohort] = why
            _say(notes, f"cohort {cohort} skipped: {why}.", warn=True)
            continue
        usable.append(cohort)
        single = [split for split in SPLITS if embedded.n_usable(split, cohort) == 1]
        if single:
            _say(notes, f"cohort {cohort} has a single usable image in {', '.join(single)}.")
    if not usable:
        raise InvalidInputError(
            "no cohort has a usable face in all three splits ("
            + "; ".join(f"{cohort}: {why}" for cohort, why in no_face.items())
            + "); see the per-cohort counts: "
            + "; ".join(
                f"{cohort}/{split}: {embedded.n_usable(split, cohort)} of "
                f"{len(embedded.files[(split, cohort)].paths)}"
                for cohort in common
                for split in SPLITS
            )
        )
    return usable, no_face


def _why_unusable(embedded: _Embedded, cohort: str) -> str:
    """Say why a cohort cannot be analysed (``""`` when it can): empty folders, no face."""
    reasons = []
    empty = [s for s in SPLITS if not embedded.files[(s, cohort)].n_files]
    folders = [s for s in empty if not embedded.files[(s, cohort)].n_not_image]
    if folders:
        reasons.append(f"empty folder in {' and '.join(folders)}")
    others = [s for s in empty if s not in folders]
    if others:
        reasons.append(f"no image file in {' and '.join(others)}")
    no_face = [s for s in SPLITS if s not in empty and embedded.n_usable(s, cohort) == 0]
    if no_face:
        reasons.append(f"no usable face in {' and '.join(no_face)}")
    return "; ".join(reasons)


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


def _report(
    settings: PrivacySettings,
    cohorts: _Cohorts,
    embedded: _Embedded,
    usable: list[str],
    *,
    skipped: dict[str, str],
    unreadable: dict[str, str],
    rows: _AxisRows,
    models: CheckModels,
    cache: CacheUse,
    notes: list[str],
) -> PrivacyReport:
    """Gather the tables, counts, input digests, model identities and provenance."""
    sanity = None
    if rows.sanity:
        sanity = pd.concat(rows.sanity, ignore_index=True)
        sanity.attrs["status"] = {"metric": "descriptive", **SANITY_STATUS}
    digests = {
        f"{split}/{cohort}": _listing_digest(
            cohorts.roots[split] / cohort, embedded.files[(split, cohort)]
        )
        for split in SPLITS
        for cohort in cohorts.common
    }
    appearance = models.appearance_identity["metric"]
    cache_keys = {
        encoder.name: model_key(identity)
        for encoder, identity in zip(models.encoders, models.encoder_identities, strict=True)
    }
    cache_keys[appearance] = model_key(models.appearance_identity)
    run_settings = ("device", "threads", "aligned", "duplicates")
    return PrivacyReport(
        flagging=_table(rows.flagging, FLAGGING_COLUMNS, FLAGGING_STATUS),
        nnaa=_table(
            rows.nnaa, NNAA_COLUMNS, {"cohort": "descriptive", **NNAA_STATUS, **NNAA_TEST_STATUS}
        ),
        flagging_by_cohort=_table(
            rows.flagging_by_cohort,
            FLAGGING_COHORT_COLUMNS,
            {"cohort": "descriptive", **FLAGGING_STATUS},
        ),
        sanity=sanity,
        counts=_counts_frame(embedded, cohorts.common),
        cohorts=usable,
        skipped=skipped,
        unreadable_files=unreadable,
        notes=notes,
        settings=settings,
        inputs=InputListing(
            roots={split: str(cohorts.roots[split]) for split in SPLITS}, sha256=digests
        ),
        models=ModelsUsed(
            identity=tuple(models.encoder_identities),
            appearance=models.appearance_identity,
            cache_keys=cache_keys,
        ),
        cache=cache,
        provenance=provenance(
            title="idaudit.pipeline.run_privacy_check",
            inputs={f"input_sha256.{k}": v for k, v in digests.items()},
            seeds={"rng": settings.rng},
            settings={name: getattr(settings, name) for name in run_settings},
        ),
    )


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


def _duplicate_notes(
    files: dict[_SplitCohort, CohortFiles], common: list[str], notes: list[str]
) -> None:
    """Note collapsed copies, held-out files leaked from training, and copied training files."""
    for (split, cohort), cohort_files in files.items():
        if cohort_files.n_duplicates:
            shown = ", ".join(cohort_files.duplicate_names[:5])
            more = ", ..." if cohort_files.n_duplicates > 5 else ""
            _say(
                notes,
                f"{split}/{cohort}: {cohort_files.n_duplicates} byte-identical copies counted "
                f"once ({shown}{more}).",
            )
    for cohort in common:
        train = set(files[("train", cohort)].hashes)
        leaked = [h for h in files[("heldout", cohort)].hashes if h in train]
        copies = [h for h in files[("synthetic", cohort)].hashes if h in train]
        if leaked:
            _say(
                notes,
                f"heldout/{cohort}: {len(leaked)} file(s) byte-identical to training files: the "
                "held-out partition is not disjoint from the training partition, which shifts "
                "every threshold.",
                warn=True,
            )
        _copies_rule(cohort, len(copies), len(files[("synthetic", cohort)].hashes), notes)
        heldout = set(files[("heldout", cohort)].hashes)
        same = [h for h in files[("synthetic", cohort)].hashes if h in heldout]
        n_synthetic = len(files[("synthetic", cohort)].hashes)
        if same and 2 * len(same) >= n_synthetic:
            raise InvalidInputError(
                f"synthetic/{cohort}: {len(same)} of {n_synthetic} files are byte-identical to "
                f"held-out files of cohort {cohort}: the held-out folder was given as the "
                "synthetic one (check the paths). Held-out images are the check's reference "
                "for 'not memorised', so comparing them with themselves says nothing."
            )
        if same:
            _say(
                notes,
                f"synthetic/{cohort}: {len(same)} of {n_synthetic} file(s) byte-identical to "
                "held-out files: they sit at distance 0 from a held-out image and dilute "
                "the comparison.",
                warn=True,
            )


def _copies_rule(cohort: str, n_copies: int, n_synthetic: int, notes: list[str]) -> None:
    """Refuse a cohort whose synthetic files are mostly training files; warn about a few.

    When at least half the synthetic files are byte-identical to training files, the likely
    cause is the same folder given twice, and the distance statistics would compare images
    with themselves (distance 0, intervals such as [-0.18, 1.08]): nothing they say would
    mean anything, so the run stops. Fewer copies are a finding (verbatim memorisation),
    reported loudly while the other samples are analysed.
    """
    if not n_copies:
        return
    if 2 * n_copies >= n_synthetic:
        raise InvalidInputError(
            f"synthetic/{cohort}: {n_copies} of {n_synthetic} files are byte-identical to "
            f"training files of cohort {cohort}. The same images were given as training and "
            "synthetic (check the paths), or the generator returns its training images "
            "verbatim; either way the distance-based checks would compare images with "
            "themselves, and their numbers would be meaningless. Remove the copies (verbatim "
            "memorisation on their own) to test the other samples."
        )
    _say(
        notes,
        f"synthetic/{cohort}: {n_copies} of {n_synthetic} file(s) byte-identical to training "
        "files (exact copies of training images: verbatim memorisation). They are kept, at "
        "distance 0 from their training image.",
        warn=True,
    )


def _counts_frame(embedded: _Embedded, common: list[str]) -> pd.DataFrame:
    """Per cohort and split: files, other files, duplicates, and images by status."""
    rows = []
    for cohort in common:
        for split in SPLITS:
            cohort_files = embedded.files[(split, cohort)]
            image_status = embedded.status[(split, cohort)]
            rows.append(
                {
                    "cohort": cohort,
                    "split": split,
                    "n_files": cohort_files.n_files,
                    "n_not_image": cohort_files.n_not_image,
                    "n_duplicates": cohort_files.n_duplicates,
                    **{s: int((image_status == s).sum()) for s in _IMAGE_STATUSES},
                }
            )
    frame = pd.DataFrame(rows, columns=["cohort", "split", *_COUNT_COLUMNS])
    frame.attrs["status"] = dict.fromkeys(frame.columns, "descriptive")
    return frame


def _subject_labels(
    settings: PrivacySettings,
    cohorts: _Cohorts,
    embedded: _Embedded,
    usable: list[str],
    notes: list[str],
) -> dict[str, npt.NDArray[Any]] | None:
    """Subject (``cohort/subject``) of each usable training and held-out image, or ``None``.

    In the order of the pooled sets of the two axes (cohorts in ``usable`` order). Without
    ``subjects`` or ``subject_pattern`` each image is its own subject, and a note says so.
    """
    if settings.subjects is None and settings.subject_pattern is None:
        _say(
            notes,
            "subjects: none given (--subjects or --subject-pattern), so each image is taken "
            "as its own subject: the permutation tests and intervals assume exchangeable "
            "images, which several photos of one subject are not (their p-values then run "
            "below nominal: 0.08 at 0.05 with 4 photos per held-out subject).",
        )
        return None
    mapping = None if settings.subjects is None else read_subject_map(settings.subjects)
    out: dict[str, npt.NDArray[Any]] = {}
    for split in ("train", "heldout"):
        labels: list[str] = []
        for cohort in usable:
            root = cohorts.roots[split]
            rel = [p.relative_to(root).as_posix() for p in embedded.kept_paths(split, cohort)]
            found = subjects_for_files(rel, mapping=mapping, pattern=settings.subject_pattern)
            labels.extend(f"{cohort}/{subject}" for subject in found)
        out[split] = np.asarray(labels, dtype=object)
    return out


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


def _save_png(fig: Any, tmp: Path) -> None:
    fig.savefig(tmp, format="png", dpi=120)


def _write_outputs(report: PrivacyReport, out: Path) -> dict[str, Path]:
    """Write the tables, ``privacy_results.json``, the two figures and ``report.md``."""
    from idaudit.plotting import plot_flagging, plot_nnaa

    written = {
        "flagging.csv": write_csv(report.flagging, out / "flagging.csv"),
        "nnaa.csv": write_csv(report.nnaa, out / "nnaa.csv"),
        "flagging_by_cohort.csv": write_csv(
            report.flagging_by_cohort
            if report.flagging_by_cohort is not None
            else pd.DataFrame(columns=list(FLAGGING_COHORT_COLUMNS)),
            out / "flagging_by_cohort.csv",
        ),
    }
    if report.sanity is not None:
        written["sanity.csv"] = write_csv(report.sanity, out / "sanity.csv")
    written["privacy_results.json"] = write_text(report.to_json(), out / "privacy_results.json")
    for name, fig in (
        ("below_threshold.png", plot_flagging(report.flagging, report.flagging_by_cohort)),
        ("nnaa.png", plot_nnaa(report.nnaa, alpha=1.0 - report.settings.confidence_level)),
    ):
        written[name] = write_atomic(out / name, partial(_save_png, fig))
    written["report.md"] = write_text(report.to_markdown(), out / "report.md")
    return written
