"""Verify a lab: the database file itself, the ledger, its records and checkpoints (with the
watermark kept outside the lab), that every record parses as its kind, and optionally that
every stored artifact the records name is present and intact."""

from __future__ import annotations

import json
from pathlib import Path

from rsilab.errors import LabDamaged
from rsilab.records import (
    Artifact,
    Candidate,
    Dataset,
    Experiment,
    Job,
    Record,
    SystemVersion,
    Tombstone,
    kind_of_id,
    record_type,
)
from rsilab.store import keys
from rsilab.store.artifacts import ArtifactStore
from rsilab.store.base import StoreReader
from rsilab.store.ledger import VerifyReport, verify_ledger
from rsilab.store.refs import BlobKind, BlobRef, blob_refs
from rsilab.store.secret import SECRET_FILE, recorded_secret, secret_problem
from rsilab.store.sqlite import SQLiteStore

_REFERRING: tuple[type[Record], ...] = (
    Artifact,
    Dataset,
    Experiment,
    Job,
    Candidate,
    SystemVersion,
)
"""Record types with fields that name stored blobs (see :func:`rsilab.store.refs.blob_refs`)."""


def verify_store(
    store: StoreReader,
    key: bytes | None = None,
    *,
    artifacts: ArtifactStore | None = None,
    deep: bool = False,
    key_dir: Path | None = None,
) -> VerifyReport:
    """Full verification; ``key`` defaults to the lab's key found by :mod:`rsilab.store.keys`
    (in ``key_dir`` when given, as for a backup's copy of its key folder).

    A damaged database (pages SQLite's own check finds broken, a row that does not parse as
    its kind, or a row stored under a kind its id does not have) is a problem, not an error.
    With ``artifacts``, the lab's task secret in its folder must be the one whose fingerprint
    the ledger recorded (:mod:`rsilab.store.secret`; without the key it cannot be checked), and
    every blob a record names (see :func:`rsilab.store.refs.blob_refs`),
    and every file of a stored tree, must exist, unless a :class:`~rsilab.records.Tombstone`
    says garbage collection removed it before any record naming it was last written; a blob
    missing without a tombstone, or named by a record written after its removal, is a
    problem. With ``deep`` too, each present blob is re-hashed against its address.
    """
    try:
        return _verify(store, key, artifacts, deep, key_dir)
    except LabDamaged as exc:  # a page the checks above could not read past
        report = VerifyReport()
        report.fail(None, exc.message)
        return report


def _verify(
    store: StoreReader,
    key: bytes | None,
    artifacts: ArtifactStore | None,
    deep: bool,
    key_dir: Path | None,
) -> VerifyReport:
    if isinstance(store, SQLiteStore):
        damaged = store.damage()
        if damaged:
            report = VerifyReport()
            for problem in damaged:
                report.fail(None, f"{store.path} is damaged: {problem}")
            return report
    key = key if key is not None else keys.load_key(store.lab_id, key_dir)
    checkpoints = store.checkpoints()
    watermark = keys.load_watermark(store.lab_id, key_dir)
    same = [(cp.seq, cp.head_hash, cp.mac) for cp in checkpoints]
    # even beside an in-lab checkpoint of its seq, unless it says the same: both must hold
    if watermark is not None and (watermark.seq, watermark.head_hash, watermark.mac) not in same:
        checkpoints.append(watermark)
    checkpoints.sort(key=lambda cp: cp.seq)
    report = verify_ledger(
        store.stored_events(),
        store.stored_records(),
        checkpoints,
        key=key,
        lab_id=store.lab_id,
    )
    if report.ok:
        _check_parsing(store, report)
    if artifacts is not None and report.ok and key is not None:
        _check_secret(store, artifacts.root, key, report)
    if artifacts is not None and report.ok:
        _check_artifacts(store, artifacts, deep, report)
    return report


def _check_secret(store: StoreReader, folder: Path, key: bytes, report: VerifyReport) -> None:
    mark = recorded_secret(store)
    if mark is not None:
        problem = secret_problem(folder, mark, key, store.lab_id)
        if problem is not None:
            report.fail(None, problem)
    elif (folder / SECRET_FILE).exists():
        report.warnings.append(
            f"the fingerprint of the task secret {folder / SECRET_FILE} is not in the ledger "
            "(a lab from before rsilab recorded it), so a replaced secret could not be told; "
            "the next run records it"
        )


def _check_parsing(store: StoreReader, report: VerifyReport) -> None:
    """Every stored record parses as the kind it is stored under, which its id names (the
    ledger's digests cover a record's text, not the kind column beside it)."""
    for stored in store.stored_records():
        where = f"record {stored.id} (table records, stored as kind {stored.kind!r})"
        expected = kind_of_id(stored.id)
        if expected != stored.kind:
            report.fail(None, f"{where}: its id is of kind {expected!r} (edited outside rsilab)")
            continue
        try:
            record_type(stored.kind).model_validate_json(stored.text)
        except (ValueError, KeyError) as exc:
            report.fail(None, f"{where}: does not parse ({type(exc).__name__})")


def _named_blobs(store: StoreReader) -> dict[str, tuple[BlobKind, list[BlobRef]]]:
    """Every address a record names -> (kind, the record fields that name it)."""
    named: dict[str, tuple[BlobKind, list[BlobRef]]] = {}
    for cls in _REFERRING:
        for record in store.query_as(cls):
            for ref in blob_refs(record):
                named.setdefault(ref.sha256, (ref.kind, []))[1].append(ref)
    return named


def _last_write(store: StoreReader, record_id: str) -> int:
    events = store.events(record_id=record_id)
    return events[-1].seq if events else 0


def _missing(
    store: StoreReader, sha: str, refs: list[BlobRef], tombstones: list[str]
) -> str | None:
    """Why a missing blob is a problem, or None when gc removed it before anything named it.

    A tombstone excuses the records written before its ``gc`` event; a record written after
    it names bytes that are gone, so the blob is lost, not collected.
    """
    where = f"named by {refs[0].record_id}.{refs[0].field}" if refs else "a file of a tree"
    if not tombstones:
        return (
            f"artifact {sha}: missing from the lab's blob folder (deleted, and no tombstone "
            f"says gc removed it); {where}"
        )
    removed_at = max(_last_write(store, t) for t in tombstones)
    late = [r for r in refs if _last_write(store, r.record_id) > removed_at]
    if late:
        return (
            f"artifact {sha}: removed by gc at event {removed_at}, but "
            f"{late[0].record_id}.{late[0].field} named it afterwards (lost, not collected)"
        )
    return None


def _check_artifacts(
    store: StoreReader, artifacts: ArtifactStore, deep: bool, report: VerifyReport
) -> None:
    collected: dict[str, list[str]] = {}
    for stone in store.query_as(Tombstone):
        collected.setdefault(stone.sha256, []).append(stone.id)
    pending = _named_blobs(store)
    seen: set[str] = set()
    while pending:
        sha, (kind, refs) = pending.popitem()
        if sha in seen:
            continue
        seen.add(sha)
        if not artifacts.has(sha):
            problem = _missing(store, sha, refs, collected.get(sha, []))
            if problem is not None:
                report.fail(None, problem)
            continue
        if deep and not artifacts.verify_blob(sha):
            report.fail(None, f"artifact {sha}: content no longer matches its hash (edited)")
            continue
        report.artifacts_checked += 1
        if kind == "tree":
            try:
                entries = json.loads(artifacts.read_bytes(sha))["tree"]
            except (ValueError, KeyError, TypeError):
                report.fail(None, f"artifact {sha}: not a readable tree manifest")
                continue
            for entry in entries:
                if "sha256" in entry:
                    pending.setdefault(str(entry["sha256"]), ("file", []))
