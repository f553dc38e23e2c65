"""The harness contract: the manifest, the command lines the controller runs, predict output.

A harness is a folder with ``harness.toml``::

    [harness]
    train = "python train.py"      # optional: a harness without training has only predict
    predict = "python predict.py"  # optional only for tasks with a task-owned predict driver
    config = "config.json"         # optional: passed to train as --config
    model = "safetensors"          # safetensors | json | npz | none
    improve = "python improve.py"  # optional: for a system that is itself an improver
    gpus = 1                       # optional (default 0): GPUs each train and predict job gets

Entry points are run as commands in the job's workspace (the harness copy)::

    train --data DIR [--model-in PATH] --model-out PATH --seed N [--config FILE]
    predict [--model PATH] --seed N   < inputs.jsonl > outputs.jsonl

``improve`` takes no arguments the contract fixes. It is the entry point of a system that
acts as an improver: it runs inside the sandbox, in its workspace, with the Experiment OS
reachable only as an MCP client (the stdio bridge that ``$RSILAB_MCP_COMMAND`` names, as for
``rsilab agent``), and improves the campaign's system through those tools alone. The
controller never runs it; ``rsilab evolve`` does, in each round whose improver is this
system (under ``self``, the accepted system improving itself next round), starting in a
workspace that holds this harness, with ``$RSILAB_SEED`` set to the round's seed.

A harness with ``gpus = N`` has each of its jobs given N GPUs of its own by the executor;
the sandbox shows the job only those devices (see :mod:`rsilab.sandbox._gpu`), and a
campaign refuses to start on a machine with fewer.

The folder of ``--model-out`` exists when train starts. ``DIR`` holds ``train.jsonl`` (the
train tier of every benchmark, ``{id, input, target}`` a line) and, where the setting allows,
``dev.jsonl``; never a private tier. ``predict`` reads
one ``{"id", "input"}`` object a line on stdin and writes one ``{"id", "output"}`` object a
line on stdout, for every input, in order. Models are never
pickled: safetensors (``safetensors.torch.save_file``, not ``torch.save``), JSON or npz.
Paths given to the builders are as seen from inside the job (relative to the workspace, or a
mount target); the caller puts the files there.
"""

from __future__ import annotations

import json
import shlex
import tomllib
from collections.abc import Sequence
from pathlib import Path, PurePosixPath
from typing import Literal

from pydantic import Field, JsonValue, ValidationError, field_validator

from rsilab.records import Model
from rsilab.sandbox.base import Limits, Mount, RunSpec
from rsilab.tasks._samples import Sample

MANIFEST = "harness.toml"
DATA_DIR = "data-in"
"""The workspace folder a job's ``--data DIR`` names (written afresh before each train job)."""
MODEL_SUFFIX = {"safetensors": ".safetensors", "json": ".json", "npz": ".npz", "none": ""}
"""File suffix of a model in each manifest ``model`` format."""


class ManifestError(ValueError):
    """``harness.toml`` is missing or malformed; ``problems`` lists every fault."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("; ".join(problems))
        self.problems = problems


class HarnessOutputError(ValueError):
    """``predict`` printed something that breaks the contract; the message says what and where."""


def _relative(value: str) -> str:
    path = PurePosixPath(value)
    if path.is_absolute() or ".." in path.parts:
        raise ValueError(f"{value!r} must be a path inside the harness (relative, no '..')")
    return value


class Manifest(Model):
    """The ``[harness]`` table of ``harness.toml``."""

    name: str = Field(default="", description="Informative name.")
    description: str = Field(default="", description="What the harness does.")
    train: list[str] | None = Field(default=None, description="Train command (argv prefix).")
    predict: list[str] | None = Field(default=None, description="Predict command (argv prefix).")
    improve: list[str] | None = Field(
        default=None, description="Improve command (argv), for a system that is an improver."
    )
    config: str | None = Field(default=None, description="Config file passed to train.")
    model: Literal["safetensors", "json", "npz", "none"] = Field(
        default="safetensors", description="Format of the model file train writes."
    )
    gpus: int = Field(
        default=0, ge=0, le=64, description="GPUs each train and predict job gets (its own)."
    )

    @field_validator("train", "predict", "improve", mode="before")
    @classmethod
    def _split(cls, value: object) -> object:
        if isinstance(value, str):
            argv = shlex.split(value)
            if not argv:
                raise ValueError("command is empty")
            return argv
        return value

    @field_validator("config")
    @classmethod
    def _inside(cls, value: str | None) -> str | None:
        return None if value is None else _relative(value)

    @property
    def trains(self) -> bool:
        """True when the harness has a train entry point."""
        return self.train is not None

    @property
    def improves(self) -> bool:
        """True when the harness has an improve entry point (it is an improver)."""
        return self.improve is not None


def load_manifest(folder: Path) -> Manifest:
    """The manifest of the harness in ``folder``.

    Raises:
        ManifestError: missing, unreadable, not TOML, or wrong fields (every problem listed).
    """
    path = folder / MANIFEST
    try:
        data = tomllib.loads(path.read_text("utf-8-sig"))  # a byte-order mark as editors show it
    except OSError as exc:
        raise ManifestError([f"{path}: cannot read ({exc.strerror or exc})"]) from exc
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ManifestError([f"{path}: not valid TOML ({exc})"]) from exc
    table = data.get("harness")
    if not isinstance(table, dict):
        raise ManifestError([f"{path}: needs a [harness] table"])
    try:
        return Manifest.model_validate(table)
    except ValidationError as exc:
        problems = [
            f"{path}: {'.'.join(str(p) for p in err['loc']) or 'harness'}: {err['msg']}"
            for err in exc.errors()
        ]
        raise ManifestError(problems) from exc


def train_argv(
    manifest: Manifest,
    *,
    data: str,
    model_out: str,
    seed: int,
    model_in: str | None = None,
    config: str | None = None,
) -> tuple[str, ...]:
    """The train command line; ``config`` defaults to the manifest's. ValueError if no train."""
    if manifest.train is None:
        raise ValueError("this harness has no train entry point")
    argv = [*manifest.train, "--data", data]
    if model_in is not None:
        argv += ["--model-in", model_in]
    argv += ["--model-out", model_out, "--seed", str(seed)]
    config = config or manifest.config
    if config is not None:
        argv += ["--config", config]
    return tuple(argv)


def predict_argv(manifest: Manifest, *, seed: int, model: str | None = None) -> tuple[str, ...]:
    """The predict command line. ValueError if the harness has no predict entry point."""
    if manifest.predict is None:
        raise ValueError("this harness has no predict entry point")
    argv = [*manifest.predict]
    if model is not None:
        argv += ["--model", model]
    return (*argv, "--seed", str(seed))


def encode_inputs(samples: Sequence[Sample]) -> bytes:
    """predict's stdin: ``{"id", "input"}`` per line. Targets are never included."""
    lines = (json.dumps({"id": s.id, "input": s.input}, separators=(",", ":")) for s in samples)
    return "".join(line + "\n" for line in lines).encode("utf-8")


def train_spec(
    manifest: Manifest,
    workspace: Path,
    *,
    data: str,
    model_out: str,
    seed: int,
    model_in: str | None = None,
    config: str | None = None,
    limits: Limits | None = None,
    threads: int = 1,
    mounts: tuple[Mount, ...] = (),
) -> RunSpec:
    """A RunSpec for one train job in ``workspace`` (see :func:`train_argv`)."""
    argv = train_argv(
        manifest, data=data, model_out=model_out, seed=seed, model_in=model_in, config=config
    )
    return RunSpec(
        argv, workspace, limits or Limits(), threads=threads, mounts=mounts, gpus=manifest.gpus
    )


def predict_spec(
    manifest: Manifest,
    workspace: Path,
    samples: Sequence[Sample],
    *,
    seed: int,
    model: str | None = None,
    limits: Limits | None = None,
    threads: int = 1,
    mounts: tuple[Mount, ...] = (),
) -> RunSpec:
    """A RunSpec for one predict job: the samples' inputs go on stdin."""
    argv = predict_argv(manifest, seed=seed, model=model)
    stdin = encode_inputs(samples)
    return RunSpec(
        argv,
        workspace,
        limits or Limits(),
        stdin=stdin,
        threads=threads,
        mounts=mounts,
        gpus=manifest.gpus,
    )


def parse_predictions(stdout: bytes, ids: Sequence[str]) -> dict[str, JsonValue]:
    """Outputs by id from predict's stdout, checked against the contract.

    Blank lines are ignored. Every other line must be a JSON object with ``id`` (a string) and
    ``output``; there must be exactly one per input, in input order.

    Raises:
        HarnessOutputError: naming the first line at fault and what was expected there.
    """
    try:
        text = stdout.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise HarnessOutputError(f"predict output is not UTF-8 (byte {exc.start})") from exc
    lines = [(n, line) for n, line in enumerate(text.splitlines(), 1) if line.strip()]
    outputs: dict[str, JsonValue] = {}
    for index, (number, line) in enumerate(lines):
        try:
            item = json.loads(line)
        except json.JSONDecodeError as exc:
            raise HarnessOutputError(f"line {number}: not JSON ({exc.msg}): {line[:80]!r}") from exc
        if not isinstance(item, dict) or "id" not in item or "output" not in item:
            raise HarnessOutputError(f"line {number}: expected an object with 'id' and 'output'")
        if index >= len(ids):
            raise HarnessOutputError(f"line {number}: more outputs than the {len(ids)} inputs")
        if item["id"] != ids[index]:
            raise HarnessOutputError(
                f"line {number}: id {item['id']!r} where {ids[index]!r} was expected "
                "(one output per input, in input order)"
            )
        outputs[ids[index]] = item["output"]
    if len(outputs) < len(ids):
        raise HarnessOutputError(f"{len(outputs)} outputs for {len(ids)} inputs")
    return outputs
