"""Chaos: a campaign killed at named fault points and at random times, resumed each time.

One suite (see ``benchmarks/__main__.py``), :func:`run_chaos_table`; the runs themselves are
:mod:`benchmarks.chaos`. Each chaos run is kept, with its seed and the commit it measured, in
``benchmarks/results/chaos/runs.jsonl``; ``--from-kept`` makes the table from the last ones.
"""

from __future__ import annotations

import tempfile
from collections import Counter
from dataclasses import asdict
from pathlib import Path
from typing import Any

from benchmarks import current_commit, key_dir_at
from benchmarks import kept as kept_results
from benchmarks.chaos.counts import Counts, count
from benchmarks.chaos.driver import NAMED, ChaosPlan, Run, run_chaos, thaw_frozen
from benchmarks.kept import RESULTS, JsonLines
from rsilab.sandbox._workspaces import unmount_all_under

KEPT = JsonLines(RESULTS / "chaos" / "runs.jsonl")
"""Every chaos run's plan, kills and counts (see :mod:`benchmarks.kept`)."""
SIZES = {True: (16, [0]), False: (30, [0, 1, 2])}
"""(experiments in the campaign, the seeds of its chaos runs) for quick and full runs."""
RANDOM_KILLS = 20


def measure(root: Path, plan: ChaosPlan) -> dict[str, Any]:
    """One chaos run and its unkilled reference (same size and seed), as a kept line."""
    with key_dir_at(root / "keys"):
        reference = run_chaos(
            root / "reference", ChaosPlan(plan.experiments, 0, plan.seed, named=())
        )
        ref_counts = count(reference)
        chaos = run_chaos(root / "chaos", plan)
        try:
            counts = count(chaos, reference_failed=ref_counts.failed_experiments)
        finally:  # count thaws the frozen leftovers it found; this, if counting failed
            thaw_frozen(chaos)
    return {
        "commit": current_commit(),
        "plan": asdict(plan),
        "named": list(chaos.named),
        "kill_window": plan.kill_window(),
        "seconds": round(chaos.seconds, 1),
        "runs": [_run_json(r) for r in chaos.runs],
        "counts": _counts_json(counts),
        "reference": {
            "seconds": round(reference.seconds, 1),
            "runs": [_run_json(r) for r in reference.runs],
            "counts": _counts_json(ref_counts),
        },
    }


def _run_json(run: Run) -> dict[str, Any]:
    return {
        "index": run.index,
        "fault": run.fault,
        "random_kill": run.random_kill,
        "outcome": run.outcome,
        "returncode": run.returncode,
        "seconds": round(run.seconds, 1),
        "events": run.events,
        "where": run.where(),
        "event": run.snapshot.head if run.snapshot else None,
        "action": run.snapshot.last_action if run.snapshot else "",
        "landed": landed(run),
        "leftovers": run.leftovers,
        "log_tail": "" if run.killed or run.returncode == 0 else run.log_tail,
    }


def _counts_json(counts: Counts) -> dict[str, Any]:
    return {
        "measures": {c.name: c.found for c in counts.measures()},
        "by_design": counts.candidates_rejected_by_design.found,
        "verify_deep_exit": counts.verify_deep_exit,
        "experiments": counts.experiments,
        "failed_experiments": counts.failed_experiments,
    }


def landed(run: Run) -> str:
    """What a kill interrupted, in a few words, from what it left open."""
    snap = run.snapshot
    if snap is None:
        return ""
    open_ = " ".join(snap.in_flight)
    if "candidate" in open_:
        return "judging a candidate"
    if "controller-" in open_:
        return "a controller job (baseline)"
    if "job " in open_:
        return "a worker's job"
    if "experiment " in open_ or "intent exp:" in open_:
        return "an experiment, between jobs"
    return "between experiments (planning, review, recovery)"


def chaos_rows(results: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The table of one or more kept chaos runs (their counts summed)."""
    runs = [r for result in results for r in result["runs"]]
    seeds = ", ".join(str(r["plan"]["seed"]) for r in results)
    named = Counter(r["outcome"].removeprefix("fault:") for r in runs if "fault:" in r["outcome"])
    points = list(dict.fromkeys(p for r in results for p in r.get("named", NAMED)))
    randoms = [r for r in runs if r["outcome"] == "random"]
    planned = sum(r["plan"]["random_kills"] for r in results)
    rows = [
        {
            "measure": "named fault points hit",
            "count": f"{sum(1 for p in points if named[p])}/{len(points)}",
            "target": f"{len(points)}/{len(points)}",
            "detail": "; ".join(
                f"{r['fault']} at event {r['event']} ({r['action']}): {r['landed']}"
                for r in runs
                if "fault:" in r["outcome"]
            ),
        },
        {
            "measure": "random kills (SIGKILL after a drawn number of events and delay)",
            "count": f"{len(randoms)}/{planned}",
            "target": f"{planned}/{planned}",
            "detail": f"seed{'s' if len(results) > 1 else ''} {seeds}; landed in: "
            + ", ".join(f"{k} {n}" for k, n in Counter(r["landed"] for r in randoms).most_common()),
        },
    ]
    fallback = [r for r in runs if r["outcome"] == "fallback"]
    if fallback:
        rows.append(
            {
                "measure": "fallback kills (a named point not reached in its run: armed again)",
                "count": str(len(fallback)),
                "detail": "; ".join(f"{r['fault']}: {r['landed']}" for r in fallback),
            }
        )
    rows += _measure_rows(results)
    designed = [f for r in results for f in r["counts"].get("by_design", [])]
    rows.append(
        {
            "measure": "candidates rejected after two kills in one judgement (by design: "
            "recovery re-judges once)",
            "count": str(len(designed)),
            "target": "-",
            "detail": "; ".join(designed[:3]).replace("|", "/"),
        }
    )
    deep = [r["counts"]["verify_deep_exit"] for r in results]
    rows.append(
        {
            "measure": "`rsilab verify --deep` exit code",
            "count": max(deep, key=abs),
            "target": "0",
            "detail": ", ".join(map(str, deep)),
        }
    )
    rows.append(_runs_row(results))
    return rows


def _measure_rows(results: list[dict[str, Any]]) -> list[dict[str, Any]]:
    rows = []
    for name in results[0]["counts"]["measures"]:
        found = [f for r in results for f in r["counts"]["measures"][name]]
        reference = [f for r in results for f in r["reference"]["counts"]["measures"][name]]
        detail = "; ".join(found[:4]) + (f"; ... {len(found) - 4} more" if len(found) > 4 else "")
        if name.startswith("experiments failed"):
            failed = sum(r["counts"]["failed_experiments"] for r in results)
            ref = sum(r["reference"]["counts"]["failed_experiments"] for r in results)
            detail = f"failed experiments: {failed} in the killed run, {ref} unkilled. {detail}"
        elif reference:
            detail += f" (the unkilled reference run: {len(reference)}: {'; '.join(reference[:2])})"
        detail = detail.strip().replace("|", "/")  # a markdown table cell
        rows.append({"measure": name, "count": len(found), "target": "0", "detail": detail})
    return rows


def _runs_row(results: list[dict[str, Any]]) -> dict[str, Any]:
    runs = sum(len(r["runs"]) for r in results)
    seconds = sum(r["seconds"] for r in results)
    ref_s = sum(r["reference"]["seconds"] for r in results)
    experiments = sum(r["counts"]["experiments"] for r in results)
    plan = results[0]["plan"]
    return {
        "measure": "(the runs)",
        "count": f"{runs} runs",
        "detail": f"{len(results)} campaign(s) of {plan['experiments']} experiments on synthetic, "
        f"{plan['workers']} Workers ({experiments} experiments in all); {seconds:.0f} s killed and "
        f"resumed vs {ref_s:.0f} s unkilled; random kills after 1-{results[0]['kill_window']} "
        f"events + 0-{plan['max_delay_s']} s; measured at "
        + ", ".join(sorted({r["commit"] for r in results})),
    }


def run_chaos_table(quick: bool) -> list[dict[str, Any]]:
    """Chaos: a campaign killed at named fault points and at random, resumed each time.

    `rsilab run synthetic --workers 2 --budget experiments=16` (full: 30, three campaigns)
    in a fresh lab, as a subprocess, then `rsilab resume latest` after every kill until a run
    ends on its own. First the named fault points (`rsilab.faults`, through `RSILAB_FAULT`),
    one per run: `baseline_seed:2` (the baseline's second seed starting, in the first run),
    `workspace_made:1` (a Worker's workspace filesystem made and mounted, its files not yet
    copied in), `commit:k` (inside a store transaction, records written, ledger event not),
    `artifact_write:k` (a blob written to its temporary file, not yet renamed) and
    `job_frozen:k` (a job's tree frozen in its cgroup to be killed, not yet killed and
    thawed), k drawn; then 20 random SIGKILLs, each after a drawn number of the run's ledger
    events and a drawn delay (the seed is the campaign's; where each landed is kept), with
    `controller_predict:n` (a candidate's predict job just recorded running) armed until it
    is hit, n past the predict jobs of re-judging what the last kill left open. Every run runs
    under a child subreaper, so whatever a killed run left running is found however it
    detached (and a process frozen in its cgroup is left so, as it would be, until the
    counting is done); its temporary folder is its own (`TMPDIR`).

    Counted at the end: *records lost*, every record a killed run had committed (by id),
    every record finished then (by its stored bytes) and the ledger up to its head then (by
    hash), gone or changed at the end; *counted twice*, `exp:` intents done other than once
    each for 1..N, an experiment delivered by two intents, or one charged to the budget (not
    cancelled) that no intent delivered; *failed because of the kills*, failed experiments
    beyond those of an unkilled run of the same size and seed; *candidates lost*, invalid,
    or rejected as interrupted twice though fewer than two kills landed in their judging
    (with two, recovery's rule, re-judge once, rejects them by design: its own row); *stale
    states*, a campaign not finished, experiments, jobs, candidates or intents left open;
    *leftover processes*, what a run left alive half a second after it died; *leftover
    temporary folders and mounts*, anything in the runs' temporary folder, owner-named
    folders of their pids in /tmp, files in the lab's `tmp` and `sandbox` folders, job
    cgroups of their pids, mounts and loop devices under the run's folder, after the last run
    (each named with the first kill after which it was there); the ledger's verification
    after each kill, and `rsilab verify --deep` at the end. Target: all 0. Each kept run
    (`benchmarks/results/chaos/runs.jsonl`) names what it found.
    """
    experiments, seeds = SIZES[quick]
    size = "quick" if quick else "full"
    if kept_results.RUN_NOTHING_NEW:
        kept = [d for _, d in KEPT.read() if d.get("size") == size]
        results = kept[-len(seeds) :]
    else:
        results = []
        for seed in seeds:
            plan = ChaosPlan(experiments, RANDOM_KILLS, seed)
            with tempfile.TemporaryDirectory(prefix="rsilab-bench-chaos-") as tmp:
                try:
                    result = {"size": size, **measure(Path(tmp), plan)}
                finally:  # a mount found left over must not take the deletion inside it
                    unmount_all_under(Path(tmp))
            KEPT.append(result)
            results.append(result)
    if not results:
        return [{"measure": "nothing kept", "detail": f"run without --from-kept ({size})"}]
    return chaos_rows(results)
