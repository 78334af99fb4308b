"""Face models from options: the one place that turns settings into detector and encoders.

``idaudit embed``, ``idaudit invert``, ``idaudit privacy``, the privacy check and
:func:`idaudit.pipeline.audit_generator` all build their detector, identity encoders and
appearance metric here, so one option means one model everywhere.
"""

from __future__ import annotations

import os
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from idaudit._validation import check_integer, check_option
from idaudit.exceptions import IdauditWarning, InvalidInputError

__all__ = ["FaceModelOptions", "FaceModels", "build_face_models"]

PathLike = str | os.PathLike[str]


@dataclass(frozen=True)
class FaceModelOptions:
    """Which face models to load, from where, and on what.

    Attributes
    ----------
    dlib : {"cpp", "torch"} or None, default "cpp"
        dlib's ResNet (128-d; weights ship with pip): ``"cpp"`` runs dlib itself
        (:class:`~idaudit.faces.DlibEncoder`, on the CPU whatever ``device``), ``"torch"``
        the same network and weights in torch (:class:`~idaudit.faces.TorchDlibEncoder`:
        batched, any device, bitwise the same whatever the batch). ``None``: no dlib encoder.
    arcface, adaface, lvface : path or None
        Local weights of InsightFace ArcFace (a ``buffalo_l`` folder or its
        ``w600k_r50.onnx``), AdaFace, LVFace; each given adds that encoder, in this order
        after dlib.
    retinaface : path or None
        RetinaFace weights (``det_10g.onnx`` or its folder) for the detector. Default: the
        RetinaFace of an ``arcface`` ``buffalo_l`` folder when it holds one, else MTCNN.
    lpips : path or None
        LPIPS weights for the appearance metric; ``None``: SSIM on 64-pixel images.
    aligned : bool, default False
        Inputs are already aligned crops: no detector runs (:class:`AlignedDetector`).
    threads : int or None
        Threads of the onnxruntime sessions (ArcFace, RetinaFace, LVFace); ``None``: their
        default.
    device : str, default "cpu"
        Where every model runs.
    """

    dlib: Literal["cpp", "torch"] | None = "cpp"
    arcface: PathLike | None = None
    adaface: PathLike | None = None
    lvface: PathLike | None = None
    retinaface: PathLike | None = None
    lpips: PathLike | None = None
    aligned: bool = False
    threads: int | None = None
    device: str = "cpu"

    def __post_init__(self) -> None:
        if self.dlib is not None:
            check_option(self.dlib, "dlib", ("cpp", "torch"))
        if self.threads is not None:
            check_integer(self.threads, "threads", minimum=1)
        if not (self.dlib or self.arcface or self.adaface or self.lvface):
            raise InvalidInputError(
                "at least one identity encoder is needed: dlib (the default) or --arcface-*, "
                "--adaface-*, --lvface-onnx."
            )


@dataclass(frozen=True)
class FaceModels:
    """The detector, identity encoders and (when asked) appearance metric of one run.

    Attributes
    ----------
    detector : Detector
        MTCNN, RetinaFace, or :class:`AlignedDetector` for aligned inputs.
    encoders : tuple of Encoder
        In the order of :class:`FaceModelOptions`: dlib, ArcFace, AdaFace, LVFace.
    appearance : LPIPSDistance, SSIMDistance or None
        ``None`` unless :func:`build_face_models` was asked for it.
    appearance_size : int or None
        Side images are resized to for the appearance metric (64 for SSIM; ``None`` for
        LPIPS, which resizes itself).
    """

    detector: Any
    encoders: tuple[Any, ...]
    appearance: Any = None
    appearance_size: int | None = None


class AlignedDetector:
    """For already aligned face crops: one face per input, where the ArcFace template puts it.

    Inputs are prepared with ``enlarge_frame(crop, FRAME_SIDE, square=True)`` (160 × 160
    plus 48 px of edge padding); the face has the ArcFace template scaled to 160 px as
    landmarks and the crop inset by 10% as box, the geometry
    :meth:`~idaudit.faces.ShippedFaceGenerator.crops` uses for its own aligned samples.
    """

    name = "aligned-input"

    def __repr__(self) -> str:
        return "AlignedDetector()"

    def detect(self, image: Any) -> list[Any]:
        """Return the one face of a prepared aligned crop."""
        import numpy as np

        from idaudit.faces._align import arcface_template
        from idaudit.faces._io import FRAME_PAD_FRACTION, FRAME_SIDE
        from idaudit.faces._types import Face

        pad = round(FRAME_PAD_FRACTION * FRAME_SIDE)
        inset = 0.1 * FRAME_SIDE
        box = np.array([inset, inset, FRAME_SIDE - inset, FRAME_SIDE - inset]) + pad
        return [Face(box=box, score=1.0, landmarks=arcface_template(FRAME_SIDE) + pad)]


def build_face_models(options: FaceModelOptions, *, appearance: bool = False) -> FaceModels:
    """Load every model ``options`` names; nothing is downloaded.

    Parameters
    ----------
    options : FaceModelOptions
        Which models, from which files, on which device.
    appearance : bool, default False
        Also load the appearance metric (LPIPS with ``options.lpips``, else SSIM).

    Returns
    -------
    FaceModels

    Raises
    ------
    MissingWeightsError
        A weight file that is not where the options (or ``IDAUDIT_WEIGHTS``) say.

    Examples
    --------
    >>> from idaudit.faces import FaceModelOptions, build_face_models
    >>> models = build_face_models(FaceModelOptions(dlib="torch"))  # doctest: +SKIP
    >>> type(models.detector).__name__, models.encoders[0].name  # doctest: +SKIP
    ('MTCNNDetector', 'dlib-resnet-v1-torch')
    """
    if not isinstance(options, FaceModelOptions):
        raise TypeError(f"`options` must be a FaceModelOptions; got {type(options).__name__}.")
    device, threads = options.device, options.threads
    encoders: list[Any] = []
    if options.dlib == "torch":
        from idaudit.faces._dlib_torch import TorchDlibEncoder

        encoders.append(TorchDlibEncoder(device=device))
    elif options.dlib == "cpp":
        from idaudit.faces._dlib import DlibEncoder

        encoders.append(DlibEncoder())
    if options.arcface is not None:
        from idaudit.faces._onnx import ArcFaceEncoder

        encoders.append(ArcFaceEncoder(options.arcface, threads=threads, device=device))
    if options.adaface is not None:
        from idaudit.faces._torch_encoders import AdaFaceEncoder

        encoders.append(AdaFaceEncoder(options.adaface, device=device))
    if options.lvface is not None:
        from idaudit.faces._onnx import LVFaceEncoder

        encoders.append(LVFaceEncoder(options.lvface, threads=threads, device=device))
    retinaface = options.retinaface
    if retinaface is None and options.arcface is not None and not options.aligned:
        # a buffalo_l folder brings its own detector: seed 003's RetinaFace (det_10g.onnx),
        # whose five points give ArcFace's 112×112 alignment
        pack = Path(options.arcface)
        if pack.is_dir() and (pack / "det_10g.onnx").is_file():
            retinaface = pack / "det_10g.onnx"
        elif pack.is_dir():
            warnings.warn(
                f"The ArcFace folder {str(pack)!r} holds no det_10g.onnx: faces are detected "
                "with MTCNN, not with seed 003's RetinaFace and its five-point alignment.",
                IdauditWarning,
                stacklevel=3,
            )
    detector: Any
    if options.aligned:
        detector = AlignedDetector()
    elif retinaface is not None:
        from idaudit.faces._onnx import RetinaFaceDetector

        detector = RetinaFaceDetector(retinaface, threads=threads, device=device)
    else:
        from idaudit.faces._mtcnn import MTCNNDetector

        detector = MTCNNDetector(device)
    if not appearance:
        return FaceModels(detector, tuple(encoders))
    from idaudit.faces._metrics import LPIPSDistance, SSIMDistance

    if options.lpips is not None:
        # LPIPS resizes every image to 256 px itself
        return FaceModels(detector, tuple(encoders), LPIPSDistance(options.lpips, device=device))
    return FaceModels(detector, tuple(encoders), SSIMDistance(device=device), 64)
