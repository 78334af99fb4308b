"""Part one of the demo: anonymisers audited on synthetic DCGAN identities with dlib."""

from __future__ import annotations

import os
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
import xarray as xr

from idaudit._results import (
    private_dir,
    reduction_attrs_across,
    write_atomic,
    write_csv,
)
from idaudit.audits._tables import ceiling_reached

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = [
    "FACES_QUICK",
    "FACE_SEED",
    "FaceDemoConfig",
    "FaceDemoResult",
    "run_face_demo",
    "strength_figure",
]

#: Seed of everything the faces demo draws.
FACE_SEED = 20260818


@dataclass(frozen=True)
class FaceDemoConfig:
    """Sizes of the faces part of the demo.

    Parameters
    ----------
    n_identities : int, default 6
        Synthetic identities drawn from the shipped DCGAN.
    n_per_identity : int, default 60
        Images per identity.
    n_pairs : int, default 15
        Identity pairs audited (the same pairs under every anonymiser; 15 is every pair of
        six identities).
    blur_sigmas : tuple of float, default (1.5, 3.0)
        Gaussian blur strengths, in pixels of the 64-pixel face.
    pixel_blocks : tuple of int, default (4, 8, 16)
        Pixelation block sizes, in pixels of the 64-pixel face (16: a 4 × 4 mosaic, the
        one setting here whose test faces are misclassified often enough that its largest
        certificate falls below the zero-error ceiling).
    swap_mixes : tuple of float, default (0.25, 0.5, 0.75)
        Fractions of the way to the donor face in the generator's latent space.
    n_select : int, default 3
        Vertex-disjoint pairs the reserved-test certifier certifies per anonymiser.
    test_size : float, default 0.5
        Share of each identity's faces the certifier reserves for its test. Zero test errors
        on ``m`` test rows per identity certify at most ``log((1 - u) / u)`` with
        ``u = 1 - (α / (2 n_select n_conditions))^(1/m)`` (the conditions are certified as
        one family, so that the column of largest certificates holds jointly): 1.34 at
        ``m = 30``, ``n_select = 3`` and the 9 conditions of the default. With too few test
        rows every condition stops at the same small ceiling and the certificate cannot
        tell anonymisers apart.
    min_separation : float, default 0.4
        Least distance between identity centres in dlib's unit-norm embedding space.
    """

    n_identities: int = 6
    n_per_identity: int = 60
    n_pairs: int = 15
    blur_sigmas: tuple[float, ...] = (1.5, 3.0)
    pixel_blocks: tuple[int, ...] = (4, 8, 16)
    swap_mixes: tuple[float, ...] = (0.25, 0.5, 0.75)
    n_select: int = 3
    test_size: float = 0.5
    min_separation: float = 0.4


#: A small configuration for tests (``idaudit demo --quick``).
FACES_QUICK = FaceDemoConfig(
    n_identities=4,
    n_per_identity=20,
    n_pairs=6,
    blur_sigmas=(3.0,),
    pixel_blocks=(8,),
    swap_mixes=(0.5,),
    n_select=2,
)


@dataclass(frozen=True)
class FaceDemoResult:
    """What :func:`run_face_demo` computed and wrote.

    Attributes
    ----------
    results : xarray.Dataset
        Per condition and pair: every audit variable, faces lost per identity, coords
        ``method`` and ``strength`` (written as ``faces_results.nc``).
    table : pandas.DataFrame
        One row per condition: losses, re-identification rates, audit medians, the median
        within-identity spread and between-centroid distance of the embeddings, the largest
        certificate with its zero-error ceiling (``certified_ceiling``; ``certified_at_ceiling``
        as :func:`idaudit.audits.ceiling_reached` decides) and how many certified pairs sit at their
        ceiling; ``table.attrs["certified_max_status"]`` is the derived status of the
        ``certified_max`` column.
    certificates : dict of str to xarray.Dataset
        The reserved-test certificates of each condition.
    linkage : pandas.DataFrame
        Re-identification rates per condition (empty when there was nothing to link).
    lost : pandas.DataFrame
        Source images without a detectable face, identity by condition.
    controls : xarray.Dataset or None
        Split-half sanity controls on the unanonymised faces (None when no identity has ten
        usable faces).
    n_encoded : int
        Faces encoded in this run (0 when every embedding came from the cache).
    seconds : float
        Wall time of the run.
    files : dict of str to pathlib.Path
        The files written, by role.
    n_cached : int, default 0
        Draws whose result (a face's embedding, or no face) was read from the cache.
    """

    results: xr.Dataset
    table: pd.DataFrame
    certificates: dict[str, xr.Dataset]
    linkage: pd.DataFrame
    lost: pd.DataFrame
    controls: xr.Dataset | None
    n_encoded: int
    seconds: float
    files: dict[str, Path]
    n_cached: int = 0

    @property
    def top1_chance(self) -> float:
        """Top-1 chance rate: one over the identities the linkage searched (the common ones)."""
        if "chance" in self.linkage:
            return float(self.linkage["chance"].iloc[0])
        return 1 / max(len(self.lost), 1)


def _conditions(cfg: FaceDemoConfig, gen: Any, ids: Any) -> dict[str, tuple[str, float, Any]]:
    from idaudit.pipeline import GaussianBlur, LatentFaceSwap, Pixelate

    def identity_map(image: Any) -> Any:
        return image

    conditions: dict[str, tuple[str, float, Any]] = {"none": ("none", 0.0, identity_map)}
    for s in cfg.blur_sigmas:
        conditions[f"blur σ={s:g}"] = ("blur", float(s), GaussianBlur(s))
    for b in cfg.pixel_blocks:
        conditions[f"pixelate {b}px"] = ("pixelate", float(b), Pixelate(b))
    donor = gen.sample_latents(1, rng=FACE_SEED + 1)[0]
    for m in cfg.swap_mixes:
        swap = LatentFaceSwap(gen, donor, m, latents=(ids.images, ids.latents))
        conditions[f"swap mix={m:g}"] = ("swap", float(m), swap)
    return conditions


def run_face_demo(
    out_dir: str | os.PathLike[str],
    config: FaceDemoConfig | None = None,
    *,
    progress: bool = True,
) -> FaceDemoResult:
    """Audit blur, pixelation and a latent face swap on synthetic faces; write the files.

    Identities: :func:`idaudit.faces.synthetic_identities` from the shipped DCGAN (made-up
    people, kept apart in dlib's embedding space). Detection: MTCNN on the
    original (enlarged) frames; the same crop is cut from every anonymised frame (paired
    mode). Encoder: dlib's ResNet (its torch port, one thread per core not already busy).

    Parameters
    ----------
    out_dir : path
        Output folder, created owner-only (missing parents too) if missing. Embeddings are
        cached under ``out_dir/.cache``, so a re-run encodes nothing.
    config : FaceDemoConfig, optional
        Sizes (default: :class:`FaceDemoConfig`; :data:`FACES_QUICK` for a test-sized run).
    progress : bool, default True
        Show progress bars.

    Returns
    -------
    FaceDemoResult
        The results, the table, the certificates and the files written (``faces_results.nc``,
        ``faces_pairs.csv``, ``faces_table.csv``, ``linkage.csv``, ``faces_lost.csv``,
        ``faces_certificates.csv``, ``epsilon_vs_strength.png``, ``contact_sheet.png`` and,
        with controls, ``faces_controls.nc``).

    Examples
    --------
    >>> from idaudit.demo import FACES_QUICK, run_face_demo
    >>> result = run_face_demo("demo-out", FACES_QUICK, progress=False)  # doctest: +SKIP
    >>> result.table[["condition", "top1_rate", "mmdtv_median"]]  # doctest: +SKIP
    """
    from idaudit._device import default_threads, thread_limit
    from idaudit.certify import ReservedTestCertifier, sanity_controls
    from idaudit.faces import (
        EmbeddingCache,
        ShippedFaceGenerator,
        TorchDlibEncoder,
        synthetic_identities,
    )

    cfg = config or FaceDemoConfig()
    out = private_dir(out_dir, name="out_dir")
    start = time.perf_counter()
    with thread_limit(default_threads()):
        gen = ShippedFaceGenerator()
        encoder = TorchDlibEncoder()
        ids = synthetic_identities(
            cfg.n_identities,
            cfg.n_per_identity,
            rng=FACE_SEED,
            generator=gen,
            encoder=encoder,  # type: ignore[arg-type]
            min_separation=cfg.min_separation,
        )
        images = {
            f"person{k:02d}": list(ids.images[ids.labels == k]) for k in range(cfg.n_identities)
        }
        conditions = _conditions(cfg, gen, ids)
        cache = EmbeddingCache(out / ".cache")
        certifier = ReservedTestCertifier(
            n_candidates=cfg.n_pairs,
            n_select=cfg.n_select,
            test_size=cfg.test_size,
            rng=FACE_SEED,
            progress=False,
        )
        with warnings.catch_warnings():
            # at small sizes the certifier warns that it can only certify 0; the report's
            # table shows those zeros and the text says why
            warnings.filterwarnings("ignore", message=".*can only certify epsilon_lb = 0")
            cmp = _compare(images, conditions, encoder, certifier, cache, cfg, progress)
        base = cmp.embeddings["none"].embeddings.subset(list(cmp.identities))
        enough = [k for k, n in base.counts.items() if n >= 10]
        controls = (
            sanity_controls(base, enough, n_permutations=200, rng=FACE_SEED, progress=False)
            if len(enough) >= 1
            else None
        )
        sheet = [ids.images[0]] + [
            c[2](ids.images[0], rng=np.random.default_rng(FACE_SEED))
            for name, c in conditions.items()
            if name != "none"
        ]
    names = list(conditions)
    ds = cmp.results.assign_coords(
        method=("condition", [conditions[n][0] for n in names]),
        strength=("condition", [conditions[n][1] for n in names]),
    )
    ds.attrs["identities"] = (
        "synthetic: synthetic_identities of the shipped DCGAN (made-up people), "
        f"seed {FACE_SEED}, min_separation {cfg.min_separation:g}"
    )
    spreads = {name: _spread(cmp.embeddings[name].embeddings, cmp.identities) for name in names}
    table = _table(ds, cmp.certificates, cmp.linkage, cmp.lost, names, spreads)
    n_encoded = sum(e.n_encoded for e in cmp.embeddings.values())
    n_cached = sum(int(e.counts["n_cached"].sum()) for e in cmp.embeddings.values())
    files = _write(out, ds, table, cmp, controls, sheet, ["source", *names[1:]])
    return FaceDemoResult(
        results=ds,
        table=table,
        certificates=cmp.certificates,
        linkage=cmp.linkage if cmp.linkage is not None else pd.DataFrame(),
        lost=cmp.lost,
        controls=controls,
        n_encoded=n_encoded,
        seconds=time.perf_counter() - start,
        files=files,
        n_cached=n_cached,
    )


def _compare(
    images: dict[str, list[Any]],
    conditions: dict[str, tuple[str, float, Any]],
    encoder: Any,
    certifier: Any,
    cache: Any,
    cfg: FaceDemoConfig,
    progress: bool,
) -> Any:
    from sklearn.base import clone

    from idaudit.faces import FacePipeline, MTCNNDetector
    from idaudit.pipeline import AuditSettings, DrawSettings, compare_conditions

    return compare_conditions(
        {name: c[2] for name, c in conditions.items()},
        images,
        models=FacePipeline(MTCNNDetector(), encoder, progress=False),
        cache=cache,
        rng=FACE_SEED,
        progress=progress,
        draws=DrawSettings(mode="paired"),
        audit=AuditSettings(pairs=cfg.n_pairs, certifier=clone(certifier), reference="none"),
    )


def _median(values: Any) -> float:
    """Median of the non-NaN values (NaN when there are none), the statistic of summarize."""
    v = np.asarray(values, dtype=np.float64)
    v = v[~np.isnan(v)]
    return float(np.median(v)) if v.size else float("nan")


def _spread(es: Any, identities: Any) -> tuple[float, float]:
    """Median within-identity spread and median distance between identity centroids.

    The spread of one identity is the mean Euclidean distance of its embeddings to their
    centroid; the report compares the two to tell whether an anonymiser pulls each
    identity's faces together faster than it pulls identities together.
    """
    from scipy.spatial.distance import pdist

    groups = [np.asarray(es.get(k), dtype=np.float64) for k in identities if k in es]
    groups = [g for g in groups if len(g)]
    if len(groups) < 2:
        return float("nan"), float("nan")
    centres = np.stack([g.mean(axis=0) for g in groups])  # (identities, dim)
    within = [
        float(np.linalg.norm(g - c, axis=1).mean()) for g, c in zip(groups, centres, strict=True)
    ]
    return float(np.median(within)), float(np.median(pdist(centres)))


def _certified(cert: xr.Dataset | None) -> tuple[float, float, int, int]:
    """Largest certificate, its pair's zero-error ceiling, pairs at their ceiling, pairs."""
    if cert is None or cert.sizes.get("pair", 0) == 0:
        return float("nan"), float("nan"), 0, 0
    lb = np.asarray(cert["epsilon_lb"].values, dtype=np.float64)
    if "epsilon_lb_ceiling" in cert:
        top = np.asarray(cert["epsilon_lb_ceiling"].values, dtype=np.float64)
    else:
        top = np.full_like(lb, np.nan)
    best = int(np.nanargmax(lb))
    at = int(ceiling_reached(lb, top).sum())
    return float(lb[best]), float(top[best]), at, int(lb.size)


def _table(
    ds: xr.Dataset,
    certs: dict[str, xr.Dataset],
    linkage: pd.DataFrame | None,
    lost: pd.DataFrame,
    names: list[str],
    spreads: dict[str, tuple[float, float]] | None = None,
) -> pd.DataFrame:
    rows = []
    for name in names:
        part = ds.sel(condition=name)
        rocht = np.asarray(part["rocht_epsilon"].values, dtype=np.float64)
        link = linkage.loc[name] if linkage is not None else None
        cert_max, ceiling, n_at, n_certified = _certified(certs.get(name))
        within, between = (spreads or {}).get(name, (np.nan, np.nan))
        rows.append(
            {
                "condition": name,
                "method": str(part["method"].values),
                "strength": float(part["strength"].values),
                "faces_lost": int(lost[name].sum()),
                "top1_rate": float(link["top1_rate"]) if link is not None else np.nan,
                "top1_low": float(link["top1_low"]) if link is not None else np.nan,
                "top1_high": float(link["top1_high"]) if link is not None else np.nan,
                "match_rate": float(link["match_rate"]) if link is not None else np.nan,
                "match_low": float(link["match_low"]) if link is not None else np.nan,
                "match_high": float(link["match_high"]) if link is not None else np.nan,
                "gaussmech_median": _median(part["gaussmech_epsilon"].values),
                "kdelr_median": _median(part["kdelr_epsilon"].values),
                "mmdtv_median": _median(part["mmdtv_epsilon"].values),
                "mmdtv_hs_median": _median(part["mmdtv_epsilon_hs"].values),
                "rocht_auc_median": _median(part["rocht_auc"].values),
                "rocht_inf": int(np.isposinf(rocht).sum()),
                "n_pairs": int(rocht.size),
                "mmdtv_bandwidth_median": _median(part["mmdtv_bandwidth"].values),
                "within_spread": within,
                "between_distance": between,
                "certified_max": cert_max,
                "certified_ceiling": ceiling,
                "certified_at_ceiling": bool(ceiling_reached(cert_max, ceiling)),
                "n_certified": n_certified,
                "n_certified_at_ceiling": n_at,
            }
        )
    frame = pd.DataFrame(rows)
    # the column is read across conditions (the figure draws it against the strength):
    # certified only when every pair of every condition holds jointly (one family)
    column = (
        reduction_attrs_across(
            [(c["epsilon_lb"].attrs, max(c.sizes["pair"], 1)) for c in certs.values()]
        )
        if certs
        else {"status": "certified_lower_bound"}
    )
    frame.attrs["certified_max_status"] = str(column["status"])
    if "status_reason" in column:
        frame.attrs["certified_max_status_reason"] = str(column["status_reason"])
    return frame


def _certified_status(table: pd.DataFrame) -> str:
    """Return the status of the table's ``certified_max`` column, in words."""
    return str(table.attrs.get("certified_max_status", "status unknown")).replace("_", " ")


def strength_figure(table: pd.DataFrame, n_identities: int) -> Figure:
    """Draw ``epsilon_vs_strength.png``: ε on one row of panels, AUC and rates on another.

    Parameters
    ----------
    table : pandas.DataFrame
        :attr:`FaceDemoResult.table` (one row per condition, ``none`` among them).
    n_identities : int
        Identities the linkage searched: the top-1 chance level is ``1 / n_identities``.

    Returns
    -------
    matplotlib.figure.Figure
        One column per anonymiser; top row the MMD-TV median and the largest certificate
        (ε axis from 0, linear or symmetric-log as the data's range asks; the certificate's
        zero-error ceiling dotted and values at it ringed), bottom row the median ROC AUC and
        the top-1 identification rate ([0, 1], chance levels dotted); the values without
        anonymisation are hollow diamonds at strength 0.
    """
    from idaudit.plotting import plot_strength

    anonymised = table[table["method"] != "none"]
    base = table[table["method"] == "none"].iloc[0]
    eps = {
        "mmdtv_median": "MMD-TV ε, median (sample estimate)",
        "certified_max": f"certified ε, max ({_certified_status(table)})",
    }
    rates = {
        "rocht_auc_median": "ROC AUC, median (sample estimate)",
        "top1_rate": "top-1 identification rate (sample estimate)",
    }
    n = max(int(n_identities), 1)
    return plot_strength(
        anonymised.assign(
            strength_name=anonymised["method"].map(
                {"blur": "σ (pixels)", "pixelate": "block (pixels)", "swap": "donor mix"}
            )
        ),
        columns=eps,
        rates=rates,
        baseline={c: float(base[c]) for c in [*eps, *rates]},
        chance={
            "top1_rate": (1 / n, f"chance of top-1 identification (1/{n})"),
            "rocht_auc_median": (0.5, "chance AUC (0.5)"),
        },
        ceilings={"certified_max": "certified_ceiling"},
    )


def _write(
    out: Path,
    ds: xr.Dataset,
    table: pd.DataFrame,
    cmp: Any,
    controls: xr.Dataset | None,
    sheet: list[Any],
    titles: list[str],
) -> dict[str, Path]:
    from idaudit._results import pair_frame, write_netcdf
    from idaudit.plotting import contact_sheet

    files = {
        "faces_results": out / "faces_results.nc",
        "faces_pairs": out / "faces_pairs.csv",
        "faces_table": out / "faces_table.csv",
        "linkage": out / "linkage.csv",
        "faces_lost": out / "faces_lost.csv",
        "certificates": out / "faces_certificates.csv",
        "epsilon_vs_strength": out / "epsilon_vs_strength.png",
        "contact_sheet": out / "contact_sheet.png",
    }
    write_netcdf(ds, files["faces_results"])
    write_csv(pair_frame(ds), files["faces_pairs"])
    write_csv(table, files["faces_table"])
    if cmp.linkage is not None:
        write_csv(cmp.linkage, files["linkage"], index=True)
    write_csv(cmp.lost, files["faces_lost"], index=True)
    cert_rows = [
        pair_frame(c).assign(condition=name)  # one row per pair (the ε(δ) curve stays in .nc)
        for name, c in cmp.certificates.items()
    ]
    if cert_rows:
        write_csv(pd.concat(cert_rows, ignore_index=True), files["certificates"])
    fig = strength_figure(table, len(cmp.identities))
    write_atomic(files["epsilon_vs_strength"], lambda p: fig.savefig(p, format="png", dpi=110))
    sheet_fig = contact_sheet(sheet, titles)
    write_atomic(files["contact_sheet"], lambda p: sheet_fig.savefig(p, format="png", dpi=110))
    if controls is not None:
        files["controls"] = out / "faces_controls.nc"
        write_netcdf(controls, files["controls"])
    return files
