from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch
from PIL import Image
from scipy.spatial.distance import cdist

from idaudit.exceptions import InvalidInputError
from idaudit.faces import (
    DLIB_THRESHOLD,
    MTCNNDetector,
    ShippedFaceGenerator,
    arcface_template,
    synthetic_identities,
)

pytestmark = pytest.mark.faces


def test_matches_the_packages_own_network(dcgan: Any) -> None:
    # gan_face_generate.models imports only torch; its Generator is the independent reference.
    models = pytest.importorskip("gan_face_generate.models")
    from idaudit.faces._weights import resolve_weights

    ref = models.Generator(ngpu=0, nc=3, nz=100, ngf=64)
    state = torch.load(
        resolve_weights("dcgan_faces", "weights.tar"), map_location="cpu", weights_only=True
    )
    ref.load_state_dict(state["netG_state_dict"])
    ref.eval()
    z = torch.from_numpy(dcgan.sample_latents(5, rng=3))
    with torch.no_grad():
        expected = (ref(z[:, :, None, None]) + 1) / 2
        got = dcgan.forward(z)
    torch.testing.assert_close(got, expected, rtol=0, atol=1e-6)  # same ops, same weights


def test_same_seed_same_faces(dcgan: Any) -> None:
    a = dcgan.sample(4, rng=0)
    b = dcgan.sample(4, rng=np.random.default_rng(0))
    c = dcgan.sample(4, rng=1)
    assert a.shape == (4, 64, 64, 3)
    assert a.dtype == np.uint8
    np.testing.assert_array_equal(a, b)
    assert np.abs(a.astype(int) - c).mean() > 10
    # Latents come from numpy, so they do not depend on torch's global RNG.
    np.testing.assert_array_equal(
        dcgan.sample_latents(3, rng=0),
        np.random.default_rng(0).standard_normal((3, 100)).astype(np.float32),
    )


def test_batch_size_does_not_change_images() -> None:
    small = ShippedFaceGenerator(batch_size=2)
    big = ShippedFaceGenerator(batch_size=256)
    z = small.sample_latents(5, rng=9)
    # At most one grey level: batched convolutions may round differently at a .5 boundary.
    assert np.abs(small.generate(z).astype(int) - big.generate(z)).max() <= 1


def test_forward_is_differentiable_and_agrees_with_generate(dcgan: Any) -> None:
    z = torch.from_numpy(dcgan.sample_latents(2, rng=5)).requires_grad_(True)
    x = dcgan.forward(z)
    assert x.shape == (2, 3, 64, 64)
    assert float(x.detach().min()) >= 0.0
    assert float(x.detach().max()) <= 1.0
    x.mean().backward()
    assert z.grad is not None
    assert torch.isfinite(z.grad).all()
    assert float(z.grad.abs().sum()) > 0
    assert all(p.grad is None for p in dcgan.network.parameters())  # weights stay frozen
    pixels = dcgan.generate(z.detach().numpy())
    expected = np.rint(x.detach().permute(0, 2, 3, 1).numpy() * 255)
    np.testing.assert_allclose(pixels, expected, atol=1)


def test_loaded_weights_only(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[dict[str, Any]] = []
    real_load = torch.load

    def spy(*args: Any, **kwargs: Any) -> Any:
        calls.append(kwargs)
        return real_load(*args, **kwargs)

    monkeypatch.setattr(torch, "load", spy)
    ShippedFaceGenerator()
    assert [c.get("weights_only") for c in calls] == [True]


def test_samples_are_faces_aligned_like_arcface(dcgan: Any) -> None:
    images = dcgan.sample(12, rng=2024)
    # MTCNN needs a margin around the face: enlarge ×2.5 and pad with edge pixels.
    big = np.stack(
        [
            np.asarray(Image.fromarray(im).resize((160, 160), Image.Resampling.BICUBIC))
            for im in images
        ]
    )
    padded = np.pad(big, ((0, 0), (40, 40), (40, 40), (0, 0)), mode="edge")
    # The faces are about 130 px wide: skip the pyramid levels for small faces.
    detections = MTCNNDetector(min_face_size=80).detect_batch(padded)
    best = [max(d, key=lambda f: f.score) for d in detections if d]
    confident = [f for f in best if f.score > 0.9]
    assert len(confident) >= 10
    landmarks = np.stack([(f.landmarks - 40) / 2.5 for f in confident])  # back to 64-px frame
    offset = np.median(landmarks, axis=0) - arcface_template(64)
    # Within 2.5 px of the ArcFace template on a 64-px face (measured ≤ 1.4 px on 400 samples).
    assert np.abs(offset).max() < 2.5


def test_synthetic_identities_shapes_and_reproducibility(dcgan: Any) -> None:
    ids = synthetic_identities(3, 2, spread=0.2, rng=7, generator=dcgan)
    again = synthetic_identities(3, 2, spread=0.2, rng=7, generator=dcgan)
    assert ids.images.shape == (6, 64, 64, 3)
    assert ids.labels.tolist() == [0, 0, 1, 1, 2, 2]
    assert ids.embeddings is None
    assert ids.n_identities == 3
    np.testing.assert_array_equal(ids.images, again.images)
    offsets = ids.latents.reshape(3, 2, 100) - ids.centres[:, None, :]
    # The offsets are spread · N(0, 1): their sample sd is 0.2 to within sampling error
    # (600 draws: sd of the sd estimate ≈ 0.2 / sqrt(1200) ≈ 0.006).
    assert abs(offsets.std() - 0.2) < 0.03


@pytest.mark.slow
def test_synthetic_identities_separate_under_dlib(dcgan: Any, dlib_encoder: Any) -> None:
    ids = synthetic_identities(
        4, 4, rng=0, generator=dcgan, encoder=dlib_encoder, min_separation=0.5
    )
    raw = dlib_encoder.encode(dcgan.crops(ids.images, dlib_encoder), normalize=False)
    np.testing.assert_allclose(
        ids.embeddings, raw / np.linalg.norm(raw, axis=1, keepdims=True), atol=1e-6
    )
    dist = cdist(raw, raw)
    same = ids.labels[:, None] == ids.labels[None, :]
    upper = np.triu(np.ones_like(same), k=1).astype(bool)
    within, cross = dist[same & upper], dist[~same & upper]
    assert within.size == 24
    assert cross.size == 96
    # Default spread: measured on five seeds, 100% of within pairs < 0.6 and 98.8% of cross
    # pairs > 0.6 (medians 0.32 and 0.73); allow one pair in twenty on either side.
    assert np.mean(within < DLIB_THRESHOLD) >= 0.95
    assert np.mean(cross > DLIB_THRESHOLD) >= 0.95
    assert np.median(within) < 0.45
    assert np.median(cross) > 0.65
    # The kept centres really are min_separation apart on the encoder's normalised scale.
    centre_emb = dcgan.embed(dcgan.generate(ids.centres), dlib_encoder)
    gaps = cdist(centre_emb, centre_emb)[np.triu_indices(4, k=1)]
    assert gaps.min() >= 0.5 - 1e-6


def test_synthetic_identities_errors(dcgan: Any, dlib_encoder: Any) -> None:
    with pytest.raises(InvalidInputError, match="`min_separation` needs an `encoder`"):
        synthetic_identities(2, 2, min_separation=0.5, generator=dcgan)
    with pytest.raises(InvalidInputError, match=r"`spread` must be in \(0, inf\); got 0"):
        synthetic_identities(2, 2, spread=0, generator=dcgan)
    with pytest.raises(InvalidInputError, match=r"`min_separation` 1\.9 is too large"):
        synthetic_identities(
            2, 1, generator=dcgan, encoder=dlib_encoder, min_separation=1.9, max_candidates=3
        )
    with pytest.raises(InvalidInputError, match=r"`z` must have shape \(n, 100\)"):
        dcgan.generate(np.zeros((2, 10)))
