"""Splits: deterministic per secret, different across secrets, private tiers kept apart."""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path

import pytest

from rsilab.errors import LabError
from rsilab.records import DataTier
from rsilab.tasks import (
    TIERS,
    Sample,
    SplitError,
    content_hash,
    derive_seed,
    get_task,
    lab_secret,
    load_task,
    make_splits,
    public_draws,
    read_jsonl,
    write_data_dir,
)


@pytest.mark.parametrize("name", ["digits", "kernel", "policy", "synthetic"])
def test_builtin_splits_are_deterministic_and_disjoint(name: str, secret: bytes) -> None:
    task = get_task(name)
    for bench in task.benchmarks:
        first = make_splits(task, bench, secret)
        again = make_splits(task, bench, secret)
        other = make_splits(task, bench, b"another secret")
        assert first == again
        assert first[DataTier.ACCEPT] != other[DataTier.ACCEPT]
        assert all(first[tier] for tier in TIERS)
        public = {content_hash(s) for t in (DataTier.TRAIN, DataTier.DEV) for s in first[t]}
        for tier in (DataTier.ACCEPT, DataTier.FINAL):
            assert not public & {content_hash(s) for s in first[tier]}
            assert all(s.id.startswith("s-") for s in first[tier])


def test_pool_partition_uses_every_item_once(secret: bytes) -> None:
    task = get_task("digits")
    splits = make_splits(task, task.benchmarks[0], secret)
    sizes = {tier: len(splits[tier]) for tier in TIERS}
    assert sum(sizes.values()) == 1797
    assert sizes[DataTier.TRAIN] > sizes[DataTier.DEV] > sizes[DataTier.FINAL] > 0
    targets = {s.target for s in splits[DataTier.FINAL]}
    assert targets == set(range(10))


def test_file_splits_read_and_every_id_rekeyed(small_task: Path, secret: bytes) -> None:
    task = load_task(small_task)
    splits = make_splits(task, task.benchmarks[0], secret)
    train = [s.id for s in splits[DataTier.TRAIN]]
    assert train[:2] != ["train-0", "train-1"]
    assert all(re.fullmatch(r"s-[0-9a-f]{12}", i) for i in train)
    assert all(not s.id.startswith("final-0") for s in splits[DataTier.FINAL][1:])
    assert splits[DataTier.FINAL][0].input == {"x": 300, "note": "item 0 of final"}


@pytest.mark.parametrize("name", ["digits", "kernel", "policy", "synthetic", "textcls"])
def test_every_builtin_sample_id_is_an_opaque_keyed_hash(name: str, secret: bytes) -> None:
    """An id says nothing of the source row (digit-17, a docstring's digest, n512): it is
    s-<12 hex digits> under the secret, the same form in every tier (an id does not tell a
    private tier from dev), and another secret gives other ids."""
    task = get_task(name)
    for bench in task.benchmarks:
        first = make_splits(task, bench, secret)
        other = make_splits(task, bench, b"another secret")
        for tier in TIERS:
            ids = [s.id for s in first[tier]]
            assert all(re.fullmatch(r"s-[0-9a-f]{12}", i) for i in ids), ids[:3]
            assert len(set(ids)) == len(ids)
            assert not set(ids) & {s.id for s in other[tier]}
        every = [s.id for tier in TIERS for s in first[tier]]
        assert len(set(every)) == len(every)  # unique across tiers too


def test_read_jsonl_names_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text('{"id": "a", "input": 1}\n{"input": 2}\n')
    with pytest.raises(SplitError, match=r"bad.jsonl:2: id: Field required"):
        read_jsonl(path)
    with pytest.raises(SplitError, match="cannot read"):
        read_jsonl(tmp_path / "missing.jsonl")


def test_private_tiers_never_go_to_a_data_dir(tmp_path: Path) -> None:
    sample = Sample(id="a", input=1, target=2)
    written = write_data_dir(tmp_path / "d", {DataTier.TRAIN: [sample]})
    assert [p.name for p in written] == ["train.jsonl"]
    with pytest.raises(ValueError, match="private tier"):
        write_data_dir(tmp_path / "d", {DataTier.FINAL: [sample]})


def test_lab_secret_is_created_once_private_and_checked(tmp_path: Path) -> None:
    first = lab_secret(tmp_path)
    assert len(first) == 32 and lab_secret(tmp_path) == first
    mode = stat.S_IMODE(os.stat(tmp_path / "task-secret").st_mode)
    assert mode == 0o600
    (tmp_path / "task-secret").write_text("short")
    with pytest.raises(LabError, match="unreadable or damaged"):
        lab_secret(tmp_path)


def test_derived_seeds_differ_by_every_part(secret: bytes) -> None:
    seeds = {derive_seed(secret, "t", "b", tier.value) for tier in TIERS}
    assert len(seeds) == 4
    assert derive_seed(secret, "t", "b") != derive_seed(b"x", "t", "b")
    assert 0 <= derive_seed(secret, "x") < 2**63


def test_public_draws_are_public_tier_items_no_secret_chooses() -> None:
    from rsilab.tasks import Benchmark, GeneratedSplits

    asked: list[tuple[DataTier, int]] = []

    def generate(tier: DataTier, seed: int) -> list[Sample]:
        asked.append((tier, seed))
        return [Sample(id=f"{tier.value}-{seed}", input=tier.value, target=0)]

    bench = Benchmark(name="b", scorer="accuracy", target=True,
                      samples=GeneratedSplits(name="g", generate=generate))  # fmt: skip
    task = get_task("synthetic").model_copy(update={"benchmarks": [bench]})
    drawn = public_draws(task, bench, 3)
    assert {s.input for s in drawn} == {"train", "dev"} and len(drawn) == 6
    assert len({seed for _, seed in asked}) == 6  # another seed each draw and tier
    # the lab's draws are under its secret; these under none: no seed is shared
    make_splits(task, bench, b"lab secret one")
    assert len({seed for _, seed in asked}) == 10
    # a file benchmark has no generator: its public rows are its splits
    assert public_draws(get_task("digits"), get_task("digits").benchmarks[0], 3) == []


def test_repeated_pool_ids_are_named() -> None:
    from rsilab.tasks._samples import Sample
    from rsilab.tasks._splits import SplitError, _partition

    pool = [Sample(id=i, input={"q": n}, target=n) for n, i in enumerate("abcab")]
    with pytest.raises(SplitError) as caught:
        _partition(pool, None, b"k")  # type: ignore[arg-type]
    assert str(caught.value) == (
        "pool sample ids must be unique; 2 repeated: 'a', 'b' (give each sample an id of its own)"
    )


def test_a_file_that_is_not_utf8_is_named_with_its_line(tmp_path: Path) -> None:
    from rsilab.tasks._splits import SplitError, read_jsonl

    path = tmp_path / "pool.jsonl"
    good = b'{"id": "a", "input": "x", "target": "y"}\n'
    path.write_bytes(good * 2 + b'{"id": "c", "input": "caf\xe9", "target": "y"}\n')
    with pytest.raises(SplitError) as caught:
        read_jsonl(path)
    assert str(caught.value) == f"{path}:3: not UTF-8 (byte 0xe9); save the file as UTF-8"


def test_a_file_saved_with_a_byte_order_mark_and_windows_line_ends_reads(tmp_path: Path) -> None:
    path = tmp_path / "pool.jsonl"
    rows = [
        '{"id": "a", "input": "caf\u00e9", "target": 1}',
        '{"id": "b", "input": "x", "target": 2}',
    ]
    path.write_bytes(("\ufeff" + "\r\n".join(rows) + "\r\n\r\n").encode("utf-8"))
    assert [(s.id, s.input) for s in read_jsonl(path)] == [("a", "caf\u00e9"), ("b", "x")]


def test_ids_repeated_in_a_tier_file_are_named_with_the_file(
    small_task: Path, secret: bytes
) -> None:
    task = load_task(small_task)
    dev = small_task.parent / "data" / "dev.jsonl"
    first = dev.read_text().splitlines()[0]
    dev.write_text(dev.read_text() + first + "\n")
    with pytest.raises(SplitError) as caught:
        make_splits(task, task.benchmarks[0], secret)
    assert str(caught.value) == (
        f"{dev}: sample ids must be unique; 1 repeated: 'dev-0' (give each sample an id of its own)"
    )
