"""The form of every report: the one markdown table, numbers printed one way, the verdict."""

from __future__ import annotations

import math

import pytest

from idaudit._markdown import Bullet, number, table, verdict_section
from idaudit.exceptions import InvalidInputError


def test_the_one_table_prints_statuses_flags_and_numbers_one_way() -> None:
    text = table(
        ["noise sd", "ROC-HT +∞", "note"],
        [[0.177828, float("inf"), "x|y"], [8, float("inf"), None]],
        statuses={"ROC-HT +∞": "diagnostic"},
        flags={"ROC-HT +∞": "+∞ on every row"},
    )
    assert text.splitlines() == [
        "| noise sd | ROC-HT +∞ | note |",
        "|---|---|---|",
        "| | *diagnostic* | |",
        "| | ⚑ +∞ on every row | |",
        "| 0.178 | +∞ | x\\|y |",
        "| 8 | +∞ | – |",
    ]
    assert [number(0.177828), number(0.178), number(float("nan")), number(-math.inf)] == [
        "0.178",
        "0.178",
        "–",
        "−∞",
    ]
    with pytest.raises(InvalidInputError, match="`rows` must have 2 cells each; row 0 has 1"):
        table(["a", "b"], [[1]])
    with pytest.raises(InvalidInputError, match="`flags` must name columns of the header"):
        table(["a"], [[1]], flags={"b": "x"})
    with pytest.raises(InvalidInputError, match="`statuses` must give one status per column"):
        table(["a", "b"], [[1, 2]], statuses=["diagnostic"])


def test_a_verdict_has_at_most_six_bullets_each_led_by_its_status_word() -> None:
    bullets = [Bullet("sample_estimate", f"claim {i}.") for i in range(8)]
    lines = [line for line in verdict_section(bullets) if line.startswith("- ")]
    assert len(lines) == 6
    assert lines[0] == "- **estimate** — claim 0."
    assert verdict_section([Bullet("certified_lower_bound", "x.")])[2] == "- **certified** — x."
    with pytest.raises(InvalidInputError, match="`status` must be one of"):
        Bullet("proven", "x.")
