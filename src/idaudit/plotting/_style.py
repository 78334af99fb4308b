"""The figures' shared style: route colours and names, axes, the ε axis, legends, intervals."""

from __future__ import annotations

import warnings
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, cast

import numpy as np
import numpy.typing as npt

if TYPE_CHECKING:
    import xarray as xr
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

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


def _by_scale(ds: xr.Dataset, name: str) -> npt.NDArray[np.float64]:
    """Return the values of the noise-sweep variable ``name`` as an array (scale, pair)."""
    return np.asarray(ds[name].transpose("scale", "pair").values, dtype=np.float64)


def _error_bars(
    value: npt.NDArray[np.float64], lo: npt.NDArray[np.float64], hi: npt.NDArray[np.float64]
) -> npt.NDArray[np.float64]:
    """Return the lengths of interval bars below and above each value, shape (2, n).

    An end on the wrong side of its value (a rounding of the bound) gives a bar of length 0,
    never a negative one (matplotlib refuses those).
    """
    return np.clip(np.vstack([value - lo, hi - value]), 0.0, None)


def _legend_handles(axes: Iterable[Axes]) -> dict[str, Any]:
    """Return each legend label drawn on ``axes`` once, with its first handle."""
    handles: dict[str, Any] = {}
    for ax in axes:
        for handle, label in zip(*ax.get_legend_handles_labels(), strict=True):
            handles.setdefault(label, handle)
    return handles


def _legend_below(fig: Figure, handles: dict[str, Any], *, ncols: int, **kwargs: Any) -> None:
    """Draw one legend of ``handles`` (label → handle) under the panels of ``fig``."""
    fig.legend(list(handles.values()), list(handles), loc="outside lower center", ncols=ncols,
               fontsize="small", **kwargs)  # fmt: skip
