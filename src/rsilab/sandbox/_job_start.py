"""A job starts from the default signal state and umask, whatever state its host was started in.

A process started in the background by a shell without job control, by ``nohup`` or by a
service manager inherits SIGINT, SIGQUIT or SIGHUP *ignored*, and an ignored signal stays
ignored across ``exec``. Left alone, every job rsilab starts from such a host would ignore them
too: an operator's ``kill -HUP`` would not stop it, and Python in the job would never raise
KeyboardInterrupt. A blocked signal mask is inherited the same way, from the thread that forks.

So a job is started through ``env --default-signal`` (coreutils 8.31 or later), which sets every
catchable signal back to its default action, and unblocks it, before it executes the next
command. Without such an ``env`` no job starts (:func:`default_signals_tool` raises): a job
whose signals depend on how rsilab was launched is not the job the sandbox describes.
"""

from __future__ import annotations

import functools
import shutil
import subprocess

from rsilab.sandbox.base import SandboxUnavailable

_SEARCH_PATH = "/usr/bin:/bin:/usr/sbin:/sbin"

JOB_UMASK = 0o022
"""Every job's umask (files 0644, folders 0755), not the one rsilab inherited: a launcher's
077 or 000 would otherwise change the modes of what a job writes, and so what it can share."""


@functools.cache
def default_signals_tool() -> str:
    """The path of an ``env`` that understands ``--default-signal`` (checked once).

    Raises:
        SandboxUnavailable: there is none.
    """
    env = shutil.which("env", path=_SEARCH_PATH)
    if env is not None:
        try:
            done = subprocess.run(
                [env, "--default-signal", "true"], capture_output=True, timeout=30, check=False
            )
        except (OSError, subprocess.TimeoutExpired):
            done = None
        if done is not None and done.returncode == 0:
            return env
    raise SandboxUnavailable(
        "no `env` with --default-signal was found in /usr/bin or /bin: jobs would inherit the "
        "signals this process ignores",
        "install GNU coreutils 8.31 or later (as root: `apt-get install -y coreutils`)",
    )


def with_default_signals(argv: list[str]) -> list[str]:
    """``argv`` started with every catchable signal at its default action and unblocked."""
    return [default_signals_tool(), "--default-signal", "--", *argv]
