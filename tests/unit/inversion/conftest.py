"""Fixtures of the inversion tests: the toy models, and the real DCGAN → warp → dlib chain."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from toys import LinearEncoder, LinearGenerator, MeanDetector


@pytest.fixture
def toy() -> dict[str, Any]:
    return {"generator": LinearGenerator(), "encoder": LinearEncoder(), "detector": MeanDetector()}


@pytest.fixture(scope="module")
def chain() -> Iterator[dict[str, Any]]:
    from idaudit.faces import TorchDlibEncoder
    from idaudit.inversion import DCGANGenerator, FrameWarp

    gen, enc = DCGANGenerator(), TorchDlibEncoder()
    return {"generator": gen, "encoder": enc, "warp": FrameWarp.for_dcgan(gen, enc, n=16, rng=1)}
