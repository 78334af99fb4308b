"""Tests of idaudit.ops._logistic against scikit-learn's LogisticRegression."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from sklearn.linear_model import LogisticRegression

from idaudit import InvalidInputError
from idaudit.ops import fit_kernel_logistic


def group(seed: int, n: int, d: int) -> tuple[np.ndarray, np.ndarray]:
    gen = np.random.default_rng(seed)
    x = gen.normal(size=(n, d))
    y = (gen.random(n) < 0.5).astype(float)
    x[:, :3] += 0.8 * y[:, None]  # some signal, not separable
    return x / np.linalg.norm(x, axis=1, keepdims=True), y


def sklearn_fit(x: np.ndarray, y: np.ndarray, c: float = 1.0) -> LogisticRegression:
    # tol tiny: scikit-learn's lbfgs then stops on a relative objective change of 64 eps,
    # ~1e-7 from the optimum in the coefficients; ours stops at gradient norm 1e-10
    return LogisticRegression(C=c, tol=1e-12, max_iter=10_000).fit(x, y)


def test_folds_of_padded_groups_match_sklearn() -> None:
    sizes = [30, 22]
    groups = [group(k, n, 40) for k, n in enumerate(sizes)]
    x = np.zeros((2, 30, 40))
    y = np.zeros((2, 30))
    mask = np.zeros((2, 3, 30))  # three "folds" per group, each leaving some rows out
    for g, (xg, yg) in enumerate(groups):
        n = sizes[g]
        x[g, :n], y[g, :n] = xg, yg
        for f in range(3):
            mask[g, f, :n] = np.arange(n) % 3 != f
    xt = torch.from_numpy(x)
    for c in (1.0, 0.1):
        fit = fit_kernel_logistic(
            xt @ xt.transpose(1, 2), torch.from_numpy(y), torch.from_numpy(mask), c
        )
        assert bool(fit.converged.all())
        assert float(fit.grad_norm.max()) <= 1e-10
        for g, n in enumerate(sizes):
            for f in range(3):
                train = mask[g, f, :n] == 1
                ref = sklearn_fit(x[g, :n][train], y[g, :n][train], c)
                coef = x[g, :n].T @ fit.dual_coef[g, f, :n].numpy()
                np.testing.assert_allclose(coef, ref.coef_[0], atol=1e-6)
                assert abs(float(fit.intercept[g, f]) - ref.intercept_[0]) < 1e-6
                # logits of every row, held-out rows included
                np.testing.assert_allclose(
                    fit.logits[g, f, :n].numpy(), ref.decision_function(x[g, :n]), atol=1e-6
                )
                np.testing.assert_array_equal(fit.dual_coef[g, f].numpy()[mask[g, f] == 0], 0.0)


def test_separable_data_converges() -> None:
    # perfectly separable: the L2 penalty keeps the optimum finite
    x = np.r_[np.eye(4)[:2], -np.eye(4)[:2]] * 3.0
    y = np.array([1.0, 1.0, 0.0, 0.0])
    xt = torch.from_numpy(x)
    fit = fit_kernel_logistic(
        (xt @ xt.T)[None], torch.from_numpy(y)[None], torch.ones(1, 1, 4, dtype=torch.float64)
    )
    assert bool(fit.converged.all())
    coef = (xt.T @ fit.dual_coef[0, 0]).numpy()
    np.testing.assert_allclose(coef, sklearn_fit(x, y).coef_[0], atol=1e-6)


def test_reports_non_convergence() -> None:
    x, y = group(2, 20, 10)
    xt = torch.from_numpy(x)
    fit = fit_kernel_logistic(
        (xt @ xt.T)[None],
        torch.from_numpy(y)[None],
        torch.ones(1, 2, 20, dtype=torch.float64),
        max_iter=1,
    )
    assert fit.n_iter == 1
    assert not bool(fit.converged.all())


def test_large_norms_fall_back_to_float64_systems(monkeypatch: pytest.MonkeyPatch) -> None:
    # Norms of 1e4 make S = I + C D^1/2 G D^1/2 too ill-conditioned for a float32 Cholesky;
    # the solver must switch to float64 and still reach scikit-learn's optimum (reached here
    # from centred data: the same optimum, because the intercept is unpenalised).
    factored: list[tuple[torch.dtype, bool]] = []
    cholesky_ex = torch.linalg.cholesky_ex

    def spy(mat: torch.Tensor, **kwargs: object) -> object:
        result = cholesky_ex(mat, **kwargs)
        factored.append((mat.dtype, bool((result.info != 0).any())))
        return result

    monkeypatch.setattr(torch.linalg, "cholesky_ex", spy)
    x, y = group(4, 80, 20)
    x = 1e4 * x
    xt = torch.from_numpy(x)[None]
    mask = torch.ones(1, 1, 80, dtype=torch.float64)
    fit = fit_kernel_logistic(
        xt @ xt.transpose(1, 2), torch.from_numpy(y)[None], mask, solver="cholesky"
    )
    assert factored[0] == (torch.float32, True)  # the case this test is about
    assert all(dtype == torch.float64 and not failed for dtype, failed in factored[1:])
    assert bool(fit.converged.all())
    centre = x.mean(axis=0)
    ref = sklearn_fit(x - centre, y)
    # sklearn's own stopping rule leaves ~1e-6 in these logits (|logit| up to ~10)
    np.testing.assert_allclose(
        fit.logits[0, 0].numpy(), ref.decision_function(x - centre), atol=2e-5
    )


def test_non_finite_gram_is_a_clear_error() -> None:
    x, y = group(5, 20, 6)
    gram = torch.from_numpy(x @ x.T)[None].clone()
    gram[0, 0, 0] = float("inf")
    with pytest.raises(InvalidInputError, match="numerically singular"):
        fit_kernel_logistic(
            gram,
            torch.from_numpy(y)[None],
            torch.ones(1, 1, 20, dtype=torch.float64),
            solver="cholesky",
        )


def test_conjugate_gradients_and_cholesky_reach_the_same_optimum() -> None:
    # the two routes only differ in how they solve the Newton systems; both stop at a
    # gradient norm of 1e-10, so the logits agree far below what scikit-learn resolves
    gen = np.random.default_rng(7)
    x = gen.normal(size=(6, 50, 30))
    x /= np.linalg.norm(x, axis=-1, keepdims=True)
    y = (gen.random((6, 50)) < 0.5).astype(float)
    x[:, :, :2] += 0.7 * y[..., None]
    mask = (gen.random((6, 4, 50)) < 0.8).astype(float)
    xt = torch.from_numpy(x)
    gram = xt @ xt.transpose(1, 2)
    fits = {
        s: fit_kernel_logistic(gram, torch.from_numpy(y), torch.from_numpy(mask), solver=s)
        for s in ("cg", "cholesky")
    }
    assert all(bool(f.converged.all()) for f in fits.values())
    np.testing.assert_allclose(
        fits["cg"].logits.numpy(), fits["cholesky"].logits.numpy(), rtol=0, atol=1e-9
    )


def test_unsolved_cg_systems_fall_back_to_cholesky(monkeypatch: pytest.MonkeyPatch) -> None:
    # with a single CG iteration allowed no system reaches its tolerance: every direction
    # must then come from the Cholesky route, and the optimum is still scikit-learn's
    import idaudit.ops._logistic as logistic

    monkeypatch.setattr(logistic, "_CG_MAX_ITER", 1)
    calls: list[int] = []
    solve = logistic._Direct.solve

    def spy(self: object, root: object, unit: object, rhs: object, which: torch.Tensor) -> object:
        calls.append(int(which.numel()))
        return solve(self, root, unit, rhs, which)  # type: ignore[arg-type]

    monkeypatch.setattr(logistic._Direct, "solve", spy)
    x, y = group(9, 40, 25)
    xt = torch.from_numpy(x)
    fit = fit_kernel_logistic(
        (xt @ xt.T)[None], torch.from_numpy(y)[None], torch.ones(1, 1, 40, dtype=torch.float64)
    )
    assert calls
    assert calls[0] == 1
    assert bool(fit.converged.all())
    ref = sklearn_fit(x, y)
    np.testing.assert_allclose(fit.logits[0, 0].numpy(), ref.decision_function(x), atol=1e-6)


def test_unknown_solver_is_a_clear_error() -> None:
    x, y = group(1, 10, 4)
    xt = torch.from_numpy(x)
    with pytest.raises(InvalidInputError, match="solver"):
        fit_kernel_logistic(
            (xt @ xt.T)[None], torch.from_numpy(y)[None], torch.ones(1, 1, 10), solver="lbfgs"
        )
