"""Filter semantics shared by backends that filter in Python."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from rsilab.records import Record, record_type


def record_matches(
    body: Mapping[str, Any],
    text_form: str,
    campaign_id: str | None,
    fields: Mapping[str, Any] | None,
    text: str | None,
) -> bool:
    """True when a record's JSON body passes every given filter (see ``Store.query``)."""
    if campaign_id is not None and body.get("campaign_id") != campaign_id:
        return False
    if fields:
        for name, wanted in fields.items():
            if body.get(name) != wanted:
                return False
    return not (text and text.lower() not in text_form.lower())


def matching_records(
    rows: Iterable[tuple[str, str]],
    *,
    kind: str | None,
    campaign_id: str | None,
    fields: Mapping[str, Any] | None,
    text: str | None,
    limit: int | None,
) -> list[Record]:
    """Parse ``(kind, canonical text)`` rows in order, keeping those that pass every filter."""
    out: list[Record] = []
    for row_kind, body_text in rows:
        if limit is not None and len(out) >= limit:
            break
        if kind is not None and row_kind != kind:
            continue
        body = json.loads(body_text)
        if record_matches(body, body_text, campaign_id, fields, text):
            out.append(record_type(row_kind).model_validate(body))
    return out
