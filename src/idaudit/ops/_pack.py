"""Many identity pairs as one padded tensor (the batching layout every kernel shares)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import torch

__all__ = ["PairBatch", "pack_pairs"]


@dataclass(frozen=True)
class PairBatch:
    """Several identity pairs stacked into one zero-padded float64 tensor.

    Pair ``p`` occupies rows ``0 .. n_a[p]-1`` (identity A) and ``n_a[p] .. n_a[p]+n_b[p]-1``
    (identity B) of ``x[p]``; the remaining rows are zeros and are excluded by the masks.
    Padding (rather than grouping pairs of equal size) lets one kernel call cover pairs whose
    sizes all differ, as they do in real data (90–100 rows per identity in seed 000); every
    kernel multiplies by the masks, so padded rows contribute exact zeros.

    Attributes
    ----------
    x : torch.Tensor of float64, shape (pairs, n_max, d)
        Pooled rows of each pair, A then B then zero padding.
    n_a, n_b : tuple of int, length pairs
        Rows of identity A and B in each pair.
    """

    x: torch.Tensor
    n_a: tuple[int, ...]
    n_b: tuple[int, ...]

    @property
    def n_pairs(self) -> int:
        """Number of pairs."""
        return len(self.n_a)

    @property
    def n_max(self) -> int:
        """Padded number of rows per pair."""
        return int(self.x.shape[1])

    @property
    def dim(self) -> int:
        """Embedding dimension."""
        return int(self.x.shape[2])

    @property
    def device(self) -> torch.device:
        """Device holding the tensors."""
        return self.x.device

    def counts(self) -> tuple[torch.Tensor, torch.Tensor]:
        """``(n_a, n_b)`` as float64 tensors of shape (pairs,) on the batch's device."""
        kw = {"dtype": torch.float64, "device": self.device}
        return torch.tensor(self.n_a, **kw), torch.tensor(self.n_b, **kw)  # type: ignore[arg-type]

    def masks(self) -> tuple[torch.Tensor, torch.Tensor]:
        """Float64 0/1 membership masks ``(mask_a, mask_b)``, each of shape (pairs, n_max)."""
        rows = torch.arange(self.n_max, device=self.device)  # (n_max,)
        n_a = torch.tensor(self.n_a, device=self.device)[:, None]  # (pairs, 1)
        n_ab = n_a + torch.tensor(self.n_b, device=self.device)[:, None]  # (pairs, 1)
        mask_a = (rows < n_a).to(torch.float64)  # (pairs, n_max)
        mask_b = ((rows >= n_a) & (rows < n_ab)).to(torch.float64)  # (pairs, n_max)
        return mask_a, mask_b

    def side(self, which: str) -> tuple[torch.Tensor, torch.Tensor]:
        """One identity of every pair, left-aligned and padded.

        Parameters
        ----------
        which : {"a", "b"}
            The identity.

        Returns
        -------
        rows : torch.Tensor of float64, shape (pairs, n_side_max, d)
            The identity's rows, zero-padded.
        mask : torch.Tensor of float64, shape (pairs, n_side_max)
            1 for real rows, 0 for padding.
        """
        sizes = self.n_a if which == "a" else self.n_b
        offsets = [0] * self.n_pairs if which == "a" else list(self.n_a)
        width = max(sizes)
        idx = torch.arange(width, device=self.device)  # (width,)
        start = torch.tensor(offsets, device=self.device)[:, None]  # (pairs, 1)
        n = torch.tensor(sizes, device=self.device)[:, None]  # (pairs, 1)
        mask = idx < n  # (pairs, width)
        rows_idx = torch.where(mask, start + idx, 0)  # (pairs, width)
        gathered = torch.gather(
            self.x, 1, rows_idx[:, :, None].expand(-1, -1, self.dim)
        )  # (pairs, width, d)
        maskf = mask.to(torch.float64)
        return gathered * maskf[:, :, None], maskf


def pack_pairs(
    samples: Sequence[tuple[npt.ArrayLike, npt.ArrayLike]],
    device: torch.device | str = "cpu",
) -> PairBatch:
    """Stack identity pairs into a :class:`PairBatch`.

    Parameters
    ----------
    samples : sequence of (array_like, array_like)
        ``(emb_a, emb_b)`` per pair, shapes ``(n_a, d)`` and ``(n_b, d)``; all pairs share
        ``d``. Inputs are assumed validated (finite, 2-D).
    device : torch.device or str, default "cpu"
        Where to put the tensor.

    Returns
    -------
    PairBatch

    Examples
    --------
    >>> import numpy as np
    >>> from idaudit.ops import pack_pairs
    >>> batch = pack_pairs([(np.ones((2, 3)), np.zeros((3, 3))),
    ...                     (np.ones((4, 3)), np.ones((2, 3)))])
    >>> tuple(batch.x.shape), batch.n_a, batch.n_b
    ((2, 6, 3), (2, 4), (3, 2))
    """
    if len(samples) == 0:
        raise ValueError("`samples` must hold at least one pair; got none.")
    arrays = [
        (np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)) for a, b in samples
    ]
    dim = arrays[0][0].shape[1]
    n_a = tuple(int(a.shape[0]) for a, _ in arrays)
    n_b = tuple(int(b.shape[0]) for _, b in arrays)
    n_max = max(x + y for x, y in zip(n_a, n_b, strict=True))
    host = np.zeros((len(arrays), n_max, dim), dtype=np.float64)  # (pairs, n_max, d)
    for p, (a, b) in enumerate(arrays):
        host[p, : a.shape[0]] = a
        host[p, a.shape[0] : a.shape[0] + b.shape[0]] = b
    x = torch.from_numpy(host).to(device)
    return PairBatch(x=x, n_a=n_a, n_b=n_b)
