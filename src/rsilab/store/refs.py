"""Which record fields name stored blobs: the promises ``verify`` checks and ``gc`` respects.

:func:`blob_refs` lists the fields whose value is the address of a blob rsilab stored (a file
or a tree manifest); each such blob must be in the lab's blob folder, or have been removed on
purpose by garbage collection (a :class:`~rsilab.records.Tombstone` names it). Hashes that are
only fingerprints (``Lineage.private_data_sha256``, ``JobInputs.data_sha256``, ledger digests)
are not listed: nothing promises their bytes were kept. :func:`mentioned_hashes` is the
conservative superset: every sha256-shaped string anywhere in a record's text.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Literal

from rsilab.records import (
    Artifact,
    Candidate,
    Dataset,
    Experiment,
    Job,
    Record,
    SystemVersion,
)

BlobKind = Literal["file", "tree"]

_SHA256 = re.compile(r"(?<![0-9a-f])[0-9a-f]{64}(?![0-9a-f])")
TREE_PREFIX = b'{"tree":['
"""How every stored tree manifest begins (canonical JSON of ``{"tree": [...]}``)."""


@dataclass(frozen=True)
class BlobRef:
    """One record field that names a stored blob."""

    sha256: str
    kind: BlobKind
    record_id: str
    field: str


def blob_refs(record: Record) -> list[BlobRef]:
    """The blobs ``record`` promises are stored, with their kind; empty for other kinds."""
    found: list[tuple[str | None, BlobKind, str]] = []
    if isinstance(record, Artifact):
        found.append((record.sha256, record.artifact_kind, "sha256"))
    elif isinstance(record, Dataset):
        found.append((record.artifact_sha256, record.artifact_kind, "artifact_sha256"))
    elif isinstance(record, Experiment):
        found.append((record.workspace_hash, "tree", "workspace_hash"))
        found += [(sha, "file", f"log_artifacts.{i}") for i, sha in enumerate(record.log_artifacts)]
    elif isinstance(record, Job):
        found += [
            (record.inputs.workspace_sha256, "tree", "inputs.workspace_sha256"),
            (record.inputs.model_in_sha256, "file", "inputs.model_in_sha256"),
            (record.model_out_sha256, "file", "model_out_sha256"),
            (record.stdout_sha256, "file", "stdout_sha256"),
            (record.stderr_sha256, "file", "stderr_sha256"),
        ]
    elif isinstance(record, Candidate):
        found.append((record.harness_sha256, "tree", "harness_sha256"))
    elif isinstance(record, SystemVersion):
        found += [
            (record.harness_sha256, "tree", "harness_sha256"),
            (record.model_sha256, "file", "model_sha256"),
        ]
        found += [(sha, "file", f"model_sha256s.{i}") for i, sha in enumerate(record.model_sha256s)]
    return [BlobRef(sha, kind, record.id, name) for sha, kind, name in found if sha]


def mentioned_hashes(text: str) -> set[str]:
    """Every lowercase sha256-shaped string in ``text`` (a record's JSON, say)."""
    return set(_SHA256.findall(text))


def manifest_files(data: bytes) -> list[str] | None:
    """The file addresses a tree manifest lists, or None when ``data`` is no manifest."""
    if not data.startswith(TREE_PREFIX):
        return None
    try:
        entries = json.loads(data)["tree"]
        return [str(e["sha256"]) for e in entries if isinstance(e, dict) and "sha256" in e]
    except (ValueError, KeyError, TypeError):
        return None
