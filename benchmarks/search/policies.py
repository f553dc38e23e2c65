"""Search policies that ask for a config and are told its dev score: random, greedy, Optuna TPE.

Every policy here sees only the task's declared search space (:class:`~rsilab.tasks.Knob`), its
starting config (the knobs' defaults) and the dev scores of the configs it asked for. A policy
is driven by :func:`benchmarks.search.protocol.run_policy`: ``ask`` returns the knobs of the
next experiment, ``tell`` gives back its dev target score (``None`` when a job failed) and
whether it is *feasible*: no non-target benchmark's dev score fell below the starting
config's by more than the benchmark's tolerance (the constraint the controller enforces on
the private tiers; rsilab's built-in policy weighs the same dev scores, so every policy gets
the same information). Every policy's first ask is the starting config, the reference that
feasibility is measured from. Up to ``workers`` asks may be outstanding at once. Every random
choice comes from the run's seed, so a run repeats exactly (up to job timing when
``workers > 1``).

Numeric knobs are moved in a normalised coordinate ``u`` in [0, 1] (``log10`` of the value for a
``log`` knob), the same convention as :mod:`rsilab.orchestrator.builtin.worker._rules`.
"""

from __future__ import annotations

import math
import random
import warnings
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

import optuna
from pydantic import JsonValue

from rsilab.orchestrator.builtin._search import (
    build_study,
    conditional,
    draw_conditional,
    sampler_seed,
    suggest,
)
from rsilab.orchestrator.builtin._state import NON_TARGET_PENALTY, NonTarget, Run, shortfall_of
from rsilab.orchestrator.builtin.main._race import next_race_config, race_budget, winner
from rsilab.orchestrator.builtin.worker._rules import config_key
from rsilab.tasks import Knob, KnobType

Config = dict[str, JsonValue]
"""Knob name -> value."""

Ticket = int
"""What ``ask`` hands out and ``tell`` takes back, to match a score with its config."""


class Policy(Protocol):
    """A search policy (see the module docstring)."""

    name: str

    def ask(self) -> tuple[Ticket, Config]:
        """The next config to run (every knob of the space), with a ticket for ``tell``."""
        ...

    def tell(self, ticket: Ticket, score: float | None, feasible: bool = True) -> None:
        """The dev target score of the config asked under ``ticket`` (None: the run failed)
        and whether it kept the non-target benchmarks within their tolerance."""
        ...


# --- knob helpers -----------------------------------------------------------------------------


def _bounds(knob: Knob) -> tuple[float, float]:
    assert knob.low is not None and knob.high is not None
    if knob.log:
        return math.log10(knob.low), math.log10(knob.high)
    return knob.low, knob.high


def _from_u(knob: Knob, u: float) -> JsonValue:
    """The value of a numeric knob at normalised coordinate ``u`` (clipped to [0, 1])."""
    lo, hi = _bounds(knob)
    x = lo + min(1.0, max(0.0, u)) * (hi - lo)
    value = 10**x if knob.log else x
    assert knob.low is not None and knob.high is not None
    if knob.type is KnobType.INT:
        return int(min(knob.high, max(knob.low, round(value))))
    return float(f"{min(knob.high, max(knob.low, value)):.6g}")


def _to_u(knob: Knob, value: JsonValue) -> float:
    lo, hi = _bounds(knob)
    assert isinstance(value, int | float)
    x = math.log10(value) if knob.log else float(value)
    return (x - lo) / (hi - lo)


def random_value(knob: Knob, rng: random.Random) -> JsonValue:
    """A uniform draw from the knob's range (log-uniform on a log knob; a choice or a bool
    uniformly)."""
    if knob.type is KnobType.CHOICE:
        return rng.choice(knob.choices)
    if knob.type is KnobType.BOOL:
        return rng.random() < 0.5
    return _from_u(knob, rng.random())


def mutate_value(knob: Knob, value: JsonValue, rng: random.Random, step: float) -> JsonValue:
    """``value`` moved once: a gaussian step of sd ``step`` in ``u`` (numeric), another choice
    (choice), the other truth value (bool). An int knob moves by at least 1 when it can."""
    if knob.type is KnobType.CHOICE:
        others = [c for c in knob.choices if c != value]
        return rng.choice(others) if others else value
    if knob.type is KnobType.BOOL:
        return not bool(value)
    moved = _from_u(knob, _to_u(knob, value) + rng.gauss(0.0, step))
    if knob.type is KnobType.INT and moved == value:
        assert knob.low is not None and knob.high is not None and isinstance(value, int)
        up = value + 1 <= knob.high
        moved = value + 1 if (up and (rng.random() < 0.5 or value - 1 < knob.low)) else value - 1
    return moved


def starting_config(space: Sequence[Knob]) -> Config:
    """The task's starting config: every knob at its default."""
    return {k.name: k.default for k in space}


# --- random search ----------------------------------------------------------------------------


class RandomSearch:
    """The starting config, then uniform draws (log-uniform on log knobs) over the whole
    space; never repeats a config."""

    name = "random"

    def __init__(self, space: Sequence[Knob], seed: int) -> None:
        self.space = list(space)
        self.rng = random.Random(f"random:{seed}")
        self.tried: set[str] = set()
        self._next = 0

    def ask(self) -> tuple[Ticket, Config]:
        config = starting_config(self.space)
        for _ in range(100 if self._next else 0):
            config = {k.name: random_value(k, self.rng) for k in self.space}
            if config_key(config, self.space) not in self.tried:
                break
        self.tried.add(config_key(config, self.space))
        self._next += 1
        return self._next, config

    def tell(self, ticket: Ticket, score: float | None, feasible: bool = True) -> None:
        """Random search ignores scores."""


# --- greedy hill-climbing ---------------------------------------------------------------------


class HillClimb:
    """Greedy hill-climbing: the first experiment runs the starting config; each later one
    changes one knob of the best config so far (:func:`mutate_value`, step ``STEP``) and the
    change is kept only if it is feasible and its dev score beats the best so far (strictly).
    A config already tried is not asked again (up to 100 redraws)."""

    name = "hill-climb"
    STEP = 0.15

    def __init__(self, space: Sequence[Knob], seed: int) -> None:
        self.space = list(space)
        self.rng = random.Random(f"hill-climb:{seed}")
        self.best: Config = starting_config(space)
        self.best_score: float | None = None
        self.tried: set[str] = set()
        self.asked: dict[Ticket, Config] = {}
        self._next = 0

    def ask(self) -> tuple[Ticket, Config]:
        config = dict(self.best)
        if config_key(config, self.space) in self.tried:
            for _ in range(100):
                knob = self.rng.choice(self.space)
                config = dict(self.best)
                config[knob.name] = mutate_value(knob, self.best[knob.name], self.rng, self.STEP)
                if config_key(config, self.space) not in self.tried:
                    break
        self.tried.add(config_key(config, self.space))
        self._next += 1
        self.asked[self._next] = config
        return self._next, config

    def tell(self, ticket: Ticket, score: float | None, feasible: bool = True) -> None:
        config = self.asked.pop(ticket)
        better = score is not None and (self.best_score is None or score > self.best_score)
        if better and feasible:
            self.best, self.best_score = config, score


# --- Optuna TPE -------------------------------------------------------------------------------


def _primitive(value: JsonValue) -> bool:
    return value is None or isinstance(value, bool | int | float | str)


def optuna_distribution(knob: Knob) -> optuna.distributions.BaseDistribution:
    """The Optuna distribution of a knob.

    float -> FloatDistribution(low, high, log); int -> IntDistribution(low, high, log);
    bool -> CategoricalDistribution([False, True]); choice -> CategoricalDistribution of its
    choices when every choice is a JSON scalar, else of their indices (0..n-1; see
    :func:`from_optuna`).
    """
    if knob.type is KnobType.FLOAT:
        assert knob.low is not None and knob.high is not None
        return optuna.distributions.FloatDistribution(knob.low, knob.high, log=knob.log)
    if knob.type is KnobType.INT:
        assert knob.low is not None and knob.high is not None
        return optuna.distributions.IntDistribution(int(knob.low), int(knob.high), log=knob.log)
    if knob.type is KnobType.BOOL:
        return optuna.distributions.CategoricalDistribution([False, True])
    if all(_primitive(c) for c in knob.choices):
        return optuna.distributions.CategoricalDistribution(knob.choices)  # type: ignore[arg-type]
    return optuna.distributions.CategoricalDistribution(list(range(len(knob.choices))))


def from_optuna(knob: Knob, value: Any) -> JsonValue:
    """The config value of an Optuna parameter drawn from :func:`optuna_distribution`."""
    if knob.type is KnobType.CHOICE and not all(_primitive(c) for c in knob.choices):
        return knob.choices[int(value)]
    if knob.type is KnobType.FLOAT:
        return float(value)
    if knob.type is KnobType.INT:
        return int(value)
    if knob.type is KnobType.BOOL:
        return bool(value)
    return value  # type: ignore[no-any-return]


def to_optuna(knob: Knob, value: JsonValue) -> Any:
    """The Optuna parameter of a config value (inverse of :func:`from_optuna`)."""
    if knob.type is KnobType.CHOICE and not all(_primitive(c) for c in knob.choices):
        return knob.choices.index(value)
    return value


CONSTRAINT = "non_target_regression"
"""The name of the Optuna constraint that marks a trial infeasible."""


class OptunaTPE:
    """Optuna's TPE sampler over the declared space, one trial per experiment (ask/tell).

    Configured as ``TPESampler(multivariate=True, seed=seed, n_startup_trials=startup,
    constant_liar=workers > 1)`` with ``startup = min(10, max(2, budget // 2))`` (Optuna's
    default of 10 random trials, fewer when the budget is small so that TPE proposes at least
    half of them), direction ``maximize``. Feasibility (see the module docstring) is the
    trial's constraint :data:`CONSTRAINT` (``Trial.set_constraint``, Optuna 5), set before it
    is told: 0.0 when feasible, 1.0 when not (values <= 0 are satisfied); constrained TPE
    then models the feasible trials apart. The starting config is enqueued as the first
    trial (as the other policies start from it). A failed run is told as a failed trial.
    A space whose knobs declare conditions (:attr:`~rsilab.tasks.Knob.when`) is drawn
    define-by-run with ``group=True``, as Optuna's documentation advises for conditional
    spaces: a knob is suggested only where it matters (the built-in's own
    :func:`~rsilab.orchestrator.builtin._search.draw_conditional`).
    """

    name = "optuna-tpe"

    def __init__(self, space: Sequence[Knob], seed: int, budget: int, workers: int = 1) -> None:
        optuna.logging.set_verbosity(optuna.logging.WARNING)
        self.space = list(space)
        self.startup = min(10, max(2, budget // 2))
        with warnings.catch_warnings():  # group is experimental since Optuna 2.8
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            sampler = optuna.samplers.TPESampler(
                multivariate=True,
                group=conditional(self.space),  # Optuna's advice for conditional spaces
                seed=seed,
                n_startup_trials=self.startup,
                constant_liar=workers > 1,
            )
        self.study = optuna.create_study(direction="maximize", sampler=sampler)
        self.study.enqueue_trial({k.name: to_optuna(k, k.default) for k in self.space})
        self.distributions = {k.name: optuna_distribution(k) for k in self.space}
        self.trials: dict[Ticket, optuna.trial.Trial] = {}

    def ask(self) -> tuple[Ticket, Config]:
        if conditional(self.space):
            # knobs that declare when they matter are drawn define-by-run, as a user writes an
            # Optuna objective with conditional parameters; a knob not drawn stays at its default
            trial = self.study.ask()
            config = draw_conditional(trial, self.space, {})
        else:
            trial = self.study.ask(self.distributions)
            config = {k.name: from_optuna(k, trial.params[k.name]) for k in self.space}
        self.trials[trial.number] = trial
        return trial.number, config

    def tell(self, ticket: Ticket, score: float | None, feasible: bool = True) -> None:
        trial = self.trials.pop(ticket)
        trial.set_constraint(CONSTRAINT, 0.0 if feasible else 1.0)
        if score is None:
            self.study.tell(trial, state=optuna.trial.TrialState.FAIL)
        else:
            self.study.tell(trial, score)


class OptunaTPERaced:
    """rsilab's own search without rsilab's research layer: the peer that makes "rsilab beats
    TPE" mean more than "racing beats no racing".

    It calls the built-in policy's own sampler code: before each ask a fresh study from
    :func:`~rsilab.orchestrator.builtin._search.build_study` (constrained multivariate TPE with
    the built-in's startup trials, seeded by
    :func:`~rsilab.orchestrator.builtin._search.sampler_seed` of the run's seed and the ask's
    number) holds every run, re-runs included, and the runs in flight; every knob is open
    (:func:`~rsilab.orchestrator.builtin._search.suggest` from the reference, never a config
    tried before). Runs are weighed as the built-in weighs them: a non-target dev score more
    than :data:`~rsilab.orchestrator.builtin._state.NON_TARGET_MARGIN` of its tolerance below the
    reference runs' mean is a constraint violation and costs
    :data:`~rsilab.orchestrator.builtin._state.NON_TARGET_PENALTY` per unit. The same end race
    (the last :func:`~rsilab.orchestrator.builtin.main._race.race_budget` experiments: one re-run
    of the reference, then successive halving by
    :func:`~rsilab.orchestrator.builtin.main._race.next_race_config`) and the same proposal: the
    race's :func:`~rsilab.orchestrator.builtin.main._race.winner`, once, at the end. What it
    lacks is what rsilab adds: directions over knob subsets, branching from the global best,
    Workers, the Reviewer and its acceptance prediction.
    """

    name = "optuna-tpe-raced"

    def __init__(
        self,
        space: Sequence[Knob],
        seed: int,
        budget: int,
        non_targets: Sequence[NonTarget] = (),
    ) -> None:
        self.space = list(space)
        self.seed = seed
        self.budget = budget
        self.race_slots = race_budget(budget)
        self.non_targets = list(non_targets)
        self.reference = starting_config(self.space)
        self.asked: dict[Ticket, Config] = {}
        self.running: dict[Ticket, Config] = {}
        self.runs: list[Run] = []
        self.raw: list[tuple[Config, dict[str, float] | None]] = []
        self.race_slot = 0

    def ask(self) -> tuple[Ticket, Config]:
        ticket = len(self.asked)
        config: Config | None = None
        if ticket == 0:
            config = dict(self.reference)
        elif ticket >= self.budget - self.race_slots:
            raced = next_race_config(
                self.runs, self.reference, list(self.running.values()), self.race_slot,
                self.race_slots, self.non_targets,
            )  # fmt: skip
            self.race_slot += 1
            config = None if raced is None else dict(raced)
        if config is None:
            study = build_study(
                self.space, self.runs, seed=sampler_seed(self.seed, ticket),
                running=list(self.running.values()),
            )  # fmt: skip
            tried = {config_key(c, self.space) for c, _ in self.raw}
            tried |= {config_key(c, self.space) for c in self.running.values()}
            names = [k.name for k in self.space]
            config = suggest(study, self.space, names, self.reference, tried) or dict(
                self.reference
            )
        self.asked[ticket] = config
        self.running[ticket] = config
        return ticket, config

    def tell(self, ticket: Ticket, score: float | None, feasible: bool = True) -> None:
        raise TypeError("optuna-tpe-raced needs every benchmark's score: use tell_scores")

    def tell_scores(self, ticket: Ticket, target: str, scores: dict[str, float] | None) -> None:
        """The dev scores of every benchmark (oriented: higher is better) of the config asked
        under ``ticket``; None or no ``target`` score: the run failed."""
        config = self.running.pop(ticket)
        self.raw.append((config, scores if scores and target in scores else None))
        self.runs = self._weighed(target)

    def _weighed(self, target: str) -> list[Run]:
        """Every run weighed against the reference runs' current mean (it moves as the
        reference is re-run, so every weight is recomputed)."""
        refs = [s for c, s in self.raw if s is not None and c == self.reference]
        names = {name for r in refs for name in r}
        ref_means = {
            n: sum(r[n] for r in refs if n in r) / sum(n in r for r in refs) for n in names
        }
        runs: list[Run] = []
        for i, (config, scores) in enumerate(self.raw):
            if scores is None:
                runs.append(Run(i, f"run-{i}", "peer", config, 0.0, failed=True))
                continue
            shortfall = shortfall_of(scores, ref_means, self.non_targets)
            score = scores[target] - NON_TARGET_PENALTY * shortfall
            runs.append(
                Run(i, f"run-{i}", "peer", config, score, scores=scores, shortfall=shortfall)
            )
        return runs

    def choice(self) -> Config | None:
        """The config to propose once at the end: the race's winner (None: nothing beat the
        reference)."""
        found = winner(self.runs, self.reference, self.non_targets)
        return None if found is None else dict(found.config)


def make_policy(
    name: str,
    space: Sequence[Knob],
    seed: int,
    budget: int,
    workers: int = 1,
    non_targets: Sequence[NonTarget] = (),
) -> Policy:
    """The ask/tell policy called ``name`` (random, hill-climb, optuna-tpe, optuna-tpe-raced;
    ``non_targets`` matter to the last only)."""
    if name == OptunaTPERaced.name:
        return OptunaTPERaced(space, seed, budget, non_targets)
    if name == RandomSearch.name:
        return RandomSearch(space, seed)
    if name == HillClimb.name:
        return HillClimb(space, seed)
    if name == OptunaTPE.name:
        return OptunaTPE(space, seed, budget, workers)
    raise ValueError(f"no search policy {name!r}")


ASK_TELL_POLICIES = (OptunaTPERaced.name, OptunaTPE.name, HillClimb.name, RandomSearch.name)


def config_of(config: Mapping[str, JsonValue], space: Sequence[Knob]) -> Config:
    """``config`` restricted to the knobs of ``space``."""
    return {k.name: config[k.name] for k in space if k.name in config}
