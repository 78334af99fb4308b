"""Nearest-neighbour adversarial accuracy (NNAA), its permutation test and split-half intervals."""

from __future__ import annotations

import math
from collections.abc import Callable
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
from idaudit.memorization._nnaa_kernel import (
    _SCAN,
    _AAKernel,
    _n_units,
    _permutation_p_value,
    _relabelling_groups,
    _split_half_differences,
    _Units,
)
from idaudit.memorization._power import smallest_p_value
from idaudit.memorization._subjects import (
    check_set_subjects,
    label_codes,
)

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

_NAMES = ("aa_train_synth", "aa_heldout_synth", "privacy_loss")


def _codes(labels: tuple[npt.NDArray[Any] | None, ...], keep: list[npt.NDArray[np.intp]]) -> _Units:
    """Subject codes ``0..g-1`` of the kept rows of each set (``None`` stays ``None``)."""
    t, h, s = (
        None if lab is None else label_codes(lab[idx], idx.size)
        for lab, idx in zip(labels, keep, strict=True)
    )
    return t, h, s


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
    codes = [label_codes(lab, n) for lab, n in zip(subjects, sizes, strict=True)]
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
    """Return the checked counts and level shared by :func:`nnaa` and its distance route."""
    return (
        check_integer(n_bootstrap, "n_bootstrap", minimum=0),
        check_integer(n_permutations, "n_permutations", minimum=0),
        check_integer(max_samples, "max_samples", minimum=2),
        check_in_range(confidence_level, "confidence_level", 0.0, 1.0),
    )


#: The distance blocks of :func:`_nnaa_core` and the sets (train 0, held-out 1, synthetic 2)
#: of their rows and columns; ``"th"`` last, only read by the relabellings.
_BLOCKS = {"tt": (0, 0), "hh": (1, 1), "ss": (2, 2), "ts": (0, 2), "hs": (1, 2), "th": (0, 1)}


def _capped_nnaa(
    block: Callable[[list[npt.NDArray[np.intp]], int, int, torch.device], torch.Tensor],
    sizes: tuple[int, int, int],
    subjects: Any,
    strata: Any,
    checked: tuple[int, int, int, float],
    rng: RngLike,
    device: str | torch.device,
) -> NNAAResult:
    """Check subjects and strata, apply the ``max_samples`` cap, then run :func:`_nnaa_core`.

    ``block(keep, i, j, device)`` returns the distances between the kept rows of set ``i``
    and those of set ``j``; ``checked`` is what :func:`_check_common` returned.
    """
    n_bootstrap, n_permutations, max_samples, confidence_level = checked
    _check_sizes(*sizes)
    labels = check_set_subjects(subjects, sizes)
    strata_codes = _strata(strata, sizes[:2])
    gen = check_random_state(rng)
    keep, cap_unit = cap_indices(labels, sizes, max_samples, gen)
    capped = any(k.size < n for k, n in zip(keep, sizes, strict=True))
    dev = resolve_device(device)
    blocks = {
        name: block(keep, i, j, dev)
        for name, (i, j) in _BLOCKS.items()
        if name != "th" or n_permutations  # only the relabellings read train x held-out
    }
    return _nnaa_core(
        blocks, n_bootstrap, n_permutations, confidence_level, gen,
        _codes(labels, keep), _kept_layers(strata_codes, keep), cap=(cap_unit, capped),
    )  # fmt: skip


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
    checked = _check_common(n_bootstrap, n_permutations, max_samples, confidence_level)
    t = check_vectors(train, "train")
    h = check_vectors(heldout, "heldout")
    s = check_vectors(synthetic, "synthetic")
    same_dim({"train": t, "heldout": h, "synthetic": s})
    sets = (t, h, s)

    def block(keep: list[npt.NDArray[np.intp]], i: int, j: int, dev: torch.device) -> torch.Tensor:
        a, b = sets[i][keep[i]], None if i == j else sets[j][keep[j]]  # a set with itself: None
        return torch.from_numpy(pairwise_distances(a, b, metric=metric, device=dev)).to(dev)

    return _capped_nnaa(block, (len(t), len(h), len(s)), subjects, strata, checked, rng, device)


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
    checked = _check_common(n_bootstrap, n_permutations, max_samples, confidence_level)
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
    offsets = (0, n_t, n_t + n_h)

    def block(keep: list[npt.NDArray[np.intp]], i: int, j: int, dev: torch.device) -> torch.Tensor:
        rows, cols = offsets[i] + keep[i], offsets[j] + keep[j]
        return torch.from_numpy(np.ascontiguousarray(d[np.ix_(rows, cols)])).to(dev)

    return _capped_nnaa(block, (n_t, n_h, n_s), subjects, strata, checked, rng, device)
