"""What every part of the built-in runner shares: the campaign, its door and its voice.

One :class:`RunContext` is made per run of the built-in policy and
handed to the Main policy, the Reviewer, the Workers and the loop. It holds no campaign state
(that is rebuilt from the records, see :mod:`rsilab.orchestrator.builtin._state`), only what does
not
change while the campaign runs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

from rsilab.controller.settings import rules_for
from rsilab.memory.builtin_skills import DEFAULT_FRESH_SEEDS
from rsilab.orchestrator.builtin._state import CampaignView, NonTarget
from rsilab.orchestrator.builtin.ablation import Ablation
from rsilab.orchestrator.campaign import Intents, Progress, ProgressFn
from rsilab.orchestrator.door import Door
from rsilab.records import DataTier
from rsilab.store import Lab, Store
from rsilab.tasks import (
    Benchmark,
    Budget,
    CodeVariant,
    Knob,
    Manifest,
    Task,
    load_manifest,
)

VERIFY_SEEDS = DEFAULT_FRESH_SEEDS
"""Fresh-seed re-runs of a direction's best config before it is proposed, unless the lab's
``builtin:verify-gain`` skill says otherwise (:attr:`RunContext.verify_seeds`)."""


def direction_share(budget: Budget) -> int:
    """Experiments one search direction may use before Main closes it."""
    return max(4, budget.experiments // 3)


class Voice:
    """Progress for the caller: each line carries the experiments done and running, which
    the loop keeps up to date here. Called on the main thread only."""

    def __init__(self, on_progress: ProgressFn | None, budget: Budget) -> None:
        self.on_progress = on_progress
        self.budget = budget
        self.done = 0
        self.running = 0

    def __call__(
        self, kind: str, message: str, score: float | None = None, best: float | None = None
    ) -> None:
        if self.on_progress is not None:
            self.on_progress(
                Progress(
                    kind, message, self.done, self.budget.experiments, score, best, self.running
                )
            )


@dataclass(frozen=True)
class RunContext:
    """The campaign being run and the means to act on it."""

    lab: Lab
    task: Task
    campaign_id: str
    budget: Budget
    seed: int
    door: Door
    say: Voice
    intents: Intents
    """The campaign's intents (the lifecycle's: :mod:`rsilab.orchestrator.campaign`)."""
    ablations: frozenset[Ablation] = field(default_factory=frozenset)
    """Parts of the policy this campaign runs without
    (:mod:`rsilab.orchestrator.builtin.ablation`)."""
    verify_seeds: int = VERIFY_SEEDS
    """Fresh-seed re-runs before a gain is proposed: the lab's ``builtin:verify-gain`` skill
    as the campaign's run started (:mod:`rsilab.memory.builtin_skills`)."""

    def without(self, part: Ablation) -> bool:
        """True when the campaign runs without ``part``."""
        return part in self.ablations

    @property
    def store(self) -> Store:
        return self.lab.store

    @property
    def target(self) -> str:
        """The benchmark the policy optimises (the task's first target)."""
        return self.task.targets[0].name

    @property
    def target_benchmark(self) -> Benchmark:
        """The benchmark the policy optimises, with its direction."""
        return self.task.targets[0]

    @property
    def improves(self) -> str:
        """The verb of a gain on the target, in its direction: "raises" or "lowers"."""
        return "raises" if self.target_benchmark.higher_is_better else "lowers"

    @cached_property
    def manifest(self) -> Manifest:
        """The task's harness manifest (``harness.toml``): whether it trains, which config file
        it reads. Read once; ``ManifestError`` when it is unreadable (``task check`` says why)."""
        return load_manifest(self.task.harness)

    @property
    def config_file(self) -> str | None:
        """The harness's config file (``config =`` in ``harness.toml``), relative to the
        workspace; None when it declares none."""
        return self.manifest.config

    @cached_property
    def space(self) -> list[Knob]:
        """What the policy searches: the task's knobs (none without a config file to write
        them to) and, when the task offers code variants, the choice of one of them
        (:data:`~rsilab.tasks.VARIANT_KNOB`: the head's code or a variant, applied by the
        Worker before the run, never written to the config file)."""
        knobs = list(self.task.search_space) if self.config_file is not None else []
        variant = self.task.variant_knob()
        return knobs if variant is None else [*knobs, variant]

    @property
    def variants(self) -> dict[str, CodeVariant]:
        """The task's code variants by name."""
        return {v.name: v for v in self.task.code_variants}

    @property
    def searchable(self) -> bool:
        """True when the policy has something to search: knobs and a config file to write
        them to, or code variants. Without either it can only run the head as it is (see the
        loop's ending)."""
        return bool(self.space)

    @property
    def tier(self) -> DataTier:
        """Where the policy's scores come from: the dev tier where the task's setting returns
        dev scores, else out-of-fold scores on the train tier (``run_job`` fold_eval)."""
        dev = rules_for(self.task.setting).dev_scores_returned
        return DataTier.DEV if dev else DataTier.TRAIN

    def view(self) -> CampaignView:
        """The campaign as its records hold it now."""
        return CampaignView.load(
            self.lab.store,
            self.campaign_id,
            self.non_targets,
            self.target_benchmark.higher_is_better,
        )

    @property
    def non_targets(self) -> list[NonTarget]:
        """The task's benchmarks the policy must not regress beyond their tolerance."""
        return [
            NonTarget(b.name, b.tolerance, b.higher_is_better)
            for b in self.task.benchmarks
            if not b.target
        ]
