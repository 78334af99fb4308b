"""The latent bank (idaudit.inversion._bank): filtering, counts, determinism, round trips."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import scipy.stats
import torch

from idaudit.exceptions import InvalidInputError
from idaudit.inversion import LatentBank
from idaudit.inversion._bank import draw_batch_size


def test_bank_filters_and_counts_every_draw(toy: dict[str, Any]) -> None:
    gen, det = toy["generator"], toy["detector"]
    bank = LatentBank.build(gen, 12, detector=det, tau_k=0.6, tau_d=0.5, rng=3, batch_size=50)
    assert bank.volume == 12
    assert (bank.p_k >= 0.6).all()
    assert (bank.p_d >= 0.5).all()
    # independent check of both filters on the stored codes and images
    ref_p = scipy.stats.normaltest(bank.latents.astype(np.float64), axis=1).pvalue
    np.testing.assert_allclose(bank.p_k, ref_p, rtol=1e-5)
    np.testing.assert_allclose(bank.p_d, bank.images.reshape(12, -1).mean(1) / 255.0, rtol=1e-6)
    assert bank.n_drawn == bank.volume + bank.n_rejected_k + bank.n_rejected_d
    assert bank.n_rejected_k > 0
    assert bank.n_rejected_d > 0
    # the same draws replayed by hand give the same counts (draws examined in order)
    g = torch.Generator().manual_seed(int(np.random.default_rng(3).integers(0, 2**63 - 1)))
    kept, drawn, rej_k, rej_d = 0, 0, 0, 0
    while kept < 12:
        z = torch.randn(50, 16, generator=g)
        for row in z:
            drawn += 1
            p = scipy.stats.normaltest(row.double().numpy()).pvalue
            if p < 0.6:
                rej_k += 1
                continue
            img = np.round(gen.forward(row[None]).detach().numpy() * 255).clip(0, 255)
            if img.mean() / 255.0 < 0.5:
                rej_d += 1
                continue
            kept += 1
            if kept == 12:
                break
    assert (bank.n_drawn, bank.n_rejected_k, bank.n_rejected_d) == (drawn, rej_k, rej_d)


def test_bank_is_deterministic_and_round_trips_without_pickles(
    toy: dict[str, Any], tmp_path: Path
) -> None:
    kw = {"detector": toy["detector"], "tau_k": 0.5, "tau_d": 0.4}
    a = LatentBank.build(toy["generator"], 6, rng=7, **kw)
    b = LatentBank.build(toy["generator"], 6, rng=7, **kw)
    np.testing.assert_array_equal(a.latents, b.latents)
    path = tmp_path / "bank.npz"
    a.save(path)
    assert (path.stat().st_mode & 0o777) == 0o600
    c = LatentBank.load(path)
    np.testing.assert_array_equal(a.latents, c.latents)
    np.testing.assert_array_equal(a.images, c.images)
    assert (c.n_drawn, c.tau_k, c.seed, c.generator) == (a.n_drawn, 0.5, 7, "linear-toy")
    np.savez(tmp_path / "other.npz", x=np.zeros(3))
    with pytest.raises(InvalidInputError, match="not a latent bank"):
        LatentBank.load(tmp_path / "other.npz")


def test_bank_gives_up_with_counts(toy: dict[str, Any]) -> None:
    with pytest.raises(InvalidInputError, match="max_draws"):
        LatentBank.build(toy["generator"], 5, detector=toy["detector"], tau_d=1.0, max_draws=100)
    with pytest.raises(InvalidInputError, match="tau_k"):
        LatentBank.build(toy["generator"], 5, detector=toy["detector"], tau_k=1.5)


def test_bank_file_with_mismatched_counts_is_refused(toy: dict[str, Any], tmp_path: Path) -> None:
    bank = LatentBank.build(toy["generator"], 4, detector=toy["detector"], tau_k=0.5, tau_d=0.4)
    path = tmp_path / "bank.npz"
    bank.save(path)
    with np.load(path, allow_pickle=False) as data:
        arrays = {k: data[k] for k in data.files}
    arrays["images"] = arrays["images"][:3]  # one image lost: code 3 would have none
    np.savez(tmp_path / "short.npz", **arrays)
    with pytest.raises(InvalidInputError, match="latents 4, images 3, p_k 4, p_d 4"):
        LatentBank.load(tmp_path / "short.npz")
    arrays["images"] = np.zeros((4, 8, 8), np.uint8)  # right count, no colour channel
    np.savez(tmp_path / "gray.npz", **arrays)
    with pytest.raises(InvalidInputError, match=r"uint8 of shape \(V, H, W, 3\)"):
        LatentBank.load(tmp_path / "gray.npz")
    arrays["images"] = bank.images.astype(np.float64) / 255  # floats would all round to 0
    np.savez(tmp_path / "float.npz", **arrays)
    with pytest.raises(InvalidInputError, match="stores images of dtype float64"):
        LatentBank.load(tmp_path / "float.npz")
    arrays["images"] = bank.images
    fmt = json.loads(str(arrays["header"]))["format"]
    arrays["header"] = np.array(json.dumps({"format": fmt}))
    np.savez(tmp_path / "bare.npz", **arrays)
    with pytest.raises(InvalidInputError, match=r"lacks the bank header fields \['n_drawn'"):
        LatentBank.load(tmp_path / "bare.npz")
    (tmp_path / "text.npz").write_text("not an archive")
    with pytest.raises(InvalidInputError, match="is not a latent bank file"):
        LatentBank.load(tmp_path / "text.npz")


def test_a_bank_that_cannot_pair_codes_with_images_is_refused(toy: dict[str, Any]) -> None:
    bank = LatentBank.build(toy["generator"], 4, detector=toy["detector"], tau_k=0.5, tau_d=0.4)
    with pytest.raises(InvalidInputError, match="latents 4, images 3, p_k 4, p_d 4"):
        dataclasses.replace(bank, images=bank.images[:3])
    nan = bank.latents.copy()
    nan[0, 0] = np.nan
    with pytest.raises(InvalidInputError, match="`latents` must be finite"):
        dataclasses.replace(bank, latents=nan)
    with pytest.raises(InvalidInputError, match="at least one code"):
        dataclasses.replace(bank, latents=bank.latents[:0], images=bank.images[:0])


def test_default_batch_is_sized_in_bytes_under_the_bound(
    toy: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    from idaudit.inversion import _bank

    # a 3 × 256 × 256 diffusion latent: the old fixed 4096 codes needed 21 GiB per round
    big = draw_batch_size((3, 256, 256), 2**30)
    assert big == 195
    assert big * 28 * 3 * 256 * 256 <= 2**30 < (big + 1) * 28 * 3 * 256 * 256
    assert draw_batch_size((100,), 2**30) == 4096  # the DCGAN: capped, unchanged
    assert draw_batch_size((3, 256, 256), 1) == 1  # never less than one code
    # build draws rounds of that size: record what reaches the K² test
    seen: list[int] = []
    real = _bank.dagostino_k2

    def spy(z: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        seen.append(int(z.shape[0]))
        return real(z)

    monkeypatch.setattr(_bank, "dagostino_k2", spy)
    bound = 28 * 16 * 10  # ten 16-value codes
    LatentBank.build(
        toy["generator"], 3, detector=toy["detector"], tau_k=0.6, tau_d=0.5, max_bytes=bound
    )
    assert seen
    assert max(seen) == 10
    assert all(m * 28 * 16 <= bound for m in seen)
    with pytest.raises(InvalidInputError, match="`max_bytes` must be"):
        LatentBank.build(toy["generator"], 3, detector=toy["detector"], max_bytes=0)


class _CountingMeanDetector:
    """The toy detector, remembering how many images each batch call held."""

    def __init__(self, inner: Any) -> None:
        self.inner, self.calls = inner, []

    def detect_batch(self, images: np.ndarray) -> list[Any]:
        self.calls.append(len(images))
        return [self.inner.detect(im) for im in images]


def test_generation_runs_in_chunks_of_the_stated_size(toy: dict[str, Any]) -> None:
    kw = {"tau_k": 0.3, "tau_d": 0.3, "rng": 4, "batch_size": 40}
    det = _CountingMeanDetector(toy["detector"])
    small = LatentBank.build(toy["generator"], 9, detector=det, generate_batch_size=5, **kw)
    assert max(det.calls) <= 5
    # the chunk size changes memory, not the bank: the same draws are kept
    whole = LatentBank.build(toy["generator"], 9, detector=toy["detector"], **kw)
    np.testing.assert_array_equal(small.latents, whole.latents)
    assert (small.n_drawn, small.n_rejected_k, small.n_rejected_d) == (
        whole.n_drawn,
        whole.n_rejected_k,
        whole.n_rejected_d,
    )
    with pytest.raises(InvalidInputError, match="`generate_batch_size`"):
        LatentBank.build(toy["generator"], 2, detector=det, generate_batch_size=0)
