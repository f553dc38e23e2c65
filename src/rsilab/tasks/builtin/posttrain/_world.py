"""The invented world the corpus states and the benchmarks ask about: people, their facts,
function specs. Everything here is a pure function of fixed seeds (no lab, no secret), so the
corpus and every tier agree on one world.

Entities are split into four public tier buckets by a fixed hash of their name (40 / 20 / 20 /
20 percent for train / dev / accept / final): an item of a tier only ever names entities of
its bucket, so tiers are disjoint by entity. Which items of a bucket a tier holds is drawn
with the tier's seed, which derives from the lab secret.
"""

from __future__ import annotations

import hashlib
import random
from dataclasses import dataclass
from functools import cache

from rsilab.records import DataTier

ONSETS = [
    "b",
    "d",
    "f",
    "g",
    "h",
    "k",
    "l",
    "m",
    "n",
    "p",
    "r",
    "s",
    "t",
    "v",
    "z",
    "br",
    "dr",
    "gr",
    "kr",
    "tr",
    "st",
]
VOWELS = ["a", "e", "i", "o", "u", "ai", "ea", "io"]
CODAS = ["", "n", "r", "s", "l", "th", "x", "m"]
CITIES = [
    "Arlow",
    "Brenmoor",
    "Calder",
    "Dunmere",
    "Elstow",
    "Farrow",
    "Galen",
    "Harth",
    "Istra",
    "Jorvik",
    "Kestrel",
    "Lunmar",
    "Marrow",
    "Norwick",
    "Oskel",
    "Pellin",
    "Quarry",
    "Rothby",
    "Selwick",
    "Tarn",
    "Umber",
    "Vantor",
    "Wexley",
    "Yarrow",
]
COLORS = [
    "red",
    "blue",
    "green",
    "yellow",
    "purple",
    "orange",
    "white",
    "black",
    "grey",
    "pink",
    "brown",
    "silver",
]
PETS = ["cat", "dog", "owl", "goat", "fox", "hare", "crow", "newt", "frog", "duck", "mole", "wren"]
OBJECTS = [
    "apples",
    "pears",
    "stones",
    "coins",
    "books",
    "cards",
    "shells",
    "beads",
    "pens",
    "cups",
    "plums",
    "eggs",
    "nails",
    "keys",
    "ropes",
    "bells",
    "maps",
    "nuts",
    "seeds",
    "jars",
]
PEOPLE = 8000
"""Person names (arithmetic, function calls): 20 onsets x 8 vowels x 8 codas x 2 shapes,
first 8000 distinct."""
ENTITIES = 300
"""People the corpus states facts about (factual answers, multiple choice)."""
FACT_KEYS = ("city", "color", "pet")

_BUCKETS = ((DataTier.TRAIN, 40), (DataTier.DEV, 20), (DataTier.ACCEPT, 20), (DataTier.FINAL, 20))


def syllable(i: int) -> str:
    """The ``i``-th syllable (0-1279): onset, vowel, coda."""
    onset, rest = ONSETS[i % len(ONSETS)], i // len(ONSETS)
    return onset + VOWELS[rest % len(VOWELS)] + CODAS[(rest // len(VOWELS)) % len(CODAS)]


@cache
def people() -> tuple[str, ...]:
    """8000 distinct invented first names, in a fixed order."""
    names: list[str] = []
    seen: set[str] = set()
    rng = random.Random(20261201)
    while len(names) < PEOPLE:
        parts = [syllable(rng.randrange(1280)) for _ in range(rng.choice((2, 2, 3)))]
        name = "".join(parts).capitalize()
        if name not in seen and 4 <= len(name) <= 12:
            seen.add(name)
            names.append(name)
    return tuple(names)


def bucket(name: str) -> DataTier:
    """The tier bucket of an entity name (fixed, public)."""
    slot = int.from_bytes(hashlib.sha256(name.encode()).digest()[:4], "big") % 100
    for tier, share in _BUCKETS:
        if slot < share:
            return tier
        slot -= share
    raise AssertionError("shares sum to 100")


@cache
def people_in(tier: DataTier) -> tuple[str, ...]:
    """The person names of ``tier``'s bucket."""
    return tuple(n for n in people() if bucket(n) == tier)


@dataclass(frozen=True)
class Entity:
    """A person the corpus states three facts about."""

    name: str
    city: str
    color: str
    pet: str

    def fact(self, key: str) -> str:
        """The value of fact ``key`` (one of :data:`FACT_KEYS`)."""
        return str(getattr(self, key))


@cache
def entities() -> tuple[Entity, ...]:
    """The 300 fact-bearing people (family names, disjoint from :func:`people`)."""
    rng = random.Random(7)
    chosen: list[Entity] = []
    taken = set(people())
    while len(chosen) < ENTITIES:
        name = "".join(syllable(rng.randrange(1280)) for _ in range(2)).capitalize() + "son"
        if name in taken:
            continue
        taken.add(name)
        chosen.append(Entity(name, rng.choice(CITIES), rng.choice(COLORS), rng.choice(PETS)))
    return tuple(chosen)


def entities_in(tier: DataTier) -> tuple[Entity, ...]:
    """The fact-bearing people of ``tier``'s bucket."""
    return tuple(e for e in entities() if bucket(e.name) == tier)


@dataclass(frozen=True)
class Function:
    """A callable the corpus describes: its name, argument names and types, and a phrase."""

    name: str
    args: tuple[tuple[str, str], ...]
    """(argument, "int" | "str") in call order."""
    request: str
    """An English request with ``{arg}`` slots, e.g. 'set a timer for {minutes} minutes'."""
    prose: str
    """What the function does, in the corpus's words."""


FUNCTIONS = (
    Function("set_timer", (("minutes", "int"),), "set a timer for {minutes} minutes",
             "starts a timer that rings after a number of minutes"),
    Function("send_note", (("to", "str"), ("count", "int")), "send {count} notes to {to}",
             "sends a number of notes to a person"),
    Function("book_room", (("guest", "str"), ("nights", "int")),
             "book a room for {guest} for {nights} nights", "books a room for a guest"),
    Function("water_plants", (("litres", "int"),), "water the plants with {litres} litres",
             "waters the plants with some litres of water"),
    Function("call_person", (("name", "str"),), "phone {name}", "places a phone call"),
    Function("order_food", (("dish", "str"), ("plates", "int")),
             "order {plates} plates of {dish}", "orders plates of a dish"),
    Function("move_robot", (("steps", "int"), ("dir", "str")),
             "move the robot {steps} steps {dir}", "moves the robot some steps in a direction"),
    Function("play_song", (("title", "str"),), "play the song {title}", "plays a song"),
)  # fmt: skip
DISHES = ["soup", "rice", "noodles", "bread", "stew", "salad", "pie", "curry"]
DIRECTIONS = ["north", "south", "east", "west"]
SONGS = ["Rainfall", "Ember", "Tidewater", "Lantern", "Meadow", "Copper", "Harbor", "Willow"]


_POOLS = {"dish": DISHES, "dir": DIRECTIONS, "title": SONGS}
"""Text arguments drawn from a fixed pool; every other text argument is a person's name."""


def names_a_person(fn: Function) -> bool:
    """Whether a call of ``fn`` names a person (an argument filled from a tier's names)."""
    return any(kind == "str" and arg not in _POOLS for arg, kind in fn.args)


def draw_args(fn: Function, rng: random.Random, names: tuple[str, ...]) -> dict[str, object]:
    """Argument values for one call of ``fn``: ints 2-60, names from ``names``."""
    values: dict[str, object] = {}
    for arg, kind in fn.args:
        if kind == "int":
            values[arg] = rng.randint(2, 60)
        else:
            values[arg] = rng.choice(_POOLS.get(arg, names))
    return values
