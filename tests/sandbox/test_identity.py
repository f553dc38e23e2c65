"""The sandbox uid: one per lab, chosen once, in a range no host account or daemon uses."""

from __future__ import annotations

import json
import pwd
import re
import stat
from pathlib import Path

import pytest

from rsilab.errors import LabDamaged
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


@pytest.mark.parametrize(
    ("text", "said"),
    [
        (
            '{"uid": 65534, "gid": 65534}',
            "names uid 65534 and gid 65534, outside the sandbox range",
        ),
        ('{"uid": 0, "gid": 0}', "names uid 0 and gid 0, outside the sandbox range"),
        ('{"uid": "x"}', "is damaged (ValueError"),
        ("{", "is damaged (JSONDecodeError"),
        ("{}", "is damaged (KeyError"),
    ],
)
def test_a_damaged_record_is_refused_with_the_way_out(tmp_path: Path, text: str, said: str) -> None:
    """Before, an edited record ended a run as an internal error ("this is a bug")."""
    (tmp_path / "sandbox-user.json").write_text(text)
    with pytest.raises(LabDamaged, match=re.escape(said)) as caught:
        lab_user(tmp_path, "lab-1")
    assert "remove " in caught.value.hint and "sandbox-user.json" in caught.value.hint


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
