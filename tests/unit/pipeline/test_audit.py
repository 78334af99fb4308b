"""Unit tests for idaudit.pipeline: images in, audit out (stand-in models; real ones in faces/)."""

from __future__ import annotations

import re
import stat
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from scipy import stats

from idaudit import GaussMechAuditor, MMDTVAuditor
from idaudit.exceptions import IdauditWarning, InvalidInputError
from idaudit.faces import EmbeddingCache, Face, FacePipeline
from idaudit.pipeline import (
    AuditSettings,
    DrawSettings,
    GaussianBlur,
    Pixelate,
    PixelNoise,
    audit_generator,
    compare_conditions,
    encode_generator,
)
from idaudit.results import check_result_dataset


class _BrightDetector:
    """Finds one face covering the frame when its mean grey level exceeds 30."""

    name = "bright"

    def __init__(self) -> None:
        self.calls = 0

    def __repr__(self) -> str:
        return "BrightDetector()"

    def detect(self, image: np.ndarray) -> list[Face]:
        self.calls += 1
        if image.mean() <= 30:
            return []
        h, w = image.shape[:2]
        lm = np.array(
            [
                [w * 0.3, h * 0.4],
                [w * 0.7, h * 0.4],
                [w * 0.5, h * 0.6],
                [w * 0.35, h * 0.8],
                [w * 0.65, h * 0.8],
            ]
        )
        return [Face(box=np.array([0.0, 0.0, w, h]), score=1.0, landmarks=lm)]


class _ColourEncoder:
    """Mean colour of the crop plus one, L2-normalised (dim 3); crops are 8 × 8."""

    name = "colour"
    dim = 3
    input_size = 8
    differentiable = False
    device = "cpu"

    def __init__(self) -> None:
        self.encoded = 0

    def __repr__(self) -> str:
        return "ColourEncoder()"

    def align(self, image: np.ndarray, face: Face) -> np.ndarray:
        h, w = image.shape[:2]
        ys = np.linspace(0, h - 1, 8).astype(int)
        xs = np.linspace(0, w - 1, 8).astype(int)
        return np.ascontiguousarray(image[ys][:, xs])

    def encode(self, crops: np.ndarray) -> np.ndarray:
        self.encoded += len(crops)
        v = crops.reshape(len(crops), -1, 3).astype(float).mean(axis=1) + 1.0
        return (v / np.linalg.norm(v, axis=1, keepdims=True)).astype(np.float32)


def _pipeline() -> FacePipeline:
    return FacePipeline(_BrightDetector(), _ColourEncoder(), progress=False)


def _people(n_ids: int = 4, n_images: int = 8, size: int = 16, seed: int = 0) -> dict[str, Any]:
    """Identity k: a base colour plus per-image texture (distinct images, same person)."""
    gen = np.random.default_rng(seed)
    out = {}
    for k in range(n_ids):
        colour = np.array([60 + 40 * k, 200 - 30 * k, 100 + 20 * (k % 2)])
        out[f"id{k}"] = [
            np.clip(colour + gen.normal(0, 12, (size, size, 3)), 0, 255).astype(np.uint8)
            for _ in range(n_images)
        ]
    return out


def _darken(image: np.ndarray) -> np.ndarray:
    return (image // 10).astype(np.uint8)  # mean grey level below the detector's 30


def test_audit_generator_returns_a_checked_result_with_provenance() -> None:
    run = audit_generator(
        lambda im: im,
        _people(),
        models=_pipeline(),
        rng=0,
        progress=False,
        audit=AuditSettings(pairs=4, auditors=[GaussMechAuditor(), MMDTVAuditor()]),
    )
    check_result_dataset(run.results)
    assert run.results.sizes["pair"] == 4
    attrs = run.results.attrs
    assert attrs["encoder"] == "colour"
    assert attrs["detector_repr"] == "BrightDetector()"
    assert attrs["setting.mode"] == "detect"
    assert len(str(attrs["input_sha256"])) == 64
    assert attrs["n_ok"] == 32
    assert attrs["n_no_face"] == 0
    assert (run.results["lost_a"] == 0).all()
    # the per-pair table has one row per pair (no per-dimension explosion)
    assert run.pair_table().shape[0] == 4


def test_failures_are_dropped_counted_and_named() -> None:
    calls = {"n": 0}

    def flaky(image: np.ndarray) -> Any:
        calls["n"] += 1
        k = calls["n"]
        if k % 8 == 1:
            raise RuntimeError("model crashed")
        if k % 8 == 2:
            return image[:5]  # wrong size
        if k % 8 == 3:
            return image.astype(np.float32)  # wrong type
        if k % 8 == 4:
            return _darken(image)  # no face
        return image

    people = _people()
    people["tiny"] = people["id0"][:2]  # too few rows once anything is lost
    with (
        pytest.warns(IdauditWarning, match=r"1 identity left with fewer than min_rows=2.*'tiny'"),
        pytest.warns(
            IdauditWarning,
            match=r"16 of 32 draws of the kept identities failed \(bad_output: 8, "
            r"generator_error: 4, no_face: 4\); they are kept as failed outputs",
        ),
    ):
        run = audit_generator(
            flaky,
            people,
            models=_pipeline(),
            rng=0,
            progress=False,
            draws=DrawSettings(min_rows=2),
            audit=AuditSettings(pairs="all", auditors=[MMDTVAuditor()]),
        )
    counts = run.embeddings.counts
    assert counts.loc["id0", "generator_error"] == 1
    assert counts.loc["id0", "bad_output"] == 2
    assert counts.loc["id0", "no_face"] == 1
    assert counts.loc["id0", "ok"] == 4
    assert counts.loc["tiny", "excluded"]
    assert run.embeddings.excluded == ("tiny",)
    out = run.embeddings.outcomes
    assert out["message"].str.contains("RuntimeError: model crashed").any()
    assert set(run.results["identity_a"].values) | set(run.results["identity_b"].values) == {
        f"id{k}" for k in range(4)
    }
    assert int(run.results["lost_a"].max()) == 4
    assert run.results.attrs["n_generator_error"] == int(counts["generator_error"].sum())
    # the failed draws of the kept identities are failed outputs; the excluded one's are not
    es = run.embeddings.embeddings
    assert es.failed_counts == {f"id{k}": 4 for k in range(4)}
    assert es.failure_codes("id0").tolist() == [
        "generator_error",
        "bad_output",
        "bad_output",
        "no_face",
    ]
    assert es.counts == {f"id{k}": 4 for k in range(4)}
    assert run.results.attrs["setting.failures"] == "keep"


def test_paired_mode_keeps_faces_the_detector_loses_on_outputs() -> None:
    people = _people()
    with (
        pytest.warns(IdauditWarning, match="4 identities left"),
        pytest.raises(InvalidInputError, match="no identity has min_rows"),
    ):
        encode_generator(
            _darken, people, models=_pipeline(), progress=False, draws=DrawSettings(mode="detect")
        )
    coded = encode_generator(
        _darken, people, models=_pipeline(), progress=False, draws=DrawSettings(mode="paired")
    )
    assert coded.counts["ok"].sum() == 32
    assert coded.n_lost == 0


def test_paired_mode_refuses_outputs_of_another_size() -> None:
    with pytest.warns(IdauditWarning), pytest.raises(InvalidInputError, match="bad_output: 16"):
        encode_generator(
            lambda im: np.pad(im, ((0, 1), (0, 0), (0, 0))),
            _people(n_ids=2),
            models=_pipeline(),
            progress=False,
            draws=DrawSettings(mode="paired"),
        )


def test_small_frames_are_enlarged_before_detection() -> None:
    seen: list[tuple[int, ...]] = []
    det = _BrightDetector()
    original = det.detect

    def spy(image: np.ndarray) -> list[Face]:
        seen.append(image.shape)
        return original(image)

    det.detect = spy  # type: ignore[method-assign]
    pipe = FacePipeline(det, _ColourEncoder(), progress=False)
    encode_generator(
        lambda im: im,
        _people(n_ids=2, n_images=2, size=64),
        models=pipe,
        progress=False,
        draws=DrawSettings(min_rows=1),
    )
    # 64 → 160, plus 0.3 · 160 = 48 pixels of edge padding on each side
    assert set(seen) == {(256, 256, 3)}
    # a 128-pixel frame too, as the privacy check enlarges it (one policy: under 160 px)
    seen.clear()
    encode_generator(
        lambda im: im,
        _people(n_ids=2, n_images=2, size=128),
        models=pipe,
        progress=False,
        draws=DrawSettings(min_rows=1),
    )
    assert set(seen) == {(256, 256, 3)}


def test_cache_makes_a_second_run_encode_nothing(tmp_path: Path) -> None:
    pipe = _pipeline()
    cache = EmbeddingCache(tmp_path / "cache")
    first = encode_generator(GaussianBlur(1.0), _people(), models=pipe, cache=cache, progress=False)
    assert first.n_encoded == 32
    assert cache.writes == 32
    cache.reset_counts()
    encoded_before = pipe.encoder.encoded
    second = encode_generator(
        GaussianBlur(1.0), _people(), models=pipe, cache=cache, progress=False
    )
    assert second.n_encoded == 0
    assert pipe.encoder.encoded == encoded_before
    assert cache.hits == 32
    assert cache.misses == 0
    np.testing.assert_array_equal(first.vectors, second.vectors)
    # owner-only entries, no pickles
    entries = list((tmp_path / "cache").glob("??/*.npz"))
    assert len(entries) == 32
    assert stat.S_IMODE(entries[0].stat().st_mode) == 0o600
    assert stat.S_IMODE((tmp_path / "cache").stat().st_mode) == 0o700
    with np.load(entries[0], allow_pickle=False) as data:
        assert set(data.files) == {"embedding", "status", "meta"}
    assert not [p for p in (tmp_path / "cache").rglob("*") if p.name.endswith(".tmp")]


def test_sampling_with_replacement_counts_and_warns_duplicates() -> None:
    with pytest.warns(IdauditWarning, match="repeat an earlier row of the same identity"):
        coded = encode_generator(
            GaussianBlur(1.0),
            _people(n_images=3),
            models=_pipeline(),
            progress=False,
            draws=DrawSettings(sampling="with_replacement", n_per_identity=12),
        )
    # 12 draws from 3 images through a deterministic map: at least 9 repeats per identity
    assert (coded.counts["n_duplicate_rows"] >= 9).all()
    # each source once: none
    coded = encode_generator(
        GaussianBlur(1.0), _people(n_images=3), models=_pipeline(), progress=False
    )
    assert (coded.counts["n_duplicate_rows"] == 0).all()


def test_randomness_is_per_draw_and_independent_of_batching() -> None:
    people = _people(n_ids=2)
    a = encode_generator(
        PixelNoise(20.0),
        people,
        models=_pipeline(),
        rng=3,
        progress=False,
        draws=DrawSettings(batch_size=1),
    )
    b = encode_generator(
        PixelNoise(20.0),
        people,
        models=_pipeline(),
        rng=3,
        progress=False,
        draws=DrawSettings(batch_size=64),
    )
    np.testing.assert_array_equal(a.vectors, b.vectors)
    c = encode_generator(PixelNoise(20.0), people, models=_pipeline(), rng=4, progress=False)
    assert not np.array_equal(a.vectors, c.vectors)


def test_compare_conditions_uses_common_identities_and_reports_losses() -> None:
    people = _people(n_ids=5)

    def lose_id4(image: np.ndarray) -> np.ndarray:
        # this anonymiser wipes identity 4's faces (its colour has a large red channel)
        return _darken(image) if image[..., 0].mean() > 200 else image

    cmp = compare_conditions(
        {"none": lambda im: im, "wipe": lose_id4, "blur": GaussianBlur(2.0)},
        people,
        models=_pipeline(),
        rng=0,
        progress=False,
        draws=DrawSettings(mode="detect"),
        audit=AuditSettings(pairs="all", auditors=[MMDTVAuditor()], reference="none"),
    )
    assert cmp.identities == ("id0", "id1", "id2", "id3")
    assert dict(cmp.results.sizes) == {"condition": 3, "pair": 6}
    assert cmp.lost.loc["id4", "wipe"] == 8
    assert cmp.lost["none"].sum() == 0
    assert cmp.linkage is not None
    assert cmp.linkage.loc["none", "match_rate"] == 1.0


def test_linkage_rates_and_exact_intervals() -> None:
    people = _people(n_ids=4)
    # grey outputs all embed to the same unit vector: every row repeats, which is warned about
    with pytest.warns(IdauditWarning, match="repeat an earlier row"):
        cmp = compare_conditions(
            {
                "none": lambda im: im,
                "grey": lambda im: np.repeat(im.mean(axis=2, keepdims=True), 3, axis=2).astype(
                    np.uint8
                ),
            },
            people,
            models=_pipeline(),
            rng=0,
            progress=False,
            audit=AuditSettings(pairs=2, auditors=[MMDTVAuditor(bandwidth=0.5)], reference="none"),
        )
    rep = cmp.linkage_reports["none"]
    # colours are far apart: every face finds its own identity among the other images
    assert rep.top1_rate == 1.0
    assert rep.n_probes == 32
    ci = stats.binomtest(32, 32).proportion_ci(method="exact")
    assert rep.top1_low == pytest.approx(ci.low)
    # grey outputs are indistinguishable: identification falls towards chance
    grey = cmp.linkage_reports["grey"]
    assert grey.top1_rate < 1.0
    assert grey.chance == 0.25


def test_image_mechanisms_against_straightforward_references() -> None:
    from scipy.ndimage import gaussian_filter

    gen = np.random.default_rng(0)
    im = gen.integers(0, 256, (12, 10, 3)).astype(np.uint8)
    ref = np.stack([gaussian_filter(im[..., c].astype(float), 1.5) for c in range(3)], axis=2)
    np.testing.assert_array_equal(GaussianBlur(1.5)(im), np.clip(np.rint(ref), 0, 255))
    # pixelation without offset: the mean of each 4 × 5 cell, by an explicit loop
    out = Pixelate(4, random_offset=False)(im)
    for y in range(0, 12, 4):
        for x in range(0, 10, 4):
            cell = im[y : y + 4, x : x + 4].reshape(-1, 3).mean(axis=0)
            np.testing.assert_array_equal(out[y, x], np.rint(cell))
    # with a random offset the grid moves with the seed
    shifted = [Pixelate(4)(im, rng=s) for s in range(6)]
    assert len({a.tobytes() for a in shifted}) > 1
    noisy = PixelNoise(5.0)(np.full((64, 64, 3), 128, np.uint8), rng=0).astype(float) - 128
    assert abs(noisy.std() - 5.0) < 0.2  # 12288 draws: the sd's standard error is about 0.03


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"images_by_identity": {}}, "non-empty mapping"),
        ({"images_by_identity": {"a": []}}, "no source image for identity 'a'"),
        ({"images_by_identity": {"a": [np.zeros((4, 4), np.uint8)]}}, r"\[0\]` must be an"),
        ({"sampling": "bootstrap"}, "sampling"),
        ({"sampling": "with_replacement"}, "needs `n_per_identity`"),
        ({"n_per_identity": 5}, "applies to sampling='with_replacement' only"),
        ({"failures": "ignore"}, r"`failures` must be one of 'keep', 'drop'; got 'ignore'"),
    ],
)
def test_bad_input_is_refused_with_the_argument_named(kwargs: dict[str, Any], message: str) -> None:
    images = kwargs.get("images_by_identity", _people(n_ids=2))
    settings = {k: v for k, v in kwargs.items() if k != "images_by_identity"}

    def run() -> None:
        # a bad draw setting is refused when the settings are made, bad images by the workflow
        draws = DrawSettings(**settings)
        encode_generator(lambda im: im, images, models=_pipeline(), draws=draws, progress=False)

    with pytest.raises(InvalidInputError, match=message):
        run()


def test_settings_must_be_settings_objects() -> None:
    with pytest.raises(TypeError, match="`draws` must be a DrawSettings; got dict"):
        encode_generator(
            lambda im: im, _people(n_ids=2), models=_pipeline(), draws={"mode": "paired"}
        )
    with pytest.raises(TypeError, match="`audit` must be an AuditSettings; got dict"):
        audit_generator(lambda im: im, _people(n_ids=2), models=_pipeline(), audit={"pairs": 1})
    with pytest.raises(TypeError, match="`models` must be a FaceModelOptions or a FacePipeline"):
        encode_generator(lambda im: im, _people(n_ids=2), models="mtcnn")
    # a setting the workflow does not use is refused, never ignored
    with pytest.raises(InvalidInputError, match="`reference` names a condition"):
        audit_generator(lambda im: im, _people(n_ids=2), audit=AuditSettings(reference="x"))
    with pytest.raises(InvalidInputError, match="`controls` is for audit_generator"):
        compare_conditions(
            {"x": lambda im: im}, _people(n_ids=2), audit=AuditSettings(controls=True)
        )


def test_cache_refuses_a_file_as_folder(tmp_path: Path) -> None:
    f = tmp_path / "x"
    f.write_text("")
    with pytest.raises(InvalidInputError, match="must be a folder"):
        EmbeddingCache(f)


class _ShortBatch:
    """A batch method that loses the last output of every batch."""

    def __call__(self, image: np.ndarray, rng: Any = None) -> np.ndarray:
        return image

    def batch(self, images: list[np.ndarray], rngs: list[Any]) -> list[np.ndarray]:
        return list(images)[:-1]


def test_a_batch_returning_the_wrong_number_of_outputs_is_a_clear_error() -> None:
    with pytest.raises(InvalidInputError, match=r"`generator.batch` must return one output per"):
        encode_generator(
            _ShortBatch(), _people(n_ids=2, n_images=4), models=_pipeline(), progress=False
        )


def test_blur_and_random_offset_mosaic_against_explicit_constructions() -> None:
    gen = np.random.default_rng(0)
    im = gen.integers(0, 256, (13, 11, 3)).astype(np.uint8)
    # blur: separable convolution with the normalised Gaussian kernel truncated at 4 σ,
    # half-sample symmetric edges (np.pad "symmetric"), written out by hand
    s = 1.5
    r = int(4 * s + 0.5)
    k = np.exp(-(np.arange(-r, r + 1) ** 2) / (2 * s * s))
    k /= k.sum()
    p = np.pad(im.astype(float), ((r, r), (r, r), (0, 0)), mode="symmetric")
    rows = sum(k[i] * p[i : i + 13] for i in range(2 * r + 1))
    ref = sum(k[i] * rows[:, i : i + 11] for i in range(2 * r + 1))
    np.testing.assert_array_equal(GaussianBlur(s)(im), np.clip(np.rint(ref), 0, 255))
    # mosaic with a random grid offset: cells start at block - offset, by an explicit loop
    b = 4
    for seed in range(4):
        oy, ox = np.random.default_rng(seed).integers(0, b, size=2)
        ys = sorted({0, *range(int(b - oy) % b or b, 13, b)})
        xs = sorted({0, *range(int(b - ox) % b or b, 11, b)})
        expected = np.empty_like(im)
        for y0, y1 in zip(ys, [*ys[1:], 13], strict=True):
            for x0, x1 in zip(xs, [*xs[1:], 11], strict=True):
                expected[y0:y1, x0:x1] = np.rint(im[y0:y1, x0:x1].reshape(-1, 3).mean(axis=0))
        np.testing.assert_array_equal(Pixelate(b)(im, rng=seed), expected)


class _SpotDetector:
    """One face whose box starts at the brightest pixel of the red channel."""

    name = "spot"

    def __repr__(self) -> str:
        return "SpotDetector()"

    def detect(self, image: np.ndarray) -> list[Face]:
        y, x = np.unravel_index(int(np.argmax(image[..., 0])), image.shape[:2])
        lm = np.tile([float(x), float(y)], (5, 1))
        return [Face(box=np.array([x, y, x + 8.0, y + 8.0]), score=1.0, landmarks=lm)]


class _CropEncoder:
    """Returns the aligned 8 × 8 crop itself (as floats): the embedding shows the crop cut."""

    name = "crop"
    dim = 192
    input_size = 8
    differentiable = False
    device = "cpu"

    def __repr__(self) -> str:
        return "CropEncoder()"

    def align(self, image: np.ndarray, face: Face) -> np.ndarray:
        x, y = int(face.box[0]), int(face.box[1])
        return np.ascontiguousarray(image[y : y + 8, x : x + 8])

    def encode(self, crops: np.ndarray) -> np.ndarray:
        return crops.reshape(len(crops), -1).astype(np.float32) + 1.0


def test_paired_mode_cuts_the_original_frames_crop_from_the_output() -> None:
    gen = np.random.default_rng(2)
    spots = {"a": [(10, 20), (40, 70)], "b": [(60, 15), (90, 90)]}
    people: dict[str, list[np.ndarray]] = {}
    for label, where in spots.items():
        people[label] = []
        for y, x in where:
            # 170 px: at or above prepare_frame's 160, so the frames are not enlarged
            im = gen.integers(0, 200, (170, 170, 3)).astype(np.uint8)
            im[y, x, 0] = 255  # the "face" the detector finds
            people[label].append(im)

    def move_and_invert(image: np.ndarray) -> np.ndarray:
        # a known transform: the detector would follow the spot to the frame's corner
        out = (255 - image).astype(np.uint8)
        out[..., 0] = np.where(out[..., 0] == 255, 254, out[..., 0])
        out[0, 0, 0] = 255
        return out

    coded = encode_generator(
        move_and_invert,
        people,
        models=FacePipeline(_SpotDetector(), _CropEncoder(), progress=False),
        progress=False,
        draws=DrawSettings(mode="paired", min_rows=1),
    )
    assert (coded.outcomes["status"] == "ok").all()
    pairs = zip(coded.rows["identity"], coded.rows["source_index"], strict=True)
    for row, (label, j) in enumerate(pairs):
        y, x = spots[label][j]
        expected = move_and_invert(people[label][j])[y : y + 8, x : x + 8]
        np.testing.assert_array_equal(coded.vectors[row], expected.reshape(-1) + 1.0)


def test_given_original_faces_are_used_without_detecting_again() -> None:
    people = _people(n_ids=2, n_images=4)
    det = _BrightDetector()
    pipe = FacePipeline(det, _ColourEncoder(), progress=False)
    shared: dict[tuple[Any, int], Face | None] = {}
    encode_generator(
        lambda im: im,
        people,
        models=pipe,
        original_faces=shared,
        progress=False,
        draws=DrawSettings(mode="paired"),
    )
    assert det.calls == 8  # paired mode detects on the 8 originals only
    assert set(shared) == {(k, j) for k in people for j in range(4)}  # filled in place
    again = encode_generator(
        GaussianBlur(1.0),
        people,
        models=pipe,
        original_faces=shared,
        progress=False,
        draws=DrawSettings(mode="paired"),
    )
    assert det.calls == 8
    assert again.counts["ok"].sum() == 8
    # a given entry is taken as it is: originals marked faceless are lost, never re-detected
    det = _BrightDetector()
    given: dict[tuple[Any, int], Face | None] = {("id0", j): None for j in range(4)}
    with pytest.warns(IdauditWarning, match="1 identity left with fewer than min_rows=2"):
        coded = encode_generator(
            lambda im: im,
            people,
            models=FacePipeline(det, _ColourEncoder(), progress=False),
            original_faces=given,
            progress=False,
            draws=DrawSettings(mode="paired"),
        )
    assert det.calls == 4
    assert coded.counts.loc["id0", "no_face"] == 4
    assert coded.excluded == ("id0",)
    assert len(given) == 8


def test_paired_original_faces_given_are_where_the_crop_is_cut() -> None:
    gen = np.random.default_rng(5)
    # 170 px: not enlarged (prepare_frame keeps frames of 160 px and more)
    people = {k: [gen.integers(0, 200, (170, 170, 3)).astype(np.uint8)] for k in ("a", "b")}
    at = {"a": (30, 50), "b": (70, 10)}  # (y, x) of each given face's box corner
    given: dict[tuple[Any, int], Face | None] = {
        (k, 0): Face(
            box=np.array([x, y, x + 8.0, y + 8.0]),
            score=1.0,
            landmarks=np.tile([float(x), float(y)], (5, 1)),
        )
        for k, (y, x) in at.items()
    }
    coded = encode_generator(
        lambda im: im,
        people,
        models=FacePipeline(_SpotDetector(), _CropEncoder(), progress=False),
        original_faces=given,
        progress=False,
        draws=DrawSettings(mode="paired", min_rows=1),
    )
    for row, label in enumerate(coded.rows["identity"]):
        y, x = at[label]
        expected = people[label][0][y : y + 8, x : x + 8]
        np.testing.assert_array_equal(coded.vectors[row], expected.reshape(-1) + 1.0)


def test_compare_conditions_detects_each_original_once() -> None:
    det = _BrightDetector()
    compare_conditions(
        {"none": lambda im: im, "blur": GaussianBlur(1.0), "noise": PixelNoise(5.0)},
        _people(n_ids=3, n_images=5),
        models=FacePipeline(det, _ColourEncoder(), progress=False),
        rng=0,
        progress=False,
        draws=DrawSettings(mode="paired"),
        audit=AuditSettings(pairs="all", auditors=[MMDTVAuditor()]),
    )
    assert det.calls == 15  # 3 identities x 5 originals, shared by the 3 conditions


def test_compare_conditions_labels_each_conditions_progress_bar(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # one bar per condition, each saying whose identities it counts (they were all
    # "identities x/3", nine of them in the demo, with nothing to tell them apart)
    compare_conditions(
        {"none": lambda im: im, "blur σ=1": GaussianBlur(1.0)},
        _people(n_ids=3, n_images=5),
        models=FacePipeline(_BrightDetector(), _ColourEncoder(), progress=False),
        rng=0,
        progress=True,
        audit=AuditSettings(pairs="all", auditors=[MMDTVAuditor()]),
    )
    err = capsys.readouterr().err
    assert re.search(r"none: identities: 100%.* 3/3", err), err[-500:]
    assert re.search(r"blur σ=1: identities: 100%.* 3/3", err), err[-500:]


class _MarkedDetector(_BrightDetector):
    """Finds no face in frames whose corner pixel is the mark (1, 2, 3); one face otherwise."""

    def detect(self, image: np.ndarray) -> list[Face]:
        if tuple(image[0, 0]) == (1, 2, 3):
            return []
        return super().detect(np.full_like(image, 200))


def _marked_people(lost: dict[str, int], n_images: int = 8) -> dict[str, list[np.ndarray]]:
    """160-pixel frames (no enlarging); identity k's first ``lost[k]`` images carry the mark."""
    people = _people(n_ids=len(lost), n_images=n_images, size=160)
    out = {}
    for (label, images), n_lost in zip(people.items(), lost.values(), strict=True):
        out[label] = []
        for j, im in enumerate(images):
            im = im.copy()
            im[0, 0] = (1, 2, 3) if j < n_lost else (200, 200, 200)
            out[label].append(im)
    return out


def test_failed_draws_are_failed_outputs_of_their_identity() -> None:
    lost = {"id0": 0, "id1": 1, "id2": 2, "id3": 3, "id4": 8}  # id4: no face at all
    people = _marked_people(lost)
    pipe = FacePipeline(_MarkedDetector(), _ColourEncoder(), progress=False)
    with (
        pytest.warns(IdauditWarning, match=r"1 identity left with fewer than min_rows=2.*'id4'"),
        pytest.warns(
            IdauditWarning,
            match=r"6 of 32 draws of the kept identities failed \(no_face: 6\); they are kept "
            r"as failed outputs in `.embeddings` \(failures='keep'",
        ),
    ):
        coded = encode_generator(lambda im: im, people, models=pipe, progress=False)
    es = coded.embeddings
    assert es.failures == "keep"
    assert es.failed_counts == {"id0": 0, "id1": 1, "id2": 2, "id3": 3}  # id4 excluded
    assert es.counts == {"id0": 8, "id1": 7, "id2": 6, "id3": 5}
    assert es.failure_reasons_["no_face"] == 6
    assert es.failure_codes("id3").tolist() == ["no_face"] * 3
    assert es.n_outputs("id2") == 8
    # the successful rows are the usable vectors of the kept identities, L2-normalised in
    # float64 (rtol: the same division, up to the summation order of the norm)
    usable = coded.vectors[: len(es)]
    expected = usable / np.linalg.norm(usable, axis=1, keepdims=True)
    np.testing.assert_allclose(es.embeddings, expected, rtol=1e-14)
    # as_outputs: every draw in draw order, the lost ones (the first lost[k]) as the atom
    out = es.as_outputs()
    for label in ("id0", "id1", "id2", "id3"):
        np.testing.assert_array_equal(out.get(label)[:, -1], np.arange(8) < lost[label])
    assert coded.attrs["setting.failures"] == "keep"
    # failures="drop": the same successful rows; the failed draws dropped and counted
    with (
        pytest.warns(IdauditWarning, match="left with fewer than min_rows"),
        pytest.warns(
            IdauditWarning,
            match=r"6 failed draws of the kept identities dropped \(no_face: 6\) "
            r"\(failures='drop'",
        ),
    ):
        dropped = encode_generator(
            lambda im: im, people, models=pipe, progress=False, draws=DrawSettings(failures="drop")
        )
    assert dropped.embeddings.failures == "drop"
    assert dropped.embeddings.failed_counts == dict.fromkeys(["id0", "id1", "id2", "id3"], 0)
    assert dropped.embeddings.dropped_["no_face"] == 6
    assert dropped.embeddings.n_dropped_ == 6
    np.testing.assert_array_equal(dropped.embeddings.embeddings, es.embeddings)
    # the per-draw tables do not depend on the setting
    assert coded.counts["no_face"].tolist() == list(lost.values())
    assert dropped.counts.equals(coded.counts)


def test_audit_generator_passes_failures_to_the_embedding_set() -> None:
    people = _marked_people({"id0": 0, "id1": 2, "id2": 1})
    pipe = FacePipeline(_MarkedDetector(), _ColourEncoder(), progress=False)
    for failures, n_failed in (("keep", 3), ("drop", 0)):
        with pytest.warns(IdauditWarning, match="3 .*draws of the kept identities"):
            run = audit_generator(
                lambda im: im,
                people,
                models=pipe,
                progress=False,
                draws=DrawSettings(failures=failures),
                audit=AuditSettings(pairs="all", auditors=[MMDTVAuditor()]),
            )
        es = run.embeddings.embeddings
        assert (es.failures, es.n_failed_) == (failures, n_failed)
        assert run.results.attrs["setting.failures"] == failures
        assert run.results["lost_a"].values.tolist() + run.results["lost_b"].values.tolist() == [
            int(run.embeddings.counts.loc[k, "n_lost"])
            for k in [*run.results["identity_a"].values, *run.results["identity_b"].values]
        ]


def test_identity_dependent_no_face_rates_reach_the_audit_and_the_certificate() -> None:
    # an anonymiser that hides id1's face from the detector on 12 of 20 draws, id0's never:
    # the failures are evidence, so the results report them and the certificate counts them
    from scipy.stats import fisher_exact

    from idaudit import ReservedTestCertifier

    people = _marked_people({"id0": 0, "id1": 12}, n_images=20)
    pipe = FacePipeline(_MarkedDetector(), _ColourEncoder(), progress=False)
    cert = ReservedTestCertifier(n_candidates=1, n_select=1, rng=0, progress=False)
    with pytest.warns(IdauditWarning):  # failed draws; rates that differ; duplicate rows
        run = audit_generator(
            lambda im: im,
            people,
            models=pipe,
            progress=False,
            audit=AuditSettings(pairs=[("id0", "id1")], auditors=[MMDTVAuditor()], certifier=cert),
        )
    ds = run.results
    assert (float(ds["fail_rate_a"][0]), float(ds["fail_rate_b"][0])) == (0.0, 12 / 20)
    expected = fisher_exact([[0, 20], [12, 8]]).pvalue  # scipy's exact test, independently
    assert float(ds["fail_pvalue"][0]) == pytest.approx(expected, rel=1e-12)
    attrs = run.certificates.attrs
    assert (attrs["failures"], attrs["n_failed"]) == ("keep", 12)
    assert attrs["data_model"].startswith("the mechanism as run")
    # the certificate's counts include the failed draws: every test row of both identities
    test_rows = int(run.certificates["n_test_a"][0] + run.certificates["n_test_b"][0])
    assert test_rows == round(0.3 * 20) * 2


def test_generator_audit_to_markdown_reports_ceilings_controls_and_losses() -> None:
    from idaudit import ReservedTestCertifier
    from idaudit.audits._tables import at_ceiling

    people = _marked_people({"id0": 0, "id1": 3}, n_images=20)
    pipe = FacePipeline(_MarkedDetector(), _ColourEncoder(), progress=False)
    cert = ReservedTestCertifier(n_candidates=1, n_select=1, rng=0, progress=False)
    with pytest.warns(IdauditWarning):
        run = audit_generator(
            lambda im: im,
            people,
            models=pipe,
            progress=False,
            audit=AuditSettings(
                pairs=[("id0", "id1")], auditors=[MMDTVAuditor()], certifier=cert, controls=True
            ),
        )
    md = run.to_markdown()
    headings = [line for line in md.splitlines() if line.startswith("#")]
    assert headings[:2] == ["# idaudit audit_generator", "## Verdict"]
    for section in (
        "## Audits",
        "## Certificates",
        "## The certificate's ceiling",
        "## Same-identity split-half controls",
        "## Lost faces",
    ):
        assert section in headings
    c = run.certificates
    assert c is not None
    lb, ceiling = float(c["epsilon_lb"][0]), float(c["epsilon_lb_ceiling"][0])
    flag = " ⚑" if at_ceiling(c)[0] else ""
    assert f"| {lb:.4g}{flag} | {ceiling:.4g} |" in md
    assert f"{run.embeddings.n_lost} of 40 draws have no usable row" in md
    assert "| id1 | 20 | 3 |" in md
    assert "| pairs | MMD-TV [95% CI] |" in md
    # the routes' discordance is read against this run's own certificates (its test AUC),
    # not against none because the two were filed under different names
    import idaudit.pipeline.report as report

    seen: list[object] = []

    def record(ds: object, *, certificates: object = None) -> list[str]:
        seen.append(certificates)
        return []

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(report, "discordant_routes", record)
        run.to_markdown()
    assert len(seen) == 1
    assert seen[0] is run.certificates


def test_more_pairs_asked_than_exist_audits_all_and_says_so() -> None:
    people = _marked_people({"id0": 0, "id1": 0, "id2": 0}, n_images=6)  # no face lost
    pipe = FacePipeline(_MarkedDetector(), _ColourEncoder(), progress=False)
    expected = (
        r"^`pairs` asks for 100 pairs, but the 3 identities kept have only 3; all 3 are audited\.$"
    )
    with pytest.warns(IdauditWarning, match=expected):
        run = audit_generator(
            lambda im: im,
            people,
            models=pipe,
            progress=False,
            audit=AuditSettings(pairs=100, auditors=[MMDTVAuditor()]),
        )
    assert run.results.sizes["pair"] == 3  # every pair of 3 identities
    assert run.results.attrs["n_pairs_requested"] == 100
    assert run.results.attrs["n_pairs_available"] == 3
    assert "All 3 pairs of the identities were audited (`pairs=100` asked for more)." in (
        run.to_markdown()
    )


@pytest.mark.parametrize(("given", "expected"), [(1, 3), (5, 5)])
def test_compare_conditions_certifies_its_conditions_as_one_family(
    given: int, expected: int
) -> None:
    from idaudit import ReservedTestCertifier
    from idaudit.audits import table2

    certifier = ReservedTestCertifier(
        n_select=1, n_families=given, alpha=0.2, test_size=0.5, n_folds=2, rng=0, progress=False
    )
    cmp = compare_conditions(
        {"none": lambda im: im, "blur": GaussianBlur(1.0), "more blur": GaussianBlur(2.0)},
        _people(n_ids=4, n_images=16),
        models=_pipeline(),
        rng=0,
        progress=False,
        audit=AuditSettings(pairs=2, auditors=[MMDTVAuditor()], certifier=certifier),
    )
    # the user's certifier is left as it was; each condition's was fitted in one family
    assert certifier.n_families == given
    assert {int(c.attrs["n_families"]) for c in cmp.certificates.values()} == {expected}
    assert table2(cmp.certificates).attrs["status"]["epsilon_lb"] == "certified_lower_bound"


def test_the_python_path_runs_on_the_load_aware_thread_count(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # the command line's default (CPUs less the busy ones), not torch's all-cores default:
    # on a loaded machine the README's example ran 12x faster so
    import torch

    import idaudit._device as device

    seen: list[int] = []

    def spy(image: np.ndarray) -> np.ndarray:
        seen.append(torch.get_num_threads())
        return image

    before = torch.get_num_threads()
    monkeypatch.setattr(device, "default_threads", lambda: 1)
    audit_generator(
        spy,
        _people(n_ids=2),
        models=_pipeline(),
        audit=AuditSettings(pairs=1, auditors=[MMDTVAuditor()]),
        progress=False,
    )
    assert seen
    assert set(seen) == {1}
    assert torch.get_num_threads() == before  # restored on the way out


@pytest.mark.parametrize("mode", ["detect", "paired"])
def test_calls_between_modules_go_one_way_from_images_to_a_dataset(tmp_path, mode) -> None:
    # the walk from images to a Dataset never calls back into a module it called from: no two
    # idaudit modules call each other (callbacks, hooks, results pushed upwards), worker
    # threads included
    import sys
    import threading

    root = str(Path(__import__("idaudit").__file__).parent)

    def module(frame: Any) -> str | None:
        name = frame.f_code.co_filename
        return name[len(root) :] if name.startswith(root) else None

    edges: set[tuple[str, str]] = set()

    def profile(frame: Any, event: str, arg: Any) -> None:
        if event != "call" or frame.f_code.co_name == "<module>":
            return
        callee = module(frame)
        caller = frame.f_back
        while caller is not None and module(caller) is None:
            caller = caller.f_back
        if callee is not None and caller is not None and module(caller) != callee:
            edges.add((module(caller), callee))

    kwargs: dict[str, Any] = dict(
        models=_pipeline(),
        draws=DrawSettings(mode=mode),
        audit=AuditSettings(pairs=3),
        cache=EmbeddingCache(tmp_path),
        rng=0,
        progress=False,
    )
    generator = _darken if mode == "paired" else (lambda im: im)
    threading.setprofile(profile)
    sys.setprofile(profile)
    try:  # a first run encodes and fills the cache, a second reads it
        audit_generator(generator, _people(), **kwargs)
        audit_generator(generator, _people(), **kwargs)
    finally:
        sys.setprofile(None)
        threading.setprofile(None)  # type: ignore[arg-type]
    assert len({m for edge in edges for m in edge}) > 10  # the trace saw the walk
    assert sorted((a, b) for a, b in edges if (b, a) in edges) == []
