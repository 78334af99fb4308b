"""Steps (b) and (c) of DiffUMI: Top-N selection and the ranked adversary."""

from __future__ import annotations

import hashlib
import math
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

import numpy as np
import numpy.typing as npt
import torch
import xarray as xr
from tqdm.auto import tqdm

from idaudit._results import Status, provenance, variable
from idaudit._validation import (
    RngLike,
    check_in_range,
    check_integer,
    check_option,
    check_random_state,
)
from idaudit.exceptions import InvalidInputError
from idaudit.inversion._attacks import APGD, AttackOutput, CoordinateSearch, GreedyPixel
from idaudit.inversion._bank import LatentBank
from idaudit.inversion._generators import LatentGenerator
from idaudit.inversion._target import TargetModel, to_uint8
from idaudit.inversion._warp import FrameWarp

__all__ = [
    "BLACK_BOX_BUDGET",
    "BLACK_BOX_PIXEL_SHARE",
    "InversionResult",
    "RankedAdversary",
    "max_iterations",
]

_DEFAULT_T_MAX = 100  # updates per code when neither t_max nor a query budget is given
#: Black-box budget when neither ``t_max`` nor ``query_budget`` is given: Q_max of DiffMI's code
#: (10,000 queries in all, the bank's V included).
BLACK_BOX_BUDGET = 10_000
#: Black-box pixel share when ``sparsity`` is not given, for image-shaped latents: DiffMI's 1 %
#: (655 of the 256 × 256 pixels).
BLACK_BOX_PIXEL_SHARE = 0.01
#: What ``attack_options`` may set, per attack (the rest is set by the adversary's arguments).
_ATTACK_OPTIONS: dict[str, set[str]] = {
    "apgd": {"checkpoints", "alpha", "rho"},
    "greedypixel": {"last_visit", "keep"},
    "coordinate": set(),
}


def max_iterations(query_budget: int, volume: int, top_n: int) -> int:
    """``t_max = ⌊(Q_max − V) / N⌋`` (seed 002, Eq. 18): iterations per code under a budget.

    Examples
    --------
    >>> from idaudit.inversion import max_iterations
    >>> max_iterations(100_000, 1000, 3)
    33000
    """
    q = check_integer(query_budget, "query_budget", minimum=1)
    v = check_integer(volume, "volume", minimum=1)
    n = check_integer(top_n, "top_n", minimum=1)
    if q - v < n:
        raise InvalidInputError(
            f"`query_budget` must leave at least one query per code after the V = {v} Top-N "
            f"queries (>= {v + n} for top_n = {n}); got {q}."
        )
    return (q - v) // n


@dataclass(frozen=True)
class InversionResult:
    """One inverted embedding.

    Attributes
    ----------
    image : numpy.ndarray of uint8, shape (H, W, 3)
        The reconstruction ``G(x*)``.
    latent : numpy.ndarray of float32, shape latent_shape
        ``x* = x_G + δ``.
    similarity : float
        ``S(F(G(x*)), z)`` in the target model, as the attack measured it (sample estimate).
    initial_similarity : float
        Similarity of the best bank code before manipulation (Top-1 of Step (b)).
    rank : int
        1-based Top-N rank of the code returned (the first to reach ``tau_a``, else the best).
    success : bool
        Whether ``similarity ≥ tau_a``.
    iterations : int
        Attack updates over all codes tried.
    queries : int
        Target-model evaluations: ``V`` (Step (b), Eq. 13) plus every evaluation of the attack.
    seconds : float
        Wall-clock time (for :meth:`RankedAdversary.invert_many`: the batch's time divided by
        the number of targets).
    history : list of numpy.ndarray
        Per code tried, the best similarity after each evaluation.
    """

    image: npt.NDArray[np.uint8] = field(repr=False)
    latent: npt.NDArray[np.float32] = field(repr=False)
    similarity: float
    initial_similarity: float
    rank: int
    success: bool
    iterations: int
    queries: int
    seconds: float
    history: list[npt.NDArray[np.float64]] = field(repr=False)

    #: Formal status of each reported number.
    STATUS: ClassVar[dict[str, Status]] = {
        "similarity": "sample_estimate",
        "initial_similarity": "sample_estimate",
        "rank": "descriptive",
        "success": "descriptive",
        "iterations": "descriptive",
        "queries": "descriptive",
        "seconds": "descriptive",
    }


class RankedAdversary:
    """DiffUMI's ranked adversary: Top-N bank codes attacked in order, stop at ``tau_a``.

    Parameters
    ----------
    generator : LatentGenerator
    encoder : Encoder
        The target model ``F``. White-box attacks need ``encoder.differentiable``.
    bank : LatentBank
        Step (a) codes of this ``generator``.
    top_n : int, default 3
        ``N``.
    t_max : int, optional
        Most updates (APGD: ``t_max + 1`` queries with the start, per restart) or queries
        (GreedyPixel) per code. Default: 100 for APGD and CoordinateSearch without
        ``query_budget``; with one, the budget alone decides (Eq. 18's ``⌊(Q_max − V)/N⌋``, or
        each code's carried share). A given ``t_max`` caps every code as well. GreedyPixel
        with neither ``t_max`` nor ``query_budget`` gets DiffMI's budget,
        ``query_budget = 10_000`` (:data:`BLACK_BOX_BUDGET`).
    tau_a : float, optional
        Attack threshold in [−1, 1] (Eq. 14, :func:`attack_threshold`); ``None``: no early
        stop, every code is attacked and the best kept (Tab. VIII, "NO").
    attack : {"apgd", "greedypixel", "coordinate"}, default "apgd"
        ``"coordinate"``: :class:`CoordinateSearch`, the one-coordinate black-box search.
    norm : {"l2", "linf"}, default "l2"
        APGD's and CoordinateSearch's ball; GreedyPixel is an L∞ attack by construction.
    eps : float, optional
        Radius; default ``generator.default_radius[norm]``, and for GreedyPixel its step
        ``generator.default_radius["greedypixel"]`` (1.0, the authors' setting, for the
        diffusion prior; the calibrated L∞ radius 0.5 for the DCGAN; 1.0 when absent). For
        a generator whose L2 radius follows seed 002 (``generator.seed_radius_scale``, the
        :class:`DiffusionGenerator`), an encoder declaring ``seed_l2_radius`` (25 for the
        FaceNet family, Tab. II) sets the L2 radius: ``seed_l2_radius · seed_radius_scale``.
    query_budget : int, optional
        ``Q_max``: each code gets ``q = ⌊(Q_max − V)/N⌋`` queries (Eq. 18), i.e.
        ``min(t_max, q)`` GreedyPixel queries or ``min(t_max, q − 1)`` APGD updates (the
        start's gradient is a query too), so the total never exceeds the budget.
    query_split : {"eq18", "carry"}, default "eq18"
        With ``query_budget``: ``"eq18"`` gives every code ``⌊(Q_max − V)/N⌋`` queries (the
        paper); ``"carry"`` gives code ``j`` (0-based) ``⌊(Q_max − spent)/(N − j)⌋``, so the
        queries earlier codes left unused go to later codes (DiffMI). Shares are per target:
        each target's next code gets what *that* target has left. ``Q_max`` is then spent
        exactly when no code reaches ``tau_a``, no given ``t_max`` caps a code below its
        share, and the attack can use its share (CoordinateSearch stops once its
        ``sparsity`` is used up).
    sparsity : int or "all", optional
        GreedyPixel: pixels cycled over (the head of the priority order); CoordinateSearch:
        most coordinates changed. Default for GreedyPixel on image-shaped latents
        ``(C, H, W)``: DiffMI's 1 % of the ``H · W`` pixels (655 for 256 × 256); on flat
        latents (the DCGAN's 100 values, no pixels) and for CoordinateSearch: all.
        ``"all"``: every pixel.
    init : {"random", "code"}, default "random"
        APGD's start (:class:`APGD`): a random point on the ε-sphere around the code, seeded
        per (target, rank) from ``rng``, or the code itself.
    n_restarts : int, default 1
        APGD restarts per code (the best kept). Under ``query_budget`` a code's queries are
        split evenly between its restarts.
    attack_options : mapping, optional
        Further keyword arguments of the attack: APGD's ``checkpoints``, ``alpha``, ``rho``;
        GreedyPixel's ``last_visit`` and ``keep`` (``{"last_visit": "skip", "keep":
        "last"}`` is the authors' code).
    surrogate : Encoder, optional
        A differentiable encoder whose gradient orders the black-box attack's pixels. It
        scores similarity to the target embedding, so it must embed into the target model's
        space (the same dimension: a port or a copy of that model, as in the paper's
        surrogate-guided setting), not an unrelated recogniser.
    warp : FrameWarp, optional
        Generator frame → encoder crop; default a plain resize.
    rng : int, SeedSequence or Generator, default 0
    progress : bool, default False

    Attributes
    ----------
    settings_ : dict
        After :meth:`invert_many`: the resolved ``attack``, ``norm``, ``eps``, ``top_n``,
        ``t_max`` (per code and restart; under ``"carry"`` the first code's share),
        ``query_budget`` (the default's too), ``query_split``, ``tau_a``, ``sparsity``
        (``None``: every pixel), ``n_restarts`` and ``init``.

    Examples
    --------
    >>> import numpy as np
    >>> from idaudit.faces import TorchDlibEncoder
    >>> from idaudit.inversion import DCGANGenerator, LatentBank, RankedAdversary
    >>> gen, enc = DCGANGenerator(), TorchDlibEncoder()
    >>> bank = LatentBank.build(gen, 4, tau_k=0.5, tau_d=0.9, rng=0)
    >>> target = np.ones(128, np.float32)
    >>> res = RankedAdversary(gen, enc, bank=bank, top_n=1, t_max=2).invert(target)
    >>> res.queries, res.rank  # V + (t_max + 1) evaluations: no tau_a, no early stop
    (7, 1)
    """

    def __init__(
        self,
        generator: LatentGenerator,
        encoder: Any,
        *,
        bank: LatentBank,
        top_n: int = 3,
        t_max: int | None = None,
        tau_a: float | None = None,
        attack: Literal["apgd", "greedypixel", "coordinate"] = "apgd",
        norm: Literal["l2", "linf"] = "l2",
        eps: float | None = None,
        query_budget: int | None = None,
        query_split: Literal["eq18", "carry"] = "eq18",
        sparsity: int | Literal["all"] | None = None,
        surrogate: Any = None,
        warp: FrameWarp | None = None,
        rng: RngLike = 0,
        progress: bool = False,
        init: Literal["random", "code"] = "random",
        n_restarts: int = 1,
        attack_options: Mapping[str, Any] | None = None,
    ) -> None:
        self.generator = generator
        self.encoder = encoder
        self.bank = bank
        self.top_n = top_n
        self.t_max = t_max
        self.tau_a = tau_a
        self.attack = attack
        self.norm = norm
        self.eps = eps
        self.query_budget = query_budget
        self.query_split = query_split
        self.sparsity = sparsity
        self.surrogate = surrogate
        self.warp = warp
        self.rng = rng
        self.progress = progress
        self.init = init
        self.n_restarts = n_restarts
        self.attack_options = attack_options
        self._bank_embeddings: torch.Tensor | None = None
        self._bank_key: tuple[int, ...] = ()

    # -- checks --------------------------------------------------------------------------
    def _settings(self) -> dict[str, Any]:
        if not isinstance(self.bank, LatentBank):
            raise TypeError(f"`bank` must be a LatentBank; got {type(self.bank).__name__}.")
        if tuple(self.bank.latents.shape[1:]) != tuple(self.generator.latent_shape):
            raise InvalidInputError(
                f"`bank` codes have shape {self.bank.latents.shape[1:]} but the generator's "
                f"latent shape is {tuple(self.generator.latent_shape)}."
            )
        attack = check_option(self.attack, "attack", ("apgd", "greedypixel", "coordinate"))
        split = check_option(self.query_split, "query_split", ("eq18", "carry"))
        self._check_combination(attack, split)
        norm = check_option(self.norm, "norm", ("l2", "linf"))
        top_n = check_integer(self.top_n, "top_n", minimum=1)
        if top_n > self.bank.volume:
            raise InvalidInputError(
                f"`top_n` must be <= the bank volume {self.bank.volume}; got {top_n}."
            )
        cap = None if self.t_max is None else check_integer(self.t_max, "t_max", minimum=1)
        budget = self.query_budget
        if budget is None and cap is None and attack == "greedypixel":
            budget = BLACK_BOX_BUDGET
            if budget < self.bank.volume + top_n:
                raise InvalidInputError(
                    f"GreedyPixel's default budget, {BLACK_BOX_BUDGET} queries (DiffMI's), does "
                    f"not cover the bank volume {self.bank.volume} plus one query per code: "
                    "give `query_budget` or `t_max`."
                )
        t_max = _DEFAULT_T_MAX if cap is None and budget is None else cap
        check_option(self.init, "init", ("random", "code"))
        restarts = check_integer(self.n_restarts, "n_restarts", minimum=1)
        if attack != "apgd" and (self.init != "random" or restarts != 1):
            raise InvalidInputError(
                "`init` and `n_restarts` are APGD's; the black-box attacks start at the code."
            )
        # APGD's gradient at the start is a query, once per restart
        start_query = restarts if attack == "apgd" else 0
        if budget is not None:
            per_code = max_iterations(budget, self.bank.volume, top_n)
            if per_code < 2 * start_query:
                raise InvalidInputError(
                    f"`query_budget` must leave at least two queries per code for APGD (the "
                    f"start and one update, per restart): >= "
                    f"{self.bank.volume + 2 * start_query * top_n} for top_n = {top_n}; got "
                    f"{self.query_budget}."
                )
            share = per_code // restarts - 1 if attack == "apgd" else per_code
            t_max = share if cap is None else min(cap, share)
        tau_a = (
            None
            if self.tau_a is None
            else check_in_range(self.tau_a, "tau_a", -1.0, 1.0, closed="both")
        )
        eps = check_in_range(self._default_eps(attack, norm), "eps", 0.0, None)
        return {
            "attack": attack,
            "norm": norm,
            "top_n": top_n,
            "t_max": t_max,
            "t_max_cap": cap,
            "start_query": start_query,
            "n_restarts": restarts,
            "query_budget": budget,
            "query_split": split,
            "tau_a": tau_a,
            "eps": eps,
            "sparsity": self._default_sparsity(attack),
        }

    def _default_eps(self, attack: str, norm: str) -> float:
        """Return the given ``eps``, else the generator's radius (the encoder's for seed L2)."""
        if self.eps is not None:
            return float(self.eps)
        if attack == "greedypixel":
            return float(self.generator.default_radius.get("greedypixel", 1.0))
        scale = getattr(self.generator, "seed_radius_scale", None)
        declared = getattr(self.encoder, "seed_l2_radius", None)
        if norm == "l2" and scale is not None and declared is not None:
            return float(declared) * float(scale)
        return float(self.generator.default_radius[norm])

    def _default_sparsity(self, attack: str) -> int | None:
        """Return ``sparsity``, else DiffMI's 1 % of the pixels for GreedyPixel on images."""
        if isinstance(self.sparsity, str):
            check_option(self.sparsity, "sparsity", ("all",))
            return None
        if self.sparsity is not None:
            return check_integer(self.sparsity, "sparsity", minimum=1)
        shape = tuple(self.generator.latent_shape)
        if attack == "greedypixel" and len(shape) == 3:
            return max(1, int(BLACK_BOX_PIXEL_SHARE * shape[1] * shape[2]))
        return None

    def _check_combination(self, attack: str, split: str) -> None:
        """Refuse settings the chosen attack would ignore, and a bank of another generator."""
        bank_of = str(getattr(self.generator, "name", type(self.generator).__name__))
        if self.bank.generator != bank_of:
            raise InvalidInputError(
                f"`bank` was built with generator {self.bank.generator!r}, not {bank_of!r}: its "
                "codes mean nothing to this generator."
            )
        if split == "carry" and self.query_budget is None and (
            attack != "greedypixel" or self.t_max is not None  # else DiffMI's default budget
        ):
            raise InvalidInputError("`query_split='carry'` shares a budget: give `query_budget`.")
        allowed = _ATTACK_OPTIONS[attack]
        unknown = sorted(set(self.attack_options or {}) - allowed)
        if unknown:
            raise InvalidInputError(
                f"`attack_options` for {attack!r} may hold {sorted(allowed) or 'nothing'}; got "
                f"{unknown}."
            )
        if attack == "apgd" and (self.sparsity is not None or self.surrogate is not None):
            raise InvalidInputError(
                "`sparsity` and `surrogate` steer the black-box attacks; APGD uses neither."
            )
        if self.surrogate is not None:
            if not bool(getattr(self.surrogate, "differentiable", False)):
                raise InvalidInputError(
                    "`surrogate` must be differentiable: its gradient orders the pixels."
                )
            if int(self.surrogate.dim) != int(self.encoder.dim):
                raise InvalidInputError(
                    f"`surrogate` must embed into the target model's space (dimension "
                    f"{self.encoder.dim}, the target embedding is scored by it); got "
                    f"{self.surrogate.dim}."
                )

    def _target_model(self, attack: str) -> TargetModel:
        return TargetModel(self.generator, self.encoder, self.warp, white_box=attack == "apgd")

    def _check_targets(self, z: Any, dim: int) -> torch.Tensor:
        try:
            arr = np.asarray(z, dtype=np.float32)
        except (TypeError, ValueError) as exc:
            raise InvalidInputError("target embeddings must be an array of numbers.") from exc
        if arr.ndim == 1:
            arr = arr[None]
        if arr.ndim != 2 or arr.shape[0] == 0 or arr.shape[1] != dim:
            raise InvalidInputError(
                f"target embeddings must have shape (n, {dim}) with n >= 1 (the encoder's "
                f"dimension); got {arr.shape}."
            )
        norms = np.linalg.norm(arr, axis=1)
        if not np.isfinite(arr).all() or (norms <= 1e-12).any():
            raise InvalidInputError("target embeddings must be finite and non-zero.")
        return torch.from_numpy(arr / norms[:, None])

    # -- Step (b) ------------------------------------------------------------------------
    def bank_embeddings(self) -> torch.Tensor:
        """``F`` of every bank image, ``(V, dim)``, computed once and reused for every target.

        Recomputed when ``bank``, ``encoder``, ``generator`` or ``warp`` is replaced.
        """
        key = (id(self.bank), id(self.encoder), id(self.generator), id(self.warp))
        if self._bank_embeddings is None or self._bank_key != key:
            model = self._target_model(self._settings()["attack"])
            chunks = [
                model.embed_pixels(self.bank.images[s : s + 64])
                for s in range(0, self.bank.volume, 64)
            ]
            self._bank_embeddings, self._bank_key = torch.cat(chunks), key
        return self._bank_embeddings

    def top_n_codes(
        self, z: npt.ArrayLike
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float64]]:
        """Return the indices and similarities of the ``top_n`` bank codes closest to each target.

        Returns
        -------
        index : numpy.ndarray of int64, shape (n_targets, top_n)
            Best first (ties: lower bank index first).
        similarity : numpy.ndarray of float64, shape (n_targets, top_n)
        """
        s = self._settings()
        targets = self._check_targets(z, int(self.encoder.dim))
        sims = targets @ self.bank_embeddings().T  # (n_targets, V)
        order = torch.argsort(-sims, dim=1, stable=True)[:, : s["top_n"]]
        return order.numpy().astype(np.int64), torch.gather(sims, 1, order).double().numpy()

    # -- Step (c) ------------------------------------------------------------------------
    def invert(self, z: npt.ArrayLike) -> InversionResult:
        """Reconstruct a face whose embedding matches ``z``.

        Parameters
        ----------
        z : array_like, shape (dim,)
            Target embedding (normalised internally).

        Returns
        -------
        InversionResult
        """
        arr = np.asarray(z, dtype=np.float32)
        if arr.ndim != 1:
            raise InvalidInputError(
                f"`z` must be one embedding of shape ({self.encoder.dim},); got {arr.shape}. "
                "Use invert_many for several."
            )
        return self.invert_many(arr[None])[0]

    def invert_many(self, targets: npt.ArrayLike) -> list[InversionResult]:
        """Invert several targets at once: each step runs one batched forward for all of them.

        Every target follows exactly the ranked schedule of :meth:`invert` (code 1, then code 2
        only if code 1 missed ``tau_a``, ...); rows that stopped are not evaluated further.

        Parameters
        ----------
        targets : array_like, shape (n_targets, dim)

        Returns
        -------
        list of InversionResult
        """
        start = time.perf_counter()
        s = self._settings()
        self.settings_ = {
            k: s[k]
            for k in (
                "attack",
                "norm",
                "eps",
                "top_n",
                "t_max",
                "query_budget",
                "query_split",
                "tau_a",
                "sparsity",
                "n_restarts",
            )
        }
        self.settings_["init"] = self.init if s["attack"] == "apgd" else "code"
        if s["attack"] == "greedypixel":
            self.settings_["norm"] = "linf"  # an L∞ attack whatever `norm` says
        z = self._check_targets(targets, int(self.encoder.dim))
        n = z.shape[0]
        index, top_sims = self.top_n_codes(z.numpy())
        model = self._target_model(s["attack"])
        device = self.generator.device
        tau = -math.inf if s["tau_a"] is None else s["tau_a"]
        seeds = _target_seeds(self.rng, z.numpy(), s["top_n"])

        best_val = np.full(n, -np.inf)
        best_latent: list[torch.Tensor | None] = [None] * n
        best_rank = np.zeros(n, dtype=np.int64)
        iterations = np.zeros(n, dtype=np.int64)
        queries = np.full(n, self.bank.volume, dtype=np.int64)
        history: list[list[npt.NDArray[np.float64]]] = [[] for _ in range(n)]
        done = np.zeros(n, dtype=bool)
        bar = tqdm(range(s["top_n"]), desc="ranked adversary", disable=not self.progress)
        for r in bar:
            active = np.flatnonzero(~done)
            if active.size == 0:
                break
            for rows, s_r in self._code_groups(s, r, active, queries):
                x0 = torch.from_numpy(self.bank.latents[index[rows, r]]).to(device)
                tz = z[rows].to(device)

                def objective(
                    x: torch.Tensor, sub: torch.Tensor, tz: torch.Tensor = tz
                ) -> torch.Tensor:
                    return model.similarity(x, tz[sub.to(tz.device)])

                out = self._run_attack(s_r, objective, x0, top_sims[rows, r], seeds[rows, r], tz)
                vals = out.values.double().cpu().numpy()
                for j, t in enumerate(rows):
                    iterations[t] += int(out.iterations[j])
                    queries[t] += int(out.queries[j])
                    history[t].append(out.history[j])
                    if vals[j] > best_val[t]:
                        best_val[t], best_rank[t] = vals[j], r + 1
                        best_latent[t] = out.latents[j].detach().cpu()
                    if s["tau_a"] is not None and vals[j] >= tau:
                        done[t] = True
        latents = torch.stack([x for x in best_latent if x is not None])
        with torch.no_grad():
            images = to_uint8(model.images(latents.to(device)))
        seconds = (time.perf_counter() - start) / n
        return [
            InversionResult(
                image=images[t],
                latent=latents[t].numpy().astype(np.float32),
                similarity=float(best_val[t]),
                initial_similarity=float(top_sims[t, 0]),
                rank=int(best_rank[t]),
                success=bool(s["tau_a"] is not None and best_val[t] >= tau),
                iterations=int(iterations[t]),
                queries=int(queries[t]),
                seconds=float(seconds),
                history=history[t],
            )
            for t in range(n)
        ]

    def _code_groups(
        self,
        s: dict[str, Any],
        r: int,
        active: npt.NDArray[np.intp],
        queries: npt.NDArray[np.int64],
    ) -> list[tuple[npt.NDArray[np.intp], dict[str, Any]]]:
        """Split the active targets into batches for code ``r``, each with its settings.

        One batch, unless queries carry over (DiffMI's rule): then each target's code ``r``
        gets ``⌊left / (N − r)⌋`` of what *that* target has left, so targets that have spent
        different amounts run in separate batches.
        """
        if s["query_budget"] is None or s["query_split"] != "carry":
            return [(active, s)]
        groups = []
        for spent in np.unique(queries[active]):
            share = (int(s["query_budget"]) - int(spent)) // (s["top_n"] - r)
            if s["attack"] == "apgd":
                share = share // s["n_restarts"] - 1
            t_max = share if s["t_max_cap"] is None else min(s["t_max_cap"], share)
            groups.append((active[queries[active] == spent], {**s, "t_max": t_max}))
        return groups

    def _run_attack(
        self,
        s: dict[str, Any],
        objective: Any,
        x0: torch.Tensor,
        initial: npt.NDArray[np.float64],
        seeds: npt.NDArray[np.int64],
        targets: torch.Tensor,
    ) -> AttackOutput:
        options = dict(self.attack_options or {})
        if s["attack"] == "apgd":
            return APGD(
                norm=s["norm"],
                eps=s["eps"],
                t_max=s["t_max"],
                tau=s["tau_a"],
                init=self.init,
                n_restarts=s["n_restarts"],
                **options,
            ).run(objective, x0, row_seeds=seeds)
        priority = None
        if self.surrogate is not None:
            same = self.warp is not None and self.warp.output_size == self.surrogate.input_size
            surrogate = TargetModel(
                self.generator, self.surrogate, self.warp if same else None, white_box=True
            )
            x = x0.detach().requires_grad_(True)
            with torch.enable_grad():
                f = surrogate.similarity(x, targets)
                (priority,) = torch.autograd.grad(f.sum(), x)
        # one random stream per (target, rank): a batched run equals the one-target runs
        attack: GreedyPixel | CoordinateSearch
        if s["attack"] == "greedypixel":
            attack = GreedyPixel(
                eps=s["eps"], t_max=s["t_max"], tau=s["tau_a"], sparsity=s["sparsity"], **options
            )
        else:
            attack = CoordinateSearch(
                norm=s["norm"],
                eps=s["eps"],
                t_max=s["t_max"],
                tau=s["tau_a"],
                sparsity=s["sparsity"],
                **options,
            )
        initial_t = torch.as_tensor(initial, dtype=torch.float32, device=x0.device)
        return attack.run(objective, x0, initial_t, priority, row_seeds=seeds)


def _target_seeds(rng: RngLike, z: npt.NDArray[np.float32], top_n: int) -> npt.NDArray[np.int64]:
    """One seed per (target, rank), from ``rng`` and the target's own bytes.

    A target's seeds do not depend on its position or on the other targets of the batch, so
    ``invert_many(z)[k]`` equals ``invert(z[k])`` for the randomised black-box attacks too.
    """
    base = int(check_random_state(rng).integers(0, 2**63 - 1))
    out = np.empty((z.shape[0], top_n), dtype=np.int64)
    for t, row in enumerate(np.ascontiguousarray(z, dtype=np.float32)):
        digest = int.from_bytes(hashlib.sha256(row.tobytes()).digest()[:8], "little")
        state = np.random.SeedSequence([base, digest]).generate_state(top_n, np.uint64)
        out[t] = (state >> np.uint64(1)).astype(np.int64)
    return out


def results_to_xarray(results: list[InversionResult], **attrs: Any) -> xr.Dataset:
    """One Dataset (dim ``target``) of several :class:`InversionResult`."""

    def col(name: str) -> Any:
        return [getattr(r, name) for r in results]

    names = {
        "similarity": "cosine similarity to the target after the attack (target model)",
        "initial_similarity": "cosine similarity of the Top-1 bank code before the attack",
        "rank": "Top-N rank of the returned code",
        "success": "similarity reached tau_a",
        "iterations": "attack updates",
        "queries": "target-model evaluations (V + attack)",
        "seconds": "wall-clock seconds",
    }
    data = {
        k: variable("target", col(k), long_name=v, status=InversionResult.STATUS[k])
        for k, v in names.items()
    }
    return xr.Dataset(data, attrs=provenance(title="RankedAdversary.invert_many", settings=attrs))
