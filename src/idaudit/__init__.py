"""idaudit: measure how much identity survives a face pipeline.

It answers: is an image-to-image face generator identity-level (ε, δ)-DP? Four routes from
embeddings to ε (GaussMech, KDE-LR, MMD-TV, ROC-HT), reserved-test certificates, sanity
controls, benchmark mechanisms with a known ε, and the face models that turn photos into
identity embeddings offline. Memorisation checks and embedding inversion are planned and not
yet part of the package.

Every ε carries its formal status: ``"diagnostic"``, ``"sample_estimate"`` or
``"certified_lower_bound"``.

The top-level names are imported lazily, so ``import idaudit`` stays cheap (no torch until an
auditor runs).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

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
    "NotFittedError": "idaudit.exceptions",
    "InvalidInputError": "idaudit.exceptions",
    "MissingWeightsError": "idaudit.exceptions",
    "IdauditWarning": "idaudit.exceptions",
}
_SUBMODULES = {
    "audits",
    "benchmark",
    "certify",
    "data",
    "dp",
    "exceptions",
    "faces",
    "mechanisms",
    "ops",
    "pipeline",
    "plotting",
    "results",
}

__all__ = sorted([*_LAZY, *_SUBMODULES, "__version__"])

# ``ds.idaudit`` on every Dataset (per-pair table, plots); loads xarray, not torch
import idaudit._accessor  # noqa: E402, F401

if TYPE_CHECKING:  # pragma: no cover - for static analysers only
    from idaudit import dp as dp
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
