"""``rsilab campaign new|list``."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

from rsilab.expos import open_campaign
from rsilab.records import CampaignLease, EventDraft, LeaseHolder, TaskRef
from rsilab.store import Lab
from tests.cli.helpers import explain, rsilab


def test_new_prints_only_the_id(lab: Path) -> None:
    result = rsilab("campaign", "new", "digits", "--notes", "first try", "--lab", lab)
    assert result.exit_code == 0, explain(result)
    assert result.stdout.strip().startswith("cmp-")
    assert len(result.stdout.split()) == 1


def test_list_shows_campaigns_with_event_counts(lab: Path, campaign_id: str) -> None:
    second = rsilab("campaign", "new", "textcls", "--lab", lab).stdout.strip()
    result = rsilab("campaign", "list", "--lab", lab)
    assert result.exit_code == 0, explain(result)
    rows = {line.split()[1]: line for line in result.stdout.splitlines() if "cmp-" in line}
    assert set(rows) == {campaign_id, second}
    assert "digits" in rows[campaign_id]
    assert "running" in rows[campaign_id]
    assert rows[campaign_id].split()[-2] == "1"  # the campaign_created event


def test_list_on_an_empty_lab_says_how_to_start(lab: Path) -> None:
    result = rsilab("campaign", "list", "--lab", lab)
    assert result.exit_code == 0
    assert "start one with `rsilab run TASK`" in result.stdout


def _leased(lab: Path, pid: int) -> str:
    """A campaign whose lease a process ``pid`` of this host holds, heartbeat now."""
    stamp = datetime.now(UTC).isoformat().replace("+00:00", "Z")
    with Lab.open(lab) as opened:
        campaign_id = open_campaign(opened.store, TaskRef(name="digits")).id
        record = CampaignLease(
            campaign_id=campaign_id,
            holder=LeaseHolder(host=socket.gethostname(), pid=pid, token="theirs"),
            acquired_at=stamp,
            heartbeat_at=stamp,
            ttl_s=60,
        )
        draft = EventDraft(actor="t", role="controller", action="lease_acquired")
        opened.store.commit(draft, [record])
    return campaign_id


def test_a_running_campaign_whose_process_is_gone_is_listed_as_interrupted(lab: Path) -> None:
    """Before, a killed `rsilab run` left its campaign listed as running, like a live one."""
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()  # reaped: its pid names no process now
    killed = _leased(lab, child.pid)
    alive = _leased(lab, os.getpid())
    agents = rsilab("campaign", "new", "digits", "--lab", lab).stdout.strip()  # never leased

    table = rsilab("campaign", "list", "--lab", lab)
    assert table.exit_code == 0, explain(table)
    rows = {line.split()[1]: line for line in table.stdout.splitlines() if "cmp-" in line}
    assert "running (interrupted: rsilab resume)" in rows[killed]
    assert "interrupted" not in rows[alive] and "interrupted" not in rows[agents]
    listed = json.loads(rsilab("campaign", "list", "--json", "--lab", lab).stdout)
    why = {c["id"]: c["interrupted"] for c in listed}
    assert why[killed] == f"dead: process {child.pid} on {socket.gethostname()} no longer exists"
    assert why[alive] is None and why[agents] is None
