"""A lab holding one long campaign on ``synthetic``, written quickly, for the dashboard.

:func:`generate_lab` writes, through the store's own ``commit``, the records a campaign of
the built-in policy leaves: the baseline ``H0/M0`` evaluated by the controller on the private
tiers, a research DAG of directions (continue, verify, branch and revise edges; every state),
experiments proposed by the built-in Worker's search with their train and dev-eval jobs and
per-sample dev evaluations of each benchmark, reviews whose comparisons are computed from the
records, candidates judged by the controller's own rule
(:func:`~rsilab.controller.acceptance.decide`), the versions it accepted, protocol flags,
findings and a revised skill. Scores follow the task's known truth: a trained quality is
``true_score`` plus seed noise, and a sample is right when its fixed uniform draw falls under
it, as synthetic's ``predict`` answers; so dev scores, reviews and decisions look as a real
campaign's do, and every blob a record names is stored (``rsilab verify`` passes).

What differs from a real run, and why: nothing is executed (jobs are recorded, not run) and
tool calls are written as the dispatcher writes them without passing through it, so 10,000
experiments take a minute or two rather than hours (most of it the store's own work:
canonical JSON and hashing of each record). Each experiment still gets its own
``create_experiment`` and ``finish_experiment`` events naming it; the jobs and dev
evaluations of a batch of experiments share one event. A trained quality is kept to two
decimals, so models and predictions repeat and the blob folder stays small.
"""

from __future__ import annotations

import hashlib
import json
import random
import time
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np

from rsilab.agents.builtin.search import config_key, propose_configs
from rsilab.controller.acceptance import decide
from rsilab.controller.jobs import CONTROLLER_ACTOR
from rsilab.controller.lineage import next_label
from rsilab.controller.stats import avg_at_k, pass_at_k
from rsilab.expos.guards import GuardRefusal
from rsilab.expos.tools.review import compute_comparison
from rsilab.memory.builtin_skills import (
    VERIFY_SKILL,
    VERIFY_TEXT,
    ensure_builtin_skills,
    verify_code,
)
from rsilab.memory.revisions import revise_skill
from rsilab.orchestrator.measures import DEFAULT_RULE_NOTE
from rsilab.records import (
    Campaign,
    CampaignState,
    Candidate,
    CandidateState,
    DataTier,
    Direction,
    DirectionChange,
    DirectionEdge,
    DirectionState,
    EdgeRelation,
    Evaluation,
    EventDraft,
    Experiment,
    ExperimentState,
    Finding,
    FindingClaim,
    FindingStatus,
    FlagStage,
    Interval,
    Job,
    JobInputs,
    JobKind,
    JobStatus,
    Lineage,
    Metric,
    MetricSource,
    Outcome,
    ProtocolFlag,
    Recommendation,
    Record,
    Resources,
    Review,
    Role,
    SampleScore,
    SystemVersion,
    Verdict,
    new_id,
    utc_now,
)
from rsilab.store.lab import Lab
from rsilab.store.ledger import args_digest, canonical_json
from rsilab.tasks import Task, get_task
from rsilab.tasks.builtin.synthetic import SAMPLES_PER_TIER, noise_sd, true_score

WORKERS = 8
BATCH = 100
"""Experiments whose jobs and dev evaluations share one event."""
REVIEW_EVERY, REVIEW_GROUP = 250, 25
"""A direction is reviewed after this many new experiments and when it ends; a review
compares at most ``REVIEW_GROUP`` experiments on each side (the tool takes 50 in all)."""
BASELINE_SEEDS, CANDIDATE_SEEDS = 6, 3
FAILED, CANCELLED, FLAGGED = 0.05, 0.015, 0.005
"""Shares of experiments whose train job fails, that are cancelled, that draw a flag."""
ROOT_KNOBS = (("lr", "width"), ("dropout", "epochs"), ("optimizer",))
"""The built-in Main agent's first directions."""
RELATION_P = {
    EdgeRelation.CONTINUE: 0.4,
    EdgeRelation.VERIFY: 0.2,
    EdgeRelation.BRANCH: 0.25,
    EdgeRelation.REVISE: 0.15,
}
TITLES: dict[EdgeRelation | None, tuple[str, str]] = {
    None: ("tune {names}", "changing {names} raises the dev quality score"),
    EdgeRelation.CONTINUE: ("tune {names} further from #{p}", "more steps on {names} help"),
    EdgeRelation.VERIFY: ("verify #{p}'s best on fresh seeds", "#{p}'s best keeps its gain"),
    EdgeRelation.BRANCH: ("tune {names} from #{p}'s best", "{names} matter from #{p}'s best"),
    EdgeRelation.REVISE: ("revise #{p}: tune {names} again", "#{p} moved {names} the wrong way"),
}
"""(title, hypothesis) of a direction by the edge it grew along."""
FLAGS = (
    (FlagStage.ACCESS, "path_outside_workspace", "read_file", "path '../../final.jsonl'"),
    (FlagStage.ACCESS, "tool_not_allowed_for_role", "update_direction", "a Main agent's tool"),
    (FlagStage.TRAINING, "unrecorded_weights", "run_job", "a model no recorded job made"),
)
"""Refusals a worker draws: (stage, rule, tool, what it tried)."""
TRACEBACK = (
    "Traceback (most recent call last):\n"
    '  File "/workspace/train.py", line 20, in main\n'
    "    config = json.loads(Path(args.config).read_text())\n"
    "json.decoder.JSONDecodeError: Expecting value: line 1 column 1 (char 0)\n"
)
"""What a failed train job left on stderr (the worker's edit broke config.json)."""
DATA_SHA256 = {n: hashlib.sha256(n.encode()).hexdigest() for n in ("dev.jsonl", "train.jsonl")}
"""Fingerprints of a train job's data folder (fingerprints only: no blob is promised)."""
TRUE_MARGIN = {"quality": 0.05, "robustness": 0.02}
"""How far a well-judged proposal's true scores lie above the head's, so that the rule's
intervals (about 0.035 either side here) show the target's gain and show the other not
falling past its tolerance."""
PRIVATE = (DataTier.ACCEPT, DataTier.FINAL)
Key = tuple[str, DataTier]


@cache
def _avg_at_1(n: int, right: int) -> Interval:
    """``avg_at_k`` of one epoch of ``n`` 0/1 scores with ``right`` ones: it depends on nothing
    else, and computing it afresh for 20,000 evaluations would take seconds."""
    return avg_at_k([[1.0] * right + [0.0] * (n - right)])


def _final_scores(evaluations: list[Evaluation]) -> dict[str, Interval]:
    """Per benchmark, the final tier's avg@k: what a version's ``scores`` hold."""
    return {
        e.benchmark: next(v for k, v in e.aggregates.items() if k.startswith("avg@"))
        for e in evaluations
        if e.tier is DataTier.FINAL
    }


@dataclass(frozen=True)
class _Samples:
    """A tier of a benchmark: sample ids, each sample's uniform draw and its label."""

    ids: list[str]
    u: np.ndarray
    labels: np.ndarray


@dataclass
class _Judged:
    """One controller evaluation: jobs, seeds, a model per seed, evaluations, accept scores."""

    jobs: list[Job]
    seeds: list[int]
    models: list[str]
    evaluations: list[Evaluation]
    accept: dict[Key, np.ndarray]


@dataclass
class _Node:
    """A direction, the config its experiments start from, and what it has done."""

    direction: Direction
    number: int
    knobs: tuple[str, ...]
    base: dict[str, Any]
    relation: EdgeRelation | None = None
    exps: list[Experiment] = field(default_factory=list)
    reviews: list[Review] = field(default_factory=list)
    reviewed: int = 0


class _Writer:
    """Blobs, scores and events: what every part of the campaign writes with."""

    def __init__(self, lab: Lab, task: Task, rng: np.random.Generator, samples: int) -> None:
        self.store, self.artifacts, self.task, self.rng = lab.store, lab.artifacts, task, rng
        self.benches = [b.name for b in task.benchmarks]
        self.noise = noise_sd()
        self.samples: dict[Key, _Samples] = {}
        for b in self.benches:
            self.samples[(b, DataTier.DEV)] = self._tier(b, DataTier.DEV, samples)
            for tier in PRIVATE:
                self.samples[(b, tier)] = self._tier(b, tier, SAMPLES_PER_TIER[tier])
        self._known: set[str] = set()
        self._predicted: dict[str, str] = {}
        harness = self.artifacts.put_tree(task.harness)
        self.harness = harness.sha256
        self.harness_files = [e for e in harness.manifest if e["path"] != "config.json"]
        self.empty = self.put(b"")
        self.campaign_id: str | None = None

    def _tier(self, bench: str, tier: DataTier, n: int) -> _Samples:
        if tier is DataTier.DEV:
            ids = [f"{bench}-{i}" for i in range(n)]
        else:  # a real lab re-keys private ids with its secret: opaque hex
            ids = [f"{tier}-{int(x):012x}" for x in self.rng.integers(0, 2**48, n)]
        return _Samples(ids, self.rng.random(n), self.rng.integers(0, 10, n))

    def put(self, data: bytes) -> str:
        """Store ``data`` as a blob; its address. Each distinct blob is written once: the
        store would hash and copy it again only to find it there."""
        sha = hashlib.sha256(data).hexdigest()
        if sha not in self._known:
            self._known.add(sha)
            self.artifacts.put_bytes(data)
        return sha

    def commit(self, action: str, writes: list[Record], *, actor: str, detail: str) -> None:
        """An event of a principal: ``actor`` is the controller or the orchestrator."""
        role = str(Role.CONTROLLER)
        draft = EventDraft(
            actor=actor, role=role, action=action, campaign_id=self.campaign_id, detail=detail
        )
        self.store.commit(draft, writes)

    def tool_call(
        self,
        actor: str,
        role: Role,
        tool: str,
        args: dict[str, Any],
        writes: list[Record],
        refusal: GuardRefusal | None = None,
    ) -> None:
        """The event the dispatcher writes for one call of ``tool``, with what it staged."""
        draft = EventDraft(
            actor=actor,
            role=str(role),
            action="tool_call",
            campaign_id=self.campaign_id,
            tool=tool,
            args_digest=args_digest(args),
            outcome=Outcome.OK if refusal is None else Outcome.DENIED,
            error=None if refusal is None else refusal.to_dict(),
            cost=Resources(wall_s=round(float(self.rng.uniform(0.0005, 0.01)), 6)),
        )
        self.store.commit(draft, writes)

    def tree(self, config: dict[str, Any]) -> str:
        """The harness with ``config.json`` replaced, as a stored tree (the manifest layout of
        ``ArtifactStore.put_tree``): the other files are stored once, so a new config costs
        two small blobs."""
        text = (json.dumps(config, indent=2) + "\n").encode()
        entry = {"path": "config.json", "mode": 0o644, "sha256": self.put(text), "size": len(text)}
        entries = sorted([*self.harness_files, entry], key=lambda e: str(e["path"]))
        return self.put(canonical_json({"tree": entries}).encode())

    def train(self, config: dict[str, Any], seeds: int) -> tuple[list[str], dict[str, np.ndarray]]:
        """Train ``config`` on ``seeds`` seeds: each seed's stored model, and per benchmark
        each seed's quality (the truth plus seed noise, to two decimals)."""
        quality = {
            b: np.clip(true_score(config, "base", b) + self.rng.normal(0, self.noise, seeds), 0, 1)
            for b in self.benches
        }
        quality = {b: np.round(q, 2) for b, q in quality.items()}
        models = [
            self.put(json.dumps({"quality": {b: float(q[i]) for b, q in quality.items()}}).encode())
            for i in range(seeds)
        ]
        return models, quality

    def predict(self, model: str, quality: dict[str, np.ndarray]) -> str:
        """The stored stdout of ``predict.py`` on the dev tier with ``model`` (whose quality
        per benchmark is ``quality``): its output depends on the model alone."""
        if model not in self._predicted:
            lines = []
            for b, q in quality.items():
                s = self.samples[(b, DataTier.DEV)]
                answers = np.where(s.u < q[0], s.labels, (s.labels + 1) % 10).tolist()
                lines += [
                    f'{{"id": "{i}", "output": {a}}}\n' for i, a in zip(s.ids, answers, strict=True)
                ]
            self._predicted[model] = self.put("".join(lines).encode())
        return self._predicted[model]

    def scores(self, key: Key, quality: np.ndarray) -> np.ndarray:
        """``scores[seed][sample]``: right where the sample's draw is under the quality."""
        return (self.samples[key].u[None, :] < quality[:, None]).astype(float)

    def evaluation(
        self, subject: str, key: Key, scores: np.ndarray, seeds: list[int], in_campaign: bool
    ) -> Evaluation:
        """An evaluation as the controller records it (dev: avg@1 only, as agents' are)."""
        bench, tier = key
        ids, k = self.samples[key].ids, len(seeds)
        if tier.is_private:
            aggregates = {f"avg@{k}": avg_at_k(scores), f"pass@{k}": pass_at_k(scores)}
        else:
            aggregates = {"avg@1": _avg_at_1(len(ids), int(scores.sum()))}
        return Evaluation(
            campaign_id=self.campaign_id if in_campaign else None,
            benchmark=bench,
            tier=tier,
            subject_id=subject,
            metric=self.task.benchmark(bench).scorer,
            samples=[
                SampleScore(sample_id=sid, epoch=e, seed=seeds[e], score=float(v))
                for e, row in enumerate(scores.tolist())
                for sid, v in zip(ids, row, strict=True)
            ],
            aggregates=aggregates,
            evaluator=CONTROLLER_ACTOR,
        )

    def job(self, kind: JobKind, inputs: JobInputs, actor: str, **fields: Any) -> Job:
        """A succeeded job of a few milliseconds, as the executor records one."""
        cpu = float(self.rng.gamma(8.0, 0.009))
        used = Resources(
            cpu_s=cpu,
            wall_s=cpu + float(self.rng.gamma(2.0, 0.01)),
            peak_rss_mb=float(self.rng.normal(6.5, 0.4)),
        )
        defaults = {"stdout_sha256": self.empty, "stderr_sha256": self.empty, "exit_code": 0}
        return Job(
            **{"campaign_id": self.campaign_id, **defaults, **fields},
            kind=kind,
            status=JobStatus.SUCCEEDED,
            inputs=inputs,
            resources=used,
            actor=actor,
            finished_at=utc_now(),
        )

    def seeds(self, n: int) -> list[int]:
        return [int(s) for s in self.rng.integers(0, 2**31, n)]


class _Controller:
    """The Host Controller's records: baseline, controller jobs, candidates, versions."""

    def __init__(self, w: _Writer) -> None:
        self.w = w
        self.versions: list[SystemVersion] = []
        self.head_accept: dict[Key, np.ndarray] = {}
        self.candidates: list[Candidate] = []
        self.lineage: Lineage | None = None
        self.head_config: dict[str, Any] = {}

    def _evaluate(
        self, subject: str, config: dict[str, Any], harness: str, candidate_id: str | None
    ) -> _Judged:
        w = self.w
        seeds = w.seeds(CANDIDATE_SEEDS if candidate_id else BASELINE_SEEDS)
        models, quality = w.train(config, len(seeds))
        campaign = {
            "candidate_id": candidate_id,
            "campaign_id": w.campaign_id if candidate_id else None,
        }
        jobs = []
        for seed, model in zip(seeds, models, strict=True):
            argv = ["python", "train.py", "--seed", str(seed)]
            inputs = JobInputs(workspace_sha256=harness, seed=seed, argv=argv)
            jobs.append(
                w.job(
                    JobKind.CONTROLLER_TRAIN,
                    inputs,
                    CONTROLLER_ACTOR,
                    model_out_sha256=model,
                    **campaign,
                )
            )
            inputs = inputs.model_copy(
                update={"model_in_sha256": model, "argv": ["python", "predict.py"]}
            )
            jobs.append(w.job(JobKind.CONTROLLER_PREDICT, inputs, CONTROLLER_ACTOR, **campaign))
        matrices = {(b, t): w.scores((b, t), quality[b]) for b in w.benches for t in PRIVATE}
        evals = [
            w.evaluation(subject, k, m, seeds, candidate_id is not None)
            for k, m in matrices.items()
        ]
        accept = {k: m for k, m in matrices.items() if k[1] is DataTier.ACCEPT}
        return _Judged(jobs, seeds, models, evals, accept)

    def baseline(self) -> None:
        """H0/M0, the task's own harness, evaluated before the campaign (no campaign id)."""
        w = self.w
        version_id = new_id(SystemVersion.PREFIX)
        judged = self._evaluate(version_id, w.task.default_config(), w.harness, None)
        version = SystemVersion(
            id=version_id,
            task=w.task.name,
            label="H0/M0",
            harness_sha256=w.harness,
            model_sha256=judged.models[0],
            model_sha256s=judged.models,
            seeds=judged.seeds,
            scores=_final_scores(judged.evaluations),
            evaluation_ids=[e.id for e in judged.evaluations],
            decision="baseline: the task's initial system",
        )
        lineage = Lineage(task=w.task.name, head_id=version.id, versions=[version.id])
        w.commit("jobs_finished", list(judged.jobs), actor=CONTROLLER_ACTOR, detail="baseline")
        writes: list[Record] = [*judged.evaluations, version, lineage]
        w.commit("baseline", writes, actor=CONTROLLER_ACTOR, detail=f"{w.task.name}/main H0/M0")
        self.versions, self.head_accept, self.lineage = [version], judged.accept, lineage
        self.head_config = w.task.default_config()

    def judge(self, exp: Experiment, config: dict[str, Any]) -> None:
        """A Worker proposes ``exp``'s workspace; the controller decides it by its rule."""
        w, head, lineage = self.w, self.versions[-1], self.lineage
        assert exp.workspace_hash is not None and lineage is not None
        candidate = Candidate(
            campaign_id=w.campaign_id,
            task=w.task.name,
            parent_version_id=head.id,
            harness_sha256=exp.workspace_hash,
            experiment_id=exp.id,
            proposer=exp.created_by,
            proposal_index=len(self.candidates) + 1,
        )
        w.tool_call(exp.created_by, Role.WORKER, "propose_candidate", {"id": exp.id}, [candidate])
        judged = self._evaluate(candidate.id, config, exp.workspace_hash, candidate.id)
        writes: list[Record] = [*judged.jobs, *judged.evaluations]
        w.commit("candidate_evaluated", writes, actor=CONTROLLER_ACTOR, detail=candidate.id)
        index = candidate.proposal_index
        decision = decide(w.task, judged.accept, self.head_accept, proposal_index=index)
        update: dict[str, Any] = {
            "decisions": decision.decisions,
            "alpha": decision.alpha,
            "compared_to": head.id,
            "reason": decision.reason,
            "finished_at": utc_now(),
            "seeds": judged.seeds,
            "evaluation_ids": [e.id for e in judged.evaluations],
        }
        if not decision.accepted:
            done = candidate.model_copy(update={**update, "state": CandidateState.REJECTED})
            w.commit("candidate_rejected", [done], actor=CONTROLLER_ACTOR, detail=done.summary())
            self.candidates.append(done)
            return
        version = SystemVersion(
            task=w.task.name,
            label=next_label(self.versions, candidate.harness_sha256, judged.models),
            harness_sha256=candidate.harness_sha256,
            model_sha256=judged.models[0],
            model_sha256s=judged.models,
            seeds=judged.seeds,
            parent_id=head.id,
            candidate_id=candidate.id,
            scores=_final_scores(judged.evaluations),
            evaluation_ids=update["evaluation_ids"],
            decision=decision.reason,
        )
        update |= {"state": CandidateState.ACCEPTED, "version_id": version.id}
        done = candidate.model_copy(update=update)
        moved = lineage.model_copy(
            update={"head_id": version.id, "versions": [*lineage.versions, version.id]}
        )
        detail = f"{done.id} -> {version.label}"
        w.commit(
            "candidate_accepted", [done, version, moved], actor=CONTROLLER_ACTOR, detail=detail
        )
        self.candidates.append(done)
        self.versions.append(version)
        self.head_accept, self.lineage, self.head_config = judged.accept, moved, config


class _Research:
    """The agents' records, as their tools write them: directions, experiments, reviews,
    findings. The newest directions stay open, as in a campaign its budget cut off."""

    def __init__(
        self, w: _Writer, controller: _Controller, experiments: int, directions: int
    ) -> None:
        self.w, self.controller, self.rng = w, controller, w.rng
        self.search = random.Random(int(w.rng.integers(0, 2**63)))
        weights = w.rng.lognormal(0.0, 1.0, directions)
        weights[directions - min(3, directions // 10) :] = 0.0  # the newest: no experiment yet
        self.quotas = [int(n) for n in w.rng.multinomial(experiments, weights / weights.sum())]
        self.tail = directions - max(1, directions // 15)
        """Directions from this index on stay open or promising."""
        self.nodes: list[_Node] = []
        self.count = 0
        self.dev: dict[str, dict[str, float]] = {}
        self.configs: dict[str, dict[str, Any]] = {}
        self.succeeded: list[Experiment] = []
        self.proposed: set[str] = set()
        default = w.task.default_config()
        self.robust_floor = true_score(default, "base", "robustness")

    def run(self) -> None:
        """Every direction in order: open it, run its experiments in batches (reviewed as
        they go), conclude it; a candidate is proposed at even intervals."""
        total = len(self.quotas)
        proposals = max(2, total // 10)
        at = {(k + 1) * total // (proposals + 1) for k in range(proposals)}
        for index, quota in enumerate(self.quotas):
            node = self.open(index)
            while len(node.exps) < quota:
                self.batch(node, min(BATCH, quota - len(node.exps)))
                if len(node.exps) - node.reviewed >= REVIEW_EVERY:
                    self.review(node)
            if len(node.exps) > node.reviewed:
                self.review(node)
            self.conclude(node, open_ended=index >= self.tail)
            if index in at:
                self.propose()

    # --- directions -----------------------------------------------------------------------

    def best(self, node: _Node) -> Experiment | None:
        """The direction's experiment with the best dev quality."""
        done = [e for e in node.exps if e.id in self.dev]
        return max(done, key=lambda e: self.dev[e.id]["quality"], default=None)

    def open(self, index: int) -> _Node:
        """``create_direction`` by Main: the roots first, then children of good directions."""
        grown = [n for n in self.nodes if self.best(n) is not None]
        if index < len(ROOT_KNOBS) or not grown:
            knobs = ROOT_KNOBS[index % len(ROOT_KNOBS)]
            node = self._node(index, knobs, self.w.task.default_config(), [], None)
        else:
            node = self._child(index, grown)
        d = node.direction
        parents = [e.model_dump(mode="json") for e in d.parents]
        args = {"title": d.title, "hypothesis": d.hypothesis, "plan": d.plan, "parents": parents}
        self.w.tool_call("main", Role.MAIN, "create_direction", args, [d])
        self.nodes.append(node)
        return node

    def _child(self, index: int, grown: list[_Node]) -> _Node:
        """A direction grown from a good one (the better, the likelier), along a drawn edge."""
        bests = [self.best(n) for n in grown]
        quality = np.array([self.dev[b.id]["quality"] for b in bests if b is not None])
        weights = np.exp(20.0 * (quality - quality.max()))
        pick = int(self.rng.choice(len(grown), p=weights / weights.sum()))
        parent, best = grown[pick], bests[pick]
        assert best is not None
        relations = list(RELATION_P)
        relation = relations[int(self.rng.choice(len(relations), p=list(RELATION_P.values())))]
        knobs = parent.knobs
        if relation is EdgeRelation.BRANCH:
            names = [k.name for k in self.w.task.search_space]
            drawn = self.rng.choice(names, int(self.rng.integers(1, 3)), replace=False)
            knobs = tuple(sorted(str(k) for k in drawn))
        # workers start from the head version's config, carrying over what the parent
        # direction found for its knobs (a revise starts them over; a verify re-runs its best)
        base = dict(self.controller.head_config)
        if relation is EdgeRelation.VERIFY:
            base = dict(self.configs[best.id])
        elif relation is not EdgeRelation.REVISE:
            base |= {k: self.configs[best.id][k] for k in parent.knobs}
        edges = [DirectionEdge(parent_id=parent.direction.id, relation=relation)]
        other = grown[int(self.rng.integers(len(grown)))]
        if relation is EdgeRelation.BRANCH and other is not parent and self.rng.random() < 0.15:
            edges.append(DirectionEdge(parent_id=other.direction.id, relation=relation))
        return self._node(index, knobs, base, edges, relation, parent.number)

    def _node(
        self,
        index: int,
        knobs: tuple[str, ...],
        base: dict[str, Any],
        edges: list[DirectionEdge],
        relation: EdgeRelation | None,
        parent: int = 0,
    ) -> _Node:
        names = ", ".join(knobs)
        title, hypothesis = (t.format(names=names, p=parent) for t in TITLES[relation])
        direction = Direction(
            campaign_id=self.w.campaign_id,
            title=title,
            hypothesis=hypothesis,
            plan=f"workers change only these knobs of config.json\nknobs: {names}",
            parents=edges,
            created_by="main",
        )
        return _Node(direction, index + 1, knobs, dict(base), relation)

    # --- experiments ----------------------------------------------------------------------

    def plan(self, node: _Node, count: int) -> list[tuple[dict[str, Any], str]]:
        """(config, what it does) of the next ``count`` experiments: two reference runs to
        open a root, then the built-in Worker's proposals over the direction's knobs; re-runs
        of the start once those run out, and always in a verify direction."""
        out: list[tuple[dict[str, Any], str]] = []
        if node.relation is None and not node.exps:
            out += [(dict(node.base), "reference: the current version: {}")] * min(2, count)
        if node.relation is not EdgeRelation.VERIFY:
            space = [k for k in self.w.task.search_space if k.name in node.knobs]
            runs = [e for e in node.exps if e.id in self.dev]
            parents = [(self.configs[e.id], self.dev[e.id]["quality"]) for e in runs]
            tried = {config_key(self.configs[e.id], space) for e in node.exps}
            found = propose_configs(space, parents, self.search, count - len(out), tried=tried)
            out += [({**node.base, **c}, f"search: {json.dumps(c)}") for c in found]
        return out + [(dict(node.base), "re-run on a fresh seed")] * (count - len(out))

    def batch(self, node: _Node, count: int) -> None:
        """``create_experiment`` for ``count`` experiments, their jobs and dev evaluations in
        one event, then ``finish_experiment`` for each."""
        created: list[Experiment] = []
        best = self.best(node)
        for config, what in self.plan(node, count):
            self.count += 1
            worker = f"worker-{int(self.rng.integers(1, WORKERS + 1))}"
            exp = Experiment(
                campaign_id=self.w.campaign_id,
                direction_id=node.direction.id,
                description=f"[exp:{self.count}] {what}",
                config=config,
                parent_experiment_id=best.id if best is not None else None,
                workspace_hash=self.w.tree(config),
                created_by=worker,
            )
            args = {"direction_id": node.direction.id, "description": what, "config": config}
            self.w.tool_call(worker, Role.WORKER, "create_experiment", args, [exp])
            self.configs[exp.id] = config
            if self.rng.random() < FLAGGED:
                self.flag(worker)
            created.append(exp)
        runs = [self.execute(exp) for exp in created]
        writes: list[Record] = [r for records, _ in runs for r in records]
        detail = f"jobs and dev evaluations of {len(created)} experiments"
        self.w.commit("jobs_finished", writes, actor="orchestrator", detail=detail)
        for _, done in runs:
            args = {
                "experiment_id": done.id,
                "status": str(done.state),
                "summary": done.summary_text,
            }
            self.w.tool_call(done.created_by, Role.WORKER, "finish_experiment", args, [done])
            node.exps.append(done)
            if done.id in self.dev:
                self.succeeded.append(done)

    def execute(self, exp: Experiment) -> tuple[list[Record], Experiment]:
        """The train and dev-eval jobs of ``exp`` with its dev evaluations, and ``exp`` as
        ``sync_experiment`` and then ``finish_experiment`` leave it."""
        roll, w, config = self.rng.random(), self.w, self.configs[exp.id]
        if roll < CANCELLED:
            return [], self._finish(exp, ExperimentState.CANCELLED, [], [], "cancelled")
        seed, workspace = int(self.rng.integers(1, 1000)), str(exp.workspace_hash)
        (model,), quality = w.train(config, 1)
        train_id, dev_id = new_id(Job.PREFIX), new_id(Job.PREFIX)
        out = f"runs/{train_id}/model.json"
        argv = (
            f"python train.py --data data-in --model-out {out} --seed {seed} --config config.json"
        )
        inputs = JobInputs(
            workspace_sha256=workspace,
            data_sha256=DATA_SHA256,
            config="config.json",
            seed=seed,
            argv=argv.split(),
        )
        train = w.job(
            JobKind.TRAIN,
            inputs,
            exp.created_by,
            id=train_id,
            experiment_id=exp.id,
            model_out=out,
            model_out_sha256=model,
        )
        if roll < CANCELLED + FAILED:
            error = f"exited with 1; stderr ends: {TRACEBACK[-60:]}"
            train = train.model_copy(
                update={
                    "status": JobStatus.FAILED,
                    "exit_code": 1,
                    "model_out": None,
                    "model_out_sha256": None,
                    "stderr_sha256": w.put(TRACEBACK.encode()),
                    "error": error,
                }
            )
            failed = self._finish(exp, ExperimentState.FAILED, [train], [], "train failed")
            return [train], failed
        argv = f"python predict.py --model runs/{dev_id}/model-in.json --seed {seed}"
        inputs = JobInputs(
            workspace_sha256=workspace, model_in_sha256=model, seed=seed, argv=argv.split()
        )
        stdout = w.predict(model, quality)
        dev = w.job(
            JobKind.DEV_EVAL,
            inputs,
            exp.created_by,
            id=dev_id,
            experiment_id=exp.id,
            stdout_sha256=stdout,
        )
        evals = [
            w.evaluation(exp.id, (b, DataTier.DEV), w.scores((b, DataTier.DEV), q), [seed], True)
            for b, q in quality.items()
        ]
        self.dev[exp.id] = {e.benchmark: e.aggregates["avg@1"].value for e in evals}
        summary = f"dev quality {self.dev[exp.id]['quality']:.2f}"
        done = self._finish(exp, ExperimentState.SUCCEEDED, [train, dev], evals, summary)
        return [train, dev, *evals], done

    def _finish(
        self,
        exp: Experiment,
        state: ExperimentState,
        jobs: list[Job],
        evals: list[Evaluation],
        summary: str,
    ) -> Experiment:
        logs = [s for j in jobs for s in (j.stdout_sha256, j.stderr_sha256) if s is not None]
        metrics = [
            Metric(
                name=e.benchmark,
                value=self.dev[exp.id][e.benchmark],
                step=0,
                source=MetricSource.CONTROLLER,
                at=e.created_at,
            )
            for e in evals
        ]
        used = Resources(
            cpu_s=sum(j.resources.cpu_s for j in jobs),
            wall_s=sum(j.resources.wall_s for j in jobs),
            peak_rss_mb=max((j.resources.peak_rss_mb for j in jobs), default=0.0),
        )
        update = {
            "state": state,
            "metrics": metrics,
            "log_artifacts": list(dict.fromkeys(logs)),
            "resources": used,
            "summary_text": summary,
            "finished_at": utc_now(),
        }
        return exp.model_copy(update=update)

    def flag(self, worker: str) -> None:
        """A worker's call refused by a guard: the denied event and its protocol flag."""
        stage, rule, tool, tried = FLAGS[int(self.rng.integers(len(FLAGS)))]
        refusal = GuardRefusal(rule=rule, stage=stage, message=f"refused: {tried}")
        flag = ProtocolFlag(
            campaign_id=self.w.campaign_id,
            stage=stage,
            rule=rule,
            detail=refusal.message,
            actor=worker,
            role=str(Role.WORKER),
            tool=tool,
        )
        self.w.tool_call(worker, Role.WORKER, tool, {"tried": tried}, [flag], refusal)

    # --- evidence -------------------------------------------------------------------------

    def reference(self, node: _Node) -> list[Experiment]:
        """What a review compares a direction with: its first parent's experiments, or a
        root's own reference runs."""
        pool = [e for e in node.exps if "reference:" in e.description]
        if node.direction.parents:
            first = node.direction.parents[0].parent_id
            pool = next(n for n in self.nodes if n.direction.id == first).exps
        return [e for e in pool if e.id in self.dev][:REVIEW_GROUP]

    def review(self, node: _Node) -> None:
        """``submit_review`` by the Reviewer: the experiments since the last review against
        the reference, with the comparison computed from the records."""
        reference = self.reference(node)
        skip = {e.id for e in reference}
        group = [e for e in node.exps[node.reviewed :] if e.id in self.dev and e.id not in skip]
        node.reviewed = len(node.exps)
        group = group[-REVIEW_GROUP:]
        if len(group) < 2 or len(reference) < 2:
            return
        comparison = compute_comparison("quality", group, reference)
        if comparison.effect.low > 0:
            verdict = Verdict.SUPPORTS
            verified = node.relation is EdgeRelation.VERIFY
            advice = Recommendation.CONTINUE if verified else Recommendation.VERIFY
        elif comparison.effect.high < 0:
            verdict, advice = Verdict.REFUTES, Recommendation.STOP
        else:
            verdict, advice = Verdict.INCONCLUSIVE, Recommendation.BRANCH
        review = Review(
            campaign_id=self.w.campaign_id,
            direction_id=node.direction.id,
            experiment_ids=[e.id for e in group + reference],
            comparisons=[comparison],
            verdict=verdict,
            recommendation=advice,
            rationale="Dev quality of the newest experiments against the reference, computed "
            "from the records. " + DEFAULT_RULE_NOTE.format("continue"),
            reviewer="reviewer",
        )
        args = {
            "experiment_ids": [e.id for e in group],
            "metric": "quality",
            "baseline_ids": sorted(skip),
            "direction_id": node.direction.id,
        }
        self.w.tool_call("reviewer", Role.REVIEWER, "submit_review", args, [review])
        node.reviews.append(review)

    def conclude(self, node: _Node, *, open_ended: bool) -> None:
        """Main's ``update_direction`` calls on the last review's verdict (the newest
        directions go no further than promising), and a finding once it is settled."""
        last = node.reviews[-1] if node.reviews else None
        cited = [last.id] if last is not None else []
        steps = [(DirectionState.EXHAUSTED, cited, "no effect either way")]
        if last is not None and last.verdict is Verdict.SUPPORTS:
            steps = [
                (DirectionState.PROMISING, [], "a review supports it"),
                (DirectionState.SUPPORTED, cited, "the reviewed runs hold the gain"),
            ]
        elif last is not None and last.verdict is Verdict.REFUTES:
            steps = [(DirectionState.REFUTED, cited, "the review refutes it")]
        if open_ended:
            steps = steps[:1] if steps[0][0] is DirectionState.PROMISING else []
        for status, review_ids, conclusion in steps:
            d = node.direction
            change = DirectionChange(
                status=status,
                previous=d.state,
                by="main",
                review_ids=review_ids,
                conclusion=conclusion,
            )
            node.direction = d.model_copy(
                update={"state": status, "conclusion": conclusion, "history": [*d.history, change]}
            )
            args = {"direction_id": d.id, "status": str(status), "review_ids": review_ids}
            self.w.tool_call("main", Role.MAIN, "update_direction", args, [node.direction])
        if last is not None and node.direction.state in (
            DirectionState.SUPPORTED,
            DirectionState.REFUTED,
        ):
            self.publish(node, last)

    def publish(self, node: _Node, review: Review) -> None:
        """``publish_finding`` of the review's claim: lab-wide, for later campaigns."""
        comparison, supported = review.comparisons[0], review.verdict is Verdict.SUPPORTS
        author = node.exps[0].created_by
        claim = FindingClaim(
            metric="quality", a_ids=comparison.a_ids, b_ids=comparison.b_ids, direction="higher"
        )
        finding = Finding(
            claim=f"{node.direction.title}: raises dev quality over its reference",
            status=FindingStatus.SUPPORTED if supported else FindingStatus.REFUTED,
            conditions=f"synthetic, from the start config of direction #{node.number}",
            uncertainty="a Welch interval of the dev means, recomputed from the records",
            sources=[review.id],
            author=author,
            task=self.w.task.name,
            origin_campaign_id=self.w.campaign_id,
            structured=claim,
            effect=comparison.effect,
            check="the recomputed interval excludes zero on the "
            + ("claimed side" if supported else "other side"),
            tags=list(node.knobs),
        )
        args = {"claim": finding.claim, "status": str(finding.status), "sources": [review.id]}
        self.w.tool_call(author, Role.WORKER, "publish_finding", args, [finding])

    def propose(self) -> None:
        """A Worker proposes an experiment not proposed yet; the controller judges it.

        Proposals alternate between two judgments. The odd ones take a config that truly
        beats the head on every benchmark (synthetic's truth), as a worker who judged well
        would, so some are accepted; the even ones, and odd ones that find none, take the
        best dev quality whose dev robustness stays at the start's, as a worker who trusts
        one dev run would: mostly lucky draws the controller turns down.
        """
        head = self.controller.head_config
        fresh = [e for e in self.succeeded if e.id not in self.proposed]
        chosen = None
        if len(self.controller.candidates) % 2 == 0:
            chosen = self._truly_better(fresh, head)
        if chosen is None:
            fit = [e for e in fresh if self.dev[e.id]["robustness"] >= self.robust_floor]
            chosen = max(fit, key=lambda e: self.dev[e.id]["quality"], default=None)
        if chosen is not None:
            self.proposed.add(chosen.id)
            self.controller.judge(chosen, self.configs[chosen.id])

    def _truly_better(self, fresh: list[Experiment], head: dict[str, Any]) -> Experiment | None:
        """The experiment of truly best quality among those that beat the head on both
        benchmarks by :data:`TRUE_MARGIN`; None when there is none."""
        truth = {
            e.id: {b: true_score(self.configs[e.id], "base", b) for b in self.w.benches}
            for e in fresh
        }
        floor = {b: true_score(head, "base", b) + TRUE_MARGIN[b] for b in self.w.benches}
        fit = [e for e in fresh if all(truth[e.id][b] >= floor[b] for b in floor)]
        return max(fit, key=lambda e: truth[e.id]["quality"], default=None)


def generate_lab(
    root: Path,
    experiments: int = 10_000,
    *,
    directions: int = 120,
    samples: int = 40,
    seed: int = 0,
) -> str:
    """Create a new lab at ``root`` holding one finished campaign on ``synthetic``; its id.

    The campaign has ``experiments`` experiments over ``directions`` directions (the newest
    few without any); each succeeded experiment has a dev evaluation of ``samples`` samples
    per benchmark. The lineage ``synthetic/main`` holds the baseline and the versions the
    controller's rule accepted. The same arguments give the same records, ids and times
    aside. The lab's key goes where ``RSILAB_KEY_DIR`` says, as for any lab. Prints how long
    it took.

    Raises:
        LabError: a lab exists at ``root`` already, or it cannot be written.
        ValueError: ``experiments`` or ``directions`` is below 1, or ``samples`` below 2.
    """
    if experiments < 1 or directions < 1 or samples < 2:
        raise ValueError("a lab needs an experiment, a direction and two samples at least")
    started = time.perf_counter()
    task = get_task("synthetic")
    with Lab.init(root) as lab:
        w = _Writer(lab, task, np.random.default_rng(seed), samples)
        campaign_id = _campaign(w, experiments, directions, seed)
    took = time.perf_counter() - started
    print(f"generated a lab of {experiments} experiments at {root} in {took:.1f} s")
    return campaign_id


def _campaign(w: _Writer, experiments: int, directions: int, seed: int) -> str:
    """Write the baseline, then the campaign from start to finish; its id."""
    controller = _Controller(w)
    controller.baseline()
    ensure_builtin_skills(w.store)
    budget = f"experiments={experiments},wall=72h,tokens=1000000"
    settings = {"agents": "builtin", "budget": budget, "seed": seed, "workers": WORKERS}
    campaign = Campaign(task=w.task.ref(), settings=settings)
    w.campaign_id = campaign.id
    w.commit("campaign_created", [campaign], actor="orchestrator", detail="task synthetic")
    _Research(w, controller, experiments, directions).run()
    reason = "campaign review: re-runs on two seeds let false gains through"
    revise_skill(
        w.store,
        VERIFY_SKILL,
        VERIFY_TEXT,
        verify_code(3),
        actor="orchestrator",
        role=Role.CONTROLLER,
        reason=reason,
    )
    done = campaign.model_copy(update={"state": CampaignState.FINISHED})
    w.commit("campaign_finished", [done], actor="orchestrator", detail="budget spent")
    return campaign.id
