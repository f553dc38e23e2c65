"""``rsilab report`` and the dashboard say why experiments failed: each distinct reason once,
with how many experiments it took and one of them, on a task of the user's own whose predict
crashes under one switch and writes garbage under another."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.cli.helpers import explain, rsilab
from tests.cli.user_tasks import edit, harness_task

CRASH = "lowercase is broken in this build"


def _breaking(folder: Path) -> None:
    """predict exits with a message when ``lowercase`` is on, and answers with a line that is
    not JSON when ``strip_punctuation`` is on."""
    edit(
        folder / "harness" / "predict.py",
        "for line in sys.stdin:",
        f'if config.get("lowercase"):\n    raise SystemExit({CRASH!r})\n'
        'if config.get("strip_punctuation"):\n    print("no json here")\n'
        "for line in sys.stdin:",
    )


def test_the_report_groups_failed_experiments_by_reason(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RSILAB_SANDBOX", "process")
    task = harness_task(tmp_path)
    _breaking(task)
    lab = tmp_path / "lab"
    assert rsilab("init", "--lab", lab).exit_code == 0
    ran = rsilab("run", task, "--budget", "experiments=8", "--seed", "7", "--lab", lab)
    assert ran.exit_code in (0, 1), explain(ran)  # too many failures in a row may end it

    data = json.loads(rsilab("report", "latest", "--json", "--lab", lab).stdout)
    groups = {g["reason"]: g for g in data["failures"]}
    crashed = [r for r in groups if r.startswith("dev-eval job exited with 1: ") and CRASH in r]
    garbage = [r for r in groups if "predict broke the output contract" in r]
    assert len(crashed) == 1 and len(garbage) == 1, groups  # one line per distinct reason
    assert all("\n" not in r and len(r) <= 200 for r in groups)
    with_ids = {e["id"]: e for e in _experiments(lab)}
    for reason in (*crashed, *garbage):
        example = with_ids[groups[reason]["example_experiment_id"]]
        assert example["state"] == "failed"
        assert example["config"]["lowercase" if reason in crashed else "strip_punctuation"]
    failed = [e for e in with_ids.values() if e["state"] == "failed"]
    assert sum(g["count"] for g in groups.values()) == len(failed) >= 2
    lowercase = sum(1 for e in failed if e["config"]["lowercase"])
    assert groups[crashed[0]]["count"] == lowercase  # a crash wins over the garbage it hid

    md = rsilab("report", "latest", "--lab", lab).stdout
    assert f", {len(failed)} failed or cancelled" in md
    row = next(line for line in md.splitlines() if CRASH in line and line.startswith("|"))
    assert re.search(rf"\| {lowercase} \| `exp-[0-9a-f]+` \|$", row), row

    page = tmp_path / "report.html"
    assert rsilab("report", "latest", "--html", page, "--lab", lab).exit_code == 0
    html = page.read_text()
    assert '<section id="failures"><h2>Why experiments failed</h2>' in html
    assert CRASH in html and "predict broke the output contract" in html


def test_a_campaign_without_failures_shows_no_reasons(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RSILAB_SANDBOX", "process")
    task = harness_task(tmp_path)
    lab = tmp_path / "lab"
    assert rsilab("init", "--lab", lab).exit_code == 0
    assert rsilab("run", task, "--budget", "experiments=2", "--lab", lab).exit_code == 0
    data = json.loads(rsilab("report", "latest", "--json", "--lab", lab).stdout)
    assert data["failures"] == []
    assert "Why experiments failed" not in rsilab("report", "latest", "--lab", lab).stdout


def _experiments(lab: Path) -> list[dict[str, object]]:
    from rsilab.records import Experiment
    from rsilab.store import Lab

    with Lab.open(lab) as opened:
        return [e.model_dump(mode="json") for e in opened.store.query_as(Experiment)]
