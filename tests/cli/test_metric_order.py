"""Every table of a task's scores shows its target first, then the others as declared: the
report (Markdown and the one-file HTML of the dashboard's pages), ``versions``, ``run``'s
closing table and ``task check --run``, on a task whose target is declared second and
sorts last."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.cli.helpers import explain, rsilab
from tests.cli.user_tasks import harness_task, target_declared_second


def _before(text: str, first: str, second: str) -> bool:
    assert first in text and second in text, f"{first!r} or {second!r} missing from:\n{text}"
    return text.index(first) < text.index(second)


def test_the_target_comes_first_wherever_scores_are_shown(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RSILAB_SANDBOX", "process")
    task = harness_task(tmp_path)
    target_declared_second(task)
    lab = tmp_path / "lab"
    assert rsilab("init", "--lab", lab).exit_code == 0

    ran = rsilab("run", task / "task.toml", "--budget", "experiments=3", "--lab", lab)
    assert ran.exit_code == 0, explain(ran)
    header = next(line for line in ran.stdout.splitlines() if "label" in line)
    assert _before(header, "zeta", "alpha")  # run's closing versions table

    md = rsilab("report", "latest", "--lab", lab)
    assert md.exit_code == 0, explain(md)
    summary = md.stdout.split("## Summary", 1)[1].split("## Research DAG", 1)[0]
    assert _before(summary, "| zeta (target", "| alpha (")
    assert _before(md.stdout.split("## Accepted versions", 1)[1], "zeta ", "alpha ")
    dag = md.stdout.split("## Research DAG", 1)[1].split("###", 1)[0]
    dag = dag.split("| conclusion |", 1)[1]  # the table, past its header
    assert _before(dag, "zeta ", "alpha ")  # a direction's best dev scores

    for ref in (str(task / "task.toml"), "mine"):  # by file, and by name (from its campaign)
        listed = rsilab("versions", ref, "--lab", lab)
        assert listed.exit_code == 0, explain(listed)
        header = next(line for line in listed.stdout.splitlines() if "label" in line)
        assert _before(header, "zeta", "alpha"), ref

    page = tmp_path / "report.html"
    assert rsilab("report", "latest", "--html", page, "--lab", lab).exit_code == 0
    html = page.read_text()
    assert _before(html, "<th>zeta (target)</th>", "<th>alpha</th>")  # the lineage table
    assert _before(html, ">zeta dev</th>", ">alpha dev</th>")  # the experiments tables
    assert _before(html, 'data-benchmark="zeta"', 'data-benchmark="alpha"')  # the curves

    checked = rsilab("task", "check", "--run", "--no-probe", task)
    assert checked.exit_code == 0, explain(checked)
    line = next(x for x in checked.stderr.splitlines() if x.startswith("run: dev scores"))
    assert _before(line, "zeta", "alpha")
