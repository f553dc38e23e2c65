"""Throw malformed calls at the dispatcher: it answers every one and the ledger stays sound.

One SQLite lab serves the whole run (built inside the test, outside the ``@given`` function),
so state accumulates across examples the way it does in a long campaign. Three calls in four
start from a valid call of a real tool, made by a role allowed to call it, with a few fields
replaced; the rest are anything at all.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rsilab.agents.roles import ensure_team_orientations
from rsilab.expos import CallContext, ExperimentOS, default_registry, open_campaign, policy
from rsilab.memory import revise_skill
from rsilab.records import Dataset, EventDraft, Job, JobInputs, JobKind, Role, TaskRef
from rsilab.store import Lab, verify_store

ERROR_CODES = {
    "unknown_tool",
    "permission_denied",
    "invalid_arguments",
    "not_found",
    "conflict",
    "guard_refused",
    "internal_error",
    "tool_failed",
    "no_campaign",
    "unavailable",  # job tools: this Experiment OS has no executor
    "no_workspace",
    "rate_limited",  # job_status polled faster than its per-caller limit
}
REGISTRY = default_registry()
TOOL_NAMES = REGISTRY.names()
FIELD_NAMES = sorted({f for t in REGISTRY.all() for f in t.args_model.model_fields})
FAKE_IDS = [
    "exp-000000000000",
    "dir-ffffffffffff",
    "data-0123456789ab",
    "rev-abcdefabcdef",
    "cmp-000000000000",
    "art-" + "0" * 64,
    "flg-aaaaaaaaaaaa",
    "ver-123456123456",
]
WORDS = [
    "open",
    "concluded",
    "dev",
    "train",
    "accept",
    "succeeded",
    "failed",
    "created",
    "supports",
    "refutes",
    "continue",
    "verify",
    "branch",
    "stop",
    "experiment",
    "direction",
    "flag",
    "evaluation",
    "artifact",
    "accuracy",
    "digits",
    "a",
    "a.txt",
    "data",
    "data/b.bin",
    ".",
    "",
    "../outside.txt",
    "/etc/passwd",
    "link",
    "missing",
    "data/../../outside.txt",
    "a\x00b",
]

weird_text = st.text(
    alphabet=st.characters(codec=None) | st.characters(categories=["Cs"]) | st.just("\x00"),
    max_size=30,
)
poison = st.one_of(
    st.sampled_from([2**53, -(2**53), 10**30, 2**63, -(2**64), 10**400]),
    st.sampled_from([float("nan"), float("inf"), float("-inf"), 1e308, -1e308, 5e-324]),
    st.characters(categories=["Cs"]),
    weird_text,
    st.integers(min_value=19_990, max_value=20_010).map(lambda n: "x" * n),
    st.integers(min_value=60, max_value=400).map(lambda d: _nested(d)),
)
leaves = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(),
    st.text(max_size=30),
    st.sampled_from(WORDS),
    poison,
)
keys = st.sampled_from(FIELD_NAMES) | st.text(max_size=12) | weird_text
values = st.recursive(
    leaves,
    lambda kids: st.lists(kids, max_size=4) | st.dictionaries(keys, kids, max_size=4),
    max_leaves=10,
)
objects = st.dictionaries(keys, values, max_size=6)
any_args = st.one_of(
    objects,
    values,  # top level that is not an object
    objects.map(json.dumps),  # JSON strings, with NaN and Infinity tokens
    values.map(json.dumps),
    st.text(max_size=40),  # strings that are mostly not JSON
    st.binary(max_size=20),
    st.integers(min_value=1, max_value=5000).map(lambda d: "[" * d + "]" * d),
    st.integers(min_value=1, max_value=5000).map(
        lambda d: '{"config": ' + '{"a": ' * d + "1" + "}" * d + "}"
    ),
)
any_names = st.one_of(
    st.sampled_from(TOOL_NAMES),
    st.sampled_from(["", "log_metrics", "__init__", "REGISTRY", "call", "add_data "]),
    st.text(max_size=20),
    weird_text,
    st.none(),
    st.integers(),
)
roles = st.sampled_from(list(Role))


def _nested(depth: int) -> Any:
    value: Any = 1
    for _ in range(depth):
        value = {"a": value}
    return value


def _spoil(original: Any) -> st.SearchStrategy[Any]:
    """A value shaped like ``original`` with something wrong or unstorable inside it."""
    if isinstance(original, dict):
        return st.builds(lambda k, v: {**original, k: v}, keys, poison | values)
    if isinstance(original, list):
        return st.builds(lambda v: [*original, v], poison | values)
    return poison | values


@st.composite
def calls(
    draw: st.DrawFn, ids: list[str], templates: dict[str, dict[str, Any]]
) -> tuple[Role, int, Any, Any]:
    """(role, which context, tool name, arguments) for one call.

    The choices of shape use a Hypothesis-seeded Random so they are evenly spread (Hypothesis
    itself leans towards the first and last options); the values come from the strategies.
    """
    rnd = draw(st.randoms(use_true_random=True))
    which = rnd.choice([0, 0, 0, 1, 2, 3])
    if rnd.random() < 0.2:
        return rnd.choice(list(Role)), which, draw(any_names), draw(any_args)
    name = rnd.choice(TOOL_NAMES)
    allowed = sorted(policy.TOOL_ROLES[name])
    role = rnd.choice(allowed) if rnd.random() < 0.85 else rnd.choice(list(Role))
    args = json.loads(json.dumps(templates[name]))
    own = sorted(args)
    record_ids = st.sampled_from(ids + FAKE_IDS) | st.from_regex(
        r"[a-z]{2,5}-[0-9a-f]{6,14}", fullmatch=True
    )
    for _ in range(rnd.choice([0, 1, 1, 1, 1, 2, 3])):
        field = rnd.choice(own) if own and rnd.random() < 0.85 else draw(keys)
        how = rnd.choice(["spoil"] * 4 + ["poison", "values", "id", "id", "ids", "delete"])
        if how == "delete":
            args.pop(field, None)
            continue
        args[field] = draw(
            {
                "spoil": _spoil(args.get(field)),
                "poison": poison,
                "values": values,
                "id": record_ids,
                "ids": st.lists(record_ids, max_size=3),
            }[how]
        )
    return role, which, name, args


def _setup(
    lab: Lab, workspace: Path
) -> tuple[list[str], list[str | None], dict[str, dict[str, Any]]]:
    """Real records to aim at: their ids, campaigns to call from, a valid call of each tool."""
    expos = ExperimentOS(lab.store, lab.artifacts, REGISTRY)
    campaign = open_campaign(lab.store, TaskRef(name="digits"), settings={"team": 2})
    other = open_campaign(lab.store, TaskRef(name="iris"), settings={"team": 1})
    ensure_team_orientations(lab.store)
    (workspace / "a.txt").write_text("hello\n")
    (workspace / "data").mkdir()
    (workspace / "data" / "b.bin").write_bytes(b"\xff\x00" * 8)
    (workspace.parent / "outside.txt").write_text("secret")
    os.symlink(workspace.parent / "outside.txt", workspace / "link")

    def ok(role: Role, tool: str, args: dict[str, Any]) -> dict[str, Any]:
        result = expos.call(CallContext(str(role), role, campaign.id, workspace), tool, args)
        assert result.ok and result.value is not None, result.to_dict()
        return result.value

    data = ok(Role.WORKER, "add_data", {"path": "a.txt", "name": "a"})["id"]
    direction = ok(Role.MAIN, "create_direction", {"title": "t", "hypothesis": "h"})["id"]
    exps = []
    for value in (0.1, 0.2, 0.3):
        exp = ok(Role.WORKER, "create_experiment", {"direction_id": direction, "description": "e"})
        ok(
            Role.WORKER,
            "log_metric",
            {"experiment_id": exp["id"], "name": "accuracy", "value": value},
        )
        exps.append(exp["id"])
    ok(Role.WORKER, "finish_experiment", {"experiment_id": exps[0], "status": "succeeded"})
    review = ok(Role.REVIEWER, "submit_review", {"experiment_ids": exps})["id"]
    fourth = ok(Role.WORKER, "create_experiment", {"direction_id": direction, "description": "e"})
    ok(Role.WORKER, "log_metric", {"experiment_id": fourth["id"], "name": "accuracy", "value": 0.4})
    finding = ok(Role.WORKER, "publish_finding", {"claim": "c", "status": "unresolved"})["id"]
    assigned = {"researcher": "researcher-1", "orientation": "explorer", "reason": "r"}
    ok(Role.LEADER, "assign_orientation", assigned)
    elsewhere = CallContext("leader", Role.LEADER, other.id, workspace)
    assert expos.call(elsewhere, "assign_orientation", assigned).ok
    revise_skill(lab.store, "s", "a procedure", None, actor="t", role=Role.HUMAN)
    second = ok(Role.MAIN, "create_direction", {"title": "t2", "hypothesis": "h2"})["id"]
    private = Dataset(name="secret", artifact_sha256="0" * 64, artifact_kind="file", tier="final")
    lab.store.commit(EventDraft(actor="t", role="human", action="setup"), [private])
    job = Job(
        campaign_id=campaign.id,
        kind=JobKind.TRAIN,
        experiment_id=exps[1],
        inputs=JobInputs(workspace_sha256="0" * 64, seed=1),
    )
    lab.store.commit(EventDraft(actor="t", role="human", action="setup"), [job])
    templates: dict[str, dict[str, Any]] = {
        "show_datapool": {},
        "inspect_data": {"dataset": "a", "limit": 3},
        "add_data": {"path": "data", "name": "fresh", "readme": "r", "source": "s"},
        "update_data_readme": {"dataset": data, "readme": "new"},
        "create_direction": {
            "title": "t",
            "hypothesis": "h",
            "plan": "p",
            "parents": [{"parent_id": direction, "relation": "branch"}],
        },
        "list_directions": {"state": "open"},
        "update_direction": {  # open -> promising once; later calls meet the lifecycle rules
            "direction_id": second,
            "status": "promising",
            "conclusion": "c",
            "review_ids": [],
        },
        "create_experiment": {
            "direction_id": direction,
            "description": "d",
            "config": {"lr": 0.1},
            "parent_experiment_id": exps[1],
            "data": ["a"],
        },
        "get_experiment": {"experiment_id": exps[1]},
        "log_metric": {
            "experiment_id": exps[1],
            "name": "accuracy",
            "value": 0.5,
            "split": "dev",
            "step": 1,
        },
        "finish_experiment": {"experiment_id": exps[2], "status": "failed", "summary": "s"},
        "search_records": {
            "text": "e",
            "kind": "experiment",
            "fields": {"state": "running"},
            "limit": 5,
        },
        "get_lineage": {"record_id": direction},
        "compare_experiments": {"experiment_ids": exps, "metric": "accuracy"},
        "submit_review": {
            "experiment_ids": exps[:2],
            "baseline_ids": [exps[2], exps[1]],
            "metric": "accuracy",
            "verdict": "supports",
            "recommendation": "verify",
            "rationale": "r",
            "direction_id": direction,
        },
        "inspect_review": {"review_id": review},
        "list_reviews": {"direction_id": direction, "experiment_id": exps[0]},
        "publish_finding": {
            "claim": "c",
            "status": "supported",
            "conditions": "k",
            "uncertainty": "u",
            "sources": [review],
            "metric": "accuracy",
            "a_ids": exps[:2],
            "b_ids": [exps[2], fourth["id"]],
            "direction": "lower",
            "tags": ["lr"],
            "supersedes": finding,
        },
        "query_findings": {
            "text": "c",
            "tags": ["lr"],
            "metric": "accuracy",
            "status": "unresolved",
            "limit": 5,
        },
        "adopt_finding": {
            "finding_id": finding,
            "mode": "adapted",
            "note": "n",
            "experiment_ids": [exps[1]],
            "direction_id": direction,
        },
        "list_skills": {},
        "read_skill": {"name": "s", "version": 1},
        "list_orientations": {},
        "assign_orientation": {  # researcher-1 is an explorer in both campaigns: a conflict
            "researcher": "researcher-1",
            "orientation": "explorer",
            "reason": "r",
            "evidence_ids": [exps[0]],
        },
        "list_assignments": {},
        "search_local_datasets": {"query": "digits"},
        "run_job": {  # a finished experiment: refused before any job runs
            "experiment_id": exps[0],
            "kind": "train",
            "seed": 3,
            "model": "a.txt",
            "wait": False,
        },
        "job_status": {"job_id": job.id},
        "job_logs": {"job_id": job.id, "stream": "stdout", "tail_bytes": 100},
        "cancel_job": {"job_id": job.id},
        "state_sync_results": {"experiment_id": exps[1]},
        "compare_eval_samples": {
            "experiment_a": exps[1],
            "experiment_b": exps[2],
            "benchmark": "accuracy",
        },
        "prepare_workspace": {"from_experiment": exps[0], "overwrite": False},
        "propose_candidate": {
            "experiment_id": exps[1],
            "base_version_id": None,
            "warm_start": False,
            "data": ["a"],
        },
        "candidate_status": {"candidate_id": "cand-000000000000"},
        "list_files": {"path": ".", "pattern": "*", "limit": 5},
        "read_file": {"path": "a.txt", "offset": 0, "max_bytes": 100},
        "write_file": {"path": "notes/n.txt", "content": "note\n", "create_dirs": True},
        "apply_patch": {  # replaces a line with itself, so it applies every time
            "patch": "--- a/a.txt\n+++ b/a.txt\n@@ -1 +1 @@\n-hello\n+hello\n"
        },
    }
    assert set(templates) == set(TOOL_NAMES)
    return (
        [
            *(campaign.id, other.id, data, direction, second, *exps, fourth["id"], review),
            *(finding, private.id, job.id),
        ],
        [campaign.id, campaign.id, other.id, None],
        templates,
    )


def test_the_dispatcher_survives_malformed_calls(tmp_path: Path) -> None:
    lab = Lab.init(tmp_path / "lab")
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    ids, campaigns, templates = _setup(lab, workspace)
    expos = ExperimentOS(lab.store, lab.artifacts, REGISTRY)
    setup_events = lab.store.head()[0]
    made: list[str] = []

    @settings(
        max_examples=1000,
        deadline=None,
        derandomize=True,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    @given(calls(ids, templates))
    def one_call(call: tuple[Role, int, Any, Any]) -> None:
        role, which, name, args = call
        ctx = CallContext(
            actor="fuzzer",
            role=role,
            campaign_id=campaigns[which],
            workspace=None if which == 1 else workspace,
        )
        head = lab.store.head()[0]
        result = expos.call(ctx, name, args)  # must return, never raise
        payload = result.to_dict()
        made.append("ok" if result.ok else payload["error"])
        assert result.seq == head + 1, "every call appends exactly one event"
        json.dumps(payload)
        if not result.ok:
            assert payload["error"] in ERROR_CODES, payload
            assert payload["error"] != "internal_error", (name, args, payload)

    try:
        one_call()
        assert len(made) >= 1000
        assert lab.store.head()[0] == setup_events + len(made)
        report = verify_store(lab.store)
        assert report.ok, report.problems
        # The run got past the front door and into the tool bodies, not only refusals. Which
        # body refusals a run meets depends on what Hypothesis draws (record ids are random,
        # and the tool set grows), so the bodies must refuse in at least three ways, not in
        # every listed one.
        for code in ("ok", "invalid_arguments", "unknown_tool", "permission_denied"):
            assert code in made, (code, sorted(set(made)))
        body = {"not_found", "conflict", "guard_refused", "no_campaign"} & set(made)
        assert len(body) >= 3, sorted(set(made))
    finally:
        lab.close()
