"""``rsilab ui``: serves the dashboard on 127.0.0.1 until Ctrl-C; refuses a busy port."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from tests.cli.helpers import explain, rsilab
from tests.web.serving import free_port


def test_ui_serves_the_lab_and_stops_on_ctrl_c(lab: Path, campaign_id: str) -> None:
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "rsilab", "ui", "--port", str(port), "--lab", str(lab)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert f"http://127.0.0.1:{port}/" in line, line
        page = _fetch(f"http://127.0.0.1:{port}/")
        assert campaign_id in page
    finally:
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err


def test_a_busy_port_or_a_missing_lab_is_refused_with_a_hint(lab: Path, tmp_path: Path) -> None:
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        busy = rsilab("ui", "--port", str(port), "--lab", lab)
    assert busy.exit_code == 2, explain(busy)
    assert "already in use" in busy.stderr and "--port" in busy.stderr
    missing = rsilab("ui", "--port", str(free_port()), "--lab", tmp_path / "none")
    assert missing.exit_code == 2 and "rsilab init" in missing.stderr


def _fetch(url: str) -> str:
    deadline = time.monotonic() + 30
    while True:
        try:
            with urllib.request.urlopen(url, timeout=10) as answer:
                return str(answer.read().decode("utf-8"))
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)
