"""L2-penalised logistic regression for many small problems at once (ROC-HT, seed 000 §3.4)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import torch

from idaudit._device import single_threaded
from idaudit.exceptions import InvalidInputError

__all__ = ["SOLVERS", "KernelLogisticFit", "fit_kernel_logistic"]


@dataclass(frozen=True)
class KernelLogisticFit:
    r"""Solutions of a batch of logistic regressions in representer form.

    Problems come in groups that share rows (the folds of one identity pair): problem
    ``(g, f)`` trains on the rows of group ``g`` selected by ``mask[g, f]``.

    Attributes
    ----------
    dual_coef : torch.Tensor of float64, shape (groups, folds, n)
        :math:`\alpha` with :math:`w = \sum_i \alpha_i x_i`; 0 outside the training rows.
    intercept : torch.Tensor of float64, shape (groups, folds)
        Unpenalised intercept :math:`b`.
    logits : torch.Tensor of float64, shape (groups, folds, n)
        :math:`w^\top x_i + b` for *every* row of the group (training and held-out).
    grad_norm : torch.Tensor of float64, shape (groups, folds)
        Euclidean norm of the gradient of the objective at the solution.
    n_iter : int
        Newton iterations used.
    converged : torch.Tensor of bool, shape (groups, folds)
        Whether ``grad_norm <= tol``.
    """

    dual_coef: torch.Tensor
    intercept: torch.Tensor
    logits: torch.Tensor
    grad_norm: torch.Tensor
    n_iter: int
    converged: torch.Tensor


@contextmanager
def _one_thread(device: torch.device) -> Iterator[None]:
    """Run a batch of small LAPACK factorisations on one CPU thread.

    torch parallelises batched Cholesky over the batch and MKL threads each factorisation
    too; when a core is busy with anything else the nested OpenMP threads spin and the call
    slows down 10-20 fold, while one thread is as fast on an idle machine. The thread count
    is restored right after the call (:func:`idaudit._device.single_threaded`).
    """
    if device.type != "cpu":
        yield
        return
    with single_threaded():
        yield


def _objective(
    quad: torch.Tensor, logits: torch.Tensor, y: torch.Tensor, mask: torch.Tensor, c: float
) -> torch.Tensor:
    """``0.5 w'w + C * sum log-loss``: ``quad`` is ``w'w`` (.., T), ``logits`` (.., T, n)."""
    zero = torch.zeros((), dtype=logits.dtype, device=logits.device)
    loss = torch.logaddexp(zero, logits) - y[..., None, :] * logits  # log(1 + e^f) - y f
    return 0.5 * quad + c * (loss * mask[..., None, :]).sum(-1)


def _local(full: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
    """Entries of ``full`` (Q, n) at each problem's training rows ``rows`` (Q, m)."""
    return torch.gather(full, 1, rows)


SOLVERS = ("cg", "cholesky")

# Conjugate-gradient settings of the Newton systems: most iterations per system, and the
# floor of the relative residual asked of them (float32 arithmetic reaches ~1e-6).
_CG_MAX_ITER = 40
_CG_RTOL_MIN = 1e-5
_CG_RTOL_MAX = 0.1
# Systems whose condition number may exceed this (by the trace bound) skip float32 CG.
_CG_MAX_COND = 1e3
# Problems per batch of Cholesky factorisations (each holds a few m x m matrices).
_DIRECT_PER_SOLVE = 256


def _project(x: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
    r""":math:`\Pi x = x - u (u^\top x)` along the last axis (``u`` unit or zero)."""
    return x - u * (u * x).sum(-1, keepdim=True)


def _cg_directions(
    gram32: torch.Tensor,
    root: torch.Tensor,
    unit: torch.Tensor,
    rhs: torch.Tensor,
    c: float,
    rtol: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor]:
    r"""Solve :math:`S z = b` for every problem by conjugate gradients.

    Parameters
    ----------
    gram32 : torch.Tensor of float32, shape (P, n, n)
        Each group's Gram matrix.
    root : torch.Tensor of float64, shape (P, F, n)
        :math:`D^{1/2}` of every problem, 0 outside its training rows.
    unit : torch.Tensor of float64, shape (P, F, n)
        :math:`u`, the unit vector the projector :math:`\Pi = I - uu^\top` removes.
    rhs : torch.Tensor of float64, shape (P, F, n)
        Right-hand sides in the range of :math:`\Pi`, 0 outside the training rows.
    c : float
        Inverse penalty ``C``.
    rtol : torch.Tensor of float64, shape (P, F)
        Relative residual at which each problem's system counts as solved.

    Returns
    -------
    z : torch.Tensor of float64, shape (P, F, n)
    solved : torch.Tensor of bool, shape (P, F)
        Whether the system reached ``rtol`` within ``_CG_MAX_ITER`` iterations and stayed
        finite.

    Notes
    -----
    :math:`S = I + C\,\Pi D^{1/2} G D^{1/2}\Pi` restricted to a problem's training rows;
    outside them :math:`D^{1/2} = u = 0`, so :math:`S` acts as the identity there and every
    iterate stays 0. All folds of a group share one ``(F, n) @ (n, n)`` product with its
    Gram matrix per iteration.
    """
    f32 = torch.float32
    root_c, unit_c = root.to(f32), unit.to(f32)  # (P, F, n)
    b = rhs.to(f32)
    z = torch.zeros_like(b)
    r = b.clone()
    p = b.clone()
    rs = (r * r).sum(-1)  # (P, F)
    stop = rtol.to(f32) ** 2 * rs
    for _ in range(_CG_MAX_ITER):
        if bool((rs <= stop).all()):
            break
        # p stays in the range of Pi (so does b), hence S p = p + C Pi D^1/2 G D^1/2 p;
        # G is symmetric, so (D^1/2 p)' G gives the product as rows of a (F, n) block
        sp = torch.bmm(root_c * p, gram32).mul_(root_c)
        sp = sp.sub_(unit_c * (unit_c * sp).sum(-1, keepdim=True)).mul_(c).add_(p)
        curv = (p * sp).sum(-1)
        step = torch.where(curv > 0, rs / curv.clamp_min(1e-30), torch.zeros_like(curv))
        z.addcmul_(step[..., None], p)
        r.addcmul_(step[..., None], sp, value=-1.0)
        rs_new = (r * r).sum(-1)
        beta = torch.where(rs > 0, rs_new / rs.clamp_min(1e-30), torch.zeros_like(rs))
        p = r + beta[..., None] * p
        rs = rs_new
    ok = (rs <= stop) & torch.isfinite(rs)
    return z.to(rhs.dtype), ok


class _Direct:
    """Newton systems solved by Cholesky factorisations in each problem's training rows.

    The factorisations run in float32 until rounding first destroys the positive
    definiteness of some :math:`S`; from then on in the Gram matrix's own precision.
    """

    def __init__(self, gram: torch.Tensor, mask: torch.Tensor, c: float) -> None:
        self.gram, self.mask, self.c = gram, mask, c
        self.dtype = gram.dtype
        self.lin_dtype = torch.float32 if gram.dtype == torch.float64 else gram.dtype

    def solve(
        self, root: torch.Tensor, unit: torch.Tensor, rhs: torch.Tensor, which: torch.Tensor
    ) -> torch.Tensor:
        """:math:`S^{-1}` ``rhs`` for the problems ``which`` (flat indices into (P F)).

        ``root``, ``unit`` and ``rhs`` (P, F, n) in pooled coordinates; returns (Q, n).
        """
        n = rhs.shape[-1]
        n_fold = rhs.shape[1]
        dev = rhs.device
        mask = self.mask.reshape(-1, n)[which]  # (Q, n)
        n_train = int(mask.sum(-1).max())
        rows = torch.argsort(mask, dim=-1, descending=True, stable=True)[:, :n_train]  # (Q, m)
        m_loc = _local(mask, rows)  # (Q, m), 1 on real training rows
        grp = torch.div(which, n_fold, rounding_mode="floor")[:, None, None]  # (Q, 1, 1)
        g_full = self.gram[grp, rows[:, :, None], rows[:, None, :]]  # (Q, m, m)
        g_full = g_full * (m_loc[:, :, None] * m_loc[:, None, :])
        root_l = _local(root.reshape(-1, n)[which], rows)  # (Q, m)
        unit_l = _local(unit.reshape(-1, n)[which], rows)
        b = _local(rhs.reshape(-1, n)[which], rows)
        chol = self._factor(g_full, root_l, unit_l)
        with _one_thread(dev):
            z = torch.cholesky_solve(b[:, :, None].to(chol.dtype), chol)[..., 0]  # (Q, m)
        out = torch.zeros(which.numel(), n, dtype=self.dtype, device=dev)
        out.scatter_(1, rows, z.to(self.dtype))
        return out

    def _factor(self, g_full: torch.Tensor, root: torch.Tensor, unit: torch.Tensor) -> torch.Tensor:
        r"""Cholesky factor of :math:`S = I + C\,\Pi D^{1/2} G D^{1/2}\Pi` of every problem.

        :math:`S` has eigenvalues >= 1, so a failed factorisation can only be rounding:
        float32 loses :math:`S` when the embeddings have large norms.
        """
        # Pi M Pi = M - u (M u)' - (M u) u' + (u' M u) u u' for M = D^1/2 G D^1/2
        m_mat = g_full * root[:, :, None] * root[:, None, :]  # (Q, m, m), float64
        mu = (m_mat @ unit[:, :, None])[..., 0]  # (Q, m)
        umu = (unit * mu).sum(-1)[:, None, None]  # (Q, 1, 1)
        m_mat = (
            m_mat
            - unit[:, :, None] * mu[:, None, :]
            - mu[:, :, None] * unit[:, None, :]
            + umu * unit[:, :, None] * unit[:, None, :]
        )
        while True:
            s_mat = (self.c * m_mat).to(self.lin_dtype)
            s_mat.diagonal(dim1=-2, dim2=-1).add_(1.0)
            with _one_thread(root.device):
                factored = torch.linalg.cholesky_ex(s_mat)
            chol: torch.Tensor = factored.L
            info: torch.Tensor = factored.info
            if not bool((info != 0).any()):
                return chol
            if self.lin_dtype == self.dtype:
                raise InvalidInputError(
                    "the Newton system of the logistic regression is numerically singular in "
                    f"{self.dtype}; the Gram matrix holds non-finite or huge values (largest "
                    f"|entry| {float(g_full.abs().max()):.3g}); L2-normalise the embeddings"
                )
            self.lin_dtype = self.dtype


def _ratio(num: torch.Tensor, den: torch.Tensor) -> torch.Tensor:
    """``num / den`` where ``den > 0``, 0 elsewhere (``den`` clamped away from 0 first)."""
    return torch.where(den > 0, num / den.clamp_min(1e-300), 0.0)


def _gram_times(
    gram: torch.Tensor, gram32: torch.Tensor, vecs: torch.Tensor, exact: bool = True
) -> torch.Tensor:
    """G @ vecs for (P, F, k, n) -> (P, F, k, n), one product per group.

    G is symmetric, so ``vecs' G`` serves too; each precision takes the layout its
    batched product runs fastest in on the CPU.
    """
    p_, f_, k_, n_ = vecs.shape
    rows = vecs.reshape(p_, f_ * k_, n_)  # (P, F*k, n)
    if exact:
        out = (gram @ rows.transpose(1, 2)).transpose(1, 2)
    else:
        out = (rows.to(torch.float32) @ gram32).to(vecs.dtype)
    return out.reshape(p_, f_, k_, n_)


def _solve_systems(
    solver: str,
    gram32: torch.Tensor,
    direct: _Direct,
    root: torch.Tensor,
    unit: torch.Tensor,
    b_sys: torch.Tensor,
    dg: torch.Tensor,
    trace: torch.Tensor,
    c: float,
    grad_norm: torch.Tensor,
    grad_first: torch.Tensor,
    converged: torch.Tensor,
) -> torch.Tensor:
    """Solve :math:`S z = b` of every problem (P, F, n): by CG first, else by Cholesky."""
    if solver == "cg":
        rtol = (grad_norm / grad_first).sqrt().clamp(_CG_RTOL_MIN, _CG_RTOL_MAX)
        # float32 CG can stop on a recursive residual that no longer tells the truth
        # when S is ill-conditioned (large-norm inputs): such problems go to Cholesky
        fit_cg = 1.0 + c * dg.amax(-1) * trace <= _CG_MAX_COND  # (P, F)
        z, solved = _cg_directions(gram32, root, unit, b_sys * fit_cg[..., None], c, rtol)
        retry = ((~solved | ~fit_cg) & ~converged).reshape(-1).nonzero()[:, 0]
    else:
        z = torch.zeros_like(b_sys)
        retry = (~converged).reshape(-1).nonzero()[:, 0]
    for start in range(0, retry.numel(), _DIRECT_PER_SOLVE):  # bounded memory
        part = retry[start : start + _DIRECT_PER_SOLVE]
        z.view(-1, b_sys.shape[-1])[part] = direct.solve(root, unit, b_sys, part)
    return z


def _armijo_steps(
    alpha: torch.Tensor,
    g_alpha: torch.Tensor,
    d_alpha: torch.Tensor,
    g_d: torch.Tensor,
    d_b: torch.Tensor,
    f: torch.Tensor,
    g: torch.Tensor,
    yf: torch.Tensor,
    mask: torch.Tensor,
    c: float,
    converged: torch.Tensor,
    steps: torch.Tensor,
) -> torch.Tensor:
    """Step size (P, F) of every problem by backtracking (Armijo); 0 where converged."""
    # the full Newton step almost always passes, so the grid of smaller steps is only
    # evaluated where it fails
    d_f = g_d + d_b[..., None]  # (P, F, n)
    q0 = (alpha * g_alpha).sum(-1)  # (P, F)
    q1 = (alpha * g_d).sum(-1)
    q2 = (d_alpha * g_d).sum(-1)
    slope = q1 + c * (g * d_f).sum(-1)  # directional derivative, < 0
    obj0 = _objective(q0[..., None], f[..., None, :], yf, mask, c)[..., 0]  # (P, F)
    bound = obj0 + 1e-12 * obj0.abs()  # slack for rounding in J near the optimum
    obj1 = _objective((q0 + 2.0 * q1 + q2)[..., None], (f + d_f)[..., None, :], yf, mask, c)
    t = torch.ones_like(q0)
    retry_ls = (obj1[..., 0] > bound + 1e-4 * slope) & ~converged
    if bool(retry_ls.any()):
        r = retry_ls.nonzero(as_tuple=True)
        quad = q0[r][:, None] + 2.0 * steps * q1[r][:, None] + steps**2 * q2[r][:, None]
        logits = f[r][:, None, :] + steps[None, :, None] * d_f[r][:, None, :]  # (R, T, n)
        obj = _objective(quad, logits, yf[r], mask[r], c)  # (R, T)
        ok = obj <= bound[r][:, None] + 1e-4 * steps * slope[r][:, None]
        first = torch.where(ok.any(-1), ok.to(torch.int64).argmax(-1), steps.numel() - 1)
        t[r] = steps[first]
    return torch.where(converged, torch.zeros_like(t), t)  # (P, F)


def fit_kernel_logistic(
    gram: torch.Tensor,
    y: torch.Tensor,
    mask: torch.Tensor,
    c: float = 1.0,
    *,
    tol: float = 1e-10,
    max_iter: int = 100,
    solver: str = "cg",
) -> KernelLogisticFit:
    r"""Fit many binary L2-penalised logistic regressions by damped Newton in dual form.

    Parameters
    ----------
    gram : torch.Tensor of float64, shape (groups, n, n)
        Gram matrix :math:`G = X X^\top` of all rows of each group (padded rows zero).
    y : torch.Tensor of float64, shape (groups, n)
        0/1 labels of the rows.
    mask : torch.Tensor of float64, shape (groups, folds, n)
        1 for the rows problem ``(g, f)`` trains on, 0 elsewhere (held-out rows, padding).
    c : float, default 1.0
        Inverse penalty strength, as scikit-learn's ``C``.
    tol : float, default 1e-10
        Stop when the gradient norm of every problem is at most ``tol``.
    max_iter : int, default 100
        Most Newton iterations.
    solver : {"cg", "cholesky"}, default "cg"
        How the Newton systems are solved: ``"cg"`` by conjugate gradients on all folds of a
        group at once (problems whose systems do not converge fall back to Cholesky),
        ``"cholesky"`` by a Cholesky factorisation per problem and iteration. Both stop at
        the same gradient norm, so they agree to what ``tol`` leaves in the logits (about
        ``tol / (C * sum p(1-p))``: ~1e-13 at ``C = 1`` on normalised embeddings, ~1e-8 at
        ``C = 1e-3``).

    Returns
    -------
    KernelLogisticFit
        With the logits of every row, held-out rows included (their out-of-fold scores).

    Raises
    ------
    InvalidInputError
        If ``solver`` is unknown, or a Newton system cannot be factored even in float64
        (non-finite or astronomically large Gram entries).

    Notes
    -----
    Minimises :math:`J(w, b) = \tfrac12\lVert w\rVert^2 + C\sum_i \log(1 + e^{f_i}) - y_i f_i`
    over the training rows, with :math:`f_i = w^\top x_i + b` and the intercept unpenalised —
    the objective of ``sklearn.linear_model.LogisticRegression(C=C)`` (which scales it by
    :math:`1/(Cn)`). The optimum has :math:`w = X^\top\alpha` with :math:`\alpha` supported
    on the training rows, so with :math:`n < d` (about 160 training rows against 512
    dimensions) Newton's method runs on Gram matrices. With :math:`g = p - y`,
    :math:`D = \mathrm{diag}\,p(1-p)` and :math:`v = \alpha + Cg` (the primal gradient is
    :math:`X^\top v`), the Newton step solves, on the training rows,

    .. math:: (I + C D G)\Delta\alpha + C D \mathbf 1\,\Delta b = -v, \qquad
              \mathbf 1^\top D G \Delta\alpha + \mathbf 1^\top D \mathbf 1\,\Delta b
              = -\mathbf 1^\top g,

    Eliminating :math:`\Delta b` with the second equation leaves
    :math:`(I + C D^{1/2}\Pi D^{1/2} G)\Delta\alpha = r`, with
    :math:`r = -v + C D\mathbf 1\,(\mathbf 1^\top g)/(\mathbf 1^\top D\mathbf 1)` and the
    projector :math:`\Pi = I - uu^\top`, :math:`u = D^{1/2}\mathbf 1/\lVert D^{1/2}\mathbf 1
    \rVert`; the push-through identity turns it into one symmetric positive definite system,

    .. math:: \Delta\alpha = r - C D^{1/2}\Pi S^{-1}\Pi D^{1/2} G r, \qquad
              S = I + C\,\Pi D^{1/2} G D^{1/2}\Pi,

    after which :math:`\Delta b` follows from the second equation. A backtracking line
    search (Armijo) makes the iteration globally convergent.

    Iterates, objective values and the products :math:`G\Delta\alpha` that move the logits
    are float64. The systems with :math:`S`, which only set the search direction, are solved
    in float32 — an inexact Newton method whose fixed point is still the exact optimum — and
    where every :math:`S` is well conditioned (below) so are the products :math:`Gv` and
    :math:`GD\mathbf 1` (the gradient norm is then measured to ~1e-5 relative). ``"cg"``
    asks of each system a relative residual of
    :math:`\min(0.1, \max(10^{-5}, \sqrt{\lVert\nabla J\rVert/\lVert\nabla J_0\rVert}))`
    (loose far from the optimum, tight near it: the forcing terms of Eisenstat and Walker).
    :math:`S` has eigenvalues in :math:`[1, 1 + C\max_i D_{ii}\,\mathrm{tr}\,G]`, so for
    L2-normalised embeddings a handful of iterations suffice, each one batched product per
    group for all its folds. A problem whose system misses the tolerance in 40 iterations,
    or whose bound exceeds :math:`10^3` (large-norm inputs, where float32 CG stalls), gets
    its direction from the Cholesky route for that step. ``"cholesky"`` factors :math:`S`
    in float32 until rounding destroys its positive definiteness, then in float64. The
    default tolerance is reached in four or five Newton iterations either way.

    References
    ----------
    .. [1] S. C. Eisenstat and H. F. Walker, "Choosing the forcing terms in an inexact Newton
       method", SIAM J. Sci. Comput. 17(1), 1996.

    Examples
    --------
    >>> import torch
    >>> from idaudit.ops import fit_kernel_logistic
    >>> x = torch.tensor([[-1.0], [-0.5], [0.5], [1.0]], dtype=torch.float64)
    >>> fit = fit_kernel_logistic((x @ x.T)[None], torch.tensor([[0.0, 0, 1, 1]]),
    ...                           torch.ones(1, 1, 4, dtype=torch.float64))
    >>> bool(fit.converged.all()), round(float((x.T @ fit.dual_coef[0, 0])[0]), 4)
    (True, 0.9442)
    """
    if solver not in SOLVERS:
        raise InvalidInputError(f"`solver` must be one of {SOLVERS}; got {solver!r}.")
    dtype, dev = gram.dtype, gram.device
    n_grp, n_rows, _ = gram.shape
    n_fold = mask.shape[1]
    y = y.to(dtype)
    mask = mask.to(dtype)
    yf = y[:, None, :].expand(n_grp, n_fold, n_rows)  # (P, F, n)
    direct = _Direct(gram, mask, c)
    # trace of each problem's training Gram block: cond(S) <= 1 + C max(D) trace
    trace = (mask * gram.diagonal(dim1=-2, dim2=-1)[:, None, :]).sum(-1)  # (P, F)
    gram32 = gram.to(torch.float32) if solver == "cg" else gram
    # G v and G D 1 only set the direction and measure the gradient; where every system is
    # well conditioned (normalised embeddings) they are float32 products, at half the memory
    # traffic of float64 ones. G d_alpha, which moves the logits, is always exact.
    cheap = solver == "cg" and bool((1.0 + 0.25 * c * trace <= _CG_MAX_COND).all())
    steps = 0.5 ** torch.arange(30, dtype=dtype, device=dev)  # (T,) fallback step sizes
    alpha = torch.zeros(n_grp, n_fold, n_rows, dtype=dtype, device=dev)  # (P, F, n)
    # start from the best intercept-only model: b = logit of the class-1 share
    share = ((yf * mask).sum(-1) / mask.sum(-1)).clamp(1e-12, 1 - 1e-12)  # (P, F)
    b = torch.log(share) - torch.log1p(-share)  # (P, F)
    g_alpha = torch.zeros_like(alpha)  # (P, F, n): G alpha, kept up to date
    converged = torch.zeros(n_grp, n_fold, dtype=torch.bool, device=dev)
    grad_norm = torch.full((n_grp, n_fold), float("inf"), dtype=dtype, device=dev)
    grad_first = grad_norm
    n_iter = 0
    for n_iter in range(max_iter + 1):
        f = g_alpha + b[..., None]  # (P, F, n) logits of every row
        p = torch.sigmoid(f)
        g = mask * (p - yf)  # (P, F, n) d loss / d f, training rows only
        v = alpha + c * g  # (P, F, n): the primal gradient is X' v
        dg = mask * p * (1.0 - p)  # (P, F, n) diagonal of D
        both = _gram_times(gram, gram32, torch.stack([v, dg], dim=2), exact=not cheap)
        g_b = c * g.sum(-1)  # (P, F)
        grad_norm = ((v * both[:, :, 0]).sum(-1).clamp_min(0.0) + g_b * g_b).sqrt()
        converged = grad_norm <= tol
        if bool(converged.all()) or n_iter == max_iter:
            break
        if n_iter == 0:
            grad_first = grad_norm.clamp_min(1e-300)
        # Newton direction. Eliminating the intercept leaves
        # (I + C D^1/2 Pi D^1/2 G) d_alpha = r,  r = -v + C D 1 (1'g)/(1'D 1),
        # with Pi = I - u u', u = D^1/2 1 / |D^1/2 1|; by the push-through identity
        # d_alpha = r - C D^1/2 Pi S^{-1} Pi D^1/2 G r,  S = I + C Pi D^1/2 G D^1/2 Pi.
        root = dg.sqrt()  # (P, F, n), 0 outside the training rows
        mass = dg.sum(-1, keepdim=True)  # (P, F, 1): 1'D 1
        share_g = _ratio(c * g.sum(-1, keepdim=True), mass)
        r_vec = -v + share_g * dg  # (P, F, n)
        g_r = -both[:, :, 0] + share_g * both[:, :, 1]  # (P, F, n): G r
        unit = _ratio(root, mass.sqrt())
        b_sys = _project(root * g_r, unit) * (~converged)[..., None]  # converged: z = 0
        z = _solve_systems(
            solver,
            gram32,
            direct,
            root,
            unit,
            b_sys,
            dg,
            trace,
            c,
            grad_norm,
            grad_first,
            converged,
        )
        d_alpha = (r_vec - c * root * _project(z, unit)) * mask  # (P, F, n)
        gd = both[:, :, 1]  # (P, F, n): G D 1
        num = -g.sum(-1) - (gd * d_alpha).sum(-1)  # second Newton equation, solved for d_b
        d_b = _ratio(num, mass[..., 0])
        g_d = _gram_times(gram, gram32, d_alpha[:, :, None, :])[:, :, 0]  # (P, F, n): G d_alpha
        t = _armijo_steps(alpha, g_alpha, d_alpha, g_d, d_b, f, g, yf, mask, c, converged, steps)
        alpha = alpha + t[..., None] * d_alpha
        g_alpha = g_alpha + t[..., None] * g_d
        b = b + t * d_b
    return KernelLogisticFit(
        dual_coef=alpha,
        intercept=b,
        logits=g_alpha + b[..., None],
        grad_norm=grad_norm,
        n_iter=n_iter,
        converged=converged,
    )
