"""``rsilab run --team N`` and ``rsilab resume`` of a team campaign, on the synthetic task."""

from __future__ import annotations

from pathlib import Path

import pytest

from rsilab.agents.llm.scripted import Respond, ScriptedServer
from rsilab.orchestrator.builtin.runner import Progress, StopRequest
from rsilab.orchestrator.builtin.team import run_team_campaign
from rsilab.records import Campaign, Experiment
from rsilab.store import Lab
from rsilab.tasks import Budget, get_task
from tests.cli.helpers import explain, rsilab
from tests.orchestrator.llm.test_team import play_team


@pytest.fixture(autouse=True)
def _process_sandbox(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RSILAB_SANDBOX", "process")


def test_run_with_a_team_names_its_researchers_and_reports_them(tmp_path: Path) -> None:
    lab = tmp_path / "lab"
    assert rsilab("init", "--lab", lab).exit_code == 0
    ran = rsilab("run", "synthetic", "--team", "2", "--budget", "experiments=5", "--lab", lab)
    assert ran.exit_code == 0, explain(ran)
    out = " ".join(ran.stdout.split())
    assert "experiment 5/5 researcher-" in out and "leader: researcher-1 is now" in out
    assert "[finished]" in out
    with Lab.open(lab) as opened:
        [campaign] = opened.store.query_as(Campaign)
        makers = {e.created_by for e in opened.store.query_as(Experiment)}
    assert campaign.settings["team"] == 2 and makers == {"researcher-1", "researcher-2"}
    report = (lab / "reports" / f"{campaign.id}.md").read_text()
    assert "## Team" in report and "### By actor" in report and "| total |" in report


def test_team_refuses_workers_and_an_llm_without_its_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    lab = tmp_path / "lab"
    assert rsilab("init", "--lab", lab).exit_code == 0
    both = rsilab("run", "synthetic", "--team", "2", "--workers", "2", "--lab", lab)
    assert both.exit_code == 2 and "--team and --workers" in both.stderr
    llm = rsilab("run", "synthetic", "--team", "2", "--agents", "openai:m", "--lab", lab)
    assert llm.exit_code == 2 and "OPENAI_API_KEY" in llm.stderr
    zero = rsilab("run", "synthetic", "--team", "0", "--lab", lab)
    assert zero.exit_code == 2
    with Lab.open(lab) as opened:
        assert opened.store.query_as(Campaign) == []


def test_resume_continues_a_team_campaign_with_its_team(tmp_path: Path) -> None:
    lab_path = tmp_path / "lab"
    assert rsilab("init", "--lab", lab_path).exit_code == 0
    stop = StopRequest()

    def ctrl_c(progress: Progress) -> None:
        if progress.kind == "experiment" and progress.experiments == 2:
            stop.request()

    with Lab.open(lab_path) as lab:
        first = run_team_campaign(
            lab,
            get_task("synthetic"),
            team=2,
            budget=Budget(experiments=5),
            stop=stop,
            on_progress=ctrl_c,
        )
    assert first.state == "stopped"
    refused = rsilab("resume", first.campaign_id, "--workers", "3", "--lab", lab_path)
    assert refused.exit_code == 2 and "--team and --workers" in refused.stderr
    resumed = rsilab("resume", first.campaign_id, "--lab", lab_path)
    assert resumed.exit_code == 0, explain(resumed)
    assert "experiment 5/5 researcher-" in " ".join(resumed.stdout.split())
    with Lab.open(lab_path) as lab:
        assert lab.store.get_as(first.campaign_id, Campaign).state == "finished"
        assert len(lab.store.query_as(Experiment, campaign_id=first.campaign_id)) == 5


def test_run_with_an_llm_team_through_the_scripted_server(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    lab = tmp_path / "lab"
    assert rsilab("init", "--lab", lab).exit_code == 0
    with ScriptedServer([Respond(play_team) for _ in range(60)]) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.openai_base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "k")
        ran = rsilab(
            "run", "synthetic", "--team", "2", "--agents", "openai:gpt-test",
            "--budget", "experiments=2,tokens=200000", "--lab", lab,
        )  # fmt: skip
    assert ran.exit_code == 0, explain(ran)
    out = " ".join(ran.stdout.split())
    assert "leader made 2 assignment(s)" in out and "[finished]" in out
    with Lab.open(lab) as opened:
        [campaign] = opened.store.query_as(Campaign)
        makers = sorted(e.created_by for e in opened.store.query_as(Experiment))
    assert campaign.settings["agents"] == "openai:gpt-test" and campaign.settings["team"] == 2
    assert makers == ["researcher-1", "researcher-2"]
    report = (lab / "reports" / f"{campaign.id}.md").read_text()
    assert "## Team" in report and "## Campaign review" in report
