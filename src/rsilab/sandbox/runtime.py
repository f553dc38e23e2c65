"""The runtime environment harnesses run in: a venv with the harness libraries, without rsilab.

The sandbox shows a job this venv and the Python it was made from, nothing of rsilab, its
source, the lab or the main environment (where scikit-learn keeps raw data files tasks are
built from). What it holds is read from the package data file ``runtime-requirements.txt``;
its first ``torch`` line is installed on its own first (pip takes the CPU wheel from local
disk), and the remaining lines are installed with torch held at that pin; a line whose
comment says ``rsilab: no-deps`` is installed without its declared dependencies.

Location: ``$RSILAB_RUNTIME`` if set, else ``<user data dir>/rsilab/runtime-<key>``, where the
key hashes the requirements text and the interpreter, so a changed requirements file gets a
fresh venv. A stamp file written last marks a finished install; without it (or with a stamp
for other requirements) the runtime counts as not installed.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from importlib import metadata, resources
from pathlib import Path
from typing import Any

import platformdirs

from rsilab.errors import UserError

REQUIREMENTS_FILE = "runtime-requirements.txt"
STAMP_NAME = ".rsilab-runtime.json"
ENV_VAR = "RSILAB_RUNTIME"


class RuntimeInstallError(UserError):
    """Creating or filling the runtime venv failed; the message holds pip's last lines."""


def requirements_text() -> str:
    """The requirements file shipped with rsilab, as text."""
    return resources.files("rsilab.sandbox").joinpath(REQUIREMENTS_FILE).read_text("utf-8")


NO_DEPS_MARK = "rsilab: no-deps"
"""A comment holding this marks a line pip installs with ``--no-deps``."""


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


def runtime_key(text: str | None = None) -> str:
    """12 hex digits naming one (requirements, interpreter) pair."""
    text = requirements_text() if text is None else text
    interpreter = os.path.realpath(getattr(sys, "_base_executable", sys.executable))
    material = f"{text}\n{sys.version_info[:2]}\n{interpreter}"
    return hashlib.sha256(material.encode("utf-8")).hexdigest()[:12]


def runtime_path() -> Path:
    """Where the runtime lives: ``$RSILAB_RUNTIME``, else the user data dir by key."""
    explicit = os.environ.get(ENV_VAR)
    if explicit:
        return Path(explicit).absolute()
    return Path(platformdirs.user_data_dir("rsilab")) / f"runtime-{runtime_key()}"


@dataclass(frozen=True)
class Runtime:
    """One runtime venv on disk (which may not be installed yet)."""

    path: Path

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

    def is_installed(self) -> bool:
        """True when a finished install for the current requirements is on disk."""
        stamp = self.stamp()
        return (
            stamp is not None
            and stamp.get("key") == runtime_key()
            and self.python.exists()
            and Path(str(stamp.get("base_prefix", ""))).is_dir()
        )

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


def install_runtime(
    path: Path | None = None, *, force: bool = False, log: Callable[[str], None] = print
) -> Runtime:
    """Create or complete the runtime venv; cheap when already installed (stamp check).

    ``force`` deletes the folder first. The stamp is written last, so an interrupted install
    is redone next time.

    Raises:
        RuntimeInstallError: venv creation or pip failed (message holds the output's tail).
    """
    runtime = Runtime(path or runtime_path())
    with _locked(runtime.path):
        if force and runtime.path.exists():
            shutil.rmtree(runtime.path)
        if runtime.is_installed():
            log(f"runtime already installed at {runtime.path}")
            return runtime
        text = requirements_text()
        _fill(runtime, text, log)
        _make_readable(runtime.path)
        stamp = {
            "key": runtime_key(text),
            "requirements": text,
            "python": ".".join(map(str, sys.version_info[:3])),
            "base_prefix": _base_prefix(runtime),
            "packages": dict(runtime.packages()),
        }
        (runtime.path / STAMP_NAME).write_text(json.dumps(stamp, indent=2), "utf-8")
        log(f"runtime installed at {runtime.path}")
    return runtime
