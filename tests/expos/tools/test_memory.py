"""Shared memory tools: findings checked against the records, queried across campaigns."""

from __future__ import annotations

import math
import statistics
from typing import Any

import pytest
from scipy.stats import t as student_t

from rsilab.expos import open_campaign
from rsilab.memory import revise_orientation, revise_skill
from rsilab.records import (
    Adoption,
    Finding,
    Metric,
    MetricSource,
    ProtocolFlag,
    Role,
    TaskRef,
)
from tests.expos.helpers import Bench

WIDE, NARROW = [0.81, 0.84, 0.86, 0.83], [0.78, 0.80, 0.77]


def _group(bench: Bench, direction: str, values: list[float]) -> list[str]:
    ids = []
    for value in values:
        exp = bench.experiment(direction)
        bench.log(exp, value)
        ids.append(exp)
    return ids


def _groups(bench: Bench) -> tuple[list[str], list[str]]:
    direction = bench.direction()
    return _group(bench, direction, WIDE), _group(bench, direction, NARROW)


def _welch(a: list[float], b: list[float]) -> tuple[float, float, float]:
    va, vb = statistics.variance(a) / len(a), statistics.variance(b) / len(b)
    dof = (va + vb) ** 2 / (va**2 / (len(a) - 1) + vb**2 / (len(b) - 1))
    diff = statistics.fmean(a) - statistics.fmean(b)
    half = float(student_t.ppf(0.975, dof)) * math.sqrt(va + vb)
    return diff, diff - half, diff + half


def _claim(a: list[str], b: list[str], direction: str, **extra: Any) -> dict[str, Any]:
    return {
        "claim": "a wider net scores better",
        "status": "supported",
        "metric": "accuracy",
        "a_ids": a,
        "b_ids": b,
        "direction": direction,
        **extra,
    }


def _flags(bench: Bench, rule: str) -> list[ProtocolFlag]:
    return [f for f in bench.store.query_as(ProtocolFlag) if f.rule == rule]


def test_a_supported_claim_the_records_bear_out_is_stored_supported(any_bench: Bench) -> None:
    bench = any_bench
    wide, narrow = _groups(bench)
    value = bench.ok(Role.WORKER, "publish_finding", _claim(wide, narrow, "higher", tags=["width"]))
    diff, low, high = _welch(WIDE, NARROW)
    assert value["status"] == "supported" and "claimed_status" not in value
    assert value["effect"]["value"] == pytest.approx(diff)
    assert (value["effect"]["low"], value["effect"]["high"]) == (
        pytest.approx(low),
        pytest.approx(high),
    )
    assert "excludes 0 on the claimed side" in value["check"]
    finding = bench.store.get_as(value["id"], Finding)
    assert finding.campaign_id is None  # lab-wide: later campaigns read it
    assert finding.origin_campaign_id == bench.campaign.id and finding.task == "digits"
    assert (finding.author, finding.orientation) == ("worker-1", "role:worker")
    assert finding.structured is not None and finding.structured.direction == "higher"
    assert finding.effect is not None and finding.effect.value == pytest.approx(diff)
    assert finding.claimed_status is None and finding.tags == ["width"]
    assert finding.sources == wide + narrow
    assert bench.store.query_as(ProtocolFlag) == []
    bench.assert_verifies()


def test_a_claim_the_records_do_not_bear_out_is_kept_unresolved_and_flagged(
    any_bench: Bench,
) -> None:
    bench = any_bench
    direction = bench.direction()
    a, b = _group(bench, direction, [0.80, 0.86]), _group(bench, direction, [0.79, 0.84])
    value = bench.ok(Role.WORKER, "publish_finding", _claim(a, b, "higher"))
    assert value["status"] == "unresolved" and value["claimed_status"] == "supported"
    assert "includes 0" in value["check"] and "open problem" in value["note"]
    finding = bench.store.get_as(value["id"], Finding)
    assert finding.status == "unresolved" and finding.claimed_status == "supported"
    assert finding.effect is not None and finding.effect.low < 0 < finding.effect.high
    [flag] = _flags(bench, "unsupported_finding")
    assert (flag.stage, flag.blocked, flag.campaign_id) == ("reporting", False, bench.campaign.id)
    assert flag.tool == "publish_finding" and value["id"] in flag.detail
    # The opposite direction is not supported either: the interval is clear of 0 the other way.
    wide, narrow = _groups(bench)
    value = bench.ok(Role.WORKER, "publish_finding", _claim(wide, narrow, "lower"))
    assert value["status"] == "unresolved" and "the records show the opposite" in value["check"]
    assert len(_flags(bench, "unsupported_finding")) == 2
    bench.assert_verifies()


def test_a_refutation_stands_only_when_the_records_show_it(any_bench: Bench) -> None:
    bench = any_bench
    wide, narrow = _groups(bench)
    refuted = bench.ok(
        Role.REVIEWER,
        "publish_finding",
        _claim(wide, narrow, "lower", status="refuted", claim="a narrower net scores better"),
    )
    assert refuted["status"] == "refuted" and "claimed_status" not in refuted
    not_shown = bench.ok(
        Role.REVIEWER, "publish_finding", _claim(wide, narrow, "higher", status="refuted")
    )
    assert (not_shown["status"], not_shown["claimed_status"]) == ("unresolved", "refuted")
    bare = bench.ok(
        Role.REVIEWER, "publish_finding", {"claim": "width does not matter", "status": "refuted"}
    )
    assert (bare["status"], bare["claimed_status"]) == ("unresolved", "refuted")
    assert "must be shown by the records" in bare["check"] and bare["effect"] is None
    assert len(_flags(bench, "unsupported_finding")) == 2
    open_problem = bench.ok(
        Role.MAIN, "publish_finding", {"claim": "why does seed 3 diverge?", "status": "unresolved"}
    )
    assert open_problem["status"] == "unresolved" and "claimed_status" not in open_problem
    assert len(_flags(bench, "unsupported_finding")) == 2


def test_supported_needs_every_structured_field(any_bench: Bench) -> None:
    bench = any_bench
    wide, narrow = _groups(bench)
    full = _claim(wide, narrow, "higher")
    for missing in ("metric", "a_ids", "b_ids", "direction"):
        args = {k: v for k, v in full.items() if k != missing}
        error = bench.fail(Role.WORKER, "publish_finding", args, code="invalid_arguments")
        assert error.field == missing and f"{missing} is missing" in error.message
        assert "supported" in error.message and error.expected
    partial = {"claim": "c", "status": "unresolved", "metric": "accuracy"}
    error = bench.fail(Role.WORKER, "publish_finding", partial, code="invalid_arguments")
    assert error.field == "a_ids"
    error = bench.fail(
        Role.WORKER, "publish_finding", _claim(wide, wide[:2], "higher"), code="invalid_arguments"
    )
    assert error.field == "b_ids" and "both groups" in error.message
    error = bench.fail(
        Role.WORKER,
        "publish_finding",
        _claim([wide[0], wide[0]], narrow, "higher"),
        code="invalid_arguments",
    )
    assert error.field == "a_ids"
    error = bench.fail(
        Role.WORKER, "publish_finding", _claim(wide, narrow[:1], "higher"), code="invalid_arguments"
    )
    assert error.field == "metric" and "at least 2" in error.message
    bench.fail(Role.WORKER, "publish_finding", _claim(wide, narrow, "up"), code="invalid_arguments")
    bench.fail(
        Role.WORKER,
        "publish_finding",
        _claim(wide, narrow, "higher", claim=" "),
        code="invalid_arguments",
    )
    assert bench.store.query_as(Finding) == []


def test_sources_must_be_readable_records(any_bench: Bench) -> None:
    bench = any_bench
    error = bench.fail(
        Role.WORKER,
        "publish_finding",
        {"claim": "c", "status": "unresolved", "sources": ["exp-000000000000"]},
        code="not_found",
    )
    assert error.field == "sources.0"
    other = bench.other_campaign()
    ctx = bench.ctx(Role.MAIN, campaign_id=other.id)
    foreign = bench.ok(ctx, "create_direction", {"title": "t", "hypothesis": "h"})["id"]
    error = bench.fail(
        Role.WORKER,
        "publish_finding",
        {"claim": "c", "status": "unresolved", "sources": [foreign]},
        code="guard_refused",
    )
    assert "another campaign" in error.message
    assert bench.store.query_as(Finding) == []
    [flag] = bench.store.query_as(ProtocolFlag)
    assert (flag.rule, flag.blocked) == ("record_not_readable", True)


def _measured(bench: Bench, experiment_id: str, value: float) -> None:
    exp = bench.get_experiment(experiment_id)
    metric = Metric(name="accuracy", value=value, source=MetricSource.CONTROLLER)
    bench.put(exp.model_copy(update={"metrics": [*exp.metrics, metric]}))


def test_numbers_no_source_holds_are_flagged(bench: Bench) -> None:
    direction = bench.direction()
    a, b = bench.experiment(direction), bench.experiment(direction)
    _measured(bench, a, 0.8125)
    _measured(bench, b, 0.75)
    honest = bench.ok(
        Role.WORKER,
        "publish_finding",
        {"claim": "a reached 0.81, b 0.75", "status": "unresolved", "sources": [a, b]},
    )
    assert "flagged_numbers" not in honest
    made_up = bench.ok(
        Role.WORKER,
        "publish_finding",
        {
            "claim": "a reached 0.81",
            "conditions": "at 0.93 dropout",
            "uncertainty": "about 12.5%",
            "status": "unresolved",
            "sources": [a],
        },
    )
    assert made_up["flagged_numbers"] == ["0.93", "12.5%"]
    [flag] = _flags(bench, "unreconciled_number")
    assert (flag.stage, flag.blocked, flag.tool) == ("reporting", False, "publish_finding")
    assert made_up["id"] in flag.detail
    review = bench.ok(
        Role.REVIEWER, "submit_review", {"experiment_ids": [a, b], "rationale": "0.81 vs 0.75"}
    )["id"]
    via_review = bench.ok(
        Role.WORKER,
        "publish_finding",
        {"claim": "a 0.81 over b 0.75", "status": "unresolved", "sources": [review]},
    )
    assert "flagged_numbers" not in via_review


def _finding(bench: Bench, claim: str, role: Role = Role.WORKER, **extra: Any) -> str:
    args = {"claim": claim, "status": "unresolved", **extra}
    return str(bench.ok(role, "publish_finding", args)["id"])


def test_query_ranks_and_shows_an_open_problem_as_such(any_bench: Bench) -> None:
    bench = any_bench
    wide, narrow = _groups(bench)
    supported = bench.ok(
        Role.WORKER, "publish_finding", _claim(wide, narrow, "higher", tags=["width"])
    )["id"]
    problem = _finding(bench, "learning rate warmup diverges", tags=["learning_rate"])
    other = _finding(bench, "dropout is untested")
    listed = bench.ok(Role.REVIEWER, "query_findings", {"tags": ["learning_rate"]})
    assert listed["task"] == "digits"
    found = listed["findings"]
    assert [f["id"] for f in found] == [problem, other, supported]
    first = found[0]
    assert list(first)[:2] == ["status", "shown_as"]  # the status is shown first
    assert (first["status"], first["shown_as"]) == ("unresolved", "open problem, not a result")
    assert found[2]["shown_as"].startswith("result") and found[2]["effect"] is not None
    by_metric = bench.ok(Role.MAIN, "query_findings", {"metric": "accuracy", "limit": 1})
    assert [f["id"] for f in by_metric["findings"]] == [supported]
    by_text = bench.ok(Role.MAIN, "query_findings", {"text": "does warmup help the learning?"})
    assert by_text["findings"][0]["id"] == problem
    only = bench.ok(Role.MAIN, "query_findings", {"status": "supported"})
    assert [f["id"] for f in only["findings"]] == [supported]
    bench.fail(Role.MAIN, "query_findings", {"limit": 0}, code="invalid_arguments")
    bench.fail(Role.MAIN, "query_findings", {"status": "proven"}, code="invalid_arguments")


def test_findings_are_shared_across_campaigns_of_the_task_only(any_bench: Bench) -> None:
    bench = any_bench
    published = _finding(bench, "an open problem on digits")
    again = open_campaign(bench.store, TaskRef(name="digits"))
    later = bench.ok(bench.ctx(Role.WORKER, campaign_id=again.id), "query_findings")
    [shown] = later["findings"]
    assert shown["id"] == published and shown["origin_campaign_id"] == bench.campaign.id
    iris = bench.ctx(Role.WORKER, campaign_id=bench.other_campaign().id)
    assert bench.ok(iris, "query_findings")["findings"] == []
    bench.fail(bench.ctx(Role.WORKER, campaign_id=None), "query_findings", code="no_campaign")


def test_adoption_links_a_campaign_to_a_finding(any_bench: Bench) -> None:
    bench = any_bench
    finding = _finding(bench, "batch norm helps", tags=["norm"])
    again = open_campaign(bench.store, TaskRef(name="digits"))
    main = bench.ctx(Role.MAIN, campaign_id=again.id)
    worker = bench.ctx(Role.WORKER, campaign_id=again.id)
    direction = bench.ok(main, "create_direction", {"title": "bn", "hypothesis": "h"})["id"]
    exp = bench.ok(worker, "create_experiment", {"direction_id": direction, "description": "d"})[
        "id"
    ]
    value = bench.ok(
        worker,
        "adopt_finding",
        {
            "finding_id": finding,
            "mode": "adapted",
            "note": "with layer norm instead",
            "experiment_ids": [exp],
            "direction_id": direction,
        },
    )
    assert value["finding_status"] == "unresolved" and "open problem" in value["note"]
    adoption = bench.store.get_as(value["id"], Adoption)
    assert (adoption.campaign_id, adoption.finding_id, adoption.mode) == (
        again.id,
        finding,
        "adapted",
    )
    assert (adoption.experiment_ids, adoption.direction_id) == ([exp], direction)
    assert adoption.actor == "worker-1"
    [shown] = bench.ok(Role.MAIN, "query_findings")["findings"]
    assert shown["adoptions"] == 1
    error = bench.fail(
        Role.WORKER,
        "adopt_finding",
        {"finding_id": finding, "experiment_ids": [exp]},  # the other campaign's experiment
        code="guard_refused",
    )
    assert "another campaign" in error.message
    error = bench.fail(Role.WORKER, "adopt_finding", {"finding_id": exp}, code="not_found")
    assert error.field == "finding_id"
    bench.fail(
        Role.WORKER,
        "adopt_finding",
        {"finding_id": finding, "mode": "copied"},
        code="invalid_arguments",
    )
    bench.assert_verifies()


def test_a_later_finding_supersedes_an_earlier_one(any_bench: Bench) -> None:
    bench = any_bench
    old = _finding(bench, "warmup diverges")
    new = _finding(bench, "warmup diverges only above lr 0.1", supersedes=old)
    found = {f["id"]: f for f in bench.ok(Role.MAIN, "query_findings")["findings"]}
    assert found[old]["superseded_by"] == [new] and found[new]["supersedes"] == old
    adopted = bench.ok(Role.WORKER, "adopt_finding", {"finding_id": old})
    assert adopted["superseded_by"] == [new]
    iris = bench.ctx(Role.WORKER, campaign_id=bench.other_campaign().id)
    error = bench.fail(
        iris,
        "publish_finding",
        {"claim": "c", "status": "unresolved", "supersedes": old},
        code="invalid_arguments",
    )
    assert error.field == "supersedes" and "task" in error.message


def test_roles_may_publish_and_query_but_not_everyone(any_bench: Bench) -> None:
    bench = any_bench
    for role in (Role.MAIN, Role.WORKER, Role.REVIEWER, Role.LEADER, Role.HUMAN):
        _finding(bench, f"note by {role}", role=role)
    bench.fail(
        Role.CONTROLLER,
        "publish_finding",
        {"claim": "c", "status": "unresolved"},
        code="permission_denied",
    )
    for role in Role:
        assert len(bench.ok(role, "query_findings")["findings"]) == 5


def test_skills_and_orientations_are_read_at_their_latest(any_bench: Bench) -> None:
    bench = any_bench
    who: dict[str, Any] = {"actor": "campaign-review", "role": Role.CONTROLLER}
    first = revise_skill(bench.store, "sweep", "Try 3 rates.", None, **who)
    latest = revise_skill(bench.store, "sweep", "Try 5 rates.\nThen pick.", "rates = [1]", **who)
    revise_orientation(bench.store, "explorer", "Explore widely.", **who)
    for role in Role:
        skills = bench.ok(role, "list_skills")["skills"]
        assert skills == [
            {
                "name": "sweep",
                "version": 2,
                "id": latest.id,
                "has_code": True,
                "first_line": "Try 5 rates.",
            }
        ]
        [orientation] = bench.ok(role, "list_orientations")["orientations"]
        assert (orientation["name"], orientation["text"]) == ("explorer", "Explore widely.")
    read = bench.ok(Role.WORKER, "read_skill", {"name": "sweep"})
    assert (read["version"], read["code"], read["parent_id"]) == (2, "rates = [1]", first.id)
    assert read["versions"] == [1, 2]
    old = bench.ok(Role.REVIEWER, "read_skill", {"name": "sweep", "version": 1})
    assert (old["id"], old["text"], old["code"]) == (first.id, "Try 3 rates.", None)
    error = bench.fail(Role.WORKER, "read_skill", {"name": "sweep", "version": 7}, code="not_found")
    assert error.field == "version" and error.expected == "one of [1, 2]"
    error = bench.fail(Role.WORKER, "read_skill", {"name": "nope"}, code="not_found")
    assert error.field == "name"
