"""The campaign runner with the built-in (no-LLM) policy: Main, Workers and a Reviewer.

:func:`run_campaign` drives one campaign through the Experiment OS tools only, each call with
its role (Main with no workspace, each Worker in its own folder under
``<lab>/workspaces/<campaign>/<worker>``, the Reviewer). One step at a time, rebuilt from the
records each time (:mod:`rsilab.orchestrator._state`):

1. a verify direction with fewer than two runs: re-run its parent's best config on a fresh seed;
2. a verify direction with two runs: review them against the reference, propose the config
   when their mean beats the reference's (the controller judges; an acceptance moves the
   reference), and close both directions; a ``continue`` direction follows an acceptance;
3. Main's move on each open direction (:func:`~rsilab.agents.builtin.next_move`): verify,
   branch or revise (a new direction on other knobs), stop (exhausted);
4. otherwise a Worker runs the next config of the direction UCB picks, and every
   :data:`REVIEW_EVERY` runs the Reviewer compares the direction's best with the reference.

Each experiment is an intent ``exp:<n>`` (each conclusion ``conclude:<direction>``): a
resumed campaign skips what is done and re-runs what was interrupted as a new attempt.
Every experiment, re-runs included, counts against ``budget.experiments``; the wall budget
is checked before each step. Interrupted (KeyboardInterrupt), the campaign is marked
``stopped`` and the lease released, so :func:`run_campaign` with its id resumes it.
"""

from __future__ import annotations

import json
import random
import time
from collections.abc import Callable

from pydantic import JsonValue

from rsilab.agents.builtin import (
    choose_direction,
    config_key,
    next_move,
    noise_floor_from,
    propose_configs,
    review_pair,
)
from rsilab.controller.lineage import find_lineage
from rsilab.expos.services import LabServices
from rsilab.orchestrator import intents
from rsilab.orchestrator._door import Door, RunnerError
from rsilab.orchestrator._state import (
    CONCLUDE_PREFIX,
    EXP_PREFIX,
    CampaignView,
    dev_matrix,
    knobs_of,
    knobs_plan,
)
from rsilab.orchestrator.campaign_run import (
    ACTOR,
    AcceptedVersion,
    CampaignResult,
    Progress,
    ProgressFn,
    campaign_result,
    set_campaign_state,
    start_or_find_campaign,
    task_of,
)
from rsilab.orchestrator.lease import acquire_lease
from rsilab.orchestrator.recovery import recover_campaign
from rsilab.records import (
    CampaignState,
    Direction,
)
from rsilab.store import Lab
from rsilab.tasks import Budget, Task

__all__ = [
    "AcceptedVersion",
    "CampaignResult",
    "Progress",
    "ProgressFn",
    "RunnerError",
    "run_campaign",
    "task_of",
]

REVIEW_EVERY = 3
"""The Reviewer looks at a direction after every this many of its experiments."""
DEFAULT_NOISE_FLOOR = 0.02
"""Noise floor (dev score units) until verification runs measure one."""
VERIFY_SEEDS = 2
"""Fresh-seed re-runs of a direction's best config before it is proposed."""


def run_campaign(
    lab: Lab,
    task: Task,
    *,
    budget: Budget,
    workers: int = 1,
    seed: int = 0,
    on_progress: ProgressFn | None = None,
    campaign_id: str | None = None,
    services: LabServices | None = None,
) -> CampaignResult:
    """Run a new campaign on ``task`` (or resume ``campaign_id``) until its budget is spent.

    Makes the lineage's baseline when it has none. Workers take turns (``workers`` names
    their workspaces; steps run one at a time). A finished campaign is final: resuming it
    changes nothing (its result says so). Raises LeaseHeld when another process runs the
    campaign, UserError for an unknown campaign, and RunnerError when a tool the policy
    needed failed.
    """
    own = services is None
    services = services or LabServices(lab, judge_in_background=False)
    try:
        if find_lineage(lab.store, task.name, services.lineage) is None:
            services.controller(task).baseline(actor=ACTOR)
        settings = {"agents": "builtin", "budget": str(budget), "workers": workers, "seed": seed}
        campaign = start_or_find_campaign(lab, task, settings, campaign_id)
        if campaign is None:
            assert campaign_id is not None
            return campaign_result(
                lab,
                campaign_id,
                "nothing to do: the campaign is finished (records of a "
                "finished campaign are final; start a new one with `rsilab run`)",
            )
        seed = int(campaign.settings.get("seed", seed))
        with acquire_lease(lab.store, campaign.id) as lease, lease.keep_alive():
            recover_campaign(lab.store, lease)
            runner = _Runner(lab, task, services, campaign.id, budget, workers, seed, on_progress)
            state = runner.loop(lease.check)
            set_campaign_state(lab, campaign.id, state)
        return campaign_result(lab, campaign.id, f"campaign {state}")
    finally:
        if own:
            services.close()


class _Runner:
    """One run of the loop; see the module docstring for the order of its steps."""

    def __init__(
        self,
        lab: Lab,
        task: Task,
        services: LabServices,
        campaign_id: str,
        budget: Budget,
        workers: int,
        seed: int,
        on_progress: ProgressFn | None,
    ) -> None:
        self.lab, self.task, self.budget, self.seed = lab, task, budget, seed
        self.workers = max(1, workers)
        self.campaign_id = campaign_id
        self.door = Door(lab, services, campaign_id, lab.path / "workspaces" / campaign_id)
        self.target = task.targets[0].name
        self.on_progress = on_progress
        self.deadline = time.monotonic() + budget.wall_s
        self.view = CampaignView.load(lab.store, campaign_id)

    # -- the loop ---------------------------------------------------------------------------

    def loop(self, check: Callable[[], None]) -> CampaignState:
        """Step until the budget is spent; ``stopped`` on KeyboardInterrupt or wall time."""
        try:
            while True:
                check()
                self.view = CampaignView.load(self.lab.store, self.campaign_id)
                if len(self.view.runs) >= self.budget.experiments:
                    self._say("campaign", "experiment budget spent")
                    self._conclude_ready()
                    return CampaignState.FINISHED
                if time.monotonic() > self.deadline:
                    self._say("campaign", "wall budget spent; resume to continue")
                    return CampaignState.STOPPED
                self.step()
        except KeyboardInterrupt:
            self._say("campaign", "interrupted; resume to continue")
            return CampaignState.STOPPED

    def step(self) -> None:
        """One action: a verification run or conclusion, a Main move, or an experiment."""
        view = self.view
        if not view.dag.directions:
            self._initial_directions()
            return
        for d in view.dag.frontier():
            if view.is_verify(d):
                runs = view.runs_in(d.id)
                if len(runs) < VERIFY_SEEDS:
                    parent = d.parents[0].parent_id
                    best = view.best(parent)
                    assert best is not None
                    self._experiment(d, best.config, f"verify: re-run {best.experiment_id}")
                else:
                    self._conclude(d)
                return
        if self._main_moves():
            return
        eligible = [d for d in view.dag.frontier() if not view.is_verify(d)]
        if not eligible:
            self._new_direction(None, "branch")
            return
        floor = self._noise_floor()
        chosen = choose_direction([view.stats(d.id, floor) for d in eligible], len(view.runs))
        direction = view.dag.directions[chosen]
        self._experiment(direction, None, "search")
        if len(self.view.runs_in(chosen)) % REVIEW_EVERY == 0:
            self._review(direction)

    # -- Main -------------------------------------------------------------------------------

    def _initial_directions(self) -> None:
        names = [k.name for k in self.task.search_space]
        size = max(1, -(-len(names) // 3))
        groups = [names[i : i + size] for i in range(0, len(names), size)] or [[]]
        for group in groups:
            title = f"tune {', '.join(group)}" if group else "re-run the system"
            self.door.main(
                "create_direction",
                title=title[:100],
                hypothesis=f"changing {', '.join(group) or 'nothing'} raises the dev "
                f"{self.target} score over the current version",
                plan=knobs_plan(group, "workers change only these knobs of config.json"),
            )
            self._say("direction", f"direction {title!r}")

    def _main_moves(self) -> bool:
        """Apply next_move to each open search direction; True when one changed the DAG."""
        view, floor = self.view, self._noise_floor()
        share = max(4, self.budget.experiments // 3)
        for d in view.dag.frontier():
            if view.is_verify(d) or not view.runs_in(d.id):
                continue
            move = next_move(view.stats(d.id, floor), noise_floor=floor, budget=share)
            if move == "continue":
                continue
            if move == "verify":
                self.door.main(
                    "update_direction",
                    direction_id=d.id,
                    status="promising",
                    conclusion="a gain above the noise floor; verifying it",
                )
                self.door.main(
                    "create_direction",
                    title=f"verify {d.title}"[:100],
                    hypothesis=f"the best config of {d.id} holds on fresh seeds",
                    plan=knobs_plan(knobs_of(d), "re-run the best config on fresh seeds"),
                    parents=[{"parent_id": d.id, "relation": "verify"}],
                )
                self._say("direction", f"verify {d.title!r}")
            elif move == "stop":
                self._close(d, "its share of the budget is spent")
            else:
                self._close(d, f"stagnating: {move}")
                self._new_direction(d, move)
            return True
        return False

    def _close(self, d: Direction, why: str) -> None:
        if not d.state.is_finished():
            self.door.main(
                "update_direction", direction_id=d.id, status="exhausted", conclusion=why
            )

    def _new_direction(self, parent: Direction | None, relation: str) -> None:
        names = [k.name for k in self.task.search_space]
        rng = random.Random(f"{self.seed}:direction:{len(self.view.dag.directions)}")
        old = set(knobs_of(parent)) if parent is not None else set()
        group = names
        for _ in range(20):
            group = sorted(rng.sample(names, min(len(names), rng.randint(1, 3))), key=names.index)
            if set(group) != old:
                break
        edges = [] if parent is None else [{"parent_id": parent.id, "relation": relation}]
        title = f"{relation}: tune {', '.join(group)}"
        self.door.main(
            "create_direction",
            title=title[:100],
            hypothesis=f"changing {', '.join(group)} raises the dev {self.target} score",
            plan=knobs_plan(group, "workers change only these knobs of config.json"),
            parents=edges,
        )
        self._say("direction", f"direction {title!r}")

    def _noise_floor(self) -> float:
        groups = []
        for d in self.view.dag.directions.values():
            if self.view.is_verify(d) and len(self.view.runs_in(d.id)) >= VERIFY_SEEDS:
                ids = [r.experiment_id for r in self.view.runs_in(d.id)]
                groups.append(dev_matrix(self.lab.store, ids, self.target))
        try:
            return noise_floor_from([g for g in groups if len(g) >= 2])
        except ValueError:
            return DEFAULT_NOISE_FLOOR

    # -- Worker -----------------------------------------------------------------------------

    def _experiment(self, d: Direction, config: dict[str, JsonValue] | None, why: str) -> None:
        n = len(self.view.runs) + 1
        worker = f"worker-{(n - 1) % self.workers + 1}"
        step = intents.begin(
            self.lab.store,
            self.campaign_id,
            f"{EXP_PREFIX}{n}",
            "experiment",
            {"direction_id": d.id},
        )
        if isinstance(step, intents.DoneIntent):
            return
        self.door.worker(worker, "prepare_workspace", overwrite=True)
        current = json.loads(self.door.worker(worker, "read_file", path="config.json")["text"])
        if config is None:
            config = self._propose(d, current, n)
        full = {**current, **config}
        self.door.worker(worker, "write_file", path="config.json", content=json.dumps(full))
        exp = self.door.worker(
            worker,
            "create_experiment",
            direction_id=d.id,
            description=f"{why}: {json.dumps(config, sort_keys=True)}",
            config=full,
        )["id"]
        score = self._train_and_eval(worker, exp, self.seed * 1000 + n)
        status = "succeeded" if score is not None else "failed"
        self.door.worker(
            worker,
            "finish_experiment",
            experiment_id=exp,
            status=status,
            summary=f"dev {self.target} {score}",
        )
        result = {
            "experiment_id": exp,
            "direction_id": d.id,
            "config": full,
            "score": score if score is not None else 0.0,
        }
        intents.complete(self.lab.store, step, result)
        self.view = CampaignView.load(self.lab.store, self.campaign_id)
        best = max(r.score for r in self.view.runs)
        self._say(
            "experiment",
            f"experiment {n}/{self.budget.experiments} [{d.title}] "
            f"dev {self.target} {result['score']:.4f} (best {best:.4f})",
            result["score"],
            best,
        )

    def _propose(self, d: Direction, current: dict[str, JsonValue], n: int) -> dict[str, JsonValue]:
        allowed = set(knobs_of(d))
        space = [k for k in self.task.search_space if k.name in allowed]
        ref = [r for r in self.view.runs if r.experiment_id in self.view.ref_ids]
        parents = [(r.config, r.score) for r in [*ref, *self.view.runs_in(d.id)]]
        if not parents:  # the campaign's first experiment: the head's own config
            return dict(current)
        tried = {config_key(r.config, self.task.search_space) for r in self.view.runs}
        rng = random.Random(f"{self.seed}:exp:{n}")
        for proposal in propose_configs(space, parents, rng, 20):
            full = {**current, **proposal}
            if config_key(full, self.task.search_space) not in tried:
                return proposal
        return dict(current)

    def _train_and_eval(self, worker: str, exp: str, seed: int) -> float | None:
        trained = self.door.worker(worker, "run_job", experiment_id=exp, kind="train", seed=seed)
        if trained["status"] != "succeeded":
            return None
        evaluated = self.door.worker(
            worker, "run_job", experiment_id=exp, kind="dev_eval", seed=seed, model=trained["model"]
        )
        scores = evaluated.get("dev", {}).get("scores", {})
        return float(scores[self.target]) if self.target in scores else None

    # -- Reviewer and conclusions ---------------------------------------------------------------

    def _review(self, d: Direction, treatment: list[str] | None = None) -> str | None:
        """File a review of ``d``'s best (or ``treatment``) against the reference; the
        review's verdict, or None when there is nothing to compare."""
        view = self.view
        best = view.best(d.id)
        ids = treatment or ([best.experiment_id] if best is not None else [])
        ref = view.ref_ids
        if not ids or not ref or set(ids) & set(ref):
            return None
        compared = self.door.reviewer(
            "compare_eval_samples",
            experiment_a=ids[0],
            experiment_b=ref[0],
            benchmark=self.target,
        )["benchmarks"][0]
        a = dev_matrix(self.lab.store, ids, self.target)
        b = dev_matrix(self.lab.store, ref, self.target)
        finding = review_pair(a, b, noise_floor=self._noise_floor(), verified=treatment is not None)
        rationale = (
            f"Dev {self.target}: {compared['mean_a']:.4f} for {ids[0]} against "
            f"{compared['mean_b']:.4f} for the reference {ref[0]}; {compared['a_higher']} "
            f"samples better, {compared['b_higher']} worse. "
            + ("Within noise." if finding.within_noise else f"Verdict {finding.verdict}.")
        )
        self.door.reviewer(
            "submit_review",
            experiment_ids=ids,
            baseline_ids=ref,
            direction_id=d.id,
            verdict=str(finding.verdict),
            recommendation=str(finding.recommendation),
            rationale=rationale,
        )
        self._say(
            "review", f"review of {d.title!r}: {finding.verdict}, advice {finding.recommendation}"
        )
        return str(finding.verdict)

    def _conclude_ready(self) -> None:
        """Conclude every verification whose re-runs are done: a proposal uses no experiment
        budget, so a gain verified with the last experiments is still put to the controller."""
        for d in self.view.dag.frontier():
            if self.view.is_verify(d) and len(self.view.runs_in(d.id)) >= VERIFY_SEEDS:
                self._conclude(d)
                self.view = CampaignView.load(self.lab.store, self.campaign_id)

    def _conclude(self, verify: Direction) -> None:
        view = self.view
        parent = view.dag.directions[verify.parents[0].parent_id]
        best = view.best(parent.id)
        runs = view.runs_in(verify.id)
        assert best is not None and view.ref_score is not None
        step = intents.begin(
            self.lab.store,
            self.campaign_id,
            f"{CONCLUDE_PREFIX}{verify.id}",
            "conclude",
            {"parent_id": parent.id},
        )
        if isinstance(step, intents.DoneIntent):
            return
        self._review(verify, [r.experiment_id for r in runs])
        mean = sum(r.score for r in runs) / len(runs)
        result: dict[str, JsonValue] = {"accepted": False, "mean": mean}
        if mean > view.ref_score:
            result |= self._propose_candidate(runs[-1].experiment_id, best.config)
        if result.get("accepted"):
            group: list[JsonValue] = [best.experiment_id, *(r.experiment_id for r in runs)]
            result |= {
                "ref_ids": group,
                "ref_score": (best.score + sum(r.score for r in runs)) / len(group),
            }
        intents.complete(self.lab.store, step, result)
        outcome = f"accepted as {result['label']}" if result.get("accepted") else "not accepted"
        self._close(verify, f"re-runs' mean {mean:.4f}; {outcome}")
        self._close(parent, f"verified; {outcome}")
        self.view = CampaignView.load(self.lab.store, self.campaign_id)
        if result.get("accepted"):
            self.door.main(
                "create_direction",
                title=f"continue {parent.title}"[:100],
                hypothesis=f"more gains along {parent.id} from the new version",
                plan=knobs_plan(knobs_of(parent), "build on the accepted version"),
                parents=[{"parent_id": parent.id, "relation": "continue"}],
            )

    def _propose_candidate(
        self, experiment_id: str, config: dict[str, JsonValue]
    ) -> dict[str, JsonValue]:
        worker = "worker-1"
        prepared = self.door.worker(worker, "prepare_workspace", overwrite=True)
        self.door.worker(worker, "write_file", path="config.json", content=json.dumps(config))
        proposed = self.door.worker(
            worker,
            "propose_candidate",
            experiment_id=experiment_id,
            base_version_id=prepared["base_version_id"],
        )
        status = self.door.worker(worker, "candidate_status", candidate_id=proposed["candidate_id"])
        accepted = status.get("verdict") == "accept"
        label = str(status.get("label", ""))
        self._say(
            "candidate",
            f"candidate {proposed['candidate_id']}: {status.get('verdict')}"
            + (f" -> {label}" if accepted else ""),
        )
        return {"accepted": accepted, "candidate_id": proposed["candidate_id"], "label": label}

    def _say(
        self, kind: str, message: str, score: float | None = None, best: float | None = None
    ) -> None:
        if self.on_progress is not None:
            self.on_progress(
                Progress(kind, message, len(self.view.runs), self.budget.experiments, score, best)
            )
