"""``run_privacy_check`` (idaudit.pipeline._privacy) on folders of real DCGAN samples
(dlib, MTCNN)."""

from __future__ import annotations

import json
import re
import shutil
import stat
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from PIL import Image

from idaudit.exceptions import IdauditWarning, InvalidInputError
from idaudit.faces import FaceModelOptions
from idaudit.memorization import FLAGGING_COLUMNS, NNAA_COLUMNS
from idaudit.pipeline import PrivacyStatistics, run_privacy_check
from idaudit.pipeline._privacy import OUTPUT_FILES
from idaudit.results import check_result_dataset
from standins import save_faces

pytestmark = pytest.mark.faces

pytest.importorskip("dlib")
pytest.importorskip("facenet_pytorch")



def fast(models: dict | None = None, *, progress: bool = False, **statistics) -> dict:
    """Small, fast settings (dlib in torch, one thread), with model options and statistics
    overridden."""
    return {
        "models": FaceModelOptions(**{"dlib": "torch", "threads": 1, **(models or {})}),
        "statistics": PrivacyStatistics(**{"n_bootstrap": 50, "n_permutations": 199, **statistics}),
        "progress": progress,
    }


FAST = fast()
#: The note a run on a few held-out images adds (9-12 here cannot resolve p = 1 %): tests
#: about other warnings let it pass; the privacy fixture (tests/unit/conftest.py) checks it.
POWER_NOTE = (
    "ignore:flagging .* held-out images do not resolve"
    ":idaudit.exceptions.IdauditWarning"
)


@pytest.fixture(scope="module")
def roots(privacy_roots: Path) -> Path:
    """The DCGAN folders of the privacy tests (tests/unit/conftest.py), made once."""
    return privacy_roots


@pytest.fixture(scope="module")
def first(privacy_run: tuple) -> tuple:
    """One privacy check on ``roots`` (tests/unit/conftest.py), run once per session."""
    return privacy_run


def _args(roots: Path) -> tuple[Path, Path, Path]:
    return roots / "train", roots / "heldout", roots / "synthetic"


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_outputs_named_and_pinned(first) -> None:
    report, out = first
    assert set(OUTPUT_FILES) <= {p.name for p in out.iterdir()}
    assert list(pd.read_csv(out / "flagging.csv").columns) == [
        "metric", "axis", "percentile", "threshold", "synthetic_pct", "heldout_pct",
        "n_synthetic", "n_heldout", "n_synthetic_flagged", "n_heldout_flagged", "p_value",
        "smallest_p_value", "ci_lower", "ci_upper",
    ]  # fmt: skip
    assert list(FLAGGING_COLUMNS) == list(pd.read_csv(out / "flagging.csv").columns)
    assert list(pd.read_csv(out / "nnaa.csv").columns) == [
        "metric", "axis", "cohort", "aa_train_synth", "aa_heldout_synth", "privacy_loss",
        "ci_lower", "ci_upper", "aa_train_synth_ci_lower", "aa_train_synth_ci_upper",
        "aa_heldout_synth_ci_lower", "aa_heldout_synth_ci_upper", "n_train", "n_heldout",
        "n_synthetic", "n_bootstrap", "p_value", "n_permutations", "smallest_p_value",
        "interval_method", "below_min_size",
    ]  # fmt: skip
    # pooled, then each cohort (cohort a: near-copies of its training images)
    nnaa = report.nnaa[report.nnaa["metric"] == "dlib-resnet-v1-torch"]
    assert nnaa["cohort"].tolist() == ["pooled", "a", "b"]
    by_cohort = pd.read_csv(out / "flagging_by_cohort.csv")
    assert set(by_cohort["cohort"]) == {"a", "b"}
    md = (out / "report.md").read_text()
    assert "- **dlib-resnet-v1-torch**, pooled: " in md
    assert "no interval: fewer than 20 images per set" in md
    assert "| too small |" in md
    assert "half-sampling" not in md
    assert list(NNAA_COLUMNS) == list(pd.read_csv(out / "nnaa.csv").columns)
    # the appearance metric is named truthfully: SSIM, never LPIPS
    assert list(dict.fromkeys(report.flagging["metric"])) == [
        "dlib-resnet-v1-torch", "ssim-gaussian1.5-64px",
    ]  # fmt: skip
    assert "lpips" not in (out / "report.md").read_text().lower().replace("--lpips", "")
    for name in OUTPUT_FILES:
        assert _mode(out / name) == 0o600, name
    assert _mode(out) == 0o700
    assert _mode(out / "cache") == 0o700
    for npz in (out / "cache").rglob("*.npz"):
        assert _mode(npz) == 0o600
        np.load(npz, allow_pickle=False)  # no pickles anywhere
    results = json.loads((out / "privacy_results.json").read_text())
    assert results["cohorts"]["skipped"] == {"only_train": "missing from heldout and synthetic"}
    assert set(results["inputs"]["sha256"]) == {
        f"{s}/{c}" for s in ("train", "heldout", "synthetic") for c in ("a", "b")
    }
    assert results["models"]["identity"][0]["encoder_weights"]  # weight digests recorded
    assert results["status"]["flagging"]["ci_lower"] == "certified_lower_bound"
    check_result_dataset(report.to_xarray())


def test_drops_are_counted_per_cohort_and_split(first) -> None:
    counts = first[0].counts.set_index(["cohort", "split"])
    assert counts.loc[("b", "synthetic"), "no_face"] == 1
    assert counts.loc[("b", "heldout"), "unreadable"] == 1
    assert counts.loc[("b", "heldout"), "n_not_image"] == 1
    assert counts.loc[("a", "heldout"), "n_duplicates"] == 1  # s50_copy.png counted once
    assert counts.loc[("a", "heldout"), "n_files"] == 6


def test_near_copies_are_flagged(first) -> None:
    flag = first[0].flagging
    dlib = flag[flag["metric"] == "dlib-resnet-v1-torch"]
    # 5 of the 9 synthetic faces are near-copies of training faces; 8 held-out faces
    assert (dlib["synthetic_pct"] > dlib["heldout_pct"]).all()
    assert dlib["p_value"].iloc[-1] < 0.05


def test_rerun_with_other_settings_computes_nothing(roots: Path, first, tmp_path: Path) -> None:
    shutil.copytree(first[1] / "cache", tmp_path / "cache")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", IdauditWarning)  # the skipped cohort, again
        report = run_privacy_check(
            *_args(roots), cache=tmp_path / "cache",
            **fast(percentiles=[3, 30], n_bootstrap=20, n_permutations=99),
        )  # fmt: skip
    assert report.cache_counters["embeddings_computed"] == 0
    assert report.cache_counters.get("distances_computed", 0) == 0
    assert report.cache_counters["embeddings_reused"] > 0
    assert report.flagging["percentile"].tolist() == [3.0, 30.0, 3.0, 30.0]


def test_one_changed_image_recomputes_only_its_entries(roots: Path, first, tmp_path: Path) -> None:
    copy = tmp_path / "roots"
    shutil.copytree(roots, copy)
    shutil.copytree(first[1] / "cache", tmp_path / "cache")
    target = copy / "train" / "b" / "s20_0.png"
    Image.fromarray(np.asarray(Image.open(target))[:, ::-1].copy()).save(target)  # mirrored
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", IdauditWarning)
        report = run_privacy_check(*_args(copy), cache=tmp_path / "cache", **FAST)
    assert report.cache_counters["embeddings_computed"] == 1
    # its appearance distances: one per other kept image (the pooled NNAA matrix holds every
    # kept image at this size; its flagging pairs with cohort b are among them)
    kept = first[0].counts.set_index(["cohort", "split"])["ok"]
    assert report.cache_counters["distances_computed"] == int(kept.sum()) - 1


def _entry_status(path: Path) -> str:
    with np.load(path, allow_pickle=False) as entry:
        return str(entry["status"])


def test_corrupt_cache_entry_is_recomputed(roots: Path, first, tmp_path: Path) -> None:
    shutil.copytree(first[1] / "cache", tmp_path / "cache")
    # an embedding's entry (the broken input's failure is cached too; keys, and so the order
    # of the files, depend on the installed weights' paths)
    victim = next(
        path
        for path in sorted((tmp_path / "cache" / "embeddings").glob("??/*.npz"))
        if _entry_status(path) == "ok"
    )
    victim.write_bytes(b"not a zip file")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", IdauditWarning)
        report = run_privacy_check(*_args(roots), cache=tmp_path / "cache", **FAST)
    assert report.cache_counters["embeddings_computed"] == 1  # the one image of that entry
    pd.testing.assert_frame_equal(report.flagging, first[0].flagging)
    with np.load(victim, allow_pickle=False) as entry:  # written again, whole
        assert str(entry["status"]) in ("ok", "no_face")


def test_corrupt_appearance_file_is_recomputed_with_a_warning(
    roots: Path, first, tmp_path: Path
) -> None:
    shutil.copytree(first[1] / "cache", tmp_path / "cache")
    victim = next((tmp_path / "cache" / "appearance").glob("*.npz"))
    victim.write_bytes(b"not a zip file")
    with pytest.warns(IdauditWarning) as record:
        report = run_privacy_check(*_args(roots), cache=tmp_path / "cache", **FAST)
    assert any("cannot be used" in str(w.message) and victim.name in str(w.message) for w in record)
    assert report.cache_counters["embeddings_computed"] == 0
    assert report.cache_counters["distances_computed"] == first[0].cache_counters[
        "distances_computed"
    ]
    pd.testing.assert_frame_equal(report.flagging, first[0].flagging)


def test_bad_input(roots: Path, tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(InvalidInputError, match="`heldout` must hold one sub-folder per cohort"):
        run_privacy_check(roots / "train", empty, roots / "synthetic", progress=False)
    other = tmp_path / "other" / "zzz"
    other.mkdir(parents=True)
    with pytest.raises(InvalidInputError, match="no cohort folder is common"):
        run_privacy_check(roots / "train", other.parent, roots / "synthetic", progress=False)
    with pytest.raises(InvalidInputError, match=r"`percentiles` must each be in \(0, 100\)"):
        PrivacyStatistics(percentiles=[5, 120])
    with pytest.raises(InvalidInputError, match="`n_bootstrap` must be >= 0; got -1"):
        PrivacyStatistics(n_bootstrap=-1)
    # settings of the wrong type: named, before any work
    with pytest.raises(TypeError, match=r"`statistics` must be an idaudit\.pipeline\.Privacy"):
        run_privacy_check(*_args(roots), statistics={"n_bootstrap": 50})  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"`models` must be an idaudit\.faces\.FaceModelOpt"):
        run_privacy_check(*_args(roots), models=PrivacyStatistics())  # type: ignore[arg-type]
    # a cohort whose only images have no face: skipped and named; none left: a clear error
    for k, split in enumerate(("train", "heldout", "synthetic")):
        flat = np.stack([np.full((64, 64, 3), 10 * k + j, np.uint8) for j in range(2)])
        save_faces(tmp_path / "blank" / split / "c", flat)
    with (
        pytest.warns(IdauditWarning, match="cohort c skipped: no usable face in train"),
        pytest.raises(InvalidInputError, match="no cohort has a usable face"),
    ):
        run_privacy_check(*_args(tmp_path / "blank"), **FAST)


def test_rerun_reads_every_embedding_from_the_cache_and_gives_the_same_tables(
    roots: Path, first, tmp_path: Path
) -> None:
    shutil.copytree(first[1] / "cache", tmp_path / "cache")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", IdauditWarning)  # the skipped cohort, again
        report = run_privacy_check(*_args(roots), cache=tmp_path / "cache", **FAST)
    before = first[0].cache_counters
    assert report.cache_counters["embeddings_computed"] == 0
    # every image the first run computed or reused is now read from the cache
    assert report.cache_counters["embeddings_reused"] == (
        before["embeddings_computed"] + before["embeddings_reused"]
    )
    for name in ("flagging", "nnaa", "flagging_by_cohort", "counts"):
        pd.testing.assert_frame_equal(
            getattr(report, name), getattr(first[0], name), check_exact=True
        )


def test_an_image_found_again_in_another_split_is_read_not_encoded(
    roots: Path, first, tmp_path: Path
) -> None:
    copy = tmp_path / "roots"
    shutil.copytree(roots, copy)
    shutil.copytree(first[1] / "cache", tmp_path / "cache")
    shutil.copy(copy / "train" / "b" / "s20_0.png", copy / "heldout" / "b" / "again.png")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", IdauditWarning)  # the overlap is noted
        report = run_privacy_check(*_args(copy), cache=tmp_path / "cache", **FAST)
    before = first[0].cache_counters
    # one embedding cache, keyed by content: the held-out copy is the training image's entry
    assert report.cache_counters["embeddings_computed"] == 0
    assert report.cache_counters["embeddings_reused"] == (
        before["embeddings_computed"] + before["embeddings_reused"] + 1
    )


def test_dlib_in_cpp_gives_the_torch_runtime_numbers_under_its_own_name(
    roots: Path, first, tmp_path: Path
) -> None:
    """Both runtimes run one network on the same chips: the statistics agree; names differ."""
    shutil.copytree(first[1] / "cache", tmp_path / "cache")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", IdauditWarning)  # the skipped cohort, again
        report = run_privacy_check(
            *_args(roots), cache=tmp_path / "cache", **fast({"dlib": "cpp"})
        )
    # another model identity: nothing of the torch runtime's is reused for its embeddings
    fresh = first[0].cache_counters["embeddings_computed"]  # the first run's, from empty
    assert report.cache_counters["embeddings_computed"] == fresh > 0
    assert report.models.identity[0]["encoder"] == "dlib-resnet-v1"
    assert first[0].models.identity[0]["encoder"] == "dlib-resnet-v1-torch"
    # both identities carry the digests of both files dlib reads: recogniser and predictor
    for rep in (report, first[0]):
        assert set(rep.models.identity[0]["encoder_weights"]) == {
            "dlib_face_recognition_resnet_model_v1.dat",
            "shape_predictor_5_face_landmarks.dat",
        }
    cpp, torch_ = (
        r.flagging[r.flagging["axis"] == "identity"].reset_index(drop=True)
        for r in (report, first[0])
    )
    # raw descriptors agree to ~1e-6 (tests/unit/faces/test_dlib_torch.py): thresholds move
    # by about that, and no count, rate or p-value moves with these well-separated images
    np.testing.assert_allclose(cpp["threshold"], torch_["threshold"], rtol=0, atol=1e-5)
    cols = ["synthetic_pct", "heldout_pct", "n_synthetic_flagged", "n_heldout_flagged", "p_value"]
    pd.testing.assert_frame_equal(cpp[cols], torch_[cols])
    # recorded with the parameters; the device keys both axes' caches (CUDA is not bitwise CPU)
    assert report.settings.to_dict()["dlib_runtime"] == "cpp"
    assert first[0].settings.to_dict()["dlib_runtime"] == "torch"
    assert report.models.identity[0]["device"] == report.models.appearance["device"] == "cpu"
    with pytest.raises(InvalidInputError, match="`dlib` must be one of 'cpp', 'torch'"):
        FaceModelOptions(dlib="onnx")  # type: ignore[arg-type]


def test_threads_never_exceed_the_cpus_this_process_may_use(roots: Path, first) -> None:
    import os

    assert 1 <= first[0].settings.threads <= len(os.sched_getaffinity(0))


def test_arcface_route_with_stand_in_weights(roots: Path, buffalo_dir: Path) -> None:
    """An ONNX encoder from local files: its name and weight digest reach every output."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", IdauditWarning)
        report = run_privacy_check(
            *_args(roots), **fast({"dlib": None, "arcface": buffalo_dir, "aligned": True})
        )
    assert list(dict.fromkeys(report.flagging["metric"])) == [
        "arcface-w600k-r50",
        "ssim-gaussian1.5-64px",
    ]
    identity = report.models.identity[0]
    assert identity["detector"] == "aligned-input"
    assert set(identity["encoder_weights"]) == {"w600k_r50.onnx"}
    # aligned input: no detection, so the blank image is embedded too (the user vouched)
    counts = report.counts.set_index(["cohort", "split"])
    assert counts.loc[("b", "synthetic"), "ok"] == 5


def test_arcface_dir_brings_its_retinaface(roots: Path, buffalo_dir: Path, tmp_path: Path) -> None:
    """Seed 003's pipeline from one flag: buffalo_l's det_10g.onnx detects, ArcFace embeds."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", IdauditWarning)
        report = run_privacy_check(
            *_args(roots), **fast({"dlib": None, "arcface": buffalo_dir})
        )
    identity = report.models.identity[0]
    assert identity["detector"] == "retinaface-det-10g"
    assert set(identity["detector_weights"]) == {"det_10g.onnx"}
    assert set(identity["encoder_weights"]) == {"w600k_r50.onnx"}
    # a file, not the folder: no detector comes with it (MTCNN stays)
    from idaudit.faces import FaceModelOptions
    from idaudit.pipeline._folders import build_models

    only = build_models(FaceModelOptions(dlib=None, arcface=buffalo_dir / "w600k_r50.onnx"))
    assert type(only.detector).__name__ == "MTCNNDetector"
    # a folder without det_10g.onnx: MTCNN again, and the departure from seed 003 is said
    bare = tmp_path / "no_detector"
    bare.mkdir()
    shutil.copy(buffalo_dir / "w600k_r50.onnx", bare / "w600k_r50.onnx")
    with pytest.warns(IdauditWarning, match="holds no det_10g.onnx: faces are detected with MTCNN"):
        fallback = build_models(FaceModelOptions(dlib=None, arcface=bare))
    assert type(fallback.detector).__name__ == "MTCNNDetector"


def test_typed_parts_render_the_written_files(first) -> None:
    report, out = first
    assert report.to_json() == (out / "privacy_results.json").read_text(encoding="utf-8")
    assert report.to_markdown() == (out / "report.md").read_text(encoding="utf-8")
    written = json.loads(report.to_json())
    assert written["parameters"]["confidence_level"] == report.settings.confidence_level == 0.95
    assert written["models"]["cache_keys"] == report.models.cache_keys
    assert written["inputs"]["sha256"] == report.inputs.sha256
    assert report.cache_counters is report.cache.counters
    assert repr(report.models) == (
        "ModelsUsed(identity=['dlib-resnet-v1-torch'], appearance='ssim-gaussian1.5-64px')"
    )
    assert "listings=['heldout/a'" in repr(report.inputs)
    assert report.settings.to_xarray().attrs["n_permutations"] == 199
    assert list(report.models.to_xarray()["axis"].values) == ["identity", "appearance"]
    assert report.inputs.to_xarray().sizes["listing"] == 6
    counts = report.cache.to_xarray()["count"]
    assert counts.attrs["status"] == "descriptive"
    assert (
        int(counts.sel(counter="embeddings_computed"))
        == report.cache_counters["embeddings_computed"]
    )


def test_every_statistics_stage_shows_progress(
    roots: Path, first, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # the permutations and half-samples take minutes at the defaults: each stage is named on
    # the progress bar (stderr) as it starts; a warm cache keeps this run short
    shutil.copytree(first[1] / "cache", tmp_path / "cache")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", IdauditWarning)
        run_privacy_check(*_args(roots), cache=tmp_path / "cache", **fast(progress=True))
    err = capsys.readouterr().err
    for stage in (
        "flagging (dlib-resnet-v1-torch): 199 permutations",
        "NNAA (dlib-resnet-v1-torch): 50 split-half draws",
        "split-half draws",
    ):
        assert stage in err
    assert "statistics" in err


# ------------------------------------------------------------ each distance computed once


class _CountingMetric:
    """Wraps the appearance metric; records every pair of images (by content) it is asked."""

    def __init__(self, metric) -> None:
        self.metric = metric
        self.name = metric.name
        self.pairs: list[frozenset[str]] = []

    def pair_distances(self, images, index_a, index_b, *, progress: bool = False):
        import hashlib

        keys = [hashlib.sha256(np.ascontiguousarray(im).tobytes()).hexdigest() for im in images]
        self.pairs += [frozenset((keys[a], keys[b])) for a, b in zip(index_a, index_b, strict=True)]
        return self.metric.pair_distances(images, index_a, index_b, progress=progress)

    def distance(self, a, b):  # pragma: no cover - the run must ask for pairs only
        raise AssertionError("the run asked for row-wise distances")

    def pairwise(self, a, b=None, *, progress: bool = True):  # pragma: no cover
        raise AssertionError("the run asked for a whole block")


@pytest.fixture(scope="module")
def three_cohorts(tmp_path_factory: pytest.TempPathFactory, dcgan) -> Path:
    """Three cohorts x three splits x four fresh DCGAN faces."""
    root = tmp_path_factory.mktemp("three")
    faces = dcgan.generate(dcgan.sample_latents(36, rng=11))
    for c, cohort in enumerate(("x", "y", "z")):
        for s, split in enumerate(("train", "heldout", "synthetic")):
            k = 12 * c + 4 * s
            save_faces(root / split / cohort, faces[k : k + 4], k)
    return root


@pytest.mark.filterwarnings(POWER_NOTE)
def test_each_unordered_pair_is_computed_once_and_a_rerun_computes_none(
    three_cohorts: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from idaudit.pipeline import _privacy as _run

    metrics: list[_CountingMetric] = []

    def counting_models(options):
        models = build_models(options)
        metrics.append(_CountingMetric(models.appearance))
        models.appearance = metrics[-1]
        return models

    build_models = _run.build_models
    monkeypatch.setattr(_run, "build_models", counting_models)
    cache = tmp_path / "cache"
    report = run_privacy_check(*_args(three_cohorts), cache=cache, **FAST)
    assert report.cohorts == ["x", "y", "z"]
    n_kept = int(report.counts["ok"].sum())
    assert n_kept >= 30  # at most a few DCGAN faces missed by the detector
    # the NNAA union holds every kept image (under lpips_max_samples), the flagging blocks
    # are among its pairs: every unordered pair of distinct kept images, each once
    needed = n_kept * (n_kept - 1) // 2
    asked = metrics[0].pairs
    assert len(asked) == needed
    assert len(set(asked)) == needed
    assert all(len(pair) == 2 for pair in asked)  # never an image against itself
    assert report.cache_counters["distances_computed"] == needed
    # the flagging blocks (held-out and synthetic x training, per cohort), then the NNAA
    # triangle: reused = the flagging pairs, met again in the NNAA request
    counts = report.counts.set_index(["cohort", "split"])["ok"]
    flag_pairs = sum(
        counts[(c, "train")] * (counts[(c, "heldout")] + counts[(c, "synthetic")])
        for c in ("x", "y", "z")
    )
    # then each cohort's own NNAA (three cohorts): its triangle, all already computed
    sizes = [sum(counts[(c, s)] for s in ("train", "heldout", "synthetic")) for c in "xyz"]
    cohort_pairs = sum(n * (n - 1) // 2 for n in sizes)
    assert report.cache_counters["distances_reused"] == flag_pairs + cohort_pairs
    again = run_privacy_check(*_args(three_cohorts), cache=cache, **FAST)
    assert metrics[1].pairs == []
    assert again.cache_counters["distances_computed"] == 0
    assert again.cache_counters["distances_reused"] == needed + flag_pairs + cohort_pairs
    pd.testing.assert_frame_equal(again.nnaa, report.nnaa)


# ------------------------------------------------------------------------- bad input


def _copy_with_cache(roots: Path, first, tmp_path: Path) -> tuple[Path, Path]:
    """A copy of the roots without the train-only cohort, and a copy of the warm cache."""
    copy = tmp_path / "roots"
    shutil.copytree(roots, copy)
    shutil.rmtree(copy / "train" / "only_train")
    shutil.copytree(first[1] / "cache", tmp_path / "cache")
    return copy, tmp_path / "cache"


def test_an_empty_cohort_folder_is_named_as_such(tmp_path: Path) -> None:
    blank = np.zeros((2, 64, 64, 3), np.uint8)
    save_faces(tmp_path / "train" / "c", blank)
    (tmp_path / "heldout" / "c").mkdir(parents=True)
    save_faces(tmp_path / "synthetic" / "c", blank + 1)
    with (
        pytest.warns(IdauditWarning, match="cohort c skipped: empty folder in heldout"),
        pytest.raises(InvalidInputError, match=r"no cohort has a usable face .*c: empty folder"),
    ):
        run_privacy_check(*_args(tmp_path), **FAST)


@pytest.mark.filterwarnings(POWER_NOTE)
def test_unreadable_and_too_small_files_are_named(roots: Path, first, tmp_path: Path) -> None:
    copy, cache = _copy_with_cache(roots, first, tmp_path)
    (copy / "heldout" / "b" / "empty.png").write_bytes(b"")
    (copy / "heldout" / "b" / "text.png").write_text("not an image at all")
    face = Image.open(copy / "synthetic" / "b" / "s40_0.png")
    face.resize((8, 8), Image.Resampling.LANCZOS).save(copy / "synthetic" / "b" / "tiny.png")
    face.resize((40, 40), Image.Resampling.LANCZOS).save(copy / "synthetic" / "b" / "small.png")
    out = tmp_path / "out"
    report = run_privacy_check(*_args(copy), out, cache=cache, **FAST)
    assert report.unreadable_files == {
        "heldout/b/broken.png": "unreadable",
        "heldout/b/empty.png": "unreadable",
        "heldout/b/text.png": "unreadable",
    }
    counts = report.counts.set_index(["cohort", "split"])
    assert counts.loc[("b", "heldout"), "unreadable"] == 3
    assert counts.loc[("b", "synthetic"), "too_small"] == 1  # 8 px refused, 40 px kept
    assert counts.loc[("b", "synthetic"), "ok"] == 5
    written = json.loads((out / "privacy_results.json").read_text())
    assert written["unreadable_files"] == report.unreadable_files
    assert {r["too_small"] for r in written["counts"]} == {0, 1}
    notes = "\n".join(report.notes)
    assert re.search(
        r"3 file\(s\) could not be read as images .*: heldout/b/broken\.png, "
        r"heldout/b/empty\.png, heldout/b/text\.png\.",
        notes,
    )
    assert re.search(
        r"1 file\(s\) have a shorter side below 32 px .*: synthetic/b/tiny\.png", notes
    )
    assert "heldout/b/text.png" in (out / "report.md").read_text()


def test_embed_images_refuses_images_below_the_minimum_side(roots: Path, tmp_path: Path) -> None:
    from idaudit.faces import AlignedDetector, DlibEncoder, EmbeddingCache, content_key
    from idaudit.pipeline._folders import MIN_IMAGE_SIDE, MemoDetector, embed_images

    face = Image.open(roots / "train" / "a" / "s00_0.png")
    small = tmp_path
    paths = []
    for side in (8, MIN_IMAGE_SIDE - 1, MIN_IMAGE_SIDE):
        paths.append(small / f"{side}.png")
        face.resize((side, side)).save(paths[-1])
    keys = [content_key("aligned dlib", p.name) for p in paths]
    cache = EmbeddingCache(tmp_path / "cache")
    status, emb, messages, _ = embed_images(
        paths, keys, MemoDetector(AlignedDetector()), DlibEncoder(), cache, aligned=True
    )
    assert status == ["too_small", "too_small", "ok"]
    assert np.isnan(emb[:2]).all()
    assert np.isfinite(emb[2]).all()
    assert messages[0] == "8×8 px: shorter side below 32 px"


def test_the_same_images_as_train_and_synthetic_are_refused(roots: Path) -> None:
    with (
        pytest.warns(IdauditWarning, match="only_train"),
        pytest.raises(
            InvalidInputError,
            match=r"synthetic/a: 5 of 5 files are byte-identical to training files of cohort a\. "
            r"The same images were given as training and synthetic",
        ),
    ):
        run_privacy_check(roots / "train", roots / "heldout", roots / "train", **FAST)


def test_the_held_out_folder_given_as_synthetic_is_refused(roots: Path) -> None:
    with (
        pytest.warns(IdauditWarning, match="only_train"),
        pytest.raises(
            InvalidInputError,
            match=r"synthetic/a: 5 of 5 files are byte-identical to held-out files of cohort a",
        ),
    ):
        run_privacy_check(roots / "train", roots / "heldout", roots / "heldout", **FAST)


@pytest.mark.filterwarnings(POWER_NOTE)
def test_a_few_training_copies_among_the_samples_warn(roots: Path, first, tmp_path: Path) -> None:
    copy, cache = _copy_with_cache(roots, first, tmp_path)
    shutil.copy(copy / "train" / "a" / "s00_0.png", copy / "synthetic" / "a" / "copied.png")
    with pytest.warns(
        IdauditWarning, match=r"synthetic/a: 1 of 6 file\(s\) byte-identical to training files"
    ):
        report = run_privacy_check(*_args(copy), cache=cache, **FAST)
    assert report.counts.set_index(["cohort", "split"]).loc[("a", "synthetic"), "ok"] == 6


def test_subjects_under_caps_below_the_set_sizes(roots: Path, first, tmp_path: Path) -> None:
    # one photo per subject (s<k>_0.png): the caps then draw subjects as they drew images,
    # and the run records that they did
    shutil.copytree(first[1] / "cache", tmp_path / "cache")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", IdauditWarning)  # the skipped cohort, again
        report = run_privacy_check(
            *_args(roots), cache=tmp_path / "cache",
            **fast(subject_pattern=r"^(s\d+)_", max_samples=4, lpips_max_samples=3,
                   n_bootstrap=0, n_permutations=99, nnaa_permutations=19),
        )  # fmt: skip
    pooled = report.nnaa[report.nnaa["cohort"] == "pooled"].set_index("axis")
    assert pooled.loc["identity", ["n_train", "n_heldout", "n_synthetic"]].tolist() == [4, 4, 4]
    assert pooled.loc["appearance", ["n_train", "n_heldout", "n_synthetic"]].tolist() == [3, 3, 3]
    assert pooled["p_value"].between(0.05, 1.0).all()  # 1/20 at the least
