"""Figures of noise sweeps: each route's ε, the certified routes and ε(δ) against the noise."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from idaudit._results import reduction_attrs
from idaudit.exceptions import InvalidInputError
from idaudit.plotting._style import (
    _COLOURS,
    _GUARANTEE_COLOUR,
    _NAMES,
    _TRUTH,
    _by_scale,
    _epsilon_axis,
    _figure_of,
    _infinite,
    _legend_below,
    _legend_handles,
    _new_axes,
    _one_axes,
    _quantiles,
)

if TYPE_CHECKING:
    import xarray as xr
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure


def plot_noise_sweep(
    ds: xr.Dataset,
    *,
    methods: Sequence[str] | None = None,
    axes: Sequence[Axes] | None = None,
    title: str | None = None,
    legend: bool = True,
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
    legend : bool, default True
        Draw the legend, outside the ε panel on its right so that it covers no line or band
        (pass False to draw one legend for several panels, from
        ``axes[0].get_legend_handles_labels()``).

    Returns
    -------
    matplotlib.figure.Figure

    Notes
    -----
    Lines are medians over the audited pairs, bands the interquartile range; an infinite
    median (ROC-HT at the endpoints) is drawn as a ▲ with an ∞ at the top edge. The truth is
    black (solid: the median of the pairs' true ε, ``true_epsilon``; dashed: the
    mechanism-wide guarantee, ``reference_epsilon``), the certificate blue, its ceiling
    (``certified_ceiling``: what zero test errors certify) blue and dotted. A diagnostic
    (GaussMech, KDE-LR) that does not track the truth says so beside its line: its rank
    correlation with the true ε over the scales and its ratio to it at the largest scale.
    The ε axis is linear or symmetric-log, chosen from the data's range.
    """
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
    truth_median = (
        np.nanmedian(_by_scale(ds, "true_epsilon"), axis=1) if "true_epsilon" in ds else None
    )
    drawn: list[npt.NDArray[np.float64]] = []
    for name in methods:
        values = _by_scale(ds, name)
        q1, med, q3 = _quantiles(values, axis=1)
        key = name.replace("_epsilon", "")
        family = key.split("_")[0]
        colour = _COLOURS.get(key, _COLOURS.get(family))
        # a median over the pairs: certified only if their bounds hold jointly
        status = ""
        if "status" in ds[name].attrs:
            n_values = max(int(np.isfinite(values).sum(axis=1).max()), 1)  # NaN: not audited
            reduced = reduction_attrs(ds[name].attrs, n_values)
            status = str(reduced["status"]).replace("_", " ")
        label = f"{_NAMES.get(key, _NAMES.get(family, key))} ({status})" if status else key
        finite = np.isfinite(med)
        (line,) = ax_eps.plot(
            scale[finite], med[finite], marker="o", ms=3, color=colour, label=label
        )
        band = np.isfinite(q1) & np.isfinite(q3)
        ax_eps.fill_between(scale[band], q1[band], q3[band], color=line.get_color(), alpha=0.15)
        _infinite(ax_eps, scale[~finite], line.get_color())
        drawn.append(med)
        # KDE-LR estimates a pure ε: under Gaussian noise its truth is +∞, so any finite
        # value is consistent with it and no ratio to ε(δ) is said
        pure_vs_gaussian = family == "kdelr" and ds.attrs.get("mechanism") == "gaussian"
        if family in ("gaussmech", "kdelr") and truth_median is not None and not pure_vs_gaussian:
            _say_untracked(ax_eps, scale, med, truth_median, line.get_color())
    if "certified_ceiling" in ds and any(m.startswith("certified") for m in methods):
        # what zero test errors certify at these test sizes: a certificate on it was set
        # by the test size, not by the noise
        top = np.asarray(ds["certified_ceiling"].values, dtype=np.float64)
        ax_eps.plot(scale, top, color=_COLOURS["certified"], ls=":", lw=1.2,
                    label="certificate ceiling (what zero test errors certify)")  # fmt: skip
        drawn.append(top)
    if truth_median is not None:
        ax_eps.plot(scale, truth_median, color=_TRUTH, lw=2, label="true ε (median)")
        drawn.append(truth_median)
    if "reference_epsilon" in ds:
        guarantee = np.asarray(ds["reference_epsilon"].values, dtype=np.float64)
        ax_eps.plot(scale, guarantee, color=_TRUTH, ls="--", lw=1,
                    label="mechanism-wide guarantee")  # fmt: skip
        drawn.append(guarantee)
    ax_eps.set_xscale("log")
    kind = _epsilon_axis(ax_eps, np.concatenate(drawn) if drawn else [])
    ax_eps.set_ylabel(f"ε, {kind} (▲ ∞: infinite median)")
    ax_eps.grid(True, which="major", alpha=0.3)
    if legend:
        ax_eps.legend(
            fontsize="small", loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0.0
        )
    if title is not None:
        ax_eps.set_title(title)
    x_label = str(ds.attrs.get("scale_name", "noise scale"))
    if ax_auc is not None and "rocht_auc" in ds:
        q1, med, q3 = _quantiles(_by_scale(ds, "rocht_auc"), axis=1)
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
        (``(scale, pair)``, e.g. ``mmdtv_epsilon_hs_lb`` of
        ``MMDTVAuditor(confidence_level=...)``) as their maximum over the pairs, per-scale
        ones (``certified_epsilon_max``,
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
    fig, ax = _one_axes(ax)
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
        label, style = _route_name(name, ds[name]), "-"
        if values.ndim == 2:
            n_pairs = values.shape[1]
            values = np.nanmax(values, axis=1)
            if reduction_attrs(ds[name].attrs, n_pairs)["status"] != "certified_lower_bound":
                # each pair's bound alone: their maximum is not certified (docs/status.md)
                label, style = f"{label} (max of {n_pairs} per-pair bounds: not certified)", "--"
        ax.plot(scale, values, style, marker="o", ms=3, label=label)
    if "true_epsilon" in ds:
        truth = _by_scale(ds, "true_epsilon").max(axis=1)
        ax.plot(scale, truth, color="k", lw=2, label="true ε (largest over pairs)")
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


def _say_untracked(
    ax: Axes,
    scale: npt.NDArray[np.float64],
    route: npt.NDArray[np.float64],
    truth: npt.NDArray[np.float64],
    colour: str,
) -> None:
    """Write beside a route's line when it does not track the truth over the scales.

    Not tracked: Spearman ρ below 0.8 between the route's and the truth's medians, or a
    ratio beyond a factor 10 at the largest scale (where the truth is smallest).
    """
    from scipy.stats import spearmanr

    keep = np.isfinite(route) & np.isfinite(truth)
    if keep.sum() < 3 or np.ptp(truth[keep]) == 0:
        return
    rho = (
        float(spearmanr(route[keep], truth[keep]).statistic)
        if np.ptp(route[keep]) > 0
        else float("nan")
    )
    last = int(np.argmax(np.where(keep, scale, -np.inf)))
    ratio = route[last] / truth[last] if truth[last] > 0 else np.inf
    if (np.isfinite(rho) and rho >= 0.8) and 0.1 <= ratio <= 10.0:
        return
    said = f"does not track the truth: {ratio:.3g}× it here" + (
        f", ρ = {rho:.2f}" if np.isfinite(rho) else ", flat"
    )
    ax.annotate(said, (scale[last], route[last]), xytext=(-4, 6), textcoords="offset points",
                ha="right", va="bottom", fontsize="x-small", color=colour)  # fmt: skip


def plot_epsilon_curve(
    ds: xr.Dataset,
    *,
    scales: Sequence[float] | None = None,
    ax: Axes | None = None,
    axes: Sequence[Axes] | None = None,
    title: str | None = None,
    legend: bool = True,
) -> Figure:
    """Draw the certified ε(δ) curve of a noise sweep against δ, with the truth it refers to.

    One panel per noise level, so that no curve hides another: in each, the certificate
    (blue, solid) and the truth (black, dashed).

    Parameters
    ----------
    ds : xarray.Dataset
        A :func:`idaudit.benchmark.noise_sweep` result (variables ``certified_epsilon_curve``
        and ``true_epsilon_curve``, dims ``(scale, delta)``), or one mechanism of the demo's
        combined sweep (dim ``noise_sd`` instead of ``scale``).
    scales : sequence of float, optional
        Which values of the scale dimension to draw (default: all).
    ax : matplotlib Axes, optional
        Where to draw when one scale is drawn.
    axes : sequence of matplotlib Axes, optional
        Where to draw, one per scale (default: a new figure, one row of panels).
    title : str, optional
        Title over the panels (of the figure when it is made here, else of the first panel).
    legend : bool, default True
        Draw one legend below the panels (pass False to draw one for several figures' panels,
        from ``axes[0].get_legend_handles_labels()``).

    Returns
    -------
    matplotlib.figure.Figure

    Raises
    ------
    KeyError
        If ``ds`` has no ε(δ) curves.
    ValueError
        If ``ax`` is given for several scales, or ``axes`` does not hold one per scale.

    Notes
    -----
    Solid blue: the largest certified lower bound at each δ (all δ hold at once); a blue bar:
    its ceiling (``certified_ceiling``, what zero test errors certify) at the δ the
    certificates were fitted at (``reference_delta``), the only δ it is known at. Dashed
    black: the largest true ε(δ) of the certified pairs; hollow squares where it is only an
    upper bound on the truth (``true_epsilon_curve_exact`` false, e.g. Laplace at δ > 0). An
    infinite truth (Gaussian noise at δ = 0) is a ▲ with an ∞ at the top of its panel, not a
    point on the curve. δ is on a symmetric-log axis, so δ = 0 is shown; each panel's ε axis
    is linear or symmetric-log, chosen from its data's range.
    """
    for name in ("certified_epsilon_curve", "true_epsilon_curve"):
        if name not in ds:
            raise KeyError(f"`ds` has no {name!r}: pass a noise_sweep result.")
    dim = next(d for d in ds["certified_epsilon_curve"].dims if d != "delta")
    values = np.asarray(ds[dim].values, dtype=np.float64)
    chosen = values if scales is None else np.asarray(scales, dtype=np.float64)
    if ax is not None:
        if chosen.size != 1:
            raise ValueError(
                f"`ax` draws one scale; got {chosen.size}: pass `axes`, one per scale."
            )
        axes = [ax]
    if axes is None:
        fig, grid = _new_axes(1, chosen.size, figsize=(2.9 * chosen.size, 3.4))
        axes = list(grid[0])
    if len(axes) != chosen.size:
        raise ValueError(f"`axes` must hold one Axes per scale ({chosen.size}); got {len(axes)}.")
    fig = _figure_of(axes[0])
    delta = np.asarray(ds["delta"].values, dtype=np.float64)
    # the δ the certificates (and their ceiling) were fitted at: the sweep's reference δ
    at_delta = (
        float(ds["reference_delta"])
        if "reference_delta" in ds and ds["reference_delta"].size == 1
        else float(ds.attrs["reference_delta"])
        if "reference_delta" in ds.attrs
        else None
    )
    for panel, value in zip(axes, chosen, strict=True):
        row = ds.sel({dim: value})
        if "noise_sd" in row.coords and dim != "noise_sd":
            name = f"noise sd {float(row['noise_sd']):.3g}"
        else:
            name = f"{str(dim).replace('_', ' ')} {value:.3g}"
        cert = np.asarray(row["certified_epsilon_curve"].values, dtype=np.float64)
        truth = np.asarray(row["true_epsilon_curve"].values, dtype=np.float64)
        exact = (
            np.asarray(row["true_epsilon_curve_exact"].values, dtype=bool)
            if "true_epsilon_curve_exact" in row
            else np.ones(delta.size, dtype=bool)
        )
        finite = np.isfinite(truth)
        panel.plot(delta[finite], truth[finite], "--", color=_TRUTH, lw=1.2,
                   label="true ε(δ) of the certified pairs (reference)")  # fmt: skip
        panel.plot(delta[finite & exact], truth[finite & exact], "s", ms=4, color=_TRUTH)
        panel.plot(delta[finite & ~exact], truth[finite & ~exact], "s", ms=4, mfc="none",
                   color=_TRUTH, label="true ε(δ): an upper bound only")  # fmt: skip
        _infinite(panel, delta[~finite], _TRUTH, label="true ε(δ) = +∞")
        panel.plot(delta, cert, "-o", ms=3, color=_COLOURS["certified"],
                   label="certified ε(δ), largest (certified lower bound)")  # fmt: skip
        shown = [cert, truth]
        if at_delta is not None and "certified_ceiling" in row:
            # the ceiling is known at the certifier's δ only (elsewhere it depends on each
            # pair's test sizes): a bar there, not a line across every δ
            top = float(row["certified_ceiling"])
            panel.plot(
                [at_delta], [top], ls="none", marker="_", ms=16, mew=1.6,
                color=_COLOURS["certified"],
                label="ceiling at the certifier's δ (what zero test errors certify)",
            )  # fmt: skip
            shown.append(np.array([top]))
        panel.set_xscale("symlog", linthresh=1e-8)
        ticks = [d for d in (0.0, 1e-8, 1e-5, 1e-2) if delta.min() <= d <= delta.max()]
        panel.set_xticks(ticks)
        kind = _epsilon_axis(panel, np.concatenate(shown))
        panel.set_title(name, fontsize="medium")
        panel.set_xlabel("δ")
        panel.set_ylabel(f"ε(δ), {kind}", fontsize="small")
        panel.grid(True, which="major", alpha=0.3)
    if title is not None:
        if len(axes) > 1 and fig.get_layout_engine() is not None:
            fig.suptitle(title)
        else:
            axes[0].set_title(f"{title}\n{axes[0].get_title()}")
    if legend:
        handles = _legend_handles(axes)
        _legend_below(fig, handles, ncols=min(4, max(len(handles), 1)))
    return fig


def plot_private_swap_sweep(ds: xr.Dataset, *, ax: Axes | None = None) -> Figure:
    """ε against σ for :func:`idaudit.benchmark.private_swap_sweep`: every route and the proof.

    Each route is its median over pairs (an infinite value drawn at the top edge as a marker
    ``^``); the certificate is the largest certified bound at each σ; the guarantees are the
    median pair guarantee and the guarantee for any two inputs. The legend gives each line's
    status.

    Parameters
    ----------
    ds : xarray.Dataset
        The output of :func:`~idaudit.benchmark.private_swap_sweep`.
    ax : matplotlib.axes.Axes, optional

    Returns
    -------
    matplotlib.figure.Figure
    """
    need = {"guarantee_epsilon", "global_guarantee_epsilon", "certified_epsilon", "route"}
    if not need <= set(ds.variables):
        raise InvalidInputError(
            "`ds` must be the output of idaudit.benchmark.private_swap_sweep; missing "
            f"{sorted(need - set(ds.variables))}."
        )
    fig, ax = _one_axes(ax)
    sig = np.asarray(ds["sigma"].values, dtype=np.float64)
    finite = [np.asarray(ds["global_guarantee_epsilon"].values)]
    lines: list[tuple[str, npt.NDArray[np.float64], dict[str, Any]]] = []
    for r in [str(x) for x in ds["route"].values if str(x) != "certified"]:
        var = ds[f"{r}_epsilon"]
        vals = np.asarray(var.values, dtype=np.float64)
        med = np.array([np.nanmedian(v) if (~np.isnan(v)).any() else np.nan for v in vals])
        status = reduction_attrs(var.attrs, vals.shape[-1])["status"]  # a median over pairs
        label = f"{_NAMES.get(r, r)} (median; {status})"
        lines.append((label, med, {"color": _COLOURS.get(r), "marker": "o"}))
    cert = ds["certified_epsilon"]
    cvals = np.asarray(cert.values, dtype=np.float64)
    cmax = np.array([np.nanmax(v) if np.isfinite(v).any() else np.nan for v in cvals])
    lines.append(
        (
            # the largest over each scale's certified pairs: certified only if they hold jointly
            "reserved-test certificate (largest; "
            f"{reduction_attrs(cert.attrs, int(np.isfinite(cvals).sum(axis=-1).max()))['status']})",
            cmax,
            {"color": _COLOURS["certified"], "marker": "s"},
        )
    )
    g = ds["guarantee_epsilon"]
    lines.append(
        (
            # the sweep marks the proved bounds as holding jointly (n_simultaneous = pairs)
            f"pair guarantee (median; {reduction_attrs(g.attrs, g.shape[-1])['status']})",
            np.median(np.asarray(g.values), axis=1),
            {"color": _GUARANTEE_COLOUR, "linestyle": "--"},
        )
    )
    gg = ds["global_guarantee_epsilon"]
    lines.append(
        (
            f"guarantee, any two inputs ({gg.attrs['status']})",
            np.asarray(gg.values),
            {"color": _GUARANTEE_COLOUR, "linestyle": ":"},
        )
    )
    for _, y, _ in lines:
        finite.append(y[np.isfinite(y)])
    top = max(float(np.max(v)) for v in finite if v.size) * 1.5
    for label, y, style in lines:
        shown = np.where(np.isposinf(y), np.nan, y)
        ax.plot(sig, shown, label=label, **style)
        if np.isposinf(y).any():
            ax.plot(
                sig[np.isposinf(y)],
                np.full(int(np.isposinf(y).sum()), top),
                "^",
                color=style.get("color"),
            )
    ax.set_xscale("log")
    ax.set_yscale("symlog", linthresh=0.1)
    ax.set_ylim(bottom=0.0, top=top * 1.5)
    ax.set_xlabel("σ (embedding noise sd)")
    ax.set_ylabel(f"ε at δ = {ds.attrs.get('delta', float('nan')):g}")
    ax.grid(True, which="major", alpha=0.3)
    ax.set_title("▲ at the top: +∞ (a ROC or density ratio at its endpoint)", fontsize="small")
    ax.legend(fontsize="x-small", loc="upper center", bbox_to_anchor=(0.5, -0.14), ncol=2)
    return fig
