"""The runner's door to the Experiment OS: one call per tool, with the caller's role.

Every action of the built-in agents goes through :class:`Door`, so roles, guards and the
ledger apply to them exactly as to an LLM agent. A tool error is a bug of the built-in policy
or a broken lab here (the policy only asks for what it may do), so it raises
:class:`RunnerError` with the tool's error text.
"""

from __future__ import annotations

import contextlib
import copy
from pathlib import Path
from typing import Any

from rsilab.errors import RsilabError
from rsilab.expos import CallContext, ExperimentOS, default_registry
from rsilab.expos.services import LabServices
from rsilab.records import Job, Role
from rsilab.store import Lab


class RunnerError(RsilabError):
    """A tool call the built-in policy needed failed."""


class Door:
    """Calls tools of one campaign as Main (no workspace), Workers (own folders), Reviewer."""

    def __init__(self, lab: Lab, services: LabServices, campaign_id: str, workspaces: Path) -> None:
        self.expos = ExperimentOS(lab.store, lab.artifacts, default_registry(), services)
        self.campaign_id = campaign_id
        self.workspaces = workspaces
        self.main_actor, self.reviewer_actor = "main", "reviewer"

    def for_actor(self, actor: str) -> Door:
        """This door for one agent that plans, runs and reviews under its own name (a team's
        researcher): its Main and Reviewer calls carry ``actor``, as its Worker calls do."""
        door = copy.copy(self)
        door.main_actor = door.reviewer_actor = actor
        return door

    def workspace(self, worker: str) -> Path:
        """The folder of ``worker`` (made on first use)."""
        folder = self.workspaces / worker
        folder.mkdir(parents=True, exist_ok=True)
        return folder

    def call(self, role: Role, actor: str, tool: str, **args: Any) -> dict[str, Any]:
        """The tool's value; :class:`RunnerError` when it answered an error."""
        workspace = self.workspace(actor) if role is Role.WORKER else None
        ctx = CallContext(actor, role, self.campaign_id, workspace)
        result = self.expos.call(ctx, tool, args)
        if result.error is not None or result.value is None:
            raise RunnerError(f"{actor} ({role}) {tool} failed: {result.to_dict()}")
        return result.value

    def main(self, tool: str, **args: Any) -> dict[str, Any]:
        """A call by the Main agent."""
        return self.call(Role.MAIN, self.main_actor, tool, **args)

    def worker(self, worker: str, tool: str, **args: Any) -> dict[str, Any]:
        """A call by a Worker, in its own workspace."""
        return self.call(Role.WORKER, worker, tool, **args)

    def cancel_running_jobs(self, fallback_actor: str, done: set[str] | None = None) -> None:
        """Kill the campaign's running agent jobs through ``cancel_job``, each as the actor
        that started it (``fallback_actor`` when it names none); ids in ``done`` are skipped
        and added to it. A job that ended meanwhile, or is not the actor's to cancel, is left."""
        done = set() if done is None else done
        for job in self.expos.store.query_as(Job, campaign_id=self.campaign_id):
            if job.is_finished() or job.kind.is_private or job.id in done:
                continue
            done.add(job.id)
            with contextlib.suppress(RunnerError):
                self.worker(job.actor or fallback_actor, "cancel_job", job_id=job.id)

    def reviewer(self, tool: str, **args: Any) -> dict[str, Any]:
        """A call by the Reviewer."""
        return self.call(Role.REVIEWER, self.reviewer_actor, tool, **args)
