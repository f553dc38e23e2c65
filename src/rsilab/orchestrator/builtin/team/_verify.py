"""A team verifier's work: open a verification of a gain, and conclude it once re-run.

A verification is a direction grown from the gain's own direction with relation ``verify`` and a
plan that names the experiment it re-runs (``verifies: <id>``); the verifier re-runs that config on
:attr:`~rsilab.orchestrator.builtin._context.RunContext.verify_seeds` fresh seeds there. The
conclusion is the single runner's (:mod:`rsilab.orchestrator.builtin.reviewer._conclude`): the
verifier files a verified review of the re-runs against the reference, and when it advises
``continue`` and their mean beats the reference, proposes the config to the Host Controller from its
own workspace. The decision is the intent ``conclude:<verify id>`` (an accepted proposal moves the
team's reference, as in :class:`~rsilab.orchestrator.builtin._state.CampaignView`); only the verify
direction is closed, never the direction of the researcher whose gain it was.
"""

from __future__ import annotations

from typing import Any

from rsilab.orchestrator.builtin._context import RunContext
from rsilab.orchestrator.builtin._state import CONCLUDE_PREFIX, Run, knobs_plan
from rsilab.orchestrator.builtin.reviewer._agent import Reviewer
from rsilab.orchestrator.builtin.reviewer._conclude import Concluder
from rsilab.orchestrator.builtin.team._state import plan_mark
from rsilab.orchestrator.campaign import DoneIntent
from rsilab.records import DirectionState


def open_verification(ctx: RunContext, source: Run, title: str) -> str:
    """Create the verify direction of ``source`` (as the verifier); its id."""
    made = ctx.door.main(
        "create_direction",
        title=f"verify {source.experiment_id} ({title})"[:100],
        hypothesis=f"the dev gain of {source.experiment_id} over the reference holds on fresh "
        "seeds",
        plan=knobs_plan(
            [k.name for k in ctx.space],
            f"re-run the config of {source.experiment_id} on fresh seeds\n"
            f"verifies: {source.experiment_id}",
        ),
        parents=[{"parent_id": source.direction_id, "relation": "verify"}],
    )
    ctx.say("direction", f"verifies {source.experiment_id} on fresh seeds")
    return str(made["id"])


def conclude_verification(
    ctx: RunContext, reviewer: Reviewer, concluder: Concluder, verify_id: str
) -> None:
    """Conclude the verification ``verify_id`` (its re-runs are done; none runs)."""
    view = ctx.view()
    verify = view.dag.directions[verify_id]
    source_id = plan_mark(verify, "verifies")
    source = next(r for r in view.runs if r.experiment_id == source_id)
    step = ctx.intents.begin(
        f"{CONCLUDE_PREFIX}{verify_id}",
        "conclude",
        {"source": source_id},
    )
    if isinstance(step, DoneIntent):
        result = step.result
    else:
        result = _decide(ctx, reviewer, concluder, verify_id, source)
        ctx.intents.complete(step, result)
    advice, mean = str(result.get("advice")), float(result.get("mean", 0.0))
    if advice == "continue":
        outcome = f"accepted as {result['label']}" if result.get("accepted") else "not accepted"
    elif advice == "revise":
        outcome = "the re-runs are worse than the reference"
    else:
        outcome = "the gain did not hold on fresh seeds"
    status = DirectionState.REFUTED if advice == "revise" else DirectionState.EXHAUSTED
    if not ctx.view().dag.directions[verify_id].state.is_finished():
        ctx.door.main(
            "update_direction",
            direction_id=verify_id,
            status=str(status),
            conclusion=f"re-runs' mean {mean:.4f}; {outcome}",
        )
    ctx.say("review", f"verification of {source_id}: {outcome}")


def _decide(
    ctx: RunContext, reviewer: Reviewer, concluder: Concluder, verify_id: str, source: Run
) -> dict[str, Any]:
    view = ctx.view()
    runs = [r for r in view.runs_in(verify_id) if not r.failed]
    parent = view.dag.directions[source.direction_id]
    advice = reviewer.review(view, parent, runs, verified=True) if runs else None
    result = concluder.verified(view, source, runs, advice)
    return {**result, "source": source.experiment_id}
