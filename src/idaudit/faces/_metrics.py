"""Appearance distances between whole images: LPIPS (AlexNet, local backbone) and SSIM.

Identity encoders say whether two faces are the same person; these metrics say whether two
*pictures* look alike (lighting, framing, background, colour). Both share one API:

* ``name`` — recorded with every result, so a number always says which metric made it: every
  setting that changes the values is in it (``"lpips-alex-v0.1"``, ``"lpips-alex-v0.1-128px"``,
  ``"ssim-gaussian1.5"``, ``"ssim-uniform7"``, ``"ssim-uniform7-samplecov"``);
* ``distance(a, b)`` — one distance per row pair, ``(n,)``;
* ``pairwise(a, b=None)`` — all pairs, ``(n_a, n_b)`` (one triangle when ``b`` is omitted);
* ``pair_distances(images, index_a, index_b)`` — a list of pairs of one image list,
  ``(n_pairs,)``: what the privacy check's cache asks for, its missing pairs only, each image's
  own statistics (SSIM) or network features (LPIPS) computed once however many pairs it is in.

Images are RGB: one ``(H, W, 3)`` array, a stacked ``(n, H, W, 3)`` array, or a sequence of
arrays (LPIPS resizes each to 256 px, so sizes may differ; SSIM needs equal sizes within a
pair). Grey, RGBA, uint16 and [0, 1] float images are converted to uint8 RGB first, by the same
rules as everywhere in :mod:`idaudit.faces`.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

from idaudit._device import resolve_device
from idaudit._validation import check_integer
from idaudit.exceptions import InvalidInputError
from idaudit.faces._io import to_rgb_uint8
from idaudit.faces._types import device_name
from idaudit.faces._weights import resolve_weights

if TYPE_CHECKING:  # pragma: no cover
    import torch

__all__ = ["AppearanceDistance", "LPIPSDistance", "SSIMDistance"]


@runtime_checkable
class AppearanceDistance(Protocol):
    """A distance between images (not identities); 0 means identical."""

    name: str

    def distance(self, a: Any, b: Any) -> npt.NDArray[np.float64]:
        """Distance between ``a[i]`` and ``b[i]`` for every ``i``: ``(n,)``."""
        ...

    def pairwise(self, a: Any, b: Any = None, *, progress: bool = True) -> npt.NDArray[np.float64]:
        """Distance between every ``a[i]`` and every ``b[j]``: ``(n_a, n_b)``."""
        ...


def _as_images(images: Any, name: str) -> list[npt.NDArray[np.uint8]]:
    """Normalise the accepted image containers to a list of ``(H, W, 3)`` uint8 RGB arrays.

    A 4-D array is a stack of images; any other array is one image. Each image goes through
    :func:`~idaudit.faces._io.to_rgb_uint8` (grey, RGBA, uint16 and [0, 1] floats converted).
    """
    if isinstance(images, np.ndarray):
        items = list(images) if images.ndim == 4 else [images]
    elif isinstance(images, Sequence) and not isinstance(images, str | bytes):
        items = list(images)
    else:
        raise TypeError(
            f"`{name}` must be a numpy.ndarray or a sequence of arrays; "
            f"got {type(images).__name__}."
        )
    return [to_rgb_uint8(img, f"{name}[{i}]") for i, img in enumerate(items)]


def _same_count(a: list[Any], b: list[Any]) -> None:
    if len(a) != len(b):
        raise InvalidInputError(
            f"`a` and `b` must hold the same number of images; got {len(a)} vs {len(b)}."
        )


def _pair_indices(
    index_a: Any, index_b: Any, n: int
) -> tuple[npt.NDArray[np.intp], npt.NDArray[np.intp]]:
    """Check two equally long integer index arrays into ``n`` images."""
    out = []
    for value, label in ((index_a, "index_a"), (index_b, "index_b")):
        arr = np.asarray(value)
        if arr.ndim != 1 or (arr.size and not np.issubdtype(arr.dtype, np.integer)):
            raise InvalidInputError(f"`{label}` must be a 1-D array of integers; got {arr!r}.")
        if arr.size and (arr.min() < 0 or arr.max() >= n):
            raise InvalidInputError(
                f"`{label}` must index the {n} images (0 to {n - 1}); got values from "
                f"{arr.min()} to {arr.max()}."
            )
        out.append(arr.astype(np.intp))
    if out[0].size != out[1].size:
        raise InvalidInputError(
            f"`index_a` and `index_b` must have the same length; got {out[0].size} vs "
            f"{out[1].size}."
        )
    return out[0], out[1]


def _progress(total: int, enabled: bool, desc: str) -> Any:
    from tqdm.auto import tqdm

    return tqdm(total=total, disable=not enabled, desc=desc, leave=False)


# --------------------------------------------------------------------------- LPIPS


#: Indices in torchvision's ``alexnet().features`` whose (ReLU) outputs LPIPS compares.
_ALEX_TAPS = (1, 4, 7, 9, 11)
#: LPIPS v0.1 input scaling: ImageNet statistics expressed on the [-1, 1] scale.
_LPIPS_SHIFT = (-0.030, -0.088, -0.188)
_LPIPS_SCALE = (0.458, 0.448, 0.450)
#: Upper bound on the float64 temporary of one Gram-matrix chunk in ``pairwise``.
_GRAM_CHUNK_BYTES = 1 << 27


def _build_lpips_net(backbone: Path, heads: Path) -> _LPIPSNet:
    """AlexNet features (from ``backbone``) plus the LPIPS linear heads (from ``heads``)."""
    import torch
    from torchvision.models import alexnet

    from idaudit.faces._checkpoints import load_checkpoint, load_exact

    with torch.device("meta"):  # no random init: every tensor comes from the files
        features = alexnet(weights=None).features[: _ALEX_TAPS[-1] + 1]
    raw = load_checkpoint(backbone)
    if not isinstance(raw, Mapping):
        raise InvalidInputError(f"{backbone} does not hold a state dict.")
    # LPIPS uses the convolutional trunk only; the classifier entries are not needed.
    state = {k[len("features.") :]: v for k, v in raw.items() if k.startswith("features.")}
    load_exact(features, state, backbone, assign=True, prefix="features.", what="AlexNet features")
    for layer in features:
        if isinstance(layer, torch.nn.ReLU):
            layer.inplace = False  # tapped activations must stay intact for autograd
    head_state = load_checkpoint(heads)
    if not isinstance(head_state, Mapping):
        raise InvalidInputError(f"{heads} does not hold a state dict.")
    weights = []
    for k in range(len(_ALEX_TAPS)):
        w = head_state.get(f"lin{k}.model.1.weight")
        if w is None:
            raise InvalidInputError(f"{heads} has no entry 'lin{k}.model.1.weight'.")
        weights.append(w.reshape(-1).float())  # (C_k,)
    return _LPIPSNet(features, weights)


class _LPIPSNet:
    """LPIPS v0.1 on AlexNet, split into per-image features and their comparison."""

    def __init__(self, features: torch.nn.Sequential, weights: list[torch.Tensor]) -> None:
        import torch

        self.features = features.eval().requires_grad_(False)
        self.weights = weights
        self.shift = torch.tensor(_LPIPS_SHIFT).view(1, 3, 1, 1)
        self.scale = torch.tensor(_LPIPS_SCALE).view(1, 3, 1, 1)

    def to(self, device: torch.device) -> _LPIPSNet:
        self.features = self.features.to(device)
        self.weights = [w.to(device) for w in self.weights]
        self.shift, self.scale = self.shift.to(device), self.scale.to(device)
        return self

    def taps(self, x: torch.Tensor) -> list[torch.Tensor]:
        """Unit-normalised activations ``(n, C_k, h_k, w_k)`` for ``x`` in [-1, 1]."""
        x = (x - self.shift) / self.scale  # (n, 3, H, W)
        out = []
        for i, layer in enumerate(self.features):
            x = layer(x)
            if i in _ALEX_TAPS:
                norm = x.pow(2).sum(dim=1, keepdim=True).sqrt()  # (n, 1, h, w)
                out.append(x / (norm + 1e-10))  # eps as in the reference implementation
        return out

    def compare(self, fa: list[torch.Tensor], fb: list[torch.Tensor]) -> torch.Tensor:
        """Row-wise LPIPS ``(n,)`` between two lists of tap features."""
        total = fa[0].new_zeros(fa[0].shape[0])
        for a, b, w in zip(fa, fb, self.weights, strict=True):
            diff = (a - b).pow(2)  # (n, C, h, w)
            total = total + (diff * w.view(1, -1, 1, 1)).sum(dim=1).mean(dim=(1, 2))
        return total


class LPIPSDistance:
    r"""LPIPS perceptual distance (v0.1, AlexNet, 256 px) from local weight files.

    Parameters
    ----------
    backbone_weights : str or os.PathLike, optional
        torchvision's ``alexnet-owt-7be5be79.pth`` or its folder. Default:
        ``$IDAUDIT_WEIGHTS/torchvision_alexnet/alexnet-owt-7be5be79.pth``.
    device : str, default "cpu"
        ``"cpu"`` or ``"cuda[:i]"``; CUDA must be available when asked for. Stored as
        ``"cpu"`` or ``"cuda:<index>"``.
    size : int, default 256
        Both images are resized (bilinear, antialiased) to ``size × size`` before comparison.
        LPIPS was calibrated at 256; another size is another metric, and :attr:`name` says
        so (``"lpips-alex-v0.1-128px"``).
    batch_size : int, default 16
        Images per AlexNet pass.
    verify : bool, default True
        Check the backbone's SHA-256 prefix published in its file name.

    Notes
    -----
    With unit-normalised AlexNet activations :math:`\hat f^k` at the five ReLU taps and the
    non-negative linear heads :math:`w^k` shipped with the ``lpips`` package,

    .. math:: d(x, y) = \sum_k \frac{1}{H_k W_k} \sum_{h,w}
              \sum_c w^k_c \big(\hat f^k_{chw}(x) - \hat f^k_{chw}(y)\big)^2 ,

    on inputs scaled to [-1, 1] and then by LPIPS's fixed shift/scale. Seed 003 uses this
    metric as its appearance axis. :meth:`pairwise` expands the square,
    :math:`\sum w (a - b)^2 = \sum w a^2 + \sum w b^2 - 2 \sum w a b`, so all ``n_a × n_b``
    distances cost two feature passes and one matrix product instead of ``n_a n_b`` network
    runs. The products are accumulated in float64, so it agrees with :meth:`distance` to about
    1e-8. It keeps the features of ``b`` in memory (float32, about 2.6 MB per image at 256 px).

    Nothing is downloaded: the heads are read from the installed ``lpips`` package and the
    backbone from a local file, both with ``torch.load(weights_only=True)``.

    References
    ----------
    .. [1] R. Zhang, P. Isola, A. A. Efros, E. Shechtman, O. Wang, "The unreasonable
       effectiveness of deep features as a perceptual metric", CVPR 2018.

    Examples
    --------
    >>> lp = LPIPSDistance("~/weights/torchvision_alexnet")  # doctest: +SKIP
    >>> lp.distance(images_a, images_b)  # (n,)  # doctest: +SKIP
    """

    def __init__(
        self,
        backbone_weights: str | os.PathLike[str] | None = None,
        *,
        device: str = "cpu",
        size: int = 256,
        batch_size: int = 16,
        verify: bool = True,
    ) -> None:
        self._device = resolve_device(device)
        self.device = device_name(self._device)
        self.size = check_integer(size, "size", minimum=32)
        self.batch_size = check_integer(batch_size, "batch_size", minimum=1)
        self.backbone_path = resolve_weights(
            "torchvision_alexnet",
            None,
            backbone_weights,
            verify=verify,
            argument="backbone_weights",
        )
        self.heads_path = resolve_weights("lpips_alex", None, verify=verify)
        self._net = _build_lpips_net(self.backbone_path, self.heads_path).to(self._device)

    @property
    def name(self) -> str:
        """Metric name recorded with results: ``"lpips-alex-v0.1"``, plus ``-<size>px`` off 256."""
        base = "lpips-alex-v0.1"
        return base if self.size == 256 else f"{base}-{self.size}px"

    def _to_input(self, x: torch.Tensor) -> torch.Tensor:
        """``(n, 3, H, W)`` in [0, 1] → resized ``(n, 3, size, size)`` in [-1, 1]."""
        import torch.nn.functional as F

        if tuple(x.shape[2:]) != (self.size, self.size):
            x = F.interpolate(
                x, size=(self.size, self.size), mode="bilinear", align_corners=False, antialias=True
            )
        return x * 2.0 - 1.0

    def _taps(self, images: list[npt.NDArray[np.uint8]]) -> list[torch.Tensor]:
        """Features of a batch of uint8 images (each resized separately)."""
        import torch

        batch = torch.cat(
            [
                self._to_input(
                    torch.from_numpy(np.ascontiguousarray(img))
                    .to(self._device)
                    .permute(2, 0, 1)[None]
                    .float()
                    / 255.0
                )
                for img in images
            ]
        )  # (b, 3, size, size)
        return self._net.taps(batch)

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """Differentiable row-wise LPIPS between image tensors.

        Parameters
        ----------
        x, y : torch.Tensor, shape (n, 3, H, W)
            RGB in [0, 1]; resized to ``size`` inside the graph.

        Returns
        -------
        torch.Tensor, shape (n,)
        """
        import torch

        for t, label in ((x, "x"), (y, "y")):
            if not isinstance(t, torch.Tensor):
                raise TypeError(f"`{label}` must be a torch.Tensor; got {type(t).__name__}.")
            if t.ndim != 4 or t.shape[1] != 3:
                raise InvalidInputError(f"`{label}` must be (n, 3, H, W); got {tuple(t.shape)}.")
        if x.shape[0] != y.shape[0]:
            raise InvalidInputError(
                f"`x` and `y` must hold the same number of images; got {x.shape[0]} vs "
                f"{y.shape[0]}."
            )
        fx = self._net.taps(self._to_input(x.to(self._device, torch.float32)))
        fy = self._net.taps(self._to_input(y.to(self._device, torch.float32)))
        return self._net.compare(fx, fy)

    def distance(self, a: Any, b: Any) -> npt.NDArray[np.float64]:
        """LPIPS between ``a[i]`` and ``b[i]``.

        Parameters
        ----------
        a, b : image(s)
            ``(H, W, 3)``, ``(n, H, W, 3)`` or a sequence of ``(H, W, 3)`` RGB arrays, with the
            same count.

        Returns
        -------
        numpy.ndarray of float64, shape (n,)
        """
        import torch

        ia, ib = _as_images(a, "a"), _as_images(b, "b")
        _same_count(ia, ib)
        out = np.zeros(len(ia))
        with torch.inference_mode():
            for start in range(0, len(ia), self.batch_size):
                stop = start + self.batch_size
                d = self._net.compare(self._taps(ia[start:stop]), self._taps(ib[start:stop]))
                out[start:stop] = d.double().cpu().numpy()
        return out

    def pairwise(self, a: Any, b: Any = None, *, progress: bool = True) -> npt.NDArray[np.float64]:
        """LPIPS between every image of ``a`` and every image of ``b``.

        Parameters
        ----------
        a : image(s)
            ``n_a`` RGB images.
        b : image(s), optional
            ``n_b`` RGB images; ``a`` itself when omitted.
        progress : bool, default True
            Show a progress bar over batches of ``a``.

        Returns
        -------
        numpy.ndarray of float64, shape (n_a, n_b)
            Non-negative (rounding below zero is clipped); symmetric with a zero diagonal when
            ``b`` is omitted.
        """
        import torch

        ia = _as_images(a, "a")
        symmetric = b is None
        ib = ia if symmetric else _as_images(b, "b")
        out = np.zeros((len(ia), len(ib)))
        with torch.inference_mode():
            feats_b = self._flat_taps(ib)  # per layer (n_b, C, h*w), float32
            # sum_c w_c mean_hw f^2 per image, summed over layers: the squared terms.
            self_b = self._self_terms(feats_b)  # (n_b,) float64
            bar = _progress(len(ia), progress, "LPIPS pairs")
            for start in range(0, len(ia), self.batch_size):
                stop = min(start + self.batch_size, len(ia))
                if symmetric:
                    feats_a = [f[start:stop] for f in feats_b]
                else:
                    feats_a = self._flat_taps(ia[start:stop])
                block = self._block(feats_a, feats_b, self_b)  # (n, n_b)
                out[start:stop] = block.clamp_min(0.0).cpu().numpy()
                bar.update(stop - start)
            bar.close()
        if symmetric:  # exact zeros for an image against itself, exact symmetry
            out = (out + out.T) / 2.0
            np.fill_diagonal(out, 0.0)
        return out

    def pair_distances(
        self,
        images: Any,
        index_a: Any,
        index_b: Any,
        *,
        progress: bool = False,
    ) -> npt.NDArray[np.float64]:
        """LPIPS between ``images[index_a[k]]`` and ``images[index_b[k]]`` for every ``k``.

        Each image goes through the network once, whatever the number of pairs it is in;
        the pairs are then evaluated ``batch_size`` distinct first images at a time, by the
        expanded square of :meth:`pairwise` against the second images they are paired with.

        Parameters
        ----------
        images : image(s)
            ``(n, H, W, 3)`` or a sequence of RGB arrays.
        index_a, index_b : array-like of int, shape (n_pairs,)
            Positions in ``images``.
        progress : bool, default False
            Show a progress bar over the distinct first images.

        Returns
        -------
        numpy.ndarray of float64, shape (n_pairs,)
            Non-negative (rounding below zero is clipped).
        """
        import torch

        items = _as_images(images, "images")
        ia, ib = _pair_indices(index_a, index_b, len(items))
        out = np.zeros(ia.size)
        if not ia.size:
            return out
        used, inverse = np.unique(np.concatenate([ia, ib]), return_inverse=True)
        ra, rb = inverse[: ia.size], inverse[ia.size :]
        firsts = np.unique(ra)
        bar = _progress(firsts.size, progress, "LPIPS pairs")
        with torch.inference_mode():
            feats = self._flat_taps([items[k] for k in used])  # per layer (m, C, h*w)
            selfs = self._self_terms(feats)  # (m,) float64
            for start in range(0, firsts.size, self.batch_size):
                rows = firsts[start : start + self.batch_size]
                which = np.flatnonzero(np.isin(ra, rows))
                cols = np.unique(rb[which])
                pick_r = torch.from_numpy(rows).to(self._device)
                pick_c = torch.from_numpy(cols).to(self._device)
                block = self._block(
                    [f[pick_r] for f in feats], [f[pick_c] for f in feats], selfs[pick_c]
                )  # (len(rows), len(cols))
                r = torch.from_numpy(np.searchsorted(rows, ra[which])).to(self._device)
                c = torch.from_numpy(np.searchsorted(cols, rb[which])).to(self._device)
                out[which] = block[r, c].clamp_min(0.0).cpu().numpy()
                bar.update(rows.size)
        bar.close()
        return out

    def _block(
        self, feats_a: list[torch.Tensor], feats_b: list[torch.Tensor], self_b: torch.Tensor
    ) -> torch.Tensor:
        """LPIPS between every ``a`` and every ``b`` from their taps, float64 ``(n_a, n_b)``.

        The expanded square ``sum w a^2 + sum w b^2 - 2 sum w a b`` (unclipped).
        """
        block = self._self_terms(feats_a)[:, None] + self_b[None, :]  # (n_a, n_b)
        n_b = self_b.shape[0]
        for fa, fb, w in zip(feats_a, feats_b, self._net.weights, strict=True):
            hw = fa.shape[2]
            weighted = (fa * w.view(1, -1, 1)).flatten(1).double()  # (n_a, C*h*w)
            # float64 products over b in chunks of bounded size: the cross term
            # cancels most of the squared terms, so float32 sums would lose ~1e-5.
            rows = max(1, _GRAM_CHUNK_BYTES // (8 * weighted.shape[1]))
            for j in range(0, n_b, rows):
                chunk = fb[j : j + rows].flatten(1).double()  # (r, C*h*w)
                block[:, j : j + rows] -= 2.0 * (weighted @ chunk.T) / hw
        return block

    def _self_terms(self, feats: list[torch.Tensor]) -> torch.Tensor:
        """``sum_k sum_c w_c mean_hw f^2`` per image, float64 ``(n,)``."""
        import torch

        total = torch.zeros(feats[0].shape[0], dtype=torch.float64, device=self._device)
        for f, w in zip(feats, self._net.weights, strict=True):
            total += (f.double().pow(2) * w.double().view(1, -1, 1)).sum(dim=(1, 2)) / f.shape[2]
        return total

    def _flat_taps(self, images: list[npt.NDArray[np.uint8]]) -> list[torch.Tensor]:
        """Tap features of all ``images``, per layer ``(n, C_k, h_k w_k)``, in batches."""
        import torch

        chunks: list[list[torch.Tensor]] = [[] for _ in self._net.weights]
        for start in range(0, len(images), self.batch_size):
            for k, f in enumerate(self._taps(images[start : start + self.batch_size])):
                chunks[k].append(f.flatten(2))
        if not images:
            return [torch.zeros(0, w.numel(), 1, device=self._device) for w in self._net.weights]
        return [torch.cat(c) for c in chunks]

    def __repr__(self) -> str:
        return f"LPIPSDistance(name={self.name!r}, device={self.device!r})"


# --------------------------------------------------------------------------- SSIM


class SSIMDistance:
    r"""Structural dissimilarity ``1 - SSIM`` of RGB images, many pairs per batched torch call.

    Parameters
    ----------
    gaussian_weights : bool, default True
        Gaussian-weighted local statistics (Wang et al.'s setting) rather than a uniform
        window.
    sigma : float, default 1.5
        Gaussian width in pixels (used when ``gaussian_weights``; the window is then
        ``2 ⌊3.5 σ + 0.5⌋ + 1`` pixels wide, 11×11 at 1.5, as scikit-image sizes it).
    win_size : int, optional
        Side of the uniform window (odd, default 7). Only with ``gaussian_weights=False``:
        with Gaussian weights the window follows ``sigma``, and passing both raises (a
        ``win_size`` would silently change the border that scikit-image crops).
    use_sample_covariance : bool, default False
        Normalise local covariances by ``N - 1`` instead of ``N``; ``False`` is Wang et al.'s
        definition.
    device : str, default "cpu"
        Where the batched computation runs (``"cpu"``, ``"cuda"``); no silent fallback.
    batch_size : int, default 64
        Image pairs per batched step, all sharing their first image (float64 temporaries of
        about ``3 H W × 8`` bytes per pair).

    Attributes
    ----------
    name : str
        Every setting that changes the values: ``"ssim-gaussian<σ>"`` or
        ``"ssim-uniform<w>"``, with ``"-samplecov"`` appended for sample covariances.

    Notes
    -----
    The value is :func:`skimage.metrics.structural_similarity` with ``data_range=255``,
    ``channel_axis=-1`` and the settings above: over local windows, averaged over the image
    and the three channels,

    .. math:: \mathrm{SSIM}(x, y) = \frac{(2\mu_x\mu_y + C_1)(2\sigma_{xy} + C_2)}
              {(\mu_x^2 + \mu_y^2 + C_1)(\sigma_x^2 + \sigma_y^2 + C_2)},
       \quad C_1 = (0.01 L)^2,\ C_2 = (0.03 L)^2,

    with ``data_range`` :math:`L = 255` (uint8 input). The distance is ``1 - SSIM``: 0 for
    identical images, up to 2. Both images of a pair must have the same size and be at least as
    large as the window.

    It is computed in float64 with torch, not by calling scikit-image per pair: the local
    filters are separable, so each is two matrix products with banded matrices holding the
    normalised 1-D window (:math:`G_v X G_h^\top`). Only the pixels whose window lies inside
    the image are kept (scikit-image filters with reflected borders and then crops exactly
    those), so no border rule is needed. :math:`\mu` and :math:`\sigma^2` are computed once
    per image; only the filtered product :math:`x y` is computed per pair. The values equal
    scikit-image's to float64 rounding (tested to 1e-12 relative).

    References
    ----------
    .. [1] Z. Wang, A. C. Bovik, H. R. Sheikh, E. P. Simoncelli, "Image quality assessment: From
       error visibility to structural similarity", IEEE TIP 13(4), 2004.

    Examples
    --------
    >>> from idaudit.faces import SSIMDistance
    >>> import numpy as np
    >>> img = np.random.default_rng(0).integers(0, 256, (2, 32, 32, 3), dtype=np.uint8)
    >>> SSIMDistance().distance(img, img)
    array([0., 0.])
    """

    def __init__(
        self,
        *,
        gaussian_weights: bool = True,
        sigma: float = 1.5,
        win_size: int | None = None,
        use_sample_covariance: bool = False,
        device: str = "cpu",
        batch_size: int = 64,
    ) -> None:
        if not float(sigma) > 0:
            raise InvalidInputError(f"`sigma` must be positive; got {sigma!r}.")
        if win_size is not None:
            if gaussian_weights:
                raise InvalidInputError(
                    "`win_size` sets the uniform window; with gaussian_weights=True the window "
                    "follows `sigma`. Pass win_size=None or gaussian_weights=False; got "
                    f"win_size={win_size!r}."
                )
            win_size = check_integer(win_size, "win_size", minimum=3)
            if win_size % 2 == 0:
                raise InvalidInputError(f"`win_size` must be odd; got {win_size!r}.")
        self.gaussian_weights = bool(gaussian_weights)
        self.sigma = float(sigma)
        self.win_size = win_size
        self.use_sample_covariance = bool(use_sample_covariance)
        self._device = resolve_device(device)
        self.device = device_name(self._device)
        self.batch_size = check_integer(batch_size, "batch_size", minimum=1)

    @property
    def name(self) -> str:
        """Metric name recorded with results, e.g. ``"ssim-gaussian1.5"``."""
        if self.gaussian_weights:
            base = f"ssim-gaussian{self.sigma:g}"
        else:
            base = f"ssim-uniform{self.win_size or 7}"
        return base + ("-samplecov" if self.use_sample_covariance else "")

    def _window(self) -> npt.NDArray[np.float64]:
        """Return the normalised 1-D window scikit-image filters with (``scipy.ndimage``'s)."""
        if self.gaussian_weights:
            radius = int(3.5 * self.sigma + 0.5)  # truncate = 3.5, as scikit-image sets it
            x = np.arange(-radius, radius + 1, dtype=np.float64)
            phi: npt.NDArray[np.float64] = np.exp(-0.5 / self.sigma**2 * x**2)
            return phi / float(phi.sum())
        size = self.win_size or 7
        return np.full(size, 1.0 / size)

    def _filters(self, height: int, width: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Banded ``(H', H)`` and ``(W', W)`` matrices: the window at every valid position."""
        import torch

        window = self._window()
        mats = []
        for n in (height, width):
            m = np.zeros((n - window.size + 1, n))
            for row in range(m.shape[0]):
                m[row, row : row + window.size] = window
            mats.append(torch.from_numpy(m).to(self._device))
        return mats[0], mats[1]

    def pair_distances(
        self,
        images: Any,
        index_a: Any,
        index_b: Any,
        *,
        progress: bool = False,
    ) -> npt.NDArray[np.float64]:
        """``1 - SSIM`` between ``images[index_a[k]]`` and ``images[index_b[k]]`` for every ``k``.

        Each image's local means and variances are computed once, whatever the number of
        pairs it is in; pairs run ``batch_size`` at a time.

        Parameters
        ----------
        images : image(s)
            ``(n, H, W, 3)`` or a sequence of RGB arrays (sizes may differ between pairs).
        index_a, index_b : array-like of int, shape (n_pairs,)
            Positions in ``images``.
        progress : bool, default False
            Show a progress bar over batches of pairs.

        Returns
        -------
        numpy.ndarray of float64, shape (n_pairs,)
        """
        items = _as_images(images, "images")
        ia, ib = _pair_indices(index_a, index_b, len(items))
        return self._pairs(items, ia, ib, progress, lambda a, b: f"images[{a}], images[{b}]")

    def _pairs(
        self,
        items: list[npt.NDArray[np.uint8]],
        ia: npt.NDArray[np.intp],
        ib: npt.NDArray[np.intp],
        progress: bool,
        where: Callable[[int, int], str],
    ) -> npt.NDArray[np.float64]:
        """Group the pairs by image size (checked: equal within a pair, window fits), then run."""
        side = self._window().size
        groups: dict[tuple[int, ...], list[int]] = {}
        for k, (a, b) in enumerate(zip(ia.tolist(), ib.tolist(), strict=True)):
            shape = items[a].shape
            if shape != items[b].shape:
                raise InvalidInputError(
                    f"SSIM needs images of equal size; {where(a, b)} are {shape} vs "
                    f"{items[b].shape}. Resize them first."
                )
            if min(shape[:2]) < side:
                raise InvalidInputError(
                    f"SSIM failed for {where(a, b)}: the images ({shape[0]}×{shape[1]}) are "
                    f"smaller than the {side}×{side} window."
                )
            groups.setdefault(shape, []).append(k)
        out = np.zeros(ia.size)
        for shape, which in groups.items():
            pick = np.asarray(which, dtype=np.intp)
            out[pick] = self._same_shape(items, shape, ia[pick], ib[pick], progress)
        return out

    def _same_shape(
        self,
        items: list[npt.NDArray[np.uint8]],
        shape: tuple[int, ...],
        ia: npt.NDArray[np.intp],
        ib: npt.NDArray[np.intp],
        progress: bool,
    ) -> npt.NDArray[np.float64]:
        """Distances of pairs of images that all have ``shape``."""
        import torch

        used, inverse = np.unique(np.concatenate([ia, ib]), return_inverse=True)
        ra, rb = inverse[: ia.size], inverse[ia.size :]
        gv, gh = self._filters(shape[0], shape[1])
        stack = np.stack([items[k] for k in used]).transpose(0, 3, 1, 2)  # (m, 3, H, W)
        x = torch.from_numpy(np.ascontiguousarray(stack)).to(self._device, torch.float64)
        side = self._window().size
        cov_norm = side**2 / (side**2 - 1) if self.use_sample_covariance else 1.0
        c1, c2 = (0.01 * 255.0) ** 2, (0.03 * 255.0) ** 2
        # pairs grouped by their first image, whose statistics then broadcast over a batch
        order = np.argsort(ra, kind="stable")
        cuts = np.flatnonzero(np.diff(ra[order])) + 1
        out = np.zeros(ia.size)
        bar = _progress(ia.size, progress, "SSIM pairs")
        with torch.inference_mode():
            steps = range(0, len(x), self.batch_size)
            mu = torch.cat(
                [gv @ x[s : s + self.batch_size] @ gh.T for s in steps]
            )  # (m, 3, H', W')
            mu_sq = mu * mu
            second = torch.cat([gv @ (x[s : s + self.batch_size] ** 2) @ gh.T for s in steps])
            var = cov_norm * (second - mu_sq)  # (m, 3, H', W')
            for group in np.split(order, cuts):
                a = int(ra[group[0]])
                for start in range(0, group.size, self.batch_size):
                    pos = group[start : start + self.batch_size]
                    b = torch.from_numpy(rb[pos]).to(self._device)
                    # in place on fresh gathers: this loop is memory-bound
                    cov = gv @ x[b].mul_(x[a]) @ gh.T  # (k, 3, H', W')
                    both = mu[b].mul_(mu[a])  # mu_a mu_b
                    cov.sub_(both).mul_(2.0 * cov_norm).add_(c2)  # 2 sigma_ab + C2
                    num = both.mul_(2.0).add_(c1).mul_(cov)
                    den = (mu_sq[b].add_(mu_sq[a]).add_(c1)).mul_(var[b].add_(var[a]).add_(c2))
                    out[pos] = num.div_(den).mean(dim=(1, 2, 3)).cpu().numpy()
                    bar.update(pos.size)
        bar.close()
        return 1.0 - out

    def distance(self, a: Any, b: Any) -> npt.NDArray[np.float64]:
        """``1 - SSIM`` between ``a[i]`` and ``b[i]``.

        Parameters
        ----------
        a, b : image(s)
            ``(H, W, 3)``, ``(n, H, W, 3)`` or a sequence of RGB arrays, same count; each pair
            of equal size.

        Returns
        -------
        numpy.ndarray of float64, shape (n,)
        """
        ia, ib = _as_images(a, "a"), _as_images(b, "b")
        _same_count(ia, ib)
        n = len(ia)
        return self._pairs(
            ia + ib, np.arange(n), np.arange(n, 2 * n), False, lambda i, j: f"a[{i}], b[{j - n}]"
        )

    def pairwise(self, a: Any, b: Any = None, *, progress: bool = True) -> npt.NDArray[np.float64]:
        """``1 - SSIM`` between every image of ``a`` and every image of ``b`` (``a`` if omitted).

        Returns
        -------
        numpy.ndarray of float64, shape (n_a, n_b)
            Symmetric with a zero diagonal when ``b`` is omitted (each unordered pair is
            computed once).
        """
        ia = _as_images(a, "a")
        symmetric = b is None
        ib = ia if symmetric else _as_images(b, "b")
        if symmetric:
            rows, cols = np.triu_indices(len(ia), k=1)
            values = self._pairs(ia, rows, cols, progress, lambda i, j: f"a[{i}], a[{j}]")
            out = np.zeros((len(ia), len(ia)))
            out[rows, cols] = values
            out[cols, rows] = values
            return out
        n = len(ia)
        rows, cols = (g.ravel() for g in np.indices((n, len(ib))))
        values = self._pairs(ia + ib, rows, cols + n, progress, lambda i, j: f"a[{i}], b[{j - n}]")
        return values.reshape(n, len(ib))

    def __repr__(self) -> str:
        return f"SSIMDistance(name={self.name!r})"
