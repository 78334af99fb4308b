"""Figures of one audit: ROC curves, MMD² histograms, Figure 3, certificates, trade-offs."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from idaudit._results import reduction_attrs_across
from idaudit.plotting._style import _new_axes, _one_axes

if TYPE_CHECKING:
    import xarray as xr
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure


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
