"""The task secret's fingerprint in the ledger, and what verify says of the file beside it."""

from __future__ import annotations

import secrets
from pathlib import Path

import pytest

from rsilab.store import SQLiteStore, VerifyReport, keys, verify_store
from rsilab.store.artifacts import ArtifactStore
from rsilab.store.secret import record_secret, recorded_secret
from tests.store.helpers import fill


def lab_with_secret(folder: Path, *, recorded: bool = True) -> bytes:
    """A lab in ``folder`` of 6 events whose task secret's fingerprint is event 4 (unless
    not ``recorded``: a lab from before the fingerprint was kept); the secret."""
    secret = secrets.token_bytes(32)
    (folder / "task-secret").write_text(secret.hex())
    with SQLiteStore.open(folder / "lab.db", create=True) as store:
        fill(store, 3)
        if recorded:
            key = keys.load_key(store.lab_id)
            assert key is not None
            assert record_secret(store, key, secret).seq == 4
        fill(store, 3 if recorded else 2)
    return secret


def verify(folder: Path) -> VerifyReport:
    with SQLiteStore.open(folder / "lab.db", read_only=True) as store:
        return verify_store(store, artifacts=ArtifactStore(folder))


def test_the_recorded_secret_verifies(tmp_path: Path) -> None:
    lab_with_secret(tmp_path)

    report = verify(tmp_path)

    assert report.ok and report.complete and report.warnings == [], report
    with SQLiteStore.open(tmp_path / "lab.db", read_only=True) as store:
        mark = recorded_secret(store)
    assert mark is not None and mark.seq == 4 and len(mark.fingerprint) == 64


@pytest.mark.parametrize(
    ("change", "said"),
    [
        ("replaced", "is not the one event 4 recorded (replaced)"),
        ("deleted", "is missing, but event 4 recorded it"),
        ("damaged", "is unreadable or damaged"),
        ("flipped", "is not the one event 4 recorded (replaced)"),
    ],
)
def test_a_changed_secret_is_named_in_one_line(tmp_path: Path, change: str, said: str) -> None:
    secret = lab_with_secret(tmp_path)
    path = tmp_path / "task-secret"
    if change == "replaced":
        path.write_text(secrets.token_hex(32))
    elif change == "deleted":
        path.unlink()
    elif change == "damaged":
        path.write_text("not hex at all")
    else:  # one bit of the secret changed
        path.write_text(bytes([secret[0] ^ 1, *secret[1:]]).hex())

    report = verify(tmp_path)

    assert not report.ok
    assert len(report.problems) == 1 and said in report.problems[0], report.problems
    assert str(path) in report.problems[0]


def test_a_secret_nobody_recorded_is_a_warning(tmp_path: Path) -> None:
    lab_with_secret(tmp_path, recorded=False)

    report = verify(tmp_path)

    assert report.ok, report.problems
    assert any("task-secret is not in the ledger" in w for w in report.warnings)


def test_without_the_key_the_secret_is_not_judged(
    tmp_path: Path, isolated_environment: Path
) -> None:
    lab_with_secret(tmp_path)
    (tmp_path / "task-secret").write_text(secrets.token_hex(32))
    for key_file in isolated_environment.glob("*.key"):
        key_file.unlink()

    report = verify(tmp_path)

    assert report.ok and not report.complete  # incomplete, as every keyless verify is
