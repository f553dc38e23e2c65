"""Permissions: deny by default, agents confined to their campaign and the public tiers."""

from __future__ import annotations

import pytest

from rsilab.expos import policy
from rsilab.records import (
    Campaign,
    Dataset,
    DataTier,
    Direction,
    Evaluation,
    Experiment,
    Job,
    JobInputs,
    ProtocolFlag,
    Record,
    Role,
    SystemVersion,
    TaskRef,
)

AGENTS = [r for r in Role if r.is_agent]
PRINCIPALS = [r for r in Role if not r.is_agent]


def test_principals_and_agents() -> None:
    assert set(PRINCIPALS) == {Role.CONTROLLER, Role.HUMAN}
    assert set(AGENTS) == {Role.MAIN, Role.WORKER, Role.REVIEWER, Role.LEADER}


@pytest.mark.parametrize("role", list(Role))
def test_unknown_tool_is_refused_for_every_role(role: Role) -> None:
    assert not policy.may_call(role, "drop_tables")
    assert not policy.may_call(role, "")


def test_a_role_not_listed_is_refused() -> None:
    assert policy.may_call(Role.MAIN, "create_direction")
    assert not policy.may_call(Role.WORKER, "create_direction")
    assert not policy.may_call(Role.REVIEWER, "log_metric")
    assert not policy.may_call(Role.CONTROLLER, "submit_review")
    assert not policy.may_call(Role.REVIEWER, "search_local_datasets")


def test_role_tables_follow_the_table(monkeypatch: pytest.MonkeyPatch) -> None:
    for tool, roles in policy.TOOL_ROLES.items():
        for role in Role:
            assert policy.may_call(role, tool) == (role in roles)
    monkeypatch.setitem(policy.TOOL_ROLES, "create_direction", frozenset())
    assert not any(policy.may_call(role, "create_direction") for role in Role)


def _records(campaign_id: str) -> list[Record]:
    return [
        Direction(campaign_id=campaign_id, title="t", hypothesis="h"),
        Experiment(campaign_id=campaign_id, direction_id="dir-000000000000"),
        Dataset(campaign_id=campaign_id, name="d", artifact_sha256="0" * 64, artifact_kind="file"),
    ]


@pytest.mark.parametrize("role", AGENTS)
def test_agents_read_their_own_campaign(role: Role) -> None:
    for record in _records("cmp-aaaaaaaaaaaa"):
        assert policy.read_refusal(role, "cmp-aaaaaaaaaaaa", record) is None


@pytest.mark.parametrize("role", AGENTS)
def test_agents_cannot_read_other_campaigns(role: Role) -> None:
    for record in _records("cmp-bbbbbbbbbbbb"):
        reason = policy.read_refusal(role, "cmp-aaaaaaaaaaaa", record)
        assert reason == "it belongs to another campaign"
        assert policy.read_refusal(role, None, record) is not None


@pytest.mark.parametrize("role", AGENTS)
def test_agents_cannot_read_another_campaign_record(role: Role) -> None:
    other = Campaign(task=TaskRef(name="iris"))
    assert policy.read_refusal(role, "cmp-aaaaaaaaaaaa", other) is not None
    assert policy.read_refusal(role, other.id, other) is None


@pytest.mark.parametrize("role", AGENTS)
@pytest.mark.parametrize("tier", [DataTier.ACCEPT, DataTier.FINAL])
def test_agents_cannot_read_private_tiers(role: Role, tier: DataTier) -> None:
    cid = "cmp-aaaaaaaaaaaa"
    data = Dataset(
        campaign_id=cid, name="p", artifact_sha256="0" * 64, artifact_kind="file", tier=tier
    )
    evaluation = Evaluation(
        campaign_id=cid, benchmark="digits", tier=tier, subject_id="ver-1", metric="acc"
    )
    assert policy.read_refusal(role, cid, data) is not None
    assert "private" in (policy.read_refusal(role, cid, data) or "")
    if "evaluation" in policy.READABLE_KINDS[role]:
        assert "private" in (policy.read_refusal(role, cid, evaluation) or "")
    # Lab-wide private data is private too.
    lab_wide = data.model_copy(update={"campaign_id": None})
    assert policy.read_refusal(role, cid, lab_wide) is not None


@pytest.mark.parametrize("role", AGENTS)
@pytest.mark.parametrize("tier", [DataTier.TRAIN, DataTier.DEV])
def test_agents_read_public_tiers(role: Role, tier: DataTier) -> None:
    cid = "cmp-aaaaaaaaaaaa"
    data = Dataset(
        campaign_id=None, name="p", artifact_sha256="0" * 64, artifact_kind="file", tier=tier
    )
    assert policy.read_refusal(role, cid, data) is None


@pytest.mark.parametrize("role", AGENTS)
def test_agents_read_only_listed_kinds(role: Role) -> None:
    cid = "cmp-aaaaaaaaaaaa"
    flag = ProtocolFlag(campaign_id=cid, stage="access", rule="r", detail="d")
    version = SystemVersion(campaign_id=cid, label="H0/M0", harness_sha256="0" * 64)
    for record in (flag, version):
        refusal = policy.read_refusal(role, cid, record)
        if record.KIND in policy.READABLE_KINDS[role]:
            assert refusal is None
        else:
            assert refusal == f"the {role} role may not read {record.KIND} records"
    assert policy.readable_kinds(role) == policy.READABLE_KINDS[role]


def test_workers_cannot_read_flags_but_leaders_can() -> None:
    flag = ProtocolFlag(campaign_id=None, stage="access", rule="r", detail="d")
    assert policy.read_refusal(Role.WORKER, None, flag) is not None
    assert policy.read_refusal(Role.LEADER, None, flag) is None


@pytest.mark.parametrize("role", PRINCIPALS)
def test_principals_read_everything(role: Role) -> None:
    cid = "cmp-aaaaaaaaaaaa"
    records: list[Record] = [
        *_records("cmp-bbbbbbbbbbbb"),
        ProtocolFlag(campaign_id=cid, stage="access", rule="r", detail="d"),
        Evaluation(campaign_id=cid, benchmark="b", tier="final", subject_id="s", metric="m"),
        Dataset(
            campaign_id=cid,
            name="p",
            artifact_sha256="0" * 64,
            artifact_kind="file",
            tier=DataTier.ACCEPT,
        ),
    ]
    for record in records:
        assert policy.read_refusal(role, None, record) is None
    from rsilab.records import RECORD_TYPES

    assert policy.readable_kinds(role) == frozenset(RECORD_TYPES)


@pytest.mark.parametrize("role", AGENTS)
@pytest.mark.parametrize(
    ("kind", "private"),
    [
        ("train", False),
        ("dev-eval", False),
        ("fold-train", False),
        ("fold-eval", False),
        ("controller-train", True),
        ("controller-predict", True),
    ],
)
def test_agents_never_read_the_controllers_own_jobs(role: Role, kind: str, private: bool) -> None:
    cid = "cmp-aaaaaaaaaaaa"
    job = Job(campaign_id=cid, kind=kind, inputs=JobInputs(workspace_sha256="0" * 64, seed=0))
    expected = "it is one of the controller's own jobs" if private else None
    assert policy.read_refusal(role, cid, job) == expected


@pytest.mark.parametrize("role", AGENTS)
def test_refusals_say_why_in_words(role: Role) -> None:
    cid = "cmp-aaaaaaaaaaaa"
    data = Dataset(
        campaign_id=cid, name="p", artifact_sha256="0" * 64, artifact_kind="file", tier="accept"
    )
    version = SystemVersion(campaign_id=cid, label="H0/M0", harness_sha256="0" * 64)
    assert policy.read_refusal(role, cid, data) == (
        "it is private test data, for the controller only"
    )
    assert policy.read_refusal(role, cid, version) == (
        f"the {role.value} role may not read version records"
    )


def test_a_role_missing_from_the_kinds_table_reads_nothing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # deny by default: a role the table forgot is refused, not an error
    monkeypatch.delitem(policy.READABLE_KINDS, Role.MAIN)
    record = Direction(campaign_id="cmp-aaaaaaaaaaaa", title="t", hypothesis="h")
    refusal = policy.read_refusal(Role.MAIN, "cmp-aaaaaaaaaaaa", record)
    assert refusal == "the main role may not read direction records"
