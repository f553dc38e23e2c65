"""Where untrusted harness code runs: the Sandbox ABC, bubblewrap and plain-process sandboxes,
the runtime environment jobs see, and :func:`default_sandbox`, which picks one."""

from rsilab.sandbox._bwrap_args import WORKSPACE
from rsilab.sandbox.base import (
    KillReason,
    Limits,
    Mount,
    RunResult,
    RunSpec,
    Sandbox,
    SandboxError,
    SandboxUnavailable,
)
from rsilab.sandbox.bwrap import BwrapSandbox
from rsilab.sandbox.process import ProcessSandbox
from rsilab.sandbox.runtime import Runtime, current_runtime, install_runtime
from rsilab.sandbox.select import default_sandbox

__all__ = [
    "WORKSPACE",
    "BwrapSandbox",
    "KillReason",
    "Limits",
    "Mount",
    "ProcessSandbox",
    "RunResult",
    "RunSpec",
    "Runtime",
    "Sandbox",
    "SandboxError",
    "SandboxUnavailable",
    "current_runtime",
    "default_sandbox",
    "install_runtime",
]
