"""Workspace file tools: list, read, write and patch files in the caller's workspace.

Every path is relative to the caller's workspace (``CallContext.workspace``); a call without
one is refused with the ``no_workspace`` guard. Paths that leave the workspace ('..',
absolute paths elsewhere, symlinks out) are refused as protocol flags, and files are opened
one component at a time without following links (see :mod:`._nofollow`), so a link planted
during a call is refused too. Writes never go through a symlink and never touch the
:data:`RESERVED` folders, which belong to the controller. Writes are atomic per file; a patch
changes all its files or none.
"""

from __future__ import annotations

import fnmatch
import hashlib
import os
import stat
from io import BufferedReader
from pathlib import Path, PurePosixPath
from typing import Annotated, Any

from pydantic import Field, StringConstraints

from rsilab.errors import ToolError
from rsilab.expos.context import ToolEnv
from rsilab.expos.guards import WORKSPACE_RESERVED, GuardRefusal, resolve_workspace_path
from rsilab.expos.registry import Category
from rsilab.expos.tools import _unidiff
from rsilab.expos.tools._base import Limit, WorkspacePath, require, tool
from rsilab.expos.tools._nofollow import Change, commit, lstat, open_dir, open_file, os_errors
from rsilab.records import FlagStage
from rsilab.store.trees import MAX_TREE_DEPTH, Entry, shown, walk

RESERVED = WORKSPACE_RESERVED
"""Top-level workspace folders the controller owns; the tools never write into them."""

MAX_WRITE_BYTES = 1 << 20
"""The most one write_file call writes, and the most read_file returns at once (1 MiB)."""

MAX_PATCH_TARGET_BYTES = 16 << 20
"""The largest file apply_patch edits."""

BINARY_PROBE = 8192
"""A file with a NUL byte in its first this-many bytes is binary."""

MAX_SCAN = 50_000
"""How many entries list_files looks at before it stops (and says so)."""

READ_RULE = "symlink_in_path"
WRITE_RULE = "symlink_write"

FileText = Annotated[str, StringConstraints(max_length=MAX_WRITE_BYTES)]
"""File content or a patch: text up to 1 Mi characters (and 1 MiB as UTF-8 when written)."""

RawPath = Annotated[str, Field(min_length=1, max_length=4096)]
"""A workspace path the tool body checks itself (it must see the name before links resolve)."""

Pattern = Annotated[str, StringConstraints(min_length=1, max_length=200)]
Offset = Annotated[int, Field(ge=0, le=2**53 - 1)]
ReadSize = Annotated[int, Field(ge=1, le=MAX_WRITE_BYTES)]


def _root(env: ToolEnv, field: str) -> Path:
    """The caller's resolved workspace root; the ``no_workspace`` guard refuses when none."""
    return resolve_workspace_path(env.workspace(), ".", field, must_exist=False)


def _rel(root: Path, path: Path) -> PurePosixPath:
    return PurePosixPath(*path.relative_to(root).parts)


def _write_target(env: ToolEnv, raw: str, field: str) -> tuple[Path, PurePosixPath]:
    """Check a path to write: inside the workspace, not reserved, not itself a symlink."""
    resolved = resolve_workspace_path(env.workspace(), raw, field, must_exist=False)
    root = _root(env, field)
    rel = _rel(root, resolved)
    require(bool(rel.parts), "invalid_arguments", "the workspace folder itself is no file", field)
    require(  # deeper paths could not be listed, snapshotted or proposed
        len(rel.parts) <= MAX_TREE_DEPTH,
        "invalid_arguments",
        f"{shown(rel)!r} has {len(rel.parts)} levels; workspace paths have at most "
        f"{MAX_TREE_DEPTH}",
        field,
    )
    if rel.parts[0] in RESERVED:
        raise GuardRefusal(
            rule="reserved_path",
            stage=FlagStage.ACCESS,
            message=f"{str(rel)!r} is inside {rel.parts[0]}/, which belongs to the controller; "
            f"the tools do not write into {', '.join(RESERVED)}",
            field=field,
        )
    named = Path(raw.rstrip("/") or "/")
    assert env.call.workspace is not None  # resolve_workspace_path refused otherwise
    if os.path.islink(named if named.is_absolute() else env.call.workspace / named):
        raise GuardRefusal(
            rule=WRITE_RULE,
            stage=FlagStage.ACCESS,
            message=f"{raw!r} is a symbolic link; files are never written through a link",
            field=field,
        )
    return root, rel


def _existing(root: Path, rel: PurePosixPath, field: str) -> os.stat_result | None:
    """The status of a file about to be replaced; None if absent; refuses anything but a file."""
    found = lstat(root, rel, rule=WRITE_RULE, field=field)
    if found is None or stat.S_ISREG(found.st_mode):
        return found
    if stat.S_ISLNK(found.st_mode):
        raise GuardRefusal(
            rule=WRITE_RULE,
            stage=FlagStage.ACCESS,
            message=f"{str(rel)!r} is a symbolic link; files are never written through a link",
            field=field,
        )
    what = "a folder" if stat.S_ISDIR(found.st_mode) else "not a regular file"
    raise ToolError("invalid_arguments", f"{str(rel)!r} is {what}", field=field)


@tool(Category.WORKSPACE)
def list_files(
    env: ToolEnv, path: WorkspacePath = ".", pattern: Pattern = "*", limit: Limit = 200
) -> dict[str, Any]:
    """List files and folders under a workspace folder, at every depth.

    Each entry has its path relative to the workspace root (ready for read_file), its type
    (file, dir, link or other) and, for files, its size in bytes. Symbolic links are listed as
    links and never followed. Entries come folder by folder, sorted by name; at most ``limit``
    are returned and ``left_out`` says how many more matched.

    Args:
        path: the folder to list, relative to the workspace root.
        pattern: a glob such as '*.py'; without '/' it matches file names at any depth, with
            '/' it matches the path relative to ``path`` (e.g. 'src/*.py').
        limit: how many entries to return at most.
    """
    root = _root(env, "path")
    rel = _rel(root, Path(path))
    with os_errors(str(rel), "path"):
        own = os.stat(Path(path), follow_symlinks=False)
        if not stat.S_ISDIR(own.st_mode):
            return _listing(rel, [_entry(rel, own)], 1, complete=True)
        folder = open_dir(root, rel.parts, create=False, rule=READ_RULE, field="path")
        try:
            return _walk(folder, rel, pattern, limit)
        finally:
            os.close(folder)


def _walk(folder: int, rel: PurePosixPath, pattern: str, limit: int) -> dict[str, Any]:
    """List under the open folder ``folder`` with the store's walk: iterative, links not
    descended, nothing opened but folders; what lies deeper than MAX_TREE_DEPTH below the
    workspace root is left out and named (os.fwalk recursed once per level: a job's deep
    tree made it raise RecursionError)."""
    found: list[Entry] = []
    too_deep: list[PurePosixPath] = []

    def deeper(sub: PurePosixPath, _: str) -> bool:
        if len(rel.parts) + len(sub.parts) <= MAX_TREE_DEPTH:
            return False
        too_deep.append(rel / sub)
        return True

    scanned_all = True
    for entry in walk(Path(str(rel)), root_fd=folder, skip=deeper):
        if len(found) == MAX_SCAN:
            scanned_all = False
            break
        found.append(entry)  # its dir_fd goes stale; only its name and status are used
    complete = scanned_all and not too_deep
    found.sort(key=lambda e: (e.rel.parent.parts, e.rel.name))  # folder by folder, by name
    entries: list[dict[str, Any]] = []
    matched = 0
    for entry in found:
        target = str(entry.rel) if "/" in pattern else entry.name
        if not fnmatch.fnmatchcase(target, pattern):
            continue
        matched += 1
        if len(entries) < limit:
            entries.append(_entry(rel.joinpath(entry.rel), entry.info))
    out = _listing(rel, entries, matched, complete=complete)
    if too_deep:
        out["note"] = (
            f"left out what lies below {shown(too_deep[0].parent)!r}: it is more than "
            f"{MAX_TREE_DEPTH} levels deep, deeper than rsilab reads"
        )
    return out


def _entry(rel: PurePosixPath, found: os.stat_result) -> dict[str, Any]:
    mode = found.st_mode
    if stat.S_ISREG(mode):
        return {"path": str(rel), "type": "file", "size": found.st_size}
    kind = "link" if stat.S_ISLNK(mode) else "dir" if stat.S_ISDIR(mode) else "other"
    return {"path": str(rel), "type": kind}


def _listing(
    rel: PurePosixPath, entries: list[dict[str, Any]], matched: int, *, complete: bool
) -> dict[str, Any]:
    out: dict[str, Any] = {
        "path": str(rel),
        "entries": entries,
        "matched": matched,
        "left_out": matched - len(entries),
        "complete": complete,
    }
    if not complete:
        out["note"] = f"stopped after looking at {MAX_SCAN} entries; list a smaller folder"
    return out


@tool(Category.WORKSPACE)
def read_file(
    env: ToolEnv, path: WorkspacePath, offset: Offset = 0, max_bytes: ReadSize = 65536
) -> dict[str, Any]:
    """Read a text file of the workspace, a page at a time.

    Returns the text (UTF-8; undecodable bytes become U+FFFD), ``total_bytes`` of the file and
    ``next_offset``: the byte offset to pass for the next page, or null at the end. A page
    never ends inside a character. Binary files (a NUL byte in their first 8 KiB) are refused
    with their size and sha256.

    Args:
        path: the file, relative to the workspace root.
        offset: byte offset to start at (a ``next_offset`` from an earlier call).
        max_bytes: how many bytes to read at most.
    """
    root = _root(env, "path")
    rel = _rel(root, Path(path))
    with os_errors(str(rel), "path"):
        require(bool(rel.parts), "invalid_arguments", "the workspace root is a folder", "path")
        with os.fdopen(open_file(root, rel, rule=READ_RULE, field="path"), "rb") as handle:
            return _read_page(handle, rel, offset, max_bytes)


def _read_page(
    handle: BufferedReader, rel: PurePosixPath, offset: int, size: int
) -> dict[str, Any]:
    total = os.fstat(handle.fileno()).st_size
    if b"\x00" in handle.read(BINARY_PROBE):
        handle.seek(0)
        digest = hashlib.file_digest(handle, "sha256").hexdigest()
        raise ToolError(
            "invalid_arguments",
            f"{str(rel)!r} is a binary file ({total} bytes, sha256 {digest}); "
            "read_file shows text files only",
            field="path",
            expected="a text file",
        )
    if offset > total:
        raise ToolError(
            "invalid_arguments",
            f"offset {offset} is past the end ({total} bytes)",
            field="offset",
            expected=f"0 to {total}",
        )
    handle.seek(offset)
    chunk = handle.read(size)
    if offset + len(chunk) < total:
        chunk = chunk[: len(chunk) - _partial_tail(chunk)] or chunk
    end = offset + len(chunk)
    return {
        "path": str(rel),
        "text": chunk.decode("utf-8", errors="replace"),
        "offset": offset,
        "next_offset": end if end < total else None,
        "total_bytes": total,
    }


def _partial_tail(chunk: bytes) -> int:
    """How many bytes at the end of ``chunk`` are an incomplete UTF-8 character."""
    for back in range(1, min(4, len(chunk)) + 1):
        byte = chunk[-back]
        if byte & 0xC0 == 0x80:
            continue  # a continuation byte: look further back for the lead byte
        need = 2 if 0xC0 <= byte < 0xE0 else 3 if 0xE0 <= byte < 0xF0 else 4 if byte >= 0xF0 else 1
        return back if need > back else 0
    return 0


@tool(Category.WORKSPACE)
def write_file(
    env: ToolEnv, path: RawPath, content: FileText, create_dirs: bool = True
) -> dict[str, Any]:
    """Write a text file in the workspace (UTF-8), replacing it whole and atomically.

    Readers see the old or the new content, never a mix; an existing file keeps its
    permissions. At most 1 MiB per call. Refused: a path that is a symbolic link, and the
    controller's folders (data-in/, .rsilab/). Returns the bytes written and the new sha256.

    Args:
        path: the file, relative to the workspace root.
        content: the complete new text of the file.
        create_dirs: create missing parent folders.
    """
    data = content.encode("utf-8")
    require(
        len(data) <= MAX_WRITE_BYTES,
        "invalid_arguments",
        f"content is {len(data)} bytes as UTF-8; write_file takes at most {MAX_WRITE_BYTES}",
        "content",
    )
    root, rel = _write_target(env, path, "path")
    with os_errors(str(rel), "path"):
        if not create_dirs and len(rel.parts) > 1:
            parent = lstat(root, rel.parent, rule=WRITE_RULE, field="path")
            require(
                parent is not None and stat.S_ISDIR(parent.st_mode),
                "not_found",
                f"folder {str(rel.parent)!r} does not exist; create_dirs=true creates it",
                "path",
            )
        old = _existing(root, rel, "path")
        mode = stat.S_IMODE(old.st_mode) if old is not None else None
        commit(
            root, [Change(rel, data, mode)], create_dirs=create_dirs, rule=WRITE_RULE, field="path"
        )
    return {
        "path": str(rel),
        "bytes": len(data),
        "sha256": hashlib.sha256(data).hexdigest(),
        "created": old is None,
    }


@tool(Category.WORKSPACE)
def apply_patch(env: ToolEnv, patch: FileText) -> dict[str, Any]:
    """Apply a unified diff (as `diff -u` or `git diff` print it) to workspace files.

    Paths are relative to the workspace root, with optional a/ and b/ prefixes; '--- /dev/null'
    creates a file, '+++ /dev/null' deletes one. Hunk line counts must be right, and every
    context and removed line must match exactly, at the stated line or within 100 lines of it.
    All or nothing: if any hunk of any file does not match, no file is changed and the error
    shows the expected and the actual lines. Renames and binary patches are not supported.
    Returns each file changed with its action and added/removed line counts.

    Args:
        patch: the unified diff text.
    """
    root = _root(env, "patch")
    files = _unidiff.parse(patch)
    targets = [_write_target(env, fp.path, "patch")[1] for fp in files]  # every guard first
    for k, rel in enumerate(targets):
        require(
            rel not in targets[:k],
            "invalid_arguments",
            f"the patch changes {str(rel)!r} more than once; give each file one section",
            "patch",
        )
    planned = [_plan(root, rel, fp) for rel, fp in zip(targets, files, strict=True)]
    with os_errors("a patched file", "patch"):
        commit(root, [c for c, _ in planned], create_dirs=True, rule=WRITE_RULE, field="patch")
    return {"files": [entry for _, entry in planned]}


def _plan(root: Path, rel: PurePosixPath, fp: _unidiff.FilePatch) -> tuple[Change, dict[str, Any]]:
    """The change one file patch makes to ``rel``, checked against the file as it is now."""
    shown = str(rel)
    with os_errors(shown, "patch"):
        old = _existing(root, rel, "patch")
        if fp.old_path is None and old is not None:
            raise ToolError("conflict", f"the patch creates {shown!r}, which exists", field="patch")
        if fp.old_path is not None and old is None:
            raise ToolError(
                "not_found", f"the patch changes {shown!r}, which does not exist", field="patch"
            )
        original = _unidiff.split_lines(_read_text(root, rel)) if old is not None else []
    lines = _unidiff.apply(original, fp)
    entry: dict[str, Any] = {"path": shown, "added": fp.added, "removed": fp.removed}
    if fp.new_path is None:
        require(
            not lines,
            "conflict",
            f"the patch deletes {shown!r} but leaves {len(lines)} of its lines",
            "patch",
        )
        return Change(rel, None), {**entry, "action": "deleted", "sha256": None}
    data = "".join(lines).encode("utf-8")
    mode = stat.S_IMODE(old.st_mode) if old is not None else None
    action = "created" if old is None else "modified"
    return Change(rel, data, mode), {
        **entry,
        "action": action,
        "sha256": hashlib.sha256(data).hexdigest(),
    }


def _read_text(root: Path, rel: PurePosixPath) -> str:
    with os.fdopen(open_file(root, rel, rule=WRITE_RULE, field="patch"), "rb") as handle:
        data = handle.read(MAX_PATCH_TARGET_BYTES + 1)
    require(
        len(data) <= MAX_PATCH_TARGET_BYTES,
        "invalid_arguments",
        f"{str(rel)!r} is larger than {MAX_PATCH_TARGET_BYTES} bytes; apply_patch edits "
        "smaller files",
        "patch",
    )
    try:
        if b"\x00" in data[:BINARY_PROBE]:
            raise UnicodeError
        return data.decode("utf-8")
    except UnicodeError:
        raise ToolError(
            "invalid_arguments",
            f"{str(rel)!r} is not UTF-8 text; apply_patch edits text files only",
            field="patch",
        ) from None
