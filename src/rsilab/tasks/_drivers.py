"""Task-owned predict drivers, and the one RunSpec builder the controller uses for predict.

Some tasks cannot trust a harness to report its own score (the ``kernel`` task times the
candidate; a harness timing itself could simply lie). Such a task names a *driver*: a
standalone Python program (stdlib and numpy only: it runs in the runtime venv) that the
controller passes at run time as ``python -I -c SOURCE --seed N``. It is never written into a
workspace, so the improver cannot edit it; it reads the contract's stdin and writes the
contract's stdout, and it imports the harness's code itself.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from rsilab.sandbox.base import Limits, Mount, RunSpec
from rsilab.tasks._harness import Manifest, encode_inputs, load_manifest, predict_spec
from rsilab.tasks._registry import ensure_builtins
from rsilab.tasks._samples import Sample
from rsilab.tasks._spec import Task


@dataclass(frozen=True)
class Driver:
    """A registered driver: ``source()`` returns the program text."""

    name: str
    source: Callable[[], str]
    description: str


_DRIVERS: dict[str, Driver] = {}


def register_driver(name: str, source: Callable[[], str], description: str = "") -> None:
    """Register a driver program under ``name`` (re-registering the same source is allowed)."""
    _DRIVERS[name] = Driver(name, source, description)


def get_driver(name: str) -> Driver:
    """The driver called ``name``; KeyError listing the known ones."""
    ensure_builtins()
    try:
        return _DRIVERS[name]
    except KeyError:
        known = ", ".join(sorted(_DRIVERS)) or "none"
        raise KeyError(f"unknown predict driver {name!r}; known: {known}") from None


def driver_names() -> list[str]:
    """Every registered driver, sorted."""
    ensure_builtins()
    return sorted(_DRIVERS)


def task_predict_spec(
    task: Task,
    workspace: Path,
    samples: Sequence[Sample],
    *,
    seed: int,
    model: str | None = None,
    manifest: Manifest | None = None,
    limits: Limits | None = None,
    threads: int = 1,
    mounts: tuple[Mount, ...] = (),
) -> RunSpec:
    """The predict job for ``task`` on ``samples`` in ``workspace``: its driver if it has one,
    else the harness's own predict (manifest read from ``workspace`` unless given).

    Raises:
        KeyError: unknown driver. ManifestError / ValueError: no usable predict entry point.
    """
    if task.predict_driver is None:
        manifest = manifest or load_manifest(workspace)
        return predict_spec(
            manifest,
            workspace,
            samples,
            seed=seed,
            model=model,
            limits=limits,
            threads=threads,
            mounts=mounts,
        )
    source = get_driver(task.predict_driver).source()
    argv: tuple[str, ...] = ("python", "-I", "-c", source, "--seed", str(seed))
    if model is not None:
        argv += ("--model", model)
    return RunSpec(
        argv,
        workspace,
        limits or Limits(),
        stdin=encode_inputs(samples),
        threads=threads,
        mounts=mounts,
    )
