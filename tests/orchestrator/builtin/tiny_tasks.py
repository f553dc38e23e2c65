"""Tiny tasks for the built-in policy's tests: a one-knob regressor scored by squared error.

The harness predicts ``w * x`` for a sample ``{"x": x}`` whose target is ``0.7 * x``, so the
squared error ``(w - 0.7)^2 x^2`` is lowest at ``w = 0.7`` and the starting config ``w = 0.2`` is
far from it. Variants: the config file's name (``config =`` in ``harness.toml``), a harness
without a train step (predict reads the config file itself), and a second, higher-is-better
benchmark (a classifier whose answers do not depend on ``w``). Experiments take milliseconds.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path

from rsilab.records import DataTier
from rsilab.tasks import (
    Benchmark,
    Budget,
    CodeEdit,
    CodeVariant,
    FileSplits,
    Knob,
    KnobType,
    Task,
    load_task,
)

BEST_W = 0.7
START_W = 0.2
W = Knob(name="w", type=KnobType.FLOAT, low=0.0, high=1.0, default=START_W)
TIERS = ("train", "dev", "accept", "final")

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
text = Path(args.config).read_text()
try:
    config = json.loads(text)
except ValueError:  # "key: value" lines, as a YAML file may hold them
    config = {k.strip(): float(v) for k, v in (line.split(":") for line in text.splitlines())}
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
source = Path(args.model) if args.model else Path(__file__).parent / CONFIG
text = source.read_text()
w = json.loads(text)["w"] if text.lstrip().startswith("{") else float(text.split(":")[1])
for line in sys.stdin:
    if line.strip():
        item = json.loads(line)
        x = item["input"]["x"]
        answer = int(x > 0.5) if item["input"].get("kind") == "cls" else SCALE * w * x
        print(json.dumps({"id": item["id"], "output": answer}))
"""


def regression_task(
    folder: Path,
    *,
    config: str = "config.json",
    trains: bool = True,
    mixed: bool = False,
    variants: bool = False,
    knobs: bool = True,
) -> Task:
    """The task, with its harness, data and a ``task.py`` written under ``folder`` and loaded
    from that file (so campaigns find it again by its source; each call has its own name)."""
    _write_harness(folder / "harness", config, trains)
    for kind in ("reg", "cls") if mixed else ("reg",):
        _write_splits(folder / kind, kind)
    name = f"regress_{uuid.uuid4().hex[:10]}"
    path = folder / "task.py"
    path.write_text(
        "from pathlib import Path\n"
        "from rsilab import task\n"
        "from tests.orchestrator.builtin.tiny_tasks import build\n\n\n"
        f"@task\ndef {name}():\n"
        f"    return build(Path(__file__).parent, {name!r}, {config!r}, {mixed!r}, {variants!r}, "
        f"{knobs!r})\n"
    )
    return load_task(path)


def build(
    folder: Path, name: str, config: str, mixed: bool, variants: bool = False, knobs: bool = True
) -> Task:
    """The task whose files :func:`regression_task` wrote under ``folder``."""
    benchmarks = [
        Benchmark(
            name="err",
            scorer="squared_error",
            target=True,
            higher_is_better=False,
            samples=FileSplits(files=_files(folder / "reg")),
        )
    ]
    if mixed:
        benchmarks.append(
            Benchmark(
                name="sign",
                scorer="accuracy",
                tolerance=0.05,
                samples=FileSplits(files=_files(folder / "cls")),
            )
        )
    return Task(
        name=name,
        goal="Lower the squared error of the regressor.",
        harness=folder / "harness",
        benchmarks=benchmarks,
        budget=Budget(experiments=10),
        search_space=[W] if knobs else [],
        code_variants=VARIANTS if variants else [],
    )


def _scale(name: str, value: float) -> CodeVariant:
    edit = CodeEdit(path="predict.py", old="SCALE = 1.0\n", new=f"SCALE = {value}\n")
    return CodeVariant(name=name, description=f"predict {value} w x", edits=[edit])


VARIANT_SCALES = {"exact": BEST_W / START_W, "negated": -1.0}
"""Code variants of the tiny harness: predict multiplies ``w x`` by this (1.0 in the head)."""
VARIANTS = [_scale(name, value) for name, value in VARIANT_SCALES.items()]


def _write_harness(harness: Path, config: str, trains: bool) -> None:
    harness.mkdir(parents=True)
    lines = ["[harness]", 'name = "regress"']
    if trains:
        lines.append('train = "python train.py"')
        (harness / "train.py").write_text(_TRAIN)
    lines += ['predict = "python predict.py"', f'config = "{config}"', 'model = "json"']
    (harness / "harness.toml").write_text("\n".join(lines) + "\n")
    (harness / "predict.py").write_text(f"CONFIG = {config!r}\nSCALE = 1.0\n" + _PREDICT)
    (harness / config).write_text(json.dumps({"w": START_W}))


def _files(folder: Path) -> dict[DataTier, Path]:
    return {DataTier(t): folder / f"{t}.jsonl" for t in TIERS}


def _write_splits(folder: Path, kind: str) -> None:
    folder.mkdir(parents=True)
    for t, tier in enumerate(TIERS):
        rows = []
        for i in range(20):
            x = ((i * 7 + t * 3) % 20 + 1) / 20
            target: float | int = int(x > 0.5) if kind == "cls" else BEST_W * x
            rows.append(
                {"id": f"{kind}-{tier}-{i}", "input": {"x": x, "kind": kind}, "target": target}
            )
        (folder / f"{tier}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))


def squared_error_of(w: float) -> float:
    """The dev tier's mean squared error at ``w``, computed here from the data's formula."""
    xs = [((i * 7 + 3) % 20 + 1) / 20 for i in range(20)]
    return sum(((w - BEST_W) * x) ** 2 for x in xs) / len(xs)
