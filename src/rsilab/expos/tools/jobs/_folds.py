"""Folds of the train tier: which samples each fold holds out, and the data its train job gets.

Pure planning, no jobs: :mod:`._foldwork` runs what is planned here. The train tier is the
improver's own data in every setting, so nothing here touches a private tier.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from rsilab.errors import ToolError
from rsilab.expos.tools.jobs._records import DevTiers
from rsilab.records import DataTier
from rsilab.tasks import Sample, Splits, Task, write_data_dir

DEFAULT_FOLDS = 3
MIN_FOLDS = 2
MAX_FOLDS = 10


@dataclass(frozen=True)
class Fold:
    """One fold: the samples it holds out (per benchmark, in the order predict sees them) and
    the train samples of the other folds, which its train job gets. ``label`` is ``i/k``."""

    label: str
    held_out: DevTiers
    rest: tuple[Sample, ...]


def make_folds(task: Task, splits: Mapping[str, Splits], k: int, seed: int) -> list[Fold]:
    """Deal each benchmark's train tier into ``k`` folds.

    Each benchmark's samples are ordered by id and shuffled with ``seed``, then dealt in
    turn, so fold sizes differ by at most one and the same seed always gives the same folds
    (two experiments evaluated with one seed share their folds: a paired comparison).
    ``rest`` keeps the train tier's own order, less the held-out samples.

    Raises:
        ToolError: a benchmark has fewer than ``k`` train samples.
    """
    dealt: list[list[tuple[Sample, ...]]] = []
    for bench in task.benchmarks:
        samples = sorted(splits[bench.name][DataTier.TRAIN], key=lambda s: s.id)
        if len(samples) < k:
            raise ToolError(
                "invalid_arguments",
                f"benchmark {bench.name!r} has {len(samples)} train samples, too few for {k} folds",
                field="folds",
            )
        random.Random(f"rsilab-folds/{seed}/{bench.name}").shuffle(samples)
        dealt.append([tuple(samples[i::k]) for i in range(k)])
    folds = []
    for i in range(k):
        held_out = tuple(
            (bench, groups[i]) for bench, groups in zip(task.benchmarks, dealt, strict=True)
        )
        out = {s.id for _, group in held_out for s in group}
        rest = tuple(s for s in train_tier(task, splits) if s.id not in out)
        folds.append(Fold(f"{i + 1}/{k}", held_out, rest))
    return folds


def whole_train_tier(task: Task, splits: Mapping[str, Splits]) -> Fold:
    """The train tier as one "fold" for a harness without a train step: no model is trained,
    so none can have seen the samples it predicts."""
    held_out = tuple(
        (bench, tuple(splits[bench.name][DataTier.TRAIN])) for bench in task.benchmarks
    )
    return Fold("1/1", held_out, ())


def train_tier(task: Task, splits: Mapping[str, Splits]) -> list[Sample]:
    """Every benchmark's train tier, in the order the data folder's train.jsonl has it."""
    return [s for bench in task.benchmarks for s in splits[bench.name][DataTier.TRAIN]]


def write_fold_data(folder: Path, task: Task, splits: Mapping[str, Splits], fold: Fold) -> None:
    """Write a fold train job's data folder: ``train.jsonl`` with the other folds' samples
    and ``dev.jsonl`` with dev inputs only. Dev labels are never given here, whatever the
    setting: a fold estimate must not lean on the dev tier."""
    dev = [
        s.model_copy(update={"target": None})
        for bench in task.benchmarks
        for s in splits[bench.name][DataTier.DEV]
    ]
    write_data_dir(folder, {DataTier.TRAIN: list(fold.rest), DataTier.DEV: dev})
