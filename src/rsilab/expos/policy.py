"""Permissions as data, in one place: which role may call which tool and read which records.

Deny by default: a tool missing from :data:`TOOL_ROLES`, or a role missing from its set, may
not be called; a record kind missing from :data:`READABLE_KINDS` may not be read. Later issues
extend these tables; nothing else in the code decides permissions.
"""

from __future__ import annotations

from rsilab.records import Dataset, DataTier, Evaluation, Job, Record, Role

M, W, R, L, C, H = (
    Role.MAIN,
    Role.WORKER,
    Role.REVIEWER,
    Role.LEADER,
    Role.CONTROLLER,
    Role.HUMAN,
)
EVERYONE = frozenset(Role)

TOOL_ROLES: dict[str, frozenset[Role]] = {
    # data management
    "show_datapool": EVERYONE,
    "inspect_data": EVERYONE,
    "add_data": frozenset({W, H}),
    "update_data_readme": frozenset({W, H}),
    # execution and state
    "create_direction": frozenset({M}),
    "update_direction": frozenset({M}),
    "list_directions": EVERYONE,
    "create_experiment": frozenset({W}),
    "get_experiment": EVERYONE,
    "log_metric": frozenset({W}),
    "finish_experiment": frozenset({W}),
    # research and evidence
    "search_records": EVERYONE,
    "get_lineage": EVERYONE,
    "compare_experiments": EVERYONE,
    # review management
    "submit_review": frozenset({R}),
    "inspect_review": EVERYONE,
    "list_reviews": EVERYONE,
    # shared memory: findings are checked against the records; revising skills and
    # orientations is the campaign review's, not an agent's
    "publish_finding": frozenset({M, W, R, L, H}),
    "query_findings": EVERYONE,
    "adopt_finding": frozenset({M, W, R, L, H}),
    "list_skills": EVERYONE,
    "read_skill": EVERYONE,
    "list_orientations": EVERYONE,
    # the Host Controller's door
    "prepare_workspace": frozenset({W, H}),
    "propose_candidate": frozenset({W, H}),
    "candidate_status": EVERYONE,
    # sandboxed jobs: workers run them; the reviewers and the main agent follow them
    "run_job": frozenset({W, H}),
    "cancel_job": frozenset({W, H}),
    "state_sync_results": frozenset({W, H}),
    "job_status": frozenset({W, M, R, H}),
    "job_logs": frozenset({W, M, R, H}),
    "compare_eval_samples": frozenset({W, R, M, H}),
    # external discovery
    "search_local_datasets": frozenset({M, W, L, H}),
    # workspace files: reviewers read the code they judge; only workers (and people) edit it
    "list_files": frozenset({W, R, H}),
    "read_file": frozenset({W, R, H}),
    "write_file": frozenset({W, H}),
    "apply_patch": frozenset({W, H}),
    # research teams: the Leader orients researchers; everyone sees who is oriented how
    "assign_orientation": frozenset({L, H}),
    "list_assignments": EVERYONE,
}

# Versions, candidates and lineages hold private (accept- and final-tier) numbers: agents see
# them only through the tools' views (candidate_status, prepare_workspace), never as records.
_COMMON = frozenset(
    {"campaign", "direction", "experiment", "dataset", "review", "finding", "adoption", "job"}
    | {"assignment"}
)
_MEMORY = frozenset({"skill", "orientation"})
READABLE_KINDS: dict[Role, frozenset[str]] = {
    Role.MAIN: _COMMON | _MEMORY | {"evaluation"},
    Role.WORKER: _COMMON | _MEMORY | {"evaluation", "artifact"},
    Role.REVIEWER: _COMMON | _MEMORY | {"evaluation", "artifact"},
    Role.LEADER: _COMMON | _MEMORY | {"evaluation", "flag"},
    Role.CONTROLLER: frozenset(),  # principals read everything; see read_refusal
    Role.HUMAN: frozenset(),
}


def may_call(role: Role, tool: str) -> bool:
    """True when ``role`` may call ``tool`` (unknown tools: never)."""
    return role in TOOL_ROLES.get(tool, frozenset())


def read_refusal(role: Role, campaign_id: str | None, record: Record) -> str | None:
    """Why ``role`` working in ``campaign_id`` may not read ``record``; None if it may.

    Principals (controller, human) read everything. Agents read only kinds listed for their
    role, only lab-wide records or those of their own campaign, and never private-tier data
    or evaluations.
    """
    if not role.is_agent:
        return None
    if record.KIND not in READABLE_KINDS.get(role, frozenset()):
        return f"the {role} role may not read {record.KIND} records"
    if record.campaign_id is not None and record.campaign_id != campaign_id:
        return "it belongs to another campaign"
    if isinstance(record, Evaluation | Dataset) and DataTier(record.tier).is_private:
        return "it is private test data, for the controller only"
    if isinstance(record, Job) and record.kind.is_private:
        return "it is one of the controller's own jobs"
    return None


def readable_kinds(role: Role) -> frozenset[str]:
    """Record kinds a role may read at all (principals: every kind)."""
    from rsilab.records import RECORD_TYPES

    return READABLE_KINDS[role] if role.is_agent else frozenset(RECORD_TYPES)
