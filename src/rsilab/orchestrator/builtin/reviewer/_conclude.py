"""Concluding a verification: review the re-runs, propose when the review says so, act on it.

Once a verify direction's re-runs
(:attr:`~rsilab.orchestrator.builtin._context.RunContext.verify_seeds`)
are done, the Reviewer compares them with the reference (a review of the parent direction,
``verified``) and the Main agent follows its advice:

- ``continue`` (the gain held): propose the config to the Host Controller, which alone
  decides (accepted, the reference moves to the verified runs), and grow a ``continue`` child
  of the parent: the line of work goes on from the head, accepted or not;
- ``stop`` (the gain did not hold on fresh seeds): close the parent;
- ``revise`` (the re-runs are worse): grow a ``revise`` child and close the parent as refuted.

Without Reviewers (:attr:`~rsilab.orchestrator.builtin.ablation.Ablation.REVIEWERS`) Main's own rule
stands in for the review (:func:`~rsilab.orchestrator.builtin.reviewer._agent.default_verdict`). The
verify direction is closed last. The decision is the intent ``conclude:<verify id>``; its result
(advice, acceptance, new reference) is written before the DAG changes, and the DAG changes are
idempotent, so a conclusion cut short is finished on resume from that result. A proposal uses no
experiment budget.

At the end of the budget, :meth:`Concluder.propose_best` puts the campaign's best unproposed
run to the controller once (intent ``final-proposal``): a gain found by the last experiments,
too late to verify, still gets its one judgement, as any search's best result would; the
controller's alpha spending and re-training guard it.

Scores: the runs' are the view's, oriented so higher is better; what an intent result records
(``score``, ``mean``, ``ref_score``) is turned back into the target's own units.
"""

from __future__ import annotations

from typing import Any

from pydantic import JsonValue

from rsilab.orchestrator.builtin._context import RunContext
from rsilab.orchestrator.builtin._state import CONCLUDE_PREFIX, CampaignView, Run
from rsilab.orchestrator.builtin.ablation import Ablation
from rsilab.orchestrator.builtin.main._moves import Moves
from rsilab.orchestrator.builtin.main._race import MAX_CONTENDERS, contenders, winner
from rsilab.orchestrator.builtin.reviewer._agent import Reviewer, default_verdict
from rsilab.orchestrator.builtin.worker._agent import write_system
from rsilab.orchestrator.builtin.worker._rules import config_key
from rsilab.orchestrator.campaign import DoneIntent
from rsilab.records import (
    Candidate,
    CandidateState,
    Direction,
    Recommendation,
    SystemVersion,
)

FINAL_PROPOSAL = "final-proposal"
"""Intent key of the end-of-budget proposal (:meth:`Concluder.propose_best`)."""
FINAL_FLOOR = 0.1
"""The last proposal is held only when the contender with the largest expected gain has an
estimated acceptance probability below this (see :meth:`Concluder.propose_winner`): then the
controller's trainings would most likely be spent for nothing. Not tuned: a round figure."""
PROPOSER = "proposer"
"""The Worker whose workspace holds proposals (not one of the experiment Workers, which may be
busy when a conclusion is due)."""


def mean_score(runs: list[Run]) -> float:
    """The mean policy score of ``runs`` (0.0 for none)."""
    return sum(r.score for r in runs) / len(runs) if runs else 0.0


class Concluder:
    """Concludes verifications (see the module docstring)."""

    def __init__(
        self, ctx: RunContext, reviewer: Reviewer, moves: Moves, proposer: str = PROPOSER
    ) -> None:
        self.ctx, self.reviewer, self.moves = ctx, reviewer, moves
        self.proposer = proposer
        """The Worker whose workspace makes proposals (a team's researcher uses its own)."""

    def conclude(self, view: CampaignView, verify: Direction) -> None:
        """Conclude ``verify`` (its re-runs are done and none is running)."""
        parent = view.dag.directions[verify.parents[0].parent_id]
        step = self.ctx.intents.begin(
            f"{CONCLUDE_PREFIX}{verify.id}",
            "conclude",
            {"parent_id": parent.id},
        )
        if isinstance(step, DoneIntent):
            result = step.result
        else:
            result = self._decide(view, verify, parent)
            self.ctx.intents.complete(step, result)
        self._act(self.ctx.view(), verify, parent, result)

    def propose_best(self, view: CampaignView) -> None:
        """Propose the best run that beats the reference and whose config no candidate of
        the campaign carried yet (once per campaign; nothing when there is none)."""
        step = self.ctx.intents.begin(FINAL_PROPOSAL, "propose", {})
        if isinstance(step, DoneIntent):
            return
        space = self.ctx.space
        carried = {
            c.experiment_id
            for c in self.ctx.store.query_as(Candidate, campaign_id=self.ctx.campaign_id)
        }  # the runs' configs hold the code variant too, the experiments' records do not
        proposed = {config_key(r.config, space) for r in view.runs if r.experiment_id in carried}
        ref = view.ref_score if view.ref_score is not None else float("inf")
        fresh = [
            r
            for r in view.runs
            if not r.failed
            and r.score > ref
            and r.experiment_id not in view.ref_ids
            and config_key(r.config, space) not in proposed
        ]
        result: dict[str, Any] = {"accepted": False}
        if fresh:
            best = max(fresh, key=lambda r: (r.score, -r.index))
            result |= {"experiment_id": best.experiment_id, "score": view.raw(best.score)}
            result |= self.propose(best.experiment_id, best.config)
        self.ctx.intents.complete(step, result)

    def propose_winner(self, view: CampaignView) -> None:
        """Propose one of the race's contenders once per campaign (intent ``final-proposal``).

        Without Reviewers: the race's :func:`~rsilab.orchestrator.builtin.main._race.winner`
        (Main's own rule: its gain over the reference, paired by seed, is positive). With them,
        the Reviewer predicts the controller's verdict on each contender
        (:meth:`~rsilab.orchestrator.builtin.reviewer._agent.Reviewer.predict`, the winner
        first) and the one with the largest expected gain (estimated acceptance probability
        times its gain over the reference, paired by seed) is proposed, unless even its
        probability is below :data:`FINAL_FLOOR`. Why not hold below one half, as a mid-campaign
        proposal would: this is the campaign's last proposal, so holding saves no alpha for a
        later one, and the winner of the race on the target may be the contender whose
        non-targets the controller is least likely to pass. The predictions' reasons and
        probabilities are recorded either way; a held proposal as ``held``; nothing beating the
        reference, as ``{"accepted": False}``."""
        step = self.ctx.intents.begin(FINAL_PROPOSAL, "propose", {})
        if isinstance(step, DoneIntent):
            return
        ref = view.ref_config()
        found = winner(view.runs, ref, view.non_targets)
        result: dict[str, Any] = {"accepted": False}
        if found is not None:
            index = 1 + len(self.ctx.store.query_as(Candidate, campaign_id=self.ctx.campaign_id))
            chosen = found
            said: dict[str, Any] = {"score": view.raw(found.mean), "runs": len(found.runs)}
            held = None
            if not self.ctx.without(Ablation.REVIEWERS):
                field = [found] + [
                    c for c in contenders(view.runs, ref, view.non_targets) if c != found
                ]
                best_value, best_prob, best_reason = -1.0, 0.0, ""
                for contender in field[:MAX_CONTENDERS]:
                    where = view.dag.directions[contender.latest.direction_id]
                    prediction = self.reviewer.predict(
                        view, where, contender, index, last_floor=FINAL_FLOOR
                    )
                    prob = prediction.probability or 0.0
                    value = prob * contender.gain
                    if value > best_value:
                        best_value, best_prob, best_reason = value, prob, prediction.reason
                        chosen = contender
                said = {
                    "score": view.raw(chosen.mean),
                    "runs": len(chosen.runs),
                    "prediction": best_reason,
                    "probability": best_prob,
                    "race_winner": found.latest.experiment_id,
                }
                held = None if best_prob >= FINAL_FLOOR else best_reason
            latest = chosen.latest
            if held is None:
                result |= {"experiment_id": latest.experiment_id, **said}
                result |= self.propose(latest.experiment_id, dict(chosen.config))
            else:
                result |= {"held": latest.experiment_id, **said}
        self.ctx.intents.complete(step, result)

    def _decide(self, view: CampaignView, verify: Direction, parent: Direction) -> dict[str, Any]:
        runs = [r for r in view.runs_in(verify.id) if not r.failed]
        best = view.best(parent.id)
        assert best is not None and view.ref_score is not None
        if self.ctx.without(Ablation.REVIEWERS):
            advice: Recommendation | str | None = default_verdict(mean_score(runs), view.ref_score)
        else:
            advice = self.reviewer.review(view, parent, runs, verified=True)
        return self.verified(view, best, runs, advice)

    def verified(
        self, view: CampaignView, source: Run, runs: list[Run], advice: object
    ) -> dict[str, Any]:
        """A verification's result: proposed when ``advice`` is to continue and the re-runs'
        mean beats the reference (``view.ref_score``); once accepted, ``source`` and its
        re-runs are the new reference (``ref_ids``, ``ref_score``). ``mean`` and ``ref_score``
        are recorded in the target's own units."""
        mean, ref_score = mean_score(runs), view.ref_score
        result: dict[str, Any] = {"accepted": False, "mean": view.raw(mean), "advice": str(advice)}
        if str(advice) == "continue" and ref_score is not None and mean > ref_score:
            result |= self.propose(runs[-1].experiment_id, dict(source.config))
        if result.get("accepted"):
            group: list[JsonValue] = [source.experiment_id, *(r.experiment_id for r in runs)]
            result |= {
                "ref_ids": group,
                "ref_score": view.raw((source.score + sum(r.score for r in runs)) / len(group)),
            }
        return result

    def _act(
        self, view: CampaignView, verify: Direction, parent: Direction, result: dict[str, Any]
    ) -> None:
        verify = view.dag.directions[verify.id]
        parent = view.dag.directions[parent.id]
        mean = float(result.get("mean", 0.0))
        advice = str(result.get("advice"))
        if advice == "continue":
            accepted = result.get("accepted")
            outcome = f"accepted as {result['label']}" if accepted else "not accepted"
            self.moves.carry_on(view, parent)
        elif advice == "revise":
            outcome = "the re-runs are worse than the reference"
            self.moves.replace(view, parent, "revise", f"verification refuted it; {outcome}")
        else:
            outcome = "the gain did not hold on fresh seeds"
        if advice != "revise":
            self.moves.close(parent, f"verified: {outcome}")
        self.moves.close(verify, f"re-runs' mean {mean:.4f}; {outcome}")

    def propose(self, experiment_id: str, config: dict[str, JsonValue]) -> dict[str, Any]:
        """Put ``config`` to the controller as the proposal of ``experiment_id`` (or read the
        verdict of the one an interrupted conclusion already made): accepted, candidate_id,
        label."""
        earlier = [
            c
            for c in self.ctx.store.query_as(Candidate, campaign_id=self.ctx.campaign_id)
            if c.experiment_id == experiment_id and c.state.is_finished()
        ]
        if earlier:
            return self._verdict_of(earlier[-1])
        door = self.ctx.door
        prepared = door.worker(self.proposer, "prepare_workspace", overwrite=True)
        write_system(self.ctx, self.proposer, config)
        proposed = door.worker(
            self.proposer,
            "propose_candidate",
            experiment_id=experiment_id,
            base_version_id=prepared["base_version_id"],
        )
        status = door.worker(
            self.proposer, "candidate_status", candidate_id=proposed["candidate_id"]
        )
        accepted = status.get("verdict") == "accept"
        label = str(status.get("label", ""))
        self.ctx.say(
            "candidate",
            f"candidate {proposed['candidate_id']}: {status.get('verdict')}"
            + (f" -> {label}" if accepted else ""),
        )
        return {"accepted": accepted, "candidate_id": proposed["candidate_id"], "label": label}

    def _verdict_of(self, candidate: Candidate) -> dict[str, Any]:
        accepted = candidate.state == CandidateState.ACCEPTED and candidate.version_id is not None
        label = ""
        if accepted:
            assert candidate.version_id is not None
            label = self.ctx.store.get_as(candidate.version_id, SystemVersion).label
        return {"accepted": accepted, "candidate_id": candidate.id, "label": label}
