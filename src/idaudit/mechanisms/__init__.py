"""Mechanisms to audit: anything that can ``sample(identity, n)`` embeddings.

==========================  ===============================================================
:class:`Mechanism`          the protocol: ``identities`` and ``sample(identity, n, *, rng)``
:class:`GaussianNoise`      base embeddings + N(0, σ²I): known ε(δ) (seed 000, Section 5.2)
:class:`LaplaceNoise`       base embeddings + per-coordinate Laplace(b): known pure ε
:class:`EncodedGenerator`   encoder ∘ image generator over source images (Section 2.5)
:func:`sample_embeddings`   query a mechanism → :class:`~idaudit.data.EmbeddingSet`
:func:`audit_mechanism`     query, audit, and attach the mechanism's guarantee (if known)
:func:`add_guarantee`       attach a mechanism's guarantee to a per-pair result
==========================  ===============================================================

The two noise mechanisms state what is proved about them: ``pair_epsilon(a, b, delta)`` (exact
for point bases), ``is_exact(a, b, delta)`` and the mechanism-wide ``reference_epsilon(delta)``.
"""

from __future__ import annotations

from idaudit.mechanisms._base import (
    Mechanism,
    add_guarantee,
    audit_mechanism,
    sample_embeddings,
)
from idaudit.mechanisms._encoded import DRAW_STATUSES, EncodedGenerator
from idaudit.mechanisms._noise import GaussianNoise, LaplaceNoise

__all__ = [
    "DRAW_STATUSES",
    "EncodedGenerator",
    "GaussianNoise",
    "LaplaceNoise",
    "Mechanism",
    "add_guarantee",
    "audit_mechanism",
    "sample_embeddings",
]
