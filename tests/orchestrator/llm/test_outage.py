"""LLM campaigns that degrade gracefully: an endpoint outage mid-experiment and its resume,
each failed attempt in the ledger, a Main agent that answers with text only.

The real OpenAI client runs against the scripted server (3 attempts per call, no waits).
"""

from __future__ import annotations

import re
import socket
from pathlib import Path
from typing import Any

import pytest

from rsilab.agents.llm import ChatModel
from rsilab.agents.llm.scripted import (
    RateLimited,
    RecordedRequest,
    Reply,
    Respond,
    ScriptedServer,
    ServerError,
)
from rsilab.orchestrator.campaign import Progress
from rsilab.orchestrator.llm.runner import run_llm_campaign
from rsilab.orchestrator.research.dag import ResearchDag
from rsilab.records import Campaign, Event, Experiment, Intent, Job, intent_id
from rsilab.store import Lab, verify_store
from rsilab.tasks import Budget, get_task
from tests.cli.helpers import explain, rsilab
from tests.orchestrator.llm.test_runner import D1, SPEC, call, named, prompt, result, role

NUDGE_WORDS = "answered without calling any tool"
"""Words of the runner's re-prompt (a literal here, so the test does not read the code)."""


@pytest.fixture(autouse=True)
def _process_sandbox(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RSILAB_SANDBOX", "process")


def failed_attempts(lab: Lab, campaign_id: str) -> list[Event]:
    return [
        e for e in lab.store.events(campaign_id=campaign_id) if e.action == "llm_attempt_failed"
    ]


def step_intent(lab: Lab, campaign_id: str, key: str) -> Intent:
    return lab.store.get_as(intent_id(campaign_id, key), Intent)


def unfinished(request: RecordedRequest) -> tuple[str, str]:
    """The experiment and the trained model the resumed step's prompt names."""
    text = prompt(request)
    exp = re.search(r"^- (exp-[0-9a-f]{12}) ", text, re.MULTILINE)
    model = re.search(r"\btrain job-[0-9a-f]{12} succeeded, model (\S+)$", text, re.MULTILINE)
    if exp is None or model is None:
        raise LookupError(f"no unfinished experiment in the prompt:\n{text}")
    return exp.group(1), model.group(1)


def test_an_outage_after_the_train_job_then_a_resume_that_does_not_train_again(
    lab: Lab, server: ScriptedServer, model: ChatModel
) -> None:
    task, budget = get_task("synthetic"), Budget(experiments=1, tokens=100_000)
    exp = "create_experiment"
    server.add(
        RateLimited(0.0),  # retried: one failed attempt, then the answer
        call("create_direction", **D1),
        Respond(lambda r: Reply(f"Work on {result(r, 'create_direction')['id']}.")),
        call("prepare_workspace", overwrite=True),
        Respond(lambda r: call(exp, direction_id=named(r, "dir"), description="as it is")),
        Respond(lambda r: call("run_job", experiment_id=result(r, exp)["id"], kind="train")),
        ServerError(503),  # the endpoint fails for all 3 attempts: the campaign stops
        ServerError(503),
        ServerError(503),
    )
    stopped = run_llm_campaign(lab, task, agents=SPEC, budget=budget, model=model)
    cid = stopped.campaign_id
    assert stopped.state == "stopped", stopped.message
    assert lab.store.get_as(cid, Campaign).end_reason == "llm_unavailable"
    (made,) = lab.store.query_as(Experiment, campaign_id=cid)
    (trained,) = lab.store.query_as(Job, campaign_id=cid)
    assert (trained.kind, trained.status, made.state) == ("train", "succeeded", "running")

    failed = failed_attempts(lab, cid)
    assert [(e.actor, e.outcome) for e in failed] == [("main", "error")] + [
        ("worker-1", "error")
    ] * 3
    errors: list[dict[str, Any]] = [e.error or {} for e in failed]
    assert [(x["error"], x["status"], x["attempt"]) for x in errors] == [
        ("llm_rate_limited", 429, 1),
        ("llm_unavailable", 503, 1),
        ("llm_unavailable", 503, 2),
        ("llm_unavailable", 503, 3),
    ]
    assert [x["retry_in_s"] is None for x in errors] == [False, False, False, True]

    seen: list[RecordedRequest] = []

    def dev_eval(r: RecordedRequest) -> Reply:
        seen.append(r)
        experiment_id, trained_model = unfinished(r)
        return call("run_job", experiment_id=experiment_id, kind="dev_eval", model=trained_model)

    server.add(
        Respond(dev_eval),
        Respond(
            lambda r: call("finish_experiment", experiment_id=unfinished(r)[0], status="succeeded")
        ),
        Reply("Finished the experiment."),
        Reply("Nothing to review."),
    )
    resumed = run_llm_campaign(lab, task, agents=SPEC, budget=budget, campaign_id=cid, model=model)
    assert resumed.state == "finished" and resumed.experiments == 1, resumed.message
    assert server.remaining == 0
    assert role(seen[0]) == "worker" and made.id in prompt(seen[0])
    (same,) = lab.store.query_as(Experiment, campaign_id=cid)
    assert same.id == made.id and same.state == "succeeded"
    jobs = lab.store.query_as(Job, campaign_id=cid)
    assert sorted(str(j.kind) for j in jobs) == ["dev-eval", "train"]  # not trained again
    worker = step_intent(lab, cid, "step:1:worker-1")
    assert worker.state == "done" and worker.attempts == 2
    assert worker.result is not None and worker.result["experiments"] == [made.id]
    assert verify_store(lab.store, None).problems == []


def test_a_silent_main_is_asked_again_and_then_continues(
    lab: Lab, server: ScriptedServer, model: ChatModel
) -> None:
    def stop_after_the_worker(progress: Progress) -> None:
        if progress.kind == "agent" and progress.message.startswith("worker-1"):
            raise KeyboardInterrupt

    server.add(
        Reply("I will first think about what to try."),
        call("create_direction", **D1),
        Respond(lambda r: Reply(f"Work on {result(r, 'create_direction')['id']}.")),
        Reply("Nothing to run yet."),
    )
    outcome = run_llm_campaign(
        lab,
        get_task("synthetic"),
        agents=SPEC,
        budget=Budget(),
        on_progress=stop_after_the_worker,
        model=model,
    )
    assert server.remaining == 0
    assert [role(r) for r in server.requests] == ["main"] * 3 + ["worker"]
    assert NUDGE_WORDS in prompt(server.requests[1])
    assert len(ResearchDag.load(lab.store, outcome.campaign_id).directions) == 1
    assert step_intent(lab, outcome.campaign_id, "step:1:main").state == "done"


def test_a_main_that_stays_silent_stops_the_campaign_resumable(
    lab: Lab, server: ScriptedServer, model: ChatModel
) -> None:
    task = get_task("synthetic")
    server.add(Reply("Thinking."), Reply("Still thinking."), Reply("Almost there."))
    stopped = run_llm_campaign(lab, task, agents=SPEC, budget=Budget(), model=model)
    cid = stopped.campaign_id
    assert server.remaining == 0 and len(server.requests) == 3
    assert stopped.state == "stopped" and f"rsilab guide {cid}" in stopped.message
    campaign = lab.store.get_as(cid, Campaign)
    assert (campaign.state, campaign.end_reason) == ("stopped", "agent_silent")
    assert stopped.experiments == 0
    assert step_intent(lab, cid, "step:1:main").state == "pending"

    def stop_after_the_worker(progress: Progress) -> None:
        if progress.kind == "agent" and progress.message.startswith("worker-1"):
            raise KeyboardInterrupt

    server.add(
        call("create_direction", **D1),
        Respond(lambda r: Reply(f"Work on {result(r, 'create_direction')['id']}.")),
        Reply("Nothing to run yet."),
    )
    run_llm_campaign(
        lab,
        task,
        agents=SPEC,
        budget=Budget(),
        campaign_id=cid,
        on_progress=stop_after_the_worker,
        model=model,
    )
    main = step_intent(lab, cid, "step:1:main")
    assert (main.state, main.attempts) == ("done", 2)
    assert verify_store(lab.store, None).problems == []


# -- through the CLI ---------------------------------------------------------------------------


def llm_table(lab: Path, base_url: str) -> None:
    """The lab's [llm] table: the scripted (or a dead) endpoint, one attempt per call."""
    (lab / "rsilab.toml").write_text(
        f'[llm]\nprovider = "openai"\nmodel = "gpt-test"\nbase_url = "{base_url}"\n'
        "max_retries = 0\n"
    )


def closed_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_an_unreachable_endpoint_is_one_line_and_a_nonzero_exit(tmp_path: Path) -> None:
    lab = tmp_path / "lab"
    assert rsilab("init", "--lab", lab).exit_code == 0
    llm_table(lab, f"http://127.0.0.1:{closed_port()}/v1")
    result = rsilab("run", "synthetic", "--agents", "", "--lab", lab)
    assert result.exit_code != 0, explain(result)
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "cannot be reached" in errors[0], explain(result)
    with Lab.open(lab) as opened:
        assert opened.store.query_as(Campaign) == []  # refused before anything was written


def test_an_endpoint_lost_mid_campaign_stops_it_with_exit_1(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    lab = tmp_path / "lab"
    assert rsilab("init", "--lab", lab).exit_code == 0
    with ScriptedServer([call("create_direction", **D1), ServerError(503)]) as server:
        llm_table(lab, server.openai_base_url)
        result = rsilab("run", "synthetic", "--agents", "", "--lab", lab)
    assert result.exit_code == 1, explain(result)
    with Lab.open(lab) as opened:
        (campaign,) = opened.store.query_as(Campaign)
        assert (campaign.state, campaign.end_reason) == ("stopped", "llm_unavailable")
        (failed,) = failed_attempts(opened, campaign.id)
        assert failed.error is not None and failed.error["status"] == 503
        assert failed.error["retry_in_s"] is None
