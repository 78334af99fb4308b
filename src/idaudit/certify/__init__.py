"""Finite-sample certificates and the controls that back them (seed 000, Sections 4.3–4.4).

==================================  ==========================================================
:class:`ReservedTestCertifier`      development-selected pairs, thresholds and classifiers
                                    evaluated once on reserved test data; exact one-sided
                                    bounds → ``certified_lower_bound`` ε (Eq. 16)
:class:`SequentialCertifier`        fixed tests on a development draw, test outputs drawn from a
                                    mechanism in batches; anytime-valid confidence sequences →
                                    ``certified_lower_bound`` ε valid at every sample size
:func:`certify_scores`              scores of any two-class attack → certified trade-off
                                    points and ε(δ) for every δ at once (threshold strategies
                                    ``given``, ``split``, ``bonferroni``, ``band``,
                                    ``multisplit``) and a
                                    certified GDP μ lower bound → :class:`ScoreCertificate`
:func:`certify_one_run`             scores of canaries whose identity a fair coin chose, one
                                    output each → ε and GDP μ lower bounds from one run
                                    (Steinke et al. 2023; f-DP variant) →
                                    :class:`OneRunCertificate`
:func:`roc_hull`, :func:`hull_auc`  the ROC convex hull and the area under it (jax_privacy's
                                    AUROC), :func:`tpr_at_fpr`, :func:`max_accuracy`,
                                    :func:`epsilon_raw_counts` → ``sample_estimate`` (max
                                    accuracy with ``alpha``: ``certified_upper_bound``)
:func:`bootstrap_interval`          bootstrap quantiles of any of them (``sample_estimate``)
:func:`sanity_controls`             same-identity split-half MMD² tests and ROC AUCs:
                                    calibration of the audits (shuffled halves) and order
                                    artefacts in the data (ordered halves)
==================================  ==========================================================
"""

from __future__ import annotations

from idaudit.certify._measures import (
    BootstrapInterval,
    bootstrap_interval,
    epsilon_raw_counts,
    hull_auc,
    max_accuracy,
    roc_hull,
    tpr_at_fpr,
)
from idaudit.certify._multisplit import MultiSplitCertificate
from idaudit.certify._one_run import OneRunCertificate, OneRunCertifier, certify_one_run
from idaudit.certify._reserved import ReservedTestCertifier
from idaudit.certify._sanity import sanity_controls
from idaudit.certify._scores import ScoreCertificate, certify_scores
from idaudit.certify._sequential import SequentialCertifier

__all__ = [
    "BootstrapInterval",
    "MultiSplitCertificate",
    "OneRunCertificate",
    "OneRunCertifier",
    "ReservedTestCertifier",
    "ScoreCertificate",
    "SequentialCertifier",
    "bootstrap_interval",
    "certify_one_run",
    "certify_scores",
    "epsilon_raw_counts",
    "hull_auc",
    "max_accuracy",
    "roc_hull",
    "sanity_controls",
    "tpr_at_fpr",
]
