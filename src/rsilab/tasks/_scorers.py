"""Scorers: a registry by name of functions that score one output against one sample.

A scorer returns a :class:`Scored` per sample: the score, whether the output was valid, and a
note. An invalid output scores ``invalid_score`` of its scorer (0 for accuracy and speedup).
Register more with :func:`register_scorer`; the task spec refuses names not registered.

Every scorer scores per sample: the controller's statistics (paired bootstrap, jackknife)
assume a benchmark's score is the mean of per-sample scores. A *batch* scorer
(:func:`register_batch_scorer`) still gives one score per sample, but is called once with all
the samples of one scoring call (one tier of one benchmark), so that it can do their work in
one go: ``python_tests`` runs every program of a tier in one sandbox job. Corpus-level metrics
(F1, AUC, R², corpus BLEU) are not expressible here. A parametrized scorer is a *family* whose
parameter is part of the name (``pass@5``), so a benchmark's ``scorer`` alone says how it is
scored.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from pydantic import JsonValue

from rsilab.errors import UserError
from rsilab.sandbox.base import Sandbox
from rsilab.tasks._samples import Sample


class ScorerUnavailable(UserError):
    """A scorer cannot score at all here (its sandbox is missing or refused): raised, never
    turned into low scores, so that no output is judged by weaker means than its scorer's."""


@dataclass(frozen=True)
class Scored:
    """One sample's score. ``valid`` is False for a missing or malformed output."""

    sample_id: str
    score: float
    valid: bool = True
    note: str = ""


ScoreFn = Callable[[Sample, JsonValue], Scored]
BatchScoreFn = Callable[[Sequence[tuple[Sample, JsonValue]], Sandbox | None], list[Scored]]
"""``fn(pairs, sandbox) -> scores``: one :class:`Scored` per (sample, output) pair, in order.
``sandbox`` is the caller's (None: the scorer picks its own). It raises only when it cannot
score at all (:class:`ScorerUnavailable`); a bad output is an invalid Scored, as usual."""


@dataclass(frozen=True)
class ScorerInfo:
    """A registered scorer."""

    name: str
    fn: ScoreFn
    higher_is_better: bool
    invalid_score: float
    description: str
    source_sha256: str = ""
    """For a scorer loaded from a task's own file: sha256 of that file and of the task-folder
    modules it imports, so a changed file is a changed evaluator (empty for built-ins, whose
    source :func:`inspect.getsource` reads)."""
    batch: BatchScoreFn | None = None
    """For a batch scorer: the function :func:`score_outputs` calls once per call (``fn`` then
    scores one sample through it)."""
    sources: tuple[str, ...] = field(default=(), repr=False)
    """Source texts of code the scorer runs besides its own function (a driver it runs in a
    sandbox): part of the evaluator's hash (:func:`rsilab.controller.guards.evaluator_sha256`)."""
    ready: Callable[[], None] | None = field(default=None, repr=False, compare=False)
    """Raises :class:`ScorerUnavailable` when the scorer cannot score on this machine (its
    sandbox is missing): a campaign's preflight calls it, so a run is refused before anything
    is written rather than stopped at its first evaluation."""


_SCORERS: dict[str, ScorerInfo] = {}


def register_scorer(
    name: str,
    *,
    higher_is_better: bool = True,
    invalid_score: float = 0.0,
    description: str = "",
    replace: bool = False,
    source_sha256: str = "",
) -> Callable[[ScoreFn], ScoreFn]:
    """Decorator: register ``fn(sample, output) -> Scored`` under ``name``.

    The name is unique: registering another function under a taken name raises ValueError,
    unless ``replace`` (a task's scorer file loaded again registers its new function).
    """

    def decorate(fn: ScoreFn) -> ScoreFn:
        if name in _SCORERS and _SCORERS[name].fn is not fn and not replace:
            raise ValueError(f"scorer {name!r} is already registered")
        # a function without a docstring (a lambda, say) has no first line: no description
        doc = description or next(iter((fn.__doc__ or "").strip().splitlines()), "")
        _SCORERS[name] = ScorerInfo(name, fn, higher_is_better, invalid_score, doc, source_sha256)
        return fn

    return decorate


def register_batch_scorer(
    name: str,
    *,
    higher_is_better: bool = True,
    invalid_score: float = 0.0,
    description: str = "",
    sources: tuple[str, ...] = (),
    ready: Callable[[], None] | None = None,
) -> Callable[[BatchScoreFn], BatchScoreFn]:
    """Decorator: register ``fn(pairs, sandbox) -> list[Scored]`` (:data:`BatchScoreFn`) as
    the batch scorer ``name``; :func:`score_outputs` calls it once for all its samples.
    ``ready``: see :attr:`ScorerInfo.ready`.

    Raises:
        ValueError: ``name`` is taken.
    """

    def decorate(fn: BatchScoreFn) -> BatchScoreFn:
        if name in _SCORERS:
            raise ValueError(f"scorer {name!r} is already registered")
        doc = description or next(iter((fn.__doc__ or "").strip().splitlines()), "")
        _SCORERS[name] = batch_info(name, fn, higher_is_better, invalid_score, doc, sources, ready)
        return fn

    return decorate


def batch_info(
    name: str,
    fn: BatchScoreFn,
    higher_is_better: bool,
    invalid_score: float,
    description: str,
    sources: tuple[str, ...] = (),
    ready: Callable[[], None] | None = None,
) -> ScorerInfo:
    """The :class:`ScorerInfo` of a batch scorer (for a family's ``make``)."""

    def one(sample: Sample, output: JsonValue) -> Scored:
        return fn([(sample, output)], None)[0]

    return ScorerInfo(
        name, one, higher_is_better, invalid_score, description, batch=fn, sources=sources,
        ready=ready,
    )  # fmt: skip


def scorer_names() -> list[str]:
    """Every registered scorer name, sorted, but those of a task's own scorer file (named by
    the file's path, ``/abs/scoring.py:fn``: private to that task)."""
    return sorted(name for name in _SCORERS if ".py:" not in name)


@dataclass(frozen=True)
class ScorerFamily:
    """Scorers named ``PREFIX<int>`` (``pass@5``), made on first use by ``make(parameter)``."""

    pattern: str
    prefix: str
    make: Callable[[int], ScorerInfo]
    higher_is_better: bool
    invalid_score: float
    description: str


_FAMILIES: dict[str, ScorerFamily] = {}


def register_family(family: ScorerFamily) -> None:
    """Add a scorer family (its prefix must be new).

    Raises:
        ValueError: a family with this prefix exists.
    """
    if family.prefix in _FAMILIES:
        raise ValueError(f"scorer family {family.prefix!r} is already registered")
    _FAMILIES[family.prefix] = family


def scorer_families() -> list[ScorerFamily]:
    """Every scorer family, by prefix."""
    return [_FAMILIES[p] for p in sorted(_FAMILIES)]


def get_scorer(name: str) -> ScorerInfo:
    """The scorer registered as ``name`` (or a family member, made now); KeyError if none."""
    if name in _SCORERS:
        return _SCORERS[name]
    for family in _FAMILIES.values():
        match = re.fullmatch(re.escape(family.prefix) + r"([1-9][0-9]{0,3})", name)
        if match:
            info = family.make(int(match.group(1)))
            return _SCORERS.setdefault(name, info)
    families = "".join(f", {f.pattern}" for f in scorer_families())
    raise KeyError(f"unknown scorer {name!r}; known: {', '.join(scorer_names())}{families}")


def score_outputs(
    scorer: str,
    samples: Sequence[Sample],
    outputs: Mapping[str, JsonValue],
    *,
    sandbox: Sandbox | None = None,
) -> list[Scored]:
    """Score every sample; a sample without an output is invalid. Never raises on bad outputs.

    A batch scorer is called once, with every sample that has an output, and ``sandbox``
    (the caller's, if it has one; the scorer decides whether it is good enough to use).

    Raises:
        ScorerUnavailable: a batch scorer cannot score here at all (no usable sandbox).
    """
    info = get_scorer(scorer)
    if info.batch is not None:
        return _score_batch(info, info.batch, samples, outputs, sandbox)
    results: list[Scored] = []
    for sample in samples:
        if sample.id not in outputs:
            results.append(Scored(sample.id, info.invalid_score, False, "no output"))
            continue
        try:
            results.append(info.fn(sample, outputs[sample.id]))
        except Exception as exc:  # a scorer crash on odd output is data, not a crash
            note = f"scorer failed: {type(exc).__name__}: {exc}"
            results.append(Scored(sample.id, info.invalid_score, False, note))
    return results


def _score_batch(
    info: ScorerInfo,
    batch: BatchScoreFn,
    samples: Sequence[Sample],
    outputs: Mapping[str, JsonValue],
    sandbox: Sandbox | None,
) -> list[Scored]:
    present = [(s, outputs[s.id]) for s in samples if s.id in outputs]
    made = batch(present, sandbox) if present else []
    if len(made) != len(present):
        raise AssertionError(f"batch scorer {info.name}: {len(made)} scores for {len(present)}")
    scored = iter(made)
    return [
        next(scored) if s.id in outputs else Scored(s.id, info.invalid_score, False, "no output")
        for s in samples
    ]


@register_scorer("accuracy", description="1 when the output equals the target, else 0.")
def accuracy(sample: Sample, output: JsonValue) -> Scored:
    """1 when the output equals the target (JSON equality), else 0."""
    return Scored(sample.id, 1.0 if output == sample.target else 0.0)


@register_scorer("exact_match", description="1 when the output text equals the target text.")
def exact_match(sample: Sample, output: JsonValue) -> Scored:
    """1 when ``str(output).strip()`` equals ``str(target).strip()``, else 0."""
    return Scored(sample.id, 1.0 if str(output).strip() == str(sample.target).strip() else 0.0)


@register_scorer(
    "speedup",
    description="t_reference / t_candidate from the task's timing driver; 0 when incorrect.",
)
def speedup(sample: Sample, output: JsonValue) -> Scored:
    """Speedup reported by a task-owned timing driver (see ``rsilab.tasks.builtin.kernel``).

    The output must be ``{"valid": bool, "t_reference": s, "t_candidate": s, "note": str}``.
    An incorrect candidate (``valid`` false) scores 0 and is invalid.
    """
    if not isinstance(output, dict):
        return Scored(sample.id, 0.0, False, "output is not an object")
    note = str(output.get("note", ""))
    t_ref, t_cand = output.get("t_reference"), output.get("t_candidate")
    if output.get("valid") is not True:
        return Scored(sample.id, 0.0, False, note or "candidate incorrect")
    if not isinstance(t_ref, int | float) or not isinstance(t_cand, int | float):
        return Scored(sample.id, 0.0, False, "timings missing")
    if not (math.isfinite(t_ref) and math.isfinite(t_cand)) or t_ref <= 0 or t_cand <= 0:
        return Scored(sample.id, 0.0, False, "timings not positive")
    return Scored(sample.id, float(t_ref) / float(t_cand), True, note)


@register_scorer(
    "squared_error",
    higher_is_better=False,
    invalid_score=math.inf,
    description="(output - target)^2 for numbers; lower is better.",
)
def squared_error(sample: Sample, output: JsonValue) -> Scored:
    """Squared difference of numeric output and target; a non-number is invalid."""
    pair = _number(sample, output)
    if isinstance(pair, Scored):
        return pair
    return Scored(sample.id, (pair[0] - pair[1]) ** 2)


def _number(sample: Sample, output: JsonValue) -> tuple[float, float] | Scored:
    """(output, target) as floats, or the invalid Scored saying which is not a number."""
    if not isinstance(output, int | float) or isinstance(output, bool):
        return Scored(sample.id, math.inf, False, "output is not a number")
    if not isinstance(sample.target, int | float) or isinstance(sample.target, bool):
        return Scored(sample.id, math.inf, False, "target is not a number")
    return float(output), float(sample.target)


@register_scorer(
    "absolute_error",
    higher_is_better=False,
    invalid_score=math.inf,
    description="|output - target| for numbers; lower is better.",
)
def absolute_error(sample: Sample, output: JsonValue) -> Scored:
    """Absolute difference of numeric output and target; a non-number is invalid."""
    pair = _number(sample, output)
    if isinstance(pair, Scored):
        return pair
    return Scored(sample.id, abs(pair[0] - pair[1]))


CHRF_ORDER = 6
"""Longest character n-gram of :func:`chrf_score`."""
CHRF_BETA = 2.0
"""Recall weighs ``CHRF_BETA`` times as much as precision in :func:`chrf_score`."""


def _char_ngrams(text: str, n: int) -> Counter[str]:
    return Counter(text[i : i + n] for i in range(len(text) - n + 1))


def chrf_score(hypothesis: str, reference: str) -> float:
    """Sentence-level chrF (Popović 2015) in [0, 1], with n = 1..6 and beta = 2.

    Whitespace is removed first. For each order n, precision and recall are the clipped
    matches of character n-grams over the hypothesis's and the reference's n-gram counts;
    both are averaged over the orders for which both strings have n-grams, and combined as
    ``(1 + b²) P R / (b² P + R)``. Two empty strings score 1; one empty string scores 0.
    """
    hyp, ref = "".join(hypothesis.split()), "".join(reference.split())
    if not hyp or not ref:
        return 1.0 if hyp == ref else 0.0
    precisions, recalls = [], []
    for n in range(1, CHRF_ORDER + 1):
        hyp_grams, ref_grams = _char_ngrams(hyp, n), _char_ngrams(ref, n)
        if not hyp_grams or not ref_grams:
            break
        matches = sum((hyp_grams & ref_grams).values())
        precisions.append(matches / sum(hyp_grams.values()))
        recalls.append(matches / sum(ref_grams.values()))
    p, r = sum(precisions) / len(precisions), sum(recalls) / len(recalls)
    b2 = CHRF_BETA**2
    return 0.0 if p + r == 0 else (1 + b2) * p * r / (b2 * p + r)


@register_scorer(
    "chrf",
    description="Sentence-level chrF (character 1..6-grams, beta 2) of output text vs target.",
)
def chrf(sample: Sample, output: JsonValue) -> Scored:
    """chrF of the output string against the target string (:func:`chrf_score`), in [0, 1]."""
    if not isinstance(output, str):
        return Scored(sample.id, 0.0, False, "output is not a string")
    if not isinstance(sample.target, str):
        return Scored(sample.id, 0.0, False, "target is not a string")
    return Scored(sample.id, chrf_score(output, sample.target))


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k from ``n`` generations of which ``c`` passed: 1 - C(n-c, k) / C(n, k).

    Raises:
        ValueError: ``n < k``, or ``c`` outside [0, n].
    """
    if n < k:
        raise ValueError(f"pass@{k} needs at least {k} generations, got {n}")
    if not 0 <= c <= n:
        raise ValueError(f"{c} passing of {n} generations")
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


def _generations(output: JsonValue) -> tuple[int, int]:
    """(n, c) from a list of booleans or from ``{"n": int, "c": int}``; ValueError otherwise."""
    if isinstance(output, list) and all(isinstance(x, bool) for x in output):
        return len(output), sum(1 for x in output if x)
    if isinstance(output, dict):
        n, c = output.get("n"), output.get("c")
        ints = all(isinstance(v, int) and not isinstance(v, bool) for v in (n, c))
        if ints and isinstance(n, int) and isinstance(c, int):
            return n, c
    raise ValueError('output is neither a list of booleans nor {"n": int, "c": int}')


def _make_pass_at(k: int) -> ScorerInfo:
    def score(sample: Sample, output: JsonValue) -> Scored:
        try:
            n, c = _generations(output)
            return Scored(sample.id, pass_at_k(n, c, k))
        except ValueError as exc:
            return Scored(sample.id, 0.0, False, str(exc))

    doc = f"pass@{k}: chance that {k} of the problem's generations include a passing one."
    return ScorerInfo(f"pass@{k}", score, True, 0.0, doc)


register_family(
    ScorerFamily(
        pattern="pass@K",
        prefix="pass@",
        make=_make_pass_at,
        higher_is_better=True,
        invalid_score=0.0,
        description=(
            "Per problem, the unbiased pass@K, 1 - C(n-c, K) / C(n, K), from n >= K generations of "
            'which c passed; the output is a list of booleans (one per generation) or {"n", "c"}. '
            "Fewer than K generations is invalid."
        ),
    )
)
