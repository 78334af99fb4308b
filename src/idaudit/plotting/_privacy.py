"""Figures of the privacy check (seed 003): flagging rates and the NNAA privacy loss."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from idaudit.plotting._style import _error_bars, _legend_below, _new_axes

if TYPE_CHECKING:
    import pandas as pd
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

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
    _legend_below(fig, handles, ncols=2)
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
        err = np.nan_to_num(_error_bars(synth, lo, hi))
        bars = ax.errorbar(p * shift[0], synth, yerr=err, color=f"C{k}",
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
    _legend_below(fig, handles, ncols=2)
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
            err = _error_bars(loss, lo, hi)[:, with_ci]
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
        err = np.nan_to_num(_error_bars(value, lo, hi))
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
