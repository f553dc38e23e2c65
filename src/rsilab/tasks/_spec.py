"""The task spec: what to improve and how it is judged.

A :class:`Task` names a harness folder (the initial system, see ``rsilab.tasks._harness``), its
benchmarks (each a scorer over samples in four tiers), the setting, goal and budget, a declared
search space, the host files its data came from (hidden from every sandbox) and its traps.
Public names here are stable: other modules and built-in tasks build on them.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Sequence
from enum import StrEnum
from pathlib import Path

from pydantic import Field, JsonValue, field_validator, model_validator

from rsilab import stats
from rsilab.records import Model, TaskRef
from rsilab.sandbox.base import Limits
from rsilab.sandbox.runtime import Runtime, require_task_runtime, task_runtime
from rsilab.tasks._budget import Budget
from rsilab.tasks._conditions import check_conditions
from rsilab.tasks._limits import EXPERIMENT_LIMITS, TaskLimits
from rsilab.tasks._origin import anchored, anchored_source, command_argument
from rsilab.tasks._samples import SampleSource
from rsilab.tasks._scorers import get_scorer, scorer_names
from rsilab.tasks._variants import HEAD, VARIANT_KNOB, CodeVariant, check_variants

_NAME_PATTERN = r"^[a-z][a-z0-9_.-]{0,63}$"


class Setting(StrEnum):
    """How much guidance the improver gets (RSI-Env's three settings)."""

    OPEN_GENERAL = "open-general"
    CAPABILITY_DIRECTED = "capability-directed"
    BENCHMARK_GUIDED = "benchmark-guided"


class Benchmark(Model):
    """A scorer over samples in four tiers (train, dev, accept, final)."""

    name: str = Field(pattern=_NAME_PATTERN, description="Unique within the task.")
    description: str = Field(default="", description="What it measures.")
    scorer: str = Field(description="Name of a registered scorer (see rsilab.tasks.scorer_names).")
    target: bool = Field(default=False, description="True: the benchmark to improve.")
    tolerance: float = Field(
        default=0.0,
        ge=0,
        description="Largest regression (score units) allowed on a non-target.",
    )
    higher_is_better: bool = Field(
        default=True,
        description="Direction of improvement. Omitted: the scorer's own direction; given, it "
        "must agree with the scorer's (a scorer from a file takes it from here).",
    )
    samples: SampleSource = Field(description="Where the samples of every tier come from.")

    def oriented(self, score: float) -> float:
        """``score`` turned so that higher is better (negated when lower is better); see
        :func:`rsilab.stats.oriented`."""
        return stats.oriented(score, self.higher_is_better)

    def better(self, a: float, b: float) -> bool:
        """True when score ``a`` is strictly better than ``b`` on this benchmark."""
        return stats.better(a, b, higher_is_better=self.higher_is_better)

    def best(self, scores: Sequence[float]) -> float:
        """The best of ``scores`` on this benchmark; ``ValueError`` when there is none."""
        return stats.best_of(scores, higher_is_better=self.higher_is_better)

    @field_validator("scorer")
    @classmethod
    def _known_scorer(cls, value: str) -> str:
        try:
            get_scorer(value)
        except KeyError:
            raise ValueError(
                f"unknown scorer {value!r}; known: {', '.join(scorer_names())}"
            ) from None
        return value

    @model_validator(mode="before")
    @classmethod
    def _direction_from_scorer(cls, data: object) -> object:
        """An omitted ``higher_is_better`` takes the scorer's natural direction."""
        if isinstance(data, dict) and "higher_is_better" not in data:
            try:
                higher = get_scorer(str(data.get("scorer"))).higher_is_better
            except KeyError:
                return data  # the scorer field's own validator reports the unknown name
            return {**data, "higher_is_better": higher}
        return data

    @model_validator(mode="after")
    def _direction_agrees(self) -> Benchmark:
        natural = get_scorer(self.scorer).higher_is_better
        if self.higher_is_better != natural:
            side = "higher" if natural else "lower"
            raise ValueError(
                f"higher_is_better = {str(self.higher_is_better).lower()} disagrees with scorer "
                f"{self.scorer!r}, for which {side} is better; omit higher_is_better to take "
                "the scorer's direction"
            )
        return self


class KnobType(StrEnum):
    """Kinds of search-space knobs."""

    FLOAT = "float"
    INT = "int"
    CHOICE = "choice"
    BOOL = "bool"


class KnobCondition(Model):
    """When a knob matters: another knob's value is one of ``one_of``, or at least
    ``at_least`` (exactly one of the two)."""

    knob: str = Field(min_length=1, description="The knob whose value decides.")
    one_of: list[JsonValue] | None = Field(
        default=None, description="The values (of a choice or bool knob) under which it matters."
    )
    at_least: float | None = Field(
        default=None, description="The least value (of a numeric knob) from which it matters."
    )

    @model_validator(mode="after")
    def _one_rule(self) -> KnobCondition:
        if (self.one_of is None) == (self.at_least is None):
            raise ValueError(f"a condition on {self.knob!r} needs exactly one of one_of, at_least")
        if self.one_of is not None and not self.one_of:
            raise ValueError(f"a condition on {self.knob!r}: one_of lists no value")
        return self

    def holds(self, value: JsonValue) -> bool:
        """Whether ``value`` (the deciding knob's) makes the conditioned knob matter."""
        if self.one_of is not None:
            return any(type(v) is type(value) and v == value for v in self.one_of)
        assert self.at_least is not None  # the validator ensures one rule
        if isinstance(value, bool) or not isinstance(value, int | float):
            return False
        return value >= self.at_least


class Knob(Model):
    """One tunable setting of the harness config, for search policies."""

    name: str = Field(min_length=1, description="Key in the harness config file.")
    type: KnobType = Field(description="float, int, choice or bool.")
    low: float | None = Field(default=None, description="Lower bound (float and int).")
    high: float | None = Field(default=None, description="Upper bound (float and int).")
    log: bool = Field(default=False, description="Search on a log scale (bounds must be > 0).")
    choices: list[JsonValue] = Field(default_factory=list, description="Values of a choice knob.")
    default: JsonValue = Field(description="The starting config's value.")
    when: KnobCondition | None = Field(
        default=None,
        description="Matters only under this condition on another knob (e.g. a learning rate "
        "only when the model trains: epochs at least 1); a config that differs from another "
        "only in knobs that do not matter is the same config to a search.",
    )
    weakest: float | None = Field(
        default=None,
        description="The value at which this knob changes the system least (a learning "
        "rate's low end: a training at it barely moves the model). Float and int knobs with "
        "`when` only: where the starting system leaves the knob inert and shortening a change "
        "changed nothing, tempering moves it toward this value on the way back to the start.",
    )

    @model_validator(mode="after")
    def _consistent(self) -> Knob:
        if self.type in (KnobType.FLOAT, KnobType.INT):
            self._check_range()
        elif self.type is KnobType.CHOICE:
            if not self.choices:
                raise ValueError(f"knob {self.name!r}: a choice knob needs choices")
            if self.default not in self.choices:
                raise ValueError(f"knob {self.name!r}: default {self.default!r} not in choices")
        elif not isinstance(self.default, bool):
            raise ValueError(f"knob {self.name!r}: a bool knob needs a true/false default")
        if self.weakest is not None:
            self._check_weakest(self.weakest)
        return self

    def misfit(self, value: JsonValue) -> str | None:
        """What keeps ``value`` from being a value of this knob (None when it is one): the
        declared type, range or choices, said the way ``task.toml`` declares them."""
        if self.type is KnobType.CHOICE:
            return None if value in self.choices else f"not one of {self.choices}"
        if self.type is KnobType.BOOL:
            return None if isinstance(value, bool) else "not true or false"
        whole = self.type is KnobType.INT
        if isinstance(value, bool) or not isinstance(value, int | float):
            return f"not {'an integer' if whole else 'a number'}"
        if whole and not float(value).is_integer():
            return "not an integer"
        assert self.low is not None and self.high is not None  # checked when declared
        if not self.low <= value <= self.high:
            return f"outside [{self.low:g}, {self.high:g}]"
        return None

    def _check_weakest(self, weakest: float) -> None:
        # only a knob that can be inert where another knob decides needs a weak end: elsewhere
        # the reference's own value is where tempering goes
        if self.type not in (KnobType.FLOAT, KnobType.INT):
            raise ValueError(f"knob {self.name!r}: weakest needs a float or int knob")
        if self.when is None:
            raise ValueError(
                f"knob {self.name!r}: weakest needs `when` (the reference's value is used "
                "where the knob always acts)"
            )
        assert self.low is not None and self.high is not None  # checked by _check_range
        if self.type is KnobType.INT and not float(weakest).is_integer():
            raise ValueError(f"knob {self.name!r}: weakest must be an integer")
        if not self.low <= weakest <= self.high:
            raise ValueError(
                f"knob {self.name!r}: weakest {weakest:g} outside [{self.low:g}, {self.high:g}]"
            )

    def _check_range(self) -> None:
        if self.low is None or self.high is None or not self.low < self.high:
            raise ValueError(f"knob {self.name!r}: needs low < high")
        if self.log and self.low <= 0:
            raise ValueError(f"knob {self.name!r}: a log-scale knob needs low > 0")
        default = self.default
        if isinstance(default, bool) or not isinstance(default, int | float):
            raise ValueError(f"knob {self.name!r}: default must be a number")
        if self.type is KnobType.INT and not float(default).is_integer():
            raise ValueError(f"knob {self.name!r}: default must be an integer")
        if not self.low <= default <= self.high:
            raise ValueError(
                f"knob {self.name!r}: default {default} outside [{self.low}, {self.high}]"
            )


class TrapKind(StrEnum):
    """Kinds of bait a task carries for the hacking suite."""

    LEAKED_TEST_DATA = "leaked_test_data"
    EDITABLE_EVALUATOR = "editable_evaluator"
    HARDCODED_OUTPUTS = "hardcoded_outputs"
    REBUILDABLE_DATA = "rebuildable_data"


class Trap(Model):
    """One bait an improver might take, and what catches it when it does."""

    kind: TrapKind = Field(description="What kind of bait.")
    path: str = Field(description="Where it is, relative to the workspace (or a host path).")
    description: str = Field(description="What it looks like to the improver.")
    detected_by: str = Field(description="Which guard or design decision catches its use.")
    planted: bool = Field(
        default=False,
        description="True: written into a trap-variant workspace by plant_traps (not shipped).",
    )


class Task(Model):
    """What to improve and how it is judged. See the module docstring."""

    name: str = Field(pattern=_NAME_PATTERN, description="Task name, e.g. 'digits'.")
    description: str = Field(default="", description="One paragraph on the task.")
    goal: str = Field(default="", description="Goal told to the improver (unless open-general).")
    setting: Setting = Field(default=Setting.BENCHMARK_GUIDED, description="Guidance level.")
    harness: Path = Field(description="Folder of the initial harness (with harness.toml).")
    benchmarks: list[Benchmark] = Field(min_length=1, description="Every benchmark, target first.")
    budget: Budget = Field(default_factory=Budget, description="What a campaign may spend.")
    search_space: list[Knob] = Field(default_factory=list, description="Declared config knobs.")
    data_sources: list[Path] = Field(
        default_factory=list, description="Host files the data came from; hidden from sandboxes."
    )
    traps: list[Trap] = Field(default_factory=list, description="Bait for the hacking suite.")
    predict_driver: str | None = Field(
        default=None,
        description="Task-owned driver run instead of the harness's predict (e.g. kernel timing).",
    )
    seconds_per_experiment: float | None = Field(
        default=None, description="Last measured train+predict seconds on dev (informative)."
    )
    runtime_requirements: list[str] = Field(
        default_factory=list,
        description="Extra pinned requirement lines (name==version) its jobs need: installed "
        "into a runtime of its own by `rsilab runtime install --task NAME`.",
    )
    runtime_build: Callable[[Path, Callable[[str], None]], dict[str, str]] | None = Field(
        default=None,
        exclude=True,
        description="Run once by `rsilab runtime install --task NAME` on the host, before the "
        "runtime is stamped: (runtime folder, log) -> what the stamp records (e.g. a base "
        "model it wrote there and its sha256).",
    )
    runtime_build_id: str = Field(
        default="",
        description="Names what runtime_build makes (a hash of its inputs and settings): a "
        "runtime built under another id is not installed, and `rsilab runtime install --task "
        "NAME` runs the build again (a changed corpus never leaves a stale base model).",
    )
    model: Path | None = Field(
        default=None,
        description="A local model of the user's (a Hugging Face model folder, or a file) "
        "that every job of the task sees read-only at this same path, so the harness's "
        "config can name it; a campaign records its content digest at the start and a "
        "resumed one refuses other bytes. A relative path in task.toml is read from the "
        "task file's folder.",
    )
    code_variants: list[CodeVariant] = Field(
        default_factory=list,
        description="Named code changes to the harness offered as ideas (rsilab.tasks."
        "CodeVariant); the built-in policy searches them like a choice knob.",
    )
    limits: TaskLimits = Field(
        default_factory=TaskLimits,
        description="Limits of an experiment's jobs in place of the defaults (wall and cpu in "
        "seconds; memory, output, file and disk in MiB; processes): `[limits]` in task.toml, "
        "e.g. `wall = 1800`. The controller's jobs scale with them (see docs/tasks.md).",
    )
    source: str = Field(default="", description="Where it was loaded from: builtin, a path.")

    @field_validator("search_space")
    @classmethod
    def _knobs_agree(cls, knobs: list[Knob]) -> list[Knob]:
        # a field check, so its faults are reported in the same pass as every other field's
        names = [k.name for k in knobs]
        repeated = sorted({n for n in names if names.count(n) > 1})
        if repeated:
            raise ValueError(f"knob names must be unique; repeated: {', '.join(repeated)}")
        check_conditions(knobs)
        return knobs

    @model_validator(mode="after")
    def _consistent(self) -> Task:
        names = [b.name for b in self.benchmarks]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"benchmark names must be unique; repeated: {', '.join(dupes)}")
        if not any(b.target for b in self.benchmarks):
            raise ValueError("at least one benchmark must have target = true")
        if self.setting is not Setting.OPEN_GENERAL and not self.goal.strip():
            raise ValueError(f"a {self.setting.value} task needs a goal")
        check_variants(self.code_variants, [k.name for k in self.search_space])
        if self.model is not None and not self.model.is_absolute():
            raise ValueError(f"model must be an absolute path, not {str(self.model)!r}")
        return self

    @property
    def targets(self) -> list[Benchmark]:
        """The target benchmarks."""
        return [b for b in self.benchmarks if b.target]

    def benchmark(self, name: str) -> Benchmark:
        """The benchmark called ``name``; KeyError listing the names."""
        for bench in self.benchmarks:
            if bench.name == name:
                return bench
        known = ", ".join(b.name for b in self.benchmarks)
        raise KeyError(f"task {self.name!r} has no benchmark {name!r}; it has: {known}")

    def variant_knob(self) -> Knob | None:
        """Its code variants as one choice knob (:data:`~rsilab.tasks.VARIANT_KNOB`: the head's
        code, or a variant's name), the way a search over them sees them; None without any."""
        if not self.code_variants:
            return None
        names = [HEAD, *(v.name for v in self.code_variants)]
        return Knob(name=VARIANT_KNOB, type=KnobType.CHOICE, choices=names, default=HEAD)

    def experiment_limits(self, base: Limits = EXPERIMENT_LIMITS) -> Limits:
        """The limits of its experiments' jobs: ``base`` with the task's ``[limits]``."""
        return self.limits.over(base)

    def controller_limits(self) -> Limits:
        """The limits of the controller's jobs for it: never below an experiment's (see
        :meth:`TaskLimits.controller`)."""
        return self.limits.controller()

    def default_config(self) -> dict[str, JsonValue]:
        """The search space's defaults, as a config mapping."""
        return {k.name: k.default for k in self.search_space}

    def digest(self) -> str:
        """sha256 of the spec's JSON (callables by name; paths as given)."""
        left_out = {"source", "seconds_per_experiment"}
        if not self.runtime_requirements:  # older specs had no such field: same digest
            left_out.add("runtime_requirements")
        if not self.code_variants:  # specs from before variants existed: the same digest
            left_out.add("code_variants")
        if not self.runtime_build_id:  # nor build ids
            left_out.add("runtime_build_id")
        if not self.limits.given():  # nor limits: a task that sets one has another digest
            left_out.add("limits")
        data = self.model_dump(mode="json", exclude=left_out)
        for knob in data.get("search_space", []):  # knobs from before conditions: same digest
            if knob.get("when") is None:
                knob.pop("when", None)
        text = json.dumps(data, sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(text.encode()).hexdigest()

    def build_id(self) -> str | None:
        """The identity of its runtime build step (:attr:`runtime_build_id`); None without
        one."""
        return self.runtime_build_id if self.runtime_build is not None else None

    def runtime(self) -> Runtime:
        """The runtime its jobs run in, installed or not: a venv of its own when it declares
        ``runtime_requirements`` (see :func:`rsilab.sandbox.runtime.task_runtime`), else the
        base runtime."""
        return task_runtime(self.runtime_requirements, build_id=self.build_id())

    def installed_runtime(self) -> Runtime:
        """:meth:`runtime`, checked to be installed (with its build step's files recorded).

        Raises:
            RuntimeMissingError: it is not; the hint names ``rsilab runtime install --task``.
        """
        return require_task_runtime(self.name, self.runtime_requirements, build_id=self.build_id())

    def own_runtime(self) -> Runtime | None:
        """:meth:`installed_runtime` for a task that declares a runtime of its own
        (requirements or a build step); None for a task of the base runtime.

        Raises:
            RuntimeMissingError: its own runtime is not installed.
        """
        own = bool(self.runtime_requirements) or self.runtime_build is not None
        return self.installed_runtime() if own else None

    def shown(self) -> tuple[Path, ...]:
        """The host paths its jobs see read-only where they are: its local :attr:`model`."""
        return (self.model,) if self.model is not None else ()

    @property
    def argument(self) -> str:
        """What names this task on a command line, for hints such as ``rsilab task check
        ARG``: its file (absolute) when it was loaded from one, else its name."""
        return command_argument(self.source, self.name)

    def ref(self) -> TaskRef:
        """A reference for records that :func:`rsilab.tasks.load_ref` loads again from any
        working directory: ``source`` is ``builtin``, an absolute ``task.toml`` path, an
        absolute ``file.py:NAME``, or (a task a module registered) what the registry says; a
        relative path is resolved against the current directory now. ``digest`` is the spec's
        with relative paths made absolute the same way (one file, one digest, wherever it was
        loaded from)."""
        source = anchored_source(self.source, self.name)
        digest = anchored(self).digest()
        # A scorer from the task's own file: its code is part of what the task is, so editing
        # it between a run and its resume is a changed task (the spec names only the file).
        files = sorted({get_scorer(b.scorer).source_sha256 for b in self.benchmarks} - {""})
        if files:
            digest = hashlib.sha256("|".join([digest, *files]).encode()).hexdigest()
        return TaskRef(name=self.name, source=source, digest=digest)
