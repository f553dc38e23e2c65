"""The built-in policy's skills: reusable procedures it reads from the lab, which campaign
reviews revise.

One so far, ``builtin:verify-gain``: how many fresh seeds a promising config is re-run on
before it is proposed. Its text says the procedure; its code is JSON, ``{"fresh_seeds": k}``,
which the built-in runners (single and team) read when a campaign starts. Seeded once per lab
as version 1 with :data:`DEFAULT_FRESH_SEEDS`; each revision is a new Skill record.
"""

from __future__ import annotations

import json

from rsilab.errors import UserError
from rsilab.memory.revisions import latest_skill
from rsilab.records import EventDraft, Role, Skill
from rsilab.store.base import Store

VERIFY_SKILL = "builtin:verify-gain"
DEFAULT_FRESH_SEEDS = 2
MIN_FRESH_SEEDS, MAX_FRESH_SEEDS = 2, 5
VERIFY_TEXT = (
    "Before proposing a gain, re-run the config that showed it on fresh seeds (the number the "
    "code gives) in a verify direction, have the re-runs reviewed against the reference, and "
    "propose only when the review says continue and the re-runs' mean beats the reference's. "
    "More seeds cost experiments and let fewer false gains through."
)


def verify_code(fresh_seeds: int) -> str:
    """The skill's code for ``fresh_seeds``."""
    return json.dumps({"fresh_seeds": fresh_seeds})


def ensure_builtin_skills(
    store: Store, *, actor: str = "orchestrator", role: Role = Role.CONTROLLER
) -> Skill:
    """The latest ``builtin:verify-gain``, seeded as version 1 when the lab has none."""
    found = latest_skill(store, VERIFY_SKILL)
    if found is not None:
        return found
    skill = Skill(
        name=VERIFY_SKILL, version=1, text=VERIFY_TEXT, code=verify_code(DEFAULT_FRESH_SEEDS)
    )
    store.commit(
        EventDraft(actor=actor, role=str(role), action="skills_seeded", detail=VERIFY_SKILL),
        [skill],
    )
    return skill


def fresh_seeds(skill: Skill) -> int:
    """The number of fresh seeds ``skill`` (a ``builtin:verify-gain`` revision) says.

    Raises UserError when its code is not ``{"fresh_seeds": k}`` with k in
    [:data:`MIN_FRESH_SEEDS`, :data:`MAX_FRESH_SEEDS`] (a hand-made revision gone wrong).
    """
    try:
        value = json.loads(skill.code or "")["fresh_seeds"]
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError(f"fresh_seeds is {value!r}, not an integer")
        if not MIN_FRESH_SEEDS <= value <= MAX_FRESH_SEEDS:
            raise ValueError(f"fresh_seeds {value} is outside {MIN_FRESH_SEEDS}..{MAX_FRESH_SEEDS}")
    except (ValueError, TypeError, KeyError) as exc:
        raise UserError(
            f"skill {skill.name} v{skill.version} ({skill.id}) has unusable code: {exc}",
            f"revise it with code {verify_code(DEFAULT_FRESH_SEEDS)} (rsilab.memory.revise_skill)",
        ) from exc
    return value


def seeds_revision(current: int, accepted: int, rejected: int) -> tuple[int, str] | None:
    """The fresh seeds a campaign review proposes after the controller judged ``accepted``
    and ``rejected`` verified proposals (None: no change), with why.

    A verification that let through as many false gains as true ones (at least one) gets a
    seed more; one whose proposals were all accepted (three or more) gives one back, down to
    :data:`MIN_FRESH_SEEDS`.
    """
    if rejected >= 1 and rejected >= accepted and current < MAX_FRESH_SEEDS:
        return current + 1, (
            f"the controller rejected {rejected} of {accepted + rejected} verified proposals: "
            "verification on more seeds lets fewer false gains through"
        )
    if accepted >= 3 and rejected == 0 and current > MIN_FRESH_SEEDS:
        return current - 1, (
            f"the controller accepted all {accepted} verified proposals: a seed less saves "
            "experiments"
        )
    return None
