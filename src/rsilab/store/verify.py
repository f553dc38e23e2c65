"""Verify a lab: the ledger, its records and checkpoints (with the watermark kept outside the
lab), and optionally that every stored artifact the records name is present and intact."""

from __future__ import annotations

import json

from rsilab.records import Artifact, Dataset
from rsilab.store import keys
from rsilab.store.artifacts import ArtifactStore
from rsilab.store.base import Store
from rsilab.store.ledger import VerifyReport, verify_ledger


def verify_store(
    store: Store,
    key: bytes | None = None,
    *,
    artifacts: ArtifactStore | None = None,
    deep: bool = False,
) -> VerifyReport:
    """Full verification; ``key`` defaults to the lab's key found by :mod:`rsilab.store.keys`.

    With ``artifacts``, every blob named by an artifact or dataset record (and every file of a
    stored tree) must exist; with ``deep`` too, each is re-hashed against its address.
    """
    key = key if key is not None else keys.load_key(store.lab_id)
    checkpoints = store.checkpoints()
    watermark = keys.load_watermark(store.lab_id)
    if watermark is not None and all(cp.seq != watermark.seq for cp in checkpoints):
        checkpoints.append(watermark)
    checkpoints.sort(key=lambda cp: cp.seq)
    report = verify_ledger(
        store.stored_events(),
        store.stored_records(),
        checkpoints,
        key=key,
        lab_id=store.lab_id,
    )
    if artifacts is not None and report.ok:
        _check_artifacts(store, artifacts, deep, report)
    return report


def _named_blobs(store: Store) -> dict[str, str]:
    """Every (address -> kind) a record names."""
    named: dict[str, str] = {}
    for art in store.query_as(Artifact):
        named[art.sha256] = art.artifact_kind
    for ds in store.query_as(Dataset):
        named[ds.artifact_sha256] = ds.artifact_kind
    return named


def _check_artifacts(
    store: Store, artifacts: ArtifactStore, deep: bool, report: VerifyReport
) -> None:
    pending = _named_blobs(store)
    seen: set[str] = set()
    while pending:
        sha, kind = pending.popitem()
        if sha in seen:
            continue
        seen.add(sha)
        if not artifacts.has(sha):
            report.fail(None, f"artifact {sha}: missing from the lab's blob folder (deleted)")
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
                    pending.setdefault(str(entry["sha256"]), "file")
