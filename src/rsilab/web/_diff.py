"""The difference between two stored workspace trees, file by file, as unified diffs.

Trees are the artifact store's manifests (path, sha256, mode); only files whose content
differs are read. Text files get a unified diff; a file that is not UTF-8 text, or is larger
than :data:`MAX_TEXT_BYTES`, is named with its sizes only.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from typing import Any

from rsilab.errors import NotFoundError
from rsilab.store.artifacts import ArtifactStore

MAX_TEXT_BYTES = 256 * 1024
"""Larger files are not diffed line by line."""


@dataclass(frozen=True)
class FileChange:
    """One file that differs between two trees."""

    path: str
    status: str
    """added, removed, modified or mode."""
    diff: str
    """Unified diff text; '' when the file is not diffable text (see ``note``)."""
    note: str = ""


def _entries(artifacts: ArtifactStore, sha: str | None) -> dict[str, dict[str, Any]]:
    if sha is None:
        return {}
    return {str(e["path"]): e for e in artifacts.manifest(sha)}


def _text(artifacts: ArtifactStore, entry: dict[str, Any] | None) -> str | None:
    """The file's text, '' for an absent file, None when it is not small UTF-8 text."""
    if entry is None:
        return ""
    if "link" in entry:
        return f"-> {entry['link']}\n"
    if int(entry.get("size", 0)) > MAX_TEXT_BYTES:
        return None
    try:
        return artifacts.read_bytes(str(entry["sha256"])).decode("utf-8")
    except (UnicodeDecodeError, NotFoundError):
        return None


def _same(a: dict[str, Any], b: dict[str, Any]) -> bool:
    return a.get("sha256") == b.get("sha256") and a.get("link") == b.get("link")


def tree_changes(artifacts: ArtifactStore, old: str | None, new: str | None) -> list[FileChange]:
    """The files that differ from tree ``old`` to tree ``new`` (None: an empty tree), by path.

    Raises NotFoundError when a tree's manifest is not in the store (collected by gc).
    """
    before, after = _entries(artifacts, old), _entries(artifacts, new)
    out = []
    for path in sorted(before.keys() | after.keys()):
        a, b = before.get(path), after.get(path)
        if a is not None and b is not None and _same(a, b):
            if a.get("mode") != b.get("mode"):
                out.append(
                    FileChange(path, "mode", "", f"mode {a.get('mode'):o} -> {b.get('mode'):o}")
                )
            continue
        status = "added" if a is None else "removed" if b is None else "modified"
        old_text, new_text = _text(artifacts, a), _text(artifacts, b)
        if old_text is None or new_text is None:
            sizes = f"{(a or {}).get('size', 0)} -> {(b or {}).get('size', 0)} bytes"
            out.append(FileChange(path, status, "", f"binary or large file, {sizes}"))
            continue
        diff = "".join(
            difflib.unified_diff(
                old_text.splitlines(keepends=True),
                new_text.splitlines(keepends=True),
                fromfile=f"a/{path}" if a is not None else "/dev/null",
                tofile=f"b/{path}" if b is not None else "/dev/null",
            )
        )
        out.append(FileChange(path, status, diff))
    return out
