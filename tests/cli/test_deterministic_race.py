"""On a task of the user's own whose scores do not depend on the seed, the built-in policy
spends no experiment re-running a config whose two runs already agree: it leaves the budget
unspent rather than repeat a known result, and proposes the same best."""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

import pytest

from tests.cli.helpers import explain, rsilab
from tests.cli.user_tasks import harness_task


def test_no_config_runs_again_once_two_seeds_agreed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RSILAB_SANDBOX", "process")
    task = harness_task(tmp_path)  # three switches: eight configs, none of them random
    lab = tmp_path / "lab"
    assert rsilab("init", "--lab", lab).exit_code == 0
    ran = rsilab("run", task, "--budget", "experiments=16", "--seed", "5", "--lab", lab)
    assert ran.exit_code == 0, explain(ran)

    runs: dict[str, list[tuple[int, str]]] = defaultdict(list)
    for exp, seed in _experiments(lab):
        runs[json.dumps(exp["config"], sort_keys=True)].append((seed, exp["summary_text"]))
    assert len(runs) == 8  # the whole space was searched
    for config, seen in runs.items():
        assert len(seen) <= 2, (config, seen)  # the second run showed the seed does not matter
        assert len({seed for seed, _ in seen}) == len(seen)  # each run on its own seed
        assert len({summary for _, summary in seen}) == 1, seen  # and scored the same
    assert sum(len(s) for s in runs.values()) < 16  # the rest of the budget was not spent
    assert "1 accepted" in ran.stdout


def _experiments(lab: Path) -> list[tuple[dict[str, object], int]]:
    from rsilab.records import Experiment, Job
    from rsilab.store import Lab

    with Lab.open(lab) as opened:
        seeds = {j.experiment_id: j.inputs.seed for j in opened.store.query_as(Job)}
        return [(e.model_dump(mode="json"), seeds[e.id]) for e in opened.store.query_as(Experiment)]
