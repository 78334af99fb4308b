"""EmbeddingNoiseSwap audited from pixels: every route and the certificate against the proof.

    python benchmarks/bench_private_swap.py [--identities 8] [--images 3] [--bank 48]
        [--repeats 40] [--sigmas 0.005,0.01,0.02,0.05,0.1,0.2,0.5] [--figure out.png]
        [--auditors torch,eigenfaces,dlib-cpp]

Synthetic DCGAN identities (``synthetic_identities``) go through the mechanism (MTCNN and dlib's
network in torch find and encode the source face; the decoder picks the nearest face of a public
``LatentBank`` of the shipped DCGAN), then ``private_swap_sweep`` audits the outputs with
each auditor encoder asked for: ``torch``, the mechanism's own encoder; ``eigenfaces``, an
encoder independent of it (``EigenfaceEncoder``: grey pixels on the ArcFace template projected
on 32 principal axes of 256 other public DCGAN faces); ``dlib-cpp``, the dlib C++ runtime (the
same network as the torch port, another implementation: it prints how far the two runtimes'
embeddings of the bank faces are apart). It prints one table per auditor encoder (medians over
pairs at each σ) and the summary: certified pairs at or below their guarantee, rank
correlations with it, and the σ at which each route leaves its endpoint regime.
"""

from __future__ import annotations

import argparse
import itertools
import tempfile
import time
import warnings

import numpy as np
import pandas as pd

from idaudit.benchmark import EigenfaceEncoder, private_swap_sweep
from idaudit.faces import (
    DlibEncoder,
    FacePipeline,
    MTCNNDetector,
    TorchDlibEncoder,
    synthetic_identities,
)
from idaudit.inversion import DCGANGenerator, LatentBank
from idaudit.pipeline import FaceBank


def _table(ds) -> pd.DataFrame:
    rows = []
    for s, sigma in enumerate(ds["sigma"].values):
        row = {"sigma": float(sigma)}
        row["guarantee"] = float(np.median(ds["guarantee_epsilon"].values[s]))
        for r in [str(x) for x in ds["route"].values if str(x) != "certified"]:
            v = ds[f"{r}_epsilon"].values[s]
            row[r] = float(np.nanmedian(v)) if (~np.isnan(v)).any() else np.nan
        c = ds["certified_epsilon"].values[s]
        row["certified"] = float(np.nanmax(c)) if np.isfinite(c).any() else np.nan
        row["ceiling"] = float(np.nanmax(ds["certified_ceiling"].values[s]))
        t = ds["tightness"].values[s]
        row["tightness"] = float(np.nanmax(t)) if np.isfinite(t).any() else np.nan
        cert, guar = ds["certified_epsilon"].values[s], ds["guarantee_epsilon"].values[s]
        done = np.isfinite(cert)
        row["certified ≤ guarantee"] = f"{int((cert[done] <= guar[done]).sum())}/{int(done.sum())}"
        rows.append(row)
    return pd.DataFrame(rows)


def _markdown(frame: pd.DataFrame) -> str:
    """A GitHub table with 3 significant digits (no optional dependency)."""

    def cell(v: object) -> str:
        return f"{v:.3g}" if isinstance(v, float) else str(v)

    head = "| " + " | ".join(frame.columns) + " |"
    rule = "|" + "---|" * len(frame.columns)
    body = ["| " + " | ".join(cell(v) for v in row) + " |" for row in frame.itertuples(index=False)]
    return "\n".join([head, rule, *body])


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--identities", type=int, default=8)
    p.add_argument("--images", type=int, default=3)
    p.add_argument("--bank", type=int, default=48)
    p.add_argument("--repeats", type=int, default=40)
    p.add_argument("--sigmas", default="0.005,0.01,0.02,0.05,0.1,0.2,0.5")
    p.add_argument("--delta", type=float, default=1e-5)
    p.add_argument("--figure", default=None)
    p.add_argument("--auditors", default="torch,eigenfaces,dlib-cpp")
    args = p.parse_args()
    sigmas = [float(x) for x in args.sigmas.split(",")]
    warnings.simplefilter("ignore")  # fewer disjoint pairs than asked is expected here

    t0 = time.perf_counter()
    torch_dlib = TorchDlibEncoder()
    latent = LatentBank.build(DCGANGenerator(), args.bank, tau_k=0.5, tau_d=0.9, rng=0)
    bank = FaceBank.from_latent_bank(latent, torch_dlib)
    ids = synthetic_identities(args.identities, args.images, rng=1)
    images = {int(k): list(ids.images[ids.labels == k]) for k in np.unique(ids.labels)}
    labels = sorted(images)
    pairs = list(itertools.combinations(labels, 2))
    detector = MTCNNDetector()
    mech_pipe = FacePipeline(detector, torch_dlib, progress=False)
    print(
        f"bank of {bank.volume} faces and {len(labels)} identities × {args.images} images "
        f"in {time.perf_counter() - t0:.1f} s; {len(pairs)} pairs, {args.repeats} outputs "
        f"per source image and σ, δ = {args.delta:g}"
    )
    audits = {}
    for which in args.auditors.split(","):
        if which == "torch":
            audits["mechanism's encoder (dlib network in torch)"] = mech_pipe
        elif which == "eigenfaces":
            eig = EigenfaceEncoder.from_generator(256, dim=32, size=64, rng=7)
            audits[f"an independent encoder ({eig.name})"] = FacePipeline(
                detector, eig, progress=False
            )
        elif which == "dlib-cpp":
            cpp = DlibEncoder()
            gap = np.abs(
                FaceBank.from_latent_bank(latent, cpp).embeddings.astype(np.float64)
                - bank.embeddings
            ).max()
            print(f"dlib C++ vs torch port on the {bank.volume} bank faces: max |Δ| = {gap:.1e}")
            audits["dlib C++ runtime"] = FacePipeline(detector, cpp, progress=False)
        else:
            raise SystemExit(f"--auditors: unknown {which!r} (torch, eigenfaces, dlib-cpp)")
    for name, audit_pipe in audits.items():
        t = time.perf_counter()
        with tempfile.TemporaryDirectory() as cache:
            ds = private_swap_sweep(
                images,
                sigmas,
                bank=bank,
                pipeline=mech_pipe,
                audit_pipeline=audit_pipe,
                pairs=pairs,
                repeats=args.repeats,
                delta=args.delta,
                cache=cache,
                rng=0,
                progress=False,
            )
        print(f"\n## auditor: {name} ({time.perf_counter() - t:.1f} s)\n")
        print(_markdown(_table(ds)))
        routes = ds["route"].values.tolist()
        rho = np.round(ds["rank_correlation"].values, 3).tolist()
        print(
            "\nrank correlation with the guarantee over σ (Spearman):",
            dict(zip(routes, rho, strict=True)),
        )
        leaves = ds["leaves_endpoint_sigma"].values.tolist()
        regimes = ds["endpoint_regime"].values.tolist()
        print(
            "σ from which each route leaves its endpoint regime (never: never at one; "
            "stays: at one at the largest σ):",
            {r: v if g == "leaves" else g for r, v, g in zip(routes, leaves, regimes, strict=True)},
        )
        not_run = ds["not_run"].values.tolist()
        print("values not run per route:", dict(zip(routes, not_run, strict=True)))
        lo, mid, hi = np.quantile(ds["pair_sensitivity"].values, [0, 0.5, 1])
        print(f"pair sensitivity Δ_AB: min {lo:.3f}, median {mid:.3f}, max {hi:.3f}")
        if ds.attrs.get("route_failures"):
            print("routes that could not run:", ds.attrs["route_failures"][:400])
        if args.figure and audit_pipe is mech_pipe:
            from idaudit.plotting import plot_private_swap_sweep

            plot_private_swap_sweep(ds).savefig(args.figure, dpi=120)
    print(f"\ntotal {time.perf_counter() - t0:.1f} s")


if __name__ == "__main__":
    main()
