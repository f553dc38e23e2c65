"""The runtime environment harnesses run in: a venv with the harness libraries, without rsilab.

The sandbox shows a job this venv and the Python it was made from, nothing of rsilab, its
source, the lab or the main environment (where scikit-learn keeps raw data files tasks are
built from). What it holds is read from the package data file ``runtime-requirements.txt``;
its first ``torch`` line is installed on its own first (pip takes the CPU wheel from local
disk), and the remaining lines are installed with torch held at that pin; a line whose
comment says ``rsilab: no-deps`` is installed without its declared dependencies; one whose
comment says ``rsilab: base-only`` (a built-in task's data package) is in the base runtime only,
never in a task's own.

Location: ``$RSILAB_RUNTIME`` if set, else ``<user data dir>/rsilab/runtime-<key>``, where the
key hashes the requirements text and the interpreter, so a changed requirements file gets a
fresh venv. A stamp file written last marks a finished install; without it (or with a stamp
for other requirements) the runtime counts as not installed.

**Task runtimes.** A task may declare extra requirement lines (``Task.runtime_requirements``,
each pinned with ``==``; never torch, which stays the shipped pin). Its runtime is a venv of
its own holding the shipped requirements plus those lines, keyed by both (the key is in the
path: ``runtime-<key>``, or ``$RSILAB_RUNTIME-<key>`` beside an explicit base runtime), so two
tasks with different lists never share one and a task without extras uses the base runtime.
torch is installed the same way as in the base runtime (the pinned CPU wheel from local disk).
Every install writes :data:`OFFLINE_PTH` into the venv's site-packages: Python's ``site``
runs it at start-up and sets :data:`OFFLINE_ENV` (``HF_HUB_OFFLINE=1``,
``TRANSFORMERS_OFFLINE=1``) in every job's process, whatever environment the sandbox gave it,
so no Hugging Face library tries the network or a hub cache.

**Stripped stdlib.** The install also writes ``<runtime>/stdlib``: a copy of the base Python's
standard library (without site-packages, test suites, idlelib, tkinter and turtledemo) compiled
with optimization level 2 into legacy-location (sourceless) ``.pyc`` files, every ``.py``
deleted; other files (``lib-dynload`` extensions, data files) are kept. The sandbox shows it in
place of the real stdlib, so a job imports the standard library but can read neither its
source nor its docstrings (tasks such as ``textcls`` build their data from them). The stamp
records :data:`STDLIB_FORMAT`; a runtime whose stamp lacks it is completed, not refilled.
pip and setuptools are removed at the end (:data:`PRUNED`); a later fill restores pip first.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import re
import shutil
import stat
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from importlib import metadata, resources
from pathlib import Path
from typing import Any

import platformdirs

from rsilab.errors import UserError

REQUIREMENTS_FILE = "runtime-requirements.txt"
STAMP_NAME = ".rsilab-runtime.json"
ENV_VAR = "RSILAB_RUNTIME"
STDLIB_DIR = "stdlib"
STDLIB_FORMAT = 2
"""Version of the stripped-stdlib layout; raising it makes installs rebuild the copy."""
STDLIB_SKIP = frozenset({"__pycache__", "test", "tests", "idlelib", "tkinter", "turtledemo"})
"""Folder names left out of the stripped stdlib wherever they occur (site-packages too, at
the top: an empty one stays as the place the sandbox masks)."""


OFFLINE_ENV = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
"""Set in every process the runtime's Python starts (see :data:`OFFLINE_PTH`)."""
OFFLINE_PTH = "rsilab_offline.pth"
"""A ``.pth`` file in the venv's site-packages; its one ``import`` line sets :data:`OFFLINE_ENV`."""


class RuntimeInstallError(UserError):
    """Creating or filling the runtime venv failed; the message holds pip's last lines."""


class RuntimeMissingError(UserError):
    """A task's runtime is not installed; the hint names the command that installs it."""


def requirements_text() -> str:
    """The requirements file shipped with rsilab, as text."""
    return resources.files("rsilab.sandbox").joinpath(REQUIREMENTS_FILE).read_text("utf-8")


NO_DEPS_MARK = "rsilab: no-deps"
"""A comment holding this marks a line pip installs with ``--no-deps``."""
BASE_ONLY_MARK = "base-only"
"""A comment holding this (``# rsilab: no-deps, base-only``) marks a line of the base runtime
that task runtimes leave out."""


def requirement_lines(text: str, *, no_deps: bool | None = None) -> list[str]:
    """Requirement lines of ``text``, comments and blanks dropped, in file order.

    ``no_deps`` True keeps only lines marked ``# rsilab: no-deps``, False only unmarked
    ones, None all.
    """
    found = []
    for raw in text.splitlines():
        line, _, comment = raw.partition("#")
        if line.strip() and (no_deps is None or (NO_DEPS_MARK in comment) == no_deps):
            found.append(line.strip())
    return found


def _name(requirement: str) -> str:
    for i, char in enumerate(requirement):
        if not (char.isalnum() or char in "-_."):
            return requirement[:i].lower()
    return requirement.lower()


_PIN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*==[A-Za-z0-9][A-Za-z0-9.+!]*")
"""One pinned requirement: a project name, ``==``, a version (no markers, no extras)."""


def check_task_requirements(extra: Sequence[str]) -> list[str]:
    """``extra`` stripped, each line checked: a single ``name==version`` pin, not torch.

    Raises:
        RuntimeInstallError: a line is unpinned, names torch, or repeats a package.
    """
    lines = [line.strip() for line in extra]
    seen: set[str] = set()
    for line in lines:
        if not _PIN.fullmatch(line):
            raise RuntimeInstallError(
                f"task requirement {line!r} is not pinned as name==version",
                "pin every task requirement to one version, e.g. 'peft==0.21.2'",
            )
        if _name(line) == "torch":
            raise RuntimeInstallError(
                f"task requirement {line!r} names torch", "torch stays the runtime's own pin"
            )
        if _name(line) in seen:
            raise RuntimeInstallError(f"task requirement {line!r} repeats a package", "")
        seen.add(_name(line))
    return lines


def full_requirements_text(extra: Sequence[str] = ()) -> str:
    """The shipped requirements, then (when given) the task's lines under a marker comment:
    the text a task runtime is keyed by and filled from. Without extras, the shipped text; with
    them, the shipped text less its ``base-only`` lines (:data:`BASE_ONLY_MARK`)."""
    text = requirements_text()
    if not extra:
        return text
    lines = check_task_requirements(extra)
    shipped = [raw for raw in text.rstrip("\n").splitlines() if not _base_only(raw)]
    return "\n".join(shipped) + "\n# task requirements\n" + "\n".join(lines) + "\n"


def _base_only(raw: str) -> bool:
    """Whether a requirements line is a requirement marked ``base-only``."""
    line, _, comment = raw.partition("#")
    return bool(line.strip()) and BASE_ONLY_MARK in comment


def runtime_key(text: str | None = None) -> str:
    """12 hex digits naming one (requirements, interpreter) pair."""
    text = requirements_text() if text is None else text
    interpreter = os.path.realpath(getattr(sys, "_base_executable", sys.executable))
    material = f"{text}\n{sys.version_info[:2]}\n{interpreter}"
    return hashlib.sha256(material.encode("utf-8")).hexdigest()[:12]


def runtime_path(extra: Sequence[str] = ()) -> Path:
    """Where the runtime lives: ``$RSILAB_RUNTIME``, else the user data dir by key. With a
    task's ``extra`` lines: ``runtime-<key>`` of the full text, in the user data dir, or beside
    an explicit base runtime as ``$RSILAB_RUNTIME-<key>``."""
    explicit = os.environ.get(ENV_VAR)
    if extra:
        key = runtime_key(full_requirements_text(extra))
        if explicit:
            return Path(f"{Path(explicit).absolute()}-{key}")
        return Path(platformdirs.user_data_dir("rsilab")) / f"runtime-{key}"
    if explicit:
        return Path(explicit).absolute()
    return Path(platformdirs.user_data_dir("rsilab")) / f"runtime-{runtime_key()}"


@dataclass(frozen=True)
class Runtime:
    """One runtime venv on disk (which may not be installed yet).

    ``extra`` holds the task requirement lines it was made for (empty: the base runtime);
    the stamp must carry the key of the shipped requirements plus those lines. With a
    ``build_id`` (None: the task has no build step), a finished install must also have run the
    task's build step, that build: its stamp records what the step built and the ``build_id``
    it was run under, so a changed build (another corpus, other model sizes) is not installed
    until ``rsilab runtime install`` runs the step again.
    """

    path: Path
    extra: tuple[str, ...] = ()
    build_id: str | None = None

    @property
    def build_needed(self) -> bool:
        """Whether the task has a build step."""
        return self.build_id is not None

    @property
    def key(self) -> str:
        """The key a finished install of this runtime's requirements is stamped with."""
        return runtime_key(full_requirements_text(self.extra))

    @property
    def bin_dir(self) -> Path:
        return self.path / "bin"

    @property
    def python(self) -> Path:
        return self.bin_dir / "python"

    def stamp(self) -> dict[str, Any] | None:
        """The install stamp, or None when absent or unreadable."""
        try:
            data = json.loads((self.path / STAMP_NAME).read_text("utf-8"))
        except (OSError, ValueError):
            return None
        return data if isinstance(data, dict) else None

    @property
    def stdlib(self) -> Path:
        """The stripped copy of the standard library (see the module docstring)."""
        return self.path / STDLIB_DIR

    def _venv_ready(self) -> bool:
        stamp = self.stamp()
        return (
            stamp is not None
            and stamp.get("key") == self.key
            and self.python.exists()
            and Path(str(stamp.get("base_prefix", ""))).is_dir()
        )

    def other_build(self) -> str | None:
        """The id of the build that made what the stamp records, when the venv is ready and
        that build is not this runtime's; None otherwise (no build step, nothing built yet,
        or the same build)."""
        built_by = (self.stamp() or {}).get("build_id")
        if self.build_id is None or built_by in (None, self.build_id) or not self._venv_ready():
            return None
        return str(built_by)

    def is_installed(self) -> bool:
        """True when a finished install for the current requirements is on disk, with a
        stripped stdlib of the current :data:`STDLIB_FORMAT`."""
        stamp = self.stamp() or {}
        return (
            self._venv_ready()
            and stamp.get("stdlib") == STDLIB_FORMAT
            and (self.stdlib / "os.pyc").is_file()
            and (self.build_id is None or self._built_current(stamp))
        )

    def _built_current(self, stamp: dict[str, Any]) -> bool:
        """Whether the stamp records files built by the current build (see the class)."""
        return bool(stamp.get("built")) and stamp.get("build_id", "") == self.build_id

    def base_prefix(self) -> Path:
        """The resolved prefix of the Python this venv was made from (from the stamp).

        Raises:
            RuntimeInstallError: the runtime is not installed.
        """
        stamp = self.stamp()
        if stamp is None or "base_prefix" not in stamp:
            raise RuntimeInstallError(
                f"no runtime environment at {self.path}", "run `rsilab runtime install`"
            )
        return Path(str(stamp["base_prefix"]))

    def site_packages(self) -> list[Path]:
        """The venv's site-packages folders."""
        return sorted(self.path.glob("lib/python3*/site-packages"))

    def packages(self) -> list[tuple[str, str]]:
        """(name, version) of every distribution installed in the venv, sorted by name."""
        found = {
            (dist.metadata["Name"], dist.version)
            for dist in metadata.distributions(path=[str(p) for p in self.site_packages()])
        }
        return sorted(found, key=lambda item: item[0].lower())


def current_runtime() -> Runtime:
    """The runtime at :func:`runtime_path` (installed or not)."""
    return Runtime(runtime_path())


def task_runtime(extra: Sequence[str], *, build_id: str | None = None) -> Runtime:
    """The runtime for a task declaring ``extra`` requirement lines (and, with a
    ``build_id``, a build step of that identity), installed or not; the base runtime when
    there are none.

    Raises:
        RuntimeInstallError: a line is not a valid task requirement.
    """
    lines = tuple(check_task_requirements(extra))
    return Runtime(runtime_path(lines), lines, build_id)


def install_command(task: str | None = None) -> str:
    """The command line that installs the runtime (of ``task`` when given)."""
    return "rsilab runtime install" + (f" --task {task}" if task else "")


def require_task_runtime(
    task: str, extra: Sequence[str], *, build_id: str | None = None
) -> Runtime:
    """The installed runtime of task ``task`` (declaring ``extra``, and a build step of
    identity ``build_id``), for preflight.

    Raises:
        RuntimeMissingError: it is not installed; the message names the command to run.
    """
    runtime = task_runtime(extra, build_id=build_id)
    if not runtime.is_installed():
        built_by = runtime.other_build()
        if built_by is not None:
            raise RuntimeMissingError(
                f"task {task!r} needs its runtime at {runtime.path} built by {build_id!r}; "
                f"what is there was built by {built_by!r}",
                f"run `{install_command(task)}` to build it again (the venv is kept)",
            )
        raise RuntimeMissingError(
            f"task {task!r} needs its own runtime, not installed at {runtime.path}",
            f"run `{install_command(task)}`",
        )
    return runtime


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    """An exclusive lock beside ``path`` so two installs never fill one venv at once."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.with_name(path.name + ".lock"), "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _run(argv: list[str], what: str) -> None:
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        tail = "\n".join((done.stdout + done.stderr).strip().splitlines()[-15:])
        raise RuntimeInstallError(
            f"{what} failed (exit {done.returncode}):\n{tail}",
            "check that the package registries are reachable, then run "
            "`rsilab runtime install --force`",
        )


def _make_readable(root: Path) -> None:
    """Give everyone read (and search) access: the sandbox user is not the installer."""
    for folder, dirs, files in os.walk(root):
        for name in dirs + files:
            path = Path(folder, name)
            info = path.lstat()
            if stat.S_ISLNK(info.st_mode):
                continue
            extra = stat.S_IRGRP | stat.S_IROTH
            if stat.S_ISDIR(info.st_mode) or info.st_mode & stat.S_IXUSR:
                extra |= stat.S_IXGRP | stat.S_IXOTH
            if info.st_mode & extra != extra:
                os.chmod(path, stat.S_IMODE(info.st_mode) | extra)
    os.chmod(root, stat.S_IMODE(root.stat().st_mode) | 0o755)


def _fill(runtime: Runtime, text: str, log: Callable[[str], None]) -> None:
    """Create the venv and install the requirements: torch alone first, then the unmarked
    lines with torch held at its pin, then the ``no-deps`` lines without their dependencies."""
    if not runtime.python.exists():
        log(f"creating the venv at {runtime.path}")
        _run([sys.executable, "-m", "venv", str(runtime.path)], "python -m venv")
    if not any(name.lower() == "pip" for name, _ in runtime.packages()):  # pruned before
        _run([str(runtime.python), "-m", "ensurepip"], "python -m ensurepip")
    pip = [str(runtime.python), "-m", "pip", "install", "--quiet", "--no-input"]
    torch = [line for line in requirement_lines(text) if _name(line) == "torch"][:1]
    if torch:
        log(f"installing {torch[0]} first")
        _run([*pip, torch[0]], f"pip install {torch[0]}")
    with tempfile.TemporaryDirectory() as tmp:
        requirements = Path(tmp, "requirements.txt")
        requirements.write_text("\n".join(requirement_lines(text, no_deps=False)) + "\n")
        held = []
        if torch:
            constraints = Path(tmp, "constraints.txt")
            constraints.write_text(torch[0] + "\n", "utf-8")
            held = ["-c", str(constraints)]
        log("installing the requirements")
        _run([*pip, "-r", str(requirements), *held], "pip install -r runtime-requirements.txt")
        bare = requirement_lines(text, no_deps=True)
        if bare:
            log(f"installing without dependencies: {', '.join(bare)}")
            _run([*pip, "--no-deps", *held, *bare], "pip install --no-deps")


PRUNED = ("pip", "setuptools")
"""Installers the venv comes with, removed once it is filled: no job needs them, and they carry
copies of stdlib modules (``distutils``, ``tarfile``) whose docstrings ``textcls`` uses."""


def _prune(runtime: Runtime, log: Callable[[str], None]) -> None:
    present = [name for name, _ in runtime.packages() if name.lower() in PRUNED]
    if present:
        log(f"removing {', '.join(present)} from the runtime")
        _run([str(runtime.python), "-m", "pip", "uninstall", "-y", "--quiet", *present], "pip")


def _base_prefix(runtime: Runtime) -> str:
    done = subprocess.run(
        [str(runtime.python), "-I", "-c", "import sys; print(sys.base_prefix)"],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeInstallError(f"the runtime's python does not start: {done.stderr}", "")
    return os.path.realpath(done.stdout.strip())


def stdlib_subdir() -> str:
    """The stdlib folder's path below a prefix, e.g. ``lib/python3.11``."""
    return "lib/python{}.{}".format(*sys.version_info[:2])


def _skip(folder: str, names: list[str]) -> set[str]:
    return {n for n in names if n in STDLIB_SKIP and os.path.isdir(os.path.join(folder, n))}


def build_stdlib(base_prefix: Path, target: Path, log: Callable[[str], None] = print) -> None:
    """Write the stripped stdlib of ``base_prefix`` to ``target`` (replacing it): copy, compile
    every ``.py`` with ``-o 2`` to a legacy ``.pyc`` beside it, delete every ``.py``. Code
    objects name the real stdlib path (where the sandbox shows the copy). Built beside
    ``target`` and renamed into place, so an interrupted build leaves no half copy.

    Raises:
        RuntimeInstallError: a file failed to compile.
    """
    source = base_prefix / stdlib_subdir()
    partial = target.with_name(target.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    log(f"building the stripped stdlib at {target}")
    shutil.copytree(source, partial, symlinks=True, ignore=_skip)
    shutil.rmtree(partial / "site-packages", ignore_errors=True)
    (partial / "site-packages").mkdir()
    compile_args = ["-q", "-b", "-o", "2", "-j", "0", "-s", str(partial), "-p", str(source)]
    _run(
        [sys.executable, "-I", "-m", "compileall", *compile_args, str(partial)],
        "compiling the stripped stdlib",
    )
    for folder, _, files in os.walk(partial):
        for name in files:
            if name.endswith(".py"):
                os.unlink(os.path.join(folder, name))
    if not (partial / "os.pyc").is_file():
        raise RuntimeInstallError(f"no os.pyc in the stripped stdlib at {partial}", "")
    shutil.rmtree(target, ignore_errors=True)
    partial.rename(target)


def _write_offline(runtime: Runtime) -> None:
    """Write :data:`OFFLINE_PTH` into every site-packages of the venv (see the docstring)."""
    assignments = "; ".join(f"os.environ[{k!r}] = {v!r}" for k, v in OFFLINE_ENV.items())
    for folder in runtime.site_packages():
        (folder / OFFLINE_PTH).write_text(f"import os; {assignments}\n", "utf-8")


def install_runtime(
    path: Path | None = None,
    *,
    extra: Sequence[str] = (),
    build: Callable[[Path, Callable[[str], None]], dict[str, str]] | None = None,
    build_id: str = "",
    force: bool = False,
    log: Callable[[str], None] = print,
) -> Runtime:
    """Create or complete the runtime venv; cheap when already installed (stamp check).

    ``extra``: a task's requirement lines (see :func:`task_runtime`); the venv then lives at
    ``runtime_path(extra)`` unless ``path`` is given. ``build``: the task's build step,
    ``(runtime folder, log) -> facts``, run on the host after pip and before the stamp, whose
    facts the stamp records under ``built`` (a base model's path and sha256, say), with
    ``build_id`` naming that build (an install built under another id runs the step again,
    its venv kept). ``force``
    deletes the folder first. The stamp is written last, so an interrupted install is redone
    next time.

    Raises:
        RuntimeInstallError: a task line is invalid, or venv creation or pip failed (the
            message holds the output's tail).
    """
    lines = tuple(check_task_requirements(extra))
    runtime = Runtime(path or runtime_path(lines), lines, build_id if build is not None else None)
    with _locked(runtime.path):
        if force and runtime.path.exists():
            shutil.rmtree(runtime.path)
        if runtime.is_installed():
            log(f"runtime already installed at {runtime.path}")
            return runtime
        text = full_requirements_text(lines)
        if not runtime._venv_ready():
            _fill(runtime, text, log)
        base_prefix = _base_prefix(runtime)
        build_stdlib(Path(base_prefix), runtime.stdlib, log)
        _prune(runtime, log)
        _write_offline(runtime)
        built = build(runtime.path, log) if build is not None else {}
        _make_readable(runtime.path)
        stamp = {
            "key": runtime_key(text),
            "task_requirements": list(lines),
            "built": built,
            "build_id": build_id if build is not None else None,
            "requirements": text,
            "python": ".".join(map(str, sys.version_info[:3])),
            "base_prefix": base_prefix,
            "packages": dict(runtime.packages()),
            "stdlib": STDLIB_FORMAT,
        }
        (runtime.path / STAMP_NAME).write_text(json.dumps(stamp, indent=2), "utf-8")
        log(f"runtime installed at {runtime.path}")
    return runtime
