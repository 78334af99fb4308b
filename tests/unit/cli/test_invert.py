from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import xarray as xr

from idaudit.cli import main
from idaudit.results import check_result_dataset

pytestmark = pytest.mark.faces


def test_invert_a_photo_writes_results_and_no_image_unless_asked(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    skimage_data = pytest.importorskip("skimage.data")
    from PIL import Image

    photo = tmp_path / "astronaut.png"
    Image.fromarray(skimage_data.astronaut()).save(photo)
    out = tmp_path / "out"
    argv = [
        "invert",
        "--image",
        str(photo),
        "--out",
        str(out),
        "--volume",
        "4",
        "--top-n",
        "2",
        "--t-max",
        "2",
        "--tau-k",
        "0.5",
        "--tau-d",
        "0.9",
        "--warp-samples",
        "4",
    ]
    assert main(argv) == 0
    printed = capsys.readouterr().out
    ds = xr.open_dataset(out / "results.nc")
    check_result_dataset(ds)
    assert ds.sizes["target"] == 1
    assert int(ds["queries"][0]) == 4 + 2 * 3  # V + N · (t_max + 1) without tau_a
    assert ds["similarity"].attrs["status"] == "sample_estimate"
    assert not list(out.glob("*.png"))
    assert (out.stat().st_mode & 0o777) == 0o700
    # the match threshold next to the similarity: dlib's 0.6 on raw descriptors of the photo
    assert ds.attrs["match_threshold"] == "dlib distance < 0.6 on raw descriptors"
    before, after = float(ds["initial_distance"][0]), float(ds["distance"][0])
    assert 0.0 < after < 2.0
    assert f"dlib distance {before:.3f} -> {after:.3f} (a match is below 0.6" in printed
    assert ("the starting bank code already matched" in printed) == (before < 0.6)


def _fails(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    with pytest.raises(SystemExit) as info:
        main(argv)
    assert info.value.code == 2
    return capsys.readouterr().err


def test_invert_refuses_bad_flags_before_any_work(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    emb = tmp_path / "z.npy"
    np.save(emb, np.ones(128, np.float32))
    err = _fails(["invert", str(emb), "--out", str(tmp_path / "o"), "--tau-a", "1.5"], capsys)
    assert "`--tau-a` must be in [-1, 1]" in err
    err = _fails(
        [
            "invert",
            str(emb),
            "--out",
            str(tmp_path / "o"),
            "--attack",
            "greedypixel",
            "--volume",
            "10",
            "--query-budget",
            "11",
        ],
        capsys,
    )
    assert "`--query-budget` must be >= 13" in err
    assert not (tmp_path / "o").exists()  # refused before the output folder was made
    bad = tmp_path / "bad.npy"
    np.save(bad, np.ones(64, np.float32))
    err = _fails(["invert", str(bad), "--out", str(tmp_path / "o2"), "--volume", "4"], capsys)
    assert "(128,) or (n, 128)" in err
    err = _fails(
        [
            "invert",
            str(emb),
            "--out",
            str(tmp_path / "o"),
            "--volume",
            "10",
            "--query-budget",
            "13",
        ],
        capsys,
    )
    assert "`--query-budget` must be >= 16" in err  # APGD: V + 2N (a start and an update)
    nan = tmp_path / "nan.npy"
    np.save(nan, np.full(128, np.nan, np.float32))
    err = _fails(["invert", str(nan), "--out", str(tmp_path / "o")], capsys)
    assert "each finite and non-zero" in err
    err = _fails(["invert", str(emb), "--out", str(tmp_path / "o3"), "--test-arcface", "x"], capsys)
    assert "`--test-arcface` re-measures the reconstruction against the target photo" in err


def _labelled_npz(path: Path) -> np.ndarray:
    """An ``idaudit embed``-style archive: two identities, the second's row 1 is the target."""
    gen = np.random.default_rng(0)
    emb = gen.normal(0.0, 0.05, size=(5, 128)).astype(np.float32)
    np.savez(path, embeddings=emb, labels=np.array(["alice", "alice", "bob", "bob", "bob"]))
    return emb


_SMALL = ["--volume", "4", "--top-n", "2", "--t-max", "1", "--tau-k", "0.5", "--tau-d", "0.9"]


def test_invert_reads_the_npz_that_embed_writes_and_picks_a_row(tmp_path: Path) -> None:
    emb = _labelled_npz(tmp_path / "emb.npz")
    out = tmp_path / "out"
    argv = ["invert", str(tmp_path / "emb.npz"), "--identity", "bob", "--index", "1"]
    assert main([*argv, "--out", str(out), *_SMALL, "--warp-samples", "4", "--quiet"]) == 0
    ds = xr.open_dataset(out / "results.nc")
    assert ds.sizes["target"] == 1
    assert ds.attrs["setting.target_identity"] == "bob"
    assert int(ds.attrs["setting.target_index"]) == 1
    # the same run on a .npy holding only bob's second row (file row 3) gives the same target
    np.save(tmp_path / "row.npy", emb[3])
    same = tmp_path / "same"
    argv = ["invert", str(tmp_path / "row.npy"), "--out", str(same)]
    assert main([*argv, *_SMALL, "--warp-samples", "4", "--quiet"]) == 0
    ref = xr.open_dataset(same / "results.nc")
    for name in ("initial_similarity", "similarity"):
        assert float(ds[name][0]) == float(ref[name][0])


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (
            ["--identity", "carol"],
            "`--identity` must be an identity of emb.npz (alice, bob); got 'carol'",
        ),
        (["--identity", "alice", "--index", "2"], "`--index` must be below 2"),
        (["--index", "-1"], "`--index` must be >= 0"),
    ],
)
def test_invert_refuses_a_row_that_is_not_there_before_any_work(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], flags: list[str], message: str
) -> None:
    _labelled_npz(tmp_path / "emb.npz")
    out = tmp_path / "o"
    err = _fails(["invert", str(tmp_path / "emb.npz"), "--out", str(out), *flags], capsys)
    assert message in err
    assert not out.exists()


def test_invert_npy_has_no_rows_to_choose(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    np.save(tmp_path / "z.npy", np.ones(128, np.float32))
    err = _fails(
        ["invert", str(tmp_path / "z.npy"), "--out", str(tmp_path / "o"), "--identity", "a"], capsys
    )
    assert "a .npy has no labels" in err


def test_invert_npy_that_is_not_one_says_so_and_never_suggests_unpickling(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "text.npy").write_text("0.1,0.2,0.3\n")
    np.save(tmp_path / "objects.npy", np.array([1, "a"], dtype=object), allow_pickle=True)
    raw = (tmp_path / "objects.npy").read_bytes()
    np.save(tmp_path / "cut.npy", np.ones(128, np.float32))
    (tmp_path / "cut.npy").write_bytes((tmp_path / "cut.npy").read_bytes()[:-8])
    said = {
        "text.npy": "is not a .npy array (numpy.save's format): it does not start with the .npy "
        "header.",
        "objects.npy": "stores Python objects, which idaudit never unpickles; save the "
        "embeddings as a float array.",
        "cut.npy": "is a damaged .npy array (Failed to read all data for array.",
    }
    assert raw.startswith(b"\x93NUMPY")
    for name, message in said.items():
        err = _fails(["invert", str(tmp_path / name), "--out", str(tmp_path / "o")], capsys)
        assert err.startswith(f"idaudit invert: error: `EMBEDDINGS` {str(tmp_path / name)!r} ")
        assert message in err
        assert "allow_pickle" not in err
        assert err.count("\n") == 1


def test_invert_an_independent_test_model_and_carried_queries(
    tmp_path: Path, buffalo_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    skimage_data = pytest.importorskip("skimage.data")
    from PIL import Image

    from idaudit.faces import ArcFaceEncoder, MTCNNDetector, ShippedFaceGenerator

    photo = tmp_path / "astronaut.png"
    Image.fromarray(skimage_data.astronaut()).save(photo)
    out = tmp_path / "out"
    argv = ["invert", "--image", str(photo), "--out", str(out), *_SMALL[:4], "--warp-samples", "4"]
    argv += ["--tau-k", "0.5", "--tau-d", "0.9", "--attack", "greedypixel", "--save-images"]
    argv += ["--query-budget", "9", "--query-split", "carry", "--test-arcface", str(buffalo_dir)]
    assert main(argv) == 0
    ds = xr.open_dataset(out / "results.nc")
    check_result_dataset(ds)
    # no --t-max: the budget alone decides; carry spends Q_max = V + 5 exactly (2 + 3)
    assert int(ds["queries"][0]) == 9
    assert ds.attrs["setting.query_split"] == "carry"
    assert ds.attrs["setting.t_max"] == 2  # the first code's share, floor(5 / 2)
    # GreedyPixel's step (the DCGAN's calibrated L-inf radius) and ball, not the L2 radius
    assert (ds.attrs["setting.eps"], ds.attrs["setting.norm"]) == (0.5, "linf")
    assert ds.attrs["test_model"].startswith("arcface-w600k-r50 (independent")
    # the test similarity, recomputed from the written reconstruction and the photo
    arc = ArcFaceEncoder(buffalo_dir)
    image = np.asarray(Image.open(out / "reconstruction_0.png"))
    rec = arc.encode(ShippedFaceGenerator().crops(image[None], arc))[0]
    pic = np.asarray(Image.open(photo).convert("RGB"))
    face = max(MTCNNDetector().detect(pic), key=lambda f: f.area)
    tgt = arc.encode(arc.align(pic, face)[None])[0]
    expected = rec @ tgt / (np.linalg.norm(rec) * np.linalg.norm(tgt))
    assert float(ds["test_similarity"][0]) == pytest.approx(expected, abs=1e-6)
    assert ds["test_similarity"].attrs["status"] == "sample_estimate"
    assert "test model arcface-w600k-r50" in capsys.readouterr().out


def test_invert_refuses_budget_combinations_before_any_model_loads(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    emb = tmp_path / "z.npy"
    np.save(emb, np.ones(128, np.float32))
    out = tmp_path / "o"
    base = ["invert", str(emb), "--out", str(out), "--volume", "4", "--top-n", "2"]
    err = _fails([*base, "--query-split", "carry"], capsys)  # APGD has no default budget
    assert "`--query-split carry` shares a budget between the codes" in err
    err = _fails([*base, "--attack", "greedypixel", "--t-max", "3", "--query-split", "carry"],
                 capsys)  # fmt: skip
    assert "`--query-split carry` shares a budget between the codes" in err
    big = ["invert", str(emb), "--out", str(out), "--attack", "greedypixel", "--volume", "9999"]
    err = _fails(big, capsys)  # 9,999 + 3 > DiffMI's 10,000 queries
    assert "default budget, 10000 queries, does not cover --volume 9999" in err
    err = _fails([*base, "--attack", "greedypixel", "--norm", "l2"], capsys)
    assert "drop --norm l2" in err
    assert not out.exists()  # refused before the output folder was made


def test_invert_records_the_budget_greedypixel_used(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import idaudit.inversion._adversary as adversary

    # a small stand-in for DiffMI's 10,000 so that the default-budget path runs in seconds
    monkeypatch.setattr(adversary, "BLACK_BOX_BUDGET", 12)
    emb = tmp_path / "z.npy"
    np.save(emb, _labelled_npz(tmp_path / "e.npz")[0])
    out = tmp_path / "out"
    argv = ["invert", str(emb), "--out", str(out), "--attack", "greedypixel", "--volume", "4"]
    argv += ["--top-n", "2", "--tau-k", "0.5", "--tau-d", "0.9", "--warp-samples", "2", "--quiet"]
    argv += ["--query-split", "carry"]  # the default budget is a budget to share
    assert main(argv) == 0
    ds = xr.open_dataset(out / "results.nc")
    assert ds.attrs["setting.query_budget"] == 12  # not "none": the default was used
    assert int(ds["queries"][0]) == 12  # carry spends it exactly: 4 + 8
    assert ds.attrs["setting.sparsity"] == "all"  # the DCGAN's flat codes have no pixels
