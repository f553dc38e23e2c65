"""``rsilab run`` and ``rsilab resume`` on the synthetic task."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

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


def _signalled_run(tmp_path: Path, signum: int) -> tuple[str, int, Campaign, CampaignLease]:
    """``rsilab run synthetic`` (20 experiments, 2 workers) sent ``signum`` once its second
    experiment began: its output, exit code, campaign and lease."""
    lab = tmp_path / "lab"
    assert rsilab("init", "--lab", lab).exit_code == 0
    argv = [sys.executable, "-m", "rsilab", "run", "synthetic", "--workers", "2"]
    argv += ["--budget", "experiments=20", "--lab", str(lab)]
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
