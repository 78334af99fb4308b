"""Small, fast stand-ins for a generator, an encoder and a detector (no weights, no network).

Imported by the inversion tests (``from toys import ...``; ``tests/`` is on pytest's pythonpath).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from idaudit.faces import Face


class LinearGenerator:
    """``z ∈ R^16`` → 3×8×8 image ``sigmoid(W z)``: smooth, cheap, differentiable."""

    name = "linear-toy"
    latent_shape = (16,)
    image_size = 8

    def __init__(self, seed: int = 0, *, scale: float = 1.0, offset: float = 0.0) -> None:
        g = torch.Generator().manual_seed(seed)
        self.weight = torch.randn(3 * 8 * 8, 16, generator=g) / 4.0
        self.device = torch.device("cpu")
        self.default_radius = {"l2": 1.0, "linf": 0.3}
        self.scale, self.offset = scale, offset
        self.calls = 0

    def forward(self, latents: torch.Tensor) -> torch.Tensor:
        self.calls += 1
        x = torch.sigmoid(latents @ self.weight.T).reshape(-1, 3, 8, 8)
        return x * self.scale + self.offset


class LinearEncoder:
    """Embeds an 8×8 crop by a fixed random projection to R^6, L2-normalised."""

    name = "linear-encoder"
    dim = 6
    input_size = 8
    device = "cpu"

    def __init__(self, seed: int = 1, *, differentiable: bool = True) -> None:
        g = torch.Generator().manual_seed(seed)
        self.proj = torch.randn(3 * 8 * 8, 6, generator=g)
        self.differentiable = differentiable
        self.n_encoded = 0

    def forward(self, x: torch.Tensor, *, normalize: bool = True) -> torch.Tensor:
        e = (x.reshape(x.shape[0], -1) - 0.5) @ self.proj
        return torch.nn.functional.normalize(e, dim=1) if normalize else e

    def encode(self, crops: np.ndarray) -> np.ndarray:
        self.n_encoded += int(crops.shape[0])
        x = torch.from_numpy(np.ascontiguousarray(crops)).permute(0, 3, 1, 2).float() / 255.0
        with torch.no_grad():
            return self.forward(x).numpy().astype(np.float32)

    def align(self, image: np.ndarray, face: Any) -> np.ndarray:  # pragma: no cover - unused
        return image[:8, :8]


class MeanDetector:
    """A face 'score' from the image mean: deterministic, so filters can be checked exactly."""

    def detect(self, image: np.ndarray) -> list[Face]:
        score = float(image.mean() / 255.0)
        return [Face(box=np.array([0.0, 0.0, 8.0, 8.0]), score=score, landmarks=np.zeros((5, 2)))]
