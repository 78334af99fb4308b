"""Flags and checks every ``idaudit`` sub-command shares (one home, so messages stay alike)."""

from __future__ import annotations

import argparse
import os
import sys
import warnings
from pathlib import Path
from typing import Any

from idaudit.exceptions import IdauditWarning, InvalidInputError

__all__ = [
    "add_input",
    "add_min_rows",
    "add_quiet",
    "at_least",
    "check_device",
    "check_min_rows",
    "describe",
    "inside",
    "keep_min_rows",
    "load_input",
    "min_rows_attrs",
    "min_rows_line",
    "out_dir",
    "plural",
    "relay",
    "say",
]

#: How many dropped identities are named in the output (all of them are counted).
_N_NAMED = 10


def add_quiet(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--quiet", action="store_true", help="no progress bars")


def at_least(value: int, flag: str, minimum: int) -> None:
    if value < minimum:
        raise InvalidInputError(f"`{flag}` must be >= {minimum}; got {value}.")


def inside(value: float, flag: str, low: float, high: float, *, closed: str = "neither") -> None:
    left = value >= low if closed in ("left", "both") else value > low
    right = value <= high if closed in ("right", "both") else value < high
    if not (left and right):  # NaN fails both comparisons
        lb = "[" if closed in ("left", "both") else "("
        rb = "]" if closed in ("right", "both") else ")"
        raise InvalidInputError(f"`{flag}` must be in {lb}{low:g}, {high:g}{rb}; got {value!r}.")


def check_device(device: str) -> None:
    """Refuse a ``--device`` that cannot run here, before any input is read (no fallback)."""
    if device == "cpu":
        return  # always there: no need to load torch to say so
    import torch

    from idaudit._device import resolve_device

    try:
        dev = torch.device(device)
    except RuntimeError:
        dev = None
    if dev is None or dev.type not in ("cpu", "cuda"):
        raise InvalidInputError(f"`--device` must be cpu, cuda or cuda:<i>; got {device!r}.")
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise InvalidInputError(
            f"`--device` {device} needs CUDA, which is not available here "
            "(torch.cuda.is_available() is False); use --device cpu."
        )
    resolve_device(dev)  # the library's own rule, which the computation applies again
    if dev.type == "cuda" and dev.index is not None and dev.index >= torch.cuda.device_count():
        raise InvalidInputError(
            f"`--device` {device} names CUDA device {dev.index}, but only "
            f"{torch.cuda.device_count()} is visible here (cuda:0 to "
            f"cuda:{torch.cuda.device_count() - 1})."
        )


def out_dir(path: str | Path, flag: str = "--out") -> Path:
    """Create the output folder and its missing parents (0700), or check an existing one.

    Called before any computation, so an unusable folder fails in seconds, not after the
    audit. Only folders created here get a mode; an existing folder keeps its own.
    """
    from idaudit._results import private_dir

    out = Path(path)
    missing = [level for level in (out, *out.parents) if not level.exists()]
    try:
        private_dir(out, name=flag)
        _CREATED.extend((out, top) for top in missing[-1:])
        reason = None if os.access(out, os.W_OK | os.X_OK) else "it is not writable"
    except InvalidInputError:  # something that is not a folder is in the way: say what
        blocker = next(p for p in (out, *out.parents) if p.exists() or p.is_symlink())
        reason = "it is not a folder" if blocker == out else f"{str(blocker)!r} is not a folder"
    except OSError as exc:
        reason = exc.strerror or str(exc)
    if reason is not None:
        raise InvalidInputError(
            f"`{flag}` must be a folder that can be created and written to; {str(out)!r}: {reason}."
        )
    return out


#: (folder, highest level this run created for it) of every folder out_dir made, so a command
#: that stops on an error leaves no empty folder behind (remove_empty_outputs).
_CREATED: list[tuple[Path, Path]] = []


def remove_empty_outputs() -> None:
    """Remove the folders this run created that are still empty, deepest level first.

    Called when a command stops on an input error or an interrupt: a folder holding a
    written file is kept (every file is complete), and one that existed before is never
    touched.
    """
    while _CREATED:
        out, top = _CREATED.pop()
        for level in (out, *out.parents):
            try:
                level.rmdir()  # only an empty folder goes
            except OSError:
                break
            if level == top:
                break


def say(text: str) -> None:
    sys.stdout.write(text + "\n")


def plural(n: int, one: str, many: str) -> str:
    return f"{n} {one if n == 1 else many}"


# -- the embeddings input of `audit` and `certify` ---------------------------------------------


def add_input(parser: argparse.ArgumentParser, *, many: bool = False) -> None:
    if many:
        parser.add_argument(
            "embeddings",
            nargs="+",
            metavar="EMBEDDINGS",
            help="CSV, NPZ or Parquet file(s) of labelled embeddings, or folders of them; "
            "several files are several conditions (named by file stem or --manifest)",
        )
    else:
        parser.add_argument("embeddings", help="CSV, NPZ or Parquet file of labelled embeddings")
    parser.add_argument("--label-column", help="CSV/Parquet column holding identity labels")
    parser.add_argument(
        "--vector-column",
        nargs="+",
        metavar="COLUMN",
        help="CSV/Parquet column(s) holding the vectors: one column of list-like vectors, "
        "several numeric columns (one coordinate each), a pattern such as 'f*', or a range "
        "'f0:f127' in file order (default: every other column, leaving out columns of text)",
    )
    parser.add_argument("--embeddings-key", default="embeddings", help="NPZ array of vectors")
    parser.add_argument("--labels-key", default="labels", help="NPZ array of labels")


def add_min_rows(parser: argparse.ArgumentParser, need: str) -> None:
    parser.add_argument(
        "--min-rows",
        type=int,
        metavar="N",
        help="drop identities with fewer than N rows before pairs are sampled; they are "
        f"counted and named in the output (default and smallest allowed: what {need})",
    )


def check_min_rows(value: int | None, need: int, who: str) -> int:
    """``--min-rows``, defaulting to ``need``, the fewest rows per identity ``who``."""
    if value is None:
        return need
    if value < need:
        raise InvalidInputError(
            f"`--min-rows` must be >= {need}, the fewest rows per identity {who}; got {value}."
        )
    return value


def load_input(args: argparse.Namespace, path: str | Path | None = None) -> Any:
    """Read the :class:`~idaudit.data.EmbeddingSet` at ``path`` (default: ``embeddings``)."""
    from idaudit.data import EmbeddingSet

    path = Path(args.embeddings if path is None else path)
    if not path.is_file():
        raise FileNotFoundError(f"`embeddings` must be an existing file; got {str(path)!r}.")
    # the dropped and failed rows are counted in the input's description (describe), so the
    # library's warnings about them would say the same thing twice; others are said here
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", IdauditWarning)
        es = EmbeddingSet.read(
            path,
            label_column=args.label_column,
            vector_column=_vector_columns(args.vector_column),
            embeddings_key=args.embeddings_key,
            labels_key=args.labels_key,
        )
    for w in caught:
        if not issubclass(w.category, IdauditWarning):
            warnings.warn(w.message, w.category, stacklevel=2)  # not ours: pass it on
        elif not str(w.message).startswith("EmbeddingSet"):
            say(f"note: {_input_flags(str(w.message))}")
    return es


#: The readers' parameters that :func:`add_input` offers as flags.
_INPUT_FLAGS = ("label_column", "vector_column", "embeddings_key", "labels_key")


def _input_flags(message: str) -> str:
    """Name the flags of :func:`add_input` in a reader's note, not the Python parameters."""
    for name in _INPUT_FLAGS:
        message = message.replace(f"`{name}`", f"`--{name.replace('_', '-')}`")
    return message


def _vector_columns(value: list[str] | None) -> str | list[str] | None:
    if value is None or len(value) > 1:
        return value
    return value[0]


def input_provenance(path: str | Path) -> dict[str, str]:
    """Return what an embeddings file says about itself, as result attributes.

    Its path, and for ``.npz`` files written by ``idaudit embed`` the encoder's name and how
    many source photos it lists.
    """
    import numpy as np

    out = {"input_path": str(path)}
    if str(path).lower().endswith(".npz"):
        try:
            with np.load(path, allow_pickle=False) as archive:
                if "encoder" in archive.files:
                    out["encoder"] = str(archive["encoder"])
                if "sources" in archive.files:
                    out["n_sources"] = str(len(archive["sources"]))
        except (OSError, ValueError):  # the reader has already said what is wrong
            pass
    return out


def describe(es: Any) -> str:
    dropped = ", ".join(f"{k}: {v}" for k, v in es.dropped_.items() if v) or "none"
    if es.failures == "keep":
        reasons = ", ".join(f"{k}: {v}" for k, v in es.failure_reasons_.items() if v) or "none"
        failed = f"failed {es.n_failed_} ({reasons}), kept as failed outputs"
    else:
        failed = "failed rows dropped (certificates condition on success)"
    return (
        f"{plural(len(es), 'row', 'rows')}, "
        f"{plural(len(es.identities), 'identity', 'identities')}, dim {es.dim}; dropped "
        f"{es.n_dropped_} ({dropped}); {failed}; exact duplicates {es.n_duplicates_}; "
        f"sha256 {es.sha256[:12]}…"
    )


def keep_min_rows(es: Any, min_rows: int) -> tuple[Any, dict[Any, int]]:
    """Keep identities with at least ``min_rows`` rows; also return each dropped one's rows."""
    n_kept = sum(n >= min_rows for n in es.counts.values())
    if n_kept < 2:
        if n_kept < len(es.identities):
            counts = sorted(es.counts.items(), key=lambda kv: -kv[1])[:5]
            shown = ", ".join(f"{k!r}: {n}" for k, n in counts)
            more = ", ..." if len(es.counts) > 5 else ""
            raise InvalidInputError(
                f"`--min-rows` {min_rows} leaves {n_kept} of the {len(es.identities)} "
                f"identities; at least 2 are needed. Rows per identity, largest first: "
                f"{shown}{more}."
            )
        raise InvalidInputError(
            f"`embeddings` must hold at least 2 identities; got {len(es.identities)}."
        )
    kept: tuple[Any, dict[Any, int]] = es.filter(min_rows=min_rows)
    return kept


def _named(small: dict[Any, int]) -> str:
    shown = ", ".join(
        f"{label} ({plural(n, 'row', 'rows')})" for label, n in list(small.items())[:_N_NAMED]
    )
    return shown + (f", and {len(small) - _N_NAMED} more" if len(small) > _N_NAMED else "")


def min_rows_line(min_rows: int, small: dict[Any, int], *, counted: str = "rows") -> str:
    """One sentence saying which identities ``--min-rows`` dropped (or that none were).

    ``small`` maps each dropped identity to its rows; ``counted`` names what ``--min-rows``
    counted (``"distinct rows"`` when duplicates are collapsed).
    """
    if not small:
        return f"Identities with fewer than {min_rows} {counted} (`--min-rows`): none."
    return (
        f"Dropped {plural(len(small), 'identity', 'identities')} with fewer than {min_rows} "
        f"{counted} (`--min-rows`) before pairs were chosen, "
        f"{plural(sum(small.values()), 'row', 'rows')} in all: {_named(small)}."
    )


def min_rows_attrs(min_rows: int, small: dict[Any, int]) -> dict[str, Any]:
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


def relay(caught: list[warnings.WarningMessage], command: str) -> list[str]:
    """Print idaudit's warnings as one line each on stderr; pass the others on unchanged."""
    notes: list[str] = []
    for w in caught:
        if issubclass(w.category, IdauditWarning):
            notes.append(str(w.message))
            sys.stderr.write(f"idaudit {command}: warning: {w.message}\n")
        else:
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno, source=w.source)
    return notes
