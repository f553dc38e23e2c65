"""The local-model part of a campaign's preflight: a task's own model folder (``model``).

A task may name a local model of the user's (:attr:`rsilab.tasks.Task.model`): every job of its
campaign sees it read-only at its own path (:meth:`rsilab.expos.services.LabServices.use_task`
binds it to the sandbox). Before anything is written, the preflight checks that it exists,
that it shows no private folder (the lab, its keys, the task's data files), that the jobs' user
can read all of it and that no link in it leads outside it (either would fail every job, one
at a time, mid-campaign), and records its content digest in the campaign record's settings
under ``model`` (``{"path", "sha256", "files", "bytes"}``), so a reader of the campaign knows
which bytes every job read. A resumed campaign must find the same bytes there: a model changed
on disk is refused, never used. (On Ray, each node's copy is checked by the executor's own
preflight: :mod:`rsilab.executors._ray_node`.)
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from rsilab.errors import UserError
from rsilab.expos.services import LabServices
from rsilab.records import Campaign
from rsilab.sandbox import BwrapSandbox
from rsilab.sandbox.shown import UNREADABLE_HINT, problem, tree_digest
from rsilab.tasks import Task, data_files

SETTINGS_KEY = "model"
"""The campaign settings key holding the local model's facts (absent without one)."""


def model_settings(task: Task, services: LabServices) -> dict[str, Any]:
    """``{"model": {...}}`` for a task naming a local model (after :meth:`use_task` bound it),
    else nothing.

    Raises:
        UserError: the model is missing; is, holds or lies in the lab, its keys or the task's
            data; is unreadable by the jobs' user; or holds a link that leads outside it.
    """
    if task.model is None:
        return {}
    if not task.model.exists():  # first: making the executor runs a probe job showing it
        raise UserError(
            f"task {task.name!r}: its model {task.model} does not exist on this host",
            "point the task's `model` at the model folder (an absolute path, or one relative "
            "to the task file)",
        )
    _check_private(task, services)
    sandbox = getattr(services.executor, "sandbox", None)
    if isinstance(sandbox, BwrapSandbox):
        uid, gid = sandbox.uid, sandbox.gid
    else:  # a plain process runs as this process's user
        uid, gid = os.getuid(), os.getgid()
    wrong = problem(task.model, uid, gid)
    if wrong is not None:
        raise UserError(
            f"task {task.name!r}: its jobs cannot use the model at {task.model}: {wrong}",
            UNREADABLE_HINT,
        )
    digest = tree_digest(task.model)
    return {
        SETTINGS_KEY: {
            "path": str(task.model),
            "sha256": digest.sha256,
            "files": digest.files,
            "bytes": digest.bytes,
        }
    }


def _check_private(task: Task, services: LabServices) -> None:
    """UserError when the model folder is, holds, or lies inside what jobs must never read:
    the lab, its key folder, or a folder holding the task's data files (its split or pool
    files, its data sources: every tier, private ones included). A model folder is shown
    whole."""
    assert task.model is not None
    model = task.model.resolve()
    hint = "keep the model in a folder of its own, apart from the lab and the task's data"
    for folder in (p.resolve() for p in services.confinement.private):
        if _overlap(model, folder):
            raise UserError(
                f"task {task.name!r}: its model {task.model} would show {folder}, the lab or "
                "its keys, to every job",
                hint,
            )
    for file in data_files(task):
        if _overlap(model, file if file.is_dir() else file.parent):
            raise UserError(
                f"task {task.name!r}: its model {task.model} would show the task's data file "
                f"{file} (private tiers included) to every job",
                hint,
            )


def _overlap(one: Path, other: Path) -> bool:
    return one.is_relative_to(other) or other.is_relative_to(one)


def check_same_model(campaign: Campaign, settings: dict[str, Any]) -> None:
    """UserError when resuming ``campaign`` would read another local model (other bytes, or
    another path, or none) than the one it recorded when it started."""
    recorded = campaign.settings.get(SETTINGS_KEY) or {}
    now = settings.get(SETTINGS_KEY) or {}
    if recorded.get("sha256") == now.get("sha256") and recorded.get("path") == now.get("path"):
        return
    said = recorded.get("path") or "no local model"
    raise UserError(
        f"campaign {campaign.id} started with {said} (sha256 {recorded.get('sha256', '-')}), "
        f"but its task's model is now {now.get('path') or 'none'} "
        f"(sha256 {now.get('sha256', '-')})",
        "restore the model it started with, or start a new campaign",
    )
