"""posttrain's jobs run in its own runtime: a campaign is refused in one line without it, its
base model is recorded in the campaign (and stored by content hash), and a changed base model
fails closed. Tasks of the base runtime are unaffected."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

import rsilab
from rsilab.errors import UserError
from rsilab.executors.local import LocalExecutor
from rsilab.expos.campaigns import open_campaign
from rsilab.expos.services import LabServices
from rsilab.orchestrator.campaign._runtime import check_same_runtime, runtime_settings
from rsilab.records import Campaign
from rsilab.sandbox.process import ProcessSandbox
from rsilab.sandbox.runtime import RuntimeMissingError, current_runtime, task_runtime
from rsilab.sandbox.runtime_built import BuiltFileChanged
from rsilab.store import Lab
from rsilab.tasks import get_task
from tests.sandbox.fake_runtime import fake_task_runtime

PAYLOAD = b"base model bytes"


@pytest.fixture
def lab(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Lab]:
    monkeypatch.setenv("RSILAB_RUNTIME", str(tmp_path / "rt"))
    monkeypatch.setenv("RSILAB_KEY_DIR", str(tmp_path / "keys"))
    opened = Lab.init(tmp_path / "lab")
    yield opened
    opened.close()


def test_a_posttrain_campaign_is_refused_without_its_runtime(lab: Lab, tmp_path: Path) -> None:
    with pytest.raises(RuntimeMissingError) as caught:
        rsilab.run("posttrain", budget="experiments=1", lab=lab.path)
    assert caught.value.hint == "run `rsilab runtime install --task posttrain`"
    assert "\n" not in str(caught.value)
    assert str(tmp_path / "rt-") in caught.value.message, "it names where it looked"
    assert lab.store.query_as(Campaign) == [], "refused before anything was written"


def test_digits_keeps_the_base_runtime(lab: Lab) -> None:
    services = LabServices(lab)
    try:
        assert services.use_task(get_task("digits")).path == current_runtime().path
        assert runtime_settings(lab, get_task("digits"), services) == {}
    finally:
        services.close()


def test_the_base_model_is_stored_and_recorded_in_the_campaign(lab: Lab) -> None:
    task = get_task("posttrain")
    runtime = fake_task_runtime(task.runtime_requirements, PAYLOAD, str(task.build_id()))
    services = LabServices(lab)
    try:
        settings = runtime_settings(lab, task, services)
        assert services.runtime.path == runtime.path, "the services' jobs run in it"
    finally:
        services.close()
    digest = hashlib.sha256(PAYLOAD).hexdigest()
    assert settings["runtime"]["built"] == {"base": digest}
    assert settings["runtime"]["path"] == str(runtime.path)
    assert lab.artifacts.read_bytes(digest) == PAYLOAD, "the bytes are in the artifact store"
    campaign = open_campaign(lab.store, task.ref(), settings=settings)
    check_same_runtime(campaign, settings)  # resuming with the same bytes is fine


def test_a_base_model_changed_after_the_install_fails_closed(lab: Lab) -> None:
    task = get_task("posttrain")
    runtime = fake_task_runtime(task.runtime_requirements, PAYLOAD, str(task.build_id()))
    (runtime.path / "share" / "base.bin").write_bytes(b"rebuilt elsewhere")
    services = LabServices(lab)
    try:
        with pytest.raises(BuiltFileChanged) as caught:
            runtime_settings(lab, task, services)
    finally:
        services.close()
    assert "changed since its runtime was installed" in caught.value.message
    assert (
        caught.value.hint
        == "run `rsilab runtime install --task posttrain --force` to build it again"
    )


def test_a_campaign_resumed_with_other_base_bytes_is_refused(lab: Lab) -> None:
    started = {"runtime": {"built": {"base": "a" * 64}}}
    campaign = open_campaign(lab.store, get_task("posttrain").ref(), settings=started)
    with pytest.raises(UserError, match="started with other base bytes"):
        check_same_runtime(campaign, {"runtime": {"built": {"base": "b" * 64}}})


def test_services_running_jobs_in_one_runtime_refuse_a_task_of_another(
    lab: Lab, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RSILAB_SANDBOX", "process")  # made without bubblewrap's probe job
    task = get_task("posttrain")
    runtime = fake_task_runtime(task.runtime_requirements, PAYLOAD, str(task.build_id()))
    services = LabServices(lab, allow_unsandboxed=True)
    try:
        assert services.use_task(task).path == runtime.path
        executor = services.executor  # made now: its jobs run in posttrain's runtime
        assert isinstance(executor, LocalExecutor)
        assert isinstance(executor.sandbox, ProcessSandbox)
        assert executor.sandbox.runtime.path == runtime.path
        with pytest.raises(UserError, match="needs the runtime at"):
            services.use_task(get_task("digits"))
    finally:
        services.close()


def test_a_task_runtime_is_refused_on_a_callers_executor_of_another(lab: Lab) -> None:
    task = get_task("posttrain")
    fake_task_runtime(task.runtime_requirements, PAYLOAD, str(task.build_id()))
    executor = LocalExecutor(ProcessSandbox(current_runtime()), lab.artifacts)
    services = LabServices(lab, executor)
    try:
        with pytest.raises(UserError, match="already runs its jobs in the one at"):
            services.use_task(task)
        assert services.use_task(get_task("digits")).path == current_runtime().path
    finally:
        services.close()
        executor.shutdown()


def test_posttrain_runtime_is_keyed_apart_from_the_base_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("RSILAB_RUNTIME", raising=False)
    task = get_task("posttrain")
    runtime = task_runtime(task.runtime_requirements, build_id=task.build_id())
    assert runtime.path != task_runtime(()).path
    assert runtime.extra == ("transformers==5.24.0", "tokenizers==0.23.3", "peft==0.21.2")
    assert task.runtime() == runtime
    # the build that made its base is named by its variant, the corpus's pin and the
    # builder's source
    said = r"(full|tiny) base, corpus ([0-9a-f]{12}), build [0-9a-f]{12}"
    found = re.fullmatch(said, str(task.build_id()))
    assert found is not None and found[2] == _corpus_sha()[:12]


def test_the_tiny_base_of_a_test_suite_never_passes_for_the_full_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from rsilab.tasks.builtin.posttrain import _base

    monkeypatch.delenv("RSILAB_POSTTRAIN_BASE", raising=False)
    full = _base.build_id()
    monkeypatch.setenv("RSILAB_POSTTRAIN_BASE", "tiny")
    tiny = _base.build_id()
    assert full.startswith("full base, ") and tiny == "tiny" + full.removeprefix("full")
    monkeypatch.setenv("RSILAB_POSTTRAIN_BASE", "huge")
    with pytest.raises(UserError, match="RSILAB_POSTTRAIN_BASE='huge' names no posttrain base"):
        _base.build_id()


def _corpus_sha() -> str:
    """The corpus's sha256, computed here from its text."""
    from rsilab.tasks.builtin.posttrain import _corpus

    return hashlib.sha256(_corpus.corpus("full").encode()).hexdigest()


def test_the_posttrain_extra_pins_what_the_runtime_pins() -> None:
    # The test process builds small models with the dev venv's transformers: it must be the
    # version posttrain's jobs run with, or a test passes on a library its jobs never see.
    import tomllib

    pyproject = tomllib.loads((Path(__file__).parents[2] / "pyproject.toml").read_text())
    extras = pyproject["project"]["optional-dependencies"]
    runtime = set(get_task("posttrain").runtime_requirements)
    assert runtime >= {"transformers==5.24.0", "tokenizers==0.23.3", "peft==0.21.2"}
    assert set(extras["posttrain"]) == runtime
    assert runtime <= set(extras["dev"])
