"""Step (a) of DiffUMI: a bank of reliable latent codes (K² normality, then face detection)."""

from __future__ import annotations

import json
import os
import zipfile
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
import numpy.typing as npt
import torch

from idaudit._results import atomic_path
from idaudit._validation import (
    RngLike,
    check_in_range,
    check_integer,
    check_option,
    check_random_state,
)
from idaudit.exceptions import InvalidInputError
from idaudit.inversion._generators import LatentGenerator, check_images
from idaudit.inversion._normality import dagostino_k2
from idaudit.inversion._target import to_uint8

__all__ = ["LatentBank", "detection_scores"]

_FORMAT = "idaudit-latent-bank-1"

# Bytes per latent value of one draw round at its peak: the float32 draw (4) and, inside
# `dagostino_k2`, the float64 copy, the centred copy and one float64 power temporary (3 × 8).
_ROUND_BYTES_PER_VALUE = 28
#: Fields every bank file's JSON header holds besides ``format``.
_HEADER_KEYS = ("n_drawn", "n_rejected_k", "n_rejected_d", "tau_k", "tau_d", "generator", "seed")
# The arrays of a bank file, one entry per code.
_ARRAYS = ("latents", "images", "p_k", "p_d")
# Codes per round when the latent is small (the DCGAN's 100 values: 11 MiB per round).
_MAX_BATCH = 4096


def draw_batch_size(latent_shape: tuple[int, ...], max_bytes: int) -> int:
    """Codes per draw round so that the round's working memory stays within ``max_bytes``.

    ``batch · 28 · prod(latent_shape) ≤ max_bytes`` (see ``_ROUND_BYTES_PER_VALUE``), at most
    4096 codes and at least one (a single code larger than the bound is drawn alone).
    """
    per_code = _ROUND_BYTES_PER_VALUE * max(1, int(np.prod(latent_shape, dtype=np.int64)))
    return int(max(1, min(_MAX_BATCH, max_bytes // per_code)))


def detection_scores(detector: Any, images: npt.NDArray[np.uint8]) -> npt.NDArray[np.float64]:
    """Highest face score per ``(n, H, W, 3)`` uint8 image (0 where no face is found): ``p_D``."""
    if hasattr(detector, "detect_batch"):
        found = detector.detect_batch(images)
    else:
        found = [detector.detect(im) for im in images]
    return np.array([max((f.score for f in faces), default=0.0) for faces in found], float)


@dataclass(frozen=True)
class LatentBank:
    """``V`` latent codes that passed D'Agostino's K² test and face detection, with their images.

    Build with :meth:`build`; reuse for every target (Step (a) runs once).

    Attributes
    ----------
    latents : numpy.ndarray of float32, shape (V, *latent_shape)
    images : numpy.ndarray of uint8, shape (V, H, W, 3)
        ``G(latents)`` rounded to 8 bits (what Step (b) embeds).
    p_k : numpy.ndarray of float64, shape (V,)
        K² p-values of the codes.
    p_d : numpy.ndarray of float64, shape (V,)
        Detection scores of the images.
    n_drawn : int
        Gaussian codes drawn in all.
    n_rejected_k : int
        Draws rejected by the K² test (``p_K < tau_k``).
    n_rejected_d : int
        Draws that passed K² but were rejected by detection (``p_D < tau_d``).
    tau_k, tau_d : float
        The thresholds used.
    generator : str
        Name of the generator.
    seed : int or None
        Integer ``rng`` used, when one was given.
    normality : {"code", "per_channel"}
        The K² filter used (:meth:`build`).
    """

    latents: npt.NDArray[np.float32] = field(repr=False)
    images: npt.NDArray[np.uint8] = field(repr=False)
    p_k: npt.NDArray[np.float64] = field(repr=False)
    p_d: npt.NDArray[np.float64] = field(repr=False)
    n_drawn: int
    n_rejected_k: int
    n_rejected_d: int
    tau_k: float
    tau_d: float
    generator: str
    seed: int | None = None
    normality: str = "code"

    def __post_init__(self) -> None:
        """Refuse a bank whose arrays cannot be a bank: Step (b) pairs code i with image i."""
        latents, images = np.asarray(self.latents), np.asarray(self.images)
        if latents.ndim < 2 or latents.shape[0] == 0:
            raise InvalidInputError(
                f"a bank needs at least one code, `latents` of shape (V, *latent_shape); got "
                f"{latents.shape}."
            )
        if not np.isfinite(latents).all():
            raise InvalidInputError("`latents` must be finite; got NaN or inf.")
        if images.dtype != np.uint8 or images.ndim != 4 or images.shape[-1] != 3:
            raise InvalidInputError(
                f"`images` must be uint8 of shape (V, H, W, 3) (what the generator's codes give "
                f"rounded to 8 bits); got {images.dtype} {images.shape}."
            )
        counts = {
            "latents": latents.shape[0],
            "images": images.shape[0],
            "p_k": int(np.size(self.p_k)),
            "p_d": int(np.size(self.p_d)),
        }
        if len(set(counts.values())) != 1:
            found = ", ".join(f"{k} {n}" for k, n in counts.items())
            raise InvalidInputError(
                f"a bank's arrays must have one entry per code; got {found}: every code needs "
                "its stored image and its two scores."
            )

    @property
    def volume(self) -> int:
        """Number of codes kept, ``V``."""
        return int(self.latents.shape[0])

    @classmethod
    def build(
        cls,
        generator: LatentGenerator,
        volume: int = 1000,
        *,
        detector: Any = None,
        tau_k: float = 0.999,
        tau_d: float = 0.999,
        rng: RngLike = 0,
        batch_size: int | None = None,
        max_bytes: int = 2**30,
        max_draws: int | None = None,
        generate_batch_size: int = 64,
        normality: Literal["code", "per_channel"] = "code",
    ) -> LatentBank:
        """Draw Gaussian codes until ``volume`` pass both filters (seed 002, Fig. 14).

        Parameters
        ----------
        generator : LatentGenerator
        volume : int, default 1000
            ``V``, codes to keep.
        detector : Detector, optional
            Default :class:`~idaudit.faces.MTCNNDetector` on the CPU. It sees the generated
            images as they are (for the DCGAN: 64×64).
        tau_k : float, default 0.999
            Keep a code when its K² p-value ``p_K ≥ tau_k`` (Eq. 9). Under normality ``p_K``
            is uniform, so about ``1 − tau_k`` of the draws pass.
        tau_d : float, default 0.999
            Keep it when the detection score ``p_D ≥ tau_d`` (Eq. 12).
        rng : int, SeedSequence or Generator, default 0
            Seeds a ``torch.Generator`` on the generator's device (same ``rng`` and device type:
            same bank).
        batch_size : int, optional
            Codes drawn and tested per round. Default: sized from ``max_bytes``.
        max_bytes : int, default 2**30
            Bound on a draw round's working memory when ``batch_size`` is not given: the
            round holds its float32 codes and the K² test's float64 temporaries, 28 bytes per
            latent value, so ``batch_size = min(4096, max_bytes // (28 · prod(latent_shape)))``
            (at least 1). With the 1 GiB default: 4096 codes for the DCGAN's 100-value latent,
            195 for a 3 × 256 × 256 diffusion latent (1.0 GiB, where 4096 would need 21 GiB).
        max_draws : int, optional
            Give up (raise) after this many draws; default ``1000 · volume / (1 − tau_k)``.
        generate_batch_size : int, default 64
            Codes that passed K² generated and scored by the detector at once. ``max_bytes``
            does not bound this step: its memory is the generator's and the detector's (for a
            256² diffusion model, lower it if a chunk of 64 images does not fit).
        normality : {"code", "per_channel"}, default "code"
            ``"code"``: one K² test on the raw draw, as the paper states (Eq. 8–9).
            ``"per_channel"``: DiffMI's filter — each channel of a ``(C, H, W)`` code is drawn
            until its own K² p-value is ``≥ tau_k``, each channel is standardised (mean 0,
            sample standard deviation 1), and the assembled code must pass K² again; ``p_k``
            is that last p-value, and the draw counts count assembled codes (the channel draws
            rejected before assembly are not counted). A flat latent is one channel.

        Returns
        -------
        LatentBank

        Examples
        --------
        >>> from idaudit.inversion import DCGANGenerator, LatentBank
        >>> bank = LatentBank.build(DCGANGenerator(), 4, tau_k=0.5, tau_d=0.9, rng=0)
        >>> bank.volume, bank.latents.shape
        (4, (4, 100))
        """
        volume = check_integer(volume, "volume", minimum=1)
        tau_k = check_in_range(tau_k, "tau_k", 0.0, 1.0, closed="both")
        tau_d = check_in_range(tau_d, "tau_d", 0.0, 1.0, closed="both")
        max_bytes = check_integer(max_bytes, "max_bytes", minimum=1)
        shape = tuple(generator.latent_shape)
        if batch_size is None:
            batch_size = draw_batch_size(shape, max_bytes)
        batch_size = check_integer(batch_size, "batch_size", minimum=1)
        if max_draws is None:
            max_draws = int(min(1000 * volume / max(1.0 - tau_k, 1e-6), 2**62))
        max_draws = check_integer(max_draws, "max_draws", minimum=1)
        chunk = check_integer(generate_batch_size, "generate_batch_size", minimum=1)
        check_option(normality, "normality", ("code", "per_channel"))
        if detector is None:
            from idaudit.faces import MTCNNDetector

            detector = MTCNNDetector()
        seed = rng if isinstance(rng, int) else None
        seed_int = int(check_random_state(rng).integers(0, 2**63 - 1))
        device = generator.device
        gen = torch.Generator(device=device).manual_seed(seed_int)

        kept_z: list[torch.Tensor] = []
        kept_im: list[npt.NDArray[np.uint8]] = []
        kept_pk: list[npt.NDArray[np.float64]] = []
        kept_pd: list[npt.NDArray[np.float64]] = []
        n_kept = n_drawn = rej_k = rej_d = 0
        while n_kept < volume:  # draws are examined in order; the counts stop at the last kept
            if n_drawn >= max_draws:
                raise InvalidInputError(
                    f"only {n_kept} of `volume` {volume} codes passed after `max_draws` "
                    f"{max_draws} draws ({rej_k} rejected by K², {rej_d} by detection); lower "
                    "`tau_k` or `tau_d`, or raise `max_draws`."
                )
            m = min(batch_size, max_draws - n_drawn)
            if normality == "per_channel":
                z = _per_channel_draws(gen, m, shape, tau_k, max_draws)
            else:
                z = torch.randn((m, *shape), generator=gen, device=device)
            _, p = dagostino_k2(z)
            where = torch.nonzero(p >= tau_k).flatten().cpu().numpy()  # draws passing K²
            cut = m  # draws examined in this batch (less when the bank fills up in it)
            for start in range(0, where.size, chunk):
                idx = torch.from_numpy(where[start : start + chunk]).to(device)
                with torch.no_grad():
                    images = to_uint8(check_images(generator.forward(z[idx]), generator))
                scores = detection_scores(detector, images)
                ok = np.flatnonzero(scores >= tau_d)
                take = ok[: volume - n_kept]
                examined = idx.numel() if n_kept + ok.size < volume else int(take[-1]) + 1
                rej_d += examined - int(take.size)
                kept_z.append(z[idx[take]].float().cpu())
                kept_im.append(images[take])
                kept_pk.append(p[idx[take]].cpu().numpy())
                kept_pd.append(scores[take])
                n_kept += int(take.size)
                if n_kept >= volume:
                    cut = int(where[start + examined - 1]) + 1
                    break
            n_drawn += cut
            rej_k += cut - int((where < cut).sum())
        return cls(
            latents=torch.cat(kept_z).numpy().astype(np.float32),
            images=np.concatenate(kept_im),
            p_k=np.concatenate(kept_pk).astype(np.float64),
            p_d=np.concatenate(kept_pd).astype(np.float64),
            n_drawn=n_drawn,
            n_rejected_k=rej_k,
            n_rejected_d=rej_d,
            tau_k=tau_k,
            tau_d=tau_d,
            generator=str(getattr(generator, "name", type(generator).__name__)),
            seed=seed,
            normality=normality,
        )

    def save(self, path: str | os.PathLike[str]) -> None:
        """Write the bank to an ``.npz`` file (plain arrays and a JSON header; no pickles).

        The file is written atomically with owner-only permissions (its images are faces).
        """
        fields = (*_HEADER_KEYS, "normality")
        header = {"format": _FORMAT, **{k: getattr(self, k) for k in fields}}
        arrays = {k: getattr(self, k) for k in _ARRAYS}

        with atomic_path(path) as tmp, open(tmp, "wb") as fh:
            np.savez(fh, **arrays, header=np.array(json.dumps(header)))

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> LatentBank:
        """Read a bank written by :meth:`save` (``allow_pickle=False``).

        Raises
        ------
        InvalidInputError
            When the file is not a bank, or its codes, images and scores differ in count.
        """
        name = repr(os.fspath(path))
        try:
            with np.load(path, allow_pickle=False) as data:
                header = json.loads(str(data["header"]))
                arrays = {k: data[k] for k in _ARRAYS}
        except KeyError as exc:
            raise InvalidInputError(f"{name} is not a latent bank file.") from exc
        except FileNotFoundError:
            raise
        except (ValueError, OSError, zipfile.BadZipFile) as exc:
            raise InvalidInputError(f"{name} is not a latent bank file (.npz): {exc}") from exc
        if header.get("format") != _FORMAT:
            raise InvalidInputError(f"{name} has format {header.get('format')!r}, not {_FORMAT!r}.")
        missing = [k for k in _HEADER_KEYS if k not in header]
        if missing:
            raise InvalidInputError(f"{name} lacks the bank header fields {missing}.")
        if arrays["images"].dtype != np.uint8:
            raise InvalidInputError(
                f"{name} stores images of dtype {arrays['images'].dtype}; a bank stores uint8."
            )
        counts = {k: int(np.shape(v)[0]) if np.ndim(v) else 0 for k, v in arrays.items()}
        if len(set(counts.values())) != 1:
            # Step (b) pairs code i with image i: a file whose arrays disagree cannot be used.
            found = ", ".join(f"{k} {n}" for k, n in counts.items())
            raise InvalidInputError(
                f"{name} holds arrays of different lengths ({found}); every code "
                "needs its stored image and its two scores."
            )
        return cls(
            latents=arrays["latents"].astype(np.float32),
            images=arrays["images"].astype(np.uint8),
            p_k=arrays["p_k"].astype(np.float64),
            p_d=arrays["p_d"].astype(np.float64),
            n_drawn=int(header["n_drawn"]),
            n_rejected_k=int(header["n_rejected_k"]),
            n_rejected_d=int(header["n_rejected_d"]),
            tau_k=float(header["tau_k"]),
            tau_d=float(header["tau_d"]),
            generator=str(header["generator"]),
            seed=None if header["seed"] is None else int(header["seed"]),
            normality=str(header.get("normality", "code")),  # files before the option: "code"
        )


def _per_channel_draws(
    gen: torch.Generator, m: int, shape: tuple[int, ...], tau_k: float, max_draws: int
) -> torch.Tensor:
    """``m`` codes of DiffMI's filter: channels that pass K² alone, each standardised.

    Channel draws run in batches of ``m``; more than ``max_draws · C`` channel draws without
    enough passing channels raise.
    """
    n_ch = shape[0] if len(shape) == 3 else 1
    ch_shape = (*shape[1:],) if len(shape) == 3 else shape
    need = m * n_ch
    kept: list[torch.Tensor] = []
    n_kept = drawn = 0
    while n_kept < need:
        if drawn >= max_draws * n_ch:
            raise InvalidInputError(
                f"only {n_kept} of {need} channels passed K² after {drawn} channel draws; lower "
                "`tau_k` or raise `max_draws`."
            )
        c = torch.randn((need, *ch_shape), generator=gen, device=gen.device)
        _, p = dagostino_k2(c.reshape(need, -1))
        ok = c[p >= tau_k]
        kept.append(ok[: need - n_kept])
        n_kept += int(kept[-1].shape[0])
        drawn += need
    ch = torch.cat(kept).reshape(m, n_ch, -1)  # (m, C, H·W)
    ch = (ch - ch.mean(dim=2, keepdim=True)) / ch.std(dim=2, keepdim=True)  # unbiased std
    return ch.reshape(m, *shape)
