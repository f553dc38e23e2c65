"""Shared commit logic: check each write against the stored revision and build its ref.

Backends call :func:`stage_writes` inside their transaction, with a lookup that reads the
current stored revision, so the checks and the write see the same state.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from rsilab.errors import ConflictError
from rsilab.records import Record, RecordRef
from rsilab.store.ledger import record_text, sha256_text


@dataclass(frozen=True)
class StagedWrite:
    """A record ready to be written: the new revision, its text and its ledger ref."""

    record: Record
    text: str
    ref: RecordRef
    is_new: bool


def stage_writes(
    writes: Sequence[Record], load_current: Callable[[str], Record | None]
) -> list[StagedWrite]:
    """Check every write (new vs existing, revision, record contract) and stage it.

    Raises ConflictError on the first write that breaks a contract; nothing is modified.
    """
    staged: list[StagedWrite] = []
    seen: set[str] = set()
    for record in writes:
        if record.id in seen:
            raise ConflictError(f"{record.KIND} {record.id} is written twice in one commit")
        seen.add(record.id)
        current = load_current(record.id)
        if current is None and record.rev != 0:
            raise ConflictError(f"{record.KIND} {record.id} does not exist (revision {record.rev})")
        if current is not None:
            if record.rev == 0:
                raise ConflictError(f"{record.KIND} {record.id} already exists")
            if current.rev != record.rev:
                raise ConflictError(
                    f"{record.KIND} {record.id} was changed meanwhile (stored revision "
                    f"{current.rev}, written from revision {record.rev}); read it again"
                )
            if current.KIND != record.KIND:
                raise ConflictError(f"{record.id} is a {current.KIND}, not a {record.KIND}")
            record.check_update(current)
        new = record.model_copy(update={"rev": record.rev + 1})
        text = record_text(new)
        ref = RecordRef(kind=new.KIND, id=new.id, rev=new.rev, digest=sha256_text(text))
        staged.append(StagedWrite(new, text, ref, current is None))
    return staged


def apply_revisions(writes: Sequence[Record], staged: Sequence[StagedWrite]) -> None:
    """After a successful commit, bump the callers' objects to the stored revisions."""
    for record, done in zip(writes, staged, strict=True):
        record.rev = done.record.rev
