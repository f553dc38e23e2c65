"""``rsilab evolve``: rounds from a shell, the round report it prints and writes, refusals."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from rsilab.agents.llm.scripted import Reply, ScriptedServer, ServerError, Step
from rsilab.records import Evolution, SystemVersion
from rsilab.store import Lab
from tests.cli.helpers import explain, rsilab
from tests.sandbox.helpers import bwrap_problem


def _evolution(lab: Path) -> Evolution:
    with Lab.open(lab) as opened:
        (evolution,) = opened.store.query_as(Evolution)
        return evolution


@pytest.mark.timeout(240)
def test_a_teacher_improves_every_round_and_the_report_is_printed_and_written(
    tmp_path: Path,
) -> None:
    problem = bwrap_problem()
    if problem is not None:
        pytest.skip(f"bubblewrap is unusable here ({problem})")
    lab = tmp_path / "lab"
    assert rsilab("init", "--lab", lab).exit_code == 0
    result = rsilab(
        "evolve", "policy", "--rounds", "2", "--improver", "teacher",
        "--budget", "experiments=1,wall=5m", "--lab", lab,
    )  # fmt: skip
    assert result.exit_code == 0, explain(result)
    evolution = _evolution(lab)
    assert evolution.state == "finished" and len(evolution.rounds) == 2
    first, second = evolution.rounds
    assert first.improver_version_id == second.improver_version_id
    assert first.improver_version_id == evolution.teacher_version_id
    assert "round 2 finished" in result.stdout
    assert '"knobs": "space.json"' in result.stdout  # improve.py's report, relayed
    written = lab / "reports" / f"{evolution.id}.md"
    text = written.read_text()
    assert text in result.stdout and f"report: {written}" in result.stdout
    assert text.startswith(f"# Evolution report: {evolution.id}")
    with Lab.open(lab) as opened:
        start = opened.store.get_as(evolution.start_version_id, SystemVersion)
    assert re.search(rf"^\| 0 \| - \| {re.escape(start.label)} `{start.id}` \|", text, re.M)
    for entry in evolution.rounds:
        assert f"| {entry.round} | teacher: {start.label} {start.id} |" in text
    again = rsilab("report", evolution.id, "--lab", lab)
    assert again.exit_code == 0, explain(again)
    assert again.stdout.split("\n", 3)[:2] == text.split("\n", 3)[:2]


def test_a_builtin_teacher_round_from_the_shell(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RSILAB_SANDBOX", "process")
    lab = tmp_path / "lab"
    assert rsilab("init", "--lab", lab).exit_code == 0
    result = rsilab(
        "evolve", "synthetic", "--rounds", "1", "--improver", "teacher:builtin",
        "--budget", "experiments=1", "--lab", lab,
    )  # fmt: skip
    assert result.exit_code == 0, explain(result)
    evolution = _evolution(lab)
    assert evolution.state == "finished" and evolution.rounds[0].improver == (
        "teacher: builtin policy"
    )
    assert "it has no score of its own here" in result.stdout


def test_a_round_that_stopped_on_an_error_makes_the_exit_status_1(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RSILAB_SANDBOX", "process")
    lab = tmp_path / "lab"
    assert rsilab("init", "--lab", lab).exit_code == 0
    # Round 1's Main gets an error its client does not retry; round 2's answers with text alone,
    # is asked again twice (a bounded re-prompt); then its runner ends the round.
    silent = Reply("Nothing is worth opening.")
    script: list[Step] = [ServerError(400, "no such model"), silent, silent, silent]
    with ScriptedServer(script) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.openai_base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "k")
        result = rsilab(
            "evolve", "synthetic", "--rounds", "2", "--improver", "teacher:openai:gpt-test",
            "--budget", "experiments=1", "--lab", lab,
        )  # fmt: skip
    assert result.exit_code == 1, explain(result)
    evolution = _evolution(lab)
    assert evolution.state == "finished" and len(evolution.rounds) == 2  # it went on
    first, second = evolution.rounds
    assert (first.state, second.state) == ("stopped", "finished")
    assert f"error: round 1's campaign {first.campaign_id} stopped on an error" in result.stderr
    assert "round 2's" not in result.stderr
    assert server.remaining == 0  # both re-prompts were sent


def test_self_without_an_improve_entry_point_is_a_user_error(tmp_path: Path) -> None:
    lab = tmp_path / "lab"
    assert rsilab("init", "--lab", lab).exit_code == 0
    result = rsilab("evolve", "synthetic", "--improver", "self", "--lab", lab)
    assert result.exit_code == 2, explain(result)
    assert "declares no improve entry point" in result.stderr
    assert "--improver teacher" in result.stderr
    bad = rsilab("evolve", "synthetic", "--improver", "mentor", "--lab", lab)
    assert bad.exit_code == 2 and "not an improver rsilab knows" in bad.stderr
    with Lab.open(lab) as opened:
        assert not opened.store.query_as(Evolution)


def test_help_lists_evolve() -> None:
    result = rsilab("--help")
    assert result.exit_code == 0 and " evolve " in result.stdout
    helped = " ".join(rsilab("evolve", "--help").stdout.split())
    assert "--improver" in helped and "Ctrl-C leaves the evolution stopped" in helped
