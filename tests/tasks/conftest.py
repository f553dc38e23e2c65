"""Fixtures for the task tests: a process sandbox, a secret, and a small task on disk."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from rsilab.records import DataTier
from rsilab.sandbox.base import Sandbox
from rsilab.sandbox.process import ProcessSandbox
from rsilab.tasks import TIERS, Sample, write_jsonl

SECRET = bytes(range(32))


@pytest.fixture
def secret() -> bytes:
    return SECRET


@pytest.fixture(scope="session")
def sandbox() -> Iterator[Sandbox]:
    """A process sandbox: the runtime venv when installed, else this venv (torch, safetensors)."""
    box = ProcessSandbox()
    box.prepare()
    yield box
    box.close()


ECHO_PREDICT = """\
import json, sys
for line in sys.stdin:
    item = json.loads(line)
    print(json.dumps({"id": item["id"], "output": item["input"]["x"] % 2}))
"""


def write_small_task(folder: Path, *, toml_extra: str = "", samples_per_tier: int = 6) -> Path:
    """A task.toml with a predict-only harness (parity of x) and four JSONL splits."""
    harness = folder / "harness"
    harness.mkdir(parents=True)
    (harness / "harness.toml").write_text(
        '[harness]\npredict = "python predict.py"\nmodel = "none"\n'
    )
    (harness / "predict.py").write_text(ECHO_PREDICT)
    data = folder / "data"
    data.mkdir()
    for t, tier in enumerate(TIERS):
        samples = [
            Sample(
                id=f"{tier.value}-{i}",
                input={"x": 100 * t + i, "note": f"item {i} of {tier.value}"},
                target=(100 * t + i) % 2,
            )
            for i in range(samples_per_tier)
        ]
        write_jsonl(data / f"{tier.value}.jsonl", samples)
    splits = ", ".join(f'{t.value} = "data/{t.value}.jsonl"' for t in TIERS)
    (folder / "task.toml").write_text(
        f"""name = "parity"
goal = "Say whether x is odd."
harness = "harness"
budget = "experiments=5,wall=1m,tokens=10k"
{toml_extra}
[[benchmarks]]
name = "parity"
scorer = "accuracy"
target = true
splits = {{ {splits} }}
"""
    )
    return folder / "task.toml"


@pytest.fixture
def small_task(tmp_path: Path) -> Path:
    """Path of a valid task.toml (predict-only harness, file splits)."""
    return write_small_task(tmp_path / "parity")


def read_lines(path: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


__all__ = ["SECRET", "DataTier", "read_lines", "write_small_task"]
