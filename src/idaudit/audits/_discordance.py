"""What the four routes of seed 000 say together: discordance warnings and report conclusions.

``discordant_routes`` flags diagnostics that are large where the classifier cannot tell the
identities apart; ``conclusion`` and ``ROUTE_GUIDE`` are the reports' reading of the numbers.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import xarray as xr

from idaudit._results import reduction_attrs_across
from idaudit.audits._summary import AuditSummary, summarize
from idaudit.audits._tables import at_ceiling
from idaudit.exceptions import InvalidInputError

__all__ = ["discordant_routes"]

#: Half-width of the band around 0.5 in which a median ROC AUC counts as "cannot tell the
#: identities apart" (AUC in (0.4, 0.6)).
AUC_BAND = 0.1

#: Values this close are a tie: no condition is named best by that measure. Medians printed
#: to three decimals that agree to 1e-9 are the same number for a reader.
TIE_ATOL = 1e-9
#: Median GaussMech ε above which the diagnostic is "large".
GAUSSMECH_LARGE = 1.0
#: Median KDE-LR ε above which the diagnostic is "large".
KDELR_LARGE = 10.0
#: Share of the common pairs with ROC-HT ε = +inf from which that diagnostic is "large".
ROCHT_INF_SHARE = 0.5

#: How the routes answer different questions (for the reports).
ROUTE_GUIDE = (
    "GaussMech and KDE-LR are *diagnostics*: scores computed from the embeddings that are "
    "not on the ε scale of a bound, so a KDE-LR ε in the thousands beside an MMD-TV ε below "
    "1 is not a contradiction, and neither says how much a pipeline leaks. ROC-HT is a "
    "diagnostic too (its +inf values come from the ends of a finite ROC curve). MMD-TV is a "
    "*sample estimate* of a lower bound on ε: it estimates a bound from these rows, without "
    "a one-sided confidence correction, so it can overshoot. The ROC AUC is a sample "
    "estimate of how well a classifier tells two identities apart (0.5: not at all). The "
    "reserved-test certificate is the only statement with a guarantee: with the stated "
    "confidence the pipeline's ε is at least `epsilon_lb` (a small certificate is absence "
    "of evidence, not evidence of privacy)."
)


def _route(label: str, ds: xr.Dataset | None) -> str:
    """Auditor class of a variable prefix: from ``ds``'s attrs, else from the default labels."""
    if ds is not None and f"{label}.class" in ds.attrs:
        return str(ds.attrs[f"{label}.class"])
    for prefix, cls in (
        ("gaussmech", "GaussMechAuditor"),
        ("kdelr", "KDELRAuditor"),
        ("mmdtv", "MMDTVAuditor"),
        ("rocht", "ROCHTAuditor"),
    ):
        if label.startswith(prefix):
            return cls
    return ""


def _parts(summary: AuditSummary, ds: xr.Dataset | None) -> dict[str, Any]:
    """Pull the route values out of a summary: medians per class, +inf shares, median AUC."""
    out: dict[str, Any] = {
        "GaussMechAuditor": [],
        "KDELRAuditor": [],
        "MMDTVAuditor": [],
        "rocht_inf": [],
        "auc": None,
    }
    for column, value in zip(summary.columns, summary.values, strict=True):
        var, _, stat = column.partition(" (")
        stat = stat.rstrip(")")
        if var.endswith("_auc") and stat == "median":
            out["auc"] = float(value)
            continue
        label = var.removesuffix("_epsilon")
        cls = _route(label, ds)
        if cls == "ROCHTAuditor" and stat == "+inf count":
            k, n = (int(x) for x in str(value).split("/"))
            out["rocht_inf"].append((label, k, n))
        elif cls in out and stat == "median":
            out[cls].append((label, float(value)))
    return out


def discordant_routes(
    result: xr.Dataset | AuditSummary, *, certificates: xr.Dataset | None = None
) -> list[str]:
    r"""Warn when the classifier cannot tell identities apart but the diagnostics are large.

    Parameters
    ----------
    result : xarray.Dataset or AuditSummary
        An :func:`idaudit.audit_pairs` result (one condition, or several stacked along
        ``condition``: each is checked and its sentences start with its name), or its
        :func:`idaudit.summarize` row.
    certificates : xarray.Dataset, optional
        A ``ReservedTestCertifier(...).fit(...).certificates_``. When any certificate is
        positive, leakage is proven and nothing is said (the diagnostics may be right). Its
        median ``test_auc`` is used when ``result`` has no ROC AUC, or when it is further
        from 0.5 than the result's (its classifier may be a stronger one).

    Returns
    -------
    list of str
        One sentence per large diagnostic, empty when the routes agree or no AUC is known.
        A sentence fires when the median ROC AUC is within ``AUC_BAND`` = 0.1 of 0.5 and

        * the median GaussMech ε exceeds ``GAUSSMECH_LARGE`` = 1,
        * a median KDE-LR ε exceeds ``KDELR_LARGE`` = 10, or
        * ROC-HT's ε is +inf on at least ``ROCHT_INF_SHARE`` = half of the common pairs.

    Raises
    ------
    TypeError
        If ``result`` is neither a Dataset nor an :class:`AuditSummary`.

    Notes
    -----
    Why these thresholds. *AUC within 0.1 of 0.5.* Below 0.6 a classifier is conventionally
    read as not discriminating at all; it is also about 1.5 standard errors of the AUC under
    no difference with 20 rows a side (Hanley-McNeil: :math:`\sqrt{(n_a + n_b + 1) /
    (12 n_a n_b)}` ≈ 0.065), and out-of-fold AUCs sit at or below 0.5 with no signal, so the
    band is symmetric. *GaussMech > 1.* ε = 1 allows a likelihood ratio of e ≈ 2.7 on some
    events and a total-variation distance up to :math:`(e - 1)/(e + 1)` ≈ 0.46, which a
    classifier would show as an AUC well above 0.6 on distributions that differ on most
    rows; ε ≤ 1 is also the usual bar for strong privacy, so a median above it is a claim of
    real leakage. *KDE-LR > 10.* The score sums per-dimension log density ratios, so over
    the hundreds of dimensions of a face embedding kernel noise and empty tails add up to
    several units with no difference at all; 10 (a ratio of e¹⁰ ≈ 22,000) is far above
    what a real but modest difference gives and well below the thousands that noise alone
    reaches. *ROC-HT = +inf on half of the pairs.* A raw ε of +inf comes from an end of the
    out-of-fold ROC (a threshold with zero false positives and some true positives), which
    a few rows produce by chance; on a pair or two it can be real, on most pairs with an AUC
    near 0.5 it is an artefact of the finite curve.

    These diagnostics are not on the ε scale of a bound. An AUC near 0.5 says only that *this*
    classifier (logistic regression by default: a linear boundary) cannot separate the
    identities; distributions that differ in shape or spread but not in mean defeat it while
    MMD or KDE-LR see the difference. So the warning says the diagnostics *may* reflect
    estimation noise or endpoint artefacts, or a difference the classifier does not see,
    and never that there is no leakage; a positive certificate silences it. The warning
    does not change any number; the certificate remains the only guaranteed statement.

    Examples
    --------
    >>> import numpy as np
    >>> from idaudit import EmbeddingSet, GaussMechAuditor, ROCHTAuditor, audit_pairs
    >>> from idaudit.audits import discordant_routes
    >>> gen = np.random.default_rng(0)
    >>> es = EmbeddingSet(gen.normal(size=(90, 8)) + np.repeat(np.eye(8)[:3] * 4, 30, axis=0),
    ...                   np.repeat(["a", "b", "c"], 30))
    >>> ds = audit_pairs(es, "all", [GaussMechAuditor(), ROCHTAuditor(rng=0)], progress=False)
    >>> discordant_routes(ds)  # well-separated identities: the routes agree
    []
    """
    if isinstance(result, xr.Dataset):
        if "condition" in result.dims:
            return [
                f"Condition {c}: {sentence}"
                for c in result["condition"].values
                for sentence in discordant_routes(
                    result.sel(condition=c), certificates=certificates
                )
            ]
        summary, ds = summarize(result), result
    elif isinstance(result, AuditSummary):
        summary, ds = result, None
    else:
        raise TypeError(
            f"`result` must be an xarray.Dataset or an AuditSummary; got {type(result).__name__}."
        )
    parts = _parts(summary, ds)
    auc, source = parts["auc"], "median ROC AUC"
    if certificates is not None and certificates.sizes.get("pair", 0):
        lb = certificates["epsilon_lb"].values if "epsilon_lb" in certificates else [0.0]
        if float(np.nanmax(lb)) > 0:
            return []  # leakage is proven: a large diagnostic may well be right
        if "test_auc" in certificates:
            test_auc = float(np.median(certificates["test_auc"].values))
            if auc is None or abs(test_auc - 0.5) > abs(auc - 0.5):
                auc, source = test_auc, "median test AUC of the certificates"
    if auc is None or not abs(auc - 0.5) < AUC_BAND:
        return []
    why = (
        f"while the {source} is {auc:.3f} (within {AUC_BAND:g} of 0.5: the classifier cannot "
        "separate these identities), so this diagnostic may reflect estimation noise or "
        "endpoint artefacts, or a difference the classifier does not see (shape or spread "
        "rather than mean); read it beside MMD-TV and a certificate before taking it as "
        "leakage."
    )
    out = [
        f"GaussMech ({label}) has median ε {value:.3g} > {GAUSSMECH_LARGE:g} {why}"
        for label, value in parts["GaussMechAuditor"]
        if value > GAUSSMECH_LARGE
    ]
    out += [
        f"KDE-LR ({label}) has median ε {value:.3g} > {KDELR_LARGE:g} {why}"
        for label, value in parts["KDELRAuditor"]
        if value > KDELR_LARGE
    ]
    out += [
        f"ROC-HT ({label}) is +inf on {k} of {n} pairs (at least half) {why}"
        for label, k, n in parts["rocht_inf"]
        if n and k / n >= ROCHT_INF_SHARE
    ]
    return out


def _fmt(x: float) -> str:
    return f"{x:.3g}"


def conclusion(
    summaries: Mapping[str, AuditSummary],
    certificates: Mapping[str, xr.Dataset] | None = None,
) -> str:
    """One paragraph: which condition leaks least by which measure, and how sure that is.

    Parameters
    ----------
    summaries : mapping of condition name to AuditSummary
        One :func:`idaudit.summarize` row per condition (one entry: a single condition).
    certificates : mapping of condition name to xarray.Dataset, optional
        ``certificates_`` per condition.

    Returns
    -------
    str
        The paragraph (markdown, no heading).
    """
    if not summaries:
        raise InvalidInputError("`summaries` must name at least one condition.")
    certificates = dict(certificates or {})
    mmd: dict[str, float] = {}
    auc: dict[str, float] = {}
    for name, s in summaries.items():
        parts = _parts(s, None)
        if parts["MMDTVAuditor"]:
            mmd[name] = parts["MMDTVAuditor"][0][1]
        if parts["auc"] is not None:
            auc[name] = parts["auc"]
    cert_max = {
        n: float(np.max(c["epsilon_lb"].values)) for n, c in certificates.items() if c.sizes["pair"]
    }
    # the largest certificate over conditions is certified only when they were one family
    joint = not cert_max or reduction_attrs_across(
        [
            ({"status": "certified_lower_bound", **c["epsilon_lb"].attrs}, c.sizes["pair"])
            for n, c in certificates.items()
            if n in cert_max
        ]
    )["status"] == "certified_lower_bound"
    if len(summaries) > 1:
        said = _ranking(len(summaries), mmd, auc, cert_max, joint=joint)
    else:
        said = [_one_condition(next(iter(summaries)), mmd, auc, cert_max)]
    said.append(_how_sure(certificates))
    return " ".join(said)


def _ranking(
    n: int,
    mmd: dict[str, float],
    auc: dict[str, float],
    cert_max: dict[str, float],
    *,
    joint: bool = True,
) -> list[str]:
    """Which of several conditions leaks least by each estimate, and what the certificates prove.

    A measure names a condition only when its value is strictly best (ties within
    :data:`TIE_ATOL` name none). The certificates are lower bounds, so they rank only upwards:
    they say which condition is *proven* to leak at least how much, never which leaks least.
    """
    said = [f"Of the {n} conditions,"]
    measures = []
    if mmd:
        best = _strict_best(mmd, key=lambda v: v)
        if best is None:
            said.append("MMD-TV does not rank them (the lowest medians tie);")
        else:
            measures.append(
                f"**{best}** leaks least by MMD-TV (lowest median ε, {_fmt(mmd[best])}; a "
                "sample estimate of a lower bound, given without an interval)"
            )
    if auc:
        best = _strict_best(auc, key=lambda v: abs(v - 0.5))
        if best is None:
            said.append("the ROC AUC does not rank them (the medians nearest 0.5 tie);")
        else:
            measures.append(
                f"**{best}** by the classifier (median ROC AUC {auc[best]:.3f}, nearest 0.5; a "
                "sample estimate)"
            )
    if measures:
        said.append("; ".join(measures) + ".")
        winners = {m.split("**")[1] for m in measures}
        if len(measures) > 1:
            said.append(
                "The estimates agree."
                if len(winners) == 1
                else "The estimates disagree, so no condition leaks least on every reading."
            )
    elif not mmd and not auc:
        said.append("no estimate that ranks leakage (MMD-TV, ROC AUC) was run.")
    if cert_max:
        top = max(cert_max, key=cert_max.__getitem__)
        if cert_max[top] > 0 and joint:
            said.append(
                f"The largest certified lower bound is **{top}**'s, {cert_max[top]:.4f}: it "
                "is proven to leak at least that much. A lower bound ranks nothing: a "
                "smaller certificate elsewhere is not evidence of less leakage."
            )
        elif cert_max[top] > 0:
            said.append(
                f"The largest certificate is **{top}**'s, {cert_max[top]:.4f}, but the "
                "conditions were certified as separate families, so the largest of them is "
                "a sample estimate, not a certified bound (certify them with n_families = "
                f"{n}). A lower bound ranks nothing either way."
            )
        else:
            said.append(
                "No certificate exceeds 0: nothing is proven either way, and a bound of 0 is "
                "not evidence of privacy."
            )
    return said


def _strict_best(values: dict[str, float], key: Callable[[float], float]) -> str | None:
    """Return the condition with the smallest ``key(value)``, or None when that ties."""
    order = sorted(values, key=lambda name: key(values[name]))
    if len(order) > 1 and key(values[order[1]]) - key(values[order[0]]) <= TIE_ATOL:
        return None
    return order[0]


def _one_condition(
    name: str, mmd: dict[str, float], auc: dict[str, float], cert_max: dict[str, float]
) -> str:
    """Say what one condition's numbers are, with their statuses (nothing to rank)."""
    facts = []
    if mmd:
        facts.append(f"median MMD-TV ε {_fmt(mmd[name])} (sample estimate of a lower bound)")
    if auc:
        near = "within" if abs(auc[name] - 0.5) < AUC_BAND else "not within"
        facts.append(
            f"median ROC AUC {auc[name]:.3f} ({near} {AUC_BAND:g} of 0.5, where a "
            "classifier cannot tell identities apart)"
        )
    if name in cert_max:
        facts.append(f"largest certified ε {cert_max[name]:.4f} (certified lower bound)")
    label = f"condition {name}" if name else "this condition"
    return (
        f"One condition, so no ranking: {label} has "
        + ("; ".join(facts) if facts else "only diagnostics")
        + "."
    )


def _how_sure(certificates: dict[str, Any]) -> str:
    """Which numbers carry a guarantee, and whether the certificates sit at their ceilings."""
    if not certificates:
        return (
            "No certificate was computed, so nothing here carries a guarantee: MMD-TV and the "
            "ROC AUC are sample estimates, the rest diagnostics (run `idaudit certify` for a "
            "certified lower bound)."
        )
    n_at = sum(int(at_ceiling(c).sum()) for c in certificates.values())
    total = sum(c.sizes["pair"] for c in certificates.values())
    sure = (
        "Only the certificates carry a guarantee (a lower bound that holds with the stated "
        "confidence); the other numbers are estimates or diagnostics."
    )
    if n_at:
        sure += (
            f" {n_at} of the {total} certificates sit at their ceiling (what "
            "zero test errors certify): there the test size, not the pipeline, sets the "
            "number, so a ranking by certificate ranks test sizes; more test rows per "
            "identity lift the ceiling."
        )
    return sure
