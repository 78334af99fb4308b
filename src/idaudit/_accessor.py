"""``ds.idaudit``: a per-pair table view and plots on any idaudit result Dataset.

Registered when :mod:`idaudit` is imported (its ``__init__`` imports this module).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pandas as pd
import xarray as xr

from idaudit._results import pair_frame

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["IdauditAccessor"]


@xr.register_dataset_accessor("idaudit")  # type: ignore[no-untyped-call]
class IdauditAccessor:
    """Methods on idaudit result Datasets: ``ds.idaudit.pairs()``, ``ds.idaudit.plot_roc()``.

    Examples
    --------
    >>> import numpy as np
    >>> import idaudit as ida
    >>> x = np.random.default_rng(0).normal(size=(60, 4))
    >>> es = ida.EmbeddingSet(x, np.repeat([0, 1, 2], 20))
    >>> ds = ida.audit_pairs(es, [(0, 1)], [ida.ROCHTAuditor(rng=0)], progress=False)
    >>> fig = ds.idaudit.plot_roc()
    >>> len(fig.axes)
    1
    """

    def __init__(self, ds: xr.Dataset) -> None:
        self._ds = ds

    def pairs(self) -> pd.DataFrame:
        """Return the per-pair table (:func:`idaudit.results.pair_frame`)."""
        return pair_frame(self._ds)

    def plot_roc(self, **kwargs: Any) -> Figure:
        """Median-AUC out-of-fold ROC of each condition (:func:`idaudit.plotting.plot_rocs`)."""
        from idaudit.plotting import plot_rocs

        return plot_rocs(self._ds, **kwargs)

    def plot_epsilon(self, **kwargs: Any) -> Figure:
        """Each route's ε against a strength coordinate (:func:`idaudit.plotting.plot_strength`)."""
        from idaudit.plotting import plot_strength

        return plot_strength(self._ds, **kwargs)
