"""One proposal protocol for every search policy: same lab, baseline, budget, tools and judge.

A :class:`TaskLab` is a throwaway lab for one task: the task's baseline (H0/M0) is evaluated
once, in lineage ``main``, and every run gets a lineage of its own (named after its policy and
seed) whose first version is a copy of that baseline (:func:`fork_baseline`: the same harness,
models, seeds, evaluations and scores, so every run is judged against the very same baseline
numbers and the 6-seed baseline evaluation is paid once per task). One executor (one slot per
core) serves every run's jobs and the controller's.

A run (:func:`run_policy` or :func:`run_builtin`) opens its own campaign with an experiment budget.
Each experiment is one Experiment OS experiment made through the tools, as the built-in Workers make
it (:mod:`rsilab.orchestrator.builtin.worker._agent`): ``prepare_workspace`` (lineage head),
``read_file``/``write_file`` config.json, ``create_experiment``, ``run_job`` train and ``dev_eval``,
``finish_experiment``; the tools refuse an experiment past the budget. The ask/tell policies propose
once, at the end of the budget: their best-dev config among the feasible ones (:class:`Feasibility`;
none when that is the starting config), through ``propose_candidate`` (judged before the call
returns) and ``candidate_status``. The built-in policy
(:func:`rsilab.orchestrator.builtin.runner.run_campaign`) proposes as it does (after verifying).

What a run yields (:class:`RunResult`): the dev target score of each experiment in the order the
experiments were created (read back from the records, the same way for every policy), the
best-so-far curve, the final-tier target score of the lineage head at the end (the accepted
system, or the baseline when nothing was accepted), and what was proposed.
"""

from __future__ import annotations

import hashlib
import json
import tempfile
import threading
import time
from collections.abc import Collection, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import JsonValue

from benchmarks.search.policies import Config, Policy, make_policy
from rsilab.controller.lineage import copy_version, find_lineage, require_lineage
from rsilab.executors.local import LocalExecutor, available_cores
from rsilab.expos.services import LabServices
from rsilab.orchestrator import campaign as lifecycle
from rsilab.orchestrator.builtin._seeds import config_text, run_seed
from rsilab.orchestrator.builtin._state import NonTarget
from rsilab.orchestrator.builtin.ablation import Ablation
from rsilab.orchestrator.builtin.runner import run_campaign
from rsilab.orchestrator.builtin.team import TeamSettings, run_team_campaign
from rsilab.orchestrator.door import Door
from rsilab.records import (
    CampaignState,
    Candidate,
    CandidateState,
    DataTier,
    EndReason,
    Evaluation,
    EventDraft,
    Experiment,
    Job,
    Lineage,
    Role,
    SystemVersion,
)
from rsilab.sandbox.select import default_sandbox
from rsilab.store.lab import Lab
from rsilab.tasks import (
    HEAD,
    SECRET_FILE,
    VARIANT_KNOB,
    Budget,
    CodeVariant,
    Knob,
    Manifest,
    Task,
    apply_variant,
    lab_secret,
    load_manifest,
)

ACTOR = "bench-search"
BUILTIN = "rsilab"
"""The name of rsilab's built-in policy in results."""
WALL_S = 6 * 3600.0
"""Campaign wall budget: large, so that only the experiment budget ends a run."""


def split_secret(task: str) -> bytes:
    """The fixed split secret of ``task``'s benchmark lab: sha256 of a published string.

    A lab normally draws a random secret, so two sittings of a long benchmark would split the
    task's data differently and their runs (baseline included) would not be comparable. The
    benchmark fixes it instead; that the secret is public does not matter here, as no policy
    reads the lab folder, and every sitting on every machine splits alike.
    """
    return hashlib.sha256(f"rsilab-bench-search/{task}".encode()).digest()


def split_id(secret: bytes) -> str:
    """A short public name of a split secret (12 hex digits of its sha256)."""
    return hashlib.sha256(secret).hexdigest()[:12]


@dataclass
class TaskLab:
    """A throwaway lab for one task with its baseline evaluated (see the module docstring)."""

    task: Task
    lab: Lab
    executor: LocalExecutor
    baseline: SystemVersion
    baseline_s: float

    @property
    def target(self) -> str:
        """The benchmark every policy optimises: the task's first target."""
        return self.task.targets[0].name


@contextmanager
def task_lab(
    task: Task, slots: int | None = None, secret: bytes | None = None
) -> Iterator[TaskLab]:
    """A :class:`TaskLab` for ``task`` in a temporary folder (removed afterwards).

    With ``secret`` (32 bytes) the lab splits the task's data with it; without, it draws one.
    """
    with tempfile.TemporaryDirectory(prefix=f"rsilab-bench-search-{task.name}-") as tmp:
        lab = Lab.init(Path(tmp) / "lab")
        if secret is not None:
            (lab.path / SECRET_FILE).write_text(secret.hex())
            (lab.path / SECRET_FILE).chmod(0o600)
        lab_secret(lab.path)  # made (or read) before any thread reads it
        sandbox = default_sandbox(runtime=task.own_runtime(), shown=task.shown())
        executor = LocalExecutor(sandbox, lab.artifacts, slots or min(2, available_cores()))
        services = LabServices(lab, executor, judge_in_background=False)
        try:
            wall = time.perf_counter()
            baseline = services.controller(task).baseline(actor=ACTOR)
            yield TaskLab(task, lab, executor, baseline, time.perf_counter() - wall)
        finally:
            services.close()
            executor.shutdown()
            sandbox.close()
            lab.close()


def fork_baseline(lab: Lab, task: str, name: str, source: str = "main") -> SystemVersion:
    """Start lineage ``name`` of ``task`` with a copy of the head of lineage ``source``.

    The copy has the same harness, models, controller seeds, evaluations and scores, so the
    controller judges a candidate of lineage ``name`` against exactly the numbers it would use
    in ``source``; the fingerprints (private data, evaluator) are carried over too. Recorded
    as one ledger event. Raises UserError when ``source`` has no baseline and ConflictError
    when ``name`` exists already.
    """
    store = lab.store
    origin = require_lineage(store, task, source)
    head = store.get_as(origin.head_id, SystemVersion)
    copy = copy_version(
        head,
        lineage=name,
        decision=f"benchmark fork: copy of {head.id} ({task}/{source} {head.label})",
    )
    lineage = Lineage(
        task=task,
        name=name,
        head_id=copy.id,
        versions=[copy.id],
        private_data_sha256=origin.private_data_sha256,
        evaluator_sha256=origin.evaluator_sha256,
    )
    draft = EventDraft(
        actor=ACTOR,
        role=str(Role.HUMAN),
        action="baseline",
        detail=f"{task}/{name} {copy.label} (copy of {head.id})",
    )
    store.commit(draft, [copy, lineage])
    return copy


@dataclass
class RunResult:
    """What one run of one policy produced (see the module docstring)."""

    policy: str
    task: str
    seed: int
    budget: int
    dev_scores: list[float | None]
    """Dev target score of each experiment, in creation order (None: it failed)."""
    final: float
    """Final-tier target score of the lineage head at the end."""
    baseline_final: float
    accepted: int
    """Versions the run's proposals added to its lineage."""
    proposals: int
    seconds: float
    best_config: Config = field(default_factory=dict)
    """The config the run judged its best (empty: none named). A peer names it as its policy
    does (its best dev config, or its race's winner); rsilab's is the config it proposed last,
    recorded from 2026-12-04 on (empty in earlier runs)."""
    feasible: list[bool] = field(default_factory=list)
    """Per experiment: kept every non-target within tolerance of the first (empty: all did)."""
    reviews_followed: int = 0
    """Reviews of the run's campaign that Main followed and that state Main's own rule."""
    reviews_changing: int = 0
    """Of those, reviews whose advice differed from that rule (they changed the next move)."""
    commit: str = ""
    """The commit the run was measured at (set when it is kept; see ``search.results``)."""
    split: str = ""
    """:func:`split_id` of the lab's split secret ("" : a lab that drew its own)."""
    cpu_s: float = 0.0
    """Compute of the run: CPU seconds of every job of its campaign, from the job records (its
    experiments, re-runs included, and the controller's trainings and predicts for its
    proposals and their heads; the shared baseline evaluation is not counted)."""
    head_config: Config = field(default_factory=dict)
    """The knobs of the lineage head at the end: the accepted candidate's experiment config, or
    the starting config when nothing was accepted."""
    final_by_cpu: list[list[float]] = field(default_factory=list)
    """The final-tier target score of the lineage head against compute: ``(cpu_s, score)`` at
    the start (the baseline's score at 0) and at each acceptance (the CPU seconds of the jobs
    finished by the time it was decided)."""
    final_scores: dict[str, float] = field(default_factory=dict)
    """Final-tier score of the lineage head at the end on every benchmark, non-targets included
    (empty in runs kept before this field existed)."""
    baseline_scores: dict[str, float] = field(default_factory=dict)
    """The baseline's final-tier score on every benchmark (the same for every run of a lab)."""

    @property
    def experiments(self) -> int:
        return len(self.dev_scores)

    def _kept(self) -> list[float | None]:
        """Dev target scores, None where the experiment failed or was not feasible."""
        ok = self.feasible or [True] * len(self.dev_scores)
        return [s if keep else None for s, keep in zip(self.dev_scores, ok, strict=True)]

    def curve(self, length: int | None = None) -> list[float | None]:
        """Best feasible dev score after each experiment (None before the first), padded
        with its last value to ``length`` (default: the budget)."""
        out: list[float | None] = []
        best: float | None = None
        for score in self._kept():
            if score is not None and (best is None or score > best):
                best = score
            out.append(best)
        n = self.budget if length is None else length
        return out[:n] + [best] * (n - len(out))

    @property
    def best_dev(self) -> float | None:
        """The best feasible dev target score (None when no experiment was)."""
        scores = [s for s in self._kept() if s is not None]
        return max(scores) if scores else None


def _dev_scores(tl: TaskLab, campaign_id: str) -> tuple[list[float | None], list[bool]]:
    """Each experiment's latest dev target score (mean over samples; None when it has none)
    and whether it is feasible (:class:`Feasibility`, from the first experiment), in creation
    order: read back from the records the same way for every policy."""
    store = tl.lab.store
    experiments = sorted(
        store.query_as(Experiment, campaign_id=campaign_id), key=lambda e: e.created_at
    )
    latest: dict[tuple[str, str], Evaluation] = {}
    for e in store.query_as(Evaluation, campaign_id=campaign_id):
        if e.tier == DataTier.DEV and e.samples:
            known = latest.get((e.subject_id, e.benchmark))
            if known is None or e.created_at > known.created_at:
                latest[(e.subject_id, e.benchmark)] = e
    feasible = Feasibility(tl.task)
    scores: list[float | None] = []
    ok: list[bool] = []
    for exp in experiments:
        found = {
            bench.name: sum(s.score for s in found_eval.samples) / len(found_eval.samples)
            for bench in tl.task.benchmarks
            if (found_eval := latest.get((exp.id, bench.name))) is not None
        }
        scores.append(found.get(tl.target))
        ok.append(tl.target in found and feasible(found))
    return scores, ok


def compute_of(tl: TaskLab, campaign_id: str) -> tuple[float, list[list[float]]]:
    """(CPU seconds of every job of ``campaign_id``, the head's final-tier target score against
    compute): see :attr:`RunResult.cpu_s` and :attr:`RunResult.final_by_cpu`."""
    store = tl.lab.store
    jobs = sorted(
        (j for j in store.query_as(Job, campaign_id=campaign_id) if j.finished_at),
        key=lambda j: j.finished_at or "",
    )
    total = sum(j.resources.cpu_s for j in jobs)
    curve = [[0.0, tl.baseline.scores[tl.target].value]]  # lists: as kept runs read back
    accepted = sorted(
        (
            c
            for c in store.query_as(Candidate, campaign_id=campaign_id)
            if c.state is CandidateState.ACCEPTED and c.version_id and c.finished_at
        ),
        key=lambda c: c.finished_at or "",
    )
    for cand in accepted:
        spent = sum(
            j.resources.cpu_s for j in jobs if (j.finished_at or "") <= (cand.finished_at or "")
        )
        assert cand.version_id is not None
        version = store.get_as(cand.version_id, SystemVersion)
        curve.append([round(spent, 3), version.scores[tl.target].value])
    return round(total, 3), curve


def head_config(tl: TaskLab, lineage: str) -> Config:
    """The knobs of ``lineage``'s head (see :attr:`RunResult.head_config`)."""
    store = tl.lab.store
    head_id = require_lineage(store, tl.task.name, lineage).head_id
    for cand in store.query_as(Candidate, fields={"version_id": head_id}):
        if cand.experiment_id is not None:
            return _knobs_of(tl, cand.experiment_id)
    return {k.name: k.default for k in tl.task.search_space}


def proposed_config(tl: TaskLab, campaign_id: str) -> Config:
    """The knobs of the last config ``campaign_id`` proposed: what the built-in policy judged
    its best (empty when it proposed nothing). A peer's best config is the one it proposed,
    so the two read alike (:attr:`RunResult.best_config`)."""
    candidates = tl.lab.store.query_as(Candidate, campaign_id=campaign_id)
    proposed = [c for c in candidates if c.experiment_id is not None]
    if not proposed:
        return {}
    last = max(proposed, key=lambda c: c.created_at)
    assert last.experiment_id is not None
    return _knobs_of(tl, last.experiment_id)


def _knobs_of(tl: TaskLab, experiment_id: str) -> Config:
    config = tl.lab.store.get_as(experiment_id, Experiment).config
    return {k.name: config[k.name] for k in tl.task.search_space if k.name in config}


def _outcome(tl: TaskLab, lineage: str, campaign_id: str) -> tuple[float, int, int]:
    """(final-tier target score of the head, versions accepted, proposals) of a run."""
    store = tl.lab.store
    head_id = require_lineage(store, tl.task.name, lineage).head_id
    head = store.get_as(head_id, SystemVersion)
    candidates = store.query_as(Candidate, campaign_id=campaign_id)
    accepted = sum(1 for c in candidates if c.state is CandidateState.ACCEPTED)
    return head.scores[tl.target].value, accepted, len(candidates)


def _services(tl: TaskLab, lineage: str) -> LabServices:
    if find_lineage(tl.lab.store, tl.task.name, lineage) is None:
        fork_baseline(tl.lab, tl.task.name, lineage)
    return LabServices(tl.lab, tl.executor, lineage=lineage, judge_in_background=False)


def run_builtin(
    tl: TaskLab,
    seed: int,
    budget: int,
    workers: int = 1,
    ablate: Collection[Ablation] = (),
    name: str = BUILTIN,
) -> RunResult:
    """rsilab's built-in policy (:func:`run_campaign`) on a fresh lineage forked from the
    baseline, with ``budget`` experiments and ``workers`` Workers, without the parts in
    ``ablate``; its results are called ``name``."""
    lineage = f"{name.replace(' ', '-')}-{seed}"
    services = _services(tl, lineage)
    wall = time.perf_counter()
    try:
        result = run_campaign(
            tl.lab,
            tl.task,
            budget=Budget(experiments=budget, wall_s=WALL_S),
            workers=workers,
            seed=seed,
            services=services,
            ablate=ablate,
        )
    finally:
        services.close()
    best = proposed_config(tl, result.campaign_id)
    run = _result(tl, name, seed, budget, lineage, result.campaign_id, wall, best)
    if result.measures is not None:
        run.reviews_followed = result.measures.reviews_stating_default
        run.reviews_changing = result.measures.reviews_changing_action
    return run


TEAM_SIZE = 3
TEAM_MODES: dict[str, TeamSettings] = {
    "team: independent": TeamSettings(share_memory=False, orientations=False),
    "team: shared memory": TeamSettings(orientations=False),
    "team: memory + orientations": TeamSettings(),
}
"""Research teams of :data:`TEAM_SIZE` (``rsilab run --team``): researchers that share nothing
and are each led alone; that share runs and findings, each led alone; and the full team, whose
Leader gives each an orientation."""


def run_team(tl: TaskLab, seed: int, budget: int, mode: str) -> RunResult:
    """A built-in research team (:func:`run_team_campaign`) in mode ``mode`` of
    :data:`TEAM_MODES`, on a fresh lineage forked from the baseline, ``budget`` experiments
    for the whole team."""
    lineage = f"{mode.replace(' ', '-').replace(':', '').replace('+', 'and')}-{seed}"
    services = _services(tl, lineage)
    wall = time.perf_counter()
    try:
        result = run_team_campaign(
            tl.lab,
            tl.task,
            team=TEAM_SIZE,
            budget=Budget(experiments=budget, wall_s=WALL_S),
            seed=seed,
            services=services,
            settings=TEAM_MODES[mode],
        )
    finally:
        services.close()
    return _result(tl, mode, seed, budget, lineage, result.campaign_id, wall)


def _result(
    tl: TaskLab,
    policy: str,
    seed: int,
    budget: int,
    lineage: str,
    campaign_id: str,
    started: float,
    best_config: Config | None = None,
) -> RunResult:
    """The :class:`RunResult` of a finished run (``started``: its perf_counter start)."""
    final, accepted, proposals = _outcome(tl, lineage, campaign_id)
    scores, feasible = _dev_scores(tl, campaign_id)
    cpu_s, final_by_cpu = compute_of(tl, campaign_id)
    return RunResult(
        policy,
        tl.task.name,
        seed,
        budget,
        scores,
        final,
        tl.baseline.scores[tl.target].value,
        accepted,
        proposals,
        time.perf_counter() - started,
        best_config or {},
        feasible,
        cpu_s=cpu_s,
        head_config=head_config(tl, lineage),
        final_by_cpu=final_by_cpu,
        final_scores=_head_scores(tl, lineage),
        baseline_scores={name: i.value for name, i in tl.baseline.scores.items()},
    )


def _head_scores(tl: TaskLab, lineage: str) -> dict[str, float]:
    """The final-tier score of ``lineage``'s head on every benchmark."""
    store = tl.lab.store
    head = store.get_as(require_lineage(store, tl.task.name, lineage).head_id, SystemVersion)
    return {name: interval.value for name, interval in head.scores.items()}


class _Experimenter:
    """Runs experiments of one campaign through the tools, as the built-in Workers do."""

    def __init__(self, tl: TaskLab, door: Door, seed: int, direction_id: str) -> None:
        self.tl, self.door, self.seed, self.direction_id = tl, door, seed, direction_id
        self._lock = threading.Lock()
        self._n = 0
        self._runs: dict[str, int] = {}

    def run(self, config: Config, worker: str) -> tuple[str, dict[str, float]]:
        """(experiment id, dev score of each benchmark; empty when a job failed) of
        ``config`` (knobs written over the head's config file, the code variant applied) in
        ``worker``'s workspace."""
        with self._lock:  # the k-th run of a config takes the k-th seed, as rsilab's Workers do
            self._n += 1
            n = self._n
            key = config_text(config)
            self._runs[key] = ordinal = self._runs.get(key, 0) + 1
        door = self.door
        door.worker(worker, "prepare_workspace", overwrite=True)
        full = self._write_system(worker, config)
        exp = str(
            door.worker(
                worker,
                "create_experiment",
                direction_id=self.direction_id,
                description=f"[exp:{n}] {json.dumps(config, sort_keys=True)}",
                config=full,
            )["id"]
        )
        job_seed = run_seed(self.seed, ordinal)
        scores: dict[str, float] = {}
        model: dict[str, Any] = {}
        trained: dict[str, Any] = {"status": "succeeded"}
        if self.manifest.trains:  # else predict alone is the system
            trained = door.worker(worker, "run_job", experiment_id=exp, kind="train", seed=job_seed)
            model = {"model": trained.get("model")}
        if trained["status"] == "succeeded":
            evaluated = door.worker(
                worker, "run_job", experiment_id=exp, kind="dev_eval", seed=job_seed, **model
            )
            if evaluated["status"] == "succeeded":
                found = evaluated.get("dev", {}).get("scores", {})
                if self.tl.target in found:
                    scores = {name: float(value) for name, value in found.items()}
        door.worker(
            worker,
            "finish_experiment",
            experiment_id=exp,
            status="succeeded" if scores else "failed",
            summary=f"dev {self.tl.target} {scores.get(self.tl.target)}",
        )
        return exp, scores

    @property
    def manifest(self) -> Manifest:
        return load_manifest(self.tl.task.harness)

    def _write_system(self, worker: str, config: Config) -> dict[str, JsonValue]:
        """Make ``worker``'s workspace (prepared from the head) the system ``config`` names,
        as the built-in Workers do: its code variant applied, its knobs written over the config
        file; what the config file then holds (the experiment's recorded config)."""
        door, name = self.door, self.manifest.config
        variant = self.variants.get(str(config.get(VARIANT_KNOB, HEAD)))
        if variant is not None:

            def read(path: str) -> str:
                return str(door.worker(worker, "read_file", path=path)["text"])

            for path, text in apply_variant(variant, read).items():
                door.worker(worker, "write_file", path=path, content=text)
        knobs = {k: v for k, v in config.items() if k != VARIANT_KNOB}
        if name is None:
            return {}
        current = json.loads(door.worker(worker, "read_file", path=name)["text"])
        full: dict[str, JsonValue] = {**current, **knobs}
        door.worker(worker, "write_file", path=name, content=json.dumps(full))
        return full

    @property
    def variants(self) -> dict[str, CodeVariant]:
        return {v.name: v for v in self.tl.task.code_variants}

    def propose(self, experiment_id: str, config: Config) -> dict[str, Any]:
        """Propose ``config`` (over the head's config file, its code variant applied) as the
        system of ``experiment_id``; the controller's verdict (judged before this returns)."""
        door, worker = self.door, "proposer"
        prepared = door.worker(worker, "prepare_workspace", overwrite=True)
        self._write_system(worker, config)
        proposed = door.worker(
            worker,
            "propose_candidate",
            experiment_id=experiment_id,
            base_version_id=prepared["base_version_id"],
        )
        return door.worker(worker, "candidate_status", candidate_id=proposed["candidate_id"])


def searched_space(task: Task) -> list[Knob]:
    """What an ask/tell peer searches, as the built-in policy does: the task's knobs (none
    without a config file) and its code variants as one choice knob."""
    knobs = list(task.search_space) if load_manifest(task.harness).config is not None else []
    variant = task.variant_knob()
    return knobs if variant is None else [*knobs, variant]


def run_policy(tl: TaskLab, name: str, seed: int, budget: int, workers: int = 1) -> RunResult:
    """The ask/tell policy ``name`` (:func:`~benchmarks.search.policies.make_policy`) on a
    fresh lineage forked from the baseline: ``budget`` experiments, up to ``workers`` at once,
    then one proposal of the best-dev config (none when every experiment failed). It runs
    through the campaign lifecycle as every rsilab run does (lease, recovery, ending)."""
    lineage = f"{name}-{seed}"
    services = _services(tl, lineage)
    wall = time.perf_counter()
    peer = _PeerPolicy(tl, name, seed, budget, workers)
    try:
        result = lifecycle.run_policy(
            tl.lab, tl.task, peer, budget=Budget(experiments=budget, wall_s=WALL_S),
            services=services,
        )  # fmt: skip
    finally:
        services.close()
    return _result(tl, name, seed, budget, lineage, result.campaign_id, wall, peer.best_config)


class _PeerPolicy(lifecycle.CampaignPolicy):
    """A peer's ask/tell search as a campaign policy: one direction, its experiments, then
    one proposal of the best feasible dev config."""

    def __init__(self, tl: TaskLab, name: str, seed: int, budget: int, workers: int) -> None:
        self.tl, self.name, self.seed, self.budget, self.workers = tl, name, seed, budget, workers
        self.best_config: Config = {}

    def settings(self) -> dict[str, Any]:
        return {
            "agents": self.name,
            "budget": f"experiments={self.budget}",
            "workers": self.workers,
            "seed": self.seed,
        }

    def run(self, session: lifecycle.CampaignSession) -> lifecycle.Ending:
        tl, name, cid = self.tl, self.name, session.campaign_id
        door = Door(tl.lab, session.services, cid, tl.lab.path / "workspaces" / cid)
        direction = door.main(
            "create_direction",
            title=f"{name} search",
            hypothesis=f"{name} over the declared search space finds a better config",
        )
        runner = _Experimenter(tl, door, self.seed, str(direction["id"]))
        non_targets = [
            NonTarget(b.name, b.tolerance, b.higher_is_better)
            for b in tl.task.benchmarks
            if not b.target
        ]
        policy = make_policy(
            name, searched_space(tl.task), self.seed, self.budget, self.workers, non_targets
        )
        results = _drive(policy, runner, self.budget, self.workers, Feasibility(tl.task))
        choose = getattr(policy, "choice", None)
        if choose is not None:  # the raced peer: its race's winner, once
            chosen = choose()
            if chosen is not None:
                self.best_config = chosen
                same = [exp for exp, cfg, _, _ in results if cfg == chosen]
                runner.propose(same[-1], chosen)
        elif ok := [
            (exp, cfg, s) for exp, cfg, s, feasible in results if s is not None and feasible
        ]:
            exp, self.best_config, _ = max(ok, key=lambda r: r[2])
            if exp != results[0][0]:  # the starting config is the baseline already
                runner.propose(exp, self.best_config)
        return lifecycle.Ending(
            CampaignState.FINISHED, EndReason.BUDGET_SPENT, f"{name}: {len(results)} experiments"
        )


class Feasibility:
    """Whether an experiment's dev scores keep every non-target benchmark within its
    tolerance of the reference's (the first experiment, the starting config)."""

    def __init__(self, task: Task) -> None:
        self.non_targets = [b for b in task.benchmarks if not b.target]
        self.reference: dict[str, float] | None = None

    def __call__(self, scores: dict[str, float]) -> bool:
        if self.reference is None:
            self.reference = scores  # the first result told is the reference's
            return True
        for bench in self.non_targets:
            if bench.name not in scores or bench.name not in self.reference:
                return False
            sign = 1.0 if bench.higher_is_better else -1.0
            if sign * (scores[bench.name] - self.reference[bench.name]) < -bench.tolerance:
                return False
        return True


def _oriented(task: Task, scores: dict[str, float]) -> dict[str, float] | None:
    """Dev scores with every lower-is-better benchmark negated (None: the run failed)."""
    if not scores:
        return None
    sign = {b.name: 1.0 if b.higher_is_better else -1.0 for b in task.benchmarks}
    return {name: sign.get(name, 1.0) * value for name, value in scores.items()}


def _drive(
    policy: Policy, runner: _Experimenter, budget: int, workers: int, feasible: Feasibility
) -> list[tuple[str, Config, float | None, bool]]:
    """Ask, run, tell until ``budget`` experiments are done, up to ``workers`` at once, each
    in a free Worker's own workspace; (experiment id, config, dev target score, feasible) of
    each, in completion order. The first ask (the starting config, the reference of
    ``feasible``) runs alone."""
    done: list[tuple[str, Config, float | None, bool]] = []
    free = [f"worker-{i}" for i in range(workers, 0, -1)]
    asked = 0
    target = runner.tl.target
    with ThreadPoolExecutor(max_workers=workers) as pool:
        running: dict[Future[tuple[str, dict[str, float]]], tuple[int, Config, str]] = {}
        while asked < budget or running:
            while asked < budget and free and (done or not running):
                ticket, config = policy.ask()
                worker = free.pop()
                running[pool.submit(runner.run, config, worker)] = (ticket, config, worker)
                asked += 1
            finished, _ = wait(running, return_when=FIRST_COMPLETED)
            for future in finished:
                ticket, config, worker = running.pop(future)
                free.append(worker)
                exp, scores = future.result()
                score = scores.get(target)
                ok = score is not None and feasible(scores)
                tell_scores = getattr(policy, "tell_scores", None)
                if tell_scores is not None:  # a policy that weighs every benchmark itself
                    tell_scores(ticket, target, _oriented(runner.tl.task, scores))
                else:
                    policy.tell(ticket, score, ok)
                done.append((exp, config, score, ok))
    return done
