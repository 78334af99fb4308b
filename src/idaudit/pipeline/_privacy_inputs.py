"""The privacy check's inputs: cohorts scanned, files hashed, images embedded through the cache.

The steps before any statistic, each over the frozen settings: scan the three roots
(:func:`_scan_cohorts`), hash the files (:func:`_hash_files`), embed them through the
shared embedding cache (:func:`_embed`), keep the cohorts with a usable face in every split
(:func:`_usable_cohorts`), and count what happened to every file (:func:`_counts_frame`).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd

from idaudit.exceptions import IdauditWarning, InvalidInputError
from idaudit.memorization import (
    read_subject_map,
    subjects_for_files,
)
from idaudit.pipeline._folders import (
    MIN_IMAGE_SIDE,
    SPLITS,
    CheckModels,
    CohortFiles,
    MemoDetector,
    embed_images,
    hash_files,
    scan_root,
)
from idaudit.pipeline._privacy_cache import PrivacyCache
from idaudit.pipeline._privacy_report import (
    PrivacySettings,
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


def _say(notes: list[str], text: str, *, warn: bool = False) -> None:
    notes.append(text)
    if warn:
        warnings.warn(text, IdauditWarning, stacklevel=3)


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
    """Detect and embed every image with every identity encoder, through the embedding cache.

    Each distinct image of a cohort is looked up (and, on a miss, embedded) once; the
    counters say how many were computed and how many images were answered by the cache.
    """
    from tqdm.auto import tqdm

    from idaudit.faces import EmbeddingCache, content_key
    from idaudit.faces._cache import encoder_fingerprint

    cache = EmbeddingCache(store.root / "embeddings")
    detector = MemoDetector(models.detector)
    vectors: dict[tuple[int, str, str], npt.NDArray[np.float32]] = {}
    status: dict[_SplitCohort, npt.NDArray[np.str_]] = {}
    bar = tqdm(
        total=len(models.encoders) * len(files), desc="embeddings", disable=not settings.progress
    )
    for index, (encoder, identity) in enumerate(
        zip(models.encoders, models.encoder_identities, strict=True)
    ):
        # the identity holds the check's preprocessing: size floor, enlargement, alignment
        preprocessing = {"aligned": settings.aligned, "identity": identity}
        fingerprint = encoder_fingerprint(encoder, models.detector, preprocessing=preprocessing)
        for (split, cohort), cohort_files in files.items():
            bar.update(1)
            hashes = cohort_files.hashes
            first: dict[str, int] = {}  # each distinct image (by hash) at its first position
            for i, h in enumerate(hashes):
                first.setdefault(h, i)
            image_status, embeddings, _, cached = embed_images(
                [cohort_files.paths[i] for i in first.values()],
                [content_key(fingerprint, h) for h in first],
                detector,
                encoder,
                cache,
                aligned=settings.aligned,
            )
            distinct = {h: k for k, h in enumerate(first)}
            rows = np.array([distinct[h] for h in hashes], dtype=np.int64)
            store.counters["embeddings_computed"] += cached.count(False)
            store.counters["embeddings_reused"] += sum(cached[k] for k in rows)
            vectors[(index, split, cohort)] = embeddings[rows]
            statuses = np.asarray(image_status, dtype="<U16")[rows]
            if index == 0:
                status[(split, cohort)] = statuses
            elif not np.array_equal(statuses, status[(split, cohort)]):  # pragma: no cover
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
