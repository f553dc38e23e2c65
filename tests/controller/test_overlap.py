"""The overlap guard: private samples found exactly or nearly; public data never trips it."""

from __future__ import annotations

import json
import random
import shutil
from collections.abc import Sequence
from functools import cache
from pathlib import Path

import pytest

from rsilab.controller.overlap import OverlapHit, PrivateIndex
from rsilab.records import DataTier
from rsilab.tasks import (
    Benchmark,
    GeneratedSplits,
    Sample,
    Splits,
    Task,
    get_task,
    make_splits,
    plant_traps,
    write_jsonl,
)

SECRET = bytes(range(32))
PUBLIC = (DataTier.TRAIN, DataTier.DEV)
PHRASE = "please label the following short note written about"
WORDS = [f"{a}{b}" for a in ("ka", "lo", "mi", "ne", "pu", "ro", "si", "tu") for b in "aeiou"]


def _notes(tier: DataTier, seed: int) -> Sequence[Sample]:
    """Notes of 40 random words after a phrase every tier shares."""
    rng = random.Random(seed)
    return [
        Sample(id=f"note-{i}", input=f"{PHRASE} " + " ".join(rng.choices(WORDS, k=40)), target=0)
        for i in range(12)
    ]


def notes_task() -> Task:
    """A hand-made task whose inputs are texts."""
    return Task(
        name="notes",
        goal="Label notes.",
        harness=Path("harness"),
        benchmarks=[
            Benchmark(
                name="notes",
                scorer="accuracy",
                target=True,
                samples=GeneratedSplits(name="notes", generate=_notes),
            )
        ],
    )


@cache
def _built(name: str) -> tuple[Task, PrivateIndex, dict[str, Splits]]:
    task = notes_task() if name == "notes" else get_task(name)
    splits = {bench.name: make_splits(task, bench, SECRET) for bench in task.benchmarks}
    return task, PrivateIndex.build(task, SECRET), splits


def ids(hits: Sequence[OverlapHit]) -> set[tuple[str, str, str]]:
    return {(h.benchmark, h.sample_id, h.kind) for h in hits}


@pytest.mark.parametrize("name", ["digits", "synthetic"])
def test_planted_trap_gives_every_final_sample_as_an_exact_hit(name: str, tmp_path: Path) -> None:
    task, index, splits = _built(name)
    workspace = tmp_path / "ws"
    shutil.copytree(task.harness, workspace)
    (planted,) = plant_traps(task, workspace, SECRET, splits)
    final = splits[task.targets[0].name][DataTier.FINAL]

    hits = index.scan_tree(workspace)

    relative = planted.relative_to(workspace).as_posix()
    expected = [
        OverlapHit(task.targets[0].name, DataTier.FINAL, s.id, "exact", f"{relative}:{n}", 1.0)
        for n, s in enumerate(final, 1)
    ]
    exact = [h for h in hits if h.kind == "exact"]
    assert sorted(exact, key=lambda h: int(h.where.rsplit(":")[1])) == expected
    # Besides, near-duplicates of accept samples among the final ones (sklearn's digits has
    # some) are reported as such: the leaked file would help on accept too.
    assert {h.tier for h in hits if h.kind == "near"} <= {DataTier.ACCEPT}
    assert hits == sorted(hits, key=lambda h: (h.benchmark, h.tier, h.sample_id, h.where))


@pytest.mark.parametrize("name", ["digits", "synthetic", "notes"])
def test_public_tiers_in_any_form_give_no_hits(name: str, tmp_path: Path) -> None:
    _, index, splits = _built(name)
    public = [s for tiers in splits.values() for tier in PUBLIC for s in tiers[tier]]
    write_jsonl(tmp_path / "train.jsonl", public)
    (tmp_path / "inputs.json").write_text(json.dumps([s.input for s in public], indent=1))
    (tmp_path / "flat.txt").write_text(
        "\n".join(s.input if isinstance(s.input, str) else json.dumps(s.input) for s in public)
    )
    assert index.scan_tree(tmp_path) == []


def test_a_common_phrase_alone_is_no_near_hit() -> None:
    _, index, _ = _built("notes")
    assert index.scan_bytes((PHRASE + "\n").encode() * 1000, "phrases") == []


def test_digit_with_two_of_64_numbers_changed_is_a_near_hit() -> None:
    _, index, splits = _built("digits")
    chosen = splits["accuracy"][DataTier.FINAL][:10]
    rows = []
    for sample in chosen:
        assert isinstance(sample.input, list)
        pixels = [int(str(v)) for v in sample.input]
        for position in (21, 42):
            pixels[position] = (pixels[position] + 5) % 17
        rows.append(json.dumps({"id": "mine", "input": pixels, "target": sample.target}))

    hits = index.scan_bytes("\n".join(rows).encode(), "data/augmented.jsonl")

    assert ids(hits) == {("accuracy", s.id, "near") for s in chosen}
    assert {h.where for h in hits} == {f"data/augmented.jsonl:{n}" for n in range(1, 11)}
    assert all(0.5 <= h.share <= 1.0 for h in hits)
    assert min(h.share for h in hits) < 1.0


def test_digit_written_as_float_csv_is_a_near_hit() -> None:
    _, index, splits = _built("digits")
    sample = splits["accuracy"][DataTier.ACCEPT][3]
    assert isinstance(sample.input, list)
    row = ",".join(f"{float(str(v)):.1f}" for v in sample.input)

    hits = index.scan_bytes(f"x0,x1\n{row}\n".encode(), "pixels.csv")

    assert [(h.sample_id, h.kind, h.where, h.share) for h in hits] == [
        (sample.id, "near", "pixels.csv:2", 1.0)
    ]


def test_text_with_two_words_changed_and_rewrapped_is_a_near_hit() -> None:
    _, index, splits = _built("notes")
    sample = splits["notes"][DataTier.ACCEPT][5]
    assert isinstance(sample.input, str)
    words = sample.input.upper().split()
    words[12], words[30] = "changed", "words"
    lines = [" ".join(words[i : i + 9]) for i in range(0, len(words), 9)]

    hits = index.scan_bytes(("intro\n" + "\n".join(lines)).encode(), "notes.txt")

    assert [(h.sample_id, h.kind, h.where) for h in hits] == [(sample.id, "near", "notes.txt:2")]
    assert 0.5 <= hits[0].share < 1.0


def test_near_needs_half_of_the_private_windows() -> None:
    _, index, splits = _built("notes")
    sample = splits["notes"][DataTier.ACCEPT][0]
    assert isinstance(sample.input, str)
    words = sample.input.split()  # 47 words: 40 private-specific windows at most

    def found(count: int) -> list[str]:
        return [h.sample_id for h in index.scan_bytes(" ".join(words[:count]).encode(), "t")]

    assert found(len(words)) == [sample.id]
    assert found(32) == [sample.id]  # 25 windows
    assert found(20) == []  # 13 windows: under half


def test_text_reflowed_inside_a_json_string_is_a_near_hit() -> None:
    """JSON escapes (\\n) separate words as the newlines they stand for do."""
    _, index, splits = _built("notes")
    sample = splits["notes"][DataTier.FINAL][9]
    assert isinstance(sample.input, str)
    words = sample.input.split()
    words[20] = "edited"
    row = json.dumps({"text": "\n".join(words), "label": 1})

    hits = index.scan_bytes(f"{row}\n".encode(), "rows.jsonl")

    assert [(h.sample_id, h.kind, h.where) for h in hits] == [(sample.id, "near", "rows.jsonl:1")]


def test_text_input_as_a_plain_line_is_an_exact_hit() -> None:
    _, index, splits = _built("notes")
    sample = splits["notes"][DataTier.FINAL][0]
    data = f"# notes\n  {sample.input}  \nthe end\n".encode()

    hits = index.scan_bytes(data, "notes.md")

    assert [(h.sample_id, h.tier, h.kind, h.where) for h in hits] == [
        (sample.id, DataTier.FINAL, "exact", "notes.md:2")
    ]


def test_private_samples_hidden_in_a_json_document(tmp_path: Path) -> None:
    _, digits, digit_splits = _built("digits")
    _, notes, note_splits = _built("notes")
    image = digit_splits["accuracy"][DataTier.FINAL][7]
    note = note_splits["notes"][DataTier.ACCEPT][2]
    public = [s.model_dump() for s in digit_splits["accuracy"][DataTier.TRAIN][:50]]
    doc = {
        "meta": {"source": "mine", "labels": {note.input: 3}},
        "rows": [*public, {"extra": {"deep": [[image.input]]}}],
    }
    (tmp_path / "doc.json").write_text(json.dumps(doc, indent=2))

    assert ids(digits.scan_tree(tmp_path)) == {("accuracy", image.id, "exact")}
    assert [(h.sample_id, h.where) for h in notes.scan_tree(tmp_path)] == [(note.id, "doc.json")]


def test_binary_looking_files_cannot_hide_a_leak(tmp_path: Path) -> None:
    _, index, splits = _built("synthetic")
    final = splits["quality"][DataTier.FINAL][:5]
    jsonl = "".join(s.model_dump_json() + "\n" for s in final)
    (tmp_path / "nul.bin").write_bytes(b"\0" + jsonl.encode())
    (tmp_path / "latin.txt").write_bytes(b"\xff\xfe" + jsonl.encode())

    hits = index.scan_tree(tmp_path)
    exact = {h.sample_id for h in hits if h.kind == "exact" and h.where.startswith("nul.bin")}
    assert exact == {s.id for s in final}
    # stray bytes spoil only the line they sit on
    latin = {h.sample_id for h in hits if h.where.startswith("latin.txt")}
    assert latin >= {s.id for s in final[1:]}
    assert len(index.scan_bytes(b"\0\n" + jsonl.encode(), "blob")) == 5


def test_empty_folder_gives_no_hits_and_a_missing_one_raises(tmp_path: Path) -> None:
    _, index, _ = _built("synthetic")
    assert index.scan_tree(tmp_path) == []
    with pytest.raises(NotADirectoryError):
        index.scan_tree(tmp_path / "missing")


def test_symlinks_are_not_followed(tmp_path: Path) -> None:
    _, index, splits = _built("synthetic")
    outside = tmp_path / "outside.jsonl"
    write_jsonl(outside, splits["quality"][DataTier.FINAL])
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "link.jsonl").symlink_to(outside)
    assert index.scan_tree(workspace) == []


def test_large_files_are_scanned_in_chunks_with_the_same_hits(tmp_path: Path) -> None:
    task, index, splits = _built("digits")
    (planted,) = plant_traps(task, tmp_path, SECRET, splits)
    with planted.open("a") as stream:
        stream.write("\n".join(["filler " * 50] * 40) + "\n")
        stream.write(json.dumps(splits["accuracy"][DataTier.ACCEPT][0].input) + "\n")

    whole = index.scan_tree(tmp_path)
    chunked = index.scan_tree(tmp_path, max_file_bytes=1000)

    final = splits["accuracy"][DataTier.FINAL]
    assert chunked == whole
    assert len([h for h in whole if h.kind == "exact"]) == len(final) + 1
    accept = splits["accuracy"][DataTier.ACCEPT][0].id
    assert [h.where for h in whole if h.sample_id == accept] == [
        f"data/test_labels.jsonl:{len(final) + 41}"
    ]


def test_same_secret_same_hits_other_secret_other_ids(tmp_path: Path) -> None:
    task, index, splits = _built("synthetic")
    write_jsonl(tmp_path / "leak.jsonl", splits["robustness"][DataTier.ACCEPT])
    again = PrivateIndex.build(task, SECRET)
    other = PrivateIndex.build(task, b"another secret")

    hits = index.scan_tree(tmp_path)
    assert again.scan_tree(tmp_path) == hits
    assert {h.sample_id for h in hits} == {s.id for s in splits["robustness"][DataTier.ACCEPT]}
    assert {h.tier for h in hits} == {DataTier.ACCEPT}
    assert not {h.sample_id for h in other.scan_tree(tmp_path)} & {h.sample_id for h in hits}


def test_shingle_must_be_positive() -> None:
    with pytest.raises(ValueError, match="shingle"):
        PrivateIndex.build(notes_task(), SECRET, shingle=0)


@pytest.mark.parametrize("scale", [1 / 16, 0.1, 3.0, 255 / 16])
def test_every_private_digit_rescaled_is_a_scaled_hit(scale: float) -> None:
    """Pixels multiplied by a constant share no byte or token with the original; the scaled
    key finds every one of them (so no private digit's key was dropped as public)."""
    _, index, splits = _built("digits")
    private = [s for tier in (DataTier.ACCEPT, DataTier.FINAL) for s in splits["accuracy"][tier]]
    rows = []
    for sample in private:
        assert isinstance(sample.input, list)
        pixels = [round(float(str(v)) * scale, 4) for v in sample.input]
        rows.append(json.dumps({"id": "mine", "input": pixels, "target": sample.target}))

    hits = index.scan_bytes("\n".join(rows).encode(), "data/more_digits.jsonl")

    assert ids(hits) == {("accuracy", s.id, "scaled") for s in private}
    assert all(h.share == 1.0 for h in hits)


def test_public_digits_rescaled_give_no_hits() -> None:
    """No train or dev digit is proportional to a private one, so rescaling the public tiers
    (what a legitimate normalisation step writes) never trips the guard."""
    _, index, splits = _built("digits")
    public = [s for tier in PUBLIC for s in splits["accuracy"][tier]]
    rows = [json.dumps([float(str(v)) / 16 for v in s.input]) for s in public]  # type: ignore[union-attr]
    assert index.scan_bytes("\n".join(rows).encode(), "normalised.jsonl") == []


def test_an_exact_copy_is_reported_once_as_exact() -> None:
    _, index, splits = _built("digits")
    sample = splits["accuracy"][DataTier.FINAL][4]
    hits = index.scan_bytes(json.dumps(sample.input).encode(), "one.json")
    assert [(h.sample_id, h.kind) for h in hits] == [(sample.id, "exact")]


def test_short_or_non_numeric_lists_have_no_scaled_key() -> None:
    _, index, splits = _built("digits")
    sample = splits["accuracy"][DataTier.FINAL][0]
    assert isinstance(sample.input, list)
    doubled = [2 * int(str(v)) for v in sample.input]
    assert [h.kind for h in index.scan_bytes(json.dumps(doubled).encode(), "x")] == ["scaled"]
    for data in ([0] * 64, [True] * 64, [1.0, 2.0, 3.0], ["1"] * 64, [1e308, -1e308] * 32):
        assert index.scan_bytes(json.dumps(data).encode(), "x") == []


# A generated benchmark of orders: a dish from a pool of twelve every tier shares, for the
# corner table or for a customer, one of each tier's own six. The lab's public draw is six
# orders: most dishes are in no public item of it, only in private ones; a customer of a
# private tier never is in a public item.
DISHES = ["soup", "rice", "stew", "pie", "curry", "salad", "bread", "tart", "flan", "ragu",
          "pho", "dal"]  # fmt: skip
CUSTOMERS = {tier: [f"{tier.value}{name}" for name in ("ann", "bo", "cy", "di", "ed", "flo")]
             for tier in DataTier}  # fmt: skip


def _orders(tier: DataTier, seed: int) -> Sequence[Sample]:
    rng = random.Random(seed)
    samples = []
    for i in range(3 if tier in PUBLIC else 40):
        whom = rng.choice(["the corner table", rng.choice(CUSTOMERS[tier])])
        text = f"please send {rng.randint(2, 99)} plates of {rng.choice(DISHES)} to {whom} today"
        samples.append(Sample(id=f"order-{i}", input=text, target=0))
    return samples


def test_a_pool_value_the_labs_public_draw_missed_is_no_private_entity(tmp_path: Path) -> None:
    task = notes_task().model_copy(
        update={"benchmarks": [Benchmark(name="orders", scorer="accuracy", target=True,
                                         samples=GeneratedSplits(name="orders", generate=_orders))]}
    )  # fmt: skip
    splits = make_splits(task, task.benchmarks[0], SECRET)
    public_words = {w for tier in PUBLIC for s in splits[tier] for w in str(s.input).split()}
    private = [str(s.input) for tier in (DataTier.ACCEPT, DataTier.FINAL) for s in splits[tier]]
    table = [o for o in private if "corner" in o and o.split()[5] not in public_words]
    named = [o for o in private if "corner" not in o]
    assert table and named, "the lab's draw leaves some dish to private orders alone"
    index = PrivateIndex.build(task, SECRET)

    def found(order: str) -> set[str]:
        words = order.split()
        words[2] = str(int(words[2]) + 100)  # a number no order has
        (tmp_path / "data.txt").write_text(" ".join(words) + "\n")
        return {h.kind for h in index.scan_tree(tmp_path)}

    # an order of such a dish for the table, its number changed: an order anyone can draw
    assert all(found(order) == set() for order in table)
    # an order for a private customer, its number changed: that private item, found
    assert all(found(order) & {"entity", "near"} for order in named)
