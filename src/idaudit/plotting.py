"""Matplotlib figures for idaudit results.

Every function draws on a :class:`matplotlib.figure.Figure` it creates itself (no ``pyplot``,
no global state, works without a display) or on the axes it is given, and returns the figure.
Save it with ``fig.savefig(path)``.

=========================  ==============================================================
:func:`plot_noise_sweep`   each audit's ε (median and interquartile range) against the noise
                           scale of a :func:`idaudit.benchmark.noise_sweep`, with the truth
:func:`plot_certified_routes`  the largest certified ε of each certified route against the
                           scale of a noise sweep, with the largest true ε
:func:`plot_roc`           an out-of-fold ROC curve (seed 000, Figure 3 right)
:func:`plot_mmd_null`      same-identity (H0) vs cross-identity (H1) MMD² (Figure 3 left)
=========================  ==============================================================
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, cast

import numpy as np
import numpy.typing as npt

if TYPE_CHECKING:
    import xarray as xr
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

__all__ = ["plot_certified_routes", "plot_mmd_null", "plot_noise_sweep", "plot_roc"]

# one fixed colour per route, so figures are comparable
_COLOURS = {
    "gaussmech": "#1b9e77",
    "kdelr": "#d95f02",
    "mmdtv": "#7570b3",
    "mmdtv_hs": "#a6a1d8",
    "rocht": "#e7298a",
    "certified": "#000000",
}
_NAMES = {
    "gaussmech": "GaussMech",
    "kdelr": "KDE-LR",
    "mmdtv": "MMD-TV",
    "mmdtv_hs": "MMD hockey-stick",
    "rocht": "ROC-HT OOF",
    "certified": "reserved-test certificate",
}


def _new_axes(nrows: int = 1, ncols: int = 1, **kwargs: Any) -> tuple[Figure, Any]:
    from matplotlib.figure import Figure

    fig = Figure(figsize=kwargs.pop("figsize", (6.4, 4.8)), layout="constrained")
    return fig, fig.subplots(nrows, ncols, squeeze=False, **kwargs)


def _figure_of(ax: Axes) -> Figure:
    """Return the root figure of ``ax`` (a SubFigure's ``figure`` is its root)."""
    fig = ax.figure
    return cast("Figure", getattr(fig, "figure", fig))


def _quantiles(values: npt.NDArray[np.float64], axis: int) -> npt.NDArray[np.float64]:
    """25th, 50th and 75th percentiles, ignoring NaN, keeping inf (no interpolation)."""
    out: npt.NDArray[np.float64] = np.nanquantile(
        values, [0.25, 0.5, 0.75], axis=axis, method="inverted_cdf"
    )
    return out


def plot_noise_sweep(
    ds: xr.Dataset,
    *,
    methods: Sequence[str] | None = None,
    axes: Sequence[Axes] | None = None,
    title: str | None = None,
) -> Figure:
    """Each audit's ε against the noise scale, with the mechanism's guarantee.

    Parameters
    ----------
    ds : xarray.Dataset
        A :func:`idaudit.benchmark.noise_sweep` result (dims ``scale``, ``pair``).
    methods : sequence of str, optional
        Variables to draw (default: every ``<label>_epsilon`` over ``(scale, pair)`` plus
        ``certified_epsilon``).
    axes : sequence of two matplotlib Axes, optional
        Where to draw ε (first) and the ROC AUC (second; skipped without ``rocht_auc``).
        Default: a new figure with both.
    title : str, optional
        Title of the ε panel.

    Returns
    -------
    matplotlib.figure.Figure

    Notes
    -----
    Lines are medians over the audited pairs, bands the interquartile range; an infinite
    median (ROC-HT at the endpoints) is drawn as a triangle at the top edge. The solid black
    line is the median of the pairs' true ε (``true_epsilon``), the dashed one the
    mechanism-wide guarantee (``reference_epsilon``). The ε axis is symmetric-log, so zero
    (a certificate that certifies nothing) stays visible.
    """
    from matplotlib import transforms

    scale = np.asarray(ds["scale"].values, dtype=np.float64)
    if axes is None:
        fig, grid = _new_axes(2, 1, figsize=(6.4, 6.4), sharex=True, height_ratios=[3, 1])
        ax_eps, ax_auc = grid[0, 0], grid[1, 0]
    else:
        ax_eps = axes[0]
        ax_auc = axes[1] if len(axes) > 1 else None
        fig = _figure_of(ax_eps)
    if methods is None:
        methods = [
            str(v)
            for v in ds.data_vars
            if str(v).endswith("_epsilon")
            and set(ds[v].dims) == {"scale", "pair"}
            and str(v) != "true_epsilon"
        ]
    top = transforms.blended_transform_factory(ax_eps.transData, ax_eps.transAxes)
    for name in methods:
        values = np.asarray(ds[name].transpose("scale", "pair").values, dtype=np.float64)
        q1, med, q3 = _quantiles(values, axis=1)
        key = name.replace("_epsilon", "")
        family = key.split("_")[0]
        colour = _COLOURS.get(key, _COLOURS.get(family))
        status = str(ds[name].attrs.get("status", "")).replace("_", " ")
        label = f"{_NAMES.get(key, _NAMES.get(family, key))} ({status})" if status else key
        finite = np.isfinite(med)
        (line,) = ax_eps.plot(
            scale[finite], med[finite], marker="o", ms=3, color=colour, label=label
        )
        band = np.isfinite(q1) & np.isfinite(q3)
        ax_eps.fill_between(scale[band], q1[band], q3[band], color=line.get_color(), alpha=0.15)
        if (~finite).any():
            ax_eps.plot(
                scale[~finite],
                np.full((~finite).sum(), 0.97),
                marker="^",
                ls="none",
                color=line.get_color(),
                transform=top,
                clip_on=False,
            )
    if "true_epsilon" in ds:
        truth = np.asarray(ds["true_epsilon"].transpose("scale", "pair").values, dtype=np.float64)
        ax_eps.plot(scale, np.nanmedian(truth, axis=1), color="k", lw=2, label="true ε (median)")
    if "reference_epsilon" in ds:
        ax_eps.plot(
            scale,
            np.asarray(ds["reference_epsilon"].values, dtype=np.float64),
            color="k",
            ls="--",
            lw=1,
            label="mechanism-wide guarantee",
        )
    ax_eps.set_xscale("log")
    ax_eps.set_yscale("symlog", linthresh=0.1)
    ax_eps.set_ylim(bottom=0.0)
    ax_eps.set_ylabel("ε (▲ = infinite median)")
    ax_eps.grid(True, which="major", alpha=0.3)
    ax_eps.legend(fontsize="small", loc="lower left")
    if title is not None:
        ax_eps.set_title(title)
    x_label = str(ds.attrs.get("scale_name", "noise scale"))
    if ax_auc is not None and "rocht_auc" in ds:
        auc = np.asarray(ds["rocht_auc"].transpose("scale", "pair").values, dtype=np.float64)
        q1, med, q3 = _quantiles(auc, axis=1)
        ax_auc.plot(scale, med, marker="o", ms=3, color=_COLOURS["rocht"])
        ax_auc.fill_between(scale, q1, q3, color=_COLOURS["rocht"], alpha=0.15)
        ax_auc.axhline(0.5, color="grey", lw=0.8, ls=":")
        ax_auc.set_xscale("log")
        ax_auc.set_ylim(0.45, 1.02)
        ax_auc.set_ylabel("ROC AUC (OOF)")
        ax_auc.set_xlabel(x_label)
        ax_auc.grid(True, alpha=0.3)
    else:
        ax_eps.set_xlabel(x_label)
    return fig


def plot_certified_routes(
    ds: xr.Dataset, *, ax: Axes | None = None, title: str | None = None
) -> Figure:
    """Draw the largest certified ε of every certified route against the noise scale.

    Parameters
    ----------
    ds : xarray.Dataset
        A :func:`idaudit.benchmark.noise_sweep` result. Every ε variable (name containing
        ``epsilon``) whose ``status`` is ``certified_lower_bound`` is drawn: per-pair ones
        (``(scale, pair)``, e.g. ``mmdtv_epsilon_hs_lb`` of ``MMDTVAuditor(confidence=...)``) as
        their maximum over the pairs, per-scale ones (``certified_epsilon_max``,
        ``sequential_epsilon_max``) as they are; a per-pair variable whose ``<name>_max`` is
        present is skipped.
    ax : matplotlib Axes, optional
        Where to draw (default: a new figure).
    title : str, optional

    Returns
    -------
    matplotlib.figure.Figure

    Notes
    -----
    The black line is the largest true ε over the audited pairs; no certified route may lie
    above it except on its α-probability event (each route certifies every pair below that
    pair's own truth, so its maximum is below the largest truth). A maximum over pairs is a
    valid certificate only when the route's confidence covers all pairs jointly
    (``n_simultaneous`` = number of pairs for MMD-TV; the reserved-test and sequential
    certifiers do this by construction).
    """
    scale = np.asarray(ds["scale"].values, dtype=np.float64)
    if ax is None:
        fig, grid = _new_axes(1, 1)
        ax = grid[0, 0]
    else:
        fig = _figure_of(ax)
    names = [
        str(v)
        for v in ds.data_vars
        if ds[v].attrs.get("status") == "certified_lower_bound"
        and "epsilon" in str(v)  # not the certified MMD itself (mmd_lb)
        and ds[v].dims in (("scale",), ("scale", "pair"))
        and not (ds[v].dims == ("scale", "pair") and f"{v}_max" in ds)
    ]
    for name in names:
        values = np.asarray(ds[name].values, dtype=np.float64)
        if values.ndim == 2:
            values = np.nanmax(values, axis=1)
        ax.plot(scale, values, marker="o", ms=3, label=_route_name(name, ds[name]))
    if "true_epsilon" in ds:
        truth = np.asarray(ds["true_epsilon"].transpose("scale", "pair").values, dtype=np.float64)
        ax.plot(scale, truth.max(axis=1), color="k", lw=2, label="true ε (largest over pairs)")
    from matplotlib.ticker import NullFormatter

    ax.set_xscale("log")
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.set_yscale("symlog", linthresh=0.1)
    ax.set_ylim(bottom=0.0)
    ax.set_xlabel(str(ds.attrs.get("scale_name", "noise scale")))
    ax.set_ylabel("largest certified ε (certified lower bound)")
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(fontsize="small", loc="lower left")
    if title is not None:
        ax.set_title(title)
    return fig


def _route_name(name: str, var: Any) -> str:
    """Short legend entry of a certified ε variable (its long_name when unknown)."""
    if name == "certified_epsilon_max":
        return "reserved-test ROC certificate"
    if name == "sequential_epsilon_max":
        return "sequential certificate"
    if name.endswith("_epsilon_hs_lb"):
        return "certified MMD, hockey-stick map"
    if name.endswith("_epsilon_lb"):
        return "certified MMD-TV (Eq. 14)"
    return str(var.attrs.get("long_name", name))


def plot_roc(
    fpr: npt.ArrayLike,
    tpr: npt.ArrayLike,
    *,
    label: str | None = None,
    ax: Axes | None = None,
) -> Figure:
    """Draw one ROC curve with the chance diagonal.

    Parameters
    ----------
    fpr, tpr : array_like, shape (n_points,)
        Operating points, e.g. ``ROCHTAuditor().fit(a, b).fpr_`` and ``.tpr_``.
    label : str, optional
        Legend entry.
    ax : matplotlib Axes, optional
        Where to draw (default: a new figure).

    Returns
    -------
    matplotlib.figure.Figure
    """
    if ax is None:
        fig, grid = _new_axes(figsize=(4.0, 4.0))
        ax = grid[0, 0]
    else:
        fig = _figure_of(ax)
    ax.plot(
        np.asarray(fpr, dtype=float),
        np.asarray(tpr, dtype=float),
        label=label,
    )  # straight segments between operating points: tied scores give diagonal segments
    ax.plot([0, 1], [0, 1], color="grey", lw=0.8, ls=":")
    ax.set_xlim(-0.01, 1.01)
    ax.set_ylim(-0.01, 1.01)
    ax.set_aspect("equal")
    ax.set_xlabel("false-positive rate")
    ax.set_ylabel("true-positive rate")
    if label is not None:
        ax.legend(fontsize="small", loc="lower right")
    return fig


def plot_mmd_null(
    h0: npt.ArrayLike,
    h1: npt.ArrayLike,
    *,
    bins: int = 40,
    ax: Axes | None = None,
) -> Figure:
    """Histograms of same-identity (H0) and cross-identity (H1) unbiased MMD² values.

    Parameters
    ----------
    h0 : array_like, shape (n0,)
        Split-half MMD² values, e.g. ``sanity_controls(es)["mmd2"]``.
    h1 : array_like, shape (n1,)
        Cross-identity MMD² values, e.g. ``audit_pairs(...)["mmdtv_mmd2"]``.
    bins : int, default 40
        Number of histogram bins over the pooled range.
    ax : matplotlib Axes, optional
        Where to draw (default: a new figure).

    Returns
    -------
    matplotlib.figure.Figure
    """
    a = np.asarray(h0, dtype=float).ravel()
    b = np.asarray(h1, dtype=float).ravel()
    if ax is None:
        fig, grid = _new_axes(figsize=(5.0, 3.6))
        ax = grid[0, 0]
    else:
        fig = _figure_of(ax)
    edges = np.histogram_bin_edges(np.concatenate([a, b]), bins=bins).tolist()
    ax.hist(a, bins=edges, alpha=0.6, density=True, label=f"H0: same identity (n={a.size})")
    ax.hist(b, bins=edges, alpha=0.6, density=True, label=f"H1: different identities (n={b.size})")
    ax.axvline(0.0, color="grey", lw=0.8, ls=":")
    ax.set_xlabel("unbiased MMD²")
    ax.set_ylabel("density")
    ax.legend(fontsize="small")
    return fig
