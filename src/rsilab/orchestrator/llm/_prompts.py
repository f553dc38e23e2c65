"""The task prompts of the LLM runner's steps, written from the records.

Each step starts with the state in its prompt (a resumed step has no conversation to fall
back on): what is left of the budget, the task as its setting lets agents see it, the DAG,
and what the role needs next. Only what the agents' own tools would show goes in: dev scores
(the controller's, where the setting returns them), reviews, bare candidate verdicts with
their public notes; never private-tier numbers.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from rsilab.orchestrator.research.dag import ResearchDag
from rsilab.records import Candidate, Direction, Experiment, Guidance, Review, SystemVersion
from rsilab.store import Store
from rsilab.tasks import Manifest, ManifestError, Setting, Task, load_manifest

RECENT_REVIEWS = 6
REFERENCE_EXPERIMENTS = 8
_CUT = 300


@dataclass(frozen=True)
class Left:
    """What is left of the campaign's budget when a step starts."""

    experiments: int
    experiments_allowed: int
    tokens: int
    tokens_allowed: int
    wall_s: float

    def line(self) -> str:
        """One line for a prompt."""
        return (
            f"Budget left: {self.experiments} of {self.experiments_allowed} experiments, "
            f"{self.tokens} of {self.tokens_allowed} LLM tokens, {self.wall_s:.0f} s of wall time."
        )


def task_block(task: Task) -> str:
    """The task as the setting lets agents see it: goal only where it is given, and the
    target benchmarks only in the benchmark-guided setting."""
    lines = [f"Task: {task.name} ({task.setting.value} setting). {task.description}".strip()]
    if task.setting is not Setting.OPEN_GENERAL and task.goal:
        lines.append(f"Goal: {task.goal}")
    if task.setting is Setting.BENCHMARK_GUIDED:
        names = ", ".join(
            b.name if b.higher_is_better else f"{b.name} (lower is better)" for b in task.targets
        )
        lines.append(f"Target benchmark(s): {names}; dev scores come back from dev_eval jobs.")
    else:
        lines.append("This setting gives no dev-score feedback: validate on folds of train.")
    if task.search_space:
        knobs = "; ".join(
            _knob(k.name, k.type, k.low, k.high, k.choices) for k in task.search_space
        )
        manifest = _manifest(task)
        config = manifest.config if manifest is not None else "the harness's config file"
        lines.append(
            f"Declared knobs of {config or 'the config (the harness names no file)'}: {knobs}."
        )
    return "\n".join(lines)


def _manifest(task: Task) -> Manifest | None:
    """The task's harness manifest; None when it cannot be read (the texts then stay general;
    ``task check`` says what is wrong with it)."""
    try:
        return load_manifest(task.harness)
    except ManifestError:
        return None


def _jobs_text(task: Task) -> str:
    """How an experiment's jobs run: train then dev_eval, or dev_eval alone without train."""
    manifest = _manifest(task)
    if manifest is not None and not manifest.trains:
        return "run_job dev_eval with no model: this harness has no train step"
    return "run_job train, then dev_eval with the model the train job wrote"


def _knob(name: str, kind: str, low: object, high: object, choices: Sequence[object]) -> str:
    if choices:
        return f"{name} ({kind}: {', '.join(map(str, choices))})"
    return f"{name} ({kind} {low:g}..{high:g})" if low is not None else f"{name} ({kind})"


def _target(task: Task) -> str:
    return task.targets[0].name


def _exp_line(exp: Experiment, benchmark: str) -> str:
    score = dev.value if (dev := exp.last_metric(benchmark)) is not None else None
    shown = f"dev {benchmark} {score:.4f}" if score is not None else "no dev score"
    return f"- {exp.id} [{exp.state}] {shown}: {exp.description[:120]}"


def directions_block(store: Store, dag: ResearchDag, task: Task) -> str:
    """Each direction with its state, edges, plan, experiment count and best dev score."""
    if not dag.directions:
        return "Directions: none yet."
    lines = ["Directions (the research DAG):"]
    for d in dag.directions.values():
        exps = dag.experiments.get(d.id, [])
        scores = [m.value for e in exps if (m := e.last_metric(_target(task))) is not None]
        best = f", best dev {_target(task)} {task.targets[0].best(scores):.4f}" if scores else ""
        edges = ", ".join(f"{e.relation} of {e.parent_id}" for e in d.parents) or "root"
        lines.append(
            f"- {d.id} {d.title!r} [{d.state}] ({edges}); {len(exps)} experiments, "
            f"{len(dag.reviews.get(d.id, []))} reviews{best}"
        )
        lines.append(f"  hypothesis: {d.hypothesis[:_CUT]}")
        if d.plan:
            lines.append(f"  plan: {d.plan[:_CUT]}")
        if d.conclusion:
            lines.append(f"  conclusion: {d.conclusion[:_CUT]}")
    return "\n".join(lines)


def reviews_block(store: Store, campaign_id: str, limit: int = RECENT_REVIEWS) -> str:
    """The latest reviews: verdict, advice, computed effects and the start of the rationale."""
    reviews = store.query_as(Review, campaign_id=campaign_id)[-limit:]
    if not reviews:
        return "Reviews: none yet."
    lines = ["Recent reviews (newest last):"]
    for r in reviews:
        effects = "; ".join(
            f"{c.metric} {c.a_mean:.4f} vs {c.b_mean:.4f}, effect {c.effect.value:+.4f} "
            f"[{c.effect.low:+.4f}, {c.effect.high:+.4f}]"
            for c in r.comparisons
        )
        lines.append(
            f"- {r.id} on {r.direction_id or ', '.join(r.experiment_ids)}: {r.verdict}, "
            f"advice {r.recommendation}" + (f"; {effects}" if effects else "")
        )
        if r.rationale:
            lines.append(f"  {r.rationale[:_CUT]}")
    return "\n".join(lines)


def candidates_block(store: Store, campaign_id: str) -> str:
    """Proposals and the controller's bare verdicts (with public notes, never numbers)."""
    candidates = store.query_as(Candidate, campaign_id=campaign_id)
    if not candidates:
        return "Candidates: none proposed yet."
    lines = ["Candidates proposed to the Host Controller:"]
    for c in candidates:
        line = f"- {c.id} from {c.experiment_id or 'no experiment'}: {c.state}"
        if c.version_id is not None:
            line += f" as version {store.get_as(c.version_id, SystemVersion).label}"
        if c.public_note:
            line += f" ({c.public_note[:_CUT]})"
        lines.append(line)
    return "\n".join(lines)


def guidance_block(guidance: Sequence[Guidance]) -> str:
    """Unread expert guidance, to be read first."""
    lines = [
        "Expert guidance from a person, given since your last planning step (take it into "
        "account in this step's plan; it is recorded as read once this step ends):"
    ]
    lines += [f"- {g.id} from {g.given_by or 'a person'}: {g.text}" for g in guidance]
    return "\n".join(lines)


def main_prompt(
    store: Store,
    campaign_id: str,
    task: Task,
    *,
    round_no: int,
    left: Left,
    workers: int,
    guidance: Sequence[Guidance],
) -> str:
    """The Main agent's planning prompt for round ``round_no``."""
    dag = ResearchDag.load(store, campaign_id)
    parts = [f"Planning step of round {round_no}.", left.line(), task_block(task)]
    if guidance:
        parts.append(guidance_block(guidance))
    parts += [
        directions_block(store, dag, task),
        reviews_block(store, campaign_id),
        candidates_block(store, campaign_id),
        f"Plan this round: create, continue, verify, branch or revise directions and record "
        f"status changes. Then up to {workers} worker(s) will each test one open direction. "
        "End your step with a plain answer naming the direction ids (dir-...) to work on "
        "next, most important first; open directions you leave unnamed are worked on after "
        "the named ones. Close (exhausted, refuted) the directions that should get no more "
        "work; with no open direction left, the campaign ends.",
    ]
    return "\n\n".join(parts)


def worker_prompt(
    store: Store, campaign_id: str, task: Task, direction: Direction, *, left: Left
) -> str:
    """A Worker's prompt: its direction, what the direction has so far, and how to proceed."""
    dag = ResearchDag.load(store, campaign_id)
    target = _target(task)
    exps = dag.experiments.get(direction.id, [])
    lines = [
        f"Your direction: {direction.id} {direction.title!r} [{direction.state}]",
        f"Hypothesis: {direction.hypothesis}",
    ]
    if direction.plan:
        lines.append(f"Plan: {direction.plan}")
    lines.append("Its experiments so far:" if exps else "It has no experiments yet.")
    lines += [_exp_line(e, target) for e in exps]
    lines += [
        f"Review {r.id}: {r.verdict}, advice {r.recommendation}. {r.rationale[:_CUT]}"
        for r in dag.reviews.get(direction.id, [])
    ]
    parts = [left.line(), task_block(task), "\n".join(lines), _best_block(store, campaign_id, task)]
    first = not any(dag.experiments.values())
    parts.append(
        f"Run experiments in this direction only: create_experiment with "
        f'direction_id "{direction.id}", then jobs ({_jobs_text(task)}), '
        "then finish_experiment. Every experiment created counts "
        "against the campaign's budget; the footer's experiments figure is how many may "
        "still be created: at 0 create none, but finish the ones you opened (their jobs, "
        "finish_experiment, a proposal). "
        "Your workspace is your own and keeps its files between your steps "
        "(prepare_workspace with overwrite=true resets it to the accepted system). "
        + (
            "No experiment of this campaign has run yet: make your first one run the accepted "
            "system unchanged, as the control the reviewers compare against. "
            if first
            else ""
        )
        + "Propose a candidate (propose_candidate) only for a verified gain over the accepted "
        "system; the Host Controller judges it. End your step with a plain answer."
    )
    return "\n\n".join(parts)


def _best_block(store: Store, campaign_id: str, task: Task) -> str:
    target = _target(task)
    scored = [
        (m.value, e)
        for e in store.query_as(Experiment, campaign_id=campaign_id)
        if (m := e.last_metric(target)) is not None
    ]
    if not scored:
        return "No dev scores in this campaign yet."
    best = sorted(scored, key=lambda pair: -task.targets[0].oriented(pair[0]))[:3]
    return "Best dev scores of the campaign so far:\n" + "\n".join(
        _exp_line(e, target) for _, e in best
    )


def reviewer_prompt(
    store: Store, campaign_id: str, task: Task, todo: dict[str, list[str]], *, left: Left
) -> str:
    """The Reviewer's prompt: the experiments to judge, by direction, and possible controls."""
    target = _target(task)
    dag = ResearchDag.load(store, campaign_id)
    blocks = []
    for direction_id, ids in todo.items():
        d = dag.directions.get(direction_id)
        head = f"{direction_id} {d.title!r}: {d.hypothesis[:_CUT]}" if d else direction_id
        exps = [store.get_as(i, Experiment) for i in ids]
        blocks.append(
            f"Direction {head}\nNew experiments:\n" + "\n".join(_exp_line(e, target) for e in exps)
        )
    new = {i for ids in todo.values() for i in ids}
    others = [
        e
        for e in store.query_as(Experiment, campaign_id=campaign_id)
        if e.is_finished() and e.id not in new
    ][:REFERENCE_EXPERIMENTS]
    reference = (
        "Earlier experiments you may use as controls (baseline_ids):\n"
        + "\n".join(_exp_line(e, target) for e in others)
        if others
        else "There is no earlier experiment to compare against: judge the new ones by their "
        "own evidence (one run is inconclusive)."
    )
    return "\n\n".join(
        [
            left.line(),
            task_block(task),
            *blocks,
            reference,
            "File one review per direction above with submit_review: experiment_ids = its new "
            f"experiments, direction_id, and where a control exists baseline_ids and metric "
            f'"{target}", so that the effect and its interval are computed from the records. '
            "End your step with a plain answer listing the reviews you filed.",
        ]
    )
