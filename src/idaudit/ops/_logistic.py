"""L2-penalised logistic regression for many small problems at once (ROC-HT, seed 000 §3.4)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import torch

from idaudit.exceptions import InvalidInputError

__all__ = ["KernelLogisticFit", "fit_kernel_logistic"]


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


# torch's thread count is process-wide: threads entering _one_thread at once (threaded dask
# workers) take turns, so none restores a count another one has just lowered
_THREADS_LOCK = threading.RLock()


@contextmanager
def _one_thread(device: torch.device) -> Iterator[None]:
    """Run a batch of small LAPACK factorisations on one CPU thread.

    torch parallelises batched Cholesky over the batch and MKL threads each factorisation
    too; when a core is busy with anything else the nested OpenMP threads spin and the call
    slows down 10-20 fold, while one thread is as fast on an idle machine. The thread count
    is process-wide, so it is restored right after the call.
    """
    if device.type != "cpu":
        yield
        return
    with _THREADS_LOCK:
        before = torch.get_num_threads()
        if before == 1:
            yield
            return
        torch.set_num_threads(1)
        try:
            yield
        finally:
            torch.set_num_threads(before)


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


def fit_kernel_logistic(
    gram: torch.Tensor,
    y: torch.Tensor,
    mask: torch.Tensor,
    c: float = 1.0,
    *,
    tol: float = 1e-10,
    max_iter: int = 100,
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

    Returns
    -------
    KernelLogisticFit
        With the logits of every row, held-out rows included (their out-of-fold scores).

    Raises
    ------
    InvalidInputError
        If a Newton system cannot be factored even in float64 (non-finite or astronomically
        large Gram entries).

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

    using :math:`(I + CDG)^{-1} r = r - C D^{1/2} S^{-1} D^{1/2} G r` with the symmetric
    positive definite :math:`S = I + C D^{1/2} G D^{1/2}` and eliminating :math:`\Delta b`.
    A backtracking line search (Armijo) makes the iteration globally convergent.

    Products with :math:`G` use each group's full Gram matrix with one column per fold, so
    the folds of a pair read it once. Gradients, objective values and iterates are float64;
    the systems that only set the search direction are factored in float32 — an inexact
    Newton method whose fixed point is still the exact optimum (cond(S) is at most
    :math:`1 + Cn\max\lVert x\rVert^2/4`, so the direction is accurate to ~1e-5 and the
    iteration still gains orders of magnitude per step). Where float32 rounding destroys the
    positive definiteness of :math:`S` (large-norm inputs), every later system is factored in
    float64 instead. The default tolerance is reached in four or five iterations.

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
    dtype, dev = gram.dtype, gram.device
    n_grp, n_rows, _ = gram.shape
    n_fold = mask.shape[1]
    y = y.to(dtype)
    mask = mask.to(dtype)
    yf = y[:, None, :].expand(n_grp, n_fold, n_rows)  # (P, F, n)
    # each problem's training rows, left-aligned (padding points at a row with mask 0)
    n_train = int(mask.sum(-1).max())
    order = torch.argsort(mask.reshape(-1, n_rows), dim=-1, descending=True, stable=True)
    rows = order[:, :n_train]  # (Q, m)
    m_loc = _local(mask.reshape(-1, n_rows), rows)  # (Q, m), 1 on real training rows
    grp = torch.arange(n_grp, device=dev).repeat_interleave(n_fold)[:, None, None]  # (Q, 1, 1)
    g_full = gram[grp, rows[:, :, None], rows[:, None, :]]  # (Q, m, m)
    g_full = g_full * (m_loc[:, :, None] * m_loc[:, None, :]).to(dtype)
    lin_dtype = torch.float32 if dtype == torch.float64 else dtype
    g_loc = g_full.to(lin_dtype)

    def factor(root: torch.Tensor) -> torch.Tensor:
        """Cholesky factor of S = I + C D^½ G D^½ for every problem, in ``lin_dtype``.

        S is positive definite with eigenvalues >= 1, so a failed factorisation can only be
        rounding: float32 loses S when the embeddings have large norms. The solver then
        switches to float64 for this and every later step.
        """
        nonlocal lin_dtype, g_loc
        while True:
            root_l = root.to(lin_dtype)
            s_mat = g_loc * (c * root_l)[:, :, None]  # (Q, m, m)
            s_mat.mul_(root_l[:, None, :]).diagonal(dim1=-2, dim2=-1).add_(1.0)
            with _one_thread(dev):
                factored = torch.linalg.cholesky_ex(s_mat)
            chol: torch.Tensor = factored.L
            info: torch.Tensor = factored.info
            if not bool((info != 0).any()):
                return chol
            if lin_dtype == dtype:
                raise InvalidInputError(
                    "the Newton system of the logistic regression is numerically singular in "
                    f"{dtype}; the Gram matrix holds non-finite or huge values (largest "
                    f"|entry| {float(g_full.abs().max()):.3g}); L2-normalise the embeddings"
                )
            lin_dtype, g_loc = dtype, g_full

    def g_times(vecs: torch.Tensor) -> torch.Tensor:
        """G @ vecs for (P, F, k, n) -> (P, F, k, n), one product per group."""
        p_, f_, k_, n_ = vecs.shape
        out = gram @ vecs.reshape(p_, f_ * k_, n_).transpose(1, 2)  # (P, n, F*k)
        return out.transpose(1, 2).reshape(p_, f_, k_, n_)

    steps = 0.5 ** torch.arange(30, dtype=dtype, device=dev)  # (T,) fallback step sizes
    alpha = torch.zeros(n_grp, n_fold, n_rows, dtype=dtype, device=dev)  # (P, F, n)
    # start from the best intercept-only model: b = logit of the class-1 share
    share = ((yf * mask).sum(-1) / mask.sum(-1)).clamp(1e-12, 1 - 1e-12)  # (P, F)
    b = torch.log(share) - torch.log1p(-share)  # (P, F)
    g_alpha = torch.zeros_like(alpha)  # (P, F, n): G alpha, kept up to date
    converged = torch.zeros(n_grp, n_fold, dtype=torch.bool, device=dev)
    grad_norm = torch.full((n_grp, n_fold), float("inf"), dtype=dtype, device=dev)
    n_iter = 0
    for n_iter in range(max_iter + 1):
        f = g_alpha + b[..., None]  # (P, F, n) logits of every row
        p = torch.sigmoid(f)
        g = mask * (p - yf)  # (P, F, n) d loss / d f, training rows only
        v = alpha + c * g  # (P, F, n): the primal gradient is X' v
        dg = mask * p * (1.0 - p)  # (P, F, n) diagonal of D
        both = g_times(torch.stack([v, dg], dim=2))  # (P, F, 2, n): G v, G D 1
        g_b = c * g.sum(-1)  # (P, F)
        grad_norm = ((v * both[:, :, 0]).sum(-1).clamp_min(0.0) + g_b * g_b).sqrt()
        converged = grad_norm <= tol
        if bool(converged.all()) or n_iter == max_iter:
            break
        # Newton direction on the training rows, in local coordinates (Q, m)
        root = _local(dg.reshape(-1, n_rows), rows).sqrt()  # (Q, m)
        chol = factor(root)  # (Q, m, m)
        gv = _local(both[:, :, 0].reshape(-1, n_rows), rows)  # (Q, m): (G v) on the rows
        gd = _local(both[:, :, 1].reshape(-1, n_rows), rows)  # (Q, m): (G D 1) = (1'DG)'
        v_loc = _local(v.reshape(-1, n_rows), rows)
        dg_loc = root * root
        rhs = torch.stack([-v_loc, c * dg_loc], dim=-1)  # (Q, m, 2)
        g_rhs = torch.stack([-gv, c * gd], dim=-1)  # (Q, m, 2): G rhs on the rows
        # M r = (I + C D G)^{-1} r = r - C D^{1/2} S^{-1} D^{1/2} G r
        with _one_thread(dev):
            z = torch.cholesky_solve((root[..., None] * g_rhs).to(lin_dtype), chol).to(dtype)
        sol = rhs - c * root[..., None] * z  # (Q, m, 2)
        denom = dg_loc.sum(-1) - (gd * sol[..., 1]).sum(-1)  # (Q,) Schur complement, > 0
        num = -g.reshape(-1, n_rows).sum(-1) - (gd * sol[..., 0]).sum(-1)  # (Q,)
        d_b = torch.where(denom > 0, num / denom.clamp_min(1e-300), torch.zeros_like(num))
        d_loc = (sol[..., 0] - d_b[:, None] * sol[..., 1]) * m_loc  # (Q, m)
        d_alpha = torch.zeros(n_grp * n_fold, n_rows, dtype=dtype, device=dev)
        d_alpha.scatter_(1, rows, d_loc)  # padding rows carry 0 (m_loc)
        d_alpha = d_alpha.view(n_grp, n_fold, n_rows)  # (P, F, n)
        d_b = d_b.view(n_grp, n_fold)
        g_d = g_times(d_alpha[:, :, None, :])[:, :, 0]  # (P, F, n): G d_alpha
        # backtracking (Armijo) line search; the full Newton step almost always passes,
        # so the grid of smaller steps is only evaluated where it fails
        d_f = g_d + d_b[..., None]  # (P, F, n)
        q0 = (alpha * g_alpha).sum(-1)  # (P, F)
        q1 = (alpha * g_d).sum(-1)
        q2 = (d_alpha * g_d).sum(-1)
        slope = q1 + c * (g * d_f).sum(-1)  # directional derivative, < 0
        obj0 = _objective(q0[..., None], f[..., None, :], yf, mask, c)[..., 0]  # (P, F)
        bound = obj0 + 1e-12 * obj0.abs()  # slack for rounding in J near the optimum
        obj1 = _objective((q0 + 2.0 * q1 + q2)[..., None], (f + d_f)[..., None, :], yf, mask, c)
        t = torch.ones_like(b)
        retry = (obj1[..., 0] > bound + 1e-4 * slope) & ~converged
        if bool(retry.any()):
            r = retry.nonzero(as_tuple=True)
            quad = q0[r][:, None] + 2.0 * steps * q1[r][:, None] + steps**2 * q2[r][:, None]
            logits = f[r][:, None, :] + steps[None, :, None] * d_f[r][:, None, :]  # (R, T, n)
            obj = _objective(quad, logits, yf[r], mask[r], c)  # (R, T)
            ok = obj <= bound[r][:, None] + 1e-4 * steps * slope[r][:, None]
            first = torch.where(ok.any(-1), ok.to(torch.int64).argmax(-1), steps.numel() - 1)
            t[r] = steps[first]
        t = torch.where(converged, torch.zeros_like(t), t)  # (P, F)
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
