from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import torch

from idaudit.exceptions import InvalidInputError
from idaudit.inversion import APGD, GreedyPixel
from idaudit.inversion._attacks import CoordinateSearch, apgd_checkpoints


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
    seeds = [11, 12, 13, 14]  # a row's random start comes from its own seed
    out = APGD(eps=3.0, t_max=50, tau=0.6).run(f, x0, row_seeds=seeds)
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
            lambda x, rows, r=r: f(x, rows + r), x0[r : r + 1], row_seeds=seeds[r : r + 1]
        )
        np.testing.assert_allclose(single.values.numpy(), out.values[r : r + 1].numpy(), atol=1e-6)
        assert int(single.iterations[0]) == int(out.iterations[r])


def _prescribed_values() -> np.ndarray:
    """Objective values of the hand-traced APGD run (call 0 = start, call k = update k)."""
    v = np.zeros(101)
    v[1], v[2:23] = 10.0, 1.0  # 1 of 22 steps improves: halve at 22 (condition 1)
    v[23:42] = 0.5 * np.arange(19)  # 0, 0.5, ..., 9: 18 of 19 improve, best stays 10
    v[42:58] = 9.0 + 0.05 * np.arange(1, 17)  # 16 of 16 improve, best stays 10
    v[58:71] = 11.0 + np.arange(13)  # new bests up to 23
    return v  # 71..100: 0, no step improves


def test_apgd_step_rule_and_momentum_follow_a_hand_traced_schedule() -> None:
    # Hand trace (t_max = 100, checkpoints 22, 41, 57, 70, 80, 87, 93, 99, rho = 0.75):
    #   22: 1/22 improved < 16.5                    -> halve (cond. 1), restart at x_1
    #   41: 18/19 >= 14.25; step at 22 was 2 eps before halving, now eps: changed
    #                                               -> keep (cond. 2 false)
    #   57: 16/16; step unchanged since 41, best still 10 -> halve (cond. 2), restart at x_1
    #   70: 13/13, new bests                        -> keep
    #   80, 87, 93, 99: no step improves            -> halve, restart at x_70
    v = _prescribed_values()
    eps, alpha, c = 1.0, 0.75, 0.1
    step = np.empty(101)
    for lo, hi, s in ((1, 22, 2.0), (23, 57, 1.0), (58, 80, 0.5), (81, 87, 0.25),
                      (88, 93, 0.125), (94, 99, 0.0625), (100, 100, 0.03125)):  # fmt: skip
        step[lo : hi + 1] = s * eps
    restarts = {22, 57, 80, 87, 93, 99}
    # expected iterates: 1-D, ball [-1, 1], gradient direction sign(c - x)
    xs, xc, xp, best_v, best_x = [0.0], 0.0, 0.0, v[0], 0.0
    for k in range(1, 101):
        z = float(np.clip(xc + step[k] * np.sign(c - xc), -eps, eps))
        xn = z if k == 1 else float(np.clip(xc + alpha * (z - xc) + (1 - alpha) * (xc - xp), -1, 1))
        xp, xc = xc, xn
        if v[k] > best_v:
            best_v, best_x = v[k], xn
        if k in restarts:
            xc = best_x  # xp is kept: the momentum survives the restart (Croce's code)
        xs.append(xn)

    seen: list[float] = []

    def f(x: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
        seen.append(float(x.detach()[0, 0]))
        pull = -(x[:, 0] - c).abs()  # gradient sign(c - x); the value is prescribed
        return torch.as_tensor(v[len(seen) - 1], dtype=x.dtype) + pull - pull.detach()

    x0 = torch.zeros(1, 1, dtype=torch.float64)
    # traced from the code itself (init="code"); the default starts on the sphere
    out = APGD(norm="l2", eps=eps, t_max=100, alpha=alpha, init="code").run(f, x0)
    np.testing.assert_allclose(seen, xs, rtol=0, atol=1e-12)
    assert float(out.values[0]) == 23.0
    assert int(out.queries[0]) == 101


def test_apgd_condition_two_is_off_at_the_first_checkpoint() -> None:
    # t_max = 30, first checkpoint 7. The start is the best value (1.0); updates 1..7 improve
    # on each other (6 of 7) without beating it. Condition 1 is false (6 >= 0.75 * 7), and
    # condition 2 needs a previous checkpoint (Croce's reduced_last_check starts true), so the
    # step is not halved at 7 and update 8 continues from x_7 with step 2 eps, as traced here.
    v = np.concatenate([[1.0, 0.0], 0.01 * np.arange(1, 30)])
    eps, alpha, c = 1.0, 0.75, 0.1
    xs, xc, xp = [0.0], 0.0, 0.0
    for k in range(1, 9):
        z = float(np.clip(xc + 2 * eps * np.sign(c - xc), -eps, eps))
        xn = z if k == 1 else float(np.clip(xc + alpha * (z - xc) + (1 - alpha) * (xc - xp), -1, 1))
        xp, xc = xc, xn
        xs.append(xn)
    seen: list[float] = []

    def f(x: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
        seen.append(float(x.detach()[0, 0]))
        pull = -(x[:, 0] - c).abs()  # gradient sign(c - x); the value is prescribed
        return torch.as_tensor(v[len(seen) - 1], dtype=x.dtype) + pull - pull.detach()

    APGD(norm="l2", eps=eps, t_max=30, alpha=alpha, init="code").run(
        f, torch.zeros(1, 1, dtype=torch.float64)
    )
    np.testing.assert_allclose(seen[:9], xs, rtol=0, atol=1e-12)


def test_greedypixel_spends_exactly_t_max_and_stays_in_its_box() -> None:
    g = torch.Generator().manual_seed(3)
    x0 = torch.randn(3, 20, generator=g)
    c = torch.randn(3, 20, generator=g)
    calls = np.zeros(3, dtype=int)

    def f(x: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
        np.add.at(calls, rows.numpy(), 1)
        return torch.nn.functional.cosine_similarity(x, c[rows], dim=1)

    init = torch.nn.functional.cosine_similarity(x0, c, dim=1)
    out = GreedyPixel(eps=0.5, t_max=17, sparsity=4, rng=0).run(f, x0, init)
    np.testing.assert_array_equal(calls, [17, 17, 17])  # 8 visits of 2 and a partial one
    np.testing.assert_array_equal(out.queries, calls)
    np.testing.assert_array_equal(out.iterations, [9, 9, 9])
    delta = (out.latents - x0).abs()
    assert ((delta == 0) | torch.isclose(delta, torch.tensor(0.5))).all()
    assert ((delta != 0).sum(dim=1) <= 4).all()  # only the 4 cycled pixels move
    assert (out.values >= init).all()
    assert all(len(h) == 18 and np.all(np.diff(h) >= 0) for h in out.history)
    np.testing.assert_allclose(
        out.values.numpy(), f(out.latents, torch.arange(3)).numpy(), rtol=1e-6
    )


def test_greedypixel_scores_the_eight_corners_of_a_pixel_and_always_moves() -> None:
    x0 = torch.zeros(1, 3, 1, 2)
    batches: list[torch.Tensor] = []

    def f(x: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
        batches.append(x.clone())
        return -x.square().sum(dim=(1, 2, 3)) - x[:, 0].sum(dim=(1, 2))  # start is the best

    init = torch.zeros(1)
    prio = torch.tensor([[[[0.0, 1.0]], [[0.0, 1.0]], [[0.0, -1.0]]]])  # pixel 1 first
    out = GreedyPixel(eps=0.5, t_max=20).run(f, x0, init, prio)
    assert [b.shape[0] for b in batches] == [8, 8, 4]  # one batch per visit, 20 queries
    corners = {tuple(r) for r in batches[0][:, :, 0, 1].tolist()}
    assert corners == {(a, b, d) for a in (-0.5, 0.5) for b in (-0.5, 0.5) for d in (-0.5, 0.5)}
    assert (batches[0][:, :, 0, 0] == 0).all()
    # every candidate is worse than the start, yet the pixel moved to the best one: c0 = -ε,
    # the other channels tied, so the first such corner in product order
    moved = batches[1][0, :, 0, 1]
    torch.testing.assert_close(moved, torch.tensor([-0.5, -0.5, -0.5]))
    assert (batches[1][:, :, 0, 1] == moved[:, None].T).all()
    assert float(out.values[0]) == 0.0  # the best point seen is the start
    assert torch.equal(out.latents, x0)


def test_greedypixel_every_move_changes_the_8_bit_image_of_a_tiny_unet() -> None:
    pytest.importorskip("diffusers")
    from diffusers import DDIMScheduler, UNet2DModel

    from idaudit.inversion import DiffusionGenerator
    from idaudit.inversion._target import to_uint8

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        unet = UNet2DModel(
            sample_size=16,
            block_out_channels=(8, 16),
            layers_per_block=1,
            norm_num_groups=4,
            down_block_types=("DownBlock2D", "DownBlock2D"),
            up_block_types=("UpBlock2D", "UpBlock2D"),
        )
    sched = DDIMScheduler(beta_schedule="linear", beta_start=1e-4, beta_end=0.02)
    gen = DiffusionGenerator(unet, sched, num_inference_steps=2)
    x0 = torch.randn(1, 3, 16, 16, generator=torch.Generator().manual_seed(1))
    target = torch.rand(1, 3, 16, 16, generator=torch.Generator().manual_seed(2))
    states: list[torch.Tensor] = []

    def f(x: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
        imgs = torch.from_numpy(to_uint8(gen.forward(x))).float()  # scored on 8-bit pixels
        vals = -(imgs.permute(0, 3, 1, 2) / 255 - target).square().mean(dim=(1, 2, 3))
        states.append(x[int(torch.argmax(vals))].clone())  # the move GreedyPixel makes
        return vals

    with torch.no_grad():
        init = f(x0, torch.tensor([0]))
    states.clear()
    GreedyPixel(t_max=48, rng=0).run(f, x0, init)  # the default step, 6 visits
    assert len(states) == 6
    with torch.no_grad():
        images = to_uint8(gen.forward(torch.cat([x0, torch.stack(states)])))
    for before, after in itertools.pairwise(images):
        assert (before != after).any()


def test_greedypixel_uses_the_surrogate_priority_stops_at_tau_and_is_deterministic() -> None:
    x0 = torch.zeros(1, 6) + 1.0
    c = torch.tensor([[1.0, 1.0, 1.0, 1.0, 1.0, 5.0]])
    f = _cosine_to(c)
    init = f(x0, torch.tensor([0]))
    prio = torch.tensor([[0.0, 0.0, 0.0, 0.0, 0.0, -1.0]])  # coordinate 5 first (|g|)
    out = GreedyPixel(eps=0.5, t_max=2).run(f, x0, init, prio)
    assert int(out.queries[0]) == 2
    assert out.latents[0, 5] == pytest.approx(1.5)
    assert float(out.values[0]) > float(init[0])
    tau = float(out.values[0])
    stop = GreedyPixel(eps=0.5, t_max=50, tau=tau).run(f, x0, init, prio)
    assert int(stop.queries[0]) == 2
    a = GreedyPixel(eps=0.5, t_max=9, rng=4).run(f, x0, init)
    b = GreedyPixel(eps=0.5, t_max=9, rng=4).run(f, x0, init)
    assert torch.equal(a.latents, b.latents)


def test_greedypixel_refuses_a_nan_start() -> None:
    f = _cosine_to(torch.ones(2, 3))
    with pytest.raises(InvalidInputError, match=r"`initial` must be finite.*nan at row 1"):
        GreedyPixel().run(f, torch.ones(2, 3), torch.tensor([0.5, float("nan")]))
    with pytest.raises(InvalidInputError, match="`x0` must be finite"):
        GreedyPixel().run(f, torch.full((2, 3), float("nan")), torch.zeros(2))


def test_coordinate_search_counts_queries_and_respects_its_budgets() -> None:
    g = torch.Generator().manual_seed(3)
    x0 = torch.randn(3, 20, generator=g)
    c = torch.randn(3, 20, generator=g)
    calls = np.zeros(3, dtype=int)

    def f(x: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
        np.add.at(calls, rows.numpy(), 1)
        return torch.nn.functional.cosine_similarity(x, c[rows], dim=1)

    init = torch.nn.functional.cosine_similarity(x0, c, dim=1)
    out = CoordinateSearch(norm="l2", eps=2.0, t_max=17, sparsity=4, rng=0).run(f, x0, init)
    np.testing.assert_array_equal(out.queries, calls)
    assert (out.queries <= 17).all()
    delta = out.latents - x0
    assert ((delta != 0).sum(dim=1) <= 4).all()
    assert (delta.norm(dim=1) <= 2.0 + 1e-6).all()
    assert (out.values >= init).all()


def test_attacks_refuse_bad_settings() -> None:
    f = _cosine_to(torch.ones(1, 3))
    with pytest.raises(InvalidInputError, match="`norm`"):
        APGD(norm="l1").run(f, torch.ones(1, 3))  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError, match="`tau`"):
        APGD(tau=1.5).run(f, torch.ones(1, 3))
    with pytest.raises(InvalidInputError, match="`eps`"):
        GreedyPixel(eps=-1.0).run(f, torch.ones(1, 3), torch.zeros(1))
    assert math.isfinite(float(APGD(t_max=1).run(f, torch.ones(1, 3)).values[0]))


def test_attacks_refuse_non_finite_values_and_malformed_starts() -> None:
    x0 = torch.zeros(2, 3, 2, 2)
    init = torch.zeros(2)
    nan = lambda x, rows: torch.full((x.shape[0],), float("nan"))  # noqa: E731
    with pytest.raises(InvalidInputError, match="objective returned a non-finite value"):
        GreedyPixel(eps=0.5, t_max=4).run(nan, x0, init)
    with pytest.raises(InvalidInputError, match="objective returned a non-finite value"):
        APGD(norm="l2", eps=1.0, t_max=2).run(
            lambda x, rows: x.sum(dim=(1, 2, 3)) * float("nan"), x0
        )
    ok = lambda x, rows: -x.square().sum(dim=(1, 2, 3))  # noqa: E731
    with pytest.raises(InvalidInputError, match="`priority` must be finite"):
        GreedyPixel(eps=0.5, t_max=4).run(ok, x0, init, torch.full_like(x0, float("nan")))
    with pytest.raises(InvalidInputError, match=r"`x0` must be a batch of latents"):
        GreedyPixel(eps=0.5, t_max=4).run(ok, torch.zeros(3), torch.zeros(3))
    with pytest.raises(InvalidInputError, match=r"`x0` must be a batch of latents"):
        GreedyPixel(eps=0.5, t_max=4).run(ok, torch.zeros(0, 4), torch.zeros(0))
    with pytest.raises(InvalidInputError, match=r"`row_seeds` must hold one seed per row \(2\)"):
        GreedyPixel(eps=0.5, t_max=4).run(ok, x0, init, row_seeds=[1, 2, 3])
    flat = lambda x, rows: -x.square().sum(dim=1)  # noqa: E731
    with pytest.raises(InvalidInputError, match=r"`row_seeds` must hold one seed per row \(2\)"):
        CoordinateSearch(eps=0.5, t_max=4).run(flat, x0.reshape(2, -1), init, row_seeds=[1, 2, 3])


def test_attack_inputs_the_search_cannot_read_are_refused() -> None:
    from idaudit.inversion._attacks import apgd_checkpoints

    with pytest.raises(InvalidInputError, match="`n_iter` must be >= 1"):
        apgd_checkpoints(-5)
    gp = GreedyPixel(eps=0.5, t_max=4)
    flat = torch.zeros(2, 6)
    with pytest.raises(InvalidInputError, match=r"one value per candidate, shape \(4,\)"):
        gp.run(lambda x, rows: x.sum(dim=1, keepdim=True), flat, torch.zeros(2))
    with pytest.raises(InvalidInputError, match=r"as \(B, 1, H, W\)\); got \(2, 4, 5\)"):
        gp.run(lambda x, rows: x.flatten(1).sum(1), torch.zeros(2, 4, 5), torch.zeros(2))


def test_greedy_pixel_keeps_gains_below_float32_resolution() -> None:
    # a float64 objective whose only gain is 3e-9 (float32 cannot tell it from 0.5)
    def objective(x: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
        return 0.5 + 3e-9 * x.double().flatten(1).sum(dim=1)

    out = GreedyPixel(eps=1.0, t_max=2).run(objective, torch.zeros(1, 3), torch.tensor([0.5]))
    assert float(out.latents.sum()) == 1.0  # the visited pixel moved to its gaining candidate
    assert float(out.values[0]) == 0.5 + 3e-9
