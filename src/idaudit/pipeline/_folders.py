"""Folders of images for the privacy check: discovery, hashing, face models and embedding."""

from __future__ import annotations

import functools
import hashlib
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from idaudit._device import resolve_device
from idaudit.exceptions import InvalidInputError
from idaudit.faces import ENLARGE_BELOW, FRAME_PAD_FRACTION, FRAME_SIDE, FaceModelOptions
from idaudit.faces._weights import file_sha256

if TYPE_CHECKING:
    from idaudit.faces import EmbeddingCache

__all__ = [
    "ENLARGE_BELOW",
    "IMAGE_SUFFIXES",
    "MIN_IMAGE_SIDE",
    "SPLITS",
    "CheckModels",
    "CohortFiles",
    "build_models",
    "embed_images",
    "prepare_image",
    "scan_root",
]

#: The three roots, in the order every table lists them.
SPLITS: tuple[str, ...] = ("train", "heldout", "synthetic")
#: File suffixes read as images (case-insensitive); other visible files are counted, not read.
IMAGE_SUFFIXES = frozenset(
    {".jpg", ".jpeg", ".png", ".bmp", ".gif", ".tif", ".tiff", ".webp", ".ppm", ".pgm", ".pnm"}
)
#: Images whose shorter side is below this many pixels are refused as ``"too_small"`` (not
#: detected, not embedded): at 32 px the recognisers' 112-160 px inputs are already 3.5-5×
#: interpolation, and below it there is no face left to recognise, only what enlarging
#: makes up (an 8 × 8 image enlarged to 160 px was "detected" and embedded). 32 px is half
#: the shipped DCGAN's 64-pixel faces, the smallest faces the privacy tests use.
MIN_IMAGE_SIDE = 32


@dataclass
class CohortFiles:
    """The image files of one split and cohort, hashed.

    ``paths`` and ``hashes`` list the images kept for analysis (after collapsing exact
    duplicates when asked); ``n_files`` counts every image file, ``n_not_image`` the other
    visible files, ``n_duplicates`` the byte-identical copies left out.
    """

    paths: list[Path]
    hashes: list[str]
    n_files: int
    n_not_image: int
    n_duplicates: int = 0
    duplicate_names: list[str] = field(default_factory=list)


def scan_root(root: Path, split: str) -> dict[str, tuple[list[Path], int]]:
    """Cohort folder → (image files at any depth, sorted; other visible files counted).

    Hidden files and folders are ignored.
    """
    if not root.is_dir():
        raise InvalidInputError(f"`{split}` must be an existing folder; got {str(root)!r}.")
    cohorts = sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith("."))
    if not cohorts:
        raise InvalidInputError(
            f"`{split}` must hold one sub-folder per cohort; {str(root)!r} has none."
        )
    out: dict[str, tuple[list[Path], int]] = {}
    for folder in cohorts:
        images: list[Path] = []
        others = 0
        for path in sorted(folder.rglob("*")):
            if any(part.startswith(".") for part in path.relative_to(folder).parts):
                continue
            if not path.is_file():
                continue
            if path.suffix.lower() in IMAGE_SUFFIXES:
                images.append(path)
            else:
                others += 1
        out[folder.name] = (images, others)
    return out


def hash_files(paths: Sequence[Path], n_not_image: int, *, collapse: bool) -> CohortFiles:
    """Hash each file; with ``collapse``, keep the first of byte-identical files."""
    hashes = [file_sha256(p) for p in paths]
    if not collapse:
        return CohortFiles(list(paths), hashes, len(paths), n_not_image)
    seen: set[str] = set()
    kept_p: list[Path] = []
    kept_h: list[str] = []
    dropped: list[str] = []
    for p, h in zip(paths, hashes, strict=True):
        if h in seen:
            dropped.append(p.name)
            continue
        seen.add(h)
        kept_p.append(p)
        kept_h.append(h)
    return CohortFiles(kept_p, kept_h, len(paths), n_not_image, len(dropped), dropped)


def prepare_image(image: npt.NDArray[np.uint8], *, aligned: bool = False) -> npt.NDArray[np.uint8]:
    """Enlarge a small image and pad it with its own edges; with ``aligned``, every image.

    A photo whose shorter side is below :data:`ENLARGE_BELOW` goes through
    :func:`idaudit.faces.prepare_frame` (the one enlargement policy): detectors and dlib's
    padded chip need context around a face that fills the frame, and black borders would
    change the embedding. An ``aligned`` crop is always resized to 160 × 160 and padded so,
    which fixes where :class:`~idaudit.faces.AlignedDetector` puts its face.
    """
    from idaudit.faces import enlarge_frame, prepare_frame

    if aligned:
        return enlarge_frame(image, FRAME_SIDE, square=True)
    return prepare_frame(image)


class MemoDetector:
    """Detect once per image content, whichever encoder asks (one run, several encoders)."""

    def __init__(self, detector: Any) -> None:
        self.detector = detector
        self.name = getattr(detector, "name", type(detector).__name__)
        self._memo: dict[tuple[str, tuple[int, ...]], list[Any]] = {}

    def detect(self, image: npt.NDArray[np.uint8]) -> list[Any]:
        key = (hashlib.sha1(image.tobytes()).hexdigest(), image.shape)
        if key not in self._memo:
            self._memo[key] = self.detector.detect(image)
        return self._memo[key]


@dataclass
class CheckModels:
    """The detector, identity encoders and appearance metric of one run, with their identities.

    The identities (names, settings, weight digests) key the cache.
    """

    detector: Any
    encoders: list[Any]
    appearance: Any
    encoder_identities: list[dict[str, Any]]
    appearance_identity: dict[str, Any]
    appearance_size: int | None


def build_models(options: FaceModelOptions) -> CheckModels:
    """Load every model the options name (:func:`idaudit.faces.build_face_models`).

    ``arcface`` given as an InsightFace ``buffalo_l`` folder also sets the detector to its
    RetinaFace (``det_10g.onnx``) unless ``retinaface`` or ``aligned`` says otherwise.
    Nothing is downloaded: a missing file raises
    :class:`~idaudit.exceptions.MissingWeightsError` naming it.
    """
    from idaudit.faces import build_face_models
    from idaudit.faces._cache import weight_digests

    built = build_face_models(options, appearance=True)
    detector, encoders, aligned = built.detector, list(built.encoders), options.aligned
    # CUDA numbers are not bitwise the CPU's: a cache filled on one never serves the other
    on = resolve_device(options.device).type
    det_identity = {
        "device": on,
        "detector": getattr(detector, "name", type(detector).__name__),
        "detector_weights": {} if aligned else weight_digests(detector),
        "enlarge_below": ENLARGE_BELOW,
        "min_image_side": MIN_IMAGE_SIDE,
        "upscale": FRAME_SIDE,
        "pad_fraction": FRAME_PAD_FRACTION,
        "face": "largest",
    }
    identities = [
        {
            "kind": "embedding",
            "encoder": enc.name,
            "encoder_weights": weight_digests(enc),
            **det_identity,
        }
        for enc in encoders
    ]
    appearance = built.appearance
    if options.lpips is not None:
        name = appearance.name
        weights = weight_digests(appearance)
    else:
        name = f"{appearance.name}-{built.appearance_size}px"
        weights = {}
    appearance_identity = {"kind": "appearance", "metric": name, "weights": weights, "device": on}
    return CheckModels(
        detector, encoders, appearance, identities, appearance_identity, built.appearance_size
    )


def embed_images(
    paths: Sequence[Path],
    keys: Sequence[str],
    detector: MemoDetector,
    encoder: Any,
    cache: EmbeddingCache,
    *,
    aligned: bool = False,
    batch_size: int = 32,
) -> tuple[list[str], npt.NDArray[np.float32], list[str], list[bool]]:
    """Status, embedding (NaN unless ok), message and cache use of each image (one loop).

    Each image is looked up under its key (:func:`idaudit.faces.content_key` of the model
    fingerprint and the file's SHA-256) before it is read; a miss is read, enlarged when
    small (:func:`prepare_image`) and detected, aligned and encoded by
    :func:`idaudit.faces._pipeline.encode_frames`, and its outcome stored. An image whose
    shorter side is below :data:`MIN_IMAGE_SIDE` is not detected nor embedded (status
    ``"too_small"``); a file that does not decode is read as
    :meth:`~idaudit.faces.FacePipeline.encode` reads it, which classifies it
    (``unreadable`` or ``bad_format``).
    """
    from idaudit.faces import load_image
    from idaudit.faces._pipeline import FrameInput, encode_frames, read_errors, read_frame

    def frame(path: Path) -> npt.NDArray[np.uint8] | tuple[str, str]:
        try:
            image = load_image(path)
        except read_errors():
            return read_frame(path, os.fspath(path))
        if min(image.shape[:2]) < MIN_IMAGE_SIDE:
            side = f"{image.shape[1]}×{image.shape[0]} px"
            return "too_small", f"{side}: shorter side below {MIN_IMAGE_SIDE} px"
        return prepare_image(image, aligned=aligned)

    inputs = [
        FrameInput(functools.partial(frame, path), key=key)
        for path, key in zip(paths, keys, strict=True)
    ]
    emb, outcomes = encode_frames(
        inputs, encoder, detector, cache=cache, batch_size=batch_size, cache_failures=True
    )
    statuses = [""] * len(paths)
    messages = [""] * len(paths)
    cached = [False] * len(paths)
    out = np.full((len(paths), encoder.dim), np.nan, dtype=np.float32)
    for outcome in outcomes:
        i = outcome["input_index"]
        statuses[i], messages[i] = outcome["status"], outcome["message"]
        cached[i] = outcome["cached"]
        if outcome["status"] == "ok":
            out[i] = emb[outcome["embedding_row"]]
    return statuses, out, messages, cached
