"""External discovery: data sets available without the network, named but never located."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import sklearn

from rsilab.expos import open_campaign
from rsilab.records import Role
from rsilab.tasks import load_task
from tests.expos.helpers import Bench
from tests.tasks.task_files import write_toml_task


def test_finds_wine_from_scikit_learn(any_bench: Bench) -> None:
    value = any_bench.ok(Role.WORKER, "search_local_datasets", {"query": "wine"})
    [wine] = [d for d in value["datasets"] if d["name"] == "wine"]
    assert wine["source"] == "package:scikit-learn"
    assert wine["loader"] == "sklearn.datasets.load_wine"
    assert wine["size"] > 0
    assert "wine" in wine["description"].lower()


def test_the_digits_task_is_never_offered_its_own_source(any_bench: Bench) -> None:
    """The bench's campaign works on digits, whose tiers are cut from scikit-learn's digits."""
    for role in (Role.MAIN, Role.WORKER, Role.LEADER):
        names = {d["name"] for d in any_bench.ok(role, "search_local_datasets")["datasets"]}
        assert "digits" not in names and {"iris", "wine"} <= names
    assert any_bench.ok(Role.WORKER, "search_local_datasets", {"query": "digits"}) == {
        "datasets": []
    }


def test_a_user_task_declaring_a_copy_of_a_bundled_set_is_not_offered_it(
    any_bench: Bench, tmp_path: Path
) -> None:
    """A task of one's own whose data is a copy of scikit-learn's iris, kept in its own
    folder under another name: the same bytes, so iris is not offered; the rest are."""
    folder = tmp_path / "flowers"
    path = write_toml_task(folder, "flowers")
    (folder / "raw").mkdir()
    shutil.copy(Path(sklearn.__file__).parent / "datasets/data/iris.csv", folder / "raw/f.csv")
    text = path.read_text().replace(
        'harness = "harness"', 'harness = "harness"\ndata_sources = ["raw/f.csv"]'
    )
    path.write_text(text)
    campaign = open_campaign(any_bench.store, load_task(path).ref())
    ctx = any_bench.ctx(Role.WORKER, campaign_id=campaign.id)
    names = {d["name"] for d in any_bench.ok(ctx, "search_local_datasets")["datasets"]}
    assert "iris" not in names and {"digits", "wine"} <= names


def test_no_bundled_set_is_offered_when_the_task_cannot_be_loaded(
    any_bench: Bench, tmp_path: Path
) -> None:
    path = write_toml_task(tmp_path / "gone", "gone")
    campaign = open_campaign(any_bench.store, load_task(path).ref())
    path.unlink()
    ctx = any_bench.ctx(Role.WORKER, campaign_id=campaign.id)
    (any_bench.workspace / "mine.csv").write_text("1\n")
    any_bench.ok(ctx, "add_data", {"path": "mine.csv", "name": "mine"})
    found = any_bench.ok(ctx, "search_local_datasets")["datasets"]
    assert [d["name"] for d in found] == ["mine"]


def test_finds_lab_datasets_and_hides_paths(any_bench: Bench) -> None:
    bench = any_bench
    (bench.workspace / "pix.csv").write_text("0,1\n")
    added = bench.ok(
        Role.WORKER,
        "add_data",
        {"path": "pix.csv", "name": "augmented-wine", "readme": "Wine, shifted by one unit"},
    )
    value = bench.ok(Role.WORKER, "search_local_datasets", {"query": "WINE"})
    by_source = {d["source"]: d for d in value["datasets"]}
    lab_entry = by_source[f"lab:{added['id']}"]
    assert lab_entry["name"] == "augmented-wine"
    assert lab_entry["description"] == "Wine, shifted by one unit"
    assert "package:scikit-learn" in by_source
    text = json.dumps(value)
    assert str(Path(sklearn.__file__).parent) not in text
    assert str(bench.workspace) not in text and str(bench.artifacts.root) not in text
    assert ".csv" not in text and ".rst" not in text


def test_every_word_must_match(any_bench: Bench) -> None:
    bench = any_bench
    assert bench.ok(Role.LEADER, "search_local_datasets", {"query": "digits zebra"}) == {
        "datasets": []
    }


def test_other_campaigns_data_is_not_found(any_bench: Bench) -> None:
    bench = any_bench
    (bench.workspace / "a.csv").write_text("x")
    other = bench.ctx(Role.WORKER, campaign_id=bench.other_campaign().id)
    bench.ok(other, "add_data", {"path": "a.csv", "name": "foreign-set"})
    assert bench.ok(Role.WORKER, "search_local_datasets", {"query": "foreign"}) == {"datasets": []}


def test_reviewers_may_not_search(any_bench: Bench) -> None:
    any_bench.fail(Role.REVIEWER, "search_local_datasets", {}, code="permission_denied")
