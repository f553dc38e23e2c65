"""Training-stage guards and evaluation fingerprints: what is checked before a candidate runs.

:class:`TrainingGuards` looks at a candidate's stored tree, the registered data it names and
the host files its text names by absolute path (what its recipe may read): links out of the
tree and unusable dataset names make it invalid; private items or a copy of a declared raw
source in any of it (the content guard, :mod:`rsilab.controller.content`: opened containers,
every serialisation, exact and near-duplicate items), data the guard cannot open within its
caps, weights files no recorded job produced, or a harness that no longer trains where the
lineage's head does make it refused. Every :class:`Refusal` names the protocol flag to
record, invalid ones included. Nothing here runs a job.
:func:`private_data_sha256` and :func:`evaluator_sha256` fingerprint what scores, so the
controller can refuse to compare scores once either changed.
"""

from __future__ import annotations

import hashlib
import inspect
import tempfile
from dataclasses import dataclass
from pathlib import Path
from threading import Lock

from rsilab.controller.content import ContentIndex, Uncheckable, named_paths, regular_files
from rsilab.controller.evaluation import (
    PRIVATE_TIERS,
    SystemEvaluator,
    SystemInvalid,
    check_tree_links,
    safe_data_name,
)
from rsilab.controller.jobs import model_produced_by_job
from rsilab.controller.overlap import PrivateIndex
from rsilab.controller.readers import binary_format
from rsilab.controller.unpack import Caps
from rsilab.records import Candidate, CandidateState, Dataset, FlagStage
from rsilab.sandbox.owners import owned_prefix
from rsilab.store.artifacts import ArtifactStore, hash_file
from rsilab.store.base import Store
from rsilab.tasks import ManifestError, Task, get_driver, get_scorer, load_manifest

WEIGHT_SUFFIXES = frozenset(
    {
        ".safetensors", ".pt", ".pth", ".bin", ".ckpt", ".npz", ".npy", ".onnx", ".h5",
        ".gguf", ".pkl", ".pickle", ".joblib", ".msgpack",
    }
)  # fmt: skip
"""Files that hold weights: in a candidate they must come from a recorded job (or the task)."""


@dataclass(frozen=True)
class Refusal:
    """Why a candidate stops before evaluation.

    ``reason`` is for people; ``public`` is what the proposing agent may read (which guard,
    never what matched); ``rule`` names the protocol flag to record, at ``stage``.
    """

    state: CandidateState
    reason: str
    public: str
    rule: str
    detail: str = ""
    stage: FlagStage = FlagStage.TRAINING


def private_data_sha256(evaluator: SystemEvaluator) -> str:
    """Hash of every private sample of every benchmark (ids, inputs, targets)."""
    digest = hashlib.sha256()
    for bench in evaluator.task.benchmarks:
        for tier in PRIVATE_TIERS:
            for sample in evaluator.private_samples(bench.name, tier):
                digest.update(sample.model_dump_json().encode())
    return digest.hexdigest()


def evaluator_sha256(task: Task) -> str:
    """Hash of the code that scores: every benchmark's scorer and the predict driver."""
    digest = hashlib.sha256()
    for bench in task.benchmarks:
        scorer = get_scorer(bench.scorer)
        digest.update(inspect.getsource(scorer.batch or scorer.fn).encode())
        for text in scorer.sources:  # code a batch scorer runs in its sandbox (a driver)
            digest.update(text.encode())
        digest.update(scorer.source_sha256.encode())  # a task's own scorer file, as it is now
    if task.predict_driver is not None:
        digest.update(get_driver(task.predict_driver).source().encode())
    return digest.hexdigest()


def _looks_like_weights(path: Path) -> bool:
    """A weight file by its name (:data:`WEIGHT_SUFFIXES`) or by its bytes: a safetensors file
    renamed ``.dat`` is weights all the same. (Zip, npy and pickle are not taken as weights by
    their bytes: honest data ships in them too, and the content guard reads them.)"""
    if path.suffix.lower() in WEIGHT_SUFFIXES:
        return True
    with path.open("rb") as handle:
        head = handle.read(1 << 16)
    return binary_format(head) == "safetensors"


class TrainingGuards:
    """The training-stage checks of one task's candidates. Thread-safe."""

    def __init__(
        self,
        task: Task,
        secret: bytes,
        store: Store,
        artifacts: ArtifactStore,
        *,
        caps: Caps | None = None,
    ) -> None:
        self.task = task
        self.secret = secret
        self.store = store
        self.artifacts = artifacts
        self.caps = caps or Caps()
        self._index: PrivateIndex | None = None
        self._content: ContentIndex | None = None
        self._trains: dict[str, bool] = {}
        self._lock = Lock()

    def private_index(self) -> PrivateIndex:
        """The index of private items (built once, on first use)."""
        with self._lock:
            if self._index is None:
                self._index = PrivateIndex.build(self.task, self.secret)
            return self._index

    def content_index(self) -> ContentIndex:
        """The content guard's index: private items, numeric references, raw sources."""
        private = self.private_index()
        with self._lock:
            if self._content is None:
                self._content = ContentIndex.build(self.task, self.secret, private=private)
            return self._content

    def check(
        self, candidate: Candidate, *, head_harness_sha256: str | None = None
    ) -> Refusal | None:
        """The first guard ``candidate`` fails, or None when it may be evaluated.

        ``head_harness_sha256`` is the harness of the lineage's head (what the candidate is
        judged against); without it the training-dropped guard is not applied.
        """
        with tempfile.TemporaryDirectory(prefix=owned_prefix("guard")) as tmp:
            tree = Path(tmp) / "tree"
            try:
                self.artifacts.materialize(candidate.harness_sha256, tree, "tree")
            except Exception as exc:  # a missing or malformed tree is the candidate's fault
                public = "the harness tree cannot be restored"
                return Refusal(
                    CandidateState.INVALID, f"{public}: {exc}", public, "candidate_invalid", public
                )
            try:
                check_tree_links(tree)
            except SystemInvalid as exc:
                return Refusal(
                    CandidateState.INVALID, exc.reason, exc.public, "link_leaves_harness",
                    exc.reason, FlagStage.ACCESS,
                )  # fmt: skip
            try:
                extra = self._extra_data_files(candidate, Path(tmp) / "data")
            except SystemInvalid as exc:
                return Refusal(
                    CandidateState.INVALID, exc.reason, exc.public, "candidate_invalid", exc.public
                )
            return (
                self._overlap(tree, extra)
                or self._weights(tree)
                or self._training_dropped(tree, head_harness_sha256)
            )

    def scan(self, tree: Path, extra: list[tuple[str, Path]]) -> Refusal | None:
        """The content guard on ``tree``, registered data ``extra`` ((name, file or folder))
        and the host files the tree names: a refusal, or None when nothing was found."""
        return self._overlap(tree, extra)

    def _overlap(self, tree: Path, extra: list[tuple[str, Path]]) -> Refusal | None:
        index = self.content_index()
        files = [(p.relative_to(tree).as_posix(), p) for p in regular_files(tree)]
        for name, path in extra:
            if path.is_dir():
                files += [(f"{name}/{p.relative_to(path).as_posix()}", p)
                          for p in regular_files(path)]  # fmt: skip
            else:
                files.append((name, path))
        files += [(f"named path {p}", p) for p in named_paths(tree)]
        # weights a recorded job made are read in every known form, not as bare numbers (a
        # big model in no known format would otherwise be past the raw-bytes cap)
        known = {sha for _, p in files if model_produced_by_job(self.store, sha := hash_file(p))}
        try:
            report = index.scan(files, self.caps, known=known)
        except Uncheckable as exc:
            detail = f"training data the guard cannot check: {exc}"
            public = (
                "training data the guard cannot check (an archive past the size, ratio or "
                "depth caps, a container it cannot open, or a binary of bare numbers past "
                f"16 MiB): {exc.where}"
            )
            return Refusal(
                CandidateState.REJECTED, detail, public, "uncheckable_training_data", detail
            )
        if not report.leaks():
            return None
        detail = report.detail()
        public = "training data overlaps the private tiers"
        return Refusal(
            CandidateState.REJECTED,
            f"{public}: {detail}",
            public,
            "private_data_in_training",
            detail,
        )

    def _weights(self, tree: Path) -> Refusal | None:
        shipped = {hash_file(p) for p in self.task.harness.rglob("*") if p.is_file()}
        foreign = []
        for path in sorted(tree.rglob("*")):
            if path.is_file() and not path.is_symlink() and _looks_like_weights(path):
                sha = hash_file(path)
                if sha not in shipped and model_produced_by_job(self.store, sha) is None:
                    foreign.append(str(path.relative_to(tree)))
        if not foreign:
            return None
        detail = f"weights not produced by a recorded job: {', '.join(foreign[:5])}"
        # the files are the agent's own, so naming them tells it nothing private
        return Refusal(CandidateState.REJECTED, detail, detail, "unrecorded_weights", detail)

    def _training_dropped(self, tree: Path, head_harness: str | None) -> Refusal | None:
        """Refuse a harness without a train step when the head's harness has one.

        The controller re-trains every candidate so that what scores is a model a recorded job
        made from recorded inputs; a predict-only candidate in a trained lineage escapes that
        (answer tables, weights fit elsewhere and shipped as a .json or .txt "calibration").
        A lineage that never trained (kernel) is not affected.
        """
        if head_harness is None or not self._head_trains(head_harness):
            return None
        try:
            if load_manifest(tree).trains:
                return None
        except ManifestError:
            return None  # the evaluation reports it invalid, with the manifest's problems
        detail = "the harness has no train step, while the lineage's head trains"
        public = (
            "the candidate drops the training step: in a lineage whose system trains, the "
            "controller must re-train every candidate itself (keep train in harness.toml)"
        )
        return Refusal(CandidateState.REJECTED, detail, public, "training_dropped", detail)

    def _head_trains(self, harness: str) -> bool:
        """Whether the stored harness ``harness`` has a train step (cached per hash)."""
        with self._lock:
            if harness in self._trains:
                return self._trains[harness]
        with tempfile.TemporaryDirectory(prefix=owned_prefix("guard-head")) as tmp:
            tree = Path(tmp) / "tree"
            self.artifacts.materialize(harness, tree, "tree")
            try:
                trains = load_manifest(tree).trains
            except ManifestError:
                trains = False  # an accepted head always loads; nothing to compare with
        with self._lock:
            self._trains[harness] = trains
        return trains

    def _extra_data_files(self, candidate: Candidate, folder: Path) -> list[tuple[str, Path]]:
        out = []
        for data_id in candidate.data_ids:
            dataset = self.store.get_as(data_id, Dataset)
            dest = folder / safe_data_name(dataset.name)
            self.artifacts.materialize(dataset.artifact_sha256, dest, dataset.artifact_kind)
            out.append((dataset.name, dest))
        return out


__all__ = [
    "WEIGHT_SUFFIXES",
    "Refusal",
    "TrainingGuards",
    "evaluator_sha256",
    "private_data_sha256",
]
