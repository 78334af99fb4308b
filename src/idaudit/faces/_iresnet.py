"""The IR ("improved residual") face backbone used by AdaFace, written to match its checkpoints.

Module and attribute names mirror the published AdaFace state dicts
(``input_layer.0.weight``, ``body.<i>.res_layer.<j>.*``, ``body.<i>.shortcut_layer.*``,
``output_layer.<j>.*``), so a checkpoint's ``model.``-prefixed entries load one to one.

Architecture (Kim et al. 2022, after Deng et al. 2019):

* stem: 3×3 conv (64) → BN → PReLU at full 112×112 resolution;
* four stages of pre-activation basic blocks, widths 64/128/256/512, the first block of every
  stage downsampling by 2 (112 → 56 → 28 → 14 → 7). Each block computes
  ``BN → conv3×3 → BN → PReLU → conv3×3(stride) → BN`` and adds a shortcut: identity
  (``MaxPool2d(1, stride)``, i.e. subsampling) when the width is unchanged, else a strided 1×1
  conv + BN;
* head: BN → dropout → flatten → linear (512·7·7 → 512) → BN without affine parameters.

The network returns the L2-normalised embedding and its norm; AdaFace uses the norm as an image
quality proxy.
"""

from __future__ import annotations

import torch
from torch import nn

__all__ = ["IResNet", "ir50"]

#: Blocks per stage by depth, as in the AdaFace and InsightFace IR families.
_UNITS: dict[int, tuple[int, int, int, int]] = {
    18: (2, 2, 2, 2),
    34: (3, 4, 6, 3),
    50: (3, 4, 14, 3),
    100: (3, 13, 30, 3),
}
_WIDTHS = (64, 128, 256, 512)


class _BasicBlockIR(nn.Module):
    """Pre-activation residual block; see the module docstring."""

    def __init__(self, in_channels: int, out_channels: int, stride: int) -> None:
        super().__init__()
        self.shortcut_layer: nn.Module
        if in_channels == out_channels:
            # A 1x1 max-pool with a stride is plain subsampling; it has no parameters.
            self.shortcut_layer = nn.MaxPool2d(1, stride)
        else:
            self.shortcut_layer = nn.Sequential(
                nn.Conv2d(in_channels, out_channels, 1, stride, bias=False),
                nn.BatchNorm2d(out_channels),
            )
        self.res_layer = nn.Sequential(
            nn.BatchNorm2d(in_channels),
            nn.Conv2d(in_channels, out_channels, 3, 1, 1, bias=False),
            nn.BatchNorm2d(out_channels),
            nn.PReLU(out_channels),
            nn.Conv2d(out_channels, out_channels, 3, stride, 1, bias=False),
            nn.BatchNorm2d(out_channels),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out: torch.Tensor = self.res_layer(x) + self.shortcut_layer(x)
        return out


class IResNet(nn.Module):
    """IR backbone for 112×112 face crops.

    Parameters
    ----------
    depth : {18, 34, 50, 100}, default 50
        Number of layers (blocks per stage from :data:`_UNITS`).
    embedding_dim : int, default 512
        Output dimension.

    Notes
    -----
    ``forward(x)`` takes ``(n, 3, 112, 112)`` float input already normalised by the caller and
    returns ``(embedding / ||embedding||, ||embedding||)`` with shapes ``(n, d)`` and ``(n, 1)``.

    References
    ----------
    .. [1] M. Kim, A. K. Jain, X. Liu, "AdaFace: Quality adaptive margin for face recognition",
       CVPR 2022.
    .. [2] J. Deng, J. Guo, N. Xue, S. Zafeiriou, "ArcFace: Additive angular margin loss for deep
       face recognition", CVPR 2019.

    Examples
    --------
    >>> from idaudit.faces._iresnet import IResNet
    >>> import torch
    >>> net = IResNet(depth=18).eval()
    >>> emb, norm = net(torch.zeros(2, 3, 112, 112))
    >>> tuple(emb.shape), tuple(norm.shape)
    ((2, 512), (2, 1))
    """

    def __init__(self, depth: int = 50, embedding_dim: int = 512) -> None:
        super().__init__()
        if depth not in _UNITS:
            raise ValueError(f"`depth` must be one of {sorted(_UNITS)}; got {depth!r}.")
        self.input_layer = nn.Sequential(
            nn.Conv2d(3, 64, 3, 1, 1, bias=False), nn.BatchNorm2d(64), nn.PReLU(64)
        )
        blocks: list[nn.Module] = []
        in_channels = 64
        for n_units, width in zip(_UNITS[depth], _WIDTHS, strict=True):
            for i in range(n_units):
                blocks.append(_BasicBlockIR(in_channels, width, 2 if i == 0 else 1))
                in_channels = width
        self.body = nn.Sequential(*blocks)
        side = 112 // 2 ** len(_WIDTHS)  # four stride-2 stages: 112 -> 7
        self.output_layer = nn.Sequential(
            nn.BatchNorm2d(in_channels),
            nn.Dropout(0.4),
            nn.Flatten(),
            nn.Linear(in_channels * side * side, embedding_dim),
            nn.BatchNorm1d(embedding_dim, affine=False),
        )

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        x = self.input_layer(x)  # (n, 64, 112, 112)
        x = self.body(x)  # (n, 512, 7, 7)
        emb = self.output_layer(x)  # (n, d)
        norm = torch.linalg.vector_norm(emb, dim=1, keepdim=True)  # (n, 1)
        return emb / norm.clamp_min(1e-12), norm


def ir50(embedding_dim: int = 512) -> IResNet:
    """Return an untrained IR-50 (the AdaFace ``ir_50`` architecture)."""
    return IResNet(50, embedding_dim)
