"""The permission tables, written out here as literals: every tool x every role, every record
kind x every agent role. A change to who may do what must change this file too; a new tool
or record kind fails here until its row is written."""

from __future__ import annotations

from pathlib import Path

import pytest

from rsilab.expos import CallContext, ExperimentOS, default_registry, open_campaign, policy
from rsilab.records import RECORD_TYPES, Outcome, ProtocolFlag, Role, TaskRef
from rsilab.store import ArtifactStore, MemoryStore

ROLES = ("main", "worker", "reviewer", "leader", "controller", "human")

TOOLS: dict[str, tuple[int, int, int, int, int, int]] = {
    #                        main worker reviewer leader controller human
    "show_datapool":         (1, 1, 1, 1, 1, 1),
    "inspect_data":          (1, 1, 1, 1, 1, 1),
    "add_data":              (0, 1, 0, 0, 0, 1),
    "update_data_readme":    (0, 1, 0, 0, 0, 1),
    "prepare_workspace":     (0, 1, 0, 0, 0, 1),
    "propose_candidate":     (0, 1, 0, 0, 0, 1),
    "candidate_status":      (1, 1, 1, 1, 1, 1),
    "create_direction":      (1, 0, 0, 0, 0, 0),
    "list_directions":       (1, 1, 1, 1, 1, 1),
    "update_direction":      (1, 0, 0, 0, 0, 0),
    "create_experiment":     (0, 1, 0, 0, 0, 0),
    "get_experiment":        (1, 1, 1, 1, 1, 1),
    "log_metric":            (0, 1, 0, 0, 0, 0),
    "finish_experiment":     (0, 1, 0, 0, 0, 0),
    "run_job":               (0, 1, 0, 0, 0, 1),
    "job_status":            (1, 1, 1, 0, 0, 1),
    "job_logs":              (1, 1, 1, 0, 0, 1),
    "cancel_job":            (0, 1, 0, 0, 0, 1),
    "state_sync_results":    (0, 1, 0, 0, 0, 1),
    "compare_eval_samples":  (1, 1, 1, 0, 0, 1),
    "search_records":        (1, 1, 1, 1, 1, 1),
    "get_lineage":           (1, 1, 1, 1, 1, 1),
    "compare_experiments":   (1, 1, 1, 1, 1, 1),
    "submit_review":         (0, 0, 1, 0, 0, 0),
    "inspect_review":        (1, 1, 1, 1, 1, 1),
    "list_reviews":          (1, 1, 1, 1, 1, 1),
    "publish_finding":       (1, 1, 1, 1, 0, 1),
    "query_findings":        (1, 1, 1, 1, 1, 1),
    "adopt_finding":         (1, 1, 1, 1, 0, 1),
    "list_skills":           (1, 1, 1, 1, 1, 1),
    "read_skill":            (1, 1, 1, 1, 1, 1),
    "list_orientations":     (1, 1, 1, 1, 1, 1),
    "search_local_datasets": (1, 1, 0, 1, 0, 1),
    "list_files":            (0, 1, 1, 0, 0, 1),
    "read_file":             (0, 1, 1, 0, 0, 1),
    "write_file":            (0, 1, 0, 0, 0, 1),
    "apply_patch":           (0, 1, 0, 0, 0, 1),
    "assign_orientation":    (0, 0, 0, 1, 0, 1),
    "list_assignments":      (1, 1, 1, 1, 1, 1),
}  # fmt: skip
"""Who may call what: 1 allowed, 0 refused (``permission_denied`` and a protocol flag)."""

AGENTS = ("main", "worker", "reviewer", "leader")

KINDS: dict[str, tuple[int, int, int, int]] = {
    #                   main worker reviewer leader
    "adoption":        (1, 1, 1, 1),
    "agent_token":     (0, 0, 0, 0),
    "artifact":        (0, 1, 1, 0),
    "assignment":      (1, 1, 1, 1),
    "campaign":        (1, 1, 1, 1),
    "campaign_review": (0, 0, 0, 0),
    "candidate":       (0, 0, 0, 0),
    "dataset":         (1, 1, 1, 1),
    "direction":       (1, 1, 1, 1),
    "evaluation":      (1, 1, 1, 1),
    "evolution":       (0, 0, 0, 0),
    "experiment":      (1, 1, 1, 1),
    "finding":         (1, 1, 1, 1),
    "flag":            (0, 0, 0, 1),
    "guidance":        (0, 0, 0, 0),
    "intent":          (0, 0, 0, 0),
    "job":             (1, 1, 1, 1),
    "lease":           (0, 0, 0, 0),
    "lineage":         (0, 0, 0, 0),
    "orientation":     (1, 1, 1, 1),
    "review":          (1, 1, 1, 1),
    "skill":           (1, 1, 1, 1),
    "tombstone":       (0, 0, 0, 0),
    "version":         (0, 0, 0, 0),
}  # fmt: skip
"""Which record kinds an agent may read at all (principals read every kind). Versions,
candidates and lineages hold private numbers: agents see them only through tool views."""

CELLS = [(tool, role) for tool in TOOLS for role in ROLES]


def test_the_matrix_names_every_tool_and_role() -> None:
    assert set(default_registry().names()) == set(TOOLS)
    assert [r.value for r in Role] == list(ROLES)
    assert [r.value for r in Role if r.is_agent] == list(AGENTS)


@pytest.mark.parametrize("tool", TOOLS)
def test_may_call_follows_the_matrix(tool: str) -> None:
    called = tuple(int(policy.may_call(Role(role), tool)) for role in ROLES)
    assert called == TOOLS[tool]


@pytest.mark.parametrize("role", ROLES)
def test_the_door_lists_and_refuses_by_the_matrix(role: str, tmp_path: Path) -> None:
    store = MemoryStore(key=bytes(range(32)))
    expos = ExperimentOS(store, ArtifactStore(tmp_path / "blobs"), default_registry())
    campaign = open_campaign(store, TaskRef(name="digits"))
    column = ROLES.index(role)
    allowed = [tool for tool, row in TOOLS.items() if row[column]]
    assert sorted(t.name for t in expos.tools_for(Role(role))) == sorted(allowed)
    ctx = CallContext(actor=f"{role}-1", role=Role(role), campaign_id=campaign.id)
    for tool, row in TOOLS.items():
        # an argument no tool takes: an allowed call stops at argument validation, after
        # the role check, so no tool body runs
        result = expos.call(ctx, tool, {"no_such_argument": 1})
        assert result.error is not None
        if row[column]:
            assert result.error.code == "invalid_arguments", (tool, role)
        else:
            assert result.error.code == "permission_denied", (tool, role)
            event = store.events(after=result.seq - 1)[0]
            assert event.outcome == Outcome.DENIED
            flag = store.get(event.records[0].id)
            assert isinstance(flag, ProtocolFlag) and flag.rule == "tool_not_allowed_for_role"


def test_the_kinds_table_names_every_record_kind() -> None:
    assert set(RECORD_TYPES) == set(KINDS)


@pytest.mark.parametrize("role", AGENTS)
def test_agents_read_the_kinds_of_the_table(role: str) -> None:
    column = AGENTS.index(role)
    readable = {kind for kind, row in KINDS.items() if row[column]}
    assert policy.readable_kinds(Role(role)) == readable


@pytest.mark.parametrize("role", ["controller", "human"])
def test_principals_read_every_kind(role: str) -> None:
    assert policy.readable_kinds(Role(role)) == set(KINDS)
