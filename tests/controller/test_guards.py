"""The training-stage guards, called directly on stored trees (no job runs): each refusal
with its state, rule and words, and the weights suffixes, named here as literals."""

from __future__ import annotations

import hashlib
import inspect
import os
import re
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Literal

import pytest

from rsilab.controller import guards as guards_module
from rsilab.controller.guards import TrainingGuards, evaluator_sha256, private_data_sha256
from rsilab.controller.overlap import PrivateIndex
from rsilab.records import (
    Candidate,
    CandidateState,
    Dataset,
    EventDraft,
    Job,
    JobInputs,
    JobKind,
    JobStatus,
    Record,
)
from rsilab.sandbox.owners import owner_of
from rsilab.store import Lab
from rsilab.store.artifacts import hash_file
from rsilab.tasks import Sample, Task, get_driver, get_scorer, get_task, plant_traps

WEIGHTS = (
    ".safetensors", ".pt", ".pth", ".bin", ".ckpt", ".npz", ".npy", ".onnx", ".h5", ".gguf",
    ".pkl", ".pickle", ".joblib", ".msgpack",
)  # fmt: skip
"""Suffixes of files that hold weights: in a candidate they must come from a recorded job."""
SECRET = bytes(range(32))
PREDICT_ONLY = '[harness]\nname = "synthetic"\npredict = "python predict.py"\nmodel = "none"\n'

Tree = Callable[..., str]


@pytest.fixture(scope="module")
def index() -> PrivateIndex:
    """synthetic's private items under :data:`SECRET`, built once for the module."""
    return PrivateIndex.build(get_task("synthetic"), SECRET)


@pytest.fixture
def guards(
    lab: Lab, synthetic: Task, index: PrivateIndex, monkeypatch: pytest.MonkeyPatch
) -> TrainingGuards:
    made = TrainingGuards(synthetic, SECRET, lab.store, lab.artifacts)
    monkeypatch.setattr(made, "private_index", lambda: index)
    return made


@pytest.fixture
def tree(lab: Lab, synthetic: Task, tmp_path: Path) -> Tree:
    """Store a copy of synthetic's harness with ``files`` written (bytes or text); its hash."""
    counter = iter(range(1000))

    def make(**files: str | bytes) -> str:
        folder = tmp_path / f"tree-{next(counter)}"
        shutil.copytree(synthetic.harness, folder)
        for name, content in files.items():
            path = folder / name.replace("__", "/")
            path.parent.mkdir(parents=True, exist_ok=True)
            if isinstance(content, bytes):
                path.write_bytes(content)
            else:
                path.write_text(content)
        return lab.artifacts.put_tree(folder).sha256

    return make


def _candidate(harness: str, data_ids: list[str] | None = None) -> Candidate:
    return Candidate(
        task="synthetic",
        parent_version_id="ver-000000000000",
        harness_sha256=harness,
        data_ids=data_ids or [],
    )


def _commit(lab: Lab, *records: Record) -> None:
    lab.store.commit(EventDraft(actor="t", role="controller", action="seed"), list(records))


def test_an_honest_candidate_passes(guards: TrainingGuards, tree: Tree) -> None:
    harness = tree()
    assert guards.check(_candidate(harness), head_harness_sha256=harness) is None


def test_a_tree_that_cannot_be_restored_is_invalid(guards: TrainingGuards) -> None:
    refusal = guards.check(_candidate("f" * 64))
    assert refusal is not None
    assert (refusal.state, refusal.public, refusal.rule) == (
        CandidateState.INVALID,
        "the harness tree cannot be restored",
        "candidate_invalid",
    )
    assert refusal.reason.startswith("the harness tree cannot be restored: ")


def test_a_link_out_of_the_tree_is_invalid(
    guards: TrainingGuards, lab: Lab, synthetic: Task, tmp_path: Path
) -> None:
    folder = tmp_path / "linked"
    shutil.copytree(synthetic.harness, folder)
    os.symlink("/etc/hostname", folder / "host")
    refusal = guards.check(_candidate(lab.artifacts.put_tree(folder).sha256))
    assert refusal is not None and refusal.state is CandidateState.INVALID
    assert "host" in refusal.reason
    assert (refusal.rule, refusal.stage) == ("link_leaves_harness", "access")


def test_private_items_in_the_tree_are_refused_with_a_flag(
    lab: Lab, synthetic: Task, tmp_path: Path
) -> None:
    guards = TrainingGuards(synthetic, SECRET, lab.store, lab.artifacts)  # its own index
    folder = tmp_path / "leaky"
    shutil.copytree(synthetic.harness, folder)
    planted = plant_traps(synthetic, folder, SECRET)
    refusal = guards.check(_candidate(lab.artifacts.put_tree(folder).sha256))
    assert refusal is not None
    public = "training data overlaps the private tiers"
    assert (refusal.state, refusal.rule, refusal.public) == (
        CandidateState.REJECTED,
        "private_data_in_training",
        public,
    )
    names = ", ".join(sorted(p.relative_to(folder).as_posix() for p in planted))
    pattern = rf"\d+ private samples \(\d+ exact, \d+ approximate matches\) found in {names}"
    assert re.fullmatch(pattern, refusal.detail), refusal.detail
    assert refusal.reason == f"{public}: {refusal.detail}"


def test_private_items_in_registered_data_are_refused(
    guards: TrainingGuards, lab: Lab, synthetic: Task, tmp_path: Path, tree: Tree
) -> None:
    folder = tmp_path / "data"
    folder.mkdir()
    (planted,) = plant_traps(synthetic, folder, SECRET)
    as_file = lab.artifacts.put_bytes(planted.read_bytes())
    as_tree = lab.artifacts.put_tree(planted.parent)
    file_data = Dataset(name="extra.jsonl", artifact_sha256=as_file.sha256, artifact_kind="file")
    tree_data = Dataset(name="extra", artifact_sha256=as_tree.sha256, artifact_kind="tree")
    _commit(lab, file_data, tree_data)
    for data, where in ((file_data, "extra.jsonl"), (tree_data, f"extra/{planted.name}")):
        refusal = guards.check(_candidate(tree(), [data.id]))
        assert refusal is not None and refusal.rule == "private_data_in_training"
        assert refusal.detail.endswith(f"found in {where}"), refusal.detail


def test_a_dataset_name_that_steers_a_path_is_invalid(
    guards: TrainingGuards, lab: Lab, tree: Tree
) -> None:
    blob = lab.artifacts.put_bytes(b"harmless\n")
    data = Dataset(name="../escaped", artifact_sha256=blob.sha256, artifact_kind="file")
    _commit(lab, data)
    refusal = guards.check(_candidate(tree(), [data.id]))
    assert refusal is not None and refusal.state is CandidateState.INVALID
    assert refusal.rule == "candidate_invalid" and "plain file name" in refusal.public


@pytest.mark.parametrize("suffix", [*WEIGHTS, ".PT", ".SafeTensors"])
def test_weights_from_nowhere_are_refused(guards: TrainingGuards, tree: Tree, suffix: str) -> None:
    refusal = guards.check(_candidate(tree(**{f"w__model{suffix}": b"\x01" * 64})))
    detail = f"weights not produced by a recorded job: w/model{suffix}"
    assert refusal is not None
    assert (refusal.state, refusal.rule, refusal.detail, refusal.public, refusal.reason) == (
        CandidateState.REJECTED,
        "unrecorded_weights",
        detail,
        detail,
        detail,
    )


def test_other_files_are_not_weights(guards: TrainingGuards, tree: Tree) -> None:
    files = {"notes.json": b"\x01" * 64, "model.txt": b"\x02" * 64, "pt": b"\x03" * 64}
    assert guards.check(_candidate(tree(**files))) is None


def test_weights_a_recorded_job_made_or_the_task_ships_pass(
    guards: TrainingGuards, lab: Lab, synthetic: Task, tree: Tree, tmp_path: Path
) -> None:
    made = tmp_path / "made.pt"
    made.write_bytes(b"\x05" * 64)
    inputs = JobInputs(workspace_sha256="0" * 64, seed=0)
    job = Job(
        kind=JobKind.TRAIN,
        status=JobStatus.SUCCEEDED,
        inputs=inputs,
        model_out_sha256=hash_file(made),
    )
    _commit(lab, job)
    shipped = (synthetic.harness / "config.json").read_bytes()
    harness = tree(**{"w__made.pt": made.read_bytes(), "w__ship.npy": shipped})
    assert guards.check(_candidate(harness)) is None


def test_a_failed_job_does_not_vouch_for_weights(
    guards: TrainingGuards, lab: Lab, tree: Tree, tmp_path: Path
) -> None:
    made = tmp_path / "made.pt"
    made.write_bytes(b"\x06" * 64)
    inputs = JobInputs(workspace_sha256="0" * 64, seed=0)
    job = Job(
        kind=JobKind.TRAIN, status=JobStatus.FAILED, inputs=inputs, model_out_sha256=hash_file(made)
    )
    _commit(lab, job)
    refusal = guards.check(_candidate(tree(**{"made.pt": made.read_bytes()})))
    assert refusal is not None and refusal.rule == "unrecorded_weights"


def test_a_link_to_weights_is_named_once(
    guards: TrainingGuards, lab: Lab, synthetic: Task, tmp_path: Path
) -> None:
    folder = tmp_path / "linked"
    shutil.copytree(synthetic.harness, folder)
    (folder / "model.pt").write_bytes(b"\x07" * 64)
    os.symlink("model.pt", folder / "alias.pt")
    refusal = guards.check(_candidate(lab.artifacts.put_tree(folder).sha256))
    assert refusal is not None
    assert refusal.detail == "weights not produced by a recorded job: model.pt"


def test_dropping_the_train_step_is_refused_where_the_head_trains(
    guards: TrainingGuards, tree: Tree
) -> None:
    trains, predict_only = tree(), tree(**{"harness.toml": PREDICT_ONLY})
    refusal = guards.check(_candidate(predict_only), head_harness_sha256=trains)
    assert refusal is not None
    assert (refusal.state, refusal.rule, refusal.detail, refusal.reason) == (
        CandidateState.REJECTED,
        "training_dropped",
        "the harness has no train step, while the lineage's head trains",
        "the harness has no train step, while the lineage's head trains",
    )
    assert refusal.public == (
        "the candidate drops the training step: in a lineage whose system trains, the "
        "controller must re-train every candidate itself (keep train in harness.toml)"
    )
    # without a head, or under a head that never trained, there is nothing to drop
    assert guards.check(_candidate(predict_only)) is None
    assert guards.check(_candidate(predict_only), head_harness_sha256=predict_only) is None
    # a candidate whose manifest is broken is left to the evaluation, which reports it
    broken = tree(**{"harness.toml": "[harness\n"})
    assert guards.check(_candidate(broken), head_harness_sha256=trains) is None
    # a head whose manifest is broken trains nothing to compare with
    assert guards.check(_candidate(predict_only), head_harness_sha256=broken) is None


def test_the_heads_train_step_is_read_once(
    guards: TrainingGuards, lab: Lab, tree: Tree, monkeypatch: pytest.MonkeyPatch
) -> None:
    trains, predict_only = tree(), tree(**{"harness.toml": PREDICT_ONLY})
    first = guards.check(_candidate(predict_only), head_harness_sha256=trains)
    restored: list[str] = []
    original = lab.artifacts.materialize

    def counting(sha: str, *args: object, **kwargs: object) -> object:
        restored.append(sha)
        return original(sha, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(lab.artifacts, "materialize", counting)
    again = guards.check(_candidate(predict_only), head_harness_sha256=trains)
    assert first == again and trains not in restored


# what the controller fingerprints, so that it never compares scores across a change


class _Evaluator:
    """Stands in for a SystemEvaluator: its task and its private samples, by tier."""

    def __init__(self, task: Task, samples: dict[tuple[str, str], list[Sample]]) -> None:
        self.task = task
        self.samples = samples

    def private_samples(self, benchmark: str, tier: str) -> list[Sample]:
        return self.samples[(benchmark, str(tier))]


def _sample(sample_id: str, value: int) -> Sample:
    return Sample(id=sample_id, input={"x": value}, target=value)


def test_the_private_data_fingerprint_covers_every_private_sample(synthetic: Task) -> None:
    samples = {
        (bench.name, tier): [_sample(f"{bench.name}-{tier}-{i}", i) for i in range(2)]
        for bench in synthetic.benchmarks
        for tier in ("accept", "final")
    }
    expected = hashlib.sha256()
    for bench in synthetic.benchmarks:
        for tier in ("accept", "final"):
            for sample in samples[(bench.name, tier)]:
                expected.update(sample.model_dump_json().encode())
    fingerprint = private_data_sha256(_Evaluator(synthetic, samples))  # type: ignore[arg-type]
    assert fingerprint == expected.hexdigest()
    for key in samples:  # any one private sample changed changes it
        changed = {**samples, key: [_sample(samples[key][0].id, 99), samples[key][1]]}
        other = private_data_sha256(_Evaluator(synthetic, changed))  # type: ignore[arg-type]
        assert other != fingerprint, key


def test_the_evaluator_fingerprint_covers_scorers_and_the_predict_driver(synthetic: Task) -> None:
    quality, robustness = synthetic.benchmarks
    expected = hashlib.sha256()
    for bench in synthetic.benchmarks:
        expected.update(inspect.getsource(get_scorer(bench.scorer).fn).encode())
    assert evaluator_sha256(synthetic) == expected.hexdigest()
    rescored = synthetic.model_copy(
        update={"benchmarks": [quality, robustness.model_copy(update={"scorer": "squared_error"})]}
    )
    assert evaluator_sha256(rescored) != evaluator_sha256(synthetic)
    driven = synthetic.model_copy(update={"predict_driver": get_task("kernel").predict_driver})
    driver = get_driver(str(driven.predict_driver)).source()
    expected.update(driver.encode())
    assert evaluator_sha256(driven) == expected.hexdigest()


def test_private_items_in_the_tree_count_beside_clean_registered_data(
    guards: TrainingGuards, lab: Lab, synthetic: Task, tmp_path: Path
) -> None:
    folder = tmp_path / "leaky"
    shutil.copytree(synthetic.harness, folder)
    plant_traps(synthetic, folder, SECRET)
    clean = lab.artifacts.put_bytes(b'{"x": 1}\n')
    data = Dataset(name="clean.jsonl", artifact_sha256=clean.sha256, artifact_kind="file")
    _commit(lab, data)
    refusal = guards.check(_candidate(lab.artifacts.put_tree(folder).sha256, [data.id]))
    assert refusal is not None and refusal.rule == "private_data_in_training"


def test_the_first_five_foreign_weights_are_named(guards: TrainingGuards, tree: Tree) -> None:
    files = {f"w__m{i}.pt": bytes([i]) * 64 for i in range(6)}
    refusal = guards.check(_candidate(tree(**files)))
    assert refusal is not None
    assert refusal.detail == (
        "weights not produced by a recorded job: w/m0.pt, w/m1.pt, w/m2.pt, w/m3.pt, w/m4.pt"
    )


# --- the content guard through the guards: containers, named host files, caps --------------


def test_a_leaked_tier_compressed_in_the_tree_is_refused(
    lab: Lab, synthetic: Task, tmp_path: Path, tree: Tree
) -> None:
    import gzip

    (planted,) = plant_traps(synthetic, tmp_path, SECRET)
    guards = TrainingGuards(synthetic, SECRET, lab.store, lab.artifacts)
    refusal = guards.check(_candidate(tree(data__extra=gzip.compress(planted.read_bytes()))))
    assert refusal is not None and refusal.rule == "private_data_in_training"
    assert "data/extra!" in refusal.detail


def test_host_files_the_tree_names_by_path_are_checked(
    lab: Lab, synthetic: Task, tmp_path: Path, tree: Tree
) -> None:
    """train.py may read a host file it names (under the process sandbox, or one placed where
    the sandbox shows it): the guard reads what the tree names by absolute path."""
    (planted,) = plant_traps(synthetic, tmp_path / "outside", SECRET)
    guards = TrainingGuards(synthetic, SECRET, lab.store, lab.artifacts)
    code = f"ROWS = open({str(planted)!r}).read()\n"
    refusal = guards.check(_candidate(tree(**{"more.py": code})))
    assert refusal is not None and refusal.rule == "private_data_in_training"
    assert f"named path {planted}" in refusal.detail
    harmless = "print(open('/etc/hostname').read(), open('/no/such/file'), '/proc/kcore')\n"
    assert guards.check(_candidate(tree(**{"more.py": harmless}))) is None


def test_data_past_the_caps_is_refused_with_a_flag_never_skipped(
    lab: Lab, synthetic: Task, tree: Tree
) -> None:
    import gzip

    from rsilab.controller.unpack import Caps

    caps = Caps(ratio=50, ratio_floor=1 << 16)
    guards = TrainingGuards(synthetic, SECRET, lab.store, lab.artifacts, caps=caps)
    refusal = guards.check(_candidate(tree(data__zeros=gzip.compress(b"\0" * (1 << 20)))))
    assert refusal is not None
    assert (refusal.state, refusal.rule) == (CandidateState.REJECTED, "uncheckable_training_data")
    assert "data/zeros" in refusal.public and "more than 50 times" in refusal.detail
    zstd = tree(data__blob=b"\x28\xb5\x2f\xfd" + b"\0" * 64)
    refused = guards.check(_candidate(zstd))
    assert refused is not None and refused.rule == "uncheckable_training_data"


def test_the_private_and_content_indexes_are_built_once(
    lab: Lab, synthetic: Task, monkeypatch: pytest.MonkeyPatch
) -> None:
    built: list[object] = []
    private, content = object(), object()

    def build_private(task: Task, secret: bytes) -> object:
        built.append(("private", task.name, secret))
        return private

    def build_content(task: Task, secret: bytes, *, private: object) -> object:
        built.append(("content", task.name, secret, private))
        return content

    monkeypatch.setattr(guards_module.PrivateIndex, "build", build_private)
    monkeypatch.setattr(guards_module.ContentIndex, "build", build_content)
    guards = TrainingGuards(synthetic, SECRET, lab.store, lab.artifacts)
    assert guards.content_index() is content and guards.content_index() is content
    assert guards.private_index() is private
    assert built == [
        ("private", "synthetic", SECRET),
        ("content", "synthetic", SECRET, private),
    ]


def test_invalid_candidates_carry_their_flag_and_words(
    guards: TrainingGuards, lab: Lab, synthetic: Task, tmp_path: Path, tree: Tree
) -> None:
    public = "the harness tree cannot be restored"
    gone = guards.check(_candidate("f" * 64))
    assert gone is not None and (gone.detail, gone.stage) == (public, "training")
    folder = tmp_path / "linked"
    shutil.copytree(synthetic.harness, folder)
    os.symlink("/etc/hostname", folder / "host")
    link = guards.check(_candidate(lab.artifacts.put_tree(folder).sha256))
    assert link is not None
    words = "host is a link that leaves the harness (/etc/hostname)"
    assert (link.reason, link.public, link.detail) == (words, words, words)
    blob = lab.artifacts.put_bytes(b"harmless\n")
    data = Dataset(name="../escaped", artifact_sha256=blob.sha256, artifact_kind="file")
    _commit(lab, data)
    named = guards.check(_candidate(tree(), [data.id]))
    assert named is not None and named.reason and named.detail == named.public


def test_private_items_in_the_tree_count_beside_a_clean_registered_folder(
    guards: TrainingGuards, lab: Lab, synthetic: Task, tmp_path: Path
) -> None:
    folder = tmp_path / "leaky"
    shutil.copytree(synthetic.harness, folder)
    plant_traps(synthetic, folder, SECRET)
    clean = tmp_path / "clean"
    clean.mkdir()
    (clean / "rows.jsonl").write_text('{"x": 1}\n')
    stored = lab.artifacts.put_tree(clean).sha256
    data = Dataset(name="clean", artifact_sha256=stored, artifact_kind="tree")
    _commit(lab, data)
    refusal = guards.check(_candidate(lab.artifacts.put_tree(folder).sha256, [data.id]))
    assert refusal is not None and refusal.rule == "private_data_in_training"


def test_data_the_guard_cannot_open_is_refused_with_a_flag(
    guards: TrainingGuards, tree: Tree
) -> None:
    refusal = guards.check(_candidate(tree(**{"data.zip": b"PK\x03\x04 not really a zip"})))
    assert refusal is not None
    assert (refusal.state, refusal.rule) == (CandidateState.REJECTED, "uncheckable_training_data")
    assert refusal.reason == refusal.detail
    assert refusal.detail.startswith("training data the guard cannot check: data.zip")
    assert refusal.public == (
        "training data the guard cannot check (an archive past the size, ratio or depth caps, "
        "a container it cannot open, or a binary of bare numbers past 16 MiB): data.zip"
    )


def test_a_folder_can_be_scanned_without_a_candidate(
    guards: TrainingGuards, synthetic: Task, tmp_path: Path
) -> None:
    folder = tmp_path / "scanned"
    shutil.copytree(synthetic.harness, folder)
    assert guards.scan(folder, []) is None
    plant_traps(synthetic, folder, SECRET)
    refusal = guards.scan(folder, [])
    assert refusal is not None and refusal.rule == "private_data_in_training"


def test_scratch_folders_name_their_owner_so_a_sweep_finds_them_after_a_kill(
    guards: TrainingGuards, lab: Lab, tree: Tree, monkeypatch: pytest.MonkeyPatch
) -> None:
    restored: list[Path] = []
    original = lab.artifacts.materialize

    def recording(sha: str, dest: Path, kind: Literal["file", "tree"]) -> Path:
        restored.append(Path(dest))
        return original(sha, dest, kind)

    monkeypatch.setattr(lab.artifacts, "materialize", recording)
    trains, predict_only = tree(), tree(**{"harness.toml": PREDICT_ONLY})
    guards.check(_candidate(predict_only), head_harness_sha256=trains)
    assert len(restored) == 2  # the candidate's tree, then the head's
    for dest in restored:
        owner = owner_of(dest.parent.name)
        assert owner is not None and owner.pid == os.getpid(), dest


def test_a_safetensors_file_under_another_name_is_weights_all_the_same(tmp_path: Path) -> None:
    """Weights are told by their bytes as well as their name: a renamed safetensors file that
    no recorded job produced is refused as unrecorded weights."""
    import json
    import struct

    header = json.dumps({"w": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}}).encode()
    blob = struct.pack("<Q", len(header)) + header + struct.pack("<2f", 1.0, 2.0)
    plain = tmp_path / "plain"
    plain.mkdir()
    (plain / "notes.dat").write_bytes(b"just some bytes, no header")
    (plain / "model.dat").write_bytes(blob)
    from rsilab.controller.guards import _looks_like_weights

    assert _looks_like_weights(plain / "model.dat")
    assert not _looks_like_weights(plain / "notes.dat")
