"""A small tuneable task written to disk, as a ``task.toml`` or a Python file with a ``@task``.

Its harness "trains" by writing its config's ``bias`` as the model and predicts 1 for a sample
whose ``u`` falls under it, so an experiment takes a few milliseconds and a config change
moves the score.
"""

from __future__ import annotations

import json
from pathlib import Path

TIERS = ("train", "dev", "accept", "final")

_TRAIN = """\
import argparse, json
from pathlib import Path
parser = argparse.ArgumentParser()
parser.add_argument("--data", required=True)
parser.add_argument("--model-in")
parser.add_argument("--model-out", required=True)
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--config", default="config.json")
args = parser.parse_args()
config = json.loads(Path(args.config).read_text())
Path(args.model_out).parent.mkdir(parents=True, exist_ok=True)
Path(args.model_out).write_text(json.dumps({"bias": config["bias"]}))
"""

_PREDICT = """\
import argparse, json, sys
parser = argparse.ArgumentParser()
parser.add_argument("--model", required=True)
parser.add_argument("--seed", type=int, default=0)
args = parser.parse_args()
bias = json.load(open(args.model))["bias"]
for line in sys.stdin:
    if line.strip():
        item = json.loads(line)
        answer = 1 if item["input"]["u"] < bias else 0
        print(json.dumps({"id": item["id"], "output": answer}))
"""

_HARNESS_TOML = """\
[harness]
name = "threshold"
train = "python train.py"
predict = "python predict.py"
config = "config.json"
model = "json"
"""

TASK_TOML = """\
name = "{name}"
goal = "Answer 1 exactly for the samples whose u is under 0.7."
harness = "harness"
budget = "experiments=4,wall=5m,tokens=10k"

[[benchmarks]]
name = "agree"
scorer = "accuracy"
target = true
splits = {{ {splits} }}

[[search_space]]
name = "bias"
type = "float"
low = 0.05
high = 0.95
default = 0.3
"""

TASK_PY = """\
from pathlib import Path

from rsilab import Task, task
from rsilab.tasks import Benchmark, FileSplits, Knob, KnobType

HERE = Path(__file__).parent


@task
def {name}() -> Task:
    files = {{t: HERE / "data" / f"{{t}}.jsonl" for t in ("train", "dev", "accept", "final")}}
    return Task(
        name="{name}",
        goal="Answer 1 exactly for the samples whose u is under 0.7.",
        harness=HERE / "harness",
        budget="experiments=4,wall=5m,tokens=10k",
        benchmarks=[
            Benchmark(name="agree", scorer="accuracy", target=True, samples=FileSplits(files=files))
        ],
        search_space=[Knob(name="bias", type=KnobType.FLOAT, low=0.05, high=0.95, default=0.3)],
    )
"""


def write_harness_and_data(folder: Path, samples_per_tier: int = 20) -> None:
    """The harness folder and four JSONL splits under ``folder``."""
    harness = folder / "harness"
    harness.mkdir(parents=True)
    (harness / "harness.toml").write_text(_HARNESS_TOML)
    (harness / "train.py").write_text(_TRAIN)
    (harness / "predict.py").write_text(_PREDICT)
    (harness / "config.json").write_text(json.dumps({"bias": 0.3}))
    data = folder / "data"
    data.mkdir()
    for t, tier in enumerate(TIERS):
        rows = []
        for i in range(samples_per_tier):
            u = ((i * 7 + t * 3) % samples_per_tier + 0.5) / samples_per_tier
            rows.append({"id": f"{tier}-{i}", "input": {"u": u}, "target": int(u < 0.7)})
        (data / f"{tier}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))


def write_toml_task(folder: Path, name: str) -> Path:
    """A ``task.toml`` task called ``name`` in ``folder``; the file's path."""
    write_harness_and_data(folder)
    splits = ", ".join(f'{t} = "data/{t}.jsonl"' for t in TIERS)
    path = folder / "task.toml"
    path.write_text(TASK_TOML.format(name=name, splits=splits))
    return path


def write_python_task(folder: Path, name: str) -> Path:
    """A Python file defining the ``@task`` ``name`` in ``folder`` (it reads no file when it
    builds the task, so listing every task keeps working after ``folder`` is gone)."""
    write_harness_and_data(folder)
    path = folder / f"{name}_task.py"
    path.write_text(TASK_PY.format(name=name))
    return path
