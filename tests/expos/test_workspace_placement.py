"""A workspace that is, holds or lies inside the lab (or the ledger key folder) is refused
for every tool call through the Python API, whatever the lab's folder is called; only
``LAB/workspaces/<id>`` is allowed inside the lab."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from rsilab.expos import CallContext, ExperimentOS, default_registry, open_campaign
from rsilab.records import Outcome, Role, TaskRef
from rsilab.store import Lab


@pytest.fixture
def odd_lab(tmp_path: Path) -> Iterator[Lab]:
    """A lab stored under a name that is not ``.rsilab``, inside ``tmp_path/parent``."""
    opened = Lab.init(tmp_path / "parent" / "my-lab-store")
    yield opened
    opened.close()


def _call(lab: Lab, workspace: Path, tool: str, args: dict[str, object]) -> tuple[str, str]:
    campaign = open_campaign(lab.store, TaskRef(name="digits"))
    expos = ExperimentOS(lab.store, lab.artifacts, default_registry())
    result = expos.call(CallContext("api", Role.WORKER, campaign.id, workspace), tool, args)
    assert result.error is not None, result.to_dict()
    return result.error.code, result.error.message


WRITE: tuple[str, dict[str, object]] = (
    "write_file",
    {"path": "rsilab.toml", "content": "[llm]\nbase_url = 'http://x'\n"},
)
READ: tuple[str, dict[str, object]] = (
    "read_file",
    {"path": "."},
)  # a path that exists in each placement
LIST: tuple[str, dict[str, object]] = ("list_files", {"path": "."})


@pytest.mark.parametrize(("tool", "args"), [WRITE, READ, LIST])
@pytest.mark.parametrize("where", ["lab", "parent", "lab/workspaces", "lab/workspaces/..", "lab/x"])
def test_a_workspace_placed_on_the_lab_is_refused(
    odd_lab: Lab, tool: str, args: dict[str, object], where: str
) -> None:
    lab_root = odd_lab.path
    folder = {
        "lab": lab_root,
        "parent": lab_root.parent,
        "lab/workspaces": lab_root / "workspaces",
        "lab/workspaces/..": lab_root / "workspaces" / "..",
        "lab/x": lab_root / "x",
    }[where]
    folder.mkdir(parents=True, exist_ok=True)
    before = sorted(os.listdir(lab_root))
    code, message = _call(odd_lab, folder, tool, args)
    assert code == "no_workspace"
    assert str(lab_root.resolve()) in message
    assert sorted(os.listdir(lab_root)) == before  # nothing written into the lab
    assert not (lab_root / "rsilab.toml").exists()
    events = odd_lab.store.events()
    assert events[-1].tool == tool and events[-1].outcome is Outcome.ERROR  # recorded


def test_a_workspace_holding_the_key_folder_is_refused(
    odd_lab: Lab, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    keys = tmp_path / "home" / "config" / "ledger-keys"
    keys.mkdir(parents=True)
    monkeypatch.setenv("RSILAB_KEY_DIR", str(keys))
    monkeypatch.setenv("RSILAB_LEDGER_KEY", "a key given by the environment")
    code, message = _call(odd_lab, tmp_path / "home", *LIST)
    assert code == "no_workspace"
    assert message.startswith(f"workspace {(tmp_path / 'home').resolve()} holds {keys.resolve()}")


def test_a_workspace_in_the_labs_workspaces_folder_is_served(odd_lab: Lab) -> None:
    folder = odd_lab.path / "workspaces" / "w-1"
    folder.mkdir(parents=True)
    campaign = open_campaign(odd_lab.store, TaskRef(name="digits"))
    expos = ExperimentOS(odd_lab.store, odd_lab.artifacts, default_registry())
    ctx = CallContext("api", Role.WORKER, campaign.id, folder)
    written = expos.call(ctx, "write_file", {"path": "a.txt", "content": "x"})
    assert written.ok, written.to_dict()
    assert (folder / "a.txt").read_text() == "x"
