"""``ds.idaudit``: a per-pair table view and plots on any idaudit result Dataset."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pandas as pd
import xarray as xr

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["IdauditAccessor", "pair_frame"]


def pair_frame(ds: xr.Dataset) -> pd.DataFrame:
    """One row per pair (per condition and pair, when stacked): the per-pair variables only.

    ``ds.to_dataframe()`` crosses every variable with every dimension, so KDE-LR's
    per-dimension terms blow a 100-pair result up to 100 × 512 rows; this view keeps the
    variables whose dimensions are ``pair`` (or ``condition`` and ``pair``) and the pair
    coordinates.

    Parameters
    ----------
    ds : xarray.Dataset
        A per-pair result (dim ``pair``).

    Returns
    -------
    pandas.DataFrame

    Examples
    --------
    >>> import numpy as np
    >>> from idaudit import EmbeddingSet, KDELRAuditor, audit_pairs
    >>> es = EmbeddingSet(np.random.default_rng(0).normal(size=(60, 8)), np.repeat([0, 1, 2], 20))
    >>> ds = audit_pairs(es, [(0, 1), (0, 2)], [KDELRAuditor()], progress=False)
    >>> pair_frame(ds).shape[0], ds.to_dataframe().shape[0]
    (2, 16)
    """
    if "pair" not in ds.dims:
        raise ValueError("`ds` has no 'pair' dimension; it is not a per-pair result.")
    keep = {"pair", "condition"}
    names = [v for v in ds.data_vars if set(ds[v].dims) <= keep and "pair" in ds[v].dims]
    return ds[names].to_dataframe().reset_index()


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
        """Return the per-pair table (:func:`pair_frame`)."""
        return pair_frame(self._ds)

    def plot_roc(self, **kwargs: Any) -> Figure:
        """Median-AUC out-of-fold ROC of each condition (:func:`idaudit.plotting.plot_rocs`)."""
        from idaudit.plotting import plot_rocs

        return plot_rocs(self._ds, **kwargs)

    def plot_epsilon(self, **kwargs: Any) -> Figure:
        """Each route's ε against a strength coordinate (:func:`idaudit.plotting.plot_strength`)."""
        from idaudit.plotting import plot_strength

        return plot_strength(self._ds, **kwargs)
