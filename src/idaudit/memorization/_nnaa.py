"""Nearest-neighbour adversarial accuracy (NNAA) with half-sampling intervals."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd
import torch
import xarray as xr

from idaudit._device import resolve_device
from idaudit._results import Status, provenance, variable
from idaudit._validation import RngLike, check_in_range, check_integer, check_random_state
from idaudit.exceptions import InvalidInputError
from idaudit.memorization._neighbours import (
    Metric,
    check_vectors,
    pairwise_distances,
    same_dim,
)

__all__ = [
    "NNAA_STATUS",
    "NNAAResult",
    "half_size",
    "nnaa",
    "nnaa_from_distances",
    "subsample_indices",
]

#: Formal status of every column of :meth:`NNAAResult.to_frame`.
NNAA_STATUS: dict[str, Status] = {
    "aa_train_synth": "sample_estimate",
    "aa_heldout_synth": "sample_estimate",
    "privacy_loss": "sample_estimate",
    # centred half-sampling intervals are approximate: no finite-sample guarantee
    "ci_lower": "sample_estimate",
    "ci_upper": "sample_estimate",
    "aa_train_synth_ci_lower": "sample_estimate",
    "aa_train_synth_ci_upper": "sample_estimate",
    "aa_heldout_synth_ci_lower": "sample_estimate",
    "aa_heldout_synth_ci_upper": "sample_estimate",
    "n_train": "descriptive",
    "n_heldout": "descriptive",
    "n_synthetic": "descriptive",
    "n_bootstrap": "descriptive",
}

#: How many of a row's nearest columns are scanned for one present in a half-sample before
#: the row falls back to a full masked minimum (a column is absent with probability ≈ 1/2, so
#: all 24 are absent with probability ≈ 6e-8).
_SCAN = 24
#: Upper bound on the (draws, rows, scan) boolean temporary of one block of draws.
_SCAN_BYTES = 1 << 24


@dataclass(frozen=True)
class NNAAResult:
    """AA(train, synthetic), AA(held-out, synthetic), their difference and bootstrap CIs.

    Attributes
    ----------
    aa_train_synth, aa_heldout_synth : float
        Adversarial accuracies (status: sample estimate).
    privacy_loss : float
        ``aa_heldout_synth - aa_train_synth`` (status: sample estimate).
    ci : dict of str to (float, float)
        Centred half-sampling intervals of the three numbers at ``confidence_level``
        (NaN with ``n_bootstrap=0``). Approximate: status sample estimate.
    n_train, n_heldout, n_synthetic : int
        Set sizes after the ``max_samples`` cap.
    n_bootstrap : int
    confidence_level : float
    bootstrap : numpy.ndarray, shape (n_bootstrap, 3)
        ``(aa_train_synth, aa_heldout_synth, privacy_loss)`` of every half-sample draw.
    """

    aa_train_synth: float
    aa_heldout_synth: float
    privacy_loss: float
    ci: dict[str, tuple[float, float]]
    n_train: int
    n_heldout: int
    n_synthetic: int
    n_bootstrap: int
    confidence_level: float
    bootstrap: npt.NDArray[np.float64] = field(repr=False)

    def to_frame(self, metric: str | None = None) -> pd.DataFrame:
        """One row: the numbers, their intervals, set sizes and ``n_bootstrap``.

        ``ci_lower``/``ci_upper`` are the privacy loss's interval (seed 003's ``nnaa.csv``);
        ``frame.attrs["status"]`` maps each column to its status.
        """
        row: dict[str, Any] = {
            "aa_train_synth": self.aa_train_synth,
            "aa_heldout_synth": self.aa_heldout_synth,
            "privacy_loss": self.privacy_loss,
            "ci_lower": self.ci["privacy_loss"][0],
            "ci_upper": self.ci["privacy_loss"][1],
            "aa_train_synth_ci_lower": self.ci["aa_train_synth"][0],
            "aa_train_synth_ci_upper": self.ci["aa_train_synth"][1],
            "aa_heldout_synth_ci_lower": self.ci["aa_heldout_synth"][0],
            "aa_heldout_synth_ci_upper": self.ci["aa_heldout_synth"][1],
            "n_train": self.n_train,
            "n_heldout": self.n_heldout,
            "n_synthetic": self.n_synthetic,
            "n_bootstrap": self.n_bootstrap,
        }
        frame = pd.DataFrame([row])
        if metric is not None:
            frame.insert(0, "metric", metric)
        frame.attrs["status"] = dict(NNAA_STATUS)
        frame.attrs["confidence_level"] = self.confidence_level
        return frame

    def to_xarray(self) -> xr.Dataset:
        """Return the result as a Dataset of scalars, every variable with its status."""
        frame = self.to_frame()
        return xr.Dataset(
            {
                name: variable(
                    (), frame[name].iloc[0], long_name=name.replace("_", " "), status=status
                )
                for name, status in NNAA_STATUS.items()
            },
            attrs=provenance(
                title="idaudit.memorization.nnaa",
                settings={"confidence_level": self.confidence_level},
            ),
        )


class _MaskedMin:
    """Row minima of a fixed matrix over any subset of its columns, for many subsets at once.

    The rows are sorted once; the minimum over the present columns is then the first present
    column in a row's sorted order, which a resample finds within a few steps. Rows whose
    ``_SCAN`` nearest columns are all absent fall back to the full masked minimum.
    """

    def __init__(self, matrix: torch.Tensor, *, exclude_diagonal: bool = False) -> None:
        m = matrix.clone()
        if exclude_diagonal:
            m.fill_diagonal_(torch.inf)  # a point is not its own neighbour
        self.matrix = m  # (rows, cols)
        values, order = torch.sort(m, dim=1, stable=True)
        k = min(_SCAN, m.shape[1])
        self.values = values[:, :k].contiguous()  # (rows, k)
        self.order = order[:, :k].contiguous()  # (rows, k)

    def __call__(self, present: torch.Tensor) -> torch.Tensor:
        """Minima ``(b, rows)`` for presence masks ``(b, cols)``; inf where nothing is present."""
        b = present.shape[0]
        rows, k = self.order.shape
        hit = present[:, self.order]  # (b, rows, k)
        found = hit.any(dim=2)  # (b, rows)
        first = hit.to(torch.uint8).argmax(dim=2)  # (b, rows) first present column
        out = torch.gather(self.values.expand(b, rows, k), 2, first[..., None])[..., 0]
        missing = (~found).nonzero()
        if missing.numel():  # the rare rows whose nearest columns are all absent
            bi, ri = missing[:, 0], missing[:, 1]
            full = torch.where(present[bi], self.matrix[ri], torch.inf)  # (m, cols)
            out[bi, ri] = full.min(dim=1).values if full.shape[1] else torch.inf
        return out


def _accuracy(
    own_a: torch.Tensor,
    cross_a: torch.Tensor,
    weight_a: torch.Tensor,
    own_b: torch.Tensor,
    cross_b: torch.Tensor,
    weight_b: torch.Tensor,
) -> torch.Tensor:
    """AA per draw: the weighted share of points whose own-set neighbour is strictly closer."""
    acc_a = ((own_a < cross_a) * weight_a).sum(dim=1) / weight_a.sum(dim=1)  # (b,)
    acc_b = ((own_b < cross_b) * weight_b).sum(dim=1) / weight_b.sum(dim=1)
    return 0.5 * (acc_a + acc_b)


def half_size(n: int) -> int:
    """Size of a half-sample of a set of ``n``: ``n // 2``, but at least 2 (and at most ``n``)."""
    return min(n, max(2, n // 2))


def subsample_indices(n: int, max_samples: int, gen: np.random.Generator) -> npt.NDArray[np.intp]:
    """All of ``range(n)`` when ``n <= max_samples``, else a sorted seeded subset of that size."""
    if n <= max_samples:
        return np.arange(n)
    return np.sort(gen.choice(n, size=max_samples, replace=False))


def _check_sizes(n_train: int, n_heldout: int, n_synthetic: int) -> None:
    for n, name in ((n_train, "train"), (n_heldout, "heldout"), (n_synthetic, "synthetic")):
        if n < 2:
            raise InvalidInputError(
                f"`{name}` must hold at least 2 rows (a point's nearest neighbour in its own "
                f"set is another point); got {n}."
            )


def _nnaa_core(
    blocks: dict[str, torch.Tensor],
    n_bootstrap: int,
    confidence_level: float,
    gen: np.random.Generator,
) -> NNAAResult:
    """NNAA and its bootstrap from the distance blocks tt, hh, ss, ts, hs (float64, one device)."""
    tt, hh, ss, ts, hs = (blocks[k] for k in ("tt", "hh", "ss", "ts", "hs"))
    n_t, n_h, n_s = tt.shape[0], hh.shape[0], ss.shape[0]
    device = tt.device
    mins = {
        "tt": _MaskedMin(tt, exclude_diagonal=True),
        "hh": _MaskedMin(hh, exclude_diagonal=True),
        "ss": _MaskedMin(ss, exclude_diagonal=True),
        "ts": _MaskedMin(ts),
        "st": _MaskedMin(ts.T),
        "hs": _MaskedMin(hs),
        "sh": _MaskedMin(hs.T),
    }

    def evaluate(w_t: torch.Tensor, w_h: torch.Tensor, w_s: torch.Tensor) -> torch.Tensor:
        p_t, p_h, p_s = w_t > 0, w_h > 0, w_s > 0
        own_s = mins["ss"](p_s)
        aa_ts = _accuracy(mins["tt"](p_t), mins["ts"](p_s), w_t, own_s, mins["st"](p_t), w_s)
        aa_hs = _accuracy(mins["hh"](p_h), mins["hs"](p_s), w_h, own_s, mins["sh"](p_h), w_s)
        return torch.stack([aa_ts, aa_hs, aa_hs - aa_ts], dim=1)  # (b, 3)

    def ones(n: int) -> torch.Tensor:
        return torch.ones((1, n), dtype=torch.float64, device=device)

    with torch.inference_mode():
        point = evaluate(ones(n_t), ones(n_h), ones(n_s))[0].cpu().numpy()
        # Resampling recipe (reproducible outside idaudit): for train, held-out, synthetic in
        # this order, ``np.argsort(gen.random((n_bootstrap, n)), axis=1)[:, :half_size(n)]``
        # from the same generator: each draw keeps a uniformly random half of every set.
        draws = [
            np.argsort(gen.random((n_bootstrap, n)), axis=1)[:, : half_size(n)]
            for n in (n_t, n_h, n_s)
        ]
        boot = np.empty((n_bootstrap, 3))
        step = max(1, _SCAN_BYTES // (max(n_t, n_h, n_s) * _SCAN))
        for start in range(0, n_bootstrap, step):
            stop = min(start + step, n_bootstrap)
            weights = []
            for idx, n in zip(draws, (n_t, n_h, n_s), strict=True):
                block = torch.from_numpy(idx[start:stop]).to(device)  # (b, m)
                kept = torch.zeros((stop - start, n), dtype=torch.float64, device=device)
                kept.scatter_(1, block, 1.0)
                weights.append(kept)  # 1 for the images of the half-sample, else 0
            boot[start:stop] = evaluate(*weights).cpu().numpy()
    alpha = 1.0 - confidence_level
    names = ("aa_train_synth", "aa_heldout_synth", "privacy_loss")
    if n_bootstrap:
        # Centred half-sampling interval: the spread of the half-sample values around their
        # own mean, placed around the full-sample estimate (halving the sets shifts AA; the
        # shift is a property of the smaller sets, not of the sampling error).
        spread = boot - boot.mean(axis=0)
        lo, hi = point + np.quantile(spread, [alpha / 2, 1 - alpha / 2], axis=0)
        ci = {name: (float(lo[i]), float(hi[i])) for i, name in enumerate(names)}
    else:
        ci = {name: (float("nan"), float("nan")) for name in names}
    return NNAAResult(
        aa_train_synth=float(point[0]),
        aa_heldout_synth=float(point[1]),
        privacy_loss=float(point[2]),
        ci=ci,
        n_train=n_t,
        n_heldout=n_h,
        n_synthetic=n_s,
        n_bootstrap=n_bootstrap,
        confidence_level=confidence_level,
        bootstrap=boot,
    )


def _check_common(
    n_bootstrap: int, max_samples: int, confidence_level: float
) -> tuple[int, int, float]:
    return (
        check_integer(n_bootstrap, "n_bootstrap", minimum=0),
        check_integer(max_samples, "max_samples", minimum=2),
        check_in_range(confidence_level, "confidence_level", 0.0, 1.0),
    )


def nnaa(
    train: npt.ArrayLike,
    heldout: npt.ArrayLike,
    synthetic: npt.ArrayLike,
    *,
    metric: Metric = "cosine",
    n_bootstrap: int = 1000,
    max_samples: int = 1000,
    confidence_level: float = 0.95,
    rng: RngLike = 0,
    device: str | torch.device = "cpu",
) -> NNAAResult:
    r"""Nearest-neighbour adversarial accuracy of synthetic against training and held-out sets.

    Parameters
    ----------
    train, heldout, synthetic : array_like, shape (n_*, d)
        Embeddings (at least 2 rows each).
    metric : {"cosine", "euclidean"}, default "cosine"
    n_bootstrap : int, default 1000
        Half-sample draws for the intervals; 0 skips the intervals (NaN).
    max_samples : int, default 1000
        Sets larger than this are first cut to a seeded random subset of this size.
    confidence_level : float, default 0.95
        Of the centred half-sampling intervals.
    rng : int, SeedSequence or Generator, default 0
        Seeds the subsampling and the bootstrap.
    device : str or torch.device, default "cpu"

    Returns
    -------
    NNAAResult

    Notes
    -----
    For sets ``A``, ``B`` with nearest-neighbour distances ``d_AA(a)`` (to another point of
    ``A``) and ``d_AB(a)`` (to a point of ``B``),

    .. math:: \mathrm{AA}(A, B) = \tfrac12\Big[\tfrac1{|A|}\sum_{a}\mathbf 1\{d_{AA}(a) <
              d_{AB}(a)\} + \tfrac1{|B|}\sum_{b}\mathbf 1\{d_{BB}(b) < d_{BA}(b)\}\Big],

    the accuracy of a 1-nearest-neighbour adversary telling the sets apart (Yale et al.,
    2020); ``privacy_loss = AA(held-out, synth) - AA(train, synth)``. Ties count as not
    closer.

    Intervals (half-sampling, a subsampling bootstrap without replacement): each of the
    ``n_bootstrap`` draws keeps a uniformly random half (:func:`half_size`) of the training,
    held-out and synthetic sets, independently, and recomputes every nearest neighbour within
    the kept images. For a mean of ``n`` values, the mean of a random half drawn without
    replacement has variance ``σ²/(n-1)`` ≈ the full-sample ``σ²/n`` (the delete-``n/2``
    jackknife), so the draws' spread needs no rescaling; no image ever appears twice, so no
    duplicate distorts a nearest neighbour. Halving a set lengthens nearest-neighbour distances
    and shifts AA, so the interval is the ``α/2`` and ``1-α/2`` quantiles of the draws minus
    their mean, added to the full-sample estimate. It is approximate (no finite-sample
    guarantee; status sample estimate), calibrated by a seeded coverage check.

    References
    ----------
    .. [1] A. Yale et al., "Generation and evaluation of privacy preserving synthetic health
       data", Neurocomputing 416, 2020.

    Examples
    --------
    >>> import numpy as np
    >>> from idaudit.memorization import nnaa
    >>> gen = np.random.default_rng(0)
    >>> train, held = gen.standard_normal((2, 60, 8))
    >>> res = nnaa(train, held, train + 0.01 * gen.standard_normal((60, 8)), n_bootstrap=50)
    >>> res.aa_train_synth < 0.1 < 0.3 < res.privacy_loss  # near-copies of training points
    True
    """
    n_bootstrap, max_samples, confidence_level = _check_common(
        n_bootstrap, max_samples, confidence_level
    )
    t = check_vectors(train, "train")
    h = check_vectors(heldout, "heldout")
    s = check_vectors(synthetic, "synthetic")
    same_dim({"train": t, "heldout": h, "synthetic": s})
    _check_sizes(len(t), len(h), len(s))
    gen = check_random_state(rng)
    t, h, s = (x[subsample_indices(len(x), max_samples, gen)] for x in (t, h, s))
    dev = resolve_device(device)

    def block(a: npt.NDArray[np.float64], b: npt.NDArray[np.float64] | None) -> torch.Tensor:
        return torch.from_numpy(pairwise_distances(a, b, metric=metric, device=dev)).to(dev)

    blocks = {
        "tt": block(t, None),
        "hh": block(h, None),
        "ss": block(s, None),
        "ts": block(t, s),
        "hs": block(h, s),
    }
    return _nnaa_core(blocks, n_bootstrap, confidence_level, gen)


def nnaa_from_distances(
    distances: npt.ArrayLike,
    sizes: tuple[int, int, int],
    *,
    n_bootstrap: int = 1000,
    max_samples: int = 1000,
    confidence_level: float = 0.95,
    rng: RngLike = 0,
    device: str | torch.device = "cpu",
) -> NNAAResult:
    """:func:`nnaa` from a precomputed distance matrix (an appearance metric, any metric).

    Parameters
    ----------
    distances : array_like, shape (N, N)
        Distances among the concatenation ``[train; heldout; synthetic]``, ``N`` the sum of
        ``sizes``. Only the blocks train×train, held-out×held-out, synthetic×synthetic,
        train×synthetic and held-out×synthetic are read (the upper ones).
    sizes : (int, int, int)
        ``(n_train, n_heldout, n_synthetic)``.
    n_bootstrap, max_samples, confidence_level, rng, device
        As in :func:`nnaa` (the cap uses the same seeded recipe).

    Returns
    -------
    NNAAResult

    Examples
    --------
    >>> import numpy as np
    >>> from scipy.spatial.distance import cdist
    >>> from idaudit.memorization import nnaa_from_distances
    >>> x = np.random.default_rng(1).standard_normal((30, 4))
    >>> res = nnaa_from_distances(cdist(x, x), (10, 10, 10), n_bootstrap=0)
    >>> 0.0 <= res.aa_train_synth <= 1.0
    True
    """
    n_bootstrap, max_samples, confidence_level = _check_common(
        n_bootstrap, max_samples, confidence_level
    )
    if len(sizes) != 3:
        raise InvalidInputError(
            f"`sizes` must be (n_train, n_heldout, n_synthetic); got {sizes!r}."
        )
    n_t, n_h, n_s = (check_integer(n, "sizes", minimum=0) for n in sizes)
    try:
        d = np.asarray(distances, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise TypeError("`distances` must be a numeric (N, N) array.") from exc
    total = n_t + n_h + n_s
    if d.shape != (total, total):
        raise InvalidInputError(
            f"`distances` must be ({total}, {total}) for sizes {tuple(sizes)}; got {d.shape}."
        )
    if np.isnan(d).any():
        raise InvalidInputError("`distances` holds NaN.")
    _check_sizes(n_t, n_h, n_s)
    gen = check_random_state(rng)
    keep = [
        offset + subsample_indices(n, max_samples, gen)
        for offset, n in ((0, n_t), (n_t, n_h), (n_t + n_h, n_s))
    ]
    dev = resolve_device(device)

    def block(rows: npt.NDArray[np.intp], cols: npt.NDArray[np.intp]) -> torch.Tensor:
        return torch.from_numpy(np.ascontiguousarray(d[np.ix_(rows, cols)])).to(dev)

    t, h, s = keep
    blocks = {
        "tt": block(t, t),
        "hh": block(h, h),
        "ss": block(s, s),
        "ts": block(t, s),
        "hs": block(h, s),
    }
    return _nnaa_core(blocks, n_bootstrap, confidence_level, gen)
