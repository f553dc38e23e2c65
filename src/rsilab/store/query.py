"""Filter semantics shared by backends that filter in Python."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


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
