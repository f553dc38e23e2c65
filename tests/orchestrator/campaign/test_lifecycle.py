"""The lifecycle on a real lab: what it records when a run ends, however it ends."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from rsilab.errors import UserError
from rsilab.orchestrator.campaign import (
    CampaignPolicy,
    CampaignSession,
    Ending,
    LeaseHeld,
    LeaseLost,
    run_policy,
)
from rsilab.records import (
    Campaign,
    CampaignLease,
    CampaignState,
    EndReason,
    EventDraft,
    LeaseHolder,
    lease_id,
)
from rsilab.store import Lab
from rsilab.tasks import Budget, get_task

BUDGET = Budget(experiments=3)
FINISHED = Ending(CampaignState.FINISHED, EndReason.BUDGET_SPENT, "spent")


class Scripted(CampaignPolicy):
    """A policy whose run is ``act``; it counts the lifecycle's calls of its hooks."""

    def __init__(self, act: Callable[[CampaignSession], Ending]) -> None:
        self.act = act
        self.calls: list[str] = []

    def settings(self) -> dict[str, object]:
        return {"agents": "scripted", "budget": str(BUDGET)}

    def run(self, session: CampaignSession) -> Ending:
        self.calls.append("run")
        return self.act(session)

    def conclude(self, session: CampaignSession) -> None:
        self.calls.append("conclude")

    def close(self) -> None:
        self.calls.append("close")


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    """One lab for the module: the first run makes the synthetic task's baseline."""
    opened = Lab.init(tmp_path_factory.mktemp("lifecycle") / "lab")
    yield opened
    opened.close()


def _run(lab: Lab, policy: CampaignPolicy, **kw: object) -> Campaign:
    result = run_policy(lab, get_task("synthetic"), policy, budget=BUDGET, **kw)  # type: ignore[arg-type]
    return lab.store.get_as(result.campaign_id, Campaign)


def _last_campaign_event(lab: Lab, campaign_id: str) -> tuple[str, str]:
    ends = [
        e
        for e in lab.store.events(campaign_id=campaign_id)
        if e.action.startswith("campaign_") and e.action != "campaign_created"
    ]
    return ends[-1].action, ends[-1].detail


def test_an_ending_is_recorded_on_the_campaign_and_in_its_last_event(lab: Lab) -> None:
    policy = Scripted(lambda s: Ending(CampaignState.FINISHED, EndReason.AGENTS_DONE, "all done"))
    campaign = _run(lab, policy)
    assert (campaign.state, campaign.end_reason, campaign.end_detail) == (
        "finished",
        "agents_done",
        "all done",
    )
    assert _last_campaign_event(lab, campaign.id) == (
        "campaign_finished",
        "running -> finished: agents_done: all done",
    )
    assert policy.calls == ["run", "conclude", "close"]


def test_a_stopped_run_is_not_concluded(lab: Lab) -> None:
    policy = Scripted(lambda s: Ending(CampaignState.STOPPED, EndReason.WALL_BUDGET, "out of time"))
    campaign = _run(lab, policy)
    assert (campaign.state, campaign.end_reason) == ("stopped", "wall_budget")
    assert policy.calls == ["run", "close"]


def test_an_error_ends_the_campaign_stopped_with_its_kind_and_is_raised(lab: Lab) -> None:
    class Broken(RuntimeError):
        pass

    def fail(session: CampaignSession) -> Ending:
        raise Broken("the disk is full")

    policy = Scripted(fail)
    with pytest.raises(Broken):
        _run(lab, policy)
    (campaign,) = [
        c for c in lab.store.query_as(Campaign) if c.settings.get("agents") == "scripted"
    ][-1:]
    assert (campaign.state, campaign.end_reason) == ("stopped", "error")
    assert campaign.end_detail == "Broken: the disk is full"
    assert policy.calls == ["run", "close"]
    lease = lab.store.get_as(lease_id(campaign.id), CampaignLease)
    assert lease.released_at is not None  # resumable at once


def test_ctrl_c_ends_the_run_stopped_by_the_user_and_returns(lab: Lab) -> None:
    def interrupted(session: CampaignSession) -> Ending:
        raise KeyboardInterrupt

    campaign = _run(lab, Scripted(interrupted))
    assert (campaign.state, campaign.end_reason, campaign.end_detail) == (
        "stopped",
        "stopped_by_user",
        "interrupted",
    )


def test_settle_decides_what_is_recorded(lab: Lab) -> None:
    class Round(Scripted):
        def settle(self, ending: Ending) -> Ending:
            return Ending(CampaignState.FINISHED, EndReason.ROUND_OVER, f"{ending.message}; over")

    campaign = _run(lab, Round(lambda s: Ending(CampaignState.STOPPED, EndReason.IDLE, "idle")))
    assert (campaign.state, campaign.end_reason, campaign.end_detail) == (
        "finished",
        "round_over",
        "idle; over",
    )


def test_a_finished_campaign_is_final_and_nothing_is_written(lab: Lab) -> None:
    done = _run(lab, Scripted(lambda s: FINISHED))
    before = lab.store.head()
    again = Scripted(lambda s: FINISHED)
    result = run_policy(lab, get_task("synthetic"), again, budget=BUDGET, campaign_id=done.id)
    assert result.message.startswith("nothing to do")
    assert lab.store.head() == before
    assert again.calls == ["close"]


def test_a_resumed_campaign_records_its_new_budget_whoever_runs_it(lab: Lab) -> None:
    stopped = _run(lab, Scripted(lambda s: Ending(CampaignState.STOPPED, EndReason.IDLE, "idle")))
    more = Budget(experiments=7)
    seen: list[Budget] = []

    def record(session: CampaignSession) -> Ending:
        seen.append(session.budget)
        return FINISHED

    run_policy(lab, get_task("synthetic"), Scripted(record), budget=more, campaign_id=stopped.id)
    campaign = lab.store.get_as(stopped.id, Campaign)
    assert Budget.model_validate(campaign.settings["budget"]).experiments == 7
    assert seen == [more]
    budget_events = [
        e for e in lab.store.events(campaign_id=stopped.id) if e.action == "campaign_budget_set"
    ]
    assert len(budget_events) == 1


def test_an_unknown_campaign_writes_nothing(lab: Lab) -> None:
    before = lab.store.head()
    with pytest.raises(UserError, match="no campaign 'cmp-nope'"):
        run_policy(
            lab, get_task("synthetic"), Scripted(lambda s: FINISHED), budget=BUDGET,
            campaign_id="cmp-nope",
        )  # fmt: skip
    assert lab.store.head() == before


def test_a_campaign_another_process_runs_is_refused(lab: Lab, tmp_path: Path) -> None:
    def second(session: CampaignSession) -> Ending:
        with pytest.raises(LeaseHeld):
            run_policy(
                session.lab, session.task, Scripted(lambda s: FINISHED), budget=BUDGET,
                campaign_id=session.campaign_id,
            )  # fmt: skip
        return FINISHED

    assert _run(lab, Scripted(second)).state == "finished"


def test_a_lost_lease_ends_nothing(lab: Lab) -> None:
    """Another process took the campaign over: LeaseLost is raised (the run's own error as
    its cause), and the campaign is left as the new holder has it (no ending of this run is
    written)."""

    def taken_over(session: CampaignSession) -> Ending:
        store = session.lab.store
        current = store.get_as(lease_id(session.campaign_id), CampaignLease)
        other = LeaseHolder(host="elsewhere", pid=1, boot_id="b", token="t")
        draft = EventDraft(actor="other", role="controller", action="lease_acquired")
        store.commit(draft, [current.model_copy(update={"holder": other})])
        raise RuntimeError("the run went on after losing its lease")

    with pytest.raises(LeaseLost) as lost:
        _run(lab, Scripted(taken_over))
    assert isinstance(lost.value.__cause__, RuntimeError)
    (campaign,) = [
        c for c in lab.store.query_as(Campaign) if c.settings.get("agents") == "scripted"
    ][-1:]
    assert (campaign.state, campaign.end_reason) == ("running", None)


def test_every_end_reason_is_documented() -> None:
    """docs/campaigns.md has a row for each end reason (the enum's values, read here)."""
    page = (Path(__file__).resolve().parents[3] / "docs" / "campaigns.md").read_text("utf-8")
    missing = [r.value for r in EndReason if f"| `{r.value}` |" not in page]
    assert missing == []


def test_a_resume_repairs_a_candidate_a_dead_judge_left(lab: Lab) -> None:
    """The lifecycle's recovery runs the controller's: a candidate left ``evaluating`` by a
    judge that died (twice here, so it is rejected rather than judged again) is settled
    before the policy runs, and its jobs are no longer ``running``."""
    from rsilab.controller.recovery import recover_controller_work
    from rsilab.records import Candidate, CandidateState
    from tests.controller.test_recovery import _left_evaluating, _left_running

    stopped = _run(lab, Scripted(lambda s: Ending(CampaignState.STOPPED, EndReason.IDLE, "i")))
    candidate = _left_evaluating(lab, campaign_id=stopped.id)
    recover_controller_work(lab, stopped.id)  # its first death: set back to pending
    again = lab.store.get_as(candidate.id, Candidate)
    draft = EventDraft(actor="controller", role="controller", action="candidate_updated")
    lab.store.commit(draft, [again.model_copy(update={"state": CandidateState.EVALUATING})])
    job = _left_running(lab, candidate.id, 7, campaign_id=stopped.id)
    states: list[str] = []

    def look(session: CampaignSession) -> Ending:
        states.append(str(session.lab.store.get_as(candidate.id, Candidate).state))
        return FINISHED

    run_policy(lab, get_task("synthetic"), Scripted(look), budget=BUDGET, campaign_id=stopped.id)
    assert states == ["rejected"]
    assert str(lab.store.get_as(job.id, type(job)).status) == "interrupted"
