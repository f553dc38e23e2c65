"""Tempering on a constrained tuning family: the built-in policy with it and without it.

Entry ``benchmarks.bench_tempering:run_tempering``. The family is the generated tuning family of
``tests/orchestrator/builtin/tuning_tasks.py`` with its non-target ``keep`` (``constrained``):
``keep``'s error grows with the squared distance of the numeric knobs from the defaults, so the
target's optimum of most seeds lies beyond what ``keep``'s tolerance allows. It is not a
benchmark task, and it is where tempering was built and its constants chosen. Both arms run
the same seeds with the same campaign seed; the controller judges every proposal.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from tests.orchestrator.builtin.tuning_tasks import (
    KEEP_TOLERANCE,
    damage,
    quality,
    space,
    spec_for,
    tuning_task,
)

from benchmarks import env_at
from benchmarks.search.report import mean_ci
from rsilab.orchestrator.builtin.ablation import Ablation
from rsilab.orchestrator.builtin.runner import run_campaign
from rsilab.records import Candidate, CandidateState, Intent
from rsilab.store import Lab
from rsilab.tasks import Budget

FULL = {12: 60, 24: 60}
"""Experiment budget -> seeds, full size."""
QUICK = {12: 12}
"""Experiment budget -> seeds, quick."""
ARMS = {"with tempering": frozenset(), "without tempering": frozenset({Ablation.TEMPERING})}


def one_campaign(
    folder: Path, seed: int, budget: int, ablate: frozenset[Ablation]
) -> dict[str, Any]:
    """One campaign of family seed ``seed`` (campaign seed the same): whether a version was
    accepted, and the true quality and ``keep`` damage of the lineage head it left."""
    lab = Lab.init(folder / "lab")
    try:
        task = tuning_task(folder / "task", seed=seed, constrained=True)
        result = run_campaign(
            lab, task, budget=Budget(experiments=budget), seed=seed, ablate=ablate
        )
        intents = lab.store.query_as(Intent, campaign_id=result.campaign_id)
        configs = {
            str(i.result["experiment_id"]): i.result["config"]
            for i in intents
            if i.key.startswith("exp:") and i.result
        }
        accepted = sorted(
            (
                c
                for c in lab.store.query_as(Candidate, campaign_id=result.campaign_id)
                if c.state == CandidateState.ACCEPTED
            ),
            key=lambda c: c.created_at,
        )
        start = {k.name: k.default for k in space()}
        head = configs.get(accepted[-1].experiment_id or "", start) if accepted else start
        spec = spec_for(seed)
        return {
            "accepted": bool(accepted),
            "gain": quality(head, spec) - quality(start, spec),
            "damage": damage(head, spec),
        }
    finally:
        lab.close()


def _ci(found: Any, sign: str = "") -> str:
    return f"{found.mean:{sign}.3f} [{found.low:{sign}.3f}, {found.high:{sign}.3f}]"


def run_tempering(quick: bool) -> list[dict[str, Any]]:
    """Tempering: the built-in policy with and without it, on a constrained tuning family.

    Family seeds 1 to *seeds* of the constrained tuning family (not a benchmark task; where
    tempering was built), each run by both arms with the same campaign seed. *accepted*: runs
    whose campaign had a version accepted by the controller; *head within tolerance*: of those,
    heads whose true ``keep`` damage is within the tolerance (the controller's guard, checked
    against the truth); *true gain of the head*: the head's true quality less the start's
    (mean and 95% t interval; 0 for a run that accepted nothing); *paired difference*: with
    minus without, by seed. Jobs run in plain subprocesses (the harness is generated here).
    """
    rows: list[dict[str, Any]] = []
    # the family's harness is generated here, and the policy's decisions do not depend on
    # the sandbox: plain subprocesses, for this suite only
    with (
        env_at("RSILAB_SANDBOX", "process"),
        tempfile.TemporaryDirectory(prefix="rsilab-bench-temper-") as tmp,
    ):
        for budget, seeds in (QUICK if quick else FULL).items():
            found: dict[str, list[dict[str, Any]]] = {}
            for a, (arm, ablate) in enumerate(ARMS.items()):
                found[arm] = [
                    one_campaign(Path(tmp) / f"{budget}-{a}-{s}", s, budget, ablate)
                    for s in range(1, seeds + 1)
                ]
            for arm, runs in found.items():
                gain = mean_ci([r["gain"] for r in runs])
                accepted = [r for r in runs if r["accepted"]]
                within = sum(1 for r in accepted if r["damage"] <= KEEP_TOLERANCE)
                rows.append(
                    {
                        "budget": budget,
                        "policy": arm,
                        "accepted": f"{len(accepted)} of {len(runs)}",
                        "head within tolerance": f"{within} of {len(accepted)}",
                        "true gain of the head": _ci(gain),
                    }
                )
            diff = mean_ci([a["gain"] - b["gain"] for a, b in zip(*found.values(), strict=True)])
            rows.append(
                {
                    "budget": budget,
                    "policy": "paired difference",
                    "true gain of the head": _ci(diff, "+"),
                }
            )
    return rows
