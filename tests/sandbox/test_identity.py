"""The sandbox uid: one per lab, chosen once, in a range no host account or daemon uses."""

from __future__ import annotations

import json
import pwd
import stat
from pathlib import Path

import pytest

from rsilab.sandbox import _identity, lab_user
from rsilab.sandbox._identity import derive_uid, ephemeral_user


def test_a_lab_records_its_uid_once(tmp_path: Path) -> None:
    user = lab_user(tmp_path, "lab-1")
    assert 1879048192 <= user.uid < 2147352576 and user.gid == user.uid
    assert user.uid not in (0, 65534)
    record = tmp_path / "sandbox-user.json"
    assert stat.S_IMODE(record.stat().st_mode) == 0o600
    assert json.loads(record.read_text()) == {"uid": user.uid, "gid": user.uid, "lab_id": "lab-1"}
    assert lab_user(tmp_path, "another id") == user, "read back, never chosen again"
    with pytest.raises(KeyError):
        pwd.getpwuid(user.uid)


def test_labs_get_their_own_uids(tmp_path: Path) -> None:
    uids = {lab_user(_made(tmp_path / f"lab-{i}"), f"lab-{i}").uid for i in range(5)}
    assert len(uids) == 5
    assert derive_uid("lab-3") == lab_user(tmp_path / "lab-3", "x").uid


def test_a_record_outside_the_range_is_refused(tmp_path: Path) -> None:
    (tmp_path / "sandbox-user.json").write_text('{"uid": 65534, "gid": 65534}')
    with pytest.raises(ValueError, match="outside the sandbox range"):
        lab_user(tmp_path, "lab-1")


def test_a_uid_the_host_names_is_stepped_over(monkeypatch: pytest.MonkeyPatch) -> None:
    first = derive_uid("lab-1")
    monkeypatch.setattr(_identity, "is_free", lambda uid: uid != first)
    assert derive_uid("lab-1") != first


def test_names_in_the_host_files_are_taken() -> None:
    assert not _identity.is_free(0) and not _identity.is_free(65534)
    assert ephemeral_user().uid != ephemeral_user().uid


def _made(folder: Path) -> Path:
    folder.mkdir()
    return folder
