"""The tempering table: both arms on the same seeds, a paired row, and the truth checked."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks import bench_tempering
from rsilab.orchestrator.builtin.ablation import Ablation


def test_the_table_pairs_both_arms_by_seed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bench_tempering, "QUICK", {12: 2})
    rows = bench_tempering.run_tempering(quick=True)
    assert [r["policy"] for r in rows] == [
        "with tempering",
        "without tempering",
        "paired difference",
    ]
    assert all(r["budget"] == 12 for r in rows)
    assert rows[0]["accepted"].endswith("of 2") and rows[1]["accepted"].endswith("of 2")


def test_a_campaign_reports_its_heads_truth(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RSILAB_SANDBOX", "process")
    run = bench_tempering.one_campaign(tmp_path, 3, 12, frozenset({Ablation.TEMPERING}))
    assert set(run) == {"accepted", "gain", "damage"}
    if not run["accepted"]:  # nothing accepted: the head is the start, by definition
        assert run["gain"] == 0.0 and run["damage"] == 0.0
    else:
        assert run["damage"] >= 0.0
