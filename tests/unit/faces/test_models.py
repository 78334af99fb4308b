"""build_face_models: one way from options to a detector, encoders and appearance metric."""

from __future__ import annotations

from pathlib import Path

import pytest

from idaudit.exceptions import InvalidInputError
from idaudit.faces import (
    AlignedDetector,
    DlibEncoder,
    FaceModelOptions,
    MTCNNDetector,
    TorchDlibEncoder,
    build_face_models,
)


def test_default_options_are_mtcnn_and_dlib() -> None:
    models = build_face_models(FaceModelOptions())
    assert isinstance(models.detector, MTCNNDetector)
    assert [type(e) for e in models.encoders] == [DlibEncoder]
    assert models.appearance is None
    torch_models = build_face_models(FaceModelOptions(dlib="torch"), appearance=True)
    assert [type(e) for e in torch_models.encoders] == [TorchDlibEncoder]
    assert type(torch_models.appearance).__name__ == "SSIMDistance"
    assert torch_models.appearance_size == 64


def test_a_buffalo_folder_brings_its_retinaface_and_a_file_does_not(buffalo_dir: Path) -> None:
    folder = build_face_models(FaceModelOptions(dlib=None, arcface=buffalo_dir, threads=1))
    assert type(folder.detector).__name__ == "RetinaFaceDetector"
    assert [e.name for e in folder.encoders] == ["arcface-w600k-r50"]
    file = build_face_models(
        FaceModelOptions(dlib="cpp", arcface=buffalo_dir / "w600k_r50.onnx", threads=1)
    )
    assert isinstance(file.detector, MTCNNDetector)
    assert [type(e).__name__ for e in file.encoders] == ["DlibEncoder", "ArcFaceEncoder"]
    aligned = build_face_models(FaceModelOptions(arcface=buffalo_dir, aligned=True))
    assert isinstance(aligned.detector, AlignedDetector)


def test_bad_options_are_refused() -> None:
    with pytest.raises(InvalidInputError, match="at least one identity encoder"):
        FaceModelOptions(dlib=None)
    with pytest.raises(InvalidInputError, match="`dlib` must be one of"):
        FaceModelOptions(dlib="python")  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError, match="`threads` must be"):
        FaceModelOptions(threads=0)
    with pytest.raises(TypeError, match="`options` must be a FaceModelOptions; got dict"):
        build_face_models({"dlib": "cpp"})  # type: ignore[arg-type]
