"""Mechanisms whose ε(δ) is proved, and synthetic conditions shaped like the papers' data.

* :func:`known_pair`: two point identities under Laplace or Gaussian noise (the embeddings a
  certifier or auditor sees), with the pair's exact ε(δ).
* :class:`ScoreMechanism` and its makers: two laws of a scalar score (what a trade-off
  certificate sees) with the exact error rates of every threshold test and, where known, the
  exact ε(δ): Gaussian (μ-GDP), Laplace, randomized response (two atoms) and a four-atom
  law with ties.
* :func:`synthetic_condition`: identities at random points of the unit sphere plus isotropic
  Gaussian noise, with the sizes of seed 000's two regimes ("vgg": 90-100 rows per identity,
  "celeba": 26-35); every pair's ε(δ) is exact (point bases).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from idaudit._validation import RngLike, check_in_range, check_integer, check_option
from idaudit.data import EmbeddingSet
from idaudit.dp import gdp_epsilon
from idaudit.exceptions import InvalidInputError
from idaudit.mechanisms import GaussianNoise, LaplaceNoise, sample_embeddings

__all__ = [
    "KnownPair",
    "ScoreMechanism",
    "atom_scores",
    "gaussian_scores",
    "known_pair",
    "laplace_scores",
    "randomized_response",
    "synthetic_condition",
]

FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True)
class KnownPair:
    """Two point identities ``"a"`` and ``"b"`` of a noise mechanism with a proved ε(δ).

    Attributes
    ----------
    mechanism : GaussianNoise or LaplaceNoise
        The mechanism (point bases: its ``pair_epsilon`` is exact).
    kind : {"laplace", "gaussian"}
        Which noise.
    pair : tuple
        ``("a", "b")``.
    """

    mechanism: GaussianNoise | LaplaceNoise
    kind: str
    pair: tuple[str, str] = ("a", "b")

    def epsilon(self, delta: float = 0.0) -> float:
        r"""Return the pair's exact ε(δ) (``inf`` for Gaussian noise at δ = 0).

        Gaussian noise: the analytic-Gaussian ε(δ) (``pair_epsilon``). Laplace noise: the
        two centres differ in one coordinate only, so the pair is Laplace(0, b) against
        Laplace(Δ, b) in that coordinate (the others cancel); its hockey-stick divergence
        is :math:`\delta(\varepsilon) = 1 - e^{(\varepsilon - \Delta/b)/2}` for
        :math:`0 \le \varepsilon \le \Delta/b`, so
        :math:`\varepsilon(\delta) = \max(0, \Delta/b + 2\ln(1 - \delta))` (the pure
        Δ/b at δ = 0, 0 once δ reaches the total variation :math:`1 - e^{-\Delta/2b}`).

        Parameters
        ----------
        delta : float, default 0.0
            δ in [0, 1].

        Returns
        -------
        float

        Raises
        ------
        InvalidInputError
            If ``delta`` is outside [0, 1], or (Laplace, δ > 0) the centres differ in more
            than one coordinate, where this closed form does not hold.
        """
        delta = check_in_range(delta, "delta", 0.0, 1.0, closed="both")
        if self.kind != "laplace":
            return float(self.mechanism.pair_epsilon(*self.pair, delta))
        pure = float(self.mechanism.pair_epsilon(*self.pair, 0.0))
        if delta == 0.0:
            return pure
        a, b = (np.asarray(self.mechanism.base.get(x), dtype=float)[0] for x in self.pair)
        if int(np.count_nonzero(a != b)) > 1:
            raise InvalidInputError(
                "the Laplace pair's centres differ in more than one coordinate: its exact "
                f"epsilon(delta) at delta > 0 is not the one-coordinate closed form; got delta "
                f"= {delta!r}."
            )
        if delta >= 1.0:
            return 0.0
        return max(0.0, pure + 2.0 * math.log1p(-delta))

    def draw(self, n: int, rng: RngLike = 0) -> EmbeddingSet:
        """Draw ``n`` outputs per identity (:func:`~idaudit.mechanisms.sample_embeddings`)."""
        return sample_embeddings(self.mechanism, n, rng=rng)


def known_pair(
    kind: Literal["laplace", "gaussian"] = "laplace",
    *,
    distance: float = 1.0,
    scale: float = 1.0,
    dim: int = 1,
) -> KnownPair:
    """Two point identities at ``distance`` apart under Laplace or Gaussian noise.

    Parameters
    ----------
    kind : {"laplace", "gaussian"}, default "laplace"
        Laplace noise of scale ``b`` per coordinate: pure ε = distance / b (the centres
        differ in the first coordinate only, so L1 = L2 distance) and ε(δ) =
        max(0, distance / b + 2 ln(1 - δ)) (:meth:`KnownPair.epsilon`). Gaussian noise of sd σ:
        the analytic-Gaussian ε(δ) of Balle & Wang (2018) at Δ = distance, exact.
    distance : float, default 1.0
        Distance between the two centres, > 0.
    scale : float, default 1.0
        The noise's scale ``b`` or σ, > 0.
    dim : int, default 1
        Dimension of the embeddings.

    Returns
    -------
    KnownPair

    Examples
    --------
    >>> from idaudit.testing import known_pair
    >>> known_pair("laplace", distance=2.0).epsilon()
    2.0
    >>> round(known_pair("gaussian").epsilon(1e-5), 4)
    4.3772
    """
    kind = check_option(kind, "kind", ("laplace", "gaussian"))  # type: ignore[assignment]
    distance = check_in_range(distance, "distance", 0.0)
    scale = check_in_range(scale, "scale", 0.0)
    dim = check_integer(dim, "dim", minimum=1)
    centres = np.zeros((2, dim))
    centres[1, 0] = distance
    base = EmbeddingSet(centres, ["a", "b"], normalize=False, min_norm=0.0)
    mech = LaplaceNoise(base, scale) if kind == "laplace" else GaussianNoise(base, scale)
    return KnownPair(mech, kind)


@dataclass(frozen=True)
class ScoreMechanism:
    """Two laws of a scalar score (A: negatives, B: positives) with exact error rates.

    The test "say B when score >= t" has false-positive rate ``fpr(t) = P_A(S >= t)`` and
    false-negative rate ``fnr(t) = P_B(S < t)``.

    Attributes
    ----------
    name : str
        The mechanism.
    sample : callable ``(generator, n) -> (scores_a, scores_b)``
        ``n`` draws from each law.
    fpr, fnr : callable ``thresholds -> rates``
        Exact error rates of the threshold tests.
    epsilon : callable ``deltas -> ε(δ)`` or None
        The exact ε(δ) of the pair of laws, where known.
    threshold : float
        A sensible fixed threshold (between the two laws).
    """

    name: str
    sample: Callable[[np.random.Generator, int], tuple[FloatArray, FloatArray]]
    fpr: Callable[[Any], FloatArray]
    fnr: Callable[[Any], FloatArray]
    epsilon: Callable[[Any], FloatArray] | None
    threshold: float


def gaussian_scores(mu: float = 1.0) -> ScoreMechanism:
    """N(0, 1) vs N(μ, 1): exactly μ-GDP; ε(δ) from :func:`idaudit.dp.gdp_epsilon` (inf at 0).

    Parameters
    ----------
    mu : float, default 1.0
        The shift, > 0.

    Returns
    -------
    ScoreMechanism
    """
    from scipy import stats

    mu = check_in_range(mu, "mu", 0.0)
    return ScoreMechanism(
        "gaussian",
        lambda g, n: (g.normal(0, 1, n), g.normal(mu, 1, n)),
        lambda t: stats.norm.sf(t),
        lambda t: stats.norm.cdf(np.asarray(t) - mu),
        lambda d: np.asarray(gdp_epsilon(d, mu)),
        mu / 2,
    )


def laplace_scores(shift: float = 1.0) -> ScoreMechanism:
    """Laplace(0, 1) vs Laplace(shift, 1): pure ε = shift, ε(δ) = max(0, shift + 2 ln(1 - δ)).

    The hockey-stick divergence of two unit-scale Laplace laws is
    δ(ε) = 1 - exp((ε - shift) / 2) for 0 <= ε <= shift.

    Parameters
    ----------
    shift : float, default 1.0
        The location shift, > 0.

    Returns
    -------
    ScoreMechanism
    """
    from scipy import stats

    shift = check_in_range(shift, "shift", 0.0)
    return ScoreMechanism(
        "laplace",
        lambda g, n: (g.laplace(0, 1, n), g.laplace(shift, 1, n)),
        lambda t: stats.laplace.sf(t),
        lambda t: stats.laplace.cdf(np.asarray(t) - shift),
        # δ(ε) = 1 − exp((ε − shift)/2) for ε <= shift (hockey-stick divergence of two unit
        # Laplace laws), so ε(δ) = max(0, shift + 2 ln(1 − δ))
        lambda d: np.maximum(0.0, shift + 2.0 * np.log1p(-np.asarray(d, dtype=float))),
        shift / 2,
    )


def randomized_response(epsilon: float = 1.0) -> ScoreMechanism:
    """Randomized response at ``epsilon``: two output atoms, 1 with probability q or 1 - q.

    ``q = 1 / (1 + e^ε)``; the pair is exactly (ε, 0)-DP and ε(δ) = ln((1 - δ - q) / q),
    0 once δ >= 1 - 2q (the total variation).

    Parameters
    ----------
    epsilon : float, default 1.0
        The privacy level, > 0.

    Returns
    -------
    ScoreMechanism
    """
    eps = check_in_range(epsilon, "epsilon", 0.0)
    q = 1.0 / (1.0 + np.exp(eps))

    def fpr(t: Any) -> FloatArray:
        t = np.asarray(t, dtype=float)
        return np.where(t <= 0, 1.0, np.where(t <= 1, q, 0.0))

    def fnr(t: Any) -> FloatArray:
        t = np.asarray(t, dtype=float)
        return np.where(t <= 0, 0.0, np.where(t <= 1, q, 1.0))

    return ScoreMechanism(
        "randomized_response",
        lambda g, n: ((g.random(n) < q) * 1.0, (g.random(n) < 1 - q) * 1.0),
        fpr,
        fnr,
        # δ(ε) = (1 - q) - e^ε q for ε >= 0; past δ = 1 - 2q (the total variation) ε is 0
        lambda d: np.log(np.maximum(1.0, (1.0 - np.asarray(d, dtype=float) - q) / q)),
        0.5,
    )


def atom_scores(p_a: Any = (0.4, 0.3, 0.2, 0.1), p_b: Any = (0.1, 0.2, 0.3, 0.4)) -> ScoreMechanism:
    """Scores 0, 1, ..., k - 1 with masses ``p_a`` under A and ``p_b`` under B (ties).

    Parameters
    ----------
    p_a, p_b : array_like of float
        Two probability vectors of the same length k >= 2.

    Returns
    -------
    ScoreMechanism
        ``epsilon`` is ``None`` (not given in closed form here).
    """
    pa, pb = np.asarray(p_a, dtype=float), np.asarray(p_b, dtype=float)
    for name, p in (("p_a", pa), ("p_b", pb)):
        if p.ndim != 1 or p.size < 2 or (p < 0).any() or not np.isclose(p.sum(), 1.0):
            raise InvalidInputError(
                f"`{name}` must be a probability vector of length >= 2; got {p.tolist()!r}."
            )
    if pa.size != pb.size:
        raise InvalidInputError(f"`p_a` and `p_b` must have one length: {pa.size} vs {pb.size}.")
    k = pa.size

    def tail(p: FloatArray, t: Any) -> FloatArray:
        """P(S >= t) for each threshold."""
        return np.array([p[np.arange(k) >= ti].sum() for ti in np.atleast_1d(t)])

    return ScoreMechanism(
        "atoms",
        lambda g, n: (g.choice(k, n, p=pa).astype(float), g.choice(k, n, p=pb).astype(float)),
        lambda t: tail(pa, t),
        lambda t: 1.0 - tail(pb, t),
        None,
        (k - 1) / 2,
    )


_REGIMES = {"vgg": (90, 100), "celeba": (26, 35)}


def synthetic_condition(
    kind: Literal["vgg", "celeba"] = "vgg",
    *,
    n_identities: int = 60,
    dim: int = 128,
    noise: float = 1.6,
    rng: RngLike = 0,
) -> tuple[GaussianNoise, EmbeddingSet]:
    """Identities at random points of the unit sphere plus Gaussian noise, paper-sized.

    Parameters
    ----------
    kind : {"vgg", "celeba"}, default "vgg"
        Rows per identity drawn uniformly from 90-100 ("vgg", the generated VGGFace2
        condition of seed 000) or 26-35 ("celeba").
    n_identities : int, default 60
        Identities, at least 2.
    dim : int, default 128
        Embedding dimension.
    noise : float, default 1.6
        Total noise norm: σ = noise / sqrt(dim) per coordinate.
    rng : int, Generator or None, default 0
        Randomness of the centres, the sizes and the draws.

    Returns
    -------
    mechanism : GaussianNoise
        Point bases: ``mechanism.pair_epsilon(a, b, delta)`` is every pair's exact ε(δ).
    embeddings : EmbeddingSet
        The drawn outputs (not normalised: the noise is part of the output).

    Examples
    --------
    >>> from idaudit.testing import synthetic_condition
    >>> mech, es = synthetic_condition("celeba", n_identities=4, dim=8, rng=0)
    >>> len(es.identities), 26 * 4 <= len(es) <= 35 * 4
    (4, True)
    """
    kind = check_option(kind, "kind", tuple(_REGIMES))  # type: ignore[assignment]
    n_identities = check_integer(n_identities, "n_identities", minimum=2)
    dim = check_integer(dim, "dim", minimum=1)
    noise = check_in_range(noise, "noise", 0.0)
    gen = np.random.default_rng(rng) if not isinstance(rng, np.random.Generator) else rng
    centres = gen.normal(size=(n_identities, dim))
    labels = [f"id{k:03d}" for k in range(n_identities)]
    mech = GaussianNoise(EmbeddingSet(centres, labels), noise / np.sqrt(dim))
    low, high = _REGIMES[kind]
    rows, row_labels = [], []
    for label, n in zip(labels, gen.integers(low, high + 1, size=n_identities), strict=True):
        rows.append(mech.sample(label, int(n), rng=gen))
        row_labels += [label] * int(n)
    es = EmbeddingSet(np.vstack(rows), np.asarray(row_labels), normalize=False, min_norm=0.0)
    return mech, es
