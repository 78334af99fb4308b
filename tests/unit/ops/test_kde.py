"""Tests of idaudit.ops._kde against scipy.stats.gaussian_kde and numpy."""

from __future__ import annotations

import math

import mpmath
import numpy as np
import pytest
import torch
from scipy.stats import gaussian_kde

import idaudit.ops._kde as kde_module
from idaudit.ops import kde_bandwidth, kde_on_grid, log_ratio_max


def padded(rows: list[np.ndarray]) -> tuple[torch.Tensor, torch.Tensor]:
    width = max(len(r) for r in rows)
    values = np.zeros((len(rows), width))
    mask = np.zeros((len(rows), width))
    for i, r in enumerate(rows):
        values[i, : len(r)] = r
        mask[i, : len(r)] = 1.0
    return torch.from_numpy(values), torch.from_numpy(mask)


@pytest.fixture
def rows() -> list[np.ndarray]:
    gen = np.random.default_rng(3)
    return [
        gen.normal(0.0, 0.02, size=40),
        gen.standard_t(3, size=25) * 0.05,
        np.r_[gen.normal(-1, 0.1, 30), gen.normal(1, 0.1, 30)],  # bimodal
    ]


def test_silverman_bandwidth_is_scipys(rows: list[np.ndarray]) -> None:
    values, mask = padded(rows)
    got = kde_bandwidth(values, mask, "silverman").numpy()
    want = [math.sqrt(gaussian_kde(r, bw_method="silverman").covariance[0, 0]) for r in rows]
    np.testing.assert_allclose(got, want, rtol=1e-13)  # same formula, rounding only


def test_robust_silverman_bandwidth(rows: list[np.ndarray]) -> None:
    values, mask = padded(rows)
    got = kde_bandwidth(values, mask, "silverman-robust").numpy()
    want = []
    for r in rows:
        iqr = np.subtract(*np.percentile(r, [75, 25]))
        want.append(0.9 * min(np.std(r, ddof=1), iqr / 1.34) * len(r) ** -0.2)
    np.testing.assert_allclose(got, want, rtol=1e-13)


def test_robust_bandwidth_falls_back_to_std_when_iqr_is_zero() -> None:
    r = np.r_[np.zeros(10), 1.0, -1.0]  # IQR 0, std > 0
    values, mask = padded([r])
    got = kde_bandwidth(values, mask, "silverman-robust").item()
    assert got == pytest.approx(0.9 * np.std(r, ddof=1) * 12**-0.2, rel=1e-13)


def test_unknown_rule() -> None:
    values, mask = padded([np.arange(3.0)])
    with pytest.raises(ValueError, match="`rule` must be one of"):
        kde_bandwidth(values, mask, "scott")


@pytest.fixture(params=[True, False], ids=["compiled", "torch"])
def compiled(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> bool:
    """Run a test on the CPU's compiled kernel and on the torch routes (what CUDA runs)."""
    monkeypatch.setattr(kde_module, "_COMPILED", request.param)
    return bool(request.param)


def scipy_rows(rows: list[np.ndarray], lo: np.ndarray, hi: np.ndarray, n_grid: int) -> np.ndarray:
    return np.stack(
        [
            gaussian_kde(r, bw_method="silverman")(np.linspace(lo[i], hi[i], n_grid))
            for i, r in enumerate(rows)
        ]
    )


@pytest.mark.parametrize("margin", [3.0, 40.0])  # 40 bandwidths: coarse grid, direct route
def test_densities_match_gaussian_kde(
    rows: list[np.ndarray], margin: float, compiled: bool
) -> None:
    values, mask = padded(rows)
    h = kde_bandwidth(values, mask, "silverman")
    lo = torch.tensor([r.min() for r in rows], dtype=torch.float64) - margin * h
    hi = torch.tensor([r.max() for r in rows], dtype=torch.float64) + margin * h
    got = kde_on_grid(values, mask, h, lo, (hi - lo) / 200, 201).numpy()
    want = scipy_rows(rows, lo.numpy(), hi.numpy(), 201)
    # every route is an exact rewriting: agreement to rounding (~3e-14 here, ~1e-12 where
    # exponents near 900 carry their own rounding); atol admits denormal tails (< 1e-250,
    # far below the KDE-LR floor of 1e-12)
    np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-250)


def route_of(values: torch.Tensor, h: torch.Tensor, lo: torch.Tensor, step: torch.Tensor) -> list:
    """Which route each row takes, by the criteria kde_on_grid documents."""
    layout = kde_module._Layout(201)
    t = (values - lo[:, None]) / step[:, None] - layout.centre
    s = 0.5 * (step / h) ** 2
    reach = t.abs().amax(-1)
    factored = layout.exponent(s, reach) <= kde_module._EXP2_MAX
    blocked = ~factored & (s * 7 * (reach + layout.centre + 8) <= 150.0)
    return [
        "factored" if f else "blocked" if b else "direct"
        for f, b in zip(factored, blocked, strict=True)
    ]


def test_every_route_in_one_call_matches_gaussian_kde(compiled: bool) -> None:
    # one call mixing the three routes (the compiled kernel leaves the rows it cannot take
    # to the torch routes, which gather them by index); steps of 0.05, 0.35 and 0.8
    # bandwidths, and an outlier 400 bandwidths away that pushes a fine grid's factors out
    # of range
    gen = np.random.default_rng(4)
    base = gen.normal(size=30)
    outlier = np.r_[gen.normal(size=29), 400.0]
    rows = [base, base, base, outlier, base]
    values, _ = padded(rows)
    h = torch.ones(5, dtype=torch.float64)
    step = h * torch.tensor([0.05, 0.35, 0.8, 0.05, 0.2], dtype=torch.float64)
    lo = values.amin(-1) - 3 * h
    assert route_of(values, h, lo, step) == ["factored", "blocked", "direct", "blocked", "factored"]
    got = kde_on_grid(values, None, h, lo, step, 201).numpy()
    grid = lo.numpy()[:, None] + step.numpy()[:, None] * np.arange(201)
    want = np.stack(
        [gaussian_kde(r, 1 / np.std(r, ddof=1))(g) for r, g in zip(rows, grid, strict=True)]
    )
    np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-250)


@pytest.mark.parametrize("n_grid", [2, 3, 4, 8, 50, 200, 201, 401])
def test_grid_sizes_odd_and_even(n_grid: int, compiled: bool) -> None:
    # even grids have a half-integer centre (the block length follows the grid's parity);
    # 2 and 3 points need no block powers at all
    gen = np.random.default_rng(n_grid)
    rows = [gen.normal(size=40), gen.standard_t(3, size=17) * 0.1]
    values, mask = padded(rows)
    h = kde_bandwidth(values, mask, "silverman")
    lo = torch.tensor([r.min() for r in rows], dtype=torch.float64) - 3 * h
    hi = torch.tensor([r.max() for r in rows], dtype=torch.float64) + 3 * h
    got = kde_on_grid(values, mask, h, lo, (hi - lo) / (n_grid - 1), n_grid).numpy()
    want = scipy_rows(rows, lo.numpy(), hi.numpy(), n_grid)
    np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-250)


def test_padding_and_no_mask_agree(compiled: bool) -> None:
    gen = np.random.default_rng(7)
    r = gen.normal(size=25)
    values = torch.from_numpy(r[None, :])
    h = kde_bandwidth(values, torch.ones_like(values), "silverman")
    lo, step = values.amin(-1) - 3 * h, 0.1 * h
    plain = kde_on_grid(values, None, h, lo, step, 201)
    # the same row padded with junk that the mask removes
    padded_values = torch.cat([values, torch.full((1, 7), 3.7, dtype=torch.float64)], 1)
    mask = torch.cat([torch.ones(1, 25), torch.zeros(1, 7)], 1).double()
    masked = kde_on_grid(padded_values, mask, h, lo, step, 201)
    np.testing.assert_allclose(masked.numpy(), plain.numpy(), rtol=1e-14)


def test_compiled_kernel_and_torch_routes_agree(monkeypatch: pytest.MonkeyPatch) -> None:
    # the CPU kernel (numba) and the torch routes (what CUDA runs) on 600 rows of a paper-
    # sized KDE-LR condition; more rows than a torch chunk, so chunking is exercised too
    gen = np.random.default_rng(8)
    values = torch.from_numpy(gen.normal(0.0, 0.07, size=(600, 95)))
    h = kde_bandwidth(values, torch.ones_like(values), "silverman")
    lo = values.amin(-1) - 3 * h
    step = (values.amax(-1) + 3 * h - lo) / 200
    compiled = kde_on_grid(values, None, h, lo, step, 201)
    monkeypatch.setattr(kde_module, "_COMPILED", False)
    monkeypatch.setitem(kde_module._CHUNK_BYTES, "cpu", 2**21)  # ~77 rows per torch chunk
    reference = kde_on_grid(values, None, h, lo, step, 201)
    # two exact routes with different rounding (~1e-14 relative)
    np.testing.assert_allclose(compiled.numpy(), reference.numpy(), rtol=1e-12, atol=0)


def test_out_is_written_and_checked() -> None:
    values = torch.tensor([[0.0, 0.5, 1.5]], dtype=torch.float64)
    one = torch.ones(1, dtype=torch.float64)
    out = torch.empty(1, 11, dtype=torch.float64)
    got = kde_on_grid(values, None, one, -2 * one, 0.4 * one, 11, out=out)
    assert got is out
    np.testing.assert_allclose(
        out[0].numpy(),
        gaussian_kde([0.0, 0.5, 1.5], 1 / np.std([0.0, 0.5, 1.5], ddof=1))(np.linspace(-2, 2, 11)),
        rtol=1e-12,
    )
    with pytest.raises(ValueError, match=r"`out` must have shape \(1, 11\) on cpu"):
        kde_on_grid(values, None, one, -one, one, 11, out=torch.empty(1, 10, dtype=torch.float64))


@pytest.mark.parametrize(
    ("change", "error", "match"),
    [
        ({"values": np.zeros(3)}, TypeError, r"`values` must be a 2-D torch\.Tensor"),
        ({"values": torch.zeros(1, 3)}, TypeError, r"`values` must be float64; got torch\.float32"),
        ({"lo": torch.zeros(2, dtype=torch.float64)}, ValueError, r"`lo` must have shape \(1,\)"),
        ({"mask": torch.ones(1, 2, dtype=torch.float64)}, ValueError, r"`mask` must have shape"),
        ({"mask": torch.zeros(1, 3, dtype=torch.float64)}, ValueError, "at least one real sample"),
        ({"bandwidth": torch.zeros(1, dtype=torch.float64)}, ValueError, "`bandwidth` must be"),
        ({"step": torch.full((1,), -0.1, dtype=torch.float64)}, ValueError, "`step` must be"),
        ({"out": torch.empty(1, 11, dtype=torch.int64)}, TypeError, "`out` must be float64"),
        ({"n_grid": 0}, ValueError, "`n_grid` must be an integer >= 1"),
        ({"step": torch.full((1,), 1e160, dtype=torch.float64)}, ValueError, "must stay below"),
    ],
)
def test_bad_arguments_are_named(change: dict, error: type, match: str, compiled: bool) -> None:
    # the compiled kernel reads raw memory: every argument is checked before it runs
    one = torch.ones(1, dtype=torch.float64)
    args = {
        "values": torch.tensor([[0.0, 0.5, 1.5]], dtype=torch.float64),
        "mask": None,
        "bandwidth": one,
        "lo": -2 * one,
        "step": 0.4 * one,
        "n_grid": 11,
        "out": None,
    } | change
    with pytest.raises(error, match=match):
        kde_on_grid(**args)


def test_blocked_route_ignores_padding_near_the_grid(compiled: bool) -> None:
    # on a very fine grid (step 1e-6 bandwidths) a padded entry far away in grid units is
    # still within a bandwidth: the mask, not distance, must remove it
    x = torch.tensor([[0.0, 1e7, 0.0]], dtype=torch.float64)
    mask = torch.tensor([[1.0, 1.0, 0.0]], dtype=torch.float64)
    one = torch.ones(1, dtype=torch.float64)
    got = kde_on_grid(x, mask, one, -1e-4 * one, 1e-6 * one, 201)
    want = kde_on_grid(x[:, :2], None, one, -1e-4 * one, 1e-6 * one, 201)
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-14)
    np.testing.assert_allclose(got[0, 100].item(), 0.5 / np.sqrt(2 * np.pi), rtol=1e-12)


def test_padding_may_hold_anything(compiled: bool) -> None:
    x = torch.tensor([[0.3, -1.0, np.nan, np.inf]], dtype=torch.float64)
    mask = torch.tensor([[1.0, 1.0, 0.0, 0.0]], dtype=torch.float64)
    one = torch.ones(1, dtype=torch.float64)
    got = kde_on_grid(x, mask, one, -4 * one, 0.05 * one, 201)
    want = kde_on_grid(x[:, :2], None, one, -4 * one, 0.05 * one, 201)
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-14)


@pytest.mark.parametrize("scale", [1e-200, 1e-8, 1e8, 1e100])
def test_densities_scale_with_the_data(scale: float, compiled: bool) -> None:
    # p_{cx}(c g) = p_x(g) / c: the normalisation is applied after the factors, so their
    # range does not depend on the bandwidth's scale
    gen = np.random.default_rng(12)
    x = torch.from_numpy(gen.normal(size=(3, 40)))
    h = kde_bandwidth(x, torch.ones_like(x), "silverman")
    lo = x.amin(-1) - 3 * h
    step = (x.amax(-1) + 3 * h - lo) / 200
    base = kde_on_grid(x, None, h, lo, step, 201)
    scaled = kde_on_grid(x * scale, None, h * scale, lo * scale, step * scale, 201)
    np.testing.assert_allclose((scaled * scale).numpy(), base.numpy(), rtol=1e-12)


def test_tiny_and_huge_spreads_keep_their_bandwidth() -> None:
    # the variance is computed on residuals scaled by the largest one: no underflow at
    # spreads of 1e-170, no overflow at values of 1e160
    gen = np.random.default_rng(13)
    x = torch.from_numpy(gen.normal(size=(1, 50)))
    h = kde_bandwidth(x, torch.ones_like(x), "silverman")
    for scale in (1e-170, 1e160):
        got = kde_bandwidth(x * scale, torch.ones_like(x), "silverman")
        assert got.item() == pytest.approx(h.item() * scale, rel=1e-13)


def test_exp2_to_one_and_a_half_ulp() -> None:
    # the compiled kernel's own 2**x (a Taylor series after range reduction) against mpmath
    # at 120 bits across the range the kernel uses (|x| <= 960) and at the reduction's edges
    # (half-integers). The Horner rounding leaves up to ~1.25 ulp (1.23 was the worst of
    # 3e6 points; ~3 in 10^4 points exceed 1 ulp), so 1.5 is the bound that can fail only
    # for a real error
    from idaudit.ops._kde_cpu import _exp2

    gen = np.random.default_rng(9)
    x = np.r_[gen.uniform(-960, 960, 20_000), np.arange(-960.5, 960.0, 16.0), 0.0, -0.5, 0.5]
    got = np.empty_like(x)
    _exp2(x, got, np.empty(x.size, dtype=np.int64))
    with mpmath.workprec(120):
        exact = np.array([float(mpmath.power(2, mpmath.mpf(v))) for v in x])
    ulps = np.abs(got - exact) / np.spacing(exact)
    assert ulps.max() <= 1.5
    assert np.mean(ulps > 1.0) < 1e-3


def test_kernels_compile_without_a_disk_cache() -> None:
    # numba refuses cache=True where no cache can be written (here: source with no file);
    # the kernels are then compiled in memory instead of failing
    from idaudit.ops._kde_cpu import _jit

    namespace: dict = {}
    exec("def add_one(x):\n    return x + 1.0\n", namespace)
    assert _jit()(namespace["add_one"])(1.5) == 2.5


def test_log_ratio_max_matches_numpy() -> None:
    gen = np.random.default_rng(6)
    pa, pb = gen.random((2, 3, 11)) * np.array([[1e-20], [1.0], [5.0]])
    uniform = np.array([0.5, 2.0, 0.1])
    for alpha in (0.0, 0.01, 1.0):
        got = log_ratio_max(
            torch.from_numpy(pa), torch.from_numpy(pb), torch.from_numpy(uniform), alpha, 1e-12
        ).numpy()
        ta = np.maximum((1 - alpha) * pa + alpha * uniform[:, None], 1e-12)
        tb = np.maximum((1 - alpha) * pb + alpha * uniform[:, None], 1e-12)
        np.testing.assert_allclose(got, np.abs(np.log(ta) - np.log(tb)).max(1), rtol=1e-14)


def test_log_ratio_max_propagates_nan(compiled: bool) -> None:
    d = torch.ones(2, 5, dtype=torch.float64)
    bad = d.clone()
    bad[1, 2] = float("nan")
    got = log_ratio_max(d, bad, torch.ones(2, dtype=torch.float64), 0.0, 1e-12)
    assert got[0].item() == 0.0
    assert np.isnan(got[1].item())


def test_log_ratio_max_refuses_mismatched_shapes() -> None:
    d = torch.ones(2, 11, dtype=torch.float64)
    with pytest.raises(ValueError, match="must have the same shape"):
        log_ratio_max(d, d[:, :5].contiguous(), torch.ones(2, dtype=torch.float64), 0.0, 1e-12)


def test_log_ratio_max_compiled_and_torch_agree(monkeypatch: pytest.MonkeyPatch) -> None:
    gen = np.random.default_rng(10)
    pa, pb = (torch.from_numpy(gen.random((50, 201)) ** 8) for _ in range(2))
    uniform = torch.from_numpy(gen.uniform(0.1, 3.0, 50))
    for alpha in (0.0, 0.01, 0.5):
        compiled = log_ratio_max(pa, pb, uniform, alpha, 1e-12)
        monkeypatch.setattr(kde_module, "_COMPILED", False)
        reference = log_ratio_max(pa, pb, uniform, alpha, 1e-12)
        monkeypatch.setattr(kde_module, "_COMPILED", True)
        np.testing.assert_allclose(compiled.numpy(), reference.numpy(), rtol=1e-14)


@pytest.mark.parametrize(
    ("alpha", "floor", "match"),
    [(1.5, 1e-12, r"`alpha` must be in \[0, 1\]; got 1.5"), (0.0, 0.0, "`floor` must be > 0")],
)
def test_log_ratio_max_refuses_bad_settings(alpha: float, floor: float, match: str) -> None:
    d = torch.ones(1, 3, dtype=torch.float64)
    with pytest.raises(ValueError, match=match):
        log_ratio_max(d, d, torch.ones(1, dtype=torch.float64), alpha, floor)


@pytest.mark.parametrize("rule", ["silverman", "silverman-robust"])
@pytest.mark.parametrize("value", [0.1, 0.7, 1 / 3, 123.456])
def test_constant_rows_have_bandwidth_exactly_zero(rule: str, value: float) -> None:
    # a rounded mean of equal values leaves residuals of ~1e-17: the row is still constant
    for n in (3, 7, 50, 512):
        x = torch.full((1, n), value, dtype=torch.float64)
        assert kde_bandwidth(x, torch.ones_like(x), rule).item() == 0.0


def test_log_ratio_max_beyond_float64_ratios(compiled: bool) -> None:
    # with a floor of 5e-324 a ratio can exceed 1.8e308: the log-ratio is still finite
    pa = torch.tensor([[1e300, 1.0, 0.0]], dtype=torch.float64)
    pb = torch.tensor([[1e-300, 1.0, 1.0]], dtype=torch.float64)
    got = log_ratio_max(pa, pb, torch.ones(1, dtype=torch.float64), 0.0, 5e-324).item()
    assert got == pytest.approx(np.log(1e300) - np.log(1e-300), rel=1e-14)


def test_log_ratio_max_infinite_density_is_infinite(compiled: bool) -> None:
    pa = torch.tensor([[np.inf, 1.0]], dtype=torch.float64)
    got = log_ratio_max(pa, torch.ones(1, 2, dtype=torch.float64), torch.ones(1).double(), 0, 1.0)
    assert got.item() == np.inf


def test_numpy_integer_grid_sizes_and_empty_rows() -> None:
    values = torch.tensor([[0.0, 1.0]], dtype=torch.float64)
    one = torch.ones(1, dtype=torch.float64)
    got = kde_on_grid(values, None, one, -one, 0.5 * one, np.int64(5))
    np.testing.assert_allclose(got.numpy(), kde_on_grid(values, None, one, -one, 0.5 * one, 5))
    with pytest.raises(ValueError, match="at least one sample per row; got 0 columns"):
        kde_on_grid(values[:, :0], None, one, -one, one, 5)
    empty = torch.ones(1, 0, dtype=torch.float64)
    with pytest.raises(ValueError, match="n_grid >= 1"):
        log_ratio_max(empty, empty, one, 0.0, 1e-12)
