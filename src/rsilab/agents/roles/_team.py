"""Researcher orientations of a research team, as versioned Orientation records.

Each text seeds version 1 of the Orientation ``orientation:<name>``; the Leader assigns the
version in force (:class:`~rsilab.records.Assignment` records its id), and a later campaign
review may revise the texts (a revision is a new version). The built-in policy carries each
orientation out as a search behaviour (:mod:`rsilab.orchestrator.builtin.team`); an LLM researcher
would read the text.
"""

from __future__ import annotations

from rsilab.agents.roles._orientations import seed_orientations
from rsilab.memory.assignments import ORIENTATION_PREFIX
from rsilab.records import Orientation, Role
from rsilab.store.base import Store

TEAM_ORIENTATIONS: dict[str, str] = {
    "explorer": (
        "You are an explorer in a research team. Cover the search space: make wide moves from "
        "the current version on the knobs the team has tried least, so no promising region "
        "goes unseen. Your work pays when it finds a new best the others had not reached."
    ),
    "exploiter": (
        "You are an exploiter in a research team. Refine the team's best feasible dev config "
        "with small local moves, preferring the knobs and directions that supported findings "
        "name; record each finding you follow with adopt_finding. Your work pays when it "
        "raises the team's best."
    ),
    "verifier": (
        "You are a verifier in a research team. Re-run the best configs nobody has verified "
        "on fresh seeds; when the gain over the reference holds beyond the noise, propose it "
        "to the Host Controller, which alone decides. Say plainly when a gain did not hold."
    ),
    "analyst": (
        "You are an analyst in a research team. Estimate each knob's effect from the team's "
        "records (runs with the knob above against below the reference's value), run the "
        "contrast experiments that settle the open ones, and publish findings: supported only "
        "when the records bear the effect out, otherwise as open problems."
    ),
}
"""The built-in orientations, by name (stored as ``orientation:<name>``)."""


def ensure_team_orientations(
    store: Store, *, actor: str = "orchestrator", role: Role = Role.CONTROLLER
) -> dict[str, Orientation]:
    """The latest Orientation of each built-in researcher orientation, keyed by short name.

    Seeds the missing ones once (one ``orientations_seeded`` event); revisions made since
    are what it returns.
    """
    texts = {f"{ORIENTATION_PREFIX}{name}": text for name, text in TEAM_ORIENTATIONS.items()}
    latest = seed_orientations(store, texts, actor=actor, role=role)
    return {name.removeprefix(ORIENTATION_PREFIX): o for name, o in latest.items()}
