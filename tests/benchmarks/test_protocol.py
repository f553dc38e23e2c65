"""The registered search protocol: its registration, the raced TPE peer, equal compute, Holm."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from benchmarks.bench_protocol import (
    REGISTRATIONS,
    ProtocolError,
    Registration,
    at_equal_compute,
    check_frozen,
    compare,
    load_registration,
    score_at,
)
from benchmarks.glance import protocol_rows
from benchmarks.kept import JsonLines
from benchmarks.search.policies import OptunaTPERaced, starting_config
from benchmarks.search.protocol import RunResult
from benchmarks.search.report import holm
from benchmarks.search.results import RunLog

from benchmarks import bench_protocol, bench_search
from benchmarks import kept as kept_results
from rsilab.orchestrator.builtin._state import NonTarget
from rsilab.tasks import Knob, KnobType

SPACE = [
    Knob(name="lr", type=KnobType.FLOAT, low=1e-4, high=1.0, log=True, default=0.1),
    Knob(name="width", type=KnobType.INT, low=4, high=512, log=True, default=8),
    Knob(name="opt", type=KnobType.CHOICE, choices=["sgd", "adam"], default="sgd"),
]


def _run(policy: str, seed: int, cpu: float, curve: list[list[float]]) -> RunResult:
    return RunResult(
        policy, "t", seed, 10, [0.5], curve[-1][1], curve[0][1], len(curve) - 1, 1, 1.0,
        cpu_s=cpu, final_by_cpu=curve,
    )  # fmt: skip


def test_the_registration_names_the_primary_peer_and_every_task() -> None:
    reg = load_registration()
    assert (reg.policy, reg.peer, reg.level) == ("rsilab", "optuna-tpe-raced", 0.95)
    names = [t.name for t in reg.tasks]
    assert names[:2] == ["synthetic", "digits"] and "textcls" in names
    for plan in reg.tasks:
        assert plan.policies[:2] == ["rsilab", "optuna-tpe-raced"]
        assert plan.seeds == list(range(1, len(plan.seeds) + 1))
    assert len(reg.frozen_commit) == 40  # a full commit hash, not a placeholder


def test_every_registration_freezes_a_commit_and_names_the_same_primary_pair() -> None:
    found = [load_registration(path) for path in REGISTRATIONS]
    assert len(found) == 4
    for reg in found:
        assert (reg.policy, reg.peer) == ("rsilab", "optuna-tpe-raced")
        assert len(reg.frozen_commit) == 40 and int(reg.frozen_commit, 16) >= 0
    assert len({reg.frozen_commit for reg in found}) == 4
    tables = [(t.name, t.results) for reg in found for t in reg.tasks]
    assert tables == [
        ("synthetic", "protocol"),
        ("digits", "protocol"),
        ("textcls", "protocol"),
        ("kernel", "protocol"),
        ("kernel", "protocol-2"),  # a later registration keeps its runs apart
        ("synthetic", "protocol-truth"),
    ]


def test_a_malformed_registration_is_one_clear_error(tmp_path: Path) -> None:
    bad = tmp_path / "r.toml"
    bad.write_text("frozen_commit = 'x'\n")
    with pytest.raises(ProtocolError, match="not a readable registration"):
        load_registration(bad)


def test_a_changed_src_refuses_the_run(tmp_path: Path) -> None:
    def git(*args: str) -> str:
        return subprocess.run(
            ["git", *args], cwd=tmp_path, check=True, capture_output=True, text=True
        ).stdout.strip()

    git("init", "-q")
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "a.py").write_text("x = 1\n")
    (tmp_path / "notes.md").write_text("n\n")
    git("add", ".")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "c")
    reg = Registration(git("rev-parse", "HEAD"), "rsilab", "optuna-tpe-raced", 0.95, [])
    (tmp_path / "notes.md").write_text("changed outside src\n")
    check_frozen(reg, tmp_path)  # only src/ is frozen
    (tmp_path / "src" / "new.py").write_text("y = 2\n")
    with pytest.raises(ProtocolError, match="untracked"):
        check_frozen(reg, tmp_path)
    (tmp_path / "src" / "new.py").unlink()
    (tmp_path / "src" / "a.py").write_text("x = 2\n")
    with pytest.raises(ProtocolError, match="worktree"):
        check_frozen(reg, tmp_path)


def test_scores_are_read_at_equal_compute() -> None:
    early = _run("rsilab", 1, 100.0, [[0.0, 0.4], [30.0, 0.6], [90.0, 0.7]])
    late = _run("peer", 1, 60.0, [[0.0, 0.4], [55.0, 0.8]])
    assert score_at(early, 29.9) == 0.4 and score_at(early, 30.0) == 0.6
    assert score_at(early, 1e9) == 0.7
    # both at 60 CPU-s: rsilab's third version came later than that and does not count
    assert at_equal_compute(early, late) == (0.6, 0.8)
    found = compare("t", {"rsilab": [early], "peer": [late]}, "rsilab", "peer", 1.0)
    assert found is not None and found.diffs == [pytest.approx(-0.2)]
    lower = compare("t", {"rsilab": [early], "peer": [late]}, "rsilab", "peer", -1.0)
    assert lower is not None and lower.diffs == [pytest.approx(0.2)]
    assert compare("t", {"rsilab": [early]}, "rsilab", "peer", 1.0) is None


def test_holm_adjusts_step_down() -> None:
    # Holm by hand: sorted 0.01, 0.02, 0.04, 0.30 -> 4 x 0.01, 3 x 0.02, 2 x 0.04, 1 x 0.30,
    # made non-decreasing: 0.04, 0.06, 0.08, 0.30
    assert holm([0.04, 0.30, 0.01, 0.02]) == pytest.approx([0.08, 0.30, 0.04, 0.06])
    assert holm([0.5, 0.6]) == pytest.approx([1.0, 1.0])
    assert holm([]) == []


def test_the_raced_peer_races_the_best_configs_at_the_end() -> None:
    budget = 12  # race_budget(12) = 3 re-runs: the reference once, then successive halving
    peer = OptunaTPERaced(SPACE, seed=3, budget=budget, non_targets=[NonTarget("other", 0.1)])
    asked = []
    for n in range(budget):
        ticket, config = peer.ask()
        asked.append(config)
        # the first search config is best, the reference worst; non-targets all kept
        score = 0.9 if n == 1 else (0.1 if config == starting_config(SPACE) else 0.5)
        peer.tell_scores(ticket, "target", {"target": score, "other": 0.5})
    assert asked[0] == starting_config(SPACE)
    race = asked[budget - 3 :]
    assert race[0] == starting_config(SPACE)  # the reference's second run
    assert asked[1] in race[1:]  # the leader is re-run
    assert peer.choice() == asked[1]
    with pytest.raises(TypeError, match="tell_scores"):
        peer.tell(0, 0.5)


def test_the_raced_peer_weighs_non_target_shortfalls_beyond_half_the_tolerance() -> None:
    peer = OptunaTPERaced(SPACE, seed=1, budget=4, non_targets=[NonTarget("other", 0.1)])
    t0, _ = peer.ask()
    peer.tell_scores(t0, "target", {"target": 0.5, "other": 0.8})
    t1, _ = peer.ask()
    peer.tell_scores(t1, "target", {"target": 0.9, "other": 0.74})  # 0.06 short: 0.01 beyond
    t2, _ = peer.ask()
    peer.tell_scores(t2, "target", {"target": 0.6, "other": 0.76})  # 0.04 short: within
    t3, _ = peer.ask()
    peer.tell_scores(t3, "target", None)
    runs = peer.runs
    assert runs[1].shortfall == pytest.approx(0.01)
    assert runs[1].score == pytest.approx(0.9 - 10 * 0.01)
    assert runs[2].shortfall == 0.0 and runs[2].score == pytest.approx(0.6)
    assert runs[3].failed


def _row(policy: str, runs: str, final: str, diff: str, holm_p: str = "-") -> dict[str, str]:
    return {
        "task": "a",
        "policy": policy,
        "runs": runs,
        "final (end) [95% CI]": final,
        "rsilab - policy at equal compute [95% CI]": diff,
        "Holm p": holm_p,
    }


def test_the_glance_reads_the_protocol_per_task() -> None:
    rows = [
        _row("rsilab", "3/3 x 5 exps", "0.7 [0.6, 0.8]", "-"),
        _row("optuna-tpe-raced", "3/3 x 5 exps", "0.6 [0.5, 0.7]", "+0.100 [+0.020, +0.180]"),
        _row("random", "2/3 x 5 exps", "0.5 [0.4, 0.6]", "-0.100 [-0.300, +0.100]", "0.400"),
    ]
    out = protocol_rows("P", rows)
    assert [r["claim"].split(" on ")[0] for r in out] == ["primary", "other peers"]
    assert out[0]["verdict"].startswith("registered, at equal compute: rsilab wins; ahead of")
    assert out[1]["verdict"].startswith("TARGET MISSED")
    assert "level within the intervals with random" in out[1]["verdict"]
    assert "Holm p 0.400" in out[1]["against"] and "PARTIAL" in out[1]["verdict"]


def test_a_registration_without_runs_says_not_run_yet_not_a_verdict() -> None:
    rows = [
        _row("rsilab", "0/30 x 40 exps", "not run yet", "-"),
        _row("optuna-tpe-raced", "0/30 x 40 exps", "not run yet", "-"),
    ]
    (out,) = protocol_rows("P", rows)
    assert out["verdict"].startswith("NOT RUN YET")
    assert "TARGET MISSED" not in out["verdict"] and "rsilab 0/30 x 40 exps" in out["verdict"]


def test_the_protocol_runs_the_registered_seeds_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Seeds 11 and 12 registered: the runner schedules those two, not seeds 1 to 12."""
    registration = tmp_path / "r.toml"
    registration.write_text(
        'frozen_commit = "' + "0" * 40 + '"\n'
        '[primary]\npolicy = "rsilab"\npeer = "optuna-tpe-raced"\nlevel = 0.95\n'
        '[[task]]\nname = "synthetic"\nseeds = [11, 12]\nbudget = 3\npolicies = ["random"]\n'
    )
    scheduled: list[tuple[str, int]] = []

    def run_jobs(
        task: object, plan: object, jobs: list[tuple[str, int]], *rest: object
    ) -> tuple[list[RunResult], float]:
        scheduled.extend(jobs)  # what the runner would run, without running it
        return [], 0.0

    monkeypatch.setattr(bench_protocol, "REGISTRATIONS", (registration,))
    monkeypatch.setattr(bench_protocol, "check_frozen", lambda reg: None)
    monkeypatch.setattr(
        bench_protocol, "log_for", lambda task, table: RunLog(JsonLines(tmp_path / "kept.jsonl"))
    )
    monkeypatch.setattr(bench_protocol, "plot", lambda *args: None)
    monkeypatch.setattr(kept_results, "RUN_NOTHING_NEW", False)
    monkeypatch.setattr(bench_search, "_run_jobs", run_jobs)
    bench_protocol.run_protocol(quick=False)
    assert scheduled == [("random", 11), ("random", 12)]
