"""Code variants: declared in a task (Python or task.toml), applied exactly, checked by task
check."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from rsilab.tasks import (
    CodeEdit,
    CodeVariant,
    Knob,
    KnobType,
    VariantError,
    apply_variant,
    check_task,
    get_task,
    load_toml,
)
from tests.tasks.conftest import write_small_task

FILES = {"predict.py": "a = 1\nb = 2\n", "util.py": "def f():\n    return 0\n"}


def _variant(*edits: tuple[str, str, str], name: str = "v") -> CodeVariant:
    return CodeVariant(name=name, edits=[CodeEdit(path=p, old=o, new=n) for p, o, n in edits])


def test_edits_replace_their_text_in_each_file_read_once() -> None:
    reads: list[str] = []

    def read(path: str) -> str:
        reads.append(path)
        return FILES[path]

    variant = _variant(
        ("predict.py", "a = 1", "a = 10"),
        ("predict.py", "b = 2", "b = 20"),
        ("util.py", "return 0", "return 5"),
    )
    assert apply_variant(variant, read) == {
        "predict.py": "a = 10\nb = 20\n",
        "util.py": "def f():\n    return 5\n",
    }
    assert reads == ["predict.py", "util.py"]


def test_a_system_that_holds_the_variant_already_is_left_as_it_is() -> None:
    variant = _variant(("predict.py", "a = 1\n", "a = 7\n"))
    assert apply_variant(variant, lambda _: "a = 7\nb = 2\n") == {"predict.py": "a = 7\nb = 2\n"}


@pytest.mark.parametrize(
    ("text", "said"), [("b = 2\n", "not found"), ("a = 1\na = 1\n", "found 2 times")]
)
def test_a_variant_that_does_not_fit_the_code_says_where(text: str, said: str) -> None:
    with pytest.raises(VariantError, match=rf"'v' does not fit predict\.py: .* is {said}"):
        apply_variant(_variant(("predict.py", "a = 1\n", "a = 3\n")), lambda _: text)


@pytest.mark.parametrize(
    ("name", "edits", "said"),
    [
        ("head", [("p.py", "x", "y")], "names the unchanged system"),
        ("Bad-Name", [("p.py", "x", "y")], "pattern"),
        ("v", [], "at least 1"),
        ("v", [("../p.py", "x", "y")], "inside the harness"),
        ("v", [("/etc/p.py", "x", "y")], "inside the harness"),
        ("v", [("p.py", "x", "x")], "must change something"),
    ],
)
def test_malformed_variants_are_refused(
    name: str, edits: list[tuple[str, str, str]], said: str
) -> None:
    with pytest.raises(ValidationError, match=said):
        CodeVariant(name=name, edits=[CodeEdit(path=p, old=o, new=n) for p, o, n in edits])


def test_a_task_refuses_repeated_variant_names_and_a_knob_named_like_the_choice() -> None:
    task = get_task("kernel")
    twice = [*task.code_variants, task.code_variants[0]]
    with pytest.raises(ValidationError, match="repeated: " + task.code_variants[0].name):
        task.model_validate({**dict(task), "code_variants": twice})
    knob = Knob(name="code_variant", type=KnobType.CHOICE, choices=["a"], default="a")
    with pytest.raises(ValidationError, match="may not have a knob named 'code_variant'"):
        task.model_validate({**dict(task), "search_space": [knob]})


def test_variants_change_the_task_digest_and_none_leave_the_old_one() -> None:
    task = get_task("kernel")
    plain = task.model_copy(update={"code_variants": []})
    fewer = task.model_copy(update={"code_variants": task.code_variants[:1]})
    assert len({task.digest(), plain.digest(), fewer.digest()}) == 3
    assert "code_variants" not in plain.model_dump_json(exclude_defaults=True)


def test_task_toml_declares_variants_and_task_check_finds_one_that_does_not_fit(
    tmp_path: Path,
) -> None:
    extra = """
[[code_variants]]
name = "always_odd"
description = "answer 1 for everything"
[[code_variants.edits]]
path = "predict.py"
old = "item[\\"input\\"][\\"x\\"] % 2"
new = "1"

[[code_variants]]
name = "stale"
[[code_variants.edits]]
path = "predict.py"
old = "text the harness does not hold"
new = "anything"
"""
    path = write_small_task(tmp_path / "t", toml_extra=extra)
    task = load_toml(path)
    assert [v.name for v in task.code_variants] == ["always_odd", "stale"]
    problems = [p for p in check_task(task, None, b"s" * 32) if p.severity == "error"]
    assert [p.where for p in problems] == ["code_variants.stale"]
    assert "not found" in problems[0].message
    fixed = apply_variant(task.code_variants[0], lambda p: (task.harness / p).read_text())
    assert '"output": 1}' in fixed["predict.py"]


def test_the_kernel_variants_fit_the_shipped_kernel_and_stay_correct() -> None:
    np = pytest.importorskip("numpy")
    task = get_task("kernel")
    source = (task.harness / "kernel.py").read_text()
    x = np.random.default_rng(7).standard_normal(3000)
    shipped: dict[str, object] = {}
    exec(source, shipped)
    want = np.array([x[max(0, i - 15) : i + 1].mean() for i in range(len(x))])  # the contract
    assert np.allclose(shipped["kernel"](x), want, rtol=1e-7, atol=1e-9)  # type: ignore[operator]
    for variant in task.code_variants:
        code = apply_variant(variant, lambda p: (task.harness / p).read_text())["kernel.py"]
        space: dict[str, object] = {}
        exec(code, space)
        got = space["kernel"](x)  # type: ignore[operator]
        assert np.allclose(got, want, rtol=1e-7, atol=1e-9), variant.name
