"""The campaign lifecycle: the one place that starts, resumes, stops and ends a campaign.

Every kind of run (the built-in policy, LLM agents, a research team of either, a round of an
evolution, a search benchmark's peer) goes through :func:`run_policy`; what differs between
them is a :class:`CampaignPolicy`. The sequence, for all of them:

1. **preflight**, before anything is written: the task's own runtime when it declares one
   (installed, its built files such as a base model checked against the install's stamp, put
   into the artifact store and recorded in the campaign's settings; see ``_runtime``), the
   sandbox jobs will run in (bubblewrap, or plain processes only on the policy's explicit
   opt-in), a disk limit the kernel enforces (or a polled one on an opt-in), the task's
   harness manifest, and
   :meth:`CampaignPolicy.preflight` (an LLM endpoint's reachability); a failure raises a
   UserError saying what to do, and no record is written;
2. :meth:`CampaignPolicy.prepare` (records the policy needs in the lab, e.g. orientations);
3. a new campaign opened with :meth:`CampaignPolicy.settings` and where its jobs run, or the
   one named found (a finished campaign is final: nothing is written, the result says so);
4. the campaign's lease (no second process runs it), kept alive on a thread;
5. recovery of what a dead run left: the controller's work first (a candidate a dead judge
   left is judged again, with the same seeds), then jobs interrupted, open experiments
   closed, pending intents listed; and the run's budget recorded where it changed;
6. the lineage's baseline when it has none (inside the campaign, so a run killed during it
   leaves a campaign to resume; a baseline that fails ends it ``preflight_failed``);
7. :meth:`CampaignPolicy.run` with a :class:`CampaignSession`: the campaign, its services,
   its budget, the stop request, the lease check and its intents;
8. :meth:`CampaignPolicy.conclude` when the run finished the campaign (its tools still answer);
9. :func:`_end_campaign`: the final state and *why* (:class:`~rsilab.records.EndReason`) on
   the campaign and in its last event's detail.

Ending: a policy returns an :class:`Ending`. A KeyboardInterrupt that reaches here ends the
run ``stopped`` (``stopped_by_user``) and returns; experiments that keep failing (the
campaign's ``max_failures_in_a_row``, checked with the lease each turn) end it ``stopped``
(``experiments_failing``) and return; any other error ends it ``stopped`` (``error``, with the
error's kind) and is raised again, except a lost lease (another process runs the campaign now:
nothing more is written). Either way the lease is released and the campaign is resumable.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rsilab.controller.lineage import find_lineage
from rsilab.controller.recovery import recover_controller_work
from rsilab.errors import RsilabError, UserError
from rsilab.executors import ExecutorChoice
from rsilab.expos.campaigns import open_campaign
from rsilab.expos.services import LabServices
from rsilab.orchestrator.campaign._budget import budget_of, record_budget
from rsilab.orchestrator.campaign._intents import DoneIntent, Intents
from rsilab.orchestrator.campaign._lease import (
    Lease,
    LeaseHeld,
    LeaseLost,
    acquire_lease,
    takeover_reason,
)
from rsilab.orchestrator.campaign._model import check_same_model, model_settings
from rsilab.orchestrator.campaign._recovery import recover_campaign
from rsilab.orchestrator.campaign._runtime import check_same_runtime, runtime_settings
from rsilab.orchestrator.campaign.result import CampaignResult, campaign_result
from rsilab.orchestrator.campaign.stop import StopRequest
from rsilab.orchestrator.writer import ACTOR, write
from rsilab.records import Campaign, CampaignState, EndReason, Experiment, ExperimentState
from rsilab.sandbox import require_cuda_torch, require_gpus
from rsilab.store import Lab, Store
from rsilab.tasks import (
    Budget,
    ManifestError,
    Task,
    check_knob_values,
    check_variants,
    get_scorer,
    load_manifest,
)

__all__ = [
    "CampaignPolicy",
    "CampaignSession",
    "DoneIntent",
    "Ending",
    "Intents",
    "LeaseHeld",
    "LeaseLost",
    "budget_of",
    "check_harness",
    "run_policy",
    "takeover_reason",
]

MAX_FAILURES_IN_A_ROW = 5
"""Experiments of a campaign that may fail in a row before it stops (recorded in its
settings as ``max_failures_in_a_row``, so a resume keeps the limit it started with)."""

FINISHED_MESSAGE = (
    "nothing to do: the campaign is finished (records of a finished campaign are final; "
    "start a new one with `rsilab run`)"
)


@dataclass(frozen=True)
class Ending:
    """How a run ended: the campaign's state, why, and the reason in words."""

    state: CampaignState
    reason: EndReason
    message: str

    def __post_init__(self) -> None:  # a policy may name them by value; records keep enums
        object.__setattr__(self, "state", CampaignState(self.state))
        object.__setattr__(self, "reason", EndReason(self.reason))


@dataclass(frozen=True)
class CampaignSession:
    """What a policy runs a campaign with; made by :func:`run_policy` once the lease is held."""

    lab: Lab
    task: Task
    campaign: Campaign
    """The campaign as it was when the run began (its settings hold what a resume keeps)."""
    services: LabServices
    budget: Budget
    stop: StopRequest
    check: Callable[[], None]
    """Raises LeaseLost once another process has taken the campaign; call it each turn."""
    intents: Intents
    recover: Callable[[], None]
    """Recovery again, for a policy whose agent ran outside rsilab's loop (an improver's
    own command): its unfinished jobs interrupted, its open experiments closed."""

    @property
    def campaign_id(self) -> str:
        return self.campaign.id


class CampaignPolicy:
    """Who decides in a campaign. Subclasses give :meth:`settings` and :meth:`run`; the other
    hooks default to doing nothing. One object serves one :func:`run_policy` call."""

    slots: int | None = 2
    """Jobs the run's own services run at once (when the caller passes none; None: as many
    as the machine has cores)."""

    def settings(self) -> dict[str, Any]:
        """What a new campaign records in its settings (agents, budget, seed, ...)."""
        raise NotImplementedError

    def run(self, session: CampaignSession) -> Ending:
        """Run the campaign until it ends; how it ended. May raise (see the module)."""
        raise NotImplementedError

    unsandboxed: bool = False
    """A person opted in to run jobs as plain processes where bubblewrap cannot run."""
    unbounded_disk: bool = False
    """A person opted in to a polled disk limit where the kernel cannot bound it."""
    executor: ExecutorChoice | None = None
    """Where the run's own services run jobs (None: on this machine)."""

    def preflight(self, lab: Lab, services: LabServices, task: Task) -> None:
        """Checks of the policy's own, before anything is written (UserError: what to do)."""

    def prepare(self, lab: Lab, services: LabServices) -> None:
        """Before the campaign is opened or found: records the policy needs in the lab."""

    def admit(self, campaign: Campaign) -> None:
        """Refuse (UserError) a campaign found to resume that this policy cannot run."""

    def keep_open(self, store: Store, campaign_id: str) -> Callable[[Experiment], bool] | None:
        """Open experiments recovery must not close (the policy continues them)."""
        return None

    def conclude(self, session: CampaignSession) -> None:
        """After a run that finished the campaign, before it is marked so."""

    def settle(self, ending: Ending) -> Ending:
        """The ending to record for the one the run returned (an evolution's round maps a
        stop on its wall budget to a finished round)."""
        return ending

    def close(self) -> None:
        """Release what the policy holds (a chat model's connection); called once, last."""


def run_policy(
    lab: Lab,
    task: Task,
    policy: CampaignPolicy,
    *,
    budget: Budget,
    campaign_id: str | None = None,
    services: LabServices | None = None,
    stop: StopRequest | None = None,
) -> CampaignResult:
    """Run a new campaign of ``policy`` on ``task`` (or resume ``campaign_id``); see the module.

    ``budget`` is this run's (one that differs from the recorded one is recorded). Without
    ``services`` the run makes its own and closes them at the end; ``policy`` is closed at the
    end in every case.

    Raises:
        UserError: ``campaign_id`` names no campaign, or one the policy does not admit.
        LeaseHeld: another process runs the campaign.
        LeaseLost: another process took the campaign over while this one ran.
        RsilabError: what the policy raised (the campaign is ended ``stopped``, resumable).
    """
    own = services is None
    if services is None:
        services = LabServices(
            lab, judge_in_background=False, slots=policy.slots,
            allow_unsandboxed=policy.unsandboxed, executor_choice=policy.executor,
        )  # fmt: skip
    try:
        where = _preflight(lab, task, policy, services)
        policy.prepare(lab, services)
        settings = {"max_failures_in_a_row": MAX_FAILURES_IN_A_ROW, **policy.settings(), **where}
        campaign = _start_or_find(lab, task, settings, campaign_id)
        if campaign is None:
            assert campaign_id is not None
            return campaign_result(lab, campaign_id, FINISHED_MESSAGE)
        check_same_runtime(campaign, where)
        check_same_model(campaign, where)
        policy.admit(campaign)
        with acquire_lease(lab.store, campaign.id) as lease, lease.keep_alive():
            opening = _Opening(lab, task, campaign, services, budget, stop, lease)
            ending = policy.settle(_run(policy, opening))
            _end_campaign(lab.store, campaign.id, ending)
        return campaign_result(lab, campaign.id, ending.message)
    finally:
        policy.close()
        if own:
            services.close()


def _preflight(
    lab: Lab, task: Task, policy: CampaignPolicy, services: LabServices
) -> dict[str, Any]:
    """Check, before anything is written, what the run needs; the settings that record
    where its jobs run. UserError (SandboxUnavailable among them) says what to do."""
    runtime = runtime_settings(lab, task, services)  # binds the task's runtime: first
    model = model_settings(task, services)
    sandbox, boundary = services.isolation()
    disk = services.executor.disk_limits()
    if boundary and not disk.enforced and not policy.unbounded_disk:
        raise UserError(
            f"what a job writes would not be bounded by the kernel here: {disk.reason}",
            "run rsilab as root (each workspace gets its own size-limited filesystem), or "
            "accept a polled limit with --unbounded-disk",
        )
    check_harness(task)
    for bench in task.benchmarks:  # a scorer that cannot score here (no sandbox for programs)
        ready = get_scorer(bench.scorer).ready
        if ready is not None:
            ready()
    _evaluation_inputs_unchanged(lab, task, services)
    policy.preflight(lab, services, task)
    return {
        "sandbox": sandbox,
        "unsandboxed": not boundary,
        "disk_limit": "kernel" if disk.enforced else "polled",
        **runtime,
        **model,
    }


def _evaluation_inputs_unchanged(lab: Lab, task: Task, services: LabServices) -> None:
    """UserError, before anything is written, when the lineage's private tiers or scorers
    differ from its baseline's: the controller would refuse every candidate of the run (each
    one flagged and rejected), so the run would spend its budget on work that cannot count."""
    lineage = find_lineage(lab.store, task.name, services.lineage)
    if lineage is None:
        return
    changed = [what for _, what in services.controller(task).changed_inputs(lineage)]
    if changed:
        raise UserError(
            f"task {task.name!r} changed since the baseline of lineage {services.lineage!r}: "
            + " and ".join(changed),
            "restore them as they were; a task whose data or scoring changed needs a lineage "
            "of its own: run it in a new lab (--lab DIR), which makes a new baseline",
        )


def check_harness(task: Task) -> None:
    """UserError, before anything is written, when ``task``'s harness cannot be run (its
    folder or manifest is missing or wrong, a config value lies outside its knob, a code
    variant does not apply to it, or it needs more GPUs than this machine has, or GPUs that
    the torch of its jobs' Python cannot use)."""
    try:
        manifest = load_manifest(task.harness)
    except ManifestError as exc:
        raise UserError(
            f"task {task.name!r}: its harness cannot be run: {exc}",
            f"see `rsilab task check {task.argument}`",
        ) from exc
    if manifest.config is not None:
        # the campaign starts from this file: a value outside its knob would be searched from
        wrong = [p for p in check_knob_values(task, manifest.config) if p.severity == "error"]
        if wrong:
            raise UserError(
                f"task {task.name!r}: {wrong[0].where}: {wrong[0].message}",
                f"see `rsilab task check {task.argument}`",
            )
    # a variant that does not apply fails the first worker that draws it, mid-campaign
    misfit = check_variants(task)
    if misfit:
        raise UserError(
            f"task {task.name!r}: {misfit[0].where}: {misfit[0].message}",
            f"fix the variant in the task's file; `rsilab task check {task.argument}` lists "
            "every problem",
        )
    gpus = manifest.gpus
    require_gpus(gpus, task.name)  # fails before any write
    if gpus:
        runtime = task.runtime()  # where its jobs run; the current Python when not installed
        python = runtime.python if runtime.is_installed() else Path(sys.executable)
        require_cuda_torch(gpus, task.name, python)


def _start_or_find(
    lab: Lab, task: Task, settings: dict[str, Any], campaign_id: str | None
) -> Campaign | None:
    """A new campaign with ``settings`` (``campaign_id`` None), or the one to resume; None
    when that one is finished. UserError when no such campaign exists."""
    if campaign_id is None:
        return open_campaign(lab.store, task.ref(), actor=ACTOR, settings=settings)
    try:
        campaign = lab.store.get_as(campaign_id, Campaign)
    except Exception as exc:
        raise UserError(f"no campaign {campaign_id!r} in this lab") from exc
    return None if campaign.is_finished() else campaign


def _open(
    lab: Lab,
    task: Task,
    policy: CampaignPolicy,
    campaign: Campaign,
    services: LabServices,
    budget: Budget,
    stop: StopRequest | None,
    lease: Lease,
) -> CampaignSession:
    """Recover what a dead run left, record the budget, and make the run's session."""
    intents = Intents(lab.store, campaign.id)
    keep = policy.keep_open(lab.store, campaign.id)

    def recover() -> None:
        recover_campaign(lab.store, lease, pending=intents.pending(), keep_open=keep)

    # the controller's work first: a dead judge's candidate is judged again (same seeds)
    # before recovery marks what else was left unfinished
    recover_controller_work(lab, campaign.id, controller=services.controller(task))
    recover()
    record_budget(lab.store, campaign, budget)
    limit = int(campaign.settings.get("max_failures_in_a_row", MAX_FAILURES_IN_A_ROW))
    check = _with_failure_limit(lease.check, lab.store, campaign.id, limit)
    return CampaignSession(
        lab, task, campaign, services, budget, stop or StopRequest(), check, intents, recover
    )


@dataclass(frozen=True)
class _Opening:
    """What a run is opened with, once the lease is held."""

    lab: Lab
    task: Task
    campaign: Campaign
    services: LabServices
    budget: Budget
    stop: StopRequest | None
    lease: Lease


def _run(policy: CampaignPolicy, at: _Opening) -> Ending:
    """Recovery and the budget, the baseline when missing, then the policy's run and
    conclusion; an interrupt, a run of failures or an error turned into an ending (an error
    is recorded, then raised again; a lost lease records nothing). Everything after the
    lease is in here, so no error leaves the campaign ``running``."""
    stage = "recovery"
    try:
        session = _open(
            at.lab, at.task, policy, at.campaign, at.services, at.budget, at.stop, at.lease
        )
        stage = "baseline"
        if find_lineage(at.lab.store, at.task.name, at.services.lineage) is None:
            at.services.controller(at.task).baseline(actor=ACTOR)
        stage = "run"
        ending = policy.run(session)
        if ending.state is CampaignState.FINISHED:
            policy.conclude(session)
        return ending
    except KeyboardInterrupt:
        return Ending(CampaignState.STOPPED, EndReason.STOPPED_BY_USER, "interrupted")
    except ExperimentsFailing as failing:
        return Ending(CampaignState.STOPPED, EndReason.EXPERIMENTS_FAILING, str(failing))
    except LeaseLost:
        raise
    except Exception as exc:
        try:
            at.lease.heartbeat()  # a store read: is the campaign still ours to end?
        except LeaseLost as lost:  # the cause of what failed, likely (a fenced write)
            raise lost from exc
        if stage == "baseline":
            reason, message = EndReason.PREFLIGHT_FAILED, f"the baseline failed: {_kind(exc)}"
        else:
            reason, message = EndReason.ERROR, _kind(exc)
        _end_campaign(at.lab.store, at.campaign.id, Ending(CampaignState.STOPPED, reason, message))
        raise


def _kind(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


class ExperimentsFailing(RsilabError):
    """The campaign's experiments failed too many times in a row (the message says how many
    and the last one's summary)."""


def _with_failure_limit(
    check: Callable[[], None], store: Store, campaign_id: str, limit: int
) -> Callable[[], None]:
    """``check``, then :class:`ExperimentsFailing` once the last ``limit`` experiments this
    run finished all failed (what earlier runs left does not count: a resume after a fix
    starts afresh). The records are read again only when the ledger moved."""
    seen: list[int] = [-1]
    before = {e.id for e in store.query_as(Experiment, campaign_id=campaign_id) if e.is_finished()}

    def checked() -> None:
        check()
        head = store.head()[0]
        if head == seen[0]:
            return
        seen[0] = head
        done = [
            e
            for e in store.query_as(Experiment, campaign_id=campaign_id)
            if e.is_finished() and e.id not in before
        ]
        done.sort(key=lambda e: e.finished_at or "")
        last = done[-limit:]
        if (
            limit > 0
            and len(last) == limit
            and all(e.state is ExperimentState.FAILED for e in last)
        ):
            raise ExperimentsFailing(
                f"{limit} experiments in a row failed; nothing is proposed. The last, "
                f"{last[-1].id}: {(last[-1].summary_text or 'no summary')[:200]}. Its job logs "
                f"say why (`rsilab show {last[-1].id}`); fix the cause, then resume"
            )

    return checked


def _end_campaign(store: Store, campaign_id: str, ending: Ending) -> None:
    """Record ``ending`` on the campaign, with an event ``campaign_<state>`` whose detail says
    why; nothing when the campaign already records exactly this ending."""
    campaign = store.get_as(campaign_id, Campaign)
    now = (campaign.state, campaign.end_reason, campaign.end_detail)
    if now == (ending.state, ending.reason, ending.message):
        return
    update = {"state": ending.state, "end_reason": ending.reason, "end_detail": ending.message}
    write(
        store,
        f"campaign_{ending.state}",
        [campaign.model_copy(update=update)],
        campaign_id=campaign_id,
        detail=f"{campaign.state} -> {ending.state}: {ending.reason}: {ending.message}",
    )
