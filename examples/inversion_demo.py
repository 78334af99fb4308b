"""Invert dlib face embeddings on the CPU, offline: real photos and synthetic identities.

Prior: the shipped 64×64 DCGAN. Targets:

* real faces from photos that ship inside pip packages (skimage's astronaut, Eileen Collins;
  the six people of insightface's ``t1.jpg``; Tom Hanks), detected with MTCNN and aligned the
  way dlib aligns;
* held-out synthetic identities (``synthetic_identities`` with ``min_separation``; their seed
  is not the bank's), whose other images give Type II accuracy.

White-box: APGD through the torch port of dlib's recogniser (``TorchDlibEncoder``). Black-box:
GreedyPixel querying dlib itself (``DlibEncoder``) under a query budget.

What the numbers can and cannot show. With a 64×64 DCGAN prior the reconstructions are faces
with some traits of the target, not recognisable portraits. dlib sees any two DCGAN faces as
near neighbours (cosine ≈ 0.9–0.95 between unrelated samples), so Type II on synthetic
identities measures "lands inside the identity's neighbourhood of a crowded space", not
recognisability by a person. The identity measures say whether a reconstruction points to
*its* target rather than to any face: the own-vs-other margin (similarity to its own target
minus the best other target) and, for the synthetic identities, rank-1 identification among
the held-out images of all identities.

``τ_F`` is the EER threshold (ROC interpolated at the EER) on a separate draw of synthetic
identities, printed with its genuine/impostor counts and an exact interval; Type I / II are
refused when fewer than ``MIN_GENUINE_PAIRS`` genuine pairs stand behind it. ``τ_A`` (Eq. 14)
is the largest similarity between a real photo and another real photo or mirror.

"after (dlib)" re-embeds the reconstruction with the C++ dlib model through its own per-image
alignment. That is the same network as the target model (the torch port's parity with dlib
is tested to 1e-4), so it checks the port and the warp; it is not an independent recogniser.
An independent one is used when available: ``--test-arcface PATH`` (a local InsightFace
``w600k_r50.onnx`` or its ``buffalo_l`` folder; default ``$IDAUDIT_WEIGHTS/buffalo_l`` when
it exists) repeats the identity measures and Type I / II in ArcFace, with its own τ_F.

Reconstructions are biometric data: they are written (owner-only) only with ``--save DIR``.

Run::

    python examples/inversion_demo.py [--identities 4] [--bank 64] [--t-max 30] [--save DIR]
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

from idaudit._results import write_atomic
from idaudit.exceptions import MissingWeightsError
from idaudit.faces import (
    ArcFaceEncoder,
    DlibEncoder,
    MTCNNDetector,
    TorchDlibEncoder,
    load_image,
    synthetic_identities,
)
from idaudit.inversion import (
    DCGANGenerator,
    FrameWarp,
    LatentBank,
    RankedAdversary,
    attack_threshold,
    eer_threshold,
    fmr_thresholds,
    identity_scores,
    proportion_interval,
    reference_bounds,
    type_accuracy,
)


def real_photos(max_faces: int) -> list[np.ndarray]:
    """Photos shipped in packages (skimage always; insightface's when installed)."""
    import skimage.data

    photos = [np.asarray(skimage.data.astronaut())]
    spec = importlib.util.find_spec("insightface")
    if spec is not None and spec.submodule_search_locations:
        folder = Path(next(iter(spec.submodule_search_locations))) / "data" / "images"
        for name in ("Tom_Hanks_54745.png", "t1.jpg"):
            if (folder / name).is_file():
                photos.append(load_image(folder / name))
    return photos[:max_faces]


def real_crops(detector: Any, encoder: Any, max_faces: int) -> np.ndarray:
    crops = []
    for photo in real_photos(max_faces):
        for face in detector.detect(photo):
            if face.score >= 0.99 and len(crops) < max_faces:
                crops.append(encoder.align(photo, face))
    return np.stack(crops)


def dlib_after(gen: DCGANGenerator, dlib: DlibEncoder, images: np.ndarray) -> np.ndarray:
    """C++ dlib embeddings of reconstructions through dlib's own per-image alignment."""
    return np.asarray(dlib.encode(gen.generator.crops(images, dlib)), dtype=np.float64)


def unit(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, dtype=np.float64)
    return x / np.linalg.norm(x, axis=-1, keepdims=True)


def arcface_or_none(path: Path | None) -> ArcFaceEncoder | None:
    """The independent test model: ArcFace from ``path`` or the default weights folder."""
    try:
        return ArcFaceEncoder(path)
    except MissingWeightsError:
        if path is not None:
            raise
        return None


def independent_check(
    arc: ArcFaceEncoder, det: Any, gen: DCGANGenerator, recs: np.ndarray, args: Any, sets: Any
) -> dict[str, Any]:
    """Identity measures and Type I / II in ArcFace, a model sharing no weights with dlib."""
    ids, ref, first = sets
    targets = unit(
        arc.encode(
            np.concatenate(
                [real_crops(det, arc, args.real), gen.generator.crops(ids.images[first], arc)]
            )
        )
    )
    rec = unit(arc.encode(gen.generator.crops(recs, arc)))
    n_real = len(targets) - args.identities
    syn = slice(n_real, None)
    held_images = [
        ids.images[i * args.per_identity + 1 : (i + 1) * args.per_identity]
        for i in range(args.identities)
    ]
    others = [unit(arc.encode(gen.generator.crops(im, arc))) for im in held_images]
    e = unit(arc.encode(gen.generator.crops(ref.images, arc)))
    same = ref.labels[:, None] == ref.labels[None, :]
    iu = np.triu_indices(len(e), 1)
    sims = (e @ e.T)[iu]
    tau_f = eer_threshold(sims[same[iu]], sims[~same[iu]])
    empty = [np.zeros((0, rec.shape[1]))] * len(rec)
    every = identity_scores(rec, targets, empty)
    held = identity_scores(rec[syn], targets[syn], others)
    acc = type_accuracy(rec[syn], targets[syn], others, tau_f)
    print(
        f"\nindependent test model {arc.name} (no weights shared with dlib): mean own-vs-other "
        f"margin {float(every.mean_margin):+.4f}; synthetic identities: rank-1 "
        f"{float(held.rank1_rate):.2f} (chance ≈ {1 / args.identities:.2f}), Type I "
        f"{acc.type_i:.2f}, Type II {acc.type_ii:.2f} at τ_F = {tau_f.threshold:.3f} "
        f"({tau_f.n_genuine} genuine pairs) [sample estimates]"
    )
    return {"identity": every, "identity_held_out": held, "accuracy": acc, "tau_f": tau_f}


def operating_points(genuine: np.ndarray, impostor: np.ndarray) -> Any:
    """Thresholds at FMR 1e-3 and 1e-4, printed with what the impostor count resolves."""
    import warnings

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        points = fmr_thresholds(genuine, impostor)
    for f, tau, n_fm, need, ok in zip(
        points.fmr_target,
        points.threshold,
        points.n_false_match,
        points.n_needed,
        points.resolved,
        strict=True,
    ):
        if not ok:
            print(
                f"FMR {f:g}: not resolved by {points.n_impostor} impostor pairs "
                f"(at least {int(np.ceil(1 / f))}; {need} for 95%)"
            )
        else:
            print(
                f"FMR {f:g}: τ = {tau:.4f}, {n_fm} false matches of {points.n_impostor}, FNMR "
                f"{points.fnmr[list(points.fmr_target).index(f)]:.3f}"
                + ("" if points.n_impostor >= need else f" (fewer than the {need} pairs needed)")
            )
    del caught  # each warning's content is printed above
    return points


def save_pairs(folder: Path, names: list[str], targets: list[np.ndarray], recs: np.ndarray) -> None:
    from PIL import Image

    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    for name, tgt, rec in zip(names, targets, recs, strict=True):
        size = 150
        left = np.asarray(Image.fromarray(tgt).resize((size, size)))
        right = np.asarray(Image.fromarray(rec).resize((size, size), Image.Resampling.BICUBIC))
        pair = Image.fromarray(np.concatenate([left, right], axis=1))
        write_atomic(folder / f"{name}.png", lambda tmp, p=pair: p.save(tmp, format="PNG"))


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--identities", type=int, default=4, help="synthetic target identities")
    parser.add_argument("--per-identity", type=int, default=4, help="images per identity")
    parser.add_argument("--real", type=int, default=4, help="real faces to invert")
    parser.add_argument("--bank", type=int, default=64, help="bank volume V")
    parser.add_argument("--top-n", type=int, default=3)
    parser.add_argument("--t-max", type=int, default=30)
    parser.add_argument("--black-box", type=int, default=2, help="targets for the black-box run")
    parser.add_argument("--bb-queries", type=int, default=60, help="black-box queries per code")
    parser.add_argument("--tau-k", type=float, default=0.999)
    parser.add_argument("--warp-samples", type=int, default=32, help="images the warp is fit to")
    parser.add_argument("--ref-identities", type=int, default=6, help="identities behind τ_F")
    parser.add_argument("--ref-per-identity", type=int, default=6, help="images per identity")
    parser.add_argument("--save", type=Path, default=None, help="write target|reconstruction PNGs")
    parser.add_argument(
        "--test-arcface",
        type=Path,
        default=None,
        help="independent test model: w600k_r50.onnx or its buffalo_l folder "
        "(default: $IDAUDIT_WEIGHTS/buffalo_l when present)",
    )
    args = parser.parse_args(argv)
    torch.set_num_threads(max(1, len(os.sched_getaffinity(0))))

    t0 = time.perf_counter()
    gen, det = DCGANGenerator(), MTCNNDetector()
    white, black = TorchDlibEncoder(), DlibEncoder()
    bank = LatentBank.build(gen, args.bank, detector=det, tau_k=args.tau_k, rng=0)
    warp = FrameWarp.for_dcgan(gen, white, n=args.warp_samples, rng=1)
    print(
        f"bank: V={bank.volume} kept of {bank.n_drawn} draws ({bank.n_rejected_k} failed K², "
        f"{bank.n_rejected_d} failed detection); warp fit RMSE {warp.fit_rmse:.3f}; "
        f"{time.perf_counter() - t0:.0f} s"
    )

    # targets
    crops = real_crops(det, black, args.real)
    ids = synthetic_identities(
        args.identities,
        args.per_identity,
        rng=2024,
        generator=gen.generator,
        encoder=black,
        min_separation=0.5,
    )
    first = np.arange(args.identities) * args.per_identity
    syn_crops = gen.generator.crops(ids.images[first], black)
    target_crops = np.concatenate([crops, syn_crops])
    names = [f"real{i}" for i in range(len(crops))] + [
        f"synthetic{i}" for i in range(args.identities)
    ]
    z_white = white.encode(target_crops)
    z_dlib = unit(black.encode(target_crops))

    # thresholds: τ_F from a separate draw of identities, τ_A (Eq. 14) from real photos + mirrors
    ref = synthetic_identities(
        args.ref_identities,
        args.ref_per_identity,
        rng=77,
        generator=gen.generator,
        encoder=black,
        min_separation=0.5,
    )
    e = unit(ref.embeddings)
    same = ref.labels[:, None] == ref.labels[None, :]
    iu = np.triu_indices(len(e), 1)
    sims = (e @ e.T)[iu]
    tau_f = eer_threshold(sims[same[iu]], sims[~same[iu]])
    tau_a = attack_threshold(white, np.concatenate([crops, crops[:, :, ::-1]]))
    print(
        f"τ_F = {tau_f.threshold:.4f} ({tau_f.method}; EER {tau_f.eer:.3f}, exact 95% interval "
        f"[{tau_f.eer_low:.3f}, {tau_f.eer_high:.3f}], on {tau_f.n_genuine} genuine / "
        f"{tau_f.n_impostor} impostor synthetic pairs); τ_A = {tau_a:.4f} (Eq. 14)"
    )
    points = operating_points(sims[same[iu]], sims[~same[iu]])

    out: dict[str, Any] = {"tau_f": tau_f.threshold, "tau_a": tau_a, "fmr_points": points}
    t1 = time.perf_counter()
    adv = RankedAdversary(
        gen,
        white,
        bank=bank,
        top_n=args.top_n,
        t_max=args.t_max,
        tau_a=tau_a,
        warp=warp,
        attack="apgd",
        rng=0,
    )
    res = adv.invert_many(z_white)
    wb_seconds = time.perf_counter() - t1
    recs = np.stack([r.image for r in res])
    after = dlib_after(gen, black, recs)
    cos_after = (unit(after) * z_dlib).sum(axis=1)
    print(
        f"\nwhite-box APGD (L2, eps={gen.default_radius['l2']}, N={args.top_n}, "
        f"t_max={args.t_max}): {wb_seconds:.0f} s for {len(res)} targets"
    )
    print(
        f"{'target':12s} {'before':>7s} {'after':>7s} {'after(dlib)':>11s} {'rank':>4s} "
        f"{'iters':>5s} {'queries':>7s}"
    )
    for name, r, c in zip(names, res, cos_after, strict=True):
        print(
            f"{name:12s} {r.initial_similarity:7.4f} {r.similarity:7.4f} {c:11.4f} {r.rank:4d} "
            f"{r.iterations:5d} {r.queries:7d}"
        )
    out["white"] = res
    print(
        "test encoder: C++ dlib = same weights as the target model (its torch port); "
        "not an independent check"
    )

    # Type I / II on the synthetic identities, with Tab. IV's bounds, in dlib
    syn = slice(len(crops), None)
    others = [
        unit(ids.embeddings[i * args.per_identity + 1 : (i + 1) * args.per_identity])
        for i in range(args.identities)
    ]
    # identity, not just similarity: own-vs-other margins, rank-1 among held-out images
    every = identity_scores(
        after, z_dlib, [np.zeros((0, after.shape[1]))] * len(names), names=names
    )
    held = identity_scores(after[syn], z_dlib[syn], others, names=names[syn])
    print(
        f"\nidentity (dlib, same weights as the target): mean own-vs-other margin "
        f"{float(every.mean_margin):+.4f} over {len(names)} targets (> 0: nearer its own target)"
    )
    for name, sim, m in zip(names, every.similarity.values, every.margin.values, strict=True):
        print(
            f"  {name:12s} own {sim[names.index(name)]:.4f}  best other "
            f"{sim[names.index(name)] - m:.4f}  margin {m:+.4f}"
        )
    print(
        f"  synthetic identities vs held-out images: rank-1 {float(held.rank1_rate):.2f} "
        f"(chance ≈ {1 / args.identities:.2f}), mean margin {float(held.mean_gallery_margin):+.4f}"
    )
    out["identity"], out["identity_held_out"] = every, held
    acc = type_accuracy(after[syn], z_dlib[syn], others, tau_f)
    random_emb = unit(black.encode(gen.generator.crops(bank.images[: args.identities], black)))
    bounds = reference_bounds(z_dlib[syn], others, random_emb, tau_f)
    print(
        f"\nsynthetic identities (dlib, τ_F={tau_f.threshold:.3f}): Type I {acc.type_i:.2f} "
        f"[{acc.type_i_low:.2f}, {acc.type_i_high:.2f}], Type II {acc.type_ii:.2f} "
        f"[{acc.type_ii_low:.2f}, {acc.type_ii_high:.2f}] over {acc.n_targets} targets "
        "[sample estimates; 95% intervals, diagnostic: Clopper-Pearson on Type I, "
        "betting over targets on Type II]"
    )
    for f, tau in zip(points.fmr_target, points.threshold, strict=True):
        if np.isfinite(tau):
            at = type_accuracy(after[syn], z_dlib[syn], others, min(float(tau), 1.0))
            print(
                f"  at FMR {f:g} (τ = {tau:.3f}): Type I {at.type_i:.2f} "
                f"[{at.type_i_low:.2f}, {at.type_i_high:.2f}], Type II {at.type_ii:.2f} "
                f"[{at.type_ii_low:.2f}, {at.type_ii_high:.2f}]"
            )
    print(
        f"  bounds: original Type II {float(bounds.type_ii.sel(row='original')):.2f}, "
        f"random Type II {float(bounds.type_ii.sel(row='random')):.2f} "
        f"(random similarity {float(bounds.similarity.sel(row='random')):.3f})"
    )
    out["accuracy"], out["bounds"] = acc, bounds
    arc = arcface_or_none(args.test_arcface)
    if arc is None:
        print(
            "\nno independent test model (pass --test-arcface PATH to a local ArcFace): every "
            "measure above uses dlib's weights, the target model's own"
        )
    else:
        out["independent"] = independent_check(arc, det, gen, recs, args, (ids, ref, first))

    # black-box: GreedyPixel against dlib itself, under a query budget
    k = min(args.black_box, len(names))
    budget = bank.volume + args.top_n * args.bb_queries
    t2 = time.perf_counter()
    bb = RankedAdversary(
        gen,
        black,
        bank=bank,
        top_n=args.top_n,
        attack="greedypixel",
        query_budget=budget,
        tau_a=tau_a,
        warp=warp,
        rng=0,
    ).invert_many(z_dlib[:k])
    bb_seconds = time.perf_counter() - t2
    print(f"\nblack-box GreedyPixel (Q_max={budget}, t_max={args.bb_queries}): {bb_seconds:.0f} s")
    for name, r in zip(names[:k], bb, strict=True):
        print(
            f"{name:12s} before {r.initial_similarity:.4f} after {r.similarity:.4f} "
            f"queries {r.queries} (≤ {budget})"
        )
    for label, runs in (("white-box", out["white"]), ("black-box", bb)):
        hits = sum(r.success for r in runs)
        low, high = proportion_interval(hits, len(runs))
        print(
            f"{label} success (similarity ≥ τ_A): {hits} of {len(runs)}, exact 95% interval "
            f"[{low:.2f}, {high:.2f}]"
        )
    out["black"] = bb
    if args.save is not None:
        save_pairs(args.save, names, list(target_crops), recs)
        print(f"\nwrote {len(names)} target|reconstruction pairs to {args.save} (owner-only)")
    print(f"\ntotal {time.perf_counter() - t0:.0f} s (machine shared; times are indicative)")
    return out


if __name__ == "__main__":
    main()
