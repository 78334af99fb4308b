"""The whole demo: part one (faces), part two (calibrated noise), one report."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import xarray as xr

from idaudit._results import private_dir, write_netcdf, write_text
from idaudit.demo._config import QUICK, DemoConfig
from idaudit.demo._faces import FaceDemoResult, run_face_demo
from idaudit.demo._noise import (
    combine_sweeps,
    curve_figure,
    demo_identities,
    noise_figure,
    noise_sweeps,
    write_figure,
)
from idaudit.demo._private import PrivateDemoResult, private_section, run_private_demo
from idaudit.demo._report import demo_report

__all__ = ["QUICK", "DemoConfig", "DemoResult", "run_demo"]


@dataclass(frozen=True)
class DemoResult:
    """What :func:`run_demo` wrote and how long it took.

    Attributes
    ----------
    out_dir : pathlib.Path
        The output folder.
    report : pathlib.Path
        ``report.md``.
    results : pathlib.Path
        ``results.nc``, the calibrated-noise part per pair.
    figure : pathlib.Path
        ``noise_sweep.png``.
    seconds : float
        Runtime of the whole demo.
    dataset : xarray.Dataset
        What ``results.nc`` holds, dims (mechanism, noise_sd, pair).
    faces : FaceDemoResult or None
        The faces part (its files are in ``faces.files``).
    curve_figure : pathlib.Path or None
        ``epsilon_curve.png``: the certified ε(δ) curves of part two against the truth.
    private : PrivateDemoResult or None
        Part three, the private swap (``private_swap.nc``, ``private_swap.png``).
    """

    out_dir: Path
    report: Path
    results: Path
    figure: Path
    seconds: float
    dataset: xr.Dataset = field(repr=False)
    faces: FaceDemoResult | None = field(default=None, repr=False)
    curve_figure: Path | None = None
    private: PrivateDemoResult | None = field(default=None, repr=False)


def run_demo(
    out_dir: str | os.PathLike[str],
    *,
    config: DemoConfig | None = None,
    progress: bool = True,
) -> DemoResult:
    """Run both parts of the demo and write the report, results and figures.

    Part one (:func:`run_face_demo`) audits anonymisers on synthetic faces; part two runs the
    calibrated-noise sweep under both noise mechanisms (seed 000, Section 5.2).

    Parameters
    ----------
    out_dir : path
        Output folder, created owner-only (missing parents too) if missing.
    config : DemoConfig, optional
        Sizes (default: :class:`DemoConfig`; :data:`QUICK` for a test-sized run).
    progress : bool, default True
        Show progress bars.

    Returns
    -------
    DemoResult

    Examples
    --------
    >>> from idaudit.demo import QUICK, run_demo
    >>> result = run_demo("idaudit-demo", config=QUICK, progress=False)  # doctest: +SKIP
    >>> print(result.report.read_text())  # doctest: +SKIP
    """
    cfg = config or DemoConfig()
    start = time.perf_counter()
    out = private_dir(out_dir, name="out_dir")
    faces = run_face_demo(out, cfg.faces, progress=progress)
    base = demo_identities(cfg.n_identities, cfg.dim)
    sd = np.asarray(cfg.noise_sd, dtype=np.float64)
    sweeps = noise_sweeps(
        base, sd, n_pairs=cfg.n_pairs, n_per_identity=cfg.n_per_identity, progress=progress
    )
    ds = combine_sweeps(sweeps, sd)
    private = None if cfg.private is None else run_private_demo(out, cfg.private, progress=progress)
    seconds = time.perf_counter() - start
    ds.attrs["runtime_seconds"] = round(seconds, 1)

    results = out / "results.nc"
    figure = out / "noise_sweep.png"
    report = out / "report.md"
    write_netcdf(ds, results)
    write_figure(noise_figure(sweeps), figure)
    curve = out / "epsilon_curve.png"
    write_figure(curve_figure(sweeps), curve)
    text = demo_report(faces, ds, cfg, seconds)
    if private is not None:
        text += "\n" + private_section(private)
    write_text(text, report)
    return DemoResult(out, report, results, figure, seconds, ds, faces, curve, private)
