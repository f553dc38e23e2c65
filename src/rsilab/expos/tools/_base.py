"""The default registry that the tool modules register into, and shared argument types."""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

from pydantic import AfterValidator, Field, StringConstraints

from rsilab.errors import ToolError
from rsilab.expos.guards import PathArg
from rsilab.expos.registry import ToolRegistry
from rsilab.records import Record
from rsilab.sandbox import WorkspaceRefused

if TYPE_CHECKING:
    from rsilab.expos.context import ToolEnv

REGISTRY = ToolRegistry()
tool = REGISTRY.tool


def _finite(value: float) -> float:
    if not math.isfinite(value):
        raise ValueError("must be a finite number (not NaN or infinity)")
    return value


FiniteFloat = Annotated[float, AfterValidator(_finite)]
"""A float that is neither NaN nor infinite (the ledger stores JSON numbers only)."""

Name = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=200)]
"""A short non-empty name."""

Text = Annotated[str, StringConstraints(max_length=20_000)]
"""Free text, bounded so one call cannot flood the store."""

RecordId = Annotated[str, StringConstraints(pattern=r"^[a-z]+-[0-9a-f]{6,}$", max_length=80)]
"""A record id such as ``exp-3fa9c2d1b07e``."""

WorkspacePath = Annotated[str, PathArg(), Field(max_length=4096)]
"""A path inside the caller's workspace (guarded)."""

Limit = Annotated[int, Field(ge=1, le=500)]
"""How many items to return."""


def brief(record: Record) -> dict[str, Any]:
    """The short form used in listings."""
    return {"id": record.id, "kind": record.KIND, "summary": record.summary()}


def require(condition: bool, code: str, message: str, field: str | None = None) -> None:
    """Raise a ToolError unless ``condition`` holds."""
    if not condition:
        raise ToolError(code, message, field=field)


def live_workspace(env: ToolEnv, folder: Path) -> Path:
    """``folder``, made a workspace of the lab's sandbox (owned by its uid, its own
    filesystem where the sandbox can; see ``LabServices.workspace``), resolved.

    Raises:
        ToolError: ``no_workspace`` when the folder holds the lab (or lies inside it), or
            ``tool_failed`` when its filesystem cannot be made.
    """
    services = env.services()
    try:
        return services.workspace(folder)
    except WorkspaceRefused as exc:
        raise ToolError("no_workspace", f"{exc.message}; {exc.hint}") from None
    except OSError as exc:
        raise ToolError("tool_failed", f"the workspace could not be made ready: {exc}") from None
