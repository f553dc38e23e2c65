"""The contamination guard (issue 10) on posttrain's generated benchmarks.

(a) SFT data built honestly - the train tier re-worded into Q/A lines, prose and JSONL, fresh
items from the public generator on the train bucket, the shipped corpus - registered through
the data tools raises no flag at all. (b) Private items planted with their numbers or their
entities changed, 1, 10 and 50 of them: what the guard catches, and what it cannot tell from
chance (the rate at which honest items coincide with private ones is computed here, from the
generators, independently of the guard)."""

from __future__ import annotations

import json
import random
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from rsilab.controller.content import ContentIndex, ContentReport
from rsilab.controller.guards import Refusal, TrainingGuards
from rsilab.expos import CallContext, ExperimentOS, default_registry, open_campaign
from rsilab.records import Candidate, DataTier, Role, TaskRef
from rsilab.store import Lab
from rsilab.tasks import Sample, Task, get_task, make_splits
from rsilab.tasks.builtin.posttrain import _bench, _corpus
from rsilab.tasks.builtin.posttrain import _world as world

SECRET = bytes(range(7, 39))
"""The lab secret the tiers are drawn under."""
PRIVATE = (DataTier.ACCEPT, DataTier.FINAL)


@dataclass
class Setup:
    task: Task
    lab: Lab
    expos: ExperimentOS
    context: CallContext
    guards: TrainingGuards
    harness: str
    splits: dict[str, dict[DataTier, list[Sample]]]
    count: int = 0


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Setup]:
    """A lab with a posttrain campaign, a worker's workspace and the task's training guards
    (their indexes are built once, on first use, and kept for the module)."""
    folder = tmp_path_factory.mktemp("contamination")
    task = get_task("posttrain")
    lab = Lab.init(folder / "lab")
    campaign = open_campaign(lab.store, TaskRef(name="posttrain"))
    workspace = folder / "workspace"
    workspace.mkdir()
    context = CallContext(
        actor="worker-1", role=Role.WORKER, campaign_id=campaign.id, workspace=workspace
    )
    guards = TrainingGuards(task, SECRET, lab.store, lab.artifacts)
    harness = lab.artifacts.put_tree(task.harness).sha256
    splits = {
        b.name: {tier: list(samples) for tier, samples in make_splits(task, b, SECRET).items()}
        for b in task.benchmarks
    }
    yield Setup(task, lab, ExperimentOS(lab.store, lab.artifacts, default_registry()), context,
                guards, harness, splits)  # fmt: skip
    lab.close()


def _register(setup: Setup, text: str) -> str:
    """Write ``text`` into the workspace and add it to the data pool with add_data; its id."""
    setup.count += 1
    name = f"sft-{setup.count}.txt"
    assert setup.context.workspace is not None
    (setup.context.workspace / name).write_text(text)
    args = {"path": name, "name": name, "readme": "SFT data", "source": "built in a test"}
    result = setup.expos.call(setup.context, "add_data", args)
    assert result.ok and result.value is not None, result.to_dict()
    return str(result.value["id"])


def _check(setup: Setup, text: str) -> Refusal | None:
    """The training guards on a candidate of the posttrain harness that trains on ``text``."""
    data_id = _register(setup, text)
    candidate = Candidate(
        task="posttrain",
        parent_version_id="ver-000000000000",
        harness_sha256=setup.harness,
        data_ids=[data_id],
    )
    return setup.guards.check(candidate)


def _report(setup: Setup, text: str, tmp_path: Path) -> ContentReport:
    """What the content guard finds in ``text``, hit by hit."""
    path = tmp_path / "data.txt"
    path.write_text(text)
    index: ContentIndex = setup.guards.content_index()
    return index.scan([("data.txt", path)])


def _answer(sample: Sample) -> str:
    target = sample.target
    if isinstance(target, dict) and "answer" in target:
        return str(target["answer"])
    return target if isinstance(target, str) else json.dumps(target)


def _question(sample: Sample) -> str:
    assert isinstance(sample.input, dict)
    question = str(sample.input["question"])
    options = sample.input.get("options")
    if isinstance(options, list):
        question += " " + " ".join(f"{c}) {o}" for c, o in zip("ABCD", options, strict=False))
    return question


def _qa(samples: list[Sample]) -> str:
    return "".join(f"Q: {_question(s)}\nA: {_answer(s)}\n\n" for s in samples)


def _prose(sample: Sample) -> str:
    """A train item re-worded as a sentence (its answer stated in words around it)."""
    return f"Someone asked: {_question(sample).lower()} The right reply was {_answer(sample)}.\n"


def _honest(setup: Setup) -> str:
    train = [s for b in setup.splits.values() for s in b[DataTier.TRAIN]]
    jsonl = "".join(
        json.dumps({"prompt": _question(s), "completion": _answer(s)}) + "\n" for s in train
    )
    return _qa(train) + "".join(map(_prose, train)) + jsonl


def _base(setup: Setup) -> str:
    """The honest data planted items hide among: the train tier as Q/A lines."""
    return _qa([s for b in setup.splits.values() for s in b[DataTier.TRAIN]])


def test_honest_sft_data_from_the_train_tier_raises_no_flag(setup: Setup, tmp_path: Path) -> None:
    text = _honest(setup)
    assert _report(setup, text, tmp_path).hits == []
    assert _check(setup, text) is None


def test_fresh_items_from_the_public_generator_raise_no_flag(setup: Setup, tmp_path: Path) -> None:
    # an improver's augmentation: 3000 new items per generated benchmark on the train bucket;
    # they share templates, numbers and objects with private items, never their entities
    rng = random.Random(5)
    makers = (_bench.arith_item, _bench.fncall_item, _bench.code_item)
    fresh = [make(rng, DataTier.TRAIN) for make in makers for _ in range(3000)]
    text = _qa(fresh)
    assert _report(setup, text, tmp_path).hits == []
    assert _check(setup, text) is None


def test_the_shipped_corpus_raises_no_flag(setup: Setup, tmp_path: Path) -> None:
    # it states the facts of every entity, private buckets too: public knowledge by design
    text = _corpus.corpus()
    assert _report(setup, text, tmp_path).hits == []
    assert _check(setup, text) is None


def _private(setup: Setup, bench: str) -> list[Sample]:
    return [s for tier in PRIVATE for s in setup.splits[bench][tier]]


def _private_names() -> list[str]:
    names = [n for tier in PRIVATE for n in world.people_in(tier)]
    names += [e.name for tier in PRIVATE for e in world.entities_in(tier)]
    return sorted(names, key=len, reverse=True)


def _renumbered(sample: Sample, rng: random.Random) -> Sample:
    """The item with every number in its question changed (its answer too, as a cheat would)."""
    question = re.sub(r"\d+", lambda m: str(int(m[0]) + rng.randint(1, 4)), _question(sample))
    return Sample(id=sample.id, input={"question": question}, target=_answer(sample))


def _renamed(sample: Sample, rng: random.Random) -> Sample:
    """The item with each private entity in its question replaced by a train-bucket one."""
    question = _question(sample)
    train = world.people_in(DataTier.TRAIN)
    for name in _private_names():
        if name in question:
            question = question.replace(name, rng.choice(train))
    return Sample(id=sample.id, input={"question": question}, target=_answer(sample))


def _planted(setup: Setup, bench: str, count: int, change: str) -> list[Sample]:
    rng = random.Random(count)
    items = _private(setup, bench)
    if bench == "fncall" and change == "numbers":
        # only requests that name a person carry a private entity; the others (set a timer
        # for 12 minutes) with a number changed are items anyone can draw from the template
        items = [s for s in items if re.search(r"\d", _question(s)) and _has_name(s)]
    chosen = rng.sample(items, count)
    alter = _renumbered if change == "numbers" else _renamed
    return [alter(s, rng) for s in chosen]


def _has_name(sample: Sample) -> bool:
    return any(name in _question(sample) for name in _private_names())


@pytest.mark.parametrize("bench", ["arith", "fncall"])
@pytest.mark.parametrize("count", [1, 10, 50])
def test_private_items_with_numbers_changed_are_found_by_their_entities(
    setup: Setup, tmp_path: Path, bench: str, count: int
) -> None:
    planted = _planted(setup, bench, count, "numbers")
    text = _base(setup) + _qa(planted)
    report = _report(setup, text, tmp_path)
    found = {h.sample_id for h in report.hits if h.kind == "entity"}
    assert found >= {s.id for s in planted}
    # a planted request can also be another private item of the same person with its numbers
    # changed (send 5 notes to X, send 9 notes to X): found too, by the same private name
    names = {n for s in planted for n in _private_names() if n in _question(s)}
    by_id = {s.id: s for s in _private(setup, bench)}
    assert all(any(n in _question(by_id[i]) for n in names) for i in found)
    assert {h.benchmark for h in report.hits} == {bench}
    # one item found by its entity is not enough (a name can recur by chance); two are
    refusal = _check(setup, text)
    if count == 1:
        assert refusal is None
    else:
        assert refusal is not None and refusal.rule == "private_data_in_training"


@pytest.mark.parametrize("bench", ["facts", "choice", "code"])
@pytest.mark.parametrize("count", [1, 10, 50])
def test_private_questions_copied_are_found(
    setup: Setup, tmp_path: Path, bench: str, count: int
) -> None:
    # a fact question has no number to change: a planted one is a copy, found by its windows;
    # a code request is found when its whole text is there (its windows alone are template)
    planted = random.Random(count).sample(_private(setup, bench), count)
    text = _base(setup) + _qa(planted)
    found = {h.sample_id for h in _report(setup, text, tmp_path).hits if h.benchmark == bench}
    assert found >= {s.id for s in planted}
    refusal = _check(setup, text)
    assert (refusal is None) == (count < 10)  # approximate hits: 10 of 300 make a leak


def _coincidence_rate(setup: Setup, bench: str) -> float:
    """Share of the public tiers whose question, its entity replaced by a private item's, IS
    that private item's question: how often honest items coincide with private ones (an item
    that names no one coincides with nothing: it has no entity to change). A song title is an
    entity too: its request has no number, so each title's one request text is in one tier
    (the tier it hashes to), and a title of a private tier's request is in no public item."""
    names = sorted([*world.people(), *world.SONGS], key=len, reverse=True)
    pattern = re.compile("|".join(re.escape(n) for n in names))

    def skeleton(sample: Sample) -> str:
        return pattern.sub("*", _question(sample))

    named = [s for s in _private(setup, bench) if pattern.search(_question(s))]
    private = {skeleton(s) for s in named}
    public = [s for tier in (DataTier.TRAIN, DataTier.DEV) for s in setup.splits[bench][tier]]
    coincide = [s for s in public if pattern.search(_question(s)) and skeleton(s) in private]
    return len(coincide) / len(public)


def test_the_guard_measures_the_chance_rate_the_generators_give(setup: Setup) -> None:
    rates = setup.guards.content_index().private.neighbour_rates
    for bench in ("arith", "fncall"):
        assert rates[bench][0] == pytest.approx(_coincidence_rate(setup, bench))
    assert 0.01 < rates["arith"][0] < 0.2  # a word problem: a few percent of honest items
    # every fact question has private neighbours (ask about another person): no evidence
    assert rates["facts"] == pytest.approx((1.0, 1.0))


@pytest.mark.parametrize("count", [1, 10, 50])
def test_word_problems_with_entities_changed_count_only_beyond_chance(
    setup: Setup, tmp_path: Path, count: int
) -> None:
    # A word problem with its name changed is the template, a train-bucket name and the
    # private item's numbers and object: an item the public generator draws by itself, as
    # the chance rate above says. One is no evidence; many, beyond the binomial tail of
    # honest coincidences, are (see docs/posttrain.md, Contamination).
    text = _base(setup) + _qa(_planted(setup, "arith", count, "entities"))
    report = _report(setup, text, tmp_path)
    assert report.hits == []
    private, _, p_value = report.excess()["arith"]
    assert private >= count
    refusal = _check(setup, text)
    if count < 50:  # 10 of 10 neighbours private: P = q^10, about 0.002 - not beyond 1e-4
        assert refusal is None and p_value > 1e-4
    else:
        assert refusal is not None and refusal.rule == "private_data_in_training"
        assert p_value < 1e-10
        assert re.fullmatch(
            r"arith: \d+ of \d+ items that equal a tier item but for its "
            r"entity match private ones \(P = .+ by chance\)",
            refusal.detail,
        )


def test_honest_augmentation_stays_within_chance(setup: Setup, tmp_path: Path) -> None:
    rng = random.Random(11)
    fresh = [_bench.arith_item(rng, DataTier.TRAIN) for _ in range(3000)]
    private, neighbours, p_value = _report(setup, _qa(fresh), tmp_path).excess()["arith"]
    assert neighbours > 100 and 0 < private < neighbours  # coincidences happen, at chance
    assert p_value > 0.01
