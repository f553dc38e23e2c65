"""``make demo``: a scripted walk through the Experiment OS on real data, with no LLM.

It creates a fresh lab in ``./.rsilab-demo``, registers a training split of scikit-learn's
bundled digits data, lets a Main agent open a direction, a Worker run real experiments
(logistic regression at several regularisation strengths, scored on a dev split), a Reviewer
compare them, then prints the records and verifies the ledger. Every step goes through the
tool dispatcher, so everything it does is in the ledger. Afterwards, for example::

    rsilab log --lab .rsilab-demo
    rsilab verify --lab .rsilab-demo
"""

from __future__ import annotations

import shutil
import tempfile
import warnings
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from rsilab.errors import RsilabError
from rsilab.expos import CallContext, ExperimentOS, default_registry, open_campaign
from rsilab.records import Experiment, Role, TaskRef
from rsilab.store import Lab, verify_store

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
        report = verify_store(lab.store, artifacts=lab.artifacts, deep=True)
        console.print(
            f"ledger: {report.events} events, {report.records_checked} records, "
            f"{report.artifacts_checked} artifacts checked, "
            f"head {report.head_hash[:16]}… -> "
            + ("[green]verified[/]" if report.ok else f"[red]FAILED[/] {report.problems}")
        )
        return report.ok


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
    console.print(f"inspect it: rsilab log --lab {DEMO_LAB}; rsilab verify --lab {DEMO_LAB}")
    raise SystemExit(0 if ok else 3)


if __name__ == "__main__":
    main()
