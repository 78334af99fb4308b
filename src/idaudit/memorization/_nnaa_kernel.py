"""NNAA's batched kernels: masked nearest-neighbour minima, split-half draws, relabellings."""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt
import torch

from idaudit.exceptions import InvalidInputError
from idaudit.memorization._subjects import unit_codes

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

#: Unit (subject code ``0..g-1``) of each image of train, held-out and synthetic; ``None`` for
#: a set whose images are each their own unit.
_Units = tuple[
    npt.NDArray[np.int64] | None, npt.NDArray[np.int64] | None, npt.NDArray[np.int64] | None
]


def _n_units(units: npt.NDArray[np.int64] | None, n: int) -> int:
    """Return the number of units of a set of ``n`` images."""
    return n if units is None else int(units.max()) + 1


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
