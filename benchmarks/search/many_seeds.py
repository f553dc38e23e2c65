"""A config scored from scratch with many seeds, outside every campaign and its alpha budget.

The registered protocol reads a run's head at the controller's own seeds: the scores its
acceptance rested on, which carry a winner's curse (a config is accepted partly because its
seeds happened to score well). This module scores a config again, independently of any run:
the task's harness with the config's knobs written over its config file, trained and scored by
the controller's own evaluator (:class:`~rsilab.controller.evaluation.SystemEvaluator`) on the
private tiers of the benchmark split (:func:`~benchmarks.search.protocol.split_secret`), with
``n`` seeds derived from that secret under a subject no campaign uses. Every config of a task
gets the same seeds (common random numbers), so two configs' scores pair by seed, and none of
them is a seed the controller judged with. Nothing here proposes, so no alpha is spent and no
lineage changes.

Scores are kept in ``benchmarks/results/search/<task>-many-seeds.jsonl``, one line per
(config, seed count), with the commit that measured them; a config already kept is never scored
again, so a task that takes hours fills in over several sittings.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from benchmarks import current_commit
from benchmarks.kept import RESULTS, JsonLines
from benchmarks.search.policies import Config
from benchmarks.search.protocol import split_id, split_secret
from rsilab.controller.evaluation import Recipe, controller_seeds
from rsilab.executors.local import LocalExecutor, available_cores
from rsilab.expos.services import LabServices
from rsilab.orchestrator.builtin._seeds import config_text
from rsilab.records import DataTier
from rsilab.sandbox.select import default_sandbox
from rsilab.store.lab import Lab
from rsilab.tasks import SECRET_FILE, Task, lab_secret, load_manifest

SUBJECT = "many-seed scoring"
"""The subject the scoring seeds are derived under: no controller subject starts with it."""


def scoring_seeds(task: str, count: int) -> list[int]:
    """The ``count`` seeds every config of ``task`` is scored with (the first ``k`` of a larger
    count are the seeds of a smaller one)."""
    return controller_seeds(split_secret(task), f"{SUBJECT}/{task}", count)


@dataclass(frozen=True)
class Scored:
    """One config of one task scored on the final tier with ``len(scores)`` seeds."""

    task: str
    config: dict[str, object]
    seeds: list[int]
    scores: list[float]
    """The target's final-tier score per seed (the mean over the tier's items), seed order."""
    split: str
    commit: str = ""
    cpu_s: float = 0.0

    @property
    def key(self) -> str:
        """The config as canonical text: what two runs that found the same config share."""
        return config_text(self.config)

    @property
    def mean(self) -> float:
        return sum(self.scores) / len(self.scores)


class ScoreLog:
    """The kept many-seed scores of one task (see the module docstring)."""

    def __init__(self, task: str, root: Path = RESULTS) -> None:
        self.task = task
        self.lines = JsonLines(root / "search" / f"{task}-many-seeds.jsonl")

    def load(self, seeds: int) -> dict[str, Scored]:
        """The configs kept with exactly ``seeds`` seeds on the benchmark split, by canonical
        text (the last line of a config wins). Raises KeptResultsError on a malformed line."""
        split = split_id(split_secret(self.task))
        return {
            s.key: s
            for s in self.lines.read_as(Scored)
            if s.split == split and len(s.scores) == seeds
        }

    def append(self, scored: Scored) -> None:
        self.lines.append(
            {
                "task": scored.task,
                "config": scored.config,
                "seeds": scored.seeds,
                "scores": scored.scores,
                "split": scored.split,
                "commit": scored.commit,
                "cpu_s": scored.cpu_s,
            }
        )


class ConfigScorer:
    """Scores configs of one task in a throwaway lab with the benchmark split (use
    :func:`config_scorer`)."""

    def __init__(self, task: Task, services: LabServices, lab: Lab, workdir: Path) -> None:
        self.task, self.services, self.lab, self.workdir = task, services, lab, workdir

    def score(self, config: Config, seeds: int) -> Scored:
        """``config`` trained and scored with :func:`scoring_seeds` (``seeds`` of them).

        Raises:
            ValueError: the task has no config file to write knobs into, or a knob of
                ``config`` is not one of the task's.
            SystemInvalid / EvaluationFault: as the controller's evaluation raises them (a
                config that fails to train is not scored as zero).
        """
        harness = self._harness(config)
        sha = self.lab.artifacts.put_tree(harness, leave_out_caches=True).sha256
        chosen = scoring_seeds(self.task.name, seeds)
        evaluator = self.services.controller(self.task).evaluator
        result = evaluator.evaluate(Recipe(sha), chosen, campaign_id=None, candidate_id=None)
        table = result.tables[(self.task.targets[0].name, DataTier.FINAL)]
        return Scored(
            task=self.task.name,
            config=dict(config),
            seeds=chosen,
            scores=[float(row.mean()) for row in table.scores],
            split=split_id(split_secret(self.task.name)),
            commit=current_commit(),
            cpu_s=round(result.resources.cpu_s, 3),
        )

    def _harness(self, config: Config) -> Path:
        """A copy of the task's harness with ``config``'s knobs written over its config file,
        as the built-in Workers write them."""
        name = load_manifest(self.task.harness).config
        if name is None:
            raise ValueError(f"{self.task.name} has no config file: a config changes nothing")
        known = {k.name for k in self.task.search_space}
        unknown = sorted(set(config) - known)
        if unknown:
            raise ValueError(f"{self.task.name} has no knob {', '.join(unknown)}")
        dest = Path(tempfile.mkdtemp(prefix="harness-", dir=self.workdir))
        shutil.copytree(self.task.harness, dest, dirs_exist_ok=True)
        path = dest / name
        current = json.loads(path.read_text("utf-8"))
        path.write_text(json.dumps({**current, **config}), "utf-8")
        return dest


@contextmanager
def config_scorer(task: Task) -> Iterator[ConfigScorer]:
    """A :class:`ConfigScorer` for ``task`` in a temporary lab (removed afterwards) whose
    secret is the benchmark split's, so its private tiers are the protocol's."""
    with tempfile.TemporaryDirectory(prefix=f"rsilab-many-seeds-{task.name}-") as tmp:
        lab = Lab.init(Path(tmp) / "lab")
        (lab.path / SECRET_FILE).write_text(split_secret(task.name).hex())
        (lab.path / SECRET_FILE).chmod(0o600)
        lab_secret(lab.path)
        sandbox = default_sandbox(runtime=task.own_runtime(), shown=task.shown())
        executor = LocalExecutor(sandbox, lab.artifacts, min(2, available_cores()))
        services = LabServices(lab, executor, judge_in_background=False)
        try:
            yield ConfigScorer(task, services, lab, Path(tmp))
        finally:
            services.close()
            executor.shutdown()
            sandbox.close()
            lab.close()
