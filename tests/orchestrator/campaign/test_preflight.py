"""Preflight: what a run needs is checked before anything is written; an opt-in to run
without the sandbox is explicit, recorded and reported; failing experiments stop a campaign."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

import rsilab
from rsilab.agents.llm import OpenAIChat
from rsilab.orchestrator.campaign import CampaignPolicy, CampaignSession, Ending, run_policy
from rsilab.orchestrator.report import build_report, render_markdown
from rsilab.records import Campaign, CampaignState, EndReason, EventDraft, Experiment
from rsilab.store import Lab
from rsilab.tasks import Budget, get_task


@pytest.fixture
def lab(tmp_path: Path) -> Iterator[Lab]:
    opened = Lab.init(tmp_path / "lab")
    yield opened
    opened.close()


def _nothing_written(lab: Lab, head: tuple[int, str]) -> None:
    assert lab.store.head() == head
    assert lab.store.query_as(Campaign) == []


def test_without_a_usable_sandbox_the_run_is_refused_and_nothing_written(
    lab: Lab, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv("RSILAB_SANDBOX", raising=False)
    monkeypatch.setenv("RSILAB_RUNTIME", str(tmp_path / "no-runtime-here"))
    head = lab.store.head()
    with pytest.raises(rsilab.UserError, match="--unsandboxed") as refused:
        rsilab.run("synthetic", budget={"experiments": 2}, lab=lab)
    assert "runtime environment is not installed" in refused.value.message
    _nothing_written(lab, head)


def test_an_opt_in_runs_unsandboxed_and_says_so_in_the_report(
    lab: Lab, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv("RSILAB_SANDBOX", raising=False)
    monkeypatch.setenv("RSILAB_RUNTIME", str(tmp_path / "no-runtime-here"))
    result = rsilab.run("synthetic", budget={"experiments": 2}, lab=lab, unsandboxed=True)
    campaign = lab.store.get_as(result.campaign_id, Campaign)
    assert campaign.settings["unsandboxed"] is True and campaign.settings["sandbox"] == "process"
    assert "**Unsandboxed:**" in render_markdown(build_report(lab.store, result.campaign_id))


def test_a_sandboxed_run_records_where_its_jobs_ran(lab: Lab) -> None:
    result = rsilab.run("synthetic", budget={"experiments": 2}, lab=lab)
    campaign = lab.store.get_as(result.campaign_id, Campaign)
    assert campaign.settings["unsandboxed"] is (campaign.settings["sandbox"] != "bwrap")
    report = render_markdown(build_report(lab.store, result.campaign_id))
    assert ("**Unsandboxed:**" in report) is campaign.settings["unsandboxed"]


def test_an_unreachable_llm_endpoint_is_refused_before_anything_is_written(lab: Lab) -> None:
    import socket

    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    chat = OpenAIChat("gpt-test", api_key="k", base_url=f"http://127.0.0.1:{port}/v1")
    head = lab.store.head()
    from rsilab.orchestrator.llm import LlmPolicy

    policy = LlmPolicy(lab, agents="openai:gpt-test", budget=Budget(experiments=2), model=chat)
    with pytest.raises(
        rsilab.UserError, match=f"127.0.0.1:{port}/v1/ of openai:gpt-test cannot be reached"
    ):
        run_policy(lab, get_task("synthetic"), policy, budget=Budget(experiments=2))
    _nothing_written(lab, head)
    chat.close()


def test_a_harness_that_cannot_be_run_is_refused(lab: Lab, tmp_path: Path) -> None:
    broken = tmp_path / "harness"
    broken.mkdir()
    (broken / "harness.toml").write_text("this is = = not toml\n")
    task = get_task("synthetic").model_copy(update={"harness": broken})
    head = lab.store.head()
    with pytest.raises(rsilab.UserError, match="its harness cannot be run"):
        rsilab.run(task, budget={"experiments": 2}, lab=lab)
    _nothing_written(lab, head)


class _Failing(CampaignPolicy):
    """Records failed experiments, one per turn, calling the session's check each turn."""

    def settings(self) -> dict[str, object]:
        return {"agents": "failing", "max_failures_in_a_row": 3}

    def run(self, session: CampaignSession) -> Ending:
        for n in range(10):
            session.check()
            failed = Experiment(
                campaign_id=session.campaign_id,
                direction_id="dir-x",
                state="failed",
                summary_text=f"attempt {n}: the harness crashed",
                finished_at=f"2026-12-01T00:00:0{n}Z",
            )
            draft = EventDraft(
                actor="w", role="worker", action="t", campaign_id=session.campaign_id
            )
            session.lab.store.commit(draft, [failed])
        return Ending(CampaignState.FINISHED, EndReason.BUDGET_SPENT, "spent")


def test_experiments_that_keep_failing_stop_the_campaign(lab: Lab) -> None:
    result = run_policy(lab, get_task("synthetic"), _Failing(), budget=Budget(experiments=10))
    campaign = lab.store.get_as(result.campaign_id, Campaign)
    assert (campaign.state, campaign.end_reason) == ("stopped", "experiments_failing")
    assert campaign.end_detail.startswith("3 experiments in a row failed; nothing is proposed")
    assert "attempt 2: the harness crashed" in campaign.end_detail
    assert len(lab.store.query_as(Experiment, campaign_id=campaign.id)) == 3
    # a resume starts afresh: the failures of the run before do not stop it at once
    again = run_policy(
        lab,
        get_task("synthetic"),
        _Failing(),
        budget=Budget(experiments=10),
        campaign_id=campaign.id,
    )
    assert again.end_reason == "experiments_failing"
    assert len(lab.store.query_as(Experiment, campaign_id=campaign.id)) == 6


def test_a_campaign_whose_baseline_failed_can_be_resumed(
    lab: Lab, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The baseline runs inside the campaign: when it fails (or the process dies during it),
    the campaign is left to resume, and the resume makes the baseline."""
    from rsilab.controller.host import HostController

    real = HostController.baseline

    def broken(self: HostController, **kw: object) -> object:
        raise RuntimeError("the disk filled up during the baseline")

    monkeypatch.setattr(HostController, "baseline", broken)
    with pytest.raises(RuntimeError):
        rsilab.run("synthetic", budget={"experiments": 2}, lab=lab)
    (campaign,) = lab.store.query_as(Campaign)
    assert (campaign.state, campaign.end_reason) == ("stopped", "preflight_failed")
    assert "the baseline failed: RuntimeError" in campaign.end_detail
    monkeypatch.setattr(HostController, "baseline", real)
    resumed = rsilab.resume(campaign.id, lab=lab)
    assert resumed.end_reason == "budget_spent" and resumed.experiments == 2


def test_a_disk_limit_the_kernel_cannot_enforce_needs_an_opt_in(
    lab: Lab, monkeypatch: pytest.MonkeyPatch
) -> None:
    """In the bubblewrap sandbox without a kernel-enforced disk limit (not root, say), the
    run is refused before anything is written, unless a person accepts a polled limit."""
    from rsilab.executors.local import LocalExecutor
    from rsilab.sandbox import DiskLimits

    monkeypatch.delenv("RSILAB_SANDBOX", raising=False)
    monkeypatch.setattr(
        LocalExecutor, "disk_limits", lambda self: DiskLimits(False, "not run as root")
    )
    head = lab.store.head()
    with pytest.raises(rsilab.UserError, match="not run as root") as refused:
        rsilab.run("synthetic", budget={"experiments": 2}, lab=lab)
    assert "--unbounded-disk" in refused.value.hint
    _nothing_written(lab, head)
    result = rsilab.run("synthetic", budget={"experiments": 2}, lab=lab, unbounded_disk=True)
    campaign = lab.store.get_as(result.campaign_id, Campaign)
    assert campaign.settings["disk_limit"] == "polled" and not campaign.settings["unsandboxed"]


def test_a_run_on_a_lineage_whose_private_data_changed_is_refused_before_writing(
    lab: Lab, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The controller would refuse every candidate against a baseline measured on other data;
    the run is refused at once instead, with one line, and the lab is left as it was."""
    from rsilab.errors import UserError
    from tests.tasks.task_files import write_toml_task

    monkeypatch.setenv("RSILAB_SANDBOX", "process")
    path = write_toml_task(tmp_path / "t", "datachange")
    rsilab.run(str(path), budget={"experiments": 1}, lab=lab, seed=3)
    final = tmp_path / "t" / "data" / "final.jsonl"
    final.write_text(final.read_text().replace('"target": 1', '"target": 0', 1))
    head = lab.store.head()
    with pytest.raises(UserError, match="changed since the baseline") as info:
        rsilab.run(str(path), budget={"experiments": 1}, lab=lab, seed=4)
    assert "private tiers" in str(info.value)
    assert lab.store.head() == head


def test_a_scorer_that_cannot_score_here_refuses_the_run_before_anything_is_written(
    lab: Lab, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # Jobs may run unsandboxed by the user's opt-in; model-written programs never are: a task
    # scored by python_tests is refused at preflight, not stopped at its first evaluation.
    from rsilab.tasks import Benchmark, GeneratedSplits, Sample

    def problems(tier: object, seed: int) -> list[Sample]:
        target = {"entry": "f", "tests": ["assert f(1) == 2"]}
        return [Sample(id=f"p{seed % 97}", input="write f(x) = x + 1", target=target)]

    code = Benchmark(name="code", scorer="python_tests", target=False,
                     samples=GeneratedSplits(name="code", generate=problems))  # fmt: skip
    synthetic = get_task("synthetic")
    task = synthetic.model_copy(update={"benchmarks": [*synthetic.benchmarks, code]})
    monkeypatch.delenv("RSILAB_SANDBOX", raising=False)
    monkeypatch.setenv("RSILAB_RUNTIME", str(tmp_path / "no-runtime-here"))
    head = lab.store.head()
    with pytest.raises(rsilab.UserError, match="python_tests runs model-written programs only"):
        rsilab.run(task, budget={"experiments": 2}, lab=lab, unsandboxed=True)
    _nothing_written(lab, head)
