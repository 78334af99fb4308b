"""``idaudit certify``: reserved-test certificates (seed 000, Section 4.3) and controls."""

from __future__ import annotations

import argparse
import warnings
from typing import Any

from idaudit.cli._common import (
    add_input,
    add_min_rows,
    add_quiet,
    at_least,
    check_device,
    check_min_rows,
    describe,
    input_provenance,
    inside,
    keep_min_rows,
    load_input,
    min_rows_attrs,
    min_rows_line,
    out_dir,
    relay,
    say,
)
from idaudit.exceptions import IdauditWarning

__all__ = ["add_parser"]


def add_parser(sub: Any) -> None:
    """Register ``idaudit certify`` on ``sub`` (the sub-command action of the main parser)."""
    certify = sub.add_parser(
        "certify",
        help="certified epsilon lower bounds from reserved test data",
        description=(
            "Split every identity once into development and test rows, select vertex-disjoint "
            "pairs and thresholds on development data only, evaluate once on the test rows and "
            "report one-sided Clopper-Pearson certificates (seed 000, Section 4.3)."
        ),
    )
    add_input(certify)
    certify.add_argument(
        "--out", default="idaudit-certify", help="output folder (default: %(default)s)"
    )
    certify.add_argument(
        "--n-candidates", type=int, default=100, help="pairs scored (default: 100)"
    )
    certify.add_argument("--n-select", type=int, default=5, help="pairs certified (default: 5)")
    certify.add_argument(
        "--alpha", type=float, default=0.05, help="family error level (default: 0.05)"
    )
    certify.add_argument(
        "--n-families",
        type=int,
        default=1,
        help="conditions certified together under one union bound (default: 1)",
    )
    certify.add_argument(
        "--delta", type=float, default=0.0, help="delta of the guarantee (default: 0)"
    )
    certify.add_argument(
        "--test-size", type=float, default=0.3, help="test fraction per identity (default: 0.3)"
    )
    certify.add_argument(
        "--test-thresholds",
        choices=("dev", "bonferroni", "band"),
        default="dev",
        help="thresholds the test split certifies: the development one (dev, default), or "
        "every threshold of the fixed classifier (bonferroni, or the exact band), giving a "
        "certified trade-off curve per pair",
    )
    certify.add_argument(
        "--duplicates",
        choices=("keep", "collapse"),
        default="keep",
        help="exact-duplicate rows of an identity: 'keep' = each row is a draw (the mechanism "
        "repeats outputs); 'collapse' = copies of one draw, used once (--min-rows then counts "
        "distinct rows) (default: keep)",
    )
    certify.add_argument(
        "--classifier",
        choices=("logistic", "random_forest"),
        default="logistic",
        help="classifier (default: logistic)",
    )
    certify.add_argument("--n-folds", type=int, default=5, help="development folds (default: 5)")
    certify.add_argument(
        "--controls",
        action="store_true",
        help="also run the same-identity split-half sanity controls (writes controls.nc)",
    )
    certify.add_argument(
        "--n-permutations",
        type=int,
        default=1000,
        help="permutations of each control's MMD^2 test, >= 1 (default: 1000)",
    )
    certify.add_argument("--seed", type=int, default=0, help="seed of split, folds, pairs (>= 0)")
    certify.add_argument(
        "--device",
        default="cpu",
        help="cpu, cuda or cuda:<i>: where the batched kernels of the --controls run (the "
        "certifier's scikit-learn classifiers always run on the CPU); checked even without "
        "--controls, no fallback (default: cpu)",
    )
    add_min_rows(
        certify,
        "the certifier needs to split and fold (7 at the default --test-size and --n-folds), "
        "or 2 x --n-folds with --controls if that is more",
    )
    add_quiet(certify)
    certify.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    # every flag and the input itself are checked before the library (torch, scikit-learn)
    # loads, so that an input error answers in about a second
    inside(args.alpha, "--alpha", 0.0, 1.0)
    inside(args.delta, "--delta", 0.0, 1.0, closed="left")
    inside(args.test_size, "--test-size", 0.0, 1.0)
    for flag, value, minimum in (
        ("--n-candidates", args.n_candidates, 1),
        ("--n-select", args.n_select, 1),
        ("--n-families", args.n_families, 1),
        ("--n-folds", args.n_folds, 2),
        ("--n-permutations", args.n_permutations, 1),
        ("--seed", args.seed, 0),
    ):
        at_least(value, flag, minimum)
    from idaudit.data import split_min_rows

    # what ReservedTestCertifier.min_rows() says: a split leaving one development row a fold
    need = split_min_rows(args.test_size, args.n_folds)
    who = "the certifier needs to split and fold"
    if args.controls and 2 * args.n_folds > need:
        need, who = 2 * args.n_folds, "the --controls need (2 x --n-folds)"
    min_rows = check_min_rows(args.min_rows, need, who)
    check_device(args.device)  # used by the controls only, but never ignored

    read = load_input(args)
    say(f"read {args.embeddings}: {describe(read)}")
    counted = "rows"
    if args.duplicates == "collapse":  # an identity has as many draws as distinct rows
        _, few = keep_min_rows(read.drop_duplicates(), min_rows)
        es = read.subset(label for label in read.counts if label not in few)
        small = {label: read.counts[label] for label in few}  # the rows dropped, copies too
        counted = "distinct rows"
    else:
        es, small = keep_min_rows(read, min_rows)
    min_rows_text = min_rows_line(min_rows, small, counted=counted)
    if small:
        say(min_rows_text)
    out = out_dir(args.out)

    from idaudit._results import write_netcdf, write_text
    from idaudit.certify import ReservedTestCertifier, sanity_controls

    cert = ReservedTestCertifier(
        test_size=args.test_size,
        duplicates=args.duplicates,
        n_candidates=args.n_candidates,
        n_select=args.n_select,
        alpha=args.alpha,
        n_families=args.n_families,
        delta=args.delta,
        test_thresholds=args.test_thresholds,
        classifier=args.classifier,
        n_folds=args.n_folds,
        rng=args.seed,
        progress=not args.quiet,
    )
    # the library's warnings (duplicates, too few test rows) go to stderr and the report
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", IdauditWarning)
        cert.fit(es)
        controls = None
        if args.controls:
            controls = sanity_controls(
                es,
                n_permutations=args.n_permutations,
                n_folds=args.n_folds,
                duplicates=args.duplicates,
                rng=args.seed,
                device=args.device,
                progress=not args.quiet,
            )
    notes = relay(caught, "certify")
    extra = {**min_rows_attrs(min_rows, small), **input_provenance(args.embeddings)}
    datasets = {"certificates.nc": cert.certificates_, "candidates.nc": cert.candidates_}
    if controls is not None:
        datasets["controls.nc"] = controls
    written = []
    for name, ds in datasets.items():
        ds.attrs.update(extra)
        written.append(write_netcdf(ds, out / name))
    text = _certificate_markdown(
        cert.certificates_, controls, args.embeddings, read, min_rows_text, notes
    )
    written.append(write_text(text, out / "certificates.md"))
    say(text)
    say("wrote:\n" + "\n".join(f"  {p}" for p in written))
    return 0


def _certificate_markdown(
    c: Any, controls: Any, source: str, read: Any, min_rows_line: str, notes: list[str]
) -> str:
    from idaudit.pipeline.report import certify_document

    a = c.attrs
    context = [
        "",
        f"Input `{source}`: {describe(read)}.",
        "",
        min_rows_line,
        "",
        f"Even an error-free test certifies 0 below {a['min_test_rows_for_nonzero']} test rows "
        "per identity.",
        "",
    ]
    return certify_document(c, controls=controls, context=context, notes=notes)
