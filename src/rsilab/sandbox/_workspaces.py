"""Workspaces: folders jobs write, owned by the sandbox user for good, and, as root, each its
own size-limited filesystem.

Ownership is decided once, when a folder becomes a workspace (:meth:`WorkspaceFs.ensure`):
from then on it and everything in it belong to the sandbox user, and nothing is chowned when
a job starts or ends, so a killed process cannot leave a half-owned tree. Host code that
writes into a workspace gives what it wrote to the workspace's owner (:func:`hand_over`).

As root, with loop devices (see :mod:`._images`), a workspace's contents live in a sparse
image mounted at the folder while this lab uses it; the image and a small JSON record sit in
the lab's state folder (``<lab>/sandbox``). The record's phase makes every step safe to
interrupt: ``filling`` (the folder is still the truth: a retry starts over), ``live`` (the
image is the truth: a retry mounts it again), ``unpacking`` (the image is still the truth:
a retry mounts it again). :meth:`WorkspaceFs.release` (when the lab's services close, and for
workspaces whose holder died) copies the contents back into the plain folder, owned by the
sandbox user, and deletes the image.

Where a workspace may be: never holding the lab or its key folder, never inside them except
in the lab's ``workspaces`` folder (:func:`check_placement`).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

from rsilab.faults import fault_point
from rsilab.sandbox import _images
from rsilab.sandbox._places import (
    Confinement,
    WorkspaceRefused,
    check_placement,
    hand_over,
    strip_setid,
)
from rsilab.sandbox._trees import remove_tree
from rsilab.sandbox.owners import is_dead, owned_prefix, owner_of


def _ours(image: Path | None, state: Path) -> bool:
    """Whether ``image`` is a workspace image: kept in ``state``, or a scratch one."""
    if image is None:
        return False
    return image.parent == state or (
        image.name == "image" and owner_of(image.parent.name) is not None
    )


def _check_not_nested(folder: Path, state: Path) -> None:
    """Refuse a folder holding another mount, or inside another workspace's filesystem:
    copying it into (or out of) an image would cross into the other one."""
    for point, source in _images.mounts():
        if point != folder and point.is_relative_to(folder):
            raise WorkspaceRefused(
                f"workspace {folder} holds another mounted filesystem at {point}",
                "use a folder of its own for each workspace, not one holding others",
            )
        inside = folder != point and folder.is_relative_to(point)
        if inside and _ours(_images.backing_file(source), state):
            raise WorkspaceRefused(
                f"workspace {folder} lies inside the workspace filesystem at {point}",
                "use a folder of its own for each workspace, not one inside another",
            )


_held: dict[Path, int] = {}
_held_lock = threading.Lock()


def _started(pid: int) -> str | None:
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return text[text.rfind(")") + 2 :].split()[19]


def _me() -> dict[str, object]:
    return {"pid": os.getpid(), "started": _started(os.getpid())}


def _alive(record: dict[str, object]) -> bool:
    pid = record.get("pid")
    return isinstance(pid, int) and _started(pid) == record.get("started")


class WorkspaceFs:
    """Makes and releases the workspaces of one sandbox (see the module docstring).

    Thread-safe; across processes, each workspace's steps hold a lock file.
    """

    def __init__(self, confinement: Confinement, state: Path) -> None:
        self.confinement = confinement
        self.state = state
        self.root = os.geteuid() == 0
        self.images = self.root and _images.support().enforced
        self._mine: set[Path] = set()

    def _paths(self, folder: Path) -> tuple[Path, Path, Path]:
        key = hashlib.sha256(str(folder).encode()).hexdigest()[:24]
        return self.state / f"{key}.json", self.state / f"{key}.img", self.state / f"{key}.mnt"

    @contextlib.contextmanager
    def _locked(self, record: Path) -> Iterator[None]:
        self.state.mkdir(mode=0o700, parents=True, exist_ok=True)
        with open(record.with_suffix(".lock"), "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            yield

    def ensure(self, folder: Path, size_mb: int | None = None) -> Path:
        """Make ``folder`` (created if missing) a workspace of this sandbox; idempotent, and
        re-mounts what a killed process left. Returns the folder, resolved.

        Raises:
            WorkspaceRefused: ``folder`` holds the lab or lies in its private parts.
            OSError: the folder or its filesystem cannot be made.
        """
        folder = Path(folder).resolve()
        check_placement(folder, self.confinement)
        folder.mkdir(parents=True, exist_ok=True)
        size = size_mb or self.confinement.workspace_mb
        if not self.images:
            self._own(folder)
            return folder
        record_path, image, staging = self._paths(folder)
        _check_not_nested(folder, self.state)
        with _held_lock, self._locked(record_path):
            record = self._read(record_path)
            if record.get("phase") in ("live", "unpacking"):
                self._revive(folder, image, staging, record_path, size, record)
            else:
                self._adopt(folder, image, staging, record_path, size)
            _held[folder] = _held.get(folder, 0) + 1
            self._mine.add(folder)
        return folder

    def _own(self, folder: Path) -> None:
        user = self.confinement.user
        if self.root and folder.lstat().st_uid != user.uid:
            os.chown(folder, user.uid, user.gid)
            hand_over(folder)

    @staticmethod
    def _read(path: Path) -> dict[str, object]:
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError):
            return {}
        return data if isinstance(data, dict) else {}

    def _write(self, path: Path, **record: object) -> None:
        fd, tmp = tempfile.mkstemp(dir=self.state, prefix=".record-")
        with os.fdopen(fd, "w") as handle:
            json.dump(record, handle)
        os.replace(tmp, path)

    def _adopt(self, folder: Path, image: Path, staging: Path, record: Path, size: int) -> None:
        """The folder's contents into a fresh image, which then stands at the folder."""
        self._write(record, phase="filling", folder=str(folder), size_mb=size, **_me())
        if _images.mounted_source(staging) is not None:
            _images.unmount(staging)
        user = self.confinement.user
        _images.make_image(image, size, user.uid, user.gid)
        staging.mkdir(mode=0o700, exist_ok=True)
        _images.mount(image, staging)
        fault_point("workspace_made")
        try:
            if any(folder.iterdir()):
                _images.copy_tree(folder, staging)  # copies the folder's own owner too
                os.chown(staging, user.uid, user.gid)
                hand_over(staging)
        finally:
            _images.unmount(staging)
        self._write(record, phase="live", folder=str(folder), size_mb=size, **_me())
        _images.clear(folder)  # the image holds it now; nothing stale stays underneath
        _images.mount(image, folder)

    def _revive(
        self,
        folder: Path,
        image: Path,
        staging: Path,
        record: Path,
        size: int,
        found: dict[str, object],
    ) -> None:
        """A live image: mount it again where a killed process left it unmounted, take over
        from a dead holder, and grow it when more room is asked for."""
        if _images.mounted_source(staging) is not None:
            _images.unmount(staging)
        if _images.mounted_image(folder) != image:
            _images.mount(image, folder)
        held = int(str(found.get("size_mb", 0)))
        if size > held:
            _images.grow(image, folder, size)
        if not _alive(found) or size > held:
            self._write(record, phase="live", folder=str(folder), size_mb=max(size, held), **_me())

    def release(self, folder: Path) -> None:
        """End this process's hold on ``folder``; the last one copies the image's contents
        back into the plain folder (owned by the sandbox user) and deletes the image. A
        workspace another live process holds is left to it.

        Raises:
            OSError: an unmount or the copy failed (the image stays the truth; a later
                :meth:`ensure` or release picks it up).
        """
        folder = Path(folder).resolve()
        if not self.images:
            return
        record_path, image, staging = self._paths(folder)
        with _held_lock, self._locked(record_path):
            count = _held.pop(folder, 0)
            if count > 1:
                _held[folder] = count - 1
                return
            self._mine.discard(folder)
            record = self._read(record_path)
            mine = record.get("pid") == os.getpid() or not _alive(record)
            if record.get("phase") in ("live", "unpacking") and mine:
                self._unpack(folder, image, staging, record_path, record)

    def _unpack(
        self, folder: Path, image: Path, staging: Path, record: Path, found: dict[str, object]
    ) -> None:
        self._write(record, **{**found, "phase": "unpacking"})
        while _images.mounted_image(folder) == image:
            _images.unmount(folder)
        staging.mkdir(mode=0o700, exist_ok=True)
        if _images.mounted_image(staging) != image:
            _images.mount(image, staging, read_only=True)
        try:
            _images.clear(folder)
            _images.copy_tree(staging, folder)
        finally:
            _images.unmount(staging)
        user = self.confinement.user
        os.chown(folder, user.uid, user.gid)
        strip_setid(folder)
        for path in (image, record, staging, record.with_suffix(".lock")):
            with contextlib.suppress(FileNotFoundError):
                path.rmdir() if path == staging else path.unlink()

    def held(self) -> list[Path]:
        """The workspaces this object made (or revived) and has not released."""
        with _held_lock:
            return sorted(self._mine)

    def release_held(self) -> None:
        """Release every workspace :meth:`held` names; errors are left for a later try."""
        for folder in self.held():
            with contextlib.suppress(OSError):
                while folder in self.held():
                    self.release(folder)

    def release_orphans(self) -> list[Path]:
        """Release every workspace of this state folder whose holder died (a killed rsilab
        process); returns their folders. Errors are left for the next try."""
        released = []
        for record_path in sorted(self.state.glob("*.json")) if self.state.is_dir() else []:
            record = self._read(record_path)
            folder = record.get("folder")
            if not isinstance(folder, str) or _alive(record):
                continue
            with contextlib.suppress(OSError):
                self.release(Path(folder))
                released.append(Path(folder))
        return released

    @contextlib.contextmanager
    def scratch(self, size_mb: int | None = None, kind: str = "scratch") -> Iterator[Path]:
        """A fresh, empty workspace for one piece of work, removed afterwards (with its
        filesystem): ``<tmp>/rsilab-<kind>-<owner>-<random>/workspace``, the image beside it.
        A killed process's leftovers go with :func:`remove_stale_scratch`."""
        size = size_mb or self.confinement.workspace_mb
        tmp = Path(tempfile.mkdtemp(prefix=owned_prefix(kind)))
        folder = tmp / "workspace"
        folder.mkdir()
        try:
            if self.images:
                user = self.confinement.user
                _images.make_image(tmp / "image", size, user.uid, user.gid)
                _images.mount(tmp / "image", folder)
            else:
                self._own(folder)
            yield folder
        finally:
            if _images.mounted_source(folder) is not None:
                _images.unmount(folder)
            with contextlib.suppress(OSError):  # any depth: a job's tree must not stop this
                remove_tree(tmp)


def remove_stale_scratch() -> list[Path]:
    """Unmount and delete scratch workspaces whose process died (see
    :func:`rsilab.sandbox.owners.is_dead`); returns their folders.

    Run it before deleting temporary folders of dead processes: deleting a folder with a
    mounted filesystem in it would empty the filesystem and leave the mount behind.
    """
    removed = []
    for point, source in _images.mounts():
        owner = owner_of(point.parent.name) if point.name == "workspace" else None
        if owner is None or _images.backing_file(source) != point.parent / "image":
            continue
        if not is_dead(owner):
            continue
        with contextlib.suppress(OSError):
            _images.unmount(point)
            remove_tree(point.parent)
            removed.append(point)
    return removed


def unmount_all_under(root: Path) -> list[Path]:
    """Unmount every loop-mounted filesystem under ``root`` without saving its contents (a
    test session's last step, so its temporary folders can be deleted); returns them."""
    root = root.resolve()
    found = [p for p, source in _images.mounts() if p.is_relative_to(root) and "loop" in source]
    for point in reversed(found):
        with contextlib.suppress(OSError):
            _images.unmount(point)
    return found
