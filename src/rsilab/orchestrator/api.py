"""``rsilab.run`` and ``rsilab.resume``: a campaign from Python, as ``rsilab run`` starts one.

Both check every argument before anything is written (a bad budget creates no campaign and no
lab), choose the policy the arguments name (built-in or LLM agents, alone or as a team) and
make one call into the lifecycle (:func:`rsilab.orchestrator.campaign.run_policy`). The CLI
calls these too, so a run from Python and one from the shell are the same run.
"""

from __future__ import annotations

import contextlib
import secrets
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from rsilab.agents.llm import resolve_chat_model
from rsilab.errors import UserError
from rsilab.executors import ExecutorChoice
from rsilab.expos.campaigns import find_campaign
from rsilab.memory import team_size
from rsilab.orchestrator.builtin.runner import BuiltinPolicy
from rsilab.orchestrator.builtin.team import TeamPolicy
from rsilab.orchestrator.campaign import (
    CampaignPolicy,
    CampaignResult,
    ProgressFn,
    StopRequest,
    campaign_result,
    check_harness,
    run_policy,
    task_of,
)
from rsilab.orchestrator.llm.runner import LlmPolicy
from rsilab.orchestrator.llm.team import LlmTeamPolicy
from rsilab.records import Experiment
from rsilab.store import Lab
from rsilab.store.lab import lab_exists, resolve_lab_path
from rsilab.tasks import Budget, Task, load_task

__all__ = ["MAX_SEED", "BudgetLike", "LabLike", "draw_seed", "resume", "run"]

BudgetLike = Budget | Mapping[str, Any] | str | None
"""A budget: a :class:`~rsilab.tasks.Budget`, a mapping of its fields (``experiments``,
``wall`` or ``wall_s``, ``tokens``), a text such as ``"experiments=40,wall=20m"``, or None
for the task's own. Fields given replace the task's (or the campaign's) and keep the rest."""
LabLike = Lab | str | Path | None
"""A lab: an opened :class:`~rsilab.store.Lab`, or its folder (created when it holds no lab
yet), or None for ``$RSILAB_LAB`` or ``./.rsilab``."""


def run(
    task: str | Task,
    *,
    budget: BudgetLike = None,
    agents: str = "builtin",
    workers: int = 1,
    team: int = 0,
    seed: int | None = None,
    lab: LabLike = None,
    on_progress: ProgressFn | None = None,
    stop: StopRequest | None = None,
    unsandboxed: bool = False,
    unbounded_disk: bool = False,
    executor: ExecutorChoice | None = None,
) -> CampaignResult:
    """Run a new campaign on ``task`` until its budget is spent, it is stopped, or it fails.

    Args:
        task: a built-in task's name, a ``task.toml`` path or folder, ``file.py[:NAME]``, or
            a :class:`~rsilab.tasks.Task`.
        budget: a dict of ``experiments``, ``wall`` (``"20m"``, ``"1.5h"`` or seconds) and
            ``tokens``; a text such as ``"experiments=40,wall=20m"``; or a
            :class:`~rsilab.tasks.Budget`. Fields given replace the task's budget's.
        agents: ``builtin`` (no LLM), ``openai:MODEL`` or ``anthropic:MODEL``.
        workers: experiments run at once, each by a Worker (not with ``team``).
        team: with N > 0, a Leader and N researchers work at once, each on the whole task.
        seed: the campaign's seed (the built-in policy's choices follow from it), 0 to
            :data:`MAX_SEED`; None draws a fresh one (:func:`draw_seed`), so two runs on one
            lab differ unless they name a seed. It is recorded in the campaign's settings.
        lab: an opened :class:`~rsilab.store.Lab`, a folder (created when it holds no lab
            yet, once every argument is checked), or None for ``$RSILAB_LAB``, else
            ``./.rsilab``.
        on_progress: called with each :class:`~rsilab.orchestrator.campaign.Progress` line,
            on the calling thread.
        stop: a :class:`~rsilab.orchestrator.campaign.StopRequest`; its first request drains
            (running experiments finish), its second cancels them. KeyboardInterrupt on the
            calling thread stops the run too.
        unsandboxed: run jobs as plain processes where bubblewrap cannot run: no security
            boundary, recorded in the campaign and shown in its report. Without it such a
            machine refuses the run before anything is written.
        unbounded_disk: accept a disk limit that is only polled where the kernel cannot
            enforce one (rsilab not run as root); recorded as the campaign's ``disk_limit``.
        executor: where jobs run (:func:`rsilab.executors.parse_executor`): None or
            ``local`` on this machine; ``ray`` on a Ray cluster (see :mod:`rsilab.executors.ray`).

    Returns:
        The :class:`~rsilab.orchestrator.campaign.CampaignResult`: campaign id, state,
        ``end_reason``, experiments, the versions the controller accepted with their scores.

    Raises:
        UserError: an argument is wrong, no sandbox may run the jobs, the task's harness or
            the LLM's endpoint or API key is unusable (for each: nothing is written).
        LeaseHeld: another process runs the campaign.
        RsilabError: what ended the run (the campaign ends ``stopped``, ``error`` or
            ``preflight_failed`` when its baseline failed; resumable).
    """
    _check_agents(agents)
    _check_flag("unsandboxed", unsandboxed)
    _check_flag("unbounded_disk", unbounded_disk)
    workers, team, seed = _count("workers", workers, 1), _count("team", team, 0), _seed(seed)
    _check_callbacks(lab, on_progress, stop)
    if team and workers != 1:
        raise UserError(
            "team and workers do not go together: each researcher of a team runs one "
            "experiment at a time, so team=N runs up to N at once",
            "drop workers",
        )
    chosen = task if isinstance(task, Task) else load_task(task)
    spent = to_budget(budget, chosen.budget)
    check_harness(chosen)
    _check_model(agents, lab)
    with _opened(lab) as opened:
        policy = _policy(opened, agents, team, workers, seed, spent, on_progress)
        policy.unsandboxed, policy.unbounded_disk = unsandboxed, unbounded_disk
        policy.executor = executor
        return run_policy(opened, chosen, policy, budget=spent, stop=stop)


def resume(
    campaign: str,
    *,
    budget: BudgetLike = None,
    workers: int | None = None,
    lab: LabLike = None,
    on_progress: ProgressFn | None = None,
    stop: StopRequest | None = None,
    unsandboxed: bool = False,
    unbounded_disk: bool = False,
    executor: ExecutorChoice | None = None,
) -> CampaignResult:
    """Continue a stopped campaign (its id, or ``latest``) where it left off.

    Nothing done is repeated and nothing begun is lost; the campaign keeps its agents, team,
    seed and (unless ``budget`` changes some of its fields) its budget. A finished campaign is
    final: nothing is written and the result's message says so. ``workers`` defaults to the
    number it was started with. The other arguments are :func:`run`'s (``unsandboxed`` is
    and ``unbounded_disk`` are asked for again: an opt-in is this run's, never inherited).

    Raises:
        UserError: no such campaign or lab, a bad argument (nothing is written), a campaign
            that a system's own improve command ran (an evolution's round), or a task that
            cannot be loaded here.
        LeaseHeld: another process runs the campaign.
    """
    if workers is not None:
        workers = _count("workers", workers, 1)
    _check_flag("unsandboxed", unsandboxed)
    _check_flag("unbounded_disk", unbounded_disk)
    _check_callbacks(lab, on_progress, stop)
    with _opened(lab, create=False) as opened:
        found = find_campaign(opened.store, campaign)
        if found.is_finished():
            message = (
                f"nothing to do: campaign {found.id} is {found.state} (the records of a "
                f"finished campaign are final); start a new one with `rsilab run "
                f"{found.task.name}`"
            )
            return campaign_result(opened, found.id, message)
        agents = str(found.settings.get("agents", "builtin"))
        if agents == "harness":
            raise UserError(
                f"campaign {found.id} was round {found.settings.get('round')} of evolution "
                f"{found.settings.get('evolution_id')}, run by a system's own improve command; "
                "resuming runs rsilab's agents, not that",
                "start a new evolution with `rsilab evolve`",
            )
        task = task_of(found)
        spent = to_budget(budget, found.settings.get("budget", task.budget))
        made = len(opened.store.query_as(Experiment, campaign_id=found.id))
        if budget is not None and spent.experiments < made:
            raise UserError(
                f"campaign {found.id} has made {made} experiments; a budget of "
                f"{spent.experiments} would end it for good at once",
                f"give experiments={made + 1} or more, or leave the budget as it is",
            )
        team = team_size(found.settings)
        if team and workers is not None:
            raise UserError("a team campaign takes no workers: each researcher runs its own")
        chosen = workers or team or int(found.settings.get("workers", 1))
        seed = int(found.settings.get("seed", 0))
        policy = _policy(opened, agents, team, chosen, seed, spent, on_progress)
        policy.unsandboxed, policy.unbounded_disk = unsandboxed, unbounded_disk
        policy.executor = executor
        return run_policy(opened, task, policy, budget=spent, campaign_id=found.id, stop=stop)


def _policy(
    lab: Lab,
    agents: str,
    team: int,
    workers: int,
    seed: int,
    budget: Budget,
    on_progress: ProgressFn | None,
) -> CampaignPolicy:
    """The policy ``agents`` and ``team`` name (an LLM's key is checked here)."""
    if agents == "builtin":
        if team:
            return TeamPolicy(team=team, budget=budget, seed=seed, on_progress=on_progress)
        return BuiltinPolicy(budget=budget, workers=workers, seed=seed, on_progress=on_progress)
    if team:
        return LlmTeamPolicy(
            lab, agents=agents, team=team, budget=budget, seed=seed, on_progress=on_progress
        )
    return LlmPolicy(
        lab, agents=agents, budget=budget, workers=workers, seed=seed, on_progress=on_progress
    )


def to_budget(value: BudgetLike, base: object) -> Budget:
    """``value`` (see :data:`BudgetLike`) over ``base`` (a Budget, its text or its mapping);
    UserError naming what is wrong."""
    try:
        start = Budget.model_validate(base)
        if value is None:
            return start
        if isinstance(value, Budget):
            return value
        if not isinstance(value, str | Mapping):
            raise UserError(
                f"budget {value!r}: expected a Budget, a mapping or a text",
                'e.g. budget={"experiments": 40, "wall": "20m"} or "experiments=40,wall=20m"',
            )
        given = Budget.model_validate(value)  # refuses unknown fields and bad values
        named = given.model_dump(include=_fields_named(value))
        return Budget.model_validate(start.model_dump() | named)
    except (ValidationError, ValueError) as exc:
        raise UserError(
            f"bad budget {value!r}: {_first_error(exc)}",
            'e.g. budget={"experiments": 40, "wall": "20m", "tokens": "2M"}',
        ) from None


def _fields_named(value: Mapping[str, Any] | str) -> set[str]:
    """The Budget fields ``value`` sets (``wall`` names ``wall_s``)."""
    if isinstance(value, str):
        from rsilab.tasks._budget import parse_budget

        return set(parse_budget(value))
    return {"wall_s" if k == "wall" else k for k in value}


def _first_error(exc: Exception) -> str:
    if isinstance(exc, ValidationError):
        err = exc.errors()[0]
        where = ".".join(str(p) for p in err["loc"]) or "budget"
        return f"{where}: {err['msg']}"
    return str(exc)


def _check_agents(agents: object) -> None:
    provider, _, model = agents.partition(":") if isinstance(agents, str) else ("", "", "")
    if not isinstance(agents, str) or (
        agents != "builtin" and (provider not in ("openai", "anthropic") or not model.strip())
    ):
        raise UserError(
            f"agents {agents!r}: not a policy rsilab has",
            "use builtin, openai:MODEL or anthropic:MODEL",
        )


def _check_model(agents: str, lab: LabLike) -> None:
    """An LLM spec's model resolves (its API key is set), before the lab is touched."""
    folder = lab.path if isinstance(lab, Lab) else resolve_lab_path(lab)
    model = resolve_chat_model(agents, lab_path=folder)
    if model is not None:
        model.close()


def _check_flag(name: str, value: object) -> None:
    if not isinstance(value, bool):
        raise UserError(f"{name} {value!r}: expected True or False")


MAX_SEED = 2**21
"""The largest campaign seed. Jobs take seeds 0 to 2**31-1 and the built-in Worker derives
its jobs' as ``seed * 1000`` plus a run's ordinal among its config's runs (the experiment's
number for a policy that does not share seeds, :mod:`rsilab.orchestrator.builtin._seeds`):
2**21 keeps that in range for fifty million experiments (the 2**30 allowed before made any seed
above 2147482 fail its first job)."""


def draw_seed() -> int:
    """A fresh campaign seed, 0 to :data:`MAX_SEED`, from the system's randomness: what a run
    that names no seed gets (two such runs on one lab then explore differently)."""
    return secrets.randbelow(MAX_SEED + 1)


def _seed(value: object) -> int:
    if value is None:
        return draw_seed()
    seed = _int("seed", value)
    if seed < 0:
        raise UserError(f"seed {seed}: at least 0 is needed", f"give a seed from 0 to {MAX_SEED}")
    if seed > MAX_SEED:
        raise UserError(
            f"seed {seed}: at most {MAX_SEED} (2**21)", f"give a seed from 0 to {MAX_SEED}"
        )
    return seed


def _check_callbacks(lab: object, on_progress: object, stop: object) -> None:
    if lab is not None and not isinstance(lab, Lab | str | Path):
        raise UserError(f"lab {lab!r}: expected a Lab, a folder (str or Path) or None")
    if on_progress is not None and not callable(on_progress):
        raise UserError(f"on_progress {on_progress!r}: expected a function of one Progress")
    if stop is not None and not isinstance(stop, StopRequest):
        raise UserError(f"stop {stop!r}: expected a rsilab.StopRequest")


def _int(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise UserError(f"{name} {value!r}: expected a whole number")
    return value


def _count(name: str, value: object, least: int) -> int:
    number = _int(name, value)
    if number < least:
        raise UserError(f"{name} {number}: at least {least} is needed")
    return number


@contextlib.contextmanager
def _opened(lab: LabLike, *, create: bool = True) -> Iterator[Lab]:
    """``lab`` opened (and closed at the end unless the caller passed it opened); a folder
    with no lab yet gets a new one when ``create``."""
    if isinstance(lab, Lab):
        yield lab
        return
    made = Lab.init(lab) if create and not lab_exists(lab) else Lab.open(lab)
    with made:
        yield made
