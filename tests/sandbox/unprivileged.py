"""Run part of the test suite as an unprivileged test user, from a root test run.

A non-root user takes another path through the sandbox (bubblewrap makes the user namespace,
``--disable-userns`` and the seccomp filter hold the line, no cgroups, no image workspaces),
so the security tests run on that path too. As root we pick an unused uid (no passwd entry
needed), give it a home and a temporary folder, and run pytest as that uid with ``setpriv``.

The interpreter, the checkout or the runtime may sit under a folder the test user cannot enter
(``/root`` is 0700). Rather than change any permission on the host, the run happens in a private
mount namespace (``unshare --mount``) where each such folder is covered by a tmpfs that holds
bind mounts of just the entries the run needs. Nothing is visible outside that namespace.
"""

from __future__ import annotations

import os
import pwd
import shlex
import shutil
import stat
import subprocess
import sys
import sysconfig
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from rsilab.sandbox.runtime import runtime_path

REPO = Path(__file__).resolve().parents[2]
FIRST_UID = 41_700
"""Where the search for an unused uid starts (outside the sandbox's own uid range)."""


def unused_uid() -> int:
    """A uid with no passwd entry and no running process (so nothing of it exists here)."""
    owners = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                owners.add(entry.stat().st_uid)
            except OSError:
                continue
    for uid in range(FIRST_UID, FIRST_UID + 1000):
        try:
            pwd.getpwuid(uid)
        except KeyError:
            if uid not in owners:
                return uid
    raise RuntimeError(f"no unused uid in {FIRST_UID}..{FIRST_UID + 999}")


def _enterable_by_others(folder: Path) -> bool:
    return bool(folder.stat().st_mode & stat.S_IXOTH)


def _blocked(paths: Iterable[Path]) -> dict[Path, set[str]]:
    """For each folder others cannot enter on the way to ``paths`` or among them: the names
    under it that the run needs (on the way: the one that leads on; a needed folder itself:
    all its entries). The mount script covers them outermost first, so a folder below one
    already covered is reached through its bind mount and covered in turn."""
    covers: dict[Path, set[str]] = {}
    for path in paths:
        resolved = path.resolve()
        parts = resolved.parts
        for depth in range(1, len(parts)):
            folder = Path(*parts[:depth])
            if not _enterable_by_others(folder):
                covers.setdefault(folder, set()).add(parts[depth])
        # A checkout cloned into `mktemp -d` is itself 0700: its own entries are needed.
        if resolved.is_dir() and not _enterable_by_others(resolved):
            covers.setdefault(resolved, set()).update(entry.name for entry in resolved.iterdir())
    return covers


def _depth(item: tuple[Path, set[str]]) -> int:
    return len(item[0].parts)


def _mount_script(
    covers: Mapping[Path, set[str]], stash: Path, command: Sequence[str], workdir: Path
) -> str:
    lines = ["set -eu"]
    for index, (folder, names) in enumerate(sorted(covers.items(), key=_depth)):
        kept = stash / str(index)
        lines += [
            f"mkdir -p {shlex.quote(str(kept))}",
            f"mount --bind {shlex.quote(str(folder))} {shlex.quote(str(kept))}",
            f"mount -t tmpfs -o mode=0755 tmpfs {shlex.quote(str(folder))}",
        ]
        for name in sorted(names):
            source, place = kept / name, folder / name
            make = "mkdir -p" if (folder / name).is_dir() else "touch"
            lines += [
                f"{make} {shlex.quote(str(place))}",
                f"mount --bind {shlex.quote(str(source))} {shlex.quote(str(place))}",
            ]
    # Enter the checkout again through the mounts: the folder this shell started in may be one
    # the test user cannot enter, and a relative path is looked up from it.
    lines.append(f"cd {shlex.quote(str(workdir))}")
    lines.append("exec " + shlex.join(command))
    return "\n".join(lines) + "\n"


def run_pytest_as_test_user(
    args: Sequence[str], workdir: Path, *, env: Mapping[str, str] | None = None, timeout: float
) -> subprocess.CompletedProcess[str]:
    """Run ``python -m pytest ARGS`` from the checkout as a fresh unprivileged uid (see
    :func:`run_as_test_user`)."""
    pytest_args = ["-m", "pytest", "-p", "no:cacheprovider", *args]
    return run_as_test_user(pytest_args, workdir, env=env, timeout=timeout)


def run_as_test_user(
    python_args: Sequence[str],
    workdir: Path,
    *,
    env: Mapping[str, str] | None = None,
    timeout: float,
    reachable: Sequence[Path] = (),
) -> subprocess.CompletedProcess[str]:
    """Run ``python PYTHON_ARGS`` (this interpreter, with rsilab importable) from the checkout
    as a fresh unprivileged uid; ``reachable`` names more paths it must be able to get to.

    ``workdir`` (made by the caller, root's) holds the test user's home and temporary folder.
    Raises RuntimeError when this is not root or a tool it needs is missing.
    """
    if os.geteuid() != 0:
        raise RuntimeError("only root can run tests as another user")
    missing = [t for t in ("unshare", "setpriv", "mount") if shutil.which(t) is None]
    if missing:
        raise RuntimeError(f"missing tools to run tests as a test user: {', '.join(missing)}")
    uid = unused_uid()
    home = workdir / "home"
    home.mkdir(parents=True)
    os.chown(home, uid, uid)
    workdir.chmod(0o755)
    needed = [
        Path(sys.executable),
        Path(sys.base_prefix),
        Path(sysconfig.get_paths()["purelib"]),
        REPO,
        runtime_path(),
        home,
        *reachable,
    ]
    runtime = str(runtime_path())
    environment = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(home),
        "TMPDIR": str(home),
        "PYTHONDONTWRITEBYTECODE": "1",
        "RSILAB_RUNTIME": runtime,
        "LANG": "C.UTF-8",
        **(env or {}),
    }
    command = [
        "setpriv",
        f"--reuid={uid}",
        f"--regid={uid}",
        "--clear-groups",
        "--",
        "env",
        "-i",
        *[f"{k}={v}" for k, v in environment.items()],
        sys.executable,
        *python_args,
    ]
    covers = _blocked(needed)
    # Where the covered folders stay reachable for the bind mounts: not under any of them.
    stash = Path(tempfile.mkdtemp(prefix="rsilab-test-user-", dir="/tmp"))
    try:
        if any(stash.is_relative_to(folder) for folder in covers):
            raise RuntimeError(f"{stash} lies under a folder the test user cannot enter")
        script = workdir / "enter.sh"
        script.write_text(_mount_script(covers, stash, command, REPO))
        return subprocess.run(
            ["unshare", "--mount", "--propagation", "private", "bash", str(script)],
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
    finally:
        shutil.rmtree(stash, ignore_errors=True)
