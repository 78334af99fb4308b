"""Fixtures of the faces tests: no network at all, shipped models, shipped real photos."""

from __future__ import annotations

import importlib.util
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

SHIPPED_PHOTOS_INSTALL = 'pip install --no-deps "insightface==2.1"'


def _refuse(*args: Any, **kwargs: Any) -> Any:
    raise OSError("network access attempted during a faces test: nothing may download")


@pytest.fixture(scope="module", autouse=True)
def _block_network() -> Iterator[None]:
    """Refuse every outgoing connection, from before the first model of a module is loaded."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(socket.socket, "connect", _refuse)
        mp.setattr(socket.socket, "connect_ex", _refuse)
        mp.setattr(socket, "create_connection", _refuse)
        yield


@pytest.fixture(scope="module")
def shipped_photos() -> Path:
    """``insightface/data/images``: real photos that ship inside the insightface wheel.

    Located without importing insightface (only its files are used).
    """
    spec = importlib.util.find_spec("insightface")
    if spec is None or not spec.submodule_search_locations:
        pytest.skip(f"the shipped test photos need: {SHIPPED_PHOTOS_INSTALL}")
    folder = Path(next(iter(spec.submodule_search_locations))) / "data" / "images"
    if not (folder / "t1.jpg").is_file():
        pytest.skip(
            f"insightface is installed without its photos; reinstall: {SHIPPED_PHOTOS_INSTALL}"
        )
    return folder


@pytest.fixture(scope="module")
def t1_photo(shipped_photos: Path) -> np.ndarray:
    """``t1.jpg``: six people around a table (1280×886)."""
    from idaudit.faces import load_image

    return load_image(shipped_photos / "t1.jpg")


@pytest.fixture(scope="module")
def mtcnn_detector() -> Any:
    from idaudit.faces import MTCNNDetector

    return MTCNNDetector()


@pytest.fixture(scope="module")
def dlib_encoder() -> Any:
    from idaudit.faces import DlibEncoder

    return DlibEncoder()


@pytest.fixture(scope="module")
def dcgan() -> Any:
    from idaudit.faces import ShippedFaceGenerator

    return ShippedFaceGenerator()
