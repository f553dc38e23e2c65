"""Contamination attacks on posttrain's generated benchmarks, and the honest data beside them.

SFT data goes into a campaign through the data tools (``add_data``); the controller's training
guards (:class:`rsilab.controller.guards.TrainingGuards`) then scan a candidate that trains on
it, before any job runs. Here the data is: (a) built honestly - the train tier re-worded into
Q/A lines, prose and JSONL, fresh items from the public generator on the train bucket, the
shipped corpus; (b) private items planted among honest ones with their numbers or their
entities changed, or copied, 1, 10 and 50 of them. Shared by the test of these facts
(``tests/tasks/test_posttrain_contamination.py``) and the benchmark table that reports them
(:func:`attack_rows`), so both plant exactly the same items.
"""

from __future__ import annotations

import json
import random
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

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
COUNTS = (1, 10, 50)
"""How many private items an attack plants among the honest ones."""


@dataclass
class Setup:
    """A lab with a posttrain campaign, a worker's workspace and the task's training guards
    (their indexes are built once, on first use)."""

    task: Task
    lab: Lab
    expos: ExperimentOS
    context: CallContext
    guards: TrainingGuards
    harness: str
    splits: dict[str, dict[DataTier, list[Sample]]]
    count: int = 0


def make_setup(folder: Path) -> Setup:
    """A :class:`Setup` in ``folder`` (the caller closes ``setup.lab``)."""
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
    registry = default_registry()
    return Setup(task, lab, ExperimentOS(lab.store, lab.artifacts, registry), context, guards,
                 harness, splits)  # fmt: skip


def register(setup: Setup, text: str) -> str:
    """Write ``text`` into the workspace and add it to the data pool with add_data; its id."""
    setup.count += 1
    name = f"sft-{setup.count}.txt"
    assert setup.context.workspace is not None
    (setup.context.workspace / name).write_text(text)
    args = {"path": name, "name": name, "readme": "SFT data", "source": "built by a script"}
    result = setup.expos.call(setup.context, "add_data", args)
    assert result.ok and result.value is not None, result.to_dict()
    return str(result.value["id"])


def check(setup: Setup, text: str) -> Refusal | None:
    """The training guards on a candidate of the posttrain harness that trains on ``text``."""
    data_id = register(setup, text)
    candidate = Candidate(
        task="posttrain",
        parent_version_id="ver-000000000000",
        harness_sha256=setup.harness,
        data_ids=[data_id],
    )
    return setup.guards.check(candidate)


def report(setup: Setup, text: str, folder: Path) -> ContentReport:
    """What the content guard finds in ``text``, hit by hit."""
    path = folder / "data.txt"
    path.write_text(text)
    index: ContentIndex = setup.guards.content_index()
    return index.scan([("data.txt", path)])


def answer(sample: Sample) -> str:
    target = sample.target
    if isinstance(target, dict) and "answer" in target:
        return str(target["answer"])
    return target if isinstance(target, str) else json.dumps(target)


def question(sample: Sample) -> str:
    assert isinstance(sample.input, dict)
    asked = str(sample.input["question"])
    options = sample.input.get("options")
    if isinstance(options, list):
        asked += " " + " ".join(f"{c}) {o}" for c, o in zip("ABCD", options, strict=False))
    return asked


def qa(samples: list[Sample]) -> str:
    return "".join(f"Q: {question(s)}\nA: {answer(s)}\n\n" for s in samples)


def prose(sample: Sample) -> str:
    """A train item re-worded as a sentence (its answer stated in words around it)."""
    return f"Someone asked: {question(sample).lower()} The right reply was {answer(sample)}.\n"


def honest(setup: Setup) -> str:
    """The train tier of every benchmark as Q/A lines, as prose and as JSONL."""
    train = [s for b in setup.splits.values() for s in b[DataTier.TRAIN]]
    jsonl = "".join(
        json.dumps({"prompt": question(s), "completion": answer(s)}) + "\n" for s in train
    )
    return qa(train) + "".join(map(prose, train)) + jsonl


def fresh_items(count: int = 3000, seed: int = 5) -> list[Sample]:
    """An improver's augmentation: ``count`` new items of each generated benchmark (arith,
    fncall, code) on the train bucket; they share templates, numbers and objects with private
    items, never their entities."""
    rng = random.Random(seed)
    makers = (_bench.arith_item, _bench.fncall_item, _bench.code_item)
    return [make(rng, DataTier.TRAIN) for make in makers for _ in range(count)]


def base(setup: Setup) -> str:
    """The honest data planted items hide among: the train tier as Q/A lines."""
    return qa([s for b in setup.splits.values() for s in b[DataTier.TRAIN]])


def private(setup: Setup, bench: str) -> list[Sample]:
    return [s for tier in PRIVATE for s in setup.splits[bench][tier]]


def private_names() -> list[str]:
    names = [n for tier in PRIVATE for n in world.people_in(tier)]
    names += [e.name for tier in PRIVATE for e in world.entities_in(tier)]
    return sorted(names, key=len, reverse=True)


def renumbered(sample: Sample, rng: random.Random) -> Sample:
    """The item with every number in its question changed (its answer too, as a cheat would)."""
    asked = re.sub(r"\d+", lambda m: str(int(m[0]) + rng.randint(1, 4)), question(sample))
    return Sample(id=sample.id, input={"question": asked}, target=answer(sample))


def renamed(sample: Sample, rng: random.Random) -> Sample:
    """The item with each private entity in its question replaced by a train-bucket one."""
    asked = question(sample)
    train = world.people_in(DataTier.TRAIN)
    for name in private_names():
        if name in asked:
            asked = asked.replace(name, rng.choice(train))
    return Sample(id=sample.id, input={"question": asked}, target=answer(sample))


def has_name(sample: Sample) -> bool:
    return any(name in question(sample) for name in private_names())


def planted(setup: Setup, bench: str, count: int, change: str) -> list[Sample]:
    """``count`` private items of ``bench`` with their ``numbers`` or ``entities`` changed,
    or (``copied``) as they are."""
    rng = random.Random(count)
    items = private(setup, bench)
    if bench == "fncall" and change == "numbers":
        # only requests that name a person carry a private entity; the others (set a timer
        # for 12 minutes) with a number changed are items anyone can draw from the template
        items = [s for s in items if re.search(r"\d", question(s)) and has_name(s)]
    chosen = rng.sample(items, count)
    if change == "copied":
        return chosen
    alter = renumbered if change == "numbers" else renamed
    return [alter(s, rng) for s in chosen]


def _outcome(refusal: Refusal | None) -> str:
    return "accepted" if refusal is None else f"refused ({refusal.rule})"


def attack_rows(folder: Path) -> list[dict[str, Any]]:
    """One row per dataset: what it is, the content guard's exact and entity hits (found of
    planted), the excess of entity-changed neighbours (private of all, P) and whether a
    candidate training on it passes the training guards."""
    setup = make_setup(folder)
    rows: list[dict[str, Any]] = []
    try:
        honest_sets = [
            ("honest: the train tier as Q/A, prose and JSONL", honest(setup)),
            ("honest: 3,000 fresh items per generated benchmark", qa(fresh_items())),
            ("honest: the shipped corpus", _corpus.corpus()),
        ]
        for what, text in honest_sets:
            found = report(setup, text, folder)
            said = _excess(found, "arith")
            rows.append(_row(what, "-", len(found.hits), said, check(setup, text)))
        attacks = [("arith", "numbers"), ("fncall", "numbers"), ("facts", "copied"),
                   ("choice", "copied"), ("code", "copied"), ("arith", "entities"),
                   ("fncall", "entities")]  # fmt: skip
        for bench, change in attacks:
            for count in COUNTS:
                items = planted(setup, bench, count, change)
                text = base(setup) + qa(items)
                found = report(setup, text, folder)
                ids = {s.id for s in items}
                caught = len({h.sample_id for h in found.hits} & ids)
                said = _excess(found, bench)
                what = f"attack: {count} private {bench} item(s), {_change(change)}"
                rows.append(_row(what, f"{caught} of {count}", len(found.hits), said,
                                 check(setup, text)))  # fmt: skip
    finally:
        setup.lab.close()
    return rows


def _excess(found: ContentReport, bench: str) -> str:
    excess = found.excess().get(bench)
    if excess is None or not excess[1]:
        return "-"
    return f"{excess[0]} of {excess[1]} (P = {excess[2]:.2g})"


def _change(change: str) -> str:
    return {"numbers": "numbers changed", "entities": "names changed", "copied": "copied"}[change]


def _row(what: str, caught: str, hits: int, excess: str, refusal: Refusal | None) -> dict[str, Any]:
    return {
        "SFT data registered": what,
        "planted items found": caught,
        "content hits": hits,
        "name-changed neighbours private (chance)": excess,
        "a candidate training on it": _outcome(refusal),
    }
