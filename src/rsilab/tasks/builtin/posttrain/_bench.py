"""The four benchmarks' generators: (tier, seed) -> samples, deterministic in both.

Every sample's input is ``{"kind": KIND, "question": TEXT}`` (multiple choice adds
``"options"``); its target is the answer the scorer wants: a number as text (``arith``), a
``{"name", "arguments"}`` call (``fncall``), a word (``facts``), a letter (``choice``). Items
of a tier name only entities of that tier's bucket (see ``_world``), so tiers are disjoint.
"""

from __future__ import annotations

import hashlib
import json
import random
from collections.abc import Callable, Sequence

from rsilab.records import DataTier
from rsilab.tasks import Sample
from rsilab.tasks.builtin.posttrain import _code as codeworld
from rsilab.tasks.builtin.posttrain import _world as world

TIER_SIZES = {DataTier.TRAIN: 300, DataTier.DEV: 100, DataTier.ACCEPT: 150, DataTier.FINAL: 150}
"""Items per tier (at most; ``facts`` and ``choice`` have fewer entities in a bucket)."""

ARITH_TEMPLATES = (
    ("{n} has {a} {o}. {n} gets {b} more {o}. How many {o} does {n} have now?", "+"),
    ("{n} had {a} {o} and found {b} more. How many {o} does {n} have?", "+"),
    ("{n} has {a} {o} and gives {b} of them away. How many {o} are left?", "-"),
    ("There are {a} {o} in a box. {n} takes {b} out. How many {o} stay in the box?", "-"),
    ("{n} fills {a} bags with {b} {o} each. How many {o} are in the bags?", "*"),
    ("{n} buys {a} {o} on Monday and {b} {o} on Tuesday. How many {o} in all?", "+"),
)
MC_LETTERS = "ABCD"
FACT_QUESTIONS = {
    "city": "Which town does {e} live in?",
    "color": "What is the favourite colour of {e}?",
    "pet": "What animal does {e} keep?",
}
FACT_CHOICES = {"city": world.CITIES, "color": world.COLORS, "pet": world.PETS}


def _id(*parts: object) -> str:
    return hashlib.sha256(json.dumps(parts).encode()).hexdigest()[:16]


def arith_item(rng: random.Random, tier: DataTier) -> Sample:
    """One word problem: a person of ``tier``'s bucket, an object, a template, two numbers."""
    template, op = rng.choice(ARITH_TEMPLATES)
    name, obj = rng.choice(world.people_in(tier)), rng.choice(world.OBJECTS)
    a, b = rng.randint(2, 9), rng.randint(2, 9)
    if op == "-":
        a, b = max(a, b) + rng.randint(1, 9), min(a, b)
    answer = {"+": a + b, "-": a - b, "*": a * b}[op]
    question = template.format(n=name, a=a, b=b, o=obj)
    return Sample(id=_id("arith", question), input={"kind": "arith", "question": question},
                  target=str(answer))  # fmt: skip


def draw_call(rng: random.Random, tier: DataTier) -> tuple[world.Function, dict[str, object]]:
    """A function of the corpus and arguments of ``tier``'s bucket: a request that names a
    person names one of the bucket's; one that names nobody (a timer, a song) belongs to the
    tier its own text hashes to (:func:`~._world.bucket`), so no request is in two tiers."""
    while True:
        fn = rng.choice(world.FUNCTIONS)
        args = world.draw_args(fn, rng, world.people_in(tier))
        if world.names_a_person(fn) or world.bucket(fn.request.format(**args)) == tier:
            return fn, args


def fncall_item(rng: random.Random, tier: DataTier) -> Sample:
    """One request to call a function of the corpus (:func:`draw_call`)."""
    fn, args = draw_call(rng, tier)
    question = f"Please {fn.request.format(**args)}."
    target = {"name": fn.name, "arguments": args}
    return Sample(id=_id("fncall", question), input={"kind": "fncall", "question": question},
                  target=target)  # fmt: skip


def _fact_pairs(tier: DataTier) -> list[tuple[world.Entity, str]]:
    return [(e, key) for e in world.entities_in(tier) for key in world.FACT_KEYS]


def facts_items(tier: DataTier, seed: int) -> list[Sample]:
    """Short-answer questions about the facts of ``tier``'s entities (one per pair)."""
    pairs = _fact_pairs(tier)
    random.Random(seed).shuffle(pairs)
    out = []
    for entity, key in pairs[: TIER_SIZES[tier]]:
        question = FACT_QUESTIONS[key].format(e=entity.name)
        out.append(Sample(id=_id("facts", question),
                          input={"kind": "facts", "question": question},
                          target=entity.fact(key)))  # fmt: skip
    return out


def options_for(entity: world.Entity, key: str, rng: random.Random) -> tuple[list[str], str]:
    """Four options for fact ``key`` of ``entity`` (the right one and three drawn), and the
    letter of the right one."""
    right = entity.fact(key)
    options = [right, *rng.sample([v for v in FACT_CHOICES[key] if v != right], 3)]
    rng.shuffle(options)
    return options, MC_LETTERS[options.index(right)]


def with_options(question: str, options: list[str]) -> str:
    """A question with its options listed as the harness shows them ("A. Calder" a line)."""
    return question + "".join(f"\n{MC_LETTERS[i]}. {o}" for i, o in enumerate(options))


def choice_items(tier: DataTier, seed: int) -> list[Sample]:
    """Four-option questions about the same facts, options and order drawn with ``seed``."""
    rng = random.Random(seed)
    pairs = _fact_pairs(tier)
    rng.shuffle(pairs)
    out = []
    for entity, key in pairs[: TIER_SIZES[tier]]:
        options, letter = options_for(entity, key, rng)
        question = FACT_QUESTIONS[key].format(e=entity.name)
        out.append(Sample(id=_id("choice", question, options),
                          input={"kind": "choice", "question": question, "options": options},
                          target=letter))  # fmt: skip
    return out


def code_item(rng: random.Random, tier: DataTier) -> Sample:
    """One request for a tiny function (see ``_code``), checked by three unit tests; the
    target also holds a reference program ("answer"), which SFT learns and no scorer reads."""
    fn = codeworld.draw(rng, tier)
    question = codeworld.request(fn, rng)
    return Sample(id=_id("code", question), input={"kind": "code", "question": question},
                  target={"entry": fn.name, "tests": fn.tests(), "answer": fn.source})  # fmt: skip


Maker = Callable[[random.Random, DataTier], Sample]


def _unique(make: Maker, tier: DataTier, seed: int) -> list[Sample]:
    rng = random.Random(seed)
    found: dict[str, Sample] = {}
    for _ in range(TIER_SIZES[tier] * 20):
        if len(found) == TIER_SIZES[tier]:
            break
        sample = make(rng, tier)
        found.setdefault(sample.id, sample)
    return list(found.values())


def arith(tier: DataTier, seed: int) -> Sequence[Sample]:
    """The ``arith`` tier of ``seed``."""
    return _unique(arith_item, tier, seed)


def fncall(tier: DataTier, seed: int) -> Sequence[Sample]:
    """The ``fncall`` tier of ``seed``."""
    return _unique(fncall_item, tier, seed)


def code(tier: DataTier, seed: int) -> Sequence[Sample]:
    """The ``code`` tier of ``seed``."""
    return _unique(code_item, tier, seed)


def facts(tier: DataTier, seed: int) -> Sequence[Sample]:
    """The ``facts`` tier of ``seed``."""
    return facts_items(tier, seed)


def choice(tier: DataTier, seed: int) -> Sequence[Sample]:
    """The ``choice`` tier of ``seed``."""
    return choice_items(tier, seed)
