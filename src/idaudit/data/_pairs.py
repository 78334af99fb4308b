"""Seeded, prefix-stable sampling of unordered identity pairs (seed 000, Section 4.1)."""

from __future__ import annotations

import warnings
from collections.abc import Iterable
from typing import Any

import numpy as np
import numpy.typing as npt

from idaudit._validation import RngLike, check_integer, check_random_state
from idaudit.data._rows import normalise_label_dtype
from idaudit.exceptions import IdauditWarning, InvalidInputError

__all__ = ["all_pairs", "decode_pair_indices", "n_pairs_of", "sample_pairs"]


def sample_pairs(
    identities: Iterable[Any] | npt.ArrayLike,
    n: int | None = None,
    *,
    rng: RngLike = 0,
) -> list[tuple[Any, Any]]:
    r"""Return the first ``n`` pairs of one seeded shuffle of all unordered identity pairs.

    Parameters
    ----------
    identities : array_like, shape (n_identities,)
        Identity labels (e.g. ``EmbeddingSet.identities``); duplicates are ignored.
    n : int, optional
        How many pairs to return; default all :math:`m(m-1)/2` of them. More than there
        are returns all of them, with a warning naming both numbers.
    rng : int, numpy.random.SeedSequence or numpy.random.Generator, default 0
        Seed of the one shuffle.

    Returns
    -------
    list of tuple
        ``(a, b)`` with ``a < b``, as Python scalars (``str``/``int``), in shuffled order.

    Raises
    ------
    InvalidInputError
        If there are fewer than 2 distinct identities, or ``n`` is negative.
    TypeError
        If ``n`` is not an integer, or the labels are not mutually orderable.

    Warns
    -----
    IdauditWarning
        If ``n`` exceeds the number of pairs: all of them are returned, never a silent cut.

    Notes
    -----
    The unique identities are sorted, all pairs :math:`(i, j)`, :math:`i < j`, are enumerated
    in lexicographic order, the whole list is permuted once with
    ``check_random_state(rng).permutation`` and the first ``n`` are returned. The permutation
    does not depend on ``n``, so every prefix is stable:
    ``sample_pairs(ids, 100, rng=0) == sample_pairs(ids, 500, rng=0)[:100]`` — which is how
    seed 000 (Section 4.1) shares the first 100 pairs between all methods and uses longer
    prefixes (500, 200) for some. Pair indices are decoded arithmetically, so no list of all
    pairs is built (2,000 identities, ~2 million pairs, take milliseconds).

    Examples
    --------
    >>> from idaudit.data import sample_pairs
    >>> sample_pairs(["c", "a", "b"], rng=0)
    [('b', 'c'), ('a', 'b'), ('a', 'c')]
    >>> sample_pairs(range(5), 2, rng=0) == sample_pairs(range(5), rng=0)[:2]
    True
    """
    labels, total = _sorted_with_total(identities)
    m = len(labels)
    if n is None:
        n = total
    n = check_integer(n, "n", minimum=0)
    if n > total:
        warnings.warn(
            f"`n` asks for {n} pairs, but {m} identities have only {total}; all {total} are "
            "returned.",
            IdauditWarning,
            stacklevel=2,
        )
        n = total
    index = check_random_state(rng).permutation(total)[:n]  # (n,) lexicographic pair indices
    return _pairs_at(labels, index)


def all_pairs(
    identities: Iterable[Any] | npt.ArrayLike, start: int = 0, stop: int | None = None
) -> list[tuple[Any, Any]]:
    r"""Return pairs ``start .. stop - 1`` of all unordered identity pairs, in lexicographic order.

    Parameters
    ----------
    identities : array_like, shape (n_identities,)
        Identity labels; duplicates are ignored and the rest sorted.
    start, stop : int, optional
        Range of pair indices, ``0 <= start <= stop <= m(m-1)/2`` (default: every pair).

    Returns
    -------
    list of tuple
        ``(a, b)`` with ``a < b`` as Python scalars: ``(0, 1), (0, 2), ..., (0, m-1), (1, 2),
        ...`` by position in the sorted labels. This is the order :func:`sample_pairs` shuffles,
        and the order of ``idaudit.audit_pairs(es, "all", ...)``. Indices are decoded
        arithmetically, so a slice of millions of pairs costs only its own length.

    Raises
    ------
    InvalidInputError
        If there are fewer than 2 distinct identities or the range is out of bounds.

    Examples
    --------
    >>> from idaudit.data import all_pairs
    >>> all_pairs(["c", "a", "b"])
    [('a', 'b'), ('a', 'c'), ('b', 'c')]
    >>> all_pairs(range(4), 2, 4)
    [(0, 3), (1, 2)]
    """
    labels, total = _sorted_with_total(identities)
    start = check_integer(start, "start", minimum=0)
    stop = total if stop is None else check_integer(stop, "stop", minimum=start)
    if stop > total:
        raise InvalidInputError(
            f"`stop` must be at most the number of unordered pairs, {total} for {len(labels)} "
            f"identities; got {stop}."
        )
    return _pairs_at(labels, np.arange(start, stop, dtype=np.int64))


def n_pairs_of(n_identities: int) -> int:
    """Count the unordered pairs of ``n_identities`` distinct identities, m(m-1)/2.

    Examples
    --------
    >>> from idaudit.data import n_pairs_of
    >>> n_pairs_of(400)
    79800
    """
    m = check_integer(n_identities, "n_identities", minimum=0)
    return m * (m - 1) // 2


def decode_pair_indices(
    index: npt.ArrayLike, n_identities: int
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """Positions ``(i, j)``, ``i < j``, of lexicographic pair indices among sorted identities.

    Parameters
    ----------
    index : array_like of int
        Pair indices in ``[0, m(m-1)/2)``.
    n_identities : int
        ``m``.

    Returns
    -------
    i, j : numpy.ndarray of int64
        Positions of the two identities of each pair (as in :func:`all_pairs`).

    Examples
    --------
    >>> from idaudit.data import decode_pair_indices
    >>> [v.tolist() for v in decode_pair_indices([0, 2, 3], 4)]
    [[0, 0, 1], [1, 3, 2]]
    """
    return _decode_pairs(np.asarray(index, dtype=np.int64), int(n_identities))


def _decode_pairs(
    index: npt.NDArray[np.int64], m: int
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """Lexicographic index k of (i, j), i < j < m -> (i, j)."""
    rows = np.arange(m, dtype=np.int64)
    start = rows * (2 * m - rows - 1) // 2  # (m,) index of the first pair (i, i + 1)
    first = np.searchsorted(start, index, side="right") - 1
    second = index - start[first] + first + 1
    return first, second


def _sorted_with_total(identities: Any) -> tuple[npt.NDArray[Any], int]:
    """Return the sorted distinct labels (at least 2) and their number of unordered pairs."""
    labels = _unique_sorted(identities)
    m = len(labels)
    if m < 2:
        raise InvalidInputError(f"`identities` must hold at least 2 distinct labels; got {m}.")
    return labels, m * (m - 1) // 2


def _pairs_at(labels: npt.NDArray[Any], index: npt.NDArray[np.int64]) -> list[tuple[Any, Any]]:
    """Return the pairs at lexicographic ``index`` among the sorted ``labels`` (Python scalars)."""
    first, second = _decode_pairs(index, len(labels))
    values = labels.tolist()
    return [(values[i], values[j]) for i, j in zip(first.tolist(), second.tolist(), strict=True)]


def _unique_sorted(identities: Any) -> npt.NDArray[Any]:
    if isinstance(identities, (str, bytes)):
        raise InvalidInputError("`identities` must be a sequence of labels, not a single string.")
    from idaudit.data._embeddings import EmbeddingSet

    if isinstance(identities, EmbeddingSet):
        raise TypeError(
            "`identities` must be a sequence of labels; got an EmbeddingSet (pass es.identities)."
        )
    if isinstance(identities, np.ndarray):
        arr = identities
    else:
        # object dtype first: np.asarray would silently turn [1, "a"] into strings
        values = list(identities)
        arr = np.empty(len(values), dtype=object)
        arr[:] = values
    if arr.ndim != 1:
        raise InvalidInputError(f"`identities` must be 1-D; got shape {arr.shape}.")
    arr = normalise_label_dtype(arr)
    try:
        return np.unique(arr)
    except TypeError as exc:
        kinds = sorted({type(v).__name__ for v in arr.tolist()})
        raise TypeError(f"`identities` must be mutually orderable; got {kinds}.") from exc
