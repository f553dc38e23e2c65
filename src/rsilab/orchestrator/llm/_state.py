"""What the LLM runner reads from the records between agent steps.

The runner keeps nothing of its own that a resumed campaign would need: tokens spent are the
campaign's ``llm_call`` ledger events, experiments are its Experiment records, the round to
resume is the highest round of its ``step:<round>:<actor>`` intents, and what each step
decided is in that intent's result.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from rsilab.records import Direction, Experiment, Intent, Review
from rsilab.store import Store

STEP_PREFIX = "step:"
LLM_CALL = "llm_call"
_DIRECTION_ID = re.compile(r"\bdir-[0-9a-f]{12}\b")
_STEP_KEY = re.compile(r"^step:(\d+):")


def step_key(round_no: int, actor: str) -> str:
    """The idempotency key of one agent step: ``step:<round>:<actor>``."""
    return f"{STEP_PREFIX}{round_no}:{actor}"


def last_round(store: Store, campaign_id: str) -> int:
    """The highest round any step of the campaign was begun in (0 when none was)."""
    rounds = [
        int(m.group(1))
        for i in store.query_as(Intent, campaign_id=campaign_id)
        if (m := _STEP_KEY.match(i.key))
    ]
    return max(rounds, default=0)


class TokenMeter:
    """Tokens (in + out) the campaign's LLM calls used, read from its ledger.

    Reads only events it has not seen, so calling :meth:`used` after every step stays cheap
    on a long campaign. Counts every ``llm_call`` event, from this process or an earlier one.
    """

    def __init__(self, store: Store, campaign_id: str) -> None:
        self.store = store
        self.campaign_id = campaign_id
        self._after = 0
        self._tokens = 0

    def used(self) -> int:
        """Tokens used so far."""
        for event in self.store.events(after=self._after, campaign_id=self.campaign_id):
            self._after = event.seq
            if event.action == LLM_CALL and event.cost is not None:
                self._tokens += event.cost.tokens_in + event.cost.tokens_out
        return self._tokens


def experiment_count(store: Store, campaign_id: str) -> int:
    """Experiments the campaign has created (each one counts against its budget)."""
    return len(store.query_as(Experiment, campaign_id=campaign_id))


def unreviewed(store: Store, campaign_id: str) -> dict[str, list[str]]:
    """Finished experiments no review has read yet, by direction id (oldest first).

    An experiment counts as read once a review lists it, or compares it as treatment or
    baseline.
    """
    read: set[str] = set()
    for review in store.query_as(Review, campaign_id=campaign_id):
        read.update(review.experiment_ids)
        for comparison in review.comparisons:
            read.update(comparison.a_ids, comparison.b_ids)
    out: dict[str, list[str]] = {}
    for exp in store.query_as(Experiment, campaign_id=campaign_id):
        if exp.is_finished() and exp.id not in read:
            out.setdefault(exp.direction_id, []).append(exp.id)
    return out


def assign_workers(
    text: str, frontier: Iterable[Direction], counts: dict[str, int], workers: int
) -> list[str]:
    """The directions the next Worker steps take, one each, at most ``workers``.

    First the open directions ``text`` (the Main agent's closing answer) names, in the order
    it names them; then the other open ones, fewest experiments first (oldest first on ties),
    so that a Main agent that names none still gets its directions worked on.
    """
    open_ids = [d.id for d in frontier]
    named = [i for i in dict.fromkeys(_DIRECTION_ID.findall(text)) if i in open_ids]
    rest = sorted(
        (i for i in open_ids if i not in named), key=lambda i: (counts.get(i, 0), open_ids.index(i))
    )
    return [*named, *rest][: max(1, workers)]
