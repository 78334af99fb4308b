"""``idaudit embed``: folders of face photos (one per identity) → an embeddings file."""

from __future__ import annotations

import argparse
import warnings
from pathlib import Path
from typing import Any

from idaudit.cli._common import add_quiet, at_least, out_dir, plural, say
from idaudit.exceptions import IdauditWarning

__all__ = ["add_parser"]


def add_parser(sub: Any) -> None:
    """Register ``idaudit embed`` on ``sub`` (the sub-command action of the main parser)."""
    embed = sub.add_parser(
        "embed",
        help="turn folders of face photos (one per identity) into an embeddings file",
        description=(
            "Detect, align and encode the faces in IMAGES_DIR, which holds one sub-folder per "
            "identity (the folder name is the label; images anywhere below it count). Each "
            "photo keeps its largest face. Writes the embeddings (.npz, .csv or .parquet, "
            "readable by 'idaudit audit' and 'idaudit certify') and an outcome table (CSV, "
            "one row per photo or kept face: ok, no_face, unreadable, bad_format), and prints "
            "how many photos were dropped and why. Encoders: 'dlib' (default; dlib's ResNet "
            "with MTCNN, weights shipped with pip, CC0/MIT), 'torch-dlib' (the same network "
            "in torch, batched, CPU or CUDA), 'arcface' (InsightFace buffalo_l: RetinaFace "
            "det_10g.onnx and ArcFace w600k_r50.onnx from --arcface-dir; InsightFace's "
            "pretrained models are licensed for non-commercial research only). Nothing is "
            "downloaded."
        ),
    )
    embed.add_argument("images_dir", metavar="IMAGES_DIR", help="folder of identity folders")
    embed.add_argument(
        "--out",
        required=True,
        metavar="FILE",
        help="embeddings file to write: .npz (arrays embeddings, labels, sources), .csv or "
        ".parquet/.pq (columns identity, e0, e1, ...)",
    )
    embed.add_argument(
        "--outcomes",
        metavar="FILE",
        help="outcome table to write (default: the --out path with .outcomes.csv)",
    )
    embed.add_argument(
        "--encoder",
        choices=("dlib", "torch-dlib", "arcface"),
        help="identity encoder (default: arcface when --arcface-dir is given, else dlib)",
    )
    embed.add_argument(
        "--arcface-dir",
        metavar="DIR",
        help="InsightFace buffalo_l folder holding det_10g.onnx and w600k_r50.onnx "
        "(non-commercial research licence; default: $IDAUDIT_WEIGHTS/buffalo_l)",
    )
    embed.add_argument(
        "--threads",
        type=int,
        metavar="N",
        help="CPU threads for torch, BLAS and onnxruntime (default: the CPUs this process may "
        "use, os.sched_getaffinity, less those already busy by the load average; at least 1)",
    )
    embed.add_argument(
        "--cache",
        metavar="DIR",
        help="embedding cache by content hash, written as it goes (owner-only): an "
        "interrupted run resumes from it and a re-run encodes nothing (default: the --out "
        "path with .cache; 'none' for no cache; not with --all-faces)",
    )
    embed.add_argument(
        "--device", default="cpu", help="cpu or cuda[:i] (torch-dlib, arcface; default: cpu)"
    )
    embed.add_argument(
        "--all-faces",
        action="store_true",
        help="keep every face of a photo, each labelled with its folder's identity (only "
        "when every face in those photos is that person)",
    )
    embed.add_argument(
        "--batch-size",
        type=int,
        default=32,
        metavar="N",
        help="aligned faces per encoder call (default: 32)",
    )
    add_quiet(embed)
    embed.set_defaults(run=run)


#: File suffixes read as images (case-insensitive); other files are counted and skipped.
_IMAGE_SUFFIXES = frozenset(
    {".jpg", ".jpeg", ".png", ".bmp", ".gif", ".tif", ".tiff", ".webp", ".ppm", ".pgm", ".pnm"}
)
_EMBEDDING_SUFFIXES = (".npz", ".csv", ".parquet", ".pq")


def _find_images(root: Path) -> tuple[list[Path], list[str], int, list[Path]]:
    """Image files below each identity folder of ``root``.

    Returns ``(paths, labels, n_folders, skipped)``: the image paths, their folder names, how
    many identity folders there are, and the other files, which are skipped.

    Identity folders are the visible sub-folders of ``root``; their images are found at any
    depth, in sorted order. Hidden files and folders are ignored; visible files that are not
    images (and files lying in ``root`` itself) are counted as skipped.
    """
    if not root.is_dir():
        raise NotADirectoryError(f"`IMAGES_DIR` must be an existing folder; got {str(root)!r}.")
    visible = sorted(p for p in root.iterdir() if not p.name.startswith("."))
    folders = [p for p in visible if p.is_dir()]
    if not folders:
        raise ValueError(
            f"`IMAGES_DIR` must hold one sub-folder per identity; {str(root)!r} has none."
        )
    skipped = [p for p in visible if p.is_file()]
    paths: list[Path] = []
    labels: list[str] = []
    for folder in folders:
        for path in sorted(folder.rglob("*")):
            if any(part.startswith(".") for part in path.relative_to(folder).parts):
                continue
            if not path.is_file():
                continue
            if path.suffix.lower() in _IMAGE_SUFFIXES:
                paths.append(path)
                labels.append(folder.name)
            else:
                skipped.append(path)
    if not paths:
        raise ValueError(
            f"`IMAGES_DIR` holds {plural(len(folders), 'identity folder', 'identity folders')} "
            f"but no image files ({', '.join(sorted(_IMAGE_SUFFIXES))}); "
            f"{plural(len(skipped), 'other file', 'other files')}."
        )
    return paths, labels, len(folders), skipped


def _encoder_name(args: argparse.Namespace) -> str:
    """Return the encoder ``--encoder`` names (or its default), checked against the flags."""
    encoder: str = args.encoder or ("arcface" if args.arcface_dir else "dlib")
    if args.arcface_dir and encoder != "arcface":
        raise ValueError(f"`--arcface-dir` is used by --encoder arcface only; got {encoder!r}.")
    if encoder == "dlib" and args.device != "cpu":
        raise ValueError(
            "`--device` must be cpu for --encoder dlib (dlib runs on the CPU; "
            f"--encoder torch-dlib is the same network on CUDA); got {args.device!r}."
        )
    return encoder


def _face_models(args: argparse.Namespace) -> tuple[Any, Any]:
    """Build the detector and encoder that ``--encoder`` names, on ``--device``/``--threads``."""
    from idaudit.faces import FaceModelOptions, build_face_models, resolve_weights

    encoder = _encoder_name(args)
    options: dict[str, Any] = {"threads": args.threads, "device": args.device}
    if encoder == "arcface":
        # both files of the buffalo_l folder (or $IDAUDIT_WEIGHTS'), each checked on loading
        for key, name in (("retinaface", "det_10g.onnx"), ("arcface", "w600k_r50.onnx")):
            options[key] = resolve_weights("buffalo_l", name, args.arcface_dir, verify=False)
        options["dlib"] = None
    else:
        options["dlib"] = "cpp" if encoder == "dlib" else "torch"
    models = build_face_models(FaceModelOptions(**options))
    return models.detector, models.encoders[0]


def _write_embeddings(
    tmp: Path, suffix: str, emb: Any, labels: Any, sources: Any, encoder: str
) -> None:
    """Write the embeddings into ``tmp`` in the format ``suffix`` names."""
    import numpy as np
    import pandas as pd

    if suffix == ".npz":
        with open(tmp, "wb") as fh:  # a file object: np.savez would append ".npz" to a name
            np.savez(
                fh,
                embeddings=emb,
                labels=np.asarray(labels, dtype=str),
                sources=np.asarray(sources, dtype=str),
                encoder=np.asarray(encoder),
            )
        return
    frame = pd.DataFrame(emb, columns=[f"e{i}" for i in range(emb.shape[1])])
    frame.insert(0, "identity", list(labels))
    if suffix == ".csv":
        frame.to_csv(tmp, index=False)
    else:
        frame.to_parquet(tmp, index=False)


def run(args: argparse.Namespace) -> int:
    """Embed ``IMAGES_DIR`` with torch and the BLAS pools on ``--threads`` threads throughout."""
    if args.threads is not None:
        at_least(args.threads, "--threads", 1)
    out = Path(args.out)
    if out.suffix.lower() not in _EMBEDDING_SUFFIXES:
        raise ValueError(f"`--out` must end in .npz, .csv, .parquet or .pq; got {out.name!r}.")
    at_least(args.batch_size, "--batch-size", 1)
    if args.all_faces and args.cache not in (None, "none"):
        raise ValueError("`--cache` works without --all-faces only (one face per photo).")
    _encoder_name(args)
    # the folder's contents too, before torch loads: a wrong folder answers at once
    found = _find_images(Path(args.images_dir))
    from idaudit._device import default_threads, thread_limit

    if args.threads is None:
        args.threads = default_threads()
    with thread_limit(args.threads):
        return _embed(args, found)


def _embed(args: argparse.Namespace, found: tuple[list[Path], list[str], int, list[Path]]) -> int:
    from idaudit._results import atomic_path
    from idaudit.faces import FacePipeline

    out = Path(args.out)  # its suffix and --batch-size were checked by run()
    outcomes_path = Path(args.outcomes) if args.outcomes else out.with_suffix(".outcomes.csv")
    root = Path(args.images_dir)
    paths, labels, n_folders, skipped = found
    n_ids = len(set(labels))
    say(
        f"read {root}: {plural(len(paths), 'image', 'images')} in "
        f"{plural(n_folders, 'identity folder', 'identity folders')}"
        + (f" ({n_folders - n_ids} without images)" if n_ids < n_folders else "")
        + (f"; {len(skipped)} other files skipped (named in the outcomes)" if skipped else "")
    )
    cache = None
    if not args.all_faces and args.cache != "none":
        from idaudit.faces import EmbeddingCache

        cache_dir = Path(args.cache) if args.cache else out.with_suffix(".cache")
        out_dir(cache_dir, "--cache")
        cache = EmbeddingCache(cache_dir)
    detector, encoder = _face_models(args)
    # the folders that will hold the two files, before the (long) encoding
    out_dir(out.parent, "--out")
    out_dir(outcomes_path.parent, "--outcomes")
    say(
        f"detector {type(detector).__name__}, encoder {encoder.name} (dim {encoder.dim}), "
        f"device {encoder.device}, threads {args.threads}"
        + (f", cache {cache.directory}" if cache is not None else "")
    )
    pipeline = FacePipeline(
        detector,
        encoder,
        all_faces=args.all_faces,
        batch_size=args.batch_size,
        progress=not args.quiet,
    )
    try:
        with warnings.catch_warnings():
            # "kept no face": said below with the counts, and refused with one line
            warnings.filterwarnings("ignore", "FacePipeline.encode kept no face", IdauditWarning)
            emb, outcomes = pipeline.encode(paths, cache=cache)
    except KeyboardInterrupt:
        if cache is None:
            say("interrupted: nothing was saved (no cache); a re-run starts again")
        else:
            say(
                f"interrupted: {cache.writes} image(s) were encoded and saved in the cache "
                f"{cache.directory} in this run ({len(cache)} in all); a re-run reads them "
                "instead of encoding them again"
            )
        raise
    if cache is not None and cache.hits:
        say(f"resumed: {cache.hits} of {len(paths)} images came from the cache")
    outcomes = _with_skipped(outcomes, labels, skipped, root)
    with atomic_path(outcomes_path) as tmp:
        outcomes.to_csv(tmp, index=False)
    kept = outcomes[outcomes["status"] == "ok"].sort_values("embedding_row")
    _say_kept(outcomes, kept, labels, all_faces=args.all_faces)
    if len(kept) == 0:
        raise ValueError(
            f"no face was embedded from {plural(len(paths), 'image', 'images')}, so "
            f"{str(out)!r} was not written; see {str(outcomes_path)!r}."
        )
    sources = [str(Path(s).relative_to(root)) for s in kept["source"]]
    with atomic_path(out) as tmp:
        labels = kept["identity"].to_numpy()
        _write_embeddings(tmp, out.suffix.lower(), emb, labels, sources, encoder.name)
    say(f"wrote:\n  {out}\n  {outcomes_path}")
    return 0


def _with_skipped(outcomes: Any, labels: list[str], skipped: list[Path], root: Path) -> Any:
    """Return the outcome table with identities and a ``skipped`` row per non-image file."""
    import pandas as pd

    outcomes.insert(0, "identity", [labels[i] for i in outcomes["input_index"]])
    if not skipped:
        return outcomes
    extra = pd.DataFrame(
        {
            "identity": [p.parent.name if p.parent != root else "" for p in skipped],
            "input_index": pd.array([None] * len(skipped), dtype="Int64"),
            "source": [str(p) for p in skipped],
            "status": "skipped",
            "n_faces": pd.array([0] * len(skipped), dtype="Int64"),
            "message": [f"not an image file ({p.suffix or 'no suffix'})" for p in skipped],
        }
    )
    return pd.concat([outcomes, extra], ignore_index=True)


def _say_kept(outcomes: Any, kept: Any, labels: list[str], *, all_faces: bool) -> None:
    """Print what was kept and dropped, identities left without a face, and a lone identity."""
    counts = outcomes.drop_duplicates("input_index")["status"].value_counts()
    several = int((kept.drop_duplicates("input_index")["n_faces"] > 1).sum())
    dropped = {
        status: int(counts.get(status, 0)) for status in ("no_face", "unreadable", "bad_format")
    }
    say(
        f"kept {len(kept)} faces from {int(counts.get('ok', 0))} images; dropped "
        f"{sum(dropped.values())} images ("
        + ", ".join(f"{k}: {v}" for k, v in dropped.items())
        + f"); images with several faces ({'all kept' if all_faces else 'largest kept'}): "
        f"{several}"
    )
    missing = sorted(set(labels) - set(kept["identity"]))
    if missing:
        shown = ", ".join(missing[:10]) + (", ..." if len(missing) > 10 else "")
        say(f"identities without any kept face: {len(missing)} ({shown})")
    if int(kept["identity"].nunique()) == 1:
        say(
            "note: only one identity has a kept face; `idaudit audit` and `idaudit certify` "
            "compare identities and need at least 2 (add a folder per identity)"
        )
