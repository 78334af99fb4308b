from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from idaudit.exceptions import InvalidInputError
from idaudit.inversion import APGD, GreedyPixel, apgd_checkpoints


def _cosine_to(c: torch.Tensor):
    def f(x: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.cosine_similarity(x, c[rows], dim=1)

    return f


def test_checkpoints_follow_the_published_recursion() -> None:
    # p = 0, .22, .41, .57, .70, .80, .87, .93, .99 (Croce & Hein 2020, Sec. 3.2), w = ceil(p·N)
    assert apgd_checkpoints(100) == [0, 22, 41, 57, 70, 80, 87, 93, 99]
    assert apgd_checkpoints(10) == [0, 3, 5, 6, 7, 8, 9, 10]


def test_apgd_reaches_the_closed_form_optimum_of_a_cone_problem() -> None:
    # max cos(x, c) over ||x - x0|| <= eps: the ball seen from the origin spans the half-angle
    # asin(eps/||x0||), so the optimum is cos(max(phi - asin(eps/||x0||), 0)).
    g = torch.Generator().manual_seed(0)
    x0 = torch.randn(5, 10, generator=g, dtype=torch.float64) * 3
    c = torch.randn(5, 10, generator=g, dtype=torch.float64)
    eps = 1.5
    phi = torch.arccos(torch.nn.functional.cosine_similarity(x0, c, dim=1))
    best = torch.cos(torch.clamp(phi - torch.arcsin(eps / x0.norm(dim=1)), min=0.0))
    out = APGD(norm="l2", eps=eps, t_max=200).run(_cosine_to(c), x0)
    np.testing.assert_allclose(out.values.numpy(), best.numpy(), atol=2e-3)
    assert (out.values.double() <= best + 1e-6).all()  # float32 values


@pytest.mark.parametrize("norm", ["l2", "linf"])
def test_apgd_stays_in_its_ball_and_returns_its_best_iterate(norm: str) -> None:
    g = torch.Generator().manual_seed(1)
    x0 = torch.randn(6, 12, generator=g)
    w = torch.randn(12, 12, generator=g)

    def bumpy(x: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:  # many local maxima
        return torch.sin(3 * x @ w).mean(dim=1)

    eps = 0.4
    out = APGD(norm=norm, eps=eps, t_max=40).run(bumpy, x0)
    delta = (out.latents - x0).reshape(6, -1)
    size = delta.norm(dim=1) if norm == "l2" else delta.abs().amax(dim=1)
    assert (size <= eps + 1e-5).all()
    with torch.no_grad():
        again = bumpy(out.latents, torch.arange(6))
    np.testing.assert_allclose(out.values.numpy(), again.numpy(), rtol=1e-6)
    for row, hist in enumerate(out.history):
        assert len(hist) == 41
        assert np.all(np.diff(hist) >= 0)  # the best value never decreases
        assert hist[-1] == pytest.approx(float(out.values[row]))
    assert (out.values >= out.initial).all()
    assert (out.queries == 41).all()
    assert (out.iterations == 40).all()


def test_apgd_stops_each_row_at_tau_and_rows_do_not_interact() -> None:
    g = torch.Generator().manual_seed(2)
    x0 = torch.randn(4, 8, generator=g)
    c = torch.randn(4, 8, generator=g)
    f = _cosine_to(c)
    out = APGD(eps=3.0, t_max=50, tau=0.6).run(f, x0)
    reached = out.values >= 0.6
    assert reached.any()
    for r in range(4):
        if reached[r]:
            assert out.iterations[r] < 50
            assert len(out.history[r]) == out.iterations[r] + 1
            # stopped at the first hit (or never started when the start already reached it)
            assert out.history[r][-1] >= 0.6
            assert len(out.history[r]) == 1 or out.history[r][-2] < 0.6
        single = APGD(eps=3.0, t_max=50, tau=0.6).run(
            lambda x, rows, r=r: f(x, rows + r), x0[r : r + 1]
        )
        np.testing.assert_allclose(single.values.numpy(), out.values[r : r + 1].numpy(), atol=1e-6)
        assert int(single.iterations[0]) == int(out.iterations[r])


def test_greedypixel_counts_queries_exactly_and_respects_its_budgets() -> None:
    g = torch.Generator().manual_seed(3)
    x0 = torch.randn(3, 20, generator=g)
    c = torch.randn(3, 20, generator=g)
    calls = np.zeros(3, dtype=int)

    def f(x: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
        np.add.at(calls, rows.numpy(), 1)
        return torch.nn.functional.cosine_similarity(x, c[rows], dim=1)

    init = torch.nn.functional.cosine_similarity(x0, c, dim=1)
    out = GreedyPixel(norm="l2", eps=2.0, t_max=17, sparsity=4, rng=0).run(f, x0, init)
    np.testing.assert_array_equal(out.queries, calls)  # every evaluation counted, no more
    assert (out.queries <= 17).all()
    delta = out.latents - x0
    assert ((delta != 0).sum(dim=1) <= 4).all()
    assert (delta.norm(dim=1) <= 2.0 + 1e-6).all()
    assert (out.values >= init).all()
    np.testing.assert_allclose(
        out.values.numpy(), f(out.latents, torch.arange(3)).numpy(), rtol=1e-6
    )


def test_greedypixel_uses_the_surrogate_priority_and_is_deterministic() -> None:
    x0 = torch.zeros(1, 6) + 1.0
    c = torch.tensor([[1.0, 1.0, 1.0, 1.0, 1.0, 5.0]])
    f = _cosine_to(c)
    init = f(x0, torch.tensor([0]))
    prio = torch.tensor([[0.0, 0.0, 0.0, 0.0, 0.0, 1.0]])  # coordinate 5, upwards
    out = GreedyPixel(norm="linf", eps=0.5, t_max=1).run(f, x0, init, prio)
    assert int(out.queries[0]) == 1
    assert out.latents[0, 5] == pytest.approx(1.5)
    assert float(out.values[0]) > float(init[0])
    a = GreedyPixel(eps=0.5, t_max=9, rng=4).run(f, x0, init)
    b = GreedyPixel(eps=0.5, t_max=9, rng=4).run(f, x0, init)
    assert torch.equal(a.latents, b.latents)


def test_attacks_refuse_bad_settings() -> None:
    f = _cosine_to(torch.ones(1, 3))
    with pytest.raises(InvalidInputError, match="`norm`"):
        APGD(norm="l1").run(f, torch.ones(1, 3))  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError, match="`tau`"):
        APGD(tau=1.5).run(f, torch.ones(1, 3))
    with pytest.raises(InvalidInputError, match="`eps`"):
        GreedyPixel(eps=-1.0).run(f, torch.ones(1, 3), torch.zeros(1))
    assert math.isfinite(float(APGD(t_max=1).run(f, torch.ones(1, 3)).values[0]))
