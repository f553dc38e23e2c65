"""A seeded *data-mixture* tuning family (not a benchmark task): training the target costs the
non-targets unless the mixture holds them.

The shape of supervised fine-tuning on one benchmark among several: the start does not train
(``epochs`` 0); when it trains, the target gains most from training on its own data
(``mix_target``), and each of three non-targets ``a``, ``b`` and ``c`` loses in proportion to
how hard it trains (``lr``, ``epochs``) unless its own data is in the mixture (``mix_a`` ...):
its loss shrinks exponentially with its data's weight relative to the target's, and ``replay``
shrinks every loss a little. Holding a non-target costs target gain (a smaller target share),
so the best feasible config balances the two. Most configs that train hard on the target
alone are infeasible; a few knobs (``shots``, ``length``, ``style``, ``decoding`` with its
``temperature``) act either way with small effects, as prompt and decoding knobs do.
Each non-target's damage wobbles with the job's seed, as a trained model's scores do.

Each knob that holds a non-target says so (:attr:`rsilab.tasks.Knob.holds`).
:func:`quality` and :func:`damage` compute the harness's own formulas here, so a measurement
scores any config independently of the policy.
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
from tests.orchestrator.builtin.tuning_recipe import TIERS, write_harness

NON_TARGETS = ("a", "b", "c")
TOLERANCE = 0.05
"""Each non-target's tolerance (absolute error units)."""
START = 0.35
"""The untrained start's quality before its small knobs' effects."""

TRAINS = KnobCondition(knob="epochs", at_least=1)
SAMPLES = KnobCondition(knob="decoding", one_of=["sample"])

_FORMULAS = """\
def small_effects(config, spec):
    small = 0.02 * (1 - abs(config["shots"] - spec["best_shots"]) / 4)
    small += 0.01 * (config["style"] == spec["best_style"])
    small -= 0.03 * (config["length"] < spec["cut"])
    if config["decoding"] == "sample":
        small -= 0.02 * abs(config["temperature"] - 0.7)
    return small


def push(config):
    return (math.log10(config["lr"]) + 4) / 4 * config["epochs"] / 10


def quality(config, spec):
    small = small_effects(config, spec)
    if config["epochs"] < 1:
        return spec["start"] + small
    u = [(math.log10(config["lr"]) + 4) / 4, (config["epochs"] - 1) / 9]
    bowl = sum(w * (a - b) ** 2 for w, a, b in zip(spec["weights"], u, spec["optimum"]))
    mixes = config["mix_target"] + sum(config["mix_" + n] for n in spec["non_targets"])
    share = config["mix_target"] / mixes if mixes > 0 else 0.0
    focus = 0.55 + 0.45 * min(1.0, share / spec["share_needed"])
    rank = 1.0 if config["rank"] == spec["best_rank"] else 0.9
    return 0.15 + rank * focus * spec["reach"] * math.exp(-bowl) + small


def damage(config, spec, name):
    if config["epochs"] < 1:
        return 0.0
    held = config["mix_" + name] / max(config["mix_target"], 0.05)
    loss = spec["harm"][name] * push(config) * math.exp(-spec["hold"][name] * held)
    return loss * (1.0 - 0.4 * config["replay"])
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
losses = {}
for name in spec["non_targets"]:
    d = damage(model["config"], spec, name)
    shake = random.Random(f"{model['seed']}:{name}").gauss(0.0, spec["damage_noise"]) if d else 0.0
    losses[name] = max(0.0, d + shake)
for line in sys.stdin:
    if line.strip():
        item = json.loads(line)
        x = item["input"]["x"]
        probe = item["input"].get("probe")
        if probe:
            jitter = random.Random(f"{model['seed']}:{x}").uniform(0.0, 0.005)
            print(json.dumps({"id": item["id"], "output": x + losses[probe] + jitter}))
        else:
            err = max(0.0, 1.0 - q + wobble)
            print(json.dumps({"id": item["id"], "output": x * (1.0 + err)}))
"""

_FORMULA: dict[str, object] = {"math": math}
exec(_FORMULAS, _FORMULA)  # the very formulas the harness runs, for scoring configs here


def spec_for(seed: int) -> dict[str, JsonValue]:
    """The hidden parameters of family seed ``seed``."""
    rng = random.Random(f"tuning-mixture:{seed}")
    return {
        "start": START,
        "non_targets": list(NON_TARGETS),
        "optimum": [rng.uniform(0.3, 0.8), rng.uniform(0.2, 0.8)],
        "weights": [rng.uniform(6.0, 14.0), rng.uniform(1.0, 3.0)],
        "reach": rng.uniform(0.7, 0.85),
        "share_needed": rng.uniform(0.4, 0.8),
        "harm": {n: rng.uniform(0.2, 0.6) for n in NON_TARGETS},
        "hold": {n: rng.uniform(0.7, 2.5) for n in NON_TARGETS},
        "best_rank": rng.choice([4, 8, 16]),
        "best_shots": rng.randint(0, 4),
        "best_style": rng.choice(["plain", "chat"]),
        "cut": rng.randint(8, 24),
        "noise": 0.01,
        "damage_noise": 0.008,
    }


def space(holds: bool = True) -> list[Knob]:
    """The family's knobs (the same for every seed; the optimum moves). ``holds``: the mixture
    knobs declare the non-targets they hold (False: the same space without the declarations)."""

    def held(*names: str) -> list[str]:
        return list(names) if holds else []

    return [
        Knob(name="epochs", type=KnobType.INT, low=0, high=10, default=0),
        Knob(
            name="lr", type=KnobType.FLOAT, low=1e-4, high=1.0, log=True, default=0.01, when=TRAINS
        ),
        Knob(name="rank", type=KnobType.CHOICE, choices=[0, 4, 8, 16], default=0, when=TRAINS),
        Knob(name="mix_target", type=KnobType.FLOAT, low=0.0, high=3.0, default=1.0, when=TRAINS),
        *(
            Knob(
                name=f"mix_{n}",
                type=KnobType.FLOAT,
                low=0.0,
                high=3.0,
                default=1.0,
                when=TRAINS,
                holds=held(n),
            )
            for n in NON_TARGETS
        ),
        Knob(
            name="replay",
            type=KnobType.FLOAT,
            low=0.0,
            high=1.0,
            default=0.0,
            when=TRAINS,
            holds=held(*NON_TARGETS),
        ),
        Knob(name="shots", type=KnobType.INT, low=0, high=4, default=2),
        Knob(name="length", type=KnobType.INT, low=4, high=64, default=48),
        Knob(name="style", type=KnobType.CHOICE, choices=["plain", "chat"], default="plain"),
        Knob(name="decoding", type=KnobType.CHOICE, choices=["greedy", "sample"], default="greedy"),
        Knob(
            name="temperature",
            type=KnobType.FLOAT,
            low=0.1,
            high=1.5,
            default=0.7,
            when=SAMPLES,
        ),
    ]


def quality(config: dict[str, JsonValue], spec: dict[str, JsonValue]) -> float:
    """The config's target quality (the harness's own formula)."""
    formula = _FORMULA["quality"]
    assert callable(formula)
    return float(formula(config, spec))


def damage(config: dict[str, JsonValue], spec: dict[str, JsonValue], name: str) -> float:
    """The config's error on non-target ``name`` above the start's, before the seed's wobble
    (the harness's own formula)."""
    formula = _FORMULA["damage"]
    assert callable(formula)
    return float(formula(config, spec, name))


def worst_damage(config: dict[str, JsonValue], spec: dict[str, JsonValue]) -> float:
    """The largest of the config's non-target damages."""
    return max(damage(config, spec, n) for n in NON_TARGETS)


def mixture_task(folder: Path, seed: int, holds: bool = True) -> Task:
    """Write the family's task of ``seed`` under ``folder`` and load it from its file."""
    predict = _PREDICT.replace("FORMULAS", _FORMULAS)
    write_harness(folder, "mixture", predict, spec_for(seed), space(holds))
    for tier in TIERS:
        for n in NON_TARGETS:
            probe = [
                {"id": f"{n}-{tier}-{i}", "input": {"x": x, "probe": n}, "target": x}
                for i in range(8)
                for x in [1.0 + i / 8]
            ]
            text = "".join(json.dumps(r) + "\n" for r in probe)
            (folder / f"{n}_{tier}.jsonl").write_text(text)
    name = f"mixture_{uuid.uuid4().hex[:10]}"
    (folder / "task.py").write_text(
        "from pathlib import Path\nfrom rsilab import task\n"
        "from tests.orchestrator.builtin.tuning_mixture import build\n\n\n"
        f"@task\ndef {name}():\n    return build(Path(__file__).parent, {name!r}, {holds!r})\n"
    )
    return load_task(folder / "task.py")


def build(folder: Path, name: str, holds: bool = True) -> Task:
    """The task :func:`mixture_task` wrote under ``folder``."""
    files = {DataTier(t): folder / f"{t}.jsonl" for t in TIERS}
    return Task(
        name=name,
        goal="Lower the squared error without raising the other benchmarks' errors.",
        harness=folder / "harness",
        benchmarks=[
            Benchmark(
                name="err",
                scorer="squared_error",
                target=True,
                higher_is_better=False,
                samples=FileSplits(files=files),
            ),
            *(
                Benchmark(
                    name=n,
                    scorer="absolute_error",
                    higher_is_better=False,
                    tolerance=TOLERANCE,
                    samples=FileSplits(
                        files={DataTier(t): folder / f"{n}_{t}.jsonl" for t in TIERS}
                    ),
                )
                for n in NON_TARGETS
            ),
        ],
        budget=Budget(experiments=12),
        search_space=space(holds),
    )


def random_configs(seed: int, count: int) -> list[dict[str, JsonValue]]:
    """``count`` configs drawn uniformly from the space (log knobs in log), for a score-level
    picture of the family: how many train, how many are feasible."""
    rng = random.Random(f"mixture-draws:{seed}")
    out: list[dict[str, JsonValue]] = []
    for _ in range(count):
        config: dict[str, JsonValue] = {}
        for k in space():
            if k.type is KnobType.CHOICE:
                config[k.name] = rng.choice(k.choices)
            elif k.log:
                assert k.low is not None and k.high is not None
                config[k.name] = 10 ** rng.uniform(math.log10(k.low), math.log10(k.high))
            else:
                assert k.low is not None and k.high is not None
                value = rng.uniform(k.low, k.high)
                config[k.name] = round(value) if k.type is KnobType.INT else value
        out.append(config)
    return out
