"""``make demo``: rsilab's main job, ``rsilab run digits``, on a fresh lab with no LLM.

It creates a fresh lab in ``./.rsilab-demo`` and runs one campaign on the built-in ``digits``
task with the built-in agents, exactly as a user would from the command line::

    rsilab init --lab .rsilab-demo
    rsilab run digits --lab .rsilab-demo --workers 2 --budget experiments=20
    rsilab verify --lab .rsilab-demo

The Host Controller first evaluates the initial system (``H0/M0``) on the private tiers; a Main
agent opens directions over the task's knobs, two Workers run recorded train and dev jobs in
the sandbox through the Experiment OS, a Reviewer compares their per-sample dev scores,
promising results are re-run on fresh seeds before they are proposed, and the controller alone
accepts. The run ends with the lineage of accepted versions, the lock-in measures and the path
of the campaign report; the ledger is then verified. About two minutes on 2 cores.
"""

from __future__ import annotations

import shutil
import sys
import time
from pathlib import Path

DEMO_LAB = Path(".rsilab-demo")
DEMO_BUDGET = "experiments=20"
DEMO_WORKERS = 2


def demo_commands(lab: Path, task: str = "digits", budget: str = DEMO_BUDGET) -> list[list[str]]:
    """The command lines the demo runs on ``task``, in order (each as ``rsilab`` arguments)."""
    return [
        ["init", "--lab", str(lab)],
        [
            "run",
            task,
            "--lab",
            str(lab),
            "--workers",
            str(DEMO_WORKERS),
            "--budget",
            budget,
        ],
        ["verify", "--lab", str(lab)],
    ]


def run_demo(lab: Path, task: str = "digits", budget: str = DEMO_BUDGET) -> int:
    """Run the demo's commands on a fresh ``lab``: 0, or the exit code of the first that
    fails (the ones after it are not run)."""
    from rsilab.cli import app

    if lab.exists():
        shutil.rmtree(lab)
    for args in demo_commands(lab, task, budget):
        print(f"\n$ rsilab {' '.join(args)}", flush=True)
        # Not standalone: click returns a command's exit code instead of leaving the process.
        code = app(args, prog_name="rsilab", standalone_mode=False)
        if isinstance(code, int) and code != 0:
            return code
    return 0


def main() -> None:
    """Entry point of ``python -m rsilab.demo`` (``make demo``)."""
    started = time.monotonic()
    code = run_demo(DEMO_LAB)
    minutes, seconds = divmod(round(time.monotonic() - started), 60)
    if code == 0:
        print(
            f"\ndemo finished in {minutes} min {seconds} s. Look around:\n"
            f"  rsilab report latest --lab {DEMO_LAB}\n"
            f"  rsilab ui --lab {DEMO_LAB}        (the dashboard: http://127.0.0.1:8765/)\n"
            f"  rsilab report latest --html report.html --lab {DEMO_LAB}\n"
            f"  rsilab versions digits --lab {DEMO_LAB}\n"
            f"  rsilab log --lab {DEMO_LAB}"
        )
    sys.exit(code)


if __name__ == "__main__":
    main()
