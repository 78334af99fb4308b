from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from idaudit.exceptions import InvalidInputError
from idaudit.faces import load_image
from idaudit.faces._io import to_rgb_uint8

pytestmark = pytest.mark.faces


def test_uint8_rgb_is_returned_unchanged() -> None:
    img = np.random.default_rng(0).integers(0, 256, (4, 5, 3), dtype=np.uint8)
    np.testing.assert_array_equal(to_rgb_uint8(img), img)


def test_grey_is_replicated() -> None:
    grey = np.arange(12, dtype=np.uint8).reshape(3, 4)
    out = to_rgb_uint8(grey)
    assert out.shape == (3, 4, 3)
    for c in range(3):
        np.testing.assert_array_equal(out[..., c], grey)
    np.testing.assert_array_equal(to_rgb_uint8(grey[..., None]), out)


def test_alpha_is_dropped() -> None:
    rgba = np.random.default_rng(1).integers(0, 256, (4, 4, 4), dtype=np.uint8)
    np.testing.assert_array_equal(to_rgb_uint8(rgba), rgba[..., :3])
    grey_alpha = rgba[..., :2]
    np.testing.assert_array_equal(to_rgb_uint8(grey_alpha)[..., 1], rgba[..., 0])


def test_uint16_rule_is_divide_by_257() -> None:
    values = np.array([[0, 128, 257, 65535, 32896]], dtype=np.uint16)
    # 255/65535 = 1/257 exactly: 0 → 0, 65535 → 255; 128/257 ≈ 0.498 rounds to 0.
    assert to_rgb_uint8(values)[0, :, 0].tolist() == [0, 0, 1, 255, 128]


def test_float_rule_and_refusal() -> None:
    x = np.array([[0.0, 0.5, 1.0, 1 / 255]])
    assert to_rgb_uint8(x)[0, :, 0].tolist() == [0, 128, 255, 1]
    with pytest.raises(
        InvalidInputError, match=r"values must lie in \[0, 1\]; got range \[0, 255\]"
    ):
        to_rgb_uint8(np.array([[0.0, 255.0]]))
    with pytest.raises(InvalidInputError, match="values must lie in"):
        to_rgb_uint8(np.array([[np.nan, 0.5]]))


def test_bad_arrays() -> None:
    with pytest.raises(InvalidInputError, match=r"`image` must not be empty; got shape \(0, 0\)"):
        to_rgb_uint8(np.zeros((0, 0)))
    with pytest.raises(InvalidInputError, match=r"got \(2, 2, 5\)"):
        to_rgb_uint8(np.zeros((2, 2, 5), np.uint8))
    with pytest.raises(TypeError, match="dtype uint8, uint16 or float"):
        to_rgb_uint8(np.zeros((2, 2), np.int64))
    with pytest.raises(TypeError, match="must be a numpy array; got list"):
        to_rgb_uint8([[0, 1]])


def test_load_image_modes(tmp_path: Path) -> None:
    rng = np.random.default_rng(2)
    rgb = rng.integers(0, 256, (6, 7, 3), dtype=np.uint8)
    Image.fromarray(rgb).save(tmp_path / "rgb.png")
    np.testing.assert_array_equal(load_image(tmp_path / "rgb.png"), rgb)

    rgba = np.dstack([rgb, np.full((6, 7), 10, np.uint8)])
    Image.fromarray(rgba, "RGBA").save(tmp_path / "rgba.png")
    np.testing.assert_array_equal(load_image(tmp_path / "rgba.png"), rgb)

    deep = np.array([[0, 65535], [257, 1000]], dtype=np.uint16)
    Image.fromarray(deep).save(tmp_path / "deep.png")  # 16-bit grey PNG
    assert load_image(tmp_path / "deep.png")[..., 0].tolist() == [[0, 255], [1, 4]]

    Image.fromarray(rgb).convert("P").save(tmp_path / "palette.png")
    assert load_image(tmp_path / "palette.png").shape == (6, 7, 3)


def test_load_image_failures(tmp_path: Path) -> None:
    junk = tmp_path / "junk.png"
    junk.write_bytes(b"not an image at all")
    with pytest.raises(OSError, match="cannot identify image file"):
        load_image(junk)
    truncated = tmp_path / "truncated.jpg"
    buf = tmp_path / "full.jpg"
    Image.fromarray(np.zeros((64, 64, 3), np.uint8)).save(buf)
    truncated.write_bytes(buf.read_bytes()[:200])
    with pytest.raises(OSError, match=r"(?i)truncated"):
        load_image(truncated)
    with pytest.raises(FileNotFoundError):
        load_image(tmp_path / "missing.png")


def test_load_image_int32_holding_8_bit_values_is_not_darkened(tmp_path: Path) -> None:
    # 8-bit pixels stored as Pillow mode "I" (int32): values within 0–255 are kept, not / 257.
    grey = np.array([[0, 1, 128], [200, 254, 255]], dtype=np.uint8)
    Image.fromarray(grey).convert("I").save(tmp_path / "int32.tif")
    with Image.open(tmp_path / "int32.tif") as check:
        assert check.mode == "I"
    out = load_image(tmp_path / "int32.tif")
    np.testing.assert_array_equal(out, np.repeat(grey[..., None], 3, axis=2))


def test_load_image_int32_above_255_is_16_bit(tmp_path: Path) -> None:
    deep = np.array([[0, 257], [65535, 1000]], dtype=np.int32)
    Image.fromarray(deep, "I").save(tmp_path / "int32_deep.tif")
    assert load_image(tmp_path / "int32_deep.tif")[..., 0].tolist() == [[0, 1], [255, 4]]
    too_big = np.array([[0, 70000]], dtype=np.int32)
    Image.fromarray(too_big, "I").save(tmp_path / "int32_big.tif")
    with pytest.raises(
        InvalidInputError,
        match=r"must hold integer pixels within 0–65535; got values from 0 to 70000\.",
    ):
        load_image(tmp_path / "int32_big.tif")


def test_load_image_16_bit_mode_is_scaled_even_when_dark(tmp_path: Path) -> None:
    # A genuine 16-bit file ("I;16") is divided by 257 even if every value is below 256.
    dark = np.array([[0, 255, 128]], dtype=np.uint16)
    Image.fromarray(dark).save(tmp_path / "dark16.png")
    with Image.open(tmp_path / "dark16.png") as check:
        assert check.mode.startswith("I;16")
    assert load_image(tmp_path / "dark16.png")[..., 0].tolist() == [[0, 1, 0]]


def test_enlarge_frame_brings_the_short_side_to_size_and_pads_with_edges() -> None:
    from idaudit.faces import FRAME_PAD_FRACTION, enlarge_frame

    gen = np.random.default_rng(0)
    image = gen.integers(0, 256, (64, 40, 3), dtype=np.uint8)
    out = enlarge_frame(image, 160)
    pad = round(FRAME_PAD_FRACTION * 160)
    assert out.shape == (256 + 2 * pad, 160 + 2 * pad, 3)  # 40 -> 160, 64 -> 256, aspect kept
    # the centre is Pillow's bicubic resize, the border repeats the edge pixels
    reference = np.asarray(Image.fromarray(image).resize((160, 256), Image.Resampling.BICUBIC))
    np.testing.assert_array_equal(out[pad:-pad, pad:-pad], reference)
    np.testing.assert_array_equal(out[:pad, pad:-pad], np.repeat(reference[:1], pad, axis=0))
    np.testing.assert_array_equal(out[pad:-pad, :pad], np.repeat(reference[:, :1], pad, axis=1))
    square = enlarge_frame(image, 100, square=True)
    assert square.shape == (100 + 2 * 30, 100 + 2 * 30, 3)


def test_prepare_frame_enlarges_every_frame_under_the_side_it_brings_them_to() -> None:
    from idaudit.faces import ENLARGE_BELOW, FRAME_PAD_FRACTION, FRAME_SIDE, prepare_frame

    assert ENLARGE_BELOW == FRAME_SIDE == 160
    pad = round(FRAME_PAD_FRACTION * FRAME_SIDE)
    gen = np.random.default_rng(1)
    for side in (64, 111, 112, 128, 159):  # 112-159 were left as they were by one road
        image = gen.integers(0, 256, (side, side + 7, 3), dtype=np.uint8)
        out = prepare_frame(image)
        assert out.shape[0] == FRAME_SIDE + 2 * pad, side
        reference = np.asarray(
            Image.fromarray(image).resize(
                (round((side + 7) * FRAME_SIDE / side), FRAME_SIDE), Image.Resampling.BICUBIC
            )
        )
        np.testing.assert_array_equal(out[pad:-pad, pad:-pad], reference)
    for side in (160, 200):
        image = gen.integers(0, 256, (side + 3, side, 3), dtype=np.uint8)
        assert prepare_frame(image) is image
