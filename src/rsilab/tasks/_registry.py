"""The ``@task`` decorator and the registry of tasks by name (built-ins found on first use).

A built-in task is a subpackage of ``rsilab.tasks.builtin`` whose ``__init__`` defines a
function decorated with ``@task``; :func:`get_task` and :func:`task_names` import every such
subpackage the first time they are called, so adding a folder is all it takes.
"""

from __future__ import annotations

import importlib
import pkgutil
import threading
from collections.abc import Callable

from rsilab.tasks._spec import Task

TaskFactory = Callable[[], Task]

_TASKS: dict[str, TaskFactory] = {}
_SOURCES: dict[str, str] = {}
_lock = threading.Lock()
_builtins_loaded = False


def task(fn: TaskFactory) -> TaskFactory:
    """Register ``fn`` (no arguments, returns a :class:`Task`) under its function name.

    The function's name must equal the task's ``name`` (checked when it is first built).
    Registering a second function under a name already taken raises ValueError.
    """
    name = fn.__name__
    module = fn.__module__
    with _lock:
        previous = _TASKS.get(name)
        if previous is not None and previous.__module__ != module:
            raise ValueError(f"task {name!r} is already registered by {previous.__module__}")
        _TASKS[name] = fn
        _SOURCES[name] = "builtin" if module.startswith("rsilab.tasks.builtin.") else module
    return fn


def ensure_builtins() -> None:
    """Import every built-in task package once (registering their tasks, scorers, drivers)."""
    global _builtins_loaded
    if _builtins_loaded:
        return
    import rsilab.tasks.builtin as builtin

    for info in pkgutil.iter_modules(builtin.__path__):
        if info.ispkg:
            importlib.import_module(f"{builtin.__name__}.{info.name}")
    _builtins_loaded = True


def task_names() -> list[str]:
    """Names of every registered task (built-ins included), sorted."""
    ensure_builtins()
    return sorted(_TASKS)


def get_task(name: str) -> Task:
    """Build the task registered as ``name``; KeyError listing the known names.

    Raises ValueError (pydantic's ValidationError) when the factory builds an invalid task.
    """
    ensure_builtins()
    try:
        factory = _TASKS[name]
    except KeyError:
        raise KeyError(f"unknown task {name!r}; known: {', '.join(sorted(_TASKS))}") from None
    built = factory()
    if built.name != name:
        raise ValueError(f"@task function {name!r} built a task named {built.name!r}")
    if not built.source:
        built = built.model_copy(update={"source": _SOURCES[name]})
    return built
