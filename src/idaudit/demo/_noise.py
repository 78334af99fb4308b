"""Part two of the demo: the calibrated-noise benchmark, where every pair's true ε is known.

Seed 000, Section 5.2: point identities on the unit sphere plus Gaussian or Laplace noise, so
the truth each audit is checked against is exact.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
import xarray as xr

from idaudit._results import atomic_path, variable
from idaudit.data import EmbeddingSet

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = [
    "DEMO_SEED",
    "combine_sweeps",
    "curve_figure",
    "demo_identities",
    "noise_figure",
    "noise_sweeps",
    "write_figure",
]

#: Seed of everything the demo draws (the identity set, pairs, noise, folds).
DEMO_SEED = 20260817


def demo_identities(n_identities: int = 24, dim: int = 16, *, rng: int = DEMO_SEED) -> EmbeddingSet:
    """Build the demo's synthetic identity set: one point per identity on the unit sphere.

    Parameters
    ----------
    n_identities : int, default 24
        Number of identities, labelled ``"id00"``, ``"id01"``, ...
    dim : int, default 16
        Embedding dimension.
    rng : int, default DEMO_SEED
        Seed; the set is a deterministic function of the three arguments.

    Returns
    -------
    EmbeddingSet
        ``n_identities`` rows, standard-normal directions L2-normalised onto the unit sphere
        (the paper's embedding geometry, seed 000 Section 4.1). A point base makes every pair's
        true ε exact under :class:`~idaudit.mechanisms.GaussianNoise` and
        :class:`~idaudit.mechanisms.LaplaceNoise`.
    """
    x = np.random.default_rng(rng).standard_normal((n_identities, dim))
    labels = np.asarray([f"id{i:02d}" for i in range(n_identities)])
    return EmbeddingSet(x, labels)


def noise_sweeps(
    base: EmbeddingSet,
    noise_sd: np.ndarray,
    *,
    n_pairs: int,
    n_per_identity: int,
    progress: bool = True,
) -> dict[str, xr.Dataset]:
    """Run :func:`idaudit.benchmark.noise_sweep` under Gaussian and Laplace noise.

    Parameters
    ----------
    base : EmbeddingSet
        The identities' points (:func:`demo_identities`).
    noise_sd : numpy.ndarray, shape (n_levels,)
        Per-coordinate noise standard deviations; the Laplace scale is ``noise_sd / sqrt(2)``,
        the same standard deviation.
    n_pairs : int
        Identity pairs audited at each level.
    n_per_identity : int
        Draws per identity at each level.
    progress : bool, default True
        Show progress bars.

    Returns
    -------
    dict of str to xarray.Dataset
        ``{"gaussian": ..., "laplace": ...}``, each ``noise_sweep``'s Dataset (seed
        :data:`DEMO_SEED`).
    """
    from idaudit.benchmark import noise_sweep

    sd = np.asarray(noise_sd, dtype=np.float64)
    common: dict[str, Any] = {
        "n_pairs": n_pairs,
        "n_per_identity": n_per_identity,
        "rng": DEMO_SEED,
        "progress": progress,
    }
    return {
        "gaussian": noise_sweep(base, sd, mechanism="gaussian", **common),
        "laplace": noise_sweep(base, sd / math.sqrt(2.0), mechanism="laplace", **common),
    }


def combine_sweeps(sweeps: dict[str, xr.Dataset], sd: np.ndarray) -> xr.Dataset:
    """Join the per-mechanism sweeps into one Dataset, dims (mechanism, noise_sd, pair).

    Parameters
    ----------
    sweeps : dict of str to xarray.Dataset
        :func:`noise_sweeps`' output.
    sd : numpy.ndarray, shape (n_levels,)
        The noise standard deviations, the new ``noise_sd`` coordinate (each sweep's own
        ``scale`` is kept as ``mechanism_scale``).

    Returns
    -------
    xarray.Dataset
        The sweeps along ``mechanism``; attrs say how many certificate families there are.
    """
    parts = []
    for ds in sweeps.values():
        part = ds.assign_coords(noise_sd=("scale", sd)).swap_dims(scale="noise_sd")
        part = part.rename_vars(scale="mechanism_scale")
        part["mechanism_scale"].attrs = {"long_name": str(ds.attrs["scale_name"])}
        part["reference_delta"] = variable(
            (),
            float(ds.attrs["reference_delta"]),
            long_name="delta at which true_epsilon is stated",
            status="reference",
        )
        parts.append(part)
    combined = xr.concat(
        parts,
        dim=pd.Index(list(sweeps), name="mechanism"),
        data_vars="all",
        coords="different",
        compat="equals",
        join="exact",
        combine_attrs="drop_conflicts",
    )
    combined["noise_sd"].attrs["long_name"] = "per-coordinate noise standard deviation"
    for key in ("mechanism", "scale_name", "reference_delta", "truth_kind"):
        combined.attrs.pop(key, None)
    combined.attrs["benchmark"] = "idaudit demo: calibrated noise sweep (seed 000, Section 5.2)"
    combined.attrs["base"] = "demo_identities: one point per identity on the unit sphere"
    # each sweep certifies every scale as its own family (noise_sweep, Notes)
    combined.attrs["certificate_families"] = len(sweeps) * combined.sizes["noise_sd"]
    combined.attrs["certificate_family"] = (
        "one per (mechanism, noise_sd), each holding with probability >= 1 - certifier.alpha"
    )
    return combined


def noise_figure(sweeps: dict[str, xr.Dataset]) -> Figure:
    """Draw each mechanism's sweep side by side (``noise_sweep.png``).

    Parameters
    ----------
    sweeps : dict of str to xarray.Dataset
        :func:`noise_sweeps`' output.

    Returns
    -------
    matplotlib.figure.Figure
        ε panels above ROC AUC panels, one column per mechanism, and one legend below all
        panels (it covers no line or band).
    """
    from matplotlib.figure import Figure

    from idaudit.plotting import plot_noise_sweep

    fig = Figure(figsize=(12.0, 7.4), layout="constrained")
    grid = fig.subplots(2, 2, sharex="col", height_ratios=[3, 1])
    titles = {
        "gaussian": "Gaussian noise: truth ε(δ=1e-5)",
        "laplace": "Laplace noise: truth = pure ε",
    }
    for col, (name, ds) in enumerate(sweeps.items()):
        plot_noise_sweep(
            ds, axes=(grid[0, col], grid[1, col]), title=titles.get(name, name), legend=False
        )
    handles, labels = grid[0, 0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncols=4, fontsize="small")
    return fig


def curve_figure(sweeps: dict[str, xr.Dataset]) -> Figure:
    """Draw each mechanism's certified ε(δ) curves against the truth (``epsilon_curve.png``).

    Parameters
    ----------
    sweeps : dict of str to xarray.Dataset
        :func:`noise_sweeps`' output.

    Returns
    -------
    matplotlib.figure.Figure
        One row per mechanism, one panel per noise level (no curve hides another), one
        legend below all panels.
    """
    from matplotlib.figure import Figure

    from idaudit.plotting import plot_epsilon_curve

    n_levels = max(ds.sizes[next(d for d in ds["certified_epsilon_curve"].dims if d != "delta")]
                   for ds in sweeps.values())  # fmt: skip
    fig = Figure(figsize=(2.8 * n_levels, 3.0 * len(sweeps) + 0.8), layout="constrained")
    grid = fig.subplots(len(sweeps), n_levels, squeeze=False)
    for row, (name, ds) in zip(grid, sweeps.items(), strict=True):
        plot_epsilon_curve(ds, axes=list(row), legend=False)
        row[0].set_ylabel(f"{name.capitalize()} noise\n{row[0].get_ylabel()}")
    handles: dict[str, Any] = {}
    for ax in grid.ravel():
        for handle, label in zip(*ax.get_legend_handles_labels(), strict=True):
            handles.setdefault(label, handle)
    fig.legend(list(handles.values()), list(handles), loc="outside lower center", ncols=4,
               fontsize="small")  # fmt: skip
    fig.suptitle("Certified ε(δ) (blue) against the true ε(δ) (black), one panel per noise level")
    return fig


def write_figure(fig: Figure, path: Path) -> None:
    """Write ``fig`` (:func:`noise_figure`'s or :func:`curve_figure`'s) atomically to ``path``.

    Parameters
    ----------
    fig : matplotlib.figure.Figure
        The figure.
    path : pathlib.Path
        The PNG file, drawn at 120 dpi.
    """
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format="png", dpi=120)
