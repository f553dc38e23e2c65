"""Research teams with the built-in policy, end to end on the synthetic task."""

from __future__ import annotations

import itertools

import pytest

from rsilab.memory import fresh_seeds, orientation_history
from rsilab.memory.effect_tags import effect_tag
from rsilab.orchestrator.builtin.runner import Progress, StopRequest
from rsilab.orchestrator.builtin.team import TeamSettings, run_team_campaign
from rsilab.orchestrator.report import build_report, render_markdown
from rsilab.orchestrator.research.campaign_review import campaign_review_of
from rsilab.records import (
    Adoption,
    Assignment,
    Campaign,
    Candidate,
    EventDraft,
    Experiment,
    Finding,
    FindingStatus,
    Orientation,
    Skill,
)
from rsilab.store import Lab, verify_store
from rsilab.tasks import Budget, get_task
from tests.orchestrator.runner_checks import check_campaign

TEAM = ["researcher-1", "researcher-2", "researcher-3"]


@pytest.fixture(autouse=True)
def _process_sandbox(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RSILAB_SANDBOX", "process")


def _earlier_finding(lab: Lab) -> Finding:
    """A supported finding an earlier campaign left in the lab's memory: raise width."""
    finding = Finding(
        claim="On dev quality, runs with width above the reference's value score higher",
        status=FindingStatus.SUPPORTED,
        task="synthetic",
        author="researcher-9",
        tags=["width", effect_tag("width", "raise")],
    )
    lab.store.commit(EventDraft(actor="test", role="human", action="setup"), [finding])
    return finding


def test_a_team_shares_its_budget_memory_and_resources(lab: Lab) -> None:
    earlier = _earlier_finding(lab)
    seen: list[Progress] = []
    settings = TeamSettings(high_noise=1.0, patience=50)  # explorer, exploiter, analyst
    result = run_team_campaign(
        lab,
        get_task("synthetic"),
        team=3,
        budget=Budget(experiments=14),
        on_progress=seen.append,
        settings=settings,
    )
    cid = result.campaign_id
    assert result.state == "finished" and result.experiments == 14
    check_campaign(lab.store, cid, 14)  # no overshoot, nothing repeated or lost, ledger sound
    assert lab.store.get_as(cid, Campaign).settings["team"] == 3
    assert max(p.running for p in seen) >= 2
    assert all(p.experiments + p.running <= 14 for p in seen)
    assert any("researcher-" in p.message for p in seen if p.kind == "experiment")
    exps = lab.store.query_as(Experiment, campaign_id=cid)
    assert {e.created_by for e in exps} == set(TEAM)

    assignments = lab.store.query_as(Assignment, campaign_id=cid)
    assert {a.researcher for a in assignments} == set(TEAM)
    for a in assignments:
        assert a.reason and a.leader == "leader"
        orientation = lab.store.get_as(a.orientation_id, Orientation)
        assert orientation.name == f"orientation:{a.orientation}"
    assert orientation_history(lab.store, "orientation:analyst")  # seeded once per lab

    adoptions = lab.store.query_as(Adoption, campaign_id=cid)
    assert earlier.id in {a.finding_id for a in adoptions}
    for adoption in adoptions:  # the earlier finding, or one the team's analyst published
        followed = lab.store.get_as(adoption.finding_id, Finding)
        assert followed.status is FindingStatus.SUPPORTED
        assert adoption.actor in TEAM and adoption.experiment_ids
        exp = lab.store.get_as(adoption.experiment_ids[0], Experiment)
        assert followed.id in exp.description and exp.created_by == adoption.actor
        assert any(tag in exp.description for tag in followed.tags if " " in tag)

    published = [f for f in lab.store.query_as(Finding) if f.origin_campaign_id == cid]
    assert published, "the analyst published nothing"
    for finding in published:
        assert finding.author in TEAM and finding.orientation == "orientation:analyst"
        assert finding.structured is not None and finding.effect is not None
        assert "stored as" in finding.check  # the tool recomputed it from the records
        assert finding.claimed_status is None  # it never claimed more than the records show

    candidates = lab.store.query_as(Candidate, campaign_id=cid)
    assert candidates and all(c.state.is_finished() for c in candidates)
    assert {c.proposer for c in candidates} <= set(TEAM)

    report = build_report(lab.store, cid)
    rows, total = report.resources.by_actor, report.resources.totals
    assert total is not None and {r.actor for r in rows} >= {*TEAM, "leader"}
    assert total.experiments == 14 == sum(r.experiments for r in rows)
    assert total.job_cpu_s == pytest.approx(report.resources.cpu_s)
    assert total.job_wall_s == pytest.approx(sum(u.wall_s for u in report.resources.jobs.values()))
    assert total.adoptions == len(adoptions) and total.findings == len(published)
    assert total.assignments == len(assignments) and total.candidates == len(candidates)
    assert len(report.team) == len(assignments)
    text = render_markdown(report)
    assert "## Team" in text and "### By actor" in text and "researcher-2 (" in text
    assert "## Campaign review" in text
    review = campaign_review_of(lab.store, cid)  # the campaign review, written once at the end
    assert review is not None and review.task == "synthetic"
    assert {o.orientation for o in review.orientations} == {a.orientation for a in assignments}
    assert sum(o.experiments for o in review.orientations) <= 14
    for o in review.orientations:
        assert o.paid == o.new_bests + o.supported_findings + o.accepted
    for p in review.revisions:
        if p.accepted and p.kind == "orientation":
            made = lab.store.get_as(str(p.to_id), Orientation)
            assert made.parent_id == p.from_id and p.change.endswith(f"{made.weight:g}")
        elif p.accepted and p.kind == "skill":
            revised = lab.store.get_as(str(p.to_id), Skill)
            assert revised.parent_id == p.from_id and fresh_seeds(revised) in (1, 2, 3)
        elif p.accepted:
            opened = lab.store.get_as(str(p.to_id), Finding)
            assert opened.supersedes == p.from_id and opened.status is FindingStatus.UNRESOLVED
    assert {f.finding_id for f in review.findings} >= {a.finding_id for a in adoptions}
    assert verify_store(lab.store, None).problems == []


def test_one_researcher_is_redirected_as_the_records_call_for(lab: Lab) -> None:
    settings = TeamSettings(patience=2, checkpoint_every=1)
    result = run_team_campaign(
        lab, get_task("synthetic"), team=1, budget=Budget(experiments=9), settings=settings
    )
    assert result.state == "finished" and result.experiments == 9
    history = sorted(
        lab.store.query_as(Assignment, campaign_id=result.campaign_id), key=lambda a: a.created_at
    )
    assert len(history) >= 2 and history[0].supersedes is None
    for before, after in itertools.pairwise(history):
        assert after.supersedes == before.id and after.orientation != before.orientation
        assert after.reason and after.evidence
    assert verify_store(lab.store, None).problems == []


def test_a_cancelled_team_resumes_where_it_left_off(lab: Lab) -> None:
    stop = StopRequest()

    def ctrl_c(progress: Progress) -> None:
        if progress.kind == "experiment" and progress.experiments == 4:
            stop.request()
            stop.request()  # twice: the running jobs are cancelled, their intents left pending

    task = get_task("synthetic")
    first = run_team_campaign(
        lab, task, team=2, budget=Budget(experiments=8), on_progress=ctrl_c, stop=stop
    )
    assert first.state == "stopped" and 4 <= first.experiments < 8
    before = lab.store.query_as(Assignment, campaign_id=first.campaign_id)
    resumed = run_team_campaign(
        lab, task, team=5, budget=Budget(experiments=8), campaign_id=first.campaign_id
    )
    assert resumed.state == "finished" and resumed.experiments == 8
    check_campaign(lab.store, first.campaign_id, 8)
    exps = lab.store.query_as(Experiment, campaign_id=first.campaign_id)
    assert {e.created_by for e in exps} <= {"researcher-1", "researcher-2"}  # its own team
    after = lab.store.query_as(Assignment, campaign_id=first.campaign_id)
    assert {a.id for a in before} <= {a.id for a in after}
    assert len([a for a in after if a.supersedes is None]) == 2  # oriented once, at the start


def test_independent_researchers_share_no_memory_and_are_led_one_by_one(lab: Lab) -> None:
    """The comparison's baseline team: no shared memory, no team orientation."""
    earlier = _earlier_finding(lab)  # another author's: an independent researcher ignores it
    settings = TeamSettings(share_memory=False, orientations=False)
    result = run_team_campaign(
        lab, get_task("synthetic"), team=3, budget=Budget(experiments=12), settings=settings
    )
    assert result.state == "finished" and result.experiments == 12
    check_campaign(lab.store, result.campaign_id, 12)
    assignments = lab.store.query_as(Assignment, campaign_id=result.campaign_id)
    start = [a for a in assignments if a.supersedes is None]
    assert sorted(a.researcher for a in start) == TEAM
    assert {a.orientation for a in start} == {"explorer"}  # each a team of one
    for adoption in lab.store.query_as(Adoption, campaign_id=result.campaign_id):
        assert adoption.finding_id != earlier.id
        assert lab.store.get_as(adoption.finding_id, Finding).author == adoption.actor
