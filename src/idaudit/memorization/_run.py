"""Folders to seed 003's outputs: ``run_privacy_check`` and its :class:`PrivacyReport`."""

from __future__ import annotations

import hashlib
import math
import os
import tempfile
import warnings
from collections.abc import Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, Literal

import numpy as np
import numpy.typing as npt
import pandas as pd
import xarray as xr

from idaudit._device import available_cpus, default_threads, thread_limit
from idaudit._results import (
    Status,
    private_dir,
    provenance,
    variable,
    write_atomic,
    write_csv,
    write_json,
    write_text,
)
from idaudit._validation import check_in_range, check_integer, check_option
from idaudit.exceptions import IdauditWarning, InvalidInputError
from idaudit.memorization._cache import PrivacyCache, model_key
from idaudit.memorization._flagging import (
    DEFAULT_PERCENTILES,
    FLAGGING_STATUS,
    check_percentiles,
    flagging,
    flagging_from_distances,
)
from idaudit.memorization._images import (
    SPLITS,
    CohortFiles,
    MemoDetector,
    build_models,
    embed_images,
    hash_files,
    scan_root,
)
from idaudit.memorization._nnaa import NNAA_STATUS, nnaa, nnaa_from_distances, subsample_indices
from idaudit.memorization._sanity import SANITY_STATUS, metric_sanity, subjects_from_names

__all__ = ["FLAGGING_COLUMNS", "NNAA_COLUMNS", "OUTPUT_FILES", "PrivacyReport", "run_privacy_check"]

#: Columns of ``flagging.csv``, in order.
FLAGGING_COLUMNS: tuple[str, ...] = (
    "metric",
    "axis",
    "percentile",
    "threshold",
    "synthetic_pct",
    "heldout_pct",
    "n_synthetic",
    "n_heldout",
    "n_synthetic_flagged",
    "n_heldout_flagged",
    "p_value",
    "ci_lower",
    "ci_upper",
)
#: Columns of ``nnaa.csv``, in order.
NNAA_COLUMNS: tuple[str, ...] = (
    "metric",
    "axis",
    "aa_train_synth",
    "aa_heldout_synth",
    "privacy_loss",
    "ci_lower",
    "ci_upper",
    "aa_train_synth_ci_lower",
    "aa_train_synth_ci_upper",
    "aa_heldout_synth_ci_lower",
    "aa_heldout_synth_ci_upper",
    "n_train",
    "n_heldout",
    "n_synthetic",
    "n_bootstrap",
)
#: Files written to ``out`` (``sanity.csv`` only with ``subject_pattern``).
OUTPUT_FILES: tuple[str, ...] = (
    "flagging.csv",
    "nnaa.csv",
    "privacy_results.json",
    "below_threshold.png",
    "nnaa.png",
    "report.md",
)
_COUNT_COLUMNS = ("n_files", "n_not_image", "n_duplicates", "ok", "no_face", "unreadable",
                  "bad_format")  # fmt: skip


@dataclass(frozen=True)
class PrivacyReport:
    """Everything one privacy check found, as tables that carry their statuses.

    Attributes
    ----------
    flagging : pandas.DataFrame
        One row per metric and percentile, columns :data:`FLAGGING_COLUMNS` (rates and
        interval bounds in percent). ``attrs["status"]`` maps each column to its status.
    nnaa : pandas.DataFrame
        One row per metric, columns :data:`NNAA_COLUMNS`; ``attrs["status"]`` as above.
    sanity : pandas.DataFrame or None
        The metric sanity check per identity metric (with ``subject_pattern``).
    counts : pandas.DataFrame
        Per cohort and split: image files, other files, duplicates collapsed, and the
        images kept (``ok``) or dropped (``no_face``, ``unreadable``, ``bad_format``).
    cohorts : list of str
        Cohorts analysed.
    skipped : dict of str to str
        Cohorts left out, each with the reason.
    notes : list of str
        Everything the run reported in words (skips, duplicates, warnings).
    cache_counters : dict of str to int
        What the cache computed and reused in this run.
    results : dict
        The content of ``privacy_results.json``.
    files : dict of str to pathlib.Path
        The files written (empty without ``out``).
    """

    flagging: pd.DataFrame
    nnaa: pd.DataFrame
    sanity: pd.DataFrame | None
    counts: pd.DataFrame
    cohorts: list[str]
    skipped: dict[str, str]
    notes: list[str]
    cache_counters: dict[str, int]
    results: dict[str, Any] = field(repr=False)
    files: dict[str, Path] = field(default_factory=dict)

    def __repr__(self) -> str:
        metrics = ", ".join(dict.fromkeys(self.flagging["metric"]))
        return (
            f"PrivacyReport(cohorts={self.cohorts}, metrics=[{metrics}], "
            f"skipped={sorted(self.skipped)}, files={sorted(self.files)})"
        )

    def to_xarray(self) -> xr.Dataset:
        """Return flagging (dims ``metric``, ``percentile``) and NNAA (``metric``) as a Dataset.

        Every variable has its ``long_name`` and ``status``; the attributes carry the
        provenance (versions, seed, input hashes), so the Dataset passes
        :func:`idaudit._results.check_result_dataset` and round-trips through netCDF.
        """
        flag = self.flagging.set_index(["metric", "percentile"])
        data: dict[str, xr.Variable] = {}
        ds_flag = xr.Dataset.from_dataframe(flag.drop(columns=["axis"]))
        for name in ds_flag.data_vars:
            data[f"flagging_{name}"] = variable(
                ("metric", "percentile"),
                ds_flag[name].values,
                long_name=f"flagging {name}",
                status=FLAGGING_STATUS[str(name)],
            )
        nn = self.nnaa.set_index("metric").reindex(ds_flag["metric"].values)
        for name, status in NNAA_STATUS.items():
            data[f"nnaa_{name}"] = variable(
                "metric", nn[name].to_numpy(float), long_name=f"NNAA {name}", status=status
            )
        axis = self.flagging.drop_duplicates("metric").set_index("metric")["axis"]
        attrs = {
            k: v for k, v in self.results["provenance"].items() if isinstance(v, str | int | float)
        }
        return xr.Dataset(
            data,
            coords={
                "metric": ds_flag["metric"].values,
                "percentile": ds_flag["percentile"].values,
                "axis": ("metric", axis.reindex(ds_flag["metric"].values).to_numpy(str)),
            },
            attrs=attrs,
        )


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


def _frame_with_status(rows: list[pd.DataFrame], status: dict[str, Status]) -> pd.DataFrame:
    frame = pd.concat(rows, ignore_index=True) if rows else pd.DataFrame()
    frame.attrs["status"] = {"metric": "descriptive", "axis": "descriptive", **status}
    return frame


def run_privacy_check(
    train: str | os.PathLike[str],
    heldout: str | os.PathLike[str],
    synthetic: str | os.PathLike[str],
    out: str | os.PathLike[str] | None = None,
    *,
    percentiles: Sequence[float] = DEFAULT_PERCENTILES,
    n_bootstrap: int = 1000,
    max_samples: int = 1000,
    lpips_max_samples: int = 200,
    n_permutations: int = 9999,
    confidence_level: float = 0.95,
    dlib: bool = True,
    arcface: str | os.PathLike[str] | None = None,
    adaface: str | os.PathLike[str] | None = None,
    lvface: str | os.PathLike[str] | None = None,
    retinaface: str | os.PathLike[str] | None = None,
    lpips_backbone: str | os.PathLike[str] | None = None,
    aligned: bool = False,
    subject_pattern: str | None = None,
    duplicates: Literal["collapse", "keep"] = "collapse",
    cache: str | os.PathLike[str] | PrivacyCache | None = None,
    threads: int | None = None,
    device: str = "cpu",
    rng: int = 0,
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
    percentiles : sequence of float, default (1, 2, 5, 10, 20)
        Operating points in (0, 100).
    n_bootstrap : int, default 1000
        NNAA bootstrap draws (0: no intervals).
    max_samples, lpips_max_samples : int, default 1000 and 200
        NNAA set caps for embeddings and for the appearance metric (seeded subsets).
    n_permutations : int, default 9999
        Permutations of the flagging p-value (0: none).
    confidence_level : float, default 0.95
        Of every interval.
    dlib : bool, default True
        Use dlib's recogniser (weights ship with pip).
    arcface, adaface, lvface : path, optional
        Further identity encoders: InsightFace ``w600k_r50.onnx`` (or its ``buffalo_l``
        folder), an AdaFace IR checkpoint (or its folder), an LVFace ``.onnx``.
    retinaface : path, optional
        InsightFace ``det_10g.onnx`` (or its folder) as detector; default MTCNN.
    lpips_backbone : path, optional
        torchvision's AlexNet weights: the appearance axis is then LPIPS; otherwise SSIM on
        images resized to 64 px, named ``ssim-gaussian1.5-64px`` everywhere.
    aligned : bool, default False
        The inputs are aligned face crops (ArcFace template): no detection.
    subject_pattern : str, optional
        Regex extracting a subject id from file names; enables the metric sanity check.
    duplicates : {"collapse", "keep"}, default "collapse"
        Byte-identical files within one split and cohort count once ("collapse": a copy of
        a file is not a new image) or each ("keep").
    cache : path or PrivacyCache, optional
        Where embeddings and distances are cached.
    threads : int, optional
        CPU threads for torch and onnxruntime, never more than the CPUs this process may use
        (``os.sched_getaffinity``); the BLAS and OpenMP pools get the same limit for the
        call. Default: those CPUs less the ones busy by the 1-minute load average (one busy
        CPU is allowed for this process), at most 8 (seed 003's default), at least 1.
    device : str, default "cpu"
    rng : int, default 0
        Seed of the permutations, subsets and bootstrap.
    progress : bool, default True
        Show a progress bar over the (model, split, cohort) embedding steps.

    Returns
    -------
    PrivacyReport

    Raises
    ------
    InvalidInputError
        Bad settings, an empty root, no cohort common to the three roots, or no cohort left
        with usable faces in every split.
    MissingWeightsError
        A model file that is not on disk (nothing is downloaded).
    """
    values = check_percentiles(percentiles)
    n_bootstrap = check_integer(n_bootstrap, "n_bootstrap", minimum=0)
    max_samples = check_integer(max_samples, "max_samples", minimum=2)
    lpips_max_samples = check_integer(lpips_max_samples, "lpips_max_samples", minimum=2)
    n_permutations = check_integer(n_permutations, "n_permutations", minimum=0)
    confidence_level = check_in_range(confidence_level, "confidence_level", 0.0, 1.0)
    check_option(duplicates, "duplicates", ("collapse", "keep"))
    seed = check_integer(rng, "rng", minimum=0)
    cpus = available_cpus()
    asked = None if threads is None else check_integer(threads, "threads", minimum=1)
    # seed 003 runs at most 8 threads unless asked for more
    n_threads = min(8, default_threads()) if asked is None else min(asked, cpus)
    notes: list[str] = []
    if asked is not None and asked > cpus:
        _say(notes, f"threads: {asked} asked, capped at the {cpus} CPU(s) this process may use.")

    roots = {"train": Path(train), "heldout": Path(heldout), "synthetic": Path(synthetic)}
    scanned = {split: scan_root(roots[split], split) for split in SPLITS}
    names = [set(scanned[s]) for s in SPLITS]
    common = sorted(set.intersection(*names))
    skipped: dict[str, str] = {}
    for cohort in sorted(set.union(*names) - set(common)):
        missing = [s for s in SPLITS if cohort not in scanned[s]]
        skipped[cohort] = f"missing from {' and '.join(missing)}"
    if not common:
        raise InvalidInputError(
            "no cohort folder is common to train, heldout and synthetic; cohorts: "
            + ", ".join(f"{s}: {sorted(scanned[s])}" for s in SPLITS)
        )
    if skipped:
        _say(
            notes,
            "cohorts skipped (not in all three roots): "
            + "; ".join(f"{c} ({why})" for c, why in skipped.items()),
            warn=True,
        )

    with ExitStack() as stack:
        stack.enter_context(thread_limit(n_threads))
        if isinstance(cache, PrivacyCache):
            store = cache
        elif cache is not None:
            store = PrivacyCache(cache)
        elif out is not None:
            store = PrivacyCache(_make_out(Path(out)) / "cache")
        else:
            store = PrivacyCache(stack.enter_context(tempfile.TemporaryDirectory()))
        counters_before = dict(store.counters)
        return _run(
            roots, scanned, common, skipped, notes, store, counters_before,
            out=None if out is None else _make_out(Path(out)),
            percentiles=values, n_bootstrap=n_bootstrap, max_samples=max_samples,
            lpips_max_samples=lpips_max_samples, n_permutations=n_permutations,
            confidence_level=confidence_level, duplicates=duplicates, seed=seed,
            threads=n_threads, device=device, subject_pattern=subject_pattern,
            models=build_models(
                dlib=dlib, arcface=arcface, adaface=adaface, lvface=lvface,
                retinaface=retinaface, lpips_backbone=lpips_backbone, aligned=aligned,
                threads=n_threads, device=device,
            ),
            aligned=aligned,
            progress=progress,
        )  # fmt: skip


def _make_out(out: Path) -> Path:
    return private_dir(out, name="out")


def _run(
    roots: dict[str, Path],
    scanned: dict[str, dict[str, tuple[list[Path], int]]],
    common: list[str],
    skipped: dict[str, str],
    notes: list[str],
    store: PrivacyCache,
    counters_before: dict[str, int],
    *,
    out: Path | None,
    percentiles: npt.NDArray[np.float64],
    n_bootstrap: int,
    max_samples: int,
    lpips_max_samples: int,
    n_permutations: int,
    confidence_level: float,
    duplicates: str,
    seed: int,
    threads: int,
    device: str,
    subject_pattern: str | None,
    models: Any,
    aligned: bool,
    progress: bool,
) -> PrivacyReport:
    collapse = duplicates == "collapse"
    files = {
        (split, cohort): hash_files(*scanned[split][cohort], collapse=collapse)
        for split in SPLITS
        for cohort in common
    }
    _duplicate_notes(files, common, notes)

    # -- identity embeddings, through the cache -------------------------------------------
    detector = MemoDetector(models.detector)
    emb: dict[tuple[int, str, str], npt.NDArray[np.float32]] = {}
    status: dict[tuple[str, str], npt.NDArray[np.str_]] = {}
    from tqdm.auto import tqdm

    bar = tqdm(total=len(models.encoders) * len(files), desc="embeddings", disable=not progress)
    for m, (encoder, ident) in enumerate(
        zip(models.encoders, models.encoder_identities, strict=True)
    ):
        for (split, cohort), cf in files.items():
            bar.update(1)

            def compute(idx: list[int], cf: CohortFiles = cf, encoder: Any = encoder) -> Any:
                st, vec, _ = embed_images([cf.paths[i] for i in idx], detector, encoder,
                                          aligned=aligned)  # fmt: skip
                return st, vec

            st, vec = store.embeddings(ident, split, cohort, cf.hashes, compute, dim=encoder.dim)
            emb[(m, split, cohort)] = vec
            if m == 0:
                status[(split, cohort)] = st
            elif not np.array_equal(st, status[(split, cohort)]):  # pragma: no cover - defensive
                raise InvalidInputError(
                    f"detections differ between encoders for {split}/{cohort}; clear the cache."
                )

    bar.close()
    counts = _counts_frame(files, status, common)
    usable: list[str] = []
    for cohort in common:
        empty = [s for s in SPLITS if not (status[(s, cohort)] == "ok").any()]
        if empty:
            skipped[cohort] = f"no usable face in {' and '.join(empty)}"
            _say(notes, f"cohort {cohort} skipped: no usable face in {' and '.join(empty)}.",
                 warn=True)  # fmt: skip
        else:
            usable.append(cohort)
            single = [s for s in SPLITS if int((status[(s, cohort)] == "ok").sum()) == 1]
            if single:
                _say(notes, f"cohort {cohort} has a single usable image in {', '.join(single)}.")
    if not usable:
        raise InvalidInputError(
            "no cohort has a usable face in all three splits; see the per-cohort counts: "
            + "; ".join(
                f"{c}/{s}: {int((status[(s, c)] == 'ok').sum())} of {len(files[(s, c)].paths)}"
                for c in common
                for s in SPLITS
            )
        )

    def kept(split: str, cohort: str) -> npt.NDArray[np.intp]:
        return np.flatnonzero(status[(split, cohort)] == "ok")

    flag_rows: list[pd.DataFrame] = []
    nnaa_rows: list[pd.DataFrame] = []
    sanity_rows: list[pd.DataFrame] = []
    for m, encoder in enumerate(models.encoders):
        sets = {}
        labels = {}
        for split in SPLITS:
            sets[split] = np.concatenate([emb[(m, split, c)][kept(split, c)] for c in usable])
            labels[split] = np.concatenate(
                [np.full(kept(split, c).size, c, dtype=object) for c in usable]
            )
        res = flagging(
            sets["train"], sets["heldout"], sets["synthetic"],
            cohorts=(labels["train"], labels["heldout"], labels["synthetic"]),
            metric="cosine", percentiles=percentiles, n_permutations=n_permutations,
            confidence_level=confidence_level, rng=seed, device=device,
        )  # fmt: skip
        flag_rows.append(_with_axis(res.to_frame(encoder.name), "identity"))
        nn = _nnaa_or_note(
            partial(
                nnaa, sets["train"], sets["heldout"], sets["synthetic"], metric="cosine",
                n_bootstrap=n_bootstrap, max_samples=max_samples,
                confidence_level=confidence_level, rng=seed, device=device,
            ),
            encoder.name, notes,
        )  # fmt: skip
        if nn is not None:
            nnaa_rows.append(_with_axis(nn.to_frame(encoder.name), "identity"))
        if subject_pattern is not None:
            frame = _sanity(
                encoder.name, subject_pattern, files, usable, kept,
                {s: [emb[(m, s, c)] for c in usable] for s in ("train", "heldout")},
                seed, notes,
            )  # fmt: skip
            if frame is not None:
                sanity_rows.append(frame)

    # -- appearance axis ----------------------------------------------------------------
    appearance_name = models.appearance_identity["metric"]
    loader = _ImageLoader(models.appearance_size)

    def block(rows: list[Path], cols: list[Path]) -> Any:
        def compute(r: list[int], c: list[int]) -> npt.NDArray[np.float64]:
            a = [loader(rows[i]) for i in r]
            b = [loader(cols[j]) for j in c]
            return np.asarray(models.appearance.pairwise(a, b, progress=False), dtype=np.float64)

        return compute

    d_h: list[npt.NDArray[np.float64]] = []
    d_s: list[npt.NDArray[np.float64]] = []
    s_h: list[npt.NDArray[Any]] = []
    s_s: list[npt.NDArray[Any]] = []
    for cohort in usable:
        t_paths = [files[("train", cohort)].paths[i] for i in kept("train", cohort)]
        t_hash = [files[("train", cohort)].hashes[i] for i in kept("train", cohort)]
        for split, d_out, s_out in (("heldout", d_h, s_h), ("synthetic", d_s, s_s)):
            q_paths = [files[(split, cohort)].paths[i] for i in kept(split, cohort)]
            q_hash = [files[(split, cohort)].hashes[i] for i in kept(split, cohort)]
            mat = store.distances(models.appearance_identity, q_hash, t_hash,
                                  block(q_paths, t_paths))  # fmt: skip
            d_out.append(mat.min(axis=1))
            s_out.append(np.full(len(q_hash), cohort, dtype=object))
    res_a = flagging_from_distances(
        np.concatenate(d_h), np.concatenate(d_s),
        heldout_strata=np.concatenate(s_h), synthetic_strata=np.concatenate(s_s),
        percentiles=percentiles, n_permutations=n_permutations,
        confidence_level=confidence_level, rng=seed,
    )  # fmt: skip
    flag_rows.append(_with_axis(res_a.to_frame(appearance_name), "appearance"))

    gen = np.random.default_rng(seed)
    pooled: dict[str, tuple[list[Path], list[str]]] = {}
    for split in SPLITS:
        paths = [files[(split, c)].paths[i] for c in usable for i in kept(split, c)]
        hashes = [files[(split, c)].hashes[i] for c in usable for i in kept(split, c)]
        keep = subsample_indices(len(paths), lpips_max_samples, gen)
        pooled[split] = ([paths[i] for i in keep], [hashes[i] for i in keep])
    union_p = [p for s in SPLITS for p in pooled[s][0]]
    union_h = [h for s in SPLITS for h in pooled[s][1]]
    sizes = tuple(len(pooled[s][0]) for s in SPLITS)
    nn_a = _nnaa_or_note(
        lambda: nnaa_from_distances(
            store.distances(models.appearance_identity, union_h, union_h,
                            block(union_p, union_p)),
            sizes,  # type: ignore[arg-type]
            n_bootstrap=n_bootstrap, max_samples=lpips_max_samples,
            confidence_level=confidence_level, rng=gen, device=device,
        ),
        appearance_name, notes,
    )  # fmt: skip
    if nn_a is not None:
        nnaa_rows.append(_with_axis(nn_a.to_frame(appearance_name), "appearance"))

    flag_frame = _frame_with_status(flag_rows, FLAGGING_STATUS)[list(FLAGGING_COLUMNS)]
    flag_frame.attrs["status"] = {"metric": "descriptive", "axis": "descriptive",
                                  **FLAGGING_STATUS}  # fmt: skip
    nnaa_frame = _frame_with_status(nnaa_rows, NNAA_STATUS)
    nnaa_frame = (
        nnaa_frame[list(NNAA_COLUMNS)]
        if len(nnaa_frame)
        else pd.DataFrame(columns=list(NNAA_COLUMNS))
    )
    nnaa_frame.attrs["status"] = {"metric": "descriptive", "axis": "descriptive", **NNAA_STATUS}
    sanity_frame = None
    if sanity_rows:
        sanity_frame = pd.concat(sanity_rows, ignore_index=True)
        sanity_frame.attrs["status"] = {"metric": "descriptive", **SANITY_STATUS}

    counters = {k: int(v - counters_before.get(k, 0)) for k, v in store.counters.items()}
    inputs = {
        f"{split}/{cohort}": _listing_digest(roots[split] / cohort, files[(split, cohort)])
        for split in SPLITS
        for cohort in common
    }
    prov = provenance(
        title="idaudit.memorization.run_privacy_check",
        inputs={f"input_sha256.{k}": v for k, v in inputs.items()},
        seeds={"rng": seed},
        settings={
            "device": device, "threads": threads, "aligned": aligned, "duplicates": duplicates,
        },
    )  # fmt: skip
    results: dict[str, Any] = {
        "flagging": _records(flag_frame),
        "nnaa": _records(nnaa_frame),
        "sanity": None if sanity_frame is None else _records(sanity_frame),
        "status": {
            "flagging": flag_frame.attrs["status"],
            "nnaa": nnaa_frame.attrs["status"],
            **({} if sanity_frame is None else {"sanity": sanity_frame.attrs["status"]}),
        },
        "cohorts": {"analysed": usable, "skipped": skipped},
        "counts": _records(counts),
        "inputs": {
            "roots": {s: str(roots[s]) for s in SPLITS},
            "sha256": inputs,
        },
        "models": {
            "identity": models.encoder_identities,
            "appearance": models.appearance_identity,
            "cache_keys": {
                **{e.name: model_key(i) for e, i in zip(models.encoders,
                                                        models.encoder_identities, strict=True)},
                appearance_name: model_key(models.appearance_identity),
            },
        },
        "parameters": {
            "percentiles": percentiles.tolist(), "n_bootstrap": n_bootstrap,
            "max_samples": max_samples, "lpips_max_samples": lpips_max_samples,
            "n_permutations": n_permutations, "confidence_level": confidence_level,
            "duplicates": duplicates, "aligned": aligned, "subject_pattern": subject_pattern,
            "threads": threads, "device": device, "rng": seed,
        },
        "cache": {"root": str(store.root), "counters": counters},
        "notes": notes,
        "provenance": prov,
    }  # fmt: skip
    report = PrivacyReport(
        flagging=flag_frame, nnaa=nnaa_frame, sanity=sanity_frame, counts=counts,
        cohorts=usable, skipped=dict(skipped), notes=notes, cache_counters=counters,
        results=results,
    )  # fmt: skip
    if out is not None:
        report.files.update(_write_outputs(report, out))
    return report


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


def _nnaa_or_note(compute: Any, metric: str, notes: list[str]) -> Any:
    try:
        return compute()
    except InvalidInputError as exc:
        _say(notes, f"NNAA skipped for {metric}: {exc}", warn=True)
        return None


def _duplicate_notes(files: dict[tuple[str, str], CohortFiles], common: list[str],
                     notes: list[str]) -> None:  # fmt: skip
    for (split, cohort), cf in files.items():
        if cf.n_duplicates:
            shown = ", ".join(cf.duplicate_names[:5]) + (", ..." if cf.n_duplicates > 5 else "")
            _say(notes, f"{split}/{cohort}: {cf.n_duplicates} byte-identical copies counted "
                        f"once ({shown}).")  # fmt: skip
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
        if copies:
            _say(notes, f"synthetic/{cohort}: {len(copies)} file(s) byte-identical to training "
                        "files (exact copies of training images).")  # fmt: skip


def _counts_frame(
    files: dict[tuple[str, str], CohortFiles],
    status: dict[tuple[str, str], npt.NDArray[np.str_]],
    common: list[str],
) -> pd.DataFrame:
    rows = []
    for cohort in common:
        for split in SPLITS:
            cf = files[(split, cohort)]
            st = status[(split, cohort)]
            rows.append(
                {
                    "cohort": cohort,
                    "split": split,
                    "n_files": cf.n_files,
                    "n_not_image": cf.n_not_image,
                    "n_duplicates": cf.n_duplicates,
                    **{
                        s: int((st == s).sum())
                        for s in ("ok", "no_face", "unreadable", "bad_format")
                    },
                }
            )
    frame = pd.DataFrame(rows, columns=["cohort", "split", *_COUNT_COLUMNS])
    frame.attrs["status"] = dict.fromkeys(frame.columns, "descriptive")
    return frame


def _sanity(
    metric: str,
    pattern: str,
    files: dict[tuple[str, str], CohortFiles],
    usable: list[str],
    kept: Any,
    emb: dict[str, list[npt.NDArray[np.float32]]],
    seed: int,
    notes: list[str],
) -> pd.DataFrame | None:
    vectors, subjects = [], []
    for split in ("train", "heldout"):
        for c, cohort in enumerate(usable):
            idx = kept(split, cohort)
            names = [files[(split, cohort)].paths[i].name for i in idx]
            for vec, subject in zip(emb[split][c][idx], subjects_from_names(names, pattern),
                                    strict=True):  # fmt: skip
                if subject is not None:
                    vectors.append(vec)
                    subjects.append(f"{cohort}/{subject}")
    try:
        res = metric_sanity(np.asarray(vectors), subjects, n_permutations=999, rng=seed)
    except InvalidInputError as exc:
        _say(notes, f"metric sanity check skipped for {metric} ({len(vectors)} real images "
                    f"matched --subject-pattern): {exc}", warn=True)  # fmt: skip
        return None
    return res.to_frame(metric)


def _records(frame: pd.DataFrame) -> list[dict[str, Any]]:
    out = []
    for row in frame.to_dict(orient="records"):
        out.append({k: _jsonable(v) for k, v in row.items()})
    return out


def _jsonable(v: Any) -> Any:
    if isinstance(v, np.generic):
        v = v.item()
    if isinstance(v, float) and not math.isfinite(v):
        return None if math.isnan(v) else str(v)
    return v


def _save_png(fig: Any, tmp: Path) -> None:
    fig.savefig(tmp, format="png", dpi=120)


def _write_outputs(report: PrivacyReport, out: Path) -> dict[str, Path]:
    from idaudit.plotting import plot_flagging, plot_nnaa

    written = {
        "flagging.csv": write_csv(report.flagging, out / "flagging.csv"),
        "nnaa.csv": write_csv(report.nnaa, out / "nnaa.csv"),
    }
    if report.sanity is not None:
        written["sanity.csv"] = write_csv(report.sanity, out / "sanity.csv")
    written["privacy_results.json"] = write_json(report.results, out / "privacy_results.json")
    for name, fig in (
        ("below_threshold.png", plot_flagging(report.flagging)),
        ("nnaa.png", plot_nnaa(report.nnaa)),
    ):
        written[name] = write_atomic(out / name, partial(_save_png, fig))
    from idaudit.memorization._report import report_markdown

    written["report.md"] = write_text(report_markdown(report), out / "report.md")
    return written
