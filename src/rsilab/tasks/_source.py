"""Loading a campaign's task again from the :class:`~rsilab.records.TaskRef` it recorded.

Every tool call, resume and controller that needs a campaign's task goes through
:func:`load_ref`, so a task from a ``task.toml`` or a Python file is found from any working
directory, and one that changed since its campaign started is refused instead of silently
judged by other rules. Loaded files are cached in this process per (source, digest) while
the file's size, mtime and inode stay the same, so a tool call does not re-import a Python
file.
"""

from __future__ import annotations

import threading
from pathlib import Path

from pydantic import ValidationError

from rsilab.errors import UserError
from rsilab.records import TaskRef
from rsilab.tasks._origin import Origin, OriginKind, anchored, parse_source
from rsilab.tasks._registry import get_task, task_names
from rsilab.tasks._spec import Task
from rsilab.tasks._toml import TaskLoadError, load_python, load_toml

_Stamp = tuple[tuple[int, int, int], tuple[tuple[str, int, int, int], ...]]
"""The task file's (mtime, size, inode), and the same for each .py beside it (by name)."""
_lock = threading.Lock()
_cache: dict[tuple[str, str | None], tuple[_Stamp, Task]] = {}


def load_ref(ref: TaskRef, *, campaign_id: str | None = None) -> Task:
    """The task ``ref`` names (``campaign_id`` only words the errors).

    A built-in, or a task a module registered in this process, is built by name from the
    registry, unchecked (a built-in is part of the installed rsilab). A ``task.toml`` or a
    Python file is loaded from its path (a relative path, from older labs, against the current
    directory) and must still have the recorded name and digest.

    Raises:
        UserError: one line saying what is missing or changed and what to do: the file is
            gone, no longer loads, or its task's name or digest differs from the recorded
            one; or the name is not registered here.
    """
    whose = f"campaign {campaign_id}" if campaign_id else "the campaign"
    origin = parse_source(ref.source)
    if origin.path is None:
        return _registered(ref, origin, whose)
    # an older lab's relative path is loaded as it was, against this directory, so the
    # task's paths (and so its digest) come out as they did when the campaign started
    path = origin.path
    where = path.resolve()
    key = (f"{where}:{ref.name}", ref.digest)
    with _lock:
        stamp = _stamp(where, ref, whose)
        cached = _cache.get(key)
        if cached is not None and cached[0] == stamp:
            return cached[1]
        loaded = _load_file(path, origin, ref, whose)
        _check_same(loaded, where, ref, whose)
        _cache[key] = (stamp, loaded)
        return loaded


def _registered(ref: TaskRef, origin: Origin, whose: str) -> Task:
    try:
        return get_task(ref.name)
    except KeyError:
        where = "" if origin.kind is OriginKind.BUILTIN else f" (registered by {ref.source!r})"
        raise UserError(
            f"task {ref.name!r} of {whose}{where} is not known in this process",
            "import the module that defines it first; built-in tasks: " + ", ".join(task_names()),
        ) from None
    except ValueError as exc:  # pydantic's ValidationError: the factory built a bad task
        raise UserError(f"task {ref.name!r} of {whose} no longer builds: {exc}") from None


def _stamp(path: Path, ref: TaskRef, whose: str) -> _Stamp:
    try:
        st = path.stat()
    except OSError:
        recorded = parse_source(ref.source).path
        relative = recorded is not None and not recorded.is_absolute()
        note = f" (recorded as {str(recorded)!r}, relative to where it started)" if relative else ""
        raise UserError(
            f"{path}, the task {ref.name!r} of {whose} was loaded from, is gone{note}",
            "restore the file there (or run from the folder it started in), "
            "or start a new campaign",
        ) from None
    # a task's own scorer files (and the modules they import) sit beside it: a change to any
    # .py there is loaded afresh, so the digest check sees it
    beside = tuple(
        sorted((p.name, *_stat(p)) for p in path.parent.glob("*.py") if p != path and p.is_file())
    )
    return ((st.st_mtime_ns, st.st_size, st.st_ino), beside)


def _stat(path: Path) -> tuple[int, int, int]:
    try:
        st = path.stat()
    except OSError:
        return (0, 0, 0)
    return (st.st_mtime_ns, st.st_size, st.st_ino)


def _load_file(path: Path, origin: Origin, ref: TaskRef, whose: str) -> Task:
    try:
        if origin.kind is OriginKind.TOML:
            return load_toml(path)
        return load_python(path, origin.name or ref.name)
    except TaskLoadError as exc:
        raise UserError(
            f"{path.resolve()}, the task of {whose}, no longer loads: {'; '.join(exc.problems)}",
            "restore it as it was, or start a new campaign",
        ) from exc
    except (ValidationError, ValueError) as exc:
        raise UserError(f"{path.resolve()}, the task of {whose}, no longer loads: {exc}") from exc


def _check_same(loaded: Task, path: Path, ref: TaskRef, whose: str) -> None:
    """UserError when ``loaded`` is not the task ``ref`` recorded (its name or digest)."""
    hint = "restore it as it was, or start a new campaign"
    if loaded.name != ref.name:
        raise UserError(
            f"{path} now defines task {loaded.name!r}, not {ref.name!r} that {whose} started on",
            hint,
        )
    if ref.digest is None:
        return
    # ``ref()`` covers the spec and the task's own scorer files; the raw digest matches a
    # record made where the task's paths were relative (older labs)
    now = loaded.ref().digest
    assert now is not None
    if ref.digest not in (now, loaded.digest()):
        what = path.name + (" or its scorer files" if now != anchored(loaded).digest() else "")
        raise UserError(
            f"{what} changed since {whose} started (digest {ref.digest[:8]}… → {now[:8]}…; {path})",
            hint,
        )
