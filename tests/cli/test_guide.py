"""``rsilab guide CAMPAIGN "text"``."""

from __future__ import annotations

from pathlib import Path

from rsilab.records import CampaignState, Guidance
from rsilab.store import Lab
from tests.cli.helpers import explain, rsilab
from tests.orchestrator.runner_checks import force_campaign_state


def test_guide_records_guidance_for_the_next_planning_step(lab: Path, campaign_id: str) -> None:
    given = rsilab("guide", "latest", "Try adam with a lower lr.", "--by", "ada", "--lab", lab)
    assert given.exit_code == 0, explain(given)
    assert "read at the next planning step" in given.stdout and campaign_id in given.stdout
    with Lab.open(lab) as opened:
        (guidance,) = opened.store.query_as(Guidance, campaign_id=campaign_id)
        events = [e.action for e in opened.store.events(campaign_id=campaign_id)]
    assert guidance.id in given.stdout
    assert (guidance.text, guidance.given_by, guidance.read_at) == (
        "Try adam with a lower lr.",
        "ada",
        None,
    )
    assert "guidance_given" in events


def test_guide_refuses_empty_text_unknown_and_finished_campaigns(
    lab: Path, campaign_id: str
) -> None:
    empty = rsilab("guide", campaign_id, "  ", "--lab", lab)
    assert empty.exit_code == 2 and "empty" in empty.stderr and "hint:" in empty.stderr
    unknown = rsilab("guide", "cmp-000000000000", "Try adam.", "--lab", lab)
    assert unknown.exit_code == 2 and "no campaign" in unknown.stderr, explain(unknown)
    with Lab.open(lab) as opened:
        force_campaign_state(opened, campaign_id, CampaignState.FINISHED)
    finished = rsilab("guide", campaign_id, "Try adam.", "--lab", lab)
    assert finished.exit_code == 2 and "finished" in finished.stderr, explain(finished)


def test_guiding_a_stopped_campaign_says_how_to_resume_it(lab: Path, campaign_id: str) -> None:
    with Lab.open(lab) as opened:
        force_campaign_state(opened, campaign_id, CampaignState.STOPPED)
    given = rsilab("guide", campaign_id, "Try adam.", "--lab", lab)
    assert given.exit_code == 0, explain(given)
    assert f"rsilab resume {campaign_id}" in given.stdout
