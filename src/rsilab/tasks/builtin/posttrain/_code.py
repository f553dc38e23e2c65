"""The code world: tiny Python functions of one argument, named by what they compute.

A function applies one or two steps (add, subtract or multiply by a constant 2-99) to its
argument, e.g. ``add_7_mul_3(x)`` returns ``(x + 7) * 3``. The corpus describes such
functions in prose and shows their code; the ``code`` benchmark asks for one by its English
spec and checks the answer with unit tests. A function's tier bucket is the bucket of its
name (see ``_world.bucket``), so tiers never share a function.

Item space: 3 steps x 98 constants, one or two steps (88,494 computations), x 12 argument
names x 3 request phrasings: about 3.2 x 10^6 requests.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from rsilab.records import DataTier
from rsilab.tasks.builtin.posttrain import _world as world

STEPS = (("add", "plus", "+"), ("sub", "minus", "-"), ("mul", "times", "*"))
"""(name part, English word, Python operator)."""
ARGS = ("x", "n", "a", "b", "k", "m", "v", "y", "z", "t", "w", "q")
REQUESTS = (
    "Write a function {sig} that returns {spec}.",
    "Define {sig} so that it returns {spec}.",
    "Implement {sig}, which returns {spec}.",
)
CHECK_INPUTS = (0, 3, 10)
"""The arguments the unit tests call a function with."""


@dataclass(frozen=True)
class CodeFunction:
    """A function: its argument name and its steps, (step index into STEPS, constant)."""

    arg: str
    steps: tuple[tuple[int, int], ...]

    @property
    def name(self) -> str:
        return "_".join(f"{STEPS[s][0]}_{c}" for s, c in self.steps)

    @property
    def signature(self) -> str:
        return f"{self.name}({self.arg})"

    @property
    def spec(self) -> str:
        """What it returns, in English: 'x plus 7', 'x plus 7, then times 3'."""
        words = [f"{STEPS[s][1]} {c}" for s, c in self.steps]
        return f"{self.arg} " + ", then ".join(words)

    @property
    def source(self) -> str:
        """The function as Python code (the answer the benchmark wants)."""
        expr = self.arg
        for i, (s, c) in enumerate(self.steps):
            expr = f"{expr} {STEPS[s][2]} {c}" if i == 0 else f"({expr}) {STEPS[s][2]} {c}"
        return f"def {self.signature}:\n    return {expr}"

    def value(self, x: int) -> int:
        """What the function returns for ``x`` (computed, not by running the source)."""
        for s, c in self.steps:
            x = x + c if s == 0 else x - c if s == 1 else x * c
        return x

    def tests(self) -> list[str]:
        """Plain assert lines, run after the program defines the function."""
        return [f"assert {self.name}({x}) == {self.value(x)}" for x in CHECK_INPUTS]


def draw(rng: random.Random, tier: DataTier) -> CodeFunction:
    """A function whose name falls in ``tier``'s bucket (drawn until one does)."""
    while True:
        count = rng.choice((1, 2, 2))
        steps = tuple((rng.randrange(3), rng.randint(2, 99)) for _ in range(count))
        fn = CodeFunction(rng.choice(ARGS), steps)
        if world.bucket(fn.name) == tier:
            return fn


def request(fn: CodeFunction, rng: random.Random) -> str:
    """The English request for ``fn`` in one of :data:`REQUESTS`."""
    return rng.choice(REQUESTS).format(sig=fn.signature, spec=fn.spec)
