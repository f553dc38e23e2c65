"""A lab holding one long campaign on ``synthetic``, written quickly, for the dashboard.

:func:`generate_lab` writes, through the store's own ``commit``, the records a campaign of
the built-in policy leaves: the baseline ``H0/M0`` evaluated by the controller on the private
tiers, a research DAG of directions (continue, verify, branch and revise edges; every state),
experiments proposed by the built-in Worker's search with their train and dev-eval jobs and
per-sample dev evaluations of each benchmark, reviews whose comparisons are computed from the
records, candidates judged by the controller's own rule
(:func:`~rsilab.controller.acceptance.decide`), the versions it accepted, protocol flags,
findings and a revised skill. Scores follow the task's known truth: a trained quality is
``true_score`` plus seed noise, and a sample is right when its fixed uniform draw falls under
it, as synthetic's ``predict`` answers; so dev scores, reviews and decisions look as a real
campaign's do, and every blob a record names is stored (``rsilab verify`` passes).

What differs from a real run, and why: nothing is executed (jobs are recorded, not run) and
tool calls are written as the dispatcher writes them without passing through it, so 10,000
experiments take a minute or two rather than hours (most of it the store's own work:
canonical JSON and hashing of each record). Each experiment still gets its own
``create_experiment`` and ``finish_experiment`` events naming it; the jobs and dev
evaluations of a batch of experiments share one event. A trained quality is kept to two
decimals, so models and predictions repeat and the blob folder stays small.

This module assembles the campaign. The records are written by :mod:`._dashboard_writer`
(blobs, scores, jobs, events), :mod:`._dashboard_controller` (baseline, candidates,
versions) and :mod:`._dashboard_research` (directions, experiments, proposals), which uses
:mod:`._dashboard_runs` (an experiment's jobs) and :mod:`._dashboard_evidence` (reviews,
conclusions, findings).
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np

from benchmarks._dashboard_controller import _Controller
from benchmarks._dashboard_research import WORKERS, _Research
from benchmarks._dashboard_writer import _Writer
from rsilab.memory.builtin_skills import (
    VERIFY_SKILL,
    VERIFY_TEXT,
    ensure_builtin_skills,
    verify_code,
)
from rsilab.memory.revisions import revise_skill
from rsilab.records import Campaign, CampaignState, Role
from rsilab.store.lab import Lab
from rsilab.tasks import get_task


def generate_lab(
    root: Path,
    experiments: int = 10_000,
    *,
    directions: int = 120,
    samples: int = 40,
    seed: int = 0,
) -> str:
    """Create a new lab at ``root`` holding one finished campaign on ``synthetic``; its id.

    The campaign has ``experiments`` experiments over ``directions`` directions (the newest
    few without any); each succeeded experiment has a dev evaluation of ``samples`` samples
    per benchmark. The lineage ``synthetic/main`` holds the baseline and the versions the
    controller's rule accepted. The same arguments give the same records, ids and times
    aside. The lab's key goes where ``RSILAB_KEY_DIR`` says, as for any lab. Prints how long
    it took.

    Raises:
        LabError: a lab exists at ``root`` already, or it cannot be written.
        ValueError: ``experiments`` or ``directions`` is below 1, or ``samples`` below 2.
    """
    if experiments < 1 or directions < 1 or samples < 2:
        raise ValueError("a lab needs an experiment, a direction and two samples at least")
    started = time.perf_counter()
    task = get_task("synthetic")
    with Lab.init(root) as lab:
        w = _Writer(lab, task, np.random.default_rng(seed), samples)
        campaign_id = _campaign(w, experiments, directions, seed)
    took = time.perf_counter() - started
    print(f"generated a lab of {experiments} experiments at {root} in {took:.1f} s")
    return campaign_id


def _campaign(w: _Writer, experiments: int, directions: int, seed: int) -> str:
    """Write the baseline, then the campaign from start to finish; its id."""
    controller = _Controller(w)
    controller.baseline()
    ensure_builtin_skills(w.store)
    budget = f"experiments={experiments},wall=72h,tokens=1000000"
    settings = {"agents": "builtin", "budget": budget, "seed": seed, "workers": WORKERS}
    campaign = Campaign(task=w.task.ref(), settings=settings)
    w.campaign_id = campaign.id
    w.commit("campaign_created", [campaign], actor="orchestrator", detail="task synthetic")
    _Research(w, controller, experiments, directions).run()
    reason = "campaign review: re-runs on two seeds let false gains through"
    revise_skill(
        w.store,
        VERIFY_SKILL,
        VERIFY_TEXT,
        verify_code(3),
        actor="orchestrator",
        role=Role.CONTROLLER,
        reason=reason,
    )
    done = campaign.model_copy(update={"state": CampaignState.FINISHED})
    w.commit("campaign_finished", [done], actor="orchestrator", detail="budget spent")
    return campaign.id
