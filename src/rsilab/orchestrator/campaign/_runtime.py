"""The runtime part of a campaign's preflight: the task's own runtime, and what it built.

A task that declares runtime requirements (or a build step) runs every job of its campaign in
its own runtime (:meth:`rsilab.expos.services.LabServices.use_task`); a runtime that is not
installed is refused in one line naming ``rsilab runtime install --task T``. The files its build
step wrote (posttrain: the base model) are checked against the runtime's stamp, put into the
lab's artifact store by content hash, and their sha256 recorded in the campaign record's
settings under ``runtime.built`` (``{"posttrain_base": "<sha256>"}``), so a reader of the
campaign knows which base model every job of it read. A resumed campaign must find the same
bytes: another base model (rebuilt, or changed on disk) is refused, never used.
"""

from __future__ import annotations

from typing import Any

from rsilab.errors import UserError
from rsilab.expos.services import LabServices
from rsilab.records import Campaign
from rsilab.sandbox.runtime_built import verify_built
from rsilab.store import Lab
from rsilab.tasks import Task

SETTINGS_KEY = "runtime"
"""The campaign settings key holding the task runtime's facts (absent for the base runtime)."""


def runtime_settings(lab: Lab, task: Task, services: LabServices) -> dict[str, Any]:
    """Bind ``task``'s runtime to ``services`` and return the settings recording it: nothing
    for a task of the base runtime; else ``{"runtime": {"path", "key", "built"}}``, ``built``
    mapping each built file's name to the sha256 of the artifact now holding its bytes.

    Raises:
        RuntimeMissingError: the task's runtime is not installed.
        BuiltFileChanged: a built file changed since the install.
        UserError: the services already run jobs in another runtime, or a file changed
            while it was stored.
    """
    runtime = services.use_task(task)
    if not task.runtime_requirements and task.runtime_build is None:
        return {}
    built: dict[str, str] = {}
    for found in verify_built(runtime, task.name):
        stored = lab.artifacts.put_file(found.path).sha256
        if stored != found.sha256:  # changed between the check and the copy
            raise UserError(
                f"task {task.name!r}: {found.name} at {found.path} changed while it was stored",
                "leave the runtime alone while a campaign starts, then run again",
            )
        built[found.name] = stored
    return {SETTINGS_KEY: {"path": str(runtime.path), "key": runtime.key, "built": built}}


def check_same_runtime(campaign: Campaign, settings: dict[str, Any]) -> None:
    """UserError when resuming ``campaign`` would read other built files (a base model of
    other bytes) than the ones it recorded when it started."""
    recorded = (campaign.settings.get(SETTINGS_KEY) or {}).get("built") or {}
    now = (settings.get(SETTINGS_KEY) or {}).get("built") or {}
    changed = sorted(
        name for name in set(recorded) | set(now) if recorded.get(name) != now.get(name)
    )
    if changed:
        raise UserError(
            f"campaign {campaign.id} started with other {', '.join(changed)} bytes than its "
            "task's runtime holds now (sha256 recorded in its settings under runtime.built)",
            "restore the runtime it started with, or start a new campaign",
        )
