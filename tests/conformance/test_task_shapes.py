"""Every task shape of issue 22 through the command line: check, run, resume, verify.

Six small tasks (:mod:`tests.conformance.shapes`) cover every pair of six two-valued factors:
TOML or Python task, target higher or lower is better, with or without a train step, the
config file ``config.json`` or ``params.json``, one benchmark or two of opposite directions,
a built-in scorer or the task's own. Each goes through ``rsilab task check --run``, a campaign
stopped by a person after three experiments (the baseline made by the run), ``rsilab resume
latest --budget experiments=5`` (which loads the task again from its recorded source) and
``rsilab verify``. The policy's running best, as its progress reports it, is checked against
the dev scores the controller recorded, each of which is checked against the task's formula;
an accepted version's final-tier score is checked against the baseline's, in the task's
direction, and against the formula.

Why a stop and not ``rsilab run --budget experiments=3``: a campaign that spends its experiment
budget is finished, and a finished campaign is final (``rsilab resume`` says there is nothing
to do), so only a stopped one can be continued. The stop is requested the way Ctrl-C requests
it under ``rsilab run``, through the same :func:`rsilab.orchestrator.api.run` the command calls.
"""

from __future__ import annotations

import itertools
import re
from pathlib import Path

import pytest

from rsilab.orchestrator.api import run as run_campaign
from rsilab.orchestrator.campaign import Progress, StopRequest
from rsilab.records import Campaign, Candidate, Experiment, SystemVersion
from rsilab.store import Lab
from tests.cli.helpers import explain, rsilab
from tests.conformance.shapes import FACTORS, ROWS, START_W, Shape, expected_score, write_task

FIRST_LEG = 3
"""Experiments before the stop; the resume brings the campaign to :data:`BUDGET`."""
BUDGET = 5
CLOSE = 1e-9
"""Scores from the records against the formulas: the same arithmetic, up to rounding."""
PRINTED = 5e-5
"""A best printed with four decimals against the records."""
_BEST = re.compile(r"^experiment (\d+)/\d+ .*\(best (-?[0-9.]+)\)", re.MULTILINE)


def test_the_rows_cover_every_pair_of_factors() -> None:
    assert len(ROWS) <= 8 and len(set(ROWS)) == len(ROWS)
    assert all(len(row) == len(FACTORS) == 6 for row in ROWS)
    for i, j in itertools.combinations(range(6), 2):
        seen = {(row[i], row[j]) for row in ROWS}
        assert seen == {(0, 0), (0, 1), (1, 0), (1, 1)}, (FACTORS[i], FACTORS[j])


def _id(row: tuple[int, ...]) -> str:
    return "-".join(name for name, on in zip(FACTORS, row, strict=True) if on) or "plain"


@pytest.mark.parametrize("index", range(len(ROWS)), ids=[_id(r) for r in ROWS])
def test_a_task_shape_runs_resumes_and_verifies(tmp_path: Path, index: int) -> None:
    shape = Shape.of_row(ROWS[index])
    path = write_task(tmp_path / "task", shape, f"r{index}")
    lab = tmp_path / "lab"
    made = rsilab("init", "--lab", lab)
    assert made.exit_code == 0, explain(made)

    # One row also searches the sandbox for private data, for 2 s: unbounded, the search
    # walks every file the sandbox sees (some 130,000 here) and stops at its 30 s default.
    probe = ["--probe-seconds", "2"] if index == 0 else ["--no-probe"]
    checked = rsilab("task", "check", "--run", *probe, path, "--lab", lab)
    assert checked.exit_code == 0, explain(checked)
    said = checked.stdout + checked.stderr
    assert "has no errors" in said and "run: dev scores target" in said, explain(checked)

    reported = _first_leg(lab, path, seed=100 + index)
    resumed = rsilab("resume", "latest", "--budget", f"experiments={BUDGET}", "--lab", lab)
    assert resumed.exit_code == 0, explain(resumed)
    later = [(int(n), float(b)) for n, b in _BEST.findall(resumed.stdout)]
    assert [n for n, _ in later] == list(range(FIRST_LEG + 1, BUDGET + 1)), resumed.stdout
    reported += [b for _, b in later]

    verified = rsilab("verify", "--lab", lab)
    assert verified.exit_code == 0, explain(verified)

    with Lab.open(lab) as opened:
        [campaign] = opened.store.query_as(Campaign)
        assert campaign.state == "finished" and campaign.end_reason == "budget_spent"
        experiments = sorted(
            opened.store.query_as(Experiment, campaign_id=campaign.id),
            key=lambda e: e.created_at,
        )
        versions = [v for v in opened.store.query_as(SystemVersion) if v.task == campaign.task.name]
        candidates = {c.id: c for c in opened.store.query_as(Candidate)}
    _check_running_best(shape, experiments, reported)
    _check_accepted(shape, versions, candidates, experiments)


def _first_leg(lab: Path, path: Path, *, seed: int) -> list[float]:
    """A campaign on ``path`` stopped by a person once :data:`FIRST_LEG` experiments are done,
    as a first Ctrl-C under ``rsilab run`` stops it; the running bests it reported."""
    stop = StopRequest()
    bests: list[float] = []

    def progress(p: Progress) -> None:
        if p.kind == "experiment" and p.best is not None:
            bests.append(p.best)
            if p.experiments == FIRST_LEG:
                stop.request()

    with Lab.open(lab) as opened:
        result = run_campaign(
            str(path), budget=f"experiments={BUDGET}", seed=seed, lab=opened,
            on_progress=progress, stop=stop,
        )  # fmt: skip
    assert result.state == "stopped" and result.experiments == FIRST_LEG, result.message
    return bests


def _check_running_best(shape: Shape, experiments: list[Experiment], reported: list[float]) -> None:
    """Each dev score the controller recorded is the formula's at the experiment's ``w``; the
    best reported after the k-th experiment is the best of the first k in the task's
    direction, so it never moves the wrong way."""
    assert len(experiments) == BUDGET == len(reported)
    scores = []
    for e in experiments:
        metric = e.last_metric("target")
        assert metric is not None, f"{e.id} has no controller dev score"
        w = float(e.config.get("w", START_W))
        assert metric.value == pytest.approx(expected_score(shape, w, "dev"), abs=CLOSE), e.id
        scores.append(metric.value)
    pick = min if shape.lower else max
    for k, best in enumerate(reported, start=1):
        assert best == pytest.approx(pick(scores[:k]), abs=PRINTED), (k, scores, reported)
    for before, after in itertools.pairwise(reported):  # the leg printed them rounded
        moved_wrong = after - before if shape.lower else before - after
        assert moved_wrong <= PRINTED, reported


def _check_accepted(
    shape: Shape,
    versions: list[SystemVersion],
    candidates: dict[str, Candidate],
    experiments: list[Experiment],
) -> None:
    """The baseline's final-tier score is the formula's at the starting ``w``; the last
    accepted version (if any) scores as the formula says at its experiment's ``w``, and better
    than the baseline in the task's direction."""
    [baseline] = [v for v in versions if v.parent_id is None]
    start = baseline.scores["target"].value
    assert start == pytest.approx(expected_score(shape, START_W, "final"), abs=CLOSE)
    accepted = [v for v in versions if v.candidate_id is not None]
    if not accepted:
        return
    last = max(accepted, key=lambda v: v.created_at)
    experiment_id = candidates[str(last.candidate_id)].experiment_id
    [source] = [e for e in experiments if e.id == experiment_id]
    w = float(source.config.get("w", START_W))
    final = last.scores["target"].value
    assert final == pytest.approx(expected_score(shape, w, "final"), abs=CLOSE)
    assert (final < start) if shape.lower else (final > start), (start, final)
