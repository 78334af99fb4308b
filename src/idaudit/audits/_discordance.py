"""What the four routes of seed 000 say together: the discordance warnings.

``discordant_routes`` flags diagnostics that are large where the classifier cannot tell the
identities apart; the reports' prose is :mod:`idaudit.pipeline`'s report renderer.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import xarray as xr

from idaudit.audits._summary import AuditSummary, summarize

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
