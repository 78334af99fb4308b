"""The demo's part three: the private-swap section recomputed from its dataset."""

from __future__ import annotations

import numpy as np
import pytest

from idaudit.demo._private import (
    PRIVATE_QUICK,
    private_section,
    private_table,
    run_private_demo,
)


@pytest.fixture(scope="module")
def result(tmp_path_factory):
    return run_private_demo(tmp_path_factory.mktemp("private"), PRIVATE_QUICK, progress=False)


def test_files_and_provenance(result):
    assert result.figure.is_file()
    assert result.results.is_file()
    ds = result.dataset
    assert ds.attrs["audit_encoder"] == "eigenfaces-8x64"  # not the mechanism's encoder
    assert ds.attrs["mechanism_encoder"] == "dlib-resnet-v1-torch"
    np.testing.assert_array_equal(ds["sigma"].values, PRIVATE_QUICK.sigmas)
    assert ds.sizes["pair"] == 3  # every pair of 3 identities


def test_table_is_the_medians_and_the_counts(result):
    ds = result.dataset
    table = private_table(ds)
    np.testing.assert_allclose(
        table["pair guarantee"], [sorted(r)[1] for r in ds["guarantee_epsilon"].values]
    )  # the middle of 3 pairs
    gm = ds["gaussmech_epsilon"].values
    np.testing.assert_allclose(table["GaussMech"], [sorted(r)[1] for r in gm])
    cert, guar = ds["certified_epsilon"].values, ds["guarantee_epsilon"].values
    for k in range(len(table)):
        done = [c for c in cert[k] if c == c]
        below = [c for c, g in zip(cert[k], guar[k], strict=True) if c == c and c <= g]
        assert table["certified ≤ guarantee"][k] == f"{len(below)}/{len(done)}"
    status = table.attrs["status"]
    assert status["pair guarantee"] == "certified_upper_bound"
    assert status["GaussMech"] == "diagnostic"
    assert status["MMD-TV"] == "sample_estimate"
    assert status["certificate (largest)"] == "certified_lower_bound"


def test_section_shows_table_statuses_and_figure(result):
    text = private_section(result)
    assert text.startswith("## Part three")
    assert "| σ | pair guarantee | GaussMech | KDE-LR | MMD-TV | ROC-HT OOF |" in text
    assert "*certified_upper_bound*" in text
    assert "*certified_lower_bound*" in text
    assert f"]({result.figure.name})" in text
    cert, guar = result.dataset["certified_epsilon"].values, result.dataset["guarantee_epsilon"]
    done = np.isfinite(cert)
    n_below = int((cert[done] <= guar.values[done]).sum())
    assert f"{n_below} of {int(done.sum())} certified pairs" in text
