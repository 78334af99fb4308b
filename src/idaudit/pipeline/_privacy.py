"""Folders to seed 003's outputs: :func:`run_privacy_check`, step by step.

The steps, each over the frozen :class:`~idaudit.pipeline.PrivacySettings`: scan the three
roots, hash the files, embed them through the cache and keep the cohorts with a usable face
in every split (:mod:`idaudit.pipeline._privacy_inputs`), measure the identity and the
appearance axes (:mod:`idaudit.pipeline._privacy_axes`), gather the results
(:func:`_report`) and write them (:func:`_write_outputs`).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import tempfile
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, replace
from pathlib import Path

import pandas as pd

from idaudit._device import available_cpus, default_threads, thread_limit
from idaudit._results import (
    Status,
    atomic_path,
    private_dir,
    provenance,
    write_csv,
    write_text,
)
from idaudit.faces import FaceModelOptions
from idaudit.memorization import (
    FLAGGING_COHORT_COLUMNS,
    FLAGGING_COLUMNS,
    FLAGGING_STATUS,
    NNAA_COLUMNS,
    NNAA_STATUS,
    NNAA_TEST_STATUS,
    SANITY_STATUS,
    power_notes,
)
from idaudit.pipeline._folders import (
    SPLITS,
    CheckModels,
    CohortFiles,
    build_models,
)
from idaudit.pipeline._privacy_axes import _appearance_axis, _AxisRows, _identity_axis
from idaudit.pipeline._privacy_cache import PrivacyCache, model_key
from idaudit.pipeline._privacy_inputs import (
    _Cohorts,
    _counts_frame,
    _embed,
    _Embedded,
    _hash_files,
    _say,
    _scan_cohorts,
    _subject_labels,
    _unreadable_files,
    _usable_cohorts,
)
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
            f"`models` must be an idaudit.faces.FaceModelOptions; got {type(models).__name__}."
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
        _Kept(usable, skipped={**cohorts.missing, **no_face}, unreadable=unreadable),
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


@dataclass(frozen=True)
class _Kept:
    """The cohorts the statistics used, those skipped (with why) and the unreadable files."""

    usable: list[str]
    skipped: dict[str, str]
    unreadable: dict[str, str]


def _report(
    settings: PrivacySettings,
    cohorts: _Cohorts,
    embedded: _Embedded,
    kept: _Kept,
    *,
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
        cohorts=kept.usable,
        skipped=kept.skipped,
        unreadable_files=kept.unreadable,
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
        with atomic_path(out / name) as tmp:
            fig.savefig(tmp, format="png", dpi=120)
        written[name] = out / name
    written["report.md"] = write_text(report.to_markdown(), out / "report.md")
    return written
