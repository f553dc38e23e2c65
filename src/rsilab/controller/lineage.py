"""Version lineages: reading them, labelling versions ``H{i}/M{j}``, rolling back.

A lineage is keyed by (task, lineage name). Its :class:`~rsilab.records.Lineage` record holds
the head and the append-only list of versions; every change to it is a compare-and-swap on
the record's revision, so two processes cannot both move the head from the same version.
History is never rewritten: a rollback appends a new version equal to an earlier one.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from rsilab.errors import NotFoundError, UserError
from rsilab.records import (
    Candidate,
    DataTier,
    Evaluation,
    EventDraft,
    Lineage,
    Role,
    SystemVersion,
    lineage_id,
)
from rsilab.store.base import Store, StoreReader


def find_lineage(store: StoreReader, task: str, name: str = "main") -> Lineage | None:
    """The lineage of (task, name), or None if it has no baseline yet."""
    try:
        return store.get_as(lineage_id(task, name), Lineage)
    except NotFoundError:
        return None


def require_lineage(store: Store, task: str, name: str = "main") -> Lineage:
    """The lineage of (task, name).

    Raises:
        UserError: it has no baseline yet (saying how to make one).
    """
    found = find_lineage(store, task, name)
    if found is None:
        raise UserError(
            f"task {task!r} has no lineage {name!r} in this lab",
            f"evaluate the initial system first: rsilab baseline {task} --lineage {name}",
        )
    return found


def lineage_versions(store: StoreReader, lineage: Lineage) -> list[SystemVersion]:
    """Every version of ``lineage``, oldest first."""
    return [store.get_as(v, SystemVersion) for v in lineage.versions]


def lineage_candidates(store: Store, task: str, name: str = "main") -> list[Candidate]:
    """Every candidate proposed to (task, name), oldest first."""
    found = store.query_as(Candidate, fields={"task": task, "lineage": name})
    return sorted(found, key=lambda c: c.created_at)


def next_label(
    versions: Sequence[SystemVersion], harness_sha256: str, models: Sequence[str]
) -> str:
    """``H{i}/M{j}``: i counts distinct harnesses in order of first appearance, j distinct
    model sets (``models``: one hash per controller seed, "" where nothing was trained), both
    from 0; a version reusing an earlier harness or model set reuses its number. A system
    without a model keeps M0."""
    harnesses: list[str] = []
    model_sets: list[tuple[str, ...]] = []
    for version in versions:
        if version.harness_sha256 not in harnesses:
            harnesses.append(version.harness_sha256)
        key = tuple(version.model_sha256s)
        if any(key) and key not in model_sets:
            model_sets.append(key)
    if harness_sha256 not in harnesses:
        harnesses.append(harness_sha256)
    key = tuple(models)
    if any(key) and key not in model_sets:
        model_sets.append(key)
    j = model_sets.index(key) if any(key) else 0
    return f"H{harnesses.index(harness_sha256)}/M{j}"


def matrix_of(evaluation: Evaluation, sample_ids: Sequence[str]) -> np.ndarray:
    """``scores[epoch][sample]`` of an evaluation, columns in ``sample_ids`` order.

    Raises:
        ValueError: a sample or an epoch is missing (the evaluation does not cover the tier).
    """
    column = {sid: i for i, sid in enumerate(sample_ids)}
    epochs = sorted({s.epoch for s in evaluation.samples})
    row = {e: i for i, e in enumerate(epochs)}
    out = np.full((len(epochs), len(sample_ids)), np.nan)
    for score in evaluation.samples:
        if score.sample_id in column:
            out[row[score.epoch], column[score.sample_id]] = score.score
    if np.isnan(out).any():
        raise ValueError(f"evaluation {evaluation.id} does not cover every sample of its tier")
    return out


def version_evaluations(
    store: StoreReader, version: SystemVersion, tier: DataTier
) -> dict[str, Evaluation]:
    """The version's evaluations on ``tier``, by benchmark."""
    out: dict[str, Evaluation] = {}
    for eval_id in version.evaluation_ids:
        evaluation = store.get_as(eval_id, Evaluation)
        if evaluation.tier == tier:
            out[evaluation.benchmark] = evaluation
    return out


def rollback(store: Store, task: str, name: str, version_id: str, *, actor: str) -> SystemVersion:
    """Append a version equal to ``version_id`` (an earlier member) and make it the head.

    Raises:
        UserError: no such lineage, or the version is not one of its members.
        ConflictError: the head moved while this ran (try again).
    """
    lineage = require_lineage(store, task, name)
    if version_id not in lineage.versions:
        raise UserError(
            f"{version_id} is not a version of {task}/{name}",
            f"pick one listed by: rsilab versions {task} --lineage {name}",
        )
    earlier = store.get_as(version_id, SystemVersion)
    restored = copy_version(
        earlier,
        lineage=name,
        decision=f"rollback to {earlier.id} ({earlier.label}) by {actor}",
        parent_id=lineage.head_id,
        rollback_of=earlier.id,
    )
    moved = lineage.model_copy(
        update={"head_id": restored.id, "versions": [*lineage.versions, restored.id]}
    )
    draft = EventDraft(
        actor=actor,
        role=str(Role.HUMAN),
        action="rollback",
        detail=f"{task}/{name}: head {lineage.head_id} -> {restored.id} (= {earlier.id})",
    )
    store.commit(draft, [restored, moved])
    return restored


def copy_version(
    version: SystemVersion,
    *,
    lineage: str,
    decision: str,
    parent_id: str | None = None,
    rollback_of: str | None = None,
) -> SystemVersion:
    """A new version (its own id) of ``lineage`` equal to ``version``: same harness, models,
    controller seeds, evaluations (its reference measurements too) and scores, so it is judged
    against with the same numbers."""
    return SystemVersion(
        task=version.task,
        lineage=lineage,
        label=version.label,
        harness_sha256=version.harness_sha256,
        model_sha256=version.model_sha256,
        model_sha256s=list(version.model_sha256s),
        seeds=list(version.seeds),
        parent_id=parent_id,
        rollback_of=rollback_of,
        scores=dict(version.scores),
        evaluation_ids=list(version.evaluation_ids),
        reference_evaluation_ids=list(version.reference_evaluation_ids),
        decision=decision,
    )
