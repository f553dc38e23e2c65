"""Holding knobs on the mixture tuning family: the built-in policy with the task's ``holds``
declarations and without them.

Entry ``benchmarks.bench_holding:run_holding``. The family is
``tests/orchestrator/builtin/tuning_mixture.py``: training on the target breaks three
non-targets unless their own data weights (``mix_a`` ...) and ``replay`` hold them. It is not
a benchmark task; holding was built on its seeds 1-30, so this suite runs seeds from 31 on.
Both arms run the same seeds with the same campaign seed and the same code: the only
difference is whether the task declares what its knobs hold (without, tempering retreats
toward the reference as before). The controller judges every proposal.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from tests.orchestrator.builtin import tuning_mixture as family

from benchmarks import env_at
from benchmarks.bench_tempering import ci_text, head_config
from benchmarks.search.report import mean_ci
from rsilab.orchestrator.builtin.runner import run_campaign
from rsilab.store import Lab
from rsilab.tasks import Budget

FIRST_SEED = 31
"""Seeds 1-30 are where holding was built; the suite measures the seeds after them."""
FULL = {12: 60}
"""Experiment budget -> seeds, full size."""
QUICK = {12: 12}
"""Experiment budget -> seeds, quick."""
ARMS = {"holds declared": True, "holds not declared": False}


def one_campaign(folder: Path, seed: int, budget: int, holds: bool) -> dict[str, Any]:
    """One campaign of family seed ``seed`` (campaign seed the same): whether a version was
    accepted, and the true quality and worst non-target damage of the lineage head it left."""
    lab = Lab.init(folder / "lab")
    try:
        task = family.mixture_task(folder / "task", seed=seed, holds=holds)
        result = run_campaign(lab, task, budget=Budget(experiments=budget), seed=seed)
        start = {k.name: k.default for k in family.space()}
        accepted, head = head_config(lab, result.campaign_id, start)
        spec = family.spec_for(seed)
        return {
            "accepted": accepted,
            "gain": family.quality(head, spec) - family.quality(start, spec),
            "damage": family.worst_damage(head, spec),
        }
    finally:
        lab.close()


def run_holding(quick: bool) -> list[dict[str, Any]]:
    """Holding knobs: the built-in policy with and without `holds`, on the mixture family.

    Family seeds 31 to 30 + *seeds* of the mixture tuning family (not a benchmark task; holding
    was built on seeds 1-30), each run by both arms with the same campaign seed. *accepted*:
    runs whose campaign had a version accepted by the controller; *head within tolerance*: of
    those, heads whose true damage on every non-target is within the tolerance (the
    controller's guard, checked against the truth); *true gain of the head*: the head's true
    quality less the start's (mean and 95% t interval; 0 for a run that accepted nothing);
    *paired difference*: declared minus not declared, by seed. Jobs run in plain subprocesses
    (the harness is generated here).
    """
    rows: list[dict[str, Any]] = []
    # the family's harness is generated here, and the policy's decisions do not depend on
    # the sandbox: plain subprocesses, for this suite only
    with (
        env_at("RSILAB_SANDBOX", "process"),
        tempfile.TemporaryDirectory(prefix="rsilab-bench-holding-") as tmp,
    ):
        for budget, seeds in (QUICK if quick else FULL).items():
            found: dict[str, list[dict[str, Any]]] = {}
            for a, (arm, holds) in enumerate(ARMS.items()):
                found[arm] = [
                    one_campaign(Path(tmp) / f"{budget}-{a}-{s}", s, budget, holds)
                    for s in range(FIRST_SEED, FIRST_SEED + seeds)
                ]
            for arm, runs in found.items():
                accepted = [r for r in runs if r["accepted"]]
                within = sum(1 for r in accepted if r["damage"] <= family.TOLERANCE)
                rows.append(
                    {
                        "budget": budget,
                        "policy": arm,
                        "accepted": f"{len(accepted)} of {len(runs)}",
                        "head within tolerance": f"{within} of {len(accepted)}",
                        "true gain of the head": ci_text(mean_ci([r["gain"] for r in runs])),
                    }
                )
            diff = [a["gain"] - b["gain"] for a, b in zip(*found.values(), strict=True)]
            rows.append(
                {
                    "budget": budget,
                    "policy": "paired difference",
                    "true gain of the head": ci_text(mean_ci(diff), "+"),
                }
            )
    return rows
