"""``rsilab run`` and ``rsilab resume`` on the synthetic task."""

from __future__ import annotations

import fcntl
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from contextlib import closing
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from rsilab.orchestrator.campaign._lease import acquire_lease
from rsilab.records import Campaign, CampaignLease, Intent, lease_id
from rsilab.store import Lab
from tests.cli.helpers import explain, rsilab, run_refused
from tests.tasks.conftest import write_small_task


@pytest.fixture(autouse=True)
def _process_sandbox(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RSILAB_SANDBOX", "process")


def test_run_prints_progress_lineage_and_measures(tmp_path: Path) -> None:
    lab = tmp_path / "lab"
    assert rsilab("init", "--lab", lab).exit_code == 0
    ran = rsilab("run", "synthetic", "--budget", "experiments=4", "--workers", "2", "--lab", lab)
    assert ran.exit_code == 0, explain(ran)
    assert "experiment 4/4" in ran.stdout and "H0/M0" in ran.stdout
    assert "lock-in:" in ran.stdout and "[finished]" in ran.stdout
    with Lab.open(lab) as opened:
        [campaign] = opened.store.query_as(Campaign)
    report = lab / "reports" / f"{campaign.id}.md"
    assert f"report: {report}" in " ".join(ran.stdout.split())
    assert report.read_text().startswith(f"# Campaign report: {campaign.id}")
    other = rsilab("run", "synthetic", "--agents", "llm", "--lab", lab)
    assert other.exit_code == 2 and "not available yet" in other.stderr


def test_run_uses_the_labs_llm_table_unless_agents_says_otherwise(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    lab = tmp_path / "lab"
    assert rsilab("init", "--lab", lab).exit_code == 0
    (lab / "rsilab.toml").write_text('[llm]\nprovider = "anthropic"\nmodel = "m-test"\n')
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    configured = rsilab("run", "synthetic", "--budget", "experiments=1", "--lab", lab)
    assert configured.exit_code == 2 and "ANTHROPIC_API_KEY" in configured.stderr
    builtin = rsilab(
        "run", "synthetic", "--agents", "builtin", "--budget", "experiments=1", "--lab", lab
    )
    assert builtin.exit_code == 0, explain(builtin)


def test_resume_says_a_finished_campaign_is_final(tmp_path: Path) -> None:
    lab = tmp_path / "lab"
    assert rsilab("init", "--lab", lab).exit_code == 0
    assert rsilab("run", "synthetic", "--budget", "experiments=2", "--lab", lab).exit_code == 0
    again = rsilab("resume", "latest", "--budget", "experiments=5", "--lab", lab)
    assert again.exit_code == 0, explain(again)
    assert "nothing to do" in again.stdout and "rsilab run synthetic" in again.stdout
    assert "--budget extends only a stopped campaign" in again.stdout
    helped = " ".join(rsilab("resume", "--help").stdout.split())
    assert "Continue a stopped campaign" in helped and "A finished campaign is final" in helped


def _signalled_run(
    tmp_path: Path, signum: int, *, experiments: int = 20, ignoring: str = ""
) -> tuple[str, int, Campaign, CampaignLease]:
    """``rsilab run synthetic`` (``experiments``, 2 workers), started as from a terminal
    (every signal at its default, whatever this process ignores) or with the signal named by
    ``ignoring`` ignored, sent ``signum`` once its second experiment began: its output, exit
    code, campaign and lease."""
    lab = tmp_path / "lab"
    assert rsilab("init", "--lab", lab).exit_code == 0
    start = ["env", "--default-signal"] + ([f"--ignore-signal={ignoring}"] if ignoring else [])
    argv = [*start, sys.executable, "-m", "rsilab", "run", "synthetic", "--workers", "2"]
    argv += ["--budget", f"experiments={experiments}", "--lab", str(lab)]
    with (
        Lab.open(lab) as opened,
        subprocess.Popen(
            argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=dict(os.environ)
        ) as child,
    ):
        deadline = time.monotonic() + 60
        while not any(i.key == "exp:2" for i in opened.store.query_as(Intent)):
            assert child.poll() is None and time.monotonic() < deadline
            time.sleep(0.01)
        child.send_signal(signum)
        out, _ = child.communicate(timeout=120)
        [campaign] = opened.store.query_as(Campaign)
        lease = opened.store.get_as(lease_id(campaign.id), CampaignLease)
    return out.decode(), child.returncode, campaign, lease


def test_sigterm_cancels_what_runs_and_stops_cleanly(tmp_path: Path) -> None:
    """A service manager's SIGTERM (before its SIGKILL): before, the process died as under
    kill -9, leaving the campaign interrupted and a workspace mounted."""
    text, code, campaign, lease = _signalled_run(tmp_path, signal.SIGTERM)
    assert code == 130, text  # stopped by a person's (or a manager's) request
    assert f"rsilab resume {campaign.id}" in text
    assert campaign.state == "stopped" and lease.released_at is not None
    assert campaign.end_reason == "stopped_by_user"


def test_ctrl_c_stops_the_campaign_cleanly_and_says_how_to_resume(tmp_path: Path) -> None:
    # one Ctrl-C: what runs finishes, nothing new starts
    text, code, campaign, lease = _signalled_run(tmp_path, signal.SIGINT)
    assert code == 130, text  # interrupted, stopped cleanly
    assert "finish first" in text and f"rsilab resume {campaign.id}" in text
    assert campaign.state == "stopped" and lease.released_at is not None
    assert campaign.end_reason == "stopped_by_user"
    assert "experiment 20/20" not in text


def test_a_run_started_with_ctrl_c_ignored_goes_on_through_it(tmp_path: Path) -> None:
    """As `rsilab run ... &` from a script (or nohup for SIGHUP): the shell made SIGINT
    ignored so that a Ctrl-C meant for the foreground leaves it alone; rsilab keeps that."""
    text, code, campaign, lease = _signalled_run(
        tmp_path, signal.SIGINT, experiments=4, ignoring="INT"
    )
    assert code == 0, text
    assert "experiment 4/4" in text and "finish first" not in text
    assert campaign.state == "finished" and campaign.end_reason != "stopped_by_user"
    assert lease.released_at is not None


def test_a_first_run_refused_by_preflight_leaves_no_lab(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`rsilab run` makes the lab on a first run, but only once the sandbox can run jobs."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("RSILAB_LAB", raising=False)
    monkeypatch.delenv("RSILAB_SANDBOX", raising=False)
    monkeypatch.setenv("RSILAB_RUNTIME", str(tmp_path / "nonexistent"))
    result = rsilab("run", "synthetic", "--budget", "experiments=1")
    assert result.exit_code != 0
    assert "--unsandboxed" in result.stderr
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("edit", "said"),
    [
        ('path = "predict.py"\nold = "NOT IN THE FILE\\n"', "code_variants.bigger: "),
        ('path = "absent.py"\nold = "x"', "code_variants.bigger: "),
    ],
)
def test_a_code_variant_that_does_not_apply_is_refused_before_the_run(
    tmp_path: Path, edit: str, said: str
) -> None:
    """A variant fails the first worker that draws it, mid-campaign; `rsilab run` refuses it
    first, as `task check` names it, and writes nothing."""
    variant = f'[[code_variants]]\nname = "bigger"\n[[code_variants.edits]]\n{edit}\nnew = "y"\n'
    task = write_small_task(tmp_path / "t", toml_extra=variant)
    checked = rsilab("task", "check", task, "--no-probe", "--lab", tmp_path / "nolab")
    assert checked.exit_code == 2 and said in checked.stdout, explain(checked)
    _, error = run_refused(task, tmp_path / "lab")
    assert len(error) == 1 and said in error[0], error


def test_a_lab_that_lost_its_task_secret_is_not_given_a_new_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before, a run wrote a new secret, then refused with "the task changed since the
    baseline", sending the user to a new lab instead of to the missing file."""
    monkeypatch.setenv("RSILAB_SANDBOX", "process")
    lab = tmp_path / "lab"
    assert rsilab("init", "--lab", lab).exit_code == 0
    first = rsilab("run", "synthetic", "--budget", "experiments=1", "--lab", lab)
    assert first.exit_code == 0, explain(first)
    (lab / "task-secret").unlink()
    again = rsilab("run", "synthetic", "--budget", "experiments=1", "--lab", lab)
    assert again.exit_code == 2, explain(again)
    assert "task-secret is missing" in again.stderr and "restore task-secret" in again.stderr
    assert not (lab / "task-secret").exists()


def _all_threads_stopped(pid: int) -> bool:
    tasks = Path(f"/proc/{pid}/task")
    states = [(t / "stat").read_text().rsplit(")", 1)[1].split()[0] for t in tasks.iterdir()]
    return all(state == "T" for state in states)


def _stop_outside_a_write(child: subprocess.Popen[bytes], db: Path) -> None:
    """SIGSTOP ``child`` at a moment it holds no write lock on ``db`` nor on a watermark
    (stopped inside a commit or a mark, it would keep every other writer out: then it is let
    go and stopped again)."""
    deadline = time.monotonic() + 60
    while True:
        assert time.monotonic() < deadline, "the run never paused outside a write"
        child.send_signal(signal.SIGSTOP)
        while not _all_threads_stopped(child.pid):  # the signal is delivered asynchronously
            assert time.monotonic() < deadline
            time.sleep(0.001)
        if _db_free(db) and _marks_free():
            return
        child.send_signal(signal.SIGCONT)  # stopped mid-commit or mid-mark: again
        time.sleep(0.001)


def _db_free(db: Path) -> bool:
    probe = sqlite3.connect(db, timeout=0, isolation_level=None)
    try:
        probe.execute("BEGIN IMMEDIATE")
        probe.execute("ROLLBACK")
        return True
    except sqlite3.OperationalError:  # locked
        return False
    finally:
        probe.close()


def _marks_free() -> bool:
    """No process holds a lab's watermark file (written after each commit, under flock)."""
    for mark in Path(os.environ["RSILAB_KEY_DIR"]).glob("*.watermark.json"):
        with mark.open("rb") as handle:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return False
            fcntl.flock(handle, fcntl.LOCK_UN)
    return True


@pytest.mark.parametrize(("then", "said"), [("keep", "taken by process"), ("release", "released")])
def test_a_run_paused_past_its_lease_writes_nothing_once_woken(
    tmp_path: Path, then: str, said: str
) -> None:
    """SIGSTOP an `rsilab run` past its lease's ttl, let another process take the campaign
    over (and keep it, or release it again), SIGCONT: the run records nothing more and
    stops with one line saying it lost the lease, exit 2."""
    lab = tmp_path / "lab"
    assert rsilab("init", "--lab", lab).exit_code == 0
    argv = [sys.executable, "-m", "rsilab", "run", "synthetic", "--workers", "2"]
    argv += ["--budget", "experiments=40", "--lab", str(lab)]
    with (
        Lab.open(lab) as opened,
        subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE) as child,
    ):
        deadline = time.monotonic() + 120
        while not any(i.key == "exp:2" for i in opened.store.query_as(Intent)):
            assert child.poll() is None and time.monotonic() < deadline
            time.sleep(0.01)
        _stop_outside_a_write(child, lab / "lab.db")
        [campaign] = opened.store.query_as(Campaign)
        later = datetime.now(UTC) + timedelta(seconds=120)  # the paused holder looks silent
        taker = acquire_lease(opened.store, campaign.id, now=lambda: later)
        if then == "release":
            taker.release()
        head = opened.store.head()
        child.send_signal(signal.SIGCONT)
        out, err = child.communicate(timeout=300)
        assert child.returncode == 2, out.decode() + err.decode()
        errors = [line for line in err.decode().splitlines() if line.startswith("error:")]
        assert len(errors) == 1 and "lost the lease" in errors[0] and said in errors[0]
        assert opened.store.head() == head  # nothing recorded after the takeover
        assert opened.store.get_as(campaign.id, Campaign).state == "running"


@pytest.mark.parametrize("change", ["remove", "replace by a copy"])
def test_a_run_whose_lab_db_is_removed_or_replaced_stops_and_keeps_what_it_recorded(
    tmp_path: Path, change: str
) -> None:
    """lab.db removed (or replaced by a copy of itself) under a running `rsilab run`: before,
    it wrote on into the file it had open and exited 0, all of it lost. Now it stops with
    one line naming the path, exit 2, and what it recorded is saved beside lab.db."""
    lab = tmp_path / "lab"
    assert rsilab("init", "--lab", lab).exit_code == 0
    db = lab / "lab.db"
    argv = [sys.executable, "-m", "rsilab", "run", "synthetic", "--workers", "2"]
    argv += ["--budget", "experiments=40", "--lab", str(lab)]
    with subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE) as child:
        with Lab.open(lab) as opened:
            deadline = time.monotonic() + 120
            while not any(i.key == "exp:2" for i in opened.store.query_as(Intent)):
                assert child.poll() is None and time.monotonic() < deadline
                time.sleep(0.01)
            seen = opened.store.head()[0]
        if change == "remove":
            db.unlink()
        else:
            shutil.copy(db, lab / "copy.db")
            os.replace(lab / "copy.db", db)
        out, err = child.communicate(timeout=300)
    assert child.returncode == 2, out.decode() + err.decode()
    errors = [line for line in err.decode().splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and f"the lab database {db} " in errors[0], err.decode()
    [saved] = lab.glob("lab.db.orphaned-*")
    assert f"saved in {saved}" in errors[0]
    with closing(sqlite3.connect(saved)) as copy:
        assert copy.execute("SELECT max(seq) FROM events").fetchone()[0] >= seen


@pytest.mark.parametrize(
    ("change", "said"),
    [("replaced", "(replaced)"), ("deleted", "is missing, but event")],
)
def test_a_lab_whose_task_secret_changed_is_named_by_run_and_verify(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, change: str, said: str
) -> None:
    """Before, a replaced secret made the next run say "the task changed since the baseline"
    and `rsilab verify` found the lab clean."""
    monkeypatch.setenv("RSILAB_SANDBOX", "process")
    lab = tmp_path / "lab"
    assert rsilab("init", "--lab", lab).exit_code == 0
    first = rsilab("run", "synthetic", "--budget", "experiments=1", "--lab", lab)
    assert first.exit_code == 0, explain(first)
    assert rsilab("verify", "--lab", lab).exit_code == 0
    secret = lab / "task-secret"
    if change == "replaced":
        secret.write_text("ab" * 32)
    else:
        secret.unlink()

    checked = rsilab("verify", "--lab", lab)
    again = rsilab("run", "synthetic", "--budget", "experiments=1", "--lab", lab)

    assert checked.exit_code == 3, explain(checked)
    assert f"- the task secret {secret} " in checked.stdout and said in checked.stdout
    assert again.exit_code != 0, explain(again)
    errors = [line for line in again.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and said in errors[0], explain(again)
    assert "changed since the baseline" not in again.stderr
    assert "restore task-secret" in again.stderr
