"""What one privacy check found: :class:`PrivacyReport`, its typed parts, ``report.md``."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import xarray as xr

from idaudit._markdown import Bullet, number, table, verdict_section
from idaudit._results import json_text, variable
from idaudit.memorization import (
    FLAGGING_STATUS,
    MIN_INTERVAL_SIZE,
    NNAA_STATUS,
    NNAA_TEST_STATUS,
    flagging_smallest_p,
    nnaa_smallest_p,
    unresolved_percentiles,
)

__all__ = [
    "CacheUse",
    "InputListing",
    "ModelsUsed",
    "PrivacyReport",
    "PrivacySettings",
]


@dataclass(frozen=True)
class PrivacySettings:
    """The checked settings of one privacy check (``privacy_results.json["parameters"]``).

    Attributes
    ----------
    percentiles : tuple of float
        Operating points in (0, 100).
    n_bootstrap : int
        NNAA split-half draws behind the intervals (0: no intervals).
    max_samples, lpips_max_samples : int
        NNAA set caps for embeddings and for the appearance metric.
    n_permutations : int
        Permutations of the flagging p-value (0: none).
    nnaa_permutations : int
        Relabellings of the NNAA privacy-loss test (0: none).
    confidence_level : float
        Of every interval.
    duplicates : {"collapse", "keep"}
        How byte-identical files within one split and cohort count.
    aligned : bool
        The inputs are aligned face crops (no detection).
    subject_pattern : str or None
        Regex whose first group in a file name is the image's subject (permutations and
        split halves move whole subjects; the metric sanity check).
    threads : int
        CPU threads for torch and onnxruntime.
    device : str
        Torch device of the batched kernels.
    rng : int
        Seed of the permutations, subsets and bootstrap.
    subjects : str or None
        CSV mapping each real image (path relative to its split root, or file name) to its
        subject. Without it and ``subject_pattern`` each image is its own subject.
    percentile_method : {"order_statistic", "linear"}
        Definition of the held-out percentile behind the flagging thresholds.
    dlib_runtime : {"torch", "cpp"} or None
        What ran dlib's network; ``None`` when dlib was left out.
    progress : bool
        Whether a progress bar is shown; it changes no number, so it is not recorded.
    """

    percentiles: tuple[float, ...]
    n_bootstrap: int
    max_samples: int
    lpips_max_samples: int
    n_permutations: int
    confidence_level: float
    duplicates: str
    aligned: bool
    subject_pattern: str | None
    threads: int
    device: str
    rng: int
    subjects: str | None = None
    percentile_method: str = "order_statistic"
    nnaa_permutations: int = 999
    dlib_runtime: str | None = "torch"
    progress: bool = field(default=True, compare=False, repr=False)

    def to_dict(self) -> dict[str, Any]:
        """Return the settings as ``privacy_results.json["parameters"]`` records them."""
        return {
            "percentiles": list(self.percentiles),
            "n_bootstrap": self.n_bootstrap,
            "max_samples": self.max_samples,
            "lpips_max_samples": self.lpips_max_samples,
            "n_permutations": self.n_permutations,
            "confidence_level": self.confidence_level,
            "duplicates": self.duplicates,
            "aligned": self.aligned,
            "subject_pattern": self.subject_pattern,
            "threads": self.threads,
            "device": self.device,
            "rng": self.rng,
            "subjects": self.subjects,
            "percentile_method": self.percentile_method,
            "nnaa_permutations": self.nnaa_permutations,
            "dlib_runtime": self.dlib_runtime,
        }

    def to_xarray(self) -> xr.Dataset:
        """Return the percentiles as a coordinate and every other setting as an attribute.

        Booleans and ``None`` become strings so that the Dataset round-trips through netCDF.
        """
        attrs = {
            name: value
            if isinstance(value, int | float | str) and not isinstance(value, bool)
            else str(value)
            for name, value in self.to_dict().items()
            if name != "percentiles"
        }
        return xr.Dataset(coords={"percentile": list(self.percentiles)}, attrs=attrs)


def _listed(dim: str, values: Mapping[str, Any], dtype: Any, long_name: str) -> xr.Variable:
    """One descriptive variable along ``dim``: the values of ``values`` in their order."""
    return variable(
        dim, np.array(list(values.values()), dtype=dtype), long_name=long_name, status="descriptive"
    )


@dataclass(frozen=True)
class InputListing:
    """Where the images came from and what they were, byte for byte.

    Attributes
    ----------
    roots : dict of str to str
        The train, held-out and synthetic roots.
    sha256 : dict of str to str
        Per ``split/cohort``: SHA-256 over ``relative path<TAB>content hash`` lines.
    """

    roots: dict[str, str]
    sha256: dict[str, str]

    def __repr__(self) -> str:
        return f"InputListing(roots={self.roots}, listings={sorted(self.sha256)})"

    def to_dict(self) -> dict[str, Any]:
        """Return the listing as ``privacy_results.json["inputs"]`` records it."""
        return {"roots": dict(self.roots), "sha256": dict(self.sha256)}

    def to_xarray(self) -> xr.Dataset:
        """Return one ``sha256`` per listing (dim ``listing``: ``split/cohort``)."""
        names = list(self.sha256)
        return xr.Dataset(
            {"sha256": _listed("listing", self.sha256, str, "SHA-256 of the split/cohort listing")},
            coords={
                "listing": names,
                "split": ("listing", [n.split("/", 1)[0] for n in names]),
                "cohort": ("listing", [n.split("/", 1)[1] for n in names]),
            },
            attrs={f"root.{split}": root for split, root in self.roots.items()},
        )


@dataclass(frozen=True)
class ModelsUsed:
    """The identity encoders and the appearance metric of one run, with their identities.

    Attributes
    ----------
    identity : tuple of dict
        Per identity encoder: names, settings and weight digests (detector included).
    appearance : dict
        The appearance metric's identity.
    cache_keys : dict of str to str
        Per metric: the cache key its identity hashes to.
    """

    identity: tuple[dict[str, Any], ...]
    appearance: dict[str, Any]
    cache_keys: dict[str, str]

    def __repr__(self) -> str:
        names = [str(i.get("encoder")) for i in self.identity]
        return f"ModelsUsed(identity={names}, appearance={self.appearance.get('metric')!r})"

    def to_dict(self) -> dict[str, Any]:
        """Return the models as ``privacy_results.json["models"]`` records them."""
        return {
            "identity": list(self.identity),
            "appearance": self.appearance,
            "cache_keys": dict(self.cache_keys),
        }

    def to_xarray(self) -> xr.Dataset:
        """Return the cache key of every metric (dim ``metric``, coord ``axis``)."""
        metrics = list(self.cache_keys)
        appearance = self.appearance.get("metric")
        keys = _listed("metric", self.cache_keys, str, "cache key of the metric's identity")
        return xr.Dataset(
            {"cache_key": keys},
            coords={
                "metric": metrics,
                "axis": (
                    "metric",
                    ["appearance" if m == appearance else "identity" for m in metrics],
                ),
            },
        )


@dataclass(frozen=True)
class CacheUse:
    """The cache of one run and what it computed and reused.

    Attributes
    ----------
    root : str
        The cache folder.
    counters : dict of str to int
        ``embeddings_computed``, ``embeddings_reused``, ``distances_computed``,
        ``distances_reused`` in this run.
    """

    root: str
    counters: dict[str, int]

    def to_dict(self) -> dict[str, Any]:
        """Return the cache use as ``privacy_results.json["cache"]`` records it."""
        return {"root": self.root, "counters": dict(self.counters)}

    def to_xarray(self) -> xr.Dataset:
        """Return one count per counter (dim ``counter``); the root is an attribute."""
        return xr.Dataset(
            {"count": _listed("counter", self.counters, np.int64, "cache operations in this run")},
            coords={"counter": list(self.counters)},
            attrs={"root": self.root},
        )


@dataclass(frozen=True)
class PrivacyReport:
    """Everything one privacy check found, as tables that carry their statuses.

    Attributes
    ----------
    flagging : pandas.DataFrame
        One row per metric and percentile, columns
        :data:`~idaudit.memorization.FLAGGING_COLUMNS` (rates and interval bounds in
        percent). ``attrs["status"]`` maps each column to its status.
    nnaa : pandas.DataFrame
        Per metric, one row pooled over the cohorts (``cohort == "pooled"``) and, with two
        or more cohorts, one row per cohort; columns
        :data:`~idaudit.memorization.NNAA_COLUMNS` (the privacy loss's permutation
        ``p_value`` among them); ``attrs["status"]`` as above.
    sanity : pandas.DataFrame or None
        The metric sanity check per identity metric (with ``subject_pattern``).
    counts : pandas.DataFrame
        Per cohort and split: image files, other files, duplicates collapsed, and the
        images kept (``ok``) or dropped (``no_face``, ``too_small``, ``unreadable``,
        ``bad_format``).
    cohorts : list of str
        Cohorts analysed.
    skipped : dict of str to str
        Cohorts left out, each with the reason.
    notes : list of str
        Everything the run reported in words (skips, duplicates, warnings).
    settings : PrivacySettings
        The checked settings.
    inputs : InputListing
        The roots and the SHA-256 of every split/cohort listing.
    models : ModelsUsed
        Model identities, weight digests and cache keys.
    cache : CacheUse
        The cache folder and what it computed and reused in this run.
    provenance : dict
        Versions, seed, settings and input hashes (scalars and strings only).
    files : dict of str to pathlib.Path
        The files written (empty without ``out``).
    unreadable_files : dict of str to str
        Every file that could not be read as an image, as ``"<split>/<path under that
        root>"``, with its status (``unreadable`` or ``bad_format``); also in the notes.
    flagging_by_cohort : pandas.DataFrame or None
        One row per metric, cohort and percentile: each cohort's synthetic and held-out
        rates at the pooled thresholds, with the synthetic rate's Clopper–Pearson interval
        (columns :data:`~idaudit.memorization.FLAGGING_COHORT_COLUMNS`).
    """

    flagging: pd.DataFrame
    nnaa: pd.DataFrame
    sanity: pd.DataFrame | None
    counts: pd.DataFrame
    cohorts: list[str]
    skipped: dict[str, str]
    notes: list[str]
    settings: PrivacySettings = field(repr=False)
    inputs: InputListing = field(repr=False)
    models: ModelsUsed = field(repr=False)
    cache: CacheUse = field(repr=False)
    provenance: dict[str, Any] = field(repr=False)
    files: dict[str, Path] = field(default_factory=dict)
    unreadable_files: dict[str, str] = field(default_factory=dict)
    flagging_by_cohort: pd.DataFrame | None = None

    def __repr__(self) -> str:
        metrics = ", ".join(dict.fromkeys(self.flagging["metric"]))
        return (
            f"PrivacyReport(cohorts={self.cohorts}, metrics=[{metrics}], "
            f"skipped={sorted(self.skipped)}, files={sorted(self.files)})"
        )

    @property
    def cache_counters(self) -> dict[str, int]:
        """What the cache computed and reused in this run (``cache.counters``)."""
        return self.cache.counters

    def to_dict(self) -> dict[str, Any]:
        """Return the content of ``privacy_results.json`` (non-finite rates as strings)."""
        status: dict[str, Any] = {
            "flagging": self.flagging.attrs["status"],
            "nnaa": self.nnaa.attrs["status"],
        }
        if self.sanity is not None:
            status["sanity"] = self.sanity.attrs["status"]
        by_cohort = self.flagging_by_cohort
        if by_cohort is not None:
            status["flagging_by_cohort"] = by_cohort.attrs["status"]
        return {
            "flagging": _records(self.flagging),
            "flagging_by_cohort": None if by_cohort is None else _records(by_cohort),
            "nnaa": _records(self.nnaa),
            "sanity": None if self.sanity is None else _records(self.sanity),
            "status": status,
            "cohorts": {"analysed": self.cohorts, "skipped": self.skipped},
            "counts": _records(self.counts),
            "inputs": self.inputs.to_dict(),
            "models": self.models.to_dict(),
            "parameters": self.settings.to_dict(),
            "cache": self.cache.to_dict(),
            "notes": self.notes,
            "unreadable_files": self.unreadable_files,
            "provenance": self.provenance,
        }

    def to_json(self) -> str:
        """Return ``privacy_results.json``: sorted keys, indented, NaN and inf as strings."""
        return json_text(self.to_dict())

    def to_markdown(self) -> str:
        """Return ``report.md``: the tables, what they mean in words, what they cannot show."""
        confidence_level = self.settings.confidence_level
        n_permutations = self.settings.n_permutations
        inputs = _markdown_inputs(self)
        return "\n".join(
            [
                *inputs[:2],
                *privacy_verdict(
                    self.flagging,
                    self.nnaa,
                    1.0 - confidence_level,
                    n_permutations,
                    self.flagging_by_cohort,
                ),
                *inputs[2:],
                *_markdown_flagging(
                    self.flagging,
                    n_permutations,
                    confidence_level,
                    self.settings.percentile_method,
                    self.flagging_by_cohort,
                ),
                *_markdown_flagging_by_cohort(self.flagging_by_cohort),
                *_markdown_nnaa(self.nnaa, self.settings.n_bootstrap, confidence_level),
                *_markdown_sanity(self.sanity),
                *_markdown_limits(self.flagging),
                *_markdown_notes(self),
            ]
        )

    def to_xarray(self) -> xr.Dataset:
        """Return flagging (dims ``metric``, ``percentile``) and NNAA (``metric``) as a Dataset.

        Every variable has its ``long_name`` and ``status``; the attributes carry the
        provenance (versions, seed, input hashes), so the Dataset passes
        :func:`idaudit.results.check_result_dataset` and round-trips through netCDF.
        """
        flag = self.flagging.set_index(["metric", "percentile"])
        data: dict[str, xr.Variable] = {}
        ds_flag = xr.Dataset.from_dataframe(flag.drop(columns=["axis"]))
        for name in ds_flag.data_vars:
            data[f"flagging_{name}"] = variable(
                ("metric", "percentile"),
                ds_flag[name].values,
                long_name=f"flagging {name}",
                status=FLAGGING_STATUS[str(name)],
            )
        metrics = ds_flag["metric"].values
        coords: dict[str, Any] = {"cohort": list(self.cohorts)}
        data.update(_nnaa_variables(self.nnaa, metrics, coords["cohort"]))
        if self.flagging_by_cohort is not None and len(self.flagging_by_cohort):
            by = self.flagging_by_cohort.set_index(["metric", "cohort", "percentile"])
            for name in ("synthetic_pct", "heldout_pct", "ci_lower", "ci_upper"):
                grid = (
                    by[name]
                    .to_xarray()
                    .reindex(
                        metric=metrics, cohort=coords["cohort"], percentile=ds_flag["percentile"]
                    )
                )
                data[f"flagging_cohort_{name}"] = variable(
                    ("metric", "cohort", "percentile"),
                    grid.values.astype(float),
                    long_name=f"flagging {name} of each cohort at the pooled threshold",
                    status=FLAGGING_STATUS[name],
                )
        axis = self.flagging.drop_duplicates("metric").set_index("metric")["axis"]
        attrs = {k: v for k, v in self.provenance.items() if isinstance(v, str | int | float)}
        return xr.Dataset(
            data,
            coords={
                "metric": metrics,
                "percentile": ds_flag["percentile"].values,
                "axis": ("metric", axis.reindex(metrics).to_numpy(str)),
                **coords,
            },
            attrs=attrs,
        )


def _nnaa_variables(nnaa: pd.DataFrame, metrics: Any, cohorts: list[str]) -> dict[str, xr.Variable]:
    """Return NNAA pooled (dim ``metric``) and per cohort (dims ``metric``, ``cohort``).

    A cohort without a row of its own (a single cohort, or NNAA skipped) is NaN.
    """
    cohort = nnaa["cohort"] if "cohort" in nnaa else pd.Series("pooled", index=nnaa.index)
    pooled = nnaa[cohort == "pooled"].set_index("metric").reindex(metrics)
    statuses = {**NNAA_STATUS, **{k: NNAA_TEST_STATUS[k] for k in ("p_value", "n_permutations")}}
    data = {
        f"nnaa_{name}": variable(
            "metric",
            pooled[name].to_numpy(float),
            long_name=f"NNAA {name}, pooled over the cohorts",
            status=status,
        )
        for name, status in statuses.items()
        if name in pooled
    }
    per = nnaa[cohort != "pooled"]
    if len(per):
        table = per.set_index(["metric", "cohort"])
        for name in ("privacy_loss", "ci_lower", "ci_upper", "p_value"):
            grid = table[name].astype(float).to_xarray().reindex(metric=metrics, cohort=cohorts)
            data[f"nnaa_cohort_{name}"] = variable(
                ("metric", "cohort"),
                grid.values,
                long_name=f"NNAA {name} of each cohort",
                status=statuses[name],
            )
    return data


def _records(frame: pd.DataFrame) -> list[dict[str, Any]]:
    return [{k: _jsonable(v) for k, v in row.items()} for row in frame.to_dict(orient="records")]


def _jsonable(value: Any) -> Any:
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None if math.isnan(value) else str(value)
    return value


def _pct(x: Any) -> str:
    return "n/a" if x is None or not np.isfinite(x) else f"{x:.1f}"


def _verdict_flagging(rows: Any, alpha: float, p_min: float = float("nan")) -> str:
    above = rows[rows["synthetic_pct"] > rows["heldout_pct"]]
    significant = rows[rows["p_value"] <= alpha]
    if not len(significant) and np.isfinite(p_min) and p_min > alpha:
        # no data can reject: the sizes leave the test without power at alpha
        return (
            f"no verdict: with these set sizes the smallest attainable p-value is {p_min:.3g} "
            f"> {alpha:g}, so the test cannot reject whatever the images; this is no evidence "
            "either way."
        )
    if len(significant):
        ps = ", ".join(f"{p:g}" for p in significant["percentile"])
        return (
            f"synthetic images are flagged more often than held-out images at p = {ps} "
            f"(p-value <= {alpha:g} at each, uncorrected for the {len(rows)} operating "
            "points): they land closer to training images than fresh real images of the same "
            "cohort do."
        )
    if len(above) == 0:
        return (
            "synthetic images are flagged at or below the held-out rate at every p: a sample "
            "is no more likely to land close to a training image than a fresh real image is."
        )
    return (
        "synthetic rates exceed the held-out rate at some p, but not significantly "
        f"(every p-value > {alpha:g})."
    )


def privacy_verdict(
    flagging: pd.DataFrame,
    nnaa: pd.DataFrame,
    alpha: float,
    n_permutations: int,
    by_cohort: pd.DataFrame | None = None,
) -> list[str]:
    """Render the verdict: one bullet per metric, the flagging test's then NNAA's (pooled).

    Each is the verdict of a permutation test with its p-value (status *sample_estimate*,
    "estimate"); a test that cannot reject at these set sizes (its smallest attainable
    p-value above ``alpha``, :mod:`idaudit.memorization._power`) says "no verdict", never
    "no evidence".
    """
    bullets = []
    for metric, rows in flagging.groupby("metric", sort=False):
        p_min = flagging_smallest_p(rows, by_cohort, str(metric), n_permutations)
        said = f"**{metric}**: flagging, {_verdict_flagging(rows, alpha, p_min)}"
        pooled = nnaa[nnaa["metric"] == metric] if len(nnaa) else nnaa
        if "cohort" in pooled:
            pooled = pooled[pooled["cohort"] == "pooled"]
        for r in pooled.itertuples():
            said = said.rstrip(".") + f"; NNAA, {_verdict_nnaa(r, alpha, 1.0 - alpha)}."
        bullets.append(Bullet(FLAGGING_STATUS["p_value"], said))
    return verdict_section(bullets)


def _markdown_inputs(report: PrivacyReport) -> list[str]:
    """Render the title, the question, the cohorts and the per-cohort counts table."""
    skipped = (
        " Skipped: " + "; ".join(f"{c} ({why})" for c, why in report.skipped.items()) + "."
        if report.skipped
        else ""
    )
    lines = [
        "# idaudit privacy",
        "",
        "Do samples of the generator carry residual information about the images it was "
        "trained on? Each synthetic and held-out image is compared with its nearest training "
        "image of the same cohort (flagging), and the three sets are compared by "
        "nearest-neighbour adversarial accuracy (NNAA).",
        "",
        f"Cohorts analysed: {', '.join(report.cohorts)}." + skipped,
        "",
        table(
            [
                "cohort",
                "split",
                "files",
                "kept",
                "no face",
                "too small",
                "unreadable",
                "bad format",
                "not images",
                "duplicates",
            ],
            [
                [
                    r.cohort,
                    r.split,
                    r.n_files,
                    r.ok,
                    r.no_face,
                    r.too_small,
                    r.unreadable,
                    r.bad_format,
                    r.n_not_image,
                    r.n_duplicates,
                ]
                for r in report.counts.itertuples()
            ],
        ).rstrip("\n"),
    ]
    return lines


def _markdown_flagging(
    flagging: pd.DataFrame,
    n_permutations: int,
    confidence_level: float,
    percentile_method: str = "order_statistic",
    by_cohort: pd.DataFrame | None = None,
) -> list[str]:
    """Render how the thresholds are set, then one verdict and table per metric."""
    definition = (
        "the order statistic: the k-th smallest held-out distance, k = ⌈p·n/100⌉, so the "
        "pooled held-out rate is k/n ≥ p"
        if percentile_method == "order_statistic"
        else "NumPy's linear interpolation between order statistics, so the pooled held-out "
        "rate is close to p but not exactly p"
    )
    alpha = 1.0 - confidence_level
    lines = [
        "",
        "## Flagging at calibrated thresholds",
        "",
        f"Threshold at p = the p-th percentile of held-out distances (pooled over cohorts), "
        f"by {definition} (percentile method '{percentile_method}'). p-value: one-sided "
        f"permutation test "
        f"({n_permutations} label permutations within cohorts) of 'synthetic images "
        f"are flagged more often than held-out ones'; interval: exact Clopper-Pearson "
        f"({confidence_level:.0%}) for the synthetic rate at that threshold.",
        "",
    ]
    for metric, rows in flagging.groupby("metric", sort=False):
        axis = rows["axis"].iloc[0]
        p_min = flagging_smallest_p(rows, by_cohort, str(metric), n_permutations)
        coarse = unresolved_percentiles(list(rows["percentile"]), int(rows["n_heldout"].iloc[0]))
        lines += [
            f"**{metric}** ({axis} axis): {_verdict_flagging(rows, alpha, p_min)}",
            "",
            *(
                [
                    f"Not resolved by {int(rows['n_heldout'].iloc[0])} held-out images: "
                    f"p = {', '.join(f'{p:g}' for p in coarse)} (the smallest held-out distance "
                    "already flags a larger share).",
                    "",
                ]
                if coarse
                else []
            ),
            table(
                ["p (%)", "threshold", "synthetic (%)", "interval (%)", "held-out (%)", "p-value"],
                [
                    [
                        f"{r.percentile:g}",
                        number(r.threshold, 4),
                        _pct(r.synthetic_pct),
                        f"{_pct(r.ci_lower)}–{_pct(r.ci_upper)}",
                        _pct(r.heldout_pct),
                        r.p_value,
                    ]
                    for r in rows.itertuples()
                ],
            ),
        ]
    return lines


def _markdown_flagging_by_cohort(by_cohort: pd.DataFrame | None) -> list[str]:
    """Render each cohort's rates at the pooled thresholds (nothing with one cohort)."""
    if by_cohort is None or by_cohort["cohort"].nunique() < 2:
        return []
    percentiles = list(dict.fromkeys(by_cohort["percentile"]))
    lines = [
        "### Flagging per cohort",
        "",
        "Each cohort's rates at the pooled thresholds: synthetic % [exact Clopper-Pearson "
        "interval] / held-out %. A memorising cohort shows here even when the pooled rates "
        "do not; no p-value is computed per cohort.",
        "",
    ]
    for metric, rows in by_cohort.groupby("metric", sort=False):
        lines += [
            f"**{metric}**",
            "",
        ]
        above: list[str] = []
        cells_rows = []
        for cohort, cells in rows.groupby("cohort", sort=False):
            first = cells.iloc[0]
            cells_rows.append(
                [
                    cohort,
                    f"{first['n_synthetic']}, {first['n_heldout']}",
                    *(
                        f"{_pct(c.synthetic_pct)} [{_pct(c.ci_lower)}–{_pct(c.ci_upper)}] / "
                        f"{_pct(c.heldout_pct)}"
                        for c in cells.itertuples()
                    ),
                ]
            )
            # against the cohort's own held-out rate at the pooled threshold, not p: a cohort
            # whose real images sit tight has a held-out rate above p without memorising
            over = cells.loc[cells["ci_lower"] > cells["heldout_pct"], "percentile"]
            if len(over):
                above.append(f"{cohort} (p = {', '.join(f'{p:g}' for p in over)})")
        header = ["cohort", "images (synthetic, held-out)", *(f"p = {p:g}" for p in percentiles)]
        lines += [table(header, cells_rows)]
        if above:
            lines += [
                "Synthetic rate's lower bound above the cohort's own held-out rate: "
                + "; ".join(above)
                + " (descriptive: a screen over cohorts and percentiles with no multiplicity "
                "correction and no test; the pooled test above is the verdict).",
                "",
            ]
    return lines


def _interval_words(r: Any, confidence_level: float) -> str:
    """Say the privacy loss with its interval, or why there is none."""
    loss = f"privacy loss {r.privacy_loss:+.3f}"
    if np.isfinite(r.ci_lower) and np.isfinite(r.ci_upper):
        return f"{loss}, {confidence_level:.0%} interval [{r.ci_lower:+.3f}, {r.ci_upper:+.3f}]"
    sizes = (r.n_train, r.n_heldout, r.n_synthetic)
    shown = ", ".join(str(n) for n in sizes)
    if min(sizes) < MIN_INTERVAL_SIZE:
        return f"{loss}; no interval: fewer than {MIN_INTERVAL_SIZE} images per set ({shown})"
    if bool(getattr(r, "below_min_size", False)):  # the unit is the subject
        return (
            f"{loss}; no interval: fewer than {MIN_INTERVAL_SIZE} subjects in a set (the sets "
            f"hold {shown} images)"
        )
    return f"{loss}; no interval (0 split-half draws)"


def _verdict_nnaa(r: Any, alpha: float, confidence_level: float) -> str:
    """One NNAA row in words: the permutation test's verdict, then the interval."""
    interval = _interval_words(r, confidence_level)
    has_ci = np.isfinite(r.ci_lower)
    if not np.isfinite(r.p_value):
        excludes = " (the interval excludes 0)" if has_ci and r.ci_lower > 0 else ""
        return f"no permutation test (0 permutations); {interval}{excludes}"
    if r.p_value <= alpha:
        caveat = "; the approximate interval still reaches 0" if has_ci and r.ci_lower <= 0 else ""
        return f"memorisation detected (p = {r.p_value:.3g}); {interval}{caveat}"
    p_min = nnaa_smallest_p(r)
    if np.isfinite(p_min) and p_min > alpha:
        return (
            f"no verdict (p = {r.p_value:.3g}): the smallest attainable p-value is "
            f"{p_min:.3g} > {alpha:g} with these set sizes, so the test cannot reject; "
            f"{interval}"
        )
    caveat = (
        "; the approximate interval excludes 0 where the exact test does not reject: weak "
        "evidence at most"
        if has_ci and r.ci_lower > 0
        else ""
    )
    return f"no evidence of memorisation (p = {r.p_value:.3g}); {interval}{caveat}"


def _cohort_alarm(rows: pd.DataFrame, metric: str, alpha: float) -> list[str]:
    """Say so when the pooled test finds nothing but a cohort's own test does."""
    pooled = rows[rows["cohort"] == "pooled"]
    cohorts = rows[rows["cohort"] != "pooled"]
    hits = cohorts[cohorts["p_value"] <= alpha]
    if not len(hits) or (len(pooled) and bool((pooled["p_value"] <= alpha).all())):
        return []
    k = len(cohorts)
    strict = hits[hits["p_value"] <= alpha / k]
    names = ", ".join(str(c) for c in hits["cohort"])
    held = (
        f"{len(strict)} of them also at the Bonferroni level {alpha / k:.3g} for {k} cohorts"
        if len(strict)
        else f"none at the Bonferroni level {alpha / k:.3g} for {k} cohorts"
    )
    return [
        f"- **{metric}**: the pooled test finds no evidence, but cohort(s) {names} do on "
        f"their own ({held}): memorisation confined to one cohort is diluted when pooled."
    ]


def _markdown_nnaa(nnaa: pd.DataFrame, n_bootstrap: int, confidence_level: float) -> list[str]:
    """Render, pooled and per cohort, the test's verdict with the interval, then the table."""
    alpha = 1.0 - confidence_level
    lines = ["## Nearest-neighbour adversarial accuracy", ""]
    if not len(nnaa):
        return [*lines, "NNAA was not computed (see the notes).", ""]
    n_perm = int(nnaa["n_permutations"].max())
    lines += [
        "Verdict: exact one-sided permutation test of 'training and held-out images are "
        f"exchangeable relative to the synthetic set' ({n_perm} relabellings of the training "
        "and held-out images, both AA terms recomputed; p-value with the +1), against a "
        f"positive privacy loss, at {alpha:g}. With it, the privacy loss and its "
        f"{confidence_level:.0%} split-half interval ({n_bootstrap} random splits of every "
        f"set into two halves), reported only when every set holds at least "
        f"{MIN_INTERVAL_SIZE} images. Pooled over the cohorts, then per cohort (per-cohort "
        "p-values are not corrected for the number of cohorts):",
        "",
    ]
    for metric, rows in nnaa.groupby("metric", sort=False):
        for r in rows.itertuples():
            lines.append(f"- **{metric}**, {r.cohort}: {_verdict_nnaa(r, alpha, confidence_level)}")
        lines += _cohort_alarm(rows, str(metric), alpha)
    lines += [
        "",
        table(
            [
                "metric",
                "cohort",
                "AA(train, synth)",
                "AA(held-out, synth)",
                "privacy loss",
                "interval",
                "p-value",
                "sets (train, held-out, synth)",
            ],
            [
                [
                    r.metric,
                    r.cohort,
                    f"{r.aa_train_synth:.3f}",
                    f"{r.aa_heldout_synth:.3f}",
                    f"{r.privacy_loss:+.3f}",
                    f"{r.ci_lower:+.3f} to {r.ci_upper:+.3f}"
                    if np.isfinite(r.ci_lower)
                    else "none",
                    r.p_value if np.isfinite(r.p_value) else "n/a",
                    f"{r.n_train}, {r.n_heldout}, {r.n_synthetic}",
                ]
                for r in nnaa.itertuples()
            ],
        ).rstrip("\n"),
    ]
    both_above = bool(((nnaa["aa_train_synth"] > 0.5) & (nnaa["aa_heldout_synth"] > 0.5)).all())
    level = (
        "synthetic faces are usually separable from real ones, and here both AA values sit "
        "above 0.5 in every row."
        if both_above
        else "synthetic faces are often separable from real ones, which would put both AA "
        "values above 0.5, but not every row of this table does."
    )
    return [
        *lines,
        "",
        f"The absolute AA level carries no privacy meaning on its own: {level} Only the "
        "difference of the two, the privacy loss, is informative.",
        "",
    ]


def _markdown_sanity(sanity: pd.DataFrame | None) -> list[str]:
    """Render the metric sanity check's table (nothing without ``subject_pattern``)."""
    if sanity is None:
        return []
    lines = [
        "## Metric sanity check",
        "",
        table(
            ["metric", "AUC same < different", "permutation p-value", "images", "subjects"],
            [
                [r.metric, f"{r.auc:.3f}", r.p_value, r.n_images, r.n_subjects]
                for r in sanity.itertuples()
            ],
        ),
    ]
    return lines


def _markdown_limits(flagging: pd.DataFrame) -> list[str]:
    """Render what the two axes can and cannot show, and the status of every number."""
    appearance = ", ".join(dict.fromkeys(flagging.loc[flagging["axis"] == "appearance", "metric"]))
    return [
        "## What these numbers can and cannot show",
        "",
        "- The identity axis (recognition embeddings) speaks to re-identification: a hit means "
        "a synthetic face resembles a training subject as a face-recognition system sees "
        "them. The appearance axis ("
        + appearance
        + ") compares whole pictures: lighting, framing, background, colour cast. It cannot "
        "separate two photographs of one subject from photographs of two subjects, so a hit "
        "there may be the acquisition style of the training set, learnt with the faces.",
        "- The analysis is empirical: it bounds what these models and these metrics can "
        "detect. A stronger attack or a better embedding could detect more; a clean result is "
        "not a privacy guarantee.",
        "- The held-out partition must be disjoint from the training partition at the subject "
        "level; idaudit can only check byte-identical files. Real and synthetic images should "
        "share one framing: a framing difference shows up as distance.",
        "",
        "Statuses: rates, thresholds, p-values, AA values and split-half intervals are "
        "`sample_estimate`; the Clopper-Pearson bounds are `certified_lower_bound` / "
        "`certified_upper_bound` for the synthetic rate at the realised threshold; counts "
        "and set sizes are `descriptive`.",
        "",
    ]


def _markdown_notes(report: PrivacyReport) -> list[str]:
    """Render the run's notes and what the cache computed and reused."""
    lines = ["## Notes", "", *(f"- {n}" for n in report.notes), ""] if report.notes else []
    counters = report.cache.counters
    return [
        *lines,
        f"Cache `{report.cache.root}`: {counters.get('embeddings_computed', 0)} embeddings "
        f"computed, {counters.get('embeddings_reused', 0)} reused; "
        f"{counters.get('distances_computed', 0)} appearance distances computed, "
        f"{counters.get('distances_reused', 0)} reused.",
        "",
    ]
