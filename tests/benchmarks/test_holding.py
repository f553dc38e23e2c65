"""The holding table: both arms on the same held-out seeds, a paired row, and the truth."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks import bench_holding


def test_the_table_pairs_both_arms_by_seed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bench_holding, "QUICK", {12: 1})
    rows = bench_holding.run_holding(quick=True)
    assert [r["policy"] for r in rows] == [
        "holds declared",
        "holds not declared",
        "paired difference",
    ]
    assert rows[0]["accepted"].endswith("of 1") and rows[1]["accepted"].endswith("of 1")


def test_a_campaign_that_accepts_nothing_reports_the_start_as_its_head(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Family seed 6 without declarations accepts nothing in 12 experiments (the temper tests
    show it): the head is the start, so its gain and damage are 0 by definition."""
    monkeypatch.setenv("RSILAB_SANDBOX", "process")
    run = bench_holding.one_campaign(tmp_path, 6, 12, holds=False)
    assert run == {"accepted": False, "gain": 0.0, "damage": 0.0}
