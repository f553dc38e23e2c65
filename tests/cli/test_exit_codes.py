"""One exit-code table for every command (issue 20), each code seen through the real CLI.

The table is written here as literals, not read from ``rsilab.cli``: a test that took the
codes from the code it checks could not fail.
"""

from __future__ import annotations

import os
import re
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from rsilab.agents.llm.scripted import (
    RecordedRequest,
    Reply,
    Respond,
    ScriptedServer,
    Step,
    tool_call,
)
from rsilab.cli import ledger
from rsilab.records import Campaign, Intent, intent_id
from rsilab.store import Lab
from tests.cli.helpers import explain, rsilab

TABLE = {
    0: "done",
    1: "runtime failure",
    2: "usage error",
    3: "verification failure",
    74: "the disk refused a write",
    130: "interrupted",
    141: "the reader of stdout went away",
}
"""Issue 20's table, the closed-pipe code and a disk's refusal (tests/cli/test_disk_full.py):
each code and the words that open its line in ``rsilab --help``."""

DIRECTION = {"title": "slower adam", "hypothesis": "a lower lr raises quality", "plan": "lr"}
DEADLINE_S = 60.0


@pytest.fixture(autouse=True)
def _process_sandbox(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RSILAB_SANDBOX", "process")


def test_help_documents_every_code_of_the_table() -> None:
    result = rsilab("--help")
    assert result.exit_code == 0, explain(result)
    helped = " ".join(result.stdout.split())
    for code, meaning in TABLE.items():
        assert f"{code}: {meaning}" in helped, helped
    listed = [int(code) for code in re.findall(r"• (\d+): ", result.stdout)]
    assert listed == list(TABLE)  # no other code, such as the old 4 for a tool's error


def test_0_done(lab: Path, campaign_id: str) -> None:
    for args in (("campaign", "list"), ("log",), ("verify",)):
        result = rsilab(*args, "--lab", lab)
        assert result.exit_code == 0, explain(result)


def test_1_a_tool_that_answers_an_error_in_call(lab: Path, campaign_id: str) -> None:
    result = rsilab(
        "call", "create_direction", "--role", "worker", "--args", '{"title": "t"}',
        "--campaign", campaign_id, "--lab", lab,
    )  # fmt: skip
    assert result.exit_code == 1, explain(result)
    assert '"error": "permission_denied"' in result.stdout
    assert "recorded as event" in result.stderr


def test_1_an_llm_run_that_stops_on_an_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    lab = tmp_path / "lab"
    assert rsilab("init", "--lab", lab).exit_code == 0
    with ScriptedServer() as server:  # no step: the Main's first request gets an HTTP 400
        monkeypatch.setenv("OPENAI_BASE_URL", server.openai_base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "k")
        result = rsilab(
            "run", "synthetic", "--agents", "openai:gpt-test", "--budget", "experiments=2",
            "--lab", lab,
        )  # fmt: skip
    assert result.exit_code == 1, explain(result)
    with Lab.open(lab) as opened:
        [campaign] = opened.store.query_as(Campaign)
    assert (campaign.state, campaign.end_reason) == ("stopped", "error")


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["run", "synthetic", "--budget", "experiments=lots"], "bad --budget"),
        (["run", "no-such-task"], "neither a task name"),
        (["report", "cmp-000000000000"], "rsilab campaign list"),
        (["campaign", "list", "--lab", "{tmp}/nowhere"], "no rsilab lab"),
        (["task", "check", "{tmp}/task.toml", "--no-probe"], "task.toml: harness:"),
        (["call", "show_datapool", "--role", "janitor"], "janitor"),  # click's own refusal
    ],
)
def test_2_usage_errors(lab: Path, tmp_path: Path, args: list[str], said: str) -> None:
    (tmp_path / "task.toml").write_text('name = "x"\nharness = 5\n')
    argv = [a.format(tmp=tmp_path) for a in args]
    result = rsilab(*argv, *([] if "--lab" in argv else ["--lab", str(lab)]))
    assert result.exit_code == 2, explain(result)
    # `task check` reports a task's problems as its output (stdout, one line each); every other
    # refusal is one line on stderr.
    assert said in (result.stdout if argv[:2] == ["task", "check"] else result.stderr), explain(
        result
    )


def test_2_from_the_console_entry_point(tmp_path: Path) -> None:
    argv = [sys.executable, "-m", "rsilab", "log", "--lab", str(tmp_path / "none")]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith("error: no rsilab lab")


def test_3_a_tampered_lab_fails_verify(lab: Path, campaign_id: str) -> None:
    with sqlite3.connect(lab / "lab.db") as conn:
        (body,) = conn.execute("SELECT body FROM events WHERE seq = 2").fetchone()
        forged = body.replace('"actor":"cli"', '"actor":"eve"')
        assert forged != body
        conn.execute("UPDATE events SET body = ? WHERE seq = 2", (forged,))
    conn.close()
    for args in (("verify",), ("verify", "--json")):
        result = rsilab(*args, "--lab", lab)
        assert result.exit_code == 3, explain(result)


def test_130_for_a_ctrl_c_that_no_command_handles(
    lab: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def interrupted(*args: object, **kwargs: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(ledger, "last_events", interrupted)
    result = rsilab("log", "--lab", lab)
    assert result.exit_code == 130, explain(result)


def test_130_ctrl_c_on_an_llm_run_against_the_scripted_server(tmp_path: Path) -> None:
    """The issue's case: a Worker step is running when a person presses Ctrl-C; the step
    finishes, no new one starts, and the campaign ends stopped by the user, exit 130."""
    lab, log = tmp_path / "lab", tmp_path / "run.log"
    assert rsilab("init", "--lab", lab).exit_code == 0
    working, release = threading.Event(), threading.Event()
    roles: list[str] = []

    def busy_worker(request: RecordedRequest) -> Reply:
        roles.append(request.system_text().split(" ")[3].lower())  # "You are the Worker"
        working.set()
        release.wait(DEADLINE_S)  # the step runs on until the test has sent Ctrl-C
        return Reply("Nothing worth running yet.")

    script: list[Step] = [
        tool_call("create_direction", DIRECTION),
        Reply("Work on it."),
        Respond(busy_worker),
    ]
    with ScriptedServer(script) as server:
        env = {**os.environ, "OPENAI_BASE_URL": server.openai_base_url, "OPENAI_API_KEY": "k"}
        argv = [sys.executable, "-m", "rsilab", "run", "synthetic", "--agents", "openai:gpt-test"]
        argv += ["--budget", "experiments=5", "--lab", str(lab)]
        with log.open("wb") as out:
            child = subprocess.Popen(argv, stdout=out, stderr=out, env=env)
        try:
            _ctrl_c_once_working(child, working, log)
        finally:
            release.set()
            _reap(child)
        requests = len(server.requests)
    text = log.read_text()
    assert child.returncode == 130, text
    assert roles == ["worker"] and requests == 3, text  # no step started after the stop
    with Lab.open(lab) as opened:
        [campaign] = opened.store.query_as(Campaign)
        worker = opened.store.get_as(intent_id(campaign.id, "step:1:worker-1"), Intent)
        events = opened.store.events(campaign_id=campaign.id)
    assert (campaign.state, campaign.end_reason) == ("stopped", "stopped_by_user"), text
    assert worker.state == "done", text  # the running step finished
    last = [e for e in events if e.action == "campaign_stopped"][-1]
    assert "stopped_by_user" in last.detail
    assert f"rsilab resume {campaign.id}" in text


def _ctrl_c_once_working(
    child: subprocess.Popen[bytes], working: threading.Event, log: Path
) -> None:
    """Send one SIGINT to ``child`` once ``working`` is set (the Worker's request arrived)."""
    deadline = time.monotonic() + DEADLINE_S
    while not working.wait(0.02):
        assert child.poll() is None, log.read_text()
        assert time.monotonic() < deadline, log.read_text()
    child.send_signal(signal.SIGINT)


def _reap(child: subprocess.Popen[bytes]) -> None:
    """Wait for ``child`` to end, killing it if it outlives the deadline."""
    try:
        child.wait(DEADLINE_S)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()


def test_a_bug_reaches_a_person_as_one_line_not_a_traceback(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An unexpected error in a command: one ``error:`` line naming it, exit 1; the
    traceback only with RSILAB_DEBUG=1."""
    import rsilab.cli.lab as lab_cli

    def broken(*args: object, **kwargs: object) -> object:
        raise ZeroDivisionError("a bug in the lab command")

    monkeypatch.setattr(lab_cli.Lab, "init", broken)
    result = rsilab("init", "--lab", tmp_path / "lab")
    assert result.exit_code == 1
    assert "error: internal error: ZeroDivisionError: a bug in the lab command" in result.stderr
    assert "Traceback" not in result.stderr + result.stdout
    monkeypatch.setenv("RSILAB_DEBUG", "1")
    again = rsilab("init", "--lab", tmp_path / "lab")
    assert isinstance(again.exception, ZeroDivisionError)
