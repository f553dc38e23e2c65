"""Data management tools: the data pool, content-addressed, with append-only provenance."""

from __future__ import annotations

import hashlib
import json

from rsilab.records import Artifact, CampaignState, Dataset, DataTier, Role
from tests.expos.helpers import Bench


def test_add_a_file(any_bench: Bench) -> None:
    bench = any_bench
    content = b"1,2,3\n4,5,6\n"
    (bench.workspace / "train.csv").write_bytes(content)
    args = {"path": "train.csv", "name": "train", "readme": "two rows\nmore", "source": "me"}
    value = bench.ok(Role.WORKER, "add_data", args)
    sha = hashlib.sha256(content).hexdigest()
    assert value["sha256"] == sha and value["kind"] == "file" and value["size"] == len(content)
    ds = bench.store.get_as(value["id"], Dataset)
    assert (ds.name, ds.artifact_sha256, ds.tier) == ("train", sha, DataTier.TRAIN)
    assert ds.campaign_id == bench.campaign.id and ds.added_by == "worker-1"
    assert bench.artifacts.read_bytes(sha) == content
    art = bench.store.get_as(f"art-{sha}", Artifact)
    assert art.artifact_kind == "file" and art.name == "train.csv" and len(art.notes) == 1
    # Later edits in the workspace do not change the registered data.
    (bench.workspace / "train.csv").write_bytes(b"changed")
    assert bench.artifacts.read_bytes(sha) == content
    bench.assert_verifies()


def test_add_a_folder(any_bench: Bench) -> None:
    bench = any_bench
    folder = bench.workspace / "images"
    (folder / "sub").mkdir(parents=True)
    (folder / "a.txt").write_bytes(b"aa")
    (folder / "sub" / "b.txt").write_bytes(b"bbb")
    value = bench.ok(Role.WORKER, "add_data", {"path": "images", "name": "imgs"})
    assert value["kind"] == "tree" and value["size"] == 5
    manifest = bench.artifacts.manifest(value["sha256"])
    assert {e["path"]: e["sha256"] for e in manifest if "sha256" in e} == {
        "a.txt": hashlib.sha256(b"aa").hexdigest(),
        "sub/b.txt": hashlib.sha256(b"bbb").hexdigest(),
    }
    assert (
        hashlib.sha256(bench.artifacts.read_bytes(value["sha256"])).hexdigest() == (value["sha256"])
    )


def test_re_adding_the_same_content_appends_a_provenance_note(any_bench: Bench) -> None:
    bench = any_bench
    (bench.workspace / "a.txt").write_text("same")
    (bench.workspace / "b.txt").write_text("same")
    first = bench.ok(Role.WORKER, "add_data", {"path": "a.txt", "name": "first"})
    second = bench.ok(Role.WORKER, "add_data", {"path": "b.txt", "name": "second"})
    assert first["sha256"] == second["sha256"] and first["id"] != second["id"]
    arts = bench.store.query(Artifact.KIND)
    assert len(arts) == 1
    art = arts[0]
    assert isinstance(art, Artifact)
    assert [n.text for n in art.notes] == [
        "added as dataset 'first'",
        "added as dataset 'second'",
    ]
    assert art.rev == 2
    bench.assert_verifies()


def test_duplicate_dataset_name_conflicts(any_bench: Bench) -> None:
    bench = any_bench
    (bench.workspace / "a.txt").write_text("a")
    bench.ok(Role.WORKER, "add_data", {"path": "a.txt", "name": "d"})
    error = bench.fail(Role.WORKER, "add_data", {"path": "a.txt", "name": "d"}, code="conflict")
    assert error.field == "name"
    assert len(bench.store.query(Dataset.KIND)) == 1


def test_same_name_in_another_campaign_is_fine(any_bench: Bench) -> None:
    bench = any_bench
    (bench.workspace / "a.txt").write_text("a")
    bench.ok(Role.WORKER, "add_data", {"path": "a.txt", "name": "d"})
    other = bench.ctx(Role.WORKER, campaign_id=bench.other_campaign().id)
    assert bench.ok(other, "add_data", {"path": "a.txt", "name": "d"})


def test_show_datapool_lists_own_and_lab_data(any_bench: Bench) -> None:
    bench = any_bench
    (bench.workspace / "a.txt").write_text("a")
    mine = bench.ok(Role.WORKER, "add_data", {"path": "a.txt", "name": "mine", "readme": "r1\nr2"})
    lab_wide = Dataset(name="shared", artifact_sha256="0" * 64, artifact_kind="file")
    private = Dataset(
        name="secret", artifact_sha256="1" * 64, artifact_kind="file", tier=DataTier.FINAL
    )
    bench.put(lab_wide)
    bench.put(private)
    other = bench.ctx(Role.WORKER, campaign_id=bench.other_campaign().id)
    bench.ok(other, "add_data", {"path": "a.txt", "name": "theirs"})
    listed = bench.ok(Role.WORKER, "show_datapool")["datasets"]
    assert [d["name"] for d in listed] == ["mine", "shared"]
    assert listed[0]["id"] == mine["id"] and listed[0]["readme"] == "r1"
    assert {d["name"] for d in bench.ok(Role.HUMAN, "show_datapool")["datasets"]} == {
        "mine",
        "shared",
        "secret",
        "theirs",
    }


def test_inspect_text_file(any_bench: Bench) -> None:
    bench = any_bench
    lines = [f"line {i}" for i in range(30)]
    (bench.workspace / "t.txt").write_text("\n".join(lines))
    bench.ok(Role.WORKER, "add_data", {"path": "t.txt", "name": "t", "readme": "full\nreadme"})
    value = bench.ok(Role.WORKER, "inspect_data", {"dataset": "t", "limit": 5})
    assert value["preview"] == lines[:5]
    assert value["readme"] == "full\nreadme"
    assert value["size"] == len("\n".join(lines))
    assert len(bench.ok(Role.REVIEWER, "inspect_data", {"dataset": "t"})["preview"]) == 10


def test_inspect_binary_file(any_bench: Bench) -> None:
    bench = any_bench
    (bench.workspace / "b.bin").write_bytes(bytes([0xFF, 0xFE, 0x00, 0x80]) * 10)
    added = bench.ok(Role.WORKER, "add_data", {"path": "b.bin", "name": "b"})
    value = bench.ok(Role.WORKER, "inspect_data", {"dataset": added["id"]})
    assert value["preview"] is None
    assert "binary" in value["note"]
    assert value["size"] == 40


def test_inspect_tree(any_bench: Bench) -> None:
    bench = any_bench
    folder = bench.workspace / "tree"
    folder.mkdir()
    for i in range(4):
        (folder / f"f{i}.txt").write_text("x" * i)
    bench.ok(Role.WORKER, "add_data", {"path": "tree", "name": "tree"})
    value = bench.ok(Role.WORKER, "inspect_data", {"dataset": "tree", "limit": 3})
    assert value["files"] == 4
    assert value["entries"] == [
        {"path": "f0.txt", "size": 0},
        {"path": "f1.txt", "size": 1},
        {"path": "f2.txt", "size": 2},
    ]


def test_inspect_unknown_or_private_data(any_bench: Bench) -> None:
    bench = any_bench
    error = bench.fail(Role.WORKER, "inspect_data", {"dataset": "nope"}, code="not_found")
    assert error.field == "dataset"
    bench.fail(Role.WORKER, "inspect_data", {"dataset": "data-000000000000"}, code="not_found")
    private = Dataset(
        name="secret", artifact_sha256="1" * 64, artifact_kind="file", tier=DataTier.ACCEPT
    )
    bench.put(private)
    # By name it is simply not there; by id the refusal is recorded.
    bench.fail(Role.WORKER, "inspect_data", {"dataset": "secret"}, code="not_found")
    bench.fail(Role.WORKER, "inspect_data", {"dataset": private.id}, code="guard_refused")


def test_update_readme_bumps_the_revision(any_bench: Bench) -> None:
    bench = any_bench
    (bench.workspace / "a.txt").write_text("a")
    added = bench.ok(Role.WORKER, "add_data", {"path": "a.txt", "name": "d", "readme": "old"})
    assert bench.store.get(added["id"]).rev == 1
    value = bench.ok(Role.WORKER, "update_data_readme", {"dataset": "d", "readme": "new"})
    assert value == {"id": added["id"], "rev": 2}
    ds = bench.store.get_as(added["id"], Dataset)
    assert ds.readme == "new" and ds.rev == 2
    assert ds.artifact_sha256 == added["sha256"]
    value = bench.ok(Role.HUMAN, "update_data_readme", {"dataset": added["id"], "readme": "3"})
    assert value["rev"] == 3
    bench.assert_verifies()


def test_agents_cannot_edit_lab_wide_readmes(any_bench: Bench) -> None:
    bench = any_bench
    shared = Dataset(name="shared", artifact_sha256="0" * 64, artifact_kind="file")
    bench.put(shared)
    args = {"dataset": "shared", "readme": "mine now"}
    bench.fail(Role.WORKER, "update_data_readme", args, code="permission_denied")
    assert bench.ok(Role.HUMAN, "update_data_readme", args)["rev"] == 2


def test_finished_campaign_refuses_new_data(any_bench: Bench) -> None:
    bench = any_bench
    bench.put(bench.campaign.model_copy(update={"state": CampaignState.FINISHED}))
    (bench.workspace / "a.txt").write_text("a")
    bench.fail(Role.WORKER, "add_data", {"path": "a.txt", "name": "d"}, code="conflict")
    assert bench.store.query(Dataset.KIND) == []


def test_outputs_are_json(any_bench: Bench) -> None:
    bench = any_bench
    (bench.workspace / "a.txt").write_text("a")
    bench.ok(Role.WORKER, "add_data", {"path": "a.txt", "name": "d"})
    for tool, args in [("show_datapool", {}), ("inspect_data", {"dataset": "d"})]:
        json.dumps(bench.ok(Role.WORKER, tool, args))
