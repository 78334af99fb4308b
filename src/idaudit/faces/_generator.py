"""The DCGAN face generator shipped in ``gan-face-generate``, and synthetic identities from it.

The generator maps ``z ∈ R^100`` to a 64×64 RGB face (trained on DigiFace-1M). Its samples
are aligned like ArcFace crops: the
median MTCNN landmarks of 376 confident detections on 400 samples lie within 1.4 px of
``arcface_template(64)`` (the largest offset: the nose tip, 1.4 px lower). The module uses that
fact to hand generated faces to any encoder without running a detector.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from idaudit._device import resolve_device
from idaudit._validation import RngLike, check_in_range, check_integer, check_random_state
from idaudit.exceptions import InvalidInputError
from idaudit.faces._align import arcface_template
from idaudit.faces._io import FRAME_PAD_FRACTION, enlarge_frame
from idaudit.faces._types import Encoder, Face

if TYPE_CHECKING:
    import torch

__all__ = ["ShippedFaceGenerator", "SyntheticIdentities", "synthetic_identities"]

_LATENT_DIM = 100
_IMAGE_SIZE = 64
# Feature maps of the four transposed-convolution stages (4 → 8 → 16 → 32 pixels), then RGB.
_WIDTHS = (512, 256, 128, 64)


def _build_network() -> Any:
    """Build the DCGAN generator of Radford et al. (2016) for 64×64 outputs.

    ``z (100×1×1)`` → ConvT 4×4/1 → 512×4×4 → [ConvT 4×4/2 pad 1 → BN → ReLU] three times
    (256×8×8, 128×16×16, 64×32×32) → ConvT 4×4/2 pad 1 → 3×64×64 → tanh. No convolution has a
    bias (each is followed by batch norm, except the last). The layers sit in one
    ``nn.Sequential`` called ``main`` so that parameter names match the shipped state dict
    (``main.0.weight`` ... ``main.12.weight``).
    """
    from torch import nn

    class _DCGANGenerator(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            layers: list[nn.Module] = []
            in_ch = _LATENT_DIM
            for i, out_ch in enumerate(_WIDTHS):
                stride, pad = (1, 0) if i == 0 else (2, 1)
                layers += [
                    nn.ConvTranspose2d(in_ch, out_ch, 4, stride, pad, bias=False),
                    nn.BatchNorm2d(out_ch),
                    nn.ReLU(inplace=True),
                ]
                in_ch = out_ch
            layers += [nn.ConvTranspose2d(in_ch, 3, 4, 2, 1, bias=False), nn.Tanh()]
            self.main = nn.Sequential(*layers)

        def forward(self, z: torch.Tensor) -> torch.Tensor:
            return self.main(z)  # type: ignore[no-any-return]

    return _DCGANGenerator()


class ShippedFaceGenerator:
    """A pretrained DCGAN face generator (``z ∈ R^100`` → 64×64 RGB) that ships with pip.

    The weights are ``weights.tar`` from the ``gan-face-generate`` package (trained on the
    synthetic DigiFace-1M faces), read with ``torch.load(weights_only=True)`` into this
    module's own network definition; nothing else of that package is imported.

    Parameters
    ----------
    device : {"cpu", "cuda"} or torch.device, default "cpu"
        Where the network runs; ``"cuda"`` without CUDA raises.
    batch_size : int, default 256
        Latents per forward pass in :meth:`generate`.
    weights : str or os.PathLike, optional
        A ``weights.tar`` (or its folder) instead of the shipped copy.
    verify : bool, default True
        Check the file against the SHA-256 of the published copy; ``False`` loads any file
        holding ``{"netG_state_dict": ...}`` of this network.

    Attributes
    ----------
    latent_dim : int
        100.
    image_size : int
        64.
    network : torch.nn.Module
        The generator, in eval mode (batch norm uses its running statistics) with frozen
        parameters; gradients flow to ``z`` through :meth:`forward`.

    Notes
    -----
    The file is a dict ``{"netG_state_dict": state_dict}`` of plain tensors, so the safe
    ``weights_only`` unpickler reads it without any allow-listing. Outputs are aligned like
    ArcFace crops (see the module docstring), so :meth:`crops` aligns them for an encoder
    without detection.

    References
    ----------
    A. Radford, L. Metz, S. Chintala, "Unsupervised representation learning with deep
    convolutional generative adversarial networks", ICLR 2016. G. Bae et al., "DigiFace-1M:
    1 million digital face images for face recognition", WACV 2023.

    Examples
    --------
    >>> from idaudit.faces import ShippedFaceGenerator
    >>> gen = ShippedFaceGenerator()
    >>> images = gen.sample(2, rng=0)
    >>> images.shape, images.dtype
    ((2, 64, 64, 3), dtype('uint8'))
    """

    latent_dim = _LATENT_DIM
    image_size = _IMAGE_SIZE

    def __init__(
        self,
        device: str | torch.device = "cpu",
        *,
        batch_size: int = 256,
        weights: str | os.PathLike[str] | None = None,
        verify: bool = True,
    ) -> None:
        import torch

        from idaudit.faces._weights import resolve_weights

        self.device = resolve_device(device)
        self.batch_size = check_integer(batch_size, "batch_size", minimum=1)
        self.weights = weights
        path = resolve_weights(
            "dcgan_faces", "weights.tar", weights, verify=bool(verify), argument="weights"
        )
        checkpoint = torch.load(path, map_location="cpu", weights_only=True)
        if not isinstance(checkpoint, dict) or "netG_state_dict" not in checkpoint:
            raise InvalidInputError(
                f"`weights` {os.fspath(path)!r} must hold a dict with key 'netG_state_dict'."
            )
        network = _build_network()
        network.load_state_dict(checkpoint["netG_state_dict"])
        network.eval().requires_grad_(False)
        self.network = network.to(self.device)

    def __repr__(self) -> str:
        return f"ShippedFaceGenerator(device={str(self.device)!r})"

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        """Differentiable generation.

        Parameters
        ----------
        z : torch.Tensor, shape (n, 100) or (n, 100, 1, 1)
            Latents (on :attr:`device`; any float dtype is cast to float32).

        Returns
        -------
        torch.Tensor, shape (n, 3, 64, 64)
            RGB in [0, 1] (``(tanh + 1) / 2``), the input range of every encoder's
            ``forward``.
        """
        import torch

        if not isinstance(z, torch.Tensor):
            raise TypeError(f"`z` must be a torch.Tensor; got {type(z).__name__}.")
        if z.ndim == 2:
            z = z[:, :, None, None]
        if z.ndim != 4 or z.shape[1:] != (self.latent_dim, 1, 1):
            raise InvalidInputError(
                f"`z` must have shape (n, {self.latent_dim}) or (n, {self.latent_dim}, 1, 1); "
                f"got {tuple(z.shape)}."
            )
        x = self.network(z.to(device=self.device, dtype=torch.float32))  # (n, 3, 64, 64)
        out: torch.Tensor = (x + 1.0) / 2.0
        return out

    __call__ = forward

    def generate(self, z: npt.ArrayLike) -> npt.NDArray[np.uint8]:
        """Images for the latents ``z``.

        Parameters
        ----------
        z : array_like, shape (n, 100)
            Latent codes.

        Returns
        -------
        numpy.ndarray of uint8, shape (n, 64, 64, 3)
            RGB, ``round(255 · (tanh + 1) / 2)``.
        """
        import torch

        codes = _check_latents(z, self.latent_dim)
        out = np.empty((codes.shape[0], self.image_size, self.image_size, 3), dtype=np.uint8)
        with torch.inference_mode():
            for s in range(0, codes.shape[0], self.batch_size):
                batch = torch.from_numpy(codes[s : s + self.batch_size])  # (b, 100)
                x = self.forward(batch)  # (b, 3, 64, 64) in [0, 1]
                pixels = (x * 255.0).round().clamp(0, 255).to(torch.uint8)
                out[s : s + self.batch_size] = pixels.permute(0, 2, 3, 1).cpu().numpy()
        return out

    def sample_latents(self, n: int, *, rng: RngLike = None) -> npt.NDArray[np.float32]:
        """Draw ``n`` latents ``z ~ N(0, I_100)`` with numpy (same ``rng`` → same ``z`` anywhere).

        Returns
        -------
        numpy.ndarray of float32, shape (n, 100)
        """
        n = check_integer(n, "n", minimum=0)
        gen = check_random_state(rng)
        return gen.standard_normal((n, self.latent_dim)).astype(np.float32)

    def sample(self, n: int, *, rng: RngLike = None) -> npt.NDArray[np.uint8]:
        """Generate ``n`` random faces, ``generate(sample_latents(n, rng=rng))``.

        Returns
        -------
        numpy.ndarray of uint8, shape (n, 64, 64, 3)
        """
        return self.generate(self.sample_latents(n, rng=rng))

    def crops(
        self, images: npt.NDArray[np.uint8], encoder: Encoder, *, upscale: int = 160
    ) -> npt.NDArray[np.uint8]:
        """Align generated faces for ``encoder`` without running a detector.

        Parameters
        ----------
        images : numpy.ndarray of uint8, shape (n, 64, 64, 3)
            Outputs of :meth:`generate`.
        encoder : Encoder
            Its ``align`` cuts the crops.
        upscale : int, default 160
            Side the 64-pixel image is enlarged to (bicubic) before alignment.

        Returns
        -------
        numpy.ndarray of uint8, shape (n, encoder.input_size, encoder.input_size, 3)

        Notes
        -----
        Each image is enlarged to ``upscale`` pixels and padded by ``0.3 · upscale`` pixels of
        edge replication on every side (alignment templates with a margin, like dlib's, reach
        past the 64-pixel frame, and black borders would change the embedding). The face
        passed to ``encoder.align`` has the ArcFace template scaled to the enlarged frame as
        landmarks (the generator's outputs are aligned so; module docstring) and the frame
        inset by 10% on each side as box (what box-based aligners such as dlib's need).
        """
        batch = np.asarray(images)
        if batch.dtype != np.uint8 or batch.ndim != 4 or batch.shape[3] != 3:
            raise InvalidInputError(
                f"`images` must be uint8 of shape (n, H, W, 3); got {batch.dtype} {batch.shape}."
            )
        upscale = check_integer(upscale, "upscale", minimum=16)
        face = _frame_face(upscale)
        out = [encoder.align(enlarge_frame(im, upscale, square=True), face) for im in batch]
        size = int(getattr(encoder, "input_size", 0))
        if not out:
            return np.zeros((0, size, size, 3), dtype=np.uint8)
        return np.stack(out)

    def embed(
        self, images: npt.NDArray[np.uint8], encoder: Encoder, *, upscale: int = 160
    ) -> npt.NDArray[np.float32]:
        """``encoder.encode(self.crops(images, encoder))``: ``(n, encoder.dim)`` embeddings."""
        return np.asarray(encoder.encode(self.crops(images, encoder, upscale=upscale)))


def _frame_face(upscale: int) -> Face:
    """Return the Face of a generated image enlarged to ``upscale`` and padded by 0.3·upscale."""
    pad = round(FRAME_PAD_FRACTION * upscale)
    inset = 0.1 * upscale
    box = np.array([inset, inset, upscale - inset, upscale - inset]) + pad
    return Face(box=box, score=1.0, landmarks=arcface_template(upscale) + pad)


def _check_latents(z: Any, dim: int) -> npt.NDArray[np.float32]:
    try:
        arr = np.asarray(z, dtype=np.float32)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"`z` must be a numeric array of shape (n, {dim}).") from exc
    if arr.ndim != 2 or arr.shape[1] != dim:
        raise InvalidInputError(f"`z` must have shape (n, {dim}); got {arr.shape}.")
    if not np.isfinite(arr).all():
        raise InvalidInputError("`z` must be finite; got NaN or inf.")
    return np.require(arr, requirements=["C", "W"])  # torch.from_numpy needs writable


@dataclass(frozen=True)
class SyntheticIdentities:
    """Faces of synthetic identities: latent neighbourhoods of a face generator.

    Attributes
    ----------
    images : numpy.ndarray of uint8, shape (n_identities · n_per_identity, 64, 64, 3)
        Identity-major order: the members of identity 0, then of identity 1, ...
    labels : numpy.ndarray of int64, shape (n,)
        Identity of each image, ``0 … n_identities − 1``.
    latents : numpy.ndarray of float32, shape (n, 100)
        ``z`` of each image.
    centres : numpy.ndarray of float32, shape (n_identities, 100)
        The identities' centre latents.
    embeddings : numpy.ndarray of float32, shape (n, dim), or None
        ``encoder`` embeddings of ``images`` when an encoder was given.
    spread : float
        Standard deviation of the member offsets.
    min_separation : float or None
        Minimum embedding distance enforced between centres (``None``: not enforced).
    n_candidates : int
        Centre latents drawn to find ``n_identities`` separated ones.
    """

    images: npt.NDArray[np.uint8] = field(repr=False)
    labels: npt.NDArray[np.int64] = field(repr=False)
    latents: npt.NDArray[np.float32] = field(repr=False)
    centres: npt.NDArray[np.float32] = field(repr=False)
    embeddings: npt.NDArray[np.float32] | None = field(repr=False)
    spread: float
    min_separation: float | None
    n_candidates: int

    @property
    def n_identities(self) -> int:
        """Number of identities."""
        return int(self.centres.shape[0])


def synthetic_identities(
    n_identities: int,
    n_per_identity: int,
    spread: float = 0.15,
    *,
    rng: RngLike = 0,
    generator: ShippedFaceGenerator | None = None,
    encoder: Encoder | None = None,
    min_separation: float | None = None,
    max_candidates: int | None = None,
) -> SyntheticIdentities:
    """Labelled faces of made-up people: each identity is a neighbourhood in latent space.

    Identity ``i`` has a centre ``c_i ~ N(0, I_100)`` and members ``z_ij = c_i + spread · ε_ij``,
    ``ε_ij ~ N(0, I_100)``; its images are the generator's outputs for the ``z_ij``.

    Parameters
    ----------
    n_identities : int
        Number of identities (≥ 1).
    n_per_identity : int
        Images per identity (≥ 1).
    spread : float, default 0.15
        Standard deviation of the member offsets around the centre (> 0). With the default,
        members stay inside dlib's same-person distance (see Notes).
    rng : int, SeedSequence or Generator, default 0
        Seed for the centres and offsets.
    generator : ShippedFaceGenerator, optional
        Default: a fresh :class:`ShippedFaceGenerator` on the CPU.
    encoder : Encoder, optional
        When given, the images are also embedded (:meth:`ShippedFaceGenerator.embed`) and
        returned in ``embeddings``.
    min_separation : float, optional
        Needs ``encoder``. Centres are then drawn one by one and kept only if the embedding of
        the centre's image lies at least this far (Euclidean, on the encoder's L2-normalised
        embeddings) from every centre kept before, so that distinct identities look distinct
        to the encoder.
    max_candidates : int, optional
        Most centre candidates drawn when ``min_separation`` is set (default
        ``50 · n_identities``); reaching it raises.

    Returns
    -------
    SyntheticIdentities

    Raises
    ------
    InvalidInputError
        Bad counts or spread, ``min_separation`` without ``encoder``, or not enough
        separated centres within ``max_candidates``.

    Notes
    -----
    Measured with :class:`~idaudit.faces.DlibEncoder` (raw descriptors of the crops from
    :meth:`ShippedFaceGenerator.crops`), five seeds of 4 identities × 4 images with
    ``min_separation=0.5``: at the default ``spread=0.15`` every within-identity distance was
    below dlib's 0.6 (median 0.32) and 98.8% of the cross-identity distances above it (median
    0.73); at ``spread=0.2``, 94% and 98%. Without
    ``min_separation`` only about 90% of cross-identity distances between random centres
    exceed 0.6: a 64-pixel generator has less identity variety than real faces, so pass an
    encoder and ``min_separation`` when distinct identities matter.

    The identity labels are a construction, not a ground truth: use them as a stand-in for a
    labelled face dataset (audits, memorisation checks, inversion targets) where none can be
    downloaded, and say so when reporting.

    Examples
    --------
    >>> from idaudit.faces import synthetic_identities
    >>> ids = synthetic_identities(3, 2, rng=0)
    >>> ids.images.shape, ids.labels.tolist()
    ((6, 64, 64, 3), [0, 0, 1, 1, 2, 2])
    """
    n_identities = check_integer(n_identities, "n_identities", minimum=1)
    n_per_identity = check_integer(n_per_identity, "n_per_identity", minimum=1)
    spread = check_in_range(spread, "spread", 0.0, None)
    if min_separation is not None:
        if encoder is None:
            raise InvalidInputError("`min_separation` needs an `encoder` to measure distances.")
        min_separation = check_in_range(min_separation, "min_separation", 0.0, 2.0, closed="left")
    max_candidates = (
        50 * n_identities
        if max_candidates is None
        else check_integer(max_candidates, "max_candidates", minimum=n_identities)
    )
    gen = check_random_state(rng)
    model = ShippedFaceGenerator() if generator is None else generator
    dim = model.latent_dim

    if min_separation is None:
        centres = gen.standard_normal((n_identities, dim))
        n_candidates = n_identities
    else:
        assert encoder is not None
        centres, n_candidates = _separated_centres(
            model, encoder, n_identities, min_separation, max_candidates, gen
        )
    offsets = gen.standard_normal((n_identities, n_per_identity, dim))
    latents = (centres[:, None, :] + spread * offsets).reshape(-1, dim).astype(np.float32)
    images = model.generate(latents)
    embeddings = None if encoder is None else model.embed(images, encoder).astype(np.float32)
    labels = np.repeat(np.arange(n_identities, dtype=np.int64), n_per_identity)
    return SyntheticIdentities(
        images=images,
        labels=labels,
        latents=latents,
        centres=centres.astype(np.float32),
        embeddings=embeddings,
        spread=spread,
        min_separation=min_separation,
        n_candidates=n_candidates,
    )


def _separated_centres(
    model: ShippedFaceGenerator,
    encoder: Encoder,
    n_identities: int,
    min_separation: float,
    max_candidates: int,
    gen: np.random.Generator,
) -> tuple[npt.NDArray[np.float64], int]:
    """Greedy rejection: keep a candidate centre if it is far from every kept one."""
    kept: list[npt.NDArray[np.float64]] = []
    kept_emb: list[npt.NDArray[np.float64]] = []
    drawn = 0
    while len(kept) < n_identities and drawn < max_candidates:
        # Candidates come in chunks of n_identities so that each chunk is embedded in one batch.
        chunk = gen.standard_normal((min(n_identities, max_candidates - drawn), model.latent_dim))
        emb = model.embed(model.generate(chunk), encoder).astype(np.float64)  # (c, dim)
        emb /= np.linalg.norm(emb, axis=1, keepdims=True)
        for z, e in zip(chunk, emb, strict=True):
            drawn += 1
            if all(np.linalg.norm(e - k) >= min_separation for k in kept_emb):
                kept.append(z)
                kept_emb.append(e)
                if len(kept) == n_identities:
                    break
    if len(kept) < n_identities:
        raise InvalidInputError(
            f"`min_separation` {min_separation:g} is too large: only {len(kept)} of "
            f"{n_identities} centres found among {drawn} candidates (`max_candidates`). "
            "Lower it or ask for fewer identities."
        )
    return np.stack(kept), drawn
