"""Figures of face anonymisers: ε and rates against strength, and contact sheets of images."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from idaudit.plotting._style import _epsilon_axis, _legend_below, _legend_handles, _new_axes

if TYPE_CHECKING:
    from matplotlib.figure import Figure


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
    handles = _legend_handles(grid.ravel())
    title = (
        "ringed: at the ceiling, the most that zero test errors certify at these test "
        "sizes, so the test size, not the anonymiser, sets the value"
        if ceilings
        else None
    )
    _legend_below(fig, handles, ncols=min(3, max(len(handles), 1)), title=title,
                  title_fontsize="small")  # fmt: skip
    return fig


def _strength_name(part: Any) -> str:
    """Return the ``strength_name`` of a table slice, or ``"strength"``."""
    if "strength_name" in getattr(part, "columns", ()):
        return str(part["strength_name"].iloc[0])
    return "strength"


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
