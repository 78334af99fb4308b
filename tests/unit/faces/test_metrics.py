"""Appearance distances (idaudit.faces._metrics): SSIM against scikit-image and closed forms,
LPIPS against the ``lpips`` package's own network on a stand-in AlexNet backbone."""

from __future__ import annotations

import re
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch

from idaudit.exceptions import InvalidInputError, MissingWeightsError
from idaudit.faces._metrics import AppearanceDistance, LPIPSDistance, SSIMDistance
from idaudit.faces._weights import ENV_VAR

pytestmark = pytest.mark.faces


def _images(seed: int, n: int, size: int = 48) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, (n, size, size, 3), dtype=np.uint8)


# ----------------------------------------------------------------------------- SSIM


def test_ssim_matches_scikit_image() -> None:
    from skimage.metrics import structural_similarity

    a, b = _images(0, 3), _images(1, 3)
    b[0] = np.clip(a[0].astype(int) + 20, 0, 255)  # one similar pair
    got = SSIMDistance().distance(a, b)
    expected = [
        1.0
        - structural_similarity(
            x,
            y,
            data_range=255,
            channel_axis=-1,
            gaussian_weights=True,
            sigma=1.5,
            use_sample_covariance=False,
        )
        for x, y in zip(a, b, strict=True)
    ]
    np.testing.assert_allclose(got, expected, rtol=1e-12)  # the same computation
    assert got[0] < got[1]


def test_ssim_uniform_window_matches_scikit_image() -> None:
    from skimage.metrics import structural_similarity

    a, b = _images(2, 2), _images(3, 2)
    got = SSIMDistance(gaussian_weights=False, win_size=7, use_sample_covariance=True)
    expected = [
        1.0 - structural_similarity(x, y, data_range=255, channel_axis=-1, win_size=7)
        for x, y in zip(a, b, strict=True)
    ]
    np.testing.assert_allclose(got.distance(a, b), expected, rtol=1e-12)
    assert got.name == "ssim-uniform7-samplecov"


def test_ssim_name_tells_apart_settings_that_change_the_value() -> None:
    a, b = _images(2, 1, 48), _images(3, 1, 48)
    settings = [
        {},
        {"sigma": 2.5},
        {"use_sample_covariance": True},
        {"gaussian_weights": False},
        {"gaussian_weights": False, "win_size": 3},
        {"gaussian_weights": False, "win_size": 7},  # the uniform default, spelled out
    ]
    metrics = [SSIMDistance(**kw) for kw in settings]
    assert [m.name for m in metrics] == [
        "ssim-gaussian1.5",
        "ssim-gaussian2.5",
        "ssim-gaussian1.5-samplecov",
        "ssim-uniform7",
        "ssim-uniform3",
        "ssim-uniform7",
    ]
    values = [float(m.distance(a, b)[0]) for m in metrics]
    by_name: dict[str, set[float]] = {}
    for m, v in zip(metrics, values, strict=True):
        by_name.setdefault(m.name, set()).add(v)
    assert all(len(v) == 1 for v in by_name.values())  # one name, one value
    assert len(set(values)) == len(by_name)  # different values, different names


def test_ssim_window_size_under_gaussian_weights_is_refused() -> None:
    # scikit-image would use win_size to crop the border even with Gaussian weights,
    # changing the value under an unchanged name.
    with pytest.raises(
        InvalidInputError,
        match=r"with gaussian_weights=True the window follows `sigma`.*got win_size=3\.",
    ):
        SSIMDistance(win_size=3)


def test_ssim_of_constant_images_has_a_closed_form() -> None:
    # Constant images have zero (co)variances, so SSIM = (2 mu_x mu_y + C1) / (mu_x^2 + mu_y^2
    # + C1) with C1 = (0.01 * 255)^2 (Wang et al. 2004, Eq. 13 with K1 = 0.01, L = 255).
    x = np.full((32, 32, 3), 100, np.uint8)
    y = np.full((32, 32, 3), 150, np.uint8)
    c1 = (0.01 * 255) ** 2
    expected = 1.0 - (2 * 100 * 150 + c1) / (100**2 + 150**2 + c1)
    np.testing.assert_allclose(SSIMDistance().distance(x, y), [expected], rtol=1e-10)


def test_ssim_identical_images_are_at_distance_zero() -> None:
    a = _images(4, 3)
    np.testing.assert_allclose(SSIMDistance().distance(a, a.copy()), 0.0, atol=1e-12)


def test_ssim_pairwise_is_symmetric_and_consistent() -> None:
    ssim = SSIMDistance()
    a, b = _images(5, 3), _images(6, 2)
    full = ssim.pairwise(a, progress=False)
    np.testing.assert_array_equal(full, full.T)
    np.testing.assert_array_equal(np.diag(full), 0.0)
    cross = ssim.pairwise(a, b, progress=False)
    assert cross.shape == (3, 2)
    np.testing.assert_allclose(cross[:, 1], ssim.distance(a, np.stack([b[1]] * 3)), rtol=1e-12)


def test_ssim_input_errors() -> None:
    ssim = SSIMDistance()
    with pytest.raises(InvalidInputError, match=r"SSIM needs images of equal size; a\[0\], b\[0\]"):
        ssim.distance(_images(0, 1, 32), _images(0, 1, 48))
    with pytest.raises(InvalidInputError, match=r"SSIM failed for a\[0\], b\[0\]"):
        ssim.distance(_images(0, 1, 5), _images(1, 1, 5))  # smaller than the 11x11 window
    with pytest.raises(InvalidInputError, match="same number of images; got 2 vs 3"):
        ssim.distance(_images(0, 2), _images(0, 3))
    with pytest.raises(TypeError, match=r"`a\[0\]` must have dtype uint8, uint16 or float"):
        ssim.distance(_images(0, 1).astype(np.int64), _images(0, 1))
    with pytest.raises(InvalidInputError, match="`win_size` must be odd"):
        SSIMDistance(gaussian_weights=False, win_size=8)


def _skimage_distance(x: np.ndarray, y: np.ndarray, **settings: object) -> float:
    from skimage.metrics import structural_similarity

    return 1.0 - float(structural_similarity(x, y, data_range=255, channel_axis=-1, **settings))


@pytest.mark.parametrize(
    ("ours", "theirs"),
    [
        ({}, {"gaussian_weights": True, "sigma": 1.5, "use_sample_covariance": False}),
        (
            {"sigma": 2.0, "use_sample_covariance": True},
            {"gaussian_weights": True, "sigma": 2.0, "use_sample_covariance": True},
        ),
        (
            {"gaussian_weights": False, "win_size": 5},
            {"win_size": 5, "use_sample_covariance": False},
        ),
    ],
)
def test_batched_ssim_pairs_match_scikit_image_pair_by_pair(ours: dict, theirs: dict) -> None:
    # the batched torch computation against scikit-image called once per pair, the
    # independent reference; both are float64, so only rounding differs (1e-12 relative on
    # values near 1, far inside the 1e-6 the batching rule asks)
    images = [*_images(7, 5, 64), *_images(8, 3, 40)]  # two sizes, grouped by the metric
    ia = np.array([0, 0, 1, 2, 3, 4, 5, 6, 7, 5, 2])
    ib = np.array([1, 4, 3, 2, 0, 1, 6, 7, 5, 5, 4])
    got = SSIMDistance(batch_size=3, **ours).pair_distances(images, ia, ib)  # several batches
    expected = [
        _skimage_distance(images[a], images[b], **theirs) for a, b in zip(ia, ib, strict=True)
    ]
    np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-12)
    np.testing.assert_array_equal(got[[3, 9]], 0.0)  # an image against itself


def test_batched_ssim_pairwise_is_one_triangle_of_skimage_values() -> None:
    a = _images(9, 6, 32)
    ssim = SSIMDistance(batch_size=4)
    full = ssim.pairwise(a, progress=False)
    rows, cols = np.triu_indices(6, k=1)
    settings = {"gaussian_weights": True, "sigma": 1.5, "use_sample_covariance": False}
    expected = [_skimage_distance(a[i], a[j], **settings) for i, j in zip(rows, cols, strict=True)]
    np.testing.assert_allclose(full[rows, cols], expected, rtol=1e-12)
    np.testing.assert_array_equal(full, full.T)


def test_ssim_pair_distances_input_errors() -> None:
    ssim = SSIMDistance()
    images = [*_images(0, 2, 32), *_images(1, 1, 48)]
    with pytest.raises(InvalidInputError, match=r"equal size; images\[1\], images\[2\]"):
        ssim.pair_distances(images, [0, 1], [1, 2])
    with pytest.raises(InvalidInputError, match="`index_b` must index the 3 images"):
        ssim.pair_distances(images, [0], [3])
    with pytest.raises(InvalidInputError, match="same length; got 2 vs 1"):
        ssim.pair_distances(images, [0, 1], [1])
    with pytest.raises(InvalidInputError, match="`index_a` must be a 1-D array of integers"):
        ssim.pair_distances(images, [0.5], [1])
    assert ssim.pair_distances(images, [], []).shape == (0,)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_batched_ssim_on_cuda_gives_the_cpu_values() -> None:
    images = _images(10, 8, 64)
    ia, ib = np.triu_indices(8, k=1)
    cpu = SSIMDistance().pair_distances(images, ia, ib)
    gpu = SSIMDistance(device="cuda").pair_distances(images, ia, ib)
    np.testing.assert_allclose(gpu, cpu, rtol=0, atol=1e-10)  # float64 on both


def test_ssim_converts_grey_and_sequences() -> None:
    grey = np.random.default_rng(0).integers(0, 256, (40, 40), dtype=np.uint8)
    rgb = np.repeat(grey[:, :, None], 3, axis=2)
    ssim = SSIMDistance()
    np.testing.assert_allclose(ssim.distance([grey], [rgb]), [0.0], atol=1e-12)
    assert ssim.name == "ssim-gaussian1.5"
    assert isinstance(ssim, AppearanceDistance)


# ----------------------------------------------------------------------------- LPIPS


@pytest.fixture(scope="module")
def alexnet_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A stand-in ``alexnet-owt-7be5be79.pth``: torchvision key names, seeded random values.

    Only the ``features.*`` entries are used by LPIPS; one classifier entry is kept to show
    the rest of the published file is ignored.
    """
    from torchvision.models import alexnet

    torch.manual_seed(8)
    features = alexnet(weights=None).features
    state = {f"features.{k}": v for k, v in features.state_dict().items()}
    state["classifier.6.bias"] = torch.zeros(1000)
    path = tmp_path_factory.mktemp("torchvision_alexnet") / "alexnet-owt-7be5be79.pth"
    torch.save(state, path)
    return path


@pytest.fixture(scope="module")
def lpips_metric(alexnet_file: Path) -> LPIPSDistance:
    # The stand-in cannot match torchvision's published SHA-256 prefix.
    return LPIPSDistance(alexnet_file, verify=False, batch_size=3)


@pytest.fixture(scope="module")
def lpips_small(alexnet_file: Path) -> LPIPSDistance:
    """The same metric at 64 px: cheap, for checks that do not depend on the resolution."""
    return LPIPSDistance(alexnet_file, verify=False, size=64, batch_size=3)


@pytest.fixture(scope="module")
def lpips_reference(alexnet_file: Path) -> torch.nn.Module:
    """The ``lpips`` package's own LPIPS(alex) with the stand-in backbone loaded."""
    import lpips

    with warnings.catch_warnings():  # lpips passes torchvision's deprecated `pretrained`
        warnings.simplefilter("ignore")
        ref = lpips.LPIPS(net="alex", pnet_rand=True, verbose=False)
    slice_of = {0: 1, 2: 2, 3: 2, 5: 3, 6: 3, 8: 4, 10: 5}  # torchvision index -> lpips slice
    state = ref.state_dict()
    for key, value in torch.load(alexnet_file, weights_only=True).items():
        if key.startswith("features."):
            _, index, param = key.split(".")
            state[f"net.slice{slice_of[int(index)]}.{index}.{param}"] = value
    ref.load_state_dict(state)
    return ref.eval()


def test_lpips_matches_the_lpips_package(
    lpips_metric: LPIPSDistance, lpips_reference: torch.nn.Module
) -> None:
    a, b = _images(10, 4, 256), _images(11, 4, 256)  # already 256 px: no resize involved
    b[0] = np.clip(a[0].astype(int) + 10, 0, 255)
    got = lpips_metric.distance(a, b)
    to_tensor = lambda x: torch.from_numpy(x).permute(0, 3, 1, 2).float() / 255  # noqa: E731
    with torch.no_grad():
        expected = lpips_reference(to_tensor(a), to_tensor(b), normalize=True).flatten()
    np.testing.assert_allclose(got, expected.double().numpy(), rtol=1e-5)  # float32 networks
    assert got[0] < got[1:].min()


def test_lpips_resizes_to_256_pixels(lpips_metric: LPIPSDistance) -> None:
    small_a, small_b = _images(12, 2, 64), _images(13, 2, 64)
    big = [
        torch.nn.functional.interpolate(
            torch.from_numpy(x).permute(0, 3, 1, 2).float() / 255,
            size=(256, 256),
            mode="bilinear",
            antialias=True,
        )
        for x in (small_a, small_b)
    ]
    with torch.no_grad():
        expected = lpips_metric.forward(big[0], big[1]).double().numpy()
    np.testing.assert_allclose(lpips_metric.distance(small_a, small_b), expected, rtol=1e-6)


def test_lpips_is_deterministic_symmetric_and_zero_on_identity(
    lpips_small: LPIPSDistance,
) -> None:
    a, b = _images(14, 3, 96), _images(15, 3, 96)
    d_ab = lpips_small.distance(a, b)
    np.testing.assert_array_equal(d_ab, lpips_small.distance(a, b))
    np.testing.assert_allclose(d_ab, lpips_small.distance(b, a), rtol=1e-6)
    np.testing.assert_array_equal(lpips_small.distance(a, a), 0.0)
    assert (d_ab > 0).all()


def test_lpips_pairwise_agrees_with_rowwise_distance(lpips_small: LPIPSDistance) -> None:
    a = [*_images(16, 4, 64), _images(17, 1, 80)[0]]  # sizes may differ
    b = _images(18, 2, 72)
    cross = lpips_small.pairwise(a, b, progress=False)
    assert cross.shape == (5, 2)
    for j in range(2):
        # float64 accumulation of the expanded square vs a float32 direct sum
        np.testing.assert_allclose(
            cross[:, j], lpips_small.distance(a, [b[j]] * 5), rtol=1e-6, atol=1e-8
        )
    full = lpips_small.pairwise(a, progress=False)
    np.testing.assert_array_equal(full, full.T)
    np.testing.assert_array_equal(np.diag(full), 0.0)
    np.testing.assert_allclose(full[0, 1:], lpips_small.distance([a[0]] * 4, a[1:]), rtol=1e-6)


def test_lpips_pair_distances_agree_with_pairwise(lpips_small: LPIPSDistance) -> None:
    images = [*_images(19, 5, 64), _images(20, 1, 80)[0]]
    ia = np.array([0, 3, 1, 5, 0, 4, 2])
    ib = np.array([1, 2, 5, 0, 4, 3, 2])
    small = LPIPSDistance(lpips_small.backbone_path, verify=False, size=64, batch_size=2)
    got = small.pair_distances(images, ia, ib)  # first images in groups of 2
    full = lpips_small.pairwise(images, images, progress=False)
    # the features are float32 convolutions: another batch composition or thread count may
    # pick another oneDNN algorithm (seen: 3e-8 relative under a parallel test run); the
    # distances themselves accumulate in float64
    np.testing.assert_allclose(got, full[ia, ib], rtol=1e-6, atol=1e-9)


def test_lpips_forward_is_differentiable(lpips_small: LPIPSDistance) -> None:
    gen = torch.Generator().manual_seed(11)
    x = torch.rand(2, 3, 64, 64, generator=gen, requires_grad=True)
    y = torch.rand(2, 3, 64, 64, generator=gen)
    d = lpips_small.forward(x, y)
    assert d.shape == (2,)
    d.sum().backward()
    assert x.grad is not None
    assert x.grad.abs().sum() > 0


def test_lpips_backbone_verification_and_missing_file(
    alexnet_file: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with pytest.raises(InvalidInputError, match="has SHA-256 prefix 7be5be79"):
        LPIPSDistance(alexnet_file)
    monkeypatch.delenv(ENV_VAR, raising=False)
    with pytest.raises(
        MissingWeightsError,
        match=re.escape(
            "Weights file 'alexnet-owt-7be5be79.pth' of model 'torchvision_alexnet' is not on "
            "local disk: no `backbone_weights` was given and $IDAUDIT_WEIGHTS is not set. "
            "idaudit never downloads weights: get it from "
            "https://download.pytorch.org/models/alexnet-owt-7be5be79.pth"
        ),
    ):
        LPIPSDistance()


def test_lpips_rejects_a_backbone_without_features(tmp_path: Path) -> None:
    torch.save({"classifier.6.bias": torch.zeros(1000)}, tmp_path / "alexnet-owt-7be5be79.pth")
    with pytest.raises(
        InvalidInputError,
        match=r"do not fit AlexNet features: keys 10 missing \(first: features\.0\.weight",
    ):
        LPIPSDistance(tmp_path, verify=False)


def test_lpips_input_errors(lpips_metric: LPIPSDistance) -> None:
    with pytest.raises(InvalidInputError, match="same number of images; got 1 vs 2"):
        lpips_metric.distance(_images(0, 1), _images(0, 2))
    with pytest.raises(TypeError, match=r"`a` must be a numpy\.ndarray or a sequence"):
        lpips_metric.distance("a.png", _images(0, 1))
    with pytest.raises(InvalidInputError, match=r"`x` must be \(n, 3, H, W\)"):
        lpips_metric.forward(torch.zeros(1, 64, 64), torch.zeros(1, 3, 64, 64))
    assert isinstance(lpips_metric, AppearanceDistance)


def test_lpips_name_says_the_size_when_it_is_not_256(
    lpips_metric: LPIPSDistance, lpips_small: LPIPSDistance
) -> None:
    assert lpips_metric.name == "lpips-alex-v0.1"
    assert lpips_small.name == "lpips-alex-v0.1-64px"
    assert lpips_metric.device == "cpu"
    a, b = _images(4, 1), _images(5, 1)
    assert lpips_metric.distance(a, b)[0] != lpips_small.distance(a, b)[0]
