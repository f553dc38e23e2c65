"""The live view of ``rsilab run``, rendered to text as a terminal would show it."""

from __future__ import annotations

from pathlib import Path

import pytest
from rich.console import Console

from rsilab.cli._live import IDLE_READ_S, LiveView
from rsilab.controller.lineage import find_lineage, lineage_versions
from rsilab.expos.campaigns import open_campaign
from rsilab.orchestrator.builtin.runner import Progress, run_campaign
from rsilab.store import Lab
from rsilab.tasks import Budget, get_task
from tests.web.baseline_jobs import record_baseline_jobs


def _render(view: LiveView) -> str:
    console = Console(record=True, width=100, color_system=None)
    console.print(view)
    return console.export_text()


def _words(view: LiveView) -> str:
    return " ".join(_render(view).split())


def test_the_live_view_follows_a_campaign_from_its_records(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RSILAB_SANDBOX", "process")
    task, budget = get_task("synthetic"), Budget(experiments=4, wall_s=600)
    clock = iter(range(0, 10_000, 30))  # each look at the clock: 30 s later
    with Lab.init(tmp_path / "lab") as lab:
        view = LiveView(lab.store, task, budget, workers=2, clock=lambda: float(next(clock)))
        assert "(starting)" in _render(view)
        seen: list[Progress] = []

        def show(progress: Progress) -> None:
            seen.append(progress)
            view.update(progress)

        result = run_campaign(lab, task, budget=budget, workers=2, on_progress=show)
        text = _render(view)
        assert f"campaign {result.campaign_id}" in text  # found the campaign this run opened
        assert "4 done, 0 running, 0 left of 4" in text
        assert "used," in text and "left" in text  # wall time
        assert "tokens" not in text  # the built-in agents spend none
        lineage = find_lineage(lab.store, task.name)
        assert lineage is not None
        versions = lineage_versions(lab.store, lineage)
        baseline = versions[0]
        rows = [" ".join(line.replace("│", " ").split()) for line in text.splitlines()]
        for name, score in baseline.scores.items():  # each benchmark: baseline, best, by whom
            # An accepted version may trade a little of a non-target benchmark for its gain,
            # so the best of a benchmark is the highest-scoring version (earliest on a tie).
            best = max(versions, key=lambda v: v.scores[name].value)
            row = f"{name} {score.value:.4f} {best.scores[name].value:.4f} {best.label}"
            assert row in rows
        assert "tune lr, width" in text and "open" in text
        assert seen[-1].message in text

        llm = LiveView(lab.store, task, budget, campaign_id=result.campaign_id, agents="openai:m")
        llm.update(Progress("agent", "main planned", 1, 4, running=2))
        shown = _render(llm)
        assert "1 done, 2 running, 1 left of 4" in shown
        assert "tokens" in shown and "0 used" in shown
        assert "main planned" in shown


def test_the_live_view_counts_the_baselines_seeds_while_the_runner_is_silent(
    tmp_path: Path,
) -> None:
    task, budget = get_task("synthetic"), Budget(experiments=4, wall_s=600)
    now = [0.0]
    with Lab.init(tmp_path / "lab") as lab:
        campaign = open_campaign(lab.store, task.ref())
        view = LiveView(lab.store, task, budget, campaign_id=campaign.id, clock=lambda: now[0])
        view.refresh()
        assert "baseline starting" in _words(view)
        record_baseline_jobs(lab.store, started=6, finished=2)
        assert "baseline starting" in _words(view)  # read again only after IDLE_READ_S
        now[0] += IDLE_READ_S
        assert "baseline seed 3 of 6 (2 finished)" in _words(view)
