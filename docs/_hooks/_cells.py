"""Text for a cell of a Markdown table."""

from __future__ import annotations


def cell(text: str) -> str:
    """One line, with ``|`` escaped outside code spans (the table extension leaves code spans
    whole, and an escape inside one would show)."""
    parts = " ".join(text.split()).split("`")
    return "`".join(p if i % 2 else p.replace("|", "\\|") for i, p in enumerate(parts))
