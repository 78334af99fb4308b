"""The ``idaudit`` command.

``idaudit demo [--out DIR]``
    The calibrated-noise benchmark on a built-in synthetic identity set: every audit and the
    certificate against a mechanism whose ε is known. Writes ``report.md``, ``results.nc`` and
    ``noise_sweep.png``.
``idaudit audit EMBEDDINGS [--out DIR]``
    The four audits of seed 000 on a CSV/NPZ/Parquet file of embeddings: ``results.nc`` (per
    pair) and ``summary.md`` (Table 1's row).
``idaudit certify EMBEDDINGS [--out DIR]``
    Reserved-test certificates (seed 000, Section 4.3), optionally with the split-half sanity
    controls of Section 4.4: ``certificates.nc``, ``candidates.nc``, ``certificates.md``
    (and ``controls.nc``).
``idaudit embed IMAGES_DIR --out FILE``
    Face photos in one sub-folder per identity → detect, align, encode (MTCNN + dlib, or
    InsightFace RetinaFace + ArcFace from ``--arcface-dir``) → an embeddings file that
    ``audit`` and ``certify`` read, plus an outcome table saying what happened to each photo.
``idaudit invert (EMBEDDINGS | --image PHOTO) --out DIR``
    Seed 002's ranked adversary with the shipped DCGAN as prior: reconstruct faces from dlib
    embeddings (white-box APGD through the torch port, or black-box GreedyPixel with a query
    budget); ``results.nc`` per target, reconstructions only with ``--save-images``.

Every file is written atomically with owner-only permissions (embeddings and what is derived
from them are biometric data); output folders the command creates, parents included, are
owner-only, and they are created (or checked) before any computation. Flags are checked
before the input is read; every input error is one line naming the flag or argument, with exit
status 2.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

__all__ = ["main"]

#: One module per sub-command, in the order ``idaudit --help`` lists them; each exposes
#: ``add_parser(subparsers)``, which registers the command with ``set_defaults(run=...)``.
_COMMAND_MODULES: tuple[str, ...] = (
    "idaudit.cli._demo",
    "idaudit.cli._audit",
    "idaudit.cli._certify",
    "idaudit.cli._embed",
    "idaudit.cli._invert",
)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``idaudit`` command line.

    Parameters
    ----------
    argv : sequence of str, optional
        Arguments without the program name (default: ``sys.argv[1:]``).

    Returns
    -------
    int
        Exit status: 0 on success, 2 on a usage or input error (the message goes to stderr).
    """
    parser = _parser()
    args = parser.parse_args(argv)
    try:
        status: int = args.run(args)
    except (ValueError, TypeError, OSError, ImportError) as exc:
        # input errors carry a message naming the argument and the rule, and file-system
        # errors (missing input, an --out that cannot be created) their path; no traceback
        parser.exit(2, f"idaudit {args.command}: error: {exc}\n")
    return status


def _parser() -> argparse.ArgumentParser:
    from idaudit import __version__

    parser = argparse.ArgumentParser(
        prog="idaudit",
        description=(
            "Identity-level differential-privacy audits of face pipelines: four routes from "
            "embeddings to epsilon, reserved-test certificates and a known-truth benchmark."
        ),
    )
    parser.add_argument("--version", action="version", version=f"idaudit {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    for module in _COMMAND_MODULES:
        importlib.import_module(module).add_parser(sub)
    return parser


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
