"""Subjects (patients, persons) of the images: checks, permutation units and file mappings.

Photos of one subject are not exchangeable with photos of other subjects: they share the face.
The permutation tests and the split-half interval of this package therefore move whole
subjects when subjects are given, and each image is its own subject otherwise.
"""

from __future__ import annotations

import csv
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from idaudit.exceptions import InvalidInputError

__all__ = [
    "check_disjoint",
    "check_set_subjects",
    "check_subjects",
    "label_codes",
    "read_subject_map",
    "subject_regex",
    "subjects_for_files",
    "unit_codes",
]

#: Accepted headers of a subject-mapping file's two columns.
FILE_COLUMNS = ("file", "path", "filename", "image")
SUBJECT_COLUMNS = ("subject", "patient", "person", "identity")


def check_subjects(labels: Any, n: int, name: str) -> npt.NDArray[Any] | None:
    """Return one subject label per image as an array, or ``None`` (each image its own).

    Raises
    ------
    InvalidInputError
        When ``labels`` does not hold one label per image, or holds a missing label.
    """
    if labels is None:
        return None
    arr = np.asarray(labels, dtype=object)
    if arr.shape != (n,):
        raise InvalidInputError(f"`{name}` must hold one subject per image ({n}); got {arr.shape}.")
    if any(v is None or (isinstance(v, float) and np.isnan(v)) for v in arr):
        raise InvalidInputError(f"`{name}` holds a missing subject (None or NaN).")
    return arr


def check_disjoint(train: npt.NDArray[Any] | None, heldout: npt.NDArray[Any] | None) -> None:
    """Refuse a subject that has images in both the training and the held-out set.

    Seed 003: the held-out partition must be disjoint from the training partition at the
    patient level; a patient on both sides makes held-out images look like training images.
    """
    if train is None or heldout is None:
        return
    common = sorted(set(train.tolist()) & set(heldout.tolist()), key=str)
    if common:
        shown = ", ".join(repr(s) for s in common[:5]) + (", ..." if len(common) > 5 else "")
        raise InvalidInputError(
            f"{len(common)} subject(s) have images in both the training and the held-out set "
            f"({shown}); the held-out partition must be disjoint from the training partition "
            "at the subject level (seed 003). Move each subject's images to one side."
        )


def check_set_subjects(
    subjects: Any, sizes: tuple[int, int, int]
) -> tuple[npt.NDArray[Any] | None, npt.NDArray[Any] | None, npt.NDArray[Any] | None]:
    """Check ``(train, heldout, synthetic)`` subjects, one label per row (or ``None``).

    Raises
    ------
    InvalidInputError
        When ``subjects`` is not three entries, a set's labels do not fit its rows, or a
        subject has images in both the training and the held-out set.
    """
    if subjects is None:
        return None, None, None
    if not isinstance(subjects, tuple | list) or len(subjects) != 3:
        raise InvalidInputError(
            "`subjects` must be three label arrays or None (train, heldout, synthetic); "
            f"got {subjects!r:.80}."
        )
    names = ("subjects[0] (train)", "subjects[1] (heldout)", "subjects[2] (synthetic)")
    t, h, s = (check_subjects(x, n, nm) for x, n, nm in zip(subjects, sizes, names, strict=True))
    check_disjoint(t, h)
    return t, h, s


def label_codes(labels: npt.NDArray[Any] | None, n: int) -> npt.NDArray[np.int64]:
    """Code ``0..g-1`` of each image's subject (sorted labels); ``arange(n)`` for ``None``."""
    if labels is None:
        return np.arange(n, dtype=np.int64)
    _, code = np.unique(labels.astype(str), return_inverse=True)
    return code.astype(np.int64).reshape(-1)


def unit_codes(
    subjects: Sequence[npt.NDArray[Any] | None], sizes: Sequence[int]
) -> tuple[npt.NDArray[np.int64], int]:
    """Integer permutation unit of every image of the concatenated sets, and the unit count.

    Sets are numbered apart: a label shared by two sets names two units (the caller refuses
    the cases where it would mean one subject, see :func:`check_disjoint`). An image without a
    subject (``None`` for its set) is a unit of its own.
    """
    codes, offset = [], 0
    for labels, n in zip(subjects, sizes, strict=True):
        code = label_codes(labels, n)
        codes.append(code + offset)
        offset += int(code.max()) + 1 if n else 0
    return np.concatenate(codes), offset


def subject_regex(pattern: str) -> re.Pattern[str]:
    """Compile a ``subject_pattern``, or say why it is not a regex."""
    try:
        return re.compile(pattern)
    except re.error as exc:
        raise InvalidInputError(
            f"`subject_pattern` is not a valid regex: {exc}; got {pattern!r}."
        ) from None


def read_subject_map(path: str | Path) -> dict[str, str]:
    """Read a CSV with a file column and a subject column into ``{file: subject}``.

    The file column (``file``, ``path``, ``filename`` or ``image``) holds a path relative to
    the split root (``cohort/name.png``) or a bare file name; the subject column
    (``subject``, ``patient``, ``person`` or ``identity``) the subject id.

    Raises
    ------
    InvalidInputError
        A missing file, unknown columns, an empty subject, or one file given two subjects.
    """
    path = Path(path)
    if not path.is_file():
        raise InvalidInputError(f"`subjects` file not found: {str(path)!r}.")
    with path.open(newline="", encoding="utf-8-sig") as handle:
        reader = csv.DictReader(handle)
        fields = [f.strip().lower() for f in reader.fieldnames or []]
        file_col = next((c for c in FILE_COLUMNS if c in fields), None)
        subject_col = next((c for c in SUBJECT_COLUMNS if c in fields), None)
        if file_col is None or subject_col is None:
            raise InvalidInputError(
                f"`subjects` file {path.name!r} must have a file column ({', '.join(FILE_COLUMNS)})"
                f" and a subject column ({', '.join(SUBJECT_COLUMNS)}); got columns {fields!r}."
            )
        raw = reader.fieldnames or []
        key_of = {f.strip().lower(): f for f in raw}
        mapping: dict[str, str] = {}
        for line, row in enumerate(reader, start=2):
            name = (row[key_of[file_col]] or "").strip().replace("\\", "/")
            subject = (row[key_of[subject_col]] or "").strip()
            if not name or not subject:
                raise InvalidInputError(
                    f"`subjects` file {path.name!r}, line {line}: empty file or subject."
                )
            if mapping.get(name, subject) != subject:
                raise InvalidInputError(
                    f"`subjects` file {path.name!r}: {name!r} is given two subjects "
                    f"({mapping[name]!r} and {subject!r})."
                )
            mapping[name] = subject
    return mapping


def subjects_for_files(
    relative: Sequence[str], *, mapping: dict[str, str] | None = None, pattern: str | None = None
) -> list[str]:
    """Subject of each file, by a mapping (relative path, else file name) or a regex.

    Parameters
    ----------
    relative : sequence of str
        Paths relative to the split root, ``/``-separated (``cohort/name.png``).
    mapping : dict, optional
        From :func:`read_subject_map`.
    pattern : str, optional
        Regex searched in the file name; its first capture group (or the group named
        ``subject``) is the subject.

    Raises
    ------
    InvalidInputError
        A file missing from the mapping, a regex without a capture group, or a file name the
        regex does not match.
    """
    if (mapping is None) == (pattern is None):
        raise InvalidInputError("give exactly one of `mapping` and `pattern`.")
    if mapping is not None:
        out, missing = [], []
        for rel in relative:
            subject = mapping.get(rel, mapping.get(rel.rsplit("/", 1)[-1]))
            if subject is None:
                missing.append(rel)
            out.append(subject or "")
        if missing:
            raise InvalidInputError(
                f"{len(missing)} file(s) missing from the `subjects` mapping: "
                + ", ".join(missing[:5])
                + (", ..." if len(missing) > 5 else "")
                + " (give a row for every image, by path relative to the split root or by name)."
            )
        return out
    assert pattern is not None
    regex = subject_regex(pattern)
    if regex.groups == 0:
        raise InvalidInputError(
            f"`subject_pattern` must have a capture group (the subject); got {pattern!r}."
        )
    group: int | str = "subject" if "subject" in regex.groupindex else 1
    out = []
    for rel in relative:
        name = rel.rsplit("/", 1)[-1]
        m = regex.search(name)
        if m is None or not m.group(group):
            raise InvalidInputError(
                f"`subject_pattern` {pattern!r} does not match the file name {name!r} "
                f"({rel}); every image needs a subject."
            )
        out.append(m.group(group))
    return out
