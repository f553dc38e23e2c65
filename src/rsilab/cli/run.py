"""``rsilab run`` and ``rsilab resume``: a campaign, shown live while it runs.

On a terminal the campaign is drawn as a live view (:mod:`rsilab.cli._live`); otherwise each
step prints one progress line. Ctrl-C stops cleanly: the first lets the running experiments
finish, the second cancels them, a third aborts at once; the campaign is left ``stopped``
and ``rsilab resume`` continues it.

With ``--json`` the progress goes to stderr and stdout holds one JSON object, the summary
(:func:`summary_json`). A run given no ``--seed`` draws a fresh one and says which; a run
started while another campaign of the lab is running warns so on stderr and goes on.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.text import Text

from rsilab.cli._common import (
    EXIT_DISK,
    EXIT_MEANINGS,
    EXIT_RUNTIME_FAILURE,
    TASK_HELP,
    JsonOption,
    LabOption,
    ctrl_c_requests,
    exit_code_for,
    messages_console,
    print_json,
    report_user_error,
    stderr_console,
)
from rsilab.errors import UserError, WriteRefused, write_refused
from rsilab.records import Campaign, CampaignLease
from rsilab.store import Lab, Store
from rsilab.tasks import command_argument

if TYPE_CHECKING:
    from rich.console import Console
    from rich.live import Live

    from rsilab.cli._live import LiveView
    from rsilab.executors import ExecutorChoice
    from rsilab.orchestrator.campaign import CampaignResult, Progress, ProgressFn, StopRequest
    from rsilab.tasks import Budget, Task

UnsandboxedOption = Annotated[
    bool,
    typer.Option(
        "--unsandboxed",
        help="Where bubblewrap cannot run, run jobs as plain processes: NO security boundary; "
        "recorded in the campaign and its report. Without it such a machine refuses the run.",
    ),
]
UnboundedDiskOption = Annotated[
    bool,
    typer.Option(
        "--unbounded-disk",
        help="Where the kernel cannot bound a job's disk use (rsilab not run as root), accept "
        "a polled limit; recorded in the campaign. Without it such a machine refuses the run.",
    ),
]
ExecutorOption = Annotated[
    str | None,
    typer.Option(
        "--executor",
        metavar="local|ray[=HOST:PORT]",
        help="Where jobs run: on this machine (local), or as Ray tasks on a cluster with token "
        "authentication (ray=HOST:PORT of its GCS; plain ray starts one here). Default: the "
        "[executor] table of the lab's rsilab.toml, else local.",
    ),
]
AGENTS_HELP = "Who decides: builtin (no LLM), openai:MODEL or anthropic:MODEL."
TEAM_HELP = "A research team: a Leader and N researchers at once."
SEED_HELP = (
    "Campaign seed, 0 to 2**21. Default: a fresh one each run, printed and recorded in the "
    "campaign, so two runs on one lab explore differently."
)


def _budget(text: str | None, default: object) -> Budget:
    from rsilab.orchestrator.api import to_budget

    try:
        return to_budget(text, default)
    except UserError as exc:
        raise UserError(
            f"bad --budget: {exc.message}", "e.g. --budget experiments=40,wall=20m"
        ) from None


def _check_agents(agents: str) -> None:
    if agents != "builtin" and not agents.startswith(("openai:", "anthropic:")):
        raise UserError(
            f"--agents {agents}: not available yet",
            "use --agents builtin, openai:MODEL or anthropic:MODEL",
        )


def run(
    task_ref: Annotated[str, typer.Argument(metavar="TASK", help=TASK_HELP)],
    agents: Annotated[str | None, typer.Option("--agents", help=AGENTS_HELP)] = None,
    workers: Annotated[
        int | None,
        typer.Option("--workers", min=1, help="Experiments run at once, each by a Worker [1]."),
    ] = None,
    budget: Annotated[
        str | None, typer.Option("--budget", help="e.g. experiments=40,wall=20m,tokens=2M.")
    ] = None,
    seed: Annotated[int | None, typer.Option("--seed", help=SEED_HELP, show_default=False)] = None,
    team: Annotated[int | None, typer.Option("--team", min=1, help=TEAM_HELP)] = None,
    unsandboxed: UnsandboxedOption = False,
    unbounded_disk: UnboundedDiskOption = False,
    executor: ExecutorOption = None,
    as_json: JsonOption = False,
    lab: LabOption = None,
) -> None:
    """Run a campaign on TASK: a Main agent, up to --workers Workers and a Reviewer; or, with
    --team N, a Leader and N researchers working at once, each on the whole task.

    Ctrl-C stops it cleanly (once: running experiments finish; twice: they are cancelled);
    `rsilab resume CAMPAIGN` continues it. With --json, stdout holds one JSON object: the
    campaign id, state, end reason, experiments, accepted versions, seed and exit code.
    """
    from rsilab.orchestrator.api import draw_seed
    from rsilab.orchestrator.api import run as run_campaign
    from rsilab.store.lab import lab_exists
    from rsilab.tasks import load_task

    fresh = not lab_exists(lab)
    chosen = agents or ("builtin" if fresh else _configured_agents(lab))
    _check_agents(chosen)
    if team is not None:
        _check_team(workers)
    task = load_task(task_ref)
    budget_ = _budget(budget, task.budget)
    runs_on = _executor(executor, None if fresh else lab)
    shown = f"{chosen} team of {team}" if team else chosen
    said = messages_console(as_json)
    if fresh:  # a first run needs no `rsilab init`: the lab is made once the task loads
        _sandbox_usable(unsandboxed)  # and the sandbox can run jobs: a refusal writes nothing
        with Lab.init(lab) as made:  # a folder or a PostgreSQL URL, as --lab gave it
            said.print(
                Text(f"created lab {made.store.lab_id} at {made.path.resolve()}"),
                soft_wrap=True,
            )
    if seed is None:
        seed = draw_seed()
        said.print(Text(f"seed {seed} (drawn; --seed {seed} repeats it)"), soft_wrap=True)

    def start(opened: Lab, show: ProgressFn, stop: StopRequest) -> CampaignResult:
        return run_campaign(
            task, budget=budget_, agents=chosen, workers=workers or 1, team=team or 0,
            seed=seed, lab=opened, on_progress=show, stop=stop, unsandboxed=unsandboxed,
            unbounded_disk=unbounded_disk, executor=runs_on,
        )  # fmt: skip

    _drive(lab, task, budget_, shown, workers or team or 1, None, start, as_json=as_json)


def _executor(text: str | None, lab_path: Path | str | None) -> ExecutorChoice | None:
    """The executor ``--executor`` names, else the ``[executor]`` table of an existing lab's
    ``rsilab.toml`` (``lab_path`` None: no lab yet), else None (local). UserError: bad text."""
    from rsilab.controller.lab_settings import SETTINGS_FILE, settings_table
    from rsilab.executors import executor_from_table, parse_executor

    if text is not None:
        return parse_executor(text)
    if lab_path is None:
        return None
    with Lab.open(lab_path) as opened:
        folder = opened.path
    return executor_from_table(settings_table(folder, "executor"), str(folder / SETTINGS_FILE))


def _sandbox_usable(unsandboxed: bool) -> None:
    """SandboxUnavailable (one line, what to do) when no sandbox may run jobs here: checked
    before a first run makes its lab, so a refused run leaves nothing behind. The campaign's
    own preflight checks again, with the lab's confinement."""
    from rsilab.sandbox.select import choose_sandbox

    choose_sandbox(allow_unsandboxed=unsandboxed).sandbox.close()


def _check_team(workers: int | None) -> None:
    """Refuse what a team does not take: --workers (each researcher runs its own)."""
    if workers is not None:
        raise UserError(
            "--team and --workers do not go together: each researcher of a team runs one "
            "experiment at a time, so --team N runs up to N at once",
            "drop --workers",
        )


def _configured_agents(lab_path: Path | None) -> str:
    """The agents of the lab's ``[llm]`` table (``provider:model``), else ``builtin``."""
    from rsilab.agents.llm.config import llm_settings

    with Lab.open(lab_path) as opened:  # the lab's own folder, wherever it was found
        settings = llm_settings(opened.path)
    if settings.provider in (None, "builtin") or not settings.model:
        return "builtin"
    return f"{settings.provider}:{settings.model}"


def resume(
    campaign: Annotated[str, typer.Argument(metavar="CAMPAIGN", help="Campaign id or latest.")],
    budget: Annotated[
        str | None,
        typer.Option("--budget", help="A new budget for a stopped campaign, e.g. experiments=60."),
    ] = None,
    workers: Annotated[
        int | None, typer.Option("--workers", min=1, help="Default: as it was started.")
    ] = None,
    unsandboxed: UnsandboxedOption = False,
    unbounded_disk: UnboundedDiskOption = False,
    executor: ExecutorOption = None,
    as_json: JsonOption = False,
    lab: LabOption = None,
) -> None:
    """Continue a stopped campaign (Ctrl-C, wall budget, crash) where it left off.

    Nothing done is repeated and nothing begun is lost. A finished campaign is final: its
    records do not change, so there is nothing to resume (start a new one with `rsilab run`).
    --budget replaces a stopped campaign's budget, for instance to give it more experiments.
    With --json, stdout holds one JSON object, as for `rsilab run`.
    """
    from rsilab.expos.campaigns import find_campaign
    from rsilab.memory import team_size
    from rsilab.orchestrator.api import resume as resume_campaign
    from rsilab.orchestrator.campaign import task_of

    with Lab.open(lab) as opened:
        found = find_campaign(opened.store, campaign)
        if found.is_finished() and as_json:
            _print_finished_json(opened, found)
            return
    if found.is_finished():
        console = messages_console(as_json)
        console.print(
            Text(
                f"campaign {found.id} is {found.state}: nothing to do (the records of a "
                f"finished campaign are final). Start a new one with "
                f"`rsilab run {command_argument(found.task.source, found.task.name)}`.",
            ),
            soft_wrap=True,
        )
        if budget is not None:
            console.print(Text("--budget extends only a stopped campaign.", "yellow"))
        return
    agents = str(found.settings.get("agents", "builtin"))
    if agents == "harness":  # a round of `rsilab evolve` whose improver was a system's harness
        raise UserError(
            f"campaign {found.id} was round {found.settings.get('round')} of evolution "
            f"{found.settings.get('evolution_id')}, run by a system's own improve command; "
            "`rsilab resume` runs rsilab's agents, not that",
            "start a new evolution with `rsilab evolve`",
        )
    task = task_of(found)
    stored = found.settings.get("budget", task.budget)
    team = team_size(found.settings)
    if team:
        _check_team(workers)
    chosen = workers or team or int(found.settings.get("workers", 1))
    budget_ = _budget(budget, stored)
    runs_on = _executor(executor, lab)
    shown = f"{agents} team of {team}" if team else agents

    def start(opened: Lab, show: ProgressFn, stop: StopRequest) -> CampaignResult:
        return resume_campaign(
            found.id, budget=budget_, workers=workers, lab=opened, on_progress=show, stop=stop,
            unsandboxed=unsandboxed, unbounded_disk=unbounded_disk, executor=runs_on,
        )  # fmt: skip

    _drive(lab, task, budget_, shown, chosen, found.id, start, as_json=as_json)


def _print_finished_json(lab: Lab, found: Campaign) -> None:
    """``resume --json`` of a finished campaign: its summary, saying there was nothing to do."""
    from rsilab.orchestrator.campaign import campaign_result

    message = f"nothing to do: campaign {found.id} is {found.state} (its records are final)"
    result = campaign_result(lab, found.id, message)
    print_json(summary_json(lab.store, result, report=None))


def _drive(
    lab_path: Path | None,
    task: Task,
    budget: Budget,
    shown: str,
    workers: int,
    cid: str | None,
    start: Callable[[Lab, ProgressFn, StopRequest], CampaignResult],
    *,
    as_json: bool,
) -> None:
    """Run ``start`` (one call into :mod:`rsilab.orchestrator.api`) with a live view or
    progress lines, Ctrl-C as the stop request's escalation (drain, cancel, abort), then the
    summary and the report; exits 130 when a person stopped it, 1 when an error did. With
    ``as_json`` the progress and messages go to stderr and the summary is JSON on stdout."""
    from rsilab.cli._live import LiveView
    from rsilab.orchestrator.campaign import StopRequest

    console = messages_console(as_json)
    stop = StopRequest()

    def line(p: Progress) -> None:
        console.print(Text(p.message), soft_wrap=True)

    with Lab.open(lab_path) as opened:
        _warn_if_running(opened.store, cid)
        show: Callable[[Progress], None] = line
        live: contextlib.AbstractContextManager[object] = contextlib.nullcontext()
        if console.is_terminal:
            view = LiveView(
                opened.store, task, budget, campaign_id=cid, agents=shown, workers=workers
            )
            view.refresh()
            show, live = view.update, _live(console, view)
        with live, ctrl_c_requests(stop.request, 3):
            result = _started(start, opened, show, stop, as_json=as_json)
        report = _write_report(opened, result.campaign_id)  # after the campaign: it is whole
        if as_json:
            print_json(summary_json(opened.store, result, report=report))
        else:
            _summary(console, opened, task, result)
            console.print(Text(f"report: {report}"), soft_wrap=True)
    code = exit_code_for(result.end_reason)
    if code:
        raise typer.Exit(code)


def _warn_if_running(store: Store, ours: str | None) -> None:
    """One ``warning:`` line on stderr for each other campaign of the lab whose lease a live
    process holds: two runs on one lab compete for its cores and its lineage. It goes on."""
    from rsilab.orchestrator.campaign import takeover_reason

    now = datetime.now(UTC)
    for lease in store.query_as(CampaignLease):
        if lease.campaign_id == ours or takeover_reason(lease, now) is not None:
            continue
        holder = lease.holder
        stderr_console().print(
            Text(
                f"warning: campaign {lease.campaign_id} is running in this lab (process "
                f"{holder.pid} on {holder.host}); this run goes on beside it",
                style="yellow",
            ),
            soft_wrap=True,
        )


def summary_json(
    store: Store, result: CampaignResult, *, report: Path | None, code: int | None = None
) -> dict[str, Any]:
    """``run``/``resume --json``'s object: the campaign as its records hold it after the run,
    the versions it got accepted, and the exit code the command exits with (and its meaning,
    from the exit-code table): ``code``, else the one of the campaign's end reason."""
    campaign = store.get_as(result.campaign_id, Campaign)
    code = exit_code_for(result.end_reason) if code is None else code
    return {
        "campaign_id": result.campaign_id,
        "task": campaign.task.name,
        "state": result.state,
        "end_reason": str(result.end_reason) if result.end_reason else None,
        "end_detail": campaign.end_detail or None,
        "experiments": result.experiments,
        "accepted": [
            {"version_id": v.version_id, "label": v.label, "scores": v.scores}
            for v in result.accepted
        ],
        "seed": campaign.settings.get("seed"),
        "message": result.message,
        "lock_in": result.measures.model_dump(mode="json") if result.measures else None,
        "report": str(report) if report is not None else None,
        "exit_code": code,
        "exit_meaning": EXIT_MEANINGS[code],
    }


def _started(
    start: Callable[[Lab, ProgressFn, StopRequest], CampaignResult],
    lab: Lab,
    show: ProgressFn,
    stop: StopRequest,
    *,
    as_json: bool,
) -> CampaignResult:
    """``start``'s result. A disk that refused a write (anywhere in the error's chain) becomes
    :class:`WriteRefused`, its hint naming ``rsilab resume CAMPAIGN`` when a campaign was under
    way (exit 74). Another error that ended a campaign during this call (recorded ``error`` or
    ``preflight_failed``) becomes one line naming that campaign and how to go on (and with
    ``as_json`` the campaign's summary on stdout), and exit 1, whatever the error's type;
    anything else goes up unchanged (a UserError before the campaign existed is a usage
    error, exit 2)."""
    from rsilab.orchestrator.campaign import campaign_result

    before = lab.store.head()[0]
    try:
        return start(lab, show, stop)
    except Exception as exc:
        ended = _stopped_on_error(lab, before)
        refused = write_refused(exc)
        if refused is not None:  # the disk said no: exit 74, and how to go on once it takes writes
            _refused(lab, refused, ended or _campaign_since(lab, before), as_json=as_json)
        if ended is None:
            raise
        said = f"campaign {ended} stopped on an error: {type(exc).__name__}: {exc}"
        hint = f"fix the cause, then `rsilab resume {ended}` continues it"
        report_user_error(UserError(said, hint))
        if as_json:
            print_json(summary_json(lab.store, campaign_result(lab, ended, said), report=None))
        raise typer.Exit(EXIT_RUNTIME_FAILURE) from None


def _refused(lab: Lab, refused: WriteRefused, campaign: str | None, *, as_json: bool) -> None:
    """Raise ``refused``, its hint naming ``rsilab resume CAMPAIGN`` when a campaign was
    under way (stopped on the error, or cut off before it could record that); with
    ``as_json`` that campaign's summary goes to stdout first, saying exit 74."""
    from rsilab.orchestrator.campaign import campaign_result

    if campaign is None:
        raise refused
    if as_json:
        with contextlib.suppress(Exception):  # a summary is a courtesy; the error line is not
            result = campaign_result(lab, campaign, refused.message)
            print_json(summary_json(lab.store, result, report=None, code=EXIT_DISK))
    raise refused.then(f"`rsilab resume {campaign}` continues the campaign") from None


def _campaign_since(lab: Lab, after: int) -> str | None:
    """The campaign of the last event after ``after`` that names one, if any."""
    for event in reversed(lab.store.events(after=after)):
        if event.campaign_id is not None:
            return event.campaign_id
    return None


def _stopped_on_error(lab: Lab, after: int) -> str | None:
    """The campaign a ``campaign_stopped`` event after ``after`` ended on an error, if any."""
    for event in reversed(lab.store.events(after=after)):
        if event.action == "campaign_stopped" and event.campaign_id is not None:
            reason = event.detail.split(": ", 2)[1:2]
            if reason and reason[0] in ("error", "preflight_failed"):
                return event.campaign_id
    return None


def _live(console: Console, view: LiveView) -> Live:
    from rich.live import Live

    return Live(view, console=console, refresh_per_second=2, transient=False)


def _summary(console: Console, lab: Lab, task: Task, result: CampaignResult) -> None:
    from rsilab.cli.versions import _versions_table
    from rsilab.controller.lineage import find_lineage, lineage_versions

    found = find_lineage(lab.store, task.name, "main")
    members = lineage_versions(lab.store, found) if found is not None else []
    console.print(
        Text(
            f"campaign {result.campaign_id} [{result.state}]: {result.experiments} "
            f"experiments, {len(result.accepted)} accepted; {result.message}",
            style="bold",
        ),
        soft_wrap=True,
    )
    if found is not None:
        console.print(_versions_table(found, members, task.benchmarks))
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


def _write_report(lab: Lab, campaign_id: str) -> Path:
    """Write the campaign's report to ``<lab>/reports/<campaign>.md``; where it went."""
    from rsilab.cli.report import write_whole
    from rsilab.orchestrator.report import build_report, render_markdown

    out = lab.path / "reports" / f"{campaign_id}.md"
    try:
        out.parent.mkdir(exist_ok=True)
        write_whole(out, render_markdown(build_report(lab.store, campaign_id)))
    except Exception as exc:
        refused = write_refused(exc)
        if refused is None:
            raise
        later = f"`rsilab report {campaign_id} --out {out}` writes it (the campaign is recorded)"
        raise refused.then(later) from exc
    return out


def register(app: typer.Typer) -> None:
    """Add ``run`` and ``resume`` to ``app``."""
    app.command("run")(run)
    app.command("resume")(resume)
