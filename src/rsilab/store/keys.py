"""Where a lab's ledger key and watermark live: outside the lab folder.

Lookup order for the key of a lab: ``RSILAB_LEDGER_KEY`` (used for every lab), then the file
``<key dir>/<lab id>.key``. The key dir is ``RSILAB_KEY_DIR`` or the user's config directory
(``~/.config/rsilab/ledger-keys`` on Linux). Beside each key the store keeps a *watermark*: the
latest checkpoint, so that cutting both the ledger tail and its in-lab checkpoints is caught.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import secrets
import tempfile
import threading
import time
from pathlib import Path

import platformdirs

from rsilab.errors import LabError
from rsilab.store.ledger import Checkpoint


def key_dir() -> Path:
    """The folder holding ledger keys and watermarks."""
    env = os.environ.get("RSILAB_KEY_DIR")
    if env:
        return Path(env)
    return Path(platformdirs.user_config_dir("rsilab")) / "ledger-keys"


def check_key_dir() -> Path:
    """Make the key folder (mode 0700) if needed and prove that a file can be made in it, so
    a new lab is refused before anything of it exists rather than left without its key.

    Raises:
        OSError: the folder cannot be made or written.
    """
    folder = key_dir()
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd, probe = tempfile.mkstemp(dir=folder, prefix=".write-test-")
    os.close(fd)
    os.unlink(probe)
    return folder


def load_key(lab_id: str, folder: Path | None = None) -> bytes | None:
    """The ledger key of a lab, or None when it is not available here; ``folder`` is the key
    dir to look in (default :func:`key_dir`)."""
    env = os.environ.get("RSILAB_LEDGER_KEY")
    if env:
        return env.encode("utf-8")
    path = (folder or key_dir()) / f"{lab_id}.key"
    try:
        return bytes.fromhex(path.read_text().strip())
    except (OSError, ValueError):
        return None


def key_problem(lab_id: str, folder: Path | None = None) -> str | None:
    """What is wrong with the lab's key file, as the end of a sentence about the key ("is
    missing at PATH", "is damaged at PATH: ..."); None when :func:`load_key` finds a key."""
    if load_key(lab_id, folder) is not None:
        return None
    path = (folder or key_dir()) / f"{lab_id}.key"
    try:
        text = path.read_text().strip()
    except FileNotFoundError:
        return f"is missing at {path}"
    except OSError as exc:
        return f"cannot be read at {path}: {exc.strerror or exc}"
    return f"is damaged at {path}: {len(text)} characters where 64 hex digits belong"


def create_key(lab_id: str) -> bytes:
    """Create (or return the existing) key file for a lab, readable by its owner only."""
    existing = load_key(lab_id)
    if existing is not None:
        return existing
    folder = key_dir()
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    path = folder / f"{lab_id}.key"
    key = secrets.token_bytes(32)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(key.hex())
    return key


def _watermark_path(lab_id: str, folder: Path | None = None) -> Path:
    return (folder or key_dir()) / f"{lab_id}.watermark.json"


_SLOT = 512
"""Bytes of each of the watermark file's two slots: one sector, so a slot is written whole."""

_MAX_OPEN_MARKS = 8
_marks_lock = threading.Lock()

MARK_LOCK_TIMEOUT_S = 30.0
"""How long a writer waits for another process's hold on a lab's watermark file. A holder
paused (SIGSTOP) or hung mid-mark would otherwise keep every writer of the lab waiting for
ever; the wait ends in the same error as a mark that cannot be written."""


def _lock_mark(fd: int, timeout_s: float) -> None:
    """flock ``fd`` exclusively within ``timeout_s``; OSError (EAGAIN) naming the wait when
    another process holds it that long."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            if time.monotonic() >= deadline:
                raise OSError(
                    errno.EAGAIN,
                    f"another process has held the lab's watermark for {timeout_s:g} s "
                    "(an rsilab process paused or hung while writing it?)",
                ) from None
            time.sleep(0.005)


_open_marks: dict[Path, int] = {}
"""Watermark files this process keeps open, so raising a mark at every commit costs one
write and one fdatasync (no temporary file, no rename, no folder sync)."""


def _parse_mark(raw: bytes) -> Checkpoint | None:
    try:
        data = json.loads(raw.strip(b"\0 \n"))
        return Checkpoint(int(data["seq"]), str(data["head_hash"]), str(data["mac"]), data["at"])
    except (ValueError, KeyError, TypeError):
        return None


def _read_mark(raw: bytes) -> Checkpoint | None:
    """The latest mark in a watermark file's bytes: a single JSON object (as a backup writes
    it, and older rsilab did), or two slots of which a write cut short spoils at most one."""
    whole = _parse_mark(raw)
    if whole is not None:
        return whole
    slots = [_parse_mark(raw[i : i + _SLOT]) for i in range(0, len(raw), _SLOT)]
    return max((m for m in slots if m is not None), key=lambda m: m.seq, default=None)


def load_watermark(lab_id: str, folder: Path | None = None) -> Checkpoint | None:
    """The latest checkpoint recorded outside the lab, or None; ``folder`` as for
    :func:`load_key`."""
    try:
        return _read_mark(_watermark_path(lab_id, folder).read_bytes())
    except OSError:
        return None


def _mark_file(lab_id: str) -> int:
    """An open descriptor of the lab's watermark file in :func:`key_dir`, created if needed
    (and reopened when the file there is no longer the one held open)."""
    folder = key_dir()
    path = _watermark_path(lab_id, folder)
    fd = _open_marks.get(path)
    if fd is not None:
        try:
            if os.fstat(fd).st_ino == os.stat(path).st_ino:
                return fd
        except OSError:
            pass
        os.close(fd)
        del _open_marks[path]
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    existed = path.exists()
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    if not existed:
        _fsync_folder(folder)  # the new name itself must survive a power cut
    while len(_open_marks) >= _MAX_OPEN_MARKS:  # a process that opens many labs (tests)
        os.close(_open_marks.pop(next(iter(_open_marks))))
    _open_marks[path] = fd
    return fd


def raise_watermark(lab_id: str, checkpoint: Checkpoint) -> None:
    """Record ``checkpoint`` outside the lab, durably, if it is later than the one there.

    The stores call this after every commit, so the mark covers every committed event: a
    tail cut from the ledger, or rewritten with its hashes re-chained, no longer matches it.
    Each mark is written in place into the one-sector slot of the file that does not hold
    the current mark, and synced (fdatasync) before this returns: a power cut spoils at most
    the slot being written, and the other still holds the mark before it.

    Raises:
        OSError: the key folder cannot be written (the caller says what was recorded).
    """
    text = json.dumps(checkpoint.__dict__).encode()
    if len(text) >= _SLOT:
        raise OSError(f"a watermark of {len(text)} bytes does not fit its slot")
    # flock orders processes; threads of one process share the descriptor, hence the lock
    with _marks_lock:
        fd = _mark_file(lab_id)
        _lock_mark(fd, MARK_LOCK_TIMEOUT_S)
        try:
            raw = os.pread(fd, 4 * _SLOT, 0)
            current = _read_mark(raw)
            if current is not None and current.seq >= checkpoint.seq:
                return
            if len(raw) != 2 * _SLOT:
                # a new file, or one mark alone (a backup's, older rsilab's): both slots afresh
                kept = json.dumps(current.__dict__).encode() if current is not None else b""
                os.pwrite(fd, _slot_bytes(text) + _slot_bytes(kept), 0)
            else:
                first = _parse_mark(raw[:_SLOT])
                holds_current = current is not None and first == current
                os.pwrite(fd, _slot_bytes(text), _SLOT if holds_current else 0)
            os.fdatasync(fd)
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)


def _slot_bytes(text: bytes) -> bytes:
    return text.ljust(_SLOT - 1) + b"\n"


def check_watermark_writable(lab_id: str) -> None:
    """Raise OSError when the mark of ``lab_id`` could not be raised here (its key folder
    or watermark file cannot be written), before anything is committed that it must cover."""
    with _marks_lock:
        _mark_file(lab_id)


def _fsync_folder(folder: Path) -> None:
    """Make a new name inside ``folder`` durable (it lives in the folder's entries)."""
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def mark_commit(lab_id: str, checkpoint: Checkpoint) -> None:
    """:func:`raise_watermark` for an event just committed.

    Raises:
        LabError: the mark could not be written; the event itself was recorded (the message
            says so), so a caller must not commit it again.
    """
    try:
        raise_watermark(lab_id, checkpoint)
    except OSError as exc:
        raise LabError(
            f"event {checkpoint.seq} was recorded, but its signed mark could not be written to "
            f"{key_dir()}: {exc.strerror or exc}; events recorded from now on could be cut from "
            "the ledger unnoticed, so stop here",
            "make the key folder writable (or set RSILAB_KEY_DIR to the folder that holds the "
            "lab's key), then run `rsilab verify`",
        ) from exc
