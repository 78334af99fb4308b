"""EncodedGenerator (idaudit.pipeline._draws): a generator composed with an encoder."""

from __future__ import annotations

import numpy as np
import pytest

from idaudit.exceptions import IdauditWarning, InvalidInputError
from idaudit.mechanisms import Mechanism
from idaudit.pipeline import EncodedGenerator
from standins import MeanColourEncoder, colour_images, jitter

# -- EncodedGenerator -----------------------------------------------------------------------


@pytest.mark.filterwarnings("ignore:.*repeat another exactly")
def test_encoded_generator_composes_generator_and_encoder() -> None:
    enc = MeanColourEncoder()
    mech = EncodedGenerator(jitter, enc, colour_images(), batch_size=4)
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
    mech = EncodedGenerator(lambda im: im, MeanColourEncoder(), colour_images())
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
    mech = EncodedGenerator(generator, MeanColourEncoder(), colour_images())  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError, match=message):
        mech.sample("r", 2, rng=0)


def test_encoded_generator_rejects_bad_encoder_outputs() -> None:
    with pytest.raises(InvalidInputError, match=r"must return shape \(2, 3\) .* got \(2, 4\)"):
        EncodedGenerator(lambda im: im, MeanColourEncoder(out_dim=4), colour_images()).sample(
            "r", 2, rng=0
        )
    with pytest.raises(InvalidInputError, match="returned NaN or inf for identity 'r'"):
        EncodedGenerator(lambda im: im, MeanColourEncoder(poison=True), colour_images()).sample(
            "r", 2, rng=0
        )


def test_encoded_generator_checks_its_arguments() -> None:
    with pytest.raises(TypeError, match="`generator` must be callable"):
        EncodedGenerator(3, MeanColourEncoder(), colour_images())  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="has no `encode`"):
        EncodedGenerator(lambda im: im, object(), colour_images())  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError, match="no source image for identity 'x'"):
        EncodedGenerator(lambda im: im, MeanColourEncoder(), {"x": []})
    with pytest.raises(InvalidInputError, match="got 'zz'"):
        EncodedGenerator(lambda im: im, MeanColourEncoder(), colour_images()).sample("zz", 1, rng=0)
    with pytest.raises(TypeError, match="`original_faces` must be a mutable mapping"):
        EncodedGenerator(lambda im: im, MeanColourEncoder(), colour_images(), original_faces=[])  # type: ignore[arg-type]
