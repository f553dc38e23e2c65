"""What a research team knows, rebuilt from the records before every decision.

:class:`TeamView` adds to the campaign's :class:`~rsilab.orchestrator.builtin._state.CampaignView`
who ran which experiment under which assignment (the ``exp:<n>`` intents' payloads name the
researcher and its assignment), each researcher's current assignment, the team's best run,
the noise floor (the pooled seed spread of every config the team ran more than once: the
reference's re-runs and the verifications) and which gains are still unverified. Direction
plans carry the markers the team reads back: ``assignment: <id>`` on a researcher's working
direction, ``verifies: <experiment id>`` on a verification.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from rsilab.memory import assignments_of
from rsilab.orchestrator.builtin._context import RunContext
from rsilab.orchestrator.builtin._state import EXP_PREFIX, CampaignView, Run, dev_matrix, exp_index
from rsilab.orchestrator.builtin.reviewer._agent import DEFAULT_NOISE_FLOOR
from rsilab.orchestrator.builtin.worker._agent import Order
from rsilab.orchestrator.builtin.worker._rules import config_key
from rsilab.records import (
    Assignment,
    Candidate,
    Direction,
    Experiment,
    Finding,
    Intent,
)
from rsilab.stats import noise_floor_from
from rsilab.tasks import Knob

REFERENCE_TITLE = "reference: the current version"
VERIFY_BAR = 0.5
"""Share of the noise floor a single run's gain must clear to be worth verifying: the floor
is the 95% bar for one run against one, and the re-runs are there to tell gain from noise."""
_MARK = re.compile(r"^(assignment|verifies|orientation): (\S+)$", re.MULTILINE)


def plan_mark(direction: Direction, name: str) -> str | None:
    """The value of the ``<name>: <value>`` line of a direction's plan, if it has one."""
    for key, value in _MARK.findall(direction.plan):
        if key == name:
            return str(value)
    return None


@dataclass
class TeamView:
    """The campaign as a team sees it (see the module docstring)."""

    view: CampaignView
    experiments: dict[str, Experiment]
    payloads: dict[int, dict[str, Any]]
    """The ``exp:<n>`` intents' payloads, by ``n``."""
    assignments: dict[str, Assignment]
    """Each researcher's current assignment."""
    history: list[Assignment]
    """Every assignment, oldest first."""
    proposed: set[str]
    """Config keys of the campaign's candidates."""
    findings: list[Finding] = field(default_factory=list)
    """The campaign's own findings, oldest first."""
    noise_floor: float = DEFAULT_NOISE_FLOOR

    @classmethod
    def load(cls, ctx: RunContext) -> TeamView:
        view = ctx.view()
        store, cid, space = ctx.store, ctx.campaign_id, ctx.space
        exps = {e.id: e for e in store.query_as(Experiment, campaign_id=cid)}
        payloads = {
            exp_index(i): dict(i.payload)
            for i in store.query_as(Intent, campaign_id=cid)
            if i.key.startswith(EXP_PREFIX)
        }
        carried = {c.experiment_id for c in store.query_as(Candidate, campaign_id=cid)}
        # the runs' configs hold the code variant too, the experiments' records do not
        proposed = {config_key(r.config, space) for r in view.runs if r.experiment_id in carried}
        findings = sorted(
            store.query_as(Finding, fields={"origin_campaign_id": cid}),
            key=lambda f: f.created_at,
        )
        history = assignments_of(store, cid)
        current = {a.researcher: a for a in history}
        team = cls(view, exps, payloads, current, history, proposed, findings)
        team.noise_floor = team._noise_floor(ctx)
        return team

    def private(self, researcher: str, ctx: RunContext) -> TeamView:
        """The campaign as ``researcher`` alone sees it when the team shares no memory: its own
        runs and the reference's, its own findings and assignments, and the noise floor of
        those runs. What the controller decided (the lineage head, the configs proposed) is
        the same for everyone."""
        ref = self.reference_direction()
        runs = [
            r
            for r in self.view.runs
            if self.owner(r) == researcher
            or (ref is not None and r.direction_id == ref.id)
            or r.experiment_id in self.view.ref_ids
        ]
        mine = TeamView(
            replace(self.view, runs=runs),
            self.experiments,
            self.payloads,
            {n: a for n, a in self.assignments.items() if n == researcher},
            [a for a in self.history if a.researcher == researcher],
            self.proposed,
            [f for f in self.findings if f.author == researcher],
        )
        mine.noise_floor = mine._noise_floor(ctx)
        return mine

    # -- who did what ---------------------------------------------------------------------------

    def owner(self, run: Run) -> str:
        """The researcher that ran ``run`` ('' when the records do not say)."""
        return str(self.payloads.get(run.index, {}).get("researcher", ""))

    def assignment_of(self, run: Run) -> Assignment | None:
        """The assignment ``run`` was made under (None for the reference runs)."""
        made_under = self.payloads.get(run.index, {}).get("assignment")
        return next((a for a in self.history if a.id == made_under), None)

    def runs_under(self, assignment: Assignment) -> list[Run]:
        """The runs its researcher made under ``assignment``, oldest first."""
        return [
            r
            for r in self.view.runs
            if self.payloads.get(r.index, {}).get("assignment") == assignment.id
        ]

    def own_directions(self, researcher: str) -> list[Direction]:
        """Open directions ``researcher`` created, oldest first."""
        return [d for d in self.view.dag.frontier() if d.created_by == researcher]

    def reference_direction(self) -> Direction | None:
        """The direction the reference runs went to, if it was made."""
        for d in self.view.dag.directions.values():
            if d.title == REFERENCE_TITLE:
                return d
        return None

    # -- what the runs show ---------------------------------------------------------------------

    def best(self) -> Run | None:
        """The team's best run by the policy's score (failed runs never; earliest of ties)."""
        runs = [r for r in self.view.runs if not r.failed]
        return max(runs, key=lambda r: (r.score, -r.index)) if runs else None

    def new_bests(self) -> set[int]:
        """Indexes of the runs that beat every run of a lower index when they were made."""
        out, best = set(), float("-inf")
        for run in self.view.runs:
            if not run.failed and run.score > best:
                if best != float("-inf"):
                    out.add(run.index)
                best = run.score
        return out

    def verifications(self) -> dict[str, str]:
        """Verify direction id -> the experiment it re-runs."""
        out = {}
        for d in self.view.dag.directions.values():
            source = plan_mark(d, "verifies")
            if source is not None and self.view.is_verify(d):
                out[d.id] = source
        return out

    def unverified(self, space: Sequence[Knob], inflight: list[Order]) -> list[Run]:
        """Runs whose gain over the reference clears :data:`VERIFY_BAR` of the noise floor,
        best first, whose config no verification, candidate, reference or verify re-run in
        flight holds."""
        ref = self.view.ref_score
        if ref is None:
            return []
        by_id = {r.experiment_id: r for r in self.view.runs}
        held = set(self.proposed)
        held |= {
            config_key(by_id[s].config, space) for s in self.verifications().values() if s in by_id
        }
        held |= {config_key(by_id[i].config, space) for i in self.view.ref_ids if i in by_id}
        held |= {config_key(o.config, space) for o in inflight if o.why.startswith("verify")}
        found = [
            r
            for r in self.view.runs
            if not r.failed
            and r.score - ref > VERIFY_BAR * self.noise_floor
            and config_key(r.config, space) not in held
        ]
        return sorted(found, key=lambda r: (-r.score, r.index))

    def _noise_floor(self, ctx: RunContext) -> float:
        """Pooled seed spread of every config the team ran at least twice."""
        groups: dict[str, list[str]] = defaultdict(list)
        for run in self.view.runs:
            if not run.failed:
                groups[config_key(run.config, ctx.space)].append(run.experiment_id)
        matrices = [
            dev_matrix(ctx.store, ids, ctx.target, ctx.tier)
            for ids in groups.values()
            if len(ids) >= 2
        ]
        try:
            return noise_floor_from([m for m in matrices if len(m) >= 2])
        except ValueError:
            return DEFAULT_NOISE_FLOOR
