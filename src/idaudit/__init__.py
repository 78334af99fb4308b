"""idaudit: measure how much identity survives a face pipeline.

Three questions, one library:

* **Audit** (:mod:`idaudit.audits`, :mod:`idaudit.certify`): is an image-to-image face
  generator identity-level (ε, δ)-DP? Four routes from embeddings to ε (GaussMech, KDE-LR,
  MMD-TV, ROC-HT), reserved-test and sequential certificates, sanity controls, benchmark
  mechanisms with a known ε, and :func:`audit_generator` from images to an audit.
* **Memorisation** (:mod:`idaudit.memorization`): do a generator's samples sit closer to its
  training faces than held-out faces do? Calibrated flagging, nearest-neighbour adversarial
  accuracy, and ``run_privacy_check`` from folders of images to a report.
* **Inversion** (:mod:`idaudit.inversion`): can a face of the right identity be rebuilt from
  an embedding alone? DiffUMI's latent bank, ranked adversary and Type I/II accuracy.

The face models that turn photos into identity embeddings offline are in
:mod:`idaudit.faces`. Every ε carries its formal status (:data:`idaudit.results.STATUSES`):
``"diagnostic"``, ``"sample_estimate"``, ``"certified_lower_bound"``, ...

The top-level names and subpackages are imported lazily, so ``import idaudit`` stays cheap
(no torch until an auditor runs). ``_LAZY`` and ``_SUBMODULES`` below are the one list of
what the package exports; the ``TYPE_CHECKING`` block repeats them for static analysers only,
and ``tests/unit/test_public_api.py`` checks that it says the same.
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from idaudit._version import __version__ as __version__

# public name -> module that defines it
_LAZY: dict[str, str] = {
    "EmbeddingSet": "idaudit.data",
    "sample_pairs": "idaudit.data",
    "split_identities": "idaudit.data",
    "GaussMechAuditor": "idaudit.audits",
    "KDELRAuditor": "idaudit.audits",
    "MMDTVAuditor": "idaudit.audits",
    "ROCHTAuditor": "idaudit.audits",
    "audit_pairs": "idaudit.audits",
    "merge_audits": "idaudit.audits",
    "concat_conditions": "idaudit.audits",
    "summarize": "idaudit.audits",
    "ReservedTestCertifier": "idaudit.certify",
    "sanity_controls": "idaudit.certify",
    "audit_generator": "idaudit.pipeline",
    "run_privacy_check": "idaudit.pipeline",
    "NotFittedError": "idaudit.exceptions",
    "InvalidInputError": "idaudit.exceptions",
    "MissingWeightsError": "idaudit.exceptions",
    "IdauditWarning": "idaudit.exceptions",
    "test": "idaudit.selftest",
}
_SUBMODULES = {
    "audits",
    "benchmark",
    "certify",
    "data",
    "demo",
    "dp",
    "exceptions",
    "faces",
    "inversion",
    "mechanisms",
    "memorization",
    "ops",
    "pipeline",
    "plotting",
    "results",
    "selftest",
    "testing",
}

__all__ = sorted([*_LAZY, *_SUBMODULES, "__version__"])


def _started_as_command() -> bool:
    """Return whether this process is the ``idaudit`` command (its console script)."""
    return Path(sys.argv[0] if sys.argv else "").name in ("idaudit", "idaudit.exe")


# ``ds.idaudit`` on every Dataset (per-pair table, plots); loads xarray, not torch. The
# ``idaudit`` command registers it only when a sub-command runs (idaudit.cli.main), so that
# ``--help``, ``--version`` and argument errors answer without loading pandas and xarray.
if not _started_as_command():
    import idaudit._accessor  # noqa: F401

if TYPE_CHECKING:  # pragma: no cover - for static analysers only
    from idaudit import audits as audits
    from idaudit import benchmark as benchmark
    from idaudit import certify as certify
    from idaudit import data as data
    from idaudit import demo as demo
    from idaudit import dp as dp
    from idaudit import exceptions as exceptions
    from idaudit import faces as faces
    from idaudit import inversion as inversion
    from idaudit import mechanisms as mechanisms
    from idaudit import memorization as memorization
    from idaudit import ops as ops
    from idaudit import pipeline as pipeline
    from idaudit import plotting as plotting
    from idaudit import results as results
    from idaudit import selftest as selftest
    from idaudit import testing as testing
    from idaudit.audits import (
        GaussMechAuditor as GaussMechAuditor,
    )
    from idaudit.audits import (
        KDELRAuditor as KDELRAuditor,
    )
    from idaudit.audits import (
        MMDTVAuditor as MMDTVAuditor,
    )
    from idaudit.audits import (
        ROCHTAuditor as ROCHTAuditor,
    )
    from idaudit.audits import (
        audit_pairs as audit_pairs,
    )
    from idaudit.audits import (
        concat_conditions as concat_conditions,
    )
    from idaudit.audits import (
        merge_audits as merge_audits,
    )
    from idaudit.audits import (
        summarize as summarize,
    )
    from idaudit.certify import ReservedTestCertifier as ReservedTestCertifier
    from idaudit.certify import sanity_controls as sanity_controls
    from idaudit.data import EmbeddingSet as EmbeddingSet
    from idaudit.data import sample_pairs as sample_pairs
    from idaudit.data import split_identities as split_identities
    from idaudit.exceptions import (
        IdauditWarning as IdauditWarning,
    )
    from idaudit.exceptions import (
        InvalidInputError as InvalidInputError,
    )
    from idaudit.exceptions import (
        MissingWeightsError as MissingWeightsError,
    )
    from idaudit.exceptions import (
        NotFittedError as NotFittedError,
    )
    from idaudit.pipeline import audit_generator as audit_generator
    from idaudit.pipeline import run_privacy_check as run_privacy_check
    from idaudit.selftest import test as test


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    if name in _SUBMODULES:
        module = importlib.import_module(f"idaudit.{name}")
        globals()[name] = module
        return module
    raise AttributeError(f"module 'idaudit' has no attribute {name!r}")


def __dir__() -> list[str]:
    return __all__
