"""Drive one chaos run: a campaign in a fresh lab, killed again and again, resumed each time.

The campaign is ``rsilab run synthetic`` in a subprocess; every later run is
``rsilab resume latest``. Each run is started with at most one planned death:

1. the named fault points first, in :data:`NAMED` order, one per run, through
   ``RSILAB_FAULT`` (:mod:`rsilab.faults`): the baseline's second seed (the first run, in a
   fresh lab), a worker's workspace being made, the k-th commit, the k-th artifact write
   and the k-th job tree frozen to be killed of a run (k drawn from the seeded generator);
   a run that does not reach its point soon enough (a point hit only in a race) is killed
   anyway (a *fallback* kill) and the point armed again in the next;
2. then the random kills: SIGKILL once the run has committed a drawn number of ledger events
   (1 to ``events_per_kill``) and a drawn delay more has passed. ``controller_predict`` (a
   candidate's predict job; it exists only once the campaign proposes) stays armed in these
   runs until it is hit, so whichever comes first kills the run;
3. a run that ends without a kill ends the chaos: the campaign is finished (or failed).

After every kill, before the resume, a :class:`Snapshot` keeps what the dead run had
committed, to check at the end that nothing of it was lost.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import time
from contextlib import closing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks.chaos.snapshot import Snapshot, snapshot

NAMED = (
    "baseline_seed",
    "controller_predict",  # right after: the resumed baseline's predict jobs reach it
    "workspace_made",
    "commit",
    "artifact_write",
    "job_frozen",  # last: a race (members must be in the tree when it is frozen)
)
"""The named fault points a chaos run hits, in the order it arms them (those this machine
reaches: :func:`reachable`)."""
FAULT_LINE = "rsilab fault point "
"""How :func:`rsilab.faults.fault_point` announces itself on stderr before SIGKILL."""
GRACE_S = 0.5
"""How long after a run died a process it started still counts as alive by chance, not left."""
RUN_TIMEOUT_S = 600.0
"""A run still going after this long is killed and reported as hung."""
TASK = "synthetic"


@dataclass(frozen=True)
class ChaosPlan:
    """What to run and how to kill it; every draw comes from ``seed``."""

    experiments: int
    random_kills: int
    seed: int
    events_per_kill: int = 0
    """A random kill lands after 1 to this many ledger events of its run; 0: a campaign's
    events (about 25 an experiment, before resumes add theirs) shared among all its kills, so
    the kills fall all along it and leave it some work to finish."""
    max_delay_s: float = 0.25
    """...and then after up to this many seconds more (uniform)."""
    workers: int = 2
    named: tuple[str, ...] | None = None
    """The named points to hit; None: every one of :data:`NAMED` this machine reaches."""

    def kill_window(self) -> int:
        """The most events a random kill waits for (see :attr:`events_per_kill`)."""
        if self.events_per_kill:
            return self.events_per_kill
        kills = max(1, self.random_kills + len(NAMED if self.named is None else self.named))
        return max(8, 25 * self.experiments // kills)

    def fault_spec(self, point: str, rng: random.Random) -> str:
        """``RSILAB_FAULT`` for a run that must die at ``point``."""
        hit = {
            "baseline_seed": 2,
            "commit": rng.randint(1, 40),
            "artifact_write": rng.randint(1, 30),
            "job_frozen": rng.randint(1, 3),  # a tree frozen with members in it: a race
        }.get(point, 1)
        return f"{point}:{hit}"


@dataclass
class Run:
    """One run (``rsilab run`` or ``rsilab resume``) and how it ended."""

    index: int
    fault: str = ""
    """``RSILAB_FAULT`` it ran with."""
    random_kill: str = ""
    """The driver's kill, ``after N events + D s``; empty when none was planned."""
    fallback: bool = False
    """The driver's kill is a fallback: the run was meant to die at its named point, which
    it may not reach (a race), so it dies later and the point is armed again next run."""
    outcome: str = ""
    """``fault:<point>``, ``random``, ``fallback``, ``exit <code>`` or ``hung``."""
    returncode: int = 0
    pid: int = 0
    seconds: float = 0.0
    events: int = 0
    """Ledger events this run committed."""
    leftovers: list[dict[str, Any]] = field(default_factory=list)
    snapshot: Snapshot | None = None
    log_tail: str = ""

    @property
    def killed(self) -> bool:
        return self.outcome in ("random", "fallback") or self.outcome.startswith("fault:")

    def where(self) -> str:
        """Where the kill landed, in words."""
        snap = self.snapshot
        if snap is None:
            return ""
        open_ = "; ".join(s for s in snap.in_flight if not s.startswith("campaign "))
        open_ = open_ or "nothing open"
        return f"event {snap.head} ({snap.last_action}); {open_}"


@dataclass
class ChaosRun:
    """A whole chaos run: its plan, its runs, where its lab is."""

    plan: ChaosPlan
    root: Path
    runs: list[Run] = field(default_factory=list)
    seconds: float = 0.0
    named: tuple[str, ...] = ()
    """The named points this run aimed at."""

    @property
    def lab(self) -> Path:
        return self.root / "lab"

    @property
    def tmp(self) -> Path:
        return self.root / "tmp"

    @property
    def keys(self) -> Path:
        return self.root / "keys"

    def kills(self) -> list[Run]:
        return [r for r in self.runs if r.killed]

    def named_hit(self) -> dict[str, int]:
        """Each named point and how many runs it killed."""
        hits = dict.fromkeys(self.named, 0)
        for run in self.runs:
            point = run.outcome.removeprefix("fault:")
            if run.outcome.startswith("fault:"):
                hits[point] = hits.get(point, 0) + 1
        return hits


def rsilab_env(chaos: ChaosRun, fault: str = "") -> dict[str, str]:
    """The environment of a run: the caller's, with the lab's key folder, a temporary folder
    of the run's own (so leftovers are told from other programs'), and the fault armed."""
    env = {k: v for k, v in os.environ.items() if k not in ("RSILAB_FAULT", "RSILAB_LAB")}
    env |= {"RSILAB_KEY_DIR": str(chaos.keys), "TMPDIR": str(chaos.tmp)}
    if fault:
        env["RSILAB_FAULT"] = fault
    return env


def rsilab(*args: str) -> list[str]:
    """The command line of ``rsilab ARGS`` with this interpreter."""
    return [sys.executable, "-m", "rsilab", *args]


def _head(db: Path) -> tuple[int, str]:
    with closing(sqlite3.connect(db, timeout=30)) as conn:
        row = conn.execute("SELECT seq, body FROM events ORDER BY seq DESC LIMIT 1").fetchone()
    return (0, "") if row is None else (int(row[0]), str(json.loads(row[1]).get("action", "")))


def campaign_finished(lab: Path) -> bool:
    """Whether the lab's (one) campaign is finished."""
    db = lab / "lab.db"
    if not db.exists():
        return False
    with closing(sqlite3.connect(db, timeout=30)) as conn:
        rows = conn.execute("SELECT body FROM records WHERE kind = 'campaign'").fetchall()
    return bool(rows) and all(json.loads(r[0]).get("state") == "finished" for r in rows)


class _Watch:
    """Follows a running lab's ledger head through one read connection."""

    def __init__(self, db: Path) -> None:
        self.conn = sqlite3.connect(db, timeout=30) if db.exists() else None
        self.db = db

    def head(self) -> int:
        if self.conn is None:
            if not self.db.exists():
                return 0
            self.conn = sqlite3.connect(self.db, timeout=30)
        try:
            row = self.conn.execute("SELECT max(seq) FROM events").fetchone()
        except sqlite3.OperationalError:  # the schema is being made, or a lock: try again
            return 0
        return int(row[0] or 0)

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()


def run_once(
    chaos: ChaosRun, run: Run, argv: list[str], kill_after: tuple[int, float] | None
) -> None:
    """Run ``argv`` under the reaper; SIGKILL it ``kill_after`` (events, seconds) into its
    work; fill in how it ended."""
    logs = chaos.root / "logs"
    logs.mkdir(exist_ok=True)
    log, report = logs / f"run-{run.index:02d}.log", logs / f"run-{run.index:02d}.json"
    reaper = [sys.executable, str(Path(__file__).with_name("_reaper.py")), str(report)]
    watch = _Watch(chaos.lab / "lab.db")
    start_head = watch.head()
    started = time.monotonic()
    sent = False
    with log.open("wb") as out:
        child = subprocess.Popen(
            [*reaper, str(GRACE_S), "--", *argv],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=rsilab_env(chaos, run.fault),
        )
        try:
            sent = _follow(child, watch, start_head, kill_after, started)
        finally:
            if child.poll() is None:
                child.send_signal(signal.SIGUSR1)
            child.wait()
            watch.close()
    run.seconds = time.monotonic() - started
    done = json.loads(report.read_text())
    run.pid, run.returncode, run.leftovers = done["pid"], done["returncode"], done["leftovers"]
    text = log.read_text(errors="replace")
    run.log_tail = text[-1500:]
    run.outcome = _outcome(run, text, sent, run.seconds)
    run.events = _head(chaos.lab / "lab.db")[0] - start_head


def _follow(
    child: subprocess.Popen[bytes],
    watch: _Watch,
    start_head: int,
    kill_after: tuple[int, float] | None,
    started: float,
) -> bool:
    """Wait for the run to end, killing it as planned; True when the kill was sent."""
    reached: float | None = None
    while child.poll() is None:
        now = time.monotonic()
        if now - started > RUN_TIMEOUT_S:
            child.send_signal(signal.SIGUSR1)
            child.wait()
            return False
        if (
            kill_after is not None
            and reached is None
            and watch.head() - start_head >= kill_after[0]
        ):
            reached = now
        if reached is not None and kill_after is not None and now - reached >= kill_after[1]:
            child.send_signal(signal.SIGUSR1)
            child.wait()
            return True
        time.sleep(0.005)
    return False


def _outcome(run: Run, log: str, sent: bool, seconds: float) -> str:
    if run.returncode == -signal.SIGKILL:
        for line in log.splitlines():
            if line.startswith(FAULT_LINE):
                return "fault:" + line.removeprefix(FAULT_LINE).split(":")[0]
        if sent:
            return "fallback" if run.fallback else "random"
        return "hung" if seconds > RUN_TIMEOUT_S else "killed by whom?"
    return f"exit {run.returncode}"


def temporary_places(chaos: ChaosRun) -> tuple[Path, ...]:
    """The runs' temporary folder and the lab's ``tmp`` and ``sandbox``."""
    return (chaos.tmp, chaos.lab / "tmp", chaos.lab / "sandbox")


def reachable() -> tuple[str, ...]:
    """The points of :data:`NAMED` this machine reaches: a workspace of its own filesystem
    needs root and loop devices, a job's freezer cgroup needs root and cgroup v1."""
    from rsilab.sandbox import _cgroup, _images

    drop = set()
    if not _images.support().enforced:
        drop.add("workspace_made")
    if not _cgroup.probe().available:
        drop.add("job_frozen")
    return tuple(p for p in NAMED if p not in drop)


def _next_run(chaos: ChaosRun, rng: random.Random, named: list[str], randoms: int) -> Run:
    """The next run's planned death: the next named point, else a random kill (with
    ``controller_predict`` armed too while it is not hit)."""
    run = Run(index=len(chaos.runs) + 1)
    if named and named[0] != "controller_predict":
        run.fault = chaos.plan.fault_spec(named[0], rng)
        run.random_kill, run.fallback = f"after {4 * chaos.plan.kill_window()} events + 0 s", True
        return run
    if "controller_predict" in named:
        # A first judgement's predict: past those of re-judging what the last kill left open
        # (a judgement killed twice is rejected by design; the plan does not force that).
        last = chaos.runs[-1].snapshot if chaos.runs else None
        run.fault = f"controller_predict:{1 + (last.rejudge_predicts if last else 0)}"
    if randoms > 0:
        events = rng.randint(1, chaos.plan.kill_window())
        delay = round(rng.uniform(0.0, chaos.plan.max_delay_s), 3)
        run.random_kill = f"after {events} events + {delay} s"
    return run


def _kill_after(run: Run) -> tuple[int, float] | None:
    if not run.random_kill:
        return None
    events, _, rest = run.random_kill.removeprefix("after ").partition(" events + ")
    return int(events), float(rest.removesuffix(" s"))


def thaw_frozen(chaos: ChaosRun, timeout_s: float = 10.0) -> list[int]:
    """Thaw the cgroups holding the runs' frozen leftovers (SIGKILLed, they then die), wait
    for them to go and remove the runs' empty job cgroups; the pids that did not go. Call it
    after counting, so the host is left clean."""
    frozen = [p for run in chaos.runs for p in run.leftovers if p.get("frozen")]
    for found in frozen:
        with contextlib.suppress(OSError):
            Path(found["frozen"]).write_text(
                "0" if found["frozen"].endswith(".freeze") else "THAWED"
            )
    deadline = time.monotonic() + timeout_s
    alive = [int(p["pid"]) for p in frozen]
    while alive and time.monotonic() < deadline:
        alive = [pid for pid in alive if Path(f"/proc/{pid}").exists()]
        time.sleep(0.05)
    for run in chaos.runs:  # the dead runs' job cgroups, empty now (a live rsilab would too)
        for group in Path("/sys/fs/cgroup").glob(f"*/rsilab-job-{run.pid}-*"):
            with contextlib.suppress(OSError):
                group.rmdir()
    return alive


def _argv(chaos: ChaosRun) -> list[str]:
    """``rsilab run`` for the first run, ``rsilab resume latest`` after."""
    plan = chaos.plan
    if chaos.runs:
        argv = rsilab("resume", "latest", "--workers", str(plan.workers))
    else:
        budget = f"experiments={plan.experiments}"
        argv = rsilab("run", TASK, "--budget", budget, "--workers", str(plan.workers))
        argv += ["--seed", str(plan.seed)]
    argv += ["--lab", str(chaos.lab)]
    return argv + (["--unbounded-disk"] if os.geteuid() else [])


def _kill_and_resume(chaos: ChaosRun, max_errors: int) -> None:
    rng = random.Random(chaos.plan.seed)
    named, randoms, errors = list(chaos.named), chaos.plan.random_kills, 0
    while not campaign_finished(chaos.lab) and errors < max_errors:
        run = _next_run(chaos, rng, named, randoms)
        run_once(chaos, run, _argv(chaos), _kill_after(run))
        chaos.runs.append(run)
        if not run.killed:
            errors += 1
            continue
        run.snapshot = snapshot(chaos.lab, chaos.keys, temporary_places(chaos))
        errors = 0
        point = run.outcome.removeprefix("fault:")
        if point in named:
            named.remove(point)
        if run.outcome == "random":
            randoms -= 1


def run_chaos(root: Path, plan: ChaosPlan, *, max_errors: int = 3) -> ChaosRun:
    """A fresh lab under ``root``, the campaign run and killed as ``plan`` says, resumed after
    each kill until a run ends with the campaign finished; a run that ends otherwise is
    resumed too, up to ``max_errors`` in a row."""
    chaos = ChaosRun(plan, root)
    for folder in (chaos.tmp, chaos.keys):
        folder.mkdir(parents=True, exist_ok=True)
    init = subprocess.run(
        rsilab("init", "--lab", str(chaos.lab)), env=rsilab_env(chaos), capture_output=True
    )
    if init.returncode != 0:
        raise RuntimeError(f"rsilab init failed: {init.stderr.decode(errors='replace')}")
    chaos.named = plan.named if plan.named is not None else reachable()
    started = time.monotonic()
    try:
        _kill_and_resume(chaos, max_errors)
    except BaseException:
        thaw_frozen(chaos)  # no counting will follow: leave the host clean
        raise
    chaos.seconds = time.monotonic() - started
    return chaos
