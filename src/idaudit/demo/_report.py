"""The demo's report: ``report.md``, part one (faces) then part two (calibrated noise)."""

from __future__ import annotations

from itertools import pairwise
from typing import TYPE_CHECKING, Any

import numpy as np
import xarray as xr

from idaudit._markdown import Bullet, number, table, verdict_section, warnings_section
from idaudit.demo._faces import FACE_SEED, FaceDemoResult
from idaudit.demo._noise_report import certified_cell, noise_report, tracking
from idaudit.pipeline.report import (
    MMDTV_CEILING,
    ROCHT_FLAG,
    ceiling_section,
    certificate_table,
    column_flag,
    columns_section,
    controls_section,
    interval_text,
    median_interval,
    name_list,
)

if TYPE_CHECKING:
    import pandas as pd

    from idaudit.demo._config import DemoConfig

__all__ = ["METHOD_TEXT", "demo_report", "faces_verdict", "markdown_table"]

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


def demo_report(faces: FaceDemoResult, noise: xr.Dataset, cfg: DemoConfig, seconds: float) -> str:
    """Return the text of ``report.md``: part one (faces) then part two (calibrated noise).

    Parameters
    ----------
    faces : FaceDemoResult
        Part one's result.
    noise : xarray.Dataset
        Part two's combined sweeps, dims (mechanism, noise_sd, pair).
    cfg : DemoConfig
        The sizes both parts ran at.
    seconds : float
        Runtime of the whole demo.

    Returns
    -------
    str
        Markdown.
    """
    return _faces_report(faces, cfg, noise) + "\n" + noise_report(noise, cfg, seconds)


def markdown_table(table_: pd.DataFrame, results: xr.Dataset | None = None) -> list[str]:
    """Return the faces demo's main table as markdown lines.

    Parameters
    ----------
    table_ : pandas.DataFrame
        :attr:`FaceDemoResult.table`: one row per condition.
    results : xarray.Dataset, optional
        :attr:`FaceDemoResult.results`: with it, the MMD-TV and ROC AUC medians carry their
        95 % order-statistic intervals over the pairs.

    Returns
    -------
    list of str
        The header, a row of each column's formal status (the certified column's is derived
        when the table is built), a row of flags for columns that carry no information here
        (all +∞, all at the ceiling) and one row per condition.
    """
    head = [
        "condition",
        "faces lost",
        "top-1 identification [95% CI]",
        "same-person match (d < 0.6) [95% CI]",
        "GaussMech",
        "KDE-LR",
        "MMD-TV [95% CI]",
        "MMD hockey-stick",
        "ROC AUC [95% CI]",
        "ROC-HT +∞",
        "certified ε (max) [ceiling]",
    ]
    status = [
        "",
        "descriptive",
        "sample_estimate",
        "sample_estimate",
        "diagnostic",
        "diagnostic",
        "sample_estimate",
        "sample_estimate",
        "sample_estimate",
        "diagnostic",
        str(table_.attrs.get("certified_max_status", "")),
    ]

    def median(r: Any, column: str, var: str) -> str:
        if results is not None and var in results:
            values = results[var].sel(condition=r.condition).values
            return interval_text(*median_interval(values))
        return number(getattr(r, column))

    rows = [
        [
            str(r.condition),
            int(r.faces_lost),
            f"{r.top1_rate:.0%} [{r.top1_low:.0%}, {r.top1_high:.0%}]",
            f"{r.match_rate:.0%} [{r.match_low:.0%}, {r.match_high:.0%}]",
            number(r.gaussmech_median),
            number(r.kdelr_median),
            median(r, "mmdtv_median", "mmdtv_epsilon"),
            number(r.mmdtv_hs_median),
            median(r, "rocht_auc_median", "rocht_auc"),
            f"{r.rocht_inf}/{r.n_pairs}",
            certified_cell(float(r.certified_max), float(getattr(r, "certified_ceiling", np.nan))),
        ]
        for r in table_.itertuples()
    ]
    flags = {}
    if len(table_) and bool((table_["rocht_inf"] == table_["n_pairs"]).all()):
        flags["ROC-HT +∞"] = ROCHT_FLAG
    if "certified_ceiling" in table_:
        flag = column_flag(table_["certified_max"], table_["certified_ceiling"])
        if flag:
            flags["certified ε (max) [ceiling]"] = flag
    return table(head, rows, statuses=status, flags=flags or None).rstrip("\n").split("\n")


def _discordance_lines(faces: FaceDemoResult) -> list[str]:
    """Return the warnings of :func:`idaudit.audits.discordant_routes`, one condition at a time.

    Each condition is checked with its own certificates, so a condition whose certificate is
    positive (leakage proven) is never told its large diagnostics may be noise.
    """
    from idaudit.audits import discordant_routes

    if "auditors" not in faces.results.attrs:  # not an audit_pairs result: nothing to check
        return []
    sentences = []
    for name in faces.results["condition"].values:
        one = faces.results.sel(condition=name)
        for sentence in discordant_routes(one, certificates=faces.certificates.get(str(name))):
            sentences.append(f"`{name}`: {sentence}")
    return warnings_section(sentences)


def _sign_test(faces: FaceDemoResult, lower: Any, higher: Any) -> tuple[int, int, float]:
    """Paired sign test of MMD-TV from condition ``lower`` to ``higher`` over the shared pairs.

    Returns the pairs that rise, the pairs that move (ties and missing values dropped) and
    the two-sided binomial p-value of equal medians (1 when no pair moves).
    """
    from scipy.stats import binomtest

    mmd = faces.results["mmdtv_epsilon"]
    diff = np.asarray(
        mmd.sel(condition=higher).values - mmd.sel(condition=lower).values, dtype=np.float64
    )
    diff = diff[np.isfinite(diff) & (diff != 0.0)]
    n_up, n = int((diff > 0).sum()), int(diff.size)
    return n_up, n, float(binomtest(n_up, n, 0.5).pvalue) if n else 1.0


def _rise(faces: FaceDemoResult, weaker: pd.Series, stronger: pd.Series) -> tuple[str, str]:
    """Classify and describe a rise of the MMD-TV median from ``weaker`` to ``stronger``.

    A paired sign test over the shared pairs tells sampling noise (pairs move both ways, or
    too few move) from a systematic rise; for a systematic rise, the embeddings'
    between-identity distance over within-identity spread and the median-heuristic bandwidth
    say why. Returns the kind (``"noise"``, ``"spread"``, ``"bandwidth"`` or
    ``"unexplained"``) and a fragment naming the step and its numbers.
    """
    n_up, n, p = _sign_test(faces, weaker["condition"], stronger["condition"])
    step = (
        f"`{weaker['condition']}` → `{stronger['condition']}` "
        f"({number(weaker['mmdtv_median'])} → {number(stronger['mmdtv_median'])}, up on "
        f"{n_up} of {n} pairs, sign test p = {p:.2g}"
    )
    if n == 0 or p >= 0.05 or n_up <= n - n_up:
        return "noise", step + ")"
    w0, w1 = float(weaker["within_spread"]), float(stronger["within_spread"])
    b0, b1 = float(weaker["between_distance"]), float(stronger["between_distance"])
    h0 = float(weaker["mmdtv_bandwidth_median"])
    h1 = float(stronger["mmdtv_bandwidth_median"])
    ratio = f"distance/spread {b0 / w0:.2f} → {b1 / w1:.2f}"
    bandwidth = f"bandwidth {h0:.3g} → {h1:.3g}"
    if np.isfinite([w0, w1, b0, b1]).all() and b1 / w1 > b0 / w0:
        return "spread", f"{step}; {ratio}, {bandwidth})"
    if np.isfinite([h0, h1]).all() and h1 < h0:
        return "bandwidth", f"{step}; {ratio}, {bandwidth})"
    return "unexplained", step + ")"


_RISE_TEXT = {
    "spread": (
        "not sampling noise: the pairs rise together, and at that step the anonymiser shrank "
        "the spread of each identity's faces (mean distance to their centroid) more than the "
        "distance between identities' centroids, while the median-heuristic bandwidth "
        "followed the shrinking distances; it is measured at that step only and is no trend "
        "of the anonymiser"
    ),
    "bandwidth": (
        "not sampling noise: nearly every pair rises, but the identities do not stand "
        "further apart relative to their spread; the median-heuristic bandwidth falls, and a "
        "narrower kernel raises the MMD at equal separation, an effect of the bandwidth "
        "heuristic rather than of more leakage"
    ),
    "noise": (
        "the pairs move both ways and the sign test does not reject equal medians at level "
        "0.05, so these rises are within the sampling noise of a median over the audited pairs "
        "and no evidence that the stronger setting leaks more"
    ),
    "unexplained": (
        "a systematic rise that neither the embeddings' spread nor the bandwidth accounts for"
    ),
}


def faces_verdict(faces: FaceDemoResult, noise: xr.Dataset | None = None) -> list[Bullet]:
    """Return the verdict of the faces part: at most six bullets, each with its status.

    Parameters
    ----------
    faces : FaceDemoResult
        Part one's result (its ``table`` needs the columns :func:`run_face_demo` writes).
    noise : xarray.Dataset, optional
        Part two's sweeps: with it, the diagnostics' bullet says how far KDE-LR sat from the
        known truth.

    Returns
    -------
    list of Bullet
        What the certificates prove ("at least", never an order); which anonymiser
        identifies least, ordered only where the exact intervals separate; that low
        re-identification is not identity-level privacy (where the numbers show it); the
        MMD-TV order from paired sign tests; why MMD-TV rises where it does (per step, no
        trend claimed from one step); what the diagnostics are.
    """
    table_ = faces.table
    anon = table_[table_["method"] != "none"]
    base = table_[table_["method"] == "none"].iloc[0]
    # each condition's certificates hold jointly at its own confidence; the column holds
    # jointly only when the conditions were certified as one family
    joint = table_.attrs.get("certified_max_status", "certified_lower_bound")
    separately = joint != "certified_lower_bound" and len(faces.certificates) > 1
    alphas = {float(c.attrs.get("alpha", 0.05)) for c in faces.certificates.values()}
    own = (
        f", each at its own {100 * (1 - alphas.pop()):g} % (the conditions were certified "
        "separately, so the claims do not hold jointly)"
        if separately and len(alphas) == 1
        else ", each at its own confidence (the conditions were certified separately, so "
        "the claims do not hold jointly)"
        if separately
        else ""
    )
    bullets = [
        Bullet(
            "certified_lower_bound" if separately else str(joint),
            _certified_sentence(table_, own),
        )
    ]
    bullets.append(Bullet("sample_estimate", _top1_sentence(faces, anon, base)))
    reid = _reid_sentence(anon)
    if reid:
        bullets.append(Bullet("sample_estimate", reid))
    bullets.append(Bullet("sample_estimate", _mmd_order_sentence(faces, anon)))
    rises = [r for r in _mmd_rises(faces, anon, base) if "not sampling noise" in r]
    if rises:
        bullets.append(Bullet("sample_estimate", " ".join(rises)))
    bullets.append(Bullet("diagnostic", _diagnostics_sentence(table_, noise)))
    return bullets


def _certified_sentence(table_: pd.DataFrame, own: str = "") -> str:
    """Say what the certificates prove: "at least" per anonymiser, and where the ceiling set it.

    ``own`` follows "proven to leak": the confidence each claim holds at when the conditions
    were certified separately.
    """
    cert = np.asarray(table_["certified_max"], dtype=np.float64)
    at = np.asarray(table_["certified_at_ceiling"], dtype=bool)
    tops = np.asarray(table_["certified_ceiling"], dtype=np.float64)
    positive = table_[cert > 0]
    zero = table_[~(cert > 0)]
    if not len(positive):
        return (
            "No condition is proven to leak: every certificate is 0, which is no proof of "
            "privacy either."
        )
    said = (
        f"{len(positive)} of the {len(table_)} conditions are proven to leak{own}: their largest "
        'certificates, each an "ε is at least", run '
        f"{number(float(np.nanmin(cert[cert > 0])) if len(positive) else 0.0)}"
        f"–{number(float(np.nanmax(cert)))}"
    )
    if at.any():
        said += (
            f", and {int(at.sum())} sit at their ceiling ({number(float(np.nanmax(tops)))} at "
            "these test sizes), so the test size, not the anonymiser, set them"
        )
    said += "; lower bounds order nothing"
    if len(zero):
        verb = "certifies" if len(zero) == 1 else "certify"
        said += f", and {name_list(list(zero['condition']))} {verb} 0, which is no proof of privacy"
    return said + "."


def _top1_sentence(faces: FaceDemoResult, anon: pd.DataFrame, base: pd.Series) -> str:
    """Which anonymiser identifies least, ordered only where the exact intervals separate."""
    order = anon.sort_values("top1_rate")
    low = order.iloc[0]
    rest = order.iloc[1:]
    separated = bool((float(low["top1_high"]) < np.asarray(rest["top1_low"], float)).all())
    said = (
        f"Top-1 identification against the originals is lowest for `{low['condition']}`, "
        f"{low['top1_rate']:.0%} [{low['top1_low']:.0%}, {low['top1_high']:.0%}] against "
        f"{base['top1_rate']:.0%} unanonymised (chance {faces.top1_chance:.0%}), "
        + (
            "below every other anonymiser (exact 95 % intervals do not overlap)"
            if separated or not len(rest)
            else "not distinguishable here from "
            + name_list(
                list(
                    rest[np.asarray(rest["top1_low"], float) <= float(low["top1_high"])][
                        "condition"
                    ]
                )
            )
            + " (exact 95 % intervals overlap)"
        )
    )
    below = anon[np.asarray(anon["top1_high"], dtype=np.float64) < faces.top1_chance]
    if len(below):
        said += (
            f"; {name_list(list(below['condition']))} even below chance: faces are matched to "
            "other people's originals systematically, which reads as privacy on this measure "
            "only"
        )
    return said + "."


def _reid_sentence(anon: pd.DataFrame) -> str | None:
    """Low re-identification beside a classifier that still separates: not privacy."""
    sep = anon[np.asarray(anon["rocht_auc_median"], dtype=np.float64) >= 0.95]
    sep = sep[np.asarray(sep["top1_high"], dtype=np.float64) < 0.95]
    if not len(sep):
        return None
    r = sep.sort_values("top1_rate").iloc[0]
    return (
        f"Low re-identification is not identity-level privacy: `{r['condition']}` has top-1 "
        f"{r['top1_rate']:.0%} [{r['top1_low']:.0%}, {r['top1_high']:.0%}] yet a median ROC "
        f"AUC of {number(float(r['rocht_auc_median']))}, so its released faces of two people "
        "are still told apart."
    )


def _mmd_order_sentence(faces: FaceDemoResult, anon: pd.DataFrame) -> str:
    """Name the lowest MMD-TV median, ordered by a paired sign test against the next lowest.

    The two conditions are picked by the same medians the test then compares, so its p-value
    is multiplied by the number of condition pairs that could have been picked (Bonferroni):
    the order claimed holds at 5 % whichever two came out lowest.
    """
    order = anon.sort_values("mmdtv_median")
    low = order.iloc[0]
    scale = (
        f"MMD-TV (at most {MMDTV_CEILING:.2f} with this kernel) is lowest for "
        f"`{low['condition']}`, median {number(float(low['mmdtv_median']))}"
    )
    if len(order) < 2 or "mmdtv_epsilon" not in faces.results:
        return scale + "."
    nxt = order.iloc[1]
    n_up, n, p = _sign_test(faces, low["condition"], nxt["condition"])
    picks = len(order) * (len(order) - 1) // 2  # the pairs the lowest two could have been
    adjusted = min(1.0, p * picks)
    nxt_name = f"`{nxt['condition']}` ({number(float(nxt['mmdtv_median']))})"
    test = f"higher there on {n_up} of {n} shared pairs, paired sign test p = {p:.2g}"
    if picks > 1:
        test += (
            f", {adjusted:.2g} after Bonferroni over the {picks} pairs of conditions the two "
            "lowest could have been"
        )
    if adjusted < 0.05 and n_up < n - n_up:
        return f"{scale}, yet higher on most shared pairs than the next lowest, {nxt_name}: {test}."
    if adjusted < 0.05:
        return f"{scale}, below the next lowest, {nxt_name}: {test}."
    return f"{scale}, not distinguishable here from the next lowest, {nxt_name}: {test}."


def _diagnostics_sentence(table_: pd.DataFrame, noise: xr.Dataset | None) -> str:
    """GaussMech and KDE-LR are off any bound's scale; part two says how far, when given."""

    def span(col: str) -> str:
        v = np.asarray(table_[col], dtype=np.float64)
        v = v[np.isfinite(v)]
        return f"{number(float(v.min()))}–{number(float(v.max()))}" if v.size else "–"

    said = (
        f"GaussMech (medians {span('gaussmech_median')}) and KDE-LR ({span('kdelr_median')}) "
        "are diagnostics off any bound's ε scale and rank nothing"
    )
    if noise is not None and "laplace" in noise["mechanism"].values:
        rho, ratio = tracking(noise.sel(mechanism="laplace"), "kdelr_epsilon")
        said += (
            f"; on the known-truth benchmark KDE-LR sat {number(ratio)}× the true ε at the "
            f"strongest noise (rank correlation {number(rho, 2) if np.isfinite(rho) else '–'})"
        )
    return said + "."


def _mmd_rises(faces: FaceDemoResult, anon: pd.DataFrame, base: pd.Series) -> list[str]:
    """Explain each rise of MMD-TV as an anonymiser gets stronger, from the data."""
    rises: dict[str, list[str]] = {}
    for method in dict.fromkeys(anon["method"]):
        steps = [base] + [
            row for _, row in anon[anon["method"] == method].sort_values("strength").iterrows()
        ]
        for weaker, stronger in pairwise(steps):
            if float(stronger["mmdtv_median"]) > float(weaker["mmdtv_median"]):
                kind, step = _rise(faces, weaker, stronger)
                rises.setdefault(kind, []).append(step)
    if not rises:
        return ["MMD-TV falls or stays as each anonymiser gets stronger."]
    return [
        f"MMD-TV rises with strength at {len(steps)} step{'s' if len(steps) > 1 else ''} "
        f"({'; '.join(steps)}): {_RISE_TEXT[kind]}."
        for kind, steps in rises.items()
    ]


#: The closing section of part one: the files it wrote.
_FACES_FILES = [
    "### Files of part one",
    "",
    "* `faces_results.nc` — per condition and pair: every audit variable, faces lost per "
    "identity, coords `method` and `strength`; provenance in the attributes (models and "
    "their pinned weight digests, versions, settings, SHA-256 of the source images).",
    "* `faces_pairs.csv` (one row per condition × pair), `faces_table.csv` (the table "
    "above), `linkage.csv`, `faces_lost.csv`, `faces_certificates.csv`.",
    "* `epsilon_vs_strength.png`, `contact_sheet.png` (one synthetic face through every "
    "anonymiser).",
    "",
]


def _faces_report(faces: FaceDemoResult, cfg: DemoConfig, noise: xr.Dataset | None = None) -> str:
    fc = cfg.faces
    table = faces.table
    base = table[table["method"] == "none"].iloc[0]
    ctrl = faces.controls
    lines = [
        "# idaudit demo: how much identity survives blur, pixelation and a face swap",
        "",
        "Part one audits image anonymisers end to end — source images → anonymiser → face "
        "detection → dlib identity embeddings → the four identity-level DP audits of seed 000, "
        "the reserved-test certificate, and the re-identification numbers an anonymiser study "
        "reports first. Part two runs the same audits on a calibrated-noise mechanism whose ε "
        "is known, as a reference for what the audit numbers can and cannot say.",
        "",
        *verdict_section(faces_verdict(faces, noise)),
        *_discordance_lines(faces),
        "## Part one — anonymisers on synthetic faces",
        "",
        "### What was run",
        "",
        f"* **Faces**: {fc.n_identities} synthetic identities × {fc.n_per_identity} images, "
        "64 × 64 faces from the DCGAN shipped with `gan-face-generate` (trained on the "
        "synthetic DigiFace-1M): each identity is a neighbourhood of a latent centre "
        f"(`idaudit.faces.synthetic_identities`, seed {FACE_SEED}, centres at least "
        f"{fc.min_separation:g} apart in dlib's unit-norm embedding space). **These are "
        "made-up people: no real person's face is used or written** (`contact_sheet.png` "
        "shows one of them).",
        "* **Pipeline**: each 64-pixel frame is enlarged to 160 pixels and edge-padded; MTCNN "
        "finds the face on the *original* frame and the same aligned crop is cut from the "
        "anonymised frame (paired mode: blurred or pixelated faces would otherwise defeat the "
        "detector, and the audit would report only on the survivors). dlib's ResNet (its torch "
        "port, equal to dlib to rounding) encodes the 150 × 150 chips.",
        "* **Anonymisers**: " + ", ".join(f"`{c}`" for c in table["condition"]) + ". Blur σ "
        "and pixel blocks are in pixels of the 64-pixel face; the face swap moves every face "
        "a fraction `mix` towards one fixed donor in the generator's latent space.",
        f"* **Pairs**: the same {int(base['n_pairs'])} identity pairs for every anonymiser "
        "(identities usable in all conditions). Certificates: reserved-test, "
        f"{fc.n_select} vertex-disjoint pairs per anonymiser, {fc.test_size:.0%} of each "
        "identity's faces reserved for the test, α = 0.05 per anonymiser.",
        "* **Each source image is used once** (`sampling='each'`): blur, the face swap and "
        "the identity map are deterministic, so drawing sources with replacement would repeat "
        "rows exactly (iid draws of the channel over these sources, but no new information "
        "about the identity).",
        "* Embeddings are cached by content hash in `.cache/` (owner-only): a re-run "
        f"encodes nothing. {_encoding_sentence(faces)}",
        "",
        "### Results",
        "",
        *markdown_table(table, faces.results),
        "",
        "Medians are over the audited pairs. *Faces lost* counts source images whose original "
        "frame had no detectable face (paired mode loses the same ones for every anonymiser). "
        "*Top-1 identification*: each anonymised face is matched to the nearest original face "
        "of another image; the share matched to the right person (chance: "
        f"{faces.top1_chance:.0%}). *Same-person match*: share of anonymised faces "
        "within dlib's 0.6 distance of their own original. Intervals are exact "
        "(Clopper–Pearson). The synthetic identities are closer together than real people "
        f"(centres only {fc.min_separation:g} apart), so the 0.6 threshold is loose here and "
        "the match column saturates; on real faces it is the verification rate studies "
        "report.",
        "",
        "Medians are given with their 95 % order-statistic interval over the pairs (pairs "
        "share identities, so read it as approximate). The certified column gives the "
        "largest certificate with its zero-error ceiling in brackets (⚑: at the ceiling).",
        "",
        "`epsilon_vs_strength.png` draws, against each anonymiser's strength, the MMD-TV "
        "median and the largest certificate on an ε axis (the certificate's ceiling dotted, "
        "values at it ringed) and the ROC AUC and the top-1 rate on a [0, 1] axis with their "
        "chance levels (dotted; top-1: one over the identities searched). Hollow diamonds at "
        "strength 0: no anonymisation.",
        "",
        "### Certificates",
        "",
        certificate_table(faces.certificates).rstrip("\n"),
        "",
        *ceiling_section(faces.certificates, heading="### The certificate's ceiling"),
        *columns_section(
            [
                "GaussMech",
                "KDE-LR",
                "MMD-TV",
                "MMD hockey-stick",
                "ROC AUC",
                "ROC-HT +∞",
                "certified ε",
            ],
            heading="### What each column answers",
        ),
        "### What each method's number means",
        "",
        *(f"* {METHOD_TEXT[m]}" for m in ("none", "blur", "pixelate", "swap")),
        "",
        "Across all of them: **ε here is a statement about telling identities apart in the "
        "released images** — the audits' ε are lower-bound estimates or diagnostics, the "
        "certificate a lower bound at 95 % confidence (per anonymiser). None is an upper "
        "bound, so no row *proves* an anonymiser private; a positive *certified* ε proves it "
        "is not private at any smaller ε, while the estimates and diagnostics only point "
        "that way.",
        "",
    ]
    if ctrl is not None:
        lines += controls_section(
            ctrl.attrs,
            rows_per_half=fc.n_per_identity // 2,
            heading="### Sanity controls (no anonymisation, each identity split in half)",
        )
    lines += _FACES_FILES
    return "\n".join(lines)


def _encoding_sentence(faces: FaceDemoResult) -> str:
    """Say what this run encoded and what it read from the cache, and how long it took."""
    took = f"the faces part took {faces.seconds:.0f} s"
    encoded = f"{faces.n_encoded} {'face' if faces.n_encoded == 1 else 'faces'}"
    if faces.n_encoded == 0 and faces.n_cached:
        return f"This run read all {faces.n_cached} results from the cache, encoding none; {took}."
    if faces.n_cached:
        return f"This run encoded {encoded} and read {faces.n_cached} from the cache; {took}."
    return f"This run encoded {encoded}; {took}."
