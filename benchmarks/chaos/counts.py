"""What a chaos run's kills cost, counted from the records and the host; all should be 0.

Each count lists what it found (``found``), so a number that is not 0 comes with the ids, pids
or paths to look at.
"""

from __future__ import annotations

import hashlib
import sqlite3
import subprocess
from collections import Counter
from contextlib import closing
from dataclasses import dataclass, field
from pathlib import Path

from benchmarks.chaos.driver import ChaosRun, rsilab, rsilab_env, thaw_frozen
from rsilab.controller.recovery import INTERRUPTED_TWICE
from rsilab.records import (
    Campaign,
    CampaignState,
    Candidate,
    CandidateState,
    Experiment,
    ExperimentState,
    Intent,
    IntentState,
    Job,
)
from rsilab.sandbox.owners import owner_of
from rsilab.store import Lab, Store


@dataclass
class Count:
    """One measure: how many, and what."""

    name: str
    found: list[str] = field(default_factory=list)

    @property
    def n(self) -> int:
        return len(self.found)


@dataclass
class Counts:
    """Every measure of one chaos run (or of an unkilled reference run)."""

    records_lost: Count
    counted_twice: Count
    failed_by_kills: Count
    candidates_lost: Count
    candidates_rejected_by_design: Count
    stale: Count
    leftover_processes: Count
    leftover_temp: Count
    verify_after_kill: Count
    verify_deep_exit: int
    experiments: int
    failed_experiments: int

    def measures(self) -> list[Count]:
        return [
            self.records_lost,
            self.counted_twice,
            self.failed_by_kills,
            self.candidates_lost,
            self.stale,
            self.leftover_processes,
            self.leftover_temp,
            self.verify_after_kill,
        ]


def records_lost(chaos: ChaosRun) -> Count:
    """Records a killed run had committed that are gone or changed at the end: every record
    then (by id), every record finished then (by its stored body), the ledger up to its head
    then (by the event hash there)."""
    count = Count("records lost")
    with closing(sqlite3.connect(chaos.lab / "lab.db")) as conn:
        bodies = {
            str(i): hashlib.sha256(str(b).encode()).hexdigest()
            for i, b in conn.execute("SELECT id, body FROM records")
        }
        hashes = {int(s): str(h) for s, h in conn.execute("SELECT seq, hash FROM events")}
    for run in chaos.kills():
        snap = run.snapshot
        assert snap is not None
        if hashes.get(snap.head) != snap.head_hash:
            count.found.append(f"run {run.index}: ledger event {snap.head} rewritten or gone")
        count.found += [f"run {run.index}: {i} gone" for i in snap.revs if i not in bodies]
        count.found += [
            f"run {run.index}: finished {i} changed"
            for i, digest in snap.finished.items()
            if i in bodies and bodies[i] != digest
        ]
    return count


def counted_twice(store: Store, campaign_id: str, budget: int) -> Count:
    """Experiments the budget counted beyond the distinct experiments delivered: the budget's
    ``exp:`` intents not done exactly once each (``exp:1`` to ``exp:N``), an experiment
    delivered by two intents, or an experiment charged to the budget (any not cancelled, as
    ``create_experiment`` counts them) that no done intent delivered."""
    count = Count("experiments counted twice against the budget")
    intents = [
        i for i in store.query_as(Intent, campaign_id=campaign_id) if i.key.startswith("exp:")
    ]
    done = Counter(i.key for i in intents if i.state is IntentState.DONE)
    expected = {f"exp:{n}" for n in range(1, budget + 1)}
    count.found += [f"{key} done {n} times" for key, n in done.items() if n > 1]
    count.found += [f"{key} done beyond the budget" for key in done if key not in expected]
    delivered = Counter(
        str((i.result or {}).get("experiment_id")) for i in intents if i.state is IntentState.DONE
    )
    count.found += [f"{e} delivered by {n} intents" for e, n in delivered.items() if n > 1]
    experiments = store.query_as(Experiment, campaign_id=campaign_id)
    charged = [e for e in experiments if e.state is not ExperimentState.CANCELLED]
    count.found += [f"{e.id} charged, delivered by none" for e in charged if e.id not in delivered]
    return count


def failed_by_kills(store: Store, campaign_id: str, reference_failed: int) -> Count:
    """Experiments failed beyond what the unkilled reference run failed."""
    count = Count("experiments failed because of the kills")
    failed = [
        e
        for e in store.query_as(Experiment, campaign_id=campaign_id)
        if e.state is ExperimentState.FAILED
    ]
    count.found += [f"{e.id} failed: {e.summary_text[:120]}" for e in failed[reference_failed:]]
    return count


def candidates_lost(chaos: ChaosRun, store: Store, campaign_id: str) -> tuple[Count, Count]:
    """(candidates lost to the kills, candidates rejected by design).

    Recovery re-judges a candidate whose judging was killed once; killed again, it is
    rejected ("interrupted twice"). Such a rejection is by design when at least two kills
    landed while that candidate was being judged (the kills' snapshots show it open), and a
    loss otherwise; an invalid candidate is a loss too."""
    lost = Count("candidates lost to the kills")
    designed = Count("candidates rejected after two kills in one judgement (by design)")
    for cand in store.query_as(Candidate, campaign_id=campaign_id):
        kills = [
            run.index
            for run in chaos.kills()
            if run.snapshot is not None
            and any(s.startswith(f"candidate {cand.id} ") for s in run.snapshot.in_flight)
        ]
        line = f"{cand.id} {cand.state} (killed in runs {kills}): {cand.reason[:100]}"
        if INTERRUPTED_TWICE in cand.reason and len(kills) >= 2:
            designed.found.append(line)
        elif cand.state is CandidateState.INVALID or INTERRUPTED_TWICE in cand.reason:
            lost.found.append(line)
    return lost, designed


def stale_states(store: Store) -> Count:
    """Anything of the lab left unfinished: the campaign not finished, experiments, jobs,
    candidates or intents still open."""
    count = Count("stale running/evaluating states")
    for camp in store.query_as(Campaign):
        if camp.state is not CampaignState.FINISHED:
            count.found.append(f"{camp.id} {camp.state}")
    for kind in (Experiment, Job, Candidate, Intent):
        for record in store.query_as(kind):
            if not record.is_finished():
                state = getattr(record, "status", None) or getattr(record, "state", "")
                count.found.append(f"{record.id} {state}")
    return count


def leftover_temp(chaos: ChaosRun) -> list[str]:
    """Temporary files and folders, mounts and loop devices the runs left: anything in the
    runs' own temporary folder, owner-named folders of the runs' pids in the system's, files
    in the lab's ``tmp`` and ``sandbox`` folders, job cgroups of the runs' pids, mounts and
    loop devices under the root."""
    found = [f"{p}" for p in sorted(chaos.tmp.iterdir())]
    pids = {r.pid for r in chaos.runs}
    for path in sorted(Path("/tmp").iterdir()):
        owner = owner_of(path.name)
        if owner is not None and owner.pid in pids:
            found.append(str(path))
    for folder in ("tmp", "sandbox"):
        place = chaos.lab / folder
        found += [str(p) for p in sorted(place.iterdir())] if place.is_dir() else []
    root = str(chaos.root.resolve())
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        point = line.split()[4]
        if point.startswith(root):
            found.append(f"mount at {point}")
    for pid in sorted(pids):  # job cgroups of a dead run (rsilab-job-<pid>-<n>-<hex>)
        found += [str(g) for g in sorted(Path("/sys/fs/cgroup").glob(f"*/rsilab-job-{pid}-*"))]
    for backing in sorted(Path("/sys/block").glob("loop*/loop/backing_file")):
        text = backing.read_text().strip()
        if text.startswith(root):
            found.append(f"{backing.parts[3]} backed by {text}")
    return found


def _attributed(chaos: ChaosRun) -> list[str]:
    """:func:`leftover_temp`, each named with the first kill after which it was there."""
    first: dict[str, str] = {}
    for run in chaos.kills():
        assert run.snapshot is not None
        for path in run.snapshot.temporary:
            first.setdefault(path, f"run {run.index}, {run.outcome}")
    root = str(chaos.root) + "/"
    return [
        f"{p.removeprefix(root)} (since {first[p]})" if p in first else p.removeprefix(root)
        for p in leftover_temp(chaos)
    ]


def verify_deep(chaos: ChaosRun) -> int:
    """``rsilab verify --deep``'s exit code on the lab."""
    done = subprocess.run(
        rsilab("verify", "--deep", "--lab", str(chaos.lab)),
        env=rsilab_env(chaos),
        capture_output=True,
    )
    return done.returncode


def count(chaos: ChaosRun, reference_failed: int = 0) -> Counts:
    """Every measure of ``chaos`` once its last run has ended."""
    processes = Count("leftover processes")
    for run in chaos.runs:
        processes.found += [
            f"run {run.index}: pid {p['pid']} {p.get('state', '')}"
            + (
                f" frozen in its cgroup ({p['frozen']}), unkillable"
                if p.get("frozen")
                else f", outlived the kill by {p.get('survived_s', '?')} s"
            )
            + f": {p['cmdline'][:100]}"
            for p in run.leftovers
            if not p.get("frozen") or Path(f"/proc/{p['pid']}").exists()
        ]  # a frozen job a later resume killed (rsilab thaws dead runs' job groups) is gone
    verify_kills = Count("kills after which the ledger did not verify")
    for run in chaos.kills():
        assert run.snapshot is not None
        verify_kills.found += [f"run {run.index}: {p}" for p in run.snapshot.verify_problems]
    lost = records_lost(chaos)
    with Lab.open(chaos.lab) as lab:
        store = lab.store
        [campaign] = store.query_as(Campaign)
        experiments = store.query_as(Experiment, campaign_id=campaign.id)
        lost_candidates, designed = candidates_lost(chaos, store, campaign.id)
        counts = Counts(
            records_lost=lost,
            counted_twice=counted_twice(store, campaign.id, chaos.plan.experiments),
            failed_by_kills=failed_by_kills(store, campaign.id, reference_failed),
            candidates_lost=lost_candidates,
            candidates_rejected_by_design=designed,
            stale=stale_states(store),
            leftover_processes=processes,
            leftover_temp=Count("leftover temporary folders and mounts", _attributed(chaos)),
            verify_after_kill=verify_kills,
            verify_deep_exit=0,
            experiments=sum(e.state is not ExperimentState.CANCELLED for e in experiments),
            failed_experiments=sum(e.state is ExperimentState.FAILED for e in experiments),
        )
    counts.verify_deep_exit = verify_deep(chaos)
    stuck = thaw_frozen(chaos)
    processes.found += [f"pid {pid} still there after its cgroup was thawed" for pid in stuck]
    return counts
