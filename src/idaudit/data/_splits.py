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
    es: EmbeddingSet,
    test_size: float = 0.3,
    *,
    rng: RngLike = 0,
    group_duplicates: bool = True,
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
    group_duplicates : bool, default True
        Keep exact-duplicate rows of an identity (those counted in ``es.n_duplicates_``)
        together: all copies of a row go to the same side. ``False`` splits single rows, so
        copies can land on both sides. Without duplicates both give the same split.

    Returns
    -------
    dev, test : EmbeddingSet
        Disjoint sets with the same identities; rows keep their input order. Both inherit
        ``sha256`` and ``source`` from ``es``.

    Raises
    ------
    InvalidInputError
        If ``test_size`` is outside (0, 1), an identity has fewer than 4 rows, or (with
        ``group_duplicates``) its duplicate groups leave fewer than 2 rows for the test side;
        the message names the identity and its counts.
    TypeError
        If ``es`` is not an :class:`EmbeddingSet` or ``group_duplicates`` not a bool.

    Notes
    -----
    For an identity with :math:`n` rows the test side targets
    :math:`n_{test} = \min(\max(\lfloor \text{test\_size}\cdot n + 1/2 \rfloor, 2), n - 2)`
    rows (round half up, then at least 2 rows each side), so the default gives the 70/30
    split of seed 000, Section 4.3. The identity's rows are cut into groups — one group per
    distinct row with ``group_duplicates``, one group per row without — and the groups are
    visited in the order of a permutation drawn from a generator of that identity alone,
    seeded by ``rng`` and the identity's label (a ``SeedSequence`` whose spawn key is a hash
    of the label's ``repr``). A group joins the test side if it still fits within
    :math:`n_{test}` rows, otherwise the development side. With single-row groups this is
    exactly the first :math:`n_{test}` rows of the permutation; with larger groups the test
    side can hold fewer than :math:`n_{test}` rows, and where the groups sit depends only on
    their sizes and the seed, never on the values. An identity's split therefore does not
    depend on which other identities the set holds: ``split_identities(es.subset(ids), ...)``
    gives the same rows for those identities as splitting ``es``.

    Keeping copies together matters for the reserved-test protocol: a copy of a development
    row on the test side is not a fresh draw, and a classifier that memorised the row would
    look far better on the test side than it is.

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
    if not isinstance(group_duplicates, (bool, np.bool_)):
        raise TypeError(
            f"`group_duplicates` must be a bool; got {type(group_duplicates).__name__}."
        )
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
        if group_duplicates:
            # groups numbered by first appearance: all-distinct rows give group i = row i
            _, first, group = np.unique(es._dup_group[rows], return_index=True, return_inverse=True)
            group = np.argsort(np.argsort(first))[group.ravel()]  # (n_id,)
        else:
            group = np.arange(n)
        to_test = _fill_test_side(np.bincount(group), n_test, gen)  # (n_groups,) bool
        if int(np.bincount(group)[to_test].sum()) < MIN_ROWS_PER_SIDE:
            raise InvalidInputError(
                f"identity {label!r} has {n} rows but only {group.max() + 1} distinct ones; "
                f"keeping exact duplicates together leaves fewer than {MIN_ROWS_PER_SIDE} "
                f"rows for the test side (target {n_test})."
            )
        test_rows.append(rows[to_test[group]])
        dev_rows.append(rows[~to_test[group]])
    return es._take(np.concatenate(dev_rows)), es._take(np.concatenate(test_rows))


def _fill_test_side(
    sizes: npt.NDArray[np.intp], n_test: int, gen: np.random.Generator
) -> npt.NDArray[np.bool_]:
    """Visit groups in a random order; each joins the test side if it still fits in n_test."""
    order = gen.permutation(len(sizes))  # same draw as permuting rows when groups are rows
    to_test = np.zeros(len(sizes), dtype=bool)
    if (sizes == 1).all():  # fast path, identical outcome: the first n_test of the order
        to_test[order[:n_test]] = True
        return to_test
    room = n_test
    for g in order:
        if sizes[g] <= room:
            to_test[g] = True
            room -= int(sizes[g])
            if room == 0:
                break
    return to_test


def _label_key(label: Any) -> tuple[int, int]:
    """Two 32-bit words from the SHA-256 of the label's repr (stable across runs)."""
    digest = hashlib.sha256(repr(label).encode()).digest()
    return int.from_bytes(digest[:4], "little"), int.from_bytes(digest[4:8], "little")
