"""Where model weights come from: the registry, strict local resolution and SHA-256 checks.

idaudit never downloads anything. A model's weight file is found, in this order, at

1. the path the caller passes (a file, a directory holding the file, or a directory holding
   ``<model>/<file>``);
2. a package that ships it (``lpips``, ``facenet_pytorch``, ``face_recognition_models``,
   ``gan_face_generate``), for the models whose weights come with a pip package;
3. ``$IDAUDIT_WEIGHTS/<model>/<file>``.

Anything else raises :class:`~idaudit.exceptions.MissingWeightsError` with a message that names
the file, where it is published, its licence and the exact place to put it.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType

from idaudit.exceptions import InvalidInputError, MissingWeightsError

__all__ = [
    "ENV_VAR",
    "MODEL_REGISTRY",
    "ModelSpec",
    "WeightFile",
    "file_sha256",
    "resolve_weights",
]

#: Environment variable naming the root folder of user-supplied weights.
ENV_VAR = "IDAUDIT_WEIGHTS"


@dataclass(frozen=True)
class WeightFile:
    """One weight file of a model.

    Attributes
    ----------
    filename : str
        File name as published (and as looked up under ``$IDAUDIT_WEIGHTS/<model>/``).
    sha256 : str or None
        Expected SHA-256, lower-case hex. Either the full 64-digit digest, or a prefix that the
        publisher puts in the file name (torchvision's ``alexnet-owt-7be5be79.pth`` convention),
        in which case only that prefix is checked. ``None``: not pinned, nothing is checked.
    input_size : int or None
        Side of the square input in pixels (the default detection size for detectors).
    dim : int or None
        Output embedding dimension for identity encoders.
    loader : str
        The idaudit class that loads the file.
    relpath : str or None
        For files shipped inside a package: the path relative to the package folder.
    """

    filename: str
    sha256: str | None
    input_size: int | None
    dim: int | None
    loader: str
    relpath: str | None = None


@dataclass(frozen=True)
class ModelSpec:
    """A model (one published release) and its weight files.

    Attributes
    ----------
    name : str
        Registry key; also the folder name under ``$IDAUDIT_WEIGHTS``.
    description : str
        What the model is.
    files : tuple of WeightFile
        The weight files of the release.
    published : str
        Where the files are published (text only; idaudit never fetches it).
    licence : str
        Licence terms of the weights, as their publisher states them.
    shipped_in : str or None
        Importable package that ships the files (``None``: the user supplies them).
    """

    name: str
    description: str
    files: tuple[WeightFile, ...]
    published: str
    licence: str
    shipped_in: str | None = None

    def file(self, filename: str | None) -> WeightFile:
        """Return the registered file called ``filename`` (the only file when ``None``)."""
        names = [f.filename for f in self.files]
        if filename is None:
            if len(self.files) == 1:
                return self.files[0]
            raise InvalidInputError(
                f"`filename` must be given for model {self.name!r}, which has several files: "
                f"{', '.join(names)}."
            )
        for entry in self.files:
            if entry.filename == filename:
                return entry
        raise InvalidInputError(
            f"`filename` must be one of the files of model {self.name!r} "
            f"({', '.join(names)}); got {filename!r}."
        )


_INSIGHTFACE_LICENCE = (
    "InsightFace pretrained models: non-commercial research purposes only "
    "(the insightface code itself is MIT)"
)

_SPECS = (
    ModelSpec(
        name="buffalo_l",
        description="InsightFace buffalo_l pack: SCRFD-10G (RetinaFace-style) detector and "
        "ArcFace ResNet-50 trained on WebFace600K",
        files=(
            WeightFile("det_10g.onnx", None, 640, None, "RetinaFaceDetector"),
            WeightFile("w600k_r50.onnx", None, 112, 512, "ArcFaceEncoder"),
        ),
        published="https://github.com/deepinsight/insightface/releases/download/v0.7/"
        "buffalo_l.zip (InsightFace release v0.7; unzip it)",
        licence=_INSIGHTFACE_LICENCE,
    ),
    ModelSpec(
        name="facenet_vggface2",
        description="facenet-pytorch InceptionResnetV1 trained on VGGFace2",
        files=(
            WeightFile("20180402-114759-vggface2.pt", None, 160, 512, "InceptionResnetV1Encoder"),
        ),
        published="https://github.com/timesler/facenet-pytorch/releases/download/v2.2.9/"
        "20180402-114759-vggface2.pt",
        licence="MIT (facenet-pytorch); trained on VGGFace2, check the dataset's terms",
    ),
    ModelSpec(
        name="adaface_ir50",
        description="AdaFace IR-50 trained on MS1MV2 (PyTorch Lightning checkpoint)",
        files=(WeightFile("adaface_ir50_ms1mv2.ckpt", None, 112, 512, "AdaFaceEncoder"),),
        published="Google Drive link 'R50 / MS1MV2' in the README of "
        "https://github.com/mk-minchul/AdaFace",
        licence="MIT (AdaFace code); trained on MS1MV2, check the dataset's terms",
    ),
    ModelSpec(
        name="lvface",
        description="LVFace vision-transformer face recognisers trained on Glint360K (ONNX)",
        files=tuple(
            WeightFile(f"LVFace-{v}_Glint360K.onnx", None, 112, 512, "LVFaceEncoder")
            for v in ("T", "S", "B", "L")
        ),
        published="https://huggingface.co/bytedance-research/LVFace "
        "(folder LVFace-<T|S|B|L>_Glint360K)",
        licence="LVFace code MIT; its README puts the released models under "
        "non-commercial research use only",
    ),
    ModelSpec(
        name="torchvision_alexnet",
        description="torchvision AlexNet ImageNet weights (the LPIPS backbone)",
        files=(
            # torchvision publishes the first 8 hex digits of the SHA-256 in the file name.
            WeightFile("alexnet-owt-7be5be79.pth", "7be5be79", 256, None, "LPIPSDistance"),
        ),
        published="https://download.pytorch.org/models/alexnet-owt-7be5be79.pth",
        licence="BSD-3-Clause (torchvision); trained on ImageNet, check the dataset's terms",
    ),
    ModelSpec(
        name="lpips_alex",
        description="LPIPS v0.1 linear heads on AlexNet features",
        files=(
            # Measured on the file in the lpips 0.1.4 wheel.
            WeightFile(
                "alex.pth",
                "df73285e35b22355a2df87cdb6b70b343713b667eddbda73e1977e0c860835c0",
                256,
                None,
                "LPIPSDistance",
                relpath="weights/v0.1/alex.pth",
            ),
        ),
        published="ships in the `lpips` package (https://github.com/richzhang/"
        "PerceptualSimilarity)",
        licence="BSD-2-Clause (lpips)",
        shipped_in="lpips",
    ),
    ModelSpec(
        name="mtcnn",
        description="MTCNN P-, R- and O-nets (facenet-pytorch port)",
        files=tuple(
            # Measured on the files in the facenet-pytorch 2.6.0 wheel.
            WeightFile(f"{net}.pt", digest, None, None, "MTCNNDetector", relpath=f"data/{net}.pt")
            for net, digest in (
                ("pnet", "a2a71925e0b9996a42f63e47efc1ca19043e69558b5c523b978d611dfae49c8f"),
                ("rnet", "bbb937de72efc9ef83b186c49f5f558467a1d7e3453a8ece0d71a886633f6a86"),
                ("onet", "165bfbe42940416ccfb977545cf0e976d5bf321f67083ae2aaaa5c764280118d"),
            )
        ),
        published="ships in the `facenet-pytorch` package",
        licence="MIT (facenet-pytorch)",
        shipped_in="facenet_pytorch",
    ),
    ModelSpec(
        name="dlib",
        description="dlib ResNet face recogniser (128-d) and 5- and 68-point shape predictors",
        files=(
            # Measured on the files in the face_recognition_models 0.3.0 package.
            WeightFile(
                "dlib_face_recognition_resnet_model_v1.dat",
                "55533b28a95800a551ba546ba62fe69625c7e95a7061c338adffead08719da30",
                150,
                128,
                "DlibEncoder, TorchDlibEncoder",
                relpath="models/dlib_face_recognition_resnet_model_v1.dat",
            ),
            WeightFile(
                "shape_predictor_5_face_landmarks.dat",
                "c4b1e9804792707d3a405c2c16a80a20269e6675021f64a41d30fffafbc41888",
                None,
                None,
                "DlibEncoder",
                relpath="models/shape_predictor_5_face_landmarks.dat",
            ),
            WeightFile(
                "shape_predictor_68_face_landmarks.dat",
                "fbdc2cb80eb9aa7a758672cbfdda32ba6300efe9b6e6c7a299ff7e736b11b92f",
                None,
                None,
                "DlibDetector",
                relpath="models/shape_predictor_68_face_landmarks.dat",
            ),
        ),
        published="ships in the `face-recognition-models` package",
        licence="CC0 (face-recognition-models); the 68-point predictor is trained on iBUG "
        "300-W, whose terms exclude commercial use",
        shipped_in="face_recognition_models",
    ),
    ModelSpec(
        name="dcgan_faces",
        description="DCGAN face generator (z in R^100 -> 64x64) trained on DigiFace-1M",
        files=(
            # Measured on the file in the gan-face-generate 1.1.1 wheel.
            WeightFile(
                "weights.tar",
                "0c3b90b138cfc4e8a73310b9fd5ce2a8f1f3a542a037de277412307fcd28771f",
                64,
                None,
                "ShippedFaceGenerator",
                relpath="weights.tar",
            ),
        ),
        published="ships in the `gan-face-generate` package",
        licence="MIT (gan-face-generate); trained on DigiFace-1M, check the dataset's terms",
        shipped_in="gan_face_generate",
    ),
)

#: Every model idaudit knows how to load, by registry name (read-only).
MODEL_REGISTRY: Mapping[str, ModelSpec] = MappingProxyType({s.name: s for s in _SPECS})


def file_sha256(path: str | os.PathLike[str]) -> str:
    """Return the SHA-256 of a file as lower-case hex, reading it in 1 MiB chunks.

    Parameters
    ----------
    path : str or os.PathLike
        The file.

    Returns
    -------
    str
        64 hex digits.

    Examples
    --------
    >>> from idaudit.faces._weights import file_sha256
    >>> import tempfile, pathlib
    >>> p = pathlib.Path(tempfile.mkdtemp()) / "empty"
    >>> _ = p.write_bytes(b"")
    >>> file_sha256(p)[:12]
    'e3b0c44298fc'
    """
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _spec(model: str) -> ModelSpec:
    if not isinstance(model, str):
        raise TypeError(f"`model` must be a str; got {type(model).__name__}.")
    try:
        return MODEL_REGISTRY[model]
    except KeyError:
        known = ", ".join(sorted(MODEL_REGISTRY))
        raise InvalidInputError(f"`model` must be one of {known}; got {model!r}.") from None


def _package_dir(package: str) -> Path | None:
    found = importlib.util.find_spec(package)
    if found is None or not found.submodule_search_locations:
        return None
    return Path(next(iter(found.submodule_search_locations)))


def _how_to_get(spec: ModelSpec, entry: WeightFile, argument: str) -> str:
    if spec.shipped_in is not None:
        return (
            f"It ships in the `{spec.shipped_in}` package: install it "
            f'(pip install "idaudit[faces]" and scripts/install.sh), pass the file as '
            f"`{argument}`, or put it at ${ENV_VAR}/{spec.name}/{entry.filename}."
        )
    return (
        f"idaudit never downloads weights: get it from {spec.published} "
        f"(licence: {spec.licence}), then pass the file or its folder as `{argument}`, "
        f"or put it at ${ENV_VAR}/{spec.name}/{entry.filename}."
    )


def _missing(spec: ModelSpec, entry: WeightFile, where: str, argument: str) -> MissingWeightsError:
    return MissingWeightsError(
        f"Weights file {entry.filename!r} of model {spec.name!r} {where}. "
        + _how_to_get(spec, entry, argument)
    )


def _verify(path: Path, spec: ModelSpec, entry: WeightFile) -> None:
    if entry.sha256 is None:
        return
    got = file_sha256(path)
    if not got.startswith(entry.sha256):
        kind = "SHA-256" if len(entry.sha256) == 64 else "SHA-256 prefix"
        raise InvalidInputError(
            f"SHA-256 of {path} is {got}, but the published {entry.filename!r} of model "
            f"{spec.name!r} has {kind} {entry.sha256}: the file is corrupt or holds other "
            "weights. If you trust it, pass verify=False to the model (every idaudit model "
            "that checks a digest accepts it) to load it anyway."
        )


def resolve_weights(
    model: str,
    filename: str | None = None,
    path: str | os.PathLike[str] | None = None,
    *,
    verify: bool = True,
    argument: str = "path",
) -> Path:
    """Find a model's weight file on local disk, never downloading it.

    Parameters
    ----------
    model : str
        Registry name, a key of :data:`MODEL_REGISTRY` (e.g. ``"buffalo_l"``).
    filename : str, optional
        Which of the model's files (e.g. ``"w600k_r50.onnx"``); may be omitted for one-file
        models.
    path : str or os.PathLike, optional
        Where the caller says the file is: the file itself (any name), a folder holding
        ``filename``, or a folder holding ``<model>/<filename>`` (an ``$IDAUDIT_WEIGHTS``-style
        root). When given, nothing else is searched.
    verify : bool, default True
        Compare the file's SHA-256 with the pinned digest (when the registry pins one) and raise
        on a mismatch. Unpinned files are not checked.
    argument : str, default "path"
        Name of the caller's argument, used in error messages.

    Returns
    -------
    pathlib.Path
        Absolute path of an existing file.

    Raises
    ------
    MissingWeightsError
        The file is not where it was looked for; the message names the file, where it is
        published, its licence and where to put it.
    InvalidInputError
        Unknown model or file name, or (``verify=True``) a SHA-256 mismatch.

    Notes
    -----
    The search order is: ``path``; the package that ships the file (for shipped models);
    ``$IDAUDIT_WEIGHTS/<model>/<filename>``. The environment variable is read at call time.

    Examples
    --------
    >>> from idaudit.faces import resolve_weights
    >>> import os, tempfile, pathlib
    >>> root = pathlib.Path(tempfile.mkdtemp())
    >>> (root / "buffalo_l").mkdir()
    >>> _ = (root / "buffalo_l" / "w600k_r50.onnx").write_bytes(b"stand-in")
    >>> resolve_weights("buffalo_l", "w600k_r50.onnx", root).name
    'w600k_r50.onnx'
    """
    spec = _spec(model)
    entry = spec.file(filename)
    found: Path | None = None
    if path is not None:
        given = Path(path).expanduser()
        candidates = (
            [given / entry.filename, given / spec.name / entry.filename]
            if given.is_dir()
            else [given]
        )
        found = next((c for c in candidates if c.is_file()), None)
        if found is None:
            raise _missing(spec, entry, f"was not found at {candidates[0]}", argument)
    else:
        # Shipped models: the package first, then $IDAUDIT_WEIGHTS; the others: only the latter.
        reasons: list[str] = []
        if spec.shipped_in is not None:
            package = _package_dir(spec.shipped_in)
            shipped = None if package is None else package / (entry.relpath or entry.filename)
            if shipped is not None and shipped.is_file():
                found = shipped
            elif shipped is None:
                reasons.append(f"package `{spec.shipped_in}` is not installed")
            else:
                reasons.append(f"package `{spec.shipped_in}` has no file at {shipped}")
        if found is None:
            root = os.environ.get(ENV_VAR)
            candidate = Path(root).expanduser() / spec.name / entry.filename if root else None
            if candidate is not None and candidate.is_file():
                found = candidate
            elif spec.shipped_in is not None:
                reasons.append(
                    f"it was not found at {candidate}" if candidate else f"${ENV_VAR} is not set"
                )
                raise _missing(spec, entry, "is missing: " + " and ".join(reasons), argument)
            elif candidate is not None:
                raise _missing(spec, entry, f"was not found at {candidate}", argument)
            else:
                raise _missing(
                    spec,
                    entry,
                    f"is not on local disk: no `{argument}` was given and ${ENV_VAR} is not set",
                    argument,
                )
    if verify:
        _verify(found, spec, entry)
    return found.resolve()
