"""A test bench around one ExperimentOS: a lab, a campaign, a workspace and role contexts."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rsilab.errors import ToolError
from rsilab.expos import CallContext, ExperimentOS, ToolResult, open_campaign
from rsilab.records import (
    Campaign,
    Direction,
    Event,
    EventDraft,
    Experiment,
    Record,
    Role,
    TaskRef,
)
from rsilab.store import ArtifactStore, Store, verify_store

UNSET: Any = object()


@dataclass
class Bench:
    """An ExperimentOS over a real store, with a campaign and a workspace to call tools in."""

    expos: ExperimentOS
    store: Store
    artifacts: ArtifactStore
    campaign: Campaign
    workspace: Path

    def ctx(
        self,
        role: Role,
        *,
        actor: str | None = None,
        campaign_id: str | None = UNSET,
        workspace: Path | None = UNSET,
    ) -> CallContext:
        """A caller in ``role``, by default in the bench's campaign and workspace."""
        return CallContext(
            actor=actor or f"{role}-1",
            role=role,
            campaign_id=self.campaign.id if campaign_id is UNSET else campaign_id,
            workspace=self.workspace if workspace is UNSET else workspace,
        )

    def call(self, role: Role | CallContext, tool: Any, args: Any = None) -> ToolResult:
        """One call, as ``role`` in the bench's campaign (or with an explicit context)."""
        ctx = role if isinstance(role, CallContext) else self.ctx(role)
        return self.expos.call(ctx, tool, args)

    def ok(self, role: Role | CallContext, tool: str, args: Any = None) -> dict[str, Any]:
        """The value of a call that must succeed."""
        result = self.call(role, tool, args)
        assert result.ok, result.to_dict()
        assert result.value is not None
        return result.value

    def fail(
        self, role: Role | CallContext, tool: Any, args: Any = None, *, code: str
    ) -> ToolError:
        """The error of a call that must fail with ``code``."""
        result = self.call(role, tool, args)
        assert result.error is not None, f"expected {code}, got {result.value}"
        assert result.error.code == code, result.to_dict()
        return result.error

    def last_event(self) -> Event:
        """The newest ledger event."""
        seq = self.store.head()[0]
        return self.store.events(after=seq - 1)[0]

    def direction(self, title: str = "wider model", **extra: Any) -> str:
        """A new direction in the campaign, created by the main agent; returns its id."""
        args = {"title": title, "hypothesis": f"{title} helps", **extra}
        return str(self.ok(Role.MAIN, "create_direction", args)["id"])

    def experiment(self, direction_id: str, description: str = "try it", **extra: Any) -> str:
        """A new experiment under ``direction_id``, created by a worker; returns its id."""
        args = {"direction_id": direction_id, "description": description, **extra}
        return str(self.ok(Role.WORKER, "create_experiment", args)["id"])

    def log(self, experiment_id: str, value: float, name: str = "accuracy", **extra: Any) -> None:
        """Log one dev metric on an experiment."""
        args = {"experiment_id": experiment_id, "name": name, "value": value, **extra}
        self.ok(Role.WORKER, "log_metric", args)

    def finish(self, experiment_id: str, status: str = "succeeded") -> dict[str, Any]:
        """Finish an experiment."""
        return self.ok(
            Role.WORKER, "finish_experiment", {"experiment_id": experiment_id, "status": status}
        )

    def put(self, record: Record, *, action: str = "test_setup") -> None:
        """Write a record directly, as a principal would (outside the tool layer)."""
        self.store.commit(EventDraft(actor="tester", role="human", action=action), [record])

    def other_campaign(self) -> Campaign:
        """A second campaign in the same lab."""
        return open_campaign(self.store, TaskRef(name="iris"))

    def get_experiment(self, experiment_id: str) -> Experiment:
        return self.store.get_as(experiment_id, Experiment)

    def get_direction(self, direction_id: str) -> Direction:
        return self.store.get_as(direction_id, Direction)

    def assert_verifies(self) -> None:
        """The ledger, records and checkpoints all verify."""
        report = verify_store(self.store)
        assert report.ok, report.problems
