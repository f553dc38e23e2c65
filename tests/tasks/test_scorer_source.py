"""A scorer from a task's own file is part of the task and of the evaluator: editing the file,
or a module of the task folder it imports, changes the campaign's recorded digest (a resume is
refused) and the evaluator's hash (the controller refuses to compare across it)."""

from __future__ import annotations

from pathlib import Path

import pytest

from rsilab.controller.guards import evaluator_sha256
from rsilab.errors import UserError
from rsilab.tasks import load_ref, load_task
from tests.conformance.shapes import Shape, write_task

SHAPE = Shape(
    python=False, lower=True, predict_only=True, custom_config=False, mixed=False,
    custom_scorer=True,
)  # fmt: skip


def test_an_edited_scorer_file_changes_the_digest_and_the_evaluator(tmp_path: Path) -> None:
    path = write_task(tmp_path / "t", SHAPE, "src")
    first = load_task(path)
    recorded = first.ref()
    before = evaluator_sha256(first)
    assert load_ref(recorded).name == first.name  # unchanged: it loads

    scoring = tmp_path / "t" / "scoring.py"
    scoring.write_text(scoring.read_text().replace("abs(float", "0.0 * abs(float"))
    second = load_task(path)
    assert second.ref().digest != recorded.digest
    assert evaluator_sha256(second) != before
    with pytest.raises(UserError, match="changed since"):
        load_ref(recorded, campaign_id="cmp-000000000000")


def test_a_helper_module_the_scorer_imports_counts_too(tmp_path: Path) -> None:
    path = write_task(tmp_path / "t", SHAPE, "helper")
    folder = tmp_path / "t"
    (folder / "scorehelp.py").write_text("def dist(a, b):\n    return abs(a - b)\n")
    (folder / "scoring.py").write_text(
        "import sys, pathlib\n"
        "sys.path.insert(0, str(pathlib.Path(__file__).parent))\n"
        "from scorehelp import dist\n\n\n"
        "def abs_error(sample, output):\n"
        "    return dist(float(output), float(sample.target))\n"
    )
    first = load_task(path)
    before = (first.ref().digest, evaluator_sha256(first))
    (folder / "scorehelp.py").write_text("def dist(a, b):\n    return 0.0\n")
    second = load_task(path)
    assert (second.ref().digest, evaluator_sha256(second)) != before[0:1] + before[1:]
    assert second.ref().digest != before[0]
    assert evaluator_sha256(second) != before[1]
