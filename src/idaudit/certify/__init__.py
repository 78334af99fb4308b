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
                                    ``given``, ``split``, ``bonferroni``, ``band``) and a
                                    certified GDP μ lower bound → :class:`ScoreCertificate`
:func:`certify_one_run`             scores of canaries whose identity a fair coin chose, one
                                    output each → ε and GDP μ lower bounds from one run
                                    (Steinke et al. 2023; f-DP variant) →
                                    :class:`OneRunCertificate`
:func:`sanity_controls`             same-identity split-half MMD² tests and ROC AUCs:
                                    calibration of the audits (shuffled halves) and order
                                    artefacts in the data (ordered halves)
==================================  ==========================================================
"""

from __future__ import annotations

from idaudit.certify._one_run import OneRunCertificate, OneRunCertifier, certify_one_run
from idaudit.certify._reserved import ReservedTestCertifier
from idaudit.certify._sanity import sanity_controls
from idaudit.certify._scores import ScoreCertificate, certify_scores
from idaudit.certify._sequential import SequentialCertifier

__all__ = [
    "OneRunCertificate",
    "OneRunCertifier",
    "ReservedTestCertifier",
    "ScoreCertificate",
    "SequentialCertifier",
    "certify_one_run",
    "certify_scores",
    "sanity_controls",
]
