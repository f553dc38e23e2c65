"""What every finished built-in campaign must show in its records, whatever happened to it."""

from __future__ import annotations

import re
from collections import Counter

from rsilab.records import (
    Campaign,
    CampaignState,
    EventDraft,
    Experiment,
    ExperimentState,
    Intent,
    IntentState,
    Job,
    Role,
)
from rsilab.store import Lab, Store, verify_store

_TAG = re.compile(r"^\[(exp:\d+)\] ")


def check_campaign(store: Store, campaign_id: str, budget: int) -> list[Intent]:
    """Assert the campaign is finished with exactly ``budget`` experiments, none repeated or
    lost, no job or experiment left open, and a ledger that verifies; its done ``exp:`` intents.
    """
    assert verify_store(store, None).problems == []
    assert store.get_as(campaign_id, Campaign).state == "finished"
    intents = [
        i for i in store.query_as(Intent, campaign_id=campaign_id) if i.key.startswith("exp:")
    ]
    done = [i for i in intents if i.state is IntentState.DONE]
    assert [i for i in intents if i.state is IntentState.PENDING] == []
    assert len(done) == budget, sorted(i.key for i in done)
    assert sorted(int(i.key.removeprefix("exp:")) for i in done) == list(range(1, budget + 1))
    results = [i.result or {} for i in done]
    assert len({r["experiment_id"] for r in results}) == budget  # one experiment per intent
    experiments = {e.id: e for e in store.query_as(Experiment, campaign_id=campaign_id)}
    assert all(e.is_finished() for e in experiments.values())
    kept = [e for e in experiments.values() if e.state is not ExperimentState.CANCELLED]
    assert {e.id for e in kept} == {r["experiment_id"] for r in results}
    tags = Counter(m.group(1) for e in kept if (m := _TAG.match(e.description)))
    assert set(tags.values()) == {1}, tags  # no intent closed two experiments as done
    jobs = store.query_as(Job, campaign_id=campaign_id)
    assert [j.id for j in jobs if not j.is_finished()] == []
    return done


def force_campaign_state(lab: Lab, campaign_id: str, state: CampaignState) -> None:
    """Write ``state`` on the campaign directly, as a test's setup (not how rsilab ends one:
    that is the lifecycle's)."""
    campaign = lab.store.get_as(campaign_id, Campaign)
    draft = EventDraft(
        actor="test", role=str(Role.CONTROLLER), action=f"campaign_{state}", campaign_id=campaign_id
    )
    lab.store.commit(draft, [campaign.model_copy(update={"state": state})])
