"""Garbage collection of the lab's blob folder, and the lab's size limit.

**The rule.** A blob stays unless it is *releasable* and nothing else needs it:

1. Every sha256-shaped string in any stored record (whatever its kind or field, including
   records rsilab adds later) keeps the blob of that address, except these fields, which only
   *release* it:

   a. ``model_out_sha256``, ``inputs.model_in_sha256``, ``stdout_sha256`` and
      ``stderr_sha256`` of a controller job (``controller-train`` / ``controller-predict``)
      whose candidate is *discarded* (a predict job's input model is its candidate's own; a
      warm start's is a version's model, which the version keeps);
   b. ``workspace_hash`` of a *released* experiment, and ``inputs.workspace_sha256`` of the
      jobs that ran for it (snapshots of its workspace).

   Only a finished job releases anything (a running one may still write its fields).

   A candidate is *discarded* when it is finished (rejected, invalid or stale), is not the
   candidate of any version, and is not among the ``keep_top`` best-scoring candidates of its
   (task, lineage) outside the lineage; the score is the mean final-tier ``avg@k`` over the
   task's target benchmarks (read from the candidate's Evaluation records; lower-is-better
   benchmarks negated); candidates without such scores are never among the best. An
   experiment is *released* when it is finished and no kept (not discarded) candidate names
   it. Pending and evaluating candidates, unfinished experiments, versions (harness trees and
   models of every lineage member), Datasets, Artifacts and agents' own jobs keep everything
   they name.
2. A tree keeps every file its manifest lists (any kept blob that is a manifest counts).
3. A blob no record names (an orphan, perhaps written by a job that has not recorded itself
   yet) is kept.

So the blobs removed are exactly the releasable ones (with the files of releasable trees)
that no kept reference reaches. Each removed blob becomes a :class:`~rsilab.records.Tombstone`;
all of them are written in one store commit with one ledger event (action ``gc``). Records
keep their hashes, and ``rsilab verify`` reads a missing blob with a tombstone as collected.

Removal tolerates writers running alongside: blobs move to a trash folder first, any blob a
record written after the plan names is moved back, then the tombstones are committed and the
trash is emptied; only what this run moved gets a tombstone. One narrow race remains: a job
that found identical bytes already stored before the move, and records its reference only
after the re-check, names a removed blob (verify then still passes, by the tombstone).

**Size limit.** :func:`maybe_collect` runs the collection when the blob folder is larger than
the ``size_limit`` of ``<lab>/rsilab.toml`` (see :mod:`rsilab.controller.lab_settings`).
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rsilab.controller.jobs import CONTROLLER_ACTOR
from rsilab.controller.lab_settings import DEFAULT_KEEP_TOP, lab_settings
from rsilab.errors import NotFoundError, UserError
from rsilab.records import (
    Campaign,
    Candidate,
    CandidateState,
    DataTier,
    Evaluation,
    EventDraft,
    Experiment,
    Job,
    JobStatus,
    Role,
    SystemVersion,
    TaskRef,
    Tombstone,
    utc_now,
)
from rsilab.stats import oriented
from rsilab.store.artifacts import ArtifactStore
from rsilab.store.base import Store
from rsilab.store.lab import Lab
from rsilab.store.refs import TREE_PREFIX, manifest_files, mentioned_hashes
from rsilab.tasks import get_scorer, load_ref

_JOB_OUTPUTS = ("model_out_sha256", "stdout_sha256", "stderr_sha256")
_FINISHED_JOB = {str(s) for s in JobStatus if s.is_finished()}


@dataclass(frozen=True)
class GcReport:
    """What a collection freed (or, for a dry run, would free).

    Attributes:
        freed_bytes: bytes of the removed blobs.
        removed: their addresses, sorted.
        kept: blobs left in the blob folder.
        kept_bytes: bytes of those.
        dry_run: True when nothing was removed.
        reasons: address -> why the rule let it go.
    """

    freed_bytes: int
    removed: list[str]
    kept: int
    kept_bytes: int = 0
    dry_run: bool = False
    reasons: dict[str, str] = field(default_factory=dict)


# --- the plan ---------------------------------------------------------------------------------


def plan_garbage(store: Store, artifacts: ArtifactStore, keep_top: int) -> dict[str, str]:
    """The blobs the rule (module docstring) lets go, present ones only: address -> reason."""
    discarded = _discarded_candidates(store, keep_top)
    kept_experiments = {c.experiment_id for c in store.query_as(Candidate) if c.id not in discarded}
    released_experiments = {
        e.id for e in store.query_as(Experiment) if e.is_finished() and e.id not in kept_experiments
    }
    keep: set[str] = set()
    release: dict[str, str] = {}
    for row in store.stored_records():
        if row.kind == Tombstone.KIND:
            continue
        text = row.text
        if row.kind in (Job.KIND, Experiment.KIND):
            body, freed = _split(json.loads(text), row.kind, discarded, released_experiments)
            for sha, reason in freed.items():
                release.setdefault(sha, reason)
            text = json.dumps(body)
        keep |= mentioned_hashes(text)
    keep = _with_tree_files(artifacts, keep)
    for sha, reason in list(release.items()):
        for file_sha in _manifest_of(artifacts, sha):
            release.setdefault(file_sha, f"a file of tree {sha[:12]}: {reason}")
    return {s: r for s, r in sorted(release.items()) if s not in keep and artifacts.has(s)}


def _split(
    body: dict[str, Any], kind: str, discarded: set[str], released: set[str]
) -> tuple[dict[str, Any], dict[str, str]]:
    """A Job or Experiment body without its releasable fields, and those fields' values."""
    freed: dict[str, str] = {}
    if kind == Experiment.KIND:
        if body.get("id") in released and body.get("workspace_hash"):
            freed[body.pop("workspace_hash")] = (
                f"workspace snapshot of finished experiment {body['id']} outside any lineage"
            )
        return body, freed
    if body.get("status") not in _FINISHED_JOB:  # a running job may still write these fields
        return body, freed
    candidate = body.get("candidate_id")
    inputs = body.get("inputs") or {}
    if str(body.get("kind", "")).startswith("controller-") and candidate in discarded:
        for where, name in [(body, n) for n in _JOB_OUTPUTS] + [(inputs, "model_in_sha256")]:
            if where.get(name):
                freed[where.pop(name)] = f"{name} of {body['id']}, a job of discarded {candidate}"
    experiment = body.get("experiment_id")
    if experiment in released and inputs.get("workspace_sha256"):
        freed[inputs.pop("workspace_sha256")] = (
            f"workspace of {body['id']}, a job of finished experiment {experiment} "
            "outside any lineage"
        )
    return body, freed


def _discarded_candidates(store: Store, keep_top: int) -> set[str]:
    """Finished candidates outside every lineage and outside their group's top ``keep_top``."""
    in_lineage = {v.candidate_id for v in store.query_as(SystemVersion) if v.candidate_id}
    groups: dict[tuple[str, str], list[Candidate]] = {}
    for cand in store.query_as(Candidate):
        if cand.state is not CandidateState.ACCEPTED and cand.id not in in_lineage:
            groups.setdefault((cand.task, cand.lineage), []).append(cand)
    discarded: set[str] = set()
    for (task, _), members in groups.items():
        targets = _targets(store, task, members)
        scored = [(_score(store, c, targets), c.created_at, c.id) for c in members]
        ranked = sorted((-s, at, cid) for s, at, cid in scored if s is not None)
        best = {cid for _, _, cid in ranked[:keep_top]}
        discarded |= {c.id for c in members if c.is_finished() and c.id not in best}
    return discarded


def _targets(store: Store, task: str, members: list[Candidate]) -> dict[str, bool | None]:
    """Target benchmark -> higher is better (None: unknown, the scorer's default applies).

    The spec comes from the task its campaigns recorded (a file's task from its file), else
    from the registry by name; when none loads (a file gone or changed), the targets are read
    off the candidates' decisions."""
    for ref in _task_refs(store, task, members):
        try:
            spec = load_ref(ref)
        except UserError:
            continue
        return {b.name: b.higher_is_better for b in spec.benchmarks if b.target}
    return {d.benchmark: None for c in members for d in c.decisions if d.target}


def _task_refs(store: Store, task: str, members: Iterable[Candidate]) -> list[TaskRef]:
    """The refs the members' campaigns recorded for ``task``; ``task`` by name when none did."""
    refs: list[TaskRef] = []
    for campaign_id in sorted({c.campaign_id for c in members if c.campaign_id}):
        try:
            ref = store.get_as(campaign_id, Campaign).task
        except NotFoundError:
            continue
        if ref.name == task and ref not in refs:
            refs.append(ref)
    return refs or [TaskRef(name=task)]


def _score(store: Store, cand: Candidate, targets: dict[str, bool | None]) -> float | None:
    """Mean oriented final-tier avg@k over the target benchmarks; None when not evaluated."""
    values = []
    for eval_id in cand.evaluation_ids:
        try:
            evaluation = store.get_as(eval_id, Evaluation)
        except NotFoundError:
            continue
        if evaluation.tier != DataTier.FINAL or evaluation.benchmark not in targets:
            continue
        avg = next((v for k, v in evaluation.aggregates.items() if k.startswith("avg@")), None)
        if avg is None:
            continue
        higher = targets[evaluation.benchmark]
        if higher is None:
            try:
                higher = get_scorer(evaluation.metric).higher_is_better
            except KeyError:
                higher = True
        values.append(oriented(avg.value, higher))
    return sum(values) / len(values) if values else None


def _manifest_of(artifacts: ArtifactStore, sha: str, trash: Path | None = None) -> list[str]:
    """Files listed by the tree manifest at ``sha`` (in the blob folder or ``trash``)."""
    path = trash / sha if trash is not None and (trash / sha).is_file() else None
    if path is None:
        if not artifacts.has(sha):
            return []
        path = artifacts.blob_path(sha)
    with path.open("rb") as handle:
        if handle.read(len(TREE_PREFIX)) != TREE_PREFIX:
            return []
    return manifest_files(path.read_bytes()) or []


def _with_tree_files(
    artifacts: ArtifactStore, shas: set[str], trash: Path | None = None
) -> set[str]:
    """``shas`` plus the files of every tree manifest among them."""
    out = set(shas)
    for sha in shas:
        out.update(_manifest_of(artifacts, sha, trash))
    return out


# --- collection -------------------------------------------------------------------------------


def collect_garbage(
    lab: Lab,
    *,
    keep_top: int = DEFAULT_KEEP_TOP,
    dry_run: bool = False,
    actor: str = "cli",
    role: Role = Role.HUMAN,
) -> GcReport:
    """Remove the blobs the rule (module docstring) lets go; each gets a tombstone.

    The tombstones are written in one commit with one ``gc`` ledger event (none when nothing
    was removed). With ``dry_run`` nothing is moved or written.

    Raises:
        ValueError: ``keep_top`` is negative.
        LabError: the store could not be written (every blob is then put back).
    """
    if keep_top < 0:
        raise ValueError("keep_top must be 0 or more")
    seq, _ = lab.store.head()
    plan = plan_garbage(lab.store, lab.artifacts, keep_top)
    sizes = dict(_blobs(lab.artifacts))
    if dry_run or not plan:
        return _report(sizes, plan, dry_run=dry_run)
    tmp = lab.artifacts.root / "tmp"
    tmp.mkdir(parents=True, exist_ok=True)
    trash = Path(tempfile.mkdtemp(prefix="gc-", dir=tmp))
    moved: dict[str, str] = {}
    try:
        for sha, reason in plan.items():
            try:
                os.replace(lab.artifacts.blob_path(sha), trash / sha)
            except FileNotFoundError:  # another collection took it
                continue
            moved[sha] = reason
        for sha in _needed_since(lab.store, lab.artifacts, seq, trash) & moved.keys():
            os.replace(trash / sha, lab.artifacts.blob_path(sha))
            del moved[sha]
        if moved:
            _commit_tombstones(lab.store, moved, sizes, keep_top, actor=actor, role=role)
    except BaseException:
        for sha in moved:
            if (trash / sha).exists():
                os.replace(trash / sha, lab.artifacts.blob_path(sha))
        raise
    finally:
        shutil.rmtree(trash, ignore_errors=True)
    return _report(sizes, moved, dry_run=False)


def _needed_since(store: Store, artifacts: ArtifactStore, seq: int, trash: Path) -> set[str]:
    """Addresses (with tree files) named by records written after ledger event ``seq``."""
    named: set[str] = set()
    for event in store.events(after=seq):
        for ref in event.records:
            if ref.kind != Tombstone.KIND:
                named |= mentioned_hashes(store.get(ref.id).model_dump_json())
    return _with_tree_files(artifacts, named, trash)


def _commit_tombstones(
    store: Store,
    moved: dict[str, str],
    sizes: dict[str, int],
    keep_top: int,
    *,
    actor: str,
    role: Role,
) -> None:
    now = utc_now()
    stones = [
        Tombstone(sha256=sha, size=sizes.get(sha, 0), reason=reason, removed_at=now)
        for sha, reason in sorted(moved.items())
    ]
    freed = sum(t.size for t in stones)
    draft = EventDraft(
        actor=actor,
        role=str(role),
        action="gc",
        detail=f"removed {len(stones)} blobs ({freed} bytes); keep_top={keep_top}",
    )
    store.commit(draft, stones)


def _report(sizes: dict[str, int], removed: dict[str, str], *, dry_run: bool) -> GcReport:
    freed = sum(sizes.get(s, 0) for s in removed)
    return GcReport(
        freed_bytes=freed,
        removed=sorted(removed),
        kept=len(sizes) - len(removed),
        kept_bytes=sum(sizes.values()) - freed,
        dry_run=dry_run,
        reasons=dict(removed),
    )


def _blobs(artifacts: ArtifactStore) -> Iterator[tuple[str, int]]:
    """(address, size) of every blob in the blob folder (layout: blobs/ab/cdef...)."""
    root = artifacts.root / "blobs"
    if not root.is_dir():
        return
    for prefix in os.scandir(root):
        if not prefix.is_dir(follow_symlinks=False) or len(prefix.name) != 2:
            continue
        for entry in os.scandir(prefix.path):
            if entry.is_file(follow_symlinks=False) and len(entry.name) == 62:
                yield prefix.name + entry.name, entry.stat(follow_symlinks=False).st_size


def blob_bytes(artifacts: ArtifactStore) -> int:
    """Total size of the blob folder's blobs."""
    return sum(size for _, size in _blobs(artifacts))


# --- size limit -------------------------------------------------------------------------------


def maybe_collect(lab: Lab) -> GcReport | None:
    """Collect garbage (as the controller) when the blob folder exceeds the lab's size limit.

    Returns None when no limit is set or the folder is within it; otherwise the report (the
    folder may still exceed the limit when everything left is needed).

    Raises:
        UserError: ``rsilab.toml`` is malformed.
        LabError: the store could not be written.
    """
    settings = lab_settings(lab.path)
    if settings.size_limit is None or blob_bytes(lab.artifacts) <= settings.size_limit:
        return None
    return collect_garbage(
        lab, keep_top=settings.keep_top, actor=CONTROLLER_ACTOR, role=Role.CONTROLLER
    )
