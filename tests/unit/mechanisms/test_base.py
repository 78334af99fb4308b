"""The mechanism protocol's glue (idaudit.mechanisms._base): sample_embeddings, audit_mechanism."""

from __future__ import annotations

import numpy as np
import pytest
import xarray as xr
from scipy import stats

from idaudit.data import EmbeddingSet
from idaudit.exceptions import InvalidInputError
from idaudit.mechanisms import (
    GaussianNoise,
    LaplaceNoise,
    sample_embeddings,
)
from idaudit.pipeline import EncodedGenerator
from standins import MeanColourEncoder, colour_images, jitter


@pytest.fixture
def point_base() -> EmbeddingSet:
    centres = np.array([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, -1.0], [-1.0, 0.0, 0.0]])
    return EmbeddingSet(centres, ["a", "b", "c", "d"])


def _gaussian_delta_reference(eps: float, sigma: float, dist: float) -> float:
    """Balle & Wang (2018), Theorem 8, with scipy's normal CDF (an independent route)."""
    a = dist / (2 * sigma)
    b = eps * sigma / dist
    return float(stats.norm.cdf(a - b) - np.exp(eps) * stats.norm.cdf(-a - b))


# -- sample_embeddings ----------------------------------------------------------------------


def test_sample_embeddings_keeps_raw_outputs_and_per_identity_seeds(
    point_base: EmbeddingSet,
) -> None:
    mech = GaussianNoise(point_base, 0.5)
    full = sample_embeddings(mech, 6, rng=11)
    part = sample_embeddings(mech, 6, ["c", "a"], rng=11)
    assert len(full) == 24
    assert len(part) == 12
    # an identity's draws do not depend on which others are drawn
    np.testing.assert_array_equal(full.get("c"), part.get("c"))
    # not normalised: the noise is part of the output
    assert not np.allclose(np.linalg.norm(full.embeddings, axis=1), 1.0)
    np.testing.assert_array_equal(full.get("a"), mech.sample("a", 6, rng=_seed_of(11, 0, 4)))


def _seed_of(rng: int, position: int, n_identities: int) -> int:
    from idaudit._validation import spawn_seeds

    return spawn_seeds(rng, n_identities)[position]


class _Broken:
    """A mechanism whose outputs go wrong for one identity."""

    def __init__(self, fault: str) -> None:
        self.fault = fault
        self.identities = np.array(["a", "b"])

    def sample(self, identity: str, n: int, *, rng: object = None) -> np.ndarray:
        x = np.ones((n, 3))
        if identity == "b":
            if self.fault == "shape":
                return np.ones((n, 3, 1))
            if self.fault == "rows":
                return np.ones((n - 1, 3))
            if self.fault == "dim":
                return np.ones((n, 4))
            if self.fault == "nan":
                x[0, 1] = np.nan
        return x


@pytest.mark.parametrize(
    ("fault", "message"),
    [
        ("shape", r"must return shape \(n, d\) = \(5, d\) for identity 'b'; got \(5, 3, 1\)"),
        ("rows", r"must return shape \(n, d\) = \(5, d\) for identity 'b'; got \(4, 3\)"),
        ("dim", "returned 4 features for identity 'b' but 3 for an earlier identity"),
        ("nan", "returned 1 row\\(s\\) with NaN or inf for identity 'b'"),
    ],
)
def test_bad_mechanism_outputs_are_rejected(fault: str, message: str) -> None:
    with pytest.raises(InvalidInputError, match=message):
        sample_embeddings(_Broken(fault), 5, rng=0)


def test_sample_embeddings_rejects_unknown_identities(point_base: EmbeddingSet) -> None:
    with pytest.raises(InvalidInputError, match="holds 'q', which the mechanism does not know"):
        sample_embeddings(GaussianNoise(point_base, 1.0), 4, ["a", "q"], rng=0)


# -- EncodedGenerator -----------------------------------------------------------------------


# -- audit_mechanism ------------------------------------------------------------------------


def test_audit_mechanism_attaches_the_known_guarantee(point_base: EmbeddingSet) -> None:
    from idaudit.audits import GaussMechAuditor, MMDTVAuditor
    from idaudit.mechanisms import audit_mechanism

    mech = LaplaceNoise(point_base, 0.5)
    pairs = [("a", "b"), ("c", "d"), ("a", "d")]
    ds = audit_mechanism(
        mech, pairs, [GaussMechAuditor(), MMDTVAuditor()], 60, rng=1, delta=0.0, progress=False
    )
    assert ds.sizes["pair"] == 3
    # |a - b|_1 = 2, |c - d|_1 = 2, |a - d|_1 = 2 (antipodal: e1 vs -e1): all 2 / 0.5 = 4
    np.testing.assert_allclose(ds["true_epsilon"], [4.0, 4.0, 4.0])
    assert ds["true_epsilon_exact"].values.all()
    assert float(ds["reference_epsilon"]) == pytest.approx(4.0)
    assert ds["true_epsilon"].attrs["status"] == "reference"
    assert ds.attrs["reference_delta"] == 0.0
    assert ds.attrs["n_per_identity"] == 60
    assert "LaplaceNoise" in ds.attrs["mechanism"]
    # the audited draws are the mechanism's draws for the same seed
    assert (ds["n_a"] == 60).all()
    assert (ds["mmdtv_epsilon"] <= ds["true_epsilon"]).all()


@pytest.mark.filterwarnings("ignore:.*repeat another exactly")
def test_audit_mechanism_runs_an_encoded_generator() -> None:
    from idaudit.audits import MMDTVAuditor
    from idaudit.mechanisms import audit_mechanism

    mech = EncodedGenerator(jitter, MeanColourEncoder(), colour_images())
    ds = audit_mechanism(mech, [("gb", "r")], [MMDTVAuditor()], 30, rng=0, progress=False)
    assert "true_epsilon" not in ds  # no known guarantee
    assert float(ds["mmdtv_mmd2"][0]) > 0.1  # red vs green/blue outputs differ


class _StatedGuarantee:
    """A mechanism that states a guarantee but has no ``default_delta``."""

    def __init__(self, inner: GaussianNoise) -> None:
        self.inner = inner
        self.identities = inner.identities

    def sample(self, identity: str, n: int, *, rng: object = None) -> np.ndarray:
        return self.inner.sample(identity, n, rng=rng)

    def pair_epsilon(self, a: str, b: str, delta: float) -> float:
        return self.inner.pair_epsilon(a, b, delta)

    def is_exact(self, a: str, b: str, delta: float) -> bool:
        return self.inner.is_exact(a, b, delta)

    def reference_epsilon(self, delta: float) -> float:
        return self.inner.reference_epsilon(delta)


def test_audit_mechanism_default_delta_follows_the_mechanism(point_base: EmbeddingSet) -> None:
    from idaudit.audits import GaussMechAuditor
    from idaudit.mechanisms import audit_mechanism

    pairs = [("a", "b"), ("a", "c")]
    run = {"auditors": [GaussMechAuditor()], "pairs": pairs, "n_per_identity": 20}
    # Laplace is pure DP: the default is delta = 0, so the point-base truth stays exact
    lap = audit_mechanism(LaplaceNoise(point_base, 0.5), rng=0, progress=False, **run)
    assert lap.attrs["reference_delta"] == 0.0
    assert lap["true_epsilon_exact"].values.all()
    # |a - b|_1 = |a - c|_1 = 2, scale 0.5
    np.testing.assert_allclose(lap["true_epsilon"], [4.0, 4.0])
    # an explicit delta > 0 is honoured and the pure value is then labelled an upper bound
    lap5 = audit_mechanism(LaplaceNoise(point_base, 0.5), rng=0, delta=1e-5, progress=False, **run)
    assert lap5.attrs["reference_delta"] == 1e-5
    assert not lap5["true_epsilon_exact"].values.any()
    # Gaussian: infinite pure epsilon, so the default is delta = 1e-5
    gauss = GaussianNoise(point_base, 1.0)
    gds = audit_mechanism(gauss, rng=0, progress=False, **run)
    assert gds.attrs["reference_delta"] == 1e-5
    # |a - b|_2 = sqrt 2 at sigma 1, delta 1e-5: epsilon solves Balle & Wang's delta(eps)
    eps = float(gds["true_epsilon"][0])
    np.testing.assert_allclose(_gaussian_delta_reference(eps, 1.0, np.sqrt(2)), 1e-5, rtol=1e-6)
    # a mechanism that states a guarantee but no default_delta gets 1e-5
    other = audit_mechanism(_StatedGuarantee(gauss), rng=0, progress=False, **run)
    assert other.attrs["reference_delta"] == 1e-5
    assert float(other["true_epsilon"][0]) == eps


@pytest.mark.parametrize(
    ("pairs", "error", "message"),
    [
        ([], InvalidInputError, "`pairs` must hold at least one pair; got none."),
        ([("a", "b"), ("a", "zz")], InvalidInputError, r"`pairs\[1\]` names identity 'zz'"),
        ([("a",)], InvalidInputError, r"`pairs\[0\]` must be a pair \(identity_a, identity_b\)"),
        (["ab"], InvalidInputError, r"`pairs\[0\]` must be a pair"),
        ([("c", "c")], InvalidInputError, r"`pairs\[0\]` pairs identity 'c' with itself"),
        (5, TypeError, "`pairs` must be a sequence of \\(identity_a, identity_b\\); got int"),
    ],
)
def test_audit_mechanism_checks_pairs(
    point_base: EmbeddingSet, pairs: object, error: type, message: str
) -> None:
    from idaudit.audits import MMDTVAuditor
    from idaudit.mechanisms import audit_mechanism

    with pytest.raises(error, match=message):
        audit_mechanism(GaussianNoise(point_base, 1.0), pairs, [MMDTVAuditor()], 10, rng=0)  # type: ignore[arg-type]


def test_audit_mechanism_checks_delta(point_base: EmbeddingSet) -> None:
    from idaudit.audits import MMDTVAuditor
    from idaudit.mechanisms import audit_mechanism

    with pytest.raises(InvalidInputError, match=r"`delta` must be in \[0, 1\); got 1.0"):
        audit_mechanism(
            GaussianNoise(point_base, 1.0), [("a", "b")], [MMDTVAuditor()], 10, delta=1.0
        )


def test_docstrings_render_single_backslashes() -> None:
    # raw docstrings with doubled backslashes show a literal "\\max" in rendered docs
    import inspect

    import idaudit.mechanisms as mechanisms

    objects = [getattr(mechanisms, name) for name in mechanisms.__all__]
    members = [m for obj in objects if inspect.isclass(obj) for _, m in inspect.getmembers(obj)]
    docs = [inspect.getdoc(o) or "" for o in [*objects, *members]]
    assert any("\\max" in d for d in docs)  # the check looks at the LaTeX-bearing docstrings
    assert not [d for d in docs if "\\\\" in d]


def test_audit_mechanism_accepts_one_shot_iterables(point_base: EmbeddingSet) -> None:
    from idaudit.audits import GaussMechAuditor
    from idaudit.mechanisms import audit_mechanism

    mech = GaussianNoise(point_base, 1.0)
    want = audit_mechanism(mech, [("a", "b")], [GaussMechAuditor()], 10, progress=False)
    pairs = (p for p in [("a", "b")])
    auditors = (aud for aud in [GaussMechAuditor()])
    got = audit_mechanism(mech, pairs, auditors, 10, progress=False)
    xr.testing.assert_identical(got, want)
