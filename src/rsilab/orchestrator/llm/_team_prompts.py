"""The task prompts of an LLM research team's steps, written from the records.

The Leader's prompt holds the team roster (each researcher's orientation, experiments and best
dev score), the orientations the lab holds (latest versions, with the weight campaign reviews
gave them) and the shared memory; a researcher's prompt is a Worker's prompt on its own line
of work, led by its orientation's text and followed by the shared memory and the lab's
skills. As for the single runner's prompts, only what the agents' own tools would show goes
in.
"""

from __future__ import annotations

from rsilab.memory import latest_orientations, latest_skills, relevant_findings
from rsilab.memory.assignments import ORIENTATION_PREFIX, current_assignments
from rsilab.orchestrator.llm._prompts import (
    Left,
    candidates_block,
    reviews_block,
    task_block,
    worker_prompt,
)
from rsilab.records import Direction, Experiment, Finding, FindingStatus, Orientation
from rsilab.store import Store
from rsilab.tasks import Task

SHOWN_FINDINGS = 10
_CUT = 300


def findings_block(store: Store, task: Task, limit: int = SHOWN_FINDINGS) -> str:
    """The task's findings from every campaign, most relevant first, status first: an
    unresolved one is an open problem, not a result."""
    ranked = relevant_findings(store, task.name, metric=task.targets[0].name, limit=limit)
    if not ranked:
        return "Shared memory: no findings on this task yet."
    lines = ["Shared memory (findings on this task; an unresolved one is an open problem):"]
    for r in ranked:
        f: Finding = r.finding
        effect = (
            f"; effect {f.effect.value:+.4f} [{f.effect.low:+.4f}, {f.effect.high:+.4f}]"
            if f.effect is not None
            else ""
        )
        status = "open problem" if f.status is FindingStatus.UNRESOLVED else str(f.status)
        superseded = f"; superseded by {', '.join(r.superseded_by)}" if r.superseded_by else ""
        lines.append(f"- {f.id} [{status}] {f.claim[:_CUT]}{effect}{superseded}")
    return "\n".join(lines)


def skills_block(store: Store) -> str:
    """The lab's skills, latest versions: reusable procedures campaign reviews revise."""
    held = latest_skills(store)
    if not held:
        return "Skills: none in this lab yet."
    lines = ["Skills the lab holds (read_skill shows one whole; latest versions):"]
    for k in held:
        code = f" Code: {k.code[:_CUT]}" if k.code else ""
        lines.append(f"- {k.name} v{k.version}: {k.text[:_CUT]}{code}")
    return "\n".join(lines)


def roster_block(store: Store, campaign_id: str, task: Task, team: list[str]) -> str:
    """Each researcher: its orientation now, its experiments and its best dev score."""
    target = task.targets[0]
    now = current_assignments(store, campaign_id)
    exps = store.query_as(Experiment, campaign_id=campaign_id)
    lines = ["The team:"]
    for name in team:
        mine = [e for e in exps if e.created_by == name]
        scores = [m.value for e in mine if (m := e.last_metric(target.name)) is not None]
        best = target.best(scores) if scores else None
        a = now.get(name)
        oriented = f"{a.orientation} (since {a.id}: {a.reason[:_CUT]})" if a else "no orientation"
        shown = f"best dev {target.name} {best:.4f}" if best is not None else "no dev score yet"
        lines.append(f"- {name}: {oriented}; {len(mine)} experiments; {shown}")
    return "\n".join(lines)


def orientations_block(store: Store) -> str:
    """The researcher orientations the lab holds, latest versions."""
    held = [o for o in latest_orientations(store) if o.name.startswith(ORIENTATION_PREFIX)]
    lines = ["Orientations you may assign (name, version, weight from campaign reviews):"]
    for o in held:
        short = o.name.removeprefix(ORIENTATION_PREFIX)
        lines.append(f"- {short} v{o.version} (weight {o.weight:g}): {o.text[:_CUT]}")
    return "\n".join(lines)


def leader_prompt(
    store: Store, campaign_id: str, task: Task, team: list[str], *, round_no: int, left: Left
) -> str:
    """The Leader's prompt for round ``round_no``."""
    unassigned = [n for n in team if n not in current_assignments(store, campaign_id)]
    ask = (
        f"Give each of {', '.join(unassigned)} an orientation with assign_orientation "
        "(researcher, orientation, reason citing the records)."
        if unassigned
        else "Redirect a researcher with assign_orientation only where the records call for it."
    )
    return "\n\n".join(
        [
            f"Leader step of round {round_no}.",
            left.line(),
            task_block(task),
            roster_block(store, campaign_id, task, team),
            orientations_block(store),
            findings_block(store, task),
            reviews_block(store, campaign_id),
            candidates_block(store, campaign_id),
            ask + " End your step with a plain answer.",
        ]
    )


def researcher_prompt(
    store: Store,
    campaign_id: str,
    task: Task,
    direction: Direction,
    orientation: Orientation,
    *,
    name: str,
    left: Left,
) -> str:
    """A researcher's prompt: its orientation, then a Worker's prompt on its own line of work,
    then the shared memory and how to use it."""
    short = orientation.name.removeprefix(ORIENTATION_PREFIX)
    return "\n\n".join(
        [
            f"You are {name}, a researcher of a team, oriented as {short} "
            f"(v{orientation.version}) by the Leader:\n{orientation.text}",
            worker_prompt(store, campaign_id, task, direction, left=left),
            findings_block(store, task),
            skills_block(store),
            "Shared memory: query_findings for what others learned; adopt_finding (with your "
            "experiment ids) when you follow one; publish_finding for what you learn. A "
            "supported finding needs metric, a_ids, b_ids and direction: the tool recomputes "
            "the effect and stores it as an open problem when the records do not bear it out.",
        ]
    )
