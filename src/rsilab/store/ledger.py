"""The hash-chained ledger: canonical bytes, event hashes, HMAC checkpoints and verification.

Each event is stored as canonical JSON text (RFC 8785: sorted keys, fixed number format,
UTF-8) with the hash of the previous event inside it; its own hash is the sha256 of that
text. Every backend stores and hashes the same bytes. Checkpoints carry an HMAC of
``(lab id, sequence, head hash)`` under a key kept outside the lab (see :mod:`.keys`): one is
kept in the lab every :data:`~rsilab.store.base.CHECKPOINT_INTERVAL` events, and one for every
committed event (the *watermark*) beside the key, so a cut-off tail, a tail rewritten with
re-chained hashes, or a chain rebuilt from scratch by someone without the key is caught.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import rfc8785

from rsilab.records import Event, EventDraft, Record, RecordRef, utc_now

GENESIS_HASH = "0" * 64
"""``prev_hash`` of the first event."""


def canonical_json(value: Any) -> str:
    """RFC 8785 canonical JSON text of a JSON-compatible value."""
    return rfc8785.dumps(value).decode("utf-8")


def sha256_text(text: str) -> str:
    """Hex sha256 of UTF-8 text."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def record_text(record: Record) -> str:
    """The canonical text a store keeps for a record; its sha256 is the record's digest."""
    return canonical_json(record.model_dump(mode="json"))


def args_digest(args: Any) -> str:
    """sha256 of the canonical form of tool arguments (non-JSON values are stringified)."""
    try:
        return sha256_text(canonical_json(args))
    except Exception:  # arguments from an LLM can be anything; the digest must never fail
        try:
            return sha256_text(repr(args))
        except Exception:  # repr fails too on values nested past the recursion limit
            return sha256_text(f"<unrepresentable {type(args).__name__}>")


@dataclass(frozen=True)
class StoredEvent:
    """An event as a backend holds it: its text and the hash stored beside it."""

    seq: int
    hash: str
    text: str


@dataclass(frozen=True)
class StoredRecord:
    """A record as a backend holds it."""

    id: str
    kind: str
    rev: int
    text: str


@dataclass(frozen=True)
class Checkpoint:
    """A signed statement that the ledger had ``seq`` events ending in ``head_hash``."""

    seq: int
    head_hash: str
    mac: str
    at: str


def build_event(
    draft: EventDraft, seq: int, prev_hash: str, refs: Sequence[RecordRef]
) -> tuple[Event, StoredEvent]:
    """Seal a draft as event ``seq`` after ``prev_hash``; return the model and its stored form."""
    event = Event(
        **draft.model_dump(), seq=seq, at=utc_now(), records=list(refs), prev_hash=prev_hash
    )
    text = canonical_json(event.model_dump(mode="json"))
    return event, StoredEvent(seq=seq, hash=sha256_text(text), text=text)


def checkpoint_mac(key: bytes, lab_id: str, seq: int, head_hash: str) -> str:
    """HMAC-SHA256 over the lab id, sequence and head hash."""
    message = f"rsilab-checkpoint\n{lab_id}\n{seq}\n{head_hash}".encode()
    return hmac.new(key, message, hashlib.sha256).hexdigest()


def make_checkpoint(key: bytes, lab_id: str, seq: int, head_hash: str) -> Checkpoint:
    """A checkpoint for the given head, signed with ``key``."""
    return Checkpoint(seq, head_hash, checkpoint_mac(key, lab_id, seq, head_hash), utc_now())


@dataclass
class VerifyReport:
    """Outcome of :func:`verify_ledger`.

    ``problems`` make the ledger untrustworthy (the first names the first bad event);
    ``warnings`` limit what could be checked (for example, no key to check checkpoints).
    """

    events: int = 0
    head_hash: str = GENESIS_HASH
    records_checked: int = 0
    checkpoints_checked: int = 0
    checkpoints_unchecked: int = 0
    """Signed checkpoints that could not be checked (the ledger key was not found): the chain
    holds together, but a ledger rebuilt from scratch or cut short could not be told apart."""
    key_missing: bool = False
    """True when no ledger key was found, so no checkpoint, stored or not, was checked."""
    artifacts_checked: int = 0
    problems: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    first_bad_seq: int | None = None

    @property
    def ok(self) -> bool:
        """Nothing found wrong (which, without the key, is less than everything checked)."""
        return not self.problems

    @property
    def complete(self) -> bool:
        """Nothing found wrong *and* the signed checkpoints were checked with the key."""
        return self.ok and not self.key_missing

    def fail(self, seq: int | None, message: str) -> None:
        if seq is not None and self.first_bad_seq is None:
            self.first_bad_seq = seq
        self.problems.append(message)


def _check_chain(rows: Iterable[StoredEvent], report: VerifyReport) -> dict[str, RecordRef]:
    """Walk the chain; return the latest ref of every record. Stops at the first break."""
    latest: dict[str, RecordRef] = {}
    prev_hash, expected_seq = GENESIS_HASH, 1
    for row in rows:
        if row.seq != expected_seq:
            what = "removed" if row.seq > expected_seq else "inserted or duplicated"
            report.fail(
                expected_seq if row.seq > expected_seq else row.seq,
                f"event {expected_seq}: sequence jumps to {row.seq} (events {what})",
            )
            return latest
        if sha256_text(row.text) != row.hash:
            report.fail(row.seq, f"event {row.seq}: content does not match its hash (edited)")
            return latest
        try:
            body = json.loads(row.text)
            event = Event.model_validate(body)
        except Exception as exc:
            report.fail(row.seq, f"event {row.seq}: not a valid event ({exc.__class__.__name__})")
            return latest
        if event.seq != row.seq or event.prev_hash != prev_hash:
            report.fail(
                row.seq,
                f"event {row.seq}: does not follow event {row.seq - 1} "
                "(an event before it was edited, inserted or removed)",
            )
            return latest
        for ref in event.records:
            latest[ref.id] = ref
        prev_hash, expected_seq = row.hash, expected_seq + 1
        report.events, report.head_hash = row.seq, row.hash
    return latest


def _check_records(
    records: Iterator[StoredRecord], latest: dict[str, RecordRef], report: VerifyReport
) -> None:
    for rec in records:
        report.records_checked += 1
        ref = latest.get(rec.id)
        if ref is None:
            report.fail(None, f"record {rec.id}: no event in the ledger wrote it (inserted)")
        elif ref.rev != rec.rev or ref.digest != sha256_text(rec.text):
            report.fail(
                None,
                f"record {rec.id}: differs from what event-recorded revision {ref.rev} "
                "wrote (edited outside rsilab)",
            )
        latest.pop(rec.id, None)
    for missing in sorted(latest):
        report.fail(None, f"record {missing}: written by the ledger but missing (deleted)")


def _check_checkpoints(
    checkpoints: Sequence[Checkpoint],
    hashes: dict[int, str],
    key: bytes | None,
    lab_id: str,
    report: VerifyReport,
) -> None:
    if key is None:
        # Not a pass: without the key a chain rebuilt from scratch verifies too, so the caller
        # must say the verification is incomplete (``rsilab verify`` exits 1 on it).
        report.key_missing = True
        report.checkpoints_unchecked = len(checkpoints)
        report.warnings.append(
            f"{len(checkpoints)} checkpoint(s) not checked: the ledger key was not found "
            "(set RSILAB_LEDGER_KEY or RSILAB_KEY_DIR to where the lab's key is kept)"
        )
        return
    for cp in checkpoints:
        if not hmac.compare_digest(cp.mac, checkpoint_mac(key, lab_id, cp.seq, cp.head_hash)):
            report.fail(cp.seq, f"checkpoint at event {cp.seq}: signature invalid (forged)")
            return
        if cp.seq > report.events:
            report.fail(
                report.events + 1,
                f"ledger ends at event {report.events} but a signed checkpoint records "
                f"event {cp.seq}: events after {report.events} were removed",
            )
            return
        if hashes.get(cp.seq) != cp.head_hash:
            report.fail(
                cp.seq,
                f"event {cp.seq}: differs from the signed checkpoint (chain rewritten)",
            )
            return
        report.checkpoints_checked += 1
    signed = max((cp.seq for cp in checkpoints), default=0)
    if report.events > signed:
        # Not a failure: every commit raises the watermark, but a writer killed between its
        # commit and that mark, a writer using another key folder, or an older rsilab leaves
        # events after it; what stands there could also have been appended by someone else.
        report.warnings.append(
            f"events {signed + 1}..{report.events} come after the last signed checkpoint: "
            "they are hash-chained but an append there could not be told from a real one"
        )


def verify_ledger(
    events: Iterable[StoredEvent],
    records: Iterator[StoredRecord],
    checkpoints: Sequence[Checkpoint],
    *,
    key: bytes | None,
    lab_id: str,
) -> VerifyReport:
    """Check the chain, every record against its last event, and every checkpoint.

    ``checkpoints`` should include the watermark kept outside the lab, if any, so a tail cut
    together with its in-lab checkpoints is still caught.
    """
    report = VerifyReport()
    hashes: dict[int, str] = {}

    def remember(rows: Iterable[StoredEvent]) -> Iterator[StoredEvent]:
        for row in rows:
            hashes[row.seq] = row.hash
            yield row

    latest = _check_chain(remember(events), report)
    if report.ok:
        _check_records(records, latest, report)
    if report.ok:
        _check_checkpoints(checkpoints, hashes, key, lab_id, report)
    return report
