"""Differentiable torch face encoders with local weights (never downloaded).

* :class:`InceptionResnetV1Encoder` — facenet-pytorch's network with local VGGFace2 weights;
* :class:`AdaFaceEncoder` — AdaFace IR checkpoints loaded into idaudit's own IR definition.

``forward`` keeps the graph. Weights are located by
:func:`~idaudit.faces._weights.resolve_weights`: an explicit argument, else
``$IDAUDIT_WEIGHTS/<model>/<file>``; checkpoints load with ``weights_only=True``
(:mod:`idaudit.faces._checkpoints`).
"""

from __future__ import annotations

import os
from abc import abstractmethod
from collections.abc import Mapping
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from idaudit._device import resolve_device
from idaudit._validation import check_integer
from idaudit.exceptions import InvalidInputError
from idaudit.faces._checkpoints import load_checkpoint, load_exact
from idaudit.faces._crops import CropEncoder
from idaudit.faces._types import FACES_EXTRA, device_name
from idaudit.faces._weights import resolve_weights

if TYPE_CHECKING:  # pragma: no cover
    import torch

__all__ = ["AdaFaceEncoder", "InceptionResnetV1Encoder"]


class _TorchEncoder(CropEncoder):
    """Shared machinery of the differentiable torch encoders.

    Subclasses set ``name``, ``dim``, ``input_size``, ``self.model``, ``self._device`` (and
    ``self.device = device_name(self._device)``) and implement ``_embed(x)``: the raw
    network output for ``(n, 3, s, s)`` float RGB in [0, 1].
    """

    differentiable = True
    name: str
    dim: int
    input_size: int
    batch_size: int
    device: str
    model: torch.nn.Module
    _device: torch.device

    @abstractmethod
    def _embed(self, x: torch.Tensor) -> torch.Tensor:
        """Raw network output for preprocessed ``(n, 3, s, s)`` input."""

    def forward(self, x: torch.Tensor, *, normalize: bool = True) -> torch.Tensor:
        """Differentiable embedding of image tensors.

        Parameters
        ----------
        x : torch.Tensor, shape (n, 3, input_size, input_size)
            RGB in [0, 1] (any float dtype; gradients flow back to it).
        normalize : bool, default True
            L2-normalise each row, as :meth:`encode` does (the Encoder contract); ``False``
            returns the network's raw output.

        Returns
        -------
        torch.Tensor, shape (n, dim)
            Unit-norm embeddings (float32) on the encoder's device (raw with
            ``normalize=False``).
        """
        import torch

        if not isinstance(x, torch.Tensor):
            raise TypeError(f"`x` must be a torch.Tensor; got {type(x).__name__}.")
        s = self.input_size
        if x.ndim != 4 or tuple(x.shape[1:]) != (3, s, s):
            raise InvalidInputError(f"`x` must have shape (n, 3, {s}, {s}); got {tuple(x.shape)}.")
        emb = self._embed(x.to(self._device, torch.float32))  # (n, dim)
        return torch.nn.functional.normalize(emb, dim=1) if normalize else emb

    def _encode(self, crops: npt.NDArray[np.uint8], normalize: bool) -> npt.NDArray[np.float32]:
        import torch

        out = np.zeros((crops.shape[0], self.dim), np.float32)
        with torch.inference_mode():
            for start in range(0, crops.shape[0], self.batch_size):
                part = torch.from_numpy(crops[start : start + self.batch_size])
                x = part.to(self._device).permute(0, 3, 1, 2).float() / 255.0  # (b, 3, s, s)
                emb = self.forward(x, normalize=normalize)  # (b, dim)
                out[start : start + part.shape[0]] = emb.cpu().numpy()
        return out

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r}, dim={self.dim}, device={self.device!r})"


class InceptionResnetV1Encoder(_TorchEncoder):
    """facenet-pytorch InceptionResnetV1 with local VGGFace2 weights: 160×160 → 512-d.

    Parameters
    ----------
    weights : str or os.PathLike, optional
        ``20180402-114759-vggface2.pt`` or its folder. Default:
        ``$IDAUDIT_WEIGHTS/facenet_vggface2/20180402-114759-vggface2.pt``.
    device : str, default "cpu"
        ``"cpu"`` or ``"cuda[:i]"``; CUDA must be available when asked for. Stored as
        ``"cpu"`` or ``"cuda:<index>"``.
    batch_size : int, default 64
        Crops per forward pass in :meth:`encode`.
    verify : bool, default True
        Check the SHA-256 when the registry pins one.

    Attributes
    ----------
    seed_l2_radius : float
        25.0: the L2 attack radius seed 002 uses against FaceNet on 3×256×256 latents (Tab. II;
        35 for the other models). :class:`~idaudit.inversion.RankedAdversary` scales it to
        the generator's latent.

    Notes
    -----
    The state dict is read with ``torch.load(weights_only=True)`` into
    ``facenet_pytorch.InceptionResnetV1(pretrained=None)``, which never downloads; the
    classifier entries (``logits.*``) are dropped. Input: RGB, ``(x - 127.5) / 128`` (facenet's
    fixed image standardisation), 160×160 crops from the 5-point alignment. facenet-pytorch's
    network already L2-normalises its output, so ``normalize=False`` changes nothing here.

    References
    ----------
    .. [1] F. Schroff, D. Kalenichenko, J. Philbin, "FaceNet: A unified embedding for face
       recognition and clustering", CVPR 2015.
    .. [2] Q. Cao et al., "VGGFace2: A dataset for recognising faces across pose and age",
       FG 2018.

    Examples
    --------
    >>> enc = InceptionResnetV1Encoder("~/weights/facenet_vggface2")  # doctest: +SKIP
    >>> enc.forward(torch.rand(2, 3, 160, 160, requires_grad=True)).shape  # doctest: +SKIP
    torch.Size([2, 512])
    """

    #: Seed 002, Tab. II: the FaceNet row's L2 radius (the other models': 35).
    seed_l2_radius = 25.0

    def __init__(
        self,
        weights: str | os.PathLike[str] | None = None,
        *,
        device: str = "cpu",
        batch_size: int = 64,
        verify: bool = True,
    ) -> None:
        import torch

        try:
            from facenet_pytorch import InceptionResnetV1
        except ImportError as err:  # pragma: no cover - installed by scripts/install.sh
            raise ImportError(
                f"InceptionResnetV1Encoder needs facenet-pytorch: {FACES_EXTRA} "
                "(scripts/install.sh adds facenet-pytorch with --no-deps)."
            ) from err
        self._device = resolve_device(device)
        self.batch_size = check_integer(batch_size, "batch_size", minimum=1)
        self.weights_path = resolve_weights(
            "facenet_vggface2", None, weights, verify=verify, argument="weights"
        )
        state = load_checkpoint(self.weights_path)
        if not isinstance(state, Mapping):
            raise InvalidInputError(f"{self.weights_path} does not hold a state dict.")
        state = {k: v for k, v in state.items() if not k.startswith("logits.")}
        with torch.device("meta"):  # no random init: every tensor comes from the file
            model = InceptionResnetV1(pretrained=None, classify=False)
        load_exact(model, state, self.weights_path, assign=True, what="InceptionResnetV1")
        self.model = model.eval().requires_grad_(False).to(self._device)
        self.name = "facenet-vggface2"
        self.dim = 512
        self.input_size = 160
        self.device = device_name(self._device)

    def _embed(self, x: torch.Tensor) -> torch.Tensor:
        out: torch.Tensor = self.model((x * 255.0 - 127.5) / 128.0)  # (n, 512)
        return out


#: Blocks in an AdaFace IR checkpoint by depth (used to recognise the architecture).
_IR_DEPTH_BY_BLOCKS = {8: 18, 16: 34, 24: 50, 49: 100}


class AdaFaceEncoder(_TorchEncoder):
    """AdaFace IR checkpoint (default IR-50, MS1MV2) in idaudit's IR network: 112×112 → 512-d.

    Parameters
    ----------
    weights : str or os.PathLike, optional
        The ``.ckpt`` file or its folder. Default:
        ``$IDAUDIT_WEIGHTS/adaface_ir50/adaface_ir50_ms1mv2.ckpt``.
    device : str, default "cpu"
        ``"cpu"`` or ``"cuda[:i]"``; CUDA must be available when asked for. Stored as
        ``"cpu"`` or ``"cuda:<index>"``.
    batch_size : int, default 64
        Crops per forward pass in :meth:`encode`.
    verify : bool, default True
        Check the SHA-256 when the registry pins one.

    Notes
    -----
    The checkpoint is read with ``torch.load(weights_only=True)``. Its ``state_dict`` entries
    prefixed ``model.`` are the backbone (the prefix is stripped), ``head.`` entries (the
    AdaFace margin head used in training) are ignored; a bare backbone state dict is accepted
    too. The depth (18/34/50/100) is read from the number of residual blocks, and every backbone
    key must match by name and shape. Input: BGR channel order, ``(x / 255 - 0.5) / 0.5``, as
    AdaFace's own ``to_input``; crops aligned on the ArcFace 112×112 template (AdaFace's
    reference points are the same). The network returns a unit vector and the feature norm
    (AdaFace's quality proxy); ``normalize=False`` gives their product, the raw feature.

    References
    ----------
    .. [1] M. Kim, A. K. Jain, X. Liu, "AdaFace: Quality adaptive margin for face recognition",
       CVPR 2022.

    Examples
    --------
    >>> enc = AdaFaceEncoder("~/weights/adaface_ir50")  # doctest: +SKIP
    >>> enc.forward(torch.rand(2, 3, 112, 112, requires_grad=True)).shape  # doctest: +SKIP
    torch.Size([2, 512])
    """

    def __init__(
        self,
        weights: str | os.PathLike[str] | None = None,
        *,
        device: str = "cpu",
        batch_size: int = 64,
        verify: bool = True,
    ) -> None:
        import torch

        from idaudit.faces._iresnet import IResNet

        self._device = resolve_device(device)
        self.batch_size = check_integer(batch_size, "batch_size", minimum=1)
        self.weights_path = resolve_weights(
            "adaface_ir50", None, weights, verify=verify, argument="weights"
        )
        ckpt = load_checkpoint(self.weights_path)
        raw = ckpt.get("state_dict", ckpt) if isinstance(ckpt, Mapping) else None
        if not isinstance(raw, Mapping):
            raise InvalidInputError(
                f"{self.weights_path} must hold {{'state_dict': {{...}}}} or a state dict."
            )
        if any(k.startswith("model.") for k in raw):
            state = {k[len("model.") :]: v for k, v in raw.items() if k.startswith("model.")}
        else:
            state = {k: v for k, v in raw.items() if not k.startswith("head.")}
        n_blocks = len({k.split(".")[1] for k in state if k.startswith("body.")})
        if n_blocks not in _IR_DEPTH_BY_BLOCKS:
            raise InvalidInputError(
                f"{self.weights_path} has {n_blocks} residual blocks; AdaFace IR networks have "
                "8, 16, 24 or 49 (IR-18/34/50/100)."
            )
        depth = _IR_DEPTH_BY_BLOCKS[n_blocks]
        with torch.device("meta"):  # no random init: every tensor comes from the file
            model = IResNet(depth)
        load_exact(
            model, state, self.weights_path, assign=True, prefix="model.", what=f"IR-{depth}"
        )
        self.model = model.eval().requires_grad_(False).to(self._device)
        self.depth = depth
        self.name = f"adaface-ir{101 if depth == 100 else depth}"  # AdaFace calls it IR-101
        self.dim = 512
        self.input_size = 112
        self.device = device_name(self._device)

    def _embed(self, x: torch.Tensor) -> torch.Tensor:
        bgr = x.flip(1)  # AdaFace models take BGR
        unit, norm = self.model((bgr - 0.5) / 0.5)  # (n, 512), (n, 1)
        # the network returns its output split into direction and norm; raw = both together
        out: torch.Tensor = unit * norm  # (n, 512)
        return out
