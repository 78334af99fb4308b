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
import contextlib
import importlib
import os
import re
import signal
import sys
import threading
import warnings
from collections.abc import Iterator, Sequence
from typing import Any, TextIO

__all__ = ["main"]

#: One module per sub-command, in the order ``idaudit --help`` lists them; each exposes
#: ``add_parser(subparsers)``, which registers the command with ``set_defaults(run=...)``.
_COMMAND_MODULES: tuple[str, ...] = (
    "idaudit.cli._demo",
    "idaudit.cli._audit",
    "idaudit.cli._certify",
    "idaudit.cli._embed",
    "idaudit.cli._privacy",
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
        Exit status: 0 on success, 2 on a usage or input error (the message goes to stderr),
        130 when interrupted, 141 (128 + SIGPIPE, as the shell reports a Unix tool the pipe
        closed on) when the reader of standard output went away, as in ``idaudit ... | head``;
        the files are complete either way, and nothing is printed about the closed pipe.
        Stopped by SIGTERM or SIGHUP, it exits with 128 + the signal's number, like an
        interrupt: folders it made and left empty are removed.
    """
    from idaudit.cli._common import remove_empty_outputs

    previous = _handle_termination()
    try:
        return _main(argv)
    except BrokenPipeError:
        _silence_stdout()
        return 141
    finally:
        remove_empty_outputs()  # a run that wrote nothing leaves no empty folder behind
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def _handle_termination() -> dict[int, Any]:
    """Turn SIGTERM and SIGHUP into SystemExit, so cleanup runs; return the old handlers."""
    if threading.current_thread() is not threading.main_thread():
        return {}  # handlers can only be set from the main thread

    def terminate(signum: int, frame: Any) -> None:
        raise SystemExit(128 + signum)

    previous = {}
    for name in ("SIGTERM", "SIGHUP"):
        signum = getattr(signal, name, None)
        if signum is not None:
            previous[signum] = signal.signal(signum, terminate)
    return previous


def _silence_stdout() -> None:
    """Point standard output at the null device, so the exit flush does not fail again."""
    try:
        fd = sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):  # replaced by a stream without a descriptor
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, fd)
    os.close(devnull)


def _main(argv: Sequence[str] | None) -> int:
    parser = _parser()
    args, extra = parser.parse_known_args(argv)
    command = _subparsers(parser)[args.command]
    if extra:
        # a misspelled flag of a sub-command: that sub-command's usage, not the top level's
        command.error(f"unrecognized arguments: {' '.join(extra)}")
    try:
        with _warnings_between_bars(args.command):
            status: int = args.run(args)
    except KeyboardInterrupt:
        # embed says itself what its cache holds; the demo caches its encoded faces too, and
        # a re-run resumes from them only once something is there
        resumes = (
            ", and a re-run resumes from the embedding cache"
            if args.command == "demo" and _cache_holds_faces(args.out)
            else ""
        )
        sys.stderr.write(
            f"idaudit {args.command}: interrupted; files already written are complete "
            f"(every file is written atomically){resumes}.\n"
        )
        return 130
    except BrokenPipeError:
        raise  # not an input error: main() exits quietly
    except (ValueError, TypeError, OSError, ImportError) as exc:
        # input errors carry a message naming the argument and the rule, and file-system
        # errors (missing input, an --out that cannot be created) their path; no traceback
        parser.exit(2, f"idaudit {args.command}: error: {_as_flags(str(exc), command)}\n")
    return status


@contextlib.contextmanager
def _warnings_between_bars(command: str) -> Iterator[None]:
    """Print each warning on a line of its own, never on the tail of a progress bar.

    While a sub-command runs, a warning goes through ``tqdm.write``, which clears the bars,
    writes the line and draws them again; idaudit's own warnings read as the command's
    ``idaudit COMMAND: warning: ...`` lines.
    """
    previous = warnings.showwarning

    def show(
        message: Warning | str,
        category: type[Warning],
        filename: str,
        lineno: int,
        file: TextIO | None = None,
        line: str | None = None,
    ) -> None:
        from tqdm import tqdm

        from idaudit.exceptions import IdauditWarning

        if issubclass(category, IdauditWarning):
            text = f"idaudit {command}: warning: {message}"
        else:
            text = warnings.formatwarning(message, category, filename, lineno, line).rstrip()
        tqdm.write(text, file=sys.stderr if file is None else file)

    warnings.showwarning = show
    try:
        yield
    finally:
        warnings.showwarning = previous


def _cache_holds_faces(out: str) -> bool:
    """Whether the demo's embedding cache, ``OUT/.cache``, holds any stored result."""
    cache = os.path.join(out, ".cache")
    if not os.path.isdir(cache):
        return False  # not made yet (EmbeddingCache would create it)
    from idaudit.faces import EmbeddingCache

    return len(EmbeddingCache(cache)) > 0


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}  # pragma: no cover - the parser always has sub-commands


#: Library argument names whose flag is not simply the name with dashes.
_RENAMED = {"embed": {"path": "--arcface-dir", "weights": "--arcface-dir"}}


def _as_flags(message: str, command: argparse.ArgumentParser) -> str:
    """Rewrite the library's `` `argument` `` names in an error message as the command's flags.

    ``n_select`` becomes ``--n-select`` when the sub-command has that flag, so a user of the
    shell reads the flag they typed, not a Python parameter.

    Examples
    --------
    >>> import argparse
    >>> from idaudit.cli import _as_flags
    >>> p = argparse.ArgumentParser(prog="idaudit certify")
    >>> _ = p.add_argument("--n-select")
    >>> _as_flags("`n_select` must be >= 1; got 0.", p)
    '`--n-select` must be >= 1; got 0.'
    """
    flags = {o for a in command._actions for o in a.option_strings}
    renamed = _RENAMED.get(command.prog.split()[-1], {})

    def swap(match: re.Match[str]) -> str:
        name = match.group(1)
        flag = "--" + name.replace("_", "-")
        if name in renamed:
            return f"`{renamed[name]}`"
        return f"`{flag}`" if flag in flags else match.group(0)

    return re.sub(r"`([a-z][a-z0-9_]*)`", swap, message)


def _parser() -> argparse.ArgumentParser:
    from idaudit._version import __version__

    parser = argparse.ArgumentParser(
        prog="idaudit",
        description=(
            "How much identity survives a face pipeline: identity-level differential-privacy "
            "audits (four routes from embeddings to epsilon, certificates, a known-truth "
            "benchmark), a memorisation check and embedding inversion, all offline."
        ),
    )
    parser.add_argument("--version", action="version", version=f"idaudit {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    for module in _COMMAND_MODULES:
        importlib.import_module(module).add_parser(sub)
    return parser


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
