"""``report.md``: what a privacy check's numbers mean in words, and what they cannot show."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from idaudit.memorization._run import PrivacyReport

__all__ = ["report_markdown"]


def _pct(x: Any) -> str:
    return "n/a" if x is None or not np.isfinite(x) else f"{x:.1f}"


def _verdict_flagging(rows: Any, alpha: float) -> str:
    above = rows[rows["synthetic_pct"] > rows["heldout_pct"]]
    significant = rows[rows["p_value"] <= alpha]
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


def report_markdown(report: PrivacyReport) -> str:
    """Render the short report of a :class:`~idaudit.memorization.PrivacyReport`."""
    res = report.results
    par = res["parameters"]
    conf = par["confidence_level"]
    alpha = 1.0 - conf
    lines = [
        "# idaudit privacy",
        "",
        "Do samples of the generator carry residual information about the images it was "
        "trained on? Each synthetic and held-out image is compared with its nearest training "
        "image of the same cohort (flagging), and the three sets are compared by "
        "nearest-neighbour adversarial accuracy (NNAA).",
        "",
        f"Cohorts analysed: {', '.join(report.cohorts)}."
        + (
            " Skipped: " + "; ".join(f"{c} ({why})" for c, why in report.skipped.items()) + "."
            if report.skipped
            else ""
        ),
        "",
        "| cohort | split | files | kept | no face | unreadable | bad format | not images "
        "| duplicates |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in report.counts.itertuples():
        lines.append(
            f"| {r.cohort} | {r.split} | {r.n_files} | {r.ok} | {r.no_face} | {r.unreadable} "
            f"| {r.bad_format} | {r.n_not_image} | {r.n_duplicates} |"
        )
    lines += ["", "## Flagging at calibrated thresholds", ""]
    lines += [
        f"Threshold at p = the p-th percentile of held-out distances (pooled over cohorts), so "
        f"the held-out rate is p by construction. p-value: one-sided permutation test "
        f"({par['n_permutations']} label permutations within cohorts) of 'synthetic images "
        f"are flagged more often than held-out ones'; interval: exact Clopper-Pearson "
        f"({conf:.0%}) for the synthetic rate at that threshold.",
        "",
    ]
    for metric, rows in report.flagging.groupby("metric", sort=False):
        axis = rows["axis"].iloc[0]
        lines += [
            f"**{metric}** ({axis} axis): {_verdict_flagging(rows, alpha)}",
            "",
            "| p (%) | threshold | synthetic (%) | interval (%) | held-out (%) | p-value |",
            "|---|---|---|---|---|---|",
        ]
        for r in rows.itertuples():
            lines.append(
                f"| {r.percentile:g} | {r.threshold:.4g} | {_pct(r.synthetic_pct)} "
                f"| {_pct(r.ci_lower)}–{_pct(r.ci_upper)} | {_pct(r.heldout_pct)} "
                f"| {r.p_value:.3g} |"
            )
        lines.append("")
    lines += ["## Nearest-neighbour adversarial accuracy", ""]
    if len(report.nnaa):
        lines += [
            "| metric | AA(train, synth) | AA(held-out, synth) | privacy loss | interval | "
            "sets (train, held-out, synth) |",
            "|---|---|---|---|---|---|",
        ]
        for r in report.nnaa.itertuples():
            lines.append(
                f"| {r.metric} | {r.aa_train_synth:.3f} | {r.aa_heldout_synth:.3f} "
                f"| {r.privacy_loss:+.3f} | {r.ci_lower:+.3f} to {r.ci_upper:+.3f} "
                f"| {r.n_train}, {r.n_heldout}, {r.n_synthetic} |"
            )
        lines.append("")
        for r in report.nnaa.itertuples():
            if np.isfinite(r.ci_lower) and r.ci_lower > 0:
                lines.append(
                    f"- **{r.metric}**: the privacy loss's interval excludes 0: synthetic "
                    "images lie closer to the training set than held-out images do."
                )
            elif np.isfinite(r.ci_lower):
                lines.append(
                    f"- **{r.metric}**: the privacy loss is indistinguishable from 0 at {conf:.0%}."
                )
        lines += [
            "",
            f"Intervals: centred half-sampling intervals ({par['n_bootstrap']} draws, each "
            "keeping a random half of every set without replacement, every nearest neighbour "
            "recomputed); they are approximate. The absolute AA level carries no privacy "
            "meaning on its own: "
            "synthetic faces are usually separable from real ones, so both AA values sit "
            "above 0.5. Only their difference is informative.",
            "",
        ]
    else:
        lines += ["NNAA was not computed (see the notes).", ""]
    if report.sanity is not None:
        lines += [
            "## Metric sanity check",
            "",
            "| metric | AUC same < different | permutation p-value | images | subjects |",
            "|---|---|---|---|---|",
        ]
        for r in report.sanity.itertuples():
            lines.append(
                f"| {r.metric} | {r.auc:.3f} | {r.p_value:.3g} | {r.n_images} | {r.n_subjects} |"
            )
        lines.append("")
    lines += [
        "## What these numbers can and cannot show",
        "",
        "- The identity axis (recognition embeddings) speaks to re-identification: a hit means "
        "a synthetic face resembles a training subject as a face-recognition system sees "
        "them. The appearance axis ("
        + ", ".join(
            dict.fromkeys(report.flagging.loc[report.flagging["axis"] == "appearance", "metric"])
        )
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
        "Statuses: rates, thresholds, p-values, AA values and bootstrap intervals are "
        "`sample_estimate`; the Clopper-Pearson bounds are `certified_lower_bound` / "
        "`certified_upper_bound` for the synthetic rate at the realised threshold; counts "
        "and set sizes are `descriptive`.",
        "",
    ]
    if report.notes:
        lines += ["## Notes", "", *(f"- {n}" for n in report.notes), ""]
    counters = report.cache_counters
    lines += [
        f"Cache `{res['cache']['root']}`: {counters.get('embeddings_computed', 0)} embeddings "
        f"computed, {counters.get('embeddings_reused', 0)} reused; "
        f"{counters.get('distances_computed', 0)} appearance distances computed, "
        f"{counters.get('distances_reused', 0)} reused.",
        "",
    ]
    return "\n".join(lines)
