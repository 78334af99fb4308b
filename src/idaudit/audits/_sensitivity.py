"""Per-method sensitivity analyses of seed 000, Section 4.4."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import xarray as xr
from scipy import stats

from idaudit._results import provenance
from idaudit._validation import (
    RngLike,
    check_in_range,
    check_integer,
    check_random_state,
)
from idaudit.audits._engine import audit_pairs
from idaudit.audits._mmdtv import MMDTVAuditor
from idaudit.audits._rocht import ROCHTAuditor
from idaudit.data import EmbeddingSet
from idaudit.exceptions import InvalidInputError

#: The attributes naming a result's inputs, carried over into results derived from it.
_INPUT_HASHES = ("input_sha256", "pairs_sha256")

__all__ = [
    "ShapiroResult",
    "classifier_sensitivity",
    "mmd_bandwidth_sweep",
    "shapiro_residuals",
    "tv_witness_ratio",
]


def mmd_bandwidth_sweep(
    es: EmbeddingSet,
    pairs: Sequence[tuple[Any, Any]] | npt.ArrayLike,
    scales: Sequence[float] = (0.5, 0.75, 1.0, 1.5, 2.0),
    *,
    device: str = "cpu",
    batch_size: int | None = None,
    progress: bool = True,
) -> xr.Dataset:
    r"""MMD-TV at several multiples of the median-heuristic bandwidth (seed 000, §4.4).

    Parameters
    ----------
    es : EmbeddingSet
    pairs : sequence of (label, label) or array_like, shape (n_pairs, 2)
    scales : sequence of float, default (0.5, 0.75, 1.0, 1.5, 2.0)
        Bandwidth ratios :math:`\sigma/\sigma^\star` (each > 0, distinct).
    device, batch_size, progress
        As for :func:`idaudit.audit_pairs`.

    Returns
    -------
    xarray.Dataset
        Dimensions ``scale`` and ``pair`` (coordinates as :func:`idaudit.audit_pairs`).
        Variables ``epsilon``, ``epsilon_hs``, ``mmd2``, ``mmd``, ``bandwidth`` (scale, pair)
        and ``max_epsilon``, ``max_mmd`` (scale): the largest value over the pairs, the
        quantity the paper reports per scale. Status: sample estimates.

    Notes
    -----
    Pooled distances and the median heuristic :math:`\sigma^\star` are computed once per
    batch and shared across the scales. The paper finds the maximum largest at
    :math:`0.75\sigma^\star` on its data and positive throughout, one reason not to read the
    sample maximum as a certificate.

    Examples
    --------
    >>> import numpy as np
    >>> from idaudit import EmbeddingSet
    >>> from idaudit.audits import mmd_bandwidth_sweep
    >>> gen = np.random.default_rng(0)
    >>> es = EmbeddingSet(gen.normal(size=(60, 8)) + np.repeat(np.eye(8)[:3], 20, axis=0),
    ...                   np.repeat(["a", "b", "c"], 20))
    >>> sweep = mmd_bandwidth_sweep(es, [("a", "b"), ("b", "c")], progress=False)
    >>> dict(sweep["epsilon"].sizes)
    {'scale': 5, 'pair': 2}
    """
    scale_list = [check_in_range(s, "scales", 0.0, None) for s in scales]
    if not scale_list or len(set(scale_list)) != len(scale_list):
        raise InvalidInputError(f"`scales` must be non-empty and distinct; got {list(scales)!r}.")
    auditors = [
        MMDTVAuditor(bandwidth_scale=s, name=f"mmdtv_scale{k}") for k, s in enumerate(scale_list)
    ]
    ds = audit_pairs(es, pairs, auditors, device=device, batch_size=batch_size, progress=progress)
    out = {}
    for var in ("epsilon", "epsilon_hs", "mmd2", "mmd", "bandwidth"):
        stacked = xr.concat([ds[f"{a.label}_{var}"] for a in auditors], dim="scale")
        out[var] = stacked.assign_attrs(ds[f"{auditors[0].label}_{var}"].attrs)
    res = xr.Dataset(out).assign_coords(scale=("scale", np.asarray(scale_list)))
    for var, what in (("epsilon", "MMD-TV epsilon"), ("mmd", "MMD")):
        res[f"max_{var}"] = (
            res[var]
            .max("pair")
            .assign_attrs(long_name=f"largest {what} over the pairs", status="sample_estimate")
        )
    res.attrs = {
        k: v for k, v in ds.attrs.items() if not k.startswith("mmdtv_scale") and k != "auditors"
    }
    res.attrs["method"] = "MMD-TV bandwidth sweep, sigma = scale * median heuristic (§4.4)"
    return res


@dataclass(frozen=True)
class ShapiroResult:
    """Per-dimension Shapiro–Wilk tests of pooled within-identity residuals.

    Attributes
    ----------
    statistic, pvalue : numpy.ndarray of float64, shape (d,)
        Shapiro–Wilk W and p-value per dimension.
    alpha : float
        Rejection threshold (the paper uses 1e-3).
    n_rejected : int
        Dimensions with ``pvalue < alpha``.
    n_rows : int
        Residual rows tested (after subsampling).
    n_pooled : int
        Residual rows pooled before subsampling.
    """

    statistic: npt.NDArray[np.float64]
    pvalue: npt.NDArray[np.float64]
    alpha: float
    n_rejected: int
    n_rows: int
    n_pooled: int

    def __repr__(self) -> str:
        return (
            f"ShapiroResult(n_rejected={self.n_rejected}/{self.pvalue.size} at p < "
            f"{self.alpha:g}, n_rows={self.n_rows} of {self.n_pooled} pooled)"
        )

    def to_xarray(self) -> xr.Dataset:
        """Return the per-dimension results as a Dataset (dim ``dim``)."""
        return xr.Dataset(
            {
                "statistic": ("dim", self.statistic, {"long_name": "Shapiro-Wilk W"}),
                "pvalue": ("dim", self.pvalue, {"long_name": "Shapiro-Wilk p-value"}),
            },
            attrs={
                "alpha": self.alpha,
                "n_rejected": self.n_rejected,
                "n_rows": self.n_rows,
                "n_pooled": self.n_pooled,
            },
        )


def shapiro_residuals(
    es: EmbeddingSet,
    *,
    max_rows: int | None = 5000,
    alpha: float = 1e-3,
    rng: RngLike = 0,
) -> ShapiroResult:
    r"""Shapiro–Wilk Gaussianity test per dimension of the pooled within-identity residuals.

    Parameters
    ----------
    es : EmbeddingSet
    max_rows : int or None, default 5000
        Test at most this many residual rows: a uniform subsample without replacement, the
        same rows for every dimension. The paper tests the pooled residuals (~40,000 rows;
        its Q-Q figure shows a 5,000-row subsample), but scipy's Shapiro-Wilk p-value is
        accurate only up to 5,000 rows. A subsample has less power, so its count of rejected
        dimensions can fall below the paper's. ``None`` tests every row (scipy then warns
        that the p-values may be inaccurate).
    alpha : float, default 1e-3
        Count dimensions with p below this, in (0, 1).
    rng : int, numpy.random.SeedSequence, numpy.random.Generator or None, default 0
        Seed of the subsample.

    Returns
    -------
    ShapiroResult

    Notes
    -----
    Residuals :math:`z_{id,i,d'} - \hat\mu_{id,d'}` are pooled over every identity with at
    least two rows (a single row has residual exactly 0). GaussMech's reading needs roughly
    Gaussian residuals; the paper rejects at p < 1e-3 on 296–512 of 512 dimensions. The pooled
    sample is not iid from one law, so the p-values are diagnostics, not exact model tests.

    Examples
    --------
    >>> import numpy as np
    >>> from idaudit import EmbeddingSet
    >>> from idaudit.audits import shapiro_residuals
    >>> gen = np.random.default_rng(0)
    >>> es = EmbeddingSet(gen.normal(size=(300, 4)), np.repeat(["a", "b", "c"], 100),
    ...                   normalize=False)
    >>> shapiro_residuals(es).n_rejected
    0
    """
    if not isinstance(es, EmbeddingSet):
        raise TypeError(f"`es` must be an idaudit.EmbeddingSet; got {type(es).__name__}.")
    if max_rows is not None:
        max_rows = check_integer(max_rows, "max_rows", minimum=3)
    alpha = check_in_range(alpha, "alpha", 0.0, 1.0)
    gen = check_random_state(rng)
    blocks = []
    for label in es.identities.tolist():
        rows = es.get(label)
        if rows.shape[0] >= 2:
            blocks.append(rows - rows.mean(axis=0))
    if not blocks:
        raise InvalidInputError("`es` has no identity with at least 2 rows; nothing to test.")
    resid = np.concatenate(blocks)  # (n_pooled, d)
    n_pooled = resid.shape[0]
    if n_pooled < 3:
        raise InvalidInputError(f"Shapiro-Wilk needs at least 3 residual rows; got {n_pooled}.")
    if max_rows is not None and n_pooled > max_rows:
        resid = resid[np.sort(gen.choice(n_pooled, size=max_rows, replace=False))]
    res = stats.shapiro(resid, axis=0)
    pvalue = np.asarray(res.pvalue, dtype=np.float64)
    return ShapiroResult(
        statistic=np.asarray(res.statistic, dtype=np.float64),
        pvalue=pvalue,
        alpha=alpha,
        n_rejected=int((pvalue < alpha).sum()),
        n_rows=int(resid.shape[0]),
        n_pooled=int(n_pooled),
    )


def classifier_sensitivity(
    es: EmbeddingSet,
    pairs: Sequence[tuple[Any, Any]] | npt.ArrayLike,
    *,
    n_folds: int = 5,
    n_estimators: int = 100,
    rng: RngLike = 0,
    device: str = "cpu",
    batch_size: int | None = None,
    progress: bool = True,
) -> xr.Dataset:
    """ROC-HT AUC with logistic regression minus random forest on identical folds (§4.4).

    Parameters
    ----------
    es : EmbeddingSet
    pairs : sequence of (label, label) or array_like, shape (n_pairs, 2)
    n_folds : int, default 5
    n_estimators : int, default 100
        Trees of the forest (otherwise scikit-learn defaults).
    rng : int, numpy.random.SeedSequence, numpy.random.Generator or None, default 0
        One seed for both classifiers, so both see the same folds. With an int or a
        ``SeedSequence`` these are also the folds of ``ROCHTAuditor(rng=rng)`` (alone or in
        :func:`idaudit.audit_pairs`), so the logistic column is that run's ROC-HT AUC; a
        ``Generator`` is advanced by one draw.
    device, batch_size, progress
        As for :func:`idaudit.audit_pairs`.

    Returns
    -------
    xarray.Dataset
        The :func:`idaudit.audit_pairs` variables of both (``rocht_*`` and ``rocht_rf_*``)
        plus ``auc_difference`` (pair, logistic minus forest); attribute
        ``mean_auc_difference``. The paper finds means from −0.002 to +0.013: a more flexible
        classifier does not expose signal the linear one missed. A robustness diagnostic, not
        a confidence statement.

    Examples
    --------
    >>> import numpy as np
    >>> from idaudit import EmbeddingSet
    >>> from idaudit.audits import classifier_sensitivity
    >>> gen = np.random.default_rng(0)
    >>> es = EmbeddingSet(gen.normal(size=(60, 8)) + np.repeat(np.eye(8)[:3] * 2, 20, axis=0),
    ...                   np.repeat(["a", "b", "c"], 20))
    >>> ds = classifier_sensitivity(es, [("a", "b")], n_estimators=20, progress=False)
    >>> float(ds["auc_difference"][0]) <= 1.0
    True
    """
    if rng is None or isinstance(rng, np.random.Generator):
        # one draw, shared: both auditors derive the same fold seed from a fixed SeedSequence
        rng = np.random.SeedSequence(int(check_random_state(rng).integers(0, 2**63 - 1)))
    auditors = [
        ROCHTAuditor(n_folds, "logistic", rng=rng),
        ROCHTAuditor(n_folds, "random_forest", n_estimators=n_estimators, rng=rng),
    ]
    ds = audit_pairs(es, pairs, auditors, device=device, batch_size=batch_size, progress=progress)
    diff = ds["rocht_auc"] - ds["rocht_rf_auc"]
    ds["auc_difference"] = diff.assign_attrs(
        long_name="OOF AUC, logistic regression minus random forest", status="diagnostic"
    )
    ds.attrs["mean_auc_difference"] = float(diff.mean())
    return ds


def tv_witness_ratio(
    ds: xr.Dataset, *, mmd_label: str = "mmdtv", rocht_label: str = "rocht"
) -> xr.Dataset:
    r"""Classifier-threshold TV witness against MMD/2 on the same pairs (seed 000, §4.4).

    For any fixed score threshold, TPR − FPR is a lower bound on the total variation distance;
    :class:`ROCHTAuditor` reports the best one over its out-of-fold scores as
    :math:`\hat d_{TV,h}` (``<rocht>_tv``). Lemma 1 bounds MMD/2 by the same total variation,
    so the ratio :math:`\hat d_{TV,h} / (\widehat{\mathrm{MMD}}/2)` shows how much smaller the
    RKHS witness is than the threshold witness on these samples.

    Parameters
    ----------
    ds : xarray.Dataset
        A result of :func:`idaudit.audit_pairs` holding ``<mmd_label>_mmd`` (from an
        :class:`MMDTVAuditor`) and ``<rocht_label>_tv`` (from a :class:`ROCHTAuditor`).
    mmd_label, rocht_label : str
        The two auditors' labels (their ``name``), if not the defaults.

    Returns
    -------
    xarray.Dataset
        Variables ``tv_witness``, ``half_mmd`` and ``ratio`` (dim ``pair``; ``ratio`` is NaN
        where the sample MMD is 0) and attributes ``mean_ratio`` (over the pairs with a finite
        ratio; absent when there is none), ``n_pairs`` and ``mean_tv_witness``. The paper
        reports mean ratios of 4.39–7.52 and mean witnesses of 0.735–0.992
        across its eight conditions.

    Raises
    ------
    InvalidInputError
        If either variable is missing from ``ds``.

    Notes
    -----
    Neither quantity is the population total variation, so the gap does not isolate the
    slack of Lemma 1; the ratio is a diagnostic.

    Examples
    --------
    >>> import numpy as np
    >>> import idaudit as ida
    >>> from idaudit.audits import tv_witness_ratio
    >>> gen = np.random.default_rng(0)
    >>> es = ida.EmbeddingSet(gen.normal(size=(80, 4)) + np.repeat(np.eye(4)[:2], 40, axis=0),
    ...                       np.repeat(["a", "b"], 40))
    >>> ds = ida.audit_pairs(es, [("a", "b")], [ida.MMDTVAuditor(), ida.ROCHTAuditor()],
    ...                      progress=False)
    >>> bool(tv_witness_ratio(ds)["ratio"][0] > 1)
    True
    """
    names = {"mmd": f"{mmd_label}_mmd", "tv": f"{rocht_label}_tv"}
    missing = [v for v in names.values() if v not in ds.data_vars]
    if missing:
        raise InvalidInputError(
            f"`ds` must hold the variables {sorted(names.values())} (an audit_pairs result with "
            f"an MMDTVAuditor and a ROCHTAuditor); missing {missing}."
        )
    tv = ds[names["tv"]].astype(np.float64)
    half_mmd = 0.5 * ds[names["mmd"]].astype(np.float64)
    ratio = (tv / half_mmd.where(half_mmd > 0)).assign_attrs(
        long_name="classifier TV witness / (MMD/2)", status="diagnostic"
    )
    finite = np.isfinite(ratio.values)
    out = xr.Dataset(
        {
            "tv_witness": tv.assign_attrs(
                long_name="max over thresholds of TPR - FPR (OOF)", status="diagnostic"
            ),
            "half_mmd": half_mmd.assign_attrs(long_name="MMD / 2", status="sample_estimate"),
            "ratio": ratio,
        },
        attrs={
            **provenance(
                title="classifier TV witness against MMD/2 (idaudit.audits.tv_witness_ratio)",
                inputs={k: str(ds.attrs[k]) for k in _INPUT_HASHES if k in ds.attrs},
            ),
            "n_pairs": int(ratio.sizes["pair"]),
            "mean_tv_witness": float(tv.mean()),
        },
    )
    if finite.any():  # netCDF attributes hold no NaN: absent when no ratio is finite
        out.attrs["mean_ratio"] = float(ratio.values[finite].mean())
    return out
