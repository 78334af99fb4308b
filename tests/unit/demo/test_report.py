"""The demo report's conclusion and certificate columns, worded from the numbers given."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from scipy.stats import binomtest
import pandas as pd
import pytest
import xarray as xr

from idaudit._markdown import verdict_section
from idaudit.audits._tables import ceiling_reached
from idaudit.demo import FaceDemoResult
from idaudit.demo._report import markdown_table
from idaudit.demo._report import faces_verdict

CEILING = 1.754338

# condition -> (method, strength, top-1, MMD-TV, AUC, certified max, within, between, bandwidth)
ROWS = {
    "none": ("none", 0.0, 1.00, 0.93, 1.0, CEILING, 0.134, 0.445, 0.423),
    "blur σ=3": ("blur", 3.0, 0.72, 0.98, 1.0, CEILING, 0.095, 0.367, 0.331),
    "pixelate 8px": ("pixelate", 8.0, 0.11, 0.50, 0.95, 0.81, 0.095, 0.095, 0.150),
    "swap mix=0.5": ("swap", 0.5, 0.63, 0.93, 1.0, 0.0, 0.117, 0.408, 0.388),
}
N_PAIRS = 15


def _result(
    rise: np.ndarray | None = None, *, ceiling: float = CEILING, top1_pixelate: float = 0.11
) -> FaceDemoResult:
    rows = []
    for name, (method, strength, top1, mmd, auc, cert, within, between, bw) in ROWS.items():
        if name == "pixelate 8px":
            top1 = top1_pixelate
        rows.append(
            {
                "condition": name,
                "method": method,
                "strength": strength,
                "faces_lost": 0,
                "top1_rate": top1,
                "top1_low": top1,
                "top1_high": top1,
                "match_rate": 1.0,
                "match_low": 1.0,
                "match_high": 1.0,
                "gaussmech_median": 150.0,
                "kdelr_median": 3300.0,
                "mmdtv_median": mmd,
                "mmdtv_hs_median": mmd,
                "rocht_auc_median": auc,
                "rocht_inf": N_PAIRS,
                "n_pairs": N_PAIRS,
                "mmdtv_bandwidth_median": bw,
                "within_spread": within,
                "between_distance": between,
                "certified_max": cert,
                "certified_ceiling": ceiling,
                "certified_at_ceiling": abs(cert - ceiling) <= 1e-12,
                "n_certified": 3,
                "n_certified_at_ceiling": 3 if abs(cert - ceiling) <= 1e-12 else 1,
            }
        )
    table = pd.DataFrame(rows)
    table.attrs["certified_max_status"] = "certified_lower_bound"
    names = list(ROWS)
    base = np.linspace(0.8, 1.0, N_PAIRS)
    mmd = np.stack([base + (ROWS[n][3] - 0.93) for n in names])  # (condition, pair)
    if rise is not None:  # per-pair change of blur σ=3 against none
        mmd[1] = mmd[0] + rise
    results = xr.Dataset(
        {"mmdtv_epsilon": (("condition", "pair"), mmd)}, coords={"condition": names}
    )
    certs = {
        n: xr.Dataset(
            {
                "epsilon_lb": ("pair", [row["certified_max"], 0.0, 0.0]),
                "epsilon_lb_ceiling": ("pair", [ceiling] * 3),
                "n_test_a": ("pair", [30, 30, 30]),
                "n_test_b": ("pair", [30, 30, 30]),
                "test_fp": ("pair", [0, 1, 2]),
                "test_fn": ("pair", [0, 3, 9]),
            },
            coords={"identity_a": ("pair", ["a", "c", "e"]), "identity_b": ("pair", list("bdf"))},
            attrs={"alpha": 0.05},
        )
        for n, row in zip(names, rows, strict=True)
    }
    return FaceDemoResult(
        results=results,
        table=table,
        certificates=certs,
        linkage=pd.DataFrame({"chance": [1 / 6] * 4}, index=names),
        lost=pd.DataFrame({n: [0] * 6 for n in names}),
        controls=None,
        n_encoded=0,
        seconds=0.0,
        files={"x": Path("x")},
    )


def _verdict(result: FaceDemoResult) -> str:
    return "\n".join(verdict_section(faces_verdict(result)))


def test_certified_column_states_the_ceiling_and_flags_values_at_it() -> None:
    lines = markdown_table(_result().table)
    assert lines[0].endswith("certified ε (max) [ceiling] |")
    by_name = {line.split(" | ")[0].lstrip("| "): line for line in lines[4:]}
    assert by_name["none"].endswith("| 1.75 [1.75] ⚑ at ceiling |")
    assert by_name["pixelate 8px"].endswith("| 0.81 [1.75] |")
    assert by_name["swap mix=0.5"].endswith("| 0 [1.75] |")
    # ROC-HT is +∞ on every pair of every row: flagged in the table itself, under the header
    assert "⚑ +∞ on every pair of every row: no information" in lines[3]
    assert ceiling_reached(CEILING, CEILING + 1e-13)
    assert not ceiling_reached(CEILING, CEILING + 1e-11)


def test_the_verdict_is_short_and_every_bullet_carries_its_status() -> None:
    bullets = faces_verdict(_result(rise=np.full(N_PAIRS, 0.05)))
    assert 1 <= len(bullets) <= 6
    lines = [line for line in _verdict(_result()).splitlines() if line.startswith("- ")]
    assert all(
        line.startswith(("- **certified** — ", "- **estimate** — ", "- **diagnostic** — "))
        for line in lines
    )


def test_the_verdict_proves_at_least_and_orders_nothing_by_certificate() -> None:
    text = _verdict(_result())
    # 3 of 4 conditions certify a positive ε; 2 at their ceiling; the swap certifies 0
    assert (
        "3 of the 4 conditions are proven to leak: their largest certificates, each an "
        '"ε is at least", run 0.81–1.75' in text
    )
    assert "2 sit at their ceiling (1.75 at these test sizes)" in text
    assert "lower bounds order nothing" in text
    assert "`swap mix=0.5` certifies 0, which is no proof of privacy" in text
    for claim in ("leaks least by the certificate", "proven to leak the most", "leaks least"):
        assert claim not in text


def test_separately_certified_conditions_claim_each_at_its_own_confidence() -> None:
    faces = _result()
    # what the reduction across the four families gives: not jointly certified
    faces.table.attrs["certified_max_status"] = "sample_estimate"
    text = _verdict(faces)
    assert (
        "- **certified** — 3 of the 4 conditions are proven to leak, each at its own 95 % "
        "(the conditions were certified separately, so the claims do not hold jointly)"
    ) in text


def test_the_top1_ranking_needs_separated_intervals() -> None:
    # the fixture's intervals are points: pixelation's 11 % is below every other
    text = _verdict(_result())
    assert "lowest for `pixelate 8px`, 11% [11%, 11%] against 100% unanonymised" in text
    assert "below every other anonymiser (exact 95 % intervals do not overlap)" in text
    assert "`pixelate 8px` even below chance" in text
    assert "below chance" not in _verdict(_result(top1_pixelate=0.2))
    # overlapping intervals: not distinguishable
    result = _result()
    table = result.table.copy()
    table.loc[table["condition"] == "pixelate 8px", "top1_high"] = 0.7
    text = _verdict(FaceDemoResult(**{**result.__dict__, "table": table}))
    assert "not distinguishable here from `swap mix=0.5` (exact 95 % intervals overlap)" in text


def test_low_reidentification_beside_a_separating_classifier_is_not_privacy() -> None:
    text = _verdict(_result())
    assert (
        "Low re-identification is not identity-level privacy: `pixelate 8px` has top-1 11% "
        "[11%, 11%] yet a median ROC AUC of 0.95" in text
    )


def test_the_mmdtv_order_comes_from_a_paired_sign_test() -> None:
    # pixelation's pairs sit 0.43 below the swap's on every pair: 15 of 15, p = 6.1e-05
    text = _verdict(_result())
    assert "MMD-TV (at most 1.76 with this kernel) is lowest for `pixelate 8px`" in text
    assert "below the next lowest, `swap mix=0.5` (0.93): higher there on 15 of 15 shared " in text
    # the two lowest are picked by the same medians: Bonferroni over the 3 pairs of the three
    # anonymised conditions, p = 3 x binomtest(15, 15)
    adjusted = 3 * binomtest(15, 15, 0.5).pvalue
    assert f"pairs, paired sign test p = 6.1e-05, {adjusted:.2g} after Bonferroni over the 3" in text


def test_the_mmdtv_order_is_not_claimed_from_a_test_picked_by_its_own_data() -> None:
    # the swap lies above pixelation on 12 of 15 pairs: two-sided p = 0.035 alone, but the two
    # were picked as the lowest two of three conditions, so 3 x 0.035 = 0.105: no order claimed
    result = _result()
    mmd = result.results["mmdtv_epsilon"]
    swap = mmd.sel(condition="swap mix=0.5").values
    low = swap - 0.4
    low[:3] = swap[:3] + 0.01  # 3 pairs where pixelation is higher
    mmd.loc[{"condition": "pixelate 8px"}] = low
    p = binomtest(12, 15, 0.5).pvalue
    assert 0.03 < p < 0.05 < 3 * p
    text = _verdict(result)
    assert "not distinguishable here from the next lowest, `swap mix=0.5`" in text
    assert f"higher there on 12 of 15 shared pairs, paired sign test p = {p:.2g}," in text


def test_a_systematic_rise_of_mmdtv_is_explained_at_its_step_without_a_trend() -> None:
    # every pair rises from none to blur σ=3, and blur tightens each identity more than it
    # pulls identities together (between / within: 3.32 -> 3.86)
    text = _verdict(_result(rise=np.full(N_PAIRS, 0.05)))
    assert (
        "MMD-TV rises with strength at 1 step (`none` → `blur σ=3` (0.93 → 0.98, up on 15 of "
        "15 pairs, sign test p = 6.1e-05; distance/spread 3.32 → 3.86, bandwidth 0.423 → "
        "0.331)): not sampling noise" in text
    )
    assert "measured at that step only and is no trend" in text
    # the sentence that generalised from one step is gone
    assert "removes variation within a person faster" not in text


def test_a_mixed_rise_of_mmdtv_is_not_in_the_verdict() -> None:
    rise = np.where(np.arange(N_PAIRS) % 2 == 0, 0.02, -0.01)  # 8 up, 7 down
    text = _verdict(_result(rise=rise))
    assert "rises with strength" not in text


def test_report_headings_and_certificates_beside_their_ceilings() -> None:
    from idaudit.demo._report import _faces_report
    from idaudit.demo._run import DemoConfig

    report = _faces_report(_result(), DemoConfig())
    heads = [line for line in report.splitlines() if line.startswith("#")]
    assert heads[0].startswith("# ")
    assert heads[1] == "## Verdict"
    assert sum(h.startswith("# ") for h in heads) == 1
    assert "### Certificates" in heads
    assert "### The certificate's ceiling" in heads
    assert "| none | a vs b | 30, 30 | 0, 0 | – | 1.754 ⚑ | 1.754 |" in report


@pytest.mark.parametrize("name", ["noise", "strength"])
def test_demo_figures_keep_their_legend_off_the_data(name: str) -> None:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.transforms import Bbox

    if name == "strength":
        from idaudit.demo._faces import strength_figure

        fig = strength_figure(_result().table, 6)
        assert len(fig.axes) == 6  # (ε, rates) x (blur, pixelate, swap)
        chance = [
            line
            for ax in fig.axes
            for line in ax.get_lines()
            if line.get_label() == "chance of top-1 identification (1/6)"
        ]
        assert len(chance) == 3
        np.testing.assert_allclose(chance[0].get_ydata(), [1 / 6, 1 / 6])
        assert {ax.get_yscale() for ax in fig.axes[:3]} == {"linear"}  # ε within a factor 30
        assert {ax.get_ylim() for ax in fig.axes[3:]} == {(0.0, 1.02)}
    else:
        from idaudit.demo._noise import demo_identities, noise_figure, noise_sweeps

        sweeps = noise_sweeps(
            demo_identities(6, 4), np.array([0.1, 1.0]), n_pairs=3, n_per_identity=20,
            progress=False,
        )  # fmt: skip
        fig = noise_figure(sweeps)
        assert len(fig.axes) == 4
    FigureCanvasAgg(fig).draw()
    (legend,) = fig.legends
    box = legend.get_window_extent()
    for ax in fig.axes:
        assert not box.overlaps(ax.get_window_extent())
        for line in ax.get_lines():
            xy = line.get_transform().transform(np.asarray(line.get_xydata(), dtype=float))
            xy = xy[np.isfinite(xy).all(axis=1)]
            if len(xy):
                assert not box.overlaps(Bbox([xy.min(axis=0), xy.max(axis=0)]))


def test_warnings_follow_each_conditions_own_certificates() -> None:
    # two conditions whose identities cannot be told apart (one distribution): large
    # diagnostics beside an AUC near 0.5 are flagged, except where a certificate proves leakage
    from idaudit import EmbeddingSet, GaussMechAuditor, ROCHTAuditor, audit_pairs, concat_conditions
    from idaudit.demo._report import _discordance_lines

    gen = np.random.default_rng(0)
    es = EmbeddingSet(gen.normal(size=(120, 6)), np.repeat([f"p{i}" for i in range(6)], 20))
    one = audit_pairs(es, "all", [GaussMechAuditor(), ROCHTAuditor(rng=0)], progress=False)
    stacked = concat_conditions({"none": one, "swap": one})

    def cert(lb: float) -> xr.Dataset:
        return xr.Dataset({"epsilon_lb": ("pair", [lb]), "test_auc": ("pair", [0.5])})

    result = _result()
    faces = FaceDemoResult(
        **{
            **result.__dict__,
            "results": stacked,
            "certificates": {"none": cert(0.0), "swap": cert(0.4)},
        }
    )
    lines = _discordance_lines(faces)
    assert lines[0] == "## Warnings"
    assert any(line.startswith("- `none`:") for line in lines)
    assert not any(line.startswith("- `swap`:") for line in lines)


def test_the_encoding_sentence_says_what_came_from_the_cache() -> None:
    # a cached re-run said "This run encoded 0 faces in 27 s": the 27 s were the audits
    from idaudit.demo._report import _encoding_sentence

    def said(n_encoded: int, n_cached: int) -> str:
        result = FaceDemoResult(
            results=xr.Dataset(),
            table=pd.DataFrame(),
            certificates={},
            linkage=pd.DataFrame(),
            lost=pd.DataFrame(),
            controls=None,
            n_encoded=n_encoded,
            seconds=27.2,
            files={},
            n_cached=n_cached,
        )
        return _encoding_sentence(result)

    assert said(0, 360) == (
        "This run read all 360 results from the cache, encoding none; the faces part took 27 s."
    )
    assert said(1, 359) == (
        "This run encoded 1 face and read 359 from the cache; the faces part took 27 s."
    )
    assert said(360, 0) == "This run encoded 360 faces; the faces part took 27 s."


def test_part_two_shows_the_certificates_ceiling_and_flags_values_at_it() -> None:
    from idaudit.demo._noise_report import _noise_table

    per_pair = {
        name: (("noise_sd", "pair"), [[v, v], [v / 10, v / 10]])
        for name, v in (("rocht_auc", 1.0), ("true_epsilon", 50.0), ("gaussmech_epsilon", 9.0),
                        ("kdelr_epsilon", 90.0), ("mmdtv_epsilon", 1.0),
                        ("mmdtv_epsilon_hs", 1.2), ("rocht_epsilon", np.inf))
    }  # fmt: skip
    ds = xr.Dataset(
        {
            **per_pair,
            "reference_epsilon": ("noise_sd", [80.0, 8.0]),
            "certified_epsilon": (("noise_sd", "pair"), [[1.754, 1.2], [0.3, np.nan]]),
            "certified_epsilon_max": (
                "noise_sd", [1.754, 0.3], {"status": "certified_lower_bound"}
            ),
            "certified_ceiling": ("noise_sd", [1.754, 1.754], {"status": "descriptive"}),
        },
        coords={"noise_sd": [0.05, 1.0], "mechanism": "gaussian"},
    )
    lines = _noise_table(ds)
    assert lines[0].endswith("| certified ε (max) [ceiling] | certified > true |")
    assert lines[4].endswith("| 1.75 [1.75] ⚑ at ceiling | 0/2 |")
    assert lines[5].endswith("| 0.3 [1.75] | 0/1 |")


def test_the_mmdtv_order_sentence_with_two_conditions_and_against_the_pairs() -> None:
    from idaudit.demo._report import _mmd_order_sentence

    result = _result()
    anon = result.table[result.table["condition"].isin(["pixelate 8px", "swap mix=0.5"])]
    text = _mmd_order_sentence(result, anon)
    # two conditions: the pair compared is the only one, no correction to make
    assert "Bonferroni" not in text
    assert "below the next lowest, `swap mix=0.5`" in text
    # the table's medians put pixelation lowest, yet per pair it sits above the swap on 13 of
    # 15 (two-sided sign test p = 0.0074): said as such, not "not distinguishable"
    mmd = result.results["mmdtv_epsilon"]
    swap = mmd.sel(condition="swap mix=0.5").values.copy()
    pix = swap + 0.01
    pix[:2] = swap[:2] - 0.01
    mmd.loc[{"condition": "pixelate 8px"}] = pix
    text = _mmd_order_sentence(result, anon)
    assert "yet higher on most shared pairs than the next lowest, `swap mix=0.5`" in text
    assert "higher there on 2 of 15 shared pairs" in text
