"""A seeded family of generated tuning tasks with a known optimum (not a benchmark task).

``tuning_task(folder, seed)`` writes a tiny task of 4 knobs (a log-scale float, a float, an int
and a choice) whose dev squared error is ``(1 - q(config))`` times a per-sample scale, plus a
small seed-dependent wobble: ``q`` is a smooth bowl in the knobs' normalised coordinates
(with a coupling of the first two) times a factor for the choice, 1.0 at the optimum the seed
drew. :func:`quality` computes ``q`` here, independently of the policy, so a test can score
any config and run random search at the score level.
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

TIERS = ("train", "dev", "accept", "final")
CHOICES = ["a", "b", "c"]

_TRAIN = """\
import argparse, json
from pathlib import Path
p = argparse.ArgumentParser()
for a in ("--data", "--model-in", "--model-out", "--config"):
    p.add_argument(a)
p.add_argument("--seed", type=int, default=0)
args = p.parse_args()
config = json.loads(Path(args.config).read_text())
Path(args.model_out).parent.mkdir(parents=True, exist_ok=True)
Path(args.model_out).write_text(json.dumps({"config": config, "seed": args.seed}))
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
QUALITY
q = quality(model["config"], spec)
rng = random.Random(model["seed"])
wobble = rng.gauss(0.0, spec["noise"])
for line in sys.stdin:
    if line.strip():
        item = json.loads(line)
        x = item["input"]["x"]
        if item["input"].get("probe") == "keep":
            # keyed by the input, not the id: a harness sees ids blinded per lab
            jitter = random.Random(f"{model['seed']}:{x}").uniform(0.0, 0.01)
            out = x + damage(model["config"], spec) + jitter
            print(json.dumps({"id": item["id"], "output": out}))
        else:
            print(json.dumps({"id": item["id"], "output": x * (1.0 + max(0.0, 1.0 - q + wobble))}))
"""

_QUALITY = """\
def quality(config, spec):
    if spec.get("flat"):
        return 0.5
    u = []
    for name, low, high, log in spec["numeric"]:
        v = float(config[name])
        if log:
            v, low, high = math.log10(v), math.log10(low), math.log10(high)
        u.append((v - low) / (high - low))
    d = [ui - oi for ui, oi in zip(u, spec["optimum"])]
    if spec.get("gated") and config["kind"] == "a":
        d[0] = d[1] = 0.0  # gated family: lr and mix act only when kind is not "a"
    bowl = sum(w * di * di for w, di in zip(spec["weights"], d)) + spec["coupling"] * d[0] * d[1]
    factor = 1.0 if config["kind"] == spec["best_kind"] else 0.8
    return factor * math.exp(-bowl)


def damage(config, spec):
    u = []
    for name, low, high, log in spec["numeric"]:
        v, home = float(config[name]), float(spec["home"][name])
        if log:
            v, home, low, high = (math.log10(x) for x in (v, home, low, high))
        u.append(((v - low) - (home - low)) / (high - low))
    return spec["harm"] * sum(ui * ui for ui in u)
"""

_FORMULA: dict[str, object] = {"math": math}
exec(_QUALITY, _FORMULA)  # the very formula the harness runs, for the tests to score configs


HARM = 0.1
"""Constrained family: the ``keep`` benchmark's absolute error per unit of squared normalised
distance from the defaults (a move of 0.5 in all, in any direction, costs 0.025)."""
KEEP_TOLERANCE = 0.05
"""Constrained family: the ``keep`` non-target's tolerance (absolute error units)."""


def spec_for(seed: int, flat: bool = False, gated: bool = False) -> dict[str, JsonValue]:
    """The generated task's hidden parameters for ``seed`` (``flat``: every config has the
    same quality, so nothing beats the defaults but seed noise; ``gated``: ``lr`` and ``mix``
    act only when ``kind`` is not ``"a"``)."""
    rng = random.Random(f"tuning-task:{seed}")
    return {
        "gated": gated,
        "harm": HARM,
        "home": {"lr": 0.5, "mix": 0.95, "depth": 2},
        "flat": flat,
        "numeric": [["lr", 1e-4, 1.0, True], ["mix", 0.0, 1.0, False], ["depth", 1, 32, False]],
        "optimum": [rng.uniform(0.15, 0.85) for _ in range(3)],
        "weights": [rng.uniform(4.0, 10.0) for _ in range(3)],
        "coupling": rng.uniform(-3.0, 3.0),
        "best_kind": rng.choice(CHOICES[1:]),
        "noise": 0.01,
    }


def quality(config: dict[str, JsonValue], spec: dict[str, JsonValue]) -> float:
    """``q(config)`` in (0, 1]: 1.0 at the optimum (the harness's own formula)."""
    formula = _FORMULA["quality"]
    assert callable(formula)
    return float(formula(config, spec))


def damage(config: dict[str, JsonValue], spec: dict[str, JsonValue]) -> float:
    """The constrained family's ``keep`` error of ``config`` above the defaults' (0.0): how far
    it moved from the defaults (the harness's own formula)."""
    formula = _FORMULA["damage"]
    assert callable(formula)
    return float(formula(config, spec))


GATE = KnobCondition(knob="kind", one_of=CHOICES[1:])
"""The gated family's condition on ``lr`` and ``mix``: they act when ``kind`` is not "a"."""


def space(small: bool = False, gated: bool = False) -> list[Knob]:
    """The family's search space (the same for every seed; the optimum moves); ``small``: only
    ``depth`` in 1..2 and ``kind``, six configs in all; ``gated``: ``lr`` and ``mix`` declare
    :data:`GATE`."""
    if small:
        return [
            Knob(name="depth", type=KnobType.INT, low=1, high=2, default=2),
            Knob(name="kind", type=KnobType.CHOICE, choices=list(CHOICES), default="a"),
        ]
    return [
        Knob(
            name="lr",
            type=KnobType.FLOAT,
            low=1e-4,
            high=1.0,
            log=True,
            default=0.5,
            when=GATE if gated else None,
        ),
        Knob(
            name="mix",
            type=KnobType.FLOAT,
            low=0.0,
            high=1.0,
            default=0.95,
            when=GATE if gated else None,
        ),
        Knob(name="depth", type=KnobType.INT, low=1, high=32, default=2),
        Knob(name="kind", type=KnobType.CHOICE, choices=list(CHOICES), default="a"),
    ]


def tuning_task(
    folder: Path,
    seed: int,
    small: bool = False,
    flat: bool = False,
    constrained: bool = False,
    gated: bool = False,
    declared: bool = True,
) -> Task:
    """Write the generated task of ``seed`` under ``folder`` and load it from its file
    (``small``: the six-config space of :func:`space`; ``flat``: see :func:`spec_for`;
    ``constrained``: a non-target ``keep`` whose error grows with the squared distance from the
    defaults (:func:`damage`), so the optimum of most seeds lies beyond what ``keep`` allows
    and the best feasible config lies part of the way toward it; ``gated``: ``lr`` and ``mix``
    act only when ``kind`` is not "a", which the space declares unless ``declared`` is
    false)."""
    harness = folder / "harness"
    harness.mkdir(parents=True)
    (harness / "harness.toml").write_text(
        '[harness]\nname = "tuning"\ntrain = "python train.py"\npredict = "python predict.py"\n'
        'config = "config.json"\nmodel = "json"\n'
    )
    (harness / "train.py").write_text(_TRAIN)
    (harness / "predict.py").write_text(_PREDICT.replace("QUALITY", _QUALITY))
    (harness / "spec.json").write_text(json.dumps(spec_for(seed, flat, gated)))
    (harness / "config.json").write_text(json.dumps({k.name: k.default for k in space()}))
    for t, tier in enumerate(TIERS):
        rows = []
        for i in range(16):
            x = ((i * 5 + t * 3) % 16 + 1) / 16
            rows.append({"id": f"s-{tier}-{i}", "input": {"x": x}, "target": x})
        (folder / f"{tier}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
        keep = [
            {
                "id": f"k-{tier}-{i}",
                "input": {"x": 1.0 + i / 8, "probe": "keep"},
                "target": 1.0 + i / 8,
            }
            for i in range(8)
        ]
        (folder / f"keep_{tier}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in keep))
    name = f"tuning_{uuid.uuid4().hex[:10]}"
    (folder / "task.py").write_text(
        "from pathlib import Path\nfrom rsilab import task\n"
        "from tests.orchestrator.builtin.tuning_tasks import build\n\n\n"
        f"@task\ndef {name}():\n"
        f"    return build(Path(__file__).parent, {name!r}, {small!r}, {constrained!r}, "
        f"{gated and declared!r})\n"
    )
    return load_task(folder / "task.py")


def build(
    folder: Path, name: str, small: bool = False, constrained: bool = False, gated: bool = False
) -> Task:
    """The task :func:`tuning_task` wrote under ``folder``."""
    files = {DataTier(t): folder / f"{t}.jsonl" for t in TIERS}
    benchmarks = [
        Benchmark(
            name="err",
            scorer="squared_error",
            target=True,
            higher_is_better=False,
            samples=FileSplits(files=files),
        )
    ]
    if constrained:
        keep = {DataTier(t): folder / f"keep_{t}.jsonl" for t in TIERS}
        benchmarks.append(
            Benchmark(
                name="keep",
                scorer="absolute_error",
                higher_is_better=False,
                tolerance=KEEP_TOLERANCE,
                samples=FileSplits(files=keep),
            )
        )
    return Task(
        name=name,
        goal="Lower the squared error.",
        harness=folder / "harness",
        benchmarks=benchmarks,
        budget=Budget(experiments=20),
        search_space=space(small, gated),
    )


def random_search_best(spec: dict[str, JsonValue], budget: int, seed: int) -> float:
    """The best ``q`` random search finds in ``budget`` configs (the first is the defaults)."""
    rng = random.Random(f"random-search:{seed}")
    configs: list[dict[str, JsonValue]] = [{k.name: k.default for k in space()}]
    while len(configs) < budget:
        lr = 10 ** rng.uniform(-4.0, 0.0)
        mix, depth, kind = rng.uniform(0.0, 1.0), rng.randint(1, 32), rng.choice(CHOICES)
        configs.append({"lr": lr, "mix": mix, "depth": depth, "kind": kind})
    return max(quality(c, spec) for c in configs)
