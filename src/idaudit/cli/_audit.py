"""``idaudit audit``: the four audits of seed 000 on a file of embeddings."""

from __future__ import annotations

import argparse
from typing import Any

from idaudit.cli._common import (
    add_input,
    add_min_rows,
    add_quiet,
    at_least,
    check_device,
    check_min_rows,
    describe,
    inside,
    keep_min_rows,
    load_input,
    min_rows_attrs,
    min_rows_line,
    out_dir,
    say,
)
from idaudit.exceptions import InvalidInputError

__all__ = ["add_parser"]

#: Pairs `idaudit audit` audits without --n-pairs (all of them, when there are fewer).
_DEFAULT_N_PAIRS = 100


def add_parser(sub: Any) -> None:
    """Register ``idaudit audit`` on ``sub`` (the sub-command action of the main parser)."""
    audit = sub.add_parser(
        "audit",
        help="run the four audits on a file of embeddings",
        description=(
            "Audit identity pairs of an embedding file (CSV, NPZ or Parquet; rows are L2-"
            "normalised, missing and zero-norm rows dropped and counted) with GaussMech, "
            "KDE-LR, MMD-TV and ROC-HT. Writes results.nc (per pair) and summary.md."
        ),
    )
    add_input(audit)
    audit.add_argument(
        "--out", default="idaudit-audit", help="output folder (default: %(default)s)"
    )
    audit.add_argument(
        "--n-pairs",
        type=int,
        metavar="N",
        help="pairs audited, a seeded prefix of all pairs; at most the number of pairs "
        "available (default: 100, or all pairs when there are fewer, which is said)",
    )
    audit.add_argument(
        "--methods",
        default="gaussmech,kdelr,mmdtv,rocht",
        help="comma-separated subset of gaussmech,kdelr,mmdtv,rocht (default: all four)",
    )
    audit.add_argument(
        "--kde-mix",
        "--kde-alpha",  # the former name, still accepted
        dest="kde_mix",
        type=float,
        nargs="+",
        default=[0.0, 0.01],
        help="KDE-LR uniform mixture weights in [0, 1], distinct, one auditor each (default: "
        "0 0.01; --kde-alpha is the former name of this flag)",
    )
    audit.add_argument(
        "--n-permutations",
        type=int,
        default=0,
        help="MMD^2 permutation-test permutations per pair, 0 for none (default: 0)",
    )
    audit.add_argument(
        "--classifier",
        choices=("logistic", "random_forest"),
        default="logistic",
        help="ROC-HT classifier (default: logistic)",
    )
    audit.add_argument(
        "--seed", type=int, default=0, help="seed of pairs, folds, permutations (>= 0)"
    )
    audit.add_argument(
        "--device",
        default="cpu",
        help="cpu, cuda or cuda:<i>: where the batched audit kernels run; no fallback "
        "(default: cpu)",
    )
    add_min_rows(audit, "the chosen audits need (5 with rocht, else 2)")
    add_quiet(audit)
    audit.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from idaudit._results import write_netcdf, write_text
    from idaudit.audits import (
        GaussMechAuditor,
        KDELRAuditor,
        MMDTVAuditor,
        ROCHTAuditor,
        audit_pairs,
        summarize,
    )
    from idaudit.data import sample_pairs

    # every flag is checked before the input is read
    methods = [m.strip() for m in args.methods.split(",") if m.strip()]
    known = ("gaussmech", "kdelr", "mmdtv", "rocht")
    unknown = [m for m in methods if m not in known]
    if unknown or not methods:
        raise ValueError(
            f"`--methods` must be a comma-separated subset of {','.join(known)}; "
            f"got {args.methods!r}."
        )
    if args.n_pairs is not None:
        at_least(args.n_pairs, "--n-pairs", 1)
    at_least(args.seed, "--seed", 0)
    for mix in args.kde_mix:
        inside(mix, "--kde-mix", 0.0, 1.0, closed="both")
    if len(set(args.kde_mix)) < len(args.kde_mix):
        raise InvalidInputError(
            "`--kde-mix` values must be distinct (one KDE-LR auditor each); got "
            f"{' '.join(f'{a:g}' for a in args.kde_mix)}."
        )
    at_least(args.n_permutations, "--n-permutations", 0)
    check_device(args.device)
    auditors: list[Any] = []
    for method in methods:
        if method == "gaussmech":
            auditors.append(GaussMechAuditor())
        elif method == "kdelr":
            auditors.extend(KDELRAuditor(mix=m) for m in args.kde_mix)
        elif method == "mmdtv":
            auditors.append(MMDTVAuditor(n_permutations=args.n_permutations, rng=args.seed))
        else:
            auditors.append(ROCHTAuditor(classifier=args.classifier, rng=args.seed))
    min_rows = check_min_rows(
        args.min_rows, max(aud.min_rows() for aud in auditors), "the chosen audits need"
    )

    read = load_input(args)
    say(f"read {args.embeddings}: {describe(read)}")
    es, small = keep_min_rows(read, min_rows)
    if small:
        say(min_rows_line(min_rows, small))
    m = len(es.identities)
    available = m * (m - 1) // 2
    n_pairs = args.n_pairs
    if n_pairs is None:
        n_pairs = min(_DEFAULT_N_PAIRS, available)
        if n_pairs < _DEFAULT_N_PAIRS:
            say(
                f"auditing all {available} pairs of the {m} identities (fewer than the "
                f"default --n-pairs {_DEFAULT_N_PAIRS})"
            )
    elif n_pairs > available:
        raise InvalidInputError(
            f"`--n-pairs` must be at most the number of identity pairs available, "
            f"{available} for the {m} identities with at least {min_rows} rows; "
            f"got {n_pairs}."
        )
    out = out_dir(args.out)

    pairs = sample_pairs(es.identities, n_pairs, rng=args.seed)
    ds = audit_pairs(es, pairs, auditors, device=args.device, progress=not args.quiet)
    ds.attrs.update(min_rows_attrs(min_rows, small))
    summary = summarize(ds)
    results = write_netcdf(ds, out / "results.nc")
    text = _summary_markdown(summary, args.embeddings, read, n_pairs, m, min_rows, small)
    report = write_text(text, out / "summary.md")
    say(repr(summary))
    say(f"wrote:\n  {results}\n  {report}")
    return 0


def _summary_markdown(
    summary: Any,
    source: str,
    read: Any,
    n_pairs: int,
    n_identities: int,
    min_rows: int,
    small: dict[Any, int],
) -> str:
    lines = [
        "# idaudit audit",
        "",
        f"Input `{source}`: {describe(read)}.",
        "",
        min_rows_line(min_rows, small),
        "",
        (
            f"Pairs: all {n_pairs} pairs of the {n_identities} identities kept"
            if n_pairs == n_identities * (n_identities - 1) // 2
            else f"Pairs: the first {n_pairs} of one seeded shuffle of all pairs of the "
            f"{n_identities} identities kept"
        )
        + f"; the medians below are over the {summary.n_pairs} pairs where every method has "
        "a value.",
        "",
        "| column | value | status |",
        "|---|---|---|",
    ]
    for column, value, status in zip(
        summary.columns, summary.values, summary.statuses, strict=False
    ):
        text = value if isinstance(value, str) else f"{value:.6g}"
        lines.append(f"| {column} | {text} | {status} |")
    lines += [
        "",
        "*diagnostic*: not a bound on the joint mechanism; *sample_estimate*: a population "
        "bound evaluated on a sample, without a one-sided confidence correction (it can "
        "overshoot). For confidence-certified lower bounds run `idaudit certify`.",
        "",
    ]
    return "\n".join(lines)
