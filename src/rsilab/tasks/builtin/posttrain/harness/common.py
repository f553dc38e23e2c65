"""What train.py and predict.py share: loading and saving models, prompts, answers, kinds.

A model is either
- a **model file**: one safetensors file, the weights (a tied weight stored once) and one
  metadata entry "lm" holding JSON: the transformers config ("config", with its model_type),
  the tokenizer JSON ("tokenizer"), its special tokens ("special"), and for a trained model
  the harness config ("harness") and the few-shot examples per kind ("shots"); or
- a **model folder** in the Hugging Face layout (config.json, tokenizer files, *.safetensors),
  loaded with from_pretrained(local_files_only=True): a user's own model.
train.py always writes a model file. Items are grouped by their input's "kind" (items without
one share the kind "default"); the kinds come from the data, never from this file.
"""

import json
import os
import re
import sys
from collections import Counter
from pathlib import Path

import torch
from safetensors import safe_open
from safetensors.torch import load_file, save_file
from tokenizers import Tokenizer
from transformers import (
    AutoConfig,
    AutoModelForCausalLM,
    AutoTokenizer,
    PreTrainedTokenizerFast,
)

META_KEY = "lm"
RUNTIME_BASE = "share/rsilab-posttrain/base.safetensors"
"""The base model a task's runtime holds (under sys.prefix), used when the config names none."""
RUNTIME_CORPUS = "share/rsilab-posttrain/corpus.txt"
"""The text the runtime's base model was trained on (under sys.prefix): the default replay."""
DEFAULT_KIND = "default"
LETTERS = "ABCDEFGH"
TEMPLATES = {
    "qa": ("Question: {question}\nAnswer:", " {answer}"),
    "plain": ("{question}\n", "{answer}"),
}
"""Prompt templates: (what precedes the answer, the answer) with {question} / {answer}."""
SEPARATOR = "\n\n"
"""Between few-shot examples; generation stops at the first one."""
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}


def device() -> torch.device:
    """The job's GPU when it was given one, else the CPU. A job given GPUs (the sandbox sets
    ``CUDA_VISIBLE_DEVICES`` only then) whose torch cannot use them stops with one line:
    running on the CPU instead would quietly cost hours and measure another setup."""
    if torch.cuda.is_available():
        return torch.device("cuda")
    given = os.environ.get("CUDA_VISIBLE_DEVICES", "").strip()
    if given:
        raise SystemExit(
            f"this job was given GPU(s) {given} but torch {torch.__version__} cannot use them "
            f"(CUDA build: {torch.version.cuda or 'no, a CPU build'}); adopt a Python whose "
            "torch is a CUDA build as the runtime (`rsilab runtime adopt PYTHON --task T`), "
            "or set gpus = 0 in harness.toml"
        )
    return torch.device("cpu")


SETTINGS = {
    "base_model", "replay_corpus", "dtype", "epochs", "lr", "lora_rank", "batch_size",
    "replay", "max_train_examples", "template", "few_shot", "decoding", "temperature",
    "samples", "options_by", "aggregate", "max_new_tokens", "predict_batch",
}  # fmt: skip
"""The config's keys the harness reads, besides the per-kind ones (:data:`PER_KIND`)."""
PER_KIND = ("mix_", "max_new_tokens_", "aggregate_")
"""Prefixes of per-kind keys (``mix_arith``); a key starting with ``_`` is a comment."""
DECODINGS = ("greedy", "sample")
# (key, smallest allowed) for whole-number settings; their per-kind forms too
WHOLE = {"epochs": 0, "lora_rank": 0, "batch_size": 1, "few_shot": 0, "samples": 1,
         "max_new_tokens": 1, "max_new_tokens_": 1, "predict_batch": 1}  # fmt: skip


def _is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def check_config(config: dict) -> None:
    """Stop with one line naming the first setting the harness cannot use as written: an
    unknown key (a misspelling would otherwise be ignored), a whole number that is not one or
    is too small, a learning rate or temperature that is not a positive number, a decoding
    that is not one of :data:`DECODINGS`. Checked before any model is loaded."""
    if not isinstance(config, dict):
        raise SystemExit(f"config is {type(config).__name__}; write a JSON object of settings")
    for key, value in config.items():
        if key.startswith("_"):
            continue
        prefix = next((p for p in PER_KIND if key.startswith(p) and len(key) > len(p)), None)
        if key not in SETTINGS and prefix is None:
            raise SystemExit(
                f"config has an unknown setting {key!r}; the harness reads "
                f"{', '.join(sorted(SETTINGS))} and the per-kind mix_<kind>, "
                "max_new_tokens_<kind>, aggregate_<kind> (a key starting with _ is a comment)"
            )
        low = WHOLE.get(key, WHOLE.get(prefix or ""))
        if low is not None and not (  # is_integer: also False for inf and nan
            _is_number(value) and float(value).is_integer() and value >= low
        ):
            raise SystemExit(f"config {key} is {value!r}; use a whole number of at least {low}")
    for key in ("lr", "temperature"):
        if key in config and not (_is_number(config[key]) and config[key] > 0):
            raise SystemExit(f"config {key} is {config[key]!r}; use a number above 0")
    if config.get("decoding", DECODINGS[0]) not in DECODINGS:
        raise SystemExit(f"config decoding is {config['decoding']!r}; use one of {list(DECODINGS)}")


def dtype_of(config: dict) -> torch.dtype:
    name = str(config.get("dtype", "float32"))
    if name not in DTYPES:
        raise SystemExit(f"config dtype {name!r} is not one of {sorted(DTYPES)}")
    return DTYPES[name]


def base_model_path(config: dict) -> str:
    """The config's base model (a model file or folder), else the one the runtime holds."""
    if config.get("base_model"):
        return str(config["base_model"])
    return str(Path(sys.prefix) / RUNTIME_BASE)


def replay_corpus_path(config: dict) -> Path:
    """The config's replay corpus, else the corpus of the runtime's base model."""
    if config.get("replay_corpus"):
        return Path(str(config["replay_corpus"]))
    return Path(sys.prefix) / RUNTIME_CORPUS


def _tokenizer_from(meta: dict) -> PreTrainedTokenizerFast:
    special = meta.get("special") or {"eos_token": "<|eos|>", "pad_token": "<|pad|>"}
    return PreTrainedTokenizerFast(
        tokenizer_object=Tokenizer.from_str(meta["tokenizer"]), **special
    )


def load_model(path: str, dtype: torch.dtype = torch.float32) -> tuple:
    """(model on the job's device, tokenizer, metadata) from a model file or folder."""
    where = Path(path)
    if not where.exists():
        raise SystemExit(f"model {path} does not exist: set base_model to a model file or folder")
    if where.is_dir():
        tok = AutoTokenizer.from_pretrained(where, local_files_only=True)
        model = AutoModelForCausalLM.from_pretrained(where, local_files_only=True, dtype=dtype)
        meta: dict = {}
    else:
        with safe_open(path, framework="pt") as handle:
            meta = json.loads((handle.metadata() or {}).get(META_KEY, "null") or "null")
        if not isinstance(meta, dict):
            raise SystemExit(f"{path} is not a model file: no '{META_KEY}' metadata entry")
        settings = dict(meta["config"])
        config = AutoConfig.for_model(settings.pop("model_type"), **settings)
        model = AutoModelForCausalLM.from_config(config, dtype=dtype)
        missing, unexpected = model.load_state_dict(load_file(path), strict=False)
        model.tie_weights()
        if unexpected or set(missing) - _tied(model):
            raise SystemExit(f"{path}: weights do not fit the config ({missing}, {unexpected})")
        tok = _tokenizer_from(meta)
    if tok.eos_token_id is None:
        raise SystemExit(f"{path}: the tokenizer has no end token; give it an eos_token")
    if tok.pad_token_id is None:
        tok.pad_token = tok.eos_token
    return model.to(device()), tok, meta


def _tied(model) -> set[str]:
    """Names of tensors that share storage with an earlier one (stored once in a file)."""
    seen, tied = set(), set()
    for name, tensor in model.state_dict().items():
        if tensor.data_ptr() in seen:
            tied.add(name)
        seen.add(tensor.data_ptr())
    return tied


def save_model(path: str, model, tok, meta: dict) -> None:
    """Write ``model`` as a model file: the weights (tied ones once) and ``meta`` with the
    model's config and tokenizer."""
    tied = _tied(model)
    weights = {k: v.detach().to("cpu").contiguous().clone()
               for k, v in model.state_dict().items() if k not in tied}  # fmt: skip
    info = {
        **meta,
        "config": json.loads(model.config.to_json_string()),
        "tokenizer": tok.backend_tokenizer.to_str(),
        "special": {"eos_token": tok.eos_token, "pad_token": tok.pad_token},
    }
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    save_file(weights, path, metadata={META_KEY: json.dumps(info, sort_keys=True)})


def kind_of(item_input) -> str:
    """The item's kind: its input's "kind", else "default"."""
    if isinstance(item_input, dict) and isinstance(item_input.get("kind"), str):
        return item_input["kind"]
    return DEFAULT_KIND


def kinds_in(rows: list[dict]) -> list[str]:
    """The kinds of ``rows``, sorted."""
    return sorted({kind_of(r["input"]) for r in rows})


def question_text(item_input) -> str:
    """The question as the model sees it (options, when given, listed as "A. ..." lines)."""
    if isinstance(item_input, str):
        return item_input
    if not isinstance(item_input, dict) or not isinstance(item_input.get("question"), str):
        what = (
            f'has no "question" text (its keys: {sorted(item_input)})'
            if isinstance(item_input, dict)
            else f"is {json.dumps(item_input)[:60]}"
        )
        raise SystemExit(
            f"an item's input {what}; write each input as "
            '{"kind": KIND, "question": TEXT} (multiple choice adds "options": [TEXT, ...]) '
            "or as a plain string"
        )
    text = item_input["question"]
    options = item_input.get("options")
    if isinstance(options, list):
        text += "".join(f"\n{LETTERS[i]}. {o}" for i, o in enumerate(options))
    return text


def answer_text(target) -> str:
    """A target as the text the model should write: the text itself, a dict's "answer"
    text when it has one (e.g. a reference program beside its unit tests), else JSON."""
    if isinstance(target, str):
        return target
    if isinstance(target, dict) and isinstance(target.get("answer"), str):
        return target["answer"]
    return json.dumps(target)


OPTIONS_BY = ("likelihood", "letter")
"""How an item with options is answered: "likelihood" (each option's text scored as the answer
to the question asked without the options, the most likely one's letter written out: how
multiple choice is read from a model too small to map a recalled value to its letter), or
"letter" (the letter is generated like any answer)."""


def options_by(config: dict) -> str:
    """The config's ``options_by`` (default "likelihood"); a value not in OPTIONS_BY is refused."""
    how = str(config.get("options_by", OPTIONS_BY[0]))
    if how not in OPTIONS_BY:
        raise SystemExit(f"config options_by is {how!r}; use one of {list(OPTIONS_BY)}")
    return how


def has_options(item_input) -> bool:
    """Whether the item lists options to choose from (a non-empty list "options")."""
    return (
        isinstance(item_input, dict)
        and bool(item_input.get("options"))
        and isinstance(item_input["options"], list)
    )


def cloze(row: dict) -> dict:
    """An item with options as a question without them whose answer is the right option's
    text (the target letter's option); an item without options, or whose target is not one
    of its letters, is returned as it is."""
    item_input, target = row.get("input"), row.get("target")
    if not has_options(item_input) or not isinstance(target, str):
        return row
    index = LETTERS.find(target.strip())
    options = item_input["options"]
    if len(target.strip()) != 1 or not 0 <= index < len(options):
        return row
    asked = {k: v for k, v in item_input.items() if k != "options"}
    return {**row, "input": asked, "target": str(options[index])}


def template_of(config: dict) -> tuple[str, str]:
    name = str(config.get("template", "qa"))
    if name not in TEMPLATES:
        raise SystemExit(f"config template {name!r} is not one of {sorted(TEMPLATES)}")
    return TEMPLATES[name]


def prompt(item_input, shots: list[dict], config: dict) -> str:
    """The prompt for an item: the shots with their answers, then the item's question."""
    ask, answer = template_of(config)
    parts = [
        ask.format(question=question_text(s["input"]))
        + answer.format(answer=answer_text(s["target"]))
        for s in shots
    ]
    parts.append(ask.format(question=question_text(item_input)))
    return SEPARATOR.join(parts)


def new_tokens(config: dict, kind: str) -> int:
    """The cap on new tokens for ``kind``: max_new_tokens, lowered by max_new_tokens_<kind>."""
    limit = int(config.get("max_new_tokens", 32))
    if f"max_new_tokens_{kind}" in config:
        limit = min(limit, int(config[f"max_new_tokens_{kind}"]))
    return max(1, limit)


def vote(texts: list[str]) -> str:
    """Self-consistency: the most frequent text (whitespace-normalised), the first on a tie."""
    keys = [re.sub(r"\s+", " ", t).strip() for t in texts]
    counts = Counter(keys)
    best = max(counts.values())
    return next(t for t, k in zip(texts, keys, strict=True) if counts[k] == best)


def threads() -> None:
    """Use the cores the sandbox gave (OMP_NUM_THREADS), never more."""
    torch.set_num_threads(max(1, int(os.environ.get("OMP_NUM_THREADS", "1"))))


def read_jsonl(path: Path) -> list[dict]:
    if not path.is_file():
        return []
    with open(path, encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]
