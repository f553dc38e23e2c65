"""Garbage collection: only what the rule lets go is removed, tombstones keep verify whole."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from rsilab.controller import gc
from rsilab.controller.gc import collect_garbage, maybe_collect
from rsilab.controller.host import HostController
from rsilab.controller.lab_settings import parse_size
from rsilab.errors import UserError
from rsilab.records import (
    Artifact,
    Candidate,
    CandidateState,
    EventDraft,
    Experiment,
    ExperimentState,
    Job,
    SystemVersion,
    Tombstone,
)
from rsilab.store import Lab
from rsilab.store.refs import blob_refs, manifest_files
from rsilab.store.verify import verify_store
from tests.cli.helpers import explain, rsilab
from tests.synthetic_configs import BETTER

MakeHarness = Callable[..., Path]


@pytest.fixture(autouse=True)
def process_sandbox(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RSILAB_SANDBOX", "process")


@dataclass
class Scene:
    """A lineage H0 -> H1 and three candidates outside it: two rejected, one invalid."""

    versions: list[SystemVersion]
    accepted: Candidate | None
    near: Candidate | None  # rejected, the better of the two
    far: Candidate | None  # rejected, worse
    invalid: Candidate


def _judge(controller: HostController, lab: Lab, folder: Path) -> Candidate:
    sha = lab.artifacts.put_tree(folder).sha256
    return controller.judge(controller.propose(sha, campaign_id=None, proposer="t").id)


def _invalid(controller: HostController, lab: Lab, make_harness: MakeHarness) -> Candidate:
    invalid = _judge(controller, lab, make_harness(**{"config.json": "not json"}))
    assert invalid.state is CandidateState.INVALID, invalid.reason
    return invalid


@pytest.fixture
def scene(controller: HostController, lab: Lab, make_harness: MakeHarness) -> Scene:
    v0 = controller.baseline()
    accepted = _judge(controller, lab, make_harness(BETTER))
    assert accepted.state is CandidateState.ACCEPTED, accepted.reason
    near = _judge(controller, lab, make_harness({"lr": 0.1}))
    far = _judge(controller, lab, make_harness({"lr": 0.9}))
    assert near.state is far.state is CandidateState.REJECTED, (near.reason, far.reason)
    invalid = _invalid(controller, lab, make_harness)
    assert accepted.version_id is not None
    v1 = lab.store.get_as(accepted.version_id, SystemVersion)
    return Scene([v0, v1], accepted, near, far, invalid)


@pytest.fixture
def small_scene(controller: HostController, lab: Lab, make_harness: MakeHarness) -> Scene:
    """Just a baseline and an invalid candidate (its failed jobs' logs are garbage)."""
    v0 = controller.baseline()
    return Scene([v0], None, None, None, _invalid(controller, lab, make_harness))


def _job_outputs(lab: Lab, candidate: Candidate | None) -> set[str]:
    assert candidate is not None
    jobs = lab.store.query_as(Job, fields={"candidate_id": candidate.id})
    assert jobs and all(j.kind.is_private for j in jobs)
    return {
        sha
        for j in jobs
        for sha in (j.model_out_sha256, j.stdout_sha256, j.stderr_sha256)
        if sha is not None
    }


def _models(lab: Lab, candidate: Candidate | None) -> set[str]:
    assert candidate is not None
    jobs = lab.store.query_as(Job, fields={"candidate_id": candidate.id})
    return {j.model_out_sha256 for j in jobs if j.model_out_sha256}


def _needed_by_versions(lab: Lab, versions: list[SystemVersion]) -> set[str]:
    needed: set[str] = set()
    for version in versions:
        needed |= {v for v in version.model_sha256s if v}
        needed.add(version.harness_sha256)
        needed |= set(manifest_files(lab.artifacts.read_bytes(version.harness_sha256)) or [])
    return needed


def _tree_of(lab: Lab, folder: Path, text: str) -> str:
    folder.mkdir()
    (folder / "notes.txt").write_text(text)
    return lab.artifacts.put_tree(folder).sha256


def _files(lab: Lab, tree: str) -> set[str]:
    return set(manifest_files(lab.artifacts.read_bytes(tree)) or [])


def _experiment(lab: Lab, tree: str, state: ExperimentState) -> Experiment:
    exp = Experiment(direction_id="dir-000000000000", workspace_hash=tree, state=state)
    lab.store.commit(EventDraft(actor="t", role="worker", action="test"), [exp])
    return exp


def test_gc_removes_only_what_the_rule_allows(scene: Scene, lab: Lab, tmp_path: Path) -> None:
    orphan = lab.artifacts.put_bytes(b"written by a job that has not recorded itself yet").sha256
    open_tree = _tree_of(lab, tmp_path / "open", "still running")
    done_tree = _tree_of(lab, tmp_path / "done", "finished long ago")
    shared_tree = _tree_of(lab, tmp_path / "shared", "finished, but registered as an artifact")
    _experiment(lab, open_tree, ExperimentState.RUNNING)
    done = _experiment(lab, done_tree, ExperimentState.SUCCEEDED)
    _experiment(lab, shared_tree, ExperimentState.SUCCEEDED)
    art = Artifact(sha256=shared_tree, artifact_kind="tree", size=10)
    lab.store.commit(EventDraft(actor="t", role="human", action="test"), [art])
    kept_by_rule = (
        _needed_by_versions(lab, scene.versions)
        | _job_outputs(lab, scene.accepted)
        | _job_outputs(lab, scene.near)  # the best rejected candidate (keep_top=1)
        | {c.harness_sha256 for c in lab.store.query_as(Candidate)}
        | {orphan, open_tree, shared_tree}
        | _files(lab, open_tree)
        | _files(lab, shared_tree)
    )
    done_blobs = {done_tree} | _files(lab, done_tree)
    may_go = _job_outputs(lab, scene.far) | _job_outputs(lab, scene.invalid) | done_blobs
    head = lab.store.head()[0]

    dry = collect_garbage(lab, keep_top=1, dry_run=True)
    assert dry.dry_run and dry.removed and all(lab.artifacts.has(s) for s in dry.removed)
    assert lab.store.head()[0] == head and not lab.store.query_as(Tombstone)

    report = collect_garbage(lab, keep_top=1)
    removed = set(report.removed)
    assert removed == set(dry.removed) and report.freed_bytes == dry.freed_bytes > 0
    assert not any(lab.artifacts.has(s) for s in removed)
    assert not removed & kept_by_rule and all(lab.artifacts.has(s) for s in kept_by_rule)
    assert removed <= may_go
    assert _models(lab, scene.far) <= removed and done_blobs <= removed
    assert f"experiment {done.id}" in report.reasons[done_tree]
    # one tombstone per removed blob, all in one commit with one `gc` event
    stones = lab.store.query_as(Tombstone)
    assert {t.sha256 for t in stones} == removed
    assert sum(t.size for t in stones) == report.freed_bytes and all(t.reason for t in stones)
    events = lab.store.events(after=head)
    assert [e.action for e in events] == ["gc"]
    assert {r.id for r in events[0].records} == {t.id for t in stones}
    # hashes and records stay; deep verify reads the tombstones
    assert lab.store.get_as(scene.versions[1].id, SystemVersion).model_sha256s
    deep = verify_store(lab.store, artifacts=lab.artifacts, deep=True)
    assert deep.ok, deep.problems
    # a record that names a collected blob after its removal is a hole, not a collection
    late = Artifact(sha256=sorted(removed)[0], artifact_kind="file", size=1)
    lab.store.commit(EventDraft(actor="t", role="human", action="test"), [late])
    lost = verify_store(lab.store, artifacts=lab.artifacts)
    assert not lost.ok and "named it afterwards" in lost.problems[0]
    head += 1
    # a second run finds nothing more and writes nothing
    assert collect_garbage(lab, keep_top=1).removed == [] and lab.store.head()[0] == head + 1
    # keep_top=0 lets the best rejected candidate's models go too
    assert _models(lab, scene.near) <= set(collect_garbage(lab, keep_top=0).removed)
    # a blob deleted by hand, without a tombstone, still fails deep verification
    model = scene.versions[1].model_sha256s[0]
    lab.artifacts.blob_path(model).unlink()
    broken = verify_store(lab.store, artifacts=lab.artifacts, deep=True)
    assert any(model in p and "no tombstone" in p for p in broken.problems), broken.problems


def test_cli_gc_then_verify_deep(small_scene: Scene, lab: Lab) -> None:
    logs = _job_outputs(lab, small_scene.invalid) - _job_outputs_of_versions(lab)
    lab.close()
    dry = rsilab("gc", "--dry-run", "--lab", lab.path)
    assert dry.exit_code == 0, explain(dry)
    assert "would free" in dry.stdout and "nothing removed" in dry.stdout
    assert "discarded " + small_scene.invalid.id in dry.stdout
    result = rsilab("gc", "--keep-top", "0", "--lab", lab.path)
    assert result.exit_code == 0, explain(result)
    assert f"in {len(logs)} blobs" in result.stdout and "freed" in result.stdout
    verified = rsilab("verify", "--deep", "--lab", lab.path)
    assert verified.exit_code == 0, explain(verified)
    with Lab.open(lab.path) as reopened:
        assert {t.sha256 for t in reopened.store.query_as(Tombstone)} == logs


def _job_outputs_of_versions(lab: Lab) -> set[str]:
    jobs = [j for j in lab.store.query_as(Job) if j.candidate_id is None]
    return {s for j in jobs for s in (j.model_out_sha256, j.stdout_sha256, j.stderr_sha256) if s}


def test_a_blob_named_after_the_plan_is_put_back(
    small_scene: Scene, lab: Lab, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_plan = gc.plan_garbage
    revived: list[str] = []

    def plan_then_write(*args: object, **kwargs: object) -> dict[str, str]:
        plan = real_plan(*args, **kwargs)  # type: ignore[arg-type]
        revived.append(sorted(plan)[0])
        # a concurrent writer names one of the planned blobs after the plan was made
        art = Artifact(sha256=revived[0], artifact_kind="file", size=1)
        lab.store.commit(EventDraft(actor="t", role="human", action="test"), [art])
        return plan

    monkeypatch.setattr(gc, "plan_garbage", plan_then_write)
    report = collect_garbage(lab, keep_top=0)
    assert report.removed and revived[0] not in report.removed and lab.artifacts.has(revived[0])
    assert revived[0] not in {t.sha256 for t in lab.store.query_as(Tombstone)}
    assert verify_store(lab.store, artifacts=lab.artifacts, deep=True).ok


def test_maybe_collect_respects_the_limit(small_scene: Scene, lab: Lab) -> None:
    assert maybe_collect(lab) is None  # no rsilab.toml: no limit
    settings = lab.path / "rsilab.toml"
    settings.write_text('[lab]\nsize_limit = "1T"\n')
    assert maybe_collect(lab) is None and not lab.store.query_as(Tombstone)
    used = gc.blob_bytes(lab.artifacts)
    settings.write_text(f"[lab]\nsize_limit = {used - 1}\ngc_keep_top = 0\n")
    report = maybe_collect(lab)
    assert report is not None and report.removed and report.kept_bytes < used
    assert gc.blob_bytes(lab.artifacts) == report.kept_bytes
    event = lab.store.events()[-1]
    assert event.action == "gc" and event.actor == "controller"
    settings.write_text('[lab]\nsize_limit = "lots"\n')
    with pytest.raises(UserError, match="not a size"):
        maybe_collect(lab)
    settings.write_text("[lab\n")
    with pytest.raises(UserError, match=r"rsilab\.toml"):
        maybe_collect(lab)


@pytest.mark.parametrize(
    ("text", "size"),
    [
        ("2048", 2048),
        (4096, 4096),
        ("512K", 512 << 10),
        ("2G", 2 << 30),
        ("2GB", 2 << 30),
        ("1.5GiB", 3 << 29),
        ("3 m", 3 << 20),
        ("1T", 1 << 40),
        ("10b", 10),
    ],
)
def test_parse_size(text: str | int, size: int) -> None:
    assert parse_size(text) == size


@pytest.mark.parametrize("text", ["", "2X", "-1", "G", "1e9"])
def test_parse_size_refuses_what_is_not_a_size(text: str) -> None:
    with pytest.raises(ValueError, match="not a size"):
        parse_size(text)


def test_blob_refs_name_what_records_promise(small_scene: Scene, lab: Lab) -> None:
    fields = {ref.field for ref in blob_refs(small_scene.versions[0])}
    assert {"harness_sha256", "model_sha256", "model_sha256s.0"} <= fields
    job = lab.store.query_as(Job, fields={"candidate_id": small_scene.invalid.id})[0]
    assert {r.field for r in blob_refs(job)} >= {"inputs.workspace_sha256", "stdout_sha256"}
    assert json.loads(lab.artifacts.read_bytes(small_scene.versions[0].harness_sha256))["tree"]
