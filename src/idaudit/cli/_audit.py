"""``idaudit audit``: the four audits of seed 000 on a file of embeddings."""

from __future__ import annotations

import argparse
import warnings
from pathlib import Path
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
    say,
)
from idaudit.exceptions import IdauditWarning, InvalidInputError

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
            "normalised; rows without a label are dropped and counted; rows whose vector is "
            "missing, unparseable, not finite or of zero norm are failed outputs of their "
            "identity, kept and counted, and the audits report each identity's failure rate) "
            "with GaussMech, "
            "KDE-LR, MMD-TV and ROC-HT. Writes results.nc and pairs.csv (per pair) and "
            "summary.md. With several files (conditions: encoder x dataset x generator, "
            "seed 000 Section 4) also writes Table 1's and Table 2's layouts (table1.md/.csv, "
            "table2.md/.csv) and Figure 3's two panels (figure3.png)."
        ),
    )
    add_input(audit, many=True)
    audit.add_argument(
        "--out", default="idaudit-audit", help="output folder (default: %(default)s)"
    )
    audit.add_argument(
        "--manifest",
        metavar="CSV",
        help="conditions of several inputs: a CSV with columns file and condition (default: "
        "each file's stem, e.g. arcface_vggface2_ff -> encoder, dataset, generator)",
    )
    audit.add_argument(
        "--no-certify",
        action="store_true",
        help="with several conditions, skip the reserved-test certificates (Table 2)",
    )
    audit.add_argument(
        "--control-permutations",
        type=int,
        default=200,
        metavar="N",
        help="with several conditions, permutations of each split-half control behind "
        "Figure 3's H0 histogram (default: %(default)s)",
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
        dest="kde_mix",
        type=float,
        nargs="+",
        default=[0.0, 0.01],
        help="KDE-LR uniform mixture weights in [0, 1], distinct, one auditor each (default: "
        "0 0.01)",
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
    audit.add_argument(
        "--threads",
        type=int,
        metavar="N",
        help="chunks of pairs run at once, each on one torch thread (default: the CPUs this "
        "process may use)",
    )
    add_min_rows(audit, "the chosen audits need (5 with rocht, else 2)")
    add_quiet(audit)
    audit.set_defaults(run=run)


#: Fewest rows per identity each method needs, so that `--min-rows` is checked before the
#: library (torch, scikit-learn) loads: ROC-HT's default 5 folds, one row each; the others
#: 2 (tests/unit/cli/test_audit.py checks these against the auditors' own ``min_rows()``).
_MIN_ROWS = {"gaussmech": 2, "kdelr": 2, "mmdtv": 2, "rocht": 5}


def run(args: argparse.Namespace) -> int:
    # every flag and the input itself are checked before the library (torch, scikit-learn)
    # loads, so that an input error answers in about a second
    methods = [m.strip() for m in args.methods.split(",") if m.strip()]
    known = tuple(_MIN_ROWS)
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
    if args.threads is not None:
        at_least(args.threads, "--threads", 1)
    at_least(args.control_permutations, "--control-permutations", 1)
    min_rows = check_min_rows(
        args.min_rows, max(_MIN_ROWS[m] for m in methods), "the chosen audits need"
    )
    check_device(args.device)
    if args.manifest is not None and not Path(args.manifest).is_file():
        raise InvalidInputError(f"`--manifest` must be an existing file; got {args.manifest!r}.")
    paths = _expand(args.embeddings)
    if len(paths) > 1 or args.manifest:
        return _run_conditions(args, paths, methods, min_rows)
    args.embeddings = str(paths[0])
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
                f"auditing {'the 1 pair' if available == 1 else f'all {available} pairs'} "
                f"of the {m} identities (fewer than the "
                f"default --n-pairs {_DEFAULT_N_PAIRS})"
            )
    elif n_pairs > available:
        raise InvalidInputError(
            f"`--n-pairs` must be at most the number of identity pairs available, "
            f"{available} for the {m} identities with at least {min_rows} rows; "
            f"got {n_pairs}."
        )
    out = out_dir(args.out)

    from idaudit._results import pair_frame, write_csv, write_netcdf, write_text
    from idaudit.audits import audit_pairs, summarize
    from idaudit.data import sample_pairs

    pairs = sample_pairs(es.identities, n_pairs, rng=args.seed)
    ds = audit_pairs(
        es,
        pairs,
        _auditors(args, methods, min_rows),
        device=args.device,
        progress=not args.quiet,
        n_threads=args.threads,
    )
    ds.attrs.update(min_rows_attrs(min_rows, small))
    summary = summarize(ds)
    ds.attrs.update(input_provenance(args.embeddings))
    results = write_netcdf(ds, out / "results.nc")
    write_csv(pair_frame(ds), out / "pairs.csv")
    text = _summary_markdown(ds, args.embeddings, read, n_pairs, m, min_rows, small)
    report = write_text(text, out / "summary.md")
    say(repr(summary))
    say(f"wrote:\n  {results}\n  {out / 'pairs.csv'}\n  {report}")
    return 0


def _auditors(args: argparse.Namespace, methods: list[str], min_rows: int) -> list[Any]:
    """Build the auditors that ``--methods`` names, with the flags' settings."""
    from idaudit.audits import GaussMechAuditor, KDELRAuditor, MMDTVAuditor, ROCHTAuditor

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
    need = max(aud.min_rows() for aud in auditors)
    if need > min_rows:  # pragma: no cover - _MIN_ROWS says what the auditors need
        raise AssertionError(f"the chosen audits need {need} rows per identity, not {min_rows}")
    return auditors


def _summary_markdown(
    ds: Any,
    source: str,
    read: Any,
    n_pairs: int,
    n_identities: int,
    min_rows: int,
    small: dict[Any, int],
) -> str:
    from idaudit.pipeline.report import audit_document

    pairs = (
        f"Pairs: {'the 1 pair' if n_pairs == 1 else f'all {n_pairs} pairs'} of the "
        f"{n_identities} identities kept."
        if n_pairs == n_identities * (n_identities - 1) // 2
        else f"Pairs: the first {n_pairs} of one seeded shuffle of all pairs of the "
        f"{n_identities} identities kept."
    )
    context = ["", f"Input `{source}`: {describe(read)}.", "", min_rows_line(min_rows, small),
               "", pairs, ""]
    return audit_document(ds, None, context=context)


_SUFFIXES = (".csv", ".npz", ".parquet", ".pq")


def _expand(items: list[str]) -> list[Path]:
    """Files named on the command line, folders replaced by their embedding files (sorted).

    Every file must exist and end in a suffix the readers know, checked here, before the
    input is read.
    """
    paths: list[Path] = []
    for item in items:
        p = Path(item)
        if p.is_dir():
            found = sorted(f for f in p.iterdir() if f.suffix.lower() in _SUFFIXES)
            if not found:
                raise InvalidInputError(
                    f"`embeddings` folder {item!r} holds no .csv, .npz or .parquet file."
                )
            paths.extend(found)
        elif not p.is_file():
            raise FileNotFoundError(f"`embeddings` must be an existing file; got {item!r}.")
        elif p.suffix.lower() not in _SUFFIXES:
            raise InvalidInputError(
                f"`embeddings` must end in .csv, .npz, .parquet or .pq; got {p.name!r}."
            )
        else:
            paths.append(p)
    return paths


def _run_conditions(
    args: argparse.Namespace, paths: list[Path], methods: list[str], min_rows: int
) -> int:
    """Several inputs, one condition each: Table 1, Table 2 and Figure 3 of seed 000."""
    names = _condition_names(args, paths)
    out = out_dir(args.out)  # before any input is read: an unusable --out fails in seconds
    sets: dict[str, Any] = {}
    for path, name in names.items():
        read = load_input(args, path)
        say(f"read {path} (condition {name}): {describe(read)}")
        es, small = keep_min_rows(read, min_rows)
        if small:
            say(min_rows_line(min_rows, small))
        sets[name] = es
    dims = {name: es.dim for name, es in sets.items()}
    available = min(len(es.identities) * (len(es.identities) - 1) // 2 for es in sets.values())
    n_pairs = args.n_pairs if args.n_pairs is not None else min(_DEFAULT_N_PAIRS, available)
    if n_pairs > available:
        raise InvalidInputError(
            f"`--n-pairs` must be at most {available}, the pairs of the smallest condition; "
            f"got {n_pairs}."
        )
    from sklearn.base import clone

    from idaudit._results import pair_frame, write_atomic, write_csv, write_netcdf, write_text
    from idaudit.audits import audit_pairs, concat_conditions, median_auc_rocs, table1, table2
    from idaudit.audits._tables import condition_fields
    from idaudit.certify import sanity_controls
    from idaudit.data import sample_pairs
    from idaudit.pipeline.report import frame_table as markdown
    from idaudit.plotting import plot_figure3

    auditors = _auditors(args, methods, min_rows)
    results: dict[str, Any] = {}
    certs: dict[str, Any] = {}
    uncertified: list[str] = []
    h0: list[Any] = []
    for name, es in sets.items():
        pairs = sample_pairs(es.identities, n_pairs, rng=args.seed)
        ds = audit_pairs(
            es,
            pairs,
            [clone(a) for a in auditors],
            device=args.device,
            progress=not args.quiet,
        )
        ds.attrs.update(input_provenance(next(p for p, n in names.items() if n == name)))
        results[name] = ds
        if not args.no_certify:
            cert = _certify(es, pairs, len(sets), args.seed, name)
            if cert is None:
                uncertified.append(name)
            else:
                certs[name] = cert
        enough = [k for k, n in es.counts.items() if n >= 10][:50]
        if enough:
            ctrl = sanity_controls(
                es,
                enough,
                n_permutations=args.control_permutations,
                rng=args.seed,
                progress=False,
            )
            h0.extend(ctrl["mmd2"].values.tolist())
    stacked = concat_conditions(results)  # type: ignore[arg-type]
    fields = [condition_fields(n) for n in stacked["condition"].values]
    stacked = stacked.assign_coords(
        {k: ("condition", [f[k] for f in fields]) for k in ("encoder", "dataset", "generator")}
    )
    files = [write_netcdf(stacked, out / "results.nc")]
    files.append(write_csv(pair_frame(stacked), out / "pairs.csv"))
    t1 = table1(stacked)
    files.append(write_csv(t1, out / "table1.csv"))
    files.append(write_text(markdown(t1), out / "table1.md"))
    t2 = None
    if certs or uncertified:
        t2 = _with_uncertified(table2(certs) if certs else None, uncertified)
        files.append(write_csv(t2, out / "table2.csv"))
        files.append(write_text(markdown(t2), out / "table2.md"))
    text = _conditions_markdown(results, certs, t1, t2, n_pairs)
    files.append(write_text(text, out / "summary.md"))
    if h0 and "rocht_auc" in stacked:
        fig = plot_figure3(stacked, median_auc_rocs(stacked, sets, rng=args.seed), h0)
        path = out / "figure3.png"
        write_atomic(path, lambda tmp: fig.savefig(tmp, format="png", dpi=120))
        files.append(path)
    say(markdown(t1))
    if len(set(dims.values())) > 1:
        say(f"note: embedding dimensions differ between conditions: {dims}")
    say("wrote:\n" + "\n".join(f"  {f}" for f in files))
    return 0


def _condition_names(args: argparse.Namespace, paths: list[Path]) -> dict[Path, str]:
    """Each input's condition name: its file stem, or the ``--manifest`` entry; all distinct."""
    from idaudit.audits._tables import read_manifest

    names: dict[Path, str] = {p: p.stem for p in paths}
    if args.manifest:
        mapping = read_manifest(args.manifest)
        missing = [p.name for p in paths if p.name not in mapping]
        if missing:
            raise InvalidInputError(f"`--manifest` names no condition for {', '.join(missing)}.")
        names = {p: mapping[p.name] for p in paths}
    if len(set(names.values())) < len(names):
        raise InvalidInputError(
            "`embeddings` must give each condition once; two inputs share the name "
            f"{sorted(n for n in names.values() if list(names.values()).count(n) > 1)[0]!r}."
        )
    return names


def _with_uncertified(t2: Any, names: list[str]) -> Any:
    """Table 2 with a "not certified: too few rows" row for each condition left uncertified."""
    import pandas as pd

    from idaudit.audits._tables import condition_fields

    if not names:
        return t2
    columns = (
        list(t2.columns)
        if t2 is not None
        else ["condition", "encoder", "dataset", "generator", "test_n_per_class", "auc",
              "epsilon_lb", "epsilon_lb_ceiling", "n_positive", "n_above_1", "n_at_ceiling",
              "n_pairs"]
    )  # fmt: skip
    rows = [
        {
            **dict.fromkeys(columns, "–"),
            "condition": name,
            **condition_fields(name),
            "epsilon_lb": "not certified: too few rows",
            "n_pairs": 0,
        }
        for name in names
    ]
    frame = pd.DataFrame([*(t2.to_dict("records") if t2 is not None else []), *rows])
    frame = frame[columns]
    frame.attrs = dict(t2.attrs) if t2 is not None else {}
    return frame


def _conditions_markdown(
    results: dict[str, Any], certs: dict[str, Any], t1: Any, t2: Any, n_pairs: int
) -> str:
    """summary.md of several conditions: verdict, warnings, tables, then the explanations."""
    from idaudit.pipeline.report import audit_document

    context = [f"At most {n_pairs} pairs per condition.", ""]
    return audit_document(results, certs, context=context, table2=t2)


def _certify(es: Any, pairs: list[Any], n_families: int, seed: int, name: str) -> Any:
    """Seed 000's Table 2 protocol: five vertex-disjoint pairs, fewer when they do not exist.

    Only the pairs whose identities both have the rows the certifier needs are candidates;
    when no pair has, the condition is not certified (``None``, with a warning) and the
    other conditions' outputs are still written.
    """
    from idaudit import ReservedTestCertifier

    certifier = ReservedTestCertifier(n_select=5, n_families=n_families, rng=seed, progress=False)
    need = certifier.min_rows()
    usable = [p for p in pairs if min(es.counts[p[0]], es.counts[p[1]]) >= need]
    if not usable:
        warnings.warn(
            f"Condition {name!r} is not certified: no audited pair has {need} rows on each "
            f"identity, which the reserved-test certifier needs (fewest rows here: "
            f"{min(es.counts.values())}).",
            IdauditWarning,
            stacklevel=2,
        )
        return None
    if len(usable) < len(pairs):
        say(
            f"note ({name}): {len(pairs) - len(usable)} of the {len(pairs)} pairs have an "
            f"identity with fewer than {need} rows; the certifier's candidates are the other "
            f"{len(usable)}"
        )
    pairs = usable
    certifier.set_params(n_candidates=len(pairs))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", IdauditWarning)
        cert = certifier.fit(es, pairs).certificates_
    for w in caught:
        if "vertex-disjoint" not in str(w.message):  # said below, in the paper's terms
            say(f"note ({name}): {w.message}")
    n_select = int(cert.attrs["n_select"])
    if n_select < 5:
        say(f"note ({name}): {n_select} vertex-disjoint pair(s) certified (5 in the paper)")
    return cert
