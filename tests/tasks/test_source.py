"""A campaign's task is loaded again from the TaskRef it recorded, from any working directory;
a file gone or changed since is refused with one line."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from rsilab.errors import UserError
from rsilab.records import TaskRef
from rsilab.tasks import load_ref, load_task
from tests.tasks.task_files import write_python_task, write_toml_task


def _spec_digest(path: Path) -> str:
    """The digest a task loaded from ``path`` by its absolute path records (a second
    computation of the spec's sha256, from the task's own JSON)."""
    task = load_task(path.resolve())
    # fields added later leave the digests of specs without them as they were
    later = {"code_variants", "runtime_requirements", "runtime_build_id"}
    empty = {name for name in later if not getattr(task, name, None)}
    if all(value is None for value in task.limits.model_dump().values()):
        empty.add("limits")  # nor do limits when a task sets none
    data = task.model_dump(mode="json", exclude={"source", "seconds_per_experiment", *empty})
    for knob in data["search_space"]:  # so are a knob's: no condition, no "when" key
        if knob["when"] is None:
            del knob["when"]
    return hashlib.sha256(
        json.dumps(data, sort_keys=True, separators=(",", ":")).encode()
    ).hexdigest()


def test_a_toml_loaded_by_a_relative_path_records_its_absolute_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = write_toml_task(tmp_path / "thr", "srcthr")
    monkeypatch.chdir(tmp_path / "thr")
    ref = load_task("task.toml").ref()
    assert ref.source == str(tmp_path.resolve() / "thr" / "task.toml")
    assert ref.digest == _spec_digest(path)  # one digest, wherever it was loaded from

    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")
    loaded = load_ref(ref)
    assert loaded.name == "srcthr"
    assert loaded.harness == tmp_path.resolve() / "thr" / "harness"
    assert loaded.ref() == ref


def test_an_edited_toml_is_refused_naming_both_digests(tmp_path: Path) -> None:
    path = write_toml_task(tmp_path / "thr", "srcedit")
    ref = load_task(path).ref()
    assert load_ref(ref, campaign_id="cmp-x").name == "srcedit"  # cached now
    path.write_text(path.read_text().replace("default = 0.3", "default = 0.4"))
    with pytest.raises(UserError) as refused:
        load_ref(ref, campaign_id="cmp-x")
    message = refused.value.message
    assert "\n" not in message
    assert message.startswith("task.toml changed since campaign cmp-x started")
    assert f"digest {ref.digest[:8]}… → {_spec_digest(path)[:8]}…" in message  # type: ignore[index]
    assert "start a new campaign" in refused.value.hint


def test_a_toml_that_now_names_another_task_is_refused(tmp_path: Path) -> None:
    path = write_toml_task(tmp_path / "thr", "srcname")
    ref = load_task(path).ref()
    path.write_text(path.read_text().replace('name = "srcname"', 'name = "other"'))
    with pytest.raises(UserError, match="now defines task 'other', not 'srcname'"):
        load_ref(ref)


def test_a_file_gone_is_refused_with_what_to_do(tmp_path: Path) -> None:
    path = write_toml_task(tmp_path / "thr", "srcgone")
    ref = load_task(path).ref()
    path.unlink()
    with pytest.raises(UserError) as refused:
        load_ref(ref, campaign_id="cmp-y")
    assert refused.value.message == (
        f"{path}, the task 'srcgone' of campaign cmp-y was loaded from, is gone"
    )
    assert "restore the file" in refused.value.hint


def test_an_older_labs_relative_source_loads_from_its_folder_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_toml_task(tmp_path / "thr", "srcold")
    monkeypatch.chdir(tmp_path / "thr")
    relative = load_task("task.toml")
    old = TaskRef(name="srcold", source="task.toml", digest=relative.digest())  # as recorded then
    assert load_ref(old).name == "srcold"
    monkeypatch.chdir(tmp_path)
    with pytest.raises(UserError, match=r"is gone \(recorded as 'task.toml', relative to"):
        load_ref(old)


def test_a_python_file_is_recorded_with_its_name_and_imported_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = write_python_task(tmp_path / "py", "srcpy")
    counter = tmp_path / "imports"
    path.write_text(
        f"from pathlib import Path\nwith Path({str(counter)!r}).open('a') as f:\n"
        "    f.write('x')\n" + path.read_text()
    )
    monkeypatch.chdir(tmp_path / "py")
    ref = load_task("srcpy_task.py").ref()
    assert ref.source == f"{tmp_path.resolve() / 'py' / 'srcpy_task.py'}:srcpy"

    monkeypatch.chdir(tmp_path)
    first = load_ref(ref)
    imports = counter.read_text()
    assert load_ref(ref) is first  # the second tool call imports nothing
    assert counter.read_text() == imports
    assert first.harness == tmp_path.resolve() / "py" / "harness"
    assert first.ref() == ref


def test_builtin_and_registered_tasks_load_by_name() -> None:
    assert load_ref(TaskRef(name="synthetic", source="builtin")).name == "synthetic"
    assert load_ref(TaskRef(name="digits")).name == "digits"  # an older lab's bare ref
    with pytest.raises(UserError) as refused:
        load_ref(TaskRef(name="nowhere", source="some.module"), campaign_id="cmp-z")
    assert refused.value.message == (
        "task 'nowhere' of campaign cmp-z (registered by 'some.module') is not known in this "
        "process"
    )
    assert "synthetic" in refused.value.hint


def test_a_hint_names_a_file_task_by_its_file_and_a_builtin_by_its_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from rsilab.orchestrator.campaign import check_harness

    folder = tmp_path / "my task"
    write_toml_task(folder, "mine")
    monkeypatch.chdir(folder)
    task = load_task("task.toml")
    assert task.argument == f"'{folder / 'task.toml'}'"
    (folder / "harness" / "harness.toml").write_text("[harness]\nmodel = 3\n")
    with pytest.raises(UserError) as caught:
        check_harness(task)
    assert f"rsilab task check '{folder / 'task.toml'}'" in str(caught.value)
    python = load_task(str(write_python_task(tmp_path / "py", "mine_py")))
    assert python.argument == f"{tmp_path / 'py' / 'mine_py_task.py'}:mine_py"
    assert load_task("synthetic").argument == "synthetic"
