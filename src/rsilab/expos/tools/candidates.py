"""Workspace preparation and proposals: the agent's side of the Host Controller.

``prepare_workspace`` fills the caller's workspace with the system to improve and the data
its setting allows; ``propose_candidate`` snapshots the workspace as a recipe and hands it to
the controller, which judges it in the background; ``candidate_status`` tells the verdict, bare:
accept or reject, with no private number in any setting.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import tempfile
from pathlib import Path
from typing import Any

from pydantic import Field

from rsilab.controller.evaluation import public_data
from rsilab.controller.lineage import find_lineage
from rsilab.controller.settings import rules_for
from rsilab.errors import NotFoundError, ToolError
from rsilab.expos.context import ToolEnv
from rsilab.expos.guards import GuardRefusal
from rsilab.expos.registry import Category
from rsilab.expos.services import snapshot_workspace
from rsilab.expos.tools._base import Name, RecordId, live_workspace, require, tool
from rsilab.records import Candidate, Experiment, ExperimentState, FlagStage, SystemVersion
from rsilab.sandbox import hand_over, remove_tree
from rsilab.sandbox.owners import owned_prefix
from rsilab.store.trees import MAX_TREE_DEPTH, TreeRefused, kind, open_regular, walk
from rsilab.tasks import (
    DATA_DIR,
    MANIFEST,
    ManifestError,
    Setting,
    Task,
    load_manifest,
    write_data_dir,
)

_LISTED_FILES = 100


def _workspace(env: ToolEnv) -> Path:
    workspace = env.workspace()
    if workspace is None:
        raise ToolError(
            "no_workspace",
            "this call has no workspace; the agent must be started with one",
            expected="a workspace folder in the call context (--workspace)",
        )
    return Path(workspace)


def _clear(folder: Path) -> None:
    """Empty ``folder`` at any depth without following links out of it or opening a FIFO
    (:func:`rsilab.sandbox.remove_tree`: a job's deep tree must not stop a new start)."""
    remove_tree(folder, keep_top=True)


def _files(workspace: Path) -> list[str]:
    """The regular files of the freshly prepared workspace, sorted (a bounded walk: a job
    still running there may be writing a deep tree)."""
    found = walk(workspace, skip=lambda rel, _: len(rel.parts) > MAX_TREE_DEPTH)
    return sorted(str(e.rel) for e in found if stat.S_ISREG(e.info.st_mode))


def _goal(task: Task) -> str | None:
    return None if task.setting is Setting.OPEN_GENERAL else task.goal


@tool(Category.EXECUTION)
def prepare_workspace(
    env: ToolEnv,
    from_experiment: RecordId | None = None,
    overwrite: bool = False,
) -> dict[str, Any]:
    """Fill the workspace with the current accepted system and the data the setting allows.

    The workspace gets the lineage head's harness (or the snapshot of one of the campaign's
    finished experiments) and ``data-in/`` with ``train.jsonl`` (labelled) and ``dev.jsonl``
    (labelled only in the benchmark-guided setting). Private tiers never come here.

    Args:
        from_experiment: start from this finished experiment's workspace instead of the head.
        overwrite: replace what the workspace holds (refused otherwise when it is not empty).
    """
    campaign = env.campaign(writable=True)
    services = env.services()
    task = services.task_of(campaign)
    workspace = live_workspace(env, _workspace(env))
    lineage = find_lineage(env.store, task.name, services.lineage)
    if lineage is None:
        raise ToolError(
            "unavailable",
            f"task {task.name!r} has no accepted system yet; a person must run "
            f"`rsilab baseline {task.argument}` first",
        )
    head = env.store.get_as(lineage.head_id, SystemVersion)
    tree, source = head.harness_sha256, f"version {head.label}"
    if from_experiment is not None:
        exp = env.read(from_experiment, Experiment, field_name="from_experiment")
        require(
            exp.workspace_hash is not None and exp.state == ExperimentState.SUCCEEDED,
            "conflict",
            f"experiment {exp.id} has no snapshot of a succeeded run to start from",
            "from_experiment",
        )
        assert exp.workspace_hash is not None
        tree, source = exp.workspace_hash, f"experiment {exp.id}"
    if any(workspace.iterdir()):
        require(
            overwrite,
            "conflict",
            "the workspace is not empty; pass overwrite=true to replace its contents",
            "overwrite",
        )
        _clear(workspace)
    with tempfile.TemporaryDirectory(prefix=owned_prefix("prepare")) as tmp:
        staging = Path(tmp) / "tree"
        env.artifacts.materialize(tree, staging, "tree")
        for entry in staging.iterdir():
            shutil.move(entry, workspace / entry.name)
    # the controller's splits: the data its own jobs and the agents' jobs are written from
    splits = services.controller(task).evaluator.splits
    write_data_dir(workspace / DATA_DIR, public_data(task, splits))
    hand_over(workspace)  # all of it belongs to the sandbox user, as if a job had written it
    rules = rules_for(task.setting)
    files = _files(workspace)
    return {
        "source": source,
        "base_version_id": head.id,
        "base_label": head.label,
        "setting": task.setting.value,
        "goal": _goal(task),
        "benchmarks": [
            {"name": b.name, "target": b.target, "description": b.description}
            for b in task.benchmarks
        ],
        "dev_labels_in_workspace": rules.dev_labels_in_workspace,
        "dev_scores_returned": rules.dev_scores_returned,
        "files": files[:_LISTED_FILES],
        "files_left_out": max(0, len(files) - _LISTED_FILES),
    }


@tool(Category.EXECUTION)
def propose_candidate(
    env: ToolEnv,
    experiment_id: RecordId,
    base_version_id: RecordId | None = None,
    warm_start: bool = False,
    data: list[Name] = Field(default_factory=list, max_length=20),  # noqa: B008
) -> dict[str, Any]:
    """Propose the workspace as a candidate system; the Host Controller judges it.

    The controller re-trains it with seeds of its own on recorded data, scores it on private
    data no agent sees, and accepts it only for a real gain without regressions. The verdict
    (``candidate_status``) is a bare accept or reject.

    Args:
        experiment_id: the experiment whose change this is (of this campaign).
        base_version_id: the version the workspace was prepared from (prepare_workspace's
            base_version_id); default: the current head.
        warm_start: train from the base version's model instead of from scratch.
        data: registered datasets (ids or names) the training uses besides the train tier.
    """
    from rsilab.expos.tools.data import find_dataset

    campaign = env.campaign(writable=True)
    services = env.services()
    task = services.task_of(campaign)
    workspace = _workspace(env)
    exp = env.read(experiment_id, Experiment, field_name="experiment_id")
    _check_manifest_file(workspace)
    try:
        manifest = load_manifest(workspace)
    except ManifestError as exc:
        raise ToolError(
            "invalid_candidate",
            f"the workspace is not a harness: {exc}",
            expected="a harness.toml at the workspace root (prepare_workspace makes one)",
        ) from None
    check_recorded_config(exp, workspace, manifest.config)
    datasets = [find_dataset(env, ref, f"data.{i}") for i, ref in enumerate(data)]
    controller = services.controller(task)
    lineage = find_lineage(env.store, task.name, services.lineage)
    if lineage is None:
        raise ToolError("unavailable", f"task {task.name!r} has no accepted system yet")
    if base_version_id is not None and base_version_id not in lineage.versions:
        raise ToolError(
            "not_found",
            f"{base_version_id} is not a version of this task's lineage",
            field="base_version_id",
            expected="the base_version_id prepare_workspace returned",
        )
    harness = snapshot_workspace(env.artifacts, workspace)
    candidate = controller.propose(
        harness,
        campaign_id=campaign.id,
        proposer=env.call.actor,
        parent_version_id=base_version_id,
        experiment_id=exp.id,
        data_ids=[d.id for d in datasets],
        warm_start=warm_start,
    )
    if services.judge_in_background:
        services.background(candidate.id, lambda: controller.judge_safely(candidate.id))
    else:
        controller.judge_safely(candidate.id)
    return {
        "candidate_id": candidate.id,
        "proposal": candidate.proposal_index,
        "harness_sha256": harness,
        "verdict": _verdict(env, candidate.id)["verdict"],
    }


def _check_manifest_file(workspace: Path) -> None:
    """Refuse a ``harness.toml`` that is not a regular file before it is read: a FIFO there
    (a job can make one) would block the reader for good."""
    try:
        info = os.lstat(workspace / MANIFEST)
    except OSError:
        return  # missing: load_manifest says so
    if not stat.S_ISREG(info.st_mode):
        raise ToolError(
            "invalid_candidate",
            f"the workspace's {MANIFEST} is {kind(info.st_mode)}, not a regular file; "
            "rsilab does not read it",
            expected=f"a regular file {MANIFEST} at the workspace root",
        )


def check_recorded_config(exp: Experiment, workspace: Path, config_file: str | None) -> None:
    """Refuse when the config ``exp`` records disagrees with the workspace's config file.

    An experiment's config is what reviewers and the records say it ran; a candidate whose
    files run something else would make that record false. An empty recorded config claims
    nothing and passes; otherwise every recorded key must be in the file (the harness's
    ``config``, a JSON object) with an equal value. Keys the file has besides are allowed.

    Raises:
        GuardRefusal: ``config_mismatch``, naming the first keys that differ.
    """
    if not exp.config:
        return
    actual: Any = None
    if config_file is not None:
        try:  # never through a link, never blocking on a FIFO a job left there
            with os.fdopen(open_regular(None, workspace / config_file, config_file)) as handle:
                actual = json.loads(handle.read())
        except (OSError, ValueError, TreeRefused):
            actual = None
    if not isinstance(actual, dict):
        where = config_file or "(the harness names no config file)"
        raise GuardRefusal(
            rule="config_mismatch",
            stage=FlagStage.REPORTING,
            message=f"experiment {exp.id} records a config, but the workspace's config {where} "
            "is not a JSON object; record the config the workspace runs",
            field="experiment_id",
        )
    wrong = [
        f"{key}: recorded {json.dumps(value)[:40]}, workspace "
        + (json.dumps(actual[key])[:40] if key in actual else "has no such key")
        for key, value in sorted(exp.config.items())
        if key not in actual or actual[key] != value
    ]
    if wrong:
        raise GuardRefusal(
            rule="config_mismatch",
            stage=FlagStage.REPORTING,
            message=f"experiment {exp.id}'s recorded config differs from the workspace's "
            f"{config_file} ({'; '.join(wrong[:3])}); propose under an experiment that "
            "records the config the workspace runs",
            field="experiment_id",
        )


def _verdict(env: ToolEnv, candidate_id: str) -> dict[str, Any]:
    try:
        candidate = env.store.get_as(candidate_id, Candidate)
    except NotFoundError:
        raise ToolError(
            "not_found", f"no candidate {candidate_id!r}", field="candidate_id"
        ) from None
    if env.call.role.is_agent and candidate.campaign_id != env.call.campaign_id:
        raise ToolError(
            "not_found", f"no candidate {candidate_id!r} in this campaign", field="candidate_id"
        )
    out: dict[str, Any] = {
        "candidate_id": candidate.id,
        "verdict": candidate.state.verdict,
        "decided": candidate.is_finished(),
    }
    if candidate.is_finished():
        out["outcome"] = str(candidate.state)  # accepted, rejected, invalid or stale
        if candidate.public_note:
            out["note"] = candidate.public_note
    if candidate.version_id is not None:
        version = env.store.get_as(candidate.version_id, SystemVersion)
        out["version_id"] = version.id
        out["label"] = version.label
    return out


@tool(Category.EXECUTION)
def candidate_status(env: ToolEnv, candidate_id: RecordId) -> dict[str, Any]:
    """The controller's verdict on a proposal: pending, accept or reject (no numbers).

    An accepted candidate names the new version (prepare_workspace then starts from it). An
    invalid one says which step failed (build, train, predict, output contract), never a log.

    Args:
        candidate_id: a candidate this campaign proposed.
    """
    return _verdict(env, candidate_id)
