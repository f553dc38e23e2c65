"""The policy's sampler: Optuna's multivariate TPE, one study per campaign, rebuilt from records.

The study is never kept between steps (nothing is pickled outside the ledger): before each
proposal :func:`build_study` makes a fresh in-memory study and adds every finished run of the
campaign as a trial, re-runs of one config included (each is one more observation of it), with
the run's dev target score oriented so that higher is better and its non-target constraint;
failed runs are added as failed trials; experiments still running are added as running trials,
which the sampler's constant liar treats as pessimistic guesses so parallel Workers spread out.
The sampler's seed comes from the campaign seed and the experiment's number, so a campaign (or
its resume) proposes the same configs from the same records.

Constraint: a run is infeasible when a non-target benchmark's dev score falls short of the
reference's by more than :data:`~rsilab.orchestrator.builtin._state.NON_TARGET_MARGIN` of its
tolerance (:attr:`~rsilab.orchestrator.builtin._state.Run.shortfall` > 0). Optuna 5 reads it from
the trial's constraints (``create_trial(constraints=...)``; ``TPESampler(constraints_func=...)``
is deprecated there and does the same), and constrained TPE models feasible trials apart.

A direction opens a subset of the knobs from a base config (the reference, or the best config
found anywhere): :func:`suggest` fixes the other knobs at the base's values
(``PartialFixedSampler``) and lets TPE model the open ones over every trial of the study.

Conditional knobs (:attr:`~rsilab.tasks.Knob.when`): a trial holds only the knobs that matter in
its config, and :func:`suggest` draws define-by-run, deciding knobs first, so a knob is drawn
only where it acts (a learning rate when the model trains). The values a config gives a knob
that does not matter are noise to TPE's model (they change no score); left out, the knob's
density is fitted on the trials where it acted. Such a space uses TPE's grouped multivariate
mode (``group=True``), which models each set of knobs that appear together; a knob left
undrawn keeps the base's value, as tempering does. A space without conditions is sampled as
before (one joint space, no groups).
"""

from __future__ import annotations

import hashlib
import math
import warnings
from collections.abc import Collection, Mapping, Sequence
from typing import Any

import optuna
from optuna.distributions import (
    BaseDistribution,
    CategoricalDistribution,
    FloatDistribution,
    IntDistribution,
)
from optuna.trial import TrialState
from pydantic import JsonValue

from rsilab.orchestrator.builtin._state import Run
from rsilab.orchestrator.builtin.worker._rules import config_key, is_valid
from rsilab.tasks import Knob, KnobType, active_names, deciding_first

CONSTRAINT = "non_target_shortfall"
"""The trials' constraint: the runs' non-target shortfall beyond the margin (<= 0 feasible)."""
STARTUP_TRIALS = 6
"""Random trials TPE waits for before it models (Optuna's default is 10; budgets here are
24-40 experiments, so TPE proposes most of them)."""
TRIES = 30
"""Draws per proposal before a direction counts as unable to produce a new config."""

Config = dict[str, JsonValue]


def sampler_seed(campaign_seed: int, n: int, attempt: int = 0) -> int:
    """The sampler's seed for experiment ``n`` (a 32-bit number from the campaign's seed)."""
    digest = hashlib.sha256(f"{campaign_seed}:tpe:{n}:{attempt}".encode()).digest()
    return int.from_bytes(digest[:4], "big")


def _scalar(value: JsonValue) -> bool:
    return value is None or isinstance(value, bool | int | float | str)


def distribution(knob: Knob) -> BaseDistribution:
    """The Optuna distribution of ``knob`` (a choice of non-scalar values by index)."""
    if knob.type in (KnobType.FLOAT, KnobType.INT):
        assert knob.low is not None and knob.high is not None  # the Knob validator ensures it
        if knob.type is KnobType.INT:
            return IntDistribution(math.ceil(knob.low), math.floor(knob.high), log=knob.log)
        return FloatDistribution(knob.low, knob.high, log=knob.log)
    if knob.type is KnobType.BOOL:
        return CategoricalDistribution([False, True])
    if all(_scalar(c) for c in knob.choices):
        return CategoricalDistribution(knob.choices)  # type: ignore[arg-type]
    return CategoricalDistribution(list(range(len(knob.choices))))


def to_param(knob: Knob, value: JsonValue) -> Any:
    """The Optuna parameter of a config value."""
    if knob.type is KnobType.CHOICE and not all(_scalar(c) for c in knob.choices):
        return knob.choices.index(value)
    if knob.type is KnobType.INT and isinstance(value, float):
        return int(value)
    return value


def from_param(knob: Knob, value: Any) -> JsonValue:
    """The config value of an Optuna parameter (inverse of :func:`to_param`)."""
    if knob.type is KnobType.CHOICE and not all(_scalar(c) for c in knob.choices):
        return knob.choices[int(value)]
    if knob.type is KnobType.FLOAT:
        return float(f"{float(value):.6g}")  # readable configs, stable keys
    if knob.type is KnobType.INT:
        return int(value)
    if knob.type is KnobType.BOOL:
        return bool(value)
    return value  # type: ignore[no-any-return]


def conditional(space: Sequence[Knob]) -> bool:
    """Whether some knob of ``space`` matters only in part of it (declares ``when``)."""
    return any(k.when is not None for k in space)


def _params(space: Sequence[Knob], config: Mapping[str, JsonValue]) -> dict[str, Any]:
    """The trial parameters of ``config``: the knobs that matter in it (every knob when none
    declares a condition)."""
    active = set(active_names(config, space))
    return {k.name: to_param(k, config[k.name]) for k in space if k.name in active}


def _distributions(space: Sequence[Knob], params: Mapping[str, Any]) -> dict[str, BaseDistribution]:
    return {k.name: distribution(k) for k in space if k.name in params}


def build_study(
    space: Sequence[Knob],
    runs: Sequence[Run],
    *,
    seed: int,
    running: Sequence[Mapping[str, JsonValue]] = (),
) -> optuna.Study:
    """A fresh study of ``space`` holding every run in ``runs`` (in order) and the configs
    ``running``, its TPE sampler seeded with ``seed`` (see the module docstring). Runs whose
    config is not valid in ``space`` (a task whose space changed) are left out."""
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    with warnings.catch_warnings():  # group is experimental since Optuna 2.8
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        sampler = optuna.samplers.TPESampler(
            multivariate=True,
            group=conditional(space),
            seed=seed,
            n_startup_trials=STARTUP_TRIALS,
            constant_liar=True,
        )
    study = optuna.create_study(direction="maximize", sampler=sampler)
    for run in runs:
        if not is_valid(run.config, space):
            continue
        params = _params(space, run.config)
        dists = _distributions(space, params)
        if run.failed:
            trial = optuna.trial.create_trial(
                state=TrialState.FAIL, params=params, distributions=dists
            )
        else:
            trial = optuna.trial.create_trial(
                value=run.target,
                params=params,
                distributions=dists,
                constraints={CONSTRAINT: run.shortfall},
            )
        study.add_trial(trial)
    for config in running:
        if is_valid(config, space):
            params = _params(space, config)
            study.add_trial(
                optuna.trial.create_trial(
                    state=TrialState.RUNNING,
                    params=params,
                    distributions=_distributions(space, params),
                )
            )
    return study


def suggest(
    study: optuna.Study,
    space: Sequence[Knob],
    open_knobs: Collection[str],
    base: Mapping[str, JsonValue],
    tried: Collection[str],
    tries: int = TRIES,
) -> Config | None:
    """A config not in ``tried`` (:func:`config_key` keys): the knobs ``open_knobs`` drawn by
    the study's sampler, the others as in ``base``; None when ``tries`` draws found none (the
    direction cannot produce a new config: it is exhausted). Each draw is left in the study
    as a running trial, so the next draw avoids it. A knob ``base`` lacks (a config file that
    leaves it out, so the harness runs it at its default) is fixed at the knob's default."""
    if not any(k.name in open_knobs for k in space):
        return None
    fixed = {
        k.name: to_param(k, base.get(k.name, k.default)) for k in space if k.name not in open_knobs
    }
    base_sampler = study.sampler
    with warnings.catch_warnings():  # experimental since Optuna 2.4 and stable in use since
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        study.sampler = optuna.samplers.PartialFixedSampler(fixed, base_sampler)
    seen = set(tried)
    try:
        for _ in range(tries):
            config = _draw(study, space, base)
            key = config_key(config, space)
            if key not in seen:
                return config
            seen.add(key)
    finally:
        study.sampler = base_sampler
    return None


def _draw(study: optuna.Study, space: Sequence[Knob], base: Mapping[str, JsonValue]) -> Config:
    """One config asked of ``study``: every knob drawn at once in a space without conditions;
    define-by-run otherwise, a knob drawn only when it matters given the knobs before it."""
    if not conditional(space):
        trial = study.ask({k.name: distribution(k) for k in space})
        return {k.name: from_param(k, trial.params[k.name]) for k in space}
    return draw_conditional(study.ask(), space, base)


def draw_conditional(
    trial: optuna.Trial, space: Sequence[Knob], base: Mapping[str, JsonValue]
) -> Config:
    """A config of ``space`` drawn define-by-run in ``trial``: knobs in
    :func:`~rsilab.tasks.deciding_first` order, each drawn only when it matters given the
    values before it; a knob not drawn keeps ``base``'s value (its default where ``base``
    lacks it)."""
    config: Config = {k.name: base.get(k.name, k.default) for k in space}
    for knob in deciding_first(space):
        if knob.name in active_names(config, space):
            config[knob.name] = from_param(knob, _suggest(trial, knob))
    return {k.name: config[k.name] for k in space}


def _suggest(trial: optuna.Trial, knob: Knob) -> Any:
    """``knob``'s parameter drawn in ``trial`` from :func:`distribution`'s distribution."""
    dist = distribution(knob)
    if isinstance(dist, FloatDistribution):
        return trial.suggest_float(knob.name, dist.low, dist.high, log=dist.log)
    if isinstance(dist, IntDistribution):
        return trial.suggest_int(knob.name, dist.low, dist.high, log=dist.log)
    assert isinstance(dist, CategoricalDistribution)  # distribution() makes only these three
    return trial.suggest_categorical(knob.name, dist.choices)


def importance(study: optuna.Study, space: Sequence[Knob]) -> list[str]:
    """The knobs of ``space``, most important first by Optuna's PED-ANOVA evaluator over the
    study's complete trials (declaration order when too few trials or no spread to tell)."""
    names = [k.name for k in space]
    complete = study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
    if len(complete) < 4 or len({t.value for t in complete}) < 2:
        return names
    try:
        with warnings.catch_warnings():  # PED-ANOVA is marked experimental
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            # a conditional knob acts in few trials early on; the evaluator warns that its
            # ranking is rough, which a ranking that only orders directions can take
            warnings.filterwarnings("ignore", message="Some regimes", category=UserWarning)
            evaluator = optuna.importance.PedAnovaImportanceEvaluator()
            ranked = optuna.importance.get_param_importances(study, evaluator=evaluator)
    except (RuntimeError, ValueError):  # a degenerate study: no ranking to trust
        return names
    order = {name: i for i, name in enumerate(ranked)}
    return sorted(names, key=lambda n: (order.get(n, len(order)), names.index(n)))
