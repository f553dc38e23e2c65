"""The per-lab secret that seeds every split, and the seeds derived from it.

The secret is 32 random bytes kept in ``<lab>/task-secret`` (mode 0600). The lab folder is
never mounted into a sandbox, so no harness can read it; every seed below is an HMAC of it, so
knowing one tier's seed (train and dev seeds reach harnesses) reveals nothing of another's.
Its fingerprint is recorded in the lab's ledger on first use (:mod:`rsilab.store.secret`);
:func:`checked_lab_secret` refuses a secret that is not the one recorded.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
import tempfile
from pathlib import Path

from rsilab.errors import LabDamaged, LabError
from rsilab.store import Lab, keys
from rsilab.store.secret import (
    SECRET_FILE,
    SecretMark,
    read_secret,
    record_secret,
    recorded_secret,
    secret_problem,
)

RESTORE = "restore task-secret from a backup of the lab (rsilab backup copies it)"


def checked_lab_secret(lab: Lab, *, create: bool = True) -> bytes:
    """:func:`lab_secret` of ``lab``, checked against the fingerprint its ledger recorded,
    which is recorded now when there is none (and the lab has its ledger key). A recorded
    secret is never created anew, whatever ``create`` says.

    Raises:
        LabDamaged: the secret is missing, damaged or not the one the ledger recorded.
        LabError: as :func:`lab_secret`, or the fingerprint cannot be recorded.
    """
    store = lab.store
    mark = _marks.get(store.lab_id) or recorded_secret(store)
    key = keys.load_key(store.lab_id)
    if mark is not None and key is not None:
        problem = secret_problem(lab.path, mark, key, store.lab_id)
        if problem is not None:
            raise LabDamaged(f"{problem}; nothing was written", RESTORE)
    secret = lab_secret(lab.path, create=create and mark is None)
    if mark is None and key is not None:
        mark = record_secret(store, key, secret)
    if mark is not None:
        _marks[store.lab_id] = mark
    return secret


_marks: dict[str, SecretMark] = {}
"""The recorded fingerprint of each lab this process checked: the first one recorded never
changes, so the ledger is searched for it once."""


def lab_secret(lab_folder: Path, *, create: bool = True) -> bytes:
    """The lab's split secret, created on first use (atomically; concurrent callers agree);
    with ``create`` False, a missing one is an error (a lab that drew splits with it already
    must never get another quietly).

    The secret is written to a private temporary file and hard-linked into place, so the name
    appears only with its full content: a concurrent reader never sees a half-written file,
    and of two creators the second's link fails and it reads the first's secret.

    Raises:
        LabError: the file cannot be read or written, does not hold 64 hex digits, or is
            missing where ``create`` is False.
    """
    path = lab_folder / SECRET_FILE
    if path.exists():
        return _read(path)
    if not create:
        raise LabError(
            f"the task secret {path} is missing, but the lab holds versions whose private tiers "
            "were drawn with it: a new secret would draw other tiers; nothing was written",
            RESTORE,
        )
    try:
        fd, tmp = tempfile.mkstemp(prefix=".task-secret-", dir=lab_folder)
    except OSError as exc:
        raise LabError(f"cannot create {path}: {exc.strerror or exc}", "check --lab") from exc
    try:
        with os.fdopen(fd, "w") as handle:
            handle.write(secrets.token_hex(32))
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, 0o600)
        try:
            os.link(tmp, path)
        except FileExistsError:
            pass  # another process created it first: use theirs
        except OSError as exc:
            raise LabError(f"cannot create {path}: {exc.strerror or exc}", "check --lab") from exc
    finally:
        os.unlink(tmp)
    return _read(path)


def _read(path: Path) -> bytes:
    return read_secret(path)


def derive(secret: bytes, *parts: str) -> bytes:
    """HMAC-SHA256 of ``parts`` (joined unambiguously) under ``secret``."""
    message = "\x1f".join(parts).encode("utf-8")
    return hmac.new(secret, message, hashlib.sha256).digest()


def derive_seed(secret: bytes, *parts: str) -> int:
    """A 63-bit seed derived from ``secret`` and ``parts`` (fits numpy and torch seeds)."""
    return int.from_bytes(derive(secret, *parts)[:8], "big") >> 1
