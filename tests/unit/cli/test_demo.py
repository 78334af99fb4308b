"""``idaudit demo`` (idaudit.cli._demo), run in-process through ``main``."""

from __future__ import annotations

import stat
from pathlib import Path

import pandas as pd
import pytest
import xarray as xr

from idaudit.cli import main
from idaudit.results import check_result_dataset


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.mark.slow
def test_demo_writes_report_results_and_figure(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "demo"
    assert main(["demo", "--out", str(out), "--quick", "--quiet"]) == 0
    printed = capsys.readouterr().out
    for name in ("report.md", "results.nc", "noise_sweep.png", "epsilon_curve.png"):
        path = out / name
        assert path.is_file(), name
        assert str(path) in printed
        assert _mode(path) == 0o600, name  # biometric-data rule: owner-only
    assert _mode(out) == 0o700
    assert not list(out.glob(".*.tmp"))  # no temporary files left behind
    with xr.open_dataset(out / "results.nc") as ds:
        ds = ds.load()
    check_result_dataset(ds)
    sizes = {"mechanism": 2, "noise_sd": 3, "pair": 6, "embedding_dim": 8, "delta": 9}
    assert dict(ds.sizes) == sizes
    # the certified epsilon(delta) curve: all deltas at once, never above its pairs' truth
    curve, true_curve = ds["certified_epsilon_curve"], ds["true_epsilon_curve"]
    assert curve.attrs["status"] == "certified_lower_bound"
    assert bool((curve <= true_curve).all())
    assert list(ds["mechanism"].values) == ["gaussian", "laplace"]
    assert ds["certified_epsilon"].attrs["status"] == "certified_lower_bound"
    assert ds["true_epsilon_exact"].dtype == bool
    assert ds["true_epsilon_exact"].values.all()
    # soundness on the demo itself: no certified pair above its exact truth
    cert, truth = ds["certified_epsilon"], ds["true_epsilon"]
    assert bool((cert <= truth).where(cert.notnull(), True).all())
    # AUC falls from separable towards chance along the sweep
    auc = ds["rocht_auc"].median("pair")
    assert (auc.isel(noise_sd=0) == 1.0).all()
    assert (auc.isel(noise_sd=-1) < 0.8).all()
    report = (out / "report.md").read_text(encoding="utf-8")
    assert "### What each status means" in report
    for status in ("certified_lower_bound", "sample_estimate", "diagnostic", "reference"):
        assert f"- *{status}*: " in report
    # each (mechanism, noise level) is one certificate family at alpha = 0.05: the report
    # states the sweep-wide union bound, 2 x 3 families x 0.05 = 0.3, and how to get one family
    assert ds.attrs["certificate_families"] == 6
    assert ds.attrs["certifier.n_families"] == 1
    assert "some* family has a violation is bounded only by 6 × α = 0.3" in report
    assert "`n_families=6`" in report
    table_rows = [line for line in report.splitlines() if line.startswith("| 0.1 ")]
    assert len(table_rows) == 2  # the first noise level, once per mechanism
    assert (out / "noise_sweep.png").read_bytes().startswith(b"\x89PNG")
    # part one: anonymisers on synthetic faces, with real offline models
    for name in (
        "faces_results.nc",
        "faces_pairs.csv",
        "faces_table.csv",
        "linkage.csv",
        "epsilon_vs_strength.png",
        "contact_sheet.png",
    ):
        assert (out / name).is_file(), name
        assert _mode(out / name) == 0o600, name
    assert _mode(out / ".cache") == 0o700
    with xr.open_dataset(out / "faces_results.nc") as faces:
        faces = faces.load()
    assert list(faces["condition"].values) == ["none", "blur σ=3", "pixelate 8px", "swap mix=0.5"]
    assert list(faces["method"].values) == ["none", "blur", "pixelate", "swap"]
    assert faces.attrs["encoder"] == "dlib-resnet-v1-torch"
    assert "made-up people: no real person's face is used or written" in report
    assert "| none |" in report
    assert "Gaussian blur" in report
    assert "Latent face swap" in report
    table = pd.read_csv(out / "faces_table.csv")
    assert table.loc[table["condition"] == "none", "top1_rate"].item() > 0.9
    # one top heading, the verdict first, every certified value beside its ceiling
    heads = [line for line in report.splitlines() if line.startswith("#")]
    assert [h for h in heads if h.startswith("# ")] == [heads[0]]
    assert heads[1] == "## Verdict"
    assert "## Part two — a calibrated-noise reference" in report
    assert "go here" not in report  # no placeholder: the warnings, if any, are written
    for section in ("### Certificates", "### The certificate's ceiling", "### Did each route "
                    "track the truth?", "### What each column answers"):  # fmt: skip
        assert section in heads
    certs = pd.read_csv(out / "faces_certificates.csv")
    assert len(certs) == 4 * 2  # 2 pairs per condition
    at = (certs["epsilon_lb"] - certs["epsilon_lb_ceiling"]).abs() <= 1e-12
    part_one = report.split("## Part two")[0]  # part two flags its own ceilings
    assert part_one.count("⚑ at ceiling") == int(table["certified_at_ceiling"].sum())
    assert report.count(" ⚑ |") == int(at.sum())  # the certificates' own table
    # the verdict: at most six bullets, each led by its status; no claim from one step
    verdict = report.split("## Verdict")[1].split("\n## ")[0]
    bullets = [line for line in verdict.splitlines() if line.startswith("- ")]
    assert 1 <= len(bullets) <= 6
    assert all(b.startswith(("- **certified** — ", "- **estimate** — ", "- **diagnostic** — "))
               for b in bullets)  # fmt: skip
    assert "removes variation within a person faster" not in report
    assert "leaks least by" not in report
    # every ε beside its scale: MMD-TV's ceiling with this kernel, the certificate's ceiling
    assert "2·artanh(√2/2) ≈ 1.76" in report
    assert "sit at their ceiling" in report
    # ROC-HT's column is +inf on every pair here: flagged where it stands
    if (table["rocht_inf"] == table["n_pairs"]).all():
        assert "| ⚑ +∞ on every pair of every row: no information |" in report
