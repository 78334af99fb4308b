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
:func:`plot_rocs`          several ROC curves, e.g. each condition's median-AUC pair
                           (Figure 3 right; :func:`idaudit.audits.median_auc_rocs`)
:func:`plot_figure3`       Figure 3's two panels side by side
:func:`plot_strength`      ε against the strength of each anonymiser, one column per method
                           (rates in [0, 1] on a second row, with chance levels)
:func:`plot_certificates`  certified lower bounds as one-sided intervals, per condition
:func:`plot_epsilon_curve` the certified ε(δ) curve of a noise sweep against δ, with the
                           true ε(δ) of the certified pairs
:func:`plot_tradeoff`      a certified trade-off curve (:func:`idaudit.certify.certify_scores`)
                           with the population truth of a benchmark mechanism
:func:`contact_sheet`      a grid of images with titles (what each mechanism does)
:func:`plot_flagging`      synthetic and held-out flagging rates against ``p``, pooled and
                           per cohort (seed 003, ``below_threshold.png``)
:func:`plot_nnaa`          the privacy loss with its interval and p-value, and the two AA
                           values, pooled and per cohort (seed 003, ``nnaa.png``)
=========================  ==============================================================

Result Datasets also have ``ds.idaudit.plot_roc(...)`` and ``ds.idaudit.plot_epsilon(...)``.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, cast

import numpy as np
import numpy.typing as npt

from idaudit._results import reduction_attrs, reduction_attrs_across
from idaudit.exceptions import InvalidInputError

if TYPE_CHECKING:
    import pandas as pd
    import xarray as xr
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

__all__ = [
    "contact_sheet",
    "plot_certificates",
    "plot_certified_routes",
    "plot_epsilon_curve",
    "plot_figure3",
    "plot_flagging",
    "plot_mmd_null",
    "plot_nnaa",
    "plot_noise_sweep",
    "plot_private_swap_sweep",
    "plot_roc",
    "plot_rocs",
    "plot_strength",
    "plot_tradeoff",
]

# one fixed colour per route, so figures are comparable
_COLOURS = {
    "gaussmech": "#1b9e77",
    "kdelr": "#d95f02",
    "mmdtv": "#7570b3",
    "mmdtv_hs": "#a6a1d8",
    "rocht": "#e7298a",
    "certified": "#1f78b4",
}
#: The truth a benchmark knows (true ε, the mechanism's guarantee): black, and never a route's
#: colour, so that a certificate and the truth it is checked against are told apart at a glance.
_TRUTH = "#000000"

#: The proved guarantee (an upper bound): a colour apart from every route and the certificate.
_GUARANTEE_COLOUR = "#a6761d"
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


def _one_axes(ax: Axes | None, **kwargs: Any) -> tuple[Figure, Axes]:
    """Return the figure and axes to draw on: ``ax`` and its figure, or a new one-panel one."""
    if ax is None:
        fig, grid = _new_axes(1, 1, **kwargs)
        return fig, grid[0, 0]
    return _figure_of(ax), ax


def _figure_of(ax: Axes) -> Figure:
    """Return the root figure of ``ax`` (a SubFigure's ``figure`` is its root)."""
    fig = ax.figure
    return cast("Figure", getattr(fig, "figure", fig))


def _quantiles(values: npt.NDArray[np.float64], axis: int) -> npt.NDArray[np.float64]:
    """25th percentile, median and 75th percentile, ignoring NaN, keeping inf.

    The quartiles are order statistics (no interpolation); the median is the one the reports
    and ``summarize`` give (:func:`numpy.median`: the mean of the two middle values of an even
    count), so that a figure and its report say the same number.
    """
    out: npt.NDArray[np.float64] = np.nanquantile(
        values, [0.25, 0.5, 0.75], axis=axis, method="inverted_cdf"
    )
    with warnings.catch_warnings():  # an all-NaN slice: NaN, said by the caller
        warnings.simplefilter("ignore", RuntimeWarning)
        out[1] = np.nanmedian(values, axis=axis)
    return out


def _epsilon_axis(ax: Axes, values: npt.ArrayLike) -> str:
    """Choose the ε axis from the data's range; return its name for the axis label.

    Finite values whose positive part spans less than a factor 30 get a linear axis from 0
    (a symmetric-log axis would squeeze them into its top); a wider span gets a
    symmetric-log axis whose linear part ends at the smallest positive decade, so that 0
    (a certificate of nothing) stays visible and every decade of data gets its share.
    """
    v = np.asarray(values, dtype=np.float64).ravel()
    v = v[np.isfinite(v)]
    pos = v[v > 0]
    top = float(v.max()) if v.size else 1.0
    if pos.size and float(pos.max()) / float(pos.min()) > 30.0:
        ax.set_yscale("symlog", linthresh=10.0 ** np.floor(np.log10(pos.min())), linscale=0.5)
        ax.set_ylim(0.0, top * 2.5)
        return "symmetric log"
    ax.set_yscale("linear")
    height = (top if top > 0 else 1.0) * 1.2
    ax.set_ylim(-0.03 * height, height)  # a line at 0 (a certificate of nothing) stays visible
    return "linear"


def _infinite(ax: Axes, x: npt.ArrayLike, colour: str, *, label: str | None = None) -> None:
    """Mark infinite values at ``x`` as ▲ at the top of ``ax``, each with an ∞ beside it."""
    from matplotlib import transforms

    xs = np.asarray(x, dtype=np.float64)
    if not xs.size:
        return
    top = transforms.blended_transform_factory(ax.transData, ax.transAxes)
    ax.plot(xs, np.full(xs.size, 0.95), marker="^", ms=7, ls="none", color=colour,
            transform=top, clip_on=False, label=label)  # fmt: skip
    for xi in xs:
        ax.annotate("∞", (xi, 0.95), xycoords=top, xytext=(5, -4), textcoords="offset points",
                    color=colour, fontsize="small")  # fmt: skip


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
        np.nanmedian(
            np.asarray(ds["true_epsilon"].transpose("scale", "pair").values, dtype=np.float64),
            axis=1,
        )
        if "true_epsilon" in ds
        else None
    )
    drawn: list[npt.NDArray[np.float64]] = []
    for name in methods:
        values = np.asarray(ds[name].transpose("scale", "pair").values, dtype=np.float64)
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
    **style: Any,
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
    **style
        Line style passed to matplotlib (``ls``, ``lw``, ``marker``, ``color``, ...).

    Returns
    -------
    matplotlib.figure.Figure
    """
    fig, ax = _one_axes(ax, figsize=(4.0, 4.0))
    ax.plot(
        np.asarray(fpr, dtype=float),
        np.asarray(tpr, dtype=float),
        label=label,
        **style,
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
    fig, ax = _one_axes(ax, figsize=(5.0, 3.6))
    edges = np.histogram_bin_edges(np.concatenate([a, b]), bins=bins).tolist()
    ax.hist(a, bins=edges, alpha=0.6, density=True, label=f"H0: same identity (n={a.size})")
    ax.hist(b, bins=edges, alpha=0.6, density=True, label=f"H1: different identities (n={b.size})")
    ax.axvline(0.0, color="grey", lw=0.8, ls=":")
    ax.set_xlabel("unbiased MMD²")
    ax.set_ylabel("density")
    ax.legend(fontsize="small")
    return fig


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


def plot_rocs(
    rocs: Mapping[str, Any],
    *,
    title: str = "median-AUC out-of-fold ROC",
    ax: Axes | None = None,
) -> Figure:
    """Draw several ROC curves on one axes (seed 000, Figure 3 right).

    The curves are drawn as given; nothing is fitted here. A result stores AUCs, not curves:
    :func:`idaudit.audits.median_auc_rocs` refits each condition's median-AUC pair and
    returns the mapping this function takes.

    Parameters
    ----------
    rocs : mapping of str to fitted auditor or (fpr, tpr)
        Legend label → a fitted :class:`~idaudit.ROCHTAuditor` (anything with ``fpr_`` and
        ``tpr_``; its ``auc_``, when present, is added to the label) or a pair of arrays
        ``(fpr, tpr)``.
    title : str, default "median-AUC out-of-fold ROC"
        Axes title.
    ax : matplotlib Axes, optional

    Returns
    -------
    matplotlib.figure.Figure

    Examples
    --------
    >>> from idaudit.plotting import plot_rocs
    >>> fig = plot_rocs({"a vs b": ([0.0, 0.2, 1.0], [0.0, 0.7, 1.0])})
    >>> [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    ['a vs b']
    """
    if not isinstance(rocs, Mapping) or hasattr(rocs, "data_vars"):  # a Dataset is a Mapping
        raise TypeError(
            "`rocs` must be a mapping of label to a fitted ROCHTAuditor or (fpr, tpr); got "
            f"{type(rocs).__name__} (idaudit.audits.median_auc_rocs makes one from a result)."
        )
    fig, ax = _one_axes(ax, figsize=(4.6, 4.6))
    curves: list[tuple[str, npt.NDArray[np.float64], npt.NDArray[np.float64]]] = []
    for label, roc in rocs.items():
        if hasattr(roc, "fpr_") and hasattr(roc, "tpr_"):
            fpr, tpr = roc.fpr_, roc.tpr_
            auc = getattr(roc, "auc_", None)
            text = str(label) if auc is None else f"{label} (AUC {float(auc):.3f})"
        else:
            fpr, tpr = roc
            text = str(label)
        curves.append((text, np.asarray(fpr, dtype=float), np.asarray(tpr, dtype=float)))
    # curves that coincide (two perfect separations) must not hide each other: the first
    # is drawn widest, each later one narrower, dashed and with its own markers on top, and
    # a curve equal to an earlier one names the first such (one name: the legend stays short
    # however many conditions share a curve)
    styles = ["-", "--", ":", "-."]
    markers = ["o", "s", "^", "D", "v", "P"]
    grid = np.linspace(0.0, 1.0, 201)
    seen: list[tuple[str, npt.NDArray[np.float64]]] = []
    for i, (text, fpr, tpr) in enumerate(curves):
        order = np.lexsort((tpr, fpr))
        shape = np.interp(grid, fpr[order], tpr[order])
        same = [name for name, other in seen if np.allclose(shape, other, atol=1e-9)]
        seen.append((text.split(" (AUC")[0].split(": ")[0], shape))  # the condition's name
        if same:
            text += f" — same curve as {same[0]}"
        plot_roc(fpr, tpr, label=text, ax=ax, ls=styles[i % len(styles)],
                 lw=max(3.2 - 0.8 * i, 1.0), marker=markers[i % len(markers)],
                 ms=max(7 - 1.5 * i, 3), mfc="none", zorder=2 + i)  # fmt: skip
    ax.set_title(title)
    return fig


def plot_figure3(ds: xr.Dataset, rocs: Mapping[str, Any], h0: npt.ArrayLike) -> Figure:
    """Seed 000's Figure 3: MMD² H0 (split-half) vs H1 histograms, and the ROC curves.

    The H1 histogram pools the pairs of every condition of ``ds`` (its title says how many);
    both legends sit below their panels, off the histograms and the curves.

    Parameters
    ----------
    ds : xarray.Dataset
        Per-pair results with ``mmdtv_mmd2`` (H1 values pool every condition's pairs).
    rocs : mapping of str to fitted auditor or (fpr, tpr)
        The curves of the right panel, as :func:`plot_rocs` takes them
        (:func:`idaudit.audits.median_auc_rocs` gives each condition's median-AUC pair).
    h0 : array_like
        Split-half MMD² values (``sanity_controls(...)["mmd2"]``, pooled over conditions).

    Returns
    -------
    matplotlib.figure.Figure
    """
    fig, grid = _new_axes(1, 2, figsize=(10.0, 4.4))
    h1 = np.asarray(ds["mmdtv_mmd2"].values, dtype=np.float64).ravel()
    ax_mmd, ax_roc = grid[0, 0], grid[0, 1]
    plot_mmd_null(h0, h1[np.isfinite(h1)], ax=ax_mmd)
    n_conditions = int(ds.sizes.get("condition", 1))
    pooled = f"pooled over all {n_conditions} conditions" if n_conditions > 1 else "one condition"
    ax_mmd.set_title(f"MMD²: same identity (H0) vs different identities (H1)\n{pooled}")
    plot_rocs(rocs, ax=ax_roc)
    below = {"loc": "upper center", "bbox_to_anchor": (0.5, -0.16), "fontsize": "small"}
    ax_mmd.legend(**below)  # type: ignore[arg-type]
    if ax_roc.get_legend() is not None:
        ax_roc.legend(**below)  # type: ignore[arg-type]
    return fig


def plot_strength(
    table: Any,
    *,
    columns: Mapping[str, str] | None = None,
    baseline: Mapping[str, float] | None = None,
    rates: Mapping[str, str] | None = None,
    chance: Mapping[str, tuple[float, str]] | None = None,
    ceilings: Mapping[str, str] | None = None,
) -> Figure:
    """ε (and rates in [0, 1]) against the strength of each anonymiser, one column per method.

    Parameters
    ----------
    table : pandas.DataFrame
        One row per condition with columns ``method``, ``strength`` and the values to draw.
    columns : mapping of column to label, optional
        ε values, drawn on an ε axis from 0, linear or symmetric-log as the data's range asks.
        Default: every numeric column but ``strength`` and those in ``rates`` and
        ``ceilings``.
    baseline : mapping of column to value, optional
        Values without anonymisation, drawn at strength 0 as hollow diamonds joined to the
        weakest setting by a dotted line (at their own x, so no series hides them).
    rates : mapping of column to label, optional
        Values in [0, 1] (AUCs, identification rates), drawn on a second row of panels with a
        linear [0, 1] axis. Default: none (one row).
    chance : mapping of column to (value, label), optional
        Chance level of a column of ``rates`` (e.g. top-1 identification among ``n``
        identities: ``1 / n``), drawn as a dotted line in that column's colour.
    ceilings : mapping of column to column, optional
        For a column of ``columns``, the column holding the most it can reach (e.g. what zero
        test errors certify). The ceiling is drawn dotted; values at a positive ceiling
        (within 1e-12, the rule of :func:`idaudit.audits.ceiling_reached`) are ringed.

    Returns
    -------
    matplotlib.figure.Figure
        One column of panels per method (rows share their y axis); the legend sits outside
        the panels, below them.

    Examples
    --------
    >>> import pandas as pd
    >>> from idaudit.plotting import plot_strength
    >>> table = pd.DataFrame({"method": ["blur", "blur"], "strength": [1.0, 3.0],
    ...                       "eps": [0.9, 0.4], "top1": [0.8, 0.3]})
    >>> fig = plot_strength(table, columns={"eps": "ε"}, rates={"top1": "top-1 rate"},
    ...                     chance={"top1": (0.25, "chance (1/4)")})
    >>> len(fig.axes), tuple(float(v) for v in fig.axes[1].get_ylim())
    (2, (0.0, 1.02))
    """
    methods = list(dict.fromkeys(table["method"].tolist()))
    rates = dict(rates or {})
    ceilings = dict(ceilings or {})
    if columns is None:
        skip = {"method", "strength", *rates, *ceilings.values()}
        columns = {
            str(c): str(c)
            for c in table.columns
            if c not in skip and np.issubdtype(table[c].dtype, np.number)
        }
    rows = [dict(columns)] + ([rates] if rates else [])
    fig, grid = _new_axes(
        len(rows),
        len(methods),
        figsize=(4.2 * len(methods), 3.4 * len(rows) + 1.4),
        sharey="row",
        sharex="col",
    )
    colours = {col: f"C{i}" for i, col in enumerate([*columns, *rates])}
    kind = "linear"
    for col_i, method in enumerate(methods):
        part = table[table["method"] == method].sort_values("strength")
        x = np.asarray(part["strength"], dtype=np.float64)
        for row_i, row in enumerate(rows):
            ax = grid[row_i, col_i]
            for col, label in row.items():
                colour = colours[col]
                y = np.asarray(part[col], dtype=np.float64)
                ax.plot(x, np.where(np.isfinite(y), y, np.nan), marker="o", color=colour,
                        label=label)  # fmt: skip
                if baseline and col in baseline and x.size:
                    # at strength 0, where no anonymisation sits: its own x, never under a line
                    ax.plot([0.0, x[0]], [baseline[col], y[0]], color=colour, ls=":", lw=1.0)
                    size = 10.0 - 3.0 * list(row).index(col)  # equal values nest, not hide
                    ax.plot([0.0], [baseline[col]], marker="D", ms=size, mfc="none",
                            mec=colour, mew=1.5, ls="none",
                            label="no anonymisation (at strength 0)")  # fmt: skip
                if col in ceilings:
                    top = np.asarray(part[ceilings[col]], dtype=np.float64)
                    name = f"{label}: " if len(ceilings) > 1 else ""
                    ax.plot(x, top, color=colour, ls=":", lw=1.2,
                            label=f"{name}ceiling (what zero test errors certify)")  # fmt: skip
                    at = (top > 0) & (np.abs(y - top) <= 1e-12)  # a positive ceiling, reached
                    ax.plot(x[at], y[at], ls="none", marker="o", ms=13, mfc="none",
                            mec=colour, label=f"{name}at the ceiling")  # fmt: skip
                if chance and col in chance:
                    level, text = chance[col]
                    ax.axhline(level, color=colour, ls=":", lw=1.2, label=text)
            ax.grid(True, alpha=0.3)
            if row_i == 0:
                ax.set_title(str(method))
            if row_i == len(rows) - 1:
                ax.set_xlabel(_strength_name(part))
            if row is rates:
                ax.set_ylim(0.0, 1.02)
            else:
                drawn = table[[*row, *(ceilings[c] for c in row if c in ceilings)]]
                values = [np.asarray(drawn, dtype=np.float64).ravel()]
                base = dict(baseline or {})
                values += [np.asarray([base[c] for c in row if c in base], dtype=np.float64)]
                kind = _epsilon_axis(ax, np.concatenate(values))
    grid[0, 0].set_ylabel(f"ε, {kind} axis" if columns else "ε")
    if rates:
        grid[1, 0].set_ylabel("rate or AUC")
    handles: dict[str, Any] = {}
    for ax in grid.ravel():
        for handle, label in zip(*ax.get_legend_handles_labels(), strict=True):
            handles.setdefault(label, handle)
    title = (
        "ringed: at the ceiling, the most that zero test errors certify at these test "
        "sizes, so the test size, not the anonymiser, sets the value"
        if ceilings
        else None
    )
    fig.legend(list(handles.values()), list(handles), loc="outside lower center",
               ncols=min(3, max(len(handles), 1)), fontsize="small", title=title,
               title_fontsize="small")  # fmt: skip
    return fig


def _strength_name(part: Any) -> str:
    """Return the ``strength_name`` of a table slice, or ``"strength"``."""
    if "strength_name" in getattr(part, "columns", ()):
        return str(part["strength_name"].iloc[0])
    return "strength"


def plot_certificates(certificates: Any, *, ax: Axes | None = None) -> Figure:
    """Certified lower bounds as one-sided intervals ``[ε_LB, ∞)``, one column per condition.

    Parameters
    ----------
    certificates : mapping of condition to xarray.Dataset
        Each a ``ReservedTestCertifier.certificates_`` (variable ``epsilon_lb``).
    ax : matplotlib Axes, optional

    Returns
    -------
    matplotlib.figure.Figure
        The y label says "jointly" only when every drawn bound holds jointly with every
        other (the conditions certified as one family:
        :func:`idaudit.results.reduction_attrs_across`), else that each condition holds
        on its own.
    """
    fig, ax = _one_axes(ax, figsize=(1.2 + 0.9 * max(len(certificates), 1), 3.6))
    top = 0.0
    for i, cert in enumerate(certificates.values()):
        lb = np.asarray(cert["epsilon_lb"].values, dtype=np.float64)
        top = max(top, float(np.nanmax(lb)) if lb.size else 0.0)
        x = np.full(lb.shape, float(i)) + np.linspace(-0.15, 0.15, max(lb.size, 1))[: lb.size]
        ax.scatter(x, lb, marker="_", s=200, color="k")
        for xi, yi in zip(x, lb, strict=True):
            ax.annotate(
                "",
                xy=(xi, yi + 0.3 + 0.1 * top),
                xytext=(xi, yi),
                arrowprops={"arrowstyle": "->", "color": "grey", "lw": 0.8},
            )
    ax.set_xticks(range(len(certificates)), [str(k) for k in certificates], rotation=30, ha="right")
    ax.set_ylim(bottom=-0.05, top=1.3 * top + 0.5)
    # the columns are read together: they hold jointly only when the conditions were
    # certified as one family; one function decides (docs/status.md, rule 2)
    joint = (
        reduction_attrs_across(
            [
                ({"status": "certified_lower_bound", **c["epsilon_lb"].attrs}, c.sizes["pair"])
                for c in certificates.values()
                if c.sizes["pair"]
            ]
        )["status"]
        == "certified_lower_bound"
        if any(c.sizes["pair"] for c in certificates.values())
        else True
    )
    said = (
        "true ε is above, w.p. ≥ 1 − α jointly"
        if joint
        else "each condition w.p. ≥ 1 − α on its own; not jointly"
    )
    ax.set_ylabel(f"certified ε lower bound ({said})")
    ax.grid(True, axis="y", alpha=0.3)
    return fig


def contact_sheet(
    images: Sequence[npt.ArrayLike], titles: Sequence[str], *, ncols: int | None = None
) -> Figure:
    """Draw a grid of images with one title each (``(H, W, 3)`` uint8).

    Parameters
    ----------
    images : sequence of arrays
    titles : sequence of str, one per image
    ncols : int, optional
        Images per row (default: all in one row).

    Returns
    -------
    matplotlib.figure.Figure
    """
    if len(images) != len(titles) or not images:
        raise ValueError(
            f"`titles` must name each of the images; got {len(titles)} vs {len(images)}."
        )
    ncols = len(images) if ncols is None else ncols
    nrows = -(-len(images) // ncols)
    fig, grid = _new_axes(nrows, ncols, figsize=(1.6 * ncols, 1.9 * nrows))
    for ax in grid.ravel():
        ax.set_axis_off()
    for ax, im, title in zip(grid.ravel(), images, titles, strict=False):
        ax.imshow(np.asarray(im), interpolation="nearest")
        ax.set_title(title, fontsize="small")
    return fig


#: Largest spread, in decades of ``p``, of the series drawn side by side at one percentile
#: (1 and 2 lie 0.30 decades apart, so groups of width <= 0.16 never touch).
_DODGE_DECADES = 0.16


def plot_flagging(frame: pd.DataFrame, by_cohort: pd.DataFrame | None = None) -> Figure:
    """Synthetic and held-out flagging rates against the percentile ``p``, pooled and per cohort.

    Parameters
    ----------
    frame : pandas.DataFrame
        ``flagging.csv``'s table (:attr:`idaudit.pipeline.PrivacyReport.flagging`):
        columns ``metric``, ``axis`` (``"identity"`` or ``"appearance"``), ``percentile``,
        ``synthetic_pct``, ``heldout_pct``, ``ci_lower``, ``ci_upper``.
    by_cohort : pandas.DataFrame, optional
        ``flagging_by_cohort.csv``'s table (the same columns and ``cohort``): the rates of
        each cohort at the pooled thresholds. With two or more cohorts, each gets its own
        row of panels under the pooled one.

    Returns
    -------
    matplotlib.figure.Figure
        Identity metrics on the left, appearance metrics on the right (seed 003); one row
        of panels for the pooled rates, then one per cohort. The x axis is logarithmic over
        the percentiles asked (1 and 2 as far apart as 10 and 20), with the metrics' series
        side by side at each ``p``; the dotted curve ``rate = p`` is a reference (the
        pooled held-out rate is about p, exactly ⌈p·n/100⌉/n with the order statistic; a
        cohort's held-out rate at the pooled threshold can differ, and is drawn); bars are
        the synthetic rate's Clopper–Pearson interval, never cut (the y range covers every
        bound). One legend under the panels covers no data.
    """
    axes_names = [a for a in ("identity", "appearance") if (frame["axis"] == a).any()]
    views: list[tuple[str, pd.DataFrame]] = [("pooled", frame)]
    if by_cohort is not None and by_cohort["cohort"].nunique() > 1:
        views += [(f"cohort {c}", rows) for c, rows in by_cohort.groupby("cohort", sort=False)]
    ncols = max(len(axes_names), 1)
    fig, grid = _new_axes(
        len(views), ncols, figsize=(4.8 * ncols, 3.3 * len(views) + 0.8), sharex=True
    )
    percentiles = np.sort(frame["percentile"].unique().astype(float))
    metrics = list(dict.fromkeys(frame["metric"]))
    handles: dict[str, Any] = {}
    for row, (view, data) in enumerate(views):
        for col, axis in enumerate(axes_names):
            ax = grid[row, col]
            sub = data[data["axis"] == axis]
            _flagging_panel(ax, sub, metrics, percentiles, handles)
            ax.set_title(f"{view}, {axis} axis", fontsize="medium")
            if row == len(views) - 1:
                ax.set_xlabel("percentile p of held-out distances (%, log scale)")
            if col == 0:
                ax.set_ylabel("images at or below the threshold (%)")
    fig.legend(
        list(handles.values()),
        list(handles),
        loc="outside lower center",
        ncols=2,
        fontsize="small",
    )
    return fig


def _flagging_panel(
    ax: Axes,
    sub: pd.DataFrame,
    metrics: list[str],
    percentiles: npt.NDArray[np.float64],
    handles: dict[str, Any],
) -> None:
    """One panel of :func:`plot_flagging`: each metric's two series, dodged, and ``rate = p``."""
    n_series = 2 * len(metrics)
    step = _DODGE_DECADES / max(n_series - 1, 1)
    tops = [float(percentiles.max())]
    for k, metric in enumerate(metrics):
        rows = sub[sub["metric"] == metric]
        if not len(rows):
            continue
        p = rows["percentile"].to_numpy(float)
        synth = rows["synthetic_pct"].to_numpy(float)
        lo = rows["ci_lower"].to_numpy(float)
        hi = rows["ci_upper"].to_numpy(float)
        held = rows["heldout_pct"].to_numpy(float)
        shift = [10.0 ** (step * (j - (n_series - 1) / 2)) for j in (2 * k, 2 * k + 1)]
        err = np.clip(np.vstack([synth - lo, hi - synth]), 0.0, None)
        bars = ax.errorbar(p * shift[0], synth, yerr=np.nan_to_num(err), color=f"C{k}",
                           marker="o", capsize=2.5, label=f"{metric}: synthetic")  # fmt: skip
        (line,) = ax.plot(p * shift[1], held, color=f"C{k}", ls="--", marker="s", mfc="none",
                          label=f"{metric}: held-out")  # fmt: skip
        handles.setdefault(f"{metric}: synthetic (95 % Clopper–Pearson)", bars)
        handles.setdefault(f"{metric}: held-out", line)
        tops += [float(np.nanmax(v)) for v in (hi, synth, held) if np.isfinite(v).any()]
    x_lo, x_hi = float(percentiles.min()) / 1.4, float(percentiles.max()) * 2.0
    grid_x = np.geomspace(x_lo, x_hi, 64)
    (diag,) = ax.plot(grid_x, grid_x, color="grey", lw=1.0, ls=":", label="rate = p")
    handles.setdefault(
        "rate = p (the pooled held-out rate is about p; see the held-out series)", diag
    )
    top = max(tops) * 1.08
    # the diagonal's own label, right of the last percentile's series (clear of the data)
    label_x = min(float(percentiles.max()) * 1.5, top * 0.9)
    ax.annotate("rate = p", (label_x, label_x), xytext=(0, 3), textcoords="offset points",
                ha="center", va="bottom", color="grey", fontsize="small")  # fmt: skip
    ax.set_xscale("log")
    ax.set_xlim(x_lo, x_hi)
    ax.set_xticks(percentiles, [f"{v:g}" for v in percentiles])
    ax.minorticks_off()
    ax.set_ylim(-0.02 * top, top)


def plot_nnaa(frame: pd.DataFrame, *, alpha: float = 0.05) -> Figure:
    """Plot the privacy loss with its interval and p-value, and the two AA terms, per NNAA row.

    Parameters
    ----------
    frame : pandas.DataFrame
        ``nnaa.csv``'s table (:attr:`idaudit.pipeline.PrivacyReport.nnaa`): columns
        ``metric``, ``privacy_loss``, ``ci_lower``, ``ci_upper``, ``aa_train_synth``,
        ``aa_heldout_synth`` with their ``_ci_lower``/``_ci_upper``, and optionally
        ``cohort`` (``"pooled"`` or a cohort name), ``p_value`` and ``smallest_p_value``.
    alpha : float, default 0.05
        Level at which a row's permutation p-value counts as "memorisation detected".

    Returns
    -------
    matplotlib.figure.Figure
        Left: the privacy loss ``AA(held-out, synth) − AA(train, synth)`` of each row
        (metric, then pooled and each cohort) with its interval and the zero line, the
        only informative number (seed 003); red where the permutation test rejects at
        ``alpha``, grey ("no verdict") where there is no test or it cannot reject at
        ``alpha`` (its ``smallest_p_value`` is above it); a hollow marker where no interval
        is reported. Right, on the same rows:
        the two AA values as bars with their intervals, each value also marked by a tick so
        that a zero bar stays visible; the dotted line is 0.5. Both x ranges cover every
        value and interval end (nothing is cut). The row labels carry the p-values; one
        legend under the panels covers no data.
    """
    rows = frame.reset_index(drop=True)
    n = len(rows)
    cohort = rows["cohort"].astype(str).tolist() if "cohort" in rows else ["pooled"] * n
    p_value = rows["p_value"].to_numpy(float) if "p_value" in rows else np.full(n, np.nan)
    # the least p-value each row's test can give: above alpha it cannot reject (no verdict)
    floor = np.full(n, np.nan)
    if "smallest_p_value" in rows:
        floor = rows["smallest_p_value"].to_numpy(float)
    fig, grid = _new_axes(
        1, 2, figsize=(10.0, 0.55 * max(n, 1) + 1.9), sharey=True, width_ratios=[1.2, 1.0]
    )
    loss_ax, aa_ax = grid[0, 0], grid[0, 1]
    y = -np.arange(n, dtype=float)  # first row on top
    handles: dict[str, Any] = {}
    _nnaa_loss_panel(loss_ax, rows, y, (p_value, floor), alpha, handles)
    _nnaa_aa_panel(aa_ax, rows, y, handles)
    labels = []
    for i in range(n):
        p_text = "no test" if not np.isfinite(p_value[i]) else f"p = {p_value[i]:.3g}"
        labels.append(f"{rows['metric'].iloc[i]} · {cohort[i]}\n{p_text}")
    loss_ax.set_yticks(y, labels, fontsize="small")
    loss_ax.set_ylim(-n + 0.4, 0.6)
    fig.legend(
        list(handles.values()),
        list(handles),
        loc="outside lower center",
        ncols=2,
        fontsize="small",
    )
    return fig


def _span(values: list[npt.NDArray[np.float64]], must: tuple[float, float]) -> tuple[float, float]:
    """Return an x range holding ``must`` and every finite value, with a 5 % margin."""
    finite = np.concatenate([v[np.isfinite(v)] for v in values] + [np.asarray(must, float)])
    lo, hi = float(finite.min()), float(finite.max())
    pad = 0.05 * max(hi - lo, 0.1)
    return lo - pad, hi + pad


def _nnaa_loss_panel(
    ax: Axes,
    rows: pd.DataFrame,
    y: npt.NDArray[np.float64],
    tests: tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]],
    alpha: float,
    handles: dict[str, Any],
) -> None:
    """Left panel of :func:`plot_nnaa`: privacy loss, interval, zero line, test verdict."""
    loss = rows["privacy_loss"].to_numpy(float)
    lo, hi = rows["ci_lower"].to_numpy(float), rows["ci_upper"].to_numpy(float)
    has_ci = np.isfinite(lo) & np.isfinite(hi)
    p_value, floor = tests  # the p-values and the least each test can give
    detected = np.isfinite(p_value) & (p_value <= alpha)
    powerless = ~detected & (~np.isfinite(p_value) | (floor > alpha))
    zero = ax.axvline(0.0, color="black", lw=1.0, label="no privacy loss (0)")
    handles["no privacy loss (0)"] = zero
    for mask, colour, name in (
        (detected, "C3", f"memorisation detected (permutation p <= {alpha:g})"),
        (~detected & ~powerless, "C0", "no evidence of memorisation"),
        (powerless, "C7", f"no verdict: no test, or smallest attainable p > {alpha:g}"),
    ):
        with_ci, without = mask & has_ci, mask & ~has_ci
        if with_ci.any():
            err = np.clip(np.vstack([loss - lo, hi - loss])[:, with_ci], 0.0, None)
            handles[name] = ax.errorbar(loss[with_ci], y[with_ci], xerr=err, color=colour,
                                        marker="o", ls="none", capsize=3)  # fmt: skip
        if without.any():
            ax.plot(loss[without], y[without], color=colour, marker="o", mfc="none", ls="none")
            handles.setdefault(name, ax.lines[-1])
    if (~has_ci).any():
        (hollow,) = ax.plot([], [], color="grey", marker="o", mfc="none", ls="none")
        handles["hollow: no interval (set below the minimum size)"] = hollow
    ax.set_xlim(*_span([loss, lo, hi], (0.0, 0.0)))
    ax.set_xlabel("privacy loss: AA(held-out, synth) − AA(train, synth)")
    ax.set_title("privacy loss with its interval", fontsize="medium")


def _nnaa_aa_panel(
    ax: Axes, rows: pd.DataFrame, y: npt.NDArray[np.float64], handles: dict[str, Any]
) -> None:
    """Right panel of :func:`plot_nnaa`: the two AA values as bars, ticks and intervals."""
    ends: list[npt.NDArray[np.float64]] = []
    for offset, key, label, colour in (
        (0.18, "aa_train_synth", "AA(train, synthetic)", "C1"),
        (-0.18, "aa_heldout_synth", "AA(held-out, synthetic)", "C2"),
    ):
        value = rows[key].to_numpy(float)
        lo = rows[f"{key}_ci_lower"].to_numpy(float)
        hi = rows[f"{key}_ci_upper"].to_numpy(float)
        err = np.nan_to_num(np.clip(np.vstack([value - lo, hi - value]), 0.0, None))
        handles[label] = ax.barh(y + offset, value, height=0.34, color=colour, alpha=0.75,
                                 edgecolor=colour, xerr=err, capsize=2.5, label=label)  # fmt: skip
        # the value as a tick at the end of the bar: a bar of length 0 is then still seen
        ax.plot(value, y + offset, ls="none", marker="|", markersize=11, mew=2.0, color="black")
        ends += [value, lo, hi]
    chance = ax.axvline(0.5, color="grey", lw=0.8, ls=":", label="0.5: sets not separable")
    handles["0.5: sets not separable by proximity"] = chance
    ax.set_xlim(*_span(ends, (0.0, 1.0)))
    ax.set_xlabel("adversarial accuracy")
    ax.set_title("the two AA terms", fontsize="medium")


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
        handles: dict[str, Any] = {}
        for panel in axes:
            for handle, label in zip(*panel.get_legend_handles_labels(), strict=True):
                handles.setdefault(label, handle)
        fig.legend(list(handles.values()), list(handles), loc="outside lower center",
                   ncols=min(4, max(len(handles), 1)), fontsize="small")  # fmt: skip
    return fig


def plot_tradeoff(
    certificate: Any,
    *,
    truth: Any = None,
    truth_label: str = "population truth",
    ax: Axes | None = None,
    title: str | None = None,
) -> Figure:
    """Draw a certified trade-off curve: the true curve lies on or below it, at 1 − α.

    Parameters
    ----------
    certificate : ScoreCertificate
        A :func:`idaudit.certify.certify_scores` result. A ``"multisplit"`` result
        (:class:`~idaudit.certify.MultiSplitCertificate`) gets no certified curve: its points,
        one per split, each hold alone at 1 − α/2, not jointly, so they are drawn faintly
        and labelled "per split, not joint".
    truth : callable or (array_like, array_like), optional
        The true trade-off function of a benchmark mechanism, as ``f(x)`` (e.g.
        ``lambda x: idaudit.dp.gdp_tradeoff(x, mu)``) or as points ``(x, f(x))``.
    truth_label : str, default "population truth"
    ax : matplotlib Axes, optional
    title : str, optional

    Returns
    -------
    matplotlib.figure.Figure

    Notes
    -----
    Each certified point ``(FPR_u, FNR_u)`` bounds a test whose true rates are at most those
    values, so the true trade-off function ``f`` (the least FNR at each FPR) has
    ``f(FPR_u) ≤ FNR_u``; ``f`` is convex and non-increasing with ``f(0) ≤ 1`` and
    ``f(1) = 0``, so it lies below the lower convex hull of the points with ``(0, 1)`` and
    ``(1, 0)``: that hull is drawn as the certified curve, which needs all points to hold
    jointly — true of every strategy but ``"multisplit"``, whose per-split points hold one
    at a time (a hull through them fails far more often than α). The diagonal ``1 − x`` is
    perfect privacy.
    """
    x = np.concatenate(([0.0], np.asarray(certificate.fpr_upper, dtype=np.float64), [1.0]))
    y = np.concatenate(([1.0], np.asarray(certificate.fnr_upper, dtype=np.float64), [0.0]))
    fig, ax = _one_axes(ax, figsize=(5.2, 5.0))
    grid_x = np.linspace(0.0, 1.0, 401)
    ax.plot(grid_x, 1.0 - grid_x, ":", color="0.5", label="perfect privacy (1 − x)")
    if certificate.strategy == "multisplit":  # a MultiSplitCertificate: no joint points
        ax.plot(
            x[1:-1],
            y[1:-1],
            ".",
            ms=4,
            color="0.5",
            alpha=0.35,
            label=f"per split, not joint (each alone at 1 − α/2 = {1 - certificate.alpha / 2:g})",
        )
    else:
        hx, hy = _lower_hull(x, y)
        ax.plot(
            hx,
            hy,
            "-",
            color="k",
            lw=2,
            label=f"certified ({certificate.strategy}, 1 − α = {1 - certificate.alpha:g})",
        )
        ax.plot(x[1:-1], y[1:-1], ".", ms=3, color="k", alpha=0.4, label="certified points")
    if truth is not None:
        tx, ty = (grid_x, truth(grid_x)) if callable(truth) else truth
        ax.plot(np.asarray(tx), np.asarray(ty), "--", color="C3", lw=1.5, label=truth_label)
    ax.set_xlim(0.0, 1.0)
    ax.set_ylim(0.0, 1.0)
    ax.set_aspect("equal")
    ax.set_xlabel("false-positive rate (type I error)")
    ax.set_ylabel("false-negative rate (type II error)")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize="small", loc="upper right")
    if title is not None:
        ax.set_title(title)
    return fig


def _lower_hull(
    x: npt.NDArray[np.float64], y: npt.NDArray[np.float64]
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """Lower convex hull of the points (monotone chain), left to right."""
    ux, first = np.unique(x, return_inverse=True)
    uy = np.full(ux.size, np.inf)
    np.minimum.at(uy, first, y)  # only the lowest point at each x can be on the lower hull
    hull: list[tuple[float, float]] = []
    for px, py in zip(ux.tolist(), uy.tolist(), strict=True):
        while len(hull) >= 2:
            (ax_, ay), (bx, by) = hull[-2], hull[-1]
            if (bx - ax_) * (py - ay) - (by - ay) * (px - ax_) <= 0.0:  # not a left turn
                hull.pop()
            else:
                break
        hull.append((px, py))
    return np.array([p[0] for p in hull]), np.array([p[1] for p in hull])


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
