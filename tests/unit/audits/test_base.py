"""Tests of idaudit.audits._base: the estimator contract shared by all auditors."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
import torch
from sklearn.base import clone

from idaudit import (
    GaussMechAuditor,
    InvalidInputError,
    KDELRAuditor,
    MMDTVAuditor,
    NotFittedError,
    ROCHTAuditor,
)
from idaudit._device import resolve_device


def test_reading_results_before_fit_raises() -> None:
    aud = MMDTVAuditor()
    with pytest.raises(NotFittedError, match=r"not fitted yet; call `fit\(emb_a, emb_b\)`"):
        aud.epsilon_  # noqa: B018
    assert not hasattr(aud, "mmd2_")
    with pytest.raises(AttributeError, match="no attribute 'foo'"):
        aud.foo  # noqa: B018


def test_fit_sets_plain_python_results() -> None:
    gen = np.random.default_rng(0)
    aud = GaussMechAuditor().fit(gen.normal(size=(5, 3)), gen.normal(size=(6, 3)))
    assert type(aud.epsilon_) is float
    assert (aud.n_a_, aud.n_b_) == (5, 6)
    assert aud.seed_ is None


@pytest.mark.parametrize(
    ("auditor", "label"),
    [
        (GaussMechAuditor(), "gaussmech"),
        (KDELRAuditor(), "kdelr"),
        (KDELRAuditor(mix=0.01), "kdelr_mix0.01"),
        (KDELRAuditor(mix=1e-5), "kdelr_mix1e-05"),
        (MMDTVAuditor(bandwidth_scale=2.0), "mmdtv"),
        (ROCHTAuditor(), "rocht"),
        (ROCHTAuditor(classifier="random_forest"), "rocht_rf"),
        (MMDTVAuditor(name="wide"), "wide"),
    ],
)
def test_labels(auditor: object, label: str) -> None:
    assert auditor.label == label  # type: ignore[attr-defined]


def test_repr_states_status() -> None:
    assert repr(KDELRAuditor(mix=0.01)) == "KDELRAuditor(mix=0.01)  # status: diagnostic"
    assert repr(MMDTVAuditor()).endswith("# status: sample_estimate")


def test_bad_name() -> None:
    gen = np.random.default_rng(0)
    with pytest.raises(InvalidInputError, match="`name` must be None or a label"):
        GaussMechAuditor(name="two words").fit(gen.normal(size=(3, 2)), gen.normal(size=(3, 2)))


def test_clone_and_pickle_round_trip() -> None:
    gen = np.random.default_rng(1)
    aud = MMDTVAuditor(bandwidth_scale=0.5, n_permutations=20, rng=3)
    twin = clone(aud)
    assert twin.get_params() == aud.get_params()
    a, b = gen.normal(size=(8, 3)), gen.normal(size=(9, 3))
    fitted = pickle.loads(pickle.dumps(aud.fit(a, b)))
    assert fitted.epsilon_ == twin.fit(a, b).epsilon_
    assert fitted.pvalue_ == twin.pvalue_


def test_device_checks() -> None:
    assert resolve_device("cpu") == torch.device("cpu")
    with pytest.raises(InvalidInputError, match="`device` must be 'cpu' or 'cuda'; got 'tpu'"):
        resolve_device("tpu")
    with pytest.raises(TypeError, match="`device` must be a string"):
        resolve_device(3)
    if not torch.cuda.is_available():
        with pytest.raises(InvalidInputError, match="CUDA is not available here"):
            resolve_device("cuda")
        gen = np.random.default_rng(0)
        with pytest.raises(InvalidInputError, match="CUDA is not available"):
            MMDTVAuditor(device="cuda").fit(gen.normal(size=(4, 2)), gen.normal(size=(4, 2)))
