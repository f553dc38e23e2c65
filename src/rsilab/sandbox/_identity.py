"""Who jobs run as: a dedicated uid per lab, chosen once and recorded in the lab.

When rsilab runs as root, jobs run as an unprivileged uid that no account, daemon or
container on the host uses: one drawn from :data:`UID_RANGE` (above the ranges systemd hands
to containers, below its "foreign" range and below 2^31, where some tools misread uids), by
hashing the lab's id and stepping past any uid or gid the host names in ``/etc/passwd``,
``/etc/group``, ``/etc/subuid`` or ``/etc/subgid``. It is written to ``<lab>/sandbox-user.json``
on first use and read from there afterwards, so it stays the same even if the host later
names that uid: workspaces are owned by it for good. The group has the same number.

A sandbox made without a lab (``rsilab task check``, tests) draws a fresh unused uid of the
same range for itself (:func:`ephemeral_user`): what it makes lives only as long as it does.
Without root, jobs keep the caller's uid (:func:`caller`), in a user namespace.
"""

from __future__ import annotations

import contextlib
import grp
import hashlib
import json
import os
import pwd
import secrets
import tempfile
from dataclasses import dataclass
from pathlib import Path

from rsilab.errors import LabDamaged

UID_RANGE = range(0x7000_0000, 0x7FFE_0000)
"""Where sandbox uids are drawn from (1879048192 to 2147352575)."""
RECORD = "sandbox-user.json"
_TRIES = 256


@dataclass(frozen=True)
class SandboxUser:
    """The identity jobs run as (and workspaces belong to)."""

    uid: int
    gid: int

    @property
    def dedicated(self) -> bool:
        """Whether this is a sandbox uid (root's jobs), not the caller's own."""
        return self.uid in UID_RANGE


def caller() -> SandboxUser:
    """The calling user: who jobs run as without root."""
    return SandboxUser(os.getuid(), os.getgid())


def _subordinate_ranges() -> list[range]:
    found: list[range] = []
    for name in ("/etc/subuid", "/etc/subgid"):
        with contextlib.suppress(OSError):
            for line in Path(name).read_text().splitlines():
                parts = line.strip().split(":")
                if len(parts) == 3 and parts[1].isdigit() and parts[2].isdigit():
                    start, count = int(parts[1]), int(parts[2])
                    found.append(range(start, start + count))
    return found


def is_free(uid: int) -> bool:
    """True when no account, group or subordinate id range on this host uses ``uid``."""
    try:
        pwd.getpwuid(uid)
        return False
    except KeyError:
        pass
    try:
        grp.getgrgid(uid)
        return False
    except KeyError:
        pass
    return not any(uid in r for r in _subordinate_ranges())


def derive_uid(seed: str) -> int:
    """The first free uid of :data:`UID_RANGE` on the walk that ``seed`` picks.

    Raises:
        RuntimeError: no free uid after many tries (a host naming most of the range).
    """
    start = int.from_bytes(hashlib.sha256(f"rsilab-sandbox-uid\0{seed}".encode()).digest()[:8])
    for step in range(_TRIES):
        uid = UID_RANGE[(start + step * 7919) % len(UID_RANGE)]
        if is_free(uid):
            return uid
    raise RuntimeError(f"no free uid in {UID_RANGE.start}..{UID_RANGE.stop - 1}")


def ephemeral_user() -> SandboxUser:
    """A fresh unused uid (and gid) of :data:`UID_RANGE`, for a sandbox without a lab."""
    uid = derive_uid(secrets.token_hex(16))
    return SandboxUser(uid, uid)


def lab_user(lab: Path, lab_id: str) -> SandboxUser:
    """The lab's sandbox user: read from ``<lab>/sandbox-user.json``, or chosen from the
    lab's id and recorded there (atomically: of two processes choosing at once, both end up
    with the one recorded first).

    Raises:
        OSError: the record cannot be read or written.
        LabDamaged: the record is damaged or names a uid outside :data:`UID_RANGE`.
    """
    path = lab / RECORD
    if not path.exists():
        uid = derive_uid(lab_id)
        text = json.dumps({"uid": uid, "gid": uid, "lab_id": lab_id}) + "\n"
        fd, tmp = tempfile.mkstemp(prefix=".sandbox-user-", dir=lab)
        try:
            with os.fdopen(fd, "w") as handle:
                handle.write(text)
            os.chmod(tmp, 0o600)
            with contextlib.suppress(FileExistsError):
                os.link(tmp, path)
        finally:
            os.unlink(tmp)
    # the record was edited or damaged outside rsilab: say so in one line, with the way out
    # (the lab's id chooses the same uid again, so removing it loses nothing)
    fix = f"remove {path}; the next run records the lab's own sandbox user again"
    try:
        data = json.loads(path.read_text())
        user = SandboxUser(int(data["uid"]), int(data["gid"]))
    except (ValueError, TypeError, KeyError) as exc:
        raise LabDamaged(f"{path} is damaged ({type(exc).__name__}: {exc})", fix) from exc
    if not (user.dedicated and user.gid in UID_RANGE):
        raise LabDamaged(
            f"{path} names uid {user.uid} and gid {user.gid}, outside the sandbox range "
            f"{UID_RANGE.start}-{UID_RANGE.stop - 1} (jobs must not run as a real user)",
            fix,
        )
    return user
