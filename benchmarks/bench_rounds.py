"""Self and Teacher rounds on the built-in `policy` task: the improver's own score each round.

`policy`'s system *is* an improver: the built-in research policy's configuration, packaged as a
harness whose ``improve`` command runs a campaign (inside the sandbox, reaching rsilab only
over MCP with a Worker's tools). Its target benchmark is how well that configuration searches
generated ``synthetic`` task families; ``transfer`` is the same on families held out
entirely. Each evolution is ``rsilab evolve policy --rounds R`` in a fresh lab (its split
fixed per task, as the search tables' are), one per (improver, seed):

- *self*: the head each round starts from is the round's improver, so an accepted version
  improves the next round's improving;
- *teacher*: the starting configuration improves every round, frozen, with the same compute.

Every number is a final-tier (private) score the controller measured. The finished
evolutions are kept in ``benchmarks/results/rounds/policy.jsonl``; a later run does only the
missing ones.
"""

from __future__ import annotations

import dataclasses
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks import current_commit
from benchmarks import kept as kept_results
from benchmarks.kept import RESULTS, JsonLines
from benchmarks.search.protocol import split_id, split_secret
from benchmarks.search.report import mean_ci, paired
from rsilab.mcp.improver import improver_runner
from rsilab.orchestrator.report import build_evolution_report
from rsilab.orchestrator.rounds import run_rounds
from rsilab.store import Lab
from rsilab.tasks import SECRET_FILE, get_task

TASK = "policy"
IMPROVERS = ("self", "teacher")
PLAN = {True: (2, 2), False: (5, 3)}
"""(seeds, rounds) of a quick and of a full run (the suite is full-only: see __main__)."""


@dataclass
class Evolved:
    """One evolution's numbers: index r is round r (0: the start)."""

    improver: str
    seed: int
    rounds: int
    target: list[float]
    """Final-tier target score of the lineage head after each round."""
    transfer: list[float | None]
    """Final-tier score on the held-out families ('transfer'), where measured."""
    improver_score: list[float | None]
    """Per round from 1: the final-tier target score of the version that acted as improver."""
    accepted: list[bool]
    """Per round from 1: whether it moved the head."""
    seconds: float
    commit: str = ""
    split: str = ""
    evolution_state: str = ""


def _quiet(fd: int, chunk: bytes) -> None:
    """The improver's own output is not needed here (its records are)."""


def evolve_once(improver: str, seed: int, rounds: int) -> Evolved:
    """Run one evolution of ``policy`` in a fresh lab and read its round report."""
    task = get_task(TASK)
    target = task.targets[0].name
    secret = split_secret(TASK)
    with tempfile.TemporaryDirectory(prefix="rsilab-bench-rounds-") as tmp:
        lab = Lab.init(Path(tmp) / "lab")
        (lab.path / SECRET_FILE).write_text(secret.hex())
        (lab.path / SECRET_FILE).chmod(0o600)
        try:
            wall = time.perf_counter()
            result = run_rounds(
                lab,
                task,
                rounds=rounds,
                improver=improver,
                budget=task.budget,
                seed=1000 * seed,
                run_improver=improver_runner(_quiet),
            )
            seconds = time.perf_counter() - wall
            report = build_evolution_report(lab.store, result.evolution_id)
        finally:
            lab.close()
    rows = sorted(report.rows, key=lambda r: r.round)
    own = {i.round: i for i in report.improvers}
    return Evolved(
        improver=improver,
        seed=seed,
        rounds=rounds,
        target=[r.scores[target].value for r in rows],
        transfer=[r.scores["transfer"].value if "transfer" in r.scores else None for r in rows],
        improver_score=[
            own[r].scores[target].value if r in own and target in own[r].scores else None
            for r in range(1, len(rows))
        ],
        accepted=[bool(r.accepted) for r in rows[1:]],
        seconds=seconds,
        commit=current_commit(),
        split=split_id(secret),
        evolution_state=result.state,
    )


def _kept_file() -> JsonLines:
    return JsonLines(RESULTS / "rounds" / f"{TASK}.jsonl")


def _load(kept: JsonLines, rounds: int) -> dict[tuple[str, int], Evolved]:
    split = split_id(split_secret(TASK))
    return {
        (run.improver, run.seed): run
        for run in kept.read_as(Evolved)
        if run.rounds == rounds and run.split == split
    }


def evolutions(quick: bool) -> list[Evolved]:
    """Every (improver, seed) evolution of the plan: kept ones read back (full runs), the
    others run now (and kept, in a full run)."""
    seeds, rounds = PLAN[quick]
    kept = _kept_file()
    done = {} if quick else _load(kept, rounds)
    out = []
    for seed in range(1, seeds + 1):
        for improver in IMPROVERS:
            if (improver, seed) in done:
                out.append(done[(improver, seed)])
                continue
            if kept_results.RUN_NOTHING_NEW:
                continue
            run = evolve_once(improver, seed, rounds)
            if not quick:
                kept.append(dataclasses.asdict(run))
            out.append(run)
    return out


def round_rows(runs: list[Evolved], seeds: int, rounds: int) -> list[dict[str, Any]]:
    """Per improver and round: mean final-tier scores over seeds, change against the start,
    versions accepted, the improver's own score; and self - teacher at each round."""
    rows: list[dict[str, Any]] = []
    for improver in IMPROVERS:
        mine = [r for r in runs if r.improver == improver]
        for k in range(rounds + 1):
            have = [r for r in mine if len(r.target) > k]
            if not have:
                continue
            transfer = [t for r in have if (t := r.transfer[k]) is not None]
            own = [v for r in have if k >= 1 and (v := r.improver_score[k - 1]) is not None]
            rows.append(
                {
                    "improver": improver,
                    "round": k,
                    "seeds": f"{len(have)} of {seeds}",
                    "search-quality (target) [95% CI]": str(mean_ci([r.target[k] for r in have])),
                    "change vs start": mean_ci([r.target[k] - r.target[0] for r in have]).signed()
                    if k
                    else "-",
                    "transfer": str(mean_ci(transfer)) if transfer else "-",
                    "accepted": f"{sum(r.accepted[k - 1] for r in have)}/{len(have)}" if k else "-",
                    "improver's own score": str(mean_ci(own)) if own else "-",
                    "self - teacher (W/T/L)": _versus(runs, k),
                    "measured at": ", ".join(sorted({r.commit or "-" for r in have})),
                }
            )
    return rows


def _versus(runs: list[Evolved], k: int) -> str:
    by = {
        imp: {r.seed: r.target[k] for r in runs if r.improver == imp and len(r.target) > k}
        for imp in IMPROVERS
    }
    if k == 0:
        return "-"
    found = paired(by["self"], by["teacher"])
    if found is None:
        return "-"
    return f"{found.diff.signed()} ({found.wins}/{found.ties}/{found.losses})"


def run_rounds_table(quick: bool) -> list[dict[str, Any]]:
    """Self and Teacher rounds on policy: each round's final-tier score, and the improver's own

    `rsilab evolve policy --rounds R --improver self|teacher` in a fresh lab per (improver,
    seed), each round under the task's budget (40 experiments of the improver's campaign);
    round r of seed s runs with seed 1000 s + r - 1. *search-quality* is the head's final-tier
    target score after the round (mean over seeds with a t interval); *change vs start* pairs
    each seed with its own round 0; *transfer* is the held-out families; *improver's own
    score* is the final-tier target score of the version that improved in that round (under
    self the head the round started from, under teacher always the start); *self - teacher*
    pairs the two by seed. Full runs keep each evolution in
    `benchmarks/results/rounds/policy.jsonl` and resume.
    """
    seeds, rounds = PLAN[quick]
    return round_rows(evolutions(quick), seeds, rounds)
