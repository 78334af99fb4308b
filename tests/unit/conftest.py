"""Fixtures of the faces tests (every test module marked ``faces``, in faces/, cli/,
memorization/, inversion/ ...): no network at all, shipped models, shipped real photos, and
stand-in weight files in the published formats (built once per session)."""

from __future__ import annotations

import importlib.util
import shutil
import socket
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from standins import lightning_checkpoint, random_ir_state, save_faces, write_buffalo

SHIPPED_PHOTOS_INSTALL = 'pip install --no-deps "insightface==2.1"'


def _refuse(*args: Any, **kwargs: Any) -> Any:
    raise OSError("network access attempted during a faces test: nothing may download")


@pytest.fixture(scope="module", autouse=True)
def _block_network(request: pytest.FixtureRequest) -> Iterator[None]:
    """Refuse every outgoing connection in a ``faces`` module, from before its first model is
    loaded."""
    if request.node.get_closest_marker("faces") is None:
        yield
        return
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


@pytest.fixture(scope="session")
def buffalo_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A ``buffalo_l`` folder with stand-in ``det_10g.onnx`` and ``w600k_r50.onnx``."""
    return write_buffalo(tmp_path_factory.mktemp("weights") / "buffalo_l")


@pytest.fixture(scope="session")
def facenet_file(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    """A VGGFace2-format state dict: random network weights plus the 8631-way ``logits``."""
    from facenet_pytorch import InceptionResnetV1

    torch.manual_seed(5)
    net = InceptionResnetV1(pretrained=None)
    state = dict(net.state_dict())
    # BatchNorm statistics comparable to the activations: without them a random ReLU network
    # is nearly scale-invariant and would not notice a wrong input scaling.
    for key, value in state.items():
        if key.endswith("running_mean"):
            value.normal_(0.0, 1.0)
        elif key.endswith("running_var"):
            value.uniform_(0.5, 1.5)
    state["logits.weight"] = torch.randn(8631, 512) * 0.01
    state["logits.bias"] = torch.zeros(8631)
    path = tmp_path_factory.mktemp("facenet") / "20180402-114759-vggface2.pt"
    torch.save(state, path)
    return path, state


@pytest.fixture(scope="session")
def ir18_file(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, torch.Tensor]]:
    """An IR-18 checkpoint (the smallest AdaFace release) in AdaFace's published layout, with
    seeded random values, and its backbone state dict."""
    state = random_ir_state(18, seed=2)
    path = tmp_path_factory.mktemp("adaface18") / "adaface_ir18.ckpt"
    torch.save(lightning_checkpoint(state), path)
    return path, state


#: Small, fast settings of the privacy check for tests (its statistics, not its defaults):
#: ``run_privacy_check(..., models=FaceModelOptions(dlib="torch", threads=1),
#: statistics=PrivacyStatistics(**PRIVACY_FAST_STATISTICS), progress=False)``.
PRIVACY_FAST_STATISTICS = {"n_bootstrap": 50, "n_permutations": 199}


@pytest.fixture(scope="session")
def privacy_roots(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Train/heldout/synthetic roots of DCGAN faces for the privacy check.

    Cohort a: synthetic = near-copies of training images; cohort b: fresh samples; plus a
    cohort only in train, a blank image, a broken file, a text file and a duplicate.
    """
    from idaudit.faces import ShippedFaceGenerator

    dcgan = ShippedFaceGenerator()
    root = tmp_path_factory.mktemp("privacy")
    z = dcgan.sample_latents(22, rng=3)
    faces = dcgan.generate(z)
    near = dcgan.generate(z[:5] + 0.05 * np.random.default_rng(4).standard_normal((5, 100)))
    save_faces(root / "train" / "a", faces[:5])
    save_faces(root / "heldout" / "a", faces[5:10], 50)  # s5x: subjects apart from train's s0x
    save_faces(root / "synthetic" / "a", near, 10)
    save_faces(root / "train" / "b", faces[10:14], 20)
    save_faces(root / "heldout" / "b", faces[14:18], 30)
    save_faces(root / "synthetic" / "b", faces[18:22], 40)
    save_faces(root / "train" / "only_train", faces[:1])
    save_faces(root / "synthetic" / "b" / "blank", np.zeros((1, 64, 64, 3), np.uint8), 90)
    (root / "heldout" / "b" / "broken.png").write_bytes(b"\x89PNG not really")
    (root / "heldout" / "b" / "notes.txt").write_text("not an image")
    shutil.copy(root / "heldout" / "a" / "s50_0.png", root / "heldout" / "a" / "s50_copy.png")
    return root


@pytest.fixture(scope="session")
def privacy_run(privacy_roots: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, Path]:
    """One privacy check on :func:`privacy_roots` (its report and output folder), run once."""
    from idaudit.exceptions import IdauditWarning
    from idaudit.faces import FaceModelOptions
    from idaudit.pipeline import PrivacyStatistics, run_privacy_check

    out = tmp_path_factory.mktemp("out") / "privacy"
    roots = privacy_roots
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        report = run_privacy_check(
            roots / "train",
            roots / "heldout",
            roots / "synthetic",
            out,
            models=FaceModelOptions(dlib="torch", threads=1),
            statistics=PrivacyStatistics(**PRIVACY_FAST_STATISTICS),
            progress=False,
        )
    said = [str(w.message) for w in caught if issubclass(w.category, IdauditWarning)]
    assert any("only_train (missing from heldout and synthetic)" in t for t in said), said
    # 9 held-out images cannot resolve p = 1 %: the run says so (and writes it in the notes)
    assert any("9 held-out images do not resolve p = 1," in t for t in said), said
    return report, out
