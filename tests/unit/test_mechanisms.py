"""Unit tests for idaudit.mechanisms (noise benchmarks, EncodedGenerator, sampling glue)."""

from __future__ import annotations

import numpy as np
import pytest
import xarray as xr
from scipy import stats

from idaudit.data import EmbeddingSet
from idaudit.exceptions import IdauditWarning, InvalidInputError
from idaudit.mechanisms import (
    EncodedGenerator,
    GaussianNoise,
    LaplaceNoise,
    Mechanism,
    sample_embeddings,
)


@pytest.fixture
def point_base() -> EmbeddingSet:
    centres = np.array([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, -1.0], [-1.0, 0.0, 0.0]])
    return EmbeddingSet(centres, ["a", "b", "c", "d"])


@pytest.fixture
def cloud_base() -> EmbeddingSet:
    gen = np.random.default_rng(3)
    x = gen.normal(size=(12, 3))
    return EmbeddingSet(x, np.repeat(["a", "b", "c"], 4))


def _gaussian_delta_reference(eps: float, sigma: float, dist: float) -> float:
    """Balle & Wang (2018), Theorem 8, with scipy's normal CDF (an independent route)."""
    a = dist / (2 * sigma)
    b = eps * sigma / dist
    return float(stats.norm.cdf(a - b) - np.exp(eps) * stats.norm.cdf(-a - b))


# -- the protocol ---------------------------------------------------------------------------


def test_noise_mechanisms_satisfy_the_protocol(point_base: EmbeddingSet) -> None:
    assert isinstance(GaussianNoise(point_base, 0.5), Mechanism)
    assert isinstance(LaplaceNoise(point_base, 0.5), Mechanism)
    np.testing.assert_array_equal(GaussianNoise(point_base, 0.5).identities, ["a", "b", "c", "d"])


# -- GaussianNoise --------------------------------------------------------------------------


def test_gaussian_draws_have_the_stated_mean_and_scale(point_base: EmbeddingSet) -> None:
    mech = GaussianNoise(point_base, sigma=0.7)
    x = mech.sample("b", 20_000, rng=1)
    assert x.shape == (20_000, 3)
    # standard error of the mean is 0.7/sqrt(2e4) = 0.005; 5 s.e. tolerance
    np.testing.assert_allclose(x.mean(axis=0), [0.0, 1.0, 0.0], atol=0.025)
    # s.e. of a sample sd is ~0.7/sqrt(4e4) = 0.0035; 5 s.e. tolerance
    np.testing.assert_allclose(x.std(axis=0, ddof=1), 0.7, atol=0.018)
    # per-coordinate normality: Kolmogorov-Smirnov against N(0, 0.7^2)
    assert stats.kstest((x[:, 0] - 0.0) / 0.7, "norm").pvalue > 1e-3


def test_scales_share_common_random_numbers(point_base: EmbeddingSet) -> None:
    x1 = GaussianNoise(point_base, 0.1).sample("a", 50, rng=7)
    x2 = GaussianNoise(point_base, 2.0).sample("a", 50, rng=7)
    centre = np.array([1.0, 0.0, 0.0])
    np.testing.assert_allclose((x1 - centre) / 0.1, (x2 - centre) / 2.0, rtol=1e-12)


def test_same_rng_same_draws_and_rng_matters(point_base: EmbeddingSet) -> None:
    mech = GaussianNoise(point_base, 0.3)
    np.testing.assert_array_equal(mech.sample("c", 5, rng=4), mech.sample("c", 5, rng=4))
    assert not np.array_equal(mech.sample("c", 5, rng=4), mech.sample("c", 5, rng=5))


def test_distributional_base_draws_base_rows_uniformly(cloud_base: EmbeddingSet) -> None:
    mech = GaussianNoise(cloud_base, sigma=1e-9)
    rows = cloud_base.get("b")
    x = mech.sample("b", 4000, rng=0)
    # each output sits on one base row (noise 1e-9)
    dist = np.linalg.norm(x[:, None, :] - rows[None], axis=2)  # (4000, 4)
    assert (dist.min(axis=1) < 1e-7).all()
    counts = np.bincount(dist.argmin(axis=1), minlength=4)
    assert stats.chisquare(counts).pvalue > 1e-3


@pytest.mark.parametrize("delta", [1e-5, 1e-3, 0.1])
@pytest.mark.parametrize("sigma", [0.3, 1.0, 4.0])
def test_gaussian_pair_epsilon_is_the_exact_analytic_value(
    point_base: EmbeddingSet, sigma: float, delta: float
) -> None:
    mech = GaussianNoise(point_base, sigma)
    dist = float(np.sqrt(2.0))  # |e1 - e2|
    eps = mech.pair_epsilon("a", "b", delta)
    assert mech.is_exact("a", "b", delta)
    if eps == 0.0:  # delta at least the TV distance 2 Phi(dist / 2 sigma) - 1
        assert delta >= 2 * stats.norm.cdf(dist / (2 * sigma)) - 1 - 1e-12
    else:
        # delta(eps) recomputed with scipy's normal CDF; rtol 1e-6: root-finding tolerance
        np.testing.assert_allclose(_gaussian_delta_reference(eps, sigma, dist), delta, rtol=1e-6)


def test_gaussian_reference_uses_the_sphere_diameter(point_base: EmbeddingSet) -> None:
    mech = GaussianNoise(point_base, 1.3)
    assert mech.l2_sensitivity == pytest.approx(2.0)
    # antipodal points a = e1 and d = -e1 are at distance 2: the pair attains the reference
    assert mech.reference_epsilon(1e-5) == pytest.approx(mech.pair_epsilon("a", "d", 1e-5))
    assert mech.reference_epsilon(1e-5) > mech.pair_epsilon("a", "b", 1e-5)
    assert mech.reference_epsilon(0.0) == np.inf


def test_gaussian_distributional_pair_uses_the_support_diameter(cloud_base: EmbeddingSet) -> None:
    mech = GaussianNoise(cloud_base, 0.8)
    a, b = cloud_base.get("a"), cloud_base.get("c")
    far = max(np.linalg.norm(x - y) for x in a for y in b)
    assert not mech.is_exact("a", "c")
    eps = mech.pair_epsilon("a", "c", 1e-4)
    np.testing.assert_allclose(_gaussian_delta_reference(eps, 0.8, far), 1e-4, rtol=1e-6)


# -- LaplaceNoise ---------------------------------------------------------------------------


def test_laplace_draws_have_the_stated_scale(point_base: EmbeddingSet) -> None:
    x = LaplaceNoise(point_base, scale=0.5).sample("c", 20_000, rng=2)
    assert stats.kstest(x[:, 2] + 1.0, "laplace", args=(0.0, 0.5)).pvalue > 1e-3
    # variance of Laplace(b) is 2 b^2 = 0.5; s.e. of the sample variance ~ 0.5*sqrt(5/2e4)
    np.testing.assert_allclose(x.var(axis=0, ddof=1), 0.5, atol=0.04)


def test_laplace_pair_epsilon_is_the_supremum_of_the_privacy_loss() -> None:
    base = EmbeddingSet(np.array([[0.0], [0.8]]), ["a", "b"], normalize=False)
    mech = LaplaceNoise(base, scale=0.4)
    grid = np.linspace(-5, 6, 20_001)
    loss = stats.laplace.logpdf(grid, 0.0, 0.4) - stats.laplace.logpdf(grid, 0.8, 0.4)
    # the privacy loss is flat at its maximum beyond both centres: the grid attains it exactly
    assert mech.pair_epsilon("a", "b") == pytest.approx(np.abs(loss).max(), rel=1e-9)
    assert mech.pair_epsilon("a", "b") == pytest.approx(2.0)
    assert mech.is_exact("a", "b", 0.0)
    assert not mech.is_exact("a", "b", 1e-5)  # at delta > 0 the pure value is an upper bound


def test_laplace_l1_bounds(point_base: EmbeddingSet, cloud_base: EmbeddingSet) -> None:
    mech = LaplaceNoise(point_base, 0.25)
    assert mech.pair_epsilon("a", "b") == pytest.approx(2.0 / 0.25)  # |e1 - e2|_1 = 2
    assert mech.reference_epsilon() == pytest.approx(2.0 / 0.25)  # 2 max |x|_1 = 2
    cloud = LaplaceNoise(cloud_base, 2.0)
    a, b = cloud_base.get("a"), cloud_base.get("b")
    far = max(np.abs(x - y).sum() for x in a for y in b)
    assert cloud.pair_epsilon("a", "b") == pytest.approx(far / 2.0)
    assert cloud.reference_epsilon() >= cloud.pair_epsilon("a", "b")


# -- bad input ------------------------------------------------------------------------------


@pytest.mark.parametrize("cls", [GaussianNoise, LaplaceNoise])
@pytest.mark.parametrize("value", [0.0, -1.0, np.inf])
def test_scale_must_be_positive_and_finite(
    point_base: EmbeddingSet, cls: type, value: float
) -> None:
    with pytest.raises(InvalidInputError, match=r"must be in \(0, inf\); got"):
        cls(point_base, value)


def test_base_must_be_an_embedding_set() -> None:
    with pytest.raises(TypeError, match=r"`base` must be an idaudit\.EmbeddingSet; got ndarray"):
        GaussianNoise(np.eye(3), 1.0)  # type: ignore[arg-type]


def test_unknown_identity_is_named(point_base: EmbeddingSet) -> None:
    with pytest.raises(InvalidInputError, match="'zz'"):
        GaussianNoise(point_base, 1.0).sample("zz", 3, rng=0)
    with pytest.raises(InvalidInputError, match="'zz'"):
        LaplaceNoise(point_base, 1.0).pair_epsilon("a", "zz")


def test_n_must_be_positive(point_base: EmbeddingSet) -> None:
    with pytest.raises(InvalidInputError, match="`n` must be >= 1; got 0"):
        GaussianNoise(point_base, 1.0).sample("a", 0, rng=0)


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

    mech = EncodedGenerator(_jitter, _MeanColour(), _images())
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


def test_audit_mechanism_former_argument_order_warns(point_base: EmbeddingSet) -> None:
    from idaudit.audits import GaussMechAuditor
    from idaudit.mechanisms import audit_mechanism

    mech = GaussianNoise(point_base, 1.0)
    new = audit_mechanism(mech, [("a", "b")], [GaussMechAuditor()], 10, progress=False)
    with pytest.warns(FutureWarning, match="former argument order"):
        old = audit_mechanism(mech, [GaussMechAuditor()], [("a", "b")], 10, progress=False)
    xr.testing.assert_identical(old, new)


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
    # spotting the former argument order must not consume a generator of pairs or auditors
    from idaudit.audits import GaussMechAuditor
    from idaudit.mechanisms import audit_mechanism

    mech = GaussianNoise(point_base, 1.0)
    want = audit_mechanism(mech, [("a", "b")], [GaussMechAuditor()], 10, progress=False)
    pairs = (p for p in [("a", "b")])
    auditors = (aud for aud in [GaussMechAuditor()])
    got = audit_mechanism(mech, pairs, auditors, 10, progress=False)
    xr.testing.assert_identical(got, want)
    with pytest.warns(FutureWarning, match="former argument order"):
        old = audit_mechanism(
            mech,
            (aud for aud in [GaussMechAuditor()]),
            (p for p in [("a", "b")]),
            10,
            progress=False,
        )
    xr.testing.assert_identical(old, want)
