"""Memorisation check, offline: a fresh generator against a memorising one (seed 003).

The shipped DCGAN face generator stands in for both the real data and the generators (no
face dataset can be downloaded here; its samples are the project's offline stand-in for
real faces, and the numbers below say nothing about any real dataset):

* ``train``: ``n`` DCGAN faces, the images a generator was "trained" on;
* ``heldout``: ``n`` other DCGAN faces (fresh latents), disjoint from ``train``;
* a **fresh** generator: ``n`` new DCGAN samples (fresh latents again);
* a **memorising** generator: near-copies of the training images (their latents plus a
  little noise, the outputs a generator that memorised its training set would give).

``idaudit privacy`` (dlib identity axis, SSIM appearance axis, MTCNN detection) runs on both,
sharing one cache, so the training and held-out embeddings are computed once. Expected: the
memorising generator is flagged far above ``p`` with a privacy-loss interval above 0; the fresh
one is flagged at about ``p`` (its samples are exchangeable with the held-out faces).

Run: ``python examples/memorization_demo.py [--n 40] [--out DIR]``.
"""

from __future__ import annotations

import argparse
import tempfile
import warnings
from pathlib import Path

import numpy as np
from PIL import Image

from idaudit.faces import ShippedFaceGenerator
from idaudit.pipeline import PrivacyReport, PrivacyStatistics, run_privacy_check


def _save(folder: Path, images: np.ndarray) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for i, image in enumerate(images):
        Image.fromarray(image).save(folder / f"{i:04d}.png")


def build_folders(root: Path, n: int, seed: int = 0) -> dict[str, Path]:
    """Write train, heldout and the two synthetic roots (one cohort, "dcgan") under root."""
    gen = ShippedFaceGenerator()
    rng = np.random.default_rng(seed)
    z_train = gen.sample_latents(n, rng=rng)
    z_heldout = gen.sample_latents(n, rng=rng)
    z_fresh = gen.sample_latents(n, rng=rng)
    z_copies = z_train + 0.05 * rng.standard_normal(z_train.shape).astype(np.float32)
    roots = {name: root / name for name in ("train", "heldout", "fresh", "memorising")}
    for name, z in zip(roots, (z_train, z_heldout, z_fresh, z_copies), strict=True):
        _save(roots[name] / "dcgan", gen.generate(z))
    return roots


def run(n: int = 40, out: Path | None = None, seed: int = 0) -> dict[str, PrivacyReport]:
    """Build the folders and run the privacy check on both generators."""
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        base = out if out is not None else root / "results"
        roots = build_folders(root / "images", n, seed)
        reports = {}
        for name in ("fresh", "memorising"):
            with warnings.catch_warnings():
                warnings.simplefilter("default")
                reports[name] = run_privacy_check(
                    roots["train"],
                    roots["heldout"],
                    roots[name],
                    base / name,
                    statistics=PrivacyStatistics(
                        percentiles=[5, 10, 20], n_bootstrap=300, n_permutations=1999, rng=seed
                    ),
                    cache=base / "cache",
                    progress=False,
                )
        return reports


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=40, help="images per set (default: 40)")
    parser.add_argument("--out", type=Path, help="keep the outputs in this folder")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    reports = run(args.n, args.out, args.seed)
    for name, report in reports.items():
        flag = report.flagging
        print(f"== {name} generator ==")
        print(
            flag[
                [
                    "metric",
                    "percentile",
                    "synthetic_pct",
                    "ci_lower",
                    "ci_upper",
                    "heldout_pct",
                    "p_value",
                ]
            ].to_string(index=False)
        )
        print(
            report.nnaa[
                [
                    "metric",
                    "aa_train_synth",
                    "aa_heldout_synth",
                    "privacy_loss",
                    "ci_lower",
                    "ci_upper",
                ]
            ].to_string(index=False)
        )
        print()
    if args.out is not None:
        print(f"figures and reports in {args.out}/fresh and {args.out}/memorising")


if __name__ == "__main__":
    main()
