"""Per-identity development/test splits (seed 000, Section 4.3)."""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from idaudit._validation import (
    RngLike,
    check_in_range,
    check_integer,
    check_option,
    spawn_seeds,
)
from idaudit.data._embeddings import EmbeddingSet
from idaudit.exceptions import InvalidInputError

__all__ = ["DUPLICATES", "split_identities", "split_min_rows"]

#: Fewest rows each side of a split keeps per identity.
MIN_ROWS_PER_SIDE = 2

#: How exact-duplicate rows of an identity are read: ``"keep"`` (each row is a draw of its own)
#: or ``"collapse"`` (each group of duplicates is one draw).
DUPLICATES: tuple[str, ...] = ("keep", "collapse")


def split_identities(
    es: EmbeddingSet,
    test_size: float = 0.3,
    *,
    rng: RngLike = 0,
    duplicates: Literal["keep", "collapse"] = "keep",
) -> tuple[EmbeddingSet, EmbeddingSet]:
    r"""Split every identity's rows once into development and reserved test rows.

    Parameters
    ----------
    es : EmbeddingSet
        The rows to split; every identity needs at least 4 rows (4 distinct rows with
        ``duplicates="collapse"``).
    test_size : float, default 0.3
        Target fraction of each identity's rows that go to the test side, in (0, 1).
    rng : int, numpy.random.SeedSequence or numpy.random.Generator, default 0
        Seed of the split.
    duplicates : {"keep", "collapse"}, default "keep"
        How exact-duplicate rows of an identity (those counted in ``es.n_duplicates_``) are
        read. ``"keep"``: every row is an independent draw — the mechanism can repeat an output
        (a quantised encoder, a generator that falls back to one output, a deterministic
        generator fed the same source twice) — so rows are split one by one and copies of a
        value can land on both sides. ``"collapse"``: the copies are repeated records of one
        draw (an image listed or encoded twice), so each group keeps only its first row
        (:meth:`EmbeddingSet.drop_duplicates`) and the draws are split one by one. Without
        duplicates both give the same split.

    Returns
    -------
    dev, test : EmbeddingSet
        Disjoint sets with the same identities; rows keep their input order. Both inherit
        ``sha256`` and ``source`` from ``es``. With ``"collapse"`` they hold one row per draw.

    Raises
    ------
    InvalidInputError
        If ``test_size`` is outside (0, 1), ``duplicates`` is not one of its options, or an
        identity has fewer than 4 rows (distinct rows with ``"collapse"``); the message names
        the identity and its counts.
    TypeError
        If ``es`` is not an :class:`EmbeddingSet`.

    Notes
    -----
    For an identity with :math:`n` rows (draws, with ``"collapse"``) the test side takes
    :math:`n_{test} = \min(\max(\lfloor \text{test\_size}\cdot n + 1/2 \rfloor, 2), n - 2)`
    rows (round half up, then at least 2 rows each side), so the default gives the 70/30
    split of seed 000, Section 4.3. They are the first :math:`n_{test}` rows of a
    permutation drawn from a generator of that identity alone, seeded by ``rng`` and the
    identity's label (a ``SeedSequence`` whose spawn key is a hash of the label's ``repr``).

    Which rows go to the test side is therefore a uniformly random subset of size
    :math:`n_{test}` chosen from :math:`n` and the seed alone, never from the values: if the
    identity's rows are iid draws, so are its test rows, and they are independent of the
    development rows — what the reserved-test certificate needs. With ``"collapse"`` the
    values decide which rows are copies, hence :math:`n`, but not which draw goes where.
    Placing copies of a value together instead would let the values steer the split (a large
    group cannot fit the test quota, so a frequent output would never be tested), and the
    test sample would no longer be a sample of the identity's distribution.

    An identity's split does not depend on which other identities the set holds:
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
    check_option(duplicates, "duplicates", DUPLICATES)
    draws = es.drop_duplicates() if duplicates == "collapse" else es
    for label, count in draws.counts.items():
        if count < 2 * MIN_ROWS_PER_SIDE:
            distinct = (
                f" but only {count} distinct one(s) (duplicates='collapse')"
                if es.counts[label] != count
                else ""
            )
            raise InvalidInputError(
                f"identity {label!r} has {es.counts[label]} row(s){distinct}; splitting needs "
                f"at least {2 * MIN_ROWS_PER_SIDE} ({MIN_ROWS_PER_SIDE} per side)."
            )
    (base,) = spawn_seeds(rng, 1)
    dev_rows: list[npt.NDArray[np.intp]] = []
    test_rows: list[npt.NDArray[np.intp]] = []
    for label in draws.counts:
        rows = draws._rows_of(label)  # (n_id,) positions in input order
        n = len(rows)
        n_test = n_test_rows(n, test_size)
        gen = np.random.default_rng(np.random.SeedSequence(base, spawn_key=_label_key(label)))
        order = gen.permutation(n)  # (n_id,)
        test_rows.append(rows[order[:n_test]])
        dev_rows.append(rows[order[n_test:]])
    return draws._take(np.concatenate(dev_rows)), draws._take(np.concatenate(test_rows))


def n_test_rows(n: int, test_size: float) -> int:
    """Test rows :func:`split_identities` takes from an identity of ``n`` rows (its Notes)."""
    return min(max(math.floor(test_size * n + 0.5), MIN_ROWS_PER_SIDE), n - MIN_ROWS_PER_SIDE)


def smallest_n(holds: Callable[[int], bool], start: int) -> int:
    """Smallest ``n >= start`` where ``holds``, a predicate false up to some n then true."""
    low, high = start, start
    while not holds(high):  # doubling, then bisection: O(log n) evaluations
        low, high = high + 1, 2 * high
    while low < high:
        mid = (low + high) // 2
        if holds(mid):
            high = mid
        else:
            low = mid + 1
    return low


def split_min_rows(test_size: float = 0.3, n_dev: int = MIN_ROWS_PER_SIDE) -> int:
    """Return the fewest rows an identity needs to keep ``n_dev`` development rows in a split.

    Parameters
    ----------
    test_size : float, default 0.3
        The ``test_size`` of :func:`split_identities`, in (0, 1).
    n_dev : int, default 2
        Development rows wanted (e.g. one per fold of a cross-validation), at least 2.

    Returns
    -------
    int
        The smallest ``n >= 4`` whose split by :func:`split_identities` leaves at least
        ``n_dev`` rows on the development side (and, as every split, 2 on the test side).

    Raises
    ------
    InvalidInputError
        If ``test_size`` is outside (0, 1) or ``n_dev`` is below 2.
    TypeError
        If ``n_dev`` is not an integer.

    Examples
    --------
    >>> from idaudit.data import split_min_rows
    >>> split_min_rows(0.3, 5)  # 7 rows: 2 test rows, 5 development rows
    7
    >>> split_min_rows(0.5, 10)
    20
    """
    test_size = check_in_range(test_size, "test_size", 0.0, 1.0, closed="neither")
    n_dev = check_integer(n_dev, "n_dev", minimum=MIN_ROWS_PER_SIDE)

    # n - n_test(n) never decreases with n
    return smallest_n(lambda n: n - n_test_rows(n, test_size) >= n_dev, 2 * MIN_ROWS_PER_SIDE)


def _label_key(label: Any) -> tuple[int, int]:
    """Two 32-bit words from the SHA-256 of the label's repr (stable across runs)."""
    digest = hashlib.sha256(repr(label).encode()).digest()
    return int.from_bytes(digest[:4], "little"), int.from_bytes(digest[4:8], "little")
