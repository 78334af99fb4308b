"""Faces in, identity embeddings out — with real models that run offline.

* Protocols: :class:`Face`, :class:`Detector` (``detect(image) -> list[Face]``) and
  :class:`Encoder` (``align(image, face)``; ``encode(crops) -> (n, dim)`` and, for
  differentiable encoders, the torch ``forward(x)``, both L2-normalised; ``device``).
* Alignment: :func:`align` (five-point Umeyama similarity onto the ArcFace template),
  :func:`estimate_similarity`, :func:`arcface_template`.
* :class:`EmbeddingCache` and :func:`content_key`: embeddings stored by content hash
  (owner-only, atomic, no pickles), so a re-run encodes nothing.
* :class:`FacePipeline`: photos or paths → detect → align → encode, with a per-input outcome
  table (no face, unreadable file, bad pixels, which face was kept).
* :func:`build_face_models` from :class:`FaceModelOptions`: the one way from options to a
  detector, identity encoders and appearance metric (:class:`FaceModels`);
  :class:`AlignedDetector` for inputs that are already aligned crops;
  :func:`prepare_frame`: the one enlargement policy for small frames.
* Shipped real models (weights come with pip packages): :class:`MTCNNDetector`,
  :class:`DlibEncoder`, :class:`DlibDetector`, :class:`TorchDlibEncoder` (differentiable port),
  :class:`ShippedFaceGenerator` (DCGAN) and :func:`synthetic_identities`.
* Local-weight models (files the user supplies): :class:`ArcFaceEncoder`,
  :class:`RetinaFaceDetector`, :class:`InceptionResnetV1Encoder`, :class:`AdaFaceEncoder`,
  :class:`LVFaceEncoder`, and :class:`OnnxEncoder` for any other ONNX recogniser; appearance
  metrics :class:`LPIPSDistance`, :class:`SSIMDistance`;
  :func:`resolve_weights`.

Names are imported lazily: ``import idaudit.faces`` loads neither torch, dlib nor
onnxruntime until a model is used.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

# public name -> submodule that defines it
_LAZY: dict[str, str] = {
    "Face": "idaudit.faces._types",
    "Detector": "idaudit.faces._types",
    "Encoder": "idaudit.faces._types",
    "SimilarityTransform": "idaudit.faces._align",
    "align": "idaudit.faces._align",
    "arcface_template": "idaudit.faces._align",
    "estimate_similarity": "idaudit.faces._align",
    "ENLARGE_BELOW": "idaudit.faces._io",
    "FRAME_PAD_FRACTION": "idaudit.faces._io",
    "FRAME_SIDE": "idaudit.faces._io",
    "enlarge_frame": "idaudit.faces._io",
    "prepare_frame": "idaudit.faces._io",
    "load_image": "idaudit.faces._io",
    "MTCNNDetector": "idaudit.faces._mtcnn",
    "DLIB_THRESHOLD": "idaudit.faces._dlib",
    "DlibDetector": "idaudit.faces._dlib",
    "DlibEncoder": "idaudit.faces._dlib",
    "dlib_face_chip": "idaudit.faces._dlib",
    "FacePipeline": "idaudit.faces._pipeline",
    "EmbeddingCache": "idaudit.faces._cache",
    "content_key": "idaudit.faces._cache",
    "ShippedFaceGenerator": "idaudit.faces._generator",
    "SyntheticIdentities": "idaudit.faces._generator",
    "synthetic_identities": "idaudit.faces._generator",
    "TorchDlibEncoder": "idaudit.faces._dlib_torch",
    "AdaFaceEncoder": "idaudit.faces._torch_encoders",
    "ArcFaceEncoder": "idaudit.faces._onnx",
    "InceptionResnetV1Encoder": "idaudit.faces._torch_encoders",
    "LVFaceEncoder": "idaudit.faces._onnx",
    "OnnxEncoder": "idaudit.faces._onnx",
    "RetinaFaceDetector": "idaudit.faces._onnx",
    "LPIPSDistance": "idaudit.faces._metrics",
    "SSIMDistance": "idaudit.faces._metrics",
    "AlignedDetector": "idaudit.faces._models",
    "FaceModelOptions": "idaudit.faces._models",
    "FaceModels": "idaudit.faces._models",
    "build_face_models": "idaudit.faces._models",
    "MODEL_REGISTRY": "idaudit.faces._weights",
    "resolve_weights": "idaudit.faces._weights",
}

# Third-party modules that only the faces extra brings in.
_OPTIONAL = {"dlib", "facenet_pytorch", "onnxruntime", "PIL", "skimage", "torchvision", "lpips"}

__all__ = sorted(_LAZY)

if TYPE_CHECKING:  # pragma: no cover - for static analysers only
    from idaudit.faces._align import (
        SimilarityTransform as SimilarityTransform,
    )
    from idaudit.faces._align import align as align
    from idaudit.faces._align import arcface_template as arcface_template
    from idaudit.faces._align import estimate_similarity as estimate_similarity
    from idaudit.faces._cache import EmbeddingCache as EmbeddingCache
    from idaudit.faces._cache import content_key as content_key
    from idaudit.faces._dlib import DLIB_THRESHOLD as DLIB_THRESHOLD
    from idaudit.faces._dlib import DlibDetector as DlibDetector
    from idaudit.faces._dlib import DlibEncoder as DlibEncoder
    from idaudit.faces._dlib import dlib_face_chip as dlib_face_chip
    from idaudit.faces._dlib_torch import TorchDlibEncoder as TorchDlibEncoder
    from idaudit.faces._generator import (
        ShippedFaceGenerator as ShippedFaceGenerator,
    )
    from idaudit.faces._generator import (
        SyntheticIdentities as SyntheticIdentities,
    )
    from idaudit.faces._generator import (
        synthetic_identities as synthetic_identities,
    )
    from idaudit.faces._io import ENLARGE_BELOW as ENLARGE_BELOW
    from idaudit.faces._io import FRAME_PAD_FRACTION as FRAME_PAD_FRACTION
    from idaudit.faces._io import FRAME_SIDE as FRAME_SIDE
    from idaudit.faces._io import enlarge_frame as enlarge_frame
    from idaudit.faces._io import load_image as load_image
    from idaudit.faces._io import prepare_frame as prepare_frame
    from idaudit.faces._metrics import LPIPSDistance as LPIPSDistance
    from idaudit.faces._metrics import SSIMDistance as SSIMDistance
    from idaudit.faces._models import AlignedDetector as AlignedDetector
    from idaudit.faces._models import FaceModelOptions as FaceModelOptions
    from idaudit.faces._models import FaceModels as FaceModels
    from idaudit.faces._models import build_face_models as build_face_models
    from idaudit.faces._mtcnn import MTCNNDetector as MTCNNDetector
    from idaudit.faces._onnx import ArcFaceEncoder as ArcFaceEncoder
    from idaudit.faces._onnx import LVFaceEncoder as LVFaceEncoder
    from idaudit.faces._onnx import OnnxEncoder as OnnxEncoder
    from idaudit.faces._onnx import RetinaFaceDetector as RetinaFaceDetector
    from idaudit.faces._pipeline import FacePipeline as FacePipeline
    from idaudit.faces._torch_encoders import AdaFaceEncoder as AdaFaceEncoder
    from idaudit.faces._torch_encoders import (
        InceptionResnetV1Encoder as InceptionResnetV1Encoder,
    )
    from idaudit.faces._types import Detector as Detector
    from idaudit.faces._types import Encoder as Encoder
    from idaudit.faces._types import Face as Face
    from idaudit.faces._weights import MODEL_REGISTRY as MODEL_REGISTRY
    from idaudit.faces._weights import resolve_weights as resolve_weights


def __getattr__(name: str) -> Any:
    module_name = _LAZY.get(name)
    if module_name is None:
        raise AttributeError(f"module 'idaudit.faces' has no attribute {name!r}")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name is not None and exc.name.split(".")[0] in _OPTIONAL:
            raise ImportError(
                f"idaudit.faces.{name} needs the optional package `{exc.name}`: "
                'pip install "idaudit[faces]"'
            ) from exc
        raise
    value = getattr(module, name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return __all__
