"""Size-limited filesystems for workspaces: sparse ext4 images, loop-mounted (root only).

An image is a sparse file (``truncate``) holding an ext4 filesystem without a journal and
without reserved blocks, whose root belongs to the sandbox user (``mkfs.ext4 -E root_owner``),
mounted with ``-o loop,nosuid,nodev,noatime,discard``. Its size is the workspace's disk limit,
enforced by the kernel: a write or ``fallocate`` past it fails with ``ENOSPC`` inside the job,
and the host file grows only by what is written (``discard`` gives freed blocks back).
Making one costs ~10-30 ms and ~1 MiB of host disk; a mount or unmount ~5-15 ms.

Mounts are made in rsilab's own mount namespace, so they outlive a killed rsilab process;
:func:`mounted_image` tells which image a folder shows, so recovery re-uses or re-mounts it.
"""

from __future__ import annotations

import contextlib
import functools
import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from rsilab.errors import REFUSALS
from rsilab.sandbox._trees import remove_tree
from rsilab.sandbox.owners import owned_prefix

_PATH = "/usr/sbin:/usr/bin:/sbin:/bin"
_MOUNT_OPTIONS = "loop,nosuid,nodev,noatime,discard"
_TOOLS = ("mkfs.ext4", "mount", "umount", "losetup", "resize2fs", "cp")
PROBE_MB = 8


class ImageError(OSError):
    """A tool making, mounting or unmounting an image failed; the message has its output
    (and ``errno`` and ``filename`` when the disk refused the tool's write)."""


@dataclass(frozen=True)
class DiskLimits:
    """Whether each workspace gets a size-limited filesystem, and why not when it does not."""

    enforced: bool
    reason: str


def _tool(name: str) -> str:
    found = shutil.which(name, path=_PATH)
    if found is None:
        raise ImageError(f"{name} not found (install e2fsprogs, mount and util-linux)")
    return found


def _call(*argv: str) -> None:
    try:
        done = subprocess.run(
            [_tool(argv[0]), *argv[1:]],
            capture_output=True,
            env={"PATH": _PATH, "LC_ALL": "C"},
            check=False,
        )
    except OSError as exc:
        raise ImageError(f"cannot run {argv[0]}: {exc.strerror or exc}") from exc
    if done.returncode != 0:
        said = [
            line.strip()
            for line in (done.stderr or done.stdout).decode(errors="replace").splitlines()
            if line.strip() and "dmesg" not in line
        ]
        message = f"{argv[0]} failed: {said[0] if said else f'exit {done.returncode}'}"
        # The tools run with LC_ALL=C, so a refusing disk reads as strerror's words: keep its
        # errno and the file the tool was given last (what it wrote), for the disk's own error.
        code = next((c for c in REFUSALS if os.strerror(c) in message), None)
        if code is not None:
            raise ImageError(code, message, argv[-1])
        raise ImageError(message)


def make_image(image: Path, size_mb: int, uid: int, gid: int) -> None:
    """A sparse ext4 image of ``size_mb`` MiB at ``image`` (mode 0600), its root owned by
    ``uid:gid``. An old image still attached to a loop device there is unlinked first, never
    overwritten: whatever still uses it keeps a consistent filesystem."""
    if attached_device(image) is not None:
        image.unlink()
    with open(image, "wb") as handle:
        os.fchmod(handle.fileno(), 0o600)
        handle.truncate(size_mb * 1024 * 1024)
    options = f"root_owner={uid}:{gid},nodiscard"
    _call("mkfs.ext4", "-q", "-F", "-O", "^has_journal", "-m", "0", "-E", options, str(image))


def mount(image: Path, folder: Path, read_only: bool = False) -> None:
    """Mount ``image`` at ``folder`` (which must exist); a fresh image's ``lost+found`` goes,
    so a job's workspace holds nothing it did not put there.

    An image still attached to a loop device (a lazily unmounted or otherwise still used
    mount) is mounted through that device, sharing its filesystem (``read_only`` is then
    not applied): two loop devices on one image would be two filesystems writing the same
    blocks.
    """
    device = attached_device(image)
    try:
        if device is None:
            raise ImageError("not attached")
        # the filesystem's own mount options stand (it is mounted already): no ro here
        options = _MOUNT_OPTIONS.removeprefix("loop,")
        _call("mount", "-t", "ext4", "-o", options, device, str(folder))
    except ImageError:
        ro = ",ro" if read_only else ""
        _call("mount", "-t", "ext4", "-o", _MOUNT_OPTIONS + ro, str(image), str(folder))
    lost = folder / "lost+found"
    if not read_only and lost.is_dir() and not lost.is_symlink() and not any(lost.iterdir()):
        lost.rmdir()


def unmount(folder: Path) -> None:
    """Unmount ``folder``; if it is busy, detach it lazily (it goes once the last user does)."""
    try:
        _call("umount", str(folder))
    except ImageError:
        if mounted_source(folder) is None:
            return
        _call("umount", "-l", str(folder))


def grow(image: Path, folder: Path, size_mb: int) -> None:
    """Enlarge the image mounted at ``folder`` to ``size_mb`` MiB, online."""
    device = mounted_source(folder)
    if device is None:
        raise ImageError(f"{folder} is not mounted")
    os.truncate(image, size_mb * 1024 * 1024)
    _call("losetup", "-c", device)
    _call("resize2fs", device)


def _unescape(field: str) -> str:
    """mountinfo writes space, tab, newline and backslash as octal escapes."""
    for code, char in (("\\040", " "), ("\\011", "\t"), ("\\012", "\n"), ("\\134", "\\")):
        field = field.replace(code, char)
    return field


def mounts() -> list[tuple[Path, str]]:
    """(mount point, source) of every mount in this process's namespace, in mount order."""
    found: list[tuple[Path, str]] = []
    try:
        lines = Path("/proc/self/mountinfo").read_text().splitlines()
    except OSError:
        return found
    for line in lines:
        before, _, after = line.partition(" - ")
        fields, tail = before.split(), after.split()
        if len(fields) >= 5 and len(tail) >= 2:
            found.append((Path(_unescape(fields[4])), _unescape(tail[1])))
    return found


def mounted_source(folder: Path) -> str | None:
    """The source (e.g. ``/dev/loop3``) of the topmost mount at ``folder``, or None."""
    found = [source for point, source in mounts() if point == folder]
    return found[-1] if found else None


def backing_file(device: str) -> Path | None:
    """The file a loop device reads, or None for anything else."""
    name = Path(device).name
    if not name.startswith("loop"):
        return None
    try:
        text = Path(f"/sys/block/{name}/loop/backing_file").read_text().strip()
    except OSError:
        return None
    return Path(text.removesuffix(" (deleted)"))


def attached_device(image: Path) -> str | None:
    """The loop device that reads the file now at ``image`` (one whose file was deleted
    reads as ``<path> (deleted)`` and is not it)."""
    for backing in Path("/sys/block").glob("loop*/loop/backing_file"):
        with contextlib.suppress(OSError):
            if Path(backing.read_text().rstrip("\n")) == image:
                return f"/dev/{backing.parent.parent.name}"
    return None


def mounted_image(folder: Path) -> Path | None:
    """The image file shown at ``folder``, or None when none is mounted there."""
    source = mounted_source(folder)
    return backing_file(source) if source is not None else None


def copy_tree(source: Path, target: Path) -> None:
    """Copy ``source``'s contents into the folder ``target``, keeping owners, modes, links
    (never followed) and times (``cp -a``)."""
    _call("cp", "-a", "--no-target-directory", f"{source}/.", str(target))


def clear(folder: Path) -> None:
    """Delete everything in ``folder``, at any depth, never following a link out of it and
    never opening anything but folders (:func:`._trees.remove_tree`: a job's tree thousands
    of levels deep must not make a workspace impossible to release)."""
    remove_tree(folder, keep_top=True)


@functools.cache
def support() -> DiskLimits:
    """Whether this process can give workspaces their own filesystem (checked once: an
    8 MiB image is made, mounted and removed, ~40 ms)."""
    if os.geteuid() != 0:
        return DiskLimits(
            False,
            "rsilab is not running as root, so it cannot mount a filesystem per workspace; "
            "the disk limit is checked by polling the workspace's size, which a fast writer "
            "(fallocate) can overshoot",
        )
    try:
        for name in _TOOLS:
            _tool(name)
        with tempfile.TemporaryDirectory(prefix=owned_prefix("diskprobe")) as tmp:
            image, folder = Path(tmp) / "image", Path(tmp) / "mnt"
            folder.mkdir()
            make_image(image, PROBE_MB, os.getuid(), os.getgid())
            mount(image, folder)
            unmount(folder)
    except OSError as exc:
        return DiskLimits(False, f"cannot loop-mount a workspace image here: {exc}")
    return DiskLimits(True, "each workspace is its own size-limited filesystem (loop-mounted)")
