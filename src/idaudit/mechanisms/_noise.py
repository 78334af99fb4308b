"""Additive-noise mechanisms with a known identity-level guarantee (seed 000, Section 5.2)."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, ClassVar

import numpy as np
import numpy.typing as npt
from scipy.spatial.distance import cdist

from idaudit._validation import RngLike, check_in_range, check_integer, check_random_state
from idaudit.data import EmbeddingSet
from idaudit.dp import gaussian_epsilon
from idaudit.exceptions import InvalidInputError

__all__ = ["GaussianNoise", "LaplaceNoise"]


class _AdditiveNoise(ABC):
    """Shared machinery: base rows per identity, sampling, support distances.

    A draw for identity ``id`` is ``x + s * z``: ``x`` uniform (with replacement) over the base
    rows of ``id``, ``z`` a vector of independent standard noise coordinates, ``s`` the scale.
    The base row is drawn before the noise, and the noise is drawn as standard noise and then
    scaled, so two mechanisms that differ only in their scale give *the same* underlying draws
    for the same ``rng`` (common random numbers across a noise sweep).
    """

    #: δ at which the guarantee is reported when the caller names none (``audit_mechanism``,
    #: ``noise_sweep``): the smallest δ at which the mechanism's ε is finite and meaningful.
    default_delta: ClassVar[float]
    _scale_name: ClassVar[str]
    _metric: ClassVar[str]  # scipy cdist metric of the norm the guarantee uses

    def __init__(self, base: EmbeddingSet, scale: float) -> None:
        if not isinstance(base, EmbeddingSet):
            raise TypeError(f"`base` must be an idaudit.EmbeddingSet; got {type(base).__name__}.")
        self._base = base
        self._scale = check_in_range(scale, self._scale_name, 0.0, None)
        if not np.isfinite(self._scale):
            raise InvalidInputError(f"`{self._scale_name}` must be in (0, inf); got {scale!r}.")
        self._rows = {label: base.get(label) for label in base.identities}

    # -- the Mechanism protocol -------------------------------------------------------------
    @property
    def identities(self) -> npt.NDArray[Any]:
        """Sorted identity labels of the base set, shape (n_identities,)."""
        return self._base.identities

    @property
    def dim(self) -> int:
        """Dimension of every output."""
        return int(self._base.dim)

    @property
    def base(self) -> EmbeddingSet:
        """The base embeddings the noise is added to."""
        return self._base

    @property
    def point_base(self) -> bool:
        """Whether every identity's base is a single point (all its rows equal)."""
        return all(_is_point(rows) for rows in self._rows.values())

    def sample(self, identity: Any, n: int, *, rng: RngLike = None) -> npt.NDArray[np.float64]:
        """Draw ``n`` independent outputs of the mechanism for ``identity``.

        Parameters
        ----------
        identity : label
            One of :attr:`identities`.
        n : int
            Number of draws, at least 1.
        rng : int, numpy.random.SeedSequence, numpy.random.Generator or None
            Randomness for the base rows and the noise.

        Returns
        -------
        numpy.ndarray of float64, shape (n, dim)
        """
        n = check_integer(n, "n", minimum=1)
        rows = self._rows_of(identity)  # (n_rows, d)
        gen = check_random_state(rng)
        idx = gen.integers(0, rows.shape[0], size=n)  # (n,)
        noise = self._standard_noise(gen, (n, rows.shape[1]))  # (n, d)
        out: npt.NDArray[np.float64] = rows[idx] + self._scale * noise
        return out

    # -- helpers ------------------------------------------------------------------------------
    @abstractmethod
    def _standard_noise(self, gen: np.random.Generator, shape: tuple[int, int]) -> Any:
        """Draw unit-scale noise of ``shape``; the subclass fixes the distribution."""

    def _rows_of(self, identity: Any) -> npt.NDArray[np.float64]:
        # EmbeddingSet.get names an unknown label in its error
        if identity in self._rows:
            return self._rows[identity]
        return self._base.get(identity)

    def _support_distance(self, a: Any, b: Any) -> float:
        """Largest distance, in the guarantee's norm, from a base row of ``a`` to one of ``b``."""
        return float(cdist(self._rows_of(a), self._rows_of(b), metric=self._metric).max())

    def _is_exact_pair(self, a: Any, b: Any) -> bool:
        return _is_point(self._rows_of(a)) and _is_point(self._rows_of(b))

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(n_identities={len(self.identities)}, dim={self.dim}, "
            f"{self._scale_name}={self._scale:g})"
        )


class GaussianNoise(_AdditiveNoise):
    r"""Base identity embeddings plus isotropic Gaussian noise: a known (ε, δ) benchmark.

    Parameters
    ----------
    base : EmbeddingSet
        Base embeddings per identity (normally L2-normalised, as an ``EmbeddingSet`` makes
        them). An identity with one row (or only equal rows) is a *point* base; with several
        rows the base row is drawn uniformly at random for each output, which models the
        identity's source-image distribution :math:`P_{id}`.
    sigma : float
        Standard deviation σ > 0 of the noise added to every coordinate.

    Attributes
    ----------
    default_delta : float
        1e-5: the δ at which :func:`~idaudit.mechanisms.audit_mechanism` and
        :func:`~idaudit.benchmark.noise_sweep` state the truth by default (the pure ε of
        Gaussian noise is infinite).

    Notes
    -----
    The mechanism is :math:`\tilde M(id) = X + \xi`, :math:`X \sim P_{id}`,
    :math:`\xi \sim N(0, \sigma^2 I_d)` (seed 000, Section 5.2). What is proved:

    * **Point bases, per pair** — :meth:`pair_epsilon` is the *exact* ε(δ) of the pair
      :math:`N(\mu_A, \sigma^2 I)` vs :math:`N(\mu_B, \sigma^2 I)`: the analytic Gaussian
      mechanism (Balle & Wang 2018, Theorem 8) with :math:`\Delta = \|\mu_A - \mu_B\|_2` is
      tight, because the privacy-loss distribution of two isotropic Gaussians depends only on
      that distance.
    * **Distributional bases, per pair** — :meth:`pair_epsilon` uses
      :math:`\Delta = \max_{x \in A, y \in B}\|x - y\|_2` over the two supports and is an upper
      bound on the true ε(δ): the hockey-stick divergence is jointly convex, so the mixture
      pair is no less private than its least private component pair.
    * **Mechanism-wide** — :meth:`reference_epsilon` uses
      :math:`\Delta_2 = 2\max_x\|x\|_2` (= 2, the diameter of the unit sphere, for normalised
      bases, as in Section 5.2), an upper guarantee for every pair of identities.

    The mechanism is never pure DP: ε(0) = inf.

    References
    ----------
    .. [1] B. Balle and Y.-X. Wang, "Improving the Gaussian mechanism for differential privacy:
       analytical calibration and optimal denoising", ICML 2018.

    Examples
    --------
    >>> import numpy as np
    >>> from idaudit.data import EmbeddingSet
    >>> from idaudit.mechanisms import GaussianNoise
    >>> base = EmbeddingSet(np.eye(3), ["a", "b", "c"])
    >>> mech = GaussianNoise(base, sigma=1.0)
    >>> mech.sample("a", 4, rng=0).shape
    (4, 3)
    >>> round(mech.pair_epsilon("a", "b", delta=1e-5), 4)
    6.573
    """

    default_delta = 1e-5
    _scale_name = "sigma"
    _metric = "euclidean"

    def __init__(self, base: EmbeddingSet, sigma: float) -> None:
        super().__init__(base, sigma)

    @property
    def sigma(self) -> float:
        """Noise standard deviation σ."""
        return self._scale

    @property
    def l2_sensitivity(self) -> float:
        r"""Mechanism-wide L2 sensitivity bound :math:`2\max_x\|x\|_2` (2 on the unit sphere)."""
        return 2.0 * float(np.linalg.norm(self._base.embeddings, axis=1).max())

    def reference_epsilon(self, delta: float) -> float:
        """Mechanism-wide ε(δ) guarantee, valid for every pair of identities.

        Parameters
        ----------
        delta : float
            δ in [0, 1]; δ = 0 gives ``inf``.

        Returns
        -------
        float
            ``gaussian_epsilon(delta, sigma, sensitivity=l2_sensitivity)``.
        """
        return float(gaussian_epsilon(delta, self._scale, self.l2_sensitivity))

    def pair_epsilon(self, a: Any, b: Any, delta: float) -> float:
        r"""ε(δ) of one pair: exact for point bases, an upper bound otherwise.

        Parameters
        ----------
        a, b : label
            Two identities.
        delta : float
            δ in [0, 1].

        Returns
        -------
        float
            The analytic-Gaussian ε(δ) at :math:`\Delta = \max\|x - y\|_2` over the supports
            (0 when the two supports coincide in one point).
        """
        delta = check_in_range(delta, "delta", 0.0, 1.0, closed="both")
        dist = self._support_distance(a, b)
        if dist == 0.0:
            return 0.0
        return float(gaussian_epsilon(delta, self._scale, dist))

    def is_exact(self, a: Any, b: Any, delta: float = 0.0) -> bool:
        """Whether :meth:`pair_epsilon` is the exact ε(δ) (both identities are points)."""
        return self._is_exact_pair(a, b)

    def _standard_noise(self, gen: np.random.Generator, shape: tuple[int, int]) -> Any:
        return gen.standard_normal(shape)


class LaplaceNoise(_AdditiveNoise):
    r"""Base identity embeddings plus per-coordinate Laplace noise: a known pure-ε benchmark.

    Parameters
    ----------
    base : EmbeddingSet
        Base embeddings per identity; see :class:`GaussianNoise`.
    scale : float
        Laplace scale b > 0 of the noise added to every coordinate (density
        :math:`e^{-|z|/b}/2b`).

    Attributes
    ----------
    default_delta : float
        0.0: the mechanism is pure DP, so its truth is stated at δ = 0, where it is exact for
        point bases.

    Notes
    -----
    With a point base the output density is :math:`p_A(y) \propto e^{-\|y - \mu_A\|_1/b}`, so
    the privacy loss :math:`\ln p_A(y)/p_B(y) = (\|y-\mu_B\|_1 - \|y-\mu_A\|_1)/b` is at most
    :math:`\|\mu_A - \mu_B\|_1/b` by the triangle inequality, with equality on a set of positive
    probability (every coordinate beyond both centres). What is proved:

    * **Point bases, per pair** — :meth:`pair_epsilon` is the *exact* pure ε,
      :math:`\|\mu_A - \mu_B\|_1 / b`. At δ > 0 the same number is an upper bound on ε(δ).
    * **Distributional bases, per pair** — :math:`\max_{x\in A, y\in B}\|x-y\|_1 / b`, an upper
      bound: each component pair satisfies the pure-DP density-ratio bound, and the mixtures
      inherit it.
    * **Mechanism-wide** — :meth:`reference_epsilon` is :math:`2\max_x\|x\|_1/b` (at most
      :math:`2\sqrt d/b` on the unit sphere), an upper guarantee for every pair.

    This gives the pure-DP routes (MMD-TV, ROC-HT and the certificate at δ = 0) a finite truth
    to be checked against.

    Examples
    --------
    >>> import numpy as np
    >>> from idaudit.data import EmbeddingSet
    >>> from idaudit.mechanisms import LaplaceNoise
    >>> base = EmbeddingSet(np.eye(3), ["a", "b", "c"])
    >>> mech = LaplaceNoise(base, scale=0.5)
    >>> mech.pair_epsilon("a", "b")
    4.0
    """

    default_delta = 0.0
    _scale_name = "scale"
    _metric = "cityblock"

    def __init__(self, base: EmbeddingSet, scale: float) -> None:
        super().__init__(base, scale)

    @property
    def scale(self) -> float:
        """Laplace scale b."""
        return self._scale

    @property
    def l1_sensitivity(self) -> float:
        r"""Mechanism-wide L1 sensitivity bound :math:`2\max_x\|x\|_1`."""
        return 2.0 * float(np.abs(self._base.embeddings).sum(axis=1).max())

    def reference_epsilon(self, delta: float = 0.0) -> float:
        """Mechanism-wide pure ε guarantee (also an upper bound on ε(δ) for every δ ≥ 0).

        Parameters
        ----------
        delta : float, default 0.0
            Accepted for a uniform interface with :class:`GaussianNoise`; in [0, 1].

        Returns
        -------
        float
            ``l1_sensitivity / scale``.
        """
        check_in_range(delta, "delta", 0.0, 1.0, closed="both")
        return self.l1_sensitivity / self._scale

    def pair_epsilon(self, a: Any, b: Any, delta: float = 0.0) -> float:
        r"""Pure ε of one pair: exact for point bases, an upper bound otherwise.

        Parameters
        ----------
        a, b : label
            Two identities.
        delta : float, default 0.0
            In [0, 1]. The value returned is the pure ε whatever δ; at δ > 0 it bounds ε(δ)
            from above.

        Returns
        -------
        float
            :math:`\max\|x - y\|_1 / b` over the two supports.
        """
        check_in_range(delta, "delta", 0.0, 1.0, closed="both")
        return self._support_distance(a, b) / self._scale

    def is_exact(self, a: Any, b: Any, delta: float = 0.0) -> bool:
        """Whether :meth:`pair_epsilon` is exact: point bases and δ = 0."""
        return self._is_exact_pair(a, b) and float(delta) == 0.0

    def _standard_noise(self, gen: np.random.Generator, shape: tuple[int, int]) -> Any:
        return gen.laplace(0.0, 1.0, size=shape)


def _is_point(rows: npt.NDArray[np.float64]) -> bool:
    return bool(np.all(rows == rows[0]))
