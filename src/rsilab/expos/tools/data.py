"""Data management tools: the lab's data pool, read and extended through the tool layer."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rsilab.errors import NotFoundError, ToolError
from rsilab.expos.context import ToolEnv
from rsilab.expos.registry import Category
from rsilab.expos.tools._base import Limit, Name, Text, WorkspacePath, require, tool
from rsilab.records import Artifact, Dataset, ProvenanceNote
from rsilab.store.artifacts import StoredArtifact

PREVIEW_BYTES = 64 * 1024


def _dataset_view(ds: Dataset) -> dict[str, Any]:
    return {
        "id": ds.id,
        "name": ds.name,
        "tier": str(ds.tier),
        "kind": ds.artifact_kind,
        "sha256": ds.artifact_sha256,
        "source": ds.source,
        "readme": ds.readme.split("\n", 1)[0][:200],
    }


def find_dataset(env: ToolEnv, ref: str, field: str = "dataset") -> Dataset:
    """A readable dataset by id or by name (names are looked up in the caller's campaign)."""
    if ref.startswith(Dataset.PREFIX + "-"):
        return env.read(ref, Dataset, field_name=field)
    matches = env.readable_as(Dataset, fields={"name": ref})
    if not matches:
        raise ToolError(
            "not_found",
            f"no dataset named {ref!r}; call show_datapool to list them",
            field=field,
        )
    own = [d for d in matches if d.campaign_id == env.call.campaign_id]
    return (own or matches)[-1]


@tool(Category.DATA)
def show_datapool(env: ToolEnv) -> dict[str, Any]:
    """List the datasets the caller may use: the lab's and its campaign's.

    Each entry has the dataset id, name, tier, kind (file or tree), content hash, source and
    the first line of its readme.
    """
    return {"datasets": [_dataset_view(d) for d in env.readable_as(Dataset)]}


@tool(Category.DATA)
def inspect_data(env: ToolEnv, dataset: Name, limit: Limit = 10) -> dict[str, Any]:
    """Show a dataset's readme and a preview: first lines of a text file, or a tree's files.

    Args:
        dataset: dataset id or name.
        limit: how many lines (file) or entries (tree) to show.
    """
    ds = find_dataset(env, dataset)
    if not env.artifacts.has(ds.artifact_sha256):
        raise ToolError(
            "tool_failed",
            f"the content of dataset {ds.id} ({ds.artifact_sha256[:12]}) is missing from the "
            "lab's artifact store; the lab is damaged, ask a person to run `rsilab verify`",
            field="dataset",
        )
    out: dict[str, Any] = {**_dataset_view(ds), "readme": ds.readme}
    if ds.artifact_kind == "tree":
        entries = env.artifacts.manifest(ds.artifact_sha256)
        out["files"] = len(entries)
        out["entries"] = [{"path": e["path"], "size": e.get("size", 0)} for e in entries[:limit]]
        return out
    path = env.artifacts.blob_path(ds.artifact_sha256)
    with path.open("rb") as handle:
        head = handle.read(PREVIEW_BYTES)
    out["size"] = path.stat().st_size
    try:
        text = head.decode("utf-8")
    except UnicodeDecodeError:
        out["preview"] = None
        out["note"] = "binary file; no text preview"
        return out
    out["preview"] = text.splitlines()[:limit]
    return out


@tool(Category.DATA)
def add_data(
    env: ToolEnv, path: WorkspacePath, name: Name, readme: Text = "", source: Text = ""
) -> dict[str, Any]:
    """Copy a file or folder from the workspace into the data pool as training data.

    The content is stored under its sha256 and registered in the caller's campaign; later
    changes to the workspace file do not change the registered data.

    Args:
        path: file or folder inside the workspace.
        name: name to refer to the data by; unique within the campaign.
        readme: what the data is and how it was made.
        source: where it came from (a URL, a script, a parent dataset).
    """
    campaign = env.campaign(writable=True)
    taken = env.store.query(Dataset.KIND, campaign_id=campaign.id, fields={"name": name})
    require(not taken, "conflict", f"a dataset named {name!r} already exists", "name")
    stored = env.artifacts.put(Path(path))
    _register_artifact(env, stored, Path(path).name, f"added as dataset {name!r}")
    ds = env.stage(
        Dataset(
            campaign_id=campaign.id,
            name=name,
            artifact_sha256=stored.sha256,
            artifact_kind=stored.kind,
            readme=readme,
            source=source,
            added_by=env.call.actor,
        )
    )
    return {"id": ds.id, "sha256": stored.sha256, "kind": stored.kind, "size": stored.size}


def _register_artifact(env: ToolEnv, stored: StoredArtifact, name: str, note: str) -> None:
    """Create the artifact record, or append a provenance note to the existing one."""
    record_id = f"{Artifact.PREFIX}-{stored.sha256}"
    text = ProvenanceNote(actor=env.call.actor, text=note)
    try:
        existing = env.store.get_as(record_id, Artifact)
    except NotFoundError:
        env.stage(
            Artifact(
                id=record_id,
                sha256=stored.sha256,
                artifact_kind=stored.kind,
                size=stored.size,
                name=name,
                notes=[text],
            )
        )
        return
    env.stage(existing.model_copy(update={"notes": [*existing.notes, text]}))


@tool(Category.DATA)
def update_data_readme(env: ToolEnv, dataset: Name, readme: Text) -> dict[str, Any]:
    """Replace a dataset's readme (the content itself never changes).

    Args:
        dataset: dataset id or name.
        readme: the new readme text.
    """
    env.campaign(writable=True)
    ds = find_dataset(env, dataset)
    require(
        ds.campaign_id == env.call.campaign_id or not env.call.role.is_agent,
        "permission_denied",
        "only datasets of your own campaign can be edited",
        "dataset",
    )
    env.stage(ds.model_copy(update={"readme": readme}))
    return {"id": ds.id, "rev": ds.rev + 1}
