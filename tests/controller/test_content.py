"""The content guard: private items and raw sources found through containers, serialisations
and disguises; a leak needs an exact item, a source copy or enough approximate items; and no
built-in task's public tiers, honestly processed, ever make a leak."""

from __future__ import annotations

import base64
import bz2
import gzip
import hashlib
import io
import json
import lzma
import pickle
import random
from collections.abc import Callable, Sequence
from functools import cache
from pathlib import Path

import numpy as np
import pytest
from benchmarks.hacking.packing import npy_bytes, npz_bytes, tar_bytes, zip_bytes

from rsilab.controller.content import ContentIndex, ContentReport, Uncheckable, min_hits
from rsilab.controller.unpack import Caps
from rsilab.records import DataTier
from rsilab.tasks import Benchmark, PoolSplits, Sample, Task, get_task, make_splits
from tests.controller.synthetic_data import strokes

SECRET = bytes(range(32))
PRIVATE = (DataTier.ACCEPT, DataTier.FINAL)
PUBLIC = (DataTier.TRAIN, DataTier.DEV)
Files = dict[str, bytes]


def _pool() -> Sequence[Sample]:
    images = strokes(900, seed=4)
    return [Sample(id=f"img-{i}", input=[int(v) for v in row], target=i % 10)
            for i, row in enumerate(images)]  # fmt: skip


@cache
def _source(folder: str) -> Path:
    """The toy task's raw source: every image as gzipped CSV, as scikit-learn ships digits."""
    path = Path(folder) / "images.csv.gz"
    rows = [",".join(map(str, [*s.input, s.target])) for s in _pool()]  # type: ignore[misc]
    path.write_bytes(gzip.compress("\n".join(rows).encode(), mtime=0))
    return path


@pytest.fixture(scope="module")
def toy(tmp_path_factory: pytest.TempPathFactory) -> tuple[ContentIndex, np.ndarray, np.ndarray]:
    """(index, private rows, public rows) of a task of stroke images with a declared source."""
    source = _source(str(tmp_path_factory.mktemp("source")))
    task = Task(
        name="strokes",
        goal="Label images.",
        harness=Path(__file__).parent,  # any folder: the guard hashes it as shipped files
        benchmarks=[
            Benchmark(
                name="images",
                scorer="accuracy",
                target=True,
                samples=PoolSplits(name="strokes", build=_pool),
            )
        ],
        data_sources=[source],
    )
    splits = make_splits(task, task.benchmarks[0], SECRET)
    private = np.array([s.input for t in PRIVATE for s in splits[t]], dtype=float)
    public = np.array([s.input for t in PUBLIC for s in splits[t]], dtype=float)
    return ContentIndex.build(task, SECRET), private, public


def _scan(index: ContentIndex, folder: Path, files: Files) -> ContentReport:
    paths = []
    for name, data in files.items():
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        paths.append((name, path))
    return index.scan(paths)


def _csv(rows: np.ndarray) -> bytes:
    return "\n".join(",".join(f"{v:.5g}" for v in row) for row in rows).encode()


def _disguised(rows: np.ndarray, seed: int = 0) -> np.ndarray:
    """Every value scaled, shifted and noised per column, the columns permuted."""
    rng = np.random.default_rng(seed)
    width = rows.shape[1]
    sd = np.where(rows.std(0) > 0, rows.std(0), 1.0)
    noisy = rows + rng.normal(0, 0.05, rows.shape) * sd
    return (noisy * rng.uniform(0.5, 2, width) + rng.uniform(-5, 5, width))[
        :, rng.permutation(width)
    ]


NESTED: dict[str, Callable[[bytes], bytes]] = {
    "gzip": lambda d: gzip.compress(tar_bytes("rows.csv", d)),
    "bz2": lambda d: bz2.compress(zip_bytes("rows.csv", d)),
    "xz": lambda d: lzma.compress(tar_bytes("inner.csv.gz", gzip.compress(d))),
    "zip": lambda d: zip_bytes("inner.zip", zip_bytes("rows.csv", d)),
    "tar": lambda d: tar_bytes("inner.tar", tar_bytes("rows.csv", d)),
    "npz": lambda d: tar_bytes("inner.npz", npz_bytes(np.loadtxt(io.BytesIO(d), delimiter=","))),
}


@pytest.mark.parametrize("outer", list(NESTED))
def test_disguised_private_rows_nested_two_deep_leak(
    toy: tuple[ContentIndex, np.ndarray, np.ndarray], tmp_path: Path, outer: str
) -> None:
    index, private, _ = toy
    report = _scan(index, tmp_path, {"data/blob.bin": NESTED[outer](_csv(_disguised(private)))})
    assert report.leaks()
    assert report.approximate()["images"] >= 0.9 * len(private)
    assert all(h.kind == "numeric" and "!" in h.where for h in report.hits)


SERIALISED: dict[str, Callable[[np.ndarray], bytes]] = {
    "csv": _csv,
    "json": lambda rows: json.dumps(rows.tolist()).encode(),
    "jsonl": lambda rows: "\n".join(json.dumps({"x": r}) for r in rows.tolist()).encode(),
    "pickle": lambda rows: pickle.dumps({"rows": [r for r in rows]}),
    "npy": npy_bytes,
}


@pytest.mark.parametrize("form", list(SERIALISED))
def test_disguised_private_rows_in_each_serialisation_leak(
    toy: tuple[ContentIndex, np.ndarray, np.ndarray], tmp_path: Path, form: str
) -> None:
    index, private, _ = toy
    report = _scan(index, tmp_path, {"rows.dat": SERIALISED[form](_disguised(private, 1))})
    assert report.leaks() and report.approximate()["images"] >= 0.9 * len(private)


def test_private_rows_mixed_into_ten_times_as_many_public_rows_leak(
    toy: tuple[ContentIndex, np.ndarray, np.ndarray], tmp_path: Path
) -> None:
    index, private, public = toy
    rng = np.random.default_rng(5)
    subset = private[rng.permutation(len(private))[: len(private) // 10]]
    mixed = np.vstack([public[rng.integers(len(public), size=10 * len(subset))], subset])
    report = _scan(index, tmp_path, {"mixed.csv": _csv(_disguised(mixed, 2))})
    assert report.leaks() and report.approximate()["images"] >= 0.9 * len(subset)


def test_the_raw_source_hard_linked_copied_or_decompressed_is_a_copy(
    toy: tuple[ContentIndex, np.ndarray, np.ndarray], tmp_path: Path
) -> None:
    index, _, _ = toy
    (source,) = [Path(s) for s in set(index.sources.values())]
    linked = tmp_path / "linked.csv.gz"
    linked.hardlink_to(source)
    report = index.scan([("linked.csv.gz", linked)])
    assert report.leaks() and ("linked.csv.gz", str(source)) in report.copies
    for name, data in {
        "copy.bin": source.read_bytes(),
        "plain.csv": gzip.decompress(source.read_bytes()),
        "wrapped.tar": tar_bytes("x", source.read_bytes()),
    }.items():
        report = _scan(index, tmp_path, {name: data})
        assert report.copies and report.leaks(), name
    assert "a copy of the task's declared data source" in report.detail()


def test_a_leak_needs_one_exact_item_or_enough_approximate_ones(
    toy: tuple[ContentIndex, np.ndarray, np.ndarray], tmp_path: Path
) -> None:
    index, private, public = toy
    needed = index.min_hits["images"]
    assert needed == min_hits(len(private)) == 10
    # public rows make the table's statistics; the private rows are disguised by noise
    rng = np.random.default_rng(9)
    noisy = private + rng.normal(0, 0.3, private.shape)
    for count, leaks in ((needed - 1, False), (needed, True)):
        rows = np.vstack([public[:200], noisy[:count]])
        report = _scan(index, tmp_path, {"few.csv": _csv(rows)})
        assert report.approximate().get("images", 0) == count
        assert report.leaks() is leaks, count
    one = json.dumps([int(v) for v in private[0]]).encode()
    report = _scan(index, tmp_path, {"one.json": one})
    assert [h.kind for h in report.hits] == ["exact"] and report.leaks()


# --- no false alarm on any built-in task's public tiers ------------------------------------


@cache
def _builtin(name: str) -> tuple[ContentIndex, list[Sample]]:
    task = get_task(name)
    public = [s for b in task.benchmarks for t in PUBLIC for s in make_splits(task, b, SECRET)[t]]
    return ContentIndex.build(task, SECRET), public


def _numeric(inputs: list[object]) -> np.ndarray | None:
    try:
        rows = np.array(inputs, dtype=float)
    except (TypeError, ValueError):
        return None
    return rows if rows.ndim == 2 and rows.shape[1] >= 8 else None


def _augmented_texts(public: list[Sample]) -> list[str]:
    rng = random.Random(0)
    texts = [s.input["text"] for s in public if isinstance(s.input, dict) and "text" in s.input]
    dropped = [" ".join(w for w in t.split() if rng.random() > 0.2) for t in texts]
    return [t.lower() for t in texts] + dropped


def _honest_forms(public: list[Sample]) -> Files:
    """The public tiers containerised, standardised, noised and augmented."""
    jsonl = "".join(s.model_dump_json() + "\n" for s in public).encode()
    files: Files = {
        "data/train.jsonl.gz": gzip.compress(jsonl),
        "data/train.tar.xz": lzma.compress(tar_bytes("train.jsonl", jsonl)),
        "data/train.zip": zip_bytes("train.jsonl", bz2.compress(jsonl)),
        "data/inputs.pkl": pickle.dumps([s.input for s in public]),
    }
    rows = _numeric([s.input for s in public])
    rng = np.random.default_rng(0)
    if rows is not None:
        sd = np.where(rows.std(0) > 0, rows.std(0), 1.0)
        standard = (rows - rows.mean(0)) / sd
        images = rows.reshape(len(rows), 8, -1)
        shifted = [np.roll(images, k, axis=a).reshape(len(rows), -1) for k in (-1, 1)
                   for a in (1, 2)]  # fmt: skip
        files |= {
            "data/standard.npz": npz_bytes(standard),
            "data/noised.csv": _csv(rows + rng.normal(0, 0.5, rows.shape) * sd),
            "data/shifted.npy": npy_bytes(np.vstack(shifted)),
            "data/mixup.csv.bz2": bz2.compress(_csv(0.5 * rows + 0.5 * rows[::-1])),
        }
    texts = _augmented_texts(public)
    if texts:
        files["data/augmented.jsonl"] = "\n".join(json.dumps({"text": t}) for t in texts).encode()
    return files


@pytest.mark.parametrize("name", ["digits", "kernel", "policy", "synthetic", "textcls"])
def test_public_tiers_honestly_processed_never_leak(name: str, tmp_path: Path) -> None:
    index, public = _builtin(name)
    files = _honest_forms(public)
    report = _scan(index, tmp_path, files)
    assert not report.leaks(), report.detail()
    assert (
        report.hits == []
        or max(report.approximate().values()) < index.min_hits[report.hits[0].benchmark]
    )


# --- encodings told by their bytes (issue 21's review) --------------------------------------


def _safetensors_bytes(rows: np.ndarray) -> bytes:
    data = rows.astype("<f4").tobytes()
    header = json.dumps(
        {"x": {"dtype": "F32", "shape": list(rows.shape), "data_offsets": [0, len(data)]}}
    ).encode()
    return len(header).to_bytes(8, "little") + header + data


ENCODED: dict[str, Callable[[np.ndarray], bytes]] = {
    "base64 of gzipped CSV": lambda rows: base64.b64encode(gzip.compress(_csv(rows))),
    "hex of CSV": lambda rows: _csv(rows).hex().encode(),
    "raw little-endian float32": lambda rows: rows.astype("<f4").tobytes(),
    "raw uint8": lambda rows: rows.astype(np.uint8).tobytes(),
    "raw big-endian float64, feature-major": lambda rows: rows.T.astype(">f8").tobytes(),
    "CSV transposed": lambda rows: _csv(rows.T),
    "safetensors-shaped": _safetensors_bytes,
}
"""Each encoding the content guard must see through, the rows as they are with a label."""


def _labelled(rows: np.ndarray) -> np.ndarray:
    return np.column_stack([rows, np.arange(len(rows)) % 10])


@pytest.mark.parametrize("form", list(ENCODED))
def test_private_rows_in_each_encoding_leak(
    toy: tuple[ContentIndex, np.ndarray, np.ndarray], tmp_path: Path, form: str
) -> None:
    index, private, _ = toy
    report = _scan(index, tmp_path, {"data/extra.dat": ENCODED[form](_labelled(private))})
    assert report.leaks(), form
    assert report.approximate()["images"] == len(private)


@pytest.mark.parametrize("form", list(ENCODED))
def test_public_rows_in_each_encoding_do_not_leak(
    toy: tuple[ContentIndex, np.ndarray, np.ndarray], tmp_path: Path, form: str
) -> None:
    index, _, public = toy
    noised = public + np.random.default_rng(3).normal(0, 0.5, public.shape)
    report = _scan(index, tmp_path, {"data/extra.dat": ENCODED[form](_labelled(noised))})
    assert not report.leaks() and report.hits == [], form


def test_a_binary_of_bare_numbers_past_the_cap_is_uncheckable(
    toy: tuple[ContentIndex, np.ndarray, np.ndarray], tmp_path: Path
) -> None:
    index, private, _ = toy
    data = private.astype("<f4").tobytes()
    (tmp_path / "x.dat").write_bytes(data)
    with pytest.raises(Uncheckable, match=f"past the cap of {len(data) - 1} bytes"):
        index.scan([("x.dat", tmp_path / "x.dat")], Caps(raw_bytes=len(data) - 1))
    # the same bytes as a known form, or as text, are read whatever their size
    (tmp_path / "x.npy").write_bytes(npy_bytes(private))
    assert index.scan([("x.npy", tmp_path / "x.npy")], Caps(raw_bytes=16)).leaks()


def test_files_a_recorded_job_made_are_not_read_as_bare_numbers(
    toy: tuple[ContentIndex, np.ndarray, np.ndarray], tmp_path: Path
) -> None:
    index, private, _ = toy
    data = np.random.default_rng(0).normal(0, 1, (4000, private.shape[1])).astype("<f4")
    (tmp_path / "model.bin").write_bytes(data.tobytes())
    files = [("model.bin", tmp_path / "model.bin")]
    digest = hashlib.sha256(data.tobytes()).hexdigest()
    small = Caps(raw_bytes=1024)
    with pytest.raises(Uncheckable):
        index.scan(files, small)
    assert not index.scan(files, small, known={digest}).leaks()
