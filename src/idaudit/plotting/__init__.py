"""Matplotlib figures for idaudit results.

Every function draws on a :class:`matplotlib.figure.Figure` it creates itself (no ``pyplot``,
no global state, works without a display) or on the axes it is given, and returns the figure.
Save it with ``fig.savefig(path)``.

=========================  ==============================================================
:func:`plot_noise_sweep`   each audit's ε (median and interquartile range) against the noise
                           scale of a :func:`idaudit.benchmark.noise_sweep`, with the truth
:func:`plot_certified_routes`  the largest certified ε of each certified route against the
                           scale of a noise sweep, with the largest true ε
:func:`plot_roc`           an out-of-fold ROC curve (seed 000, Figure 3 right)
:func:`plot_mmd_null`      same-identity (H0) vs cross-identity (H1) MMD² (Figure 3 left)
:func:`plot_rocs`          several ROC curves, e.g. each condition's median-AUC pair
                           (Figure 3 right; :func:`idaudit.audits.median_auc_rocs`)
:func:`plot_figure3`       Figure 3's two panels side by side
:func:`plot_strength`      ε against the strength of each anonymiser, one column per method
                           (rates in [0, 1] on a second row, with chance levels)
:func:`plot_certificates`  certified lower bounds as one-sided intervals, per condition
:func:`plot_epsilon_curve` the certified ε(δ) curve of a noise sweep against δ, with the
                           true ε(δ) of the certified pairs
:func:`plot_tradeoff`      a certified trade-off curve (:func:`idaudit.certify.certify_scores`)
                           with the population truth of a benchmark mechanism
:func:`contact_sheet`      a grid of images with titles (what each mechanism does)
:func:`plot_flagging`      synthetic and held-out flagging rates against ``p``, pooled and
                           per cohort (seed 003, ``below_threshold.png``)
:func:`plot_nnaa`          the privacy loss with its interval and p-value, and the two AA
                           values, pooled and per cohort (seed 003, ``nnaa.png``)
=========================  ==============================================================

Result Datasets also have ``ds.idaudit.plot_roc(...)`` and ``ds.idaudit.plot_epsilon(...)``.
"""

from idaudit.plotting._curves import (
    plot_certificates,
    plot_figure3,
    plot_mmd_null,
    plot_roc,
    plot_rocs,
    plot_tradeoff,
)
from idaudit.plotting._faces import contact_sheet, plot_strength
from idaudit.plotting._privacy import plot_flagging, plot_nnaa
from idaudit.plotting._sweeps import (
    plot_certified_routes,
    plot_epsilon_curve,
    plot_noise_sweep,
    plot_private_swap_sweep,
)

__all__ = [
    "contact_sheet",
    "plot_certificates",
    "plot_certified_routes",
    "plot_epsilon_curve",
    "plot_figure3",
    "plot_flagging",
    "plot_mmd_null",
    "plot_nnaa",
    "plot_noise_sweep",
    "plot_private_swap_sweep",
    "plot_roc",
    "plot_rocs",
    "plot_strength",
    "plot_tradeoff",
]
