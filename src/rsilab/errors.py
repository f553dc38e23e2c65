"""The error hierarchy: one root, split by who reads the message.

- :class:`ToolError` goes back to the agent that made a tool call; the campaign goes on.
- :class:`UserError` is printed to a person, one line plus a hint, without a traceback.
- :class:`NotFoundError` and :class:`ConflictError` are raised by the store; the tool
  dispatcher turns them into :class:`ToolError` and the CLI into :class:`UserError`.
- :class:`WriteRefused` is the disk saying no (full, over quota, read-only): found wherever
  it is raised by :func:`write_refused`, it ends a command with its own exit code.
- Anything else that escapes is a bug.
"""

from __future__ import annotations

import errno
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any


class RsilabError(Exception):
    """Root of every error rsilab raises on purpose."""


class UserError(RsilabError):
    """A problem a person can fix: the message says what is wrong, the hint what to do."""

    def __init__(self, message: str, hint: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return f"{self.message} (hint: {self.hint})" if self.hint else self.message


class LabError(UserError):
    """The lab folder or its database cannot be used as it is (missing, corrupt, newer, full)."""


class LabDamaged(LabError):
    """The lab's database is damaged: pages SQLite cannot read, or a stored row that does not
    parse. ``table`` and ``row`` name where, when that is known; ``rsilab verify`` reports it
    as a verification failure, and the cure is a backup."""

    def __init__(
        self, message: str, hint: str = "", *, table: str | None = None, row: str | None = None
    ) -> None:
        super().__init__(message, hint)
        self.table = table
        self.row = row


REFUSALS = {
    errno.ENOSPC: "no space left on the device",
    errno.EDQUOT: "the disk quota is spent",
    errno.EROFS: "the filesystem is read-only",
}
"""The errnos of a disk that refuses writes, each as a person reads it."""


class WriteRefused(LabError):
    """The disk refused a write: no space left (ENOSPC), a quota spent (EDQUOT) or a
    read-only filesystem (EROFS). ``path`` is what could not be written (``None`` when only
    the message names it), ``code`` the errno and ``remedy`` what makes the disk take writes
    again. The write that failed is the only loss: what was recorded before it stays, and a
    command run again (``rsilab resume`` for a campaign) goes on once space is freed."""

    def __init__(
        self,
        message: str,
        *,
        path: str | None = None,
        code: int = errno.ENOSPC,
        remedy: str = "",
        then: str = "run the command again (what was recorded before is kept)",
    ) -> None:
        self.remedy = remedy or _remedy(_mount(path) if path else None, code)
        super().__init__(message, f"{self.remedy}, then {then}")
        self.path = path
        self.code = code

    @classmethod
    def of(
        cls, path: str | os.PathLike[str] | None, code: int, said: str = "", *, note: str = ""
    ) -> WriteRefused:
        """The error for a refused write of ``path`` with ``code``, naming the filesystem and
        its free space (``said``: the message when no path is known, e.g. a tool's output;
        ``note``: what it means for the data, appended)."""
        reason = REFUSALS.get(code, os.strerror(code))
        tail = f"; {note}" if note else ""
        if path is None:
            said = " ".join(said.split())
            said = said if len(said) <= _SAID else said[: _SAID - 3] + "..."
            return cls(f"a write was refused: {reason} ({said}){tail}", code=code)
        shown = str(path)
        message = f"cannot write {shown}: {reason}{_filesystem(shown)}{tail}"
        return cls(message, path=shown, code=code)

    def then(self, step: str) -> WriteRefused:
        """This error, its hint saying to run ``step`` once the disk takes writes again."""
        return WriteRefused(
            self.message, path=self.path, code=self.code, remedy=self.remedy, then=step
        )


_SAID = 300
"""At most this many characters of a tool's own message in a WriteRefused's one line."""


def _remedy(mount: str | None, code: int) -> str:
    where = f" on {mount}" if mount else ""
    if code == errno.EROFS:
        return f"make the filesystem{where} writable again"
    if code == errno.EDQUOT:
        return f"free space{where} or raise the disk quota"
    return f"free space{where}"


def _mount(path: str) -> str | None:
    """The mount point holding ``path`` (its nearest existing folder), ``None`` if unknown."""
    try:
        here = Path(os.path.abspath(path))
        while not here.exists() and here != here.parent:
            here = here.parent
        while not os.path.ismount(here) and here != here.parent:
            here = here.parent
    except OSError:
        return None
    return str(here)


def _filesystem(path: str) -> str:
    """' (the filesystem at M has N MiB free)', or '' when it cannot be told."""
    mount = _mount(path)
    if mount is None:
        return ""
    try:
        found = os.statvfs(mount)
    except OSError:
        return f" (on the filesystem at {mount})"
    free = found.f_bavail * found.f_frsize
    return f" (the filesystem at {mount} has {free / 2**20:.1f} MiB free)"


def write_refused(exc: BaseException) -> WriteRefused | None:
    """The :class:`WriteRefused` that ``exc`` is or was caused by, wherever in its chain
    (``raise ... from``, an error raised while handling another, each entry of a
    ``shutil.Error``), or that an OSError with a refusing errno or a tool's message naming
    one (``No space left on device``) in that chain stands for; ``None`` when it is none."""
    chain = list(_chain(exc))
    for found in chain:  # what names its path or errno first: it says more than a message
        named = _named_refusal(found)
        if named is not None:
            return named
    for found in chain:
        said = str(found)
        code = next((c for c in REFUSALS if os.strerror(c) in said), None)
        if code is not None:
            return WriteRefused.of(None, code, said)
    return None


def _named_refusal(found: BaseException) -> WriteRefused | None:
    if isinstance(found, WriteRefused):
        return found
    if isinstance(found, shutil.Error) and found.args and isinstance(found.args[0], list):
        for entry in found.args[0]:
            if isinstance(entry, tuple) and len(entry) == 3:  # (source, target, why)
                code = next((c for c in REFUSALS if os.strerror(c) in str(entry[2])), None)
                if code is not None:
                    return WriteRefused.of(str(entry[1]), code)
    if isinstance(found, OSError) and found.errno in REFUSALS:
        return WriteRefused.of(found.filename, found.errno)
    if getattr(found, "sqlite_errorname", None) == "SQLITE_FULL":  # sqlite3's, unexplained
        return WriteRefused.of(None, errno.ENOSPC, str(found))
    return None


def _chain(exc: BaseException) -> Iterator[BaseException]:
    """``exc``, then its causes and contexts, each once (a chain may loop)."""
    seen: set[int] = set()
    todo = [exc]
    while todo and len(seen) < 64:
        found = todo.pop(0)
        if id(found) in seen:
            continue
        seen.add(id(found))
        yield found
        todo.extend(e for e in (found.__cause__, found.__context__) if e is not None)


class NotFoundError(RsilabError):
    """A record, artifact or event that was asked for does not exist."""

    def __init__(self, what: str, ident: str) -> None:
        super().__init__(f"{what} {ident!r} not found")
        self.what = what
        self.ident = ident


class ConflictError(RsilabError):
    """A write breaks a record contract (finished records are immutable, revisions must match)."""


class ToolError(RsilabError):
    """A tool call that failed; the agent sees :meth:`to_dict` and may try again.

    Attributes:
        code: a stable machine-readable reason: ``unknown_tool``, ``permission_denied``
            (the role may not call the tool), ``invalid_arguments``, ``not_found``,
            ``conflict``, ``guard_refused`` (a protocol guard refused), ``no_campaign``,
            ``tool_failed``, ``budget_exhausted`` (the campaign's budget is spent),
            ``lab_unavailable`` (the lab could not record the call), ``rate_limited`` (a
            caller polled too fast; the message says when to retry), ``message_refused``
            (an MCP message refused at the wire, in the ledger only: the client gets a
            JSON-RPC error) and ``internal_error`` (a bug in rsilab).
        message: what went wrong, in words an LLM can act on.
        field: the argument at fault, as a dotted path, when there is one.
        expected: what that argument should have been.
    """

    def __init__(
        self,
        code: str,
        message: str,
        *,
        field: str | None = None,
        expected: str | None = None,
        details: list[dict[str, Any]] | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.field = field
        self.expected = expected
        self.details = details or []

    def to_dict(self) -> dict[str, Any]:
        """The JSON-safe form sent to agents and stored in the ledger."""
        out: dict[str, Any] = {"error": self.code, "message": self.message}
        if self.field is not None:
            out["field"] = self.field
        if self.expected is not None:
            out["expected"] = self.expected
        if self.details:
            out["details"] = self.details
        return out
