"""The improver runner of ``rsilab evolve``: a harness's ``improve`` command, run the way
``rsilab agent`` runs an external agent (:mod:`rsilab.mcp.agent_run`).

:func:`improver_runner` adapts :func:`~rsilab.mcp.agent_run.run_agent` to the orchestrator's
:class:`~rsilab.orchestrator.rounds.ImproverRunner`: the command runs in bubblewrap as a Worker
of the round's campaign, in the workspace the orchestrator filled with the improver's harness,
with the Experiment OS over MCP as its only way out, under the round's wall budget, and with
the round's seed in ``$RSILAB_SEED``.
"""

from __future__ import annotations

from collections.abc import Callable

from rsilab.mcp.agent_run import AgentOptions, exit_status, run_agent
from rsilab.orchestrator.rounds import ImproverEnd, ImproverJob, ImproverRunner
from rsilab.records import Role


def improver_runner(relay: Callable[[int, bytes], None]) -> ImproverRunner:
    """A runner that streams the improver's output to ``relay(fd, chunk)`` as it comes."""

    def run(job: ImproverJob) -> ImproverEnd:
        options = AgentOptions(
            argv=job.argv,
            campaign=job.campaign_id,
            role=Role.WORKER,
            actor=job.actor,
            workspace=job.workspace,
            lab=job.lab,
            wall_s=job.wall_s,
            env={"RSILAB_SEED": str(job.seed)},
        )
        result = run_agent(options, relay)
        detail = f"{result.killed} limit" if result.killed is not None else ""
        return ImproverEnd(exit_status(result), result.wall_s, detail)

    return run
