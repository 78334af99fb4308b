"""A fixed, differentiable warp from a generator's frame to an encoder's aligned crop."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import numpy.typing as npt
import torch
import torch.nn.functional as F

from idaudit._validation import RngLike, check_integer
from idaudit.exceptions import InvalidInputError

__all__ = ["FrameWarp"]


@dataclass(frozen=True)
class FrameWarp:
    """One similarity transform from generated images to an encoder's crops (``grid_sample``).

    Faces from a generator trained on aligned data sit at nearly the same place in every
    image, so one fixed warp replaces per-image detection and alignment and keeps the chain
    latent → image → crop → embedding differentiable.

    Attributes
    ----------
    scale, rotation, shift_x, shift_y : float
        The map from output-crop coordinates to source coordinates, both normalised to
        [−1, 1] (``align_corners=False``): ``src = scale · R(rotation) · out + shift``.
    output_size : int
        Side of the crop (the encoder's ``input_size``).
    fit_rmse : float
        Root-mean-square pixel difference (in [0, 1] units) to the reference crops it was
        fitted to (``nan`` for a plain resize).
    antialias : bool, default True
        When the warp shrinks the image (more than one source pixel per crop pixel), first
        resize the source with an antialiased filter of ``mode`` (``F.interpolate(...,
        antialias=True)``) to one source pixel per crop pixel. ``False``: plain sampling,
        which at 256 → 112 (bicubic) weights some source rows ×10.9 more than others (×1.6
        antialiased), so an attack partly optimises through aliasing that a deployed
        pipeline's resize removes.
    mode : {"bicubic", "bilinear"}, default "bicubic"
        The interpolation of the prefilter and of the sampling. ``"bilinear"`` with
        ``antialias`` is torchvision's ``Resize(antialias=True)`` (its default
        interpolation), the resize DiffMI applies before the recogniser; ``"bicubic"`` is
        the resize of idaudit's own face pipeline (PIL's bicubic, which a plain resize
        equals to 3/255), whose crops :meth:`fit` matches.

    Notes
    -----
    Sampling uses ``mode`` with border replication (as :meth:`ShippedFaceGenerator.crops`
    pads by edge replication), clamped to [0, 1]. A plain resize (scale 1, no rotation or
    shift) with ``antialias`` equals ``F.interpolate(images, size, mode=mode,
    antialias=True)``: both kernels reproduce pixel values at pixel centres.
    :meth:`fit` fits the four parameters with plain bicubic sampling.
    """

    scale: float = 1.0
    rotation: float = 0.0
    shift_x: float = 0.0
    shift_y: float = 0.0
    output_size: int = 112
    fit_rmse: float = float("nan")
    antialias: bool = True
    mode: Literal["bicubic", "bilinear"] = "bicubic"

    def __post_init__(self) -> None:
        if self.mode not in ("bicubic", "bilinear"):
            raise InvalidInputError(f"`mode` must be 'bicubic' or 'bilinear'; got {self.mode!r}.")

    @classmethod
    def resize(
        cls,
        output_size: int,
        *,
        antialias: bool = True,
        mode: Literal["bicubic", "bilinear"] = "bicubic",
    ) -> FrameWarp:
        """Resize the whole frame to ``output_size`` (generators aligned like the encoder).

        ``mode="bilinear"`` gives torchvision's ``Resize(antialias=True)``, DiffMI's resize.
        """
        return cls(
            output_size=check_integer(output_size, "output_size", minimum=1),
            antialias=bool(antialias),
            mode=mode,
        )

    def theta(self, n: int, device: Any = "cpu") -> torch.Tensor:
        """Return the ``(n, 2, 3)`` affine matrices for ``torch.nn.functional.affine_grid``."""
        c = self.scale * float(np.cos(self.rotation))
        s = self.scale * float(np.sin(self.rotation))
        m = torch.tensor(
            [[c, -s, self.shift_x], [s, c, self.shift_y]], dtype=torch.float32, device=device
        )
        return m.expand(n, 2, 3)

    def __call__(self, images: torch.Tensor) -> torch.Tensor:
        """Warp ``(n, 3, H, W)`` images in [0, 1] to ``(n, 3, output_size, output_size)``."""
        n = images.shape[0]
        size = self.output_size
        if self.antialias:
            images = self._prefilter(images)
        grid = F.affine_grid(
            self.theta(n, images.device).to(images.dtype), [n, 3, size, size], align_corners=False
        )
        out = F.grid_sample(
            images, grid, mode=self.mode, padding_mode="border", align_corners=False
        )
        return out.clamp(0.0, 1.0)

    def _prefilter(self, images: torch.Tensor) -> torch.Tensor:
        """Shrink the source, antialiased, to one source pixel per crop pixel (if larger)."""
        # in normalised coordinates the crop spans `scale` of the source on each axis, so
        # it samples scale · side / output_size source pixels per crop pixel on that axis
        h, w = (int(v) for v in images.shape[-2:])
        side = max(1, round(self.output_size / max(abs(self.scale), 1e-12)))
        size = (min(h, side), min(w, side))
        if size == (h, w):
            return images
        return F.interpolate(
            images, size=size, mode=self.mode, antialias=True, align_corners=False
        ).clamp(0.0, 1.0)

    @classmethod
    def fit(
        cls,
        images: torch.Tensor,
        crops: npt.NDArray[np.uint8],
        *,
        max_iter: int = 100,
    ) -> FrameWarp:
        """Fit the warp that best reproduces reference crops (least squares over pixels).

        Parameters
        ----------
        images : torch.Tensor, shape (n, 3, H, W)
            Generated images in [0, 1].
        crops : numpy.ndarray of uint8, shape (n, S, S, 3)
            The encoder's own aligned crops of the same images (per-image alignment).
        max_iter : int, default 100
            L-BFGS iterations per round (three rounds).

        Returns
        -------
        FrameWarp

        Notes
        -----
        A coarse grid over scale and vertical shift picks the start, then L-BFGS minimises
        the mean squared pixel difference over the four similarity parameters.
        """
        crops = np.asarray(crops)
        if crops.ndim != 4 or crops.shape[3] != 3 or crops.shape[1] != crops.shape[2]:
            raise InvalidInputError(f"`crops` must have shape (n, S, S, 3); got {crops.shape}.")
        if images.ndim != 4 or images.shape[0] != crops.shape[0]:
            raise InvalidInputError(
                f"`images` must be (n, 3, H, W) with n = {crops.shape[0]}; got "
                f"{tuple(images.shape)}."
            )
        size = int(crops.shape[1])
        x = images.detach().float().cpu()
        ref = torch.from_numpy(np.ascontiguousarray(crops)).permute(0, 3, 1, 2).float() / 255.0

        def warp(p: torch.Tensor) -> torch.Tensor:
            c, s = p[0] * torch.cos(p[1]), p[0] * torch.sin(p[1])
            theta = torch.stack([torch.stack([c, -s, p[2]]), torch.stack([s, c, p[3]])])
            grid = F.affine_grid(
                theta.expand(x.shape[0], 2, 3), [x.shape[0], 3, size, size], align_corners=False
            )
            out = F.grid_sample(x, grid, mode="bicubic", padding_mode="border", align_corners=False)
            return out.clamp(0.0, 1.0)

        best: tuple[float, torch.Tensor] | None = None
        with torch.no_grad():
            for s0 in (0.6, 0.8, 1.0, 1.2, 1.4, 1.7, 2.0):
                for ty in (-0.3, -0.15, 0.0, 0.15, 0.3):
                    p = torch.tensor([s0, 0.0, 0.0, ty])
                    loss = float(F.mse_loss(warp(p), ref))
                    if best is None or loss < best[0]:
                        best = (loss, p)
        assert best is not None
        params = best[1].clone().requires_grad_(True)
        opt = torch.optim.LBFGS(
            [params],
            max_iter=check_integer(max_iter, "max_iter", minimum=1),
            line_search_fn="strong_wolfe",
        )

        def closure() -> torch.Tensor:
            opt.zero_grad()
            loss = F.mse_loss(warp(params), ref)
            loss.backward()  # type: ignore[no-untyped-call]
            return loss

        for _ in range(3):
            opt.step(closure)  # type: ignore[no-untyped-call]
        with torch.no_grad():
            rmse = float(F.mse_loss(warp(params), ref)) ** 0.5
        fitted = [float(v) for v in params.detach()]
        return cls(fitted[0], fitted[1], fitted[2], fitted[3], size, rmse)

    @classmethod
    def for_dcgan(
        cls,
        generator: Any,
        encoder: Any,
        *,
        n: int = 32,
        rng: RngLike = 0,
        max_iter: int = 100,
    ) -> FrameWarp:
        """Fit the warp from :class:`DCGANGenerator` images to ``encoder``'s crops.

        The references are :meth:`ShippedFaceGenerator.crops` of ``n`` random samples (the
        encoder's own per-image alignment, e.g. dlib's 5-point shape predictor); ``max_iter``
        is passed to :meth:`fit`.

        Examples
        --------
        >>> from idaudit.faces import TorchDlibEncoder
        >>> from idaudit.inversion import DCGANGenerator, FrameWarp
        >>> warp = FrameWarp.for_dcgan(DCGANGenerator(), TorchDlibEncoder(), n=2, max_iter=5)
        >>> warp.output_size
        150
        """
        n = check_integer(n, "n", minimum=1)
        shipped = getattr(generator, "generator", None)
        if shipped is None or not hasattr(shipped, "crops"):
            raise TypeError(
                f"`generator` must be a DCGANGenerator; got {type(generator).__name__}."
            )
        with torch.no_grad():
            z = generator.sample_latents(n, rng)
            images = generator.forward(z)
        pixels = (images * 255.0).round().clamp(0, 255).to(torch.uint8)
        rgb = pixels.permute(0, 2, 3, 1).cpu().numpy()
        crops = shipped.crops(rgb, encoder)
        return cls.fit(pixels.float() / 255.0, crops, max_iter=max_iter)
