"""A per-generator default attack radius: the largest one that keeps codes plausible."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
import xarray as xr

from idaudit._results import provenance, variable
from idaudit._validation import (
    RngLike,
    check_in_range,
    check_integer,
    check_option,
    check_random_state,
)
from idaudit.exceptions import InvalidInputError
from idaudit.inversion._attacks import APGD
from idaudit.inversion._bank import LatentBank, detection_scores
from idaudit.inversion._generators import LatentGenerator
from idaudit.inversion._normality import dagostino_k2
from idaudit.inversion._target import TargetModel, to_uint8
from idaudit.inversion._warp import FrameWarp

__all__ = ["RadiusCalibration", "calibrate_radius"]


@dataclass(frozen=True)
class RadiusCalibration:
    """Result of :func:`calibrate_radius`.

    Attributes
    ----------
    radius : float
        The largest radius whose pass rate is at least ``min_pass`` (``nan`` if none).
    table : xarray.Dataset
        Per radius: ``pass_rate``, ``k2_pass_rate``, ``detect_pass_rate``, ``gain`` (mean
        similarity gained by the attack) — sample estimates.
    """

    radius: float
    table: xr.Dataset = field(repr=False)


def calibrate_radius(
    generator: LatentGenerator,
    encoder: Any,
    bank: LatentBank,
    *,
    radii: Sequence[float],
    detector: Any = None,
    norm: str = "l2",
    n_codes: int = 16,
    t_max: int = 30,
    alpha_k: float = 0.05,
    tau_d: float | None = None,
    min_pass: float = 0.9,
    warp: FrameWarp | None = None,
    rng: RngLike = 0,
) -> RadiusCalibration:
    """Find the largest attack radius at which attacked bank codes still look like bank codes.

    For each radius, ``n_codes`` bank codes are attacked (APGD from the code itself,
    ``init="code"``, ``t_max`` steps, white-box) towards the embeddings of *other* bank
    images — in-distribution targets, none of them an evaluation target — and each attacked
    code passes when its K² p-value is at least ``alpha_k`` (still not distinguishable from
    Gaussian at that level) and its image is detected as a face with ``p_D ≥ tau_d`` (the
    bank's own ``tau_d`` by default). The calibrated radius is the largest with a pass rate
    ``≥ min_pass``.

    Parameters
    ----------
    generator, encoder, bank
        The prior, a differentiable encoder, and a bank of the prior.
    radii : sequence of float
        Candidate radii (> 0).
    detector : Detector, optional
        Default :class:`~idaudit.faces.MTCNNDetector`.
    norm : {"l2", "linf"}, default "l2"
    n_codes : int, default 16
    t_max : int, default 30
    alpha_k : float, default 0.05
    tau_d : float, optional
    min_pass : float, default 0.9
    warp : FrameWarp, optional
    rng : int, SeedSequence or Generator, default 0
        Chooses the codes and their targets.

    Returns
    -------
    RadiusCalibration
    """
    norm = check_option(norm, "norm", ("l2", "linf"))
    n_codes = check_integer(n_codes, "n_codes", minimum=1)
    t_max = check_integer(t_max, "t_max", minimum=1)
    alpha_k = check_in_range(alpha_k, "alpha_k", 0.0, 1.0)
    min_pass = check_in_range(min_pass, "min_pass", 0.0, 1.0, closed="right")
    tau_d = bank.tau_d if tau_d is None else check_in_range(tau_d, "tau_d", 0.0, 1.0, closed="both")
    rs = [check_in_range(r, "radii", 0.0, None) for r in radii]
    if not rs:
        raise InvalidInputError("`radii` must hold at least one radius.")
    if bank.volume < 2:
        raise InvalidInputError(f"`bank` must hold at least 2 codes; got {bank.volume}.")
    if detector is None:
        from idaudit.faces import MTCNNDetector

        detector = MTCNNDetector()
    gen = check_random_state(rng)
    n = min(n_codes, bank.volume)
    codes = gen.choice(bank.volume, size=n, replace=False)
    others = (codes + 1 + gen.integers(0, bank.volume - 1, size=n)) % bank.volume  # never itself
    model = TargetModel(generator, encoder, warp, white_box=True)
    targets = model.embed_pixels(bank.images[others]).to(generator.device)
    x0 = torch.from_numpy(bank.latents[codes]).to(generator.device)

    def objective(x: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
        return model.similarity(x, targets[rows])

    k2_rate, det_rate, both, gain = [], [], [], []
    for r in rs:
        # from the code itself: the gain is measured from the bank code, as in the runs
        # behind the DCGAN's default radius (docs/inversion.md)
        out = APGD(norm=norm, eps=r, t_max=t_max, init="code").run(objective, x0)  # type: ignore[arg-type]
        _, p_k = dagostino_k2(out.latents)
        with torch.no_grad():
            images = to_uint8(model.images(out.latents))
        p_d = detection_scores(detector, images)
        ok_k = p_k.cpu().numpy() >= alpha_k
        ok_d = p_d >= tau_d
        k2_rate.append(float(ok_k.mean()))
        det_rate.append(float(ok_d.mean()))
        both.append(float((ok_k & ok_d).mean()))
        gain.append(float((out.values - out.initial).mean()))
    rates = np.asarray(both)
    good = [r for r, p in zip(rs, rates, strict=True) if p >= min_pass]
    radius = max(good) if good else float("nan")
    table = xr.Dataset(
        {
            "pass_rate": variable(
                "radius", both, long_name="codes passing K2 and detection", status="sample_estimate"
            ),
            "k2_pass_rate": variable(
                "radius", k2_rate, long_name="codes with p_K >= alpha_k", status="sample_estimate"
            ),
            "detect_pass_rate": variable(
                "radius", det_rate, long_name="images with p_D >= tau_d", status="sample_estimate"
            ),
            "gain": variable(
                "radius",
                gain,
                long_name="mean similarity gained by the attack",
                status="sample_estimate",
            ),
        },
        coords={"radius": rs},
        attrs=provenance(
            title="calibrate_radius",
            seeds={"rng": rng if isinstance(rng, int) else None},
            settings={
                "norm": norm,
                "n_codes": n,
                "t_max": t_max,
                "alpha_k": alpha_k,
                "tau_d": tau_d,
                "min_pass": min_pass,
                "generator": generator.name,
            },
        ),
    )
    return RadiusCalibration(radius=float(radius), table=table)
