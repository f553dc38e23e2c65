"""One round whose improver is a system's harness: its ``improve`` command, in the sandbox.

The orchestrator prepares and the caller runs: the improver's harness tree is materialised
from the artifact store into the Worker's workspace ``<lab>/workspaces/<campaign>/improver``,
the campaign gets a direction to work in (created as Main, through the Experiment OS), and an
:class:`ImproverRunner` runs the harness's ``improve`` command there, confined, with the
Experiment OS as its only way out (``rsilab agent``'s mechanism, which lives in a layer above
this one and is passed in). rsilab never imports the improver's code. The round's budget ends
it: ``create_experiment`` refuses past the experiment budget, and the wall budget is the run's
wall-clock limit.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from rsilab.errors import UserError
from rsilab.expos import CallContext, ExperimentOS, default_registry
from rsilab.orchestrator.campaign import ACTOR, CampaignPolicy, CampaignSession, Ending
from rsilab.records import CampaignState, EndReason, Role, SystemVersion
from rsilab.store import Lab
from rsilab.tasks import Budget, ManifestError, load_manifest

IMPROVER_ACTOR = "improver"
"""The name the improver's tool calls are recorded under; it also names its workspace."""


@dataclass(frozen=True)
class ImproverJob:
    """One run of a harness's ``improve`` command, as the orchestrator asks for it.

    Attributes:
        argv: the command, as the harness's manifest declares it; run in ``workspace``.
        lab: the lab folder.
        campaign_id: the round's campaign; the improver works in it as a Worker.
        actor: the name its tool calls are recorded under.
        workspace: host folder holding the improver's harness tree; its working folder.
        wall_s: its wall-clock limit (the round's wall budget).
        seed: the round's seed, passed to it as ``$RSILAB_SEED``.
    """

    argv: tuple[str, ...]
    lab: Path
    campaign_id: str
    actor: str
    workspace: Path
    wall_s: float
    seed: int = 0


@dataclass(frozen=True)
class ImproverEnd:
    """How an improver run ended."""

    exit_status: int
    """Its exit code; 128+N when signal N ended it, 137 when a limit did."""
    wall_s: float
    """Seconds it ran."""
    detail: str = ""
    """What ended it, where it was not its own exit (e.g. ``wall limit``)."""


class ImproverRunner(Protocol):
    """Runs an improver confined to the sandbox, as a Worker of the job's campaign, with the
    Experiment OS reachable only over MCP (the stdio bridge ``$RSILAB_MCP_COMMAND`` names);
    returns once it has ended and its proposals are judged.

    Raises:
        UserError: it cannot be run here (no bubblewrap, say), before it starts.
        KeyboardInterrupt: a person stopped it (the run is ended first).
    """

    def __call__(self, job: ImproverJob) -> ImproverEnd: ...


class HarnessRoundPolicy(CampaignPolicy):
    """A round whose improver is ``improver``'s harness: its ``improve`` command, run by
    ``run_improver`` in the round's campaign (see the module). The round is over, finished,
    when the command has ended; experiments it left open are closed as cancelled (their jobs
    cannot report any more).

    Raises (from :meth:`run`):
        UserError: the harness declares no improve command, or the runner cannot run it.
    """

    def __init__(
        self,
        improver: SystemVersion,
        *,
        budget: Budget,
        run_improver: ImproverRunner,
        title: str,
        seed: int = 0,
        extra_settings: Mapping[str, Any] | None = None,
    ) -> None:
        self.improver, self.budget, self.run_improver = improver, budget, run_improver
        self.title, self.seed = title, seed
        self.extra = dict(extra_settings or {})

    def settings(self) -> dict[str, Any]:
        own = {"agents": "harness", "budget": str(self.budget), "workers": 1, "seed": self.seed}
        return {**self.extra, **own}

    def run(self, session: CampaignSession) -> Ending:
        lab, campaign_id = session.lab, session.campaign_id
        workspace = _materialise(lab, campaign_id, self.improver)
        argv = _improve_argv(workspace, self.improver)
        _open_direction(lab, campaign_id, self.title)
        job = ImproverJob(
            argv, lab.path, campaign_id, IMPROVER_ACTOR, workspace, self.budget.wall_s, self.seed
        )
        try:
            end = self.run_improver(job)
        finally:
            session.recover()
        how = f"stopped by its {end.detail}" if end.detail else f"exited {end.exit_status}"
        message = f"the improver {how} after {end.wall_s:.1f} s"
        return Ending(CampaignState.FINISHED, EndReason.AGENTS_DONE, message)


def _materialise(lab: Lab, campaign_id: str, version: SystemVersion) -> Path:
    """The improver's workspace, holding ``version``'s harness tree as the store keeps it."""
    workspace = lab.path / "workspaces" / campaign_id / IMPROVER_ACTOR
    workspace.parent.mkdir(parents=True, exist_ok=True)
    return lab.artifacts.materialize(version.harness_sha256, workspace, "tree")


def _improve_argv(workspace: Path, version: SystemVersion) -> tuple[str, ...]:
    try:
        manifest = load_manifest(workspace)
    except ManifestError as exc:
        raise UserError(f"{version.label} {version.id}: {exc}") from exc
    if manifest.improve is None:
        raise UserError(f"{version.label} {version.id}: its harness declares no improve command")
    return tuple(manifest.improve)


def _open_direction(lab: Lab, campaign_id: str, title: str) -> str:
    """A direction for the improver to work in, created as Main through the Experiment OS."""
    expos = ExperimentOS(lab.store, lab.artifacts, default_registry())
    ctx = CallContext(ACTOR, Role.MAIN, campaign_id)
    args = {
        "title": title,
        "hypothesis": "The improver's own research, through the Experiment OS, raises the "
        "target benchmarks of the accepted system without regressions elsewhere.",
        "plan": "Run the harness's improve command in the sandbox within the round's budget; "
        "it proposes what it found best.",
    }
    result = expos.call(ctx, "create_direction", args)
    if result.error is not None or result.value is None:
        raise UserError(f"could not open the round's direction: {result.to_dict()}")
    return str(result.value["id"])
