"""Per-identity development/test splits (seed 000, Section 4.3)."""

from __future__ import annotations

import hashlib
import math
from typing import Any

import numpy as np
import numpy.typing as npt

from idaudit._validation import RngLike, check_in_range, spawn_seeds
from idaudit.data._embeddings import EmbeddingSet
from idaudit.exceptions import InvalidInputError

__all__ = ["split_identities"]

#: Fewest rows each side of a split keeps per identity.
MIN_ROWS_PER_SIDE = 2


def split_identities(
    es: EmbeddingSet, test_size: float = 0.3, rng: RngLike = 0
) -> tuple[EmbeddingSet, EmbeddingSet]:
    r"""Split every identity's rows once into development and reserved test rows.

    Parameters
    ----------
    es : EmbeddingSet
        The rows to split; every identity needs at least 4 rows.
    test_size : float, default 0.3
        Target fraction of each identity's rows that go to the test side, in (0, 1).
    rng : int, numpy.random.SeedSequence or numpy.random.Generator, default 0
        Seed of the split.

    Returns
    -------
    dev, test : EmbeddingSet
        Disjoint sets with the same identities; rows keep their input order. Both inherit
        ``sha256`` and ``source`` from ``es``.

    Raises
    ------
    InvalidInputError
        If ``test_size`` is outside (0, 1), or an identity has fewer than 4 rows (the message
        names it and its count).

    Notes
    -----
    For an identity with :math:`n` rows the test side receives
    :math:`n_{test} = \min(\max(\lfloor \text{test\_size}\cdot n + 1/2 \rfloor, 2), n - 2)`
    rows (round half up, then at least 2 rows each side), so the default gives the 70/30
    split of seed 000, Section 4.3. The rows are chosen by a permutation drawn from a
    generator of that identity alone, seeded by ``rng`` and the identity's label (a
    ``SeedSequence`` whose spawn key is a hash of the label's ``repr``). An identity's split
    therefore does not depend on which other identities the set holds:
    ``split_identities(es.subset(ids), ...)`` gives the same rows for those identities as
    splitting ``es``.

    Examples
    --------
    >>> import numpy as np
    >>> from idaudit.data import EmbeddingSet, split_identities
    >>> es = EmbeddingSet(np.random.default_rng(0).normal(size=(20, 3)), [0] * 10 + [1] * 10)
    >>> dev, test = split_identities(es, test_size=0.3, rng=0)
    >>> dev.counts, test.counts
    ({0: 7, 1: 7}, {0: 3, 1: 3})
    """
    if not isinstance(es, EmbeddingSet):
        raise TypeError(f"`es` must be an EmbeddingSet; got {type(es).__name__}.")
    test_size = check_in_range(test_size, "test_size", 0.0, 1.0, closed="neither")
    for label, count in es.counts.items():
        if count < 2 * MIN_ROWS_PER_SIDE:
            raise InvalidInputError(
                f"identity {label!r} has {count} row(s); splitting needs at least "
                f"{2 * MIN_ROWS_PER_SIDE} ({MIN_ROWS_PER_SIDE} per side)."
            )
    (base,) = spawn_seeds(rng, 1)
    dev_rows: list[npt.NDArray[np.intp]] = []
    test_rows: list[npt.NDArray[np.intp]] = []
    for label in es.counts:
        rows = es._rows_of(label)  # (n_id,) positions in input order
        n = len(rows)
        n_test = min(max(math.floor(test_size * n + 0.5), MIN_ROWS_PER_SIDE), n - 2)
        gen = np.random.default_rng(np.random.SeedSequence(base, spawn_key=_label_key(label)))
        perm = gen.permutation(n)
        test_rows.append(rows[perm[:n_test]])
        dev_rows.append(rows[perm[n_test:]])
    return es._take(np.concatenate(dev_rows)), es._take(np.concatenate(test_rows))


def _label_key(label: Any) -> tuple[int, int]:
    """Two 32-bit words from the SHA-256 of the label's repr (stable across runs)."""
    digest = hashlib.sha256(repr(label).encode()).digest()
    return int.from_bytes(digest[:4], "little"), int.from_bytes(digest[4:8], "little")
