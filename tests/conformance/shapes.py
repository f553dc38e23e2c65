"""Small tasks of every shape issue 22 names, written to disk from six two-valued factors.

One harness serves every shape: a knob ``w`` in [0, 1] (starting at 0.2) and samples
``{"kind": K, "x": x}``; predict answers ``w * x`` for kind ``reg``, ``int(x < w)`` for kind
``cls``, and a ``w``-free answer for the non-target kinds ``flag`` (``int(x > 0.5)``) and
``half`` (``0.5 * x``). The targets make ``w = 0.7`` the best value for every target scorer, so
the formulas here (:func:`expected_score`) give any config's score without running anything.
Each tier holds 20 values of ``x`` of its own (no input is in two tiers, as ``task check``
requires): :func:`tier_xs`. Experiments take milliseconds.
"""

from __future__ import annotations

import itertools
import json
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

TIERS = ("train", "dev", "accept", "final")
START_W = 0.2
BEST_W = 0.7
FACTORS = ("python", "lower", "predict_only", "custom_config", "mixed", "custom_scorer")
"""The six factors, each False (0) or True (1): a ``@task`` Python file instead of a
``task.toml``; a lower-is-better target; no train step; a config file named ``params.json``
instead of ``config.json``; a second, non-target benchmark of the other direction; a scorer
from the task's own files instead of a built-in one."""

_COLUMNS = list(itertools.combinations(range(1, 6), 3))[: len(FACTORS)]
ROWS: list[tuple[int, ...]] = [tuple(int(r in column) for column in _COLUMNS) for r in range(6)]
"""The covering array: row 0 all zeros; row r (1..5) has factor j set when r is in the j-th
three-element subset of {1..5}. Two distinct three-element subsets of a five-element set meet
and each has an element the other lacks, so every pair of columns shows 00, 11, 10 and 01."""


@dataclass(frozen=True)
class Shape:
    """One task's factors (see :data:`FACTORS`)."""

    python: bool
    lower: bool
    predict_only: bool
    custom_config: bool
    mixed: bool
    custom_scorer: bool

    @classmethod
    def of_row(cls, row: tuple[int, ...]) -> Shape:
        return cls(*(bool(v) for v in row))

    @property
    def config_name(self) -> str:
        return "params.json" if self.custom_config else "config.json"

    @property
    def target_kind(self) -> str:
        """The sample kind the target benchmark scores: ``cls`` for the built-in
        higher-is-better scorer (accuracy), ``reg`` for the others."""
        return "cls" if not self.lower and not self.custom_scorer else "reg"

    @property
    def other_kind(self) -> str:
        """The non-target benchmark's kind: scored the other way from the target."""
        return "flag" if self.lower else "half"


# --- the formulas --------------------------------------------------------------------------


def tier_xs(tier: str) -> list[float]:
    """The values of x in ``tier``, in file order: (4m + t + 0.5) / 80 for m = 0..19 shuffled,
    t the tier's index, so the four tiers interleave and never share a value."""
    t = TIERS.index(tier)
    return [((i * 7) % 20 * 4 + t + 0.5) / 80 for i in range(20)]


def expected_score(shape: Shape, w: float, tier: str) -> float:
    """The target benchmark's mean score at knob ``w`` on ``tier``, from the formulas."""
    xs = tier_xs(tier)
    if shape.target_kind == "cls":
        return sum((x < w) == (x < BEST_W) for x in xs) / len(xs)
    errors = [abs(w * x - BEST_W * x) for x in xs]
    if not shape.lower:  # the task's own scorer: closeness, 1 - |error|
        return sum(1 - e for e in errors) / len(xs)
    if shape.custom_scorer:  # the task's own scorer: absolute error
        return sum(errors) / len(xs)
    return sum(e * e for e in errors) / len(xs)  # squared_error


# --- the files -----------------------------------------------------------------------------

_TRAIN = """\
import argparse, json
from pathlib import Path
parser = argparse.ArgumentParser()
parser.add_argument("--data", required=True)
parser.add_argument("--model-in")
parser.add_argument("--model-out", required=True)
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--config", required=True)
args = parser.parse_args()
config = json.loads(Path(args.config).read_text())
Path(args.model_out).parent.mkdir(parents=True, exist_ok=True)
Path(args.model_out).write_text(json.dumps({"w": config["w"]}))
"""

_PREDICT = """\
import argparse, json, sys
from pathlib import Path
parser = argparse.ArgumentParser()
parser.add_argument("--model")
parser.add_argument("--seed", type=int, default=0)
args = parser.parse_args()
source = Path(args.model) if args.model else Path(CONFIG)
w = json.loads(source.read_text())["w"]
answers = {
    "reg": lambda x: w * x,
    "cls": lambda x: int(x < w),
    "flag": lambda x: int(x > 0.5),
    "half": lambda x: 0.5 * x,
}
for line in sys.stdin:
    if line.strip():
        item = json.loads(line)
        given = item["input"]
        print(json.dumps({"id": item["id"], "output": answers[given["kind"]](given["x"])}))
"""

_TARGETS: dict[str, Callable[[float], float | int]] = {
    "reg": lambda x: BEST_W * x,
    "cls": lambda x: int(x < BEST_W),
    "flag": lambda x: int(x > 0.4),  # the answer int(x > 0.5) is right on 18 of 20
    "half": lambda x: 0.6 * x,  # the answer 0.5 * x is off by 0.1 * x
}

_SCORING = """\
def closeness(sample, output):
    return 1.0 - abs(float(output) - float(sample.target))


def abs_error(sample, output):
    return abs(float(output) - float(sample.target))
"""


def write_task(folder: Path, shape: Shape, tag: str) -> Path:
    """The task of ``shape`` (named ``conf_<tag>_<random>``) under ``folder``: its harness,
    data and task file; the path to give ``rsilab`` (a ``task.toml`` or a ``.py``)."""
    name = f"conf_{tag}_{uuid.uuid4().hex[:8]}"
    _write_harness(folder / "harness", shape)
    kinds = [shape.target_kind] + ([shape.other_kind] if shape.mixed else [])
    for kind in kinds:
        _write_splits(folder / "data" / kind, kind)
    if shape.custom_scorer:
        (folder / "scoring.py").write_text(_SCORING)
    if shape.python:
        path = folder / "task_def.py"
        path.write_text(_python_task(shape, name))
    else:
        path = folder / "task.toml"
        path.write_text(_toml_task(shape, name))
    return path


def _write_harness(harness: Path, shape: Shape) -> None:
    harness.mkdir(parents=True)
    lines = ["[harness]", 'name = "knob"']
    if not shape.predict_only:
        lines.append('train = "python train.py"')
        (harness / "train.py").write_text(_TRAIN)
    model = "none" if shape.predict_only else "json"
    lines += ['predict = "python predict.py"', f'config = "{shape.config_name}"']
    lines.append(f'model = "{model}"')
    (harness / "harness.toml").write_text("\n".join(lines) + "\n")
    (harness / "predict.py").write_text(f"CONFIG = {shape.config_name!r}\n" + _PREDICT)
    (harness / shape.config_name).write_text(json.dumps({"w": START_W}))


def _write_splits(folder: Path, kind: str) -> None:
    folder.mkdir(parents=True)
    target = _TARGETS[kind]
    for tier in TIERS:
        rows = []
        for i, x in enumerate(tier_xs(tier)):
            given = {"kind": kind, "x": x}
            rows.append({"id": f"{kind}-{tier}-{i}", "input": given, "target": target(x)})
        (folder / f"{tier}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))


def _target_scorer(shape: Shape) -> tuple[str, bool]:
    """The target's scorer as the task file names it (a built-in name, or FILE.py:FN), and
    its direction."""
    if shape.custom_scorer:
        return ("scoring.py:abs_error", False) if shape.lower else ("scoring.py:closeness", True)
    return ("squared_error", False) if shape.lower else ("accuracy", True)


def _other_scorer(shape: Shape) -> str:
    """The non-target's built-in scorer: the other direction from the target."""
    return "accuracy" if shape.lower else "squared_error"


def _toml_task(shape: Shape, name: str) -> str:
    scorer, higher = _target_scorer(shape)
    parts = [
        f'name = "{name}"',
        'goal = "Move the target score the right way."',
        'harness = "harness"',
        'budget = "experiments=5,wall=5m,tokens=10k"',
        "",
        "[[benchmarks]]",
        'name = "target"',
        f'scorer = "{scorer}"',
        "target = true",
    ]
    if shape.custom_scorer:
        parts.append(f"higher_is_better = {str(higher).lower()}")
    parts.append(_toml_splits(shape.target_kind))
    if shape.mixed:
        parts += [
            "",
            "[[benchmarks]]",
            'name = "other"',
            f'scorer = "{_other_scorer(shape)}"',
            "tolerance = 0.05",
            _toml_splits(shape.other_kind),
        ]
    parts += [
        "",
        "[[search_space]]",
        'name = "w"',
        'type = "float"',
        "low = 0.0",
        "high = 1.0",
        f"default = {START_W}",
    ]
    return "\n".join(parts) + "\n"


def _toml_splits(kind: str) -> str:
    files = ", ".join(f'{t} = "data/{kind}/{t}.jsonl"' for t in TIERS)
    return f"splits = {{ {files} }}"


def _python_task(shape: Shape, name: str) -> str:
    scorer, higher = _target_scorer(shape)
    scorer_setup = ""
    if shape.custom_scorer:  # a Python task registers its own scorer, from its own file
        fn = scorer.split(":")[1]
        scorer = f"{name}_{fn}"
        scorer_setup = (
            "    spec = importlib.util.spec_from_file_location("
            f"{name + '_scoring'!r}, HERE / 'scoring.py')\n"
            "    module = importlib.util.module_from_spec(spec)\n"
            "    spec.loader.exec_module(module)\n"
            f"    register_scorer({scorer!r}, higher_is_better={higher}, replace=True)(\n"
            f"        lambda sample, output: Scored(sample.id, module.{fn}(sample, output))\n"
            "    )\n"
        )
    benchmarks = [
        f"Benchmark(name='target', scorer={scorer!r}, target=True, "
        f"higher_is_better={higher}, samples=files({shape.target_kind!r}))"
    ]
    if shape.mixed:
        benchmarks.append(
            f"Benchmark(name='other', scorer={_other_scorer(shape)!r}, tolerance=0.05, "
            f"samples=files({shape.other_kind!r}))"
        )
    listed = ",\n            ".join(benchmarks)
    return f"""\
import importlib.util
from pathlib import Path

from rsilab import Task, task
from rsilab.tasks import Benchmark, FileSplits, Knob, KnobType, Scored, register_scorer

HERE = Path(__file__).parent


def files(kind):
    tiers = ("train", "dev", "accept", "final")
    return FileSplits(files={{t: HERE / "data" / kind / f"{{t}}.jsonl" for t in tiers}})


@task
def {name}() -> Task:
{scorer_setup}    return Task(
        name={name!r},
        goal="Move the target score the right way.",
        harness=HERE / "harness",
        budget="experiments=5,wall=5m,tokens=10k",
        benchmarks=[
            {listed},
        ],
        search_space=[Knob(name="w", type=KnobType.FLOAT, low=0.0, high=1.0, default={START_W})],
    )
"""
