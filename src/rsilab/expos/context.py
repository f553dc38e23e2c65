"""Who is calling and what a tool body may touch.

:class:`CallContext` is what every call carries (actor, role, campaign, workspace).
:class:`ToolEnv` is what a tool body receives: the context, read access filtered by the
role's permissions, and a list of staged writes that the dispatcher commits together with the
call's ledger event (so a failed call writes nothing but its own event).

A workspace is checked against the lab each time a :class:`ToolEnv` is made for a call
(:func:`lab_confinement_of`): one that is, holds or lies inside the lab or the ledger key
folder (outside ``LAB/workspaces/<id>``) refuses the call, whatever the lab's folder is
called, so no tool of any caller (MCP, the Python API, an agent) reads or writes the lab
through its workspace.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from rsilab.errors import NotFoundError, ToolError
from rsilab.expos import policy
from rsilab.expos.guards import GuardRefusal
from rsilab.records import Campaign, FlagStage, Record, Role
from rsilab.sandbox import Confinement, SandboxUser, WorkspaceRefused, check_placement
from rsilab.store.artifacts import ArtifactStore
from rsilab.store.base import Store
from rsilab.store.keys import key_dir

if TYPE_CHECKING:  # services import the controller; only tools that run jobs need them
    from rsilab.expos.services import LabServices

R = TypeVar("R", bound=Record)


@dataclass(frozen=True)
class CallContext:
    """The caller of a tool: every call carries one.

    Attributes:
        actor: a name for the caller ('worker-1', 'claude-code', 'cli').
        role: the role it holds; decides which tools and records it may use (a plain string
            naming a role is coerced to :class:`Role`; any other raises ValueError).
        campaign_id: the campaign it works in; agents are confined to it.
        workspace: the only folder whose paths tool arguments may name.
    """

    actor: str
    role: Role
    campaign_id: str | None = None
    workspace: Path | None = None

    def __post_init__(self) -> None:
        # callers of the Python API pass role="worker": coerce it, so the checks that read
        # role.is_agent never meet a plain string; an unknown role is refused here, by name
        if not isinstance(self.role, Role):
            try:
                object.__setattr__(self, "role", Role(self.role))
            except ValueError:
                known = ", ".join(r.value for r in Role)
                raise ValueError(f"unknown role {self.role!r}; known roles: {known}") from None


def lab_confinement_of(artifacts: ArtifactStore) -> Confinement:
    """What no workspace may be, hold or lie in: the lab (the artifact store's root, which is
    the lab folder, whatever it is called) and the ledger key folder; ``LAB/workspaces/<id>``
    is allowed. Only the placement matters here, so the user is the caller's own."""
    root = artifacts.root.resolve()
    return Confinement(
        SandboxUser(os.getuid(), os.getgid()),
        private=(root, key_dir().resolve()),
        workspaces=root / "workspaces",
    )


def check_workspace(workspace: Path, artifacts: ArtifactStore) -> None:
    """Refuse a workspace that is, holds or lies inside the lab or its key folder.

    Raises:
        WorkspaceRefused: which private folder, and what to do (a :class:`UserError`).
    """
    check_placement(workspace, lab_confinement_of(artifacts))


@dataclass
class ToolEnv:
    """What a tool body gets. Reads are permission-checked; writes are staged, not committed.

    Made once per call, before its path arguments are resolved. Whatever touches the caller's
    workspace reads it through :meth:`workspace`, which refuses a misplaced one
    (:func:`check_workspace`) with ToolError ``no_workspace``; a call that never touches it
    (opening a direction, reading a record) runs from any folder.
    """

    call: CallContext
    store: Store
    artifacts: ArtifactStore
    writes: list[Record] = field(default_factory=list)
    lab_services: LabServices | None = None

    def workspace(self) -> Path | None:
        """The caller's workspace (None without one), once it is known not to be, hold or lie
        inside the lab or its key folder.

        Raises:
            ToolError: ``no_workspace`` for a misplaced workspace (which, and what to do).
        """
        if self.call.workspace is None:
            return None
        try:
            check_workspace(self.call.workspace, self.artifacts)
        except WorkspaceRefused as exc:
            raise ToolError("no_workspace", f"{exc.message}; {exc.hint}") from None
        return self.call.workspace

    def services(self) -> LabServices:
        """The executor and controllers; ToolError ``unavailable`` when started without them."""
        if self.lab_services is None:
            raise ToolError(
                "unavailable",
                "this Experiment OS was started without a sandbox executor, so it cannot run "
                "jobs or judge candidates",
                expected="a lab opened with services (rsilab mcp, rsilab run, rsilab agent)",
            )
        return self.lab_services

    def stage(self, record: R) -> R:
        """Queue a record to be written with this call's event; returns it for chaining."""
        self.writes.append(record)
        return record

    def campaign(self, *, writable: bool = False) -> Campaign:
        """The caller's campaign; ToolError if none was given or it is over (when writing)."""
        if self.call.campaign_id is None:
            raise ToolError(
                "no_campaign",
                "this tool needs a campaign; the caller was started without one",
                expected="a campaign id in the call context (--campaign)",
            )
        campaign = self.store.get_as(self.call.campaign_id, Campaign)
        if writable and campaign.is_finished():
            raise ToolError("conflict", f"campaign {campaign.id} is {campaign.state}; no changes")
        return campaign

    def read(self, record_id: str, cls: type[R], *, field_name: str = "id") -> R:
        """A record the caller may read, of type ``cls``.

        Raises ToolError ``not_found`` (absent or of another type) or a GuardRefusal when the
        role may not read it (the refusal becomes a protocol flag).
        """
        try:
            record = self.store.get(record_id)
        except NotFoundError:
            raise ToolError(
                "not_found", f"no {cls.KIND} with id {record_id!r}", field=field_name
            ) from None
        if not isinstance(record, cls):
            raise ToolError(
                "not_found",
                f"{record_id!r} is a {record.KIND}, not a {cls.KIND}",
                field=field_name,
                expected=f"the id of a {cls.KIND}",
            )
        self.check_readable(record)
        return record

    def check_readable(self, record: Record) -> None:
        """Raise a GuardRefusal if the caller's role may not read ``record``."""
        reason = policy.read_refusal(self.call.role, self.call.campaign_id, record)
        if reason is not None:
            raise GuardRefusal(
                rule="record_not_readable",
                stage=FlagStage.ACCESS,
                message=f"{self.call.role} may not read {record.id}: {reason}",
            )

    def readable(
        self,
        kind: str | None = None,
        *,
        fields: Mapping[str, Any] | None = None,
        text: str | None = None,
        limit: int | None = None,
    ) -> list[Record]:
        """Records matching the filters that the caller may read (others are left out)."""
        out: list[Record] = []
        for record in self.store.query(kind, fields=fields, text=text):
            if policy.read_refusal(self.call.role, self.call.campaign_id, record) is None:
                out.append(record)
                if limit is not None and len(out) >= limit:
                    break
        return out

    def readable_as(self, cls: type[R], **filters: Any) -> list[R]:
        """:meth:`readable` for one record type, typed."""
        return [r for r in self.readable(cls.KIND, **filters) if isinstance(r, cls)]
