"""The attacked chain: latent → generator → image → fixed warp → encoder → cosine to a target."""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt
import torch

from idaudit.exceptions import InvalidInputError
from idaudit.inversion._generators import LatentGenerator, check_images
from idaudit.inversion._warp import FrameWarp

__all__ = ["TargetModel", "to_uint8"]


def to_uint8(images: torch.Tensor) -> npt.NDArray[np.uint8]:
    """``(n, 3, H, W)`` floats in [0, 1] → ``(n, H, W, 3)`` uint8 (round half to even)."""
    pixels = (images.detach() * 255.0).round().clamp(0, 255).to(torch.uint8)
    return np.ascontiguousarray(pixels.permute(0, 2, 3, 1).cpu().numpy())


class TargetModel:
    """A generator, a warp and an encoder seen as one function of the latent.

    White-box (``encoder.differentiable`` and ``white_box=True``): the embedding is
    ``encoder.forward(warp(G(x)))``, differentiable in ``x``. Black-box: only
    ``encoder.encode`` of uint8 crops is used — the image is rounded to 8-bit pixels, warped and
    rounded again, as a deployed recogniser would receive it — and every evaluated latent is
    one query.
    """

    def __init__(
        self,
        generator: LatentGenerator,
        encoder: Any,
        warp: FrameWarp | None = None,
        *,
        white_box: bool | None = None,
    ) -> None:
        self.generator = generator
        self.encoder = encoder
        self.warp = FrameWarp.resize(int(encoder.input_size)) if warp is None else warp
        if self.warp.output_size != int(encoder.input_size):
            raise InvalidInputError(
                f"`warp` output size must equal the encoder's input size; got "
                f"{self.warp.output_size} vs {encoder.input_size}."
            )
        can = bool(getattr(encoder, "differentiable", False))
        self.white_box = can if white_box is None else bool(white_box)
        if self.white_box and not can:
            raise InvalidInputError(
                f"a white-box attack needs a differentiable encoder; {encoder!r} is not "
                "(use attack='greedypixel')."
            )
        self.dim = int(encoder.dim)

    def images(self, latents: torch.Tensor) -> torch.Tensor:
        """Return the generated images, checked to be RGB in [0, 1]."""
        return check_images(self.generator.forward(latents), self.generator)

    def embed_images(self, images: torch.Tensor) -> torch.Tensor:
        """L2-normalised ``(n, dim)`` embeddings of ``(n, 3, H, W)`` images in [0, 1]."""
        if self.white_box:
            dev = torch.device(self.encoder.device)
            return self.encoder.forward(self.warp(images.to(dev)))  # type: ignore[no-any-return]
        with torch.no_grad():
            pixels = torch.from_numpy(to_uint8(images)).permute(0, 3, 1, 2).float() / 255.0
            crops = to_uint8(self.warp(pixels))
            emb = torch.from_numpy(np.asarray(self.encoder.encode(crops), dtype=np.float32))
        emb = emb.to(images.device)
        out: torch.Tensor = emb / emb.norm(dim=1, keepdim=True).clamp_min(1e-12)
        return out

    def embed_pixels(self, pixels: npt.NDArray[np.uint8]) -> torch.Tensor:
        """Embeddings of stored ``(n, H, W, 3)`` uint8 images (no gradient)."""
        x = torch.from_numpy(np.ascontiguousarray(pixels)).permute(0, 3, 1, 2).float() / 255.0
        with torch.no_grad():
            return self.embed_images(x).detach().float().cpu()

    def similarity(self, latents: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        """Cosine similarity ``S(F(G(x_i)), z_i)`` per row (Eq. 6); ``targets`` unit rows."""
        emb = self.embed_images(self.images(latents))  # (n, dim)
        return (emb * targets.to(emb.device, emb.dtype)).sum(dim=1)
