"""The record writer of the dashboard's synthetic lab: blobs, scores, jobs and events.

:class:`_Writer` is what every part of the generated campaign writes with. It holds the
task's sample tiers (dev ids readable, private ids opaque, each sample a fixed uniform draw
and a label), stores each distinct blob once, builds a harness tree with a new
``config.json``, "trains" a config (``true_score`` plus seed noise, to two decimals),
scores samples as synthetic's ``predict`` answers, and records evaluations, jobs, principal
events and tool-call events as the controller, executor and dispatcher would. All draws come
from the one seeded generator it holds, so callers keep the campaign reproducible by calling
it in a fixed order.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from functools import cache
from typing import Any

import numpy as np

from rsilab.controller.jobs import CONTROLLER_ACTOR
from rsilab.expos.guards import GuardRefusal
from rsilab.records import (
    DataTier,
    Evaluation,
    EventDraft,
    Interval,
    Job,
    JobInputs,
    JobKind,
    JobStatus,
    Outcome,
    Record,
    Resources,
    Role,
    SampleScore,
    utc_now,
)
from rsilab.stats import avg_at_k, pass_at_k
from rsilab.store.lab import Lab
from rsilab.store.ledger import args_digest, canonical_json
from rsilab.tasks import Task
from rsilab.tasks.builtin.synthetic import SAMPLES_PER_TIER, noise_sd, true_score

PRIVATE = (DataTier.ACCEPT, DataTier.FINAL)
Key = tuple[str, DataTier]


@cache
def _avg_at_1(n: int, right: int) -> Interval:
    """``avg_at_k`` of one epoch of ``n`` 0/1 scores with ``right`` ones: it depends on nothing
    else, and computing it afresh for 20,000 evaluations would take seconds."""
    return avg_at_k([[1.0] * right + [0.0] * (n - right)])


@dataclass(frozen=True)
class _Samples:
    """A tier of a benchmark: sample ids, each sample's uniform draw and its label."""

    ids: list[str]
    u: np.ndarray
    labels: np.ndarray


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
