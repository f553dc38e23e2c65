"""The difference between two stored workspace trees, file by file, as unified diffs.

Trees are the artifact store's manifests (path, sha256, mode); only files whose content
differs are read. Text files get a unified diff; a file that is not UTF-8 text, or is larger
than :data:`MAX_TEXT_BYTES`, is named with its sizes only. Caches and bytecode
(:func:`rsilab.store.artifacts.is_cache` on any part of the path) are left out, and a JSON or
TOML file whose parsed content is equal on both sides (only reformatted) is not a change.
"""

from __future__ import annotations

import difflib
import json
import tomllib
from dataclasses import dataclass
from typing import Any

from rsilab.errors import NotFoundError
from rsilab.store.artifacts import ArtifactStore, is_cache

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


@dataclass(frozen=True)
class TreeDiff:
    """What differs between two trees, and what was left out of the comparison."""

    changes: list[FileChange]
    ignored: int = 0
    """Cache and bytecode files (in either tree) not compared."""
    reformatted: tuple[str, ...] = ()
    """JSON and TOML files whose text differs but whose parsed content is the same."""


_PARSERS = {".json": json.loads, ".toml": tomllib.loads}


def same_config(path: str, old: str, new: str) -> bool:
    """Whether ``old`` and ``new`` are the same settings in a JSON or TOML file ``path``
    (both parse and are equal); False for any other file or text that does not parse."""
    parse = next((p for suffix, p in _PARSERS.items() if path.endswith(suffix)), None)
    if parse is None:
        return False
    try:
        return bool(parse(old) == parse(new))
    except ValueError:  # JSONDecodeError and TOMLDecodeError are ValueErrors
        return False


def _cached(path: str) -> bool:
    return any(is_cache(part) for part in path.split("/"))


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


def tree_changes(artifacts: ArtifactStore, old: str | None, new: str | None) -> TreeDiff:
    """The files that differ from tree ``old`` to tree ``new`` (None: an empty tree), by path,
    leaving out caches and bytecode and JSON/TOML files only reformatted.

    Raises NotFoundError when a tree's manifest is not in the store (collected by gc).
    """
    before, after = _entries(artifacts, old), _entries(artifacts, new)
    out: list[FileChange] = []
    ignored, reformatted = 0, []
    for path in sorted(before.keys() | after.keys()):
        if _cached(path):
            ignored += 1
            continue
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
        if status == "modified" and same_config(path, old_text, new_text):
            reformatted.append(path)
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
    return TreeDiff(out, ignored, tuple(reformatted))
