"""The faces demo's report text against the numbers it summarises."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import xarray as xr

from idaudit.demo import FaceDemoResult


def test_top1_chance_counts_the_identities_the_linkage_searched() -> None:
    # five identities, one lost in some condition: the linkage searched the four common ones
    lost = pd.DataFrame({"none": [0, 0, 0, 0, 10]}, index=[f"p{k}" for k in range(5)])
    linkage = pd.DataFrame({"chance": [0.25, 0.25]}, index=["none", "blur"])
    result = FaceDemoResult(
        results=xr.Dataset(),
        table=pd.DataFrame(),
        certificates={},
        linkage=linkage,
        lost=lost,
        controls=None,
        n_encoded=0,
        seconds=0.0,
        files={"x": Path("x")},
    )
    assert result.top1_chance == 0.25
