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
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from idaudit.cli._common import (
    add_quiet,
    at_least,
    check_device,
    inside,
    out_dir,
    plural,
    say,
)
from idaudit.exceptions import IdauditWarning, InvalidInputError

__all__ = ["main"]

_SUFFIXES = {".csv": "csv", ".npz": "npz", ".parquet": "parquet", ".pq": "parquet"}
#: How many dropped identities are named in the output (all of them are counted).
_N_NAMED = 10
#: Pairs `idaudit audit` audits without --n-pairs (all of them, when there are fewer).
_DEFAULT_N_PAIRS = 100
#: Sub-commands that live in a module of their own; each module exposes
#: ``add_parser(subparsers)``, which registers the command with ``set_defaults(run=...)``.
_COMMAND_MODULES: tuple[str, ...] = ("idaudit.cli._privacy",)


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

    demo = sub.add_parser(
        "demo",
        help="run the calibrated-noise benchmark on a built-in synthetic identity set",
        description=(
            "Sweep Gaussian and Laplace noise over a built-in synthetic identity set (one point "
            "per identity on the unit sphere) from perfectly separable to near chance; run the "
            "four audits, the reserved-test certificate and the known true epsilon at every "
            "noise level. Writes report.md, results.nc and noise_sweep.png."
        ),
    )
    demo.add_argument("--out", default="idaudit-demo", help="output folder (default: %(default)s)")
    demo.add_argument("--quick", action="store_true", help=argparse.SUPPRESS)
    add_quiet(demo)
    demo.set_defaults(run=_run_demo)

    audit = sub.add_parser(
        "audit",
        help="run the four audits on a file of embeddings",
        description=(
            "Audit identity pairs of an embedding file (CSV, NPZ or Parquet; rows are L2-"
            "normalised, missing and zero-norm rows dropped and counted) with GaussMech, "
            "KDE-LR, MMD-TV and ROC-HT. Writes results.nc (per pair) and summary.md."
        ),
    )
    _add_input(audit)
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
        "--kde-alpha",
        type=float,
        nargs="+",
        default=[0.0, 0.01],
        help="KDE-LR smoothing weights in [0, 1], distinct, one auditor each (default: 0 0.01)",
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
    _add_min_rows(audit, "the chosen audits need (5 with rocht, else 2)")
    add_quiet(audit)
    audit.set_defaults(run=_run_audit)

    certify = sub.add_parser(
        "certify",
        help="certified epsilon lower bounds from reserved test data",
        description=(
            "Split every identity once into development and test rows, select vertex-disjoint "
            "pairs and thresholds on development data only, evaluate once on the test rows and "
            "report one-sided Clopper-Pearson certificates (seed 000, Section 4.3)."
        ),
    )
    _add_input(certify)
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
    _add_min_rows(
        certify,
        "the certifier needs to split and fold (7 at the default --test-size and --n-folds), "
        "or 2 x --n-folds with --controls if that is more",
    )
    add_quiet(certify)
    certify.set_defaults(run=_run_certify)
    _add_embed(sub)
    for module in _COMMAND_MODULES:
        importlib.import_module(module).add_parser(sub)
    return parser


def _add_embed(sub: Any) -> None:
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
        help="CPU threads for torch and onnxruntime (default: their own)",
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
    embed.set_defaults(run=_run_embed)


def _add_input(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("embeddings", help="CSV, NPZ or Parquet file of labelled embeddings")
    parser.add_argument("--label-column", help="CSV/Parquet column holding identity labels")
    parser.add_argument(
        "--vector-column", help="CSV/Parquet column holding each vector (default: the others)"
    )
    parser.add_argument("--embeddings-key", default="embeddings", help="NPZ array of vectors")
    parser.add_argument("--labels-key", default="labels", help="NPZ array of labels")


def _add_min_rows(parser: argparse.ArgumentParser, need: str) -> None:
    parser.add_argument(
        "--min-rows",
        type=int,
        metavar="N",
        help="drop identities with fewer than N rows before pairs are sampled; they are "
        f"counted and named in the output (default and smallest allowed: what {need})",
    )


# -- checks shared by the commands -------------------------------------------------------------


def _min_rows(value: int | None, need: int, who: str) -> int:
    """``--min-rows``, defaulting to ``need``, the fewest rows per identity ``who``."""
    if value is None:
        return need
    if value < need:
        raise InvalidInputError(
            f"`--min-rows` must be >= {need}, the fewest rows per identity {who}; got {value}."
        )
    return value


# -- demo -------------------------------------------------------------------------------------


def _run_demo(args: argparse.Namespace) -> int:
    from idaudit._demo import QUICK, DemoConfig, run_demo

    config = QUICK if args.quick else DemoConfig()
    out = out_dir(args.out)
    result = run_demo(out, config=config, progress=not args.quiet)
    say(f"idaudit demo finished in {result.seconds:.0f} s; wrote:")
    for path in (result.report, result.results, result.figure):
        say(f"  {path}")
    return 0


# -- reading the input ------------------------------------------------------------------------


def _load(args: argparse.Namespace) -> Any:
    from idaudit.data import EmbeddingSet

    path = Path(args.embeddings)
    if not path.is_file():
        raise FileNotFoundError(f"`embeddings` must be an existing file; got {str(path)!r}.")
    kind = _SUFFIXES.get(path.suffix.lower())
    if kind is None:
        raise ValueError(
            f"`embeddings` must end in .csv, .npz, .parquet or .pq; got {path.name!r}."
        )
    # the dropped-row counts are printed with the input's description (_describe), so the
    # library's warning about them would only say the same thing twice
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", IdauditWarning)
        if kind == "npz":
            return EmbeddingSet.from_npz(
                path, embeddings_key=args.embeddings_key, labels_key=args.labels_key
            )
        reader = EmbeddingSet.from_csv if kind == "csv" else EmbeddingSet.from_parquet
        return reader(path, label_column=args.label_column, vector_column=args.vector_column)


def _describe(es: Any) -> str:
    dropped = ", ".join(f"{k}: {v}" for k, v in es.dropped_.items() if v) or "none"
    return (
        f"{len(es)} rows, {len(es.identities)} identities, dim {es.dim}; dropped "
        f"{es.n_dropped_} ({dropped}); exact duplicates {es.n_duplicates_}; sha256 "
        f"{es.sha256[:12]}…"
    )


def _keep_min_rows(es: Any, min_rows: int) -> tuple[Any, dict[Any, int]]:
    """Keep identities with at least ``min_rows`` rows; also return each dropped one's rows."""
    small = {label: int(n) for label, n in es.counts.items() if n < min_rows}
    kept = [label for label in es.identities if label not in small]
    if len(kept) < 2:
        if small:
            raise InvalidInputError(
                f"`--min-rows` {min_rows} leaves {len(kept)} of the {len(es.identities)} "
                "identities; at least 2 are needed (see the counts above)."
            )
        raise InvalidInputError(
            f"`embeddings` must hold at least 2 identities; got {len(es.identities)}."
        )
    return (es.subset(kept) if small else es), small


def _named(small: dict[Any, int]) -> str:
    shown = ", ".join(
        f"{label} ({plural(n, 'row', 'rows')})" for label, n in list(small.items())[:_N_NAMED]
    )
    return shown + (f", and {len(small) - _N_NAMED} more" if len(small) > _N_NAMED else "")


def _min_rows_line(min_rows: int, small: dict[Any, int]) -> str:
    """One sentence saying which identities ``--min-rows`` dropped (or that none were)."""
    if not small:
        return f"Identities with fewer than {min_rows} rows (`--min-rows`): none."
    return (
        f"Dropped {plural(len(small), 'identity', 'identities')} with fewer than {min_rows} "
        f"rows (`--min-rows`) before pairs were chosen, "
        f"{plural(sum(small.values()), 'row', 'rows')} in all: {_named(small)}."
    )


def _min_rows_attrs(min_rows: int, small: dict[Any, int]) -> dict[str, Any]:
    """Dataset attributes recording the ``--min-rows`` filter (scalars and strings only)."""
    labels = ", ".join(str(label) for label in list(small)[:_N_NAMED])
    if len(small) > _N_NAMED:
        labels += f", and {len(small) - _N_NAMED} more"
    return {
        "min_rows": min_rows,
        "n_identities_dropped_min_rows": len(small),
        "n_rows_dropped_min_rows": sum(small.values()),
        "identities_dropped_min_rows": labels,
    }


# -- audit ------------------------------------------------------------------------------------


def _run_audit(args: argparse.Namespace) -> int:
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
    for alpha in args.kde_alpha:
        inside(alpha, "--kde-alpha", 0.0, 1.0, closed="both")
    if len(set(args.kde_alpha)) < len(args.kde_alpha):
        raise InvalidInputError(
            "`--kde-alpha` values must be distinct (one KDE-LR auditor each); got "
            f"{' '.join(f'{a:g}' for a in args.kde_alpha)}."
        )
    at_least(args.n_permutations, "--n-permutations", 0)
    check_device(args.device)
    auditors: list[Any] = []
    for method in methods:
        if method == "gaussmech":
            auditors.append(GaussMechAuditor())
        elif method == "kdelr":
            auditors.extend(KDELRAuditor(alpha=a) for a in args.kde_alpha)
        elif method == "mmdtv":
            auditors.append(MMDTVAuditor(n_permutations=args.n_permutations, rng=args.seed))
        else:
            auditors.append(ROCHTAuditor(classifier=args.classifier, rng=args.seed))
    min_rows = _min_rows(
        args.min_rows, max(aud.min_rows() for aud in auditors), "the chosen audits need"
    )

    read = _load(args)
    say(f"read {args.embeddings}: {_describe(read)}")
    es, small = _keep_min_rows(read, min_rows)
    if small:
        say(_min_rows_line(min_rows, small))
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
    ds.attrs.update(_min_rows_attrs(min_rows, small))
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
        f"Input `{source}`: {_describe(read)}.",
        "",
        _min_rows_line(min_rows, small),
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


# -- certify ----------------------------------------------------------------------------------


def _run_certify(args: argparse.Namespace) -> int:
    from idaudit._results import write_netcdf, write_text
    from idaudit.certify import ReservedTestCertifier, sanity_controls

    # every flag is checked before the input is read
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
    check_device(args.device)  # used by the controls only, but never ignored
    cert = ReservedTestCertifier(
        test_size=args.test_size,
        n_candidates=args.n_candidates,
        n_select=args.n_select,
        alpha=args.alpha,
        n_families=args.n_families,
        delta=args.delta,
        classifier=args.classifier,
        n_folds=args.n_folds,
        rng=args.seed,
        progress=not args.quiet,
    )
    need, who = cert.min_rows(), "the certifier needs to split and fold"
    if args.controls and 2 * args.n_folds > need:
        need, who = 2 * args.n_folds, "the --controls need (2 x --n-folds)"
    min_rows = _min_rows(args.min_rows, need, who)

    read = _load(args)
    say(f"read {args.embeddings}: {_describe(read)}")
    es, small = _keep_min_rows(read, min_rows)
    if small:
        say(_min_rows_line(min_rows, small))
    out = out_dir(args.out)

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
                rng=args.seed,
                device=args.device,
                progress=not args.quiet,
            )
    notes = _relay(caught, "certify")
    extra = _min_rows_attrs(min_rows, small)
    datasets = {"certificates.nc": cert.certificates_, "candidates.nc": cert.candidates_}
    if controls is not None:
        datasets["controls.nc"] = controls
    written = []
    for name, ds in datasets.items():
        ds.attrs.update(extra)
        written.append(write_netcdf(ds, out / name))
    text = _certificate_markdown(
        cert.certificates_, controls, args.embeddings, read, _min_rows_line(min_rows, small), notes
    )
    written.append(write_text(text, out / "certificates.md"))
    say(text)
    say("wrote:\n" + "\n".join(f"  {p}" for p in written))
    return 0


def _relay(caught: list[warnings.WarningMessage], command: str) -> list[str]:
    """Print idaudit's warnings as one line each on stderr; pass the others on unchanged."""
    notes: list[str] = []
    for w in caught:
        if issubclass(w.category, IdauditWarning):
            notes.append(str(w.message))
            sys.stderr.write(f"idaudit {command}: warning: {w.message}\n")
        else:
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno, source=w.source)
    return notes


def _certificate_markdown(
    c: Any, controls: Any, source: str, read: Any, min_rows_line: str, notes: list[str]
) -> str:
    a = c.attrs
    lines = [
        "# idaudit certify",
        "",
        f"Input `{source}`: {_describe(read)}.",
        "",
        min_rows_line,
        "",
        f"Status **certified_lower_bound**: {a['confidence']}. Each error-rate bound is a "
        f"one-sided Clopper-Pearson bound at {a['alpha_per_bound']:.3g}; delta = {a['delta']:g}. "
        f"Even an error-free test certifies 0 below {a['min_test_rows_for_nonzero']} test rows "
        "per identity.",
        "",
        "| identity_a | identity_b | test n (a, b) | test errors (fp, fn) | UFPR | UFNR | "
        "test AUC | epsilon_lb |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for i in range(c.sizes["pair"]):
        row = c.isel(pair=i)
        lines.append(
            f"| {row['identity_a'].item()} | {row['identity_b'].item()} | "
            f"{int(row['n_test_a'])}, {int(row['n_test_b'])} | "
            f"{int(row['test_fp'])}, {int(row['test_fn'])} | {float(row['ufpr']):.4f} | "
            f"{float(row['ufnr']):.4f} | {float(row['test_auc']):.3f} | "
            f"{float(row['epsilon_lb']):.3f} |"
        )
    lines += ["", f"Largest certified lower bound: **{a['epsilon_lb']:.3f}**.", ""]
    if notes:
        lines += ["## Warnings", "", *(f"- {note}" for note in notes), ""]
    if controls is not None:
        ca = controls.attrs
        lines += [
            "## Same-identity split-half controls",
            "",
            f"MMD^2 permutation tests rejecting at {ca['level']:g}: {ca['n_rejected']} of "
            f"{ca['n_identities']} (rate {ca['rejection_rate']:.3f}; about {ca['level']:g} is "
            f"expected when there is no artefact). Mean split-half ROC AUC "
            f"{ca['mean_auc']:.3f} (about 0.5 expected); exact (0, 1) corners: "
            f"{ca['n_corners']} (none expected).",
            "",
        ]
    return "\n".join(lines)


# -- embed ------------------------------------------------------------------------------------

#: File suffixes read as images (case-insensitive); other files are counted and skipped.
_IMAGE_SUFFIXES = frozenset(
    {".jpg", ".jpeg", ".png", ".bmp", ".gif", ".tif", ".tiff", ".webp", ".ppm", ".pgm", ".pnm"}
)
_EMBEDDING_SUFFIXES = (".npz", ".csv", ".parquet", ".pq")


def _find_images(root: Path) -> tuple[list[Path], list[str], int, int]:
    """Image files below each identity folder of ``root``.

    Returns ``(paths, labels, n_folders, n_skipped)``: the image paths, their folder names, how
    many identity folders there are, and how many other files were skipped.

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
    skipped = sum(p.is_file() for p in visible)
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
                skipped += 1
    if not paths:
        raise ValueError(
            f"`IMAGES_DIR` holds {len(folders)} identity folder(s) but no image files "
            f"({', '.join(sorted(_IMAGE_SUFFIXES))}); {skipped} other file(s)."
        )
    return paths, labels, len(folders), skipped


def _face_models(args: argparse.Namespace) -> tuple[Any, Any]:
    """Build the detector and encoder that ``--encoder`` names, on ``--device``/``--threads``."""
    encoder = args.encoder or ("arcface" if args.arcface_dir else "dlib")
    if args.arcface_dir and encoder != "arcface":
        raise ValueError(f"`--arcface-dir` is used by --encoder arcface only; got {encoder!r}.")
    if args.threads is not None and args.threads < 1:
        raise ValueError(f"`--threads` must be >= 1; got {args.threads}.")
    if encoder == "arcface":
        from idaudit.faces import ArcFaceEncoder, RetinaFaceDetector

        options = {"threads": args.threads, "device": args.device}
        return (
            RetinaFaceDetector(args.arcface_dir, **options),
            ArcFaceEncoder(args.arcface_dir, **options),
        )
    import torch

    from idaudit.faces import DlibEncoder, MTCNNDetector, TorchDlibEncoder

    if args.threads is not None:
        torch.set_num_threads(args.threads)
    if encoder == "dlib":
        if args.device != "cpu":
            raise ValueError(
                "`--device` must be cpu for --encoder dlib (dlib runs on the CPU; "
                f"--encoder torch-dlib is the same network on CUDA); got {args.device!r}."
            )
        return MTCNNDetector(), DlibEncoder()
    return MTCNNDetector(args.device), TorchDlibEncoder(device=args.device)


def _embeddings_writer(path: Path, emb: Any, labels: Any, sources: Any, encoder: str) -> Any:
    """Return the function that writes ``path`` in the format its suffix names."""
    import numpy as np
    import pandas as pd

    suffix = path.suffix.lower()
    if suffix == ".npz":

        def write_npz(tmp: Path) -> None:
            with open(tmp, "wb") as fh:  # a file object: np.savez would append ".npz" to a name
                np.savez(
                    fh,
                    embeddings=emb,
                    labels=np.asarray(labels, dtype=str),
                    sources=np.asarray(sources, dtype=str),
                    encoder=np.asarray(encoder),
                )

        return write_npz
    frame = pd.DataFrame(emb, columns=[f"e{i}" for i in range(emb.shape[1])])
    frame.insert(0, "identity", list(labels))
    if suffix == ".csv":
        return lambda tmp: frame.to_csv(tmp, index=False)
    return lambda tmp: frame.to_parquet(tmp, index=False)


def _run_embed(args: argparse.Namespace) -> int:
    from idaudit._results import write_atomic
    from idaudit.faces import FacePipeline

    out = Path(args.out)
    if out.suffix.lower() not in _EMBEDDING_SUFFIXES:
        raise ValueError(f"`--out` must end in .npz, .csv, .parquet or .pq; got {out.name!r}.")
    outcomes_path = Path(args.outcomes) if args.outcomes else out.with_suffix(".outcomes.csv")
    if args.batch_size < 1:
        raise ValueError(f"`--batch-size` must be >= 1; got {args.batch_size}.")
    root = Path(args.images_dir)
    paths, labels, n_folders, skipped = _find_images(root)
    n_ids = len(set(labels))
    say(
        f"read {root}: {len(paths)} images in {n_folders} identity folders"
        + (f" ({n_folders - n_ids} without images)" if n_ids < n_folders else "")
        + (f"; {skipped} other files skipped" if skipped else "")
    )
    detector, encoder = _face_models(args)
    # the folders that will hold the two files, before the (long) encoding
    out_dir(out.parent, "--out")
    out_dir(outcomes_path.parent, "--outcomes")
    say(
        f"detector {type(detector).__name__}, encoder {encoder.name} (dim {encoder.dim}), "
        f"device {encoder.device}"
    )
    pipeline = FacePipeline(
        detector,
        encoder,
        all_faces=args.all_faces,
        batch_size=args.batch_size,
        progress=not args.quiet,
    )
    emb, outcomes = pipeline.encode(paths)
    outcomes.insert(0, "identity", [labels[i] for i in outcomes["input_index"]])
    write_atomic(outcomes_path, lambda tmp: outcomes.to_csv(tmp, index=False))

    kept = outcomes[outcomes["status"] == "ok"].sort_values("embedding_row")
    per_input = outcomes.drop_duplicates("input_index")
    counts = per_input["status"].value_counts()
    several = int((kept.drop_duplicates("input_index")["n_faces"] > 1).sum())
    dropped = {
        status: int(counts.get(status, 0)) for status in ("no_face", "unreadable", "bad_format")
    }
    say(
        f"kept {len(kept)} faces from {int(counts.get('ok', 0))} images; dropped "
        f"{sum(dropped.values())} images ("
        + ", ".join(f"{k}: {v}" for k, v in dropped.items())
        + f"); images with several faces ({'all kept' if args.all_faces else 'largest kept'}): "
        f"{several}"
    )
    missing = sorted(set(labels) - set(kept["identity"]))
    if missing:
        shown = ", ".join(missing[:10]) + (", ..." if len(missing) > 10 else "")
        say(f"identities without any kept face: {len(missing)} ({shown})")
    if len(kept) == 0:
        raise ValueError(
            f"no face was embedded from the {len(paths)} images, so {str(out)!r} was not "
            f"written; see {str(outcomes_path)!r}."
        )
    sources = [str(Path(s).relative_to(root)) for s in kept["source"]]
    write = _embeddings_writer(out, emb, kept["identity"].to_numpy(), sources, encoder.name)
    write_atomic(out, write)
    say(f"wrote:\n  {out}\n  {outcomes_path}")
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
