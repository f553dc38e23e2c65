"""Choosing the sandbox: bubblewrap, or the plain-process sandbox only on an explicit opt-in."""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from pathlib import Path

from rsilab.sandbox._places import Confinement
from rsilab.sandbox.base import Sandbox, SandboxUnavailable
from rsilab.sandbox.bwrap import BwrapSandbox
from rsilab.sandbox.process import ProcessSandbox
from rsilab.sandbox.runtime import Runtime

ENV_VAR = "RSILAB_SANDBOX"
CHOICES = ("bwrap", "process")

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Choice:
    """The sandbox picked, prepared, and why; ``bwrap_problem`` is set after a fallback."""

    sandbox: Sandbox
    why: str
    bwrap_problem: SandboxUnavailable | None = None


def choose_sandbox(
    *,
    allow_unsandboxed: bool = False,
    confinement: Confinement | None = None,
    runtime: Runtime | None = None,
    shown: tuple[Path, ...] = (),
) -> Choice:
    """Pick and prepare a sandbox: ``$RSILAB_SANDBOX`` if set, else bubblewrap (bound to a
    lab's ``confinement`` when given: its sandbox uid, private folders and workspace images).
    Its jobs see ``runtime`` (a task's own; default: the base runtime) and, read-only at
    their own place, the host paths in ``shown`` (the plain-process sandbox sees every path).

    Never a silent fallback: when bubblewrap cannot be used and ``$RSILAB_SANDBOX`` is unset,
    the plain-process sandbox (no security boundary) is chosen only when the caller passes
    ``allow_unsandboxed`` (a person's explicit opt-in, ``--unsandboxed``);
    ``RSILAB_SANDBOX=process`` is such an opt-in too. Logs nothing.

    Raises:
        SandboxUnavailable: bubblewrap cannot be used and no opt-in was given (the hint says
            what to install, and how to opt in), ``RSILAB_SANDBOX=bwrap`` but bwrap cannot
            be used, or ``RSILAB_SANDBOX`` names no known sandbox.
    """
    forced = os.environ.get(ENV_VAR, "").strip().lower()
    if forced and forced not in CHOICES:
        raise SandboxUnavailable(
            f"{ENV_VAR}={forced!r} names no sandbox", f"use one of: {', '.join(CHOICES)}"
        )
    if forced == "process":
        return Choice(_prepared(ProcessSandbox(runtime)), f"{ENV_VAR}=process")
    try:
        bwrap = _prepared(BwrapSandbox(runtime, confinement=confinement, shown=shown))
    except SandboxUnavailable as exc:
        if forced == "bwrap":
            raise SandboxUnavailable(
                f"{ENV_VAR}=bwrap, but {exc.message}", exc.hint or f"unset {ENV_VAR}"
            ) from exc
        if not allow_unsandboxed:
            raise SandboxUnavailable(
                f"jobs cannot run in the bubblewrap sandbox: {exc.message}",
                f"{exc.hint or 'install bubblewrap'}; or, knowing that plain processes are no "
                "security boundary, opt in with --unsandboxed (or RSILAB_SANDBOX=process)",
            ) from exc
        return Choice(
            _prepared(ProcessSandbox(runtime)), "bubblewrap is unavailable (opted in)", exc
        )
    return Choice(bwrap, f"{ENV_VAR}=bwrap" if forced else "bubblewrap works here")


def default_sandbox(
    *,
    allow_unsandboxed: bool = False,
    confinement: Confinement | None = None,
    runtime: Runtime | None = None,
    shown: tuple[Path, ...] = (),
) -> Sandbox:
    """A prepared sandbox as :func:`choose_sandbox` picks it; an opted-in fallback to the
    process sandbox logs a warning naming what bwrap lacked.

    Raises:
        SandboxUnavailable: as :func:`choose_sandbox`.
    """
    choice = choose_sandbox(
        allow_unsandboxed=allow_unsandboxed, confinement=confinement, runtime=runtime,
        shown=shown,
    )  # fmt: skip
    if choice.bwrap_problem is not None:
        log.warning(
            "bubblewrap sandbox unavailable (%s); jobs run as plain processes, which is NOT "
            "a security boundary (opted in). Hint: %s",
            choice.bwrap_problem.message,
            choice.bwrap_problem.hint,
        )
    return choice.sandbox


def _prepared(sandbox: Sandbox) -> Sandbox:
    sandbox.prepare()
    return sandbox
