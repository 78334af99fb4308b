"""MTCNN face detection with the P-, R- and O-net weights that ship inside facenet-pytorch."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from idaudit._device import resolve_device
from idaudit._validation import check_in_range, check_integer
from idaudit.exceptions import InvalidInputError
from idaudit.faces._io import to_rgb_uint8
from idaudit.faces._types import FACES_EXTRA, Face

if TYPE_CHECKING:
    import torch

__all__ = ["MTCNNDetector"]


def _import_facenet() -> Any:
    try:
        from facenet_pytorch.models import mtcnn
        from facenet_pytorch.models.utils import detect_face
    except ImportError as exc:
        raise ImportError(
            "MTCNNDetector needs facenet-pytorch (installed with --no-deps by the faces "
            f'install step): {FACES_EXTRA} && pip install --no-deps "facenet-pytorch==2.6.0"'
        ) from exc
    return mtcnn, detect_face


class MTCNNDetector:
    """MTCNN face detector (Zhang et al., 2016) with facenet-pytorch's shipped weights.

    The three cascaded networks and the detection routine are facenet-pytorch's; the weights
    are the ``pnet.pt``, ``rnet.pt`` and ``onet.pt`` state dicts inside the installed package,
    read with ``torch.load(weights_only=True)`` (SHA-256 checked). Nothing is downloaded.

    Parameters
    ----------
    device : {"cpu", "cuda"} or torch.device, default "cpu"
        Where the networks run. ``"cuda"`` without CUDA raises.
    min_face_size : int, default 20
        Smallest face side, in pixels, the image pyramid searches for.
    thresholds : tuple of 3 floats, default (0.6, 0.7, 0.7)
        Score thresholds of the P-, R- and O-net stages; the last one is the lowest score a
        returned face can have (raise it, e.g. to 0.9, to drop weak detections).
    factor : float, default 0.709
        Scale step of the image pyramid (≈ 1/√2, the published setting).
    weights : str or os.PathLike, optional
        Folder holding ``pnet.pt``, ``rnet.pt`` and ``onet.pt`` instead of the shipped copies.
    verify : bool, default True
        Check each file against the SHA-256 of the published copy; ``False`` loads any state
        dicts of the right shapes (e.g. re-saved or fine-tuned ones).

    Attributes
    ----------
    name : str
        ``"mtcnn"``.

    Notes
    -----
    Stage 1 (P-net) scans a pyramid of scales ``(12 / min_face_size) · factor^k`` for 12×12
    face windows; stage 2 (R-net) re-scores 24×24 crops of the survivors; stage 3 (O-net)
    re-scores 48×48 crops and regresses the five landmarks. Non-maximum suppression runs after
    each stage. The returned score is the O-net face probability (seed 002, Eq. 33, uses it as
    the detection confidence ``p_D``).

    References
    ----------
    K. Zhang, Z. Zhang, Z. Li, Y. Qiao, "Joint face detection and alignment using multitask
    cascaded convolutional networks", IEEE SPL 23(10), 2016.

    Examples
    --------
    >>> from idaudit.faces import MTCNNDetector
    >>> import numpy as np
    >>> det = MTCNNDetector()
    >>> det.detect(np.zeros((120, 160, 3), np.uint8))
    []
    """

    name = "mtcnn"

    def __init__(
        self,
        device: str | torch.device = "cpu",
        min_face_size: int = 20,
        thresholds: Sequence[float] = (0.6, 0.7, 0.7),
        factor: float = 0.709,
        *,
        weights: str | os.PathLike[str] | None = None,
        verify: bool = True,
    ) -> None:
        import torch

        from idaudit.faces._weights import resolve_weights

        self.device = resolve_device(device)
        self.min_face_size = check_integer(min_face_size, "min_face_size", minimum=12)
        if isinstance(thresholds, (str, bytes)) or len(thresholds) != 3:
            raise InvalidInputError(
                f"`thresholds` must be three probabilities (P-, R-, O-net); got {thresholds!r}."
            )
        self.thresholds = tuple(
            check_in_range(t, "thresholds", 0.0, 1.0, closed="both") for t in thresholds
        )
        self.factor = check_in_range(factor, "factor", 0.0, 1.0)
        mtcnn, detect_face = _import_facenet()
        self._detect_face = detect_face.detect_face
        nets: list[Any] = []
        files: list[Path] = []
        for cls, stem in ((mtcnn.PNet, "pnet"), (mtcnn.RNet, "rnet"), (mtcnn.ONet, "onet")):
            net = cls(pretrained=False)
            path = resolve_weights(
                "mtcnn", f"{stem}.pt", weights, verify=bool(verify), argument="weights"
            )
            net.load_state_dict(torch.load(path, map_location="cpu", weights_only=True))
            nets.append(net.to(self.device).eval())
            files.append(Path(path))
        self._pnet, self._rnet, self._onet = nets
        #: The P-, R- and O-net weight files loaded (they key cached embeddings).
        self.weight_files = tuple(files)

    def __repr__(self) -> str:
        return (
            f"MTCNNDetector(device={str(self.device)!r}, min_face_size={self.min_face_size}, "
            f"thresholds={self.thresholds}, factor={self.factor})"
        )

    def detect(self, image: npt.NDArray[Any]) -> list[Face]:
        """Find the faces in one image.

        Parameters
        ----------
        image : numpy.ndarray, shape (H, W, 3)
            RGB photo (grey, RGBA, uint16 and [0, 1] floats are converted).

        Returns
        -------
        list of Face
            Highest score first; empty when no face passes the thresholds.
        """
        return self.detect_batch(to_rgb_uint8(image)[None])[0]

    def detect_batch(
        self, images: npt.NDArray[Any] | Sequence[npt.NDArray[Any]]
    ) -> list[list[Face]]:
        """Find the faces in several images of equal size in one batched pass.

        Parameters
        ----------
        images : numpy.ndarray, shape (n, H, W, 3), or sequence of (H, W, 3) arrays
            Equal-size RGB images.

        Returns
        -------
        list of list of Face
            One list per image, highest score first.

        Raises
        ------
        InvalidInputError
            If the images differ in size.
        """
        import torch

        if isinstance(images, np.ndarray) and images.ndim == 4:
            batch = np.stack([to_rgb_uint8(im, "images") for im in images])
        else:
            if isinstance(images, np.ndarray) or not isinstance(images, Sequence):
                raise TypeError(
                    "`images` must be an (n, H, W, 3) array or a sequence of (H, W, 3) arrays; "
                    f"got {type(images).__name__}"
                    + (f" of shape {images.shape}." if isinstance(images, np.ndarray) else ".")
                )
            converted = [to_rgb_uint8(im, "images") for im in images]
            shapes = {im.shape for im in converted}
            if len(shapes) > 1:
                raise InvalidInputError(
                    "`images` must all have the same size for batched detection; got "
                    f"{sorted(shapes)}. Call `detect` on each image instead."
                )
            if not converted:
                return []
            batch = np.stack(converted)
        n, h, w = batch.shape[:3]
        if min(h, w) < self.min_face_size:
            # The pyramid has no scale at which a min_face_size face fits a 12-pixel window.
            return [[] for _ in range(n)]
        with torch.inference_mode():
            tensor = torch.from_numpy(batch).to(self.device)  # (n, H, W, 3) uint8
            boxes, points = self._detect_face(
                tensor,
                self.min_face_size,
                self._pnet,
                self._rnet,
                self._onet,
                list(self.thresholds),
                self.factor,
                self.device,
            )
        out: list[list[Face]] = []
        for img_boxes, img_points in zip(boxes, points, strict=True):
            b = np.asarray(img_boxes, dtype=np.float64).reshape(-1, 5)  # (k, 5): box, score
            p = np.asarray(img_points, dtype=np.float64).reshape(-1, 5, 2)  # (k, 5, 2)
            order = np.argsort(-b[:, 4], kind="stable")
            out.append(
                [
                    Face(box=b[i, :4].copy(), score=float(b[i, 4]), landmarks=p[i].copy())
                    for i in order
                ]
            )
        return out
