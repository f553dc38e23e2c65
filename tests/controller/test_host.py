"""The Host Controller end to end on ``synthetic``: baseline, judge, guards, lineage, CAS."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from rsilab.controller.evaluation import EMPTY_SHA256
from rsilab.controller.host import HostController
from rsilab.controller.lineage import lineage_versions, require_lineage, rollback
from rsilab.errors import ConflictError, UserError
from rsilab.executors.local import LocalExecutor
from rsilab.records import (
    Candidate,
    CandidateState,
    DataTier,
    Evaluation,
    Job,
    JobKind,
    ProtocolFlag,
    SystemVersion,
)
from rsilab.store import Lab
from rsilab.store.verify import verify_store
from rsilab.tasks import Task, plant_traps
from tests.synthetic_configs import BETTER

MakeHarness = Callable[..., Path]


def _judge(controller: HostController, lab: Lab, folder: Path, **kw: object) -> Candidate:
    sha = lab.artifacts.put_tree(folder).sha256
    candidate = controller.propose(sha, campaign_id=None, proposer="tester", **kw)  # type: ignore[arg-type]
    return controller.judge(candidate.id)


def test_baseline_is_the_first_version(controller: HostController, lab: Lab) -> None:
    version = controller.baseline()
    assert version.label == "H0/M0" and version.parent_id is None
    assert set(version.scores) == {"quality", "robustness"}
    assert 0.3 < version.scores["quality"].value < 0.55
    assert version.scores["quality"].low < version.scores["quality"].value
    assert len(version.seeds) == 6 and all(version.model_sha256s)  # twice a candidate's
    evaluations = [lab.store.get_as(e, Evaluation) for e in version.evaluation_ids]
    assert {(e.benchmark, e.tier) for e in evaluations} == {
        (b, t) for b in ("quality", "robustness") for t in (DataTier.ACCEPT, DataTier.FINAL)
    }
    assert all(len({s.epoch for s in e.samples}) == 6 for e in evaluations)
    jobs = lab.store.query_as(Job)
    assert {j.kind for j in jobs} == {JobKind.CONTROLLER_TRAIN, JobKind.CONTROLLER_PREDICT}
    with pytest.raises(UserError, match="already has a baseline"):
        controller.baseline()


def test_of_two_baselines_racing_the_first_recorded_is_the_baseline(
    controller: HostController, lab: Lab, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two runs started at once on a fresh lab both found no baseline and evaluated one; the
    second to record it failed with a conflict. It now takes the first's."""
    first = controller.baseline()
    import rsilab.controller.host as host

    real = host.find_lineage
    calls = iter([None])  # the second process's look happened before the first recorded
    monkeypatch.setattr(host, "find_lineage", lambda *a: next(calls, real(*a)))
    second = controller.baseline()
    assert second.id == first.id
    assert len(lab.store.query_as(SystemVersion)) == 1


def test_a_better_config_is_accepted_and_a_copy_rejected(
    controller: HostController, lab: Lab, make_harness: MakeHarness
) -> None:
    v0 = controller.baseline()
    better = _judge(controller, lab, make_harness(BETTER))
    assert better.state is CandidateState.ACCEPTED, better.reason
    assert better.compared_to == v0.id and better.version_id is not None
    v1 = lab.store.get_as(better.version_id, SystemVersion)
    assert v1.parent_id == v0.id and v1.label == "H1/M1" and v1.candidate_id == better.id
    assert v1.scores["quality"].value > v0.scores["quality"].value + 0.1
    lineage = require_lineage(lab.store, "synthetic")
    assert lineage.head_id == v1.id and lineage.versions == [v0.id, v1.id]
    # the same system again is no gain over the head: rejected, lineage untouched
    again = _judge(controller, lab, make_harness(BETTER))
    assert again.state is CandidateState.REJECTED and again.proposal_index == 2
    assert "lower bound" in again.reason and again.public_note == ""
    assert require_lineage(lab.store, "synthetic").versions == [v0.id, v1.id]


def test_a_stale_candidate_is_judged_against_the_current_head(
    controller: HostController, lab: Lab, make_harness: MakeHarness
) -> None:
    v0 = controller.baseline()
    a = controller.propose(
        lab.artifacts.put_tree(make_harness(BETTER)).sha256, campaign_id=None, proposer="a"
    )
    b = controller.propose(
        lab.artifacts.put_tree(make_harness({"epochs": 8})).sha256, campaign_id=None, proposer="b"
    )
    judged = controller.judge(a.id)
    assert judged.state is CandidateState.ACCEPTED, judged.reason
    judged = controller.judge(b.id)
    head = require_lineage(lab.store, "synthetic").head_id
    assert judged.parent_version_id == v0.id and judged.compared_to == head != v0.id
    assert judged.state is CandidateState.REJECTED
    assert "judged against the current head" in judged.reason


def test_acceptance_is_a_compare_and_swap(
    controller: HostController,
    lab: Lab,
    make_harness: MakeHarness,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    controller.baseline()
    real_commit = lab.store.commit
    moved = {"times": 0}

    def racing_commit(draft, writes=()):  # type: ignore[no-untyped-def]
        if draft.action == "candidate_accepted" and moved["times"] < 99:
            moved["times"] += 1
            raise ConflictError("lineage moved")  # another process won every race
        return real_commit(draft, writes)

    monkeypatch.setattr(lab.store, "commit", racing_commit)
    judged = _judge(controller, lab, make_harness(BETTER))
    assert judged.state is CandidateState.STALE and moved["times"] == 5
    assert len(require_lineage(lab.store, "synthetic").versions) == 1


@pytest.mark.parametrize(
    ("files", "public"),
    [
        ({"predict.py": "import sys\nprint('not json')\n"}, "output contract"),
        (
            {"predict.py": "import sys\nsys.stderr.write('SECRET-LOG')\nsys.exit(3)\n"},
            "did not finish",
        ),
        ({"train.py": "raise SystemExit(4)\n"}, "train failed"),
        ({"harness.toml": "[harness]\nmodel = 'pickle'\n"}, "does not load"),
    ],
)
def test_broken_candidates_are_invalid_with_a_safe_note(
    controller: HostController,
    lab: Lab,
    make_harness: MakeHarness,
    files: dict[str, str],
    public: str,
) -> None:
    controller.baseline()
    judged = _judge(controller, lab, make_harness(**files))
    assert judged.state is CandidateState.INVALID
    assert public in judged.public_note and "SECRET-LOG" not in judged.public_note
    assert judged.reason  # the full reason is kept for people
    assert len(require_lineage(lab.store, "synthetic").versions) == 1
    # a controller job that fails counts against the candidate, with a flag of its own
    (flag,) = lab.store.query_as(ProtocolFlag)
    assert (flag.stage, flag.rule) == ("evaluation", "candidate_invalid")
    assert public in flag.detail and "SECRET-LOG" not in flag.detail


def test_a_link_out_of_the_harness_is_invalid_and_flagged(
    controller: HostController, lab: Lab, make_harness: MakeHarness
) -> None:
    controller.baseline()
    folder = make_harness(BETTER)
    (folder / "data.jsonl").symlink_to("/etc/hostname")
    judged = _judge(controller, lab, folder)
    assert judged.state is CandidateState.INVALID
    assert "leaves the harness" in judged.public_note
    assert [(f.stage, f.rule) for f in lab.store.query_as(ProtocolFlag)] == [
        ("access", "link_leaves_harness")
    ]


def test_leaked_private_data_is_flagged_before_any_training(
    controller: HostController, lab: Lab, make_harness: MakeHarness
) -> None:
    controller.baseline()
    folder = make_harness(BETTER)
    plant_traps(controller.task, folder, controller.secret)
    jobs_before = len(lab.store.query_as(Job))
    judged = _judge(controller, lab, folder)
    assert judged.state is CandidateState.REJECTED
    assert judged.public_note == "training data overlaps the private tiers"
    assert len(lab.store.query_as(Job)) == jobs_before  # nothing ran
    flags = lab.store.query_as(ProtocolFlag)
    assert [(f.stage, f.rule) for f in flags] == [("training", "private_data_in_training")]


def test_weights_from_nowhere_are_refused(
    controller: HostController, lab: Lab, make_harness: MakeHarness
) -> None:
    controller.baseline()
    judged = _judge(controller, lab, make_harness(**{"weights__model.safetensors": "x" * 64}))
    assert judged.state is CandidateState.REJECTED
    assert [f.rule for f in lab.store.query_as(ProtocolFlag)] == ["unrecorded_weights"]
    # a model a recorded job produced is fine in a candidate
    version = lab.store.get_as(require_lineage(lab.store, "synthetic").head_id, SystemVersion)
    folder = make_harness(BETTER)
    lab.artifacts.materialize(version.model_sha256s[0], folder / "weights/prev.safetensors", "file")
    judged = _judge(controller, lab, folder)
    assert judged.state is CandidateState.ACCEPTED, judged.reason


def test_proposals_are_capped_per_campaign(
    lab: Lab,
    synthetic,
    executor,
    make_harness: MakeHarness,  # type: ignore[no-untyped-def]
) -> None:
    controller = HostController(lab, synthetic, executor, max_proposals=1)
    controller.baseline()
    sha = lab.artifacts.put_tree(make_harness({"epochs": 5})).sha256
    first = controller.propose(sha, campaign_id="cmp-aaaaaaaa", proposer="w")
    second = controller.propose(sha, campaign_id="cmp-aaaaaaaa", proposer="w")
    other = controller.propose(sha, campaign_id="cmp-bbbbbbbb", proposer="w")
    assert (first.proposal_index, second.proposal_index, other.proposal_index) == (1, 2, 1)
    capped = controller.judge(second.id)
    assert capped.state is CandidateState.REJECTED and "proposal cap" in capped.reason


def test_changed_evaluation_inputs_stop_the_controller(
    controller: HostController,
    lab: Lab,
    make_harness: MakeHarness,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    controller.baseline()
    candidate = controller.propose(
        lab.artifacts.put_tree(make_harness()).sha256, campaign_id=None, proposer="w"
    )
    monkeypatch.setattr(controller, "evaluator_sha256", lambda: "0" * 64)
    with pytest.raises(UserError, match="scorers"):
        controller.judge(candidate.id)
    assert [f.rule for f in lab.store.query_as(ProtocolFlag)] == ["evaluator_changed"]
    # judged in the background, the same failure ends the candidate rejected, never lost
    decided = controller.judge_safely(candidate.id)
    assert decided is not None and decided.state is CandidateState.REJECTED


def test_rollback_appends_and_the_ledger_verifies(
    controller: HostController, lab: Lab, make_harness: MakeHarness
) -> None:
    v0 = controller.baseline()
    judged = _judge(controller, lab, make_harness(BETTER))
    assert judged.state is CandidateState.ACCEPTED, judged.reason
    restored = rollback(lab.store, "synthetic", "main", v0.id, actor="alice")
    lineage = require_lineage(lab.store, "synthetic")
    assert lineage.head_id == restored.id and len(lineage.versions) == 3
    assert restored.rollback_of == v0.id and restored.label == v0.label
    assert [v.label for v in lineage_versions(lab.store, lineage)] == ["H0/M0", "H1/M1", "H0/M0"]
    with pytest.raises(UserError, match="not a version"):
        rollback(lab.store, "synthetic", "main", "ver-000000000000", actor="alice")
    report = verify_store(lab.store, None)
    assert report.ok, report


def test_a_dataset_name_cannot_steer_a_path(
    controller: HostController, lab: Lab, make_harness: MakeHarness, tmp_path: Path
) -> None:
    from rsilab.records import Dataset, EventDraft

    controller.baseline()
    blob = lab.artifacts.put_bytes(b"harmless\n")
    dataset = Dataset(name="../../../escaped", artifact_sha256=blob.sha256, artifact_kind="file")
    lab.store.commit(EventDraft(actor="t", role="human", action="setup"), [dataset])
    sha = lab.artifacts.put_tree(make_harness(BETTER)).sha256
    candidate = controller.propose(sha, campaign_id=None, proposer="w", data_ids=[dataset.id])
    judged = controller.judge(candidate.id)
    assert judged.state is CandidateState.INVALID and "plain file name" in judged.public_note
    assert not (tmp_path.parent / "escaped").exists()


def test_an_acceptance_collects_garbage_over_the_size_limit(
    controller: HostController, lab: Lab, make_harness: MakeHarness
) -> None:
    from rsilab.records import Tombstone

    (lab.path / "rsilab.toml").write_text('[lab]\nsize_limit = "1K"\ngc_keep_top = 0\n')
    controller.baseline()
    rejected = _judge(controller, lab, make_harness({"epochs": 3}))
    assert rejected.state is CandidateState.REJECTED
    assert not lab.store.query_as(Tombstone)
    judged = _judge(controller, lab, make_harness(BETTER))
    assert judged.state is CandidateState.ACCEPTED, judged.reason
    removed = {t.sha256 for t in lab.store.query_as(Tombstone)}
    rejected_jobs = [j for j in lab.store.query_as(Job) if j.candidate_id == rejected.id]
    assert removed and removed <= {
        sha for j in rejected_jobs for sha in (j.model_out_sha256, j.stdout_sha256, j.stderr_sha256)
    }
    assert verify_store(lab.store, None, artifacts=lab.artifacts, deep=True).ok


# --- model use: the seed, the model and the train step must matter --------------------------

PIN_SEED = ("args = parser.parse_args()", "args = parser.parse_args()\n    args.seed = 5")
IGNORE_MODEL = (
    'quality = json.load(handle)["quality"]',
    '_ = handle\n        quality = {"quality": 0.99, "robustness": 0.99}',
)
PREDICT_ONLY_TOML = '[harness]\nname = "synthetic"\npredict = "python predict.py"\nmodel = "none"\n'


def _patched(folder: Path, name: str, change: tuple[str, str]) -> Path:
    source = (folder / name).read_text()
    assert change[0] in source
    (folder / name).write_text(source.replace(*change))
    return folder


def _flags(lab: Lab) -> list[tuple[str, str]]:
    return [(f.stage, f.rule) for f in lab.store.query_as(ProtocolFlag)]


def test_a_train_that_ignores_the_seed_is_flagged_not_counted(
    controller: HostController, lab: Lab, make_harness: MakeHarness
) -> None:
    """The luckiest seed pinned in train.py: one model for all the controller's seeds, so the
    seed spread vanishes; the baseline's seeds give different models, so it is detected."""
    controller.baseline()
    judged = _judge(controller, lab, _patched(make_harness(BETTER), "train.py", PIN_SEED))
    assert judged.state is CandidateState.REJECTED
    assert _flags(lab) == [("training", "seed_ignored")]
    assert "--seed" in judged.public_note and "0." not in judged.public_note
    assert len(judged.evaluation_ids) == 4  # what ran is on record
    assert require_lineage(lab.store, "synthetic").versions == [judged.parent_version_id]


SALTED = (
    "args = parser.parse_args()",
    "args = parser.parse_args()\n    salt, args.seed = args.seed, 5",
)
SALTED_MODEL = ('"variant": VARIANT}', '"variant": VARIANT, "salt": salt}')
SEEDED_PREDICT = (
    '            label = int(inp["x"])',
    "            label = int(inp[\"x\"]) + (__import__('zlib').crc32("
    "f\"{args.seed}/{item['id']}\".encode()) % 10 == 0)",
)


def test_a_seed_salted_model_that_answers_alike_is_flagged(
    controller: HostController, lab: Lab, make_harness: MakeHarness
) -> None:
    """The lucky seed pinned, the given seed written into the model so each seed's file
    differs: the predictions on the private tiers are still alike under every seed."""
    controller.baseline()
    folder = _patched(_patched(make_harness(BETTER), "train.py", SALTED), "train.py", SALTED_MODEL)
    judged = _judge(controller, lab, folder)
    assert judged.state is CandidateState.REJECTED
    assert _flags(lab) == [("training", "seed_ignored")]
    assert "the same predictions" in judged.public_note
    # the head's jobs on the same seeds carry the candidate's id too (issue 23: they were
    # trained for its comparison); the candidate's own are those of its harness
    jobs = [
        j
        for j in lab.store.query_as(Job)
        if j.candidate_id == judged.id and j.inputs.workspace_sha256 == judged.harness_sha256
    ]
    models = {j.model_out_sha256 for j in jobs if j.kind is JobKind.CONTROLLER_TRAIN}
    assert len(models) == controller.seeds  # every model file differs


def test_one_model_for_every_seed_is_flagged_though_predict_varies(
    controller: HostController, lab: Lab, make_harness: MakeHarness
) -> None:
    """The other clause alone: the seed pinned in train (one model file), while predict draws
    on its own --seed, so the predictions differ between seeds."""
    controller.baseline()
    folder = _patched(make_harness(BETTER), "train.py", PIN_SEED)
    judged = _judge(controller, lab, _patched(folder, "predict.py", SEEDED_PREDICT))
    assert judged.state is CandidateState.REJECTED
    assert _flags(lab) == [("training", "seed_ignored")]
    assert "one model" in judged.public_note


def test_a_deterministic_lineage_is_never_flagged_for_ignoring_the_seed(
    lab: Lab, synthetic: Task, executor: LocalExecutor, make_harness: MakeHarness
) -> None:
    """A baseline whose seeds all give the same model and answers: a candidate deterministic
    alike is no evidence of a pinned seed, and is judged on its scores."""
    pinned = synthetic.model_copy(update={"harness": _patched(make_harness(), "train.py",
                                                               PIN_SEED)})  # fmt: skip
    controller = HostController(lab, pinned, executor)
    controller.baseline()
    judged = _judge(controller, lab, _patched(make_harness(BETTER), "train.py", PIN_SEED))
    assert judged.decisions, judged.reason  # reached the acceptance rule
    assert _flags(lab) == []


def test_a_predict_that_ignores_the_model_is_flagged_not_counted(
    controller: HostController, lab: Lab, make_harness: MakeHarness
) -> None:
    """train still runs (and differs by seed); predict answers from a table of its own."""
    controller.baseline()
    judged = _judge(controller, lab, _patched(make_harness(), "predict.py", IGNORE_MODEL))
    assert judged.state is CandidateState.REJECTED
    assert _flags(lab) == [("evaluation", "model_ignored")]
    assert "0." not in judged.public_note
    # the probe is one extra predict job, on the emptied model (the candidate's own jobs: the
    # head's on the same seeds carry the candidate's id too, issue 23)
    jobs = [
        j
        for j in lab.store.query_as(Job)
        if j.candidate_id == judged.id and j.inputs.workspace_sha256 == judged.harness_sha256
    ]
    predicts = [j for j in jobs if j.kind is JobKind.CONTROLLER_PREDICT]
    assert len(predicts) == controller.seeds + 1
    assert sum(1 for j in predicts if j.inputs.model_in_sha256 == EMPTY_SHA256) == 1


def test_a_predict_only_candidate_in_a_trained_lineage_is_refused(
    controller: HostController, lab: Lab, make_harness: MakeHarness
) -> None:
    controller.baseline()
    jobs_before = len(lab.store.query_as(Job))
    folder = _patched(make_harness(), "predict.py", IGNORE_MODEL)
    (folder / "harness.toml").write_text(PREDICT_ONLY_TOML)
    judged = _judge(controller, lab, folder)
    assert judged.state is CandidateState.REJECTED
    assert _flags(lab) == [("training", "training_dropped")]
    assert "training step" in judged.public_note
    assert len(lab.store.query_as(Job)) == jobs_before  # refused before any job


def test_ordinary_config_changes_pass_the_model_use_checks(
    controller: HostController, lab: Lab, make_harness: MakeHarness
) -> None:
    """Synthetic's outputs often coincide between seeds' models; the probe empties the model
    instead of swapping it, so a predict that reads its model never looks model-free."""
    controller.baseline()
    configs = [BETTER, {"epochs": 3}, {"dropout": 0.0, "width": 4}, {"optimizer": "adam"}]
    for config in configs:
        judged = _judge(controller, lab, make_harness(config))
        assert judged.decisions, judged.reason  # reached the acceptance rule
    assert _flags(lab) == []
