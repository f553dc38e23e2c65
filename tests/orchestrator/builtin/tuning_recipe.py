"""A seeded *recipe* tuning family (not a benchmark task): a gate that starts closed.

The shape of many real recipes: the starting config does not train (``epochs`` 0), most knobs
(``lr``, ``mix``, ``rank``, ``keep``) act only when it does (declared with ``when``), and a few
knobs act either way with small effects (``shots``, ``length``, ``style``). Training well beats
the start by far; training badly falls below it, and training moves a non-target ``keep``
benchmark away from the start unless the ``keep`` knob holds it. :func:`quality` and
:func:`damage` compute the harness's own formulas here, so a test or a measurement scores any
config independently of the policy.
"""

from __future__ import annotations

import json
import math
import random
import uuid
from pathlib import Path

from pydantic import JsonValue

from rsilab.records import DataTier
from rsilab.tasks import (
    Benchmark,
    Budget,
    FileSplits,
    Knob,
    KnobCondition,
    KnobType,
    Task,
    load_task,
)
from tests.orchestrator.builtin.tuning_tasks import _TRAIN

TIERS = ("train", "dev", "accept", "final")
KEEP_TOLERANCE = 0.05
START = 0.35
"""The untrained start's quality before its small knobs' effects."""

TRAINS = KnobCondition(knob="epochs", at_least=1)

_FORMULAS = """\
def quality(config, spec):
    small = 0.02 * (1 - abs(config["shots"] - spec["best_shots"]) / 4)
    small += 0.01 * (config["style"] == spec["best_style"])
    small -= 0.03 * (config["length"] < spec["cut"])
    if config["epochs"] < 1:
        return spec["start"] + small
    u = [
        (math.log10(config["lr"]) + 4) / 4,
        config["mix"],
        config["keep"],
        (config["epochs"] - 1) / 9,
    ]
    bowl = sum(w * (a - b) ** 2 for w, a, b in zip(spec["weights"], u, spec["optimum"]))
    rank = 1.0 if config["rank"] == spec["best_rank"] else 0.9
    return rank * math.exp(-bowl) + small


def damage(config, spec):
    if config["epochs"] < 1:
        return 0.0
    push = (math.log10(config["lr"]) + 4) / 4 * config["epochs"] / 10
    return spec["harm"] * push * (1.0 - config["keep"])
"""

_PREDICT = """\
import argparse, json, math, random, sys
from pathlib import Path
p = argparse.ArgumentParser()
p.add_argument("--model")
p.add_argument("--seed", type=int, default=0)
args = p.parse_args()
model = json.loads(Path(args.model).read_text())
spec = json.loads((Path(__file__).parent / "spec.json").read_text())
FORMULAS
q = quality(model["config"], spec)
wobble = random.Random(model["seed"]).gauss(0.0, spec["noise"])
for line in sys.stdin:
    if line.strip():
        item = json.loads(line)
        x = item["input"]["x"]
        if item["input"].get("probe") == "keep":
            jitter = random.Random(f"{model['seed']}:{x}").uniform(0.0, 0.01)
            out = x + damage(model["config"], spec) + jitter
            print(json.dumps({"id": item["id"], "output": out}))
        else:
            err = max(0.0, 1.0 - q + wobble)
            print(json.dumps({"id": item["id"], "output": x * (1.0 + err)}))
"""

_FORMULA: dict[str, object] = {"math": math}
exec(_FORMULAS, _FORMULA)  # the very formulas the harness runs, for scoring configs here


def spec_for(seed: int) -> dict[str, JsonValue]:
    """The hidden parameters of family seed ``seed``."""
    rng = random.Random(f"tuning-recipe:{seed}")
    return {
        "start": START,
        "optimum": [rng.uniform(0.2, 0.8), rng.uniform(0.3, 1.0), rng.uniform(0.3, 0.9), 0.0],
        "weights": [rng.uniform(6.0, 14.0), rng.uniform(1.0, 3.0), rng.uniform(0.5, 2.0), 1.0],
        "best_rank": rng.choice([4, 8, 16]),
        "best_shots": rng.randint(0, 4),
        "best_style": rng.choice(["plain", "chat"]),
        "cut": rng.randint(8, 24),
        "harm": rng.uniform(0.1, 0.25),
        "noise": 0.01,
    }


def space() -> list[Knob]:
    """The family's knobs (the same for every seed; the optimum moves)."""
    return [
        Knob(name="epochs", type=KnobType.INT, low=0, high=10, default=0),
        Knob(
            name="lr",
            type=KnobType.FLOAT,
            low=1e-4,
            high=1.0,
            log=True,
            default=0.1,
            when=TRAINS,
            weakest=1e-4,
        ),
        Knob(name="mix", type=KnobType.FLOAT, low=0.0, high=1.0, default=0.5, when=TRAINS),
        Knob(name="rank", type=KnobType.CHOICE, choices=[0, 4, 8, 16], default=0, when=TRAINS),
        Knob(name="keep", type=KnobType.FLOAT, low=0.0, high=1.0, default=0.0, when=TRAINS),
        Knob(name="shots", type=KnobType.INT, low=0, high=4, default=2),
        Knob(name="length", type=KnobType.INT, low=4, high=64, default=48),
        Knob(name="style", type=KnobType.CHOICE, choices=["plain", "chat"], default="plain"),
    ]


def quality(config: dict[str, JsonValue], spec: dict[str, JsonValue]) -> float:
    """The config's quality (the harness's own formula)."""
    formula = _FORMULA["quality"]
    assert callable(formula)
    return float(formula(config, spec))


def damage(config: dict[str, JsonValue], spec: dict[str, JsonValue]) -> float:
    """The config's ``keep`` error above the start's (the harness's own formula)."""
    formula = _FORMULA["damage"]
    assert callable(formula)
    return float(formula(config, spec))


def recipe_task(folder: Path, seed: int) -> Task:
    """Write the family's task of ``seed`` under ``folder`` and load it from its file."""
    harness = folder / "harness"
    harness.mkdir(parents=True)
    (harness / "harness.toml").write_text(
        '[harness]\nname = "recipe"\ntrain = "python train.py"\npredict = "python predict.py"\n'
        'config = "config.json"\nmodel = "json"\n'
    )
    (harness / "train.py").write_text(_TRAIN)
    (harness / "predict.py").write_text(_PREDICT.replace("FORMULAS", _FORMULAS))
    (harness / "spec.json").write_text(json.dumps(spec_for(seed)))
    (harness / "config.json").write_text(json.dumps({k.name: k.default for k in space()}))
    for t, tier in enumerate(TIERS):
        rows = [
            {"id": f"s-{tier}-{i}", "input": {"x": x}, "target": x}
            for i in range(16)
            for x in [((i * 5 + t * 3) % 16 + 1) / 16]
        ]
        (folder / f"{tier}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
        keep = [
            {"id": f"k-{tier}-{i}", "input": {"x": x, "probe": "keep"}, "target": x}
            for i in range(8)
            for x in [1.0 + i / 8]
        ]
        (folder / f"keep_{tier}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in keep))
    name = f"recipe_{uuid.uuid4().hex[:10]}"
    (folder / "task.py").write_text(
        "from pathlib import Path\nfrom rsilab import task\n"
        "from tests.orchestrator.builtin.tuning_recipe import build\n\n\n"
        f"@task\ndef {name}():\n    return build(Path(__file__).parent, {name!r})\n"
    )
    return load_task(folder / "task.py")


def build(folder: Path, name: str) -> Task:
    """The task :func:`recipe_task` wrote under ``folder``."""
    files = {DataTier(t): folder / f"{t}.jsonl" for t in TIERS}
    keep = {DataTier(t): folder / f"keep_{t}.jsonl" for t in TIERS}
    return Task(
        name=name,
        goal="Lower the squared error.",
        harness=folder / "harness",
        benchmarks=[
            Benchmark(
                name="err",
                scorer="squared_error",
                target=True,
                higher_is_better=False,
                samples=FileSplits(files=files),
            ),
            Benchmark(
                name="keep",
                scorer="absolute_error",
                higher_is_better=False,
                tolerance=KEEP_TOLERANCE,
                samples=FileSplits(files=keep),
            ),
        ],
        budget=Budget(experiments=12),
        search_space=space(),
    )
