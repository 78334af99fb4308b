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
                {"status": "certified_lower_bound"},
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
        {"status": "certified_lower_bound", "long_name": "MMD"},
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
