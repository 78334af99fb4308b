"""Unit tests for idaudit.plotting (figures are built without pyplot)."""

from __future__ import annotations

import io

import numpy as np
import pytest
import xarray as xr
from matplotlib.figure import Figure

from idaudit.plotting import plot_mmd_null, plot_noise_sweep, plot_roc


def _sweep() -> xr.Dataset:
    scale = np.array([0.1, 1.0, 10.0])
    eps = np.array([[np.inf, np.inf, np.inf], [1.0, 2.0, np.inf], [0.1, 0.2, 0.3]])
    auc = np.array([[1.0, 1.0, 1.0], [0.8, 0.9, 0.85], [0.5, 0.52, 0.49]])
    return xr.Dataset(
        {
            "rocht_epsilon": (("scale", "pair"), eps, {"status": "diagnostic"}),
            "mmdtv_epsilon": (
                ("scale", "pair"),
                np.nan_to_num(eps, posinf=5.0) / 10,
                {"status": "sample_estimate"},
            ),
            "rocht_auc": (("scale", "pair"), auc, {"status": "sample_estimate"}),
            "certified_epsilon": (
                ("scale", "pair"),
                [[2.0, np.nan, np.nan], [0.5, np.nan, np.nan], [0.0, np.nan, np.nan]],
                {"status": "certified_lower_bound", "n_simultaneous": 5},
            ),
            "true_epsilon": (("scale", "pair"), 10 / scale[:, None] * np.ones((3, 3))),
            "reference_epsilon": ("scale", 20 / scale),
        },
        coords={"scale": scale},
        attrs={"scale_name": "Laplace scale b"},
    )


def _png(fig: Figure) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    return buf.getvalue()


def test_noise_sweep_figure() -> None:
    fig = plot_noise_sweep(_sweep(), title="demo")
    assert isinstance(fig, Figure)
    ax_eps, ax_auc = fig.axes
    labels = [line.get_label() for line in ax_eps.get_lines()]
    assert "ROC-HT OOF (diagnostic)" in labels
    assert "MMD-TV (sample estimate)" in labels
    assert "reserved-test certificate (certified lower bound)" in labels
    assert "true ε (median)" in labels
    assert "mechanism-wide guarantee" in labels
    # ROC-HT: median infinite at the first scale only -> one triangle at the top edge
    markers = [line for line in ax_eps.get_lines() if line.get_marker() == "^"]
    assert len(markers) == 1
    np.testing.assert_array_equal(markers[0].get_xdata(), [0.1])
    rocht = next(ln for ln in ax_eps.get_lines() if ln.get_label().startswith("ROC-HT"))
    np.testing.assert_allclose(rocht.get_xdata(), [1.0, 10.0])  # finite medians: 2.0, 0.2
    np.testing.assert_allclose(rocht.get_ydata(), [2.0, 0.2])
    # the certificate's median over its one selected pair per scale
    cert = next(ln for ln in ax_eps.get_lines() if ln.get_label().startswith("reserved"))
    np.testing.assert_allclose(cert.get_ydata(), [2.0, 0.5, 0.0])
    assert ax_auc.get_ylabel() == "ROC AUC (OOF)"
    assert ax_auc.get_xlabel() == "Laplace scale b"
    assert _png(fig).startswith(b"\x89PNG")


def test_noise_sweep_on_given_axes_and_methods() -> None:
    fig = Figure()
    ax = fig.subplots()
    out = plot_noise_sweep(_sweep(), methods=["mmdtv_epsilon"], axes=[ax])
    assert out is fig
    labels = [line.get_label() for line in ax.get_lines()]
    assert labels[0] == "MMD-TV (sample estimate)"
    assert not any(label.startswith("ROC-HT") for label in labels)


def test_roc_and_mmd_figures() -> None:
    fig = plot_roc([0.0, 0.1, 0.5, 1.0], [0.0, 0.6, 0.9, 1.0], label="pair 1")
    (ax,) = fig.axes
    np.testing.assert_allclose(ax.get_lines()[0].get_xdata(), [0.0, 0.1, 0.5, 1.0])
    assert _png(fig).startswith(b"\x89PNG")
    gen = np.random.default_rng(0)
    fig = plot_mmd_null(gen.normal(0, 0.01, 50), gen.normal(0.3, 0.05, 80), bins=20)
    (ax,) = fig.axes
    assert len(ax.patches) == 40  # two histograms of 20 bins
    assert "n=50" in ax.get_legend().get_texts()[0].get_text()


@pytest.mark.parametrize("ax_given", [True, False])
def test_roc_draws_on_given_axes(ax_given: bool) -> None:
    fig = Figure()
    ax = fig.subplots() if ax_given else None
    out = plot_roc([0, 1], [0, 1], ax=ax)
    assert (out is fig) == ax_given


def test_roc_with_tied_scores_encloses_the_reported_auc() -> None:
    from sklearn.metrics import roc_auc_score, roc_curve

    y = [0, 0, 0, 0, 1, 1, 1, 1]
    score = [0.1, 0.5, 0.5, 0.9, 0.5, 0.5, 0.9, 0.9]  # ties give diagonal ROC segments
    fpr, tpr, _ = roc_curve(y, score)
    fig = plot_roc(fpr, tpr)
    path = fig.axes[0].get_lines()[0].get_path()  # the drawn polyline, after any step styling
    x, yy = path.vertices[:, 0], path.vertices[:, 1]
    drawn_area = float(np.sum(np.diff(x) * (yy[1:] + yy[:-1]) / 2))
    assert drawn_area == pytest.approx(roc_auc_score(y, score), abs=1e-12)


def test_plot_certified_routes_draws_each_certified_route() -> None:
    from idaudit.plotting import plot_certified_routes

    ds = _sweep()
    ds["certified_epsilon_max"] = (
        "scale",
        [2.0, 0.5, 0.0],
        {"status": "certified_lower_bound", "long_name": "reserved"},
    )
    ds["mmdtv_epsilon_hs_lb"] = (
        ("scale", "pair"),
        [[0.3, 0.4, 0.2], [0.1, 0.0, 0.05], [0.0, 0.0, 0.0]],
        {"status": "certified_lower_bound", "long_name": "MMD", "n_simultaneous": 3},
    )
    ds["mmdtv_mmd_lb"] = (  # certified, but an MMD, not an epsilon: not drawn
        ("scale", "pair"),
        np.ones((3, 3)),
        {"status": "certified_lower_bound", "long_name": "MMD bound"},
    )
    fig = plot_certified_routes(ds, title="routes")
    ax = fig.axes[0]
    labels = [line.get_label() for line in ax.get_lines()]
    # certified_epsilon is skipped (its _max is drawn); the per-pair MMD route as its maximum
    assert labels == [
        "reserved-test ROC certificate",
        "certified MMD, hockey-stick map",
        "true ε (largest over pairs)",
    ]
    np.testing.assert_allclose(ax.get_lines()[1].get_ydata(), [0.4, 0.1, 0.0])
    np.testing.assert_allclose(ax.get_lines()[2].get_ydata(), 10 / ds["scale"].values)
    assert _png(fig).startswith(b"\x89PNG")


# -- figures of the pipeline, Figure 3 and the accessor -----------------------------------------


def test_plot_certified_routes_marks_a_maximum_whose_multiplicity_is_unpaid() -> None:
    from idaudit.plotting import plot_certified_routes

    ds = _sweep()
    ds["mmdtv_epsilon_hs_lb"] = (  # each pair's bound holds alone: the max is not certified
        ("scale", "pair"),
        [[0.3, 0.4, 0.2], [0.1, 0.0, 0.05], [0.0, 0.0, 0.0]],
        {"status": "certified_lower_bound", "long_name": "MMD"},
    )
    ax = plot_certified_routes(ds).axes[0]
    line = next(x for x in ax.get_lines() if "hockey-stick" in x.get_label())
    assert line.get_label().endswith("(max of 3 per-pair bounds: not certified)")
    assert line.get_linestyle() == "--"


def _conditions() -> tuple[xr.Dataset, dict[str, object]]:
    import idaudit as ida
    from idaudit.audits import concat_conditions

    sets, runs = {}, {}
    for k, name in enumerate(["a_b_c", "d_e_f"]):
        gen = np.random.default_rng(k)
        x = np.repeat(gen.normal(size=(4, 5)), 15, axis=0) + (1 + k) * gen.normal(size=(60, 5))
        es = ida.EmbeddingSet(x, np.repeat([f"p{i}" for i in range(4)], 15))
        sets[name] = es
        pairs = ida.sample_pairs(es.identities, 4, rng=0)
        runs[name] = ida.audit_pairs(
            es, pairs, [ida.MMDTVAuditor(), ida.ROCHTAuditor(rng=0)], progress=False
        )
    return concat_conditions(runs), sets


def test_figure3_rocs_and_the_accessor_return_figures_without_pyplot() -> None:
    import matplotlib.pyplot as plt

    from idaudit.audits import median_auc_rocs
    from idaudit.plotting import plot_figure3, plot_rocs

    ds, sets = _conditions()
    before = plt.get_fignums()
    rocs = median_auc_rocs(ds, sets)
    fig = plot_figure3(ds, rocs, np.random.default_rng(0).normal(0, 0.01, 30))
    assert isinstance(fig, Figure)
    assert len(fig.axes) == 2
    # one curve per condition (plus the chance diagonal each time) on the ROC panel
    assert len(fig.axes[1].get_legend().get_texts()) == 2
    one = median_auc_rocs(ds.sel(condition="a_b_c"), sets["a_b_c"])
    assert isinstance(plot_rocs(one), Figure)
    roc = ds.idaudit.plot_roc(embeddings=sets)
    assert isinstance(roc, Figure)
    assert _png(roc).startswith(b"\x89PNG")
    assert plt.get_fignums() == before  # nothing registered with pyplot, nothing shown
    table = ds.idaudit.pairs()
    assert len(table) == 8  # 2 conditions x 4 pairs, one row each


def test_plot_rocs_draws_what_it_is_given_and_fits_nothing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from types import SimpleNamespace

    from idaudit.audits import ROCHTAuditor
    from idaudit.plotting import plot_figure3, plot_rocs

    def no_fit(*args: object, **kwargs: object) -> None:
        raise AssertionError("plotting fitted an auditor")

    monkeypatch.setattr(ROCHTAuditor, "fit", no_fit)
    fitted = SimpleNamespace(
        fpr_=np.array([0.0, 0.5, 1.0]), tpr_=np.array([0.0, 0.9, 1.0]), auc_=0.7
    )
    rocs = {"c: a vs b": fitted, "plain": ([0.0, 0.25, 1.0], [0.0, 0.5, 1.0])}
    ax = plot_rocs(rocs, title="given").axes[0]
    curves = [line for line in ax.get_lines() if not line.get_label().startswith("_")]
    assert [line.get_label() for line in curves] == ["c: a vs b (AUC 0.700)", "plain"]
    np.testing.assert_array_equal(curves[0].get_xdata(), fitted.fpr_)
    np.testing.assert_array_equal(curves[1].get_ydata(), [0.0, 0.5, 1.0])
    assert ax.get_title() == "given"
    ds = xr.Dataset({"mmdtv_mmd2": ("pair", [0.1, 0.2])})
    fig = plot_figure3(ds, rocs, [0.0, 0.01])
    assert len(fig.axes[1].get_legend().get_texts()) == 2


def test_plot_rocs_refuses_the_old_call_with_a_dataset() -> None:
    from idaudit.plotting import plot_rocs

    with pytest.raises(TypeError, match="median_auc_rocs makes one from a result"):
        plot_rocs(xr.Dataset({"rocht_auc": ("pair", [0.5])}))


def test_strength_certificates_and_contact_sheet() -> None:
    import pandas as pd

    from idaudit.plotting import contact_sheet, plot_certificates, plot_strength

    table = pd.DataFrame(
        {
            "method": ["blur", "blur", "swap", "swap"],
            "strength": [1.0, 3.0, 0.25, 0.75],
            "mmdtv_median": [0.9, 0.8, 0.7, 0.1],
        }
    )
    fig = plot_strength(table, baseline={"mmdtv_median": 0.95})
    assert [ax.get_title() for ax in fig.axes] == ["blur", "swap"]
    certs = {"x": xr.Dataset({"epsilon_lb": ("pair", [0.0, 0.4])})}
    assert isinstance(plot_certificates(certs), Figure)
    images = [np.zeros((8, 8, 3), np.uint8), np.full((8, 8, 3), 255, np.uint8)]
    sheet = contact_sheet(images, ["a", "b"])
    assert [ax.get_title() for ax in sheet.axes] == ["a", "b"]
    with pytest.raises(ValueError, match="must name each of the images"):
        contact_sheet(images, ["a"])


def test_accessor_plots_epsilon_against_strength() -> None:
    ds, _ = _conditions()
    ds = ds.assign_coords(method=("condition", ["blur", "blur"]), strength=("condition", [1, 2]))
    fig = ds.idaudit.plot_epsilon()
    assert [ax.get_title() for ax in fig.axes] == ["blur"]
    with pytest.raises(ValueError, match="'method' and 'strength'"):
        ds.drop_vars("method").idaudit.plot_epsilon()


def _drawn(fig: Figure) -> Figure:
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    FigureCanvasAgg(fig).draw()
    return fig


def _data_extents(ax: object) -> list[object]:
    """Display-space bounding boxes of the finite points of every line of ``ax``."""
    from matplotlib.transforms import Bbox

    boxes = []
    for line in ax.get_lines():  # type: ignore[attr-defined]
        xy = line.get_transform().transform(np.asarray(line.get_xydata(), dtype=float))
        xy = xy[np.isfinite(xy).all(axis=1)]
        if len(xy):
            boxes.append(Bbox([xy.min(axis=0), xy.max(axis=0)]))
    return boxes


def _legend_clear_of_data(fig: Figure, legend: object) -> None:
    """Assert that ``legend`` overlaps neither the data lines nor the panels of ``fig``."""
    box = legend.get_window_extent()  # type: ignore[attr-defined]
    for ax in fig.axes:
        assert not box.overlaps(ax.get_window_extent()), ax.get_title()
        for extent in _data_extents(ax):
            assert not box.overlaps(extent), ax.get_title()


def _strength_table() -> object:
    import pandas as pd

    return pd.DataFrame(
        {
            "method": ["blur", "blur", "swap", "swap"],
            "strength": [1.0, 3.0, 0.25, 0.75],
            "eps": [0.9, 0.95, 0.7, 0.1],
            "cert": [1.75, 1.75, 1.75, 0.8],
            "ceiling": [1.75, 1.75, 1.75, 1.75],
            "auc": [1.0, 1.0, 0.99, 0.7],
            "top1": [0.9, 0.3, 0.8, 0.1],
        }
    )


def test_strength_puts_epsilon_and_rates_on_separate_axes_with_chance_and_ceiling() -> None:
    from idaudit.plotting import plot_strength

    fig = _drawn(
        plot_strength(
            _strength_table(),
            columns={"eps": "MMD-TV", "cert": "certified"},
            rates={"auc": "AUC", "top1": "top-1"},
            chance={"top1": (1 / 6, "chance of top-1 identification (1/6)")},
            ceilings={"cert": "ceiling"},
            baseline={"eps": 0.93, "top1": 1.0},
        )
    )
    assert len(fig.axes) == 4  # (ε, rates) x (blur, swap)
    eps_axes, rate_axes = fig.axes[:2], fig.axes[2:]
    # ε from 0.1 to 1.75, a factor 17.5: a linear axis (a symmetric-log one would squeeze
    # every value into its top fifth)
    assert {ax.get_yscale() for ax in eps_axes} == {"linear"}
    # no anonymisation sits at strength 0, on its own x, not under the series
    base = [
        line
        for line in eps_axes[0].get_lines()
        if line.get_label() == "no anonymisation (at strength 0)"
    ]
    assert [(line.get_xdata()[0], line.get_ydata()[0]) for line in base] == [(0.0, 0.93)]
    assert eps_axes[0].get_ylabel().startswith("ε")
    assert rate_axes[0].get_ylabel().startswith("rate or AUC")
    for ax in rate_axes:
        assert ax.get_ylim() == (0.0, 1.02)
        labels = [line.get_label() for line in ax.get_lines()]
        assert labels.count("AUC") == labels.count("top-1") == 1
        assert "MMD-TV" not in labels
        assert "certified" not in labels
        chance = [line for line in ax.get_lines() if line.get_label().startswith("chance")]
        assert len(chance) == 1
        np.testing.assert_allclose(chance[0].get_ydata(), [1 / 6, 1 / 6])
    # the ceiling is drawn, and only the values at it are ringed (3 of 4 points)
    rings = [
        line for ax in eps_axes for line in ax.get_lines() if line.get_label().endswith("ceiling")
    ]
    assert sum(len(line.get_xdata()) for line in rings) == 3
    assert [ax.get_title() for ax in eps_axes] == ["blur", "swap"]
    (legend,) = fig.legends
    assert "ceiling" in legend.get_title().get_text()
    texts = [t.get_text() for t in legend.get_texts()]
    assert "chance of top-1 identification (1/6)" in texts
    assert len(texts) == len(set(texts))  # one entry per line, not one per panel
    _legend_clear_of_data(fig, legend)


def test_strength_without_rates_keeps_one_row() -> None:
    from idaudit.plotting import plot_strength

    fig = _drawn(plot_strength(_strength_table()[["method", "strength", "eps"]]))
    assert len(fig.axes) == 2
    assert all(ax.get_yscale() == "linear" for ax in fig.axes)
    (legend,) = fig.legends
    _legend_clear_of_data(fig, legend)
    # values over four decades: a symmetric-log axis whose linear part ends at the smallest
    wide = _strength_table()[["method", "strength", "eps"]].assign(eps=[300.0, 20.0, 1.0, 0.03])
    ax = _drawn(plot_strength(wide)).axes[0]
    assert ax.get_yscale() == "symlog"
    assert ax.yaxis.get_transform().linthresh == pytest.approx(0.01)


def test_noise_sweep_legend_is_off_the_data() -> None:
    fig = _drawn(plot_noise_sweep(_sweep(), title="demo"))
    ax_eps, _ = fig.axes
    legend = ax_eps.get_legend()
    assert legend is not None
    _legend_clear_of_data(fig, legend)
    assert not plot_noise_sweep(_sweep(), legend=False).axes[0].get_legend()


def test_figure3_says_it_pools_the_conditions_and_keeps_legends_off_the_curves() -> None:
    from idaudit.audits import median_auc_rocs
    from idaudit.plotting import plot_figure3

    ds, sets = _conditions()
    fig = _drawn(
        plot_figure3(ds, median_auc_rocs(ds, sets), np.random.default_rng(0).normal(0, 0.01, 30))
    )
    ax_mmd, ax_roc = fig.axes
    assert "pooled over all 2 conditions" in ax_mmd.get_title()
    assert ax_roc.get_xlabel() == "false-positive rate"
    # the chance diagonal and one curve per condition
    assert len(ax_roc.get_lines()) == 4
    for ax in (ax_mmd, ax_roc):
        _legend_clear_of_data(fig, ax.get_legend())
    one = plot_figure3(ds.isel(condition=[0]), median_auc_rocs(ds, sets), [0.0, 0.01])
    assert "one condition" in one.axes[0].get_title()


def test_plot_tradeoff_draws_the_lower_hull_of_the_certified_points() -> None:
    from scipy.spatial import ConvexHull

    from idaudit.certify import certify_scores
    from idaudit.dp import gdp_tradeoff
    from idaudit.plotting import plot_tradeoff

    gen = np.random.default_rng(3)
    cert = certify_scores(gen.normal(0, 1, 400), gen.normal(1.5, 1, 400), thresholds="band")
    fig = plot_tradeoff(cert, truth=lambda x: gdp_tradeoff(x, 1.5), truth_label="1.5-GDP")
    ax = fig.axes[0]
    lines = {line.get_label(): line for line in ax.get_lines()}
    assert set(lines) >= {"perfect privacy (1 − x)", "certified points", "1.5-GDP"}
    hull_line = next(v for k, v in lines.items() if k.startswith("certified (band"))
    hx, hy = (np.asarray(v, dtype=float) for v in hull_line.get_data())
    # scipy's hull of the same points: its vertices on or below the chord (0, 1)-(1, 0)
    pts = np.c_[np.r_[0.0, cert.fpr_upper, 1.0], np.r_[1.0, cert.fnr_upper, 0.0]]
    ref = pts[ConvexHull(pts).vertices]
    lower = ref[ref[:, 1] <= 1.0 - ref[:, 0] + 1e-12]
    np.testing.assert_allclose(np.sort(hx), np.sort(lower[:, 0]))
    assert np.all(np.diff(hx) > 0)
    assert np.all(np.diff(hy) <= 0)
    # the certified curve lies above the true 1.5-GDP curve (a 95 % event, seeded here)
    assert np.all(
        np.interp(np.linspace(0, 1, 201), hx, hy)
        >= gdp_tradeoff(np.linspace(0, 1, 201), 1.5) - 1e-12
    )


def test_plot_tradeoff_draws_no_joint_curve_through_per_split_points() -> None:
    # "multisplit" points hold one split at a time (n_simultaneous = 1): their hull is no
    # certified curve, so none is drawn and the points say what they are
    from idaudit.certify import certify_scores
    from idaudit.plotting import plot_tradeoff

    gen = np.random.default_rng(4)
    a, b = gen.normal(0, 1, 300), gen.normal(1.0, 1, 300)
    cert = certify_scores(a, b, alpha=0.2, thresholds="multisplit", n_splits=8, rng=0)
    ax = plot_tradeoff(cert).axes[0]
    labels = [line.get_label() for line in ax.get_lines()]
    assert not [label for label in labels if label.startswith("certified")]
    (points,) = [ln for ln in ax.get_lines() if "per split, not joint" in ln.get_label()]
    assert "1 − α/2 = 0.9" in points.get_label()
    px, py = (np.asarray(v, dtype=float) for v in points.get_data())
    np.testing.assert_array_equal(px, cert.fpr_upper)
    np.testing.assert_array_equal(py, cert.fnr_upper)
    assert len(labels) == 2  # the diagonal and the points

def test_plot_epsilon_curve_marks_upper_bound_truths() -> None:
    from idaudit.plotting import plot_epsilon_curve

    delta = np.array([0.0, 1e-5, 1e-3])
    ds = xr.Dataset(
        {
            "certified_epsilon_curve": (("scale", "delta"), [[0.8, 0.7, 0.6], [0.2, 0.1, 0.0]]),
            "true_epsilon_curve": (("scale", "delta"), [[1.0, 1.0, 1.0], [np.inf, 0.5, 0.3]]),
            "true_epsilon_curve_exact": (
                ("scale", "delta"),
                [[True, False, False], [True, True, True]],
            ),
        },
        coords={"scale": [1.0, 2.0], "delta": delta},
    )
    fig = plot_epsilon_curve(ds, title="t")
    one, two = fig.axes  # one panel per scale: no curve hides another
    assert [ax.get_title() for ax in fig.axes] == ["scale 1", "scale 2"]
    assert one.get_xscale() == "symlog"
    for ax in fig.axes:
        labels = [line.get_label() for line in ax.get_lines()]
        assert "certified ε(δ), largest (certified lower bound)" in labels
        assert "true ε(δ) of the certified pairs (reference)" in labels
        cert = next(ln for ln in ax.get_lines() if ln.get_label().startswith("certified"))
        truth = next(ln for ln in ax.get_lines() if ln.get_label().startswith("true ε(δ) of"))
        assert cert.get_color() != truth.get_color()  # the truth is told apart from the bound
    hollow = [ln for ln in one.get_lines() if ln.get_markerfacecolor() == "none"]
    assert [len(ln.get_xdata()) for ln in hollow] == [2]  # scale 1's two upper bounds
    # scale 2's infinite truth at δ = 0 is a marker at the top with an ∞, not a curve point
    truth2 = next(ln for ln in two.get_lines() if ln.get_label().startswith("true ε(δ) of"))
    assert list(truth2.get_xdata()) == [1e-5, 1e-3]
    (inf,) = [ln for ln in two.get_lines() if ln.get_label() == "true ε(δ) = +∞"]
    assert list(inf.get_xdata()) == [0.0]
    assert [t.get_text() for t in two.texts] == ["∞"]
    assert not one.texts
    # ε from 0 to 1: a linear axis
    assert {ax.get_yscale() for ax in fig.axes} == {"linear"}
    with pytest.raises(KeyError, match="certified_epsilon_curve"):
        plot_epsilon_curve(ds.drop_vars("certified_epsilon_curve"))


# ------------------------------------------------------------ seed 003's two figures


def _flagging_frames():
    import pandas as pd

    ps = [1.0, 2.0, 5.0, 10.0, 20.0]
    pooled, cohorts = [], []
    for metric, axis in (("dlib", "identity"), ("arcface", "identity"), ("ssim", "appearance")):
        for p in ps:
            pooled.append({"metric": metric, "axis": axis, "percentile": p,
                           "synthetic_pct": 1.2 * p, "heldout_pct": p, "ci_lower": 0.5 * p,
                           "ci_upper": min(2.0 * p, 30.0)})  # fmt: skip
            for cohort, factor in (("a", 4.0), ("b", 0.5)):  # a memorises
                cohorts.append({**pooled[-1], "cohort": cohort, "synthetic_pct": factor * p,
                                "ci_lower": 0.5 * factor * p,
                                "ci_upper": 1.5 * factor * p})  # fmt: skip
    return pd.DataFrame(pooled), pd.DataFrame(cohorts)


def test_plot_flagging_follows_the_data_and_gives_each_cohort_a_row() -> None:
    from idaudit.plotting import plot_flagging

    pooled, cohorts = _flagging_frames()
    fig = plot_flagging(pooled, cohorts)
    axes = [ax for ax in fig.axes if ax.get_title()]
    # pooled + 2 cohorts, identity and appearance: 6 panels, titled
    assert len(axes) == 6
    assert {ax.get_title() for ax in axes} >= {"pooled, identity axis", "cohort a, appearance axis"}
    for ax in axes:
        lo, hi = ax.get_xlim()
        assert 0.5 <= lo < 1.0
        assert 20.0 < hi <= 40.0
        # every interval inside the y range (nothing cut), and no range far above the data
        top = max(line.get_ydata().max() for line in ax.get_lines() if len(line.get_ydata()))
        assert ax.get_ylim()[1] >= top - 1e-9 or top > ax.get_ylim()[1]  # the diagonal may run out
    a_ident = next(ax for ax in axes if ax.get_title() == "cohort a, identity axis")
    assert a_ident.get_ylim()[1] >= 120.0  # cohort a: 4 × 20 % with its upper bound 1.5×
    assert a_ident.get_ylim()[1] <= 1.1 * 120.0
    # the diagonal is labelled, in the legend and on the panel
    assert any(line.get_label() == "rate = p" for line in a_ident.get_lines())
    assert any(t.get_text() == "rate = p" for t in a_ident.texts)
    assert any("rate = p" in t.get_text() for t in fig.legends[0].get_texts())
    # series side by side: every x at p = 1 lies below every x at p = 2, and none coincide
    xs = np.concatenate(
        [ln.get_xdata() for ln in a_ident.get_lines() if ln.get_label() != "rate = p"]
    )
    near1, near2 = xs[xs < 1.5], xs[(xs > 1.5) & (xs < 3.0)]
    assert len(np.unique(near1)) == 4
    assert len(np.unique(near2)) == 4
    assert near1.max() * 1.15 < near2.min()  # a clear gap between the two groups
    # one cohort: no per-cohort rows
    assert len([ax for ax in plot_flagging(pooled, cohorts[cohorts.cohort == "a"]).axes
                if ax.get_title()]) == 2  # fmt: skip


def _nnaa_frame():
    import pandas as pd

    rows = []
    for cohort, loss, p, lo, hi in (
        ("pooled", 0.08, 0.21, -0.05, 0.21),
        ("a", 0.49, 0.002, 0.33, 0.64),
        ("b", -0.02, 0.6, np.nan, np.nan),
    ):
        rows.append({"metric": "dlib", "cohort": cohort, "privacy_loss": loss, "ci_lower": lo,
                     "ci_upper": hi, "p_value": p,
                     "aa_train_synth": 0.0 if cohort == "b" else 0.6,
                     "aa_heldout_synth": 0.6 + loss,
                     "aa_train_synth_ci_lower": -0.05, "aa_train_synth_ci_upper": 0.7,
                     "aa_heldout_synth_ci_lower": 0.5,
                     "aa_heldout_synth_ci_upper": 1.08})  # fmt: skip
    return pd.DataFrame(rows)


def test_plot_nnaa_shows_the_loss_its_interval_zero_and_every_row() -> None:
    from matplotlib.collections import LineCollection

    from idaudit.plotting import plot_nnaa

    fig = plot_nnaa(_nnaa_frame())
    loss_ax, aa_ax = (ax for ax in fig.axes if ax.get_title())
    assert loss_ax.get_title() == "privacy loss with its interval"
    # a zero line, and a range that holds 0 and every interval end
    assert any(np.allclose(ln.get_xdata(), 0.0) for ln in loss_ax.get_lines())
    lo, hi = loss_ax.get_xlim()
    assert lo < -0.05
    assert hi > 0.64
    assert lo > -0.2
    assert hi < 0.8
    # the interval bars of the two rows that have one
    segments = [s for c in loss_ax.collections if isinstance(c, LineCollection)
                for s in c.get_segments()]  # fmt: skip
    assert sorted(round(float(s[0][0]), 2) for s in segments) == [-0.05, 0.33]
    labels = [t.get_text() for t in loss_ax.get_yticklabels()]
    assert labels == ["dlib · pooled\np = 0.21", "dlib · a\np = 0.002", "dlib · b\np = 0.6"]
    # the memorising row in red, the others not
    red = [ln for ln in loss_ax.get_lines() if ln.get_color() == "C3" and ln.get_marker() == "o"]
    assert [float(np.asarray(ln.get_xdata())[0]) for ln in red] == [0.49]
    # AA: an interval beyond 1 and below 0 is shown whole; a zero bar still has its tick
    a_lo, a_hi = aa_ax.get_xlim()
    assert a_lo < -0.05
    assert a_hi > 1.08
    ticks = [ln for ln in aa_ax.get_lines() if ln.get_marker() == "|"]
    assert any(np.any(np.asarray(ln.get_xdata()) == 0.0) for ln in ticks)
    # the legend sits outside both panels
    assert len(fig.legends) == 1
    assert not loss_ax.get_legend()
    assert not aa_ax.get_legend()


def test_coinciding_roc_curves_stay_distinguishable() -> None:
    # two perfect separations draw the same curve: the second is drawn narrower and dashed
    # on top of the first, and its legend entry says the curves coincide
    from idaudit.plotting import plot_rocs

    perfect = ([0.0, 0.0, 1.0], [0.0, 1.0, 1.0])
    ax = plot_rocs({"a": perfect, "b": perfect, "c": ([0.0, 0.5, 1.0], [0.0, 0.8, 1.0])}).axes[0]
    curves = [line for line in ax.get_lines() if not line.get_label().startswith("_")]
    assert [line.get_label() for line in curves] == ["a", "b — same curve as a", "c"]
    # a fourth equal curve names only the first it equals, by its condition, not its pair
    ax = plot_rocs({"A: p0 vs p1": perfect, "B: p2 vs p3": perfect, "C: p4 vs p5": perfect}).axes[0]
    labels = [line.get_label() for line in ax.get_lines() if not line.get_label().startswith("_")]
    assert labels[2] == "C: p4 vs p5 — same curve as A"
    assert curves[0].get_linewidth() > curves[1].get_linewidth()
    assert curves[0].get_linestyle() != curves[1].get_linestyle()
    assert curves[0].get_marker() != curves[1].get_marker()
    assert curves[1].get_zorder() > curves[0].get_zorder()


def test_plot_nnaa_tells_no_verdict_from_no_evidence() -> None:
    from idaudit.plotting import plot_nnaa

    frame = _nnaa_frame()
    # pooled: a test that can reject and does not; a: detected; b: 2 + 2 units, so the test
    # cannot go below 1/6; and a fourth row with no test at all
    frame["smallest_p_value"] = [1e-4, 1e-4, 1 / 6]
    extra = {**frame.iloc[2].to_dict(), "cohort": "c", "privacy_loss": 0.3, "p_value": np.nan}
    frame.loc[len(frame)] = extra
    fig = plot_nnaa(frame)
    loss_ax = next(ax for ax in fig.axes if ax.get_title())
    legend = [t.get_text() for t in fig.legends[0].get_texts()]
    assert "no evidence of memorisation" in legend
    assert "no verdict: no test, or smallest attainable p > 0.05" in legend

    def losses(colour: str) -> list[float]:
        return sorted(
            round(float(x), 2)
            for ln in loss_ax.get_lines()
            if ln.get_color() == colour and ln.get_marker() == "o"
            for x in np.asarray(ln.get_xdata())
        )

    assert losses("C7") == [-0.02, 0.3]  # the test that cannot reject, and no test
    assert losses("C3") == [0.49]
    # the row with power but no rejection: its interval bar is blue (errorbar's line)
    assert losses("C0") == [0.08]


def _pure_route_sweep(mechanism: str) -> xr.Dataset:
    """Four pairs (an even count: the median is the mean of the middle two), a pure-ε route
    far above a falling truth, a certificate and its ceiling."""
    scale = np.array([0.1, 1.0, 10.0])
    kdelr = np.array([[100.0, 200.0, 300.0, 1000.0]] * 3)
    return xr.Dataset(
        {
            "kdelr_epsilon": (("scale", "pair"), kdelr, {"status": "diagnostic"}),
            "certified_epsilon": (
                ("scale", "pair"),
                [[1.5, 1.5, np.nan, np.nan], [1.0, 0.5, np.nan, np.nan], [0.0] * 2 + [np.nan] * 2],
                {"status": "certified_lower_bound", "n_simultaneous": 2},
            ),
            "certified_ceiling": ("scale", [1.5, 1.5, 1.5], {"status": "descriptive"}),
            "true_epsilon": (("scale", "pair"), 10 / scale[:, None] * np.ones((3, 4))),
        },
        coords={"scale": scale},
        attrs={"mechanism": mechanism},
    )


@pytest.mark.parametrize("mechanism", ["gaussian", "laplace"])
def test_noise_sweep_shows_the_ceiling_the_reports_median_and_no_ratio_to_an_infinite_truth(
    mechanism: str,
) -> None:
    ax = plot_noise_sweep(_pure_route_sweep(mechanism)).axes[0]
    lines = {line.get_label(): line for line in ax.get_lines()}
    top = lines["certificate ceiling (what zero test errors certify)"]
    assert top.get_linestyle() == ":"
    np.testing.assert_array_equal(top.get_ydata(), [1.5, 1.5, 1.5])
    # the median the reports give: numpy's (200 + 300) / 2, not the lower order statistic
    np.testing.assert_array_equal(lines["KDE-LR (diagnostic)"].get_ydata(), [250.0] * 3)
    said = [t.get_text() for t in ax.texts if "does not track" in t.get_text()]
    if mechanism == "gaussian":  # KDE-LR's pure-ε truth is +∞: no ratio to ε(δ) is said
        assert said == []
    else:  # 250 against a truth of 1 at the largest scale
        assert said == ["does not track the truth: 250× it here, flat"]


def test_plot_epsilon_curve_shows_the_ceiling_at_the_certifiers_delta() -> None:
    from idaudit.plotting import plot_epsilon_curve

    ds = xr.Dataset(
        {
            "certified_epsilon_curve": (("scale", "delta"), [[1.7, 1.7, 1.6], [0.0, 0.0, 0.0]]),
            "true_epsilon_curve": (("scale", "delta"), [[9.0, 8.0, 7.0], [0.5, 0.4, 0.3]]),
            "certified_ceiling": ("scale", [1.75, 1.75]),
            "reference_delta": ((), 1e-5),
        },
        coords={"scale": [1.0, 2.0], "delta": [0.0, 1e-5, 1e-3]},
    )
    label = "ceiling at the certifier's δ (what zero test errors certify)"
    for ax in plot_epsilon_curve(ds).axes:
        (bar,) = [ln for ln in ax.get_lines() if ln.get_label() == label]
        assert list(bar.get_xdata()) == [1e-5]
        assert list(bar.get_ydata()) == [1.75]
        assert ax.get_ylim()[1] >= 1.75  # in view where the certificate is far below it
    # without the certifier's δ, nothing is drawn where it is not known
    bare = plot_epsilon_curve(ds.drop_vars("reference_delta")).axes[0]
    assert label not in [ln.get_label() for ln in bare.get_lines()]
