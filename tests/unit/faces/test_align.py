from __future__ import annotations

import numpy as np
import pytest
from scipy.optimize import least_squares

from idaudit.exceptions import InvalidInputError
from idaudit.faces import SimilarityTransform, align, arcface_template, estimate_similarity
from idaudit.faces._align import ARCFACE_TEMPLATE, warp_affine

pytestmark = pytest.mark.faces

PUBLISHED_TEMPLATE = [
    (38.2946, 51.6963),
    (73.5318, 51.5014),
    (56.0252, 71.7366),
    (41.5493, 92.3655),
    (70.7299, 92.2041),
]


def test_template_is_the_published_arcface_one() -> None:
    np.testing.assert_array_equal(ARCFACE_TEMPLATE, PUBLISHED_TEMPLATE)
    np.testing.assert_array_equal(arcface_template(112), PUBLISHED_TEMPLATE)


def test_template_scaling_rule() -> None:
    # 160 px: the same framing at 160/112 the resolution; margin shrinks it into the centre.
    np.testing.assert_allclose(
        arcface_template(160), np.array(PUBLISHED_TEMPLATE) * 160 / 112, rtol=1e-15
    )
    np.testing.assert_allclose(
        arcface_template(160, margin=16), np.array(PUBLISHED_TEMPLATE) * 128 / 112 + 16, rtol=1e-15
    )


@pytest.mark.parametrize("seed", range(6))
def test_known_similarity_is_recovered(seed: int) -> None:
    rng = np.random.default_rng(seed)
    scale = rng.uniform(0.2, 5.0)
    angle = rng.uniform(-np.pi + 1e-3, np.pi - 1e-3)  # the whole circle, both signs
    shift = rng.uniform(-500, 500, 2)
    c, s = np.cos(angle), np.sin(angle)
    src = rng.uniform(0, 400, (5, 2))
    # Apply the transform by hand (closed form), independently of SimilarityTransform.
    dst = scale * src @ np.array([[c, -s], [s, c]]).T + shift
    fit = estimate_similarity(src, dst)
    # rtol 1e-9: exact data, so only float64 round-off of an SVD on O(1e3) coordinates remains.
    np.testing.assert_allclose(fit.scale, scale, rtol=1e-9)
    np.testing.assert_allclose(fit.rotation, angle, atol=1e-9)
    np.testing.assert_allclose(fit.translation, shift, atol=1e-7)
    assert fit.rms_error < 1e-9


def _posed_landmarks(
    template: np.ndarray, scale: float, angle: float, shift: np.ndarray
) -> np.ndarray:
    """The template rotated by ``angle``, scaled and shifted, by the closed form."""
    c, s = np.cos(angle), np.sin(angle)
    return scale * template @ np.array([[c, -s], [s, c]]).T + shift


@pytest.mark.parametrize("seed", range(4))
def test_landmarks_land_on_the_template_within_1e4_px(seed: int) -> None:
    rng = np.random.default_rng(100 + seed)
    size = (112, 160)[seed % 2]
    template = np.array(PUBLISHED_TEMPLATE) * size / 112
    landmarks = _posed_landmarks(
        template, rng.uniform(0.3, 3.0), rng.uniform(-1.0, 1.0), rng.uniform(100, 300, 2)
    )
    image = rng.integers(0, 256, (480, 640, 3), dtype=np.uint8)
    crop, fit = align(image, landmarks, size=size, return_transform=True)
    assert crop.shape == (size, size, 3)
    mapped = landmarks @ fit.matrix[:, :2].T + fit.matrix[:, 2]  # through the warp's matrix
    assert np.abs(mapped - template).max() < 1e-4


def _blob_centroids(crop: np.ndarray, centres: np.ndarray, radius: int) -> np.ndarray:
    """Intensity-weighted centroid ``(x, y)`` of the crop within ``radius`` of each centre."""
    grey = crop[..., 0].astype(np.float64)
    ys, xs = np.mgrid[0 : grey.shape[0], 0 : grey.shape[1]]
    out = []
    for cx, cy in centres:
        window = (xs - cx) ** 2 + (ys - cy) ** 2 <= radius**2
        w = grey * window
        out.append([(w * xs).sum() / w.sum(), (w * ys).sum() / w.sum()])
    return np.array(out)


@pytest.mark.parametrize("seed", range(4))
def test_warped_pixels_land_on_the_template(seed: int) -> None:
    # End to end through the pixels: draw a Gaussian blob at each landmark of a rotated,
    # scaled, shifted face, align, and find the blobs' centroids in the crop. The blobs are
    # sized to 2 px (sd) in the crop, so their pixels, not the landmark arithmetic, decide.
    rng = np.random.default_rng(200 + seed)
    size = (112, 160)[seed % 2]
    template = np.array(PUBLISHED_TEMPLATE) * size / 112
    scale = rng.uniform(0.8, 2.5)
    # the 112-pixel face, centred on the origin, then posed inside the 400-pixel photo
    face = np.array(PUBLISHED_TEMPLATE) - [56.0, 72.0]
    landmarks = _posed_landmarks(face, scale, rng.uniform(-np.pi, np.pi), rng.uniform(150, 250, 2))
    sd = 2.0 * scale * 112 / size  # source pixels per crop pixel: scale * 112 / size
    ys, xs = np.mgrid[0:400, 0:400].astype(np.float64)
    image = np.zeros((400, 400))
    for x, y in landmarks:
        image += np.exp(-((xs - x) ** 2 + (ys - y) ** 2) / (2 * sd**2))
    image = np.rint(255 * image).astype(np.uint8)
    crop = align(image, landmarks, size=size)
    centroids = _blob_centroids(crop, template, radius=8)  # 4 sd; blobs >= 20 px apart
    # 0.05 px: over 200 random poses the largest error was 0.022 px. What remains is the
    # bilinear interpolation of the blob's profile (the crop samples the source between its
    # pixels) and uint8 rounding of the source and of the crop (about 1e-3 px); a half-pixel
    # convention slip would show as 0.5 px.
    np.testing.assert_allclose(centroids, template, atol=0.05)


def test_least_squares_optimum_matches_scipy_on_noisy_points() -> None:
    rng = np.random.default_rng(7)
    src = rng.uniform(0, 200, (5, 2))
    dst = 0.8 * src[:, ::-1] + 3.0 + rng.normal(0, 2.0, (5, 2))  # not an exact similarity

    def residuals(p: np.ndarray) -> np.ndarray:
        a, b, tx, ty = p  # s·cos θ, s·sin θ, shift
        pred = np.column_stack(
            [a * src[:, 0] - b * src[:, 1] + tx, b * src[:, 0] + a * src[:, 1] + ty]
        )
        return (pred - dst).ravel()

    ref = least_squares(residuals, x0=[1.0, 0.0, 0.0, 0.0], xtol=1e-14, ftol=1e-14, gtol=1e-14)
    fit = estimate_similarity(src, dst)
    got = [fit.scale * np.cos(fit.rotation), fit.scale * np.sin(fit.rotation), *fit.translation]
    # rtol 1e-7: scipy's iterative optimum vs the closed form, both at machine-level tolerances.
    np.testing.assert_allclose(got, ref.x, rtol=1e-7, atol=1e-7)
    np.testing.assert_allclose(fit.rms_error, np.sqrt(2 * ref.cost / 5), rtol=1e-7)


def test_mirrored_points_still_give_a_rotation() -> None:
    src = np.array(PUBLISHED_TEMPLATE)
    dst = src * [-1.0, 1.0]  # a reflection: the best proper rotation must be returned
    fit = estimate_similarity(src, dst)
    assert np.linalg.det(fit.matrix[:, :2]) > 0
    assert fit.rms_error > 1.0


def test_integer_shift_crop_equals_slicing() -> None:
    # A pure integer translation samples pixel centres exactly: the crop is a slice.
    rng = np.random.default_rng(3)
    image = rng.integers(0, 256, (300, 300, 3), dtype=np.uint8)
    crop = align(image, arcface_template(112) + np.array([37.0, 61.0]))
    np.testing.assert_array_equal(crop, image[61 : 61 + 112, 37 : 37 + 112])


def test_warp_matches_opencv() -> None:
    cv2 = pytest.importorskip("cv2")
    rng = np.random.default_rng(11)
    image = rng.integers(0, 256, (200, 260, 3), dtype=np.uint8)
    matrix = SimilarityTransform.from_params(0.7, 0.5, [-30.0, 40.0]).matrix
    ours = warp_affine(image, matrix, (112, 112)).astype(int)
    ref = cv2.warpAffine(
        image, matrix, (112, 112), flags=cv2.INTER_LINEAR, borderMode=cv2.BORDER_CONSTANT
    ).astype(int)
    # atol 1 grey level: OpenCV rounds bilinear weights to 1/32, we interpolate in float64.
    assert np.abs(ours - ref).max() <= 1
    assert np.mean(ours != ref) < 0.05


def test_outside_the_photo_is_black() -> None:
    image = np.full((50, 50, 3), 200, np.uint8)
    crop = align(image, arcface_template(112) - 100.0)  # face far off the top-left corner
    assert crop[-1, -1].tolist() == [200, 200, 200]
    assert crop[0, 0].tolist() == [0, 0, 0]


def test_grey_image_is_accepted() -> None:
    crop = align(np.full((120, 120), 9, np.uint8), arcface_template(112) + 4.0)
    assert crop.shape == (112, 112, 3)
    assert crop[50, 50].tolist() == [9, 9, 9]


def test_inverse_round_trip() -> None:
    tf = SimilarityTransform.from_params(2.5, -0.7, [4.0, -9.0])
    pts = np.random.default_rng(0).uniform(-10, 10, (7, 2))
    np.testing.assert_allclose(tf.inverse().apply(tf.apply(pts)), pts, atol=1e-12)


def test_errors_name_the_argument() -> None:
    with pytest.raises(
        InvalidInputError, match=r"`landmarks` must have shape \(5, 2\); got \(4, 2\)"
    ):
        align(np.zeros((10, 10, 3), np.uint8), np.zeros((4, 2)))
    with pytest.raises(InvalidInputError, match="`src` points must not all coincide"):
        estimate_similarity(np.ones((5, 2)), np.zeros((5, 2)))
    with pytest.raises(InvalidInputError, match=r"got \(5, 2\) vs \(4, 2\)"):
        estimate_similarity(np.zeros((5, 2)), np.zeros((4, 2)))
    with pytest.raises(InvalidInputError, match="`dst` must be finite"):
        estimate_similarity(np.eye(2), [[0.0, np.nan], [1.0, 1.0]])
    with pytest.raises(InvalidInputError, match="`size` must be >= 8"):
        arcface_template(4)
