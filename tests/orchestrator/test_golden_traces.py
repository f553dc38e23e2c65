"""Golden traces: what each kind of campaign run writes to the ledger, pinned before the
orchestrator's redesign (issue 20) so that the redesign can show it changes none of it.

Each test runs one kind of run on the built-in ``synthetic`` task in the process sandbox, with
fixed seeds and a small budget, through one adapter function (``_run_<kind>``: the only code
here the redesign should need to change). It then reads every event of the lab in sequence
order, maps each to one line (:func:`trace`) and compares the list with ``golden/<kind>.json``;
``RSILAB_UPDATE_GOLDEN=1`` rewrites the files instead. A line holds the actor, role and
action; for a tool call, the tool and its arguments as the dispatcher got them (caught on
their way in, and checked against the event's ``args_digest``); a non-tool event's detail;
the records the event wrote; and its status: ``ok``, or ``error`` / ``denied`` with the tool
error's code.

Made deterministic (settings, so the traces show what the code does, not a normalised view):

- record ids come from a counter per prefix, hashed to look like the real random ones. Ids
  seed the controller's judging of a candidate and decide orders (ids get sorted), so random
  ids would make acceptance, and what follows from it, vary from run to run;
- each lab's split secret is fixed: random per lab, it draws the data and so every score;
- the lease's keep-alive beats once an hour instead of every ttl / 3 (10 s): a wall-clock beat
  lands anywhere in a long run. The heartbeat that recovery writes on purpose stays;
- runs whose agents share the ledger from threads of their own are traced with one agent per
  role: one Worker, a team of one (a team's researchers and an LLM round's Workers each run on
  their own thread, so the interleaving of their events is the scheduler's).

Normalised (what differs between runs of unchanged code):

- record ids become placeholders numbered by first appearance per prefix (``exp#1``); job ids
  become ``job``, unnumbered: the controller trains and scores its seeds on threads of its own,
  so which job gets which id is the scheduler's choice;
- each run of consecutive job events (``job_*``, and ``head_measured``: the head is trained
  beside the candidate on the same seeds) is sorted by actor, action and detail: the same
  threads start and finish their jobs in the scheduler's order. Every event is kept;
- sha256 hashes become ``sha#n`` (numbered as ids are), the test's temporary folder ``<tmp>``,
  this process's ``host:pid`` ``<host>``, ISO-8601 times ``<time>``; costs (wall and CPU
  seconds, memory, tokens), timestamps and hash-chain fields of events are left out.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import re
import socket
import sys
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from rsilab.agents.llm import ChatModel
from rsilab.agents.llm.scripted import (
    RecordedRequest,
    Reply,
    Respond,
    ScriptedServer,
    malformed_tool_call,
)
from rsilab.expos import ExperimentOS
from rsilab.orchestrator.builtin.runner import run_campaign
from rsilab.orchestrator.builtin.team import run_team_campaign
from rsilab.orchestrator.campaign._lease import Lease
from rsilab.orchestrator.llm.runner import run_llm_campaign
from rsilab.orchestrator.llm.team import run_llm_team_campaign
from rsilab.orchestrator.rounds import run_rounds
from rsilab.records import Event
from rsilab.records import _base as record_base
from rsilab.store import Lab
from rsilab.store.ledger import args_digest
from rsilab.tasks import Budget, get_task
from rsilab.tasks._secret import SECRET_FILE
from tests.orchestrator.llm.test_runner import call, named, result, results, role
from tests.synthetic_configs import BETTER

GOLDEN = Path(__file__).parent / "golden"
UPDATE = os.environ.get("RSILAB_UPDATE_GOLDEN") == "1"
SPEC = "openai:gpt-test"

# -- the runs: one adapter per kind (after the redesign, only these should change) ----------


def _run_builtin(lab: Lab) -> None:
    """Enough budget for reviews, a verification, its conclusion and the final proposal."""
    task, budget = get_task("synthetic"), Budget(experiments=9)
    outcome = run_campaign(lab, task, budget=budget, workers=1, seed=0)
    assert outcome.state == "finished", outcome.message


def _run_team(lab: Lab) -> None:
    """The Leader orients its one researcher, then redirects it twice; a verification, the final
    proposal and the campaign review."""
    task, budget = get_task("synthetic"), Budget(experiments=6)
    outcome = run_team_campaign(lab, task, team=1, budget=budget, seed=0)
    assert outcome.state == "finished", outcome.message


def _run_llm(lab: Lab, model: ChatModel) -> None:
    """Two rounds (:func:`play_llm`); a malformed call, an accepted candidate."""
    outcome = run_llm_campaign(
        lab, get_task("synthetic"), agents=SPEC, budget=Budget(experiments=2), model=model
    )
    assert outcome.state == "finished", outcome.message


def _run_llm_team(lab: Lab, model: ChatModel) -> None:
    """Two rounds (:func:`play_llm_team`); a finding, an accepted candidate, the review."""
    outcome = run_llm_team_campaign(
        lab, get_task("synthetic"), agents=SPEC, team=1, budget=Budget(experiments=2), model=model
    )
    assert outcome.state == "finished", outcome.message


def _run_evolve(lab: Lab) -> None:
    """Two rounds of the built-in teacher, three experiments each."""
    outcome = run_rounds(
        lab, get_task("synthetic"), rounds=2, improver="teacher:builtin",
        budget=Budget(experiments=3), seed=3,
    )  # fmt: skip
    assert outcome.state == "finished", outcome.message


# -- the scripted LLM agents ------------------------------------------------------------------
# Each answers from the request alone (who asks, the step's round, how far the step got), so a
# redesign that reorders steps still gets sensible answers and the trace shows the change.

Move = Callable[[RecordedRequest], Reply]
D1 = {"title": "slower adam", "hypothesis": "adam at a lower lr raises quality", "plan": "lr"}
D2 = {"title": "wider", "hypothesis": "a wider model raises quality", "plan": "width"}


def _step_calls(r: RecordedRequest) -> int:
    """Tool calls the agent made in its current step (since the step's prompt)."""
    messages = r.body["messages"]
    prompt_at = max(i for i, m in enumerate(messages) if m["role"] == "user")
    return sum(1 for m in messages[prompt_at:] if m["role"] == "tool")


def _play(r: RecordedRequest, rounds: list[list[Move]]) -> Reply:
    """The next move of the plan for the step's round (the actor's prompts so far; the last
    plan for later rounds); its last move once the plan is done."""
    plan = rounds[min(len(r.user_texts()), len(rounds)) - 1]
    return plan[min(_step_calls(r), len(plan) - 1)](r)


def _experiment(config: dict[str, Any], *, propose: bool = False) -> list[Move]:
    """A Worker's (or researcher's) step: one experiment on ``config`` written over the
    prepared one (empty: the reference as it is), proposed if asked."""
    exp = "create_experiment"

    def exp_id(r: RecordedRequest) -> str:
        return str(result(r, exp)["id"])

    moves: list[Move] = [lambda r: call("prepare_workspace", overwrite=True)]
    if config:
        text = json.dumps(config)
        moves.append(lambda r: call("write_file", path="config.json", content=text))
    moves += [
        lambda r: call(exp, direction_id=named(r, "dir"), description="a run", config=config),
        lambda r: call("run_job", experiment_id=exp_id(r), kind="train"),
        lambda r: call(
            "run_job", experiment_id=exp_id(r), kind="dev_eval", model=result(r, "run_job")["model"]
        ),
        lambda r: call("finish_experiment", experiment_id=exp_id(r), status="succeeded"),
    ]
    if propose:
        moves.append(
            lambda r: call(
                "propose_candidate",
                experiment_id=exp_id(r),
                base_version_id=result(r, "prepare_workspace")["base_version_id"],
            )
        )
    return [*moves, lambda r: Reply("Done.")]


def _publish(r: RecordedRequest) -> Reply:
    return call(
        "publish_finding",
        claim="the reference runs as the accepted system",
        status="unresolved",
        sources=[str(result(r, "create_experiment")["id"])],
    )


REVIEW: list[Move] = [
    lambda r: call(
        "submit_review",
        experiment_ids=[named(r, "exp")],
        direction_id=named(r, "dir"),
        verdict="inconclusive",
        recommendation="verify",
        rationale="One run on one seed; re-run it on fresh seeds.",
    ),
    lambda r: Reply("Filed one review."),
]


def _opened(r: RecordedRequest) -> list[str]:
    """The directions Main opened, oldest first."""
    return [str(v["id"]) for v in results(r, "create_direction")]


def play_llm(r: RecordedRequest) -> Reply:
    """Main opens D1, sends a malformed call, opens D2 and names D1; in round 2 it names D2.
    The Worker proposes BETTER in round 1 and runs the reference in round 2. The Reviewer asks
    for a verification of the first experiment it is shown."""
    if role(r) == "main":
        return _play(
            r,
            [
                [
                    lambda r: call("create_direction", **D1),
                    lambda r: malformed_tool_call("create_direction", '{"title": "broken"'),
                    lambda r: call("create_direction", **D2),
                    lambda r: Reply(f"Work on {_opened(r)[0]} first."),
                ],
                [lambda r: Reply(f"Work on {_opened(r)[1]} now.")],
            ],
        )
    if role(r) == "worker":
        return _play(r, [_experiment(BETTER, propose=True), _experiment({})])
    return _play(r, [REVIEW])


def play_llm_team(r: RecordedRequest) -> Reply:
    """The Leader orients researcher-1 as an explorer when asked to, else changes nothing.
    researcher-1 runs the reference and publishes what it saw in round 1, and proposes BETTER
    in round 2. The Reviewer asks for a verification of the first experiment it is shown."""
    if r.system_text().startswith("You are the Leader"):
        if "Give each of researcher-1 an orientation" not in r.user_texts()[-1]:
            return Reply("No change: the records call for none.")
        orient = call(
            "assign_orientation",
            researcher="researcher-1",
            orientation="explorer",
            reason="start of the campaign: cover new ground",
        )
        return _play(r, [[lambda r: orient, lambda r: Reply("Oriented the team.")]])
    if not r.user_texts()[-1].startswith("You are researcher-1"):
        return _play(r, [REVIEW])
    *control, done = _experiment({})
    return _play(r, [[*control, _publish, done], _experiment(BETTER, propose=True)])


# -- determinism: the settings the module docstring lists -------------------------------------


class _CountedIds:
    """``new_id`` from a counter per prefix, hashed: the same ids in every run."""

    def __init__(self) -> None:
        self.counters: dict[str, Iterator[int]] = {}
        self.lock = threading.Lock()

    def __call__(self, prefix: str) -> str:
        with self.lock:
            n = next(self.counters.setdefault(prefix, itertools.count(1)))
        return f"{prefix}-{hashlib.sha256(f'{prefix}/{n}'.encode()).hexdigest()[:12]}"


@pytest.fixture(autouse=True)
def _deterministic(monkeypatch: pytest.MonkeyPatch, lab: Lab) -> Iterator[None]:
    monkeypatch.setenv("RSILAB_SANDBOX", "process")
    original, ids = record_base.new_id, _CountedIds()
    for module in list(sys.modules.values()):  # records, and each module that imported new_id
        if module.__name__.startswith("rsilab") and getattr(module, "new_id", None) is original:
            monkeypatch.setattr(module, "new_id", ids)
    (lab.path / SECRET_FILE).write_text("5e" * 32)
    keep_alive = Lease.keep_alive
    monkeypatch.setattr(Lease, "keep_alive", lambda self, interval_s=None: keep_alive(self, 3600))
    yield
    # A module first imported during this test took the counter as its new_id, and
    # monkeypatch restores only what it patched: without this, the next test's modules would
    # count afresh beside it and hand out the same ids in one lab.
    for module in list(sys.modules.values()):
        if module.__name__.startswith("rsilab") and getattr(module, "new_id", None) is ids:
            module.new_id = original  # type: ignore[attr-defined]


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> dict[int, Any]:
    """The arguments of every tool call from now on, by the sequence number of its event."""
    seen: dict[int, Any] = {}
    dispatch = ExperimentOS.call

    def spy(self: ExperimentOS, ctx: Any, name: Any, args: Any = None) -> Any:
        answer = dispatch(self, ctx, name, args)
        if answer.seq is not None:
            seen[answer.seq] = args
        return answer

    monkeypatch.setattr(ExperimentOS, "call", spy)
    return seen


# -- the trace --------------------------------------------------------------------------------

_ID = re.compile(r"\b([a-z]+)-[0-9a-f]{12}\b")
_SHA = re.compile(r"\b[0-9a-f]{64}\b")
_TIME = re.compile(r"\b\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:\d\d)?")
_JOB_ACTIONS = {"job_queued": 0, "job_started": 1, "job_finished": 2, "head_measured": 3}
"""Events the controller's threads write in the scheduler's order: a candidate's jobs and the
head's, trained side by side on the same seeds, and the head's measurement when its side ends."""


class _Names:
    """Stable names for run-specific values, numbered by first appearance per prefix."""

    def __init__(self, tmp: Path) -> None:
        self.fixed = [(str(tmp), "<tmp>"), (f"{socket.gethostname()}:{os.getpid()}", "<host>")]
        self.names: dict[str, str] = {}
        self.counts: Counter[str] = Counter()

    def _name(self, prefix: str, value: str) -> str:
        if value not in self.names:
            self.counts[prefix] += 1
            self.names[value] = f"{prefix}#{self.counts[prefix]}"
        return self.names[value]

    def text(self, text: str) -> str:
        for value, name in self.fixed:
            text = text.replace(value, name)
        text = _TIME.sub("<time>", text)
        text = _SHA.sub(lambda m: self._name("sha", m[0]), text)
        return _ID.sub(lambda m: "job" if m[1] == "job" else self._name(m[1], m[0]), text)

    def value(self, value: Any) -> Any:
        """``value`` (JSON) with the run-specific parts of every string named."""
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, dict):
            return {self.text(k): self.value(v) for k, v in value.items()}
        if isinstance(value, list):
            return [self.value(v) for v in value]
        return value


def _jobs_sorted(events: list[Event]) -> list[Event]:
    """``events`` with each run of consecutive job events sorted (see the module docstring)."""

    def key(e: Event) -> tuple[str, int, str]:
        return e.actor, _JOB_ACTIONS[e.action], _ID.sub(r"\1", e.detail)

    out: list[Event] = []
    for is_job, group in itertools.groupby(events, key=lambda e: e.action in _JOB_ACTIONS):
        run = list(group)
        out += sorted(run, key=key) if is_job else run
    return out


def _arguments(event: Event, calls: dict[int, Any]) -> Any:
    """The tool call's arguments as the dispatcher got them; JSON text parsed, malformed
    text kept as it came."""
    assert event.seq in calls, f"event {event.seq}: a tool call that bypassed ExperimentOS.call"
    args = calls[event.seq]
    assert args_digest(args) == event.args_digest, f"event {event.seq}: not the call's arguments"
    if isinstance(args, str):
        try:
            return json.loads(args)
        except ValueError:
            return {"<malformed>": args}
    return json.loads(json.dumps(args, default=str))


def trace(lab: Lab, calls: dict[int, Any]) -> list[dict[str, Any]]:
    """The lab's whole ledger, one line per event (see the module docstring)."""
    names = _Names(lab.path.parent)
    lines = []
    for event in _jobs_sorted(lab.store.events()):
        line: dict[str, Any] = {"actor": event.actor, "role": event.role, "action": event.action}
        if event.action == "tool_call":
            line["tool"] = event.tool
            line["args"] = names.value(_arguments(event, calls))
        elif event.detail:
            line["detail"] = names.text(event.detail)
        if event.records:
            line["writes"] = [names.text(r.id) for r in event.records]
        line["status"] = str(event.outcome)
        if event.error is not None:
            line["status"] += f":{event.error.get('error')}"
        lines.append(line)
    return lines


def _render(lines: list[dict[str, Any]]) -> str:
    """One event per line, so that a diff reads event by event."""
    return "[\n" + ",\n".join(f"  {json.dumps(line)}" for line in lines) + "\n]\n"


def check_golden(kind: str, lines: list[dict[str, Any]]) -> None:
    """Compare ``lines`` with ``golden/<kind>.json`` (rewrite it under RSILAB_UPDATE_GOLDEN=1);
    a mismatch names the first event that differs and shows both sides of it."""
    path = GOLDEN / f"{kind}.json"
    if UPDATE:
        GOLDEN.mkdir(exist_ok=True)
        path.write_text(_render(lines))
        return
    assert path.is_file(), f"no golden trace {path}: write it with RSILAB_UPDATE_GOLDEN=1"
    golden = json.loads(path.read_text())
    if lines == golden:
        return
    first = next(
        (i for i, (a, b) in enumerate(zip(golden, lines, strict=False)) if a != b),
        min(len(golden), len(lines)),
    )

    def at(side: list[dict[str, Any]]) -> str:
        return json.dumps(side[first]) if first < len(side) else "(no more events)"

    pytest.fail(
        f"{kind}: the trace differs from {path.name} first at event {first} "
        f"({len(golden)} events golden, {len(lines)} now)\n"
        f"  golden: {at(golden)}\n  now:    {at(lines)}",
        pytrace=False,
    )


# -- the tests --------------------------------------------------------------------------------


def test_builtin_campaign(lab: Lab, calls: dict[int, Any]) -> None:
    _run_builtin(lab)
    check_golden("builtin", trace(lab, calls))


def test_team_campaign(lab: Lab, calls: dict[int, Any]) -> None:
    _run_team(lab)
    check_golden("team", trace(lab, calls))


def test_llm_campaign(
    lab: Lab, calls: dict[int, Any], server: ScriptedServer, model: ChatModel
) -> None:
    server.add(*[Respond(play_llm) for _ in range(60)])
    _run_llm(lab, model)
    check_golden("llm", trace(lab, calls))


def test_llm_team_campaign(
    lab: Lab, calls: dict[int, Any], server: ScriptedServer, model: ChatModel
) -> None:
    server.add(*[Respond(play_llm_team) for _ in range(60)])
    _run_llm_team(lab, model)
    check_golden("llm_team", trace(lab, calls))


def test_evolve(lab: Lab, calls: dict[int, Any]) -> None:
    _run_evolve(lab)
    check_golden("evolve", trace(lab, calls))
