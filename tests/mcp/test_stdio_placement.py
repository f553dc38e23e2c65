"""``rsilab mcp --workspace`` refuses, before serving, a workspace that is, holds or lies in
the lab (whatever the lab's folder is called), in one line; ``LAB/workspaces/<id>`` serves."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.mcp.test_stdio import prepared_lab


def _serve(lab: Path, workspace: Path, campaign_id: str) -> subprocess.CompletedProcess[str]:
    args = ["-m", "rsilab", "mcp", "--lab", str(lab), "--role", "worker"]
    args += ["--campaign", campaign_id, "--workspace", str(workspace)]
    return subprocess.run(
        [sys.executable, *args],
        input="",
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ},
        check=False,
    )


@pytest.mark.parametrize("where", ["lab", "parent", "lab/workspaces/..", "lab/blobs"])
def test_a_workspace_on_the_lab_is_refused_at_start(tmp_path: Path, where: str) -> None:
    lab = tmp_path / "parent" / "store-of-mine"
    campaign_id, _ = prepared_lab(lab)
    folder = {
        "lab": lab,
        "parent": lab.parent,
        "lab/workspaces/..": lab / "workspaces" / "..",
        "lab/blobs": lab / "blobs",
    }[where]
    folder.mkdir(parents=True, exist_ok=True)
    ran = _serve(lab, folder, campaign_id)
    assert ran.returncode == 2
    assert ran.stdout == ""  # no protocol was spoken
    (line,) = ran.stderr.splitlines()
    assert line.startswith(f"error: workspace {folder.resolve()} ")
    assert str(lab.resolve()) in line and "(hint: " in line
    assert not (lab / "rsilab.toml").exists()


def test_a_workspace_in_the_labs_workspaces_folder_is_served(tmp_path: Path) -> None:
    lab = tmp_path / "lab"
    campaign_id, _ = prepared_lab(lab)
    folder = lab / "workspaces" / "w-1"
    folder.mkdir(parents=True)
    ran = _serve(lab, folder, campaign_id)
    assert ran.returncode == 0, ran.stderr  # served until stdin ended
