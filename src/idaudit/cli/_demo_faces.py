"""``idaudit demo``, faces part: anonymisers audited on synthetic DCGAN identities with dlib."""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import xarray as xr

from idaudit._results import EPSILON_STATUSES, reduction_attrs, write_atomic, write_csv

__all__ = ["FACES_QUICK", "FaceDemoConfig", "FaceDemoResult", "run_face_demo"]

#: Seed of everything the faces demo draws.
FACE_SEED = 20260818


@dataclass(frozen=True)
class FaceDemoConfig:
    """Sizes of the faces part of the demo."""

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

#: Plain-language reading of each method's numbers (report.md).
METHOD_TEXT = {
    "none": (
        "**No anonymisation** — the source faces themselves, detected, aligned and encoded. "
        "This is the ceiling: every identity is told apart from every other (ROC AUC near 1, "
        "top-1 identification near 100 %). It says the encoder sees these synthetic people as "
        "distinct, which every other row depends on."
    ),
    "blur": (
        "**Gaussian blur** — smears the face. To a human the face looks hidden, and finding "
        "a blurred face among the original photos gets harder as σ grows (top-1 "
        "identification falls). But the blurred faces of one person still look alike to the "
        "recogniser and unlike another person's: the audits' ε stays far from 0 and the ROC "
        "AUC near 1. Identity-level DP asks the second question — can the released images "
        "of two people be told apart — so a low re-identification rate against the "
        "originals is not evidence of privacy."
    ),
    "pixelate": (
        "**Pixelation** — replaces the face by a coarse mosaic. It removes more identity than "
        "blur at these settings, yet the mosaics of one person still resemble each other more "
        "than another person's: a positive ε here means someone holding several pixelated "
        "images can still tell identities apart above chance. It does not mean the person can "
        "be named from one mosaic; the linkage columns say how often that works."
    ),
    "swap": (
        "**Latent face swap** — every face is moved a fraction `mix` of the way to one fixed "
        "donor face in the generator's latent space (seed 000's FaceFusion set-up with one "
        "donor). At `mix = 1` every output is the donor and nothing of the source identity "
        "remains (ε = 0 exactly); below that, what is left of the source identity is what the "
        "audit measures. The numbers are lower bounds and estimates for *this* synthetic "
        "generator, not for a production face swap."
    ),
}


@dataclass(frozen=True)
class FaceDemoResult:
    """What :func:`run_face_demo` computed and wrote."""

    results: xr.Dataset
    table: pd.DataFrame
    certificates: dict[str, xr.Dataset]
    linkage: pd.DataFrame
    lost: pd.DataFrame
    controls: xr.Dataset | None
    n_encoded: int
    seconds: float
    files: dict[str, Path]


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
    out: Path,
    cfg: FaceDemoConfig,
    *,
    progress: bool = True,
    say: Callable[[str], None] | None = None,
) -> FaceDemoResult:
    """Audit blur, pixelation and a latent face swap on synthetic faces; write files to ``out``.

    Identities: :func:`idaudit.faces.synthetic_identities` from the shipped DCGAN (made-up
    people, kept apart in dlib's embedding space). Detection: MTCNN on the
    original (enlarged) frames; the same crop is cut from every anonymised frame (paired
    mode). Encoder: dlib's ResNet (its torch port, one thread per core not already busy).
    Embeddings are cached under ``out/.cache``.
    """
    from idaudit import ReservedTestCertifier
    from idaudit._device import default_threads, thread_limit
    from idaudit.certify import sanity_controls
    from idaudit.faces import (
        EmbeddingCache,
        ShippedFaceGenerator,
        TorchDlibEncoder,
        synthetic_identities,
    )

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


def _fmt(x: float) -> str:
    if np.isnan(x):
        return "–"
    if np.isinf(x):
        return "inf"
    return f"{x:.3g}"


def _certified_status(table: pd.DataFrame) -> str:
    """Return the status of the table's ``certified_max`` column, in words."""
    return str(table.attrs.get("certified_max_status", "status unknown")).replace("_", " ")


def markdown_table(table: pd.DataFrame) -> list[str]:
    """Return the demo's main table as markdown lines (statuses in the second header row)."""
    head = [
        "condition",
        "faces lost",
        "top-1 identification [95% CI]",
        "same-person match (d < 0.6) [95% CI]",
        "GaussMech",
        "KDE-LR",
        "MMD-TV",
        "MMD hockey-stick",
        "ROC AUC",
        "ROC-HT OOF = inf",
        "certified ε (max)",
    ]
    status = [
        "",
        "descriptive",
        "sample estimate",
        "sample estimate",
        "diagnostic",
        "diagnostic",
        "sample estimate",
        "sample estimate",
        "sample estimate",
        "diagnostic",
        _certified_status(table),
    ]
    lines = [
        "| " + " | ".join(head) + " |",
        "|" + "---|" * len(head),
        "| " + " | ".join(f"*{s}*" if s else "" for s in status) + " |",
    ]
    for r in table.itertuples():
        lines.append(
            "| "
            + " | ".join(
                [
                    str(r.condition),
                    str(r.faces_lost),
                    f"{r.top1_rate:.0%} [{r.top1_low:.0%}, {r.top1_high:.0%}]",
                    f"{r.match_rate:.0%} [{r.match_low:.0%}, {r.match_high:.0%}]",
                    _fmt(r.gaussmech_median),
                    _fmt(r.kdelr_median),
                    _fmt(r.mmdtv_median),
                    _fmt(r.mmdtv_hs_median),
                    _fmt(r.rocht_auc_median),
                    f"{r.rocht_inf}/{r.n_pairs}",
                    _fmt(r.certified_max),
                ]
            )
            + " |"
        )
    return lines


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
