"""Embeddings in: filtered, L2-normalised, traceable sets, identity pairs and splits.

* :class:`EmbeddingSet` — rows grouped by identity; a row fails when its outcome is a failure
  code (no face, generator error, ...) or it has missing, unparseable or non-finite values or
  (when normalising) norm <= 1e-6. Failed rows are kept as failed outputs of their identity
  (``failures="keep"``, what certificates count; :meth:`EmbeddingSet.as_outputs`) or dropped
  and counted (``"drop"``, seed 000, Section 4.1); the successful rows are L2-normalised.
  Rows without a label are dropped and counted. It counts exact duplicates and records the
  input's SHA-256. Readers: :meth:`EmbeddingSet.from_csv`, :meth:`~EmbeddingSet.from_npz`,
  :meth:`~EmbeddingSet.from_parquet`.
* :func:`sample_pairs` — a prefix-stable seeded shuffle of all unordered identity pairs;
  :func:`all_pairs` — any slice of all pairs in lexicographic order (what
  ``audit_pairs(es, "all", ...)`` audits), :func:`decode_pair_indices`, :func:`n_pairs_of`.
* :func:`split_identities` — each identity's rows split once into development and test sides
  (seed 000, Section 4.3); :data:`DUPLICATES` names its two readings of exact duplicates;
  :func:`split_min_rows` — the fewest rows an identity needs to keep a number of
  development rows.
"""

from __future__ import annotations

from idaudit.data._duplicates import NEAR_DUPLICATE_RTOL
from idaudit.data._embeddings import FAILURES, EmbeddingSet
from idaudit.data._pairs import all_pairs, decode_pair_indices, n_pairs_of, sample_pairs
from idaudit.data._splits import DUPLICATES, split_identities, split_min_rows

__all__ = [
    "DUPLICATES",
    "FAILURES",
    "NEAR_DUPLICATE_RTOL",
    "EmbeddingSet",
    "all_pairs",
    "decode_pair_indices",
    "n_pairs_of",
    "sample_pairs",
    "split_identities",
    "split_min_rows",
]
