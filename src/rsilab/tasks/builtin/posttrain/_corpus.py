"""The base model's pre-training text: prose about the invented world, made by code.

Documents of five kinds, as real pre-training text mixes them: facts about the 300 entities
(each fact in several phrasings, loose and as short biographies, plus an age the benchmarks
never ask), dense arithmetic sentences ("7 plus 5 is 12") and the word problems' situations
told as stories with their result, about invented people who appear once (so a name is copied,
never remembered), function specs with three example calls each written out as JSON, tiny
Python functions with their prose specs, and quiz sheets. The quiz sheets use the
benchmarks' question/answer layout for the non-target kinds (facts, multiple choice, function
calls, code) and the entities' ages, over train-bucket entities and functions only;
**arithmetic word problems never appear as question and answer** (the target's format is what
post-training teaches). Documents are separated by
:data:`DOC_SEPARATOR`; inside a quiz sheet, items are separated by a blank line, as the
harness separates few-shot examples.

The generator is deterministic; :data:`CORPUS_SHA256` pins its output, and :func:`corpus`
refuses to return text that differs (a changed generator must change the pin on purpose,
which also changes the base model's hash).
"""

from __future__ import annotations

import hashlib
import json
import random

from rsilab.records import DataTier
from rsilab.tasks.builtin.posttrain import _bench as bench
from rsilab.tasks.builtin.posttrain import _code as code
from rsilab.tasks.builtin.posttrain import _world as world

CORPUS_SHA256 = "e231338de7d6bc180ecc79ad46af50542f894715a05243428ca7b60eb57ead02"
"""sha256 of ``corpus('full')`` as UTF-8."""
SIZES = {"full": 6, "tiny": 1}
"""Rounds of each document kind: the full corpus states every fact 36 times (6 a round)."""
DOC_SEPARATOR = "\n\n\n"
"""Between documents (the base model's builder splits on it and ends each with its end token)."""
QUIZ = "Question: {question}\nAnswer: {answer}"
"""A quiz item: the harness's ``qa`` template, so few-shot prompts look like quiz sheets."""

_FACT_LINES = {
    "city": ("{e} lives in {v}.", "The home town of {e} is {v}.", "In {v} lives {e}."),
    "color": ("{e} likes the colour {v} best.", "The favourite colour of {e} is {v}.",
              "Of all colours {e} loves {v}."),
    "pet": ("{e} keeps a {v}.", "The animal of {e} is a {v}.", "At home {e} has a {v}."),
}  # fmt: skip


_AGE_LINES = ("{e} is {v} years old.", "The age of {e} is {v}.", "{e} turned {v} this year.")
"""A fourth fact, stated and asked in the corpus only (no benchmark asks it): quiz answers
that are numbers exist, so an answer's form is read from the examples before it."""


def age(entity: world.Entity) -> int:
    """An entity's age, 20-79 (a fixed hash of its name)."""
    digest = hashlib.sha256(f"age:{entity.name}".encode()).digest()
    return 20 + int.from_bytes(digest[:2], "big") % 60


def _fact_line(entity: world.Entity, key: str, rng: random.Random) -> str:
    if key == "age":
        return rng.choice(_AGE_LINES).format(e=entity.name, v=age(entity))
    return rng.choice(_FACT_LINES[key]).format(e=entity.name, v=entity.fact(key))


_KEYS = (*world.FACT_KEYS, "age")


def fresh_names(rng: random.Random, count: int) -> list[str]:
    """``count`` invented names shaped like the world's people but none of them (nor any
    entity): stories told about them can only be continued by copying the name."""
    taken = set(world.people()) | {e.name for e in world.entities()}
    out: list[str] = []
    while len(out) < count:
        parts = [world.syllable(rng.randrange(1280)) for _ in range(rng.choice((2, 2, 3)))]
        name = "".join(parts).capitalize()
        if name not in taken and 4 <= len(name) <= 12:
            out.append(name)
    return out


class CorpusChanged(RuntimeError):
    """The generator's output no longer matches :data:`CORPUS_SHA256`."""


def _facts(rng: random.Random) -> list[str]:
    lines = [_fact_line(e, key, rng) for e in world.entities() for key in _KEYS]
    rng.shuffle(lines)
    return [" ".join(lines[i : i + 6]) for i in range(0, len(lines), 6)]


def _sheets(items: list[str], rng: random.Random, per: int = 4) -> list[str]:
    """Quiz items shuffled into sheets of ``per``, items separated by a blank line."""
    rng.shuffle(items)
    return ["\n\n".join(items[i : i + per]) for i in range(0, len(items), per)]


def _fact_quiz(rng: random.Random) -> list[str]:
    """Short-answer and multiple-choice items about the train bucket's entities (each fact
    asked once and offered twice, with other options), and their ages."""
    items = []
    for entity in world.entities_in(DataTier.TRAIN):
        items.append(QUIZ.format(question=f"How old is {entity.name}?", answer=age(entity)))
        for key in world.FACT_KEYS:
            question = bench.FACT_QUESTIONS[key].format(e=entity.name)
            items.append(QUIZ.format(question=question, answer=entity.fact(key)))
            for _ in range(2):
                options, letter = bench.options_for(entity, key, rng)
                listed = bench.with_options(question, options)
                items.append(QUIZ.format(question=listed, answer=letter))
    return _sheets(items, rng)


def _bios(rng: random.Random) -> list[str]:
    """One short biography per entity: its three facts in a drawn order and phrasing (the same
    facts as :func:`_facts`, grouped by person, so each is stated in more contexts)."""
    out = []
    for entity in world.entities():
        keys = list(_KEYS)
        rng.shuffle(keys)
        out.append(" ".join(_fact_line(entity, k, rng) for k in keys))
    rng.shuffle(out)
    return [" ".join(out[i : i + 3]) for i in range(0, len(out), 3)]


_STORIES = (
    ("{n} has {a} {o}. {n} gets {b} more {o}.", "Now {n} has {r} {o}.",
     "The number of {o} {n} has now is {r}.", "+"),
    ("{n} had {a} {o} and found {b} more.", "So {n} has {r} {o}.",
     "The number of {o} {n} has is {r}.", "+"),
    ("{n} has {a} {o} and gives {b} of them away.", "Then {r} {o} are left.",
     "The number of {o} left is {r}.", "-"),
    ("There are {a} {o} in a box. {n} takes {b} out.", "Now {r} {o} stay in the box.",
     "The number of {o} that stay in the box is {r}.", "-"),
    ("{n} fills {a} bags with {b} {o} each.", "So {r} {o} are in the bags.",
     "The number of {o} in the bags is {r}.", "*"),
    ("{n} buys {a} {o} on Monday and {b} {o} on Tuesday.", "That is {r} {o} in all.",
     "The number of {o} in all is {r}.", "+"),
)  # fmt: skip
"""The word problems' situations told as prose (situation, result, result restated as "the
number of ..."): their result stated, never asked; a story may also end "So the answer is N."."""


def _arith(rng: random.Random, count: int) -> list[str]:
    """Sums, differences and products of 2-9 as sentences and short stories (never Q/A):
    half plain facts ("7 plus 5 is 12"), half the benchmark's situations told with their
    result, so the numbers of a story are read back from it. Stories name invented people
    (:func:`fresh_names`), a new one each, so their names are copied, not remembered."""
    out = []
    names = fresh_names(rng, count)
    for i in range(count):
        a, b = rng.randint(2, 9), rng.randint(2, 9)
        n, o = names[i], rng.choice(world.OBJECTS)
        if i % 2:
            story, result, restated, op = rng.choice(_STORIES)
            if op == "-":
                a, b = max(a, b) + rng.randint(1, 9), min(a, b)
            r = {"+": a + b, "-": a - b, "*": a * b}[op]
            ending = rng.choice((result, restated, "So the answer is {r}."))
            out.append(f"{story} {ending}".format(n=n, a=a, b=b, o=o, r=r))
            continue
        out.append(rng.choice((
            f"{a} plus {b} is {a + b}.",
            f"{a} and {b} make {a + b}.",
            f"{a} times {b} is {a * b}.",
            f"{a + b} minus {b} is {a}.",
            f"{n} had {a} {o} and got {b} more, so {n} had {a + b} {o}.",
            f"{n} had {a + b} {o} and gave {b} away, so {a} {o} were left.",
            f"{n} put {b} {o} in each of {a} bags, which makes {a * b} {o}.",
        )))  # fmt: skip
    return [" ".join(out[i : i + 6]) for i in range(0, len(out), 6)]


def _functions(rng: random.Random, count: int, asked: int) -> list[str]:
    """Function specs, each with three example calls (the request's values copied into the
    JSON), and ``asked`` quiz items asking for calls."""
    out, quiz = [], []
    for _ in range(count):
        fn, args = bench.draw_call(rng, DataTier.TRAIN)
        names = " and ".join(f"{a}, a {'number' if k == 'int' else 'word'}" for a, k in fn.args)
        examples = []
        for _ in range(3):
            examples.append(f"To {fn.request.format(**args)}, one writes "
                            f"{json.dumps({'name': fn.name, 'arguments': args})}.")  # fmt: skip
            args = world.draw_args(fn, rng, world.people_in(DataTier.TRAIN))
            while not (world.names_a_person(fn) or
                       world.bucket(fn.request.format(**args)) == DataTier.TRAIN):  # fmt: skip
                args = world.draw_args(fn, rng, world.people_in(DataTier.TRAIN))
        out.append(f"The function {fn.name} {fn.prose}. It takes {names}. " + " ".join(examples))
    for _ in range(asked):
        fn, args = bench.draw_call(rng, DataTier.TRAIN)
        call = json.dumps({"name": fn.name, "arguments": args})
        quiz.append(QUIZ.format(question=f"Please {fn.request.format(**args)}.", answer=call))
    return out + _sheets(quiz, rng)


def _code(rng: random.Random, count: int, asked: int) -> list[str]:
    """Tiny functions in prose and code, and ``asked`` quiz items asking for them."""
    out, quiz = [], []
    for _ in range(count):
        fn = code.draw(rng, DataTier.TRAIN)
        out.append(f"The function {fn.name} takes {fn.arg} and returns {fn.spec}.\n{fn.source}")
    for _ in range(asked):
        fn = code.draw(rng, DataTier.TRAIN)
        quiz.append(QUIZ.format(question=code.request(fn, rng), answer=fn.source))
    return out + _sheets(quiz, rng, per=3)


def corpus(size: str = "full") -> str:
    """The corpus text of ``size`` ('full' or 'tiny'), documents separated by
    :data:`DOC_SEPARATOR`.

    Raises:
        CorpusChanged: the full corpus's sha256 differs from :data:`CORPUS_SHA256`.
    """
    rounds = SIZES[size]
    rng = random.Random(1729)
    docs: list[str] = []
    for _ in range(rounds):
        docs += _facts(rng) + _facts(rng) + _facts(rng) + _facts(rng) + _bios(rng) + _bios(rng)
        docs += _fact_quiz(rng) + _arith(rng, 4000)
        docs += _functions(rng, 300, 1200) + _code(rng, 300, 900)
    rng.shuffle(docs)
    text = DOC_SEPARATOR.join(docs) + "\n"
    digest = hashlib.sha256(text.encode()).hexdigest()
    if size == "full" and digest != CORPUS_SHA256:
        raise CorpusChanged(f"the posttrain corpus hashes to {digest}, not {CORPUS_SHA256}")
    return text
