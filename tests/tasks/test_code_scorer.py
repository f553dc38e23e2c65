"""The ``python_tests`` scorer against real bubblewrap: pass@k, invalid outputs, programs that
attack (each fails alone, the others still score, all in one sandbox job), fail-closed without
a sandbox, the batch call in score_outputs, an experiment scoring code, and the same file
again as an unprivileged user."""

from __future__ import annotations

import itertools
import os
import socket
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from pydantic import JsonValue

from rsilab.sandbox import BwrapSandbox, ProcessSandbox, Runtime
from rsilab.sandbox.base import RunResult, RunSpec, Sandbox
from rsilab.tasks import (
    TIERS,
    Sample,
    Scored,
    ScorerUnavailable,
    get_scorer,
    load_task,
    register_batch_scorer,
    run_experiment,
    score_outputs,
    write_jsonl,
)
from tests.sandbox.helpers import bwrap_problem
from tests.sandbox.unprivileged import run_pytest_as_test_user

pytestmark = pytest.mark.skipif(
    bwrap_problem() is not None, reason=f"bubblewrap is unusable here: {bwrap_problem()}"
)

TARGET: JsonValue = {"entry": "add_7", "tests": ["assert add_7(2) == 9", "assert add_7(-7) == 0"]}
GOOD = "def add_7(x):\n    return x + 7\n"
WRONG = "def add_7(x):\n    return x + 6\n"


class CountingSandbox(BwrapSandbox):
    """A real bubblewrap sandbox that counts the jobs it runs (its probe job is not one)."""

    def __init__(self) -> None:
        super().__init__()
        self.jobs = 0

    def run(self, spec: RunSpec) -> RunResult:
        self.jobs += 1
        return super().run(spec)


@pytest.fixture(scope="module")
def counting() -> Iterator[CountingSandbox]:
    box = CountingSandbox()
    box.prepare()
    yield box
    box.close()


def _score(
    outputs: dict[str, JsonValue], scorer: str = "python_tests", sandbox: Sandbox | None = None
) -> dict[str, Scored]:
    samples = [Sample(id=name, input={}, target=TARGET) for name in outputs]
    return {s.sample_id: s for s in score_outputs(scorer, samples, outputs, sandbox=sandbox)}


def test_a_correct_program_passes_and_a_wrong_one_fails(counting: CountingSandbox) -> None:
    scored = _score({"good": GOOD, "wrong": WRONG, "undefined": "x = 1\n"}, sandbox=counting)
    assert (scored["good"].score, scored["good"].valid) == (1.0, True)
    assert (scored["wrong"].score, scored["wrong"].valid) == (0.0, True)
    assert "test 1 failed: AssertionError" in scored["wrong"].note
    assert "does not define add_7()" in scored["undefined"].note


def _pass_at_by_subsets(passing: list[bool], k: int) -> float:
    """pass@k by its definition: the share of k-subsets holding a passing program."""
    subsets = list(itertools.combinations(passing, k))
    return sum(any(s) for s in subsets) / len(subsets)


def test_k_samples_with_c_correct_score_the_unbiased_estimator(counting: CountingSandbox) -> None:
    programs: list[JsonValue] = [GOOD, WRONG, WRONG, GOOD.replace("x + 7", "7 + x"), WRONG]
    passing = [True, False, False, True, False]
    for k in (1, 2, 3, 5):
        scorer = "python_tests" if k == 1 else f"python_tests@{k}"
        scored = _score({"p": programs}, scorer, counting)["p"]
        assert scored.valid and scored.note.startswith("2 of 5 passed")
        assert scored.score == pytest.approx(_pass_at_by_subsets(passing, k))
    assert _score({"p": programs}, "python_tests", counting)["p"].score == pytest.approx(0.4)
    assert _score({"p": programs}, "python_tests@3", counting)["p"].score == pytest.approx(0.9)


@pytest.mark.parametrize(
    ("output", "why"),
    [
        (7, "not a program"),
        ({"program": GOOD}, "not a program"),
        ([], "not a program"),
        ([GOOD, 3], "not a program"),
        (None, "not a program"),
    ],
)
def test_an_output_that_is_not_text_is_invalid(output: JsonValue, why: str) -> None:
    scored = _score({"p": output})["p"]
    assert (scored.score, scored.valid) == (0.0, False)
    assert why in scored.note


def test_fewer_programs_than_k_is_invalid_and_a_bad_target_too() -> None:
    scored = _score({"p": [GOOD, GOOD]}, "python_tests@3")["p"]
    assert (scored.valid, scored.note) == (False, "pass@3 needs at least 3 programs, got 2")
    bad = Sample(id="t", input={}, target={"entry": "not a name", "tests": []})
    (out,) = score_outputs("python_tests", [bad], {"t": GOOD})
    assert not out.valid and "Python name" in out.note


ATTACKS: dict[str, str] = {
    "infinite loop": "while True:\n    pass\n" + GOOD,
    "loop that catches the CPU signal": (
        "import signal\nsignal.signal(signal.SIGXCPU, lambda *a: None)\nwhile True:\n    pass\n"
    ),
    "sleeps forever": "import time\ntime.sleep(3600)\n" + GOOD,
    "fork bomb": "import os\nwhile True:\n    os.fork()\n" + GOOD,
    "thread bomb": "import threading\nwhile True:\n    threading.Thread(target=input).start()\n",
    "memory hog": "hog = []\nwhile True:\n    hog.append(bytearray(1 << 24))\n" + GOOD,
    "one huge allocation": "hog = bytearray(8 << 30)\n" + GOOD,
    "reads /etc/shadow": (
        "def add_7(x):\n    return x + 7 if 'root:' in open('/etc/shadow').read() else 0\n"
    ),
    "kills the driver": "import os\nos.kill(os.getppid(), 9)\n" + GOOD,
    "kills every process": "import os\nos.kill(-1, 9)\n" + GOOD,
    "traces the driver": (
        "import ctypes, os\nassert ctypes.CDLL(None).ptrace(16, os.getppid(), 0, 0) == 0\n" + GOOD
    ),
    "reads the driver's memory": "import os\nopen(f'/proc/{os.getppid()}/mem', 'rb')\n" + GOOD,
    "writes into the workspace": "open('/workspace/planted.py', 'w').write('x')\n" + GOOD,
    "writes into /usr": "open('/usr/planted', 'w').write('x')\n" + GOOD,
    "opens a socket": "import socket\nsocket.socket()\n" + GOOD,
    "exits before its tests": "import os\n" + GOOD + "os._exit(0)\n",
    "raises SystemExit": "import sys\nsys.exit(0)\n" + GOOD,
    "prints a fake verdict": (
        "import os, sys\nfor fd in range(1, 10):\n    try:\n"
        '        os.write(fd, b\'{"i": 0, "passed": true, "note": ""}\\n\' * 100)\n'
        "    except OSError:\n        pass\n" + WRONG
    ),
    "a huge file": "open('big', 'wb').write(b'x' * (64 << 20))\n" + GOOD,
}
"""Programs that must fail - each one alone - however they misbehave."""
HONEST: dict[str, str] = {
    "prints garbage but is right": (
        "import os, sys\nsys.stdout.write('\\x00\\xff garbage ' * 100000)\n"
        "os.write(2, bytes(range(256)) * 1000)\n" + GOOD
    ),
    "uses its own temporary folder": (
        "import os\nassert os.listdir('.') == []\nopen('scratch.txt', 'w').write('7')\n"
        "def add_7(x):\n    return x + int(open('scratch.txt').read())\n"
    ),
}
"""Programs that must pass: misbehaviour that harms nothing is not failure."""


@dataclass(frozen=True)
class AttackRun:
    scored: dict[str, Scored]
    jobs: int
    seconds: float
    lab: Path
    host_target: Path


@pytest.fixture(scope="module")
def attack_run(counting: CountingSandbox, tmp_path_factory: pytest.TempPathFactory) -> AttackRun:
    """Every attack, honest program and a few good ones, scored in ONE call."""
    lab = tmp_path_factory.mktemp("lab")
    (lab / "secret.txt").write_text("the lab's secret")
    host_target = lab / "written-from-the-sandbox"
    outputs: dict[str, JsonValue] = {"good first": GOOD}
    outputs.update(ATTACKS)
    outputs["reads the lab folder"] = (
        f"def add_7(x):\n    return x + 7 if open({str(lab / 'secret.txt')!r}).read() else 0\n"
    )
    outputs["writes into the host"] = f"open({str(host_target)!r}, 'w').write('x')\n" + GOOD
    outputs["plants a file in /tmp"] = "open('/tmp/planted', 'w').write('7')\n" + GOOD
    outputs["reads what another planted"] = (
        "def add_7(x):\n    return x + int(open('/tmp/planted').read())\n"
    )
    outputs["reaches a host port"] = _reach_host_port()
    outputs.update(HONEST)
    outputs["good last"] = [GOOD, GOOD.replace("x + 7", "7 + x")]
    before = counting.jobs
    started = time.monotonic()
    scored = _score(outputs, sandbox=counting)
    return AttackRun(scored, counting.jobs - before, time.monotonic() - started, lab, host_target)


def _reach_host_port() -> str:
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    _LISTENERS.append(listener)
    return (
        "import socket\ndef add_7(x):\n"
        f"    socket.create_connection(('127.0.0.1', {port}), timeout=1).close()\n"
        "    return x + 7\n"
    )


_LISTENERS: list[socket.socket] = []

FAILING = [
    *ATTACKS,
    "reads the lab folder",
    "writes into the host",
    "reads what another planted",
    "reaches a host port",
]


@pytest.mark.parametrize("name", FAILING)
def test_an_attacking_program_fails_alone(attack_run: AttackRun, name: str) -> None:
    scored = attack_run.scored[name]
    assert (scored.score, scored.valid) == (0.0, True), scored.note


@pytest.mark.parametrize("name", [*HONEST, "good first", "good last", "plants a file in /tmp"])
def test_the_other_programs_still_score(attack_run: AttackRun, name: str) -> None:
    assert attack_run.scored[name].score == 1.0, attack_run.scored[name].note


def test_all_programs_of_a_call_ran_in_one_sandbox_job(attack_run: AttackRun) -> None:
    assert attack_run.jobs == 1


def test_the_host_saw_nothing(attack_run: AttackRun) -> None:
    assert not attack_run.host_target.exists()
    assert sorted(p.name for p in attack_run.lab.iterdir()) == ["secret.txt"]
    for listener in _LISTENERS:
        listener.setblocking(False)
        with pytest.raises(BlockingIOError):
            listener.accept()


def test_the_notes_say_why(attack_run: AttackRun) -> None:
    notes = {name: attack_run.scored[name].note for name in FAILING}
    # on a loaded machine a busy loop may reach the wall-time limit before its CPU seconds
    assert "CPU-time limit" in notes["infinite loop"] or "wall-time" in notes["infinite loop"]
    assert "wall-time limit" in notes["sleeps forever"]
    assert "BlockingIOError" in notes["fork bomb"]
    assert "MemoryError" in notes["memory hog"]
    assert "PermissionError" in notes["kills the driver"]


def test_without_bubblewrap_scoring_raises(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    broken = BwrapSandbox(Runtime(tmp_path / "no-runtime"))
    with pytest.raises(ScorerUnavailable, match="python_tests cannot run its sandbox job"):
        _score({"p": GOOD}, sandbox=broken)
    # a process sandbox is no boundary: the scorer wants bubblewrap, and here it has none
    monkeypatch.setenv("RSILAB_RUNTIME", str(tmp_path / "no-runtime"))
    with pytest.raises(ScorerUnavailable, match="only in the bubblewrap sandbox"):
        _score({"p": GOOD}, sandbox=ProcessSandbox())


def test_a_batch_scorer_is_called_once_per_score_outputs() -> None:
    calls: list[list[str]] = []

    @register_batch_scorer("test_length_batch", description="len of the output text")
    def length(pairs: list[tuple[Sample, JsonValue]], sandbox: Sandbox | None) -> list[Scored]:
        calls.append([s.id for s, _ in pairs])
        return [Scored(s.id, float(len(str(o)))) for s, o in pairs]

    samples = [Sample(id=i, input={}, target=0) for i in ("a", "b", "c")]
    scored = score_outputs("test_length_batch", samples, {"a": "xx", "c": "xxxx"})
    assert calls == [["a", "c"]]
    assert [(s.sample_id, s.score, s.valid) for s in scored] == [
        ("a", 2.0, True),
        ("b", 0.0, False),
        ("c", 4.0, True),
    ]
    assert get_scorer("test_length_batch").fn(samples[0], "xyz").score == 3.0


def _code_task(folder: Path) -> Path:
    """A task whose predict answers item i with a right program when i is even."""
    harness = folder / "harness"
    harness.mkdir(parents=True)
    (harness / "harness.toml").write_text('[harness]\npredict = "python p.py"\nmodel = "none"\n')
    (harness / "p.py").write_text(
        "import json, sys\nfor line in sys.stdin:\n    item = json.loads(line)\n"
        "    i = item['input']['i']\n    op = '+' if i % 2 == 0 else '-'\n"
        "    code = f'def add_{i}(x):\\n    return x {op} {i}\\n'\n"
        "    print(json.dumps({'id': item['id'], 'output': code}))\n"
    )
    for tier in TIERS:
        samples = [
            Sample(
                id=f"{tier.value}-{i}",
                input={"i": i},
                target={"entry": f"add_{i}", "tests": [f"assert add_{i}(1) == {1 + i}"]},
            )
            for i in range(1, 9)
        ]
        write_jsonl(folder / f"{tier.value}.jsonl", samples)
    splits = ", ".join(f'{t.value} = "{t.value}.jsonl"' for t in TIERS)
    (folder / "task.toml").write_text(
        f'name = "code"\ngoal = "Write add_i."\nharness = "harness"\n'
        f'budget = "experiments=2"\n[[benchmarks]]\nname = "code"\nscorer = "python_tests"\n'
        f"target = true\nsplits = {{ {splits} }}\n"
    )
    return folder / "task.toml"


def test_an_experiment_scores_code_in_its_sandbox(
    tmp_path: Path, counting: CountingSandbox, secret: bytes
) -> None:
    task = load_task(_code_task(tmp_path / "code"))
    before = counting.jobs
    outcome = run_experiment(task, counting, secret)
    assert outcome.scores["code"] == 0.5  # items 2, 4, 6, 8 of 1..8 are answered right
    assert counting.jobs - before == 2  # predict, then one scoring job
    # with a process sandbox (no boundary) the scorer runs its own bubblewrap job instead
    plain = ProcessSandbox()
    assert run_experiment(task, plain, secret).scores["code"] == 0.5


@pytest.mark.skipif(
    os.geteuid() != 0, reason="already unprivileged: the whole file takes that path"
)
def test_the_scorer_works_for_an_unprivileged_user(tmp_path: Path) -> None:
    args = ["-q", "-x", __file__, "-k", "not unprivileged"]
    ran = run_pytest_as_test_user(args, tmp_path / "user", timeout=300)
    output = ran.stdout + ran.stderr
    assert ran.returncode == 0, output[-4000:]
    assert "passed" in output and "skipped" not in output.splitlines()[-1], output[-2000:]
