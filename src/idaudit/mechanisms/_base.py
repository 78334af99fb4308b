"""The ``Mechanism`` protocol and the glue that audits any mechanism."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

from idaudit._results import variable
from idaudit._validation import (
    RngLike,
    check_in_range,
    check_integer,
    check_pairs,
    check_random_state,
    spawn_seeds,
)
from idaudit.data import EmbeddingSet
from idaudit.exceptions import InvalidInputError

if TYPE_CHECKING:
    import xarray as xr

__all__ = ["Mechanism", "audit_mechanism", "sample_embeddings"]


@runtime_checkable
class Mechanism(Protocol):
    r"""Anything that produces outputs for an identity: the object an identity-level audit tests.

    A mechanism maps a private identity label to a random output in :math:`\mathbb{R}^d`
    (seed 000, Eq. 8). Implement these two members and every audit, the certifier and the
    benchmark accept the object.

    Attributes
    ----------
    identities : array_like of labels, shape (n_identities,)
        The identities the mechanism can be queried with.
    """

    @property
    def identities(self) -> Any:
        """Identity labels the mechanism accepts."""
        ...

    def sample(self, identity: Any, n: int, *, rng: RngLike = None) -> npt.NDArray[np.float64]:
        """Draw ``n`` independent outputs for ``identity`` → array of shape (n, d)."""
        ...


def sample_embeddings(
    mechanism: Mechanism,
    n_per_identity: int,
    identities: Sequence[Any] | None = None,
    *,
    rng: RngLike = 0,
) -> EmbeddingSet:
    """Query a mechanism ``n_per_identity`` times per identity and collect the outputs.

    Parameters
    ----------
    mechanism : Mechanism
        The mechanism to query.
    n_per_identity : int
        Draws per identity, at least 2.
    identities : sequence of labels, optional
        Which identities to query (default: all of ``mechanism.identities``).
    rng : int, numpy.random.SeedSequence, numpy.random.Generator or None, default 0
        Randomness. Each identity gets its own seed, determined by its position in
        ``mechanism.identities``, so an identity's draws do not depend on which other
        identities are queried.

    Returns
    -------
    EmbeddingSet
        The outputs as they are (``normalize=False``): a benchmark mechanism's noise is part
        of the output and must not be projected away.

    Raises
    ------
    InvalidInputError
        If an identity is unknown, or the mechanism returns an array of the wrong shape,
        non-finite values, or a different dimension for different identities.

    Examples
    --------
    >>> import numpy as np
    >>> from idaudit.data import EmbeddingSet
    >>> from idaudit.mechanisms import GaussianNoise, sample_embeddings
    >>> mech = GaussianNoise(EmbeddingSet(np.eye(3), ["a", "b", "c"]), sigma=0.5)
    >>> es = sample_embeddings(mech, 10, rng=0)
    >>> es.embeddings.shape
    (30, 3)
    """
    n = check_integer(n_per_identity, "n_per_identity", minimum=2)
    known = list(np.asarray(mechanism.identities).tolist())
    position = {label: i for i, label in enumerate(known)}
    wanted = known if identities is None else list(dict.fromkeys(identities))
    for label in wanted:
        if label not in position:
            raise InvalidInputError(
                f"`identities` holds {label!r}, which the mechanism does not know."
            )
    seeds = spawn_seeds(check_random_state(rng), len(known))
    blocks: list[npt.NDArray[np.float64]] = []
    labels: list[Any] = []
    dim: int | None = None
    for label in wanted:
        out = _check_draw(mechanism.sample(label, n, rng=seeds[position[label]]), label, n, dim)
        dim = out.shape[1]
        blocks.append(out)
        labels.extend([label] * n)
    if not blocks:
        raise InvalidInputError("`identities` must name at least one identity; got none.")
    return EmbeddingSet(np.concatenate(blocks), np.asarray(labels), normalize=False, min_norm=0.0)


def audit_mechanism(
    mechanism: Mechanism,
    pairs: Sequence[tuple[Any, Any]],
    auditors: Sequence[Any],
    n_per_identity: int,
    *,
    rng: RngLike = 0,
    delta: float | None = None,
    device: str = "cpu",
    batch_size: int | None = None,
    progress: bool = True,
) -> xr.Dataset:
    """Draw outputs of a mechanism and run the audits on them.

    Parameters
    ----------
    mechanism : Mechanism
        The mechanism to audit.
    pairs : sequence of (label, label), length >= 1
        Identity pairs to audit; every label must be one of ``mechanism.identities``.
    auditors : sequence of BaseAuditor
        The audits to run (see :func:`idaudit.audit_pairs`, which takes ``pairs`` and
        ``auditors`` in the same order).
    n_per_identity : int
        Outputs drawn per identity, at least 2.
    rng : int, numpy.random.SeedSequence, numpy.random.Generator or None, default 0
        Randomness of the draws (see :func:`sample_embeddings`).
    delta : float, optional
        δ in [0, 1) at which the mechanism's own guarantee is reported, when it has one.
        Default: the mechanism's ``default_delta`` — 0 for :class:`LaplaceNoise`, which is
        pure DP, so its point-base truths are exact; 1e-5 for :class:`GaussianNoise`, whose
        pure ε is infinite — and 1e-5 for a mechanism without that attribute.
    device, batch_size, progress
        Passed to :func:`idaudit.audit_pairs`.

    Returns
    -------
    xarray.Dataset
        The :func:`idaudit.audit_pairs` Dataset (dim ``pair``). When the mechanism states its
        guarantee (it has ``pair_epsilon``, ``is_exact`` and ``reference_epsilon``, as
        :class:`GaussianNoise` and :class:`LaplaceNoise` do), it also holds
        ``true_epsilon`` (pair): the pair's ε at ``delta``, exact where ``true_epsilon_exact``
        is true and an upper bound elsewhere; and ``reference_epsilon`` (no dims): the
        mechanism-wide guarantee. Attrs record the mechanism and ``reference_delta`` (the δ
        used).

    Raises
    ------
    InvalidInputError
        If ``pairs`` is empty, an entry is not a pair of two different identities, or a label
        is not one of ``mechanism.identities`` (the message names the entry), or ``delta`` is
        outside [0, 1).

    Examples
    --------
    >>> import numpy as np
    >>> from idaudit import EmbeddingSet, GaussMechAuditor
    >>> from idaudit.mechanisms import GaussianNoise, audit_mechanism
    >>> mech = GaussianNoise(EmbeddingSet(np.eye(3), ["a", "b", "c"]), sigma=0.5)
    >>> ds = audit_mechanism(mech, [("a", "b")], [GaussMechAuditor()], 50, rng=0, progress=False)
    >>> sorted(v for v in ds.data_vars if "epsilon" in v)
    ['gaussmech_epsilon', 'reference_epsilon', 'true_epsilon', 'true_epsilon_exact']
    """
    from idaudit.audits import audit_pairs

    known = np.asarray(mechanism.identities).tolist()
    pair_list = check_pairs(pairs, known, unknown="which the mechanism does not know")
    if delta is None:
        delta = float(getattr(mechanism, "default_delta", 1e-5))
    delta = check_in_range(delta, "delta", 0.0, 1.0, closed="left")
    needed = list(dict.fromkeys(label for p in pair_list for label in p))
    es = sample_embeddings(mechanism, n_per_identity, needed, rng=rng)
    ds = audit_pairs(
        es, pair_list, auditors, device=device, batch_size=batch_size, progress=progress
    )
    ds = add_guarantee(ds, mechanism, delta)
    ds.attrs["mechanism"] = repr(mechanism)
    ds.attrs["n_per_identity"] = int(n_per_identity)
    ds.attrs["draw_rng"] = _seed_attr(rng)
    return ds


def add_guarantee(ds: xr.Dataset, mechanism: Any, delta: float) -> xr.Dataset:
    """Attach a mechanism's known guarantee to a per-pair Dataset (no-op if it states none).

    Parameters
    ----------
    ds : xarray.Dataset
        A per-pair result (dim ``pair``, coords ``identity_a``, ``identity_b``), e.g. from
        :func:`idaudit.audit_pairs` on draws of ``mechanism``.
    mechanism : Mechanism
        With ``pair_epsilon(a, b, delta)``, ``is_exact(a, b, delta)`` and
        ``reference_epsilon(delta)``, as :class:`GaussianNoise` and :class:`LaplaceNoise`
        have; any other mechanism leaves ``ds`` as it is.
    delta : float
        The δ at which the truths are stated.

    Returns
    -------
    xarray.Dataset
        ``ds`` with ``true_epsilon``, ``true_epsilon_exact`` (pair) and ``reference_epsilon``
        (no dims), all of status ``reference``, and the attribute ``reference_delta``.

    Examples
    --------
    >>> import numpy as np
    >>> from idaudit import EmbeddingSet, GaussMechAuditor, audit_pairs
    >>> from idaudit.mechanisms import GaussianNoise, add_guarantee, sample_embeddings
    >>> mech = GaussianNoise(EmbeddingSet(np.eye(3), ["a", "b", "c"]), sigma=0.5)
    >>> es = sample_embeddings(mech, 20, rng=0)
    >>> ds = audit_pairs(es, [("a", "b")], [GaussMechAuditor()], progress=False)
    >>> add_guarantee(ds, mech, 1e-5)["true_epsilon"].attrs["status"]
    'reference'
    """
    if not all(hasattr(mechanism, m) for m in ("pair_epsilon", "is_exact", "reference_epsilon")):
        return ds
    pairs = list(
        zip(ds["identity_a"].values.tolist(), ds["identity_b"].values.tolist(), strict=False)
    )
    truth = np.array([mechanism.pair_epsilon(a, b, delta) for a, b in pairs], dtype=np.float64)
    exact = np.array([mechanism.is_exact(a, b, delta) for a, b in pairs], dtype=bool)
    ds = ds.assign(
        true_epsilon=variable(
            "pair",
            truth,
            long_name="the pair's ε(δ) from the mechanism's closed form",
            status="reference",
            meaning="exact where true_epsilon_exact, else an upper bound on the truth",
        ),
        true_epsilon_exact=variable(
            "pair", exact, long_name="whether true_epsilon is exact", status="reference"
        ),
        reference_epsilon=variable(
            (),
            float(mechanism.reference_epsilon(delta)),
            long_name="mechanism-wide ε(δ) guarantee (every pair of identities)",
            status="reference",
        ),
    )
    ds.attrs["reference_delta"] = float(delta)
    return ds


def _check_draw(out: Any, identity: Any, n: int, dim: int | None) -> npt.NDArray[np.float64]:
    try:
        arr = np.asarray(out, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise TypeError(
            f"the mechanism must return a numeric array for identity {identity!r}; "
            f"got {type(out).__name__}."
        ) from exc
    if arr.ndim != 2 or arr.shape[0] != n or arr.shape[1] < 1:
        raise InvalidInputError(
            f"the mechanism must return shape (n, d) = ({n}, d) for identity {identity!r}; "
            f"got {arr.shape}."
        )
    if dim is not None and arr.shape[1] != dim:
        raise InvalidInputError(
            f"the mechanism returned {arr.shape[1]} features for identity {identity!r} but "
            f"{dim} for an earlier identity; got {arr.shape[1]} vs {dim}."
        )
    bad = ~np.isfinite(arr)
    if bad.any():
        raise InvalidInputError(
            f"the mechanism returned {int(bad.any(axis=1).sum())} row(s) with NaN or inf for "
            f"identity {identity!r}; outputs must be finite."
        )
    return arr


def _seed_attr(rng: RngLike) -> int | str:
    if isinstance(rng, (int, np.integer)) and not isinstance(rng, bool):
        return int(rng)
    return type(rng).__name__
