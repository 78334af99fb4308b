"""Part one of the demo: anonymisers audited on synthetic DCGAN identities with dlib."""

from __future__ import annotations

import os
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import xarray as xr

from idaudit._results import (
    EPSILON_STATUSES,
    private_dir,
    reduction_attrs,
    write_atomic,
    write_csv,
)

__all__ = ["FACES_QUICK", "FACE_SEED", "FaceDemoConfig", "FaceDemoResult", "run_face_demo"]

#: Seed of everything the faces demo draws.
FACE_SEED = 20260818


@dataclass(frozen=True)
class FaceDemoConfig:
    """Sizes of the faces part of the demo.

    Parameters
    ----------
    n_identities : int, default 10
        Synthetic identities drawn from the shipped DCGAN.
    n_per_identity : int, default 24
        Images per identity.
    n_pairs : int, default 20
        Identity pairs audited (the same pairs under every anonymiser).
    blur_sigmas : tuple of float, default (1.5, 3.0)
        Gaussian blur strengths, in pixels of the 64-pixel face.
    pixel_blocks : tuple of int, default (4, 8)
        Pixelation block sizes, in pixels of the 64-pixel face.
    swap_mixes : tuple of float, default (0.25, 0.5, 0.75)
        Fractions of the way to the donor face in the generator's latent space.
    n_select : int, default 3
        Vertex-disjoint pairs the reserved-test certifier certifies per anonymiser.
    min_separation : float, default 0.4
        Least distance between identity centres in dlib's unit-norm embedding space.
    """

    n_identities: int = 10
    n_per_identity: int = 24
    n_pairs: int = 20
    blur_sigmas: tuple[float, ...] = (1.5, 3.0)
    pixel_blocks: tuple[int, ...] = (4, 8)
    swap_mixes: tuple[float, ...] = (0.25, 0.5, 0.75)
    n_select: int = 3
    min_separation: float = 0.4


#: A small configuration for tests (``idaudit demo --quick``).
FACES_QUICK = FaceDemoConfig(
    n_identities=5,
    n_per_identity=10,
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
        One row per condition: losses, re-identification rates, audit medians and the largest
        certificate; ``table.attrs["certified_max_status"]`` is the derived status of the
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
            n_candidates=cfg.n_pairs, n_select=cfg.n_select, rng=FACE_SEED, progress=False
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
    table = _table(ds, cmp.certificates, cmp.linkage, cmp.lost, names)
    n_encoded = sum(e.n_encoded for e in cmp.embeddings.values())
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
    from idaudit.pipeline import compare_conditions

    return compare_conditions(
        {name: c[2] for name, c in conditions.items()},
        images,
        pipeline=FacePipeline(MTCNNDetector(), encoder, progress=False),
        pairs=cfg.n_pairs,
        certifier=clone(certifier),
        reference="none",
        cache=cache,
        mode="paired",
        rng=FACE_SEED,
        progress=progress,
    )


def _median(values: Any) -> float:
    """Median of the non-NaN values (NaN when there are none), the statistic of summarize."""
    v = np.asarray(values, dtype=np.float64)
    v = v[~np.isnan(v)]
    return float(np.median(v)) if v.size else float("nan")


def _table(
    ds: xr.Dataset,
    certs: dict[str, xr.Dataset],
    linkage: pd.DataFrame | None,
    lost: pd.DataFrame,
    names: list[str],
) -> pd.DataFrame:
    rows = []
    for name in names:
        part = ds.sel(condition=name)
        rocht = np.asarray(part["rocht_epsilon"].values, dtype=np.float64)
        link = linkage.loc[name] if linkage is not None else None
        cert = certs.get(name)
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
                "certified_max": (
                    float(np.nanmax(cert["epsilon_lb"].values)) if cert is not None else np.nan
                ),
            }
        )
    frame = pd.DataFrame(rows)
    # each condition's largest certificate: certified when its pairs hold jointly
    statuses = {
        str(reduction_attrs(c["epsilon_lb"].attrs, max(c.sizes["pair"], 1))["status"])
        for c in certs.values()
    }
    frame.attrs["certified_max_status"] = min(
        statuses, key=EPSILON_STATUSES.index, default="certified_lower_bound"
    )
    return frame


def _certified_status(table: pd.DataFrame) -> str:
    """Return the status of the table's ``certified_max`` column, in words."""
    return str(table.attrs.get("certified_max_status", "status unknown")).replace("_", " ")


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
    from idaudit.plotting import contact_sheet, plot_strength

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
        c.to_dataframe().reset_index().assign(condition=name)
        for name, c in cmp.certificates.items()
    ]
    if cert_rows:
        write_csv(pd.concat(cert_rows, ignore_index=True), files["certificates"])
    anonymised = table[table["method"] != "none"]
    base = table[table["method"] == "none"].iloc[0]
    cols = {
        "mmdtv_median": "MMD-TV ε, median (sample estimate)",
        "certified_max": f"certified ε, max ({_certified_status(table)})",
        "rocht_auc_median": "ROC AUC, median",
        "top1_rate": "top-1 identification rate",
    }
    fig = plot_strength(
        anonymised.assign(
            strength_name=anonymised["method"].map(
                {"blur": "σ (pixels)", "pixelate": "block (pixels)", "swap": "donor mix"}
            )
        ),
        columns=cols,
        baseline={c: float(base[c]) for c in cols},
    )
    write_atomic(files["epsilon_vs_strength"], lambda p: fig.savefig(p, format="png", dpi=110))
    sheet_fig = contact_sheet(sheet, titles)
    write_atomic(files["contact_sheet"], lambda p: sheet_fig.savefig(p, format="png", dpi=110))
    if controls is not None:
        files["controls"] = out / "faces_controls.nc"
        write_netcdf(controls, files["controls"])
    return files
