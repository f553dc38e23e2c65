"""``rsilab run`` and ``rsilab resume``: a campaign driven by the built-in policy."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.text import Text

from rsilab.cli._common import LabOption, stdout_console
from rsilab.errors import UserError
from rsilab.store import Lab

AGENTS = ("builtin",)


def _budget(text: str | None, default: object) -> object:
    from rsilab.tasks import Budget
    from rsilab.tasks._budget import parse_budget

    try:
        base = Budget.model_validate(default)
        if text is None:
            return base
        return Budget.model_validate(base.model_dump() | parse_budget(text))
    except ValueError as exc:
        raise UserError(f"bad --budget: {exc}", "e.g. --budget experiments=40,wall=20m") from exc


def run(
    task_ref: Annotated[str, typer.Argument(metavar="TASK", help="Task name.")],
    agents: Annotated[str, typer.Option("--agents", help="Policy: builtin.")] = "builtin",
    workers: Annotated[int, typer.Option("--workers", min=1, help="Workers.")] = 1,
    budget: Annotated[
        str | None, typer.Option("--budget", help="e.g. experiments=40,wall=20m.")
    ] = None,
    seed: Annotated[int, typer.Option("--seed", help="Campaign seed.")] = 0,
    lab: LabOption = None,
) -> None:
    """Run a campaign on TASK with the built-in (no-LLM) Main, Workers and Reviewer."""
    from rsilab.tasks import load_task

    if agents not in AGENTS:
        raise UserError(f"--agents {agents}: not available yet", "use --agents builtin")
    task = load_task(task_ref)
    _drive(lab, task.name, _budget(budget, task.budget), workers, seed, None)


def resume(
    campaign: Annotated[str, typer.Argument(metavar="CAMPAIGN", help="Campaign id or latest.")],
    budget: Annotated[
        str | None, typer.Option("--budget", help="e.g. experiments=60 to extend it.")
    ] = None,
    lab: LabOption = None,
) -> None:
    """Continue a stopped (or, with a larger --budget, a finished) campaign."""
    from rsilab.expos.campaigns import find_campaign
    from rsilab.orchestrator.campaign_run import task_of

    with Lab.open(lab) as opened:
        found = find_campaign(opened.store, campaign)
    task = task_of(found)
    stored = found.settings.get("budget", task.budget)
    workers = int(found.settings.get("workers", 1))
    seed = int(found.settings.get("seed", 0))
    _drive(lab, task.name, _budget(budget, stored), workers, seed, found.id)


def _drive(
    lab_path: object, task_name: str, budget: object, workers: int, seed: int, cid: str | None
) -> None:
    from pathlib import Path

    from rsilab.cli.versions import _versions_table
    from rsilab.controller.lineage import find_lineage, lineage_versions
    from rsilab.orchestrator.runner import Progress, run_campaign
    from rsilab.tasks import Budget, get_task

    console = stdout_console()
    task = get_task(task_name)
    assert isinstance(budget, Budget)

    def show(p: Progress) -> None:
        console.print(Text(p.message), soft_wrap=True)

    path = lab_path if isinstance(lab_path, Path) or lab_path is None else Path(str(lab_path))
    with Lab.open(path) as opened:
        result = run_campaign(
            opened,
            task,
            budget=budget,
            workers=workers,
            seed=seed,
            on_progress=show,
            campaign_id=cid,
        )
        found = find_lineage(opened.store, task.name, "main")
        members = lineage_versions(opened.store, found) if found is not None else []
    console.print(
        Text(
            f"campaign {result.campaign_id} [{result.state}]: {result.experiments} "
            f"experiments, {len(result.accepted)} accepted; {result.message}",
            style="bold",
        ),
        soft_wrap=True,
    )
    if found is not None:
        console.print(_versions_table(found, members))
    if result.measures is not None:
        m = result.measures
        console.print(
            Text(
                f"lock-in: {m.directions} directions ({m.directions_explored} explored), "
                f"top share {m.top_direction_share or 0:.2f}, branches {m.branches}, "
                f"revisions {m.revisions}, verifications {m.verifications}, "
                f"reviews {m.reviews} (followed {m.reviews_followed}/{m.reviews_acted_on})"
            ),
            soft_wrap=True,
        )
    if result.state == "stopped":
        console.print(Text(f"continue with: rsilab resume {result.campaign_id}", "yellow"))


def register(app: typer.Typer) -> None:
    """Add ``run`` and ``resume`` to ``app``."""
    app.command("run")(run)
    app.command("resume")(resume)
