"""``ds.idaudit``: a per-pair table view and plots on any idaudit result Dataset.

Registered when :mod:`idaudit` is imported (its ``__init__`` imports this module).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pandas as pd
import xarray as xr

from idaudit._results import pair_frame

if TYPE_CHECKING:
    from matplotlib.axes import Axes
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
    >>> fig = ds.idaudit.plot_roc(es)
    >>> len(fig.axes)
    1
    """

    def __init__(self, ds: xr.Dataset) -> None:
        self._ds = ds

    def pairs(self) -> pd.DataFrame:
        """Return the per-pair table (:func:`idaudit.results.pair_frame`)."""
        return pair_frame(self._ds)

    def plot_roc(
        self, embeddings: Any, *, n_folds: int = 5, rng: int = 0, ax: Axes | None = None
    ) -> Figure:
        """Draw each condition's median-AUC out-of-fold ROC (:func:`idaudit.plotting.plot_rocs`).

        ``embeddings``: the EmbeddingSet (or mapping of condition to EmbeddingSet) the result
        was computed on; results store no curves, so :func:`idaudit.audits.median_auc_rocs`
        refits them (``n_folds``, ``rng``) before they are drawn.
        """
        from idaudit.audits import median_auc_rocs
        from idaudit.plotting import plot_rocs

        rocs = median_auc_rocs(self._ds, embeddings, n_folds=n_folds, rng=rng)
        return plot_rocs(rocs, ax=ax)

    def plot_epsilon(self, **kwargs: Any) -> Figure:
        """Draw each route's median ε against strength (:func:`idaudit.plotting.plot_strength`).

        Needs ``method`` and ``strength`` coordinates along ``condition`` (as the demo's
        ``faces_results.nc`` has).
        """
        from idaudit.plotting import plot_strength

        ds = self._ds
        if "condition" not in ds.dims or not {"method", "strength"} <= set(ds.coords):
            raise ValueError(
                "`ds` needs a 'condition' dimension with 'method' and 'strength' coordinates."
            )
        routes = [
            str(v)
            for v in ds.data_vars
            if str(v).endswith("_epsilon") and set(ds[v].dims) == {"condition", "pair"}
        ]
        table = pd.DataFrame(
            {
                "method": ds["method"].values,
                "strength": ds["strength"].values,
                **{v: ds[v].median("pair").values for v in routes},
            }
        )
        return plot_strength(table, **kwargs)
