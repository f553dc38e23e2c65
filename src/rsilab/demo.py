"""``make demo``: a scripted walk through the Experiment OS on real data, with no LLM.

It creates a fresh lab in ``./.rsilab-demo``, registers a training split of scikit-learn's
bundled digits data, lets a Main agent open a direction, a Worker run real experiments
(logistic regression at several regularisation strengths, scored on a dev split), a Reviewer
compare them. Then the Host Controller on the built-in ``digits`` task: the baseline is
evaluated on private data, a Worker prepares a workspace, runs recorded train and dev jobs in
the sandbox and proposes a change, which the controller re-trains with its own seeds and
judges; a trap variant holding the leaked private tier is refused before anything runs. At the
end it prints the lineage and verifies the ledger. Every agent step goes through the tool
dispatcher, so everything it does is in the ledger. Afterwards, for example::

    rsilab log --lab .rsilab-demo
    rsilab versions digits --lab .rsilab-demo
    rsilab verify --lab .rsilab-demo
"""

from __future__ import annotations

import json
import shutil
import tempfile
import warnings
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from rsilab.controller.lineage import lineage_candidates, lineage_versions, require_lineage
from rsilab.errors import RsilabError
from rsilab.expos import CallContext, ExperimentOS, default_registry, open_campaign
from rsilab.expos.services import LabServices
from rsilab.records import Experiment, Role, TaskRef
from rsilab.store import Lab, verify_store
from rsilab.tasks import get_task, plant_traps

DEMO_LAB = Path(".rsilab-demo")
REGULARISATION = [0.001, 0.01, 0.1, 1.0]
SEEDS = [0, 1, 2]


def _call(expos: ExperimentOS, ctx: CallContext, tool: str, **args: Any) -> dict[str, Any]:
    result = expos.call(ctx, tool, args)
    if not result.ok:
        assert result.error is not None
        raise RsilabError(f"{tool} failed: {result.error.to_dict()}")
    return result.value or {}


def _write_train_split(workspace: Path) -> None:
    """Write the training part of digits as CSV (the dev part stays with the worker's code)."""
    from sklearn.datasets import load_digits

    x, y = load_digits(return_X_y=True)
    rows = [",".join(map(str, [*map(int, xi), int(yi)])) for xi, yi in zip(x, y, strict=True)]
    header = ",".join([f"p{i}" for i in range(x.shape[1])] + ["label"])
    (workspace / "digits_train.csv").write_text("\n".join([header, *rows[:1200]]) + "\n")


def _dev_accuracy(workspace: Path, c: float, seed: int) -> float:
    """Fit on a seeded subsample of the registered training file; score on held-out rows."""
    import numpy as np
    from sklearn.linear_model import LogisticRegression

    data = np.loadtxt(workspace / "digits_train.csv", delimiter=",", skiprows=1)
    rng = np.random.default_rng(seed)
    order = rng.permutation(len(data))
    train, dev = data[order[:900]], data[order[900:]]
    model = LogisticRegression(C=c, max_iter=300)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # convergence chatter is not the point of the demo
        model.fit(train[:, :-1] / 16.0, train[:, -1])
    return float(model.score(dev[:, :-1] / 16.0, dev[:, -1]))


def run_demo(lab_path: Path, console: Console) -> bool:
    """Run the walk-through in a fresh lab at ``lab_path``; True when the ledger verifies."""
    if lab_path.exists():
        shutil.rmtree(lab_path)
    with Lab.init(lab_path) as lab, tempfile.TemporaryDirectory() as tmp:
        workspace = Path(tmp)
        expos = ExperimentOS(lab.store, lab.artifacts, default_registry())
        campaign = open_campaign(lab.store, TaskRef(name="digits", source="demo"))
        main = CallContext("main-1", Role.MAIN, campaign.id)
        worker = CallContext("worker-1", Role.WORKER, campaign.id, workspace)
        reviewer = CallContext("reviewer-1", Role.REVIEWER, campaign.id)
        console.print(f"[bold]lab[/] {lab_path}  [bold]campaign[/] {campaign.id}")

        _write_train_split(workspace)
        data = _call(expos, worker, "add_data", path="digits_train.csv", name="digits-train",
                     readme="First 1,200 digits from scikit-learn; last column is the label.",
                     source="sklearn.datasets.load_digits")
        console.print(f"registered data {data['id']} sha256={data['sha256'][:16]}…")
        direction = _call(expos, main, "create_direction", title="regularisation strength",
                          hypothesis="weaker L2 regularisation (larger C) raises dev accuracy",
                          plan="fit logistic regression at C in {0.001..1}, two seeds each")
        by_c: dict[float, list[str]] = {}
        for c in REGULARISATION:
            for seed in SEEDS:
                exp = _call(expos, worker, "create_experiment", direction_id=direction["id"],
                            description=f"logistic regression C={c} seed={seed}",
                            config={"C": c, "seed": seed}, data=["digits-train"])
                acc = _dev_accuracy(workspace, c, seed)
                _call(expos, worker, "log_metric", experiment_id=exp["id"], name="accuracy",
                      value=acc)
                _call(expos, worker, "finish_experiment", experiment_id=exp["id"],
                      status="succeeded", summary=f"dev accuracy {acc:.3f}")
                by_c.setdefault(c, []).append(exp["id"])
        review = _call(expos, reviewer, "submit_review", experiment_ids=by_c[1.0],
                       baseline_ids=by_c[0.001], metric="accuracy", verdict="supports",
                       recommendation="verify", direction_id=direction["id"],
                       rationale="C=1 beats C=0.001 on dev; verify with more seeds")
        effect = review["comparisons"][0]["effect"]
        console.print(
            f"review {review['id']}: effect of C=1 over C=0.001 on dev accuracy "
            f"{effect['value']:+.3f} [{effect['low']:+.3f}, {effect['high']:+.3f}]"
        )
        # A refused call: the worker tries to read outside its workspace. It is flagged.
        refused = expos.call(worker, "add_data", {"path": "/etc/passwd", "name": "x"})
        console.print(f"refused as expected: {refused.to_dict()['message']}")
        _print_experiments(console, lab.store.query_as(Experiment, campaign_id=campaign.id))
        _controller_act(lab, campaign.id, workspace / "harness", console)
        report = verify_store(lab.store, artifacts=lab.artifacts, deep=True)
        console.print(
            f"ledger: {report.events} events, {report.records_checked} records, "
            f"{report.artifacts_checked} artifacts checked, "
            f"head {report.head_hash[:16]}… -> "
            + ("[green]verified[/]" if report.ok else f"[red]FAILED[/] {report.problems}")
        )
        return report.ok


BETTER_DIGITS = {"hidden": 64, "epochs": 20, "lr": 0.01, "optimizer": "adam"}


def _controller_act(lab: Lab, campaign_id: str, workspace: Path, console: Console) -> None:
    """The Host Controller on the built-in ``digits`` task: baseline, a worker's recorded
    jobs, a proposal judged on private data, and a leaked-data trap refused by a guard."""
    task = get_task("digits")
    console.rule("Host Controller on the built-in digits task (PyTorch MLP)")
    services = LabServices(lab, judge_in_background=False)
    try:
        baseline = services.controller(task).baseline(actor="demo")
        score = baseline.scores["accuracy"]
        console.print(
            f"baseline {baseline.label}: final-tier accuracy {score.value:.3f} "
            f"[{score.low:.3f}, {score.high:.3f}] ({len(baseline.seeds)} controller seeds)"
        )
        campaign = open_campaign(lab.store, task.ref(), notes="demo: controller act")
        expos = ExperimentOS(lab.store, lab.artifacts, default_registry(), services)
        main = CallContext("main-1", Role.MAIN, campaign.id)
        worker = CallContext("worker-1", Role.WORKER, campaign.id, workspace)
        workspace.mkdir()
        _call(expos, worker, "prepare_workspace")
        config = json.loads((workspace / "config.json").read_text()) | BETTER_DIGITS
        (workspace / "config.json").write_text(json.dumps(config, indent=2))
        direction = _call(expos, main, "create_direction", title="capacity and optimiser",
                          hypothesis="a wider MLP trained longer with adam generalises better")
        exp = _call(expos, worker, "create_experiment", direction_id=direction["id"],
                    description="hidden=64, epochs=20, adam", config=BETTER_DIGITS)["id"]
        trained = _call(expos, worker, "run_job", experiment_id=exp, kind="train", seed=1)
        dev = _call(expos, worker, "run_job", experiment_id=exp, kind="dev_eval", seed=1,
                    model=trained["model"])
        console.print(
            f"worker: recorded train job {trained['job_id']} -> model "
            f"{trained['model_sha256'][:12]}…; dev accuracy {dev['dev']['scores']['accuracy']:.3f}"
        )
        _call(expos, worker, "finish_experiment", experiment_id=exp, status="succeeded")
        verdict = _call(expos, worker, "propose_candidate", experiment_id=exp)
        console.print(f"proposal {verdict['candidate_id']}: the agent sees only "
                      f"[bold]{verdict['verdict']}[/]")
        # The trap variant: the private final tier planted in the workspace, as if leaked.
        plant_traps(task, workspace, services.secret)
        trap = _call(expos, worker, "propose_candidate", experiment_id=exp)
        status = _call(expos, worker, "candidate_status", candidate_id=trap["candidate_id"])
        console.print(f"leaked-data trap: {status['verdict']} ({status.get('note', '')})")
        _print_lineage(console, lab, task.name)
    except RsilabError as exc:
        console.print(f"[yellow]controller act skipped:[/] {exc}")
    finally:
        services.close()


def _print_lineage(console: Console, lab: Lab, task: str) -> None:
    lineage = require_lineage(lab.store, task)
    table = Table(title=f"lineage {task}/main (final-tier scores: they decided nothing)")
    for column in ("version", "parent", "accuracy", "decision"):
        table.add_column(column)
    for version in lineage_versions(lab.store, lineage):
        score = version.scores["accuracy"]
        table.add_row(
            version.label,
            version.parent_id or "-",
            f"{score.value:.3f} [{score.low:.3f}, {score.high:.3f}]",
            version.decision.split(":")[0],
        )
    console.print(table)
    for candidate in lineage_candidates(lab.store, task):
        console.print(f"  {candidate.id} {candidate.state}: {candidate.reason[:110]}")


def _print_experiments(console: Console, experiments: list[Experiment]) -> None:
    table = Table(title="experiments (dev accuracy is agent-reported; it never counts)")
    for column in ("id", "config", "state", "dev accuracy"):
        table.add_column(column)
    for exp in experiments:
        acc = next((m.value for m in exp.metrics if m.name == "accuracy"), float("nan"))
        table.add_row(exp.id, str(exp.config), str(exp.state), f"{acc:.3f}")
    console.print(table)


def main() -> None:
    """Entry point of ``python -m rsilab.demo``."""
    console = Console()
    ok = run_demo(DEMO_LAB, console)
    console.print(
        f"inspect it: rsilab log --lab {DEMO_LAB}; rsilab versions digits --lab {DEMO_LAB}; "
        f"rsilab verify --lab {DEMO_LAB}"
    )
    raise SystemExit(0 if ok else 3)


if __name__ == "__main__":
    main()
