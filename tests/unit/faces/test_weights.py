"""Weight registry and strict offline resolution (idaudit.faces._weights)."""

from __future__ import annotations

import hashlib
import importlib.util
import re
from pathlib import Path
from types import MappingProxyType
from typing import Any

import pytest

from idaudit.exceptions import InvalidInputError, MissingWeightsError
from idaudit.faces import _weights
from idaudit.faces._weights import (
    ENV_VAR,
    MODEL_REGISTRY,
    ModelSpec,
    WeightFile,
    file_sha256,
    resolve_weights,
)

pytestmark = pytest.mark.faces


@pytest.fixture
def no_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ENV_VAR, raising=False)


def _touch(path: Path, content: bytes = b"stand-in weights") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(content)
    return path


# ----------------------------------------------------------------------------- registry


def test_registry_entries_are_complete() -> None:
    for name, spec in MODEL_REGISTRY.items():
        assert spec.name == name
        assert spec.files, name
        assert spec.published, name
        assert spec.licence, name
        for entry in spec.files:
            if entry.sha256 is not None:  # a full digest or a published 8-digit prefix
                assert re.fullmatch(r"[0-9a-f]{64}|[0-9a-f]{8}", entry.sha256), entry
            if spec.shipped_in is not None:
                assert entry.relpath is not None, entry


def test_registry_says_insightface_weights_are_non_commercial() -> None:
    assert "non-commercial research" in MODEL_REGISTRY["buffalo_l"].licence
    assert "non-commercial research" in MODEL_REGISTRY["lvface"].licence


def test_registry_is_read_only() -> None:
    with pytest.raises(TypeError):
        MODEL_REGISTRY["x"] = MODEL_REGISTRY["buffalo_l"]  # type: ignore[index]


def test_user_supplied_hashes_are_not_invented() -> None:
    # Only hashes that were measured on shipped files or that the publisher prints in the file
    # name are pinned; the user-supplied releases stay unpinned.
    for name in ("buffalo_l", "facenet_vggface2", "adaface_ir50", "lvface"):
        assert all(f.sha256 is None for f in MODEL_REGISTRY[name].files), name
    (alex,) = MODEL_REGISTRY["torchvision_alexnet"].files
    assert alex.sha256 == "7be5be79"
    assert alex.sha256 in alex.filename


# ----------------------------------------------------------------------------- messages


@pytest.mark.usefixtures("no_env")
def test_missing_weights_message_without_env() -> None:
    expected = (
        "Weights file 'w600k_r50.onnx' of model 'buffalo_l' is not on local disk: no `path` was "
        "given and $IDAUDIT_WEIGHTS is not set. idaudit never downloads weights: get it from "
        "https://github.com/deepinsight/insightface/releases/download/v0.7/buffalo_l.zip "
        "(InsightFace release v0.7; unzip it) (licence: InsightFace pretrained models: "
        "non-commercial research purposes only (the insightface code itself is MIT)), then pass "
        "the file or its folder as `path`, or put it at $IDAUDIT_WEIGHTS/buffalo_l/w600k_r50.onnx."
    )
    with pytest.raises(MissingWeightsError, match=re.escape(expected)):
        resolve_weights("buffalo_l", "w600k_r50.onnx")


def test_missing_weights_message_names_the_looked_up_env_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(ENV_VAR, str(tmp_path))
    where = tmp_path / "facenet_vggface2" / "20180402-114759-vggface2.pt"
    with pytest.raises(
        MissingWeightsError,
        match=re.escape(
            f"'20180402-114759-vggface2.pt' of model 'facenet_vggface2' was not "
            f"found at {where}. idaudit never downloads weights: get it from "
            "https://github.com/timesler/facenet-pytorch/releases/download/v2.2.9/"
        ),
    ):
        resolve_weights("facenet_vggface2", argument="weights")


def test_missing_explicit_path_names_it_and_the_argument(tmp_path: Path) -> None:
    given = tmp_path / "nowhere" / "ckpt.ckpt"
    with pytest.raises(
        MissingWeightsError,
        match=re.escape(f"was not found at {given}.")
        + ".*pass the file or its folder as `weights`, or put it at "
        + re.escape("$IDAUDIT_WEIGHTS/adaface_ir50/adaface_ir50_ms1mv2.ckpt."),
    ):
        resolve_weights("adaface_ir50", None, given, argument="weights")


def test_missing_weights_error_is_a_file_not_found_error(no_env: None) -> None:
    with pytest.raises(FileNotFoundError):
        resolve_weights("lvface", "LVFace-B_Glint360K.onnx")


def test_unknown_model_and_file_are_value_errors() -> None:
    with pytest.raises(InvalidInputError, match=r"`model` must be one of .*; got 'arcface'\."):
        resolve_weights("arcface", "w600k_r50.onnx")
    with pytest.raises(
        InvalidInputError,
        match=r"`filename` must be one of the files of model 'buffalo_l' "
        r"\(det_10g.onnx, w600k_r50.onnx\); got 'glintr100.onnx'\.",
    ):
        resolve_weights("buffalo_l", "glintr100.onnx")
    with pytest.raises(InvalidInputError, match="`filename` must be given for model 'buffalo_l'"):
        resolve_weights("buffalo_l")
    with pytest.raises(TypeError, match="`model` must be a str"):
        resolve_weights(3)  # type: ignore[arg-type]


# ----------------------------------------------------------------------------- resolution


def test_env_root_resolution(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target = _touch(tmp_path / "buffalo_l" / "det_10g.onnx")
    monkeypatch.setenv(ENV_VAR, str(tmp_path))
    assert resolve_weights("buffalo_l", "det_10g.onnx") == target.resolve()


def test_env_is_read_at_call_time(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ENV_VAR, raising=False)
    with pytest.raises(MissingWeightsError):
        resolve_weights("buffalo_l", "det_10g.onnx")
    _touch(tmp_path / "buffalo_l" / "det_10g.onnx")
    monkeypatch.setenv(ENV_VAR, str(tmp_path))
    assert resolve_weights("buffalo_l", "det_10g.onnx").is_file()


@pytest.mark.usefixtures("no_env")
@pytest.mark.parametrize("form", ["file", "folder", "root"])
def test_explicit_path_forms(tmp_path: Path, form: str) -> None:
    target = _touch(tmp_path / "buffalo_l" / "w600k_r50.onnx")
    given = {"file": target, "folder": target.parent, "root": tmp_path}[form]
    assert resolve_weights("buffalo_l", "w600k_r50.onnx", given) == target.resolve()


@pytest.mark.usefixtures("no_env")
def test_explicit_file_may_have_any_name(tmp_path: Path) -> None:
    target = _touch(tmp_path / "my-renamed-arcface.onnx")
    assert resolve_weights("buffalo_l", "w600k_r50.onnx", str(target)) == target.resolve()


def test_explicit_path_wins_over_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _touch(tmp_path / "env" / "buffalo_l" / "det_10g.onnx")
    mine = _touch(tmp_path / "mine" / "det_10g.onnx")
    monkeypatch.setenv(ENV_VAR, str(tmp_path / "env"))
    assert resolve_weights("buffalo_l", "det_10g.onnx", mine.parent) == mine.resolve()
    # ...and an explicit path that is wrong does not fall back to the environment.
    with pytest.raises(MissingWeightsError, match="was not found at"):
        resolve_weights("buffalo_l", "det_10g.onnx", tmp_path / "missing")


# ----------------------------------------------------------------------------- SHA-256


def test_file_sha256_matches_hashlib(tmp_path: Path) -> None:
    path = _touch(tmp_path / "f.bin", b"abc" * 700_000)  # spans several 1 MiB chunks
    assert file_sha256(path) == hashlib.sha256(b"abc" * 700_000).hexdigest()
    # FIPS 180-2 test vector for "abc".
    assert file_sha256(_touch(tmp_path / "abc", b"abc")) == (
        "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
    )


@pytest.fixture
def pinned_model(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Register a test model whose file has a known full SHA-256."""
    path = _touch(tmp_path / "pinned" / "w.bin", b"pinned weights")
    digest = hashlib.sha256(b"pinned weights").hexdigest()
    spec = ModelSpec(
        "pinned",
        "test model",
        (WeightFile("w.bin", digest, None, None, "Nothing"),),
        "nowhere",
        "none",
    )
    monkeypatch.setattr(
        _weights, "MODEL_REGISTRY", MappingProxyType({**MODEL_REGISTRY, "pinned": spec})
    )
    return path


def test_verify_accepts_the_pinned_file(pinned_model: Path) -> None:
    assert resolve_weights("pinned", path=pinned_model) == pinned_model.resolve()


def test_verify_rejects_a_changed_file(pinned_model: Path) -> None:
    pinned_model.write_bytes(b"pinned weightz")
    with pytest.raises(
        InvalidInputError,
        match=r"SHA-256 of .*w\.bin is [0-9a-f]{64}, but the published 'w.bin' of model "
        r"'pinned' has SHA-256 [0-9a-f]{64}: the file is corrupt or holds other weights\. "
        r"If you trust it, pass verify=False to the model \(every idaudit model that checks "
        r"a digest accepts it\) to load it anyway\.",
    ):
        resolve_weights("pinned", path=pinned_model)
    assert resolve_weights("pinned", path=pinned_model, verify=False).is_file()


def test_verify_checks_the_published_prefix(tmp_path: Path) -> None:
    standin = _touch(tmp_path / "alexnet-owt-7be5be79.pth")
    with pytest.raises(InvalidInputError, match="has SHA-256 prefix 7be5be79"):
        resolve_weights("torchvision_alexnet", path=standin)
    assert resolve_weights("torchvision_alexnet", path=standin, verify=False) == standin.resolve()


def test_unpinned_files_are_not_checked(tmp_path: Path) -> None:
    standin = _touch(tmp_path / "w600k_r50.onnx")
    assert resolve_weights("buffalo_l", "w600k_r50.onnx", standin, verify=True).is_file()


# ----------------------------------------------------------------------------- shipped files


@pytest.mark.parametrize(
    ("model", "filename"),
    [
        ("lpips_alex", "alex.pth"),
        ("mtcnn", "onet.pt"),
        ("dlib", "shape_predictor_5_face_landmarks.dat"),
    ],
)
def test_shipped_files_resolve_and_match_their_pinned_digest(model: str, filename: str) -> None:
    package = MODEL_REGISTRY[model].shipped_in
    assert package is not None
    if importlib.util.find_spec(package) is None:
        pytest.skip(f"{package} is not installed")
    path = resolve_weights(model, filename, verify=True)  # raises on a digest mismatch
    assert path.name == filename
    assert path.is_file()


@pytest.mark.usefixtures("no_env")
def test_missing_shipped_package_says_how_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_weights, "_package_dir", lambda package: None)
    with pytest.raises(
        MissingWeightsError,
        match=re.escape(
            "Weights file 'alex.pth' of model 'lpips_alex' is missing: package `lpips` is not "
            "installed and $IDAUDIT_WEIGHTS is not set. It ships in the `lpips` package: "
            "install it"
        ),
    ):
        resolve_weights("lpips_alex")


def test_shipped_model_falls_back_to_env_var(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The package is absent, the file is under $IDAUDIT_WEIGHTS/<model>/<file>: use it.
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a, **k: None)
    heads = _touch(tmp_path / "lpips_alex" / "alex.pth")
    monkeypatch.setenv(ENV_VAR, str(tmp_path))
    assert resolve_weights("lpips_alex", verify=False) == heads.resolve()


def test_shipped_model_falls_back_to_env_var_when_package_lacks_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_weights, "_package_dir", lambda package: tmp_path / "empty_pkg")
    onet = _touch(tmp_path / "root" / "mtcnn" / "onet.pt")
    monkeypatch.setenv(ENV_VAR, str(tmp_path / "root"))
    assert resolve_weights("mtcnn", "onet.pt", verify=False) == onet.resolve()


def test_shipped_model_missing_everywhere_names_env_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a, **k: None)
    monkeypatch.setenv(ENV_VAR, str(tmp_path))
    expected = tmp_path / "lpips_alex" / "alex.pth"
    with pytest.raises(MissingWeightsError) as info:
        resolve_weights("lpips_alex")
    message = str(info.value)
    assert "'alex.pth'" in message
    assert "package `lpips` is not installed" in message
    assert f"not found at {expected}" in message
    assert "ships in the `lpips` package" in message
    assert f"${ENV_VAR}/lpips_alex/alex.pth" in message


# ----------------------------------------------------------------------------- verify=


def test_every_loader_of_registry_weights_takes_verify() -> None:
    import inspect

    import idaudit.faces as faces

    loaders = {name for spec in MODEL_REGISTRY.values() for f in spec.files for name in
               f.loader.split(", ")}  # fmt: skip
    assert loaders >= {"MTCNNDetector", "DlibEncoder", "TorchDlibEncoder", "ShippedFaceGenerator"}
    for name in sorted(loaders):
        parameter = inspect.signature(getattr(faces, name)).parameters.get("verify")
        assert parameter is not None, name
        assert parameter.default is True, name


def _shipped(model: str, filename: str) -> Path:
    package = MODEL_REGISTRY[model].shipped_in
    if package is None or importlib.util.find_spec(package) is None:
        pytest.skip(f"{package} is not installed")
    return resolve_weights(model, filename)


def _altered_torch_file(source: Path, target: Path, key: str | None = None) -> None:
    """Save ``source``'s tensors again with one value nudged: same format, other digest."""
    import torch

    state = torch.load(source, map_location="cpu", weights_only=True)
    inner = state[key] if key else state
    key0 = next(iter(inner))
    flat = inner[key0].flatten().clone()
    flat[0] += 1e-3
    inner[key0] = flat.reshape(inner[key0].shape)
    torch.save(state, target)


def _mtcnn_folder(folder: Path) -> Path:
    for net in ("pnet", "rnet"):
        (folder / f"{net}.pt").symlink_to(_shipped("mtcnn", f"{net}.pt"))
    _altered_torch_file(_shipped("mtcnn", "onet.pt"), folder / "onet.pt")
    return folder


def _dcgan_folder(folder: Path) -> Path:
    _altered_torch_file(
        _shipped("dcgan_faces", "weights.tar"), folder / "weights.tar", key="netG_state_dict"
    )
    return folder


def _dlib_folder(folder: Path) -> Path:
    shape5 = "shape_predictor_5_face_landmarks.dat"
    (folder / shape5).symlink_to(_shipped("dlib", shape5))
    resnet = "dlib_face_recognition_resnet_model_v1.dat"
    data = bytearray(_shipped("dlib", resnet).read_bytes())
    data[len(data) // 2] ^= 0x01  # one bit of one float32 weight
    (folder / resnet).write_bytes(bytes(data))
    return folder


@pytest.mark.parametrize(
    ("loader", "make_folder"),
    [
        ("MTCNNDetector", _mtcnn_folder),
        ("ShippedFaceGenerator", _dcgan_folder),
        ("DlibEncoder", _dlib_folder),
        ("TorchDlibEncoder", _dlib_folder),
    ],
)
def test_changed_weights_are_refused_alike_and_the_advice_works(
    loader: str, make_folder: Any, tmp_path: Path
) -> None:
    import idaudit.faces as faces

    cls = getattr(faces, loader)
    folder = make_folder(tmp_path)
    # the same rule for every loader of shipped weights, given a path or not
    with pytest.raises(InvalidInputError, match=r"the file is corrupt or holds other weights"):
        cls(weights=folder)
    assert cls(weights=folder, verify=False) is not None  # what the message advises
