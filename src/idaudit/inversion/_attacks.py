"""Latent-code attacks maximising a similarity: APGD (white-box) and GreedyPixel (black-box).

Both run a batch of independent problems at once (one row per latent code): each row has its
own start, ball and early stop, and a stopped row is no longer evaluated, so a batched run gives
each row what a run on that row alone gives.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

import numpy as np
import numpy.typing as npt
import torch

from idaudit._validation import (
    RngLike,
    check_in_range,
    check_integer,
    check_option,
    check_random_state,
)
from idaudit.exceptions import InvalidInputError

__all__ = [
    "APGD",
    "AttackOutput",
    "CoordinateSearch",
    "GreedyPixel",
    "apgd_checkpoints",
    "project",
    "random_starts",
]

Norm = Literal["l2", "linf"]
#: ``f(latents, rows) -> values``: the objective of the rows ``rows`` at ``latents`` (one per row).
Objective = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


@dataclass
class AttackOutput:
    """What an attack returns for a batch of ``B`` latent codes.

    Attributes
    ----------
    latents : torch.Tensor, shape (B, *latent_shape)
        Best iterate of each row (the highest objective seen).
    values : torch.Tensor, shape (B,)
        Objective at ``latents``.
    initial : torch.Tensor, shape (B,)
        Objective at the start.
    iterations : numpy.ndarray of int64, shape (B,)
        Updates made per row (fewer than ``t_max`` after an early stop).
    queries : numpy.ndarray of int64, shape (B,)
        Objective evaluations per row.
    history : list of numpy.ndarray
        Per row, the best value after each evaluation.
    """

    latents: torch.Tensor
    values: torch.Tensor
    initial: torch.Tensor
    iterations: npt.NDArray[np.int64]
    queries: npt.NDArray[np.int64]
    history: list[npt.NDArray[np.float64]] = field(repr=False)


def project(delta: torch.Tensor, eps: float, norm: str) -> torch.Tensor:
    """Project perturbations (one per row) onto the ``norm`` ball of radius ``eps``."""
    if norm == "linf":
        return delta.clamp(-eps, eps)
    flat = delta.reshape(delta.shape[0], -1)
    scale = (eps / flat.norm(dim=1).clamp_min(1e-12)).clamp(max=1.0)  # (B,)
    out: torch.Tensor = delta * scale.view(-1, *([1] * (delta.ndim - 1)))
    return out


def _direction(grad: torch.Tensor, norm: str) -> torch.Tensor:
    if norm == "linf":
        return grad.sign()
    flat = grad.reshape(grad.shape[0], -1)
    out: torch.Tensor = grad / flat.norm(dim=1).clamp_min(1e-12).view(-1, *([1] * (grad.ndim - 1)))
    return out


def apgd_checkpoints(n_iter: int, rule: Literal["paper", "code"] = "paper") -> list[int]:
    """Return the iterations at which APGD may halve its step (Croce & Hein 2020, Sec. 3.2).

    ``rule="paper"``: ``p_0 = 0``, ``p_1 = 0.22``,
    ``p_{j+1} = p_j + max(p_j − p_{j−1} − 0.03, 0.06)``; checkpoints ``w_j = ⌈p_j · n_iter⌉``
    for ``p_j ≤ 1``. ``rule="code"``: the integer recurrence of Croce's ``autopgd_base.py``:
    first span ``k = max(⌊0.22 n⌋, 1)``, then ``k ← max(k − max(⌊0.03 n⌋, 1), max(⌊0.06 n⌋, 1))``
    after each checkpoint. Both agree at ``n_iter`` = 100, 200 and 1000 (besides the paper's
    ``0``, which is no halving point).

    Examples
    --------
    >>> from idaudit.inversion._attacks import apgd_checkpoints
    >>> apgd_checkpoints(100)
    [0, 22, 41, 57, 70, 80, 87, 93, 99]
    >>> apgd_checkpoints(99), apgd_checkpoints(99, "code")
    ([0, 22, 41, 57, 70, 80, 87, 93, 99], [21, 40, 57, 72, 85, 96])
    """
    n_iter = check_integer(n_iter, "n_iter", minimum=1)
    if check_option(rule, "rule", ("paper", "code")) == "code":
        span = max(int(0.22 * n_iter), 1)
        shrink, floor = max(int(0.03 * n_iter), 1), max(int(0.06 * n_iter), 1)
        out, at = [], 0
        while at + span <= n_iter:
            at += span
            out.append(at)
            span = max(span - shrink, floor)
        return out
    p = [0.0, 0.22]
    while True:
        nxt = p[-1] + max(p[-1] - p[-2] - 0.03, 0.06)
        if nxt > 1.0:
            break
        p.append(nxt)
    return sorted({math.ceil(round(q * n_iter, 9)) for q in p})


def random_starts(x0: torch.Tensor, eps: float, norm: str, seeds: npt.ArrayLike) -> torch.Tensor:
    """One random start per row around ``x0``, each row from its own seed.

    L2: ``x0 + ε · u/‖u‖`` with ``u`` standard normal, a point *on* the sphere of radius ``ε``
    (Croce's ``autopgd_base.py`` and DiffMI). L∞: ``x0 + ε · t/‖t‖_∞`` with ``t = 2v − 1``,
    ``v`` uniform on [0, 1): on the surface of the cube, one coordinate at ``±ε``, as Croce's
    code divides the uniform draw by its largest magnitude. Drawn on the CPU in float32, so a
    row's start depends only on its seed, not on the device or the batch.
    """
    seeds = np.asarray(seeds, dtype=np.int64).ravel()
    out = []
    for row, s in zip(x0, seeds, strict=True):
        g = torch.Generator().manual_seed(int(s))
        if norm == "l2":
            u = torch.randn(row.shape, generator=g)
            u = u / u.norm().clamp_min(1e-12)
        else:
            u = 2.0 * torch.rand(row.shape, generator=g) - 1.0
            u = u / u.abs().max().clamp_min(1e-12)  # on the L∞ sphere (autopgd_base.py)
        out.append(row + eps * u.to(row.device, row.dtype))
    return torch.stack(out)


class APGD:
    """Auto-PGD (Croce & Hein 2020) written for a maximised objective, on latent codes.

    Parameters
    ----------
    norm : {"l2", "linf"}, default "l2"
    eps : float
        Radius of the ball around the starting code.
    t_max : int, default 100
        Most updates per code and restart.
    tau : float, optional
        Stop a row as soon as its best value reaches ``tau`` (the attack threshold τ_A).
    alpha : float, default 0.75
        Momentum weight.
    rho : float, default 0.75
        A checkpoint halves the step when fewer than ``rho`` of the steps since the last one
        increased the objective (``rule="code"``: at most ``rho``).
    init : {"random", "code"}, default "random"
        ``"random"``: start at a random point on the L2 sphere of radius ``eps`` around the
        code (on the L∞ sphere, the cube's surface, for ``"linf"``), as Croce's
        ``autopgd_base.py`` and DiffMI do;
        the ball stays centred on the code. ``"code"``: start at the code itself.
    n_restarts : int, default 1
        Independent random starts per row; the best result is kept. Rows that reached
        ``tau`` are not restarted. Needs ``init="random"`` when above 1.
    checkpoints : {"paper", "code"}, default "paper"
        :func:`apgd_checkpoints` rule and halving test: ``"paper"`` halves when the share of
        increasing steps is ``< rho`` at ``⌈p_j n⌉``, a step increasing when it beats the
        point it started from; ``"code"`` halves at ``≤ rho`` at the integer checkpoints of
        Croce's code, counting as that code does: each iterate against the previous
        iterate's value (a reset to the best point changes nothing there), the first
        against 0.
    rng : int, SeedSequence or Generator, default 0
        Random starts when :meth:`run` gets no ``row_seeds``.

    Notes
    -----
    Start ``x⁰``, step ``η = 2ε``; ``x¹ = P(x⁰ + η s(∇f(x⁰)))`` and then
    ``z = P(xᵏ + η s(∇f(xᵏ)))``, ``xᵏ⁺¹ = P(xᵏ + α(z − xᵏ) + (1 − α)(xᵏ − xᵏ⁻¹))`` with
    ``s`` the sign (L∞) or the L2-normalised gradient (L2) and ``P`` the projection on the
    ball around the code. At each checkpoint ``w_j`` (:func:`apgd_checkpoints`) the step is
    halved, and the iterate reset to the best point, when

    1. fewer than ``ρ · (w_j − w_{j−1})`` of the steps since ``w_{j−1}`` increased ``f``, or
    2. ``η^(w_{j−1}) = η^(w_j)`` and ``f_max^(w_{j−1}) = f_max^(w_j)``: the step was not
       halved at ``w_{j−1}`` and the best value did not improve since (``η^(w_{j−1})`` is
       the step *before* that checkpoint's halving).

    A restart keeps the momentum: the next step's momentum term is ``x_max − xᵏ⁻¹``, as in
    Croce's code. The best iterate is returned. Queries: the start and one per update,
    ``t_max + 1`` per code and restart without an early stop. With ``init="random"`` the
    best iterate can score below the code itself (the code is not among the iterates).

    References
    ----------
    F. Croce, M. Hein, "Reliable evaluation of adversarial robustness with an ensemble of
    diverse parameter-free attacks", ICML 2020.

    Examples
    --------
    >>> import torch
    >>> from idaudit.inversion import APGD
    >>> c = torch.tensor([[3.0, 4.0]])
    >>> f = lambda x, rows: torch.nn.functional.cosine_similarity(x, c[rows], dim=1)
    >>> out = APGD(eps=1.0, t_max=50).run(f, torch.tensor([[4.0, 0.0]]))
    >>> round(float(out.values[0]), 2)  # the optimum: cos(acos(0.6) - asin(1/4)) = 0.781
    0.78
    """

    def __init__(
        self,
        *,
        norm: Norm = "l2",
        eps: float = 1.0,
        t_max: int = 100,
        tau: float | None = None,
        alpha: float = 0.75,
        rho: float = 0.75,
        init: Literal["random", "code"] = "random",
        n_restarts: int = 1,
        checkpoints: Literal["paper", "code"] = "paper",
        rng: RngLike = 0,
    ) -> None:
        self.norm = norm
        self.eps = eps
        self.t_max = t_max
        self.tau = tau
        self.alpha = alpha
        self.rho = rho
        self.init = init
        self.n_restarts = n_restarts
        self.checkpoints = checkpoints
        self.rng = rng

    def _check(self) -> None:
        check_option(self.norm, "norm", ("l2", "linf"))
        _check_budget(self.eps, self.t_max, self.tau)
        check_in_range(self.alpha, "alpha", 0.0, 1.0, closed="right")
        check_in_range(self.rho, "rho", 0.0, 1.0, closed="both")
        check_option(self.init, "init", ("random", "code"))
        check_option(self.checkpoints, "checkpoints", ("paper", "code"))
        n = check_integer(self.n_restarts, "n_restarts", minimum=1)
        if n > 1 and self.init == "code":
            raise InvalidInputError(
                f"`n_restarts` > 1 needs `init='random'`: restarts from the code itself repeat "
                f"one run; got n_restarts={n} with init='code'."
            )

    def run(
        self,
        objective: Objective,
        x0: torch.Tensor,
        *,
        row_seeds: npt.ArrayLike | None = None,
    ) -> AttackOutput:
        """Maximise ``objective`` in the ball around ``x0``.

        Parameters
        ----------
        objective : callable
            ``objective(latents, rows)`` returns the ``(k,)`` values of rows ``rows`` (a long
            tensor of row indices) at ``latents`` ``(k, *latent_shape)``, differentiably.
        x0 : torch.Tensor, shape (B, *latent_shape)
            The codes: centres of the balls (and the starts with ``init="code"``).
        row_seeds : array_like of int, shape (B,), optional
            One seed per row for its random starts (then a row's run does not depend on the
            other rows of the batch); default: drawn from ``rng``.

        Returns
        -------
        AttackOutput
            ``initial`` is the value at the first start; ``queries`` and ``iterations`` add
            up over restarts; ``history`` runs on over restarts (best value so far).
        """
        self._check()
        eps, norm = float(self.eps), str(self.norm)
        tau = math.inf if self.tau is None else float(self.tau)
        x0 = x0.detach()
        b = x0.shape[0]
        seeds = _seeds(self.rng, row_seeds, b)
        best_x = x0.clone()
        best_f = torch.full((b,), -math.inf, device=x0.device)
        initial = torch.zeros(b, device=x0.device)
        queries = np.zeros(b, dtype=np.int64)
        iterations = np.zeros(b, dtype=np.int64)
        history: list[list[float]] = [[] for _ in range(b)]
        for restart in range(int(self.n_restarts)):
            rows = torch.nonzero(best_f < tau).flatten() if restart else torch.arange(b)
            if rows.numel() == 0:
                break
            rows = rows.to(x0.device)
            sub = rows.cpu().numpy()
            if self.init == "random":
                # restart r of a row draws from (row seed, r): batching never changes it
                starts = random_starts(
                    x0[rows],
                    eps,
                    norm,
                    [
                        np.random.SeedSequence([int(seeds[i]), restart]).generate_state(1)[0] >> 1
                        for i in sub
                    ],
                )
            else:
                starts = x0[rows]

            def local(x: torch.Tensor, r: torch.Tensor, rows: torch.Tensor = rows) -> torch.Tensor:
                return objective(x, rows[r.to(rows.device)])

            out = self._run_once(local, x0[rows], starts, tau)
            if restart == 0:
                initial = out.initial.clone()
            queries[sub] += out.queries
            iterations[sub] += out.iterations
            better = out.values > best_f[rows]
            up = rows[better]
            best_x[up], best_f[up] = out.latents[better], out.values[better]
            for j, i in enumerate(sub.tolist()):
                h = out.history[j]
                prev = history[i][-1] if history[i] else -math.inf
                history[i].extend(np.maximum(h, prev).tolist())
        return AttackOutput(
            latents=best_x,
            values=best_f,
            initial=initial,
            iterations=iterations,
            queries=queries,
            history=[np.asarray(h, dtype=np.float64) for h in history],
        )

    def _run_once(
        self, objective: Objective, x0: torch.Tensor, start: torch.Tensor, tau: float
    ) -> AttackOutput:
        """One APGD run of every row from ``start`` in the balls around ``x0``."""
        eps, norm, t_max = float(self.eps), str(self.norm), int(self.t_max)
        code_rule = self.checkpoints == "code"
        b = x0.shape[0]
        view = (-1, *([1] * (x0.ndim - 1)))
        all_rows = torch.arange(b, device=x0.device)

        def value_and_grad(
            x: torch.Tensor, rows: torch.Tensor
        ) -> tuple[torch.Tensor, torch.Tensor]:
            x = x.detach().requires_grad_(True)
            with torch.enable_grad():
                f = objective(x, rows)
                (g,) = torch.autograd.grad(f.sum(), x)
            if not bool(torch.isfinite(f).all()):
                raise InvalidInputError(_NOT_FINITE)
            return f.detach().float(), g.detach()

        start = start.detach()
        f0, g0 = value_and_grad(start, all_rows)
        queries = np.ones(b, dtype=np.int64)
        iterations = np.zeros(b, dtype=np.int64)
        history: list[list[float]] = [[float(v)] for v in f0.cpu()]
        best_x, best_f, best_g = start.clone(), f0.clone(), g0.clone()
        x_cur, g_cur, f_cur = start.clone(), g0, f0.clone()
        x_prev = start.clone()
        step = torch.full((b,), 2.0 * eps, device=x0.device)
        checkpoints = set(apgd_checkpoints(t_max, "code" if code_rule else "paper")) - {0}
        last_ckpt = torch.zeros(b, dtype=torch.long, device=x0.device)
        n_better = torch.zeros(b, device=x0.device)
        # Croce's code counts f(x^(k)) > f(x^(k-1)) over its record of iterate values, which a
        # halving's reset to the best point does not touch, and whose entry before the first
        # is still 0 (loss_steps[-1] of a zeroed array); the paper compares with the reset point
        f_last = torch.zeros_like(f0)
        # condition 2 needs a previous checkpoint: off at the first (Croce's code starts
        # with reduced_last_check true), so NaN never compares equal there
        step_at_ckpt = torch.full_like(step, float("nan"))
        best_at_ckpt = best_f.clone()
        active = best_f < tau
        for k in range(t_max):
            rows = torch.nonzero(active).flatten()
            if rows.numel() == 0:
                break
            xc, xp, gc = x_cur[rows], x_prev[rows], g_cur[rows]
            z = x0[rows] + project(
                xc + step[rows].view(view) * _direction(gc, norm) - x0[rows], eps, norm
            )
            if k == 0:
                x_new = z
            else:
                moved = xc + self.alpha * (z - xc) + (1.0 - self.alpha) * (xc - xp)
                x_new = x0[rows] + project(moved - x0[rows], eps, norm)
            f_new, g_new = value_and_grad(x_new, rows)
            queries[rows.cpu().numpy()] += 1
            iterations[rows.cpu().numpy()] += 1
            n_better[rows] += (f_new > (f_last[rows] if code_rule else f_cur[rows])).float()
            f_last[rows] = f_new
            x_prev[rows], x_cur[rows], g_cur[rows], f_cur[rows] = xc, x_new, g_new, f_new
            improved = f_new > best_f[rows]
            up = rows[improved]
            best_x[up], best_f[up], best_g[up] = x_new[improved], f_new[improved], g_new[improved]
            for r in rows.cpu().tolist():
                history[r].append(float(best_f[r]))
            if k + 1 in checkpoints:
                span = (k + 1 - last_ckpt[rows]).float()
                # Croce's code halves at "at most rho" increasing steps, the paper at "fewer"
                cond1 = (
                    n_better[rows] <= self.rho * span
                    if code_rule
                    else n_better[rows] < self.rho * span
                )
                # condition 2 compares with the step and best value *at* the previous
                # checkpoint, recorded before that checkpoint's halving (Croce & Hein, Sec. 3.2)
                cond2 = (step_at_ckpt[rows] == step[rows]) & (best_at_ckpt[rows] == best_f[rows])
                step_at_ckpt[rows] = step[rows]
                best_at_ckpt[rows] = best_f[rows]
                halve = rows[cond1 | cond2]
                step[halve] /= 2.0
                # restart the halved rows from their best point; x_prev is kept, so the
                # momentum term of the next step is x_best - x^(k-1), as in Croce's code
                x_cur[halve], g_cur[halve], f_cur[halve] = (
                    best_x[halve],
                    best_g[halve],
                    best_f[halve],
                )
                last_ckpt[rows] = k + 1
                n_better[rows] = 0.0
            active = active & (best_f < tau)
        return AttackOutput(
            latents=best_x,
            values=best_f,
            initial=f0,
            iterations=iterations,
            queries=queries,
            history=[np.asarray(h, dtype=np.float64) for h in history],
        )


class GreedyPixel:
    """GreedyPixel (Wang et al. 2025): a query-only greedy search, one latent pixel at a time.

    Parameters
    ----------
    eps : float, default 1.0
        Per-coordinate step and L∞ radius around the start (the authors' setting in DiffMI:
        ``eps = 1`` on standard-normal diffusion latents).
    t_max : int, default 100
        Queries per code (one query = one evaluation; Eq. 15). Spent exactly unless ``tau``
        is reached first.
    sparsity : int, optional
        Number of pixels cycled over: the first ``sparsity`` of the priority order (DiffMI:
        1 % of the 256 × 256 pixels, 655); default: all pixels.
    tau : float, optional
        Early stop at the attack threshold.
    rng : int, SeedSequence or Generator, default 0
        Random pixel order when no priority is given.
    last_visit : {"partial", "skip"}, default "partial"
        When fewer queries are left than a visit has candidates: score only those (the
        budget is spent exactly), or stop before the visit (the authors' code).
    keep : {"best", "last"}, default "best"
        Return the best point seen, or the last iterate (the authors' code). Every value
        was observed, so ``"best"`` is never worse for the same queries.

    Notes
    -----
    A latent ``(C, H, W)`` has ``H · W`` pixels of ``C`` channels; a flat latent ``(d,)`` has
    ``d`` pixels of one channel. Pixels are visited in priority order, cyclically. At pixel
    ``p`` the attack scores the ``2^C`` candidates that set the pixel to ``x⁰_p + ε s`` with
    ``s ∈ {−1, +1}^C`` (8 for ``C = 3``), all other pixels as they are, in one batch of ``2^C``
    queries, and moves the pixel to the best candidate — also when it is worse than the
    current point (the candidates are centred on the start, so a revisit may undo a move).
    The iterate therefore stays in the L∞ ball of radius ``ε`` and differs from ``x⁰`` by
    exactly ``±ε`` on every channel of each visited pixel. By default the last visit scores
    only the candidates the budget still pays for, so a row spends exactly ``t_max`` queries,
    and the best point seen is returned (``last_visit="skip", keep="last"``: the authors'
    code, which stops before a partial visit and returns the last iterate).

    The priority of row ``i`` can come from a surrogate's gradient ``g_i``: pixels by
    decreasing ``Σ_c |g_i[c, p]|``. Without one the order is a random permutation. The
    start's value is not re-queried: it is the Top-N similarity already paid for (Eq. 13).

    References
    ----------
    H. Wang et al., "GreedyPixel: fine-grained black-box adversarial attack via greedy
    algorithm", IEEE TIFS 2025.

    Examples
    --------
    >>> import torch
    >>> from idaudit.inversion import GreedyPixel
    >>> c = torch.tensor([[1.0, 2.0, 3.0]])
    >>> f = lambda x, rows: -(x - c[rows]).square().sum(dim=1)
    >>> x0 = torch.zeros(1, 3)
    >>> out = GreedyPixel(eps=1.0, t_max=6).run(f, x0, f(x0, torch.tensor([0])))
    >>> out.latents, int(out.queries[0])
    (tensor([[1., 1., 1.]]), 6)
    """

    def __init__(
        self,
        *,
        eps: float = 1.0,
        t_max: int = 100,
        sparsity: int | None = None,
        tau: float | None = None,
        rng: RngLike = 0,
        last_visit: Literal["partial", "skip"] = "partial",
        keep: Literal["best", "last"] = "best",
    ) -> None:
        self.eps = eps
        self.t_max = t_max
        self.sparsity = sparsity
        self.tau = tau
        self.rng = rng
        self.last_visit = last_visit
        self.keep = keep

    def _order(
        self,
        x0: torch.Tensor,
        priority: torch.Tensor | None,
        row_seeds: npt.ArrayLike | None,
        n_ch: int,
        n_px: int,
    ) -> npt.NDArray[np.int64]:
        """Each row's pixels in visiting order: by surrogate |gradient|, else seeded at random."""
        b = x0.shape[0]
        if priority is not None:
            _check_priority(priority, x0)
            if not bool(torch.isfinite(priority).all()):
                raise InvalidInputError("`priority` must be finite (a surrogate gradient).")
            score = priority.detach().reshape(b, n_ch, n_px).abs().sum(dim=1).cpu()  # (B, P)
            return np.asarray(torch.argsort(score, dim=1, descending=True, stable=True).numpy())
        seeds = _seeds(self.rng, row_seeds, b)
        return np.stack([np.random.default_rng(int(s)).permutation(n_px) for s in seeds])

    def run(
        self,
        objective: Objective,
        x0: torch.Tensor,
        initial: torch.Tensor,
        priority: torch.Tensor | None = None,
        *,
        row_seeds: npt.ArrayLike | None = None,
    ) -> AttackOutput:
        """Greedy search from ``x0`` whose objective values ``initial`` are already known.

        Parameters
        ----------
        objective : callable
            ``objective(latents, rows) -> values``, evaluated without gradients.
        x0 : torch.Tensor, shape (B, *latent_shape)
        initial : torch.Tensor, shape (B,)
            Finite objective values at ``x0``.
        priority : torch.Tensor, shape (B, *latent_shape), optional
            A surrogate gradient per row (see Notes).
        row_seeds : array_like of int, shape (B,), optional
            One seed per row for its random order (then a row's search does not depend on the
            other rows of the batch); default: drawn from ``rng``.

        Returns
        -------
        AttackOutput
            ``queries`` counts every evaluation: exactly ``t_max`` per row unless ``tau`` was
            reached; ``iterations`` counts pixel visits.
        """
        eps, t_max, tau = _check_budget(self.eps, self.t_max, self.tau)
        partial = check_option(self.last_visit, "last_visit", ("partial", "skip")) == "partial"
        keep_last = check_option(self.keep, "keep", ("best", "last")) == "last"
        n_ch, n_px = _check_greedy_inputs(x0, initial)
        k = n_px if self.sparsity is None else check_integer(self.sparsity, "sparsity", minimum=1)
        order = self._order(x0, priority, row_seeds, n_ch, n_px)[:, : min(k, n_px)]  # (B, k)
        b = x0.shape[0]
        start = x0.detach().reshape(b, n_ch, n_px)  # (B, C, P)
        best_x, best, queries, visits, history = _greedy_search(
            objective, x0, start, initial, order, eps, t_max, tau, partial, keep_last
        )
        return AttackOutput(
            latents=best_x.reshape(x0.shape),
            values=best,
            initial=initial.detach().float(),
            iterations=visits,
            queries=queries,
            history=[np.asarray(h, dtype=np.float64) for h in history],
        )


#: The objective returned NaN or infinity: a search would silently move there or stand still.
_NOT_FINITE = (
    "the objective returned a non-finite value (NaN or inf); check the generator, the encoder "
    "and the target for NaN."
)


def _check_budget(eps: float, t_max: int, tau: float | None) -> tuple[float, int, float]:
    """Check a search's radius, query budget and early stop; ``tau`` is ``inf`` without one."""
    eps = check_in_range(eps, "eps", 0.0, None)
    t_max = check_integer(t_max, "t_max", minimum=1)
    tau = math.inf if tau is None else check_in_range(tau, "tau", -1.0, 1.0, closed="both")
    return eps, t_max, tau


def _check_priority(priority: torch.Tensor, x0: torch.Tensor) -> None:
    """Refuse a surrogate gradient whose shape is not the latents'."""
    if priority.shape != x0.shape:
        raise InvalidInputError(
            f"`priority` must have the shape of `x0`; got {tuple(priority.shape)} vs "
            f"{tuple(x0.shape)}."
        )


def _seeds(rng: RngLike, row_seeds: npt.ArrayLike | None, b: int) -> npt.NDArray[np.int64]:
    """Return one seed per row: ``row_seeds`` (of the right length), else drawn from ``rng``."""
    if row_seeds is None:
        return check_random_state(rng).integers(0, 2**63 - 1, size=b)
    seeds = np.asarray(row_seeds, dtype=np.int64).ravel()
    if seeds.size != b:
        raise InvalidInputError(f"`row_seeds` must hold one seed per row ({b}); got {seeds.size}.")
    return seeds


def _check_greedy_inputs(x0: torch.Tensor, initial: torch.Tensor) -> tuple[int, int]:
    """Check GreedyPixel's start; return (channels, pixels) of the latent shape."""
    if x0.ndim < 2 or x0.shape[0] == 0:
        raise InvalidInputError(
            f"`x0` must be a batch of latents, shape (B, *latent_shape) with B >= 1; got "
            f"{tuple(x0.shape)}."
        )
    b = x0.shape[0]
    if initial.shape != (b,):
        raise InvalidInputError(f"`initial` must have shape ({b},); got {tuple(initial.shape)}.")
    bad = np.flatnonzero(~np.isfinite(initial.detach().double().cpu().numpy()))
    if bad.size:
        raise InvalidInputError(
            f"`initial` must be finite (the objective at `x0`); got "
            f"{initial[int(bad[0])].item()!r} at row {int(bad[0])}."
        )
    if not bool(torch.isfinite(x0).all()):
        raise InvalidInputError("`x0` must be finite.")
    if x0.ndim not in (2, 4):
        raise InvalidInputError(
            "GreedyPixel's latents must be flat, shape (B, D), or images, shape (B, C, H, W) "
            f"(a one-channel (H, W) latent as (B, 1, H, W)); got {tuple(x0.shape)}."
        )
    n_ch = 1 if x0.ndim == 2 else int(x0.shape[1])
    if n_ch > 10:
        raise InvalidInputError(
            f"GreedyPixel scores 2^C candidates per pixel: `x0` must have at most 10 "
            f"channels; got {n_ch}."
        )
    return n_ch, int(np.prod(x0.shape[1:])) // n_ch


def _greedy_search(
    objective: Objective,
    x0: torch.Tensor,
    start: torch.Tensor,
    initial: torch.Tensor,
    order: npt.NDArray[np.int64],
    eps: float,
    t_max: int,
    tau: float,
    partial: bool = True,
    keep_last: bool = False,
) -> tuple[
    torch.Tensor, torch.Tensor, npt.NDArray[np.int64], npt.NDArray[np.int64], list[list[float]]
]:
    """Visit each row's pixels cyclically; score every sign pattern; always move to the best.

    Returns the best point seen and its value, or with ``keep_last`` the last iterate and its
    value (the start while no visit was made).
    """
    b, n_ch, n_px = start.shape
    k = order.shape[1]
    # the 2^C sign patterns, in itertools.product order: (−,−,−), (−,−,+), ...
    signs = torch.tensor(
        [[1.0 if (j >> (n_ch - 1 - c)) & 1 else -1.0 for c in range(n_ch)] for j in range(2**n_ch)],
        dtype=x0.dtype,
        device=x0.device,
    )  # (2^C, C)
    n_cand = signs.shape[0]
    cur = start.clone()
    best_x = start.clone()
    best = initial.detach().double().clone()  # float64: small gains of a precise objective count
    cur_val = best.clone()
    # without partial visits a row stops when a whole visit no longer fits in its budget
    room = 1 if partial else n_cand
    queries = np.zeros(b, dtype=np.int64)
    visits = np.zeros(b, dtype=np.int64)
    history: list[list[float]] = [[float(v)] for v in best.cpu()]
    while True:
        act = np.flatnonzero((t_max - queries >= room) & (best.cpu().numpy() < tau))
        if act.size == 0:
            break
        sizes = np.minimum(n_cand, t_max - queries[act])  # a partial last visit
        batch, owner = [], []
        for r, m in zip(act.tolist(), sizes.tolist(), strict=True):
            p = int(order[r, visits[r] % k])
            cand = cur[r].expand(m, n_ch, n_px).clone()  # (m, C, P)
            cand[:, :, p] = start[r, :, p] + eps * signs[:m]
            batch.append(cand)
            owner += [r] * m
        cands = torch.cat(batch)  # (Σm, C, P)
        rows = torch.as_tensor(owner, device=x0.device)
        with torch.no_grad():
            vals = objective(cands.reshape(len(owner), *x0.shape[1:]), rows)
        if tuple(vals.shape) != (len(owner),):
            raise InvalidInputError(
                f"the objective must return one value per candidate, shape ({len(owner)},); "
                f"got {tuple(vals.shape)}."
            )
        vals = vals.detach().double().cpu()
        if not bool(torch.isfinite(vals).all()):
            raise InvalidInputError(_NOT_FINITE)
        at = 0
        for r, m in zip(act.tolist(), sizes.tolist(), strict=True):
            v = vals[at : at + m]
            j = int(torch.argmax(v))  # first best: ties go to the earlier candidate
            cur[r] = cands[at + j]  # always move (Wang et al.): revisits may undo it
            cur_val[r] = v[j]
            for val in v.tolist():
                history[r].append(max(history[r][-1], val))
            if v[j] > best[r]:
                best[r] = v[j]
                best_x[r] = cands[at + j]
            at += m
        queries[act] += sizes
        visits[act] += 1
    if keep_last:
        return cur, cur_val, queries, visits, history
    return best_x, best, queries, visits, history


class CoordinateSearch:
    """Query-only coordinate-wise search over the latent (one coordinate, one sign at a time).

    Coordinates are visited in priority order; at each one the attack tries moving it to
    ``+step`` and, if that does not improve the objective, to ``−step`` (one query each), and
    keeps the first improvement. At most ``sparsity`` coordinates are ever changed.

    Parameters
    ----------
    norm : {"l2", "linf"}, default "l2"
        ``"linf"``: ``step = eps``. ``"l2"``: ``step = eps / √sparsity``, so the final
        perturbation always lies in the L2 ball of radius ``eps``.
    eps : float
    t_max : int, default 100
        Queries per code (one query = one evaluation; Eq. 15).
    sparsity : int, optional
        Most coordinates changed; default: all.
    tau : float, optional
        Early stop at the attack threshold.
    rng : int, SeedSequence or Generator, default 0
        Random priority order and first directions when no priority is given.

    Notes
    -----
    The priority of row ``i`` can come from a surrogate's gradient ``g_i``: coordinates by
    decreasing ``|g_i|``, first trying ``sign(g_i)``. Without one the order is a random
    permutation and the first direction a random sign. The start's value is not re-queried:
    it is the Top-N similarity already paid for (Eq. 13).

    References
    ----------
    H. Wang et al., "GreedyPixel: fine-grained black-box adversarial attack via greedy
    algorithm", 2025.
    """

    def __init__(
        self,
        *,
        norm: Norm = "l2",
        eps: float = 1.0,
        t_max: int = 100,
        sparsity: int | None = None,
        tau: float | None = None,
        rng: RngLike = 0,
    ) -> None:
        self.norm = norm
        self.eps = eps
        self.t_max = t_max
        self.sparsity = sparsity
        self.tau = tau
        self.rng = rng

    def run(
        self,
        objective: Objective,
        x0: torch.Tensor,
        initial: torch.Tensor,
        priority: torch.Tensor | None = None,
        *,
        row_seeds: npt.ArrayLike | None = None,
    ) -> AttackOutput:
        """Greedy search from ``x0`` whose objective values ``initial`` are already known.

        Parameters
        ----------
        objective : callable
            ``objective(latents, rows) -> values``, evaluated without gradients.
        x0 : torch.Tensor, shape (B, *latent_shape)
        initial : torch.Tensor, shape (B,)
        priority : torch.Tensor, shape (B, *latent_shape), optional
            A surrogate gradient per row (see Notes).
        row_seeds : array_like of int, shape (B,), optional
            One seed per row for its random order (then a row's search does not depend on the
            other rows of the batch); default: drawn from ``rng``.

        Returns
        -------
        AttackOutput
            ``queries`` counts every evaluation: never more than ``t_max`` per row.
        """
        check_option(self.norm, "norm", ("l2", "linf"))
        eps, t_max, tau = _check_budget(self.eps, self.t_max, self.tau)
        b = x0.shape[0]
        d = int(np.prod(x0.shape[1:]))
        k = d if self.sparsity is None else check_integer(self.sparsity, "sparsity", minimum=1)
        k = min(k, d)
        step = eps if self.norm == "linf" else eps / math.sqrt(k)
        if initial.shape != (b,):
            raise InvalidInputError(
                f"`initial` must have shape ({b},); got {tuple(initial.shape)}."
            )
        gen = check_random_state(self.rng)
        if priority is not None:
            _check_priority(priority, x0)
            flat = priority.detach().reshape(b, d).cpu()
            order = torch.argsort(flat.abs(), dim=1, descending=True, stable=True).numpy()
            first = np.where(np.take_along_axis(flat.numpy(), order, 1) >= 0, 1.0, -1.0)
        else:
            seeds = _seeds(gen, row_seeds, b)
            rows_rng = [np.random.default_rng(int(s)) for s in seeds]
            order = np.stack([g.permutation(d) for g in rows_rng])
            first = np.stack([g.choice([-1.0, 1.0], size=d) for g in rows_rng])
        delta = torch.zeros((b, d), dtype=x0.dtype, device=x0.device)
        best = initial.detach().float().clone()
        queries = np.zeros(b, dtype=np.int64)
        changed = np.zeros(b, dtype=np.int64)
        pos = np.zeros(b, dtype=np.int64)  # index into the row's order
        tried = np.zeros(b, dtype=np.int64)  # 0: next try the first direction, 1: the second
        history: list[list[float]] = [[float(v)] for v in best.cpu()]
        flat_x0 = x0.detach().reshape(b, d)
        while True:
            act = np.flatnonzero(
                (queries < t_max) & (best.cpu().numpy() < tau) & (changed < k) & (pos < d)
            )
            if act.size == 0:
                break
            coord = order[act, pos[act]]
            sign = first[act, pos[act]] * np.where(tried[act] == 0, 1.0, -1.0)
            cand = delta[act].clone()
            cand[np.arange(act.size), coord] = torch.as_tensor(
                sign * step, dtype=cand.dtype, device=cand.device
            )
            rows = torch.as_tensor(act, device=x0.device)
            with torch.no_grad():
                vals = objective((flat_x0[act] + cand).reshape(act.size, *x0.shape[1:]), rows)
            vals = vals.detach().float().to(best.device)
            queries[act] += 1
            better = (vals > best[act]).cpu().numpy()
            for j, r in enumerate(act):
                if better[j]:
                    was_zero = bool(delta[r, coord[j]] == 0)
                    delta[r] = cand[j]
                    best[r] = vals[j]
                    changed[r] += int(was_zero)
                    pos[r] += 1
                    tried[r] = 0
                elif tried[r] == 0:
                    tried[r] = 1
                else:
                    pos[r] += 1
                    tried[r] = 0
                history[r].append(float(best[r]))
        return AttackOutput(
            latents=(flat_x0 + delta).reshape(x0.shape),
            values=best,
            initial=initial.detach().float(),
            iterations=queries.copy(),
            queries=queries,
            history=[np.asarray(h, dtype=np.float64) for h in history],
        )
