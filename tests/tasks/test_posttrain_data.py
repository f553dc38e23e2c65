"""posttrain's generated tiers: deterministic under a secret, disjoint, within the size caps;
the corpus pinned by its hash."""

from __future__ import annotations

import hashlib
import re

from rsilab.records import DataTier
from rsilab.tasks import TIERS, get_task, make_splits
from rsilab.tasks.builtin.posttrain import _code, _corpus, _world

SECRET_A = bytes(range(32))
SECRET_B = bytes(range(1, 33))
NAME = re.compile(r"\b[A-Z][a-z]{3,}\b")


KNOWN = frozenset(_world.people()) | {e.name for e in _world.entities()}


def _names(question: str) -> set[str]:
    return set(NAME.findall(question)) & KNOWN


def test_the_five_benchmarks_and_their_scorers() -> None:
    task = get_task("posttrain")
    assert [(b.name, b.scorer, b.target, b.tolerance) for b in task.benchmarks] == [
        ("arith", "number_match", True, 0.0),
        ("fncall", "json_call", False, 0.05),  # five items in a hundred may be lost, no more
        ("facts", "short_answer", False, 0.05),
        ("choice", "choice_letter", False, 0.05),
        ("code", "python_tests", False, 0.05),
    ]
    assert task.runtime_requirements == [
        "transformers==5.24.0",
        "tokenizers==0.23.3",
        "peft==0.21.2",
    ]


def test_tiers_are_deterministic_under_a_secret_and_differ_under_another() -> None:
    task = get_task("posttrain")
    for bench in task.benchmarks:
        first = make_splits(task, bench, SECRET_A)
        again = make_splits(task, bench, SECRET_A)
        other = make_splits(task, bench, SECRET_B)
        assert first == again
        assert [s.input for s in first[DataTier.FINAL]] != [s.input for s in other[DataTier.FINAL]]


def test_tiers_are_disjoint_by_entity_and_within_the_caps() -> None:
    task = get_task("posttrain")
    for bench in task.benchmarks:
        splits = make_splits(task, bench, SECRET_A)
        assert {t: len(splits[t]) for t in TIERS} == {
            DataTier.TRAIN: 300, DataTier.DEV: 100, DataTier.ACCEPT: 150, DataTier.FINAL: 150,
        }  # fmt: skip
        seen: dict[str, DataTier] = {}
        for tier in TIERS:
            for sample in splits[tier]:
                names = _names(str(sample.input["question"]))  # type: ignore[index,call-overload]
                named = bench.name in ("arith", "facts", "choice")  # code: its own test below
                if named or (bench.name == "fncall" and "to " in str(sample.input)):
                    assert names, f"{bench.name}: no entity in {sample.input}"
                for name in names:
                    assert seen.setdefault(name, tier) == tier, f"{name} in two tiers"


def test_no_private_question_is_also_a_public_one() -> None:
    # a request naming nobody (a timer, a song) has no entity to split by: its own text does
    task = get_task("posttrain")
    for secret in (SECRET_A, SECRET_B):
        for bench in task.benchmarks:
            splits = make_splits(task, bench, secret)
            public = {
                str(s.input["question"])  # type: ignore[index,call-overload]
                for tier in (DataTier.TRAIN, DataTier.DEV)
                for s in splits[tier]
            }
            for tier in (DataTier.ACCEPT, DataTier.FINAL):
                shared = [
                    s.input
                    for s in splits[tier]
                    if str(s.input["question"]) in public  # type: ignore[index,call-overload]
                ]
                assert shared == [], f"{bench.name} {tier.value}: {shared[:3]}"


def test_arithmetic_targets_are_the_computed_answers() -> None:
    task = get_task("posttrain")
    splits = make_splits(task, task.benchmark("arith"), SECRET_A)
    for sample in splits[DataTier.DEV]:
        a, b = (int(x) for x in re.findall(r"\d+", str(sample.input["question"])))  # type: ignore[index,call-overload]
        assert int(str(sample.target)) in {a + b, a - b, a * b}


def test_code_items_ask_for_the_function_their_tests_check() -> None:
    task = get_task("posttrain")
    splits = make_splits(task, task.benchmark("code"), SECRET_A)
    for sample in splits[DataTier.DEV]:
        target = sample.target
        assert isinstance(target, dict) and isinstance(sample.input, dict)
        entry, answer = str(target["entry"]), str(target["answer"])
        assert f"{entry}(" in str(sample.input["question"])
        assert answer.startswith(f"def {entry}(")
        scope: dict[str, object] = {}
        exec(answer, scope)  # the reference program passes its own tests
        for line in target["tests"]:  # type: ignore[union-attr]
            exec(str(line), scope)
    first = make_splits(task, task.benchmark("code"), SECRET_A)
    entries = {t: {s.target["entry"] for s in first[t]} for t in TIERS}  # type: ignore[index,call-overload]
    assert all(entries[a].isdisjoint(entries[b]) for a in TIERS for b in TIERS if a != b)


def test_a_code_function_computes_what_its_spec_says() -> None:
    fn = _code.CodeFunction("x", ((0, 7), (2, 3)))
    assert fn.name == "add_7_mul_3"
    assert fn.spec == "x plus 7, then times 3"
    assert fn.source == "def add_7_mul_3(x):\n    return (x + 7) * 3"
    assert fn.tests() == [
        "assert add_7_mul_3(0) == 21",
        "assert add_7_mul_3(3) == 30",
        "assert add_7_mul_3(10) == 51",
    ]


def test_the_corpus_is_pinned_and_never_asks_the_target_in_its_format() -> None:
    text = _corpus.corpus("full")
    assert len(text) > 1_000_000
    assert (
        hashlib.sha256(text.encode()).hexdigest()
        == _corpus.CORPUS_SHA256
        == ("e231338de7d6bc180ecc79ad46af50542f894715a05243428ca7b60eb57ead02")
    )
    quiz = [d for d in text.split(_corpus.DOC_SEPARATOR) if d.startswith("Question:")]
    assert quiz, "quiz sheets for the non-target kinds"
    assert "How many" not in text, "no arithmetic question is ever asked in the corpus"
    dev = {e.name for e in _world.entities_in(DataTier.DEV)}
    asked = set(re.findall(r"does (\w+son)|of (\w+son)\?", "\n".join(quiz)))
    assert not {n for pair in asked for n in pair} & dev, "quiz sheets name train entities only"
