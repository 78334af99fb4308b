"""``idaudit invert``: reconstruct a face from a dlib embedding (DCGAN prior, CPU, offline)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Any

from idaudit.cli._common import add_quiet, at_least, inside, out_dir, say
from idaudit.exceptions import InvalidInputError

if TYPE_CHECKING:
    import numpy as np

__all__ = ["add_parser"]


def add_parser(sub: Any) -> None:
    """Register ``idaudit invert`` on ``sub`` (the sub-command action of the main parser)."""
    inv = sub.add_parser(
        "invert",
        help="reconstruct a face from a dlib identity embedding (DiffUMI, DCGAN prior)",
        description=(
            "Invert dlib embeddings with the ranked adversary of seed 002: a bank of DCGAN "
            "codes passing D'Agostino's K² test and MTCNN detection (Step a), the Top-N codes "
            "closest to each target (Step b), and APGD through the torch port of dlib "
            "(white-box) or GreedyPixel querying dlib itself (black-box) (Step c). Targets come "
            "from EMBEDDINGS (dlib 128-d: a .npy of shape (128,) or (n, 128), or a file that "
            "idaudit embed writes or idaudit audit reads (.npz, .csv, .parquet), one row "
            "chosen with --identity and --index) or from --image (largest MTCNN face of a "
            "photo). Writes results.nc (one row per target: "
            "similarities, rank, iterations, queries, each with its formal status). "
            "Reconstructions are face images: written (owner-only) only with --save-images. "
            "Nothing is downloaded."
        ),
    )
    src = inv.add_mutually_exclusive_group(required=True)
    src.add_argument(
        "embeddings",
        nargs="?",
        metavar="EMBEDDINGS",
        help="target embeddings: .npy (every row is a target) or .npz/.csv/.parquet (one row)",
    )
    src.add_argument("--image", metavar="PHOTO", help="a photo whose largest face is the target")
    inv.add_argument(
        "--identity",
        help="with a labelled EMBEDDINGS file: the identity to invert (default: the first)",
    )
    inv.add_argument(
        "--index",
        type=int,
        default=0,
        help="with a labelled EMBEDDINGS file: which of the identity's rows (default: 0)",
    )
    inv.add_argument("--out", required=True, metavar="DIR", help="output folder (created 0700)")
    inv.add_argument(
        "--attack",
        choices=("apgd", "greedypixel"),
        default="apgd",
        help="white-box APGD through the torch port of dlib (default), or black-box "
        "GreedyPixel querying dlib itself within --query-budget",
    )
    inv.add_argument(
        "--norm",
        choices=("l2", "linf"),
        help="APGD's perturbation ball of radius --eps around each code (default: l2); "
        "GreedyPixel steps each pixel by --eps and takes no --norm",
    )
    inv.add_argument(
        "--eps",
        type=float,
        help="radius, or GreedyPixel's per-pixel step (default: the DCGAN's calibrated one)",
    )
    inv.add_argument("--volume", type=int, default=256, help="bank volume V (default: 256)")
    inv.add_argument("--top-n", type=int, default=3, help="N (default: 3)")
    inv.add_argument(
        "--t-max",
        type=int,
        help="most APGD iterations or GreedyPixel queries per code (default: 100 for apgd, or "
        "what --query-budget leaves each code; greedypixel without either gets DiffMI's "
        "budget of 10,000 queries)",
    )
    inv.add_argument("--tau-a", type=float, help="attack threshold in [-1, 1] (default: none)")
    inv.add_argument("--tau-k", type=float, default=0.999, help="K² threshold (default: 0.999)")
    inv.add_argument("--tau-d", type=float, default=0.999, help="detection threshold")
    inv.add_argument(
        "--query-budget",
        type=int,
        help="Q_max, target-model queries in all, the bank's V included (Eq. 18): at least "
        "V + N for greedypixel, V + 2N for apgd",
    )
    inv.add_argument(
        "--query-split",
        choices=("eq18", "carry"),
        default="eq18",
        help="with --query-budget: every code gets floor((Q_max - V)/N) queries (eq18, the "
        "paper's rule, default), or queries a code leaves unused go to the next (carry)",
    )
    inv.add_argument(
        "--test-arcface",
        metavar="PATH",
        help="an independent test model: a local InsightFace ArcFace (w600k_r50.onnx or its "
        "buffalo_l folder) re-measures each reconstruction against the photo (needs --image)",
    )
    inv.add_argument(
        "--warp-samples", type=int, default=32, help="DCGAN images the fixed warp is fit to"
    )
    inv.add_argument("--save-images", action="store_true", help="write reconstructions (PNG)")
    inv.add_argument("--seed", type=int, default=0, help="seed of the bank and attack (>= 0)")
    add_quiet(inv)
    inv.set_defaults(run=run)


def _check(args: argparse.Namespace) -> None:
    at_least(args.volume, "--volume", 1)
    at_least(args.top_n, "--top-n", 1)
    if args.t_max is not None:
        at_least(args.t_max, "--t-max", 1)
    if args.test_arcface is not None and args.image is None:
        raise InvalidInputError(
            "`--test-arcface` re-measures the reconstruction against the target photo: it "
            "needs --image (an embedding file holds no image for another model to see)."
        )
    at_least(args.seed, "--seed", 0)
    at_least(args.index, "--index", 0)
    at_least(args.warp_samples, "--warp-samples", 1)
    if args.top_n > args.volume:
        raise InvalidInputError(f"`--top-n` must be <= --volume {args.volume}; got {args.top_n}.")
    if args.tau_a is not None:
        inside(args.tau_a, "--tau-a", -1.0, 1.0, closed="both")
    inside(args.tau_k, "--tau-k", 0.0, 1.0, closed="both")
    inside(args.tau_d, "--tau-d", 0.0, 1.0, closed="both")
    if args.eps is not None:
        inside(args.eps, "--eps", 0.0, float("inf"))
    if args.query_budget is not None:
        per_code = 2 if args.attack == "apgd" else 1  # APGD: the start and one update
        at_least(args.query_budget, "--query-budget", args.volume + per_code * args.top_n)
    _check_budget(args)


def _check_budget(args: argparse.Namespace) -> None:
    """Refuse, before any model loads, what the adversary would refuse after the bank."""
    default_budget = args.attack == "greedypixel" and args.query_budget is None
    default_budget = default_budget and args.t_max is None  # DiffMI's 10,000 queries
    if args.query_split == "carry" and args.query_budget is None and not default_budget:
        raise InvalidInputError(
            "`--query-split carry` shares a budget between the codes: give --query-budget "
            "(greedypixel without --t-max has DiffMI's 10,000 queries)."
        )
    if default_budget:
        # only GreedyPixel's default budget needs the inversion package (and torch with it)
        from idaudit.inversion import BLACK_BOX_BUDGET
    if default_budget and args.volume + args.top_n > BLACK_BOX_BUDGET:
        raise InvalidInputError(
            f"GreedyPixel's default budget, {BLACK_BOX_BUDGET} queries, does not cover "
            f"--volume {args.volume} plus one query per code ({args.top_n}): give "
            "--query-budget or --t-max."
        )
    if args.attack == "greedypixel" and args.norm is not None:
        raise InvalidInputError(
            "`--norm` sets APGD's ball; GreedyPixel steps each pixel by --eps (an L-inf "
            f"attack): drop --norm {args.norm}."
        )


def _photo_target(path: str, detector: Any, encoders: list[Any]) -> list[np.ndarray]:
    """Encode the largest face of a photo with each encoder: one (1, dim) array each."""
    import numpy as np

    from idaudit.faces import load_image

    photo = load_image(path)
    faces = detector.detect(photo)
    if not faces:
        raise InvalidInputError(f"`--image` {path!r}: no face found.")
    face = max(faces, key=lambda f: f.area)
    from idaudit.faces import DlibEncoder

    # dlib's descriptor is kept raw: its match threshold (0.6) is a distance between raw ones
    return [
        np.asarray(
            enc.encode(enc.align(photo, face)[None], normalize=False)
            if isinstance(enc, DlibEncoder)
            else enc.encode(enc.align(photo, face)[None]),
            dtype=np.float32,
        )
        for enc in encoders
    ]


def _dlib_distances(
    dlib: Any, gen: Any, targets: np.ndarray, images: np.ndarray
) -> tuple[np.ndarray, bool]:
    """Return dlib's raw-descriptor distance of each image to its target, and if it applies.

    dlib's 0.6 is a distance between *raw* descriptors (norms about 1.3-1.6 on photos); a
    target stored L2-normalised (norm 1) has lost the scale the threshold is set on.
    """
    import numpy as np

    raw = np.asarray(dlib.encode(gen.generator.crops(images, dlib), normalize=False), np.float64)
    tgt = np.asarray(targets, dtype=np.float64)
    applies = not bool(np.any(np.abs(np.linalg.norm(tgt, axis=1) - 1.0) < 0.02))
    return np.linalg.norm(raw - tgt, axis=1), applies


def _test_similarity(test: Any, gen: Any, target: np.ndarray, images: list[np.ndarray]) -> Any:
    """Measure each reconstruction against the photo in the independent test model."""
    import numpy as np

    from idaudit._results import variable

    rec = np.asarray(test.encode(gen.generator.crops(np.stack(images), test)), dtype=np.float64)
    rec /= np.linalg.norm(rec, axis=1, keepdims=True)
    tgt = np.asarray(target, dtype=np.float64).ravel()
    cos = rec @ (tgt / np.linalg.norm(tgt))
    return variable(
        "target",
        cos,
        long_name=f"cosine of reconstruction to the photo in the test model ({test.name})",
        status="sample_estimate",
    )


def _file_targets(args: argparse.Namespace) -> tuple[np.ndarray, dict[str, Any]]:
    """Read the targets of EMBEDDINGS, shape (n, 128), and the attrs saying which rows they are.

    A ``.npy`` is an unlabelled array whose every row is a target. Any other file is read as
    :meth:`idaudit.EmbeddingSet.read` reads it (without normalising: the adversary compares
    directions, and the file's own vector is kept), and one row is chosen by ``--identity``
    (default: the first identity in sorted order) and ``--index``.
    """
    import numpy as np

    path = Path(args.embeddings)
    if not path.is_file():
        raise InvalidInputError(f"`EMBEDDINGS` must be an existing file; got {str(path)!r}.")
    if path.suffix.lower() == ".npy":
        if args.identity is not None or args.index != 0:
            raise InvalidInputError(
                "`--identity` and `--index` select a row of a labelled file (.npz, .csv, "
                ".parquet); a .npy has no labels, and every row of it is a target."
            )
        arr = _read_npy(path)
        chosen: dict[str, Any] = {}
    else:
        from idaudit.data import EmbeddingSet

        es = EmbeddingSet.read(path, normalize=False)
        labels = {str(label): label for label in es.identities}
        name = str(es.identities[0]) if args.identity is None else args.identity
        if name not in labels:
            shown = ", ".join(sorted(labels)[:5]) + (", ..." if len(labels) > 5 else "")
            raise InvalidInputError(
                f"`--identity` must be an identity of {path.name} ({shown}); got {name!r}."
            )
        rows = es.get(labels[name])
        if args.index >= len(rows):
            raise InvalidInputError(
                f"`--index` must be below {len(rows)}, the successful rows of identity {name!r}; "
                f"got {args.index}."
            )
        arr = rows[args.index]
        chosen = {"target_identity": name, "target_index": int(args.index)}
    if arr.ndim == 1:
        arr = arr[None]
    if arr.ndim != 2 or arr.shape[1] != 128:
        raise InvalidInputError(
            f"`EMBEDDINGS` must hold dlib embeddings of shape (128,) or (n, 128); got {arr.shape}."
        )
    if arr.shape[0] == 0 or not np.isfinite(arr).all() or (np.abs(arr).sum(axis=1) == 0).any():
        raise InvalidInputError(
            "`EMBEDDINGS` must hold at least one target, each finite and non-zero."
        )
    return np.asarray(arr, dtype=np.float32), chosen


def _read_npy(path: Path) -> np.ndarray:
    """Read a .npy array without unpickling; say what a file that is not one is not."""
    import numpy as np

    with open(path, "rb") as fh:
        head = fh.read(6)
    if head != b"\x93NUMPY":
        # numpy would try the bytes as a pickle and suggest loading them "unsafely": never
        raise InvalidInputError(
            f"`EMBEDDINGS` {str(path)!r} is not a .npy array (numpy.save's format): it does "
            "not start with the .npy header."
        )
    try:
        arr: np.ndarray = np.load(path, allow_pickle=False)
    except ValueError as exc:
        if "pickle" in str(exc):  # an object array
            raise InvalidInputError(
                f"`EMBEDDINGS` {str(path)!r} stores Python objects, which idaudit never "
                "unpickles; save the embeddings as a float array."
            ) from exc
        raise InvalidInputError(
            f"`EMBEDDINGS` {str(path)!r} is a damaged .npy array ({exc}); write it again."
        ) from exc
    return arr


def run(args: argparse.Namespace) -> int:
    """Run ``idaudit invert``."""
    _check(args)
    # a labelled file is read (and its row chosen) before the output folder is made
    targets, chosen = (None, {}) if args.embeddings is None else _file_targets(args)
    out = out_dir(args.out)
    import numpy as np

    from idaudit._results import atomic_path, write_netcdf
    from idaudit.faces import FaceModelOptions, TorchDlibEncoder, build_face_models
    from idaudit.inversion import (
        DCGANGenerator,
        FrameWarp,
        LatentBank,
        RankedAdversary,
        results_to_xarray,
    )

    models = build_face_models(FaceModelOptions())  # MTCNN and dlib's ResNet
    detector, dlib = models.detector, models.encoders[0]
    test = None
    if args.test_arcface is not None:
        from idaudit.faces import ArcFaceEncoder

        test = ArcFaceEncoder(args.test_arcface)
    if targets is None:
        found = _photo_target(args.image, detector, [dlib] + ([test] if test else []))
        targets, test_target = found[0], found[-1]
    elif chosen:
        say(f"target: identity {chosen['target_identity']!r}, row {chosen['target_index']}")
    gen = DCGANGenerator()
    encoder = TorchDlibEncoder() if args.attack == "apgd" else dlib
    bank = LatentBank.build(
        gen, args.volume, detector=detector, tau_k=args.tau_k, tau_d=args.tau_d, rng=args.seed
    )
    warp = FrameWarp.for_dcgan(
        gen, dlib, n=args.warp_samples, rng=args.seed
    )  # dlib's own alignment, either way
    adv = RankedAdversary(
        gen,
        encoder,
        bank=bank,
        top_n=args.top_n,
        t_max=args.t_max,
        tau_a=args.tau_a,
        attack=args.attack,
        norm=args.norm or "l2",
        eps=args.eps,
        query_budget=args.query_budget,
        query_split=args.query_split,
        warp=warp,
        rng=args.seed,
        progress=not args.quiet,
    )
    results = adv.invert_many(targets)
    used = adv.settings_
    ds = results_to_xarray(
        results,
        attack=used["attack"],
        norm=used["norm"],
        eps=used["eps"],
        volume=bank.volume,
        top_n=used["top_n"],
        t_max=used["t_max"],
        query_budget=used["query_budget"] if used["query_budget"] is not None else "none",
        sparsity=used["sparsity"] if used["sparsity"] is not None else "all",
        query_split=used["query_split"],
        seed=args.seed,
        n_drawn=bank.n_drawn,
        n_rejected_k=bank.n_rejected_k,
        n_rejected_d=bank.n_rejected_d,
        **chosen,
    )
    if test is None:
        ds.attrs["test_model"] = "none: similarities are the target model's own"
    else:
        images = [r.image for r in results]
        ds["test_similarity"] = _test_similarity(test, gen, test_target, images)
        ds.attrs["test_model"] = f"{test.name} (independent of the target model, dlib)"
    from idaudit._results import variable
    from idaudit.faces import DLIB_THRESHOLD

    start_codes = adv.top_n_codes(targets)[0][:, 0]
    before, applies = _dlib_distances(dlib, gen, targets, bank.images[start_codes])
    after, _ = _dlib_distances(dlib, gen, targets, np.stack([r.image for r in results]))
    for name, values, what in (
        ("initial_distance", before, "the Top-1 bank code's image"),
        ("distance", after, "the reconstruction"),
    ):
        ds[name] = variable(
            "target",
            values,
            long_name=f"dlib raw-descriptor distance of {what} to the target (match below "
            f"{DLIB_THRESHOLD}; C++ dlib, its own alignment)",
            status="sample_estimate",
        )
    ds.attrs["match_threshold"] = (
        f"dlib distance < {DLIB_THRESHOLD} on raw descriptors"
        if applies
        else "none: the target is L2-normalised, dlib's raw-distance threshold does not apply"
    )
    write_netcdf(ds, out / "results.nc")
    say(
        f"bank: {bank.volume} codes from {bank.n_drawn} draws ({bank.n_rejected_k} failed K², "
        f"{bank.n_rejected_d} failed detection)"
    )
    for i, r in enumerate(results):
        say(
            f"target {i}: similarity {r.initial_similarity:.4f} -> {r.similarity:.4f} "
            f"(rank {r.rank}, {r.iterations} iterations, {r.queries} queries, {r.seconds:.1f} s)"
        )
        if applies:
            say(
                f"  dlib distance {before[i]:.3f} -> {after[i]:.3f} (a match is below "
                f"{DLIB_THRESHOLD}, dlib's threshold): "
                + ("match" if after[i] < DLIB_THRESHOLD else "no match")
                + (
                    "; the starting bank code already matched, before any attack"
                    if before[i] < DLIB_THRESHOLD
                    else ""
                )
            )
    if not applies:
        say(
            f"the target is L2-normalised: dlib's match threshold ({DLIB_THRESHOLD}, a distance "
            "between raw descriptors) does not apply, and no match is claimed"
        )
    if test is None:
        say("similarities are the target model's own (no independent test model given)")
    else:
        say(f"test model {test.name}: " + ", ".join(f"{c:.4f}" for c in ds.test_similarity.values))
    if args.save_images:
        from PIL import Image

        for i, r in enumerate(results):
            with atomic_path(out / f"reconstruction_{i}.png") as tmp:
                Image.fromarray(r.image).save(tmp, "PNG")
    say(f"wrote {out / 'results.nc'}" + (" and the reconstructions" if args.save_images else ""))
    return 0
