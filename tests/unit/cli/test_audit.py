"""``idaudit audit`` (idaudit.cli._audit), run in-process through ``main``."""

from __future__ import annotations

import stat
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import xarray as xr

from idaudit.cli import main
from idaudit.data import sample_pairs
from idaudit.exceptions import IdauditWarning


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_audit_command(
    tmp_path: Path, embedding_files: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "audit"
    argv = ["audit", str(embedding_files["csv"]), "--out", str(out), "--n-pairs", "5"]
    with warnings.catch_warnings():
        # the command reports dropped rows once, in its own output, not again as a warning
        warnings.simplefilter("error", IdauditWarning)
        assert main([*argv, "--methods", "gaussmech,mmdtv", "--quiet"]) == 0
    printed = capsys.readouterr().out
    assert "dropped 1 (missing: 1)" in printed
    with xr.open_dataset(out / "results.nc") as ds:
        assert ds.sizes["pair"] == 5
        assert set(ds.attrs["auditors"].split(",")) == {"gaussmech", "mmdtv"}
    summary = (out / "summary.md").read_text(encoding="utf-8")
    assert "| pairs | GaussMech | MMD-TV [95% CI] |" in summary
    assert "| | *diagnostic* | *sample_estimate* |" in summary
    assert _mode(out / "summary.md") == 0o600


def test_n_pairs_above_the_pairs_available_is_an_error(
    tmp_path: Path, uneven_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # 7 identities keep >= 5 rows ('tiny' is dropped): 21 pairs, as sample_pairs counts them
    with pytest.warns(IdauditWarning, match=r"asks for 22 pairs, but 7 identities have only 21"):
        sample_pairs([f"p{i}" for i in range(6)] + ["small"], 22)
    argv = ["audit", str(uneven_file), "--out", str(tmp_path / "o"), "--n-pairs", "22"]
    with pytest.raises(SystemExit) as exc:
        main([*argv, "--quiet"])
    assert exc.value.code == 2
    assert (
        "idaudit audit: error: `--n-pairs` must be at most the number of identity pairs "
        "available, 21 for the 7 identities with at least 5 rows; got 22.\n"
    ) in capsys.readouterr().err
    assert not (tmp_path / "o").exists()
    # without --n-pairs: 100, or all pairs when there are fewer, which is said (GaussMech
    # alone needs 2 rows per identity, so all 8 identities and their 28 pairs are kept)
    assert main([*argv[:-2], "--methods", "gaussmech", "--quiet"]) == 0
    printed = capsys.readouterr().out
    assert "auditing all 28 pairs of the 8 identities (fewer than the default --n-pairs 100)" in (
        printed
    )
    summary = (tmp_path / "o" / "summary.md").read_text(encoding="utf-8")
    assert "Pairs: all 28 pairs of the 8 identities kept." in summary


def test_audit_drops_and_counts_identities_below_min_rows(
    tmp_path: Path, uneven_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "audit"
    argv = ["audit", str(uneven_file), "--out", str(out), "--n-pairs", "4", "--quiet"]
    # default: 5 rows, what ROC-HT's five folds need; 'tiny' (3 rows) goes
    assert main([*argv, "--methods", "gaussmech,rocht"]) == 0
    printed = capsys.readouterr().out
    line = (
        "Dropped 1 identity with fewer than 5 rows (`--min-rows`) before pairs were chosen, "
        "3 rows in all: tiny (3 rows)."
    )
    assert line in printed
    assert line in (out / "summary.md").read_text(encoding="utf-8")
    kept = [f"p{i}" for i in range(6)] + ["small"]
    with xr.open_dataset(out / "results.nc") as ds:
        assert ds.attrs["min_rows"] == 5
        assert ds.attrs["n_identities_dropped_min_rows"] == 1
        assert ds.attrs["n_rows_dropped_min_rows"] == 3
        assert ds.attrs["identities_dropped_min_rows"] == "tiny"
        # the pairs are sampled from the identities kept
        got = list(zip(ds["identity_a"].values, ds["identity_b"].values, strict=True))
    assert got == sample_pairs(kept, 4, rng=0)

    # without ROC-HT two rows are enough, and nothing is dropped (said so in the summary)
    assert main([*argv, "--methods", "gaussmech"]) == 0
    assert "Dropped" not in capsys.readouterr().out
    summary = (out / "summary.md").read_text(encoding="utf-8")
    assert "Identities with fewer than 2 rows (`--min-rows`): none." in summary
    with xr.open_dataset(out / "results.nc") as ds:
        assert ds.attrs["n_identities_dropped_min_rows"] == 0
        assert ds.attrs["identities_dropped_min_rows"] == ""

    # a larger --min-rows drops more; too large leaves too few identities
    assert main([*argv, "--methods", "gaussmech", "--min-rows", "10"]) == 0
    assert "Dropped 2 identities with fewer than 10 rows" in capsys.readouterr().out
    with xr.open_dataset(out / "results.nc") as ds:
        assert ds.attrs["identities_dropped_min_rows"] == "small, tiny"
        assert ds.attrs["n_rows_dropped_min_rows"] == 9
    with pytest.raises(SystemExit) as exc:
        main([*argv, "--min-rows", "31"])
    assert exc.value.code == 2
    assert "`--min-rows` 31 leaves 0 of the 8 identities; at least 2" in capsys.readouterr().err


# -- several conditions, flags in errors, interruption -----------------------------------------


def _condition_csvs(folder: Path) -> list[Path]:
    paths = []
    for k, name in enumerate(["arcface_vggface2_ff", "facenet_celeba_id"]):
        gen = np.random.default_rng(k)
        centres = gen.normal(size=(8, 6))
        x = np.repeat(centres, 20, axis=0) + (1.0 + k) * gen.normal(size=(160, 6))
        frame = pd.DataFrame(x, columns=[f"e{i}" for i in range(6)])
        frame.insert(0, "identity", np.repeat([f"p{i}" for i in range(8)], 20))
        frame.to_csv(folder / f"{name}.csv", index=False)
        paths.append(folder / f"{name}.csv")
    return paths


def test_audit_of_several_files_writes_table1_table2_and_figure3(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from idaudit.audits import GaussMechAuditor, audit_pairs, summarize
    from idaudit.data import EmbeddingSet

    folder = tmp_path / "csvs"
    folder.mkdir()
    paths = _condition_csvs(folder)
    out = tmp_path / "out"
    argv = [
        "audit",
        str(folder),
        "--out",
        str(out),
        "--n-pairs",
        "6",
        "--quiet",
        "--methods",
        "gaussmech,mmdtv,rocht",
        "--control-permutations",
        "20",
    ]
    assert main(argv) == 0
    for name in (
        "results.nc",
        "pairs.csv",
        "table1.md",
        "table1.csv",
        "table2.md",
        "table2.csv",
        "figure3.png",
    ):
        assert (out / name).is_file(), name
    t1 = pd.read_csv(out / "table1.csv")
    assert t1["condition"].tolist() == ["arcface_vggface2_ff", "facenet_celeba_id"]
    assert t1["encoder"].tolist() == ["arcface", "facenet"]
    assert t1["generator"].tolist() == ["ff", "id"]
    # Table 1's GaussMech median equals summarize() on the same file and pairs, run directly
    es = EmbeddingSet.from_csv(paths[0])
    ds = audit_pairs(
        es, sample_pairs(es.identities, 6, rng=0), [GaussMechAuditor()], progress=False
    )
    direct = summarize(ds)["gaussmech_epsilon (median)"]
    assert t1.loc[0, "gaussmech"] == pytest.approx(direct, rel=1e-9)
    with xr.open_dataset(out / "results.nc") as res:
        assert dict(res.sizes)["condition"] == 2
        assert list(res["encoder"].values) == ["arcface", "facenet"]
    assert "*certified_lower_bound*" in (out / "table2.md").read_text(encoding="utf-8")
    assert "epsilon_lb_ceiling" in pd.read_csv(out / "table2.csv").columns
    summary = (out / "summary.md").read_text(encoding="utf-8")
    headings = [line for line in summary.splitlines() if line.startswith("#")]
    assert headings[:2] == ["# idaudit audit", "## Verdict"]
    assert sum(h.startswith("# ") for h in headings) == 1
    for section in ("## Certificates", "## The certificate's ceiling", "## What each column answers"):
        assert section in headings
    assert "| test errors (fp, fn) | UFPR | UFNR | test AUC | certified ε | ceiling |" in summary
    assert len(pd.read_csv(out / "pairs.csv")) == 12  # 2 conditions x 6 pairs, one row each


def test_single_condition_summary_concludes_and_warns_on_indistinguishable_identities(
    tmp_path: Path,
) -> None:
    gen = np.random.default_rng(0)
    x = gen.normal(size=(160, 6))  # eight identities drawn from one distribution
    path = tmp_path / "null.npz"
    np.savez(path, embeddings=x, labels=np.repeat([f"p{i}" for i in range(8)], 20))
    out = tmp_path / "out"
    assert main(["audit", str(path), "--out", str(out), "--quiet"]) == 0
    md = (out / "summary.md").read_text(encoding="utf-8")
    headings = [line for line in md.splitlines() if line.startswith("#")]
    assert headings[:3] == ["# idaudit audit", "## Verdict", "## Warnings"]
    assert "may reflect estimation noise" in md
    assert "not identity leakage" not in md


def test_several_conditions_one_at_a_zero_ceiling_claim_no_order(tmp_path: Path) -> None:
    # one condition with 30 rows per identity (its reserved test certifies), one with 8
    # (2 test rows per identity: its ceiling is 0, it certifies nothing whatever the data)
    gen = np.random.default_rng(0)
    folder = tmp_path / "conds"
    folder.mkdir()
    for name, rows, shift in (("dlib_synth2_none", 30, 3.0), ("dlib_synth2_blur", 8, 1.0)):
        centres = gen.normal(size=(8, 16)) * shift
        x = np.concatenate([c + gen.normal(size=(rows, 16)) for c in centres])
        frame = pd.DataFrame(x, columns=[f"e{i}" for i in range(16)])
        frame.insert(0, "label", np.repeat([f"id{i}" for i in range(8)], rows))
        frame.to_csv(folder / f"{name}.csv", index=False)
    out = tmp_path / "paper"
    assert main(["audit", str(folder), "--out", str(out), "--quiet"]) == 0
    summary = (out / "summary.md").read_text(encoding="utf-8")
    verdict = summary.split("## Warnings")[0]
    bullets = [line for line in verdict.splitlines() if line.startswith("- ")]
    assert 1 <= len(bullets) <= 6
    # the over-claims of a ranking from lower bounds, and of an estimate without uncertainty
    for claim in ("proven to leak the most", "leaks least", "largest certified lower bound is"):
        assert claim not in summary
    assert "`dlib_synth2_blur` has a certificate ceiling of 0 at its test sizes" in verdict
    assert "`dlib_synth2_none` leaks at least ε = " in verdict
    assert "(ceiling 1.76)" in verdict  # MMD-TV read against its scale
    assert "95 % order-statistic intervals" in verdict
    # the warning single-file certify gives, here too
    assert "Condition `dlib_synth2_blur` can only certify 0: with 2 test rows per identity" in (
        summary
    )
    # ROC-HT is +inf on every pair of both conditions: flagged in the table itself
    assert "| ⚑ +∞ on every pair of every row: no information |" in summary


def test_a_condition_too_small_to_certify_is_skipped_and_the_rest_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # 6 rows per identity pass --min-rows 5 but the certifier needs 7 (2 test, 5 folds)
    gen = np.random.default_rng(0)
    folder = tmp_path / "conds"
    folder.mkdir()
    for name, rows in (("dlib_synth1_none", 12), ("dlib_synth2_blur", 6)):
        centres = gen.normal(size=(8, 16)) * 3.0
        x = np.concatenate([c + gen.normal(size=(rows, 16)) for c in centres])
        frame = pd.DataFrame(x, columns=[f"e{i}" for i in range(16)])
        frame.insert(0, "label", np.repeat([f"id{i}" for i in range(8)], rows))
        frame.to_csv(folder / f"{name}.csv", index=False)
    out = tmp_path / "out"
    argv = ["audit", str(folder), "--out", str(out), "--quiet", "--min-rows", "5"]
    with warnings.catch_warnings():  # the command prints its warnings on stderr
        warnings.simplefilter("always", IdauditWarning)
        assert main(argv) == 0
    assert "warning: Condition 'dlib_synth2_blur' is not certified: no audited pair has 7" in (
        capsys.readouterr().err
    )
    for name in ("results.nc", "table1.md", "table2.md", "summary.md"):
        assert (out / name).is_file(), name
    t2 = pd.read_csv(out / "table2.csv")
    assert t2["condition"].tolist() == ["dlib_synth1_none", "dlib_synth2_blur"]
    assert t2.loc[1, "epsilon_lb"] == "not certified: too few rows"
    assert int(t2.loc[1, "n_pairs"]) == 0
    summary = (out / "summary.md").read_text(encoding="utf-8")
    assert "not certified: too few rows" in summary
    assert "`dlib_synth1_none` " in summary.split("## Warnings")[0]


def test_manifest_names_the_conditions(tmp_path: Path) -> None:
    paths = _condition_csvs(tmp_path)
    manifest = tmp_path / "manifest.csv"
    pd.DataFrame({"file": [p.name for p in paths], "condition": ["A+B+C", "D+E+F"]}).to_csv(
        manifest, index=False
    )
    out = tmp_path / "out"
    argv = [
        "audit",
        *map(str, paths),
        "--manifest",
        str(manifest),
        "--out",
        str(out),
        "--n-pairs",
        "3",
        "--quiet",
        "--methods",
        "mmdtv",
        "--no-certify",
    ]
    assert main(argv) == 0
    t1 = pd.read_csv(out / "table1.csv")
    assert t1["dataset"].tolist() == ["B", "E"]


def test_the_rows_each_method_needs_are_what_the_auditors_say() -> None:
    # `idaudit audit` checks --min-rows before the library loads, from its own table: pin it
    # to the auditors' min_rows() as the command builds them (defaults: ROC-HT 5 folds)
    from idaudit.audits import GaussMechAuditor, KDELRAuditor, MMDTVAuditor, ROCHTAuditor
    from idaudit.cli._audit import _MIN_ROWS

    auditors = {
        "gaussmech": GaussMechAuditor(),
        "kdelr": KDELRAuditor(mix=0.01),
        "mmdtv": MMDTVAuditor(n_permutations=200, rng=0),
        "rocht": ROCHTAuditor(classifier="random_forest", rng=0),
    }
    assert {name: aud.min_rows() for name, aud in auditors.items()} == _MIN_ROWS


def test_help_and_run_agree_that_failed_rows_are_kept_as_outputs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # DESIGN: failures are outputs. The help said "missing and zero-norm rows dropped", while
    # a run kept them as failed outputs: both now say what happens
    with pytest.raises(SystemExit):
        main(["audit", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert (
        "rows without a label are dropped and counted; rows whose vector is missing, "
        "unparseable, not finite or of zero norm are failed outputs of their identity, kept "
        "and counted, and the audits report each identity's failure rate"
    ) in text
    gen = np.random.default_rng(0)
    x = gen.normal(size=(40, 4))
    x[0], x[1] = np.nan, 0.0  # a missing vector and a zero-norm one, both of identity a
    frame = pd.DataFrame(x, columns=[f"e{j}" for j in range(4)])
    frame.insert(0, "identity", np.repeat(list("abcd"), 10))
    frame.loc[5, "identity"] = np.nan  # no label: dropped
    frame.to_csv(tmp_path / "fail.csv", index=False)
    argv = ["audit", str(tmp_path / "fail.csv"), "--out", str(tmp_path / "o")]
    assert main([*argv, "--methods", "gaussmech", "--quiet"]) == 0
    assert (
        "dropped 1 (missing: 1); failed 2 (missing: 1, zero_norm: 1), kept as failed outputs"
        in capsys.readouterr().out
    )


def test_counts_of_one_are_singular(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    gen = np.random.default_rng(0)
    np.savez(
        tmp_path / "two.npz", embeddings=gen.normal(size=(20, 4)), labels=["a"] * 10 + ["b"] * 10
    )
    argv = ["audit", str(tmp_path / "two.npz"), "--out", str(tmp_path / "o")]
    assert main([*argv, "--methods", "gaussmech", "--quiet"]) == 0
    out = capsys.readouterr().out
    assert ": 20 rows, 2 identities, dim 4;" in out
    assert "auditing the 1 pair of the 2 identities (fewer than the default --n-pairs 100)" in out
    assert (
        "Pairs: the 1 pair of the 2 identities kept" in (tmp_path / "o" / "summary.md").read_text()
    )
    np.savez(tmp_path / "one.npz", embeddings=gen.normal(size=(1, 4)), labels=["a"])
    with pytest.raises(SystemExit):
        main(["audit", str(tmp_path / "one.npz"), "--out", str(tmp_path / "p"), "--quiet"])
    assert ": 1 row, 1 identity, dim 4;" in capsys.readouterr().out
