"""Nearest-neighbour adversarial accuracy (NNAA), its permutation test and split-half intervals."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd
import torch
import xarray as xr
from scipy.stats import norm

from idaudit._device import resolve_device
from idaudit._results import Status, provenance, variable
from idaudit._validation import RngLike, check_in_range, check_integer, check_random_state
from idaudit.exceptions import InvalidInputError
from idaudit.memorization._neighbours import (
    Metric,
    check_vectors,
    pairwise_distances,
    same_dim,
    small_work,
)
from idaudit.memorization._power import smallest_p_value
from idaudit.memorization._subjects import check_disjoint, check_subjects, unit_codes

__all__ = [
    "CAP_UNITS",
    "INTERVAL_METHOD",
    "INTERVAL_METHOD_SUBJECTS",
    "MIN_INTERVAL_SIZE",
    "NNAA_STATUS",
    "NNAA_TEST_STATUS",
    "NNAAResult",
    "cap_indices",
    "nnaa",
    "nnaa_from_distances",
    "subsample_indices",
]

#: Formal status of the columns of :meth:`NNAAResult.to_frame` that ``nnaa.csv`` holds.
NNAA_STATUS: dict[str, Status] = {
    "aa_train_synth": "sample_estimate",
    "aa_heldout_synth": "sample_estimate",
    "privacy_loss": "sample_estimate",
    # split-half intervals are asymptotic (normal, estimated variance): no finite-sample
    # guarantee; their coverage was measured by simulation (benchmarks/study_nnaa_interval.py)
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

#: Formal status of the permutation test's and the interval's bookkeeping columns of
#: :meth:`NNAAResult.to_frame` (kept apart from :data:`NNAA_STATUS`, which lists ``nnaa.csv``).
NNAA_TEST_STATUS: dict[str, Status] = {
    # a permutation p-value: valid (super-uniform) under exchangeability at every n, but not
    # a bound on any population quantity; the same status as flagging's p-value
    "p_value": "sample_estimate",
    "n_permutations": "descriptive",
    # the least p-value the relabellings can give (a function of the design, not the data)
    "smallest_p_value": "descriptive",
    "interval_method": "descriptive",
    "below_min_size": "descriptive",
}

#: Name of the interval method (:attr:`NNAAResult.interval_method`).
INTERVAL_METHOD = "split_half"
#: The interval method when a subject holds several images: the split-half variance at half
#: size, not scaled down to the full size (see :func:`nnaa`, Notes).
INTERVAL_METHOD_SUBJECTS = "split_half_subjects"

#: What ``max_samples`` draws (:attr:`NNAAResult.cap_unit`): images, or whole subjects.
CAP_UNITS = ("images", "subjects")

#: Smallest size of each of the training, held-out and synthetic sets for which an interval is
#: reported (units: images, or subjects when given). At 20 images per set the split-half
#: interval's coverage was measured within 2.5 points of nominal on null and memorising
#: scenarios; with several photos per subject the unscaled interval covered 0.94-0.99 from
#: 20 subjects (docs/memorization.md). Below it each half holds fewer than 10
#: units and the interval is not reported (NaN). The p-value is exact at every n.
MIN_INTERVAL_SIZE = 20

#: How many of a row's nearest columns are scanned for one present in a subset before the row
#: falls back to a full masked minimum (a column is absent with probability ≈ 1/2 in a
#: half-sample, so all 24 are absent with probability ≈ 6e-8).
_SCAN = 24
#: Upper bound on the (draws, rows, scan) boolean temporary of one block of draws.
_SCAN_BYTES = 1 << 24
#: Upper bound on the float64 temporary of one chunk of full masked minima.
_FALLBACK_BYTES = 1 << 25
#: Relative tolerance under which a permuted statistic counts as equal to the observed one
#: (as scipy.stats.permutation_test): sums of 0/1 divided by set sizes are exact up to rounding.
_TIE_RTOL = 1e-12

_NAMES = ("aa_train_synth", "aa_heldout_synth", "privacy_loss")

#: Unit (subject code ``0..g-1``) of each image of train, held-out and synthetic; ``None`` for
#: a set whose images are each their own unit.
_Units = tuple[
    npt.NDArray[np.int64] | None, npt.NDArray[np.int64] | None, npt.NDArray[np.int64] | None
]


def _n_units(units: npt.NDArray[np.int64] | None, n: int) -> int:
    """Return the number of units of a set of ``n`` images."""
    return n if units is None else int(units.max()) + 1


def _subject_units(
    subjects: Any, sizes: tuple[int, int, int]
) -> tuple[npt.NDArray[Any] | None, npt.NDArray[Any] | None, npt.NDArray[Any] | None]:
    """Check ``(train, heldout, synthetic)`` subjects, one label per row (or ``None``)."""
    if subjects is None:
        return None, None, None
    if not isinstance(subjects, tuple | list) or len(subjects) != 3:
        raise InvalidInputError(
            "`subjects` must be three label arrays or None (train, heldout, synthetic); "
            f"got {subjects!r:.80}."
        )
    names = ("subjects[0] (train)", "subjects[1] (heldout)", "subjects[2] (synthetic)")
    t, h, s = (check_subjects(x, n, nm) for x, n, nm in zip(subjects, sizes, names, strict=True))
    check_disjoint(t, h)
    return t, h, s


def _codes(labels: tuple[npt.NDArray[Any] | None, ...], keep: list[npt.NDArray[np.intp]]) -> _Units:
    """Subject codes ``0..g-1`` of the kept rows of each set (``None`` stays ``None``)."""
    out: list[npt.NDArray[np.int64] | None] = []
    for lab, idx in zip(labels, keep, strict=True):
        if lab is None:
            out.append(None)
        else:
            _, code = np.unique(lab[idx].astype(str), return_inverse=True)
            out.append(code.reshape(-1).astype(np.int64))
    return out[0], out[1], out[2]


#: Range of each number: adversarial accuracies are shares, the loss a difference of two.
_BOUNDS = {
    "aa_train_synth": (0.0, 1.0),
    "aa_heldout_synth": (0.0, 1.0),
    "privacy_loss": (-1.0, 1.0),
}


@dataclass(frozen=True)
class NNAAResult:
    """AA(train, synthetic), AA(held-out, synthetic), the privacy loss, its test and intervals.

    Attributes
    ----------
    aa_train_synth, aa_heldout_synth : float
        Adversarial accuracies (status: sample estimate).
    privacy_loss : float
        ``aa_heldout_synth - aa_train_synth`` (status: sample estimate); positive when
        synthetic images sit closer to the training images than held-out images do.
    ci : dict of str to (float, float)
        Split-half intervals of the three numbers at ``confidence_level``, clipped to
        ``[0, 1]`` (AA) and ``[-1, 1]`` (privacy loss). ``(nan, nan)`` when
        ``below_min_size`` or ``n_bootstrap=0`` (``interval_note`` says which). Asymptotic:
        status sample estimate.
    n_train, n_heldout, n_synthetic : int
        Set sizes after the ``max_samples`` cap.
    n_bootstrap : int
        Random splits behind the intervals (0 when no interval was computed).
    confidence_level : float
    bootstrap : numpy.ndarray, shape (n_bootstrap, 3)
        ``θ(A) - θ(B)`` for ``θ = (aa_train_synth, aa_heldout_synth, privacy_loss)`` of every
        split of each set into two disjoint halves ``A``, ``B``.
    p_value : float
        One-sided permutation p-value of H0 "training and held-out images are exchangeable
        relative to the synthetic set" against a positive privacy loss,
        ``(1 + #{permuted loss >= observed}) / (1 + n_permutations)``; NaN with
        ``n_permutations=0``. Valid at every set size.
    n_permutations : int
    smallest_p_value : float
        The least ``p_value`` the test can give: ``max(1/M, 1/(1 + n_permutations))`` with
        ``M = Π_c C(g_t,c + g_h,c, g_t,c)`` the distinct relabellings, counted over the
        permutation units (subjects when given, else images) of each stratum ``c``
        (:func:`~idaudit.memorization._power.smallest_p_value`). Above the level, the test
        cannot reject whatever the images. NaN with ``n_permutations=0``.
    std_error : dict of str to float
        The split-half standard errors behind ``ci`` (NaN where no interval).
    interval_method : str
        ``"split_half"``; ``"split_half_subjects"`` when a subject holds several images
        (the half-size variance, unscaled: :func:`nnaa`, Notes); ``"none"`` when no interval
        is reported.
    below_min_size : bool
        True when a set is smaller than :data:`MIN_INTERVAL_SIZE`, so no interval is reported.
    interval_note : str
        Why no interval is reported ("" when one is).
    cap_unit : str
        What the ``max_samples`` cap draws: ``"images"``, or ``"subjects"`` when subjects are
        given (whole subjects with all their photos, :func:`cap_indices`).
    capped : bool
        True when the cap thinned at least one set.
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
    p_value: float = math.nan
    n_permutations: int = 0
    smallest_p_value: float = math.nan
    std_error: dict[str, float] = field(default_factory=dict, repr=False)
    interval_method: str = INTERVAL_METHOD
    below_min_size: bool = False
    interval_note: str = ""
    cap_unit: str = "images"
    capped: bool = False

    def to_frame(self, metric: str | None = None) -> pd.DataFrame:
        """One row: the numbers, their intervals, the p-value, set sizes and settings.

        ``ci_lower``/``ci_upper`` are the privacy loss's interval (seed 003's ``nnaa.csv``);
        ``frame.attrs["status"]`` maps each column to its status, ``frame.attrs
        ["interval_note"]`` says why no interval is reported (empty when one is).
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
            "p_value": self.p_value,
            "n_permutations": self.n_permutations,
            "smallest_p_value": self.smallest_p_value,
            "interval_method": self.interval_method,
            "below_min_size": self.below_min_size,
        }
        frame = pd.DataFrame([row])
        if metric is not None:
            frame.insert(0, "metric", metric)
        frame.attrs["status"] = {**NNAA_STATUS, **NNAA_TEST_STATUS}
        frame.attrs["confidence_level"] = self.confidence_level
        frame.attrs["interval_note"] = self.interval_note
        frame.attrs["cap_unit"] = self.cap_unit
        frame.attrs["capped"] = self.capped
        return frame

    def to_xarray(self) -> xr.Dataset:
        """Return the result as a Dataset of scalars, every variable with its status.

        ``interval_method`` and ``interval_note`` are Dataset attributes (strings).
        """
        frame = self.to_frame()
        numeric = {**NNAA_STATUS, **NNAA_TEST_STATUS}
        del numeric["interval_method"]
        return xr.Dataset(
            {
                name: variable(
                    (), frame[name].iloc[0], long_name=name.replace("_", " "), status=status
                )
                for name, status in numeric.items()
            },
            attrs=provenance(
                title="idaudit.memorization.nnaa",
                settings={
                    "confidence_level": self.confidence_level,
                    "interval_method": self.interval_method,
                    "interval_note": self.interval_note,
                    "min_interval_size": MIN_INTERVAL_SIZE,
                    "cap_unit": self.cap_unit,
                    "capped": int(self.capped),
                },
            ),
        )


class _MaskedMin:
    """Row minima of a fixed matrix over any subset of its columns, for many subsets at once.

    With every column present this is the plain row minimum. Otherwise the minimum over the
    present columns is the first present column among a row's ``_SCAN`` nearest, found by
    partial selection (``torch.topk``, made once, on the first masked call) rather than a
    full sort: the columns left out are no nearer than the last one kept, so a present
    column found among the kept ones is the minimum whatever the order of ties. Rows whose
    ``_SCAN`` nearest columns are all absent fall back to the full masked minimum, in chunks.
    """

    def __init__(self, matrix: torch.Tensor, *, exclude_diagonal: bool = False) -> None:
        # a point is not its own neighbour; other blocks (or their transposed views) are only
        # read, never written to
        self.matrix = matrix.clone().fill_diagonal_(torch.inf) if exclude_diagonal else matrix
        self._nearest: tuple[torch.Tensor, torch.Tensor] | None = None

    def nearest(self) -> tuple[torch.Tensor, torch.Tensor]:
        """Distances and columns ``(rows, k)`` of each row's ``k = _SCAN`` nearest, ascending."""
        if self._nearest is None:
            k = min(_SCAN, self.matrix.shape[1])
            values, order = torch.topk(self.matrix, k, dim=1, largest=False, sorted=True)
            self._nearest = (values.contiguous(), order.contiguous())
        return self._nearest

    def __call__(self, present: torch.Tensor) -> torch.Tensor:
        """Minima ``(b, rows)`` for presence masks ``(b, cols)``; inf where nothing is present."""
        b = present.shape[0]
        if bool(present.all()):  # every column present (the point estimate): no selection
            return self.matrix.min(dim=1).values.expand(b, -1)
        values, order = self.nearest()
        rows, k = order.shape
        hit = present[:, order]  # (b, rows, k)
        found = hit.any(dim=2)  # (b, rows)
        first = hit.to(torch.uint8).argmax(dim=2)  # (b, rows) first present column
        out = torch.gather(values.expand(b, rows, k), 2, first[..., None])[..., 0]
        missing = (~found).nonzero()  # the rare rows whose nearest columns are all absent
        cols = self.matrix.shape[1]
        step = max(1, _FALLBACK_BYTES // (8 * max(cols, 1)))
        for start in range(0, missing.shape[0], step):
            bi, ri = missing[start : start + step, 0], missing[start : start + step, 1]
            full = torch.where(present[bi], self.matrix[ri], torch.inf)  # (m, cols)
            out[bi, ri] = full.min(dim=1).values if cols else torch.inf
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


class _AAKernel:
    """AA(train, synth), AA(held-out, synth) and the loss over many subsets or relabellings.

    Built once from the distance blocks tt, hh, ss, ts, hs, th (float64, one device); every
    subset or relabelling is then a mask over the rows of those fixed matrices. The pooled
    matrices of the relabellings are made on the first relabelling (``th`` may be left out
    when there is none).
    """

    def __init__(self, blocks: dict[str, torch.Tensor]) -> None:
        tt, hh, ss, ts, hs = (blocks[k] for k in ("tt", "hh", "ss", "ts", "hs"))
        self.blocks = blocks
        self.sizes = (tt.shape[0], hh.shape[0], ss.shape[0])
        self.device = tt.device
        self.mins = {
            "tt": _MaskedMin(tt, exclude_diagonal=True),
            "hh": _MaskedMin(hh, exclude_diagonal=True),
            "ss": _MaskedMin(ss, exclude_diagonal=True),
            "ts": _MaskedMin(ts),
            "st": _MaskedMin(ts.T),
            "hs": _MaskedMin(hs),
            "sh": _MaskedMin(hs.T),
        }
        self._pooled: tuple[_MaskedMin, _MaskedMin, torch.Tensor, torch.Tensor] | None = None

    def pooled(self) -> tuple[_MaskedMin, _MaskedMin, torch.Tensor, torch.Tensor]:
        """Minima over the pooled real set [train; held-out], which a relabelling permutes.

        Returns the pooled set's own minima, the synthetic set's minima over it, each pooled
        image's nearest synthetic distance ``(n_p,)`` and each synthetic image's nearest
        other synthetic distance ``(n_s,)``.
        """
        if self._pooled is None:
            tt, hh, ts, hs, th = (self.blocks[k] for k in ("tt", "hh", "ts", "hs", "th"))
            pp = torch.cat([torch.cat([tt, th], dim=1), torch.cat([th.T, hh], dim=1)])
            ps = torch.cat([ts, hs])  # (n_p, n_s)
            self._pooled = (
                _MaskedMin(pp, exclude_diagonal=True),  # (n_p, n_p)
                _MaskedMin(ps.T),  # (n_s, n_p)
                ps.min(dim=1).values,  # (n_p,) nearest synthetic image
                self.mins["ss"].matrix.min(dim=1).values,  # (n_s,) diagonal excluded
            )
        return self._pooled

    def subsets(self, w_t: torch.Tensor, w_h: torch.Tensor, w_s: torch.Tensor) -> torch.Tensor:
        """Return the ``(b, 3)`` values on subsets given by 0/1 weights ``(b, n_*)``.

        Every nearest neighbour is recomputed within the kept images.
        """
        m = self.mins
        p_t, p_h, p_s = w_t > 0, w_h > 0, w_s > 0
        own_s = m["ss"](p_s)
        aa_ts = _accuracy(m["tt"](p_t), m["ts"](p_s), w_t, own_s, m["st"](p_t), w_s)
        aa_hs = _accuracy(m["hh"](p_h), m["hs"](p_s), w_h, own_s, m["sh"](p_h), w_s)
        return torch.stack([aa_ts, aa_hs, aa_hs - aa_ts], dim=1)  # (b, 3)

    def relabelled(self, is_train: torch.Tensor) -> torch.Tensor:
        """Return the privacy loss ``(b,)`` under relabellings of the pooled real images.

        The images marked in ``is_train`` ``(b, n_p)`` form the training set, the others the
        held-out set (sizes as observed, or varying when whole subjects move).
        """
        pooled, synth_to_pooled, pooled_cross, synth_own = self.pooled()
        own_t, own_h = pooled(is_train), pooled(~is_train)  # (b, n_p) each
        own = torch.where(is_train, own_t, own_h)  # nearest other image of the same label
        closer = (own < pooled_cross).to(torch.float64)  # (b, n_p)
        # set sizes per relabelling: they vary when whole subjects are moved
        frac_t = (closer * is_train).sum(dim=1) / is_train.sum(dim=1)
        frac_h = (closer * ~is_train).sum(dim=1) / (~is_train).sum(dim=1)
        frac_st = (synth_own < synth_to_pooled(is_train)).to(torch.float64).mean(1)
        frac_sh = (synth_own < synth_to_pooled(~is_train)).to(torch.float64).mean(1)
        return 0.5 * (frac_h + frac_sh) - 0.5 * (frac_t + frac_st)


def subsample_indices(n: int, max_samples: int, gen: np.random.Generator) -> npt.NDArray[np.intp]:
    """All of ``range(n)`` when ``n <= max_samples``, else a sorted seeded subset of that size."""
    if n <= max_samples:
        return np.arange(n)
    return np.sort(gen.choice(n, size=max_samples, replace=False))


def cap_indices(
    subjects: tuple[npt.NDArray[Any] | None, npt.NDArray[Any] | None, npt.NDArray[Any] | None],
    sizes: tuple[int, int, int],
    max_samples: int,
    gen: np.random.Generator,
) -> tuple[list[npt.NDArray[np.intp]], str]:
    """Rows of the training, held-out and synthetic sets that the ``max_samples`` cap keeps.

    Parameters
    ----------
    subjects : (array or None, array or None, array or None)
        Subject of each row of each set (checked), ``None`` for a set whose images are each
        their own subject.
    sizes : (int, int, int)
        Rows of each set.
    max_samples : int
        The cap, in images.
    gen : numpy.random.Generator
        Draws the kept subsets, one set after the other.

    Returns
    -------
    keep : list of numpy.ndarray
        Sorted kept row indices of each set.
    cap_unit : str
        ``"images"`` without subjects, ``"subjects"`` with them.

    Notes
    -----
    Without subjects a set larger than ``max_samples`` keeps a seeded random subset of
    ``max_samples`` images (:func:`subsample_indices`).

    With subjects the cap draws whole subjects. Let ``m`` be the mean number of images per
    unit (subject, or image of a set without subjects) of the training and held-out sets
    pooled. Each of the two keeps at most ``g = max(2, ⌊max_samples / m⌋)`` of its units,
    drawn uniformly without replacement, with all their images; the synthetic set does the
    same with its own mean. ``m`` and ``g`` depend only on the pooled real images and on each
    set's number of units, which every subject-level relabelling keeps; so the kept units of
    each set are a uniform subset of fixed size whatever the labelling, and, given the kept
    units, every split of them with the kept numbers of training and held-out units is
    equally likely under H0. The subject-level permutation test on the kept subjects is
    therefore exact, as it is on the whole sets. Thinning images instead (the former
    recipe) keeps about one photo of each subject of a large set and all photos of a small
    one, which makes the pools non-exchangeable. The kept image count is ``max_samples`` on
    average when the sets' subjects hold alike numbers of photos; it is not bounded by it.
    """
    if all(lab is None for lab in subjects):
        return [subsample_indices(n, max_samples, gen) for n in sizes], "images"
    codes = []
    for lab, n in zip(subjects, sizes, strict=True):
        if lab is None:
            codes.append(np.arange(n, dtype=np.int64))
        else:
            _, code = np.unique(lab.astype(str), return_inverse=True)
            codes.append(code.reshape(-1).astype(np.int64))
    units = [int(c.max()) + 1 for c in codes]
    pooled = (sizes[0] + sizes[1]) / (units[0] + units[1])  # the same under every relabelling
    per_unit = (pooled, pooled, sizes[2] / units[2])
    keep = []
    for code, g, m in zip(codes, units, per_unit, strict=True):
        g_cap = max(2, math.floor(max_samples / m + 1e-9))  # 1e-9: 1000 / (1000 / 250) is 250
        if g <= g_cap:
            keep.append(np.arange(code.size))
            continue
        chosen = np.zeros(g, dtype=bool)
        chosen[gen.choice(g, size=g_cap, replace=False)] = True
        keep.append(np.flatnonzero(chosen[code]))
    return keep, "subjects"


def _check_sizes(n_train: int, n_heldout: int, n_synthetic: int) -> None:
    for n, name in ((n_train, "train"), (n_heldout, "heldout"), (n_synthetic, "synthetic")):
        if n < 2:
            raise InvalidInputError(
                f"`{name}` must hold at least 2 rows (a point's nearest neighbour in its own "
                f"set is another point); got {n}."
            )


def _masks(
    index: npt.NDArray[np.intp], n: int, device: torch.device, dtype: torch.dtype
) -> torch.Tensor:
    """``(b, n)`` masks (1 or True) at the ``(b, m)`` positions ``index``, else 0."""
    out = torch.zeros((index.shape[0], n), dtype=dtype, device=device)
    out.scatter_(1, torch.from_numpy(np.ascontiguousarray(index)).to(device), 1)
    return out


def _split_half_differences(
    kernel: _AAKernel, n_bootstrap: int, gen: np.random.Generator, units: _Units
) -> npt.NDArray[np.float64]:
    """``θ(A) - θ(B)``, shape (n_bootstrap, 3), over random splits into disjoint halves.

    Recipe (reproducible outside idaudit): for train, held-out, synthetic in this order,
    ``order = np.argsort(gen.random((n_bootstrap, g)), axis=1)`` over the set's ``g`` units
    (its images, or its subjects when given); in draw ``b`` half ``A`` holds the units
    ``order[b, :g // 2]`` and half ``B`` the units ``order[b, g // 2 : 2 * (g // 2)]`` (an
    odd count leaves one unit out). A subject's images always fall in the same half.
    """
    sizes = kernel.sizes
    counts = [_n_units(u, n) for u, n in zip(units, sizes, strict=True)]
    orders = [np.argsort(gen.random((n_bootstrap, g)), axis=1) for g in counts]
    out = np.empty((n_bootstrap, 3))
    step = max(1, _SCAN_BYTES // (max(sizes) * _SCAN))
    for start in range(0, n_bootstrap, step):
        stop = min(start + step, n_bootstrap)
        halves = []
        for lo, hi in ((0, 1), (1, 2)):
            masks = []
            for o, g, u in zip(orders, counts, units, strict=True):
                m = _masks(
                    o[start:stop, lo * (g // 2) : hi * (g // 2)], g, kernel.device, torch.float64
                )
                masks.append(m if u is None else m[:, torch.from_numpy(u).to(kernel.device)])
            halves.append(kernel.subsets(*masks))  # (b, 3) on half A, then half B
        out[start:stop] = (halves[0] - halves[1]).cpu().numpy()
    return out


def _permutation_p_value(
    kernel: _AAKernel,
    n_permutations: int,
    gen: np.random.Generator,
    units: _Units,
    layers: npt.NDArray[np.int64] | None = None,
) -> float:
    """One-sided permutation p-value of the privacy loss, relabelling train and held-out.

    Recipe: each block of ``b`` relabellings draws ``np.argsort(gen.random((b, g_t + g_h)),
    axis=1)[:, :g_t]`` as the new training units (blocks in order, so the draws do not depend
    on the block size), ``g_*`` the number of units (images, or subjects when given: training
    subjects first, each set's in sorted label order); the p-value is
    ``(1 + #{loss* >= loss - tol}) / (1 + B)``. With ``layers`` (a stratum code per pooled
    real image) each stratum's units are relabelled among themselves, its number of training
    units kept, with one ``gen.random((b, g_s))`` draw per stratum in code order.
    """
    if n_permutations == 0:
        return math.nan
    n_t, n_h, _ = kernel.sizes
    n_p = n_t + n_h
    labels = torch.zeros((1, n_p), dtype=torch.bool, device=kernel.device)
    labels[:, :n_t] = True
    observed = float(kernel.relabelled(labels)[0])  # the same arithmetic as the permuted ones
    tol = _TIE_RTOL * max(1.0, abs(observed))
    # units of the pooled real images: images, or subjects (train's numbered first)
    pooled_units, g_p = unit_codes(list(units[:2]), (n_t, n_h))
    g_t = _n_units(units[0], n_t)
    expand = None if units[0] is None and units[1] is None else torch.from_numpy(pooled_units)
    groups = None if layers is None else _unit_strata(pooled_units, g_p, g_t, layers)
    exceed = 0
    step = max(1, _SCAN_BYTES // (n_p * _SCAN))
    for start in range(0, n_permutations, step):
        b = min(step, n_permutations - start)
        if groups is None:
            train = np.argsort(gen.random((b, g_p)), axis=1)[:, :g_t]
        else:  # within each stratum: (b, g_t_s) positions among its units, all strata joined
            train = np.concatenate(
                [pos[np.argsort(gen.random((b, pos.size)), axis=1)[:, :k]] for pos, k in groups],
                axis=1,
            )
        mask = _masks(train, g_p, kernel.device, torch.bool)  # (b, g_p) units in training
        if expand is not None:
            mask = mask[:, expand.to(kernel.device)]  # (b, n_p) images in training
        permuted = kernel.relabelled(mask)  # (b,)
        exceed += int((permuted >= observed - tol).sum())
    return (1.0 + exceed) / (1.0 + n_permutations)


def _relabelling_groups(
    units: _Units, sizes: tuple[int, int, int], layers: npt.NDArray[np.int64] | None
) -> list[tuple[int, int]]:
    """Per stratum, the training and held-out units the permutation test relabels."""
    n_t, n_h, _ = sizes
    g_t, g_h = _n_units(units[0], n_t), _n_units(units[1], n_h)
    if layers is None:
        return [(g_t, g_h)]
    pooled_units, g_p = unit_codes(list(units[:2]), (n_t, n_h))
    return [(k, pos.size - k) for pos, k in _unit_strata(pooled_units, g_p, g_t, layers)]


def _strata(
    strata: Any, sizes: tuple[int, int]
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]] | None:
    """Stratum codes of the train and held-out rows (shared codes), checked; or ``None``."""
    if strata is None:
        return None
    if not isinstance(strata, tuple | list) or len(strata) != 2:
        raise InvalidInputError("`strata` must be a pair (train labels, held-out labels).")
    arrays = [np.asarray(x, dtype=object).ravel() for x in strata]
    for name, arr, n in zip(("train", "heldout"), arrays, sizes, strict=True):
        if arr.size != n:
            raise InvalidInputError(
                f"`strata` must label every {name} row; got {arr.size} labels for {n} rows."
            )
    _, codes = np.unique(np.concatenate(arrays).astype(str), return_inverse=True)
    codes = codes.astype(np.int64).reshape(-1)
    return codes[: sizes[0]], codes[sizes[0] :]


def _kept_layers(
    codes: tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]] | None,
    keep: list[npt.NDArray[np.intp]],
) -> npt.NDArray[np.int64] | None:
    """Return the pooled (train, then held-out) stratum codes of the rows the cap kept."""
    if codes is None:
        return None
    return np.concatenate([codes[0][keep[0]], codes[1][keep[1]]])


def _unit_strata(
    pooled_units: npt.NDArray[np.int64],
    g_p: int,
    g_t: int,
    layers: npt.NDArray[np.int64],
) -> list[tuple[npt.NDArray[np.intp], int]]:
    """Per stratum: its units' codes and how many of them are training units (codes < g_t)."""
    of_unit = np.full(g_p, -1)
    for u, layer in zip(pooled_units.tolist(), layers.tolist(), strict=True):
        if of_unit[u] not in (-1, layer):
            raise InvalidInputError("a subject has images in two strata (cohorts).")
        of_unit[u] = layer
    out = []
    for layer in np.unique(of_unit):
        pos = np.flatnonzero(of_unit == layer)
        out.append((pos, int((pos < g_t).sum())))
    return out


def _split_half_interval(
    point: npt.NDArray[np.float64],
    differences: npt.NDArray[np.float64],
    sizes: tuple[int, int, int],
    confidence_level: float,
    *,
    scaled: bool = True,
) -> tuple[dict[str, tuple[float, float]], dict[str, float]]:
    """Return normal intervals from the split-half variance, clipped to each range, and SEs."""
    # E[(θ(A) - θ(B))²] / 2 = Var(θ at half size), without bias: A and B are disjoint, so
    # independent. The n^{-1/2} rate of nearest-neighbour statistics (Henze, 1988) turns it
    # into Var(θ at full size) with the factor (n // 2) / n, = 1/2 for even n; its largest
    # value over the three sets errs on the wide side for odd sizes. With several images per
    # subject the variance falls more slowly than 1/subjects at the sizes met in practice
    # (nnaa, Notes): the half-size variance is then kept unscaled, an upper bound whenever
    # the variance does not grow with the number of subjects.
    ratio = max((n // 2) / n for n in sizes) if scaled else 1.0  # sizes: units
    se = np.sqrt(ratio * np.mean(differences**2, axis=0) / 2.0)
    z = float(norm.ppf(0.5 + confidence_level / 2.0))
    ci = {}
    for i, name in enumerate(_NAMES):
        lo, hi = _BOUNDS[name]
        ci[name] = (
            float(np.clip(point[i] - z * se[i], lo, hi)),
            float(np.clip(point[i] + z * se[i], lo, hi)),
        )
    return ci, {name: float(se[i]) for i, name in enumerate(_NAMES)}


def _interval_note(sizes: tuple[int, int, int], n_bootstrap: int, what: str = "images") -> str:
    """Why no interval is reported, or "" when one is (``sizes`` count units: ``what``)."""
    if min(sizes) < MIN_INTERVAL_SIZE:
        n_t, n_h, n_s = sizes
        return (
            f"no interval: sets of {n_t}, {n_h}, {n_s} {what} (train, held-out, synthetic); "
            f"the split-half interval needs at least {MIN_INTERVAL_SIZE} in each (its coverage "
            "was not shown below that); the permutation p-value is exact at every size"
        )
    if n_bootstrap == 0:
        return "no interval: n_bootstrap=0"
    return ""


def _nnaa_core(
    blocks: dict[str, torch.Tensor],
    n_bootstrap: int,
    n_permutations: int,
    confidence_level: float,
    gen: np.random.Generator,
    units: _Units = (None, None, None),
    layers: npt.NDArray[np.int64] | None = None,
    cap: tuple[str, bool] = ("images", False),
) -> NNAAResult:
    """Return NNAA, its intervals and p-value from the blocks tt, hh, ss, ts, hs, th.

    The blocks are float64 distance matrices on one device; ``units`` the subject codes;
    ``cap`` what the ``max_samples`` cap drew and whether it thinned a set.
    """
    kernel = _AAKernel(blocks)
    sizes = kernel.sizes
    counts = tuple(_n_units(u, n) for u, n in zip(units, sizes, strict=True))
    # independent streams: the splits do not change with n_permutations, nor the
    # relabellings with n_bootstrap
    split_gen, perm_gen = gen.spawn(2)
    by_subject = any(u is not None for u in units)
    note = _interval_note(counts, n_bootstrap, "units (subjects)" if by_subject else "images")  # type: ignore[arg-type]
    n_splits = 0 if note else n_bootstrap
    # the (draws, rows, scan) temporaries of small sets are too small to share between threads
    work = (2 * n_splits * sum(sizes) + 2 * n_permutations * (sizes[0] + sizes[1])) * _SCAN
    with torch.inference_mode(), small_work(kernel.device, work):
        ones = [torch.ones((1, n), dtype=torch.float64, device=kernel.device) for n in sizes]
        point = kernel.subsets(*ones)[0].cpu().numpy()
        differences = _split_half_differences(kernel, n_splits, split_gen, units)
        p_value = _permutation_p_value(kernel, n_permutations, perm_gen, units, layers)
    # a unit holding several images: the variance need not fall as 1/units (see nnaa, Notes)
    clustered = any(g < n for g, n in zip(counts, sizes, strict=True))
    if note:
        ci = {name: (math.nan, math.nan) for name in _NAMES}
        se = {name: math.nan for name in _NAMES}
    else:
        ci, se = _split_half_interval(
            point,
            differences,
            counts,  # type: ignore[arg-type]
            confidence_level,
            scaled=not clustered,
        )
    return NNAAResult(
        aa_train_synth=float(point[0]),
        aa_heldout_synth=float(point[1]),
        privacy_loss=float(point[2]),
        ci=ci,
        n_train=sizes[0],
        n_heldout=sizes[1],
        n_synthetic=sizes[2],
        n_bootstrap=n_splits,
        confidence_level=confidence_level,
        bootstrap=differences,
        p_value=p_value,
        n_permutations=n_permutations,
        smallest_p_value=(
            smallest_p_value(_relabelling_groups(units, sizes, layers), n_permutations)
            if n_permutations
            else math.nan
        ),
        std_error=se,
        interval_method=(
            "none" if note else INTERVAL_METHOD_SUBJECTS if clustered else INTERVAL_METHOD
        ),
        below_min_size=min(counts) < MIN_INTERVAL_SIZE,
        interval_note=note,
        cap_unit=cap[0],
        capped=cap[1],
    )


def _check_common(
    n_bootstrap: int, n_permutations: int, max_samples: int, confidence_level: float
) -> tuple[int, int, int, float]:
    return (
        check_integer(n_bootstrap, "n_bootstrap", minimum=0),
        check_integer(n_permutations, "n_permutations", minimum=0),
        check_integer(max_samples, "max_samples", minimum=2),
        check_in_range(confidence_level, "confidence_level", 0.0, 1.0),
    )


def nnaa(
    train: npt.ArrayLike,
    heldout: npt.ArrayLike,
    synthetic: npt.ArrayLike,
    *,
    subjects: tuple[Any, Any, Any] | None = None,
    strata: tuple[Any, Any] | None = None,
    metric: Metric = "cosine",
    n_bootstrap: int = 1000,
    n_permutations: int = 999,
    max_samples: int = 1000,
    confidence_level: float = 0.95,
    rng: RngLike = 0,
    device: str | torch.device = "cpu",
) -> NNAAResult:
    r"""Nearest-neighbour adversarial accuracy, its permutation test and split-half intervals.

    Parameters
    ----------
    train, heldout, synthetic : array_like, shape (n_*, d)
        Embeddings (at least 2 rows each).
    subjects : (array_like or None, array_like or None, array_like or None), optional
        Subject of each row of ``train``, ``heldout`` and ``synthetic`` (``None`` for a set:
        each image its own subject). With subjects, the relabellings move whole subjects
        between training and held-out, and the split-half draws split each set by subject
        (Notes). A subject with rows in both ``train`` and ``heldout`` is refused (seed 003:
        the partitions must be disjoint at the subject level). Default: every image its own
        subject, i.e. images are assumed exchangeable.
    strata : (array_like, array_like), optional
        A stratum (cohort) label for each row of ``train`` and ``heldout``: the relabellings
        then stay within each stratum, keeping its number of training units. With pooled
        cohorts whose held-out mix differs from the training mix, only this test is exact
        (the pooled loss itself then moves with the mix; read the per-cohort values).
    metric : {"cosine", "euclidean"}, default "cosine"
    n_bootstrap : int, default 1000
        Random splits into halves behind the intervals; 0 skips the intervals (NaN).
    n_permutations : int, default 999
        Relabellings of the pooled training and held-out images for the p-value; 0 skips it
        (NaN).
    max_samples : int, default 1000
        Sets larger than this are first cut to a seeded random subset of this size; with
        ``subjects`` the cap draws whole subjects (:func:`cap_indices`).
    confidence_level : float, default 0.95
        Of the split-half intervals.
    rng : int, SeedSequence or Generator, default 0
        Seeds the subsampling, then (through two spawned streams) the splits and the
        relabellings.
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
    2020); ``privacy_loss = AA(held-out, synth) - AA(train, synth)``, positive when the
    synthetic images sit closer to the training images. Ties count as not closer.

    **Test.** Under H0 "training and held-out images are exchangeable relative to the
    synthetic set" every split of the pooled real images into sets of the observed sizes is
    equally likely. Each of ``n_permutations`` relabellings recomputes both AA terms (each
    real image's nearest neighbour within its new set, each synthetic image's nearest new
    training and held-out image) from the same distance matrices; the one-sided p-value is
    ``(1 + #{loss* >= loss}) / (1 + n_permutations)``, valid at every set size.

    **Interval.** Each of ``n_bootstrap`` draws splits every set into two disjoint random
    halves ``A`` and ``B`` (sizes ``n // 2``) and recomputes every nearest neighbour within
    each half. ``A`` and ``B`` are independent, so ``mean((θ(A) - θ(B))²) / 2`` estimates the
    variance of the statistic at half size without bias (balanced half-samples, McCarthy,
    1969), whatever its non-linearity; nearest-neighbour statistics have variance of order
    ``1/n`` (Schilling, 1986; Henze, 1988), so the full-size variance is half of it. The
    interval is ``θ ± z_{1-α/2}·se``, clipped to ``[0, 1]`` for the AA terms and to
    ``[-1, 1]`` for the privacy loss. It is asymptotic (status sample estimate); its coverage
    was measured within 2.5 points of nominal on null and memorising scenarios with at least
    :data:`MIN_INTERVAL_SIZE` images per set, one image per unit
    (``benchmarks/study_nnaa_interval.py``; with several photos per subject see below). Below
    that size no interval is reported (NaN, ``below_min_size``, ``interval_note``).

    **Subjects.** Photos of one subject are not exchangeable with other subjects' photos.
    With ``subjects`` the unit is the subject: each relabelling assigns whole subjects to
    training and held-out (the number of training *subjects* kept, so image counts vary and
    each AA term is a share of its own relabelled set), exact under H0 "subjects are
    exchangeable between training and held-out" (a subject-level random split); each
    split-half draw puts whole subjects in each half, and :data:`MIN_INTERVAL_SIZE` counts
    subjects. When a subject holds several images the variance of the statistic falls more
    slowly than ``1/subjects`` at practical sizes (a photo's nearest neighbour is mostly its
    own subject's, and the rare closer stranger grows likelier with the other set's size),
    so halving the half-size variance undercovers (0.83 to 0.88 measured at 20 to 60
    subjects × 4 photos); the interval then uses the half-size variance unscaled
    (``interval_method="split_half_subjects"``), an upper bound on the variance whenever it
    does not grow with the number of subjects (coverage 0.94-0.99 measured from 20
    subjects per set, docs/memorization.md). The
    ``max_samples`` cap draws whole subjects with all their photos, a fixed number of
    subjects per set that no relabelling changes, so the test stays exact after the cap
    (:func:`cap_indices`).

    References
    ----------
    .. [1] A. Yale et al., "Generation and evaluation of privacy preserving synthetic health
       data", Neurocomputing 416, 2020.
    .. [2] P. J. McCarthy, "Pseudo-replication: half samples", Review of the International
       Statistical Institute 37, 1969.
    .. [3] M. F. Schilling, "Multivariate two-sample tests based on nearest neighbors",
       JASA 81, 1986; N. Henze, "A multivariate two-sample test based on the number of
       nearest neighbor type coincidences", Annals of Statistics 16, 1988.

    Examples
    --------
    >>> import numpy as np
    >>> from idaudit.memorization import nnaa
    >>> gen = np.random.default_rng(0)
    >>> train, held = gen.standard_normal((2, 60, 8))
    >>> res = nnaa(train, held, train + 0.01 * gen.standard_normal((60, 8)), n_bootstrap=50)
    >>> res.aa_train_synth < 0.1 < 0.3 < res.privacy_loss  # near-copies of training points
    True
    >>> res.p_value  # no relabelling comes close: the smallest p-value 999 permutations give
    0.001
    """
    n_bootstrap, n_permutations, max_samples, confidence_level = _check_common(
        n_bootstrap, n_permutations, max_samples, confidence_level
    )
    t = check_vectors(train, "train")
    h = check_vectors(heldout, "heldout")
    s = check_vectors(synthetic, "synthetic")
    same_dim({"train": t, "heldout": h, "synthetic": s})
    _check_sizes(len(t), len(h), len(s))
    labels = _subject_units(subjects, (len(t), len(h), len(s)))
    strata_codes = _strata(strata, (len(t), len(h)))
    gen = check_random_state(rng)
    keep, cap_unit = cap_indices(labels, (len(t), len(h), len(s)), max_samples, gen)
    capped = any(k.size < len(x) for k, x in zip(keep, (t, h, s), strict=True))
    t, h, s = (x[k] for x, k in zip((t, h, s), keep, strict=True))
    units = _codes(labels, keep)
    layers = _kept_layers(strata_codes, keep)
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
    if n_permutations:  # only the relabellings read train x held-out
        blocks["th"] = block(t, h)
    return _nnaa_core(
        blocks, n_bootstrap, n_permutations, confidence_level, gen, units, layers,
        cap=(cap_unit, capped),
    )  # fmt: skip


def nnaa_from_distances(
    distances: npt.ArrayLike,
    sizes: tuple[int, int, int],
    *,
    subjects: tuple[Any, Any, Any] | None = None,
    strata: tuple[Any, Any] | None = None,
    n_bootstrap: int = 1000,
    n_permutations: int = 999,
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
        ``sizes``. Only the upper blocks are read: train×train, held-out×held-out,
        synthetic×synthetic, train×synthetic, held-out×synthetic and train×held-out (the
        last for the permutation test).
    sizes : (int, int, int)
        ``(n_train, n_heldout, n_synthetic)``.
    subjects, strata, n_bootstrap, n_permutations, max_samples, confidence_level, rng, device
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
    >>> 0.0 <= res.aa_train_synth <= 1.0, res.below_min_size  # 10 < MIN_INTERVAL_SIZE
    (True, True)
    """
    n_bootstrap, n_permutations, max_samples, confidence_level = _check_common(
        n_bootstrap, n_permutations, max_samples, confidence_level
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
    if (d < -1e-9).any():  # a copy's distance may round to -1e-16
        raise InvalidInputError("`distances` must be >= 0; got a negative distance.")
    _check_sizes(n_t, n_h, n_s)
    labels = _subject_units(subjects, (n_t, n_h, n_s))
    strata_codes = _strata(strata, (n_t, n_h))
    gen = check_random_state(rng)
    kept, cap_unit = cap_indices(labels, (n_t, n_h, n_s), max_samples, gen)
    capped = any(k.size < n for k, n in zip(kept, (n_t, n_h, n_s), strict=True))
    keep = [offset + k for offset, k in zip((0, n_t, n_t + n_h), kept, strict=True)]
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
    if n_permutations:  # only the relabellings read train x held-out
        blocks["th"] = block(t, h)
    units = _codes(labels, kept)
    layers = _kept_layers(strata_codes, kept)
    return _nnaa_core(
        blocks, n_bootstrap, n_permutations, confidence_level, gen, units, layers,
        cap=(cap_unit, capped),
    )  # fmt: skip
