"""``idaudit certify`` (idaudit.cli._certify), run in-process through ``main``."""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pytest
import xarray as xr

from idaudit.cli import main
from idaudit.exceptions import IdauditWarning


@pytest.mark.slow
def test_certify_command_with_controls(
    tmp_path: Path, embedding_files: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "cert"
    argv = ["certify", str(embedding_files["npz"]), "--out", str(out), "--n-select", "2"]
    assert (
        main([*argv, "--n-candidates", "8", "--controls", "--n-permutations", "50", "--quiet"]) == 0
    )
    printed = capsys.readouterr().out
    assert "certified_lower_bound" in printed
    with xr.open_dataset(out / "certificates.nc") as ds:
        assert ds.sizes["pair"] == 2
        assert ds.attrs["status"] == "certified_lower_bound"
        largest = float(ds["epsilon_lb"].max())
    with xr.open_dataset(out / "controls.nc") as ctl:
        assert ctl.sizes["identity"] == 8
    with xr.open_dataset(out / "candidates.nc") as cand:
        assert cand.sizes["pair"] == 8
    md = (out / "certificates.md").read_text(encoding="utf-8")
    assert f"leaks at least ε = {largest:.4g} on its most separable certified pair" in md
    assert "Same-identity split-half controls" in md


def test_certify_drops_small_identities_and_relays_the_small_test_warning(
    tmp_path: Path, uneven_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "cert"
    argv = ["certify", str(uneven_file), "--out", str(out), "--n-select", "2", "--quiet"]
    # default --min-rows: 7 (2 test + 5 development rows), so 'tiny' and 'small' go; 30 rows
    # give 9 test rows, above the 7 that alpha' = 0.05 / 4 needs: no warning
    assert main(argv) == 0
    captured = capsys.readouterr()
    assert "Dropped 2 identities with fewer than 7 rows" in captured.out
    assert "warning" not in captured.err
    md = (out / "certificates.md").read_text(encoding="utf-8")
    assert "small (6 rows), tiny (3 rows)" in md
    assert "certifies 0 below 7 test rows per identity" in md
    for name in ("certificates.nc", "candidates.nc"):
        with xr.open_dataset(out / name) as ds:
            assert ds.attrs["n_identities_dropped_min_rows"] == 2
            assert ds.attrs["min_rows"] == 7
    # with --n-families 10, alpha' = 0.05 / 40 needs 10 test rows, one more than the 9 that
    # 30 rows give: every certificate is 0, and the command says so
    assert main([*argv, "--n-families", "10"]) == 0
    captured = capsys.readouterr()
    assert captured.err.startswith(
        "idaudit certify: warning: 2 of the 2 selected pairs can only certify epsilon_lb = 0"
    )
    assert "certify 0 below 10 test rows per identity" in captured.err
    md = (out / "certificates.md").read_text(encoding="utf-8")
    assert "## Warnings" in md
    assert "2 of the 2 selected pairs can only certify epsilon_lb = 0" in md
    with xr.open_dataset(out / "certificates.nc") as ds:
        assert float(ds["epsilon_lb"].max()) == 0.0


def test_certify_reads_duplicates_as_draws_or_as_copies(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # 6 identities of 25 draws, every draw stored twice
    gen = np.random.default_rng(3)
    x = np.repeat(gen.normal(size=(6, 4)), 25, axis=0) + 0.5 * gen.normal(size=(150, 4))
    path = tmp_path / "twice.npz"
    np.savez(path, embeddings=np.repeat(x, 2, axis=0), labels=np.repeat(np.arange(6), 50))
    argv = ["certify", str(path), "--n-select", "2", "--n-candidates", "4", "--quiet"]
    assert main([*argv, "--out", str(tmp_path / "keep")]) == 0
    assert "are exact duplicates" in capsys.readouterr().err  # relayed, with the way out
    with xr.open_dataset(tmp_path / "keep" / "certificates.nc") as ds:
        assert ds.attrs["duplicates"] == "keep"
        np.testing.assert_array_equal(ds["n_test_a"], 15)  # 50 rows, each a draw
    assert main([*argv, "--duplicates", "collapse", "--out", str(tmp_path / "one")]) == 0
    assert "warning" not in capsys.readouterr().err
    with xr.open_dataset(tmp_path / "one" / "certificates.nc") as ds:
        assert ds.attrs["duplicates"] == "collapse"
        # every row of a candidate identity has one copy: 25 per identity
        with xr.open_dataset(tmp_path / "one" / "candidates.nc") as cand:
            ids = set(cand["identity_a"].values) | set(cand["identity_b"].values)
        assert ds.attrs["n_duplicates"] == 25 * len(ids)
        np.testing.assert_array_equal(ds["n_test_a"], 8)  # 25 draws
    # --min-rows counts draws when collapsing: 25 < 26 leaves no identity
    with pytest.raises(SystemExit):
        main([*argv, "--duplicates", "collapse", "--min-rows", "26", "--out", str(tmp_path)])
    assert "`--min-rows` 26 leaves 0 of the 6 identities" in capsys.readouterr().err


def test_certify_collapse_reports_identities_dropped_for_too_few_distinct_rows(
    tmp_path: Path,
) -> None:
    # identities 0-5: 30 distinct rows each; identity 6: 20 rows but only 3 distinct
    gen = np.random.default_rng(4)
    x = np.r_[
        np.repeat(gen.normal(size=(6, 4)), 30, axis=0) + 0.5 * gen.normal(size=(180, 4)),
        np.tile(gen.normal(size=(3, 4)), (7, 1))[:20],
    ]
    path = tmp_path / "few.npz"
    np.savez(path, embeddings=x, labels=np.r_[np.repeat(np.arange(6), 30), np.full(20, 6)])
    argv = ["certify", str(path), "--n-select", "2", "--n-candidates", "4", "--quiet"]
    assert main([*argv, "--duplicates", "collapse", "--out", str(tmp_path / "out")]) == 0
    report = (tmp_path / "out" / "certificates.md").read_text()
    # the file holds 20 rows of identity 6: it is dropped for its 3 distinct rows
    assert "Dropped 1 identity with fewer than 7 distinct rows (`--min-rows`)" in report
    assert "6 (20 rows)" in report
    with xr.open_dataset(tmp_path / "out" / "certificates.nc") as ds:
        assert ds.attrs["n_identities_dropped_min_rows"] == 1
        assert ds.attrs["n_rows_dropped_min_rows"] == 20


def test_certificates_md_states_each_ceiling_and_flags_those_at_it(
    tmp_path: Path, embedding_files: dict[str, Path]
) -> None:
    from scipy.stats import beta

    out = tmp_path / "cert"
    argv = ["certify", str(embedding_files["npz"]), "--out", str(out), "--n-select", "3"]
    assert main([*argv, "--n-candidates", "8", "--quiet"]) == 0
    md = (out / "certificates.md").read_text(encoding="utf-8")
    assert md.startswith("# idaudit certify\n\n## Verdict\n")
    assert "| UFPR | UFNR | test AUC | certified ε | ceiling |" in md
    with xr.open_dataset(out / "certificates.nc") as c:
        alpha = float(c.attrs["alpha_per_bound"])
        for a, b, lb in zip(
            c["n_test_a"].values, c["n_test_b"].values, c["epsilon_lb"].values, strict=True
        ):
            u_a, u_b = beta.ppf(1 - alpha, 1, int(a)), beta.ppf(1 - alpha, 1, int(b))
            ceiling = max(0.0, np.log((1 - u_a) / u_b), np.log((1 - u_b) / u_a))  # Eq. 16
            flag = " ⚑" if abs(lb - ceiling) <= 1e-9 else ""
            assert f"| {lb:.4g}{flag} | {ceiling:.4g} |" in md
        n_at = int((abs(c["epsilon_lb"] - c["epsilon_lb_ceiling"]) <= 1e-12).sum())
    if n_at:
        assert f"Here: {n_at} of the 3 certificates sit at their ceiling" in md


def test_a_zero_ceiling_is_not_reported_as_reached(tmp_path: Path) -> None:
    # eight identities of ten rows: three test rows each, too few to certify anything at this
    # level, whatever the errors; no certificate is "at its ceiling", the report says why 0
    gen = np.random.default_rng(0)
    path = tmp_path / "same.npz"
    np.savez(path, embeddings=gen.normal(size=(80, 4)), labels=np.repeat(list("abcdefgh"), 10))
    out = tmp_path / "o"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", IdauditWarning)  # too few test rows: said in the report
        assert main(["certify", str(path), "--out", str(out), "--quiet"]) == 0
    md = (out / "certificates.md").read_text(encoding="utf-8")
    assert " ⚑ |" not in md  # no certificate is "at" a ceiling of 0
    assert "has a certificate ceiling of 0 at its test sizes: it can certify nothing" in md
    assert "⚑ ceiling 0 on every row: these test sizes certify nothing" in md


def test_certify_band_writes_each_pairs_certified_curve(
    tmp_path: Path, embedding_files: dict[str, Path]
) -> None:
    from idaudit.certify import ReservedTestCertifier
    from idaudit.data import EmbeddingSet

    out = tmp_path / "band"
    argv = ["certify", str(embedding_files["npz"]), "--out", str(out), "--n-select", "2"]
    flags = ["--n-candidates", "6", "--test-thresholds", "band", "--test-size", "0.5", "--quiet"]
    assert main([*argv, *flags]) == 0
    with xr.open_dataset(out / "certificates.nc") as ds:
        ds = ds.load()
    # the same certifier in the library, on the same file and settings
    es = EmbeddingSet.read(embedding_files["npz"])
    ref = ReservedTestCertifier(
        n_select=2, n_candidates=6, test_thresholds="band", test_size=0.5, rng=0, progress=False
    ).fit(es)
    np.testing.assert_allclose(ds["epsilon_lb"].values, ref.certificates_["epsilon_lb"].values)
    assert ds["epsilon_lb_curve"].dims == ("pair", "delta")
    assert ds["epsilon_lb_curve"].attrs["status"] == "certified_lower_bound"
