"""Latent generators: a diffusion model sampled with deterministic DDIM, and the shipped DCGAN.

Both follow :class:`LatentGenerator`: a latent shape, a differentiable ``forward(latents)`` to
RGB images in [0, 1], a device and a default attack radius.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol, runtime_checkable

import numpy as np
import torch

from idaudit._device import resolve_device
from idaudit._validation import RngLike, check_integer, check_random_state
from idaudit.exceptions import InvalidInputError, MissingWeightsError

if TYPE_CHECKING:  # pragma: no cover
    from idaudit.faces import ShippedFaceGenerator

__all__ = [
    "DDPM_CELEBAHQ_256",
    "DCGANGenerator",
    "DiffusionGenerator",
    "LatentGenerator",
    "check_images",
]

_DIFFUSERS_EXTRA = 'pip install "idaudit[inversion]"'


@runtime_checkable
class LatentGenerator(Protocol):
    """A differentiable map from latent codes to RGB face images.

    Attributes
    ----------
    name : str
        Recorded in results.
    latent_shape : tuple of int
        Shape of one latent code (``(100,)`` for the DCGAN, ``(3, 256, 256)`` for the DDPM).
    image_size : int
        Side of the square output images.
    device : torch.device
        Where ``forward`` runs.
    default_radius : dict of str to float
        The attack radius per norm (``"l2"``, ``"linf"``) used when none is given, and
        optionally GreedyPixel's per-pixel step (``"greedypixel"``; 1.0 when absent).
    """

    name: str
    latent_shape: tuple[int, ...]
    image_size: int
    device: torch.device
    default_radius: dict[str, float]

    def forward(self, latents: torch.Tensor) -> torch.Tensor:
        """Map ``(n, *latent_shape)`` latents to ``(n, 3, image_size, image_size)`` in [0, 1]."""
        ...


def check_images(images: torch.Tensor, generator: Any) -> torch.Tensor:
    """Refuse generator outputs that are not ``(n, 3, H, W)`` RGB floats in [0, 1].

    A generator returning [-1, 1] (the raw tanh or DDPM range) would silently shift every
    embedding, so this is checked on every call.
    """
    if not isinstance(images, torch.Tensor):
        raise TypeError(
            f"generator {getattr(generator, 'name', generator)!r} must return a torch.Tensor; "
            f"got {type(images).__name__}."
        )
    if images.ndim != 4 or images.shape[1] != 3:
        raise InvalidInputError(
            f"generator {getattr(generator, 'name', generator)!r} must return images of shape "
            f"(n, 3, H, W); got {tuple(images.shape)}."
        )
    with torch.no_grad():
        lo, hi = float(images.min()), float(images.max())
    if not (lo >= -1e-6 and hi <= 1.0 + 1e-6):
        raise InvalidInputError(
            f"generator {getattr(generator, 'name', generator)!r} must return pixels in [0, 1]; "
            f"got values in [{lo:.4g}, {hi:.4g}] (map [-1, 1] outputs with (x + 1) / 2)."
        )
    return images


def _import_diffusers() -> Any:
    try:
        import diffusers
    except ImportError as exc:
        raise ImportError(f"DiffusionGenerator needs diffusers: {_DIFFUSERS_EXTRA}") from exc
    return diffusers


#: The published ``google/ddpm-celebahq-256`` model: ``UNet2DModel`` and scheduler settings as
#: listed in its ``config.json`` and ``scheduler_config.json`` (the 256×256 DDPM of Ho et al.
#: 2020, Appendix B: 128 base channels, multipliers (1, 1, 2, 2, 4, 4), two residual blocks per
#: resolution, self-attention at 16×16; linear β from 1e-4 to 0.02 over T = 1000).
DDPM_CELEBAHQ_256: dict[str, dict[str, Any]] = {
    "unet": {
        "sample_size": 256,
        "in_channels": 3,
        "out_channels": 3,
        "center_input_sample": False,
        "time_embedding_type": "positional",
        "freq_shift": 1,
        "flip_sin_to_cos": False,
        "down_block_types": (
            "DownBlock2D",
            "DownBlock2D",
            "DownBlock2D",
            "DownBlock2D",
            "AttnDownBlock2D",
            "DownBlock2D",
        ),
        "up_block_types": (
            "UpBlock2D",
            "AttnUpBlock2D",
            "UpBlock2D",
            "UpBlock2D",
            "UpBlock2D",
            "UpBlock2D",
        ),
        "block_out_channels": (128, 128, 256, 256, 512, 512),
        "layers_per_block": 2,
        "mid_block_scale_factor": 1,
        "downsample_padding": 0,
        "act_fn": "silu",
        "attention_head_dim": None,
        "norm_num_groups": 32,
        "norm_eps": 1e-6,
    },
    "scheduler": {
        "num_train_timesteps": 1000,
        "beta_start": 0.0001,
        "beta_end": 0.02,
        "beta_schedule": "linear",
        "clip_sample": True,
    },
}

_CONFIGS = {"ddpm-celebahq-256": DDPM_CELEBAHQ_256}


class DiffusionGenerator(torch.nn.Module):
    """A pretrained diffusion UNet sampled by deterministic DDIM (η = 0): ``x_T`` → image.

    The sampler is written out here (not a pipeline call) so that the whole chain from the
    latent ``x_T`` to the image is one differentiable torch graph; each DDIM step can be
    recomputed in the backward pass (gradient checkpointing), which keeps activation memory
    flat in the number of steps.

    Parameters
    ----------
    unet : diffusers.UNet2DModel
        The noise-prediction network ``ε_θ(x_t, t)``; frozen and put in eval mode.
    scheduler : diffusers scheduler
        Any scheduler with ``alphas_cumprod``, ``config.num_train_timesteps`` and
        ``set_timesteps`` (``DDIMScheduler``, or a ``DDPMScheduler``'s config through
        ``DDIMScheduler.from_config``); its ``clip_sample`` setting is honoured.
    num_inference_steps : int, default 20
        DDIM steps.
    checkpointing : bool, default True
        Recompute each step in the backward pass instead of storing its activations.
    gradient : {"full", "shortcut", "shortcut_unmasked"}, default "full"
        What the backward pass through :meth:`forward` computes. ``"full"``: the exact
        gradient through every DDIM step and the UNet. ``"shortcut"``: the chain is sampled
        without a graph and the image's gradient is carried straight to the latent,
        ``∂L/∂x_T = 0.5 · ∂L/∂x̂ · 1[0 < x̂ < 1]`` (the UNet's Jacobian skipped; pixels
        clipped to 0 or 1 pass none): the gradient DiffMI's sampling loop computes, its final
        ``clamp`` stopping it at clipped pixels. ``"shortcut_unmasked"``: ``0.5 · ∂L/∂x̂`` on
        every pixel, clipped ones included (a straight-through clamp; no reference's).
        Both shortcuts need ``latent_shape == (3, H, W)``. The forward values are the same
        whichever is chosen.
    device : str or torch.device, optional
        Default: the UNet's device. ``"cuda"`` without CUDA raises.
    dtype : torch.dtype, default torch.float32
        UNet compute dtype (``torch.bfloat16`` halves memory on GPUs; the DDIM arithmetic stays
        in float32).

    Attributes
    ----------
    latent_shape : tuple of int
        ``(in_channels, sample_size, sample_size)``.
    timesteps : torch.Tensor
        The DDIM timesteps, from noisiest to cleanest.
    default_radius : dict
        ``{"l2": 35.0, "linf": 0.15, "greedypixel": 1.0}`` for 3×256×256 latents (seed 002,
        Tab. II and Tab. X; GreedyPixel's step is the authors' setting; FaceNet-family
        encoders declare their own L2 radius, 25, through ``seed_l2_radius``);
        for other latent sizes the L2 radius keeps the same per-coordinate RMS
        (``35 · sqrt(d / 196608)``) — a starting point only, calibrate it
        (:func:`~idaudit.inversion.calibrate_radius`).
    seed_radius_scale : float
        ``sqrt(d / 196608)``: seed 002's L2 radii (given for 3×256×256 latents) times this
        give this generator's.

    Notes
    -----
    With ``ᾱ_t`` the cumulative product of ``1 − β``, one DDIM step (Song et al. 2021, Eq. 12
    with σ_t = 0) is ``x̂_0 = (x_t − √(1 − ᾱ_t) ε_θ(x_t, t)) / √ᾱ_t`` (clipped to [−1, 1]
    when the scheduler says so) and ``x_{t'} = √ᾱ_{t'} x̂_0 + √(1 − ᾱ_{t'}) ε_θ``, with
    ``ᾱ_{t'} = 1`` after the last step. The image is ``(x̂_0 + 1) / 2`` of the last step.
    This is ``DDIMScheduler.step(eta=0)`` for ``set_alpha_to_one=True`` (checked in the
    tests against diffusers' own loop).

    References
    ----------
    J. Ho, A. Jain, P. Abbeel, "Denoising diffusion probabilistic models", NeurIPS 2020.
    J. Song, C. Meng, S. Ermon, "Denoising diffusion implicit models", ICLR 2021.

    Examples
    --------
    >>> import torch
    >>> from diffusers import DDIMScheduler, UNet2DModel
    >>> from idaudit.inversion import DiffusionGenerator
    >>> torch.manual_seed(0)  # doctest: +ELLIPSIS
    <torch._C.Generator object at ...>
    >>> unet = UNet2DModel(sample_size=16, block_out_channels=(8, 16), norm_num_groups=4,
    ...                    layers_per_block=1, down_block_types=("DownBlock2D", "DownBlock2D"),
    ...                    up_block_types=("UpBlock2D", "UpBlock2D"))
    >>> gen = DiffusionGenerator(unet, DDIMScheduler(), num_inference_steps=2)
    >>> gen.forward(torch.randn(1, 3, 16, 16)).shape
    torch.Size([1, 3, 16, 16])
    """

    name = "ddim"

    def __init__(
        self,
        unet: Any,
        scheduler: Any,
        num_inference_steps: int = 20,
        *,
        checkpointing: bool = True,
        gradient: Literal["full", "shortcut", "shortcut_unmasked"] = "full",
        device: str | torch.device | None = None,
        dtype: torch.dtype = torch.float32,
    ) -> None:
        super().__init__()
        self.num_inference_steps = check_integer(
            num_inference_steps, "num_inference_steps", minimum=1
        )
        if not hasattr(scheduler, "alphas_cumprod") or not hasattr(scheduler, "set_timesteps"):
            raise TypeError(
                "`scheduler` must be a diffusers scheduler with `alphas_cumprod` and "
                f"`set_timesteps`; got {type(scheduler).__name__}."
            )
        config = getattr(unet, "config", None)
        if config is None or not hasattr(config, "sample_size"):
            raise TypeError(f"`unet` must be a diffusers UNet2DModel; got {type(unet).__name__}.")
        self.checkpointing = bool(checkpointing)
        if gradient not in ("full", "shortcut", "shortcut_unmasked"):
            raise InvalidInputError(
                "`gradient` must be 'full', 'shortcut' or 'shortcut_unmasked'; got "
                f"{gradient!r}."
            )
        self.gradient = gradient
        first = next(unet.parameters())
        self.device = resolve_device(first.device if device is None else device)
        self.dtype = dtype
        unet = unet.to(self.device)
        if first.dtype != dtype:  # cast only when asked: diffusers warns on any dtype cast
            unet = unet.to(dtype=dtype)
        self.unet = unet.eval().requires_grad_(False)
        self.scheduler = scheduler
        size = config.sample_size
        size = int(size if isinstance(size, int) else size[0])
        self.image_size = size
        self.latent_shape = (int(config.in_channels), size, size)
        if gradient != "full" and self.latent_shape[0] != 3:
            raise InvalidInputError(
                f"`gradient={gradient!r}` carries the image gradient to the latent, so the latent "
                f"must be an image: (3, H, W); got {self.latent_shape}."
            )
        scheduler.set_timesteps(self.num_inference_steps)
        steps = torch.as_tensor(scheduler.timesteps).long().cpu()
        n_train = int(scheduler.config.num_train_timesteps)
        alphas = torch.as_tensor(scheduler.alphas_cumprod, dtype=torch.float64).cpu()
        # previous timestep as DDIMScheduler computes it ("leading" spacing by default)
        prev = steps - n_train // self.num_inference_steps
        a_t = alphas[steps]
        final = float(getattr(scheduler, "final_alpha_cumprod", 1.0))
        a_prev = torch.where(prev >= 0, alphas[prev.clamp(min=0)], torch.full_like(a_t, final))
        self.timesteps = steps
        self._a_t = a_t.float().tolist()
        self._a_prev = a_prev.float().tolist()
        self.clip_sample = bool(getattr(scheduler.config, "clip_sample", False))
        self.clip_sample_range = float(getattr(scheduler.config, "clip_sample_range", 1.0))
        d = int(np.prod(self.latent_shape))
        self.seed_radius_scale = float(np.sqrt(d / (3 * 256 * 256)))
        self.default_radius = {
            "l2": 35.0 * self.seed_radius_scale,
            "linf": 0.15,
            "greedypixel": 1.0,
        }

    def __repr__(self) -> str:
        return (
            f"DiffusionGenerator(latent_shape={self.latent_shape}, "
            f"num_inference_steps={self.num_inference_steps}, gradient={self.gradient!r}, "
            f"device={str(self.device)!r})"
        )

    @classmethod
    def from_pretrained(
        cls,
        path: str | os.PathLike[str],
        num_inference_steps: int = 20,
        *,
        device: str | torch.device = "cpu",
        **kwargs: Any,
    ) -> DiffusionGenerator:
        """Load a UNet and its scheduler from a local folder, once (never downloads).

        Parameters
        ----------
        path : path
            A diffusers folder: ``config.json`` + weights (+ ``scheduler_config.json``) at its
            top, as in ``google/ddpm-celebahq-256``, or ``unet/`` and ``scheduler/`` sub-folders
            as in a saved pipeline.
        num_inference_steps : int, default 20
        device : str or torch.device, default "cpu"
        **kwargs
            Passed to the constructor (``checkpointing``, ``gradient``, ``dtype``).

        Raises
        ------
        MissingWeightsError
            If ``path`` holds no UNet config.
        """
        diffusers = _import_diffusers()
        root = Path(path)
        unet_dir = root / "unet" if (root / "unet" / "config.json").is_file() else root
        if not (unet_dir / "config.json").is_file():
            raise MissingWeightsError(
                f"no diffusers UNet found at {os.fspath(root)!r} (expected config.json and "
                "diffusion_pytorch_model.safetensors or .bin there or in unet/). The published "
                "CelebA-HQ model is google/ddpm-celebahq-256 on the Hugging Face Hub; download "
                "it yourself and pass its folder."
            )
        unet = diffusers.UNet2DModel.from_pretrained(unet_dir, local_files_only=True)
        sched_dir = root / "scheduler" if (root / "scheduler").is_dir() else root
        if (sched_dir / "scheduler_config.json").is_file():
            config = diffusers.DDIMScheduler.load_config(sched_dir, local_files_only=True)
            scheduler = diffusers.DDIMScheduler.from_config(config)
        else:
            scheduler = diffusers.DDIMScheduler(**DDPM_CELEBAHQ_256["scheduler"])
        return cls(unet, scheduler, num_inference_steps, device=device, **kwargs)

    @classmethod
    def from_config(
        cls,
        name: str = "ddpm-celebahq-256",
        num_inference_steps: int = 20,
        *,
        device: str | torch.device = "cpu",
        seed: int = 0,
        **kwargs: Any,
    ) -> DiffusionGenerator:
        """Build a published architecture with random weights (for timing and memory only).

        Parameters
        ----------
        name : {"ddpm-celebahq-256"}
            See :data:`DDPM_CELEBAHQ_256`.
        seed : int, default 0
            Seeds the weight initialisation (a local ``torch.Generator`` state, restored after).

        Notes
        -----
        The images of a random UNet are noise: use this to measure time and memory, never
        attack quality.
        """
        if name not in _CONFIGS:
            raise InvalidInputError(f"`name` must be one of {sorted(_CONFIGS)}; got {name!r}.")
        diffusers = _import_diffusers()
        config = _CONFIGS[name]
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(check_integer(seed, "seed", minimum=0))
            unet = diffusers.UNet2DModel(**config["unet"])
        scheduler = diffusers.DDIMScheduler(**config["scheduler"])
        return cls(unet, scheduler, num_inference_steps, device=device, **kwargs)

    def _step(self, x: torch.Tensor, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        t = int(self.timesteps[i])
        a_t, a_prev = self._a_t[i], self._a_prev[i]
        tt = torch.full((x.shape[0],), t, device=x.device, dtype=torch.long)
        eps = self.unet(x.to(self.dtype), tt).sample.float()  # (n, 3, H, W)
        x0 = (x - (1.0 - a_t) ** 0.5 * eps) / a_t**0.5
        if self.clip_sample:
            x0 = x0.clamp(-self.clip_sample_range, self.clip_sample_range)
        x_prev = a_prev**0.5 * x0 + (1.0 - a_prev) ** 0.5 * eps
        return x_prev, x0

    def forward(self, latents: torch.Tensor) -> torch.Tensor:
        """Run DDIM from ``x_T = latents`` and return images in [0, 1].

        Parameters
        ----------
        latents : torch.Tensor, shape (n, *latent_shape)

        Returns
        -------
        torch.Tensor, shape (n, 3, image_size, image_size)
            The same values for either ``gradient``; only the backward pass differs.
        """
        x = _check_tensor(latents, self.latent_shape).to(self.device, torch.float32)
        if self.gradient != "full" and torch.is_grad_enabled() and x.requires_grad:
            with torch.no_grad():
                image = self._sample(x)  # (n, 3, H, W), no graph
            # straight-through: value `image`, gradient 0.5 · 1[0 < image < 1] to x (DiffMI's
            # loop: its final clamp passes none at clipped pixels), or 0.5 everywhere
            if self.gradient == "shortcut":
                inside = ((image > 0.0) & (image < 1.0)).to(x.dtype)
                return image + 0.5 * inside * (x - x.detach())
            return image + 0.5 * (x - x.detach())
        return self._sample(x)

    def _sample(self, x: torch.Tensor) -> torch.Tensor:
        from torch.utils.checkpoint import checkpoint

        x0 = x
        for i in range(len(self.timesteps)):
            if self.checkpointing and torch.is_grad_enabled() and x.requires_grad:
                x, x0 = checkpoint(self._step, x, i, use_reentrant=False)
            else:
                x, x0 = self._step(x, i)
        return ((x0 + 1.0) / 2.0).clamp(0.0, 1.0)

    def sample_latents(self, n: int, rng: RngLike = None) -> torch.Tensor:
        """``n`` codes ``x_T ~ N(0, I)`` from a ``torch.Generator`` on :attr:`device`.

        The same ``rng`` gives the same codes on the same device type.
        """
        return _torch_normal(n, self.latent_shape, self.device, rng)


class DCGANGenerator:
    """The shipped 64×64 DCGAN (:class:`~idaudit.faces.ShippedFaceGenerator`) as a latent generator.

    Parameters
    ----------
    generator : ShippedFaceGenerator, optional
        Default: a fresh one on ``device``.
    device : str or torch.device, default "cpu"

    Attributes
    ----------
    default_radius : dict
        ``{"l2": 2.5, "linf": 0.5, "greedypixel": 0.5}``, chosen from
        :func:`~idaudit.inversion.calibrate_radius` tables (docs/inversion.md gives the runs and
        the reasoning); the seed's radius rescaled to 100 dimensions (≈ 0.79) barely moves the
        images. GreedyPixel moves each coordinate by ±step, an L∞ ball, so its step is the
        calibrated L∞ radius (at 1.0 only 0.625 of the codes stay detectable).

    Examples
    --------
    >>> import torch
    >>> from idaudit.inversion import DCGANGenerator
    >>> gen = DCGANGenerator()
    >>> gen.forward(torch.zeros(2, 100)).shape
    torch.Size([2, 3, 64, 64])
    """

    name = "dcgan-faces-64"
    latent_shape: tuple[int, ...] = (100,)
    image_size = 64

    def __init__(
        self,
        generator: ShippedFaceGenerator | None = None,
        *,
        device: str | torch.device = "cpu",
    ) -> None:
        from idaudit.faces import ShippedFaceGenerator

        self.generator = ShippedFaceGenerator(device) if generator is None else generator
        self.device = self.generator.device
        self.default_radius = dict(DCGAN_RADIUS)

    def __repr__(self) -> str:
        return f"DCGANGenerator(device={str(self.device)!r})"

    def forward(self, latents: torch.Tensor) -> torch.Tensor:
        """``(n, 100)`` latents → ``(n, 3, 64, 64)`` images in [0, 1] (differentiable)."""
        z = _check_tensor(latents, self.latent_shape)
        return self.generator.forward(z)

    __call__ = forward

    def sample_latents(self, n: int, rng: RngLike = None) -> torch.Tensor:
        """``n`` codes ``z ~ N(0, I_100)`` from a ``torch.Generator`` on :attr:`device`."""
        return _torch_normal(n, self.latent_shape, self.device, rng)


#: Default radii of the DCGAN prior (see :func:`~idaudit.inversion.calibrate_radius`).
DCGAN_RADIUS: dict[str, float] = {"l2": 2.5, "linf": 0.5, "greedypixel": 0.5}


def _check_tensor(latents: Any, shape: tuple[int, ...]) -> torch.Tensor:
    if not isinstance(latents, torch.Tensor):
        raise TypeError(f"`latents` must be a torch.Tensor; got {type(latents).__name__}.")
    if latents.ndim != len(shape) + 1 or tuple(latents.shape[1:]) != shape:
        raise InvalidInputError(
            f"`latents` must have shape (n, {', '.join(map(str, shape))}); "
            f"got {tuple(latents.shape)}."
        )
    if not latents.is_floating_point():
        raise TypeError(f"`latents` must be floating point; got {latents.dtype}.")
    return latents


def _torch_normal(
    n: int, shape: tuple[int, ...], device: torch.device, rng: RngLike
) -> torch.Tensor:
    n = check_integer(n, "n", minimum=0)
    seed = int(check_random_state(rng).integers(0, 2**63 - 1))
    gen = torch.Generator(device=device).manual_seed(seed)
    return torch.randn((n, *shape), generator=gen, device=device)
