"""``--json`` on listings and summaries: stdout is JSON alone (progress goes to stderr), and
each field says what the lab's records say, read here from the store a second way."""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import pytest

from rsilab.agents.llm.scripted import ScriptedServer
from rsilab.records import Campaign, Candidate, EventDraft, Evolution, Experiment
from rsilab.store import Lab
from tests.cli.helpers import explain, rsilab

DEADLINE_S = 30.0
EXIT_MEANING = {0: "done", 1: "runtime failure", 130: "interrupted"}
"""Issue 9's words for the codes a run can end with (literals, not read from the code)."""


@pytest.fixture(scope="module")
def ran(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, dict[str, Any], str]]:
    """A lab with one finished run of six experiments: its folder, the parsed ``run --json``
    object and the run's stderr."""
    with pytest.MonkeyPatch.context() as env:
        env.setenv("RSILAB_SANDBOX", "process")
        lab = tmp_path_factory.mktemp("json") / "lab"
        # its own key folder (lab.parent / "keys"): a test that writes to it again needs its key
        env.setenv("RSILAB_KEY_DIR", str(lab.parent / "keys"))
        assert rsilab("init", "--lab", lab).exit_code == 0
        result = rsilab(
            "run", "synthetic", "--budget", "experiments=6", "--seed", "2", "--json", "--lab", lab
        )
        assert result.exit_code == 0, explain(result)
        yield lab, json.loads(result.stdout), result.stderr


def _json(*args: str | Path) -> Any:
    result = rsilab(*args)
    assert result.exit_code == 0, explain(result)
    return json.loads(result.stdout)  # the whole of stdout: nothing else is printed there


def test_run_json_is_the_campaign_as_recorded(ran: tuple[Path, dict[str, Any], str]) -> None:
    lab, summary, stderr = ran
    with Lab.open(lab) as opened:
        [campaign] = opened.store.query_as(Campaign)
        experiments = opened.store.query_as(Experiment, campaign_id=campaign.id)
        accepted = [
            c.version_id
            for c in opened.store.query_as(Candidate, campaign_id=campaign.id)
            if c.state == "accepted"
        ]
    assert summary["campaign_id"] == campaign.id and summary["task"] == "synthetic"
    assert (summary["state"], summary["end_reason"]) == (campaign.state, campaign.end_reason)
    assert summary["end_detail"] == campaign.end_detail
    assert summary["experiments"] == len(experiments) == 6
    assert [v["version_id"] for v in summary["accepted"]] == accepted
    assert summary["seed"] == campaign.settings["seed"] == 2
    assert (summary["exit_code"], summary["exit_meaning"]) == (0, "done")
    assert summary["report"] == str(lab / "reports" / f"{campaign.id}.md")
    assert Path(summary["report"]).is_file()
    assert "experiment 6/6" in stderr  # progress went to stderr


def test_campaign_list_json(ran: tuple[Path, dict[str, Any], str]) -> None:
    lab, _, _ = ran
    listed = _json("campaign", "list", "--json", "--lab", lab)
    with Lab.open(lab) as opened:
        campaigns = opened.store.query_as(Campaign)
        counts = {c.id: len(opened.store.events(campaign_id=c.id)) for c in campaigns}
    assert [c["id"] for c in listed] == [c.id for c in campaigns]
    for row, campaign in zip(listed, campaigns, strict=True):
        assert row["task"] == campaign.task.name and row["state"] == campaign.state
        assert row["end_reason"] == campaign.end_reason
        assert row["created_at"] == campaign.created_at
        assert row["seed"] == campaign.settings.get("seed")
        assert row["events"] == counts[campaign.id] > 0


def test_campaign_list_json_of_an_empty_lab(tmp_path: Path) -> None:
    assert rsilab("init", "--lab", tmp_path / "lab").exit_code == 0
    assert _json("campaign", "list", "--json", "--lab", tmp_path / "lab") == []


def test_log_json_is_an_array_of_the_ledgers_events(ran: tuple[Path, dict[str, Any], str]) -> None:
    lab, summary, _ = ran
    with Lab.open(lab) as opened:
        head, _ = opened.store.head()
        stored = [json.loads(row.text) for row in opened.store.stored_events()]
        theirs = opened.store.events(campaign_id=summary["campaign_id"])
    every = _json("log", "--json", "--limit", "0", "--lab", lab)
    assert [e["seq"] for e in every] == list(range(1, head + 1))
    assert every == stored  # each event as the ledger holds its text
    last = _json("log", "--json", "--limit", "3", "--lab", lab)
    assert [e["seq"] for e in last] == [head - 2, head - 1, head]
    one = _json("log", "--json", "--limit", "0", "--campaign", "latest", "--lab", lab)
    assert [e["seq"] for e in one] == [e.seq for e in theirs]


def test_show_json(ran: tuple[Path, dict[str, Any], str]) -> None:
    lab, summary, _ = ran
    cid = summary["campaign_id"]
    shown = _json("show", cid, "--json", "--lab", lab)
    with Lab.open(lab) as opened:
        history = opened.store.events(record_id=cid)
    assert shown["record"]["id"] == cid and shown["record"]["state"] == summary["state"]
    assert [e["seq"] for e in shown["events"]] == [e.seq for e in history]
    event = _json("show", "event:1", "--json", "--lab", lab)
    assert event["event"]["seq"] == 1 and event["event"]["action"] == "lab_created"


def test_resume_json_of_a_finished_campaign(ran: tuple[Path, dict[str, Any], str]) -> None:
    lab, summary, _ = ran
    again = _json("resume", "latest", "--json", "--lab", lab)
    assert again["campaign_id"] == summary["campaign_id"] and again["state"] == "finished"
    assert again["experiments"] == summary["experiments"]
    assert "nothing to do" in again["message"]
    assert (again["exit_code"], again["exit_meaning"]) == (0, "done")


def test_report_json_is_format_json(ran: tuple[Path, dict[str, Any], str]) -> None:
    lab, _, _ = ran
    short = _json("report", "latest", "--json", "--lab", lab)
    long = _json("report", "latest", "--format", "json", "--lab", lab)
    short.pop("generated_at"), long.pop("generated_at")  # when each was built
    assert short == long


def test_evolve_json(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RSILAB_SANDBOX", "process")
    lab = tmp_path / "lab"
    assert rsilab("init", "--lab", lab).exit_code == 0
    result = rsilab(
        "evolve", "synthetic", "--rounds", "1", "--improver", "teacher:builtin",
        "--budget", "experiments=1", "--json", "--lab", lab,
    )  # fmt: skip
    assert result.exit_code == 0, explain(result)
    summary = json.loads(result.stdout)
    with Lab.open(lab) as opened:
        [evolution] = opened.store.query_as(Evolution)
    assert summary["evolution_id"] == evolution.id and summary["state"] == evolution.state
    assert summary["seed"] == evolution.seed
    assert [r["campaign_id"] for r in summary["rounds"]] == [
        r.campaign_id for r in evolution.rounds
    ]
    assert summary["head_id"] == evolution.rounds[-1].head_after
    assert (summary["exit_code"], summary["exit_meaning"]) == (0, "done")
    assert "round 1" in result.stderr


def test_run_json_of_a_campaign_that_stopped_on_an_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An LLM endpoint that answers 400: still one JSON object, saying exit 1 and why."""
    lab = tmp_path / "lab"
    assert rsilab("init", "--lab", lab).exit_code == 0
    monkeypatch.setenv("RSILAB_SANDBOX", "process")
    with ScriptedServer() as server:  # no step: the Main's first request gets an HTTP 400
        monkeypatch.setenv("OPENAI_BASE_URL", server.openai_base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "k")
        result = rsilab(
            "run", "synthetic", "--agents", "openai:gpt-test", "--budget", "experiments=2",
            "--json", "--lab", lab,
        )  # fmt: skip
    assert result.exit_code == 1, explain(result)
    summary = json.loads(result.stdout)
    with Lab.open(lab) as opened:
        [campaign] = opened.store.query_as(Campaign)
    assert summary["campaign_id"] == campaign.id
    assert (summary["state"], summary["end_reason"]) == (campaign.state, campaign.end_reason)
    assert summary["exit_code"] == result.exit_code
    assert summary["exit_meaning"] == EXIT_MEANING[result.exit_code]
    assert summary["state"] == "stopped"


def _pump(stream: IO[str], lines: queue.Queue[str]) -> None:
    for line in stream:
        lines.put(line)


def _next_line(lines: queue.Queue[str]) -> str:
    return lines.get(timeout=DEADLINE_S)


@pytest.mark.skipif(sys.platform == "win32", reason="sends SIGINT")
def test_log_json_follow_prints_json_lines(
    ran: tuple[Path, dict[str, Any], str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """With --follow the output is JSON Lines: one event a line, the new ones as they come."""
    lab, _, _ = ran
    monkeypatch.setenv("RSILAB_KEY_DIR", str(lab.parent / "keys"))  # this test writes to it
    with Lab.open(lab) as opened:
        head, _ = opened.store.head()
    argv = [sys.executable, "-m", "rsilab", "log", "--json", "--follow", "--limit", "2"]
    proc = subprocess.Popen(
        [*argv, "--lab", str(lab)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    assert proc.stdout is not None and proc.stderr is not None
    lines: queue.Queue[str] = queue.Queue()
    threading.Thread(target=_pump, args=(proc.stdout, lines), daemon=True).start()
    try:
        shown = [json.loads(_next_line(lines)) for _ in range(2)]
        assert [e["seq"] for e in shown] == [head - 1, head]
        with Lab.open(lab) as opened:
            opened.store.commit(
                EventDraft(actor="json-test", role="human", action="note", detail="hi")
            )
        new = json.loads(_next_line(lines))
        assert (new["seq"], new["actor"]) == (head + 1, "json-test")
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=DEADLINE_S) == 0, proc.stderr.read()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        proc.stdout.close()
        proc.stderr.close()
