"""Where a lab's ledger key and watermark live: outside the lab folder.

Lookup order for the key of a lab: ``RSILAB_LEDGER_KEY`` (used for every lab), then the file
``<key dir>/<lab id>.key``. The key dir is ``RSILAB_KEY_DIR`` or the user's config directory
(``~/.config/rsilab/ledger-keys`` on Linux). Beside each key the store keeps a *watermark*: the
latest checkpoint, so that cutting both the ledger tail and its in-lab checkpoints is caught.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import secrets
import tempfile
from pathlib import Path

import platformdirs

from rsilab.store.ledger import Checkpoint


def key_dir() -> Path:
    """The folder holding ledger keys and watermarks."""
    env = os.environ.get("RSILAB_KEY_DIR")
    if env:
        return Path(env)
    return Path(platformdirs.user_config_dir("rsilab")) / "ledger-keys"


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


def load_watermark(lab_id: str, folder: Path | None = None) -> Checkpoint | None:
    """The latest checkpoint recorded outside the lab, or None; ``folder`` as for
    :func:`load_key`."""
    try:
        data = json.loads(_watermark_path(lab_id, folder).read_text())
        return Checkpoint(int(data["seq"]), str(data["head_hash"]), str(data["mac"]), data["at"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def raise_watermark(lab_id: str, checkpoint: Checkpoint) -> None:
    """Record ``checkpoint`` outside the lab if it is later than the one there.

    Written atomically (temporary file and rename); failures are ignored because the in-lab
    checkpoint was already committed and the watermark only adds protection.
    """
    folder = key_dir()
    with contextlib.suppress(OSError):
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        # The lock makes read-compare-replace atomic across processes: never lower the mark.
        with (folder / f"{lab_id}.lock").open("a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            current = load_watermark(lab_id)
            if current is not None and current.seq >= checkpoint.seq:
                return
            fd, tmp = tempfile.mkstemp(dir=folder, prefix=".wm-")
            with os.fdopen(fd, "w") as handle:
                json.dump(checkpoint.__dict__, handle)
            os.replace(tmp, _watermark_path(lab_id))
