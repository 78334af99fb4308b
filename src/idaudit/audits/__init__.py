"""The four identity-level DP audits of seed 000 and the machinery to run them on many pairs.

=================================  ============================================================
:class:`GaussMechAuditor`          Gaussian-calibration score (Eq. 9) — *diagnostic*
:class:`KDELRAuditor`              per-dimension KDE log-ratio sum (Eq. 10-11) — *diagnostic*
:class:`MMDTVAuditor`              MMD ≤ 2 TV route to a pure-DP bound (Eq. 7, 12-14) — *sample
                                   estimate*; permutation test of MMD²
:class:`ROCHTAuditor`              Kairouz–Oh–Viswanath bound over an OOF ROC (Eq. 15) —
                                   *diagnostic*
:func:`audit_pairs`                many pairs × many auditors → one ``xarray.Dataset``
:func:`merge_audits`               results on different pair counts → one Dataset
:func:`concat_conditions`          several conditions stacked along ``condition``
:func:`summarize`                  Table 1's row from that Dataset
:func:`median_auc_rocs`            Figure 3's ROC curves: each condition's median-AUC pair,
                                   refitted (draw them with :func:`idaudit.plotting.plot_rocs`)
:func:`table1`, :func:`table2`     Table 1's and Table 2's layouts over conditions
:func:`discordant_routes`          warnings when diagnostics are large but the classifier
                                   cannot tell the identities apart
:func:`mmd_bandwidth_sweep`        sensitivity of MMD-TV to the bandwidth (Section 4.4)
:func:`shapiro_residuals`          normality of the residuals GaussMech assumes (Section 4.4)
:func:`classifier_sensitivity`     ROC-HT with logistic regression vs random forest (§4.4)
:func:`tv_witness_ratio`           classifier TV witness against MMD / 2 on the same pairs (§4.4)
:func:`check_auditor`              the contract suite every auditor passes
:class:`BaseAuditor`               base class for new auditors
=================================  ============================================================

Each auditor implements one batched method over many pairs; ``fit(emb_a, emb_b)`` is its
one-pair case, so :func:`audit_pairs` and ``fit`` give the same numbers.

``__all__`` lists the names above, the result classes they return (:class:`AuditSummary`,
:class:`MMDPermutationResult`, :class:`ShapiroResult`) and the extension API for new auditors
(:class:`BaseAuditor`, :class:`Output` — what ``outputs()`` returns —, :func:`check_auditor`,
:func:`parametrize_auditor_checks`, :data:`AUDITOR_CHECKS`; the parameter constraints are in
:mod:`idaudit.audits.constraints`). The package also holds, as
attributes outside ``__all__``, the internal API other idaudit packages build on (so that no
private name is imported across packages); it may change without deprecation:

* shared out-of-fold machinery: ``StatusEstimator`` (the ``status``/``label`` base that the
  certifiers share), ``stratified_folds``, ``oof_scores``, ``logistic_oof_logits`` and the
  ``CallCache`` it reuses across calls, ``roc_curve``, ``roc_auc``;
* the table helpers the command line uses: ``condition_fields``, ``read_manifest``;
* the ceiling helpers the reports use: ``at_ceiling``, ``ceiling_reached``, ``zero_ceiling``
  (the prose itself is :mod:`idaudit.pipeline`'s report renderer);
* ``QUANTILES``, the levels of ``audit_pairs(..., keep="summary")``'s ``quantile`` coordinate.
"""

from __future__ import annotations

from idaudit.audits._base import BaseAuditor, Output
from idaudit.audits._base import CallCache as CallCache
from idaudit.audits._base import StatusEstimator as StatusEstimator
from idaudit.audits._checks import AUDITOR_CHECKS, check_auditor, parametrize_auditor_checks
from idaudit.audits._conditions import concat_conditions
from idaudit.audits._discordance import discordant_routes
from idaudit.audits._engine import QUANTILES as QUANTILES
from idaudit.audits._engine import audit_pairs
from idaudit.audits._gaussmech import GaussMechAuditor
from idaudit.audits._kdelr import KDELRAuditor
from idaudit.audits._merge import merge_audits
from idaudit.audits._mmdtv import MMDPermutationResult, MMDTVAuditor
from idaudit.audits._oof import oof_scores as oof_scores
from idaudit.audits._oof import roc_auc as roc_auc
from idaudit.audits._oof import roc_curve as roc_curve
from idaudit.audits._oof import stratified_folds as stratified_folds
from idaudit.audits._rocht import ROCHTAuditor
from idaudit.audits._rocht import logistic_oof_logits as logistic_oof_logits
from idaudit.audits._sensitivity import (
    ShapiroResult,
    classifier_sensitivity,
    mmd_bandwidth_sweep,
    shapiro_residuals,
    tv_witness_ratio,
)
from idaudit.audits._summary import AuditSummary, median_auc_rocs, summarize
from idaudit.audits._tables import at_ceiling as at_ceiling
from idaudit.audits._tables import ceiling_reached as ceiling_reached
from idaudit.audits._tables import condition_fields as condition_fields
from idaudit.audits._tables import read_manifest as read_manifest
from idaudit.audits._tables import table1, table2
from idaudit.audits._tables import zero_ceiling as zero_ceiling

__all__ = [
    "AUDITOR_CHECKS",
    "AuditSummary",
    "BaseAuditor",
    "GaussMechAuditor",
    "KDELRAuditor",
    "MMDPermutationResult",
    "MMDTVAuditor",
    "Output",
    "ROCHTAuditor",
    "ShapiroResult",
    "audit_pairs",
    "check_auditor",
    "classifier_sensitivity",
    "concat_conditions",
    "discordant_routes",
    "median_auc_rocs",
    "merge_audits",
    "mmd_bandwidth_sweep",
    "parametrize_auditor_checks",
    "shapiro_residuals",
    "summarize",
    "table1",
    "table2",
    "tv_witness_ratio",
]
