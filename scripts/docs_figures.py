"""Regenerate every figure the docs show, and record which code drew it.

Run from the repository root::

    python scripts/docs_figures.py [KEEP_DIR] [--no-demo]   # the full demo, then figure 3

It writes into ``docs/img/``:

* ``epsilon_vs_strength.png`` and ``contact_sheet.png``: copied from a full ``idaudit demo`` run
  (its default configuration, the one the docs describe);
* ``figure3_synthetic.png``: ``idaudit audit csvs/ --out audit/ --n-pairs 20`` on three
  synthetic per-condition CSVs (12 identities x 30 rows, 16 dimensions, growing noise);
* ``figures.json``: for each figure, the SHA-256 of the PNG and of the source of the code that
  draws it (:data:`DRAWN_BY`). ``tests/unit/test_docs_figures.py`` recomputes the second and
  fails when that code changed after the figure was made: run this script again then.
"""

from __future__ import annotations

import hashlib
import importlib
import inspect
import json
import pkgutil
import shutil
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
IMG = ROOT / "docs" / "img"

#: What draws each figure: the modules (``module``; a package with every module in it) or
#: functions and classes (``module:qualname``) whose source decides what it shows: the demo,
#: the anonymisers, the plotting package, the audit command's condition runner.
DRAWN_BY: dict[str, tuple[str, ...]] = {
    # whole modules where a figure rests on many helpers (an axis label, a colour, a
    # condition's name): a change anywhere in them marks the figure stale, never none
    "epsilon_vs_strength.png": (
        "idaudit.demo._faces",
        "idaudit.pipeline._images",
        "idaudit.plotting",
    ),
    "contact_sheet.png": (
        "idaudit.demo._faces",
        "idaudit.pipeline._images",
        "idaudit.plotting",
    ),
    "figure3_synthetic.png": (
        "docs_figures:write_conditions",
        "idaudit.cli._audit:_run_conditions",
        "idaudit.plotting",
    ),
}


def module_sources(name: str) -> list[tuple[str, str]]:
    """(name, source) of the module ``name``, then, for a package, of each module in it."""
    module = importlib.import_module(name)
    found = [(name, inspect.getsource(module))]
    inside = pkgutil.walk_packages(getattr(module, "__path__", []), prefix=f"{name}.")
    for info in sorted(inside, key=lambda info: info.name):
        found.append((info.name, inspect.getsource(importlib.import_module(info.name))))
    return found


def code_sha256(names: tuple[str, ...]) -> str:
    """SHA-256 over the source of every ``module:qualname`` or whole ``module`` in ``names``.

    A whole package counts with every module in it: a change to any of them changes the hash.
    """
    digest = hashlib.sha256()
    for name in names:
        module_name, _, qualname = name.partition(":")
        if not qualname:  # a whole module, or a package and its modules
            for part, source in module_sources(module_name):
                digest.update(part.encode())
                digest.update(source.encode())
            continue
        obj: object = (
            sys.modules[__name__]
            if module_name == "docs_figures"
            else importlib.import_module(module_name)
        )
        for part in qualname.split("."):
            obj = getattr(obj, part)
        digest.update(name.encode())
        digest.update(inspect.getsource(obj).encode())  # type: ignore[arg-type]
    return digest.hexdigest()


def file_sha256(path: Path) -> str:
    """SHA-256 of a file's bytes."""
    return hashlib.sha256(path.read_bytes()).hexdigest()


def write_conditions(folder: Path) -> None:
    """Three conditions of 12 identities x 30 rows in 16 dimensions, noise growing."""
    import pandas as pd

    gen = np.random.default_rng(3)
    folder.mkdir(parents=True)
    centres = gen.standard_normal((12, 16))
    labels = np.repeat([f"p{i + 1}" for i in range(12)], 30)
    names = ("arcface_vggface2_ff", "arcface_vggface2_id", "facenet_celeba_ff")
    for name, noise in zip(names, (2.0, 3.0, 3.5), strict=True):
        emb = centres[np.repeat(np.arange(12), 30)] + noise * gen.standard_normal((360, 16))
        frame = pd.DataFrame(emb).add_prefix("e").assign(identity=labels)
        frame.to_csv(folder / f"{name}.csv", index=False)


def main(keep: Path | None = None, *, demo: bool = True) -> None:
    """Draw the figures into docs/img/ and record their hashes in figures.json.

    ``keep``: a folder to keep the demo's and the audit's whole output in (their report.md
    holds the numbers docs/examples.md quotes); by default they are written to a temporary one.
    ``demo=False`` (``--no-demo``) redraws figure 3 only and keeps the demo's two figures.
    """
    from idaudit.cli import main as idaudit
    from idaudit.demo import run_demo

    figures = {}
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp) if keep is None else keep
        if demo:
            run_demo(work / "demo", progress=False)
            for name in ("epsilon_vs_strength.png", "contact_sheet.png"):
                shutil.copyfile(work / "demo" / name, IMG / name)
        write_conditions(work / "csvs")
        code = idaudit(
            ["audit", str(work / "csvs"), "--out", str(work / "audit"), "--n-pairs", "20"]
        )
        if code != 0:
            raise SystemExit(f"idaudit audit exited with {code}")
        shutil.copyfile(work / "audit" / "figure3.png", IMG / "figure3_synthetic.png")
    for name, drawn_by in DRAWN_BY.items():
        figures[name] = {
            "sha256": file_sha256(IMG / name),
            "code_sha256": code_sha256(drawn_by),
            "drawn_by": list(drawn_by),
        }
    (IMG / "figures.json").write_text(json.dumps(figures, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {', '.join(figures)} and figures.json into {IMG}")


if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if a != "--no-demo"]
    main(Path(args[0]) if args else None, demo="--no-demo" not in sys.argv[1:])
