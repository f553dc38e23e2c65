"""``rsilab.run`` and ``rsilab.resume``: every argument is checked before anything is written."""

from __future__ import annotations

from pathlib import Path

import pytest

import rsilab
from rsilab.records import Campaign
from rsilab.store import Lab


@pytest.fixture
def lab_path(tmp_path: Path) -> Path:
    path = tmp_path / "lab"
    Lab.init(path).close()
    return path


def _campaigns(path: Path) -> int:
    with Lab.open(path) as lab:
        return len(lab.store.query_as(Campaign))


@pytest.mark.parametrize(
    ("kwargs", "says"),
    [
        ({"budget": {"bad": 1}}, "bad budget"),
        ({"budget": {"experiments": 0}}, "experiments"),
        ({"budget": "experiments=lots"}, "bad budget"),
        ({"budget": ["experiments", 3]}, "expected a Budget"),
        ({"agents": "gpt-4"}, "agents 'gpt-4'"),
        ({"workers": 0}, "workers 0"),
        ({"workers": 2, "team": 2}, "team and workers"),
        ({"team": -1}, "team -1"),
        ({"seed": "7"}, "seed '7'"),
        ({"workers": True}, "workers True"),
    ],
)
def test_a_bad_argument_writes_nothing(
    lab_path: Path, kwargs: dict[str, object], says: str
) -> None:
    with Lab.open(lab_path) as lab:
        head = lab.store.head()
    with pytest.raises(rsilab.UserError, match=says):
        rsilab.run("synthetic", lab=lab_path, **kwargs)  # type: ignore[arg-type]
    with Lab.open(lab_path) as lab:
        assert lab.store.head() == head
    assert _campaigns(lab_path) == 0


def test_a_bad_budget_creates_no_lab(tmp_path: Path) -> None:
    where = tmp_path / "not-yet"
    with pytest.raises(rsilab.UserError, match="bad budget"):
        rsilab.run("synthetic", budget={"bad": 1}, lab=where)
    assert not where.exists()


def test_an_unknown_task_writes_nothing(lab_path: Path) -> None:
    with pytest.raises(rsilab.UserError, match="no-such-task"):
        rsilab.run("no-such-task", lab=lab_path)
    assert _campaigns(lab_path) == 0


def test_resume_names_what_is_wrong(lab_path: Path, tmp_path: Path) -> None:
    with pytest.raises(rsilab.UserError, match="no campaign 'cmp-missing'"):
        rsilab.resume("cmp-missing", lab=lab_path)
    with pytest.raises(rsilab.UserError, match="no rsilab lab"):
        rsilab.resume("latest", lab=tmp_path / "nowhere")
    with pytest.raises(rsilab.UserError, match="workers 0"):
        rsilab.resume("latest", lab=lab_path, workers=0)


def test_run_and_resume_are_documented() -> None:
    for function in (rsilab.run, rsilab.resume):
        assert function.__doc__ is not None and "Raises:" in function.__doc__
    assert "budget" in (rsilab.run.__doc__ or "") and "end_reason" in (rsilab.run.__doc__ or "")


def test_a_resume_budget_below_what_was_spent_is_refused(lab_path: Path) -> None:
    """It would end the campaign for good at once: a typo must not do that."""
    stop = rsilab.StopRequest()

    def stop_after_two(line: rsilab.Progress) -> None:
        if line.kind == "experiment" and line.experiments >= 2:
            stop.request()

    stopped = rsilab.run(
        "synthetic", budget={"experiments": 20}, lab=lab_path, on_progress=stop_after_two,
        stop=stop,
    )  # fmt: skip
    assert stopped.state == "stopped" and stopped.experiments >= 2
    with Lab.open(lab_path) as lab:
        head = lab.store.head()
    with pytest.raises(rsilab.UserError, match=f"has made {stopped.experiments} experiments"):
        rsilab.resume(stopped.campaign_id, lab=lab_path, budget={"experiments": 1})
    with Lab.open(lab_path) as lab:
        assert lab.store.head() == head


@pytest.mark.parametrize(
    ("kwargs", "says"),
    [
        ({"seed": -1}, "seed -1"),
        ({"seed": 2**70}, "at most"),
        ({"on_progress": 5}, "on_progress 5"),
        ({"stop": "yes"}, "stop 'yes'"),
        ({"agents": "openai:"}, "agents 'openai:'"),
    ],
)
def test_more_bad_arguments_write_nothing(
    lab_path: Path, kwargs: dict[str, object], says: str
) -> None:
    with Lab.open(lab_path) as lab:
        head = lab.store.head()
    with pytest.raises(rsilab.UserError, match=says):
        rsilab.run("synthetic", lab=lab_path, **kwargs)  # type: ignore[arg-type]
    with Lab.open(lab_path) as lab:
        assert lab.store.head() == head


def test_a_missing_api_key_creates_no_lab(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    where = tmp_path / "fresh"
    with pytest.raises(rsilab.UserError, match="OPENAI_API_KEY"):
        rsilab.run("synthetic", agents="openai:gpt-x", lab=where)
    assert not where.exists()
    with pytest.raises(rsilab.UserError, match="lab 123"):
        rsilab.run("synthetic", lab=123)  # type: ignore[arg-type]
