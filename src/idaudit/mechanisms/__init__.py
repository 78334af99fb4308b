"""Mechanisms to audit: anything that can ``sample(identity, n)`` embeddings.

==========================  ===============================================================
:class:`Mechanism`          the protocol: ``identities`` and ``sample(identity, n, *, rng)``
:class:`GaussianNoise`      base embeddings + N(0, σ²I): known ε(δ) (seed 000, Section 5.2)
:class:`LaplaceNoise`       base embeddings + per-coordinate Laplace(b): known pure ε
:func:`sample_embeddings`   query a mechanism → :class:`~idaudit.data.EmbeddingSet`
:func:`audit_mechanism`     query, audit, and attach the mechanism's guarantee (if known)
:func:`add_guarantee`       attach a mechanism's guarantee to a per-pair result
==========================  ===============================================================

An encoder composed with an image generator over source images (seed 000, Section 2.5) is
:class:`idaudit.pipeline.EncodedGenerator`, on the road from images to embeddings.

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
from idaudit.mechanisms._noise import GaussianNoise, LaplaceNoise

__all__ = [
    "GaussianNoise",
    "LaplaceNoise",
    "Mechanism",
    "add_guarantee",
    "audit_mechanism",
    "sample_embeddings",
]
