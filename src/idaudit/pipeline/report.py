"""The one report renderer: sections that each explain one thing once, and the documents.

A report opens with a **verdict** (at most six one-sentence bullets, each with its status
word), then its tables, then the explanations. Every section here explains one thing, once:
a status, the certificate's ceiling, a route and its scale, a column, the split-half
controls. The documents of ``idaudit audit`` (one condition or several), ``idaudit certify``,
:meth:`GeneratorAudit.to_markdown` and the demo are assembled from them; every table is drawn
by :func:`idaudit._markdown.table`.

What a verdict may say. A certified lower bound proves "at least": it never orders two
conditions (a smaller certificate is not less leakage), and a certificate whose ceiling at
its test sizes is 0 is no evidence at all. An estimate orders two conditions only when its
uncertainty is reported beside it (here: 95 % intervals of the medians that do not
overlap, or a paired test); otherwise the conditions are "not distinguishable here".

``idaudit privacy``'s ``report.md`` (:meth:`idaudit.pipeline.PrivacyReport.to_markdown`)
uses the same form, :mod:`idaudit._markdown`'s table and verdict, from below: a science
package never imports this layer.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from itertools import pairwise
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd
import xarray as xr

from idaudit._markdown import (
    MAX_BULLETS,
    Bullet,
    number,
    statuses_section,
    table,
    verdict_section,
    warnings_section,
)
from idaudit._results import reduction_attrs, reduction_attrs_across
from idaudit.audits import discordant_routes, table1
from idaudit.audits._tables import at_ceiling, ceiling_reached, common_pairs
from idaudit.exceptions import InvalidInputError

__all__ = [
    "MMDTV_CEILING",
    "MMDTV_SEPARATED",
    "audit_bullets",
    "audit_document",
    "audit_table",
    "ceiling_section",
    "ceiling_warnings",
    "certificate_bullets",
    "certificate_table",
    "certify_document",
    "column_flag",
    "columns_section",
    "controls_section",
    "frame_table",
    "interval_text",
    "median_interval",
]

#: MMD-TV's largest value with a kernel bounded by 1 (the RBF kernel): MMD ≤ √2, so the TV
#: lower bound MMD / 2 is at most √2 / 2 and ε = 2 artanh(TV) at most 2 artanh(√2 / 2).
MMDTV_CEILING = 2.0 * math.atanh(math.sqrt(2.0) / 2.0)
#: MMD-TV of two point masses with the median-heuristic bandwidth (σ = their distance):
#: MMD² = 2 − 2 e^{−1/2}; identities that never overlap sit near this, not near the ceiling.
MMDTV_SEPARATED = 2.0 * math.atanh(math.sqrt(2.0 - 2.0 * math.exp(-0.5)) / 2.0)

#: Confidence of the intervals on medians that the reports print.
MEDIAN_LEVEL = 0.95

#: The flag of a ROC-HT +∞ column that counts +∞ on every pair of every row.
ROCHT_FLAG = "+∞ on every pair of every row: no information"


# ---------------------------------------------------------------- numbers and their scale


def median_interval(
    values: npt.ArrayLike, level: float = MEDIAN_LEVEL
) -> tuple[float, float, float]:
    """Median of the finite values and its distribution-free confidence interval.

    The interval is the exact order-statistic interval of the median
    (:func:`scipy.stats.quantile_test`), which treats the values as independent draws. Pairs
    of identities share identities, so over pairs it is approximate. ``(nan, nan, nan)`` for
    no finite value; the interval is ``(-inf, inf)`` side by side when too few values give
    one at ``level``.
    """
    from scipy.stats import quantile_test

    x = np.asarray(values, dtype=np.float64)
    x = x[~np.isnan(x)]
    if not x.size:
        return float("nan"), float("nan"), float("nan")
    med = float(np.median(x))
    if x.size < 2:
        return med, float("-inf"), float("inf")
    ci = quantile_test(x, q=med, p=0.5).confidence_interval(level)
    return med, float(ci.low), float(ci.high)


def interval_text(med: float, low: float, high: float) -> str:
    """``"0.93 [0.90, 0.95]"``; the median alone when no interval could be formed."""
    if not (np.isfinite(low) and np.isfinite(high)):
        return number(med)
    return f"{number(med)} [{number(low)}, {number(high)}]"


def column_flag(values: npt.ArrayLike, ceilings: npt.ArrayLike | None = None) -> str | None:
    """Return a column's flag when it carries no information here, else ``None``.

    All values +∞ (ROC-HT's endpoint artefact) or all at a positive ceiling (a certificate
    limited by its test size) say nothing about differences between rows.
    """
    x = np.asarray(values, dtype=np.float64)
    x = x[~np.isnan(x)]
    if x.size and np.isposinf(x).all():
        return "+∞ on every row: this column carries no information here"
    if ceilings is not None and x.size:
        top = np.asarray(ceilings, dtype=np.float64)
        keep = ~np.isnan(np.asarray(values, dtype=np.float64))
        if bool((top[keep] <= 0).all()):
            return "ceiling 0 on every row: these test sizes certify nothing"
        if bool(ceiling_reached(x, top[keep]).all()):
            return "at its ceiling on every row: the test size, not the data, sets it"
    return None


def ceiling_section(
    certificates: Mapping[str, xr.Dataset], *, heading: str = "## The certificate's ceiling"
) -> list[str]:
    """Explain the certificate's zero-error ceiling once, with this report's counts.

    The ceiling is what an error-free reserved test certifies at the test sizes: no data can
    certify more. A certificate at it says the test size set the number; a ceiling of 0 says
    the test sizes can certify nothing at all.
    """
    certs = {k: c for k, c in certificates.items() if c.sizes.get("pair", 0)}
    if not certs or not any("epsilon_lb_ceiling" in c for c in certs.values()):
        return []
    n = sum(c.sizes["pair"] for c in certs.values())
    n_at = sum(int(at_ceiling(c).sum()) for c in certs.values())
    n_zero = sum(int((c["epsilon_lb_ceiling"].values <= 0).sum()) for c in certs.values())
    tops = np.concatenate([c["epsilon_lb_ceiling"].values for c in certs.values()])
    said = (
        "A reserved-test certificate turns a classifier's test errors into ε through one-sided "
        "Clopper–Pearson bounds. Its *ceiling* (status descriptive) is what zero test errors "
        "certify at the pair's test sizes: no data can certify more. A certificate *at its "
        "ceiling* (⚑) equals it: the number of test rows, not the pipeline, set the value, so "
        "it says the audit could not certify more, not that the pipeline is nearly private, "
        "and equal certificates at equal ceilings rank nothing. More test rows per identity "
        "(more images per identity, or a larger `test_size`) lift the ceiling. A ceiling of "
        "0 means the test sizes certify nothing whatever the errors: such a 0 is no evidence "
        "either way."
    )
    counts = (
        f"Here: {n_at} of the {n} certificates sit at their ceiling"
        + (f", {n_zero} have a ceiling of 0" if n_zero else "")
        + f"; the ceilings run {number(float(np.nanmin(tops)))}–{number(float(np.nanmax(tops)))}."
    )
    return [heading, "", said, "", counts, ""]


def ceiling_warnings(certificates: Mapping[str, xr.Dataset]) -> list[str]:
    """One warning per condition whose test sizes can certify nothing (ceiling 0)."""
    out = []
    for name, c in certificates.items():
        if not c.sizes.get("pair", 0) or "epsilon_lb_ceiling" not in c:
            continue
        zero = np.asarray(c["epsilon_lb_ceiling"].values <= 0)
        if zero.all():
            sizes = sorted(
                {int(v) for k in ("n_test_a", "n_test_b") if k in c for v in c[k].values}
            )
            shown = ", ".join(map(str, sizes)) if sizes else "these"
            need = c.attrs.get("min_test_rows_for_nonzero")
            out.append(
                f"{_label(name)}can only certify 0: with {shown} test rows per identity even "
                "an error-free test certifies nothing"
                + (f" (at least {need} are needed)" if need is not None else "")
                + "; its 0 is no evidence either way."
            )
    return out


def certificate_table(certificates: Mapping[str, xr.Dataset]) -> str:
    """Return every certified pair: test sizes and errors, its ε beside its ceiling (⚑ at it).

    With the error rates' one-sided Clopper–Pearson upper bounds (``ufpr``, ``ufnr``) when the
    certificates carry them; the ε column is flagged when it carries nothing
    (:func:`column_flag`).
    """
    several = len(certificates) > 1
    # the one-sided upper bounds on the test error rates, when every Dataset has them
    bounds = bool(certificates) and all("ufpr" in c for c in certificates.values())
    header = [
        *(["condition"] if several else []),
        "pair",
        "test rows (a, b)",
        "test errors (fp, fn)",
        *(["UFPR", "UFNR"] if bounds else []),
        "test AUC",
        "certified ε",
        "ceiling",
    ]
    rows, eps, tops = [], [], []
    for name, c in certificates.items():
        flags = at_ceiling(c) if c.sizes.get("pair", 0) else np.zeros(0, dtype=bool)
        for i in range(c.sizes.get("pair", 0)):
            r = c.isel(pair=i)

            def get(k: str, r: xr.Dataset = r) -> Any:
                return r[k].item() if k in r else None

            lb, top = float(r["epsilon_lb"]), get("epsilon_lb_ceiling")
            eps.append(lb)
            tops.append(np.nan if top is None else float(top))
            rows.append(
                [
                    *([name] if several else []),
                    f"{r['identity_a'].item()} vs {r['identity_b'].item()}",
                    f"{number(get('n_test_a'))}, {number(get('n_test_b'))}",
                    f"{number(get('test_fp'))}, {number(get('test_fn'))}",
                    *([number(get("ufpr"), 4), number(get("ufnr"), 4)] if bounds else []),
                    get("test_auc"),
                    f"{number(lb, 4)}{' ⚑' if flags[i] else ''}",
                    None if top is None else number(float(top), 4),
                ]
            )
    flag = column_flag(eps, tops)
    return table(
        header,
        rows,
        statuses={
            **(
                {"UFPR": "certified_upper_bound", "UFNR": "certified_upper_bound"} if bounds else {}
            ),
            "test AUC": "sample_estimate",
            "certified ε": "certified_lower_bound",
            "ceiling": "descriptive",
        },
        flags={"certified ε": flag} if flag else None,
    )


#: Each column a report prints, explained once (routes first, then the truth columns).
COLUMN_TEXT = {
    "GaussMech": (
        "a Gaussian-mechanism fit to the embeddings' means and spread; a *diagnostic* under "
        "modelling assumptions, not on the ε scale of a bound"
    ),
    "KDE-LR": (
        "a sum over dimensions of kernel-density log-likelihood ratios; a *diagnostic*: over "
        "hundreds of dimensions kernel noise and empty tails add up, so it can sit orders of "
        "magnitude from any truth (part two of the demo shows by how much)"
    ),
    "MMD-TV": (
        "2·artanh(MMD/2), a lower bound on ε from the kernel MMD between two identities' "
        "embeddings; a *sample estimate* (no confidence correction, it can overshoot). With "
        f"the RBF kernel (bounded by 1) it cannot exceed 2·artanh(√2/2) ≈ {MMDTV_CEILING:.2f}, "
        "and with the median-heuristic bandwidth two identities that never overlap reach only "
        f"about {MMDTV_SEPARATED:.2f}: read every MMD-TV value against that scale"
    ),
    "MMD hockey-stick": (
        "2·artanh(MMD/√2), the same MMD read through the hockey-stick divergence (González et "
        "al.): larger than MMD-TV, unbounded as MMD → √2; a *sample estimate*"
    ),
    "ROC AUC": (
        "how well an out-of-fold classifier tells two identities apart (0.5: not at all, 1: "
        "always); a *sample estimate*"
    ),
    "ROC-HT +∞": (
        "how many pairs' out-of-fold ROC touches an end of the curve (false-positive rate 0 "
        "with true positives, or the reverse), where Eq. 15 of seed 000 gives ε = +∞; with "
        "around a hundred rows this happens even near chance, so it is a *diagnostic*"
    ),
    "certified ε": (
        "the reserved-test certificate: with the stated confidence the pipeline's ε is *at "
        "least* this (a *certified lower bound*; a small value is absence of evidence, not "
        "evidence of privacy). Read it against its ceiling (next section)"
    ),
    "true ε": ("the exact ε of each audited pair under the benchmark mechanism (*reference*)"),
    "guarantee, all pairs": (
        "the ε the mechanism guarantees for *every* pair of identities at once (its worst "
        "pair, *reference*); the audited pairs' true ε sit at or below it"
    ),
}


def columns_section(
    columns: Iterable[str], *, heading: str = "## What each column answers"
) -> list[str]:
    """Explain each named column once (:data:`COLUMN_TEXT`), in the order given."""
    known = [c for c in dict.fromkeys(columns) if c in COLUMN_TEXT]
    if not known:
        return []
    return [heading, "", *(f"- **{c}**: {COLUMN_TEXT[c]}." for c in known), ""]


def controls_section(
    attrs: Mapping[str, Any],
    *,
    rows_per_half: int | None = None,
    heading: str = "## Same-identity split-half controls",
) -> list[str]:
    """Explain the split-half controls once: the calibrated MMD² test, then the AUC's bias."""
    alpha = float(attrs.get("alpha", float("nan")))
    n_ids = attrs.get("n_identities")
    auc = float(attrs.get("mean_auc", float("nan")))
    rows = f" (here about {rows_per_half} per half)" if rows_per_half else ""
    if auc < 0.5:
        reading = 'below 0.5, as under the null: read it as "no separation found"'
    elif auc <= 0.6:
        reading = 'close to 0.5, as under the null: read it as "no separation found"'
    elif auc > 0.6:
        reading = (
            "above what the null gives: a classifier tells the two halves of an identity "
            "apart, so the halves are not exchangeable; check the MMD² tests"
        )
    else:
        reading = "not computed"
    said = (
        "Each identity's rows are split in two halves that should be indistinguishable. "
        f"MMD² permutation tests rejecting at {number(alpha)}: {attrs.get('n_rejected', '?')} "
        f"of {n_ids if n_ids is not None else '?'} (about "
        f"{number(alpha * int(n_ids)) if n_ids is not None else 'a share α'} expected with no "
        "artefact); this test's null level is exact, so it is the calibrated check. Mean "
        f"split-half out-of-fold ROC AUC: {number(auc)}, {reading}. With no signal this AUC "
        "sits at or *below* 0.5, not at it: a held-out row is missing from its own half's "
        "training rows, so the classifier leans away from it, the more so the fewer the rows"
        f"{rows}; only a mean well *above* 0.5 points at an artefact."
    )
    corners = attrs.get("n_corners")
    if corners is not None:
        said += f" Exact (0, 1) ROC corners: {corners} (none expected)."
    return [heading, "", said, ""]


# ---------------------------------------------------------------- audits of conditions


def _label(name: str) -> str:
    return f"Condition `{name}` " if name else "This condition "


def _epsilon_common(ds: xr.Dataset) -> npt.NDArray[np.bool_]:
    """Return the pairs table1's medians are over (:func:`~idaudit.audits._tables.common_pairs`)."""
    eps = [
        str(name)
        for name, var in ds.data_vars.items()
        if str(name).endswith("_epsilon") and var.dims == ("pair",)
    ]
    return common_pairs(ds, eps)[0]


def _parts(results: Mapping[str, xr.Dataset] | xr.Dataset) -> dict[str, xr.Dataset]:
    if isinstance(results, xr.Dataset):
        if "condition" in results.dims:
            return {str(c): results.sel(condition=c) for c in results["condition"].values}
        return {str(results.attrs.get("condition", "")): results}
    return dict(results)


#: The medians printed with a 95 % interval: table1's column -> (auditor class, variable suffix).
_WITH_INTERVAL = {"mmdtv": ("MMDTVAuditor", "_epsilon"), "roc_auc": ("ROCHTAuditor", "_auc")}


def audit_table(results: Mapping[str, xr.Dataset] | xr.Dataset) -> str:
    """Seed 000's Table 1 with 95 % intervals on the MMD-TV and ROC AUC medians and flags.

    One row per condition; medians over the pairs where every ε has a value (a method with
    none on any pair is left out and its column flagged when that holds in every condition);
    each column's status under the header; a column that is +∞ on every row flagged there.
    """
    parts = _parts(results)
    frames = [table1(ds.assign_attrs(condition=n)) for n, ds in parts.items()]
    frame = pd.concat(frames)
    status = dict(frames[0].attrs.get("status", {}))
    names = {
        "n_pairs": "pairs",
        "gaussmech": "GaussMech",
        "kdelr_mix0": "KDE-LR (α = 0)",
        "kdelr_mix0.01": "KDE-LR (α = 0.01)",
        "mmdtv": "MMD-TV [95% CI]",
        "roc_auc": "ROC AUC [95% CI]",
        "rocht_inf": "ROC-HT +∞",
    }
    cols = [c for c in names if c in frame.columns]
    several = len(parts) > 1
    header = [*(["condition"] if several else []), *(names[c] for c in cols)]
    rows = []
    for (name, ds), (_, r) in zip(parts.items(), frame.iterrows(), strict=True):
        keep = _epsilon_common(ds)
        cells: list[Any] = [name] if several else []
        for c in cols:
            if c in _WITH_INTERVAL:
                var = _var(ds, *_WITH_INTERVAL[c])
                cells.append(interval_text(*median_interval(ds[var].values[keep])))
            else:
                cells.append(r[c])
        rows.append(cells)
    statuses = {names[c]: status[c] for c in cols if c in status}
    # a column empty in every condition (each table1 above holds one condition)
    flags = {
        names[c]: text
        for c, text in frames[0].attrs.get("flags", {}).items()
        if c in names and all(c in f.attrs.get("flags", {}) for f in frames)
    }
    if "rocht_inf" in cols and _all_infinite(frame["rocht_inf"]):
        flags["ROC-HT +∞"] = ROCHT_FLAG
    return table(header, rows, statuses=statuses, flags=flags or None)


def _all_infinite(counts: Iterable[Any]) -> bool:
    """Whether every ``"k/n"`` count of ROC-HT's +∞ pairs has ``k == n`` (and ``n > 0``)."""
    split = [str(v).partition("/") for v in counts]
    return all(k == n and n not in ("", "0") for k, _, n in split)


def _var(ds: xr.Dataset, cls: str, suffix: str) -> str:
    for label in str(ds.attrs.get("auditors", "")).split(","):
        if label and ds.attrs.get(f"{label}.class") == cls and f"{label}{suffix}" in ds:
            return f"{label}{suffix}"
    default = {
        "MMDTVAuditor": "mmdtv",
        "ROCHTAuditor": "rocht",
        "GaussMechAuditor": "gaussmech",
        "KDELRAuditor": "kdelr",
    }[cls] + suffix
    return default


def audit_bullets(
    results: Mapping[str, xr.Dataset] | xr.Dataset,
    certificates: Mapping[str, xr.Dataset] | None = None,
) -> list[Bullet]:
    """Return the verdict of an audit of one or several conditions (at most six bullets).

    Certificates give "at least" statements per condition (never an order), every positive
    one kept (:func:`certificate_bullets`); the conditions whose test sizes certify nothing
    share one bullet. MMD-TV and the ROC AUC order conditions only where
    the 95 % intervals of their medians do not overlap; otherwise "not distinguishable
    here". One bullet says which numbers are diagnostics.
    """
    parts = _parts(results)
    certs = dict(certificates or {})
    bullets: list[Bullet] = []
    # estimates: with an interval, ordered only when the intervals separate
    for cls, suffix, what in (
        ("MMDTVAuditor", "_epsilon", "median MMD-TV ε"),
        ("ROCHTAuditor", "_auc", "median ROC AUC"),
    ):
        found = {}
        for name, ds in parts.items():
            var = _var(ds, cls, suffix)
            if var in ds:
                found[name] = median_interval(ds[var].values[_epsilon_common(ds)])
        if not found:
            continue
        scale = f" (ceiling {MMDTV_CEILING:.2f})" if cls == "MMDTVAuditor" else ""
        bullets.append(Bullet("sample_estimate", _estimate_sentence(what, found, scale)))
    # the diagnostics that were run, and only those
    ran = [
        name
        for cls, name in (
            ("GaussMechAuditor", "GaussMech"),
            ("KDELRAuditor", "KDE-LR"),
            ("ROCHTAuditor", "ROC-HT's +∞ count"),
        )
        if any(_var(ds, cls, "_epsilon") in ds for ds in parts.values())
    ]
    if ran:
        said = ran[0] if len(ran) == 1 else f"{', '.join(ran[:-1])} and {ran[-1]}"
        verb = "is a diagnostic" if len(ran) == 1 else "are diagnostics"
        bullets.append(
            Bullet(
                "diagnostic",
                f"{said} {verb}, not on a bound's ε scale: "
                f"{'it orders' if len(ran) == 1 else 'they order'} nothing and "
                f"prove{'s' if len(ran) == 1 else ''} nothing.",
            )
        )
    # the certificates lead, every positive one kept (merged when they would not fit)
    certified = certificate_bullets(certs, room=max(MAX_BULLETS - len(bullets), 1))
    return [*certified, *bullets][:MAX_BULLETS]


def certificate_bullets(
    certificates: Mapping[str, xr.Dataset], *, room: int | None = None
) -> list[Bullet]:
    """Return the certificates' "at least" bullets, read against their ceilings.

    Every positive certificate is kept: one bullet per certified condition, or, when they
    do not fit in ``room`` bullets, one bullet that names each condition with its bound.
    The conditions that certify 0 share one bullet, and those whose ceiling is 0 at their
    test sizes share another (``descriptive``: it is about the ceiling, not a bound). Each
    certificate bullet's status is that of the condition's largest certificate
    (:func:`reduction_attrs`); when several conditions were certified as separate families,
    each bound holds at its own condition's confidence, not jointly with the others
    (:func:`reduction_attrs_across`), and the bullet says so.

    Parameters
    ----------
    certificates : mapping of condition to Dataset
        ``certificates_`` per condition (``""`` for the pipeline itself).
    room : int, optional
        The most bullets to return; the positive certificates are merged into one bullet
        when they would not fit. ``None``: no limit.

    Returns
    -------
    list of Bullet
    """
    if room is not None and room < 1:
        raise InvalidInputError(f"`room` must be at least 1; got {room!r}.")
    certs = {k: c for k, c in certificates.items() if c.sizes.get("pair", 0)}
    joint = (
        len(certs) < 2
        or reduction_attrs_across(
            [(c["epsilon_lb"].attrs, c.sizes["pair"]) for c in certs.values()]
        )["status"]
        == "certified_lower_bound"
    )
    own = "" if joint else " (at its own confidence: the conditions were certified separately)"
    # per condition: (status, reason, name, bound, ceiling, at ceiling), or ceiling 0, or 0
    positive: list[tuple[str, str, str, float, float, bool]] = []
    unbounded: list[str] = []
    nothing: list[tuple[str, float]] = []
    for name, c in certs.items():
        lb = np.asarray(c["epsilon_lb"].values, dtype=np.float64)
        tops = (
            np.asarray(c["epsilon_lb_ceiling"].values, dtype=np.float64)
            if "epsilon_lb_ceiling" in c
            else np.full(lb.shape, np.nan)
        )
        i = int(np.argmax(lb))
        if np.all(tops <= 0):
            unbounded.append(name)
        elif lb[i] > 0:
            reduced = reduction_attrs(
                {"status": "certified_lower_bound", **c["epsilon_lb"].attrs}, lb.size
            )
            status = str(reduced["status"])
            reason = str(reduced.get("status_reason", status.replace("_", " ")))
            at = bool(at_ceiling(c)[i])
            positive.append((status, reason, name, float(lb[i]), float(tops[i]), at))
        else:
            nothing.append((name, float(np.nanmax(tops))))
    tail: list[Bullet] = []
    if nothing:
        names = _subject([n for n, _ in nothing])
        ceilings = ", ".join(number(t, 4) for _, t in nothing)
        verb = "certifies" if len(nothing) == 1 else "certify"
        tail.append(
            Bullet(
                "certified_lower_bound",
                f"{names} {verb} 0{own} (ceiling{'s' if len(nothing) > 1 else ''} {ceilings}): "
                "no leakage is proven, which is not evidence of privacy.",
            )
        )
    if unbounded:
        names = _subject(unbounded)
        one = len(unbounded) == 1
        tail.append(
            Bullet(
                "descriptive",
                f"{names} {'has' if one else 'have'} a certificate ceiling of 0 at "
                f"{'its' if one else 'their'} test sizes: {'it' if one else 'they'} can "
                f"certify nothing, and {'its 0 is' if one else 'their 0s are'} no evidence "
                "either way.",
            )
        )
    fits = room is None or len(positive) + len(tail) <= room
    bullets: list[Bullet] = []
    if fits or len(positive) < 2:
        for status, reason, name, bound, top, at in positive:
            who = _subject([name])
            flag = " (at its ceiling ⚑: the test size set it)" if at else ""
            claim = (
                f"{who} leaks at least ε = {number(bound, 4)}{own}"
                if status == "certified_lower_bound"
                else f"{who}'s largest bound, ε = {number(bound, 4)}, is not certified ({reason})"
            )
            bullets.append(
                Bullet(
                    status,
                    f"{claim} on its most separable certified pair, against a ceiling of "
                    f"{number(top, 4)}{flag}; a lower bound, so it orders nothing.",
                )
            )
    else:
        # too many to say one by one: every bound in one bullet; any uncertified one
        # takes the bullet's status (the weaker word) and is marked
        statuses = [s for s, *_ in positive if s != "certified_lower_bound"]
        status = statuses[0] if statuses else "certified_lower_bound"
        said = "; ".join(
            f"`{name}` ε ≥ {number(bound, 4)} (ceiling {number(top, 4)}{' ⚑' if at else ''}"
            f"{'' if s == 'certified_lower_bound' else f', not certified: {reason}'})"
            for s, reason, name, bound, top, at in positive
        )
        each = (
            "each at its own confidence, the conditions were certified separately"
            if not joint
            else "jointly"
        )
        bullets.append(
            Bullet(
                status,
                (
                    f"{len(positive)} conditions are proven to leak ({each})"
                    if not statuses
                    else f"{len(positive)} conditions have a positive bound, not every one "
                    f"certified ({each})"
                )
                + f", each on its most separable certified pair: {said}."
                + (" ⚑: the test size set the bound." if any(p[-1] for p in positive) else "")
                + " Lower bounds order nothing.",
            )
        )
    return bullets + tail


def name_list(names: Sequence[str]) -> str:
    """Return "`a`", "`a` and `b`", "`a`, `b` and `c`"."""
    quoted = [f"`{n}`" for n in names]
    return quoted[0] if len(quoted) == 1 else f"{', '.join(quoted[:-1])} and {quoted[-1]}"


def _subject(names: Sequence[str]) -> str:
    """Name the conditions (:func:`name_list`); the one unnamed condition is "The pipeline"."""
    return name_list(names) if names[0] or len(names) > 1 else "The pipeline"


def _estimate_sentence(
    what: str, found: Mapping[str, tuple[float, float, float]], scale: str
) -> str:
    """Say one estimate per condition with its interval; order only separated intervals.

    An interval is named only where there is one: a condition with too few pairs for a 95 %
    interval (or none with a value) says so, and then no order is claimed.
    """
    shown = "; ".join(f"{f'`{n}` ' if n else ''}{interval_text(*v)}" for n, v in found.items())
    short = [n for n, (_, lo, hi) in found.items() if not (np.isfinite(lo) and np.isfinite(hi))]
    if all(np.isnan(m) for m, _, _ in found.values()):
        return f"The {what}{scale} has no value here: no pair has a value of every method."
    if len(found) == 1:
        if short:
            return f"The {what}{scale} is {shown}, with too few pairs for a 95 % interval."
        return f"The {what}{scale} is {shown} (95 % order-statistic interval over the pairs)."
    if short:
        return (
            f"By the {what}{scale} the conditions are not distinguishable here: "
            f"{name_list(short)} {'has' if len(short) == 1 else 'have'} too few pairs for a "
            f"95 % interval ({shown})."
        )
    order = sorted(found, key=lambda n: found[n][0])
    separated = all(found[a][2] < found[b][1] for a, b in pairwise(order))
    if separated:
        ranking = " < ".join(f"`{n}`" for n in order)
        return (
            f"The {what}{scale} orders the conditions {ranking}: their 95 % "
            f"order-statistic intervals do not overlap ({shown})."
        )
    return (
        f"By the {what}{scale} the conditions are not distinguishable here: their 95 % "
        f"order-statistic intervals overlap ({shown})."
    )


def audit_document(
    results: Mapping[str, xr.Dataset] | xr.Dataset,
    certificates: Mapping[str, xr.Dataset] | None = None,
    *,
    title: str = "# idaudit audit",
    context: Sequence[str] = (),
    extra: Sequence[str] = (),
    controls: xr.Dataset | None = None,
    table2: pd.DataFrame | None = None,
) -> str:
    """Assemble an audit report: verdict, warnings, tables, then the explanations.

    Parameters
    ----------
    results : xarray.Dataset or mapping of condition to Dataset
        :func:`idaudit.audit_pairs` results (one condition, or several).
    certificates : mapping of condition to Dataset, optional
        ``certificates_`` per condition.
    title : str
        The first line.
    context : sequence of str
        Lines on the input and the pairs, printed under the tables.
    extra : sequence of str
        Lines appended at the end (e.g. lost faces).
    controls : xarray.Dataset, optional
        Split-half controls (:func:`idaudit.certify.sanity_controls`).
    table2 : pandas.DataFrame, optional
        :func:`idaudit.audits.table2` of the certificates, printed with them.

    Returns
    -------
    str
    """
    parts = _parts(results)
    certs = dict(certificates or {})
    warned = ceiling_warnings(certs) + [
        (f"Condition `{name}`: " if len(parts) > 1 else "") + sentence
        for name, ds in parts.items()
        for sentence in discordant_routes(ds, certificates=certs.get(name))
    ]
    lines = [
        title,
        "",
        *verdict_section(audit_bullets(parts, certs)),
        *warnings_section(warned),
        "## Audits",
        "",
        "Medians over the pairs where every method has a value, MMD-TV and the ROC AUC with "
        "the 95 % order-statistic interval of the median (it treats the pairs as independent; "
        "pairs share identities, so read it as approximate); the second header row gives "
        "each column's status.",
        "",
        audit_table(parts),
        *context,
    ]
    if certs:
        lines += ["## Certificates", ""]
        if table2 is not None:
            lines += [
                table(
                    list(table2.columns),
                    table2.values.tolist(),
                    statuses=table2.attrs.get("status", {}),
                ),
                "",
            ]
        lines += [certificate_table(certs)]
    else:
        lines += ["", "No certificate was computed: nothing above carries a guarantee.", ""]
    lines += [
        *columns_section(["GaussMech", "KDE-LR", "MMD-TV", "ROC AUC", "ROC-HT +∞", "certified ε"]),
        *ceiling_section(certs),
        *(controls_section(controls.attrs) if controls is not None else []),
        *statuses_section(
            ["diagnostic", "sample_estimate", "descriptive"]
            + (["certified_lower_bound"] if certs else [])
        ),
        *extra,
    ]
    return "\n".join(lines)


def certify_document(
    certificates: xr.Dataset,
    *,
    controls: xr.Dataset | None = None,
    context: Sequence[str] = (),
    notes: Sequence[str] = (),
) -> str:
    """Assemble ``certificates.md`` of ``idaudit certify``: verdict, table, explanations."""
    a = certificates.attrs
    lines = [
        "# idaudit certify",
        "",
        *verdict_section(
            certificate_bullets({"": certificates})
            or [Bullet("certified_lower_bound", "No pair was certified.")]
        ),
        *warnings_section([*ceiling_warnings({"": certificates}), *notes]),
        "## Certificates",
        "",
        f"Status *certified_lower_bound*: {a.get('confidence', '')}. Each error-rate bound is "
        f"a one-sided Clopper–Pearson bound at {number(a.get('alpha_per_bound'))}; "
        f"δ = {number(a.get('delta'))}.",
        "",
        certificate_table({"": certificates}),
        *context,
        *ceiling_section({"": certificates}),
        *(controls_section(controls.attrs) if controls is not None else []),
        *statuses_section(["certified_lower_bound", "sample_estimate", "descriptive"]),
    ]
    return "\n".join(lines)


def frame_table(frame: pd.DataFrame) -> str:
    """Return a DataFrame as a report table: statuses from ``frame.attrs["status"]``, flags derived.

    The flags are those of :func:`column_flag` for a table of seed 000's layout: a
    ``rocht_inf`` column of ``"k/n"`` counts with ``k == n`` on every row, and an
    ``epsilon_lb`` column whose ``n_at_ceiling`` equals ``n_pairs`` on every row; and those
    the frame carries in ``frame.attrs["flags"]`` (e.g. :func:`~idaudit.audits.table2`'s
    ceiling of 0 on every pair).
    """
    cols = [str(c) for c in frame.columns]
    flags: dict[str, str] = {k: v for k, v in frame.attrs.get("flags", {}).items() if k in cols}
    if "rocht_inf" in frame and len(frame) and _all_infinite(frame["rocht_inf"]):
        flags["rocht_inf"] = ROCHT_FLAG
    if (
        {"epsilon_lb", "n_at_ceiling", "n_pairs"} <= set(cols)
        and len(frame)
        and all(
            str(a) == str(n) for a, n in zip(frame["n_at_ceiling"], frame["n_pairs"], strict=True)
        )
    ):
        flags["epsilon_lb"] = "at its ceiling on every pair: the test size sets it"
    return table(
        cols,
        frame.values.tolist(),
        statuses=frame.attrs.get("status", {}),
        flags=flags or None,
    )
