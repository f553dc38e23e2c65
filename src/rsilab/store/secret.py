"""The identity of a lab's task secret, kept in its ledger.

The secret (``<lab>/task-secret``, see :mod:`rsilab.tasks._secret`) draws every private tier,
so a lab whose file was replaced scores against other items than its versions were scored
on. Its *fingerprint*, an HMAC of the secret under the ledger key (so the ledger, which
agents may read, reveals nothing of it, and no one without the key can make one), is
recorded in the ledger by a ``task_secret_recorded`` event when the secret is first used.
The first such event is the one that counts. A run and ``rsilab verify`` compare the file
with it, and name a replaced or missing secret as such.
"""

from __future__ import annotations

import hashlib
import hmac
from dataclasses import dataclass
from pathlib import Path

from rsilab.errors import LabError
from rsilab.records import EventDraft, Role
from rsilab.store.base import Store, StoreReader

SECRET_FILE = "task-secret"
"""The secret's file name in the lab folder."""

SECRET_ACTION = "task_secret_recorded"
"""The action of the event that records the secret's fingerprint."""

_PREFIX = "fingerprint hmac-sha256:"
_PAGE = 2000


@dataclass(frozen=True)
class SecretMark:
    """The fingerprint of the task secret as event ``seq`` recorded it."""

    seq: int
    fingerprint: str


def secret_fingerprint(key: bytes, lab_id: str, secret: bytes) -> str:
    """HMAC-SHA256 of the secret under the ledger key, bound to the lab."""
    message = f"rsilab-task-secret\n{lab_id}\n{secret.hex()}".encode()
    return hmac.new(key, message, hashlib.sha256).hexdigest()


def read_secret(path: Path) -> bytes:
    """The secret in ``path`` (64 hex digits).

    Raises:
        LabError: the file cannot be read or does not hold 64 hex digits.
    """
    try:
        text = path.read_text().strip()
        if len(text) != 64:
            raise ValueError("wrong length")
        return bytes.fromhex(text)
    except (OSError, ValueError) as exc:
        raise LabError(
            f"the task secret {path} is unreadable or damaged ({exc})",
            "restore it from a backup; splits drawn with another secret are not comparable",
        ) from exc


def recorded_secret(store: StoreReader) -> SecretMark | None:
    """The first fingerprint the ledger recorded, or None (a lab that never drew with its
    secret, or one from before rsilab recorded it). Reads events in pages until found."""
    after, size = 0, 16  # it is usually among the first events: small pages at first
    while page := store.events(after=after, limit=size):
        for event in page:
            if event.action == SECRET_ACTION and event.detail.startswith(_PREFIX):
                return SecretMark(event.seq, event.detail.removeprefix(_PREFIX))
        after, size = page[-1].seq, min(size * 4, _PAGE)
    return None


def record_secret(store: Store, key: bytes, secret: bytes) -> SecretMark:
    """Append the event recording ``secret``'s fingerprint; the mark it made."""
    fingerprint = secret_fingerprint(key, store.lab_id, secret)
    draft = EventDraft(
        actor="controller",
        role=str(Role.CONTROLLER),
        action=SECRET_ACTION,
        detail=_PREFIX + fingerprint,
    )
    return SecretMark(store.commit(draft).seq, fingerprint)


def secret_problem(folder: Path, mark: SecretMark, key: bytes, lab_id: str) -> str | None:
    """What is wrong with the task secret in ``folder`` against the fingerprint ``mark``
    records, in one sentence; None when it is the secret recorded."""
    path = folder / SECRET_FILE
    if not path.exists():
        return (
            f"the task secret {path} is missing, but event {mark.seq} recorded it: the private "
            "tiers of the lab's versions were drawn with it (deleted?)"
        )
    try:
        secret = read_secret(path)
    except LabError as exc:
        return exc.message
    if not hmac.compare_digest(secret_fingerprint(key, lab_id, secret), mark.fingerprint):
        return (
            f"the task secret {path} is not the one event {mark.seq} recorded (replaced): it "
            "draws other private tiers than the lab's versions were scored on"
        )
    return None
