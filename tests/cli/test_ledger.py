"""``rsilab log``, ``show`` and ``verify``."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from tests.cli.helpers import explain, rsilab


def _create_direction(lab: Path, campaign_id: str) -> str:
    args = json.dumps({"title": "t", "hypothesis": "h"})
    result = rsilab(
        "call", "create_direction", "--role", "main", "--campaign", campaign_id,
        "--args", args, "--lab", lab,
    )  # fmt: skip
    assert result.exit_code == 0, explain(result)
    return str(json.loads(result.stdout)["id"])


def _seqs(stdout: str) -> list[int]:
    """The sequence numbers of the event rows in a printed table."""
    firsts = [line.split()[0] for line in stdout.splitlines() if line.strip()]
    return [int(word) for word in firsts if word.isdigit()]


def test_log_shows_events(lab: Path, campaign_id: str) -> None:
    direction_id = _create_direction(lab, campaign_id)
    result = rsilab("log", "--lab", lab)
    assert result.exit_code == 0, explain(result)
    assert _seqs(result.stdout) == [1, 2, 3]
    for text in ("lab_created", "campaign_created", "create_direction", direction_id, "main"):
        assert text in result.stdout


def test_log_limit_shows_the_last_events(lab: Path, campaign_id: str) -> None:
    _create_direction(lab, campaign_id)
    result = rsilab("log", "--limit", "2", "--lab", lab)
    assert _seqs(result.stdout) == [2, 3]


def test_log_campaign_filters(lab: Path, campaign_id: str) -> None:
    _create_direction(lab, campaign_id)
    other = rsilab("campaign", "new", "synthetic", "--lab", lab).stdout.strip()
    result = rsilab("log", "--campaign", other, "--lab", lab)
    assert result.exit_code == 0, explain(result)
    assert _seqs(result.stdout) == [4]
    assert "create_direction" not in result.stdout
    result = rsilab("log", "--campaign", campaign_id, "--lab", lab)
    assert _seqs(result.stdout) == [2, 3]


def test_show_record_with_history(lab: Path, campaign_id: str) -> None:
    direction_id = _create_direction(lab, campaign_id)
    result = rsilab("show", direction_id, "--lab", lab)
    assert result.exit_code == 0, explain(result)
    assert f"direction: {direction_id}" in result.stdout
    assert '"hypothesis": "h"' in result.stdout
    assert "history (1 event)" in result.stdout
    assert _seqs(result.stdout) == [3]


def test_show_event_by_number(lab: Path, campaign_id: str) -> None:
    for ref in ("2", "event:2"):
        result = rsilab("show", ref, "--lab", lab)
        assert result.exit_code == 0, explain(result)
        assert "event 2" in result.stdout
        assert '"action": "campaign_created"' in result.stdout
        assert campaign_id in result.stdout


def test_show_unknown_is_a_user_error(lab: Path) -> None:
    for ref in ("exp-000000000000", "nonsense", "99"):
        result = rsilab("show", ref, "--lab", lab)
        assert result.exit_code == 2, explain(result)
        assert result.stderr.startswith("error: ")
        assert "hint:" in result.stderr


def test_verify_ok(lab: Path, campaign_id: str) -> None:
    _create_direction(lab, campaign_id)
    result = rsilab("verify", "--lab", lab)
    assert result.exit_code == 0, explain(result)
    assert "ledger ok: 3 events" in result.stdout
    assert "head hash: " in result.stdout
    report = json.loads(rsilab("verify", "--json", "--lab", lab).stdout)
    assert report["ok"] is True
    assert report["events"] == 3


def test_verify_names_the_tampered_event(lab: Path, campaign_id: str) -> None:
    _create_direction(lab, campaign_id)
    conn = sqlite3.connect(lab / "lab.db")
    with conn:
        (body,) = conn.execute("SELECT body FROM events WHERE seq = 2").fetchone()
        forged = body.replace('"actor":"cli"', '"actor":"eve"')
        assert forged != body
        conn.execute("UPDATE events SET body = ? WHERE seq = 2", (forged,))
    conn.close()
    result = rsilab("verify", "--lab", lab)
    assert result.exit_code == 3, explain(result)
    assert "first bad event: 2" in result.stdout
    assert "event 2" in result.stdout
    report = json.loads(rsilab("verify", "--json", "--lab", lab).stdout)
    assert report["ok"] is False
    assert report["first_bad_seq"] == 2


def test_log_of_an_unparseable_event_points_to_verify(lab: Path, campaign_id: str) -> None:
    conn = sqlite3.connect(lab / "lab.db")
    with conn:
        conn.execute("UPDATE events SET body = '{not json' WHERE seq = 2")
    conn.close()
    result = rsilab("log", "--lab", lab)
    assert result.exit_code == 2, explain(result)
    assert "does not parse" in result.stderr
    assert "rsilab verify" in result.stderr
    assert rsilab("verify", "--lab", lab).exit_code == 3


def test_verify_without_the_key_says_it_is_incomplete_and_exits_1(
    lab: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A key moved away is a check skipped, not a pass: not "ledger ok", and exit 1."""
    monkeypatch.setenv("RSILAB_KEY_DIR", str(tmp_path / "elsewhere"))
    result = rsilab("verify", "--lab", lab)
    assert result.exit_code == 1, explain(result)
    assert "ledger ok" not in result.stdout
    assert "NOT fully verified" in result.stdout
    assert "ledger key was not found" in result.stdout
    as_json = json.loads(rsilab("verify", "--json", "--lab", lab).stdout)
    assert (as_json["ok"], as_json["complete"], as_json["key_missing"]) == (True, False, True)
    assert as_json["checkpoints_checked"] == 0
    assert as_json["checkpoints_unchecked"] >= 1
