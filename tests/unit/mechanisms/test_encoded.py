"""EncodedGenerator (idaudit.mechanisms._encoded): a generator composed with an encoder."""

from __future__ import annotations

import numpy as np
import pytest

from idaudit.exceptions import IdauditWarning, InvalidInputError
from idaudit.mechanisms import (
    EncodedGenerator,
    Mechanism,
)

# -- EncodedGenerator -----------------------------------------------------------------------


class _MeanColour:
    """Stand-in encoder: mean RGB colour of the crop, L2-normalised (dim 3)."""

    name = "mean-colour"
    dim = 3
    input_size = 8
    differentiable = False

    def __init__(self, out_dim: int = 3, poison: bool = False) -> None:
        self.out_dim = out_dim
        self.poison = poison
        self.calls = 0

    def encode(self, crops: np.ndarray) -> np.ndarray:
        self.calls += 1
        assert crops.dtype == np.uint8
        assert crops.shape[1:] == (8, 8, 3)
        v = crops.reshape(len(crops), -1, 3).astype(float).mean(axis=1) + 1.0
        v = v / np.linalg.norm(v, axis=1, keepdims=True)
        if self.poison:
            v[0, 0] = np.nan
        return np.tile(v, (1, self.out_dim // 3 + 1))[:, : self.out_dim].astype(np.float32)


def _images() -> dict[str, list[np.ndarray]]:
    red = np.zeros((8, 8, 3), np.uint8)
    red[..., 0] = 200
    blue = np.zeros((8, 8, 3), np.uint8)
    blue[..., 2] = 200
    green = np.zeros((8, 8, 3), np.uint8)
    green[..., 1] = 200
    return {"r": [red], "gb": [green, blue]}


def _jitter(image: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Stand-in generator with internal randomness R: brighten by a random amount."""
    return np.clip(image.astype(int) + int(rng.integers(0, 50)), 0, 255).astype(np.uint8)


@pytest.mark.filterwarnings("ignore:.*repeat another exactly")
def test_encoded_generator_composes_generator_and_encoder() -> None:
    enc = _MeanColour()
    mech = EncodedGenerator(_jitter, enc, _images(), batch_size=4)
    assert isinstance(mech, Mechanism)
    np.testing.assert_array_equal(mech.identities, ["gb", "r"])
    x = mech.sample("r", 10, rng=0)
    assert x.shape == (10, 3)
    assert x.dtype == np.float64
    assert enc.calls == 3  # ceil(10 / 4) batches
    # red dominates every red output; the generator's randomness varies the outputs
    assert (x.argmax(axis=1) == 0).all()
    assert np.unique(x[:, 1]).size > 1
    np.testing.assert_array_equal(x, mech.sample("r", 10, rng=0))
    # both source images of "gb" are drawn
    y = mech.sample("gb", 40, rng=1)
    assert set(y.argmax(axis=1)) == {1, 2}


def test_encoded_generator_without_rng_argument_warns_of_repeated_rows() -> None:
    mech = EncodedGenerator(lambda im: im, _MeanColour(), _images())
    # one source drawn three times through a deterministic generator: two exact repeats
    with pytest.warns(IdauditWarning, match="2 of 3 outputs for identity 'r' repeat another"):
        x = mech.sample("r", 3, rng=0)
    np.testing.assert_allclose(x, np.repeat(x[:1], 3, axis=0))


@pytest.mark.parametrize(
    ("generator", "message"),
    [
        (lambda im: im.astype(np.float32), "must return uint8 RGB images; got dtype float32"),
        (lambda im: im[:4], r"must return \(8, 8, 3\) crops .* got \(4, 8, 3\) for identity 'r'"),
    ],
)
def test_encoded_generator_rejects_bad_generated_images(generator: object, message: str) -> None:
    mech = EncodedGenerator(generator, _MeanColour(), _images())  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError, match=message):
        mech.sample("r", 2, rng=0)


def test_encoded_generator_rejects_bad_encoder_outputs() -> None:
    with pytest.raises(InvalidInputError, match=r"must return shape \(2, 3\) .* got \(2, 4\)"):
        EncodedGenerator(lambda im: im, _MeanColour(out_dim=4), _images()).sample("r", 2, rng=0)
    with pytest.raises(InvalidInputError, match="returned NaN or inf for identity 'r'"):
        EncodedGenerator(lambda im: im, _MeanColour(poison=True), _images()).sample("r", 2, rng=0)


def test_encoded_generator_checks_its_arguments() -> None:
    with pytest.raises(TypeError, match="`generator` must be callable"):
        EncodedGenerator(3, _MeanColour(), _images())  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="has no `encode`"):
        EncodedGenerator(lambda im: im, object(), _images())  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError, match="no source image for identity 'x'"):
        EncodedGenerator(lambda im: im, _MeanColour(), {"x": []})
    with pytest.raises(InvalidInputError, match="got 'zz'"):
        EncodedGenerator(lambda im: im, _MeanColour(), _images()).sample("zz", 1, rng=0)
    with pytest.raises(TypeError, match="`original_faces` must be a mutable mapping"):
        EncodedGenerator(lambda im: im, _MeanColour(), _images(), original_faces=[])  # type: ignore[arg-type]
