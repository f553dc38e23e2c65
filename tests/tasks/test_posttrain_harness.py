"""posttrain's harness end to end on the tiny base: SFT (full and LoRA) and prediction run
through the sandbox and the harness contract, every benchmark gets a score, and a Hugging
Face model folder works as the model to start from."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
from safetensors import safe_open
from safetensors.torch import load_file

from rsilab.sandbox.process import ProcessSandbox
from rsilab.tasks import get_task, run_experiment
from rsilab.tasks.builtin.posttrain import KINDS
from rsilab.tasks.builtin.posttrain._base import build_base

SECRET = bytes(range(32))


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("base") / "tiny.safetensors"
    build_base(out, "tiny", log=lambda _: None)
    return out


@pytest.fixture(scope="module")
def sandbox() -> Iterator[ProcessSandbox]:
    """The task's runtime when installed; else this venv, which holds the same libraries."""
    task = get_task("posttrain")
    box = ProcessSandbox(runtime=task.runtime())
    box.prepare()
    yield box
    box.close()


def _workspace(root: Path, tiny: Path, **config: object) -> Path:
    workspace = root / "ws"
    shutil.copytree(get_task("posttrain").harness, workspace)
    shutil.copy(tiny, workspace / "base.safetensors")
    settings = json.loads((workspace / "config.json").read_text())
    settings.update(base_model="base.safetensors", few_shot=1, max_new_tokens=4)
    settings.update({f"mix_{k}": 0.2 for k in KINDS}, **config)
    (workspace / "config.json").write_text(json.dumps(settings))
    return workspace


def test_lora_sft_and_predict_score_every_benchmark(
    tmp_path: Path, tiny: Path, sandbox: ProcessSandbox
) -> None:
    """LoRA here; full fine-tuning in the model-folder test below."""
    task = get_task("posttrain")
    lora_rank = 4
    workspace = _workspace(tmp_path, tiny, epochs=1, lr=0.01, lora_rank=lora_rank)
    outcome = run_experiment(task, sandbox, SECRET, seed=1, workspace=workspace)
    assert set(outcome.scores) == set(KINDS)
    assert all(0.0 <= s <= 1.0 for s in outcome.scores.values())
    assert len(outcome.samples["arith"]) == 100
    with safe_open(str(outcome.model), framework="pt") as handle:
        meta = json.loads(handle.metadata()["lm"])
    assert meta["harness"]["lora_rank"] == lora_rank
    assert len(meta["shots"]["facts"]) == 1
    trained, base = load_file(str(outcome.model)), load_file(str(tiny))
    assert set(trained) == set(base), "LoRA is merged back: the same tensors as the base"
    name = "model.layers.0.self_attn.q_proj.weight"
    assert not torch.equal(trained[name], base[name]), "one epoch of SFT moves the weights"


def _folder(tiny: Path, out: Path) -> None:
    """The tiny base as a Hugging Face model folder, as a user's own model would be."""
    from tokenizers import Tokenizer
    from transformers import AutoConfig, AutoModelForCausalLM, PreTrainedTokenizerFast

    with safe_open(str(tiny), framework="pt") as handle:
        meta = json.loads(handle.metadata()["lm"])
    settings = dict(meta["config"])
    config = AutoConfig.for_model(settings.pop("model_type"), **settings)
    model = AutoModelForCausalLM.from_config(config)  # type: ignore[no-untyped-call]
    model.load_state_dict(load_file(str(tiny)), strict=False)
    model.tie_weights()
    model.save_pretrained(out)
    tok = Tokenizer.from_str(meta["tokenizer"])
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, **meta["special"])  # type: ignore[no-untyped-call]
    fast.save_pretrained(out)


def test_a_model_folder_is_a_base_and_kinds_come_from_the_data(
    tmp_path: Path, tiny: Path, sandbox: ProcessSandbox
) -> None:
    task = get_task("posttrain")
    workspace = _workspace(tmp_path, tiny, epochs=1, lr=0.01, base_model="hf",
                           decoding="sample", samples=2, mix_code=0.0)  # fmt: skip
    _folder(tiny, workspace / "hf")
    assert (workspace / "hf" / "config.json").is_file()
    assert list((workspace / "hf").glob("*.safetensors"))
    outcome = run_experiment(task, sandbox, SECRET, seed=2, workspace=workspace)
    assert set(outcome.scores) == set(KINDS)
    with safe_open(str(outcome.model), framework="pt") as handle:
        meta = json.loads(handle.metadata()["lm"])
    assert sorted(meta["shots"]) == sorted(KINDS), "every kind of the train data has shots"
    assert meta["special"] == {"eos_token": "<|eos|>", "pad_token": "<|pad|>"}
    items = [{"id": "c", "input": {"kind": "code", "question": "Write a function add_2(x)."}},
             {"id": "a", "input": {"kind": "arith", "question": "What is 2 plus 3?"}},
             {"id": "n", "input": "no kind at all"}]  # fmt: skip
    ran = subprocess.run(
        [sys.executable, "predict.py", "--model", str(outcome.model), "--seed", "0"],
        cwd=workspace, input="".join(json.dumps(i) + "\n" for i in items),
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    outputs = {o["id"]: o["output"] for o in map(json.loads, ran.stdout.splitlines())}
    assert isinstance(outputs["c"], list) and len(outputs["c"]) == 2, "k programs for pass@k"
    assert isinstance(outputs["a"], str), "answers are voted down to one text"
    assert isinstance(outputs["n"], str), "an input without a kind is of the default kind"


def _choice(item_id: str, options: list[str], right: str) -> dict[str, object]:
    question = "Which colour is the sky of Vell?"
    letter = "ABCDEFGH"[options.index(right)]
    return {"id": item_id, "input": {"kind": "choice", "question": question, "options": options},
            "target": letter}  # fmt: skip


def _harness(workspace: Path, script: str, *args: str, stdin: str = "") -> str:
    ran = subprocess.run([sys.executable, script, *args], cwd=workspace, input=stdin,
                         capture_output=True, text=True)  # fmt: skip
    assert ran.returncode == 0, ran.stderr[-2000:]
    return ran.stdout


def test_options_are_answered_by_the_likelihood_of_their_text(tmp_path: Path, tiny: Path) -> None:
    """Trained on one fact asked as a choice, always with its answer under B, the model is asked
    it with the answer moved to A, C and D: by likelihood (the default) it names the option whose
    text it learned, wherever it sits; asked for the letter instead, it repeats the letter it
    was taught (B) - so the likelihood path reads the option's text, not its place."""
    colours = ["green", "blue", "red", "black"]
    workspace = _workspace(tmp_path, tiny, epochs=60, lr=0.01, few_shot=0, batch_size=8)
    data = tmp_path / "data"
    data.mkdir()
    rows = [_choice(f"t{i}", colours, "blue") for i in range(8)]
    (data / "train.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    model = tmp_path / "model.safetensors"
    _harness(workspace, "train.py", "--data", str(data), "--model-out", str(model))
    moved = {"a": ["blue", "red", "green", "black"], "c": ["black", "green", "blue", "red"],
             "d": ["red", "black", "green", "blue"]}  # fmt: skip
    items = "".join(json.dumps(_choice(k, v, "blue")) + "\n" for k, v in moved.items())
    out = _harness(workspace, "predict.py", "--model", str(model), stdin=items)
    answered = {o["id"]: o["output"] for o in map(json.loads, out.splitlines())}
    assert answered == {"a": "A", "c": "C", "d": "D"}

    settings = json.loads((workspace / "config.json").read_text())
    (workspace / "config.json").write_text(json.dumps({**settings, "options_by": "letter"}))
    by_letter = tmp_path / "by-letter.safetensors"
    _harness(workspace, "train.py", "--data", str(data), "--model-out", str(by_letter))
    out = _harness(workspace, "predict.py", "--model", str(by_letter), stdin=items)
    generated = {o["id"]: o["output"].strip()[:1] for o in map(json.loads, out.splitlines())}
    assert generated == {"a": "B", "c": "B", "d": "B"}


def test_a_bad_options_setting_or_too_many_options_is_one_clear_line(
    tmp_path: Path, tiny: Path
) -> None:
    workspace = _workspace(tmp_path, tiny, options_by="vote")
    data = tmp_path / "data"
    data.mkdir()
    (data / "train.jsonl").write_text(json.dumps(_choice("t", ["x", "blue"], "blue")) + "\n")
    ran = subprocess.run([sys.executable, "train.py", "--data", str(data), "--model-out",
                          str(tmp_path / "m.safetensors")], cwd=workspace,
                         capture_output=True, text=True)  # fmt: skip
    assert ran.returncode != 0
    assert ran.stderr.strip().splitlines()[-1] == (
        "config options_by is 'vote'; use one of ['likelihood', 'letter']"
    )
    settings = json.loads((workspace / "config.json").read_text())
    (workspace / "config.json").write_text(json.dumps({**settings, "options_by": "likelihood"}))
    model = tmp_path / "m.safetensors"
    _harness(workspace, "train.py", "--data", str(data), "--model-out", str(model))
    nine = _choice("nine", [f"o{i}" for i in range(8)] + ["blue"], "o0")
    ran = subprocess.run([sys.executable, "predict.py", "--model", str(model)], cwd=workspace,
                         input=json.dumps(nine) + "\n", capture_output=True, text=True)  # fmt: skip
    assert ran.returncode != 0
    assert ran.stderr.strip().splitlines()[-1] == (
        "item nine has 9 options; at most 8 can be answered by letter"
    )


_NLL = """
import json, sys, torch
from common import load_model
model, tok, _ = load_model(sys.argv[1])
docs = json.loads(sys.stdin.read())
total = 0.0
with torch.no_grad():
    for doc in docs:
        ids = torch.tensor([tok.encode(doc, add_special_tokens=False)])
        total += model(input_ids=ids, labels=ids).loss.item()
print(total / len(docs))
"""


def _corpus_loss(workspace: Path, model: Path, docs: list[str]) -> float:
    """The model's mean per-token loss on ``docs`` (the harness's own model loader)."""
    return float(_harness(workspace, "-c", _NLL, str(model), stdin=json.dumps(docs)))


def test_replay_keeps_learning_the_corpus_beside_the_sft_items(tmp_path: Path, tiny: Path) -> None:
    """The same SFT on arithmetic items, with and without replaying a text the SFT items never
    show: only the run that replays lowers the model's loss on that text, and the SFT items
    are learned either way."""
    text = ["The lighthouse of Orvane is painted violet and ochre.",
            "Twelve herons nest on the roof of the Orvane lighthouse."]  # fmt: skip
    workspace = _workspace(tmp_path, tiny, epochs=6, lr=0.01, few_shot=0, batch_size=8)
    (workspace / "notes.txt").write_text("\n\n\n".join(text))
    data = tmp_path / "data"
    data.mkdir()
    rows = [{"id": f"a{i}", "input": {"kind": "arith", "question": f"What is {i} plus 2?"},
             "target": str(i + 2)} for i in range(8)]  # fmt: skip
    (data / "train.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    settings = json.loads((workspace / "config.json").read_text())
    losses = {}
    for replay in (0.0, 1.0):
        config = {**settings, "replay": replay, "replay_corpus": "notes.txt"}
        (workspace / "config.json").write_text(json.dumps(config))
        model = tmp_path / f"replay-{replay}.safetensors"
        _harness(workspace, "train.py", "--data", str(data), "--model-out", str(model))
        losses[replay] = _corpus_loss(workspace, model, text)
    before = _corpus_loss(workspace, workspace / "base.safetensors", text)
    assert losses[1.0] < before - 0.5, (before, losses)
    assert losses[0.0] > losses[1.0] + 0.5, (before, losses)


ONE_SUM = {"id": "a", "input": {"kind": "arith", "question": "What is 1 plus 2?"}, "target": "3"}


def _refused(
    workspace: Path, tmp_path: Path, item: object = ONE_SUM, env: dict[str, str] | None = None
) -> str:
    """train.py on one item (an arithmetic one unless given) must stop and write no model;
    its last stderr line."""
    data = tmp_path / "data"
    data.mkdir()
    (data / "train.jsonl").write_text(json.dumps(item) + "\n")
    ran = subprocess.run([sys.executable, "train.py", "--data", str(data), "--model-out",
                          str(tmp_path / "m.safetensors")], cwd=workspace,
                         capture_output=True, text=True, env=env)  # fmt: skip
    assert ran.returncode != 0
    assert not (tmp_path / "m.safetensors").exists()
    return str(ran.stderr.strip().splitlines()[-1])


@pytest.mark.parametrize(
    ("config", "corpus", "line"),
    [
        ({"replay": -0.5}, None, "config replay is -0.5; use 0 (no replay) or more"),
        (
            {"replay": 0.5, "replay_corpus": "absent.txt"},
            None,
            "config replay is 0.5 but the replay corpus absent.txt does not exist: set"
            " replay_corpus to a text file of documents, or replay to 0",
        ),
        (
            {"replay": 1, "replay_corpus": "blank.txt"},
            "\n\n\n  \n\n\n",
            "the replay corpus blank.txt holds no text: fill it, or set replay to 0",
        ),
        (
            {"replay": 0.25, "replay_corpus": "blank.txt"},
            b"caf\xe9 au lait",
            "the replay corpus blank.txt is not UTF-8 text (byte 3): save it as UTF-8",
        ),
    ],
)
def test_a_bad_replay_setting_is_one_clear_line(
    tmp_path: Path, tiny: Path, config: dict[str, object], corpus: str | bytes | None, line: str
) -> None:
    workspace = _workspace(tmp_path, tiny, epochs=1, **config)
    if isinstance(corpus, bytes):
        (workspace / "blank.txt").write_bytes(corpus)
    elif corpus is not None:
        (workspace / "blank.txt").write_text(corpus)
    assert _refused(workspace, tmp_path) == line


def test_replay_reads_the_corpus_the_runtime_holds(
    tmp_path: Path, tiny: Path, sandbox: ProcessSandbox
) -> None:
    """Without ``replay_corpus`` the job replays the corpus the runtime's install wrote beside
    its base model: an experiment in the task's runtime (installed by ``make test``) trains."""
    task = get_task("posttrain")
    if not task.runtime().is_installed():
        pytest.skip("posttrain's runtime is not installed (rsilab runtime install --task T)")
    workspace = _workspace(tmp_path, tiny, epochs=1, lr=0.01, lora_rank=4, replay=0.5)
    outcome = run_experiment(task, sandbox, SECRET, seed=3, workspace=workspace)
    assert set(outcome.scores) == set(KINDS)
    with safe_open(str(outcome.model), framework="pt") as handle:
        assert json.loads(handle.metadata()["lm"])["harness"]["replay"] == 0.5


def _trained(model: Path) -> dict[str, int]:
    with safe_open(str(model), framework="pt") as handle:
        trained: dict[str, int] = json.loads(handle.metadata()["lm"])["trained"]
    return trained


@pytest.mark.parametrize(
    ("budget", "trained"),
    [
        # 8 items and 4 replayed documents an epoch (replay 0.5), batches of 3: 4 steps an epoch
        (0, {"examples": 60, "steps": 20, "epochs": 5}),
        (100, {"examples": 60, "steps": 20, "epochs": 5}),
        (30, {"examples": 30, "steps": 10, "epochs": 3}),
        (7, {"examples": 7, "steps": 3, "epochs": 1}),
    ],
)
def test_the_training_budget_caps_the_sequences_learned(
    tmp_path: Path, tiny: Path, budget: int, trained: dict[str, int]
) -> None:
    """``max_train_examples`` stops training once that many sequences (SFT items and replayed
    documents alike) are learned, whatever the epochs ask for; 0 is no limit, and a budget
    above the plan changes nothing."""
    workspace = _workspace(tmp_path, tiny, epochs=5, lr=0.01, few_shot=0, batch_size=3,
                           mix_arith=1.0, replay=0.5, replay_corpus="notes.txt",
                           max_train_examples=budget)  # fmt: skip
    (workspace / "notes.txt").write_text("The lighthouse of Orvane is violet.\n\n\nHerons nest.")
    data = tmp_path / "data"
    data.mkdir()
    rows = [{"id": f"a{i}", "input": {"kind": "arith", "question": f"What is {i} plus 2?"},
             "target": str(i + 2)} for i in range(8)]  # fmt: skip
    (data / "train.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    model = tmp_path / "m.safetensors"
    _harness(workspace, "train.py", "--data", str(data), "--model-out", str(model))
    assert _trained(model) == trained


@pytest.mark.parametrize("budget", [-1, "many", True])
def test_a_bad_training_budget_is_one_clear_line(
    tmp_path: Path, tiny: Path, budget: object
) -> None:
    workspace = _workspace(tmp_path, tiny, epochs=1, max_train_examples=budget)
    assert _refused(workspace, tmp_path) == (
        f"config max_train_examples is {budget!r}; use a whole number of sequences (0: no limit)"
    )


@pytest.mark.parametrize(
    ("item_input", "what"),
    [
        ({"kind": "arith", "prompt": "What is 1 plus 2?"},
         "has no \"question\" text (its keys: ['kind', 'prompt'])"),
        ({"kind": "arith", "question": 12},
         "has no \"question\" text (its keys: ['kind', 'question'])"),
        (None, "is null"),
        ([1, 2], "is [1, 2]"),
    ],
)  # fmt: skip
def test_an_item_without_question_text_is_one_clear_line(
    tmp_path: Path, tiny: Path, item_input: object, what: str
) -> None:
    """Checked on every item, also one the mixture leaves out (mix 0.2 of one item draws
    none): before, such an item trained on an empty question and nothing said so."""
    workspace = _workspace(tmp_path, tiny, epochs=1)
    assert _refused(workspace, tmp_path, {"id": "p", "input": item_input, "target": "3"}) == (
        f"an item's input {what}; write each input as "
        '{"kind": KIND, "question": TEXT} (multiple choice adds "options": [TEXT, ...]) or as '
        "a plain string"
    )


@pytest.mark.skipif(torch.cuda.is_available(), reason="this torch can use a GPU")
def test_a_job_given_a_gpu_its_torch_cannot_use_stops_instead_of_running_on_the_cpu(
    tmp_path: Path, tiny: Path
) -> None:
    """The sandbox sets CUDA_VISIBLE_DEVICES only for a job it gave GPUs; with a CPU torch the
    job must not quietly train on the CPU."""
    workspace = _workspace(tmp_path, tiny, epochs=1)
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": "0"}
    line = _refused(workspace, tmp_path, env=env)
    assert line.startswith(f"this job was given GPU(s) 0 but torch {torch.__version__} cannot")
    assert "`rsilab runtime adopt PYTHON --task T`" in line


@pytest.mark.parametrize(
    ("setting", "line"),
    [
        ({"lerning_rate": 0.1}, "config has an unknown setting 'lerning_rate'; the harness reads "),
        ({"decoding": "beam"}, "config decoding is 'beam'; use one of ['greedy', 'sample']"),
        ({"samples": 0}, "config samples is 0; use a whole number of at least 1"),
        ({"epochs": "two"}, "config epochs is 'two'; use a whole number of at least 0"),
        ({"epochs": float("inf")}, "config epochs is inf; use a whole number of at least 0"),
        ({"few_shot": -1}, "config few_shot is -1; use a whole number of at least 0"),
        ({"batch_size": 0}, "config batch_size is 0; use a whole number of at least 1"),
        ({"max_new_tokens_arith": 2.5},
         "config max_new_tokens_arith is 2.5; use a whole number of at least 1"),
        ({"lr": -1}, "config lr is -1; use a number above 0"),
        ({"temperature": "hot"}, "config temperature is 'hot'; use a number above 0"),
        ({"lora_rank": 100000},
         "config lora_rank is 100000; use at most the model's hidden size, "),
    ],
)  # fmt: skip
def test_a_setting_the_harness_cannot_use_as_written_is_one_clear_line(
    tmp_path: Path, tiny: Path, setting: dict[str, object], line: str
) -> None:
    """Before, a misspelled key, an unknown decoding or 0 samples ran as something else and
    passed; a bad number ended in a traceback, and a huge LoRA rank in the memory limit."""
    workspace = _workspace(tmp_path, tiny, **{"epochs": 1, "lr": 0.01, **setting})
    assert _refused(workspace, tmp_path).startswith(line)


def test_a_train_item_without_a_target_is_one_clear_line(tmp_path: Path, tiny: Path) -> None:
    """Before, it was learned (and shown as a few-shot example) with the answer "null"."""
    workspace = _workspace(tmp_path, tiny, epochs=0)
    item = {"id": "q7", "input": {"kind": "arith", "question": "What is 1 plus 2?"}}
    assert _refused(workspace, tmp_path, item) == (
        "train item 'q7' has no target; give each item the answer to learn as \"target\""
    )
