"""``idaudit privacy TRAIN HELDOUT SYNTHETIC --out DIR``: seed 003's memorisation check."""

from __future__ import annotations

import argparse
import warnings
from pathlib import Path
from typing import Any

from idaudit.cli._common import add_quiet, at_least, check_device, inside, out_dir, relay, say
from idaudit.cli._embed import _IMAGE_SUFFIXES as IMAGE_SUFFIXES
from idaudit.exceptions import IdauditWarning, InvalidInputError

__all__ = ["add_parser"]


def add_parser(subparsers: Any) -> None:
    """Register ``idaudit privacy``."""
    parser = subparsers.add_parser(
        "privacy",
        help="memorisation check: do synthetic faces sit closer to the training images than "
        "held-out real faces do?",
        description=(
            "Compare a generator's samples (SYNTHETIC) with the images it was trained on "
            "(TRAIN) and real images never used in training (HELDOUT); each root holds one "
            "sub-folder per cohort. Identity axis: cosine distance between recognition "
            "embeddings (dlib by default; ArcFace, AdaFace, LVFace when given). Appearance "
            "axis: LPIPS with --lpips-backbone, else SSIM (named as such). Writes "
            "flagging.csv, nnaa.csv, privacy_results.json, below_threshold.png, nnaa.png, "
            "report.md and a cache/ of embeddings and distances. Nothing is downloaded."
        ),
    )
    # the order of the calls is the order of --help
    _add_folders(parser)
    _add_statistics(parser)
    _add_models(parser.add_argument_group("models (local files only)"))
    _add_run_options(parser)
    add_quiet(parser)
    parser.set_defaults(run=_run)


def _add_folders(parser: argparse.ArgumentParser) -> None:
    """Add the three input roots and ``--out``."""
    parser.add_argument("train", metavar="TRAIN", help="training images, one folder per cohort")
    parser.add_argument("heldout", metavar="HELDOUT", help="held-out real images, same cohorts")
    parser.add_argument("synthetic", metavar="SYNTHETIC", help="generated images, same cohorts")
    parser.add_argument("--out", required=True, metavar="DIR", help="output folder")


def _add_statistics(parser: argparse.ArgumentParser) -> None:
    """Add the flagging and NNAA settings and the seed."""
    parser.add_argument(
        "--percentiles",
        type=float,
        nargs="+",
        default=[1.0, 2.0, 5.0, 10.0, 20.0],
        metavar="P",
        help="operating points in (0, 100) (default: 1 2 5 10 20)",
    )
    parser.add_argument(
        "--bootstrap",
        type=int,
        default=1000,
        metavar="N",
        help="NNAA split-half draws behind the intervals (default: 1000; 0: no intervals)",
    )
    parser.add_argument(
        "--max-samples",
        type=int,
        default=1000,
        metavar="N",
        help="NNAA cap per set for embeddings (default: 1000)",
    )
    parser.add_argument(
        "--lpips-max-samples",
        type=int,
        default=200,
        metavar="N",
        help="NNAA cap per set for the appearance metric (default: 200)",
    )
    parser.add_argument(
        "--permutations",
        type=int,
        default=9999,
        metavar="N",
        help="permutations of the flagging p-value (default: 9999; 0: none)",
    )
    parser.add_argument(
        "--nnaa-permutations",
        type=int,
        default=999,
        metavar="N",
        help="relabellings of the NNAA privacy-loss test (default: 999; 0: none)",
    )
    parser.add_argument(
        "--confidence",
        type=float,
        default=0.95,
        metavar="C",
        help="confidence level of every interval (default: 0.95)",
    )
    parser.add_argument("--seed", type=int, default=0, help="seed (default: 0)")


def _add_models(models: argparse._ArgumentGroup) -> None:
    """Add the identity encoders, the detector and the appearance metric (local files)."""
    models.add_argument(
        "--no-dlib", action="store_true", help="leave out dlib's recogniser (needs another encoder)"
    )
    models.add_argument(
        "--dlib-runtime",
        choices=("torch", "cpp"),
        default=None,
        help="what runs dlib's network: torch (default; the same network and weights, "
        "on --device, 10-20x faster on the CPU) or cpp (dlib itself, CPU only)",
    )
    arcface = models.add_mutually_exclusive_group()
    arcface.add_argument(
        "--arcface-dir", metavar="DIR", help="InsightFace buffalo_l folder (w600k_r50.onnx)"
    )
    arcface.add_argument("--arcface-onnx", metavar="FILE", help="ArcFace w600k_r50.onnx")
    models.add_argument(
        "--adaface-dir",
        metavar="DIR",
        help="folder holding the AdaFace IR checkpoint (idaudit has its own "
        "network definition: no clone of the AdaFace repository is needed)",
    )
    models.add_argument("--adaface-ckpt", metavar="FILE", help="AdaFace IR checkpoint (.ckpt)")
    models.add_argument("--lvface-onnx", metavar="FILE", help="LVFace .onnx model")
    models.add_argument(
        "--retinaface-onnx",
        metavar="FILE",
        help="RetinaFace det_10g.onnx as detector (default: MTCNN)",
    )
    models.add_argument(
        "--lpips-backbone",
        metavar="FILE",
        help="torchvision alexnet-owt-7be5be79.pth: appearance axis LPIPS (default: SSIM)",
    )
    models.add_argument(
        "--aligned",
        action="store_true",
        help="inputs are aligned face crops (ArcFace template): no detection",
    )


def _add_run_options(parser: argparse.ArgumentParser) -> None:
    """Add the sanity check's pattern, duplicate handling, cache, threads and device."""
    parser.add_argument(
        "--subject-pattern",
        metavar="REGEX",
        help="regex whose first capture group (or group 'subject') in each training and "
        "held-out file name is the subject: permutations and split halves move whole "
        "subjects, and the metric sanity check runs (default: each image its own subject)",
    )
    parser.add_argument(
        "--subjects",
        metavar="CSV",
        help="CSV mapping each training and held-out image (column file: path relative to "
        "the split root, or file name) to its subject (column subject); as --subject-pattern",
    )
    parser.add_argument(
        "--percentile-method",
        choices=("order_statistic", "linear"),
        default="order_statistic",
        help="held-out percentile behind the thresholds: the ceil(p n/100)-th smallest "
        "distance (order_statistic, default) or numpy.percentile's linear interpolation",
    )
    parser.add_argument(
        "--duplicates",
        choices=("collapse", "keep"),
        default="collapse",
        help="byte-identical files within a split and cohort count once "
        "(collapse, default) or each (keep)",
    )
    parser.add_argument("--cache-dir", metavar="DIR", help="cache folder (default: DIR/cache)")
    parser.add_argument(
        "--threads",
        type=int,
        metavar="N",
        help="CPU threads for torch and onnxruntime (default: at most 8, the CPUs "
        "this process may use and the idle ones)",
    )
    parser.add_argument("--device", default="cpu", help="cpu or cuda[:i] (default: cpu)")


def _check(args: argparse.Namespace) -> None:
    """Every flag, before any image is read."""
    for value in args.percentiles:
        inside(value, "--percentiles", 0.0, 100.0)
    at_least(args.bootstrap, "--bootstrap", 0)
    at_least(args.max_samples, "--max-samples", 2)
    at_least(args.lpips_max_samples, "--lpips-max-samples", 2)
    at_least(args.permutations, "--permutations", 0)
    at_least(args.nnaa_permutations, "--nnaa-permutations", 0)
    inside(args.confidence, "--confidence", 0.0, 1.0)
    at_least(args.seed, "--seed", 0)
    if args.threads is not None:
        at_least(args.threads, "--threads", 1)
    if args.adaface_dir and args.adaface_ckpt:
        raise InvalidInputError("give `--adaface-dir` or `--adaface-ckpt`, not both.")
    if args.no_dlib and not (
        args.arcface_dir
        or args.arcface_onnx
        or args.adaface_dir
        or args.adaface_ckpt
        or args.lvface_onnx
    ):
        raise InvalidInputError("`--no-dlib` needs another identity encoder (--arcface-*, ...).")
    if args.no_dlib and args.dlib_runtime is not None:
        raise InvalidInputError("`--dlib-runtime` chooses how dlib runs; drop it with `--no-dlib`.")
    if args.subjects and args.subject_pattern:
        raise InvalidInputError("give `--subjects` or `--subject-pattern`, not both.")
    if args.aligned and args.retinaface_onnx:
        raise InvalidInputError("`--aligned` skips detection; drop `--retinaface-onnx`.")
    check_device(args.device)
    _check_paths(args)


def _check_paths(args: argparse.Namespace) -> None:
    """Check the three roots and the ``--subjects`` file, before torch loads."""
    for split in ("train", "heldout", "synthetic"):
        root = Path(getattr(args, split))
        if not root.is_dir():
            raise InvalidInputError(f"`{split}` must be an existing folder; got {str(root)!r}.")
        cohorts = sorted(c for c in root.iterdir() if c.is_dir() and not c.name.startswith("."))
        if not cohorts:
            raise InvalidInputError(
                f"`{split}` must hold one sub-folder per cohort; {str(root)!r} has none."
            )
        if not any(_holds_an_image(c) for c in cohorts):
            shown = ", ".join(c.name for c in cohorts[:5]) + (", ..." if len(cohorts) > 5 else "")
            raise InvalidInputError(
                f"`{split}` holds no image file in its cohort folders ({shown}) in "
                f"{str(root)!r}; images end in {', '.join(sorted(IMAGE_SUFFIXES))}."
            )
    if args.subjects is not None and not Path(args.subjects).is_file():
        raise InvalidInputError(f"`--subjects` must be an existing file; got {args.subjects!r}.")
    # a missing weight file is the library's to report: its MissingWeightsError says where
    # the file is published and where to put it


def _holds_an_image(folder: Path) -> bool:
    """Whether an image file lies anywhere below ``folder`` (hidden ones not counted)."""
    for path in folder.rglob("*"):
        hidden = any(part.startswith(".") for part in path.relative_to(folder).parts)
        if not hidden and path.suffix.lower() in IMAGE_SUFFIXES and path.is_file():
            return True
    return False


def _run(args: argparse.Namespace) -> int:
    _check(args)  # before the library loads: a wrong flag answers at once
    out = out_dir(args.out, "--out")
    from idaudit.faces import FaceModelOptions
    from idaudit.pipeline import PrivacyStatistics, run_privacy_check

    models = FaceModelOptions(
        dlib=None if args.no_dlib else (args.dlib_runtime or "torch"),
        arcface=args.arcface_dir or args.arcface_onnx,
        adaface=args.adaface_dir or args.adaface_ckpt,
        lvface=args.lvface_onnx,
        retinaface=args.retinaface_onnx,
        lpips=args.lpips_backbone,
        aligned=args.aligned,
        threads=args.threads,
        device=args.device,
    )
    statistics = PrivacyStatistics(
        percentiles=args.percentiles,
        percentile_method=args.percentile_method,
        n_permutations=args.permutations,
        n_bootstrap=args.bootstrap,
        nnaa_permutations=args.nnaa_permutations,
        max_samples=args.max_samples,
        lpips_max_samples=args.lpips_max_samples,
        confidence_level=args.confidence,
        duplicates=args.duplicates,
        subject_pattern=args.subject_pattern,
        subjects=args.subjects,
        rng=args.seed,
    )
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", IdauditWarning)
        report = run_privacy_check(
            args.train,
            args.heldout,
            args.synthetic,
            out,
            models=models,
            statistics=statistics,
            cache=args.cache_dir,
            progress=not args.quiet,
        )
    relay(caught, "privacy")
    say((out / "report.md").read_text(encoding="utf-8"))
    say("wrote:\n" + "\n".join(f"  {p}" for p in report.files.values()))
    return 0
