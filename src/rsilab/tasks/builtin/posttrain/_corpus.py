"""The base model's pre-training text: prose about the invented world, made by code.

Documents of five kinds, as real pre-training text mixes them: facts about the 300 entities
(each fact in several phrasings), dense arithmetic sentences and short stories ("7 plus 5 is
12"), function specs with example calls written out as JSON, tiny Python functions with their
prose specs, and quiz sheets. The quiz sheets use the benchmarks' question/answer layout for
the non-target kinds (facts, multiple choice, function calls, code), over train-bucket
entities and functions only; **arithmetic word problems never appear as question and answer**
(the target's format is what post-training teaches). Documents are separated by
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

CORPUS_SHA256 = "51f3c3f8147b97bd566383ab55fbce7212ee5381312119190f6352a0dc8e6483"
"""sha256 of ``corpus('full')`` as UTF-8."""
SIZES = {"full": 6, "tiny": 1}
"""Rounds of each document kind: the full corpus states every fact 18 times (3 a round)."""
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


class CorpusChanged(RuntimeError):
    """The generator's output no longer matches :data:`CORPUS_SHA256`."""


def _facts(rng: random.Random) -> list[str]:
    lines = [
        rng.choice(_FACT_LINES[key]).format(e=e.name, v=e.fact(key))
        for e in world.entities()
        for key in world.FACT_KEYS
    ]
    rng.shuffle(lines)
    return [" ".join(lines[i : i + 6]) for i in range(0, len(lines), 6)]


def _sheets(items: list[str], rng: random.Random, per: int = 4) -> list[str]:
    """Quiz items shuffled into sheets of ``per``, items separated by a blank line."""
    rng.shuffle(items)
    return ["\n\n".join(items[i : i + per]) for i in range(0, len(items), per)]


def _fact_quiz(rng: random.Random) -> list[str]:
    """Short-answer and multiple-choice items about the train bucket's entities."""
    items = []
    for entity in world.entities_in(DataTier.TRAIN):
        for key in world.FACT_KEYS:
            question = bench.FACT_QUESTIONS[key].format(e=entity.name)
            items.append(QUIZ.format(question=question, answer=entity.fact(key)))
            options, letter = bench.options_for(entity, key, rng)
            listed = bench.with_options(question, options)
            items.append(QUIZ.format(question=listed, answer=letter))
    return _sheets(items, rng)


def _arith(rng: random.Random, count: int) -> list[str]:
    """Sums, differences and products of 2-9 as sentences and short stories (never Q/A)."""
    out = []
    names = world.people_in(DataTier.TRAIN)
    for _ in range(count):
        a, b = rng.randint(2, 9), rng.randint(2, 9)
        n, o = rng.choice(names), rng.choice(world.OBJECTS)
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


def _functions(rng: random.Random, count: int) -> list[str]:
    """Function specs with an example call, and quiz items asking for calls."""
    out, quiz = [], []
    for _ in range(count):
        fn, args = bench.draw_call(rng, DataTier.TRAIN)
        names = " and ".join(f"{a}, a {'number' if k == 'int' else 'word'}" for a, k in fn.args)
        call = json.dumps({"name": fn.name, "arguments": args})
        out.append(
            f"The function {fn.name} {fn.prose}. It takes {names}. "
            f"To {fn.request.format(**args)}, one writes {call}."
        )
        quiz.append(QUIZ.format(question=f"Please {fn.request.format(**args)}.", answer=call))
    return out + _sheets(quiz, rng)


def _code(rng: random.Random, count: int) -> list[str]:
    """Tiny functions in prose and code, and quiz items asking for them."""
    out, quiz = [], []
    for _ in range(count):
        fn = code.draw(rng, DataTier.TRAIN)
        out.append(f"The function {fn.name} takes {fn.arg} and returns {fn.spec}.\n{fn.source}")
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
        docs += _facts(rng) + _facts(rng) + _facts(rng) + _fact_quiz(rng) + _arith(rng, 2500)
        docs += _functions(rng, 200) + _code(rng, 300)
    rng.shuffle(docs)
    text = DOC_SEPARATOR.join(docs) + "\n"
    digest = hashlib.sha256(text.encode()).hexdigest()
    if size == "full" and digest != CORPUS_SHA256:
        raise CorpusChanged(f"the posttrain corpus hashes to {digest}, not {CORPUS_SHA256}")
    return text
