"""What ``run_job`` and the comparison tools check before they plan any job: the caller's
workspace and harness, the arguments against the kind of job, a model's provenance, and the
setting's rule on dev feedback. Each refusal is a ToolError (or a recorded GuardRefusal)
that names the field at fault.
"""

from __future__ import annotations

from pathlib import Path

from rsilab.controller.jobs import model_produced_by_job
from rsilab.controller.settings import rules_for
from rsilab.errors import ToolError
from rsilab.expos.context import ToolEnv
from rsilab.expos.guards import GuardRefusal
from rsilab.expos.tools._base import live_workspace, require
from rsilab.records import FlagStage
from rsilab.store.artifacts import hash_file
from rsilab.tasks import Manifest, ManifestError, Task, load_manifest


def workspace_of(env: ToolEnv) -> Path:
    """The caller's workspace folder, made a workspace of the lab's sandbox and resolved; a
    ``no_workspace`` ToolError without one, or for a folder that holds the lab."""
    workspace = env.workspace()
    if workspace is None or not Path(workspace).is_dir():
        raise ToolError(
            "no_workspace",
            "this call has no workspace folder; jobs run in the caller's workspace",
            expected="a workspace folder in the call context (prepare_workspace fills it)",
        )
    return live_workspace(env, Path(workspace))


def require_dev_feedback(task: Task) -> None:
    """A recorded GuardRefusal unless ``task``'s setting returns dev scores."""
    if not rules_for(task.setting).dev_scores_returned:
        raise GuardRefusal(
            rule="dev_feedback_not_allowed",
            stage=FlagStage.ACCESS,
            message=f"the {task.setting.value} setting gives no benchmark feedback, so dev "
            "scores are not returned; validate your changes on folds of the train tier "
            "instead: run_job with kind='fold_eval', and compare_eval_samples with "
            "tier='train'",
        )


def recorded_model(env: ToolEnv, path: Path, stage: FlagStage) -> str:
    """The sha256 of a model a recorded job produced; a GuardRefusal for any other file."""
    require(path.is_file(), "invalid_arguments", "model must name a file", "model")
    sha = hash_file(path)
    if model_produced_by_job(env.store, sha) is None:
        raise GuardRefusal(
            rule="unrecorded_weights",
            stage=stage,
            message=f"{path.name} (sha256 {sha[:12]}) was not produced by a recorded job; "
            "only a model that a succeeded train job wrote may be used (its job_status "
            "names it, e.g. runs/<job-id>/model...)",
            field="model",
        )
    if not env.artifacts.has(sha):  # jobs give the stored bytes, never the workspace file
        raise ToolError(
            "tool_failed",
            f"the recorded model {sha[:12]} is missing from the lab's artifact store; the lab "
            "is damaged, ask a person to run `rsilab verify`",
            field="model",
        )
    return sha


def manifest_of(workspace: Path) -> Manifest:
    """The workspace's harness manifest; a ``tool_failed`` ToolError saying what is wrong."""
    try:
        return load_manifest(workspace)
    except ManifestError as exc:
        raise ToolError(
            "tool_failed",
            f"the workspace is not a harness: {exc}",
            expected="a harness.toml at the workspace root (prepare_workspace makes one)",
        ) from None


def check_arguments(kind: str, manifest: Manifest, model: str | None, folds: int | None) -> None:
    """Refuse arguments that do not fit ``kind`` or the harness, naming the field."""
    if kind != "fold_eval":
        require(folds is None, "invalid_arguments", "folds is only for kind='fold_eval'", "folds")
    if kind == "train":
        require(manifest.trains, "invalid_arguments", "this harness has no train step", "kind")
    elif kind == "fold_eval":
        require(
            model is None,
            "invalid_arguments",
            "fold_eval trains every fold from scratch: a model trained on the whole train "
            "tier has seen the held-out folds, so none is taken",
            "model",
        )
    elif manifest.trains:
        require(
            model is not None,
            "invalid_arguments",
            "this harness trains: pass the model a train job wrote (job_status 'model')",
            "model",
        )
