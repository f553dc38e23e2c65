"""Rounds of improvement (``run_rounds``): self and teacher harness improvers on ``policy``
(through the real sandboxed improve path, and through an in-process stand-in that proposes
a known gain), rsilab's built-in and LLM teachers on ``synthetic``, and the round report."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from rsilab.agents.llm.scripted import Reply, Respond, ScriptedServer
from rsilab.errors import UserError
from rsilab.expos import CallContext, ExperimentOS, default_registry
from rsilab.expos.services import LabServices
from rsilab.mcp.improver import improver_runner
from rsilab.orchestrator.campaign import Progress
from rsilab.orchestrator.report import build_evolution_report, render_evolution_markdown
from rsilab.orchestrator.rounds import (
    IMPROVER_ACTOR,
    ImproverEnd,
    ImproverJob,
    parse_improver,
    round_campaigns,
    run_rounds,
)
from rsilab.orchestrator.rounds import agent_tool_calls as counted_tool_calls
from rsilab.records import (
    Campaign,
    Candidate,
    CandidateState,
    Evolution,
    Experiment,
    Job,
    Lineage,
    Role,
    SystemVersion,
)
from rsilab.store import Lab, verify_store
from rsilab.tasks import Budget, get_task
from tests.cli.helpers import explain, rsilab
from tests.orchestrator.llm.test_runner import (
    call,
    ids,
    reviewer_filing_one,
    worker_proposing_a_gain,
)
from tests.sandbox.helpers import bwrap_problem
from tests.synthetic_configs import BETTER as SYNTHETIC_BETTER
from tests.tasks.builtin.policy_helpers import BETTER, HARNESS

START = json.loads((HARNESS / "config.json").read_text())


def _relay(fd: int, chunk: bytes) -> None:
    """The improver's output is not needed here."""


def _require_bwrap() -> None:
    problem = bwrap_problem()
    if problem is not None:
        pytest.skip(f"bubblewrap is unusable here ({problem})")


def _check_records(lab: Lab, evolution_id: str) -> Evolution:
    """What every evolution must satisfy: rounds chained head to head, campaigns tagged,
    tool calls as the ledger counts them, the ledger intact; the evolution record."""
    evolution = lab.store.get_as(evolution_id, Evolution)
    campaigns = round_campaigns(lab, evolution_id)
    head = evolution.start_version_id
    for entry in evolution.rounds:
        assert entry.head_before == head
        head = entry.head_after
        campaign = campaigns[entry.round]
        assert campaign.id == entry.campaign_id and campaign.is_finished()
        assert campaign.settings["evolution_id"] == evolution_id
        assert campaign.settings["round"] == entry.round
        assert campaign.settings["improver"] == entry.improver
        assert entry.accepted == (entry.head_after != entry.head_before)
        events = lab.store.events(campaign_id=campaign.id)
        assert entry.tool_calls == counted_tool_calls(events) > 0
    lineage = lab.store.get_as(lab.store.query_as(Lineage)[0].id, Lineage)
    assert lineage.head_id == head
    verified = verify_store(lab.store, artifacts=lab.artifacts)
    assert verified.ok, verified.problems
    return evolution


def _check_report(lab: Lab, evolution: Evolution) -> str:
    """The report's table holds what the store holds; its Markdown."""
    report = build_evolution_report(lab.store, evolution.id)
    start = lab.store.get_as(evolution.start_version_id, SystemVersion)
    assert [r.round for r in report.rows] == list(range(len(evolution.rounds) + 1))
    assert report.rows[0].version_id == start.id and report.rows[0].scores == start.scores
    text = render_evolution_markdown(report)
    for entry, row in zip(evolution.rounds, report.rows[1:], strict=True):
        head = lab.store.get_as(entry.head_after, SystemVersion)
        assert (row.version_id, row.label, row.scores) == (head.id, head.label, head.scores)
        assert (row.accepted, row.tool_calls, row.campaign_id) == (
            entry.accepted,
            entry.tool_calls,
            entry.campaign_id,
        )
        exps = lab.store.query_as(Experiment, campaign_id=entry.campaign_id)
        assert row.experiments == len(exps)
        assert row.hours == pytest.approx(entry.wall_s / 3600)
        line = next(ln for ln in text.splitlines() if ln.startswith(f"| {entry.round} |"))
        cells = [c.strip() for c in line.strip("|").split("|")]
        assert cells[2] == f"{head.label} `{head.id}`"
        assert cells[-4:] == [
            "accepted" if entry.accepted else "kept",
            str(len(exps)),
            str(entry.tool_calls),
            f"{entry.wall_s / 3600:.3f}",
        ]
        for bench, score in head.scores.items():
            assert f"{score.value:.4f} [{score.low:.4f}, {score.high:.4f}]" in line, bench
    return text


# -- harness improvers: the real sandboxed path --------------------------------------------


@pytest.mark.timeout(240)
def test_self_runs_the_head_as_its_own_improver_in_the_sandbox(lab: Lab) -> None:
    _require_bwrap()
    said: list[Progress] = []
    result = run_rounds(
        lab,
        get_task("policy"),
        rounds=2,
        improver="self",
        budget=Budget(experiments=2, wall_s=300),
        run_improver=improver_runner(_relay),
        on_progress=said.append,
    )
    assert result.state == "finished" and len(result.rounds) == 2, result.message
    evolution = _check_records(lab, result.evolution_id)
    first, second = evolution.rounds
    assert first.improver_version_id == evolution.start_version_id  # the head at round 1
    assert second.improver_version_id == first.head_after  # the head round 1 left
    after = lab.store.get_as(first.head_after, SystemVersion)
    assert second.improver == f"self: {after.label} {after.id}"
    for entry in evolution.rounds:
        exps = lab.store.query_as(Experiment, campaign_id=entry.campaign_id)
        assert 1 <= len(exps) <= 2 and {e.created_by for e in exps} == {IMPROVER_ACTOR}
        assert entry.note.startswith("the improver exited 0")
        events = lab.store.events(campaign_id=entry.campaign_id)
        assert {e.actor for e in events if e.action == "tool_call" and e.role == "worker"} == {
            IMPROVER_ACTOR
        }
    seeds = [
        {j.inputs.seed for j in lab.store.query_as(Job, campaign_id=e.campaign_id)}
        for e in evolution.rounds
    ]
    assert seeds[0] != seeds[1]  # $RSILAB_SEED: each round searches afresh
    assert any(p.message.startswith("round 2 finished") for p in said)
    text = _check_report(lab, evolution)
    assert "## The improver's own score" in text and f"self: {after.label}" in text


# -- harness improvers in process: what each round's improver is given --------------------


class InProcessImprover:
    """Stands in for the sandboxed runner: it notes the harness config it was given (the
    improver's own), and in round 1 proposes the bolder config as a Worker of the round's
    campaign through the Experiment OS, as improve.py would over MCP."""

    def __init__(self, lab: Lab, drop_improve: bool = False) -> None:
        self.lab, self.drop_improve = lab, drop_improve
        self.given: list[dict[str, Any]] = []
        self.jobs: list[ImproverJob] = []

    def __call__(self, job: ImproverJob) -> ImproverEnd:
        self.jobs.append(job)
        self.given.append(json.loads((job.workspace / "config.json").read_text()))
        if len(self.jobs) == 1:
            self._propose(job)
        return ImproverEnd(0, 0.5)

    def _propose(self, job: ImproverJob) -> None:
        services = LabServices(self.lab, judge_in_background=False)
        expos = ExperimentOS(self.lab.store, self.lab.artifacts, default_registry(), services)
        ctx = CallContext(job.actor, Role.WORKER, job.campaign_id, job.workspace)

        def tool(name: str, **args: Any) -> dict[str, Any]:
            result = expos.call(ctx, name, args)
            assert result.value is not None, result.to_dict()
            return result.value

        try:
            base = tool("prepare_workspace", overwrite=True)["base_version_id"]
            tool("write_file", path="config.json", content=json.dumps(BETTER))
            if self.drop_improve:
                manifest = (job.workspace / "harness.toml").read_text()
                kept = "".join(ln for ln in manifest.splitlines(True) if "improve" not in ln)
                tool("write_file", path="harness.toml", content=kept)
            (direction,) = tool("list_directions")["directions"]
            exp = tool("create_experiment", direction_id=direction["id"], description="bold")
            tool("run_job", experiment_id=exp["id"], kind="train", seed=job.seed)
            tool("finish_experiment", experiment_id=exp["id"], status="succeeded")
            tool("propose_candidate", experiment_id=exp["id"], base_version_id=base)
        finally:
            services.close()


@pytest.mark.timeout(240)
@pytest.mark.parametrize("improver", ["self", "teacher"])
def test_the_next_round_runs_the_accepted_harness_under_self_and_the_first_under_teacher(
    lab: Lab, improver: str
) -> None:
    runner = InProcessImprover(lab)
    result = run_rounds(
        lab, get_task("policy"), rounds=2, improver=improver, budget=Budget(experiments=1),
        seed=7, run_improver=runner,
    )  # fmt: skip
    evolution = _check_records(lab, result.evolution_id)
    first, second = evolution.rounds
    (candidate,) = lab.store.query_as(Candidate, campaign_id=first.campaign_id)
    assert candidate.state == CandidateState.ACCEPTED, candidate.reason
    assert first.accepted and not second.accepted and result.head_id == first.head_after
    assert runner.given[0] == START  # round 1: the starting system's harness
    assert [j.seed for j in runner.jobs] == [7, 8]
    assert all(j.argv == ("python", "improve.py") for j in runner.jobs)
    if improver == "self":
        assert runner.given[1] == BETTER  # the accepted system improves next
        assert second.improver_version_id == first.head_after
    else:
        assert runner.given[1] == START  # the teacher stays as it was at round 1
        assert second.improver_version_id == first.improver_version_id
        assert evolution.teacher_version_id == evolution.start_version_id
    text = _check_report(lab, evolution)
    acting = lab.store.get_as(second.improver_version_id or "", SystemVersion)
    scored = build_evolution_report(lab.store, evolution.id).improvers[1]
    assert scored.scores == {"search-quality": acting.scores["search-quality"]}  # target only
    score = acting.scores["search-quality"]
    own = text.split("## The improver's own score")[1]
    assert f"| 2 | {improver}: {acting.label} {acting.id} |" in own
    assert f"{score.value:.4f} [{score.low:.4f}, {score.high:.4f}]" in own


def test_under_self_an_accepted_system_that_no_longer_improves_ends_the_evolution(
    lab: Lab,
) -> None:
    runner = InProcessImprover(lab, drop_improve=True)
    result = run_rounds(
        lab, get_task("policy"), rounds=3, improver="self", budget=Budget(experiments=1),
        run_improver=runner,
    )  # fmt: skip
    assert result.state == "stopped" and len(result.rounds) == 1 and len(runner.jobs) == 1
    assert result.rounds[0].accepted
    head = lab.store.get_as(result.head_id, SystemVersion)
    assert result.message.startswith(f"--improver self: the head {head.label} {head.id}'s")
    assert "declares no improve entry point" in result.message
    assert lab.store.get_as(result.evolution_id, Evolution).state == "stopped"


# -- rsilab's own runners as teachers --------------------------------------------------------


@pytest.fixture
def process_sandbox(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RSILAB_SANDBOX", "process")


@pytest.mark.usefixtures("process_sandbox")
def test_the_builtin_teacher_runs_a_campaign_a_round_from_the_last_head(lab: Lab) -> None:
    result = run_rounds(
        lab, get_task("synthetic"), rounds=2, improver="teacher:builtin",
        budget=Budget(experiments=3), seed=3,
    )  # fmt: skip
    assert result.state == "finished", result.message
    evolution = _check_records(lab, result.evolution_id)
    campaigns = round_campaigns(lab, result.evolution_id)
    assert [c.settings["seed"] for c in campaigns.values()] == [3, 4]
    assert all(c.settings["agents"] == "builtin" for c in campaigns.values())
    assert [r.improver for r in evolution.rounds] == ["teacher: builtin policy"] * 2
    assert all(r.improver_version_id is None for r in evolution.rounds)
    for entry in evolution.rounds:
        assert len(lab.store.query_as(Experiment, campaign_id=entry.campaign_id)) == 3
    text = _check_report(lab, evolution)
    assert "one of rsilab's runners" in text


@pytest.fixture
def openai_server(monkeypatch: pytest.MonkeyPatch) -> Iterator[ScriptedServer]:
    with ScriptedServer() as running:
        monkeypatch.setenv("OPENAI_BASE_URL", running.openai_base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "k")
        yield running


@pytest.mark.usefixtures("process_sandbox")
def test_an_llm_teacher_round_through_the_scripted_server(
    lab: Lab, openai_server: ScriptedServer
) -> None:
    direction = {"title": "slower adam", "hypothesis": "adam at a lower lr raises quality"}
    openai_server.add(
        call("create_direction", **direction),
        Respond(lambda r: Reply("Work on {}.".format(*ids(r, "create_direction")))),
        *worker_proposing_a_gain(SYNTHETIC_BETTER),
        *reviewer_filing_one(),
    )
    result = run_rounds(
        lab, get_task("synthetic"), rounds=1, improver="teacher:openai:gpt-test",
        budget=Budget(experiments=1),
    )  # fmt: skip
    assert openai_server.remaining == 0
    evolution = _check_records(lab, result.evolution_id)
    (entry,) = evolution.rounds
    assert entry.accepted and entry.improver == "teacher: openai:gpt-test"
    campaign = lab.store.get_as(entry.campaign_id, Campaign)
    assert campaign.settings["agents"] == "openai:gpt-test"
    llm_calls = [e for e in lab.store.events(campaign_id=campaign.id) if e.action == "llm_call"]
    assert len(llm_calls) == len(openai_server.requests)
    _check_report(lab, evolution)


# -- refusals --------------------------------------------------------------------------------


def test_self_on_a_harness_without_improve_is_refused_before_anything_is_written(
    lab: Lab,
) -> None:
    before = lab.store.head()
    for improver in ("self", "teacher"):
        with pytest.raises(UserError) as caught:
            run_rounds(
                lab, get_task("synthetic"), rounds=1, improver=improver, budget=Budget(),
                run_improver=InProcessImprover(lab),
            )  # fmt: skip
        assert "declares no improve entry point" in caught.value.message
        assert "--improver teacher:builtin" in (caught.value.hint or "")
    assert lab.store.head() == before and not lab.store.query_as(Evolution)


def test_improver_specs_are_parsed_or_refused(lab: Lab) -> None:
    assert parse_improver("teacher:anthropic:claude-x").agents == "anthropic:claude-x"
    assert parse_improver("teacher:builtin").kind == "builtin"
    for bad in ("teacher:openai:", "others", "self:x"):
        with pytest.raises(UserError, match="not an improver rsilab knows"):
            parse_improver(bad)
    with pytest.raises(UserError, match="no runner"):
        run_rounds(lab, get_task("policy"), rounds=1, improver="self", budget=Budget())
    with pytest.raises(UserError, match="at least one round"):
        run_rounds(lab, get_task("policy"), rounds=0, improver="self", budget=Budget())


# -- a person's stop -------------------------------------------------------------------------


@pytest.mark.usefixtures("process_sandbox")
def test_ctrl_c_in_a_builtin_round_leaves_it_and_the_evolution_stopped(lab: Lab) -> None:
    def interrupt(progress: Progress) -> None:
        if progress.kind == "experiment":
            raise KeyboardInterrupt

    result = run_rounds(
        lab, get_task("synthetic"), rounds=2, improver="teacher:builtin",
        budget=Budget(experiments=3), on_progress=interrupt,
    )  # fmt: skip
    assert result.state == "stopped" and result.message == "stopped by a person"
    (entry,) = result.rounds
    assert entry.state == "stopped"
    assert lab.store.get_as(entry.campaign_id, Campaign).state == "stopped"
    assert lab.store.get_as(result.evolution_id, Evolution).state == "stopped"
    assert verify_store(lab.store).ok


def test_ctrl_c_or_an_error_in_a_harness_round_leaves_it_and_the_evolution_stopped(
    lab: Lab,
) -> None:
    def interrupted(job: ImproverJob) -> ImproverEnd:
        raise KeyboardInterrupt

    def unrunnable(job: ImproverJob) -> ImproverEnd:
        raise UserError("bubblewrap cannot be used here", "install it")

    task, budget = get_task("policy"), Budget(experiments=1)
    result = run_rounds(
        lab, task, rounds=3, improver="teacher", budget=budget, run_improver=interrupted
    )
    assert result.state == "stopped" and len(result.rounds) == 1
    (entry,) = result.rounds
    assert entry.state == "stopped" and entry.note == "interrupted" and not entry.accepted
    assert lab.store.get_as(entry.campaign_id, Campaign).state == "stopped"
    resumed = rsilab("resume", entry.campaign_id, "--lab", lab.path)  # not rsilab's to run
    assert resumed.exit_code == 2, explain(resumed)
    assert f"round 1 of evolution {result.evolution_id}" in resumed.stderr

    with pytest.raises(UserError, match="bubblewrap"):
        run_rounds(lab, task, rounds=2, improver="self", budget=budget, run_improver=unrunnable)
    failed = max(lab.store.query_as(Evolution), key=lambda e: e.created_at)
    assert failed.state == "stopped" and failed.message.startswith("ended by an error")
    (campaign,) = round_campaigns(lab, failed.id).values()
    assert campaign.state == "stopped" and not failed.rounds
    assert verify_store(lab.store).ok


@pytest.mark.usefixtures("process_sandbox")
def test_a_round_whose_wall_budget_ran_out_is_over_and_the_next_one_starts(lab: Lab) -> None:
    result = run_rounds(
        lab, get_task("synthetic"), rounds=2, improver="teacher:builtin",
        budget=Budget(experiments=1000, wall_s=0.5),
    )  # fmt: skip
    assert result.state == "finished" and len(result.rounds) == 2, result.message
    for entry in result.rounds:
        assert entry.state == "finished"
        assert lab.store.get_as(entry.campaign_id, Campaign).state == "finished"
        assert len(lab.store.query_as(Experiment, campaign_id=entry.campaign_id)) < 1000
