"""External discovery: data sets available without the network, named but never located."""

from __future__ import annotations

import json
from pathlib import Path

import sklearn

from rsilab.records import Role
from tests.expos.helpers import Bench


def test_finds_digits_from_scikit_learn(any_bench: Bench) -> None:
    value = any_bench.ok(Role.WORKER, "search_local_datasets", {"query": "digits"})
    [digits] = [d for d in value["datasets"] if d["name"] == "digits"]
    assert digits["source"] == "package:scikit-learn"
    assert digits["loader"] == "sklearn.datasets.load_digits"
    assert digits["size"] > 0
    assert "digits" in digits["description"].lower()


def test_empty_query_lists_everything(any_bench: Bench) -> None:
    names = {d["name"] for d in any_bench.ok(Role.MAIN, "search_local_datasets")["datasets"]}
    assert {"digits", "iris", "wine"} <= names


def test_finds_lab_datasets_and_hides_paths(any_bench: Bench) -> None:
    bench = any_bench
    (bench.workspace / "pix.csv").write_text("0,1\n")
    added = bench.ok(
        Role.WORKER,
        "add_data",
        {"path": "pix.csv", "name": "augmented-digits", "readme": "Digits, shifted by one px"},
    )
    value = bench.ok(Role.WORKER, "search_local_datasets", {"query": "DIGITS"})
    by_source = {d["source"]: d for d in value["datasets"]}
    lab_entry = by_source[f"lab:{added['id']}"]
    assert lab_entry["name"] == "augmented-digits"
    assert lab_entry["description"] == "Digits, shifted by one px"
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
