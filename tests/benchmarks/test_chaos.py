"""The chaos run, small: a campaign killed at every named fault point and at random, resumed
each time, loses nothing, repeats nothing and leaves nothing behind.

Also: the measures themselves can fail (each is shown a leftover or a loss planted by hand),
and the table renders a kept run.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from benchmarks.bench_chaos import chaos_rows
from benchmarks.chaos.counts import (
    Counts,
    candidates_lost,
    count,
    counted_twice,
    leftover_temp,
    records_lost,
    stale_states,
)
from benchmarks.chaos.driver import NAMED, ChaosPlan, ChaosRun, Run, run_chaos
from benchmarks.chaos.snapshot import Snapshot

from rsilab.controller.recovery import INTERRUPTED_TWICE
from rsilab.records import (
    Campaign,
    Candidate,
    CandidateState,
    EventDraft,
    Experiment,
    ExperimentState,
    Intent,
    IntentState,
)
from rsilab.store import Lab
from tests.orchestrator.runner_checks import check_campaign

EXPERIMENTS = 8
RELIABLE = ("baseline_seed", "controller_predict", "workspace_made", "commit", "artifact_write")
"""The named points a small run reaches every time; ``job_frozen`` is a race (the job's tree
must have members when it is frozen), so the benchmark's full run arms it, not this one."""
REAPER = Path(__file__).parents[2] / "benchmarks" / "chaos" / "_reaper.py"


@pytest.fixture(scope="module")
def killed(tmp_path_factory: pytest.TempPathFactory) -> tuple[ChaosRun, Counts]:
    """One small chaos run (the reliable named points, 2 random kills), counted."""
    plan = ChaosPlan(EXPERIMENTS, random_kills=2, seed=21, named=RELIABLE)
    chaos = run_chaos(tmp_path_factory.mktemp("chaos"), plan)
    return chaos, count(chaos)


def _story(chaos: ChaosRun) -> str:
    return "\n".join(f"{r.index} {r.fault} {r.random_kill} -> {r.outcome}" for r in chaos.runs)


def test_every_named_point_and_each_random_kill_killed_a_run(
    killed: tuple[ChaosRun, Counts],
) -> None:
    chaos, _ = killed
    assert chaos.named_hit() == dict.fromkeys(chaos.named, 1), _story(chaos)
    if os.geteuid() == 0:  # workspaces of their own and job cgroups need root
        assert chaos.named == RELIABLE and set(RELIABLE) < set(NAMED)
    assert sum(r.outcome == "random" for r in chaos.runs) == 2, _story(chaos)
    assert chaos.runs[-1].returncode == 0, chaos.runs[-1].log_tail


def test_the_resumed_campaign_is_whole(
    killed: tuple[ChaosRun, Counts], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Nothing lost, nothing counted twice, nothing failed or left open, the ledger sound."""
    chaos, counts = killed
    host = (counts.leftover_processes.name, counts.leftover_temp.name)  # asserted below
    found = {c.name: c.found for c in counts.measures() if c.found and c.name not in host}
    assert found == {}, f"{_story(chaos)}\n{json.dumps(found, indent=1)}"
    assert counts.verify_deep_exit == 0
    monkeypatch.setenv("RSILAB_KEY_DIR", str(chaos.keys))
    with Lab.open(chaos.lab) as lab:
        [campaign] = lab.store.query_as(Campaign)
        check_campaign(lab.store, campaign.id, EXPERIMENTS)


FROZEN = (
    "issue 21: a kill while a job's tree is frozen (JobCgroup.kill_all: freeze, SIGKILL, thaw) "
    "leaves the job's processes frozen for good, unkillable, holding its cgroups and mounts"
)
UNNAMED = (
    "issue 21: a kill during an artifact write leaves <lab>/tmp/in-* (never swept), and one "
    "in snapshot_workspace, prepare or the guard leaves rsilab-snapshot-*, rsilab-prepare-*, "
    "rsilab-guard-* folders not named by their owner (so never swept)"
)
DETACHED = (
    "found at stop 29: a kill while a job's workspace disk image is attached can leave its loop "
    "device (backed by the deleted image), the image's mount and the job's cgroup, with no "
    "process left (never swept by resume)"
)
_DELETED_IMAGE = re.compile(r"^loop\d+ backed by .*\.img \(deleted\)")
_KNOWN_TEMP = re.compile(r"^(lab/tmp/in-|tmp/rsilab-(snapshot|prepare|guard|guard-head)-[^-@]+ )")


def test_the_kills_leave_no_process(killed: tuple[ChaosRun, Counts]) -> None:
    chaos, counts = killed
    frozen = [f for f in counts.leftover_processes.found if " frozen in its cgroup " in f]
    others = [f for f in counts.leftover_processes.found if f not in frozen]
    assert others == [], _story(chaos)
    if frozen:
        pytest.xfail(f"{FROZEN}: {frozen}")


def test_the_kills_leave_no_temporary_folder_or_mount(killed: tuple[ChaosRun, Counts]) -> None:
    """Anything but the known leaks fails; those mark the test an expected failure (and the
    mounts and loop devices a frozen job holds, while that one is not fixed)."""
    chaos, counts = killed
    frozen = any(" frozen in its cgroup " in f for f in counts.leftover_processes.found)
    detached = any(_DELETED_IMAGE.match(f) for f in counts.leftover_temp.found)
    held = ("mount at ", "loop", "/sys/fs/cgroup/") if frozen or detached else ()
    known = [f for f in counts.leftover_temp.found if _KNOWN_TEMP.match(f) or f.startswith(held)]
    others = [f for f in counts.leftover_temp.found if f not in known]
    assert others == [], _story(chaos)
    if known:
        pytest.xfail(f"{UNNAMED}; {FROZEN}; {DETACHED}: {known}")


def _chaos(tmp_path: Path) -> ChaosRun:
    chaos = ChaosRun(ChaosPlan(2, 0, 0), tmp_path)
    for folder in (chaos.tmp, chaos.lab / "tmp", chaos.lab / "sandbox"):
        folder.mkdir(parents=True)
    return chaos


def test_the_reaper_finds_a_process_that_left_its_session(tmp_path: Path) -> None:
    report = tmp_path / "report.json"
    script = (
        "import subprocess, sys; "
        "subprocess.Popen(['sleep', '30'], start_new_session=True); sys.exit(3)"
    )
    subprocess.run([sys.executable, str(REAPER), str(report), "0.2", "--", sys.executable,
                    "-c", script], check=True, timeout=60)  # fmt: skip
    done = json.loads(report.read_text())
    assert done["returncode"] == 3
    [left] = done["leftovers"]
    assert left["cmdline"] == "sleep 30" and left["pgid"] == left["pid"]


def test_leftovers_in_each_temporary_place_are_counted(tmp_path: Path) -> None:
    chaos = _chaos(tmp_path)
    assert leftover_temp(chaos) == []
    (chaos.tmp / "rsilab-snapshot-x").mkdir()
    (chaos.lab / "tmp" / "in-x").write_bytes(b"")
    (chaos.lab / "sandbox" / "key.json").write_text("{}")
    assert len(leftover_temp(chaos)) == 3


def test_a_record_or_event_gone_after_a_kill_is_counted_lost(tmp_path: Path) -> None:
    chaos = _chaos(tmp_path)
    with Lab.init(chaos.lab) as lab:
        head = lab.store.head()
    snap = Snapshot(head[0], head[1], {"exp-gone": 1}, {}, [], "", [])
    chaos.runs.append(Run(index=1, outcome="random", snapshot=snap))
    assert [f for f in records_lost(chaos).found] == ["run 1: exp-gone gone"]
    snap.head_hash = "0" * 64
    assert "run 1: ledger event 1 rewritten or gone" in records_lost(chaos).found


@pytest.mark.parametrize("found", [[], ["/tmp/x/in-1 (since run 4, fault:artifact_write)"]])
def test_the_table_renders_a_kept_run(found: list[str]) -> None:
    measures = {
        "records lost": [],
        "experiments failed because of the kills": [],
        "leftover temporary folders and mounts": found,
    }
    counts = {"measures": measures, "verify_deep_exit": 0, "experiments": 8,
              "failed_experiments": 0}  # fmt: skip
    run = {"outcome": "random", "fault": "", "where": "event 9", "landed": "a worker's job"}
    named = [
        {"outcome": f"fault:{p}", "fault": f"{p}:1", "event": 3, "action": "x", "landed": "y"}
        for p in NAMED
    ]
    result = {
        "commit": "abc",
        "plan": {
            "seed": 7,
            "random_kills": 1,
            "experiments": 8,
            "workers": 2,
            "max_delay_s": 0.25,
        },
        "kill_window": 40,
        "seconds": 30.0,
        "runs": [*named, run],
        "counts": counts,
        "reference": {"seconds": 5.0, "counts": counts | {"measures": {k: [] for k in measures}}},
    }
    rows = {r["measure"]: r for r in chaos_rows([result])}
    assert rows["named fault points hit"]["count"] == f"{len(NAMED)}/{len(NAMED)}"
    assert rows["random kills (SIGKILL after a drawn number of events and delay)"]["count"] == "1/1"
    assert rows["leftover temporary folders and mounts"]["count"] == len(found)
    assert rows["records lost"]["count"] == 0


def test_a_double_count_and_an_open_record_are_counted(tmp_path: Path) -> None:
    with Lab.init(tmp_path / "lab") as lab:
        run = [
            Experiment(campaign_id="cmp-x", direction_id="dir-x", state=ExperimentState.SUCCEEDED)
            for _ in range(3)
        ]
        done = [
            Intent(campaign_id="cmp-x", key=f"exp:{n}", action="experiment",
                   state=IntentState.DONE, result={"experiment_id": run[0].id})
            for n in (1, 2)
        ]  # fmt: skip
        draft = EventDraft(actor="test", role="controller", action="setup", campaign_id="cmp-x")
        lab.store.commit(draft, [*run, *done])
        found = counted_twice(lab.store, "cmp-x", budget=2).found
        assert found == [
            f"{run[0].id} delivered by 2 intents",
            f"{run[1].id} charged, delivered by none",
            f"{run[2].id} charged, delivered by none",
        ]
        assert stale_states(lab.store).found == []
        lab.store.commit(draft, [Intent(campaign_id="cmp-x", key="exp:3", action="experiment")])
        assert [f.split()[1] for f in stale_states(lab.store).found] == ["pending"]


def test_a_candidate_rejected_as_interrupted_twice_is_a_loss_unless_two_kills_hit_it(
    tmp_path: Path,
) -> None:
    chaos = _chaos(tmp_path)
    with Lab.init(chaos.lab) as lab:
        cand = Candidate(
            campaign_id="cmp-x", task="synthetic", parent_version_id="ver-x",
            harness_sha256="0" * 64, state=CandidateState.REJECTED, reason=INTERRUPTED_TWICE,
        )  # fmt: skip
        lab.store.commit(EventDraft(actor="t", role="controller", action="x"), [cand])
        judging = [f"candidate {cand.id} evaluating"]
        for index in (1, 2):
            snap = Snapshot(1, "", {}, {}, judging if index == 1 else [], "", [])
            chaos.runs.append(Run(index=index, outcome="random", snapshot=snap))
        lost, designed = candidates_lost(chaos, lab.store, "cmp-x")
        assert (lost.n, designed.n) == (1, 0)  # one kill in its judging: a loss
        assert chaos.runs[1].snapshot is not None
        chaos.runs[1].snapshot.in_flight = judging
        lost, designed = candidates_lost(chaos, lab.store, "cmp-x")
        assert (lost.n, designed.n) == (0, 1)  # two: recovery's rule, by design
