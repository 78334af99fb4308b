"""Flags and checks every ``idaudit`` sub-command shares (one home, so messages stay alike)."""

from __future__ import annotations

import argparse
import errno
import os
import sys
from pathlib import Path

from idaudit.exceptions import InvalidInputError

__all__ = ["add_quiet", "at_least", "check_device", "inside", "out_dir", "plural", "say"]


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
    out = Path(path)
    missing: list[Path] = []
    probe = out
    while not probe.exists() and probe != probe.parent:
        missing.append(probe)
        probe = probe.parent
    try:
        for folder in reversed(missing):
            try:
                folder.mkdir(mode=0o700)  # the umask can only narrow it
            except FileExistsError:
                if not folder.is_dir():
                    raise
        if not out.is_dir():
            raise NotADirectoryError(errno.ENOTDIR, "it is not a folder")
        if not os.access(out, os.W_OK | os.X_OK):
            raise PermissionError(errno.EACCES, "it is not writable")
    except OSError as exc:
        raise InvalidInputError(
            f"`{flag}` must be a folder that can be created and written to; {str(out)!r}: "
            f"{exc.strerror or exc}."
        ) from None
    return out


def say(text: str) -> None:
    sys.stdout.write(text + "\n")


def plural(n: int, one: str, many: str) -> str:
    return f"{n} {one if n == 1 else many}"
