"""Where untrusted harness code runs: the Sandbox ABC, bubblewrap and plain-process sandboxes,
the runtime environment jobs see, and :func:`default_sandbox`, which picks one."""

from rsilab.sandbox._bwrap_args import WORKSPACE
from rsilab.sandbox._gpu import require_cuda_torch, require_gpus
from rsilab.sandbox._gpu_pool import host_gpus, run_holding_gpus
from rsilab.sandbox._identity import SandboxUser, lab_user
from rsilab.sandbox._images import DiskLimits
from rsilab.sandbox._places import Confinement, WorkspaceRefused, check_placement, hand_over
from rsilab.sandbox._trees import remove_tree
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
    "Confinement",
    "DiskLimits",
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
    "SandboxUser",
    "WorkspaceRefused",
    "check_placement",
    "current_runtime",
    "default_sandbox",
    "hand_over",
    "host_gpus",
    "install_runtime",
    "lab_user",
    "remove_tree",
    "require_cuda_torch",
    "require_gpus",
    "run_holding_gpus",
]
