"""Helpers of the MCP-over-HTTP tests: a prepared lab with tokens, and ``rsilab mcp --http``
as a process."""

from __future__ import annotations

import contextlib
import os
import queue
import secrets
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from rsilab.expos import CallContext, ExperimentOS, default_registry, open_campaign
from rsilab.mcp import tokens
from rsilab.records import Role, TaskRef
from rsilab.store import Lab


@dataclass
class Prepared:
    """A lab ready to serve: its folder and key folder, campaign, direction and tokens."""

    lab: Path
    keys: Path
    campaign_id: str
    direction_id: str
    texts: dict[str, str]  # case -> token text
    ids: dict[str, str]  # case -> token id


def prepare_lab(lab_path: Path) -> tuple[str, str, dict[str, str], dict[str, str]]:
    """A lab with two campaigns, a direction in the first, and tokens issued for the cases
    of the tests (see the table below); returns (campaign, direction, texts, ids).

    The tokens, by case: ``worker``, ``revoked_later`` (revoked by a test), ``revoked``
    (revoked now), ``expired`` (lived an hour, two hours ago), ``other_campaign``.
    """
    texts: dict[str, str] = {}
    ids: dict[str, str] = {}
    with Lab.init(lab_path) as lab:
        campaign = open_campaign(lab.store, TaskRef(name="digits"))
        other = open_campaign(lab.store, TaskRef(name="digits"))
        expos = ExperimentOS(lab.store, lab.artifacts, default_registry())
        made = expos.call(
            CallContext("main-1", Role.MAIN, campaign.id),
            "create_direction",
            {"title": "wd", "hypothesis": "h"},
        )
        assert made.value is not None
        week = timedelta(days=7)
        issued = {
            "worker": (campaign.id, Role.WORKER, "remote-w", week, None),
            "revoked_later": (campaign.id, Role.WORKER, "remote-r", week, None),
            "revoked": (campaign.id, Role.WORKER, "remote-x", week, None),
            "expired": (
                campaign.id,
                Role.WORKER,
                "remote-e",
                timedelta(hours=1),
                datetime.now(UTC) - timedelta(hours=2),
            ),
            "other_campaign": (other.id, Role.WORKER, "remote-o", week, None),
        }
        for case, (cid, role, actor, life, now) in issued.items():
            record, text = tokens.issue(lab.store, cid, role, actor, life, now=now)
            texts[case], ids[case] = text, record.id
        tokens.revoke(lab.store, ids["revoked"])
    return campaign.id, made.value["id"], texts, ids


def prepared(base: Path) -> Prepared:
    """:func:`prepare_lab` in ``base/lab``, with its own key folder ``base/keys``."""
    keys = base / "keys"
    keys.mkdir()
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("RSILAB_KEY_DIR", str(keys))
        campaign_id, direction_id, texts, ids = prepare_lab(base / "lab")
    return Prepared(base / "lab", keys, campaign_id, direction_id, texts, ids)


def _read_lines(stream: Any, lines: queue.Queue[str]) -> None:
    for line in stream:
        lines.put(line)


@dataclass
class Running:
    """A server process, the URL it announced, and the file its stderr goes to."""

    url: str
    process: subprocess.Popen[str]
    errors: Path


@contextlib.contextmanager
def serving(lab: Prepared, address: str, *options: str) -> Iterator[Running]:
    """``rsilab mcp --http ADDRESS OPTIONS`` on the lab's campaign, as a process; stopped
    with SIGTERM at the end if still running, and its stderr checked for tracebacks."""
    command = [sys.executable, "-m", "rsilab", "mcp", "--http", address, *options]
    command += ["--campaign", lab.campaign_id, "--lab", str(lab.lab)]
    env = {**os.environ, "RSILAB_KEY_DIR": str(lab.keys)}
    env.pop("RSILAB_LAB", None)
    errors = lab.lab.parent / f"server-{secrets.token_hex(3)}.err"
    with errors.open("w") as err:
        process = subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=err, text=True, env=env, cwd=lab.lab.parent
        )
    lines: queue.Queue[str] = queue.Queue()
    reader = threading.Thread(target=_read_lines, args=(process.stdout, lines), daemon=True)
    reader.start()
    try:
        try:
            announced = lines.get(timeout=60)
        except queue.Empty:
            process.kill()
            pytest.fail(f"the server announced nothing: {errors.read_text()[-3000:]}")
        yield Running(announced.split(" at ", 1)[1].split(";", 1)[0], process, errors)
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
        process.wait(timeout=60)
        reader.join(timeout=10)
        assert process.stdout is not None
        process.stdout.close()
        assert "Traceback" not in errors.read_text(), errors.read_text()[-3000:]
