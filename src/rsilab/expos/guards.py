"""Guards: protocol checks between argument validation and the tool body.

A guard that refuses raises :class:`GuardRefusal`; the dispatcher turns it into a
``guard_refused`` ToolError for the agent and a :class:`~rsilab.records.ProtocolFlag` in the
ledger. This module holds the checks of the tool layer itself; later layers add their own
(training-data overlap, model provenance) by raising the same error.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from rsilab.errors import ToolError
from rsilab.records import FlagStage


class GuardRefusal(ToolError):
    """A protocol refusal: the call is refused and a protocol flag is recorded."""

    def __init__(
        self,
        *,
        rule: str,
        stage: FlagStage,
        message: str,
        field: str | None = None,
        code: str = "guard_refused",
    ) -> None:
        super().__init__(code, message, field=field)
        self.rule = rule
        self.stage = stage


WORKSPACE_RESERVED = ("data-in", "runs", ".rsilab")
"""Top-level workspace folders the Experiment OS writes (the data a job gets, job outputs, its
own state): agents may read them but the file tools do not write there, and a candidate's
snapshot leaves them out."""


@dataclass(frozen=True)
class PathArg:
    """Marks a tool parameter as a path that must stay inside the caller's workspace."""

    must_exist: bool = True


def resolve_workspace_path(
    workspace: Path | None, value: str, field: str, *, must_exist: bool
) -> Path:
    """Resolve ``value`` against the workspace and refuse anything that leaves it.

    Relative paths are taken from the workspace root; absolute paths must point inside it.
    Symlinks are resolved first, so a link out of the workspace is refused too.
    """
    if workspace is None:
        raise GuardRefusal(
            rule="no_workspace",
            stage=FlagStage.ACCESS,
            message="this call has no workspace, so it may not name any path",
            field=field,
        )
    root = workspace.resolve()
    if "\x00" in value:
        raise ToolError("invalid_arguments", "path contains a NUL byte", field=field)
    candidate = Path(value)
    try:
        resolved = (candidate if candidate.is_absolute() else root / candidate).resolve()
    except RuntimeError:  # Python 3.11 raises it for a symbolic link loop a job planted
        raise ToolError(
            "invalid_arguments",
            f"path {value[:200]!r} runs into a loop of symbolic links",
            field=field,
            expected="a path without a symbolic link loop",
        ) from None
    if not resolved.is_relative_to(root):
        raise GuardRefusal(
            rule="path_outside_workspace",
            stage=FlagStage.ACCESS,
            message=f"path {value!r} leaves the workspace; only paths inside it are allowed",
            field=field,
        )
    try:
        exists = resolved.exists()
    except OSError as exc:  # a name over the length limit, a folder it may not search
        raise ToolError(
            "invalid_arguments",
            f"path {value[:200]!r} cannot be looked up: {exc.strerror or exc}",
            field=field,
            expected="a path relative to the workspace root",
        ) from None
    if must_exist and not exists:
        raise ToolError(
            "not_found",
            f"path {value!r} does not exist in the workspace",
            field=field,
            expected="a path relative to the workspace root",
        )
    return resolved
