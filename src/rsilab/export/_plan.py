"""What one exported run should hold, independent of where it is written.

A :class:`RunPlan` is built from the records alone (``_runs``) and written by a tracker
(``_mlflow``). Keeping the two apart means the plan can be checked without a tracker, and the
writer needs no knowledge of rsilab's records.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any

TAG_PREFIX = "rsilab."
RECORD_TAG = "rsilab.record_id"
"""The tag that names the record a run copies: how a re-export finds the run again."""
CAMPAIGN_TAG = "rsilab.campaign_id"
LAB_TAG = "rsilab.lab_id"
KIND_TAG = "rsilab.kind"
DIGEST_TAG = "rsilab.export_digest"
"""Digest of the plan last written whole to a run: equal digests mean nothing to write."""
HEAD_TAG = "rsilab.ledger_head"
"""``SEQ:HASH`` of the lab's ledger when the run was last written."""
COPY_TAG = "rsilab.copy_of"

_BAD_NAME_CHARS = re.compile(r"[^\w.\- :/]")
_SLASHES = re.compile(r"/{2,}")


class RunStatus(StrEnum):
    """A run's state in tracker terms (MLflow's names)."""

    RUNNING = "RUNNING"
    FINISHED = "FINISHED"
    FAILED = "FAILED"
    KILLED = "KILLED"


@dataclass(frozen=True)
class Point:
    """One metric value at one step; ``timestamp_ms`` is when rsilab recorded it."""

    key: str
    value: float
    step: int
    timestamp_ms: int


@dataclass
class RunPlan:
    """Everything one run should hold.

    ``points`` are values fixed once recorded (a dev score, a final-tier score): each is
    written once, whatever the number of exports. ``gauges`` are values that can still change
    (a running campaign's totals): a new value is written, at the ledger position of the
    export, only when it differs from the run's latest value of that key.
    """

    record_id: str
    kind: str
    name: str
    parent_record_id: str | None
    status: RunStatus
    start_ms: int
    end_ms: int | None
    params: dict[str, str] = field(default_factory=dict)
    tags: dict[str, str] = field(default_factory=dict)
    points: list[Point] = field(default_factory=list)
    gauges: dict[str, float] = field(default_factory=dict)

    def digest(self) -> str:
        """sha256 of everything the plan says, in a canonical order."""
        body = {
            "record": self.record_id,
            "kind": self.kind,
            "name": self.name,
            "parent": self.parent_record_id,
            "status": str(self.status),
            "start": self.start_ms,
            "end": self.end_ms,
            "params": sorted(self.params.items()),
            "tags": sorted(self.tags.items()),
            "points": sorted((p.key, p.step, p.timestamp_ms, p.value) for p in self.points),
            "gauges": sorted(self.gauges.items()),
        }
        return hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()


def millis(iso: str) -> int:
    """An ISO-8601 UTC time as stored in records (``...Z``) in milliseconds since the epoch."""
    return int(datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp() * 1000)


def metric_key(*parts: str) -> str:
    """A metric, param or tag key made of ``parts`` joined by ``/``, with characters MLflow
    refuses (anything but letters, digits, ``_ . - : /`` and spaces) replaced by ``_``."""
    joined = "/".join(_BAD_NAME_CHARS.sub("_", p).strip("/") or "_" for p in parts)
    return _SLASHES.sub("/", joined)


def text_value(value: Any) -> str:
    """A param or tag value as text: strings as they are, anything else as JSON."""
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True)


def flatten(values: Mapping[str, Any], prefix: str = "") -> dict[str, str]:
    """A nested mapping as ``a.b`` keys and text values (lists stay one JSON value)."""
    out: dict[str, str] = {}
    for name, value in values.items():
        key = f"{prefix}{name}"
        if isinstance(value, Mapping) and value:
            out.update(flatten(value, f"{key}."))
        else:
            out[metric_key(key)] = text_value(value)
    return out
