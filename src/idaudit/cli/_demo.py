"""``idaudit demo``: anonymisers audited on synthetic faces, beside a calibrated-noise reference."""

from __future__ import annotations

import argparse
from typing import Any

from idaudit.cli._common import add_quiet, out_dir, say

__all__ = ["add_parser"]


def add_parser(sub: Any) -> None:
    """Register ``idaudit demo`` on ``sub`` (the sub-command action of the main parser)."""
    demo = sub.add_parser(
        "demo",
        help="audit blur, pixelation and a face swap on synthetic faces (offline models)",
        description=(
            "Part one: synthetic identities from the DCGAN face generator that ships with pip "
            "(made-up people), encoded by dlib after MTCNN detection; the four audits, "
            "reserved-test certificates and re-identification rates under no anonymisation, "
            "Gaussian blur at two strengths, pixelation and a latent face swap at three donor "
            "mixes. Part two: the calibrated-noise benchmark, where the true epsilon is "
            "known. Part three: a face anonymiser with a proved guarantee (EmbeddingNoiseSwap) "
            "audited from pixels by another encoder. Writes report.md with tables and figures "
            "(epsilon_vs_strength.png, contact_sheet.png, noise_sweep.png, epsilon_curve.png, "
            "private_swap.png), results as .nc and "
            ".csv; embeddings are cached in OUT/.cache, so a re-run encodes nothing. "
            "Threads: one per CPU of this process's affinity not already busy (load average)."
        ),
    )
    demo.add_argument("--out", default="idaudit-demo", help="output folder (default: %(default)s)")
    demo.add_argument("--quick", action="store_true", help=argparse.SUPPRESS)
    add_quiet(demo)
    demo.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    out = out_dir(args.out)  # an unusable --out fails before the library loads
    from idaudit.demo import QUICK, DemoConfig, run_demo

    config = QUICK if args.quick else DemoConfig()
    result = run_demo(out, config=config, progress=not args.quiet)
    say(f"idaudit demo finished in {result.seconds:.0f} s; wrote:")
    paths = [result.report, result.results, result.figure]
    if result.curve_figure is not None:
        paths.append(result.curve_figure)
    if result.faces is not None:
        paths += list(result.faces.files.values())
    for path in paths:
        say(f"  {path}")
    return 0
