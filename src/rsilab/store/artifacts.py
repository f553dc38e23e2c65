"""Content-addressed artifacts: files and directory trees stored once under their sha256.

Layout: ``<root>/blobs/<first two hex>/<rest>``. A file's address is the sha256 of its bytes.
A tree's address is the sha256 of its *manifest*: canonical JSON of the sorted entries
``{path, mode, sha256, size}`` (symlinks as ``{path, link}``); the manifest is itself a blob.
Writes go to a temporary file first and are renamed into place, so a crash or a full disk
never leaves a partial blob under a valid address. Blobs are read-only once written.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import os
import shutil
import stat
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any, BinaryIO, Literal

from rsilab.errors import REFUSALS, LabError, NotFoundError, WriteRefused
from rsilab.faults import fault_point
from rsilab.store.ledger import canonical_json
from rsilab.store.trees import open_regular, special, walk

CHUNK = 1 << 20


@dataclass(frozen=True)
class StoredArtifact:
    """What was stored: its address, kind, total size and (for trees) its manifest."""

    sha256: str
    kind: Literal["file", "tree"]
    size: int
    manifest: tuple[dict[str, Any], ...] = ()


def hash_file(path: Path) -> str:
    """sha256 of a file's bytes, read in chunks."""
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for chunk in iter(lambda: handle.read(CHUNK), b""):
            digest.update(chunk)
    return digest.hexdigest()


CACHE_FOLDERS = frozenset({"__pycache__", ".pytest_cache", ".mypy_cache", ".ruff_cache"})
"""Folders a snapshot of a system leaves out at any depth: caches that tools (Python, pytest,
mypy, ruff) make again on their own and that change nothing a run does. ``node_modules`` is
kept: a harness may run with what is in it."""
BYTECODE_SUFFIXES = (".pyc", ".pyo")
"""Files a snapshot of a system leaves out at any depth: Python bytecode, made again from the
sources."""


def is_cache(name: str) -> bool:
    """Whether a file or folder called ``name`` is a cache or bytecode a snapshot leaves out."""
    return name in CACHE_FOLDERS or name.endswith(BYTECODE_SUFFIXES)


class ArtifactStore:
    """Blobs under ``root``; thread- and process-safe because every write is an atomic rename."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        self._blobs = self.root / "blobs"
        self._tmp = self.root / "tmp"

    def ensure(self) -> None:
        """Create the folders (for a new lab)."""
        self._blobs.mkdir(parents=True, exist_ok=True)
        self._tmp.mkdir(parents=True, exist_ok=True)

    def blob_path(self, sha256: str) -> Path:
        """Where the blob with this address lives (it may not exist)."""
        if len(sha256) != 64 or any(c not in "0123456789abcdef" for c in sha256):
            raise NotFoundError("artifact", sha256)
        return self._blobs / sha256[:2] / sha256[2:]

    def has(self, sha256: str) -> bool:
        """True when the blob is stored."""
        try:
            return self.blob_path(sha256).is_file()
        except NotFoundError:
            return False

    def remove_stale_ingests(self, is_dead: Callable[[int], bool]) -> list[Path]:
        """Remove the half-written temporary files of ingests whose process ``is_dead`` (by
        pid, as each file's name records it); the paths removed. A live one's are kept."""
        removed: list[Path] = []
        for path in sorted(self._tmp.glob("in-*")) if self._tmp.is_dir() else []:
            pid = path.name.split("-")[1]
            if pid.isdigit() and is_dead(int(pid)):
                with contextlib.suppress(FileNotFoundError):
                    path.unlink()
                    removed.append(path)
        return removed

    def _ingest(self, source: BinaryIO) -> tuple[str, int]:
        """Copy a stream into a temporary file, hash it, and move it to its address."""
        self.ensure()
        digest, size = hashlib.sha256(), 0
        fd, tmp_name = tempfile.mkstemp(dir=self._tmp, prefix=f"in-{os.getpid()}-")
        try:
            with os.fdopen(fd, "wb") as out:
                for chunk in iter(lambda: source.read(CHUNK), b""):
                    digest.update(chunk)
                    out.write(chunk)
                    size += len(chunk)
            fault_point("artifact_write")
            sha = digest.hexdigest()
            target = self.blob_path(sha)
            if target.exists():
                os.unlink(tmp_name)
            else:
                target.parent.mkdir(exist_ok=True)
                os.chmod(tmp_name, 0o444)
                os.replace(tmp_name, target)
            return sha, size
        except OSError as exc:
            with contextlib.suppress(OSError):
                os.unlink(tmp_name)
            raise self._explain(exc) from exc

    def _explain(self, exc: OSError) -> LabError:
        if exc.errno in REFUSALS:
            note = "an artifact could not be stored there; nothing of it was kept"
            return WriteRefused.of(exc.filename or self.root, exc.errno, note=note)
        if exc.errno == errno.EFBIG:
            return LabError(
                f"cannot store the artifact under {self.root}: larger than a file may be here; "
                "nothing was kept",
                "raise the file size limit (ulimit -f) or store a smaller artifact",
            )
        if exc.errno in {errno.EACCES, errno.EPERM}:
            return LabError(
                f"cannot write artifacts under {self.root}: permission denied",
                "check the permissions of the lab folder",
            )
        return LabError(f"cannot store the artifact under {self.root}: {exc}", "check the disk")

    def put_bytes(self, data: bytes) -> StoredArtifact:
        """Store bytes; returns their address."""
        import io

        sha, size = self._ingest(io.BytesIO(data))
        return StoredArtifact(sha, "file", size)

    def put_file(self, path: Path) -> StoredArtifact:
        """Store one regular file (a link at ``path`` is not followed).

        Raises:
            TreeRefused: ``path`` is a FIFO, socket, device, folder or link; it is never
                opened for reading (a FIFO would block the caller).
        """
        with os.fdopen(open_regular(None, path, Path(path).name), "rb") as handle:
            sha, size = self._ingest(handle)
        return StoredArtifact(sha, "file", size)

    def put_handle(self, handle: BinaryIO) -> StoredArtifact:
        """Store what an open binary file holds from its position on (a file opened safely
        elsewhere, e.g. without following links); the caller closes it."""
        sha, size = self._ingest(handle)
        return StoredArtifact(sha, "file", size)

    def put_tree(
        self,
        folder: Path,
        *,
        leave_out_caches: bool = False,
        skip: Callable[[PurePosixPath, str], bool] | None = None,
    ) -> StoredArtifact:
        """Store every file under ``folder`` and a manifest; returns the manifest's address.

        Symlinks are recorded as links (never followed). The walk is :func:`.trees.walk`:
        iterative, at most :data:`~.trees.MAX_TREE_DEPTH` levels, and no file but a regular
        one is ever opened. With ``leave_out_caches``, what :func:`is_cache` names is left out
        at any depth; ``skip(rel, name)`` leaves out an entry and all under it.

        Raises:
            TreeRefused: a path is deeper than the limit, or an entry is a FIFO, socket or
                device (named in the message; nothing is stored for the tree).
        """
        entries: list[dict[str, Any]] = []
        total = 0

        def left_out(rel: PurePosixPath, name: str) -> bool:
            return (leave_out_caches and is_cache(name)) or (skip is not None and skip(rel, name))

        for found in walk(Path(folder), skip=left_out):
            rel, info = found.rel.as_posix(), found.info
            if stat.S_ISLNK(info.st_mode):
                entries.append({"path": rel, "link": os.readlink(found.name, dir_fd=found.dir_fd)})
            elif stat.S_ISREG(info.st_mode):
                fd = open_regular(found.dir_fd, found.name, found.rel)
                with os.fdopen(fd, "rb") as handle:
                    sha, size = self._ingest(handle)
                mode = 0o755 if info.st_mode & 0o111 else 0o644
                entries.append({"path": rel, "mode": mode, "sha256": sha, "size": size})
                total += size
            elif not stat.S_ISDIR(info.st_mode):
                raise special(found.rel, info)  # never opened: a FIFO would block here
        entries.sort(key=lambda e: str(e["path"]))
        manifest = self.put_bytes(canonical_json({"tree": entries}).encode("utf-8"))
        return StoredArtifact(manifest.sha256, "tree", total, tuple(entries))

    def put(self, path: Path) -> StoredArtifact:
        """Store a file or a folder, whichever ``path`` is (a link at ``path`` is not
        followed: it is refused as :meth:`put_file` refuses it)."""
        is_dir = stat.S_ISDIR(os.lstat(path).st_mode)
        return self.put_tree(path) if is_dir else self.put_file(path)

    def read_bytes(self, sha256: str) -> bytes:
        """The bytes of a blob; NotFoundError if absent."""
        path = self.blob_path(sha256)
        if not path.is_file():
            raise NotFoundError("artifact", sha256)
        return path.read_bytes()

    def manifest(self, sha256: str) -> list[dict[str, Any]]:
        """Entries of a stored tree; NotFoundError if it is not a tree."""
        try:
            data = json.loads(self.read_bytes(sha256))
            entries = data["tree"]
        except (ValueError, KeyError, TypeError):
            raise NotFoundError("tree", sha256) from None
        return list(entries)

    def materialize(self, sha256: str, dest: Path, kind: Literal["file", "tree"]) -> Path:
        """Copy a stored file or tree to ``dest`` (which must not exist); returns ``dest``."""
        dest = Path(dest)
        if not self.has(sha256):
            raise NotFoundError("artifact", sha256)
        if kind == "file":
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(self.blob_path(sha256), dest)
            return dest
        dest.mkdir(parents=True)
        for entry in self.manifest(sha256):
            target = dest / PurePosixPath(entry["path"])
            if not target.resolve().is_relative_to(dest.resolve()):
                raise LabError(f"tree {sha256} has an unsafe path {entry['path']!r}", "")
            target.parent.mkdir(parents=True, exist_ok=True)
            if "link" in entry:
                os.symlink(entry["link"], target)
            else:
                if not self.has(entry["sha256"]):
                    raise NotFoundError("artifact", entry["sha256"])
                shutil.copyfile(self.blob_path(entry["sha256"]), target)
                os.chmod(target, int(entry["mode"]))
        return dest

    def verify_blob(self, sha256: str) -> bool:
        """True when the stored bytes still hash to their address."""
        return hash_file(self.blob_path(sha256)) == sha256
