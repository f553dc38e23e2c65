"""What travels between the head and a Ray node for one job: tar bytes, sent explicitly.

A job's inputs go to the node as one uncompressed tar (:func:`pack_inputs`): its workspace
under ``workspace/`` and each read-only mount under ``mounts/<i>``. What the job changed comes
back as a second tar (:func:`pack_changes`): the files, folders and links that are new or
differ from what was sent, and a ``deleted.json`` member naming the paths it removed.

Both sides unpack with :func:`safe_unpack`: the standard library's ``data`` extraction filter
(no absolute paths, nothing outside the destination, no device files, no owner taken from the
archive, no set-id bits); a member it refuses is skipped and named in the returned notes, never
written. The head deletes what the job removed without following links
(:func:`apply_deletions`), because the job, which is untrusted, made the workspace's links.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import shutil
import stat
import tarfile
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

MAX_BUNDLE_BYTES = 2 * 1024**3
"""The most one job may send or bring back (2 GiB); more is refused, never cut short."""
DELETED = "deleted.json"
WORKSPACE = "workspace"
MOUNTS = "mounts"


class BundleTooLarge(ValueError):
    """A job's inputs or outputs exceed :data:`MAX_BUNDLE_BYTES`."""


def pack_inputs(workspace: Path, mounts: Sequence[Path], hidden: Sequence[Path] = ()) -> bytes:
    """The tar a node unpacks: ``workspace`` and each mount (file or folder), links kept as
    links, leaving out every path at or under one of ``hidden`` (what the sandbox would hide
    there is never sent).

    Raises:
        BundleTooLarge: more than :data:`MAX_BUNDLE_BYTES`.
        OSError: a path cannot be read.
    """
    covered = [Path(p).resolve() for p in hidden]
    buffer = _Capped()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for source, arcname in [(workspace, WORKSPACE)] + [
            (m, f"{MOUNTS}/{i}") for i, m in enumerate(mounts)
        ]:
            tar.add(
                source,
                arcname=arcname,
                recursive=True,
                filter=_unless_hidden(source, arcname, covered),
            )
    return buffer.getvalue()


def _unless_hidden(
    source: Path, arcname: str, covered: list[Path]
) -> Callable[[tarfile.TarInfo], tarfile.TarInfo | None]:
    def keep(member: tarfile.TarInfo) -> tarfile.TarInfo | None:
        rel = member.name[len(arcname) :].lstrip("/")
        path = (Path(source) / rel).resolve() if rel else Path(source).resolve()
        return None if any(path.is_relative_to(h) for h in covered) else member

    return keep


def snapshot(root: Path) -> dict[str, str]:
    """Every path under ``root`` (relative, POSIX) -> what it is: ``f:<sha256>:<mode>`` for a
    file, ``d:<mode>`` for a folder, ``l:<target>`` for a link; links are not followed."""
    found: dict[str, str] = {}
    for folder, dirs, files in os.walk(root, followlinks=False):
        for name in dirs + files:
            path = Path(folder, name)
            found[path.relative_to(root).as_posix()] = _describe(path)
    return found


def _describe(path: Path) -> str:
    info = path.lstat()
    mode = stat.S_IMODE(info.st_mode)
    if stat.S_ISLNK(info.st_mode):
        return f"l:{os.readlink(path)}"
    if stat.S_ISDIR(info.st_mode):
        return f"d:{mode:o}"
    if stat.S_ISREG(info.st_mode):
        digest = hashlib.sha256()
        with path.open("rb") as handle:
            for chunk in iter(lambda: handle.read(1 << 20), b""):
                digest.update(chunk)
        return f"f:{digest.hexdigest()}:{mode:o}"
    return f"other:{stat.S_IFMT(info.st_mode)}"  # a fifo or socket: never sent back


def pack_changes(root: Path, before: dict[str, str]) -> bytes:
    """The tar of what changed under ``root`` since ``before`` (a :func:`snapshot`): new or
    changed files, folders and links, parents first, and ``deleted.json``.

    Raises:
        BundleTooLarge: more than :data:`MAX_BUNDLE_BYTES`.
    """
    after = snapshot(root)
    changed = sorted(p for p, what in after.items() if before.get(p) != what)
    deleted = sorted(p for p in before if p not in after)
    buffer = _Capped()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as tar:
        listing = json.dumps(deleted).encode()
        info = tarfile.TarInfo(DELETED)
        info.size = len(listing)
        tar.addfile(info, io.BytesIO(listing))
        for rel in changed:
            if not after[rel].startswith("other:"):
                tar.add(root / rel, arcname=f"{WORKSPACE}/{rel}", recursive=False)
    return buffer.getvalue()


def safe_unpack(data: bytes, dest: Path, prefix: str) -> tuple[list[str], list[str]]:
    """Unpack the members of ``data`` under ``prefix/`` into ``dest`` (prefix stripped) with
    the ``data`` filter; returns (paths written, notes on members refused)."""
    written: list[str] = []
    notes: list[str] = []
    dest.mkdir(parents=True, exist_ok=True)
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:") as tar:
        for member in tar.getmembers():
            if member.name != prefix and not member.name.startswith(prefix + "/"):
                continue
            rel = member.name[len(prefix) :].lstrip("/")
            moved = member.replace(name=rel or ".", deep=False)
            try:
                kept = tarfile.data_filter(moved, str(dest))
            except tarfile.FilterError as exc:
                notes.append(f"not copied back: {rel} ({exc})")
                continue
            if rel and kept.isdir() and (dest / rel).is_dir() and not (dest / rel).is_symlink():
                os.chmod(dest / rel, kept.mode if kept.mode is not None else 0o755)
                written.append(rel)
                continue
            if rel:
                _remove(dest, rel)  # a file replaced by a folder, or a link by a file
                tar.extract(kept, str(dest), set_attrs=True, filter="fully_trusted")
                written.append(rel)
    return written, notes


def deleted_paths(data: bytes) -> list[str]:
    """The paths a :func:`pack_changes` bundle says the job removed."""
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:") as tar:
        handle = tar.extractfile(DELETED)
        if handle is None:
            raise ValueError(f"the bundle has no {DELETED}")
        listed = json.loads(handle.read())
    if not isinstance(listed, list) or not all(isinstance(p, str) for p in listed):
        raise ValueError(f"{DELETED} is not a list of paths")
    return listed


def apply_deletions(root: Path, paths: Iterable[str]) -> None:
    """Remove ``paths`` (relative) under ``root``; one whose parent is a link, or that lies
    outside ``root``, is left alone (never followed)."""
    for rel in sorted(paths, key=len, reverse=True):
        _remove(root, rel)


def _remove(root: Path, rel: str) -> None:
    parts = Path(rel).parts
    if not parts or any(p in ("..", "") for p in parts) or Path(rel).is_absolute():
        return
    parent = root
    for part in parts[:-1]:
        parent = parent / part
        with contextlib.suppress(FileNotFoundError):
            if not stat.S_ISDIR(parent.lstat().st_mode):  # a link or a file: never follow
                return
    target = parent / parts[-1]
    try:
        info = target.lstat()
    except FileNotFoundError:
        return
    if stat.S_ISDIR(info.st_mode):
        shutil.rmtree(target)
    else:
        target.unlink()


class _Capped(io.BytesIO):
    """A BytesIO that refuses to grow past :data:`MAX_BUNDLE_BYTES`."""

    def write(self, data: bytes) -> int:  # type: ignore[override]
        if self.tell() + len(data) > MAX_BUNDLE_BYTES:
            raise BundleTooLarge(
                f"a job's files exceed {MAX_BUNDLE_BYTES >> 20} MiB, the most the Ray executor "
                "sends to or from a node"
            )
        return super().write(data)
